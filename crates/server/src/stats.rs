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
    syscall_rows, ConnCounters, Counter, PollerCounters, Registry, StatusCounters,
};
use evlab_sys::{self as sys, Snapshot, ThreadCounters};
use evlab_wire::server::{
    ConnectionCounts, EventCounts, MemoryCounts, ServerStats, StatusClasses, TimerCounts,
    WorkerCounts,
};
use evlab_wire::traffic_lines;

use crate::peers::{Peers, WorkerView};

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
    /// Listener readiness the worker acted on by accepting (the accept herd's wake-ups), those
    /// whose first accept found nothing, and accept calls that returned EAGAIN.
    pub accept_wakeups: Counter,
    pub accept_empty: Counter,
    pub accept_eagain: Counter,
    /// Waits of a readiness mechanism that handed the worker at least one event it acts on,
    /// copied from the engine with the poller's counters. Those that returned nothing, or only
    /// events of no interest (epoll2's idle writable sockets, dropped in user space), are not
    /// among them: the paper's "less than 1%" of epoll2's waits (§5).
    pub waits_with_events: Counter,
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
            accept_wakeups: Counter::default(),
            accept_empty: Counter::default(),
            accept_eagain: Counter::default(),
            waits_with_events: Counter::default(),
            poller: PollerCounters::default(),
            syscalls: sys::thread_counters(),
        }
    }

    #[inline]
    pub fn record_status(&self, code: u16) {
        self.status.record(code);
    }
}

impl WorkerStats {
    /// The counters now, as plain numbers.
    pub(crate) fn view(&self) -> WorkerView {
        let w = self;
        let p = &w.poller;
        WorkerView {
            worker: w.worker,
            pid: None,
            accepted: w.conns.accepted.get(),
            closed: w.conns.closed.get(),
            active: w.conns.active.get(),
            max_active: w.conns.max_active.get(),
            accept_errors: w.conns.accept_errors.get(),
            io_errors: w.conns.io_errors.get(),
            requests: w.requests.get(),
            bytes_sent: w.bytes_sent.get(),
            accept_pauses: w.accept_pauses.get(),
            header_timeouts: w.header_timeouts.get(),
            send_timeouts: w.send_timeouts.get(),
            timer_entries: w.timer_entries.get(),
            max_timer_entries: w.max_timer_entries.get(),
            delayed: w.delayed.get(),
            pool_bytes: w.pool_bytes.get(),
            pool_buffers: w.pool_buffers.get(),
            spare_shells: w.spare_shells.get(),
            table_slots: w.table_slots.get(),
            cancels: w.cancels.get(),
            waits: p.waits.get(),
            events: p.events.get(),
            discarded: p.discarded.get(),
            interest_changes: p.interest_changes.get(),
            interest_changes_free: p.interest_changes_free.get(),
            batches: p.batches.get(),
            waits_from_memory: p.waits_from_memory.get(),
            waits_from_kernel: p.waits_from_kernel.get(),
            overflows: p.overflows.get(),
            accept_wakeups: w.accept_wakeups.get(),
            accept_empty: w.accept_empty.get(),
            accept_eagain: w.accept_eagain.get(),
            waits_with_events: w.waits_with_events.get(),
            status: w.status.slots(),
            syscalls: w.syscalls.snapshot(),
        }
    }
}

evlab_runtime::service_state!(Shared, WorkerStats);

/// State shared by all workers of one server.
#[derive(Debug)]
pub struct Shared {
    pub mechanism: Mechanism,
    pub workers_wanted: usize,
    pub profile: bool,
    pub started: Instant,
    /// The workers' counters and wakers, and the shutdown request.
    pub registry: Registry<WorkerStats>,
    /// `--as processes`: the counters every worker process publishes; the stats are then the
    /// sum over the processes, not over this process's workers.
    pub(crate) peers: Option<Peers>,
}

impl Shared {
    pub fn new(mechanism: Mechanism, workers: usize, profile: bool) -> Shared {
        Shared {
            mechanism,
            workers_wanted: workers,
            profile,
            started: Instant::now(),
            registry: Registry::default(),
            peers: None,
        }
    }

    pub(crate) fn with_peers(mut self, peers: Peers) -> Shared {
        self.peers = Some(peers);
        self
    }

    pub fn workers(&self) -> Vec<Arc<WorkerStats>> {
        self.registry.list()
    }

    /// Syscalls of all workers since start (or since the last [`Shared::reset_syscalls`]; with
    /// processes, since start).
    pub fn syscalls(&self) -> Snapshot {
        match &self.peers {
            Some(_) => {
                let mut s = Snapshot::default();
                for v in self.views() {
                    for i in 0..sys::NSYSCALLS {
                        s.calls[i] += v.syscalls.calls[i];
                        s.nanos[i] += v.syscalls.nanos[i];
                        s.errors[i] += v.syscalls.errors[i];
                        s.would_block[i] += v.syscalls.would_block[i];
                    }
                }
                s
            }
            None => self.registry.syscalls(),
        }
    }

    /// Starts syscall counting afresh (after warm-up, say). Threads only: worker processes
    /// count from their start.
    pub fn reset_syscalls(&self) {
        self.registry.reset_syscalls();
    }

    /// A worker process publishes its counters (after every turn of its loop); nothing with
    /// threads, whose counters are read where they are.
    #[inline]
    pub(crate) fn publish(&self, w: &WorkerStats) {
        if let Some(p) = &self.peers {
            p.publish(&w.view());
        }
    }

