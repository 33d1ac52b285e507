//! What a point reads of its server besides the load's report: `GET /.evlab/stats` and the
//! difference of two, the context switches of its threads (/proc), and the CPU time of the
//! reaped children.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use crate::run::procs;
use evlab_reason::model::load::{self, ServerStats};
use evlab_reason::model::results::{ServerCounters, SyscallRow};
use evlab_reason::LabError;
use evlab_wire::server::WorkerCounts;

/// Context switches, voluntary and involuntary, of every thread of `pid` and its descendants
/// (from `/proc/PID/task/TID/status`: the process-wide `/proc/PID/status` counts only its main
/// thread). None when nothing could be read.
pub fn ctx_switches(pid: u32) -> Option<u64> {
    let mut total = 0u64;
    let mut any = false;
    for p in procs::process_tree(pid) {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Ok(text) = std::fs::read_to_string(t.path().join("status")) else {
                continue;
            };
            if let Some(n) = status_ctx_switches(&text) {
                total += n;
                any = true;
            }
        }
    }
    any.then_some(total)
}

/// `voluntary_ctxt_switches` + `nonvoluntary_ctxt_switches` of a `/proc/…/status` text.
pub(crate) fn status_ctx_switches(status: &str) -> Option<u64> {
    let field = |name: &str| {
        status.lines().find_map(|l| {
            l.strip_prefix(name)?
                .strip_prefix(':')?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    Some(field("voluntary_ctxt_switches")? + field("nonvoluntary_ctxt_switches")?)
}

pub(crate) fn children_cpu_seconds() -> f64 {
    evlab_sys::getrusage(evlab_sys::Who::Children).map_or(0.0, |u| u.cpu.total().as_secs_f64())
}

pub(crate) fn fetch_stats(addr: SocketAddr) -> Result<ServerStats, LabError> {
    let (code, body) = procs::http_get(addr, "/.evlab/stats", Duration::from_secs(5))
        .map_err(|e| LabError::Point(format!("GET /.evlab/stats: {e}")))?;
    if code != 200 {
        return Err(LabError::Point(format!(
            "GET /.evlab/stats answered {code} (was the server started with --stats?)"
        )));
    }
    load::parse_server_stats(&body)
}

/// The server's counters over the measured run: after − before (the stats requests themselves
/// are one request each, negligible against thousands). A syscall first made during the run
/// has no row before it.
pub fn counters_delta(a: &ServerStats, b: &ServerStats) -> ServerCounters {
    let mut syscalls = BTreeMap::new();
    for (name, row) in &b.syscalls {
        let before = a.syscalls.get(name);
        let r = SyscallRow {
            calls: row.calls.saturating_sub(before.map_or(0, |r| r.calls)),
            errors: row.errors.saturating_sub(before.map_or(0, |r| r.errors)),
            ns: row
                .ns
                .map(|ns| ns.saturating_sub(before.and_then(|r| r.ns).unwrap_or(0))),
        };
        if r.calls > 0 {
            syscalls.insert(name.clone(), r);
        }
    }
    ServerCounters {
        requests: b.requests.saturating_sub(a.requests),
        accepted: b
            .connections
            .accepted
            .saturating_sub(a.connections.accepted),
        waits: b.events.waits.saturating_sub(a.events.waits),
        // Counted by the readiness engine only: none where the server counted none.
        waits_with_events: (b.events.waits_with_events > 0).then(|| {
            b.events
                .waits_with_events
                .saturating_sub(a.events.waits_with_events)
        }),
        events: b.events.events.saturating_sub(a.events.events),
        discarded: b.events.discarded.saturating_sub(a.events.discarded),
        interest_changes: b
            .events
            .interest_changes
            .saturating_sub(a.events.interest_changes),
        max_active: b.connections.max_active,
        syscalls,
        per_worker_accepted: per_worker_delta(a, b, |w| w.accepted),
        per_worker_accept_wakeups: per_worker_delta(a, b, |w| w.accept_wakeups),
        per_worker_accept_empty: per_worker_delta(a, b, |w| w.accept_empty),
    }
}

/// A per-worker counter over the run, worker by worker (a worker first seen after `a` from 0).
pub(crate) fn per_worker_delta(
    a: &ServerStats,
    b: &ServerStats,
    f: fn(&WorkerCounts) -> u64,
) -> Vec<u64> {
    b.per_worker
        .iter()
        .map(|w| {
            let before = a
                .per_worker
                .iter()
                .find(|x| x.worker == w.worker)
                .map_or(0, f);
            f(w).saturating_sub(before)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stats as `evlab serve --profile` answers them before any worker started.
    const NO_WORKERS: &str = r#"{"server":"evlab","version":"0.1.0","mechanism":"poll","workers":0,
            "uptime_s":0.000011297,"profile":true,"connections":{"accepted":0,"closed":0,"active":0,
            "max_active":0,"accept_pauses":0,"accept_errors":0,"header_timeouts":0,"send_timeouts":0,
            "io_errors":0},"timers":{"entries":0,"max_entries":0,"delayed":0},"memory":{
            "pool_bytes":0,"pool_buffers":0,"spare_shells":0,"table_slots":0},"requests":0,
            "responses":{"1xx":0,"2xx":0,"3xx":0,"4xx":0,"5xx":0},"bytes_sent":0,"events":{
            "waits":0,"events":0,"per_wait":0.0,"discarded":0,"interest_changes":0,
            "interest_changes_free":0,"batches":0,"changes_per_batch":0.0,"waits_from_memory":0,
            "waits_from_kernel":0,"cancels":0,"overflows":0},"syscalls":{},"syscalls_total":0,
            "syscalls_per_request":0.0,"per_worker":[]}"#;

    /// Those stats with the counters the test sets, read back as the lab reads them.
    fn stats(
        requests: u64,
        waits: u64,
        events: u64,
        rows: &[(&str, u64, u64, u64)],
    ) -> ServerStats {
        let mut s = load::parse_server_stats(NO_WORKERS).unwrap();
        s.requests = requests;
        s.events.waits = waits;
        s.events.events = events;
        s.connections.max_active = 7;
        s.syscalls = rows
            .iter()
            .map(|&(name, calls, errors, ns)| {
                let row = evlab_wire::SyscallCount {
                    calls,
                    errors,
                    would_block: 0,
                    ns: Some(ns),
                    share: Some(0.5),
                };
                (name.to_string(), row)
            })
            .collect();
        load::parse_server_stats(&serde_json::to_string(&s).unwrap()).unwrap()
    }

    #[test]
    fn counter_deltas() {
        let a = stats(10, 5, 9, &[("read", 10, 0, 100), ("open", 3, 0, 30)]);
        let b = stats(
            110,
            55,
            109,
            &[
                ("read", 110, 1, 1100),
                ("open", 3, 0, 30),
                ("close", 100, 0, 50),
            ],
        );
        let c = counters_delta(&a, &b);
        assert_eq!(c.requests, 100);
        assert_eq!(c.waits, 50);
        assert_eq!(c.events, 100);
        assert_eq!(c.max_active, 7);
        assert_eq!(c.syscalls["read"].calls, 100);
        assert_eq!(c.syscalls["read"].errors, 1);
        assert_eq!(c.syscalls["read"].ns, Some(1000));
        assert_eq!(c.syscalls["close"].ns, Some(50));
        assert!(!c.syscalls.contains_key("open"));
        assert_eq!(c.syscalls_total(), 200);
        // Not counted by this server (a completion engine, or one before the counter): none.
        assert_eq!(c.waits_with_events, None);
        assert_eq!(c.useful_wait_share(), None);
        let (mut a, mut b) = (a, b);
        a.events.waits_with_events = 4;
        b.events.waits_with_events = 9;
        let c = counters_delta(&a, &b);
        assert_eq!(c.waits_with_events, Some(5));
        assert_eq!(c.useful_wait_share(), Some(0.1));
    }

    #[test]
    fn per_worker_accepts_are_deltas_by_worker() {
        let worker = |worker: usize, accepted: u64| evlab_wire::server::WorkerCounts {
            worker,
            accepted,
            requests: accepted,
            active: 0,
            waits: 0,
            pid: None,
            // Woken once per connection, and once in ten for nothing.
            accept_wakeups: accepted + accepted / 10,
            accept_empty: accepted / 10,
            accept_eagain: accepted,
        };
        let mut a = stats(0, 0, 0, &[]);
        a.per_worker = vec![worker(0, 10), worker(1, 3)];
        let mut b = stats(0, 0, 0, &[]);
        b.per_worker = vec![worker(0, 110), worker(1, 3), worker(2, 50)];
        b.connections.accepted = 150;
        let c = counters_delta(&a, &b);
        assert_eq!(c.per_worker_accepted, [100, 0, 50]);
        // The busiest worker took 100 of 150 over 3 workers: 2× the mean.
        assert_eq!(c.accept_imbalance(), Some(2.0));
        assert_eq!(c.per_worker_accept_wakeups, [110, 0, 55]);
        assert_eq!(c.per_worker_accept_empty, [10, 0, 5]);
        assert_eq!(c.accept_wakeups_per_conn(), Some(1.1));
        assert_eq!(c.empty_wakeups_per_conn(), Some(0.1));
    }

    #[test]
    fn context_switches_are_read_from_every_thread() {
        let status = "Name:\tevlab\nThreads:\t3\nvoluntary_ctxt_switches:\t120\n\
                          nonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(status_ctx_switches(status), Some(127));
        assert_eq!(status_ctx_switches("Name:\tx\n"), None);
        // This test process: its threads have switched at least once, and the count only grows.
        let me = std::process::id();
        let a = ctx_switches(me).expect("readable");
        std::thread::sleep(Duration::from_millis(5));
        let b = ctx_switches(me).expect("readable");
        assert!(a > 0 && b > a, "{a} then {b}");
    }

    #[test]
    fn stats_missing_a_field_are_an_error_that_names_it() {
        let s = stats(1, 1, 1, &[]);
        // Raw on purpose: a document the type cannot write, one field short.
        let mut v = serde_json::to_value(&s).unwrap();
        v["events"].as_object_mut().unwrap().remove("waits");
        let e = load::parse_server_stats(&v.to_string()).unwrap_err();
        assert!(e.to_string().contains("missing field `waits`"), "{e}");
    }
}
