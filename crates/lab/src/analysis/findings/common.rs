//! What every family of findings shares: the verdict, the finding, and how evidence is written.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::results::{PointResult, Summary};
pub(crate) use crate::model::text::thousands;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    Reproduced,
    NotReproduced,
    Partly,
    /// The valid points cannot decide (what they lack is in the evidence).
    Inconclusive,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::NotReproduced => "not reproduced",
            Verdict::Partly => "partly",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Where the paper says it.
    pub source: String,
    pub claim: String,
    pub verdict: Verdict,
    pub evidence: String,
}

/// The kind of a flag or note: the words before its colon ("client fell behind").
pub fn flag_kind(flag: &str) -> String {
    if flag.contains("left processes") {
        return "left processes".into();
    }
    flag.split(':').next().unwrap_or(flag).trim().to_string()
}

/// A list in evidence, or "none measured" (no valid point to take it from), never a blank.
pub(crate) fn none_if_empty(list: String) -> String {
    if list.is_empty() {
        "none measured".into()
    } else {
        list
    }
}

pub(crate) fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

pub(crate) fn k(x: f64) -> String {
    thousands(x)
}

/// The offered rates the valid points of `series` (all series when empty) cover, and what was
/// left out: "valid points at 2,000–12,000/s; 3 points excluded (client fell behind)".
pub(crate) fn range(s: &Summary, series: &[&str], idles: &[usize]) -> String {
    let pick = |p: &&PointResult| {
        p.ok()
            && idles.contains(&p.idle)
            && (series.is_empty() || series.contains(&p.series.as_str()))
    };
    let valid: Vec<f64> = s
        .points
        .iter()
        .filter(pick)
        .filter(|p| p.valid())
        .map(|p| p.rate)
        .collect();
    let invalid: Vec<&PointResult> = s
        .points
        .iter()
        .filter(pick)
        .filter(|p| !p.valid())
        .collect();
    let mut out = match (
        valid.iter().copied().reduce(f64::min),
        valid.iter().copied().reduce(f64::max),
    ) {
        (Some(a), Some(b)) => format!("valid points at {}–{}/s", k(a), k(b)),
        _ => "no valid points".into(),
    };
    if !invalid.is_empty() {
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for p in &invalid {
            if let Some(f) = p.flags.first() {
                *kinds.entry(flag_kind(f)).or_default() += 1;
            }
        }
        let common = kinds
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(k, _)| k.clone())
            .unwrap_or_default();
        let from = invalid.iter().map(|p| p.rate).fold(f64::INFINITY, f64::min);
        out.push_str(&format!(
            "; {} point(s) from {}/s excluded ({common})",
            invalid.len(),
            k(from)
        ));
    }
    out
}
