//! The proxy's counters, readable by any thread: the source of `GET /.evlab/stats` (with
//! `--stats`) and of the summary printed at exit. As in the server, each worker is the only
//! writer of its own counters (a relaxed load and store, no locked instruction).
//!
//! Body bytes are counted by the way they went: `copy` through user space (read and write),
//! `splice` origin → pipe → client in the kernel, `tee` duplicated from the pipe for the cache
//! (splice-keep), `hit` sent from the cache; splice-release's bytes are `splice` bytes (its
//! bodies are counted in `transfers.spliced_release`, not `spliced`). Response heads are in
//! `to_clients` only.

use std::sync::Arc;
use std::time::Instant;

use evlab_poll::Mechanism;
use evlab_runtime::{
    syscall_rows, ConnCounters, Counter, PollerCounters, Registry, StatusCounters,
};
use evlab_sys::{self as sys, Snapshot, ThreadCounters};
use evlab_wire::proxy::{
    ByteCounts, CacheStats, ClientCounts, EventCounts, OriginCounts, PipeStats, ProxyStats,
    TransferCounts,
};
use evlab_wire::traffic_lines;

use crate::ForwardMode;

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// One worker's counters.
        #[derive(Debug)]
        pub struct WorkerStats {
            /// Client connections: accepted, closed, open, errors.
            pub conns: ConnCounters,
            $(pub $name: Counter,)*
            /// Responses per status class.
            pub status: StatusCounters,
            /// A copy of the mechanism's own counters, refreshed every loop iteration.
            pub poller: PollerCounters,
            pub syscalls: Arc<ThreadCounters>,
        }

        impl WorkerStats {
            /// Must be called on the worker's own thread: it captures that thread's syscall
            /// counters.
            pub fn for_this_thread() -> WorkerStats {
                WorkerStats {
                    conns: ConnCounters::default(),
                    $($name: Counter::default(),)*
                    status: StatusCounters::default(),
                    poller: PollerCounters::default(),
                    syscalls: sys::thread_counters(),
                }
            }
        }
    };
}

counters! {
    timeouts, header_timeouts, send_timeouts,
    origin_connects, origin_reused, origin_retries, origin_closed, origin_idle, origin_errors,
    bad_gateway, gateway_timeout, connect_timeouts, truncated,
    requests,
    hits, not_modified, misses, bypassed, cache_stored, cache_evicted, cache_expired,
    cache_rejected, cache_objects, cache_bytes, cache_not_kept, cache_keeping,
    bytes_to_clients, bytes_copy, bytes_splice, bytes_tee, bytes_hit,
    copied, spliced, spliced_keep, spliced_release, no_pipe,
    pipes_created, pipes_open, pipes_idle, pipes_max_open, pipes_closed_with_data,
    pipes_not_grown,
}

impl WorkerStats {
    #[inline]
    pub fn record_status(&self, code: u16) {
        self.status.record(code);
    }
}

evlab_runtime::service_state!(Shared, WorkerStats);

/// State shared by the workers of one proxy.
#[derive(Debug)]
pub struct Shared {
    pub mechanism: Mechanism,
    pub forward: ForwardMode,
    pub profile: bool,
    pub started: Instant,
    /// The workers' counters and wakers, and the shutdown request.
    pub registry: Registry<WorkerStats>,
}

impl Shared {
    pub fn new(mechanism: Mechanism, forward: ForwardMode, profile: bool) -> Shared {
        Shared {
            mechanism,
            forward,
            profile,
            started: Instant::now(),
            registry: Registry::default(),
        }
    }

    /// Syscalls of all workers since start.
    pub fn syscalls(&self) -> Snapshot {
        self.registry.syscalls()
    }

