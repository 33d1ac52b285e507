//! The LSE epoll page's dead connections (`lse-deadconn`): poll's reply rate with the most dead
//! connections against none, and each epoll's, each by its pre-registered rule
//! (`analysis::rules`).

use super::common::*;
use crate::analysis::rules::rule;
use crate::model::results::{PointResult, Summary};

fn replies(p: &PointResult) -> Option<f64> {
    p.reply_rate()
}

/// One finding per poll or epoll series: A = the series with the most dead connections it was
/// measured with, B = the same with none.
pub(super) fn findings(s: &Summary, level: f64) -> Vec<Finding> {
    let mut out = Vec::new();
    for x in &s.series {
        // The condition the label names (a placebo ran another under it).
        let x = &s.experiment.labelled(x);
        let id = match x.mechanism.as_str() {
            "poll" => "deadconn-poll-drops",
            m if m.starts_with("epoll") => "deadconn-epoll-flat",
            _ => continue,
        };
        let most = s
            .points
            .iter()
            .filter(|p| p.ok() && p.series == x.label)
            .map(|p| p.idle)
            .max();
        let Some(most) = most.filter(|&n| n > 0) else {
            continue;
        };
        let side = |idle| Side {
            series: &x.label,
            idle,
        };
        out.push(judge(
            (s, level),
            rule(id),
            side(most),
            side(0),
            &replies,
            "replies/s",
        ));
    }
    out
}
