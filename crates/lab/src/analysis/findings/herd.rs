//! The Linux Scalability Project's accept herd under load (`herd-serve`): a shared listener
//! against EPOLLEXCLUSIVE and against SO_REUSEPORT at the most workers, CPU per reply and
//! context switches per connection, each by its pre-registered rule (`analysis::rules`).
//! The throughput rule is withdrawn (its history says why): no finding restates the CPU one.

use super::common::*;
use crate::analysis::rules::rule;
use crate::model::results::{PointResult, Summary};

/// A series' accept mode: the value of its `--accept-mode` flag (the server's default, `shared`,
/// without one).
pub fn accept_mode(flags: &[String]) -> String {
    flags
        .windows(2)
        .find(|w| w[0] == "--accept-mode")
        .map(|w| w[1].clone())
        .unwrap_or_else(|| "shared".into())
}

fn cpu(p: &PointResult) -> Option<f64> {
    p.server_cpu_us_per_reply
}

fn ctx(p: &PointResult) -> Option<f64> {
    p.ctx_switches_per_conn()
}

/// The herd's findings: for each other accept mode the run has, shared against it, at the
/// most workers both were measured with.
pub(super) fn findings(s: &Summary) -> Vec<Finding> {
    let label = |mode: &str| {
        s.series
            .iter()
            .find(|x| accept_mode(&x.flags) == mode)
            .map(|x| x.label.as_str())
    };
    let Some(shared) = label("shared") else {
        return Vec::new();
    };
    let idle = s.idle_counts().into_iter().min().unwrap_or(0);
    let mut out = Vec::new();
    for (mode, cpu_id, ctx_id) in [
        (
            "exclusive",
            "herd-cpu-vs-exclusive",
            "herd-wakeups-vs-exclusive",
        ),
        (
            "reuseport",
            "herd-cpu-vs-reuseport",
            "herd-wakeups-vs-reuseport",
        ),
    ] {
        let Some(other) = label(mode) else {
            continue;
        };
        let a = Side {
            series: shared,
            idle,
        };
        let b = Side {
            series: other,
            idle,
        };
        let n = most_swept(s, &[&a, &b]);
        out.push(judge_swept(s, rule(cpu_id), (a, b), n, &cpu, "µs/reply"));
        out.push(judge_swept(
            s,
            rule(ctx_id),
            (a, b),
            n,
            &ctx,
            "switches/connection",
        ));
    }
    out
}
