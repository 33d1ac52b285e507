//! The μserver paper's Table 1 and what its text draws from it (Gammo et al., OLS 2004, §5):
//! where the server's time and calls go with each mechanism, with no idle connections at the
//! highest offered rate (the paper profiled past saturation), each comparison decided by its
//! pre-registered rule (`analysis::rules`). The shares of time need a profiled run
//! (`profile = true`: every syscall timed); the calls and the waits are the server's counters.

use super::common::*;
use crate::analysis::rules::rule;
use crate::model::results::{PointResult, Summary};

/// Calls of `calls` per request at a point (from the server's own counters).
fn per_request(p: &PointResult, calls: &[&str]) -> Option<f64> {
    let c = p.server.as_ref()?;
    if c.requests == 0 {
        return None;
    }
    let n: u64 = calls
        .iter()
        .filter_map(|k| c.syscalls.get(*k).map(|r| r.calls))
        .sum();
    Some(n as f64 / c.requests as f64)
}

/// The share of the measured run's wall time the server spent inside `calls` together
/// (profiled runs only; `PointResult::syscall_share`): a call it never made counts nothing,
/// and none of them timed gives none.
fn share(p: &PointResult, calls: &[&str]) -> Option<f64> {
    let timed: Vec<f64> = calls.iter().filter_map(|c| p.syscall_share(c)).collect();
    (!timed.is_empty()).then(|| timed.iter().sum())
}

/// The calls a series' mechanism tells the kernel its interest and gets its events with, by its
/// label (Table 1's "equivalent functions"): epoll-ctlv's batches of changes, and where the
/// kernel has IORING_OP_EPOLL_WAIT its wait too, go by io_uring_enter.
fn event_calls(series: &str) -> &'static [&'static str] {
    match series {
        "select" => &["select"],
        "poll" => &["poll"],
        "epoll-ctlv" => &["epoll_ctl", "io_uring_enter", "epoll_wait"],
        _ => &["epoll_ctl", "epoll_wait"],
    }
}

/// Table 1's findings, where the run has the series each needs (by label, with no idle
/// connections): epoll-lt, against which most are read, and the others.
pub(super) fn findings(s: &Summary, level: f64, out: &mut Vec<Finding>) {
    let has = |m: &str| s.points.iter().any(|p| p.series == m && p.idle == 0);
    if !has("epoll-lt") {
        return;
    }
    let side = |series| Side { series, idle: 0 };
    let lt = side("epoll-lt");
    let profiled = s.points.iter().any(|p| share(p, &["epoll_ctl"]).is_some());
    if profiled {
        shares((s, level), out, &has);
    }
    if has("epoll-ctlv") {
        // Only epoll-ctlv's own series makes io_uring_enter calls; for epoll-lt the sum is
        // its epoll_ctl calls alone.
        let calls = |p: &PointResult| per_request(p, &["epoll_ctl", "io_uring_enter"]);
        let id = rule("table1-epoll-ctlv-calls");
        out.push(judge(
            (s, level),
            id,
            side("epoll-ctlv"),
            lt,
            &calls,
            "calls/request",
        ));
    }
    if !has("epoll2") {
        return;
    }
    let e2 = side("epoll2");
    let waits = |p: &PointResult| per_request(p, &["epoll_wait"]);
    let id = rule("table1-epoll2-waits");
    out.push(judge((s, level), id, e2, lt, &waits, "calls/request"));
    let returned = |p: &PointResult| p.server.as_ref()?.returned_per_wait();
    let id = rule("table1-epoll2-fewer-per-wait");
    out.push(judge((s, level), id, e2, lt, &returned, "descriptors/wait"));
    // The count of waits with events is a server's of 2026-12-06 on: judged where it was kept.
    let useful = |p: &PointResult| Some(100.0 * p.server.as_ref()?.useful_wait_share()?);
    let counted = s
        .points
        .iter()
        .any(|p| p.series == "epoll2" && useful(p).is_some());
    if counted {
        let id = rule("table1-epoll2-useful-waits");
        out.push(judge_value((s, level), id, e2, &useful, "% of waits"));
    }
}

/// Table 1's shares of the run's wall time, in a profiled run with epoll-lt.
fn shares((s, level): (&Summary, f64), out: &mut Vec<Finding>, has: &dyn Fn(&str) -> bool) {
    const UNIT: &str = "of the run's wall time";
    let side = |series| Side { series, idle: 0 };
    let lt = side("epoll-lt");
    let ctl = |p: &PointResult| share(p, &["epoll_ctl"]);
    for (m, id) in [
        ("epoll-et", "table1-epoll-et-epoll-ctl"),
        ("epoll2", "table1-epoll2-epoll-ctl"),
    ] {
        if has(m) {
            out.push(judge((s, level), rule(id), side(m), lt, &ctl, UNIT));
        }
    }
    let events = |p: &PointResult| share(p, event_calls(&p.series));
    if has("select") && has("poll") {
        let id = rule("table1-select-as-poll");
        out.push(judge(
            (s, level),
            id,
            side("select"),
            side("poll"),
            &events,
            UNIT,
        ));
    }
    if has("select") {
        for m in ["epoll-lt", "epoll-ctlv", "epoll2"]
            .into_iter()
            .filter(|m| has(m))
        {
            let id = rule("table1-epoll-events-above-select");
            out.push(judge(
                (s, level),
                id,
                side(m),
                side("select"),
                &events,
                UNIT,
            ));
        }
    }
    if has("epoll2") {
        let wait = |p: &PointResult| share(p, &["epoll_wait"]);
        let e2 = side("epoll2");
        out.push(judge(
            (s, level),
            rule("table1-epoll2-wait-time"),
            e2,
            lt,
            &wait,
            UNIT,
        ));
        let id = rule("table1-epoll2-events-as-lt");
        out.push(judge((s, level), id, e2, lt, &events, UNIT));
    }
}
