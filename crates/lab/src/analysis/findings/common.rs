//! What every family of findings shares: the verdict, the finding, and how evidence is written.

use serde::Serialize;

use crate::analysis::rules::{At, Rule};
use crate::analysis::stats::{Decision, Ratio};
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
    /// The rule that decided it (`analysis::rules`), empty for a family not yet on rules.
    pub rule: String,
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

pub(crate) fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

pub(crate) fn k(x: f64) -> String {
    thousands(x)
}

/// One arm of a rule: a series, an idle count, and how it reads in evidence.
pub(crate) struct Side<'a> {
    pub series: &'a str,
    pub idle: usize,
}

impl Side<'_> {
    fn words(&self) -> String {
        match self.idle {
            0 => format!("{}, no idle", self.series),
            n => format!("{}, {} idle", self.series, thousands(n as f64)),
        }
    }
}

/// The offered rate a rule reads its arms at: the highest (or lowest) rate every arm was
/// measured at, valid or not (a grid rate, chosen before the data; an invalid trial there
/// is left out, never replaced by another rate).
pub(crate) fn grid_rate(s: &Summary, sides: &[&Side], at: At) -> Option<f64> {
    let rates = |x: &Side| -> Vec<f64> {
        s.points
            .iter()
            .filter(|p| p.ok() && p.series == x.series && p.idle == x.idle)
            .map(|p| p.rate)
            .collect()
    };
    let first = rates(sides.first()?);
    let common = first
        .into_iter()
        .filter(|r| sides.iter().all(|x| rates(x).contains(r)));
    match at {
        At::Highest | At::PastKnee => common.reduce(f64::max),
        At::Lowest => common.reduce(f64::min),
    }
}

/// The quantity of each valid trial of `x` at `rate`, and how many trials there were.
fn trials(
    s: &Summary,
    x: &Side,
    rate: f64,
    f: &dyn Fn(&PointResult) -> Option<f64>,
) -> (Vec<f64>, usize) {
    let at: Vec<&PointResult> = s
        .points
        .iter()
        .filter(|p| p.ok() && p.series == x.series && p.idle == x.idle && p.rate == rate)
        .collect();
    let v = at
        .iter()
        .filter(|p| p.valid())
        .filter_map(|p| f(p))
        .collect();
    (v, at.len())
}

/// A number in evidence: thousands for large values, three figures for small ones.
pub(crate) fn num(x: f64) -> String {
    if x.abs() >= 100.0 {
        thousands(x)
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

/// Decides `rule` on arms `a` and `b`: the ratio of their trials' means of `f` at the rule's
/// grid rate, with its 90% interval. Fewer valid trials than the rule needs is inconclusive,
/// and the evidence says so.
pub(crate) fn judge(
    s: &Summary,
    rule: &Rule,
    a: Side,
    b: Side,
    f: &dyn Fn(&PointResult) -> Option<f64>,
    unit: &str,
) -> Finding {
    let claim = rule.claim.expect("judge takes interval rules");
    let finding = |verdict: Verdict, evidence: String| Finding {
        rule: rule.id.into(),
        source: rule.source.into(),
        claim: format!("{} Rule: {}.", rule.seed, claim.words()),
        verdict,
        evidence,
    };
    let Some(rate) = grid_rate(s, &[&a, &b], rule.at) else {
        return finding(
            Verdict::Inconclusive,
            format!(
                "no offered rate measured for both A ({}) and B ({})",
                a.words(),
                b.words()
            ),
        );
    };
    let (va, na) = trials(s, &a, rate, f);
    let (vb, nb) = trials(s, &b, rate, f);
    let arm = |x: &Side, v: &[f64], n: usize| -> String {
        let mut w = format!("{}: n = {}", x.words(), v.len());
        if n > v.len() {
            w.push_str(&format!(" of {n} trials"));
        }
        match crate::analysis::stats::Arm::of(v) {
            Some(m) if v.len() >= 2 => w.push_str(&format!(
                ", mean {} {unit} [90%: {}–{}]",
                num(m.mean),
                num(m.lo),
                num(m.hi)
            )),
            Some(m) => w.push_str(&format!(", {} {unit}", num(m.mean))),
            None => {}
        }
        w
    };
    let head = format!(
        "at {}/s offered: A {}; B {}",
        thousands(rate),
        arm(&a, &va, na),
        arm(&b, &vb, nb)
    );
    if rule.at == At::PastKnee {
        let (replies, _) = trials(s, &b, rate, &|p| p.reply_rate());
        if let Some(m) = crate::analysis::stats::Arm::of(&replies) {
            if m.mean >= crate::analysis::curves::KEPT * rate {
                return finding(
                    Verdict::Inconclusive,
                    format!(
                        "{head}; B answered {:.0}% of the offered rate there: not past its knee, \
                         so replies/s there measure the load, not the server",
                        100.0 * m.mean / rate
                    ),
                );
            }
        }
    }
    if va.len() < rule.trials || vb.len() < rule.trials {
        return finding(
            Verdict::Inconclusive,
            format!(
                "{head}; the rule needs ≥ {} valid trials per arm",
                rule.trials
            ),
        );
    }
    let Some(r) = Ratio::of(&va, &vb) else {
        return finding(
            Verdict::Inconclusive,
            format!("{head}; a value is zero or missing, so no ratio"),
        );
    };
    let verdict = match claim.decide(r.lo, r.hi) {
        Decision::Reproduced => Verdict::Reproduced,
        Decision::NotReproduced => Verdict::NotReproduced,
        Decision::Inconclusive => Verdict::Inconclusive,
    };
    finding(
        verdict,
        format!(
            "{head}; A/B = {:.2} [90%: {:.2}–{:.2}], Welch df {:.1}, resolution ±{:.0}%; claim {}",
            r.ratio,
            r.lo,
            r.hi,
            r.df,
            r.resolution() * 100.0,
            claim.words()
        ),
    )
}
