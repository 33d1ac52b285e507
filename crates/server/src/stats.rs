//! Counters every worker keeps, readable by any thread: the source of `GET /.evlab/stats` and
//! of the summary printed at exit.
//!
//! Each worker is the only writer of its own [`WorkerStats`], so a counter is bumped with a
//! relaxed load and store, not a locked read-modify-write: counting must not perturb what it
//! measures.

use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use evlab_poll::shutdown::Shutdown;
use evlab_poll::sys::{self, Snapshot, ThreadCounters};
use evlab_poll::{Mechanism, PollerStats};
use serde::{Deserialize, Serialize};

/// The document `GET /.evlab/stats` answers: the server's counters since start, summed over its
/// workers (syscalls since start or since [`Shared::reset_syscalls`]). `evlab run` reads it back
/// into this type.
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
    pub responses: StatusCounts,
    pub bytes_sent: u64,
    pub events: EventCounts,
    /// Per syscall the workers made, by name (those made at least once).
    pub syscalls: BTreeMap<String, SyscallCount>,
    pub syscalls_total: u64,
    pub syscalls_per_request: f64,
    pub per_worker: Vec<WorkerCounts>,
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

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCounts {
    #[serde(rename = "1xx")]
    pub s1xx: u64,
    #[serde(rename = "2xx")]
    pub s2xx: u64,
    #[serde(rename = "3xx")]
    pub s3xx: u64,
    #[serde(rename = "4xx")]
    pub s4xx: u64,
    #[serde(rename = "5xx")]
    pub s5xx: u64,
}

/// The event mechanisms' own counters, summed over the workers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventCounts {
    pub waits: u64,
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyscallCount {
    pub calls: u64,
    pub errors: u64,
    /// Nanoseconds inside the call (with `--profile` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns: Option<u64>,
    /// Share of all syscall time (with `--profile` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
}

/// One worker's main counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerCounts {
    pub worker: usize,
    pub accepted: u64,
    pub requests: u64,
    pub active: u64,
    pub waits: u64,
}

#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }
    #[inline]
    pub fn set(&self, n: u64) {
        self.0.store(n, Relaxed);
    }
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// One worker's counters.
#[derive(Debug)]
pub struct WorkerStats {
    pub worker: usize,
    pub accepted: Counter,
    pub closed: Counter,
    pub active: Counter,
    pub max_active: Counter,
    pub requests: Counter,
    pub status: [Counter; 6],
    pub bytes_sent: Counter,
    pub accept_pauses: Counter,
    pub accept_errors: Counter,
    pub header_timeouts: Counter,
    /// Connections closed because the peer took none of a reply for `--send-timeout`.
    pub send_timeouts: Counter,
    /// Entries in the deadline queue now, and at most so far (bounded by the connections).
    pub timer_entries: Counter,
    pub max_timer_entries: Counter,
    /// Replies held for the origin delay.
    pub delayed: Counter,
    /// What the worker keeps for reuse now (see [`MemoryCounts`]).
    pub pool_bytes: Counter,
    pub pool_buffers: Counter,
    pub spare_shells: Counter,
    pub table_slots: Counter,
    pub io_errors: Counter,
    /// `uring` only: IORING_OP_ASYNC_CANCEL requests queued (each one a kernel lookup whose cost
    /// grows with the number of armed requests, i.e. with idle connections).
    pub cancels: Counter,
    // A copy of the mechanism's own counters, refreshed every loop iteration.
    pub waits: Counter,
    pub events: Counter,
    pub discarded: Counter,
    pub interest_changes: Counter,
    pub interest_changes_free: Counter,
    pub batches: Counter,
    pub waits_from_memory: Counter,
    pub waits_from_kernel: Counter,
    pub overflows: Counter,
    pub syscalls: Arc<ThreadCounters>,
}

impl WorkerStats {
    /// Must be called on the worker's own thread: it captures that thread's syscall counters.
    pub fn for_this_thread(worker: usize) -> WorkerStats {
        WorkerStats {
            worker,
            accepted: Counter::default(),
            closed: Counter::default(),
            active: Counter::default(),
            max_active: Counter::default(),
            requests: Counter::default(),
            status: Default::default(),
            bytes_sent: Counter::default(),
            accept_pauses: Counter::default(),
            accept_errors: Counter::default(),
            header_timeouts: Counter::default(),
            send_timeouts: Counter::default(),
            timer_entries: Counter::default(),
            max_timer_entries: Counter::default(),
            delayed: Counter::default(),
            pool_bytes: Counter::default(),
            pool_buffers: Counter::default(),
            spare_shells: Counter::default(),
            table_slots: Counter::default(),
            io_errors: Counter::default(),
            cancels: Counter::default(),
            waits: Counter::default(),
            events: Counter::default(),
            discarded: Counter::default(),
            interest_changes: Counter::default(),
            interest_changes_free: Counter::default(),
            batches: Counter::default(),
            waits_from_memory: Counter::default(),
            waits_from_kernel: Counter::default(),
            overflows: Counter::default(),
            syscalls: sys::thread_counters(),
        }
    }

