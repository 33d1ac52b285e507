//! Counters every worker keeps, readable by any thread: the source of `GET /.evlab/stats` and
//! of the summary printed at exit.
//!
//! Each worker is the only writer of its own [`WorkerStats`], so a counter is bumped with a
//! relaxed load and store, not a locked read-modify-write: counting must not perturb what it
//! measures.

use std::sync::Arc;
use std::time::Instant;

use evlab_poll::Mechanism;
use evlab_runtime::{
    syscall_rows, ConnCounters, Counter, PollerCounters, Registry, StatusCounters, WorkerCounters,
};
use evlab_sys::{self as sys, Snapshot, ThreadCounters};
use evlab_wire::server::{
    ConnectionCounts, EventCounts, MemoryCounts, ServerStats, TimerCounts, WorkerCounts,
};

/// One worker's counters.
#[derive(Debug)]
pub struct WorkerStats {
    pub worker: usize,
    /// Accepted, closed, open, errors.
    pub conns: ConnCounters,
    pub requests: Counter,
    /// Responses per status class.
    pub status: StatusCounters,
    pub bytes_sent: Counter,
    pub accept_pauses: Counter,
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
    /// `uring` only: IORING_OP_ASYNC_CANCEL requests queued (each one a kernel lookup whose cost
    /// grows with the number of armed requests, i.e. with idle connections).
    pub cancels: Counter,
    /// A copy of the mechanism's own counters, refreshed every loop iteration.
    pub poller: PollerCounters,
    pub syscalls: Arc<ThreadCounters>,
}

impl WorkerStats {
    /// Must be called on the worker's own thread: it captures that thread's syscall counters.
    pub fn for_this_thread(worker: usize) -> WorkerStats {
        WorkerStats {
            worker,
            conns: ConnCounters::default(),
            requests: Counter::default(),
            status: StatusCounters::default(),
            bytes_sent: Counter::default(),
            accept_pauses: Counter::default(),
            header_timeouts: Counter::default(),
            send_timeouts: Counter::default(),
            timer_entries: Counter::default(),
            max_timer_entries: Counter::default(),
            delayed: Counter::default(),
            pool_bytes: Counter::default(),
            pool_buffers: Counter::default(),
            spare_shells: Counter::default(),
            table_slots: Counter::default(),
            cancels: Counter::default(),
            poller: PollerCounters::default(),
            syscalls: sys::thread_counters(),
        }
    }

    #[inline]
    pub fn record_status(&self, code: u16) {
        self.status.record(code);
    }
}

impl WorkerCounters for WorkerStats {
    fn syscalls(&self) -> &ThreadCounters {
        &self.syscalls
    }
}

/// State shared by all workers of one server.
#[derive(Debug)]
pub struct Shared {
    pub mechanism: Mechanism,
    pub workers_wanted: usize,
    pub profile: bool,
    pub started: Instant,
    /// The workers' counters and wakers, and the shutdown request.
    pub registry: Registry<WorkerStats>,
}

impl Shared {
    pub fn new(mechanism: Mechanism, workers: usize, profile: bool) -> Shared {
        Shared {
            mechanism,
            workers_wanted: workers,
            profile,
            started: Instant::now(),
            registry: Registry::default(),
        }
    }

    /// The wakers' descriptors (for a signal handler, which cannot take a lock).
    pub fn wakers(&self) -> Vec<std::os::fd::RawFd> {
        self.registry.wakers()
    }

    pub fn shutdown_requested(&self) -> bool {
        self.registry.shutdown_requested()
    }

    pub fn request_shutdown(&self) {
        self.registry.request_shutdown();
    }

    pub fn workers(&self) -> Vec<Arc<WorkerStats>> {
        self.registry.list()
    }

    /// Syscalls of all workers since start (or since the last [`Shared::reset_syscalls`]).
    pub fn syscalls(&self) -> Snapshot {
        self.registry.syscalls()
    }

    /// Starts syscall counting afresh (after warm-up, say).
    pub fn reset_syscalls(&self) {
        self.registry.reset_syscalls();
    }

    /// The counters now, as `GET /.evlab/stats` reports them.
    pub fn stats(&self) -> ServerStats {
        let workers = self.workers();
        let sum = |f: &dyn Fn(&WorkerStats) -> u64| workers.iter().map(|w| f(w)).sum::<u64>();
        let sys = self.syscalls();
        let requests = sum(&|w| w.requests.get());
        let waits = sum(&|w| w.poller.waits.get());
        let events = sum(&|w| w.poller.events.get());
        let batches = sum(&|w| w.poller.batches.get());
        let interest_changes = sum(&|w| w.poller.interest_changes.get());
        let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        let syscalls = syscall_rows(&sys, self.profile);
        ServerStats {
            server: "evlab".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            mechanism: self.mechanism.name().into(),
            workers: workers.len(),
            uptime_s: self.started.elapsed().as_secs_f64(),
            profile: self.profile,
            connections: ConnectionCounts {
                accepted: sum(&|w| w.conns.accepted.get()),
                closed: sum(&|w| w.conns.closed.get()),
                active: sum(&|w| w.conns.active.get()),
                max_active: sum(&|w| w.conns.max_active.get()),
                accept_pauses: sum(&|w| w.accept_pauses.get()),
                accept_errors: sum(&|w| w.conns.accept_errors.get()),
                header_timeouts: sum(&|w| w.header_timeouts.get()),
                send_timeouts: sum(&|w| w.send_timeouts.get()),
                io_errors: sum(&|w| w.conns.io_errors.get()),
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
            responses: StatusCounters::sum(workers.iter().map(|w| &w.status)),
            bytes_sent: sum(&|w| w.bytes_sent.get()),
            events: EventCounts {
                waits,
                events,
                per_wait: ratio(events, waits),
                discarded: sum(&|w| w.poller.discarded.get()),
                interest_changes,
                interest_changes_free: sum(&|w| w.poller.interest_changes_free.get()),
                batches,
                changes_per_batch: ratio(interest_changes, batches),
                waits_from_memory: sum(&|w| w.poller.waits_from_memory.get()),
                waits_from_kernel: sum(&|w| w.poller.waits_from_kernel.get()),
                cancels: sum(&|w| w.cancels.get()),
                overflows: sum(&|w| w.poller.overflows.get()),
            },
            syscalls,
            syscalls_total: sys.total_calls(),
            syscalls_per_request: ratio(sys.total_calls(), requests),
            per_worker: workers
                .iter()
                .map(|w| WorkerCounts {
                    worker: w.worker,
                    accepted: w.conns.accepted.get(),
                    requests: w.requests.get(),
                    active: w.conns.active.get(),
                    waits: w.poller.waits.get(),
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