    /// Every worker's counters now: this process's workers, or with processes every worker
    /// process's as last published (this one's own read live).
    fn views(&self) -> Vec<WorkerView> {
        match &self.peers {
            Some(p) => p.views(self.workers().first().map(|w| w.view())),
            None => self.workers().iter().map(|w| w.view()).collect(),
        }
    }

    /// The counters now, as `GET /.evlab/stats` reports them.
    pub fn stats(&self) -> ServerStats {
        let views = self.views();
        let sum = |f: &dyn Fn(&WorkerView) -> u64| views.iter().map(f).sum::<u64>();
        let sys = self.syscalls();
        let requests = sum(&|w| w.requests);
        let waits = sum(&|w| w.waits);
        let events = sum(&|w| w.events);
        let batches = sum(&|w| w.batches);
        let interest_changes = sum(&|w| w.interest_changes);
        let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        let syscalls = syscall_rows(&sys, self.profile);
        let status = std::array::from_fn(|i| views.iter().map(|w| w.status[i]).sum());
        ServerStats {
            server: "evlab".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            mechanism: self.mechanism.name().into(),
            workers: views.len(),
            uptime_s: self.started.elapsed().as_secs_f64(),
            profile: self.profile,
            connections: ConnectionCounts {
                accepted: sum(&|w| w.accepted),
                closed: sum(&|w| w.closed),
                active: sum(&|w| w.active),
                max_active: sum(&|w| w.max_active),
                accept_pauses: sum(&|w| w.accept_pauses),
                accept_errors: sum(&|w| w.accept_errors),
                header_timeouts: sum(&|w| w.header_timeouts),
                send_timeouts: sum(&|w| w.send_timeouts),
                io_errors: sum(&|w| w.io_errors),
            },
            timers: TimerCounts {
                entries: sum(&|w| w.timer_entries),
                max_entries: sum(&|w| w.max_timer_entries),
                delayed: sum(&|w| w.delayed),
            },
            memory: MemoryCounts {
                pool_bytes: sum(&|w| w.pool_bytes),
                pool_buffers: sum(&|w| w.pool_buffers),
                spare_shells: sum(&|w| w.spare_shells),
                table_slots: sum(&|w| w.table_slots),
            },
            requests,
            responses: StatusClasses::from_slots(status),
            bytes_sent: sum(&|w| w.bytes_sent),
            events: EventCounts {
                waits,
                waits_with_events: sum(&|w| w.waits_with_events),
                events,
                per_wait: ratio(events, waits),
                discarded: sum(&|w| w.discarded),
                interest_changes,
                interest_changes_free: sum(&|w| w.interest_changes_free),
                batches,
                changes_per_batch: ratio(interest_changes, batches),
                waits_from_memory: sum(&|w| w.waits_from_memory),
                waits_from_kernel: sum(&|w| w.waits_from_kernel),
                cancels: sum(&|w| w.cancels),
                overflows: sum(&|w| w.overflows),
            },
            syscalls,
            syscalls_total: sys.total_calls(),
            syscalls_per_request: ratio(sys.total_calls(), requests),
            per_worker: views
                .iter()
                .map(|w| WorkerCounts {
                    worker: w.worker,
                    pid: w.pid,
                    accepted: w.accepted,
                    requests: w.requests,
                    active: w.active,
                    waits: w.waits,
                    accept_wakeups: w.accept_wakeups,
                    accept_empty: w.accept_empty,
                    accept_eagain: w.accept_eagain,
                })
                .collect(),
            processes: self.peers.as_ref().map(|p| p.process_counts()),
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
        let unit = if v.processes.is_some() {
            "process(es)"
        } else {
            "worker(s)"
        };
        let mut out = format!(
            "evlab serve: {} ({} {unit}), up {:.1} s\n{}  events: {} waits, {:.2} events/wait, {} discarded, {} interest changes by syscall, {} free\n  syscalls ({} total, {:.2} per request):\n",
            v.mechanism,
            v.workers,
            v.uptime_s,
            traffic_lines(
                v.connections.accepted,
                v.connections.closed,
                v.connections.max_active,
                v.requests,
                &v.responses
            ),
            v.events.waits,
            v.events.per_wait,
            v.events.discarded,
            v.events.interest_changes,
            v.events.interest_changes_free,
            v.syscalls_total,
            v.syscalls_per_request,
        );
        if v.per_worker.len() > 1 {
            // How the accept mode spread the connections (the herd's balance), and how many
            // wake-ups found nothing to accept.
            let line = |f: &dyn Fn(&WorkerCounts) -> u64| {
                let per: Vec<String> = v.per_worker.iter().map(|w| f(w).to_string()).collect();
                per.join(" ")
            };
            out = out.replacen(
                "\n  requests:",
                &format!(
                    "\n  accepted per worker: {}\n  empty accept wake-ups per worker: {}\n  requests:",
                    line(&|w| w.accepted),
                    line(&|w| w.accept_empty)
                ),
                1,
            );
        }
        if let Some(p) = &v.processes {
            for d in &p.died {
                out.push_str(&format!(
                    "  worker {} (pid {}) died: {}\n",
                    d.worker, d.pid, d.how
                ));
            }
        }
        let sys = self.syscalls();
        let total_ns = sys.total_nanos().max(1);
        for r in sys.rows() {
            let (name, calls, errors, blocked) = (r.name, r.calls, r.errors, r.would_block);
            out.push_str(&format!(
                "    {name:<16} {calls:>12} calls {errors:>10} errors {blocked:>10} would block"
            ));
            if self.profile {
                out.push_str(&format!(
                    " {:>10.3} s {:>6.2}%",
                    r.nanos as f64 / 1e9,
                    100.0 * r.nanos as f64 / total_ns as f64
                ));
            }
            out.push('\n');
        }
        out
    }
}
