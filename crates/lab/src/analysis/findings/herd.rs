//! The Linux Scalability Project's accept herd under load (`herd-serve`).

use super::common::*;
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

/// A shared listener's cost must exceed the others' by this share to count as the herd's.
pub const HERD_COST: f64 = 0.10;
/// Context switches per connection of a shared listener against the others' at which workers
/// are woken for nothing.
pub const HERD_WAKEUPS: f64 = 1.5;

/// The Linux Scalability Project's accept macro-benchmark, on the μserver: N workers on one
/// port in each accept mode, a connection per request at a rate past capacity. The seed's
/// finding: with many processes accepting on one port, waking them all costs throughput (its
/// wake-one patch raised the reply rate by about 50%). Judged at the largest worker count every
/// mode measured validly, between `shared` (every worker's epoll holds the one listener) and
/// `exclusive` (EPOLLEXCLUSIVE) and `reuseport`.
pub(super) fn findings(s: &Summary) -> Vec<Finding> {
    let series: Vec<(String, String)> = s
        .series
        .iter()
        .map(|x| (x.label.clone(), accept_mode(&x.flags)))
        .collect();
    let Some((shared, _)) = series.iter().find(|x| x.1 == "shared").cloned() else {
        return vec![];
    };
    let others: Vec<(String, String)> =
        series.iter().filter(|x| x.1 != "shared").cloned().collect();
    if others.is_empty() {
        return vec![];
    }
    // Mean over the valid trials of `label` at `n` workers.
    let mean_at = |label: &str, n: f64, f: &dyn Fn(&PointResult) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = s
            .points
            .iter()
            .filter(|p| p.valid() && p.series == label && p.swept_value() == Some(n))
            .filter_map(f)
            .filter(|v| v.is_finite())
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let mut ns: Vec<f64> = s.points.iter().filter_map(|p| p.swept_value()).collect();
    ns.sort_by(f64::total_cmp);
    ns.dedup();
    let replies = |p: &PointResult| p.reply_rate();
    let cpu = |p: &PointResult| p.server_cpu_us_per_reply;
    let ctx = |p: &PointResult| p.ctx_switches_per_conn();
    let balance = |p: &PointResult| p.accept_imbalance();
    // The most workers at which every mode has a valid value of `f`.
    let top = |f: &dyn Fn(&PointResult) -> Option<f64>| {
        ns.iter().rev().copied().find(|&n| {
            series
                .iter()
                .all(|(label, _)| mean_at(label, n, f).is_some())
        })
    };
    let n_words = |n: f64| {
        let n = crate::model::spec::SweepSpec::arg(n);
        if n == "1" {
            "1 worker".to_string()
        } else {
            format!("{n} workers")
        }
    };
    let fmt = |v: f64, digits: usize| {
        if digits == 0 {
            k(v)
        } else {
            format!("{v:.digits$}")
        }
    };
    // "shared 4,100, exclusive 5,000 (shared −18%), …" at `n`.
    let at_as =
        |n: f64, f: &dyn Fn(&PointResult) -> Option<f64>, digits: usize, compare: bool| -> String {
            let base = mean_at(&shared, n, f);
            let mut parts = vec![format!(
                "{shared} {}",
                base.map_or("no valid point".into(), |v| fmt(v, digits))
            )];
            for (label, _) in &others {
                parts.push(match (mean_at(label, n, f), base) {
                    (Some(v), Some(b)) if v > 0.0 && compare => format!(
                        "{label} {} (shared {:+.0}%)",
                        fmt(v, digits),
                        (b / v - 1.0) * 100.0
                    ),
                    (Some(v), _) => format!("{label} {}", fmt(v, digits)),
                    (None, _) => format!("{label} no valid point"),
                });
            }
            parts.join(", ")
        };
    let at =
        |n: f64, f: &dyn Fn(&PointResult) -> Option<f64>, digits: usize| at_as(n, f, digits, true);
    // Per series, the values at every worker count: the figure as text.
    let curve = |f: &dyn Fn(&PointResult) -> Option<f64>, digits: usize| -> String {
        series
            .iter()
            .map(|(label, _)| {
                let v: Vec<String> = ns
                    .iter()
                    .map(|&n| {
                        format!(
                            "{}: {}",
                            crate::model::spec::SweepSpec::arg(n),
                            mean_at(label, n, f).map_or("—".into(), |v| fmt(v, digits))
                        )
                    })
                    .collect();
                format!("{label} [{}]", v.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    // Verdict: the shared listener is worse than each other mode by more than `limit`
    // (`worse(shared, other)` says by how much, as a share).
    let judge = |n: Option<f64>,
                 f: &dyn Fn(&PointResult) -> Option<f64>,
                 worse: &dyn Fn(f64, f64) -> f64,
                 limit: f64| {
        let Some(n) = n.filter(|&n| n >= 4.0) else {
            return Verdict::Inconclusive;
        };
        let Some(b) = mean_at(&shared, n, f) else {
            return Verdict::Inconclusive;
        };
        let hits = others
            .iter()
            .filter(|(label, _)| mean_at(label, n, f).is_some_and(|v| worse(b, v) >= limit))
            .count();
        match hits {
            0 => Verdict::NotReproduced,
            h if h == others.len() => Verdict::Reproduced,
            _ => Verdict::Partly,
        }
    };
    let few = |n: Option<f64>| match n {
        Some(n) if n >= 4.0 => String::new(),
        Some(n) => format!("; only up to {} measured validly by every mode", n_words(n)),
        None => "; no worker count measured validly by every mode".into(),
    };
    let first = ns.first().copied();
    let mut out = Vec::new();
    // "EPOLLEXCLUSIVE and SO_REUSEPORT": the other modes measured, by their kernel names.
    let names: Vec<&str> = others
        .iter()
        .map(|(label, mode)| match mode.as_str() {
            "exclusive" => "EPOLLEXCLUSIVE",
            "reuseport" => "SO_REUSEPORT",
            _ => label.as_str(),
        })
        .collect();
    let them = match names.as_slice() {
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
        [] => String::new(),
    };

    // Below capacity every mode answers the offered rate, and the herd's cost is CPU: the
    // capacity each mode has at the server's CPU budget is then the budget over its CPU per
    // reply (a CPU-bound server's capacity). Past capacity, the reply rate is the capacity.
    let budget = match s.experiment.server_cpu_budget {
        Some(crate::model::spec::Budget::Share(b)) if b > 0.0 => Some(b),
        _ => None,
    };
    let kept_up = |p: &PointResult| p.reply_rate().is_some_and(|r| r >= 0.97 * p.rate);
    let n = top(&replies);
    let all_kept_up = n.is_some_and(|n| {
        s.points
            .iter()
            .filter(|p| p.valid() && p.swept_value() == Some(n))
            .all(kept_up)
    });
    let implied = move |p: &PointResult| -> Option<f64> {
        let cpu = p.server_cpu_us_per_reply.filter(|c| *c > 0.0)?;
        Some(budget? * 1e6 / cpu)
    };
    type Value<'a> = &'a dyn Fn(&PointResult) -> Option<f64>;
    let (capacity, what): (Value, String) = match (all_kept_up, budget) {
        (true, Some(b)) => (
            &implied,
            format!(
                "every mode answered the offered rate at {}, so the reply rates are equal; \
                     the capacity each has at its CPU budget ({b} of a CPU ÷ CPU per reply), \
                     replies/s",
                n.map_or("—".into(), n_words)
            ),
        ),
        _ => (&replies, "replies/s".to_string()),
    };
    let n = if all_kept_up && budget.is_some() {
        top(capacity)
    } else {
        n
    };
    out.push(Finding {
        rule: String::new(),
        source: "LSP accept scalability (CITI TR 99-4), macro-benchmark".into(),
        claim: format!(
            "the accept herd costs a web server throughput with many workers on one port (seed: \
             +50% reply rate with wake-one): at the most workers measured, a shared listener \
             answers ≥ {:.0}% fewer replies/s than {them}",
            HERD_COST * 100.0
        ),
        verdict: judge(n, capacity, &|b, v| 1.0 - b / v, HERD_COST),
        evidence: format!(
            "{what} at {}: {}; at {}: {}; by workers: {}{}",
            n.map_or("—".into(), n_words),
            n.map_or("—".into(), |n| at(n, capacity, 0)),
            first.map_or("—".into(), n_words),
            first.map_or("—".into(), |n| at(n, capacity, 0)),
            curve(capacity, 0),
            few(n)
        ),
    });
    let n = top(&cpu);
    out.push(Finding {
        rule: String::new(),
        source: "LSP accept scalability (CITI TR 99-4), macro-benchmark".into(),
        claim: format!(
            "the herd's wasted wake-ups show as server CPU: at the most workers measured, a \
             shared listener costs ≥ {:.0}% more CPU per reply than {them}",
            HERD_COST * 100.0
        ),
        verdict: judge(n, &cpu, &|b, v| b / v - 1.0, HERD_COST),
        evidence: format!(
            "server CPU µs per reply at {}: {}; at {}: {}{}",
            n.map_or("—".into(), n_words),
            n.map_or("—".into(), |n| at(n, &cpu, 1)),
            first.map_or("—".into(), n_words),
            first.map_or("—".into(), |n| at(n, &cpu, 1)),
            few(n)
        ),
    });
    let n = top(&ctx);
    if n.is_some() || s.points.iter().any(|p| p.server_ctx_switches.is_some()) {
        let nb = top(&balance);
        out.push(Finding {
            rule: String::new(),
            source: "LSP accept scalability (CITI TR 99-4)".into(),
            claim: format!(
                "a shared listener wakes workers for nothing: at the most workers measured, its \
                 server context switches per connection are ≥ {HERD_WAKEUPS}× those of {them}"
            ),
            verdict: judge(n, &ctx, &|b, v| b / v, HERD_WAKEUPS),
            evidence: format!(
                "context switches per connection at {}: {}; at {}: {}; accept balance (busiest \
                 worker ÷ mean, 1 = even) at {}: {}{}",
                n.map_or("—".into(), n_words),
                n.map_or("—".into(), |n| at(n, &ctx, 2)),
                first.map_or("—".into(), n_words),
                first.map_or("—".into(), |n| at(n, &ctx, 2)),
                nb.map_or("—".into(), n_words),
                nb.map_or("—".into(), |n| at_as(n, &balance, 2, false)),
                few(n)
            ),
        });
    }
    out
}
