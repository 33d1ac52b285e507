//! The closing note: which of the seeds' findings a run reproduces, with the numbers. One module
//! per family (the experiment's `findings` key, [`Family`]).
//!
//! Each check applies only when the run measured what it needs (the mechanisms, the idle
//! counts); thresholds are stated in the text so that a reader can disagree with them.

use crate::analysis::sample::LEVEL;
use crate::model::results::Summary;
use crate::model::spec::Family;

mod common;
mod controls;
mod deadconn;
mod herd;
mod paper;
mod proxy;
mod table1;

pub use common::{decided, flag_kind, Finding, Verdict};
pub(crate) use common::{knee_trials, Side};
pub(crate) use controls::withhold_unguarded;
pub use controls::{
    chance_reproduced, claims_a_difference, negative_control_status, placebo_status,
    positive_control_status, ControlStatus,
};
pub use herd::accept_mode;
pub use paper::profile_point;
pub(crate) use proxy::{proxy_series, ProxySeries};

/// The findings of `s`, by the family its experiment names (`findings = "…"`), or, for a
/// summary written before the key existed, the family its shape implies, decided at the run's
/// verdict level ([`verdict_level`]). A paper run whose negative control did not pass has its
/// "no difference" verdicts withheld.
pub fn findings(s: &Summary) -> Vec<Finding> {
    findings_at(s, verdict_level(s))
}

/// The findings of `s` as [`findings`] decides them, each interval at the two-sided `level` (a
/// sequential run's look judges the run so far at its own level, `analysis::sequential`).
pub fn findings_at(s: &Summary, level: f64) -> Vec<Finding> {
    let mut fs = by_rules(s, level);
    if s.experiment.family() == Family::Paper {
        controls::withhold_unguarded(&mut fs);
    }
    fs
}

/// The level a run's verdicts are decided at: the lab's [`LEVEL`] (90%), or in a run whose
/// trials a sequential rule chose, that of the look that stopped it
/// (`model::sequential::Record::verdict_level`).
pub fn verdict_level(s: &Summary) -> f64 {
    s.sequential.as_ref().map_or(LEVEL, |q| q.verdict_level())
}

/// What each rule decides on its own at `level`, before the controls are read.
pub(crate) fn by_rules(s: &Summary, level: f64) -> Vec<Finding> {
    match s.experiment.family() {
        Family::Paper => paper::findings(s, level),
        Family::Proxy => proxy::findings(s, level),
        Family::Herd => herd::findings(s, level),
        Family::Deadconn => deadconn::findings(s, level),
        // A micro-benchmark's report is judged by `analysis::micro`; a sweep has none of them.
        Family::None | Family::Micro => Vec::new(),
    }
}

#[cfg(test)]
mod judged_tests;
#[cfg(test)]
mod null_tests;
#[cfg(test)]
pub(crate) mod tests;