    pub fn stats(&self) -> ProxyStats {
        let workers = self.registry.list();
        let sum =
            |f: &dyn Fn(&WorkerStats) -> &Counter| workers.iter().map(|w| f(w).get()).sum::<u64>();
        let sys = self.syscalls();
        let requests = sum(&|w| &w.requests);
        let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        let syscalls = syscall_rows(&sys, self.profile);
        let waits = sum(&|w| &w.poller.waits);
        let events = sum(&|w| &w.poller.events);
        ProxyStats {
            proxy: "evlab-proxy".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            mechanism: self.mechanism.name().into(),
            forward: self.forward.name().into(),
            workers: workers.len(),
            uptime_s: self.started.elapsed().as_secs_f64(),
            profile: self.profile,
            connections: ClientCounts {
                accepted: sum(&|w| &w.conns.accepted),
                closed: sum(&|w| &w.conns.closed),
                active: sum(&|w| &w.conns.active),
                max_active: sum(&|w| &w.conns.max_active),
                accept_errors: sum(&|w| &w.conns.accept_errors),
                timeouts: sum(&|w| &w.timeouts),
                header_timeouts: sum(&|w| &w.header_timeouts),
                send_timeouts: sum(&|w| &w.send_timeouts),
                io_errors: sum(&|w| &w.conns.io_errors),
            },
            origin: OriginCounts {
                connects: sum(&|w| &w.origin_connects),
                reused: sum(&|w| &w.origin_reused),
                retries: sum(&|w| &w.origin_retries),
                closed: sum(&|w| &w.origin_closed),
                idle: sum(&|w| &w.origin_idle),
                errors: sum(&|w| &w.origin_errors),
                bad_gateway: sum(&|w| &w.bad_gateway),
                gateway_timeout: sum(&|w| &w.gateway_timeout),
                connect_timeouts: sum(&|w| &w.connect_timeouts),
                truncated: sum(&|w| &w.truncated),
            },
            requests,
            responses: StatusCounters::sum(workers.iter().map(|w| &w.status)),
            cache: CacheStats {
                hits: sum(&|w| &w.hits),
                not_modified: sum(&|w| &w.not_modified),
                misses: sum(&|w| &w.misses),
                bypassed: sum(&|w| &w.bypassed),
                stored: sum(&|w| &w.cache_stored),
                evicted: sum(&|w| &w.cache_evicted),
                expired: sum(&|w| &w.cache_expired),
                rejected: sum(&|w| &w.cache_rejected),
                objects: sum(&|w| &w.cache_objects),
                bytes: sum(&|w| &w.cache_bytes),
                not_kept: sum(&|w| &w.cache_not_kept),
                keeping: sum(&|w| &w.cache_keeping),
            },
            bytes: ByteCounts {
                to_clients: sum(&|w| &w.bytes_to_clients),
                copy: sum(&|w| &w.bytes_copy),
                splice: sum(&|w| &w.bytes_splice),
                tee: sum(&|w| &w.bytes_tee),
                hit: sum(&|w| &w.bytes_hit),
            },
            transfers: TransferCounts {
                copied: sum(&|w| &w.copied),
                spliced: sum(&|w| &w.spliced),
                spliced_keep: sum(&|w| &w.spliced_keep),
                spliced_release: sum(&|w| &w.spliced_release),
                no_pipe: sum(&|w| &w.no_pipe),
            },
            pipes: PipeStats {
                created: sum(&|w| &w.pipes_created),
                open: sum(&|w| &w.pipes_open),
                idle: sum(&|w| &w.pipes_idle),
                max_open: sum(&|w| &w.pipes_max_open),
                closed_with_data: sum(&|w| &w.pipes_closed_with_data),
                not_grown: sum(&|w| &w.pipes_not_grown),
            },
            events: EventCounts {
                waits,
                events,
                per_wait: ratio(events, waits),
                discarded: sum(&|w| &w.poller.discarded),
                interest_changes: sum(&|w| &w.poller.interest_changes),
                interest_changes_free: sum(&|w| &w.poller.interest_changes_free),
                batches: sum(&|w| &w.poller.batches),
                waits_from_memory: sum(&|w| &w.poller.waits_from_memory),
                waits_from_kernel: sum(&|w| &w.poller.waits_from_kernel),
            },
            syscalls,
            syscalls_total: sys.total_calls(),
            syscalls_per_request: ratio(sys.total_calls(), requests),
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
            "evlab proxy: {} forwarding by {} ({} worker(s)), up {:.1} s\n{}  \
             cache: {} hits ({} answered 304), {} misses, {} bypassed, {} stored, {} objects, {} bytes\n  \
             origin: {} connects, {} reused, {} retries, {} errors\n  \
             body bytes: copy {} splice {} tee {} hit {}  (bodies: {} copied, {} spliced, {} spliced+tee, {} spliced through a pipe sized for them, {} copied for want of a pipe)\n  \
             syscalls ({} total, {:.2} per request):\n",
            v.mechanism,
            v.forward,
            v.workers,
            v.uptime_s,
            traffic_lines(
                v.connections.accepted,
                v.connections.closed,
                v.connections.max_active,
                v.requests,
                &v.responses
            ),
            v.cache.hits,
            v.cache.not_modified,
            v.cache.misses,
            v.cache.bypassed,
            v.cache.stored,
            v.cache.objects,
            v.cache.bytes,
            v.origin.connects,
            v.origin.reused,
            v.origin.retries,
            v.origin.errors,
            v.bytes.copy,
            v.bytes.splice,
            v.bytes.tee,
            v.bytes.hit,
            v.transfers.copied,
            v.transfers.spliced,
            v.transfers.spliced_keep,
            v.transfers.spliced_release,
            v.transfers.no_pipe,
            v.syscalls_total,
            v.syscalls_per_request,
        );
        for (name, c) in &v.syscalls {
            out.push_str(&format!(
                "    {name:<16} {:>12} calls {:>10} errors\n",
                c.calls, c.errors
            ));
        }
        out
    }
}
