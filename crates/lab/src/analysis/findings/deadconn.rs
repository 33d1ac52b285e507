//! The LSE epoll page's dead connections (`lse-deadconn`).

use super::common::*;
use crate::analysis::curves::*;
use crate::model::results::Summary;

/// Relative drop of reply rate above which dead connections "cost" a mechanism, and below which
/// they do not.
pub const DEADCONN_COSTS: f64 = 0.20;
pub const DEADCONN_FREE: f64 = 0.10;

/// The LSE page's dphttpd figure (`lse-deadconn`): a fixed set of active connections against a
/// growing number of dead ones. The page's finding: dead connections cost poll, not epoll —
/// poll's reply rate falls as they grow, epoll's stays flat. Judged between no dead connections
/// and the most measured: poll must lose at least 20% and every epoll at most 10%.
pub(super) fn findings(s: &Summary, c: &Curves) -> Vec<Finding> {
    let mut idles = s.idle_counts();
    idles.sort_unstable();
    idles.dedup();
    let (Some(&lo), Some(&hi)) = (idles.first(), idles.last()) else {
        return Vec::new();
    };
    let rate = |m: &str, idle: usize| peak(c, m, idle);
    let drop = |m: &str| match (rate(m, lo), rate(m, hi)) {
        (Some(a), Some(b)) if a > 0.0 => Some(1.0 - b / a),
        _ => None,
    };
    let mut series: Vec<String> = Vec::new();
    for p in &s.points {
        if !series.contains(&p.series) {
            series.push(p.series.clone());
        }
    }
    // Reply rate against dead connections, per series: the page's figure as text.
    let curve = |m: &str| {
        let v: Vec<String> = idles
            .iter()
            .map(|&i| {
                let n = crate::model::text::thousands(i as f64);
                match rate(m, i) {
                    Some(r) => format!("{n}: {}", k(r)),
                    None => format!("{n}: —"),
                }
            })
            .collect();
        format!("{m} [{}]", v.join(", "))
    };
    let evidence = |ms: &[String]| -> String {
        let drops: Vec<String> = ms
            .iter()
            .map(|m| match drop(m) {
                Some(d) => format!("{m} {}", pct(d)),
                None => format!("{m} no valid pair"),
            })
            .collect();
        format!(
            "reply-rate drop from {} to {} dead connections: {}; replies/s by dead connections: {}",
            crate::model::text::thousands(lo as f64),
            crate::model::text::thousands(hi as f64),
            drops.join(", "),
            ms.iter().map(|m| curve(m)).collect::<Vec<_>>().join("; ")
        )
    };
    let epolls: Vec<String> = series
        .iter()
        .filter(|m| m.starts_with("epoll"))
        .cloned()
        .collect();
    let polls: Vec<String> = series
        .iter()
        .filter(|m| *m == "poll" || *m == "select")
        .cloned()
        .collect();
    if lo == hi || epolls.is_empty() || polls.is_empty() {
        return Vec::new();
    }
    let poll_costs = polls
        .iter()
        .map(|m| drop(m))
        .collect::<Option<Vec<f64>>>()
        .map(|v| v.iter().all(|&d| d >= DEADCONN_COSTS));
    let epoll_free = epolls
        .iter()
        .map(|m| drop(m))
        .collect::<Option<Vec<f64>>>()
        .map(|v| v.iter().all(|&d| d <= DEADCONN_FREE));
    let verdict = match (poll_costs, epoll_free) {
        (Some(true), Some(true)) => Verdict::Reproduced,
        (Some(false), Some(false)) => Verdict::NotReproduced,
        (Some(_), Some(_)) => Verdict::Partly,
        _ => Verdict::Inconclusive,
    };
    vec![Finding {
        rule: String::new(),
        source: "LSE epoll page, dphttpd".into(),
        claim: format!(
            "dead connections cost poll, not epoll: from {} to {} dead connections poll's reply \
             rate falls by ≥ {:.0}%, every epoll's by ≤ {:.0}%",
            crate::model::text::thousands(lo as f64),
            crate::model::text::thousands(hi as f64),
            DEADCONN_COSTS * 100.0,
            DEADCONN_FREE * 100.0
        ),
        verdict,
        evidence: evidence(&series),
    }]
}
