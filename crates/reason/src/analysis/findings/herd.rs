//! The Linux Scalability Project's accept herd under load (`herd-serve`): a shared listener
//! against EPOLLEXCLUSIVE and against SO_REUSEPORT at the most workers, CPU per reply and
//! context switches per connection, each by its pre-registered rule (`analysis::rules`), for
//! worker threads and, by rules of their own, for pre-forked worker processes
//! (`--as processes`, the source's Apache). Throughput is judged as each mode's capacity, in a run
//! with a capacity search (herd-capacity); the first throughput rule is withdrawn (its history
//! says why): no finding restates the CPU one.

use super::common::*;
use crate::analysis::rules::rule;
use crate::model::results::{PointResult, Summary};

/// A series' accept mode: the value of its `--accept-mode` flag (the server's default, `shared`,
/// without one).
pub fn accept_mode(flags: &[String]) -> String {
    flag_value(flags, "--accept-mode").unwrap_or_else(|| "shared".into())
}

/// A series' worker model: the value of its `--as` flag (the server's default, `threads`,
/// without one).
pub fn worker_model(flags: &[String]) -> String {
    flag_value(flags, "--as").unwrap_or_else(|| "threads".into())
}

fn flag_value(flags: &[String], flag: &str) -> Option<String> {
    flags
        .windows(2)
        .find(|w| w[0] == flag)
        .map(|w| w[1].clone())
}

fn cpu(p: &PointResult) -> Option<f64> {
    p.server_cpu_us_per_reply
}

fn ctx(p: &PointResult) -> Option<f64> {
    p.ctx_switches_per_conn()
}

fn replies(p: &PointResult) -> Option<f64> {
    p.reply_rate()
}

/// The capacity rule against each other mode, for either worker model: read only where the run
/// searched each series' capacity (`[knee]`).
const CAPACITY_RULES: [(&str, &str); 2] = [
    ("exclusive", "herd-capacity-vs-exclusive"),
    ("reuseport", "herd-capacity-vs-reuseport"),
];

/// The rules of each worker model: (other mode, CPU rule, context-switch rule).
const THREAD_RULES: [(&str, &str, &str); 2] = [
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
];
const PROCESS_RULES: [(&str, &str, &str); 2] = [
    (
        "exclusive",
        "herd-procs-cpu-vs-exclusive",
        "herd-procs-wakeups-vs-exclusive",
    ),
    (
        "reuseport",
        "herd-procs-cpu-vs-reuseport",
        "herd-procs-wakeups-vs-reuseport",
    ),
];

/// The herd's findings: for each worker model the run has, for each other accept mode, shared
/// against it, at the most workers both were measured with.
pub(super) fn findings(s: &Summary, level: f64) -> Vec<Finding> {
    let mut out = Vec::new();
    for (model, rules) in [("threads", THREAD_RULES), ("processes", PROCESS_RULES)] {
        out.extend(model_findings((s, level), model, &rules));
    }
    out
}

fn model_findings(
    (s, level): (&Summary, f64),
    model: &str,
    rules: &[(&str, &str, &str)],
) -> Vec<Finding> {
    let label = |mode: &str| {
        s.series
            .iter()
            .find(|x| {
                let x = s.experiment.labelled(x);
                accept_mode(&x.flags) == mode && worker_model(&x.flags) == model
            })
            .map(|x| x.label.as_str())
    };
    let Some(shared) = label("shared") else {
        return Vec::new();
    };
    let idle = s.idle_counts().into_iter().min().unwrap_or(0);
    let mut out = Vec::new();
    for &(mode, cpu_id, ctx_id) in rules {
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
        out.push(judge_swept(
            (s, level),
            rule(cpu_id),
            (a, b),
            n,
            &cpu,
            "µs/reply",
        ));
        out.push(judge_swept(
            (s, level),
            rule(ctx_id),
            (a, b),
            n,
            &ctx,
            "switches/connection",
        ));
    }
    if s.knees.is_empty() {
        return out;
    }
    for (mode, id) in CAPACITY_RULES {
        if let Some(other) = label(mode) {
            let (a, b) = (
                Side {
                    series: shared,
                    idle,
                },
                Side {
                    series: other,
                    idle,
                },
            );
            out.push(judge((s, level), rule(id), a, b, &replies, "replies/s"));
        }
    }
    out
}
