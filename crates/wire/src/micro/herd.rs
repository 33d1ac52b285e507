//! `evlab herd --json`: the accept herd, per wait mode and number of workers (the run and its
//! judging are in `evlab_micro::herd`).

use serde::{Deserialize, Serialize};

use super::{Finding, Machine, Percentiles};

/// How the workers wait for a connection.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Blocking `accept` on the shared listener (the kernel wakes one waiter).
    Accept,
    /// `poll` on the shared listener, then a non-blocking `accept`.
    Poll,
    /// An epoll instance per worker, the shared listener in each, level-triggered: the herd.
    Epoll,
    /// As `epoll`, with EPOLLEXCLUSIVE.
    Exclusive,
    /// A listener per worker with SO_REUSEPORT, blocking `accept`: the kernel picks the
    /// listener by the connection's hash.
    Reuseport,
    /// An io_uring per worker, one IORING_OP_ACCEPT at a time on the shared listener.
    Uring,
}

impl Mode {
    pub const ALL: [Mode; 6] = [
        Mode::Accept,
        Mode::Poll,
        Mode::Epoll,
        Mode::Exclusive,
        Mode::Reuseport,
        Mode::Uring,
    ];

    /// The mode's name in a figure's legend.
    pub fn legend(self) -> &'static str {
        match self {
            Mode::Accept => "blocking accept",
            Mode::Poll => "poll",
            Mode::Epoll => "shared epoll",
            Mode::Exclusive => "EPOLLEXCLUSIVE",
            Mode::Reuseport => "SO_REUSEPORT",
            Mode::Uring => "io_uring accept",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Accept => "accept",
            Mode::Poll => "poll",
            Mode::Epoll => "epoll",
            Mode::Exclusive => "exclusive",
            Mode::Reuseport => "reuseport",
            Mode::Uring => "uring",
        }
    }

    pub fn from_name(s: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// Workers as threads of this process or as forked processes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum As {
    Threads,
    Processes,
}

impl As {
    pub fn name(self) -> &'static str {
        match self {
            As::Threads => "threads",
            As::Processes => "processes",
        }
    }
}

/// What one worker did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerStats {
    pub accepts: u64,
    /// Waits made (for blocking accept and io_uring: accepts attempted).
    pub waits: u64,
    /// Waits that ended without a connection to accept.
    pub empty_wakeups: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub cpu_us: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The outcome of one point.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Skipped,
    Failed,
}

/// One mode at one N, in one round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub mode: Mode,
    /// The round (0 …): every point is measured once per round, the rounds one after the
    /// other (0 in reports written before rounds existed).
    #[serde(default)]
    pub round: usize,
    #[serde(rename = "as")]
    pub as_: As,
    pub workers: usize,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Connections the client completed (got the byte).
    pub connections: u64,
    /// Connections the client could not complete.
    pub client_errors: u64,
    /// Connections the workers accepted, all together.
    pub accepted: u64,
    /// Connections accepted by each worker.
    pub per_worker: Vec<u64>,
    pub wakeups_per_accept: f64,
    pub empty_wakeups: u64,
    pub involuntary_switches: u64,
    pub cpu_us_per_accept: f64,
    pub wall_us_per_connection: f64,
    /// The spread of `per_worker`: its coefficient of variation (0: perfectly even).
    pub balance_cv: f64,
    pub latency: Percentiles,
    pub worker_stats: Vec<WorkerStats>,
}

/// The report (`evlab herd --json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub benchmark: String,
    pub machine: Machine,
    pub conns: usize,
    pub clients: usize,
    /// Rounds: every point measured once per round (1 in reports written before rounds).
    #[serde(default = "one")]
    pub repeat: usize,
    pub points: Vec<Point>,
    /// The seed's findings judged on this run.
    #[serde(default)]
    pub findings: Vec<Finding>,
}

fn one() -> usize {
    1
}