    #[inline]
    pub fn record_status(&self, code: u16) {
        let class = (code / 100) as usize;
        if class < 6 {
            self.status[class].inc();
        }
    }

    pub fn set_poller(&self, p: &PollerStats) {
        self.waits.set(p.waits);
        self.events.set(p.events);
        self.discarded.set(p.discarded);
        self.interest_changes.set(p.interest_changes);
        self.interest_changes_free.set(p.interest_changes_free);
        self.batches.set(p.batches);
        self.waits_from_memory.set(p.waits_from_memory);
        self.waits_from_kernel.set(p.waits_from_kernel);
        self.overflows.set(p.overflows);
    }
}

/// State shared by all workers of one server.
#[derive(Debug)]
pub struct Shared {
    pub mechanism: Mechanism,
    pub workers_wanted: usize,
    pub profile: bool,
    pub started: Instant,
    shutdown: Shutdown,
    workers: Mutex<Vec<Arc<WorkerStats>>>,
    baseline: Mutex<Snapshot>,
}

impl Shared {
    pub fn new(mechanism: Mechanism, workers: usize, profile: bool) -> Shared {
        Shared {
            mechanism,
            workers_wanted: workers,
            profile,
            started: Instant::now(),
            shutdown: Shutdown::default(),
            workers: Mutex::new(Vec::new()),
            baseline: Mutex::new(Snapshot::default()),
        }
    }

    pub(crate) fn add_worker(&self, w: Arc<WorkerStats>, waker: RawFd) {
        self.workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(w);
        self.shutdown.add_waker(waker);
    }

    pub(crate) fn remove_waker(&self, waker: RawFd) {
        self.shutdown.remove_waker(waker);
    }

    /// The wakers' descriptors (for a signal handler, which cannot take a lock).
    pub fn wakers(&self) -> Vec<RawFd> {
        self.shutdown.wakers()
    }

    pub fn shutdown_requested(&self) -> bool {
        self.shutdown.requested()
    }

    pub fn request_shutdown(&self) {
        self.shutdown.request();
    }

