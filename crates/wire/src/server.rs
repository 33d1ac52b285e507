//! The μserver's `GET /.evlab/stats` (`evlab serve --stats`): one [`ServerStats`], pretty JSON.
//! `evlab_server::Shared::stats` builds it from the workers' counters; `evlab run` reads it
//! before and after each point and takes the differences.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::{StatusClasses, SyscallCount};

/// The document `GET /.evlab/stats` answers: the server's counters since start, summed over its
/// workers (syscalls since start or since `Shared::reset_syscalls`), built by
/// `evlab_server::Shared::stats`. `evlab run` reads it back into this type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerStats {
    /// "evlab".
    pub server: String,
    pub version: String,
    pub mechanism: String,
    pub workers: usize,
    pub uptime_s: f64,
    /// Whether syscalls are timed (`--profile`): then each has `ns` and `share`.
    pub profile: bool,
    pub connections: ConnectionCounts,
    pub timers: TimerCounts,
    /// What the workers keep for reuse (absent in reports written before it existed).
    #[serde(default)]
    pub memory: MemoryCounts,
    pub requests: u64,
    /// Responses per status class.
    pub responses: StatusClasses,
    pub bytes_sent: u64,
    pub events: EventCounts,
    /// Per syscall the workers made, by name (those made at least once).
    pub syscalls: BTreeMap<String, SyscallCount>,
    pub syscalls_total: u64,
    pub syscalls_per_request: f64,
    pub per_worker: Vec<WorkerCounts>,
    /// `evlab serve --as processes`: the worker processes, and those that ended while the
    /// server ran (absent with threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<ProcessCounts>,
}

/// The worker processes of `evlab serve --as processes` (pre-forked, one event loop each).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessCounts {
    /// Processes forked.
    pub forked: usize,
    /// Processes serving now.
    pub serving: usize,
    /// Processes that ended while the server was not stopping (each a worker lost).
    pub died: Vec<DeadWorker>,
}

/// A worker process that ended while the server ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadWorker {
    pub worker: usize,
    pub pid: u32,
    /// How it ended: `exit code N` or `signal N`.
    pub how: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionCounts {
    pub accepted: u64,
    pub closed: u64,
    pub active: u64,
    /// The sum of each worker's largest number of connections open at once.
    pub max_active: u64,
    pub accept_pauses: u64,
    pub accept_errors: u64,
    pub header_timeouts: u64,
    /// Closed because the peer took none of a reply for `--send-timeout`.
    pub send_timeouts: u64,
    pub io_errors: u64,
}

/// The deadline queue (one entry per connection, re-armed lazily; see `timers.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerCounts {
    /// Entries queued now, summed over workers.
    pub entries: u64,
    /// The sum of each worker's largest queue.
    pub max_entries: u64,
    /// Replies held for `--origin-delay` (each one a connection deadline).
    #[serde(default)]
    pub delayed: u64,
}

/// What the workers hold for reuse, summed over workers: memory that follows the most
/// connections open at once (shells, the descriptor-indexed table, pooled buffers), not the
/// number served.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryCounts {
    /// Bytes of buffers in the pools, lent to no connection.
    pub pool_bytes: u64,
    pub pool_buffers: u64,
    /// Closed connections' shells kept for the next connections.
    pub spare_shells: u64,
    /// Slots of the descriptor-indexed connection tables (their capacity).
    pub table_slots: u64,
}

/// The event mechanisms' own counters, summed over the workers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventCounts {
    pub waits: u64,
    /// Waits that handed the server at least one event it acts on (readiness mechanisms; 0
    /// from the completion engine, and in documents written before 2026-12-06).
    #[serde(default)]
    pub waits_with_events: u64,
    pub events: u64,
    /// Events per wait (0 before the first).
    pub per_wait: f64,
    pub discarded: u64,
    /// Interest changes that cost a syscall of their own.
    pub interest_changes: u64,
    /// Interest changes that cost none (batched, or free in the mechanism).
    pub interest_changes_free: u64,
    pub batches: u64,
    pub changes_per_batch: f64,
    pub waits_from_memory: u64,
    pub waits_from_kernel: u64,
    /// `uring` only: IORING_OP_ASYNC_CANCEL requests queued.
    pub cancels: u64,
    /// Full rescans because the mechanism's event queue lost events (`rtsig`: SIGIO after the
    /// signal queue overflowed, then one poll sweep).
    #[serde(default)]
    pub overflows: u64,
}

/// One worker's main counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerCounts {
    pub worker: usize,
    /// The worker's process (`--as processes`; absent with threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub accepted: u64,
    pub requests: u64,
    pub active: u64,
    pub waits: u64,
    /// Times the worker was told the listener was ready and tried to accept (readiness
    /// mechanisms; the completion engine's multishot accept has no such wake-up): the accept
    /// herd's wake-ups.
    #[serde(default)]
    pub accept_wakeups: u64,
    /// Of those, the ones whose first accept found no connection (EAGAIN): woken for nothing,
    /// another worker took it.
    #[serde(default)]
    pub accept_empty: u64,
    /// accept calls that returned EAGAIN (every round that drains the queue ends with one;
    /// `accepted` counts those that got a connection).
    #[serde(default)]
    pub accept_eagain: u64,
}
