//! Curves: per series and idle count, the reply rate at each offered rate over its trials, and
//! what the findings read off them (the highest rate kept up with, peaks, drops, ratios).

use std::collections::BTreeMap;

use crate::model::results::{PointResult, Summary};

/// A point of a curve: the offered rate and the mean, min and max reply rate over its valid
/// trials.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvePoint {
    pub rate: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub trials: usize,
}

impl CurvePoint {
    /// Kept up with the offered rate: 95% of it answered, on the mean of the trials.
    pub fn kept(&self) -> bool {
        self.mean >= KEPT * self.rate
    }
}

/// A reply rate at or above this share of the offered rate counts as keeping up.
pub const KEPT: f64 = 0.95;

pub type Curves = BTreeMap<(String, usize), Vec<CurvePoint>>;

/// Reply rate per (series, idle, rate) over the points `keep` accepts, sorted by rate.
pub fn curves_of(s: &Summary, keep: &dyn Fn(&PointResult) -> bool) -> Curves {
    let mut acc: BTreeMap<(String, usize, u64), Vec<f64>> = BTreeMap::new();
    for p in s.points.iter().filter(|p| keep(p)) {
        if let Some(r) = p.reply_rate() {
            acc.entry((p.series.clone(), p.idle, p.rate.to_bits()))
                .or_default()
                .push(r);
        }
    }
    let mut out: Curves = BTreeMap::new();
    for ((series, idle, rate), v) in acc {
        out.entry((series, idle)).or_default().push(CurvePoint {
            rate: f64::from_bits(rate),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(0.0, f64::max),
            trials: v.len(),
        });
    }
    for v in out.values_mut() {
        v.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    }
    out
}

/// The curves the figures draw: every point that was measured (valid or not).
pub fn curves(s: &Summary) -> Curves {
    curves_of(s, &|p| p.ok())
}

/// The curves verdicts are decided on: valid points only.
pub fn valid_curves(s: &Summary) -> Curves {
    curves_of(s, &|p| p.valid())
}

/// Differences in reply rate within this share count as "the same": one 2-second point of a
/// series at its knee answered 94% where a run later it answered 100% (docs/methodology.md).
pub const TOLERANCE: f64 = 0.10;

/// The extreme ratio of `a`'s reply rate to `b`'s over the rates both measured validly at
/// `idle` that `pick` accepts: the smallest when below 1 matters (worse), the largest (gain);
/// both are returned through the caller's comparison by taking the one farthest from 1.
pub fn ratio_at(
    c: &Curves,
    a: &str,
    b: &str,
    idle: usize,
    pick: impl Fn(f64) -> bool,
) -> Option<f64> {
    let ca = c.get(&(a.to_string(), idle))?;
    let cb = c.get(&(b.to_string(), idle))?;
    ca.iter()
        .filter(|p| pick(p.rate))
        .filter_map(|p| {
            let q = cb.iter().find(|x| x.rate == p.rate)?;
            (q.mean > 0.0).then(|| p.mean / q.mean)
        })
        .reduce(|x, y| {
            if (y - 1.0).abs() > (x - 1.0).abs() {
                y
            } else {
                x
            }
        })
}

/// The highest offered rate kept up with, every lower valid rate kept up with too; and whether
/// the series was seen to fall behind (a valid rate above it was not kept up with).
pub fn sustained(c: &Curves, series: &str, idle: usize) -> Option<(f64, bool)> {
    let v = c.get(&(series.to_string(), idle))?;
    let mut best = 0.0;
    for p in v {
        if !p.kept() {
            return Some((best, true));
        }
        best = p.rate;
    }
    Some((best, false))
}

pub fn peak(c: &Curves, series: &str, idle: usize) -> Option<f64> {
    c.get(&(series.to_string(), idle))?
        .iter()
        .map(|p| p.mean)
        .reduce(f64::max)
}

/// (drop, rate, replies/s with no idle connections, replies/s with them).
pub type Drop = (f64, f64, f64, f64);

/// Largest relative drop of reply rate from idle 0 to `idle` at equal offered rate, over the
/// rates the series kept up with without idle connections: past its own knee a server is
/// overloaded either way, and how an overload collapses is not the paper's claim.
pub fn max_drop(c: &Curves, series: &str, idle: usize) -> Option<Drop> {
    let a = c.get(&(series.to_string(), 0))?;
    let b = c.get(&(series.to_string(), idle))?;
    let mut best: Option<Drop> = None;
    for p0 in a.iter().filter(|p| p.kept()) {
        if let Some(p1) = b.iter().find(|p| p.rate == p0.rate) {
            let d = 1.0 - p1.mean / p0.mean;
            if best.is_none_or(|x| d > x.0) {
                best = Some((d, p0.rate, p0.mean, p1.mean));
            }
        }
    }
    best
}
