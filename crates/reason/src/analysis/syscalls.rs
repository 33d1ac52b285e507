//! Where a server's time goes: the paper's Table 1, from the counted syscalls of each series'
//! profile point.

use std::collections::BTreeMap;

use crate::analysis::findings::profile_point;
use crate::model::results::{PointResult, Summary};

/// The order the paper's Table 1 lists system calls in; others follow by share.
pub const PAPER_ROWS: &[&str] = &[
    "read",
    "close",
    "select",
    "poll",
    "epoll_ctl",
    "epoll_wait",
    "io_uring_enter",
    "setsockopt",
    "accept",
    "accept4",
    "write",
    "writev",
    "fcntl",
    "sendfile",
];

/// A series' profile point and, per syscall, (share of the run's wall time, calls per request).
pub type Profile<'a> = (&'a PointResult, BTreeMap<String, (f64, f64)>);

/// For each series (legend order) with profiled syscall times: its profile point and, per
/// syscall, (share of the measured run's wall time spent inside it, calls per request).
/// The calls are timed in wall time (`PointResult::syscall_share`), so the shares of one
/// series add up to at most about 1; the rest is the server's time outside system calls.
pub fn syscall_shares(s: &Summary) -> Vec<Profile<'_>> {
    let mut out = Vec::new();
    for series in &s.series {
        let Some(p) = profile_point(s, &series.label) else {
            continue;
        };
        let (Some(c), Some(wall)) = (&p.server, p.run_wall_s()) else {
            continue;
        };
        if !c.syscalls.values().any(|r| r.ns.is_some()) {
            continue;
        }
        let reqs = c.requests.max(1) as f64;
        let rows = c
            .syscalls
            .iter()
            .map(|(name, r)| {
                (
                    name.clone(),
                    (
                        r.ns.unwrap_or(0) as f64 / (wall * 1e9),
                        r.calls as f64 / reqs,
                    ),
                )
            })
            .collect();
        out.push((p, rows));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::results::{ServerCounters, SyscallRow};

    #[test]
    fn shares_are_of_the_runs_wall_time_and_add_up_to_at_most_all_of_it() {
        // A server on a quarter of a CPU, saturated: 0.5 s of CPU time over a 2 s run, inside
        // its two calls for 1.2 s and 0.7 s of wall time (timed around each call, so the time
        // its budget throttled it inside them counts).
        let mut s = crate::analysis::findings::tests::summary(
            &["epoll-lt"],
            &[0],
            &[8000.0],
            1,
            &|_, _, _, _| 5000.0,
        );
        let p = &mut s.points[0];
        p.server_cpu_s = Some(0.5);
        p.server_cpu_util = Some(0.25);
        let row = |calls, ns| SyscallRow {
            calls,
            ns: Some(ns),
            ..Default::default()
        };
        p.server = Some(ServerCounters {
            requests: 10_000,
            syscalls: [
                ("read".to_string(), row(20_000, 1_200_000_000)),
                ("close".to_string(), row(10_000, 700_000_000)),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        });
        assert_eq!(p.run_wall_s(), Some(2.0));
        let shares = syscall_shares(&s);
        let (_, rows) = &shares[0];
        assert!((rows["read"].0 - 0.60).abs() < 1e-12, "{rows:?}");
        assert!((rows["close"].0 - 0.35).abs() < 1e-12, "{rows:?}");
        assert!((rows["read"].1 - 2.0).abs() < 1e-12, "{rows:?}");
        // All of them: 95% of the run, not 380% (1.9 s of wall time over 0.5 s of CPU time).
        let all: f64 = rows.values().map(|v| v.0).sum();
        assert!((all - 0.95).abs() < 1e-12, "{all}");
        assert_eq!(s.points[0].syscall_share("read"), Some(rows["read"].0));
        // Without the CPU time's share of the run, no share.
        s.points[0].server_cpu_util = None;
        assert!(syscall_shares(&s).is_empty());
    }
}
