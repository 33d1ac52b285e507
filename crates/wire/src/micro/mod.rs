//! The micro-benchmarks' reports (`--json` of `evlab pipetest`, `evlab herd`, `evlab micro
//! fdalloc` and `evlab micro malloc`): what `evlab-micro` measures and judges, and the lab reads
//! back to write its report.

use serde::{Deserialize, Serialize};

pub mod fdalloc;
pub mod herd;
pub mod malloc;
pub mod pipetest;
pub mod readahead;

/// The machine a report was measured on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// `uname -r`.
    pub kernel: String,
    /// CPUs this process may run on.
    pub cpus: usize,
    /// The GNU C library's version (whose `malloc` the Rust `System` allocator calls).
    pub glibc: String,
    /// The open-descriptor limit (soft) after raising it to the hard limit.
    pub nofile: u64,
}

impl Machine {
    /// One line for the head of a table.
    pub fn line(&self) -> String {
        format!(
            "Linux {}, {} CPUs, glibc {}, {} descriptors",
            self.kernel, self.cpus, self.glibc, self.nofile
        )
    }
}

/// The decision on one of a seed's findings, in the lab's words (`docs/findings.md`).
///
/// Reports written before the micro-benchmarks' rules had intervals said `holds` and
/// `does-not-hold`; they read back as `reproduced` and `not-reproduced`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The whole interval satisfies the claim (or, for a rule not yet on an interval, the
    /// numbers do).
    #[serde(alias = "holds")]
    Reproduced,
    /// The whole interval lies on the other side.
    #[serde(alias = "does-not-hold")]
    NotReproduced,
    /// The interval straddles the threshold, or there are fewer repeats than the rule needs.
    Inconclusive,
    /// The run lacks the points the finding needs.
    NotMeasured,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::NotReproduced => "not reproduced",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NotMeasured => "not measured",
        }
    }
}

/// One of the seed's findings, judged on a run, with the numbers that decided it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The rule that decided it (`id` in the lab's registry, `docs/findings.md`); empty in
    /// reports written before the rules were registered.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rule: String,
    pub claim: String,
    pub verdict: Verdict,
    pub evidence: String,
}

impl Finding {
    /// A finding decided on the numbers themselves (no interval): `Some(true)` is reproduced.
    pub fn new(claim: &str, holds: Option<bool>, evidence: String) -> Finding {
        Finding::decided(
            "",
            claim,
            match holds {
                Some(true) => Verdict::Reproduced,
                Some(false) => Verdict::NotReproduced,
                None => Verdict::NotMeasured,
            },
            evidence,
        )
    }

    /// A finding with its rule and its verdict.
    pub fn decided(rule: &str, claim: &str, verdict: Verdict, evidence: String) -> Finding {
        Finding {
            rule: rule.to_string(),
            claim: claim.to_string(),
            verdict,
            evidence,
        }
    }

    /// The same finding, naming the rule that decided it.
    pub fn rule(mut self, id: &str) -> Finding {
        self.rule = id.to_string();
        self
    }
}

/// Latency percentiles in microseconds, from nanoseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: usize,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}
