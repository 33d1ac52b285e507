//! `evlab pipetest --json`: passes per second against the number of pipes, per mechanism
//! (the run and its judging are in `evlab_micro::pipetest`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Finding, Machine};

/// How a token's next pipe is chosen.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Route {
    /// `(generation × 17 + thread + thread × (num_pipes / message_threads)) mod num_pipes`: the
    /// rule the 2006 revision kept under `#if 0`; the token goes round the pipes.
    #[default]
    Stride17,
    /// `num_pipes - thread - 1`: the 2006 revision's rule; each token stays on one pipe.
    Last,
}

impl Route {
    pub const NAMES: [&'static str; 2] = ["stride17", "last"];

    pub fn name(self) -> &'static str {
        match self {
            Route::Stride17 => "stride17",
            Route::Last => "last",
        }
    }

    pub fn from_name(s: &str) -> Option<Route> {
        match s {
            "stride17" => Some(Route::Stride17),
            "last" => Some(Route::Last),
            _ => None,
        }
    }
}

/// The report (`evlab pipetest --json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub benchmark: String,
    pub machine: Machine,
    pub message_threads: usize,
    pub max_generation: u64,
    pub route: Route,
    /// Runs per point. The sweep is run this many times over, each run of a point in its own
    /// sweep (interleaved), so `runs[i]` of every point comes from sweep i.
    pub repeat: usize,
    pub mechanisms: Vec<String>,
    pub pipes: Vec<usize>,
    pub points: Vec<Point>,
    /// The seed's findings judged on this run.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// Per mechanism, the exponent k of rate ∝ pipes^k fitted to each sweep, with the 90% t
    /// interval of its mean (what the findings are decided on). Absent in reports written
    /// before the findings were decided on intervals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slopes: Vec<Slope>,
}

/// How one mechanism's rate scales with the pipes: rate ∝ pipes^k, k fitted by least squares
/// on the logarithms of every measured point of one sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slope {
    pub mechanism: String,
    /// k of each sweep, in order.
    pub k: Vec<f64>,
    /// The numbers of pipes the fits used (points measured in every sweep).
    pub pipes: Vec<usize>,
    /// The mean of `k` and its 90% t interval; `None` with fewer than two sweeps.
    pub mean: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lo: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hi: Option<f64>,
}

/// The outcome of one point.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Not run: the mechanism is unavailable or the descriptors do not fit; see `reason`.
    Skipped,
    /// A run failed; see `reason`.
    Failed,
}

/// One mechanism at one number of pipes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub mechanism: String,
    pub pipes: usize,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The median over the runs of passes per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passes_per_sec: Option<f64>,
    pub runs: Vec<Run>,
}

/// One run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Tokens read: always message_threads × max_generation.
    pub passes: u64,
    pub seconds: f64,
    pub passes_per_sec: f64,
    /// Time to register the pipes' read ends (not in `seconds`).
    pub setup_seconds: f64,
    /// Calls to the mechanism's wait.
    pub waits: u64,
    /// Events the mechanism returned.
    pub events: u64,
    /// Reads that found the pipe empty (events that were stale or spurious).
    pub empty_reads: u64,
    /// Counted syscalls made while the clock ran, by name.
    pub syscalls: BTreeMap<String, u64>,
}
