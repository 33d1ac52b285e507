//! `evlab micro fdalloc --json`: the time of the next two opens after closing the first and the
//! n-th descriptor (the run and its judging are in `evlab_micro::fdalloc`).

use serde::{Deserialize, Serialize};

use super::{Finding, Machine};

/// The call that is timed.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// `openat(/dev, "null")`, as the seed's `open` (a path walk as well as an allocation).
    #[default]
    Open,
    /// `fcntl(F_DUPFD_CLOEXEC)`: the allocation alone.
    Dup,
}

impl Op {
    pub fn from_name(s: &str) -> Option<Op> {
        match s {
            "open" => Some(Op::Open),
            "dup" => Some(Op::Dup),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Op::Open => "open",
            Op::Dup => "dup",
        }
    }
}

/// The report (`evlab micro fdalloc --json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub benchmark: String,
    pub machine: Machine,
    pub op: Op,
    /// Measurements per n. The n are measured in turn, `repeat` times over (interleaved), so
    /// `second_runs_ns[i]` of every point comes from round i.
    pub repeat: usize,
    /// Descriptors held.
    pub total: usize,
    /// The first (lowest) descriptor held: what the first open returns.
    pub first: u64,
    /// The highest descriptor held.
    pub highest: u64,
    pub points: Vec<Point>,
    /// The seed's finding judged on this run.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// The negative control: the same measurement and the same rule on a linear-scan
    /// allocator in user space. Absent in reports written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub negative_control: Option<Control>,
}

/// The negative control of the flatness rule: a lowest-free allocator that scans its table
/// from slot 0 (the search the seed's single bitmap made), timed at the same n, the same
/// number of times, in the same order, and judged by the same function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Control {
    /// What the allocator is.
    pub allocator: String,
    /// Its slots (the kernel table's `highest + 1`).
    pub slots: usize,
    pub points: Vec<Point>,
    /// The flatness rule's decision on these points (the control passes when it is not
    /// reproduced).
    pub finding: Finding,
}

/// One n.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The descriptor closed beside the first one.
    pub n: u64,
    /// What the first open returned, every time (the report's `first`).
    pub first_fd: u64,
    /// What the second open returned, every time (n: the lowest free descriptor).
    pub second_fd: u64,
    /// Medians, in nanoseconds.
    pub first_open_ns: f64,
    pub second_open_ns: f64,
    pub both_ns: f64,
    /// The second open's time of each measurement, in order (the rule fits each repeat).
    /// Absent in reports written before the rule used them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub second_runs_ns: Vec<f64>,
}