    pub fn workers(&self) -> Vec<Arc<WorkerStats>> {
        self.workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Syscalls of all workers since start (or since the last [`Shared::reset_syscalls`]).
    pub fn syscalls(&self) -> Snapshot {
        let mut s = Snapshot::default();
        for w in self.workers() {
            w.syscalls.add_to(&mut s);
        }
        s.since(&self.baseline.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Starts syscall counting afresh (after warm-up, say).
    pub fn reset_syscalls(&self) {
        let mut s = Snapshot::default();
        for w in self.workers() {
            w.syscalls.add_to(&mut s);
        }
        *self.baseline.lock().unwrap_or_else(|e| e.into_inner()) = s;
    }

    /// The counters now, as `GET /.evlab/stats` reports them.
    pub fn stats(&self) -> ServerStats {
        let workers = self.workers();
        let sum = |f: &dyn Fn(&WorkerStats) -> u64| workers.iter().map(|w| f(w)).sum::<u64>();
        let sys = self.syscalls();
        let requests = sum(&|w| w.requests.get());
        let waits = sum(&|w| w.waits.get());
        let events = sum(&|w| w.events.get());
        let total_ns = sys.total_nanos();
        let batches = sum(&|w| w.batches.get());
        let interest_changes = sum(&|w| w.interest_changes.get());
        let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        let syscalls = sys
            .rows()
            .into_iter()
            .map(|(name, calls, errors, ns)| {
                let row = SyscallCount {
                    calls,
                    errors,
                    ns: self.profile.then_some(ns),
                    share: self.profile.then(|| ratio(ns, total_ns)),
                };
                (name.to_string(), row)
            })
            .collect();
        ServerStats {
            server: "evlab".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            mechanism: self.mechanism.name().into(),
            workers: workers.len(),
            uptime_s: self.started.elapsed().as_secs_f64(),
            profile: self.profile,
            connections: ConnectionCounts {
                accepted: sum(&|w| w.accepted.get()),
                closed: sum(&|w| w.closed.get()),
                active: sum(&|w| w.active.get()),
                max_active: sum(&|w| w.max_active.get()),
                accept_pauses: sum(&|w| w.accept_pauses.get()),
                accept_errors: sum(&|w| w.accept_errors.get()),
                header_timeouts: sum(&|w| w.header_timeouts.get()),
                send_timeouts: sum(&|w| w.send_timeouts.get()),
                io_errors: sum(&|w| w.io_errors.get()),
            },
            timers: TimerCounts {
                entries: sum(&|w| w.timer_entries.get()),
                max_entries: sum(&|w| w.max_timer_entries.get()),
                delayed: sum(&|w| w.delayed.get()),
            },
            memory: MemoryCounts {
                pool_bytes: sum(&|w| w.pool_bytes.get()),
                pool_buffers: sum(&|w| w.pool_buffers.get()),
                spare_shells: sum(&|w| w.spare_shells.get()),
                table_slots: sum(&|w| w.table_slots.get()),
            },
            requests,
            responses: StatusCounts {
                s1xx: sum(&|w| w.status[1].get()),
                s2xx: sum(&|w| w.status[2].get()),
                s3xx: sum(&|w| w.status[3].get()),
                s4xx: sum(&|w| w.status[4].get()),
                s5xx: sum(&|w| w.status[5].get()),
            },
            bytes_sent: sum(&|w| w.bytes_sent.get()),
            events: EventCounts {
                waits,
                events,
                per_wait: ratio(events, waits),
                discarded: sum(&|w| w.discarded.get()),
                interest_changes,
                interest_changes_free: sum(&|w| w.interest_changes_free.get()),
                batches,
                changes_per_batch: ratio(interest_changes, batches),
                waits_from_memory: sum(&|w| w.waits_from_memory.get()),
                waits_from_kernel: sum(&|w| w.waits_from_kernel.get()),
                cancels: sum(&|w| w.cancels.get()),
                overflows: sum(&|w| w.overflows.get()),
            },
            syscalls,
            syscalls_total: sys.total_calls(),
            syscalls_per_request: ratio(sys.total_calls(), requests),
            per_worker: workers
                .iter()
                .map(|w| WorkerCounts {
                    worker: w.worker,
                    accepted: w.accepted.get(),
                    requests: w.requests.get(),
                    active: w.active.get(),
                    waits: w.waits.get(),
                })
                .collect(),
        }
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(&self.stats()).unwrap_or_default();
        s.push('\n');
        s
    }

    /// A human summary for stderr at exit.
    pub fn summary(&self) -> String {
        let v = self.stats();
        let mut out = format!(
            "evlab serve: {} ({} worker(s)), up {:.1} s\n  connections: accepted {} closed {} max active {}\n  requests: {}  responses: 2xx {} 3xx {} 4xx {} 5xx {}\n  events: {} waits, {:.2} events/wait, {} discarded, {} interest changes by syscall, {} free\n  syscalls ({} total, {:.2} per request):\n",
            v.mechanism,
            v.workers,
            v.uptime_s,
            v.connections.accepted,
            v.connections.closed,
            v.connections.max_active,
            v.requests,
            v.responses.s2xx,
            v.responses.s3xx,
            v.responses.s4xx,
            v.responses.s5xx,
            v.events.waits,
            v.events.per_wait,
            v.events.discarded,
            v.events.interest_changes,
            v.events.interest_changes_free,
            v.syscalls_total,
            v.syscalls_per_request,
        );
        if v.per_worker.len() > 1 {
            // How the accept mode spread the connections (the herd's balance).
            let per: Vec<String> = v
                .per_worker
                .iter()
                .map(|w| w.accepted.to_string())
                .collect();
            out = out.replacen(
                "\n  requests:",
                &format!("\n  accepted per worker: {}\n  requests:", per.join(" ")),
                1,
            );
        }
        let sys = self.syscalls();
        let total_ns = sys.total_nanos().max(1);
        for (name, calls, errors, ns) in sys.rows() {
            if self.profile {
                out.push_str(&format!(
                    "    {name:<16} {calls:>12} calls {errors:>10} errors {:>10.3} s {:>6.2}%\n",
                    ns as f64 / 1e9,
                    100.0 * ns as f64 / total_ns as f64
                ));
            } else {
                out.push_str(&format!(
                    "    {name:<16} {calls:>12} calls {errors:>10} errors\n"
                ));
            }
        }
        out
    }
}
