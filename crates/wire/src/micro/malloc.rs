//! `evlab micro malloc --json`: balanced malloc/free across threads and processes (the run
//! and its judging are in `evlab_micro::malloc`).

use serde::{Deserialize, Serialize};

use super::{Finding, Machine};

/// Threads of one process, or processes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Threads,
    Processes,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Threads => "threads",
            Mode::Processes => "processes",
        }
    }
}

/// The report (`evlab micro malloc --json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub benchmark: String,
    pub machine: Machine,
    /// Which allocator was measured.
    pub allocator: String,
    pub iterations: u64,
    pub size: usize,
    pub repeat: usize,
    pub points: Vec<Point>,
    /// The seed's findings judged on this run.
    #[serde(default)]
    pub findings: Vec<Finding>,
}

/// One mode at one number of workers (medians over the runs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub mode: Mode,
    pub workers: usize,
    /// malloc/free pairs made, all workers together.
    pub pairs: u64,
    /// From the release of the workers to the end of the last.
    pub wall_seconds: f64,
    /// A worker's own time for its malloc loop: the mean and the longest.
    pub worker_seconds_mean: f64,
    pub worker_seconds_max: f64,
    /// A worker's nanoseconds per pair (its time over its iterations), mean.
    pub ns_per_pair: f64,
    /// The empty loop's nanoseconds per iteration, mean over workers: malloc-test took it off;
    /// evlab reports it instead (see the module's notes).
    pub null_ns_per_iteration: f64,
    /// Pairs per second, all workers together, by the wall clock.
    pub pairs_per_sec: f64,
    /// The wall time of each round, in round order (the rounds interleaved over the points);
    /// empty in reports written before rounds, whose findings had no interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wall_runs_seconds: Vec<f64>,
}
