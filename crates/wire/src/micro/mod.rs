//! The micro-benchmarks' reports (`--json` of `evlab pipetest`, `evlab herd`, `evlab micro
//! fdalloc` and `evlab micro malloc`): what `evlab-micro` measures and judges, and the lab reads
//! back to write its report.

use serde::{Deserialize, Serialize};

pub mod fdalloc;
pub mod herd;
pub mod malloc;
pub mod pipetest;

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

/// Whether a seed's finding holds on this run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Holds,
    DoesNotHold,
    /// The run lacks the points the finding needs.
    NotMeasured,
}

/// One of the seed's findings, judged on a run, with the numbers that decided it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub claim: String,
    pub verdict: Verdict,
    pub evidence: String,
}

impl Finding {
    pub fn new(claim: &str, holds: Option<bool>, evidence: String) -> Finding {
        Finding {
            claim: claim.to_string(),
            verdict: match holds {
                Some(true) => Verdict::Holds,
                Some(false) => Verdict::DoesNotHold,
                None => Verdict::NotMeasured,
            },
            evidence,
        }
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
