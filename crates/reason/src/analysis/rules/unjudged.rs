//! The seed findings the lab does not judge, each with the reason, stated in the register
//! (docs/findings.md and the files it names) at the end of its family: a finding with no rule
//! is said to have none, and why, rather than left out.

use crate::model::spec::Family;

/// A seed finding no rule judges.
#[derive(Debug, Clone, Copy)]
pub struct Unjudged {
    pub family: Family,
    /// Where the seed says it.
    pub source: &'static str,
    /// What the seed claims, in our words, with its numbers.
    pub seed: &'static str,
    /// Why it is not judged on this machine: what the measurement would need that is not here.
    pub why: &'static str,
}

/// Every seed finding without a rule, by family.
pub const UNJUDGED: &[Unjudged] = &[];
