//! Counters every worker keeps, readable by any thread: the source of `GET /.evlab/stats` and
//! of the summary printed at exit.
//!
//! Each worker is the only writer of its own [`WorkerStats`], so a counter is bumped with a
//! relaxed load and store, not a locked read-modify-write: counting must not perturb what it
//! measures.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use evlab_poll::shutdown::Shutdown;
use evlab_poll::sys::{self, Snapshot, ThreadCounters};
use evlab_poll::{Mechanism, PollerStats};
use evlab_wire::server::{
    ConnectionCounts, EventCounts, MemoryCounts, ServerStats, StatusClasses, SyscallCount,
    TimerCounts, WorkerCounts,
};

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
    /// Responses per status class, indexed by [`StatusClasses::slot`].
    pub status: [Counter; StatusClasses::SLOTS],
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
        self.status[StatusClasses::slot(code)].inc();
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
            responses: StatusClasses::from_slots(std::array::from_fn(|i| {
                sum(&|w| w.status[i].get())
            })),
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
