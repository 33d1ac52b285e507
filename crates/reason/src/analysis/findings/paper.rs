//! The μserver paper's findings (Gammo et al., OLS 2004): Figures 1-7 (Table 1's are in
//! `table1`), each decided by its pre-registered rule (`analysis::rules`) on the trials of two
//! arms.

use super::common::*;
use crate::analysis::rules::rule;
use crate::model::results::{PointResult, Summary};
use crate::model::spec::POSITIVE_CONTROL;

/// Replies per second of a point.
fn replies(p: &PointResult) -> Option<f64> {
    p.reply_rate()
}

fn cpu_per_reply(p: &PointResult) -> Option<f64> {
    p.server_cpu_us_per_reply
}

pub(super) fn findings(s: &Summary, level: f64) -> Vec<Finding> {
    let mut out = Vec::new();
    let has = |m: &str, idle: usize| s.points.iter().any(|p| p.series == m && p.idle == idle);
    let side = |series, idle| Side { series, idle };
    // Figures 1-4: with no idle connections, against epoll-LT.
    for (m, id) in [
        ("select", "fig1-select-as-epoll-lt"),
        ("poll", "fig1-poll-as-epoll-lt"),
        ("epoll-et", "fig3-epoll-et-no-gain"),
        ("epoll2", "fig3-epoll2-no-gain"),
        ("epoll-ctlv", "fig3-epoll-ctlv-no-gain"),
    ] {
        if has(m, 0) && has("epoll-lt", 0) {
            out.push(judge(
                (s, level),
                rule(id),
                side(m, 0),
                side("epoll-lt", 0),
                &replies,
                "replies/s",
            ));
        }
    }
    // Figures 5-6: each idle count against none.
    for idle in s.idle_counts().into_iter().filter(|&i| i > 0) {
        for (m, id, f, unit) in [
            (
                "select",
                "fig5-select-replies",
                replies as fn(&PointResult) -> Option<f64>,
                "replies/s",
            ),
            ("poll", "fig5-poll-replies", replies, "replies/s"),
            ("epoll2", "fig5-epoll2-replies", replies, "replies/s"),
            ("epoll-lt", "fig5-epoll-lt-slight", replies, "replies/s"),
            ("epoll-et", "fig5-epoll-et-unaffected", replies, "replies/s"),
            ("select", "fig5-select-cpu", cpu_per_reply, "µs/reply"),
            ("poll", "fig5-poll-cpu", cpu_per_reply, "µs/reply"),
        ] {
            if has(m, 0) && has(m, idle) {
                out.push(judge(
                    (s, level),
                    rule(id),
                    side(m, idle),
                    side(m, 0),
                    &f,
                    unit,
                ));
            }
        }
    }
    // Figures 5-6 across mechanisms: select and poll against epoll-lt, both with the idle
    // connections.
    for idle in s.idle_counts().into_iter().filter(|&i| i > 0) {
        for (m, id) in [
            ("select", "fig5-select-below-epoll-lt"),
            ("poll", "fig5-poll-below-epoll-lt"),
        ] {
            if has(m, idle) && has("epoll-lt", idle) {
                out.push(judge(
                    (s, level),
                    rule(id),
                    side(m, idle),
                    side("epoll-lt", idle),
                    &replies,
                    "replies/s",
                ));
            }
        }
    }
    accept_limit(s, level, &mut out);
    super::table1::findings(s, level, &mut out);
    negative_control(s, level, &mut out);
    for idle in s.idle_counts().into_iter().filter(|&i| i > 0) {
        if has(POSITIVE_CONTROL, idle) {
            out.push(judge(
                (s, level),
                rule("control-positive"),
                side(POSITIVE_CONTROL, idle),
                side(POSITIVE_CONTROL, 0),
                &cpu_per_reply,
                "µs/reply",
            ));
        }
    }
    out
}

/// The negative control of the equivalence rules: a series on its own, smaller budget against
/// the series of its mechanism on the experiment's (the report says whether it passed).
fn negative_control(s: &Summary, level: f64, out: &mut Vec<Finding>) {
    let e = &s.experiment;
    for c in s
        .series
        .iter()
        .filter(|x| e.series_budget(&x.label).is_some())
    {
        let reference = s
            .series
            .iter()
            .filter(|x| e.series_budget(&x.label).is_none())
            .find(|x| x.label == c.mechanism)
            .or_else(|| {
                s.series
                    .iter()
                    .filter(|x| e.series_budget(&x.label).is_none())
                    .find(|x| x.mechanism == c.mechanism && x.flags == c.flags)
            });
        if let Some(b) = reference {
            out.push(judge(
                (s, level),
                rule("control-budget-not-equivalent"),
                Side {
                    series: &c.label,
                    idle: 0,
                },
                Side {
                    series: &b.label,
                    idle: 0,
                },
                &replies,
                "replies/s",
            ));
        }
    }
}

/// Whether a series' flags set a finite `--accept-limit`.
fn limited(flags: &[String]) -> bool {
    flags
        .windows(2)
        .any(|w| w[0] == "--accept-limit" && w[1] != "inf")
}

/// Figure 7: per mechanism, a series with a finite accept-limit against one without
/// (epoll-lt's and epoll-ctlv's gain, epoll-et's none), and epoll-lt with its limit against
/// select; a series on a budget of its own (the negative control) is none of them.
fn accept_limit(s: &Summary, level: f64, out: &mut Vec<Finding>) {
    let e = &s.experiment;
    let arms = || {
        s.series
            .iter()
            .filter(|x| e.series_budget(&x.label).is_none())
    };
    let of = |m: &str, lim: bool| {
        arms().find(|x| {
            let x = e.labelled(x);
            x.mechanism == m && limited(&x.flags) == lim
        })
    };
    let no_idle = |series| Side { series, idle: 0 };
    for (m, id) in [
        ("epoll-lt", "fig7-accept-limit"),
        ("epoll-ctlv", "fig7-accept-limit"),
        ("epoll-et", "fig7-epoll-et-no-gain"),
    ] {
        if let (Some(a), Some(b)) = (of(m, true), of(m, false)) {
            let (a, b) = (no_idle(&a.label), no_idle(&b.label));
            out.push(judge((s, level), rule(id), a, b, &replies, "replies/s"));
        }
    }
    // The rule's select is the one fig7-accept-limit runs with its limit of 10 (the run also has
    // select without one, from its `mechanisms`); any select where none has a limit.
    let select = of("select", true).or_else(|| of("select", false));
    if let (Some(a), Some(b)) = (of("epoll-lt", true), select) {
        let (a, b) = (no_idle(&a.label), no_idle(&b.label));
        out.push(judge(
            (s, level),
            rule("fig7-epoll-lt-matches-select"),
            a,
            b,
            &replies,
            "replies/s",
        ));
    }
}

/// The point used for a series' syscall profile: the highest offered rate measured with no
/// (or the fewest) idle connections — the paper profiled at 22,000 requests/s, past saturation.
pub fn profile_point<'a>(s: &'a Summary, series: &str) -> Option<&'a PointResult> {
    let min_idle = s.idle_counts().into_iter().min().unwrap_or(0);
    s.points
        .iter()
        .filter(|p| p.valid() && p.series == series && p.idle == min_idle && p.server.is_some())
        .max_by(|a, b| a.rate.total_cmp(&b.rate).then(b.index.cmp(&a.index)))
}
