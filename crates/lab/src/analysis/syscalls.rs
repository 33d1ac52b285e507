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

/// A series' profile point and, per syscall, (share of server CPU, calls per request).
pub type Profile<'a> = (&'a PointResult, BTreeMap<String, (f64, f64)>);

/// For each series (legend order) with profiled syscall times: its profile point and, per
/// syscall, (share of the server's CPU time, calls per request).
pub fn syscall_shares(s: &Summary) -> Vec<Profile<'_>> {
    let mut out = Vec::new();
    for series in &s.series {
        let Some(p) = profile_point(s, &series.label) else {
            continue;
        };
        let (Some(c), Some(cpu)) = (&p.server, p.server_cpu_s) else {
            continue;
        };
        if cpu <= 0.0 || !c.syscalls.values().any(|r| r.ns.is_some()) {
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
                        r.ns.unwrap_or(0) as f64 / (cpu * 1e9),
                        r.calls as f64 / reqs,
                    ),
                )
            })
            .collect();
        out.push((p, rows));
    }
    out
}
