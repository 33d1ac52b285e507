//! What every family of findings shares: the verdict, the finding, and how evidence is written.

use serde::Serialize;

use crate::analysis::rules::{At, Rule};
use crate::analysis::stats::{Claim, Decision, Ratio};
use crate::model::results::{PointResult, Summary};
use crate::model::sequential::level_words;
pub(crate) use crate::model::text::thousands;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    Reproduced,
    NotReproduced,
    Partly,
    /// The valid points cannot decide (what they lack is in the evidence).
    Inconclusive,
    /// A "no difference" verdict withheld: the run's negative control did not show that it
    /// could tell a known difference apart (what it measured is in the evidence).
    NotJudged,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::NotReproduced => "not reproduced",
            Verdict::Partly => "partly",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NotJudged => "not judged",
        }
    }
}

/// The verdict of an interval's decision.
pub fn decided(d: Decision) -> Verdict {
    match d {
        Decision::Reproduced => Verdict::Reproduced,
        Decision::NotReproduced => Verdict::NotReproduced,
        Decision::Inconclusive => Verdict::Inconclusive,
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
    /// The ratio A/B and its interval (at the run's verdict level, 90% unless a sequential run's
    /// look said otherwise), where the rule decided on one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 3]>,
    /// Arms A and B in words ("select, 10,000 idle"), for rules that compare two arms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arms: Option<[String; 2]>,
    /// The values of A's and B's trials the ratio was taken on, and the variance floor of each
    /// arm's logarithms (`Ratio::of_floored`: a bisected capacity's bracket, else 0), where the
    /// rule decided on a ratio: the null-data tests read the committed runs' spread from them.
    #[serde(skip)]
    pub trials: Option<([Vec<f64>; 2], f64)>,
}

/// The kind of a flag or note: the words before its colon ("client fell behind").
pub fn flag_kind(flag: &str) -> String {
    if flag.contains("left processes") {
        return "left processes".into();
    }
    flag.split(':').next().unwrap_or(flag).trim().to_string()
}

/// One arm of a rule: a series, an idle count, and how it reads in evidence.
#[derive(Clone, Copy)]
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

/// Which points an arm reads: its side's, and, in a run that sweeps a flag, only those at the
/// swept value `swept` (herd: `--workers 64`).
#[derive(Clone, Copy)]
struct Pick<'a, 'b> {
    side: &'b Side<'a>,
    swept: Option<f64>,
}

impl Pick<'_, '_> {
    fn has(&self, p: &PointResult) -> bool {
        p.ok()
            && p.series == self.side.series
            && p.idle == self.side.idle
            && self.swept.is_none_or(|v| p.swept_value() == Some(v))
    }

    /// "shared, no idle, 64 workers".
    fn words(&self, s: &Summary) -> String {
        let Some(v) = self.swept else {
            return self.side.words();
        };
        let name = s
            .points
            .iter()
            .find_map(|p| p.swept.as_ref().map(|w| w.name.clone()))
            .unwrap_or_else(|| "swept".into());
        let name = match (v == 1.0, name.strip_suffix('s')) {
            (true, Some(one)) => one.to_string(),
            _ => name,
        };
        format!(
            "{}, {} {name}",
            self.side.words(),
            crate::model::spec::SweepSpec::arg(v)
        )
    }
}

/// The offered rate a rule reads its arms at: the highest (or lowest) rate every arm was
/// measured at, valid or not (a grid rate, chosen before the data; an invalid trial there
/// is left out, never replaced by another rate).
fn grid_rate(s: &Summary, picks: &[Pick], at: At) -> Option<f64> {
    let rates = |x: &Pick| -> Vec<f64> {
        s.points
            .iter()
            .filter(|p| x.has(p))
            .map(|p| p.rate)
            .collect()
    };
    let first = rates(picks.first()?);
    let common = first
        .into_iter()
        .filter(|r| picks.iter().all(|x| rates(x).contains(r)));
    match at {
        At::Highest | At::PastKnee | At::Knee => common.reduce(f64::max),
        At::Lowest => common.reduce(f64::min),
    }
}

/// The largest value of the run's swept flag at which every side was measured (valid or
/// not: a grid value, like [`grid_rate`]).
pub(crate) fn most_swept(s: &Summary, sides: &[&Side]) -> Option<f64> {
    let values = |x: &Side| -> Vec<f64> {
        let pick = Pick {
            side: x,
            swept: None,
        };
        s.points
            .iter()
            .filter(|p| pick.has(p))
            .filter_map(|p| p.swept_value())
            .collect()
    };
    let first = values(sides.first()?);
    first
        .into_iter()
        .filter(|v| sides.iter().all(|x| values(x).contains(v)))
        .reduce(f64::max)
}

/// The quantity of each valid trial of `x` at `rate`, and how many trials there were.
fn trials(
    s: &Summary,
    x: Pick,
    rate: f64,
    f: &dyn Fn(&PointResult) -> Option<f64>,
) -> (Vec<f64>, usize) {
    let at: Vec<&PointResult> = s
        .points
        .iter()
        .filter(|p| x.has(p) && p.rate == rate)
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
/// grid rate, with its interval at the two-sided `level` (the lab's 90%, or a sequential run's
/// look's). Fewer valid trials than the rule needs is inconclusive, and the evidence says so.
pub(crate) fn judge(
    (s, level): (&Summary, f64),
    rule: &Rule,
    a: Side,
    b: Side,
    f: &dyn Fn(&PointResult) -> Option<f64>,
    unit: &str,
) -> Finding {
    judge_swept((s, level), rule, (a, b), None, f, unit)
}

/// As [`judge`], both arms read at the swept value `swept` of a run that sweeps a flag
/// (None: every point of the side, as `judge`).
pub(crate) fn judge_swept(
    (s, level): (&Summary, f64),
    rule: &Rule,
    (a, b): (Side, Side),
    swept: Option<f64>,
    f: &dyn Fn(&PointResult) -> Option<f64>,
    unit: &str,
) -> Finding {
    let claim = rule.claim.expect("judge takes interval rules");
    let arms = [
        Pick { side: &a, swept }.words(s),
        Pick { side: &b, swept }.words(s),
    ];
    let finding = |verdict: Verdict, evidence: String| Finding {
        rule: rule.id.into(),
        source: rule.source.into(),
        claim: format!("{} Rule: {}.", rule.seed, claim.words()),
        verdict,
        evidence,
        interval: None,
        arms: Some(arms.clone()),
        trials: None,
    };
    if rule.at == At::Knee && !s.knees.is_empty() {
        return judge_knee((s, level), rule, claim, (a, b), finding);
    }
    let at = match rule.at {
        At::Knee => At::PastKnee,
        at => at,
    };
    let (a, b) = (Pick { side: &a, swept }, Pick { side: &b, swept });
    let Some(rate) = grid_rate(s, &[a, b], at) else {
        return finding(
            Verdict::Inconclusive,
            format!(
                "no offered rate measured for both A ({}) and B ({})",
                a.words(s),
                b.words(s)
            ),
        );
    };
    let (va, na) = trials(s, a, rate, f);
    let (vb, nb) = trials(s, b, rate, f);
    let head = format!(
        "at {}/s offered: A {}; B {}",
        thousands(rate),
        arm_words(&a.words(s), &va, na, unit),
        arm_words(&b.words(s), &vb, nb, unit)
    );
    if at == At::PastKnee {
        let (replies, _) = trials(s, b, rate, &|p| p.reply_rate());
        // What B answers per offered connection where it keeps up (its lowest rate): 1 for one
        // request per connection, more for SPECweb99-like sessions of several requests.
        let per_conn = grid_rate(s, &[b], At::Lowest)
            .filter(|low| *low < rate)
            .and_then(|low| {
                let (v, _) = trials(s, b, low, &|p| p.reply_rate());
                crate::analysis::stats::Arm::of(&v).map(|m| m.mean / low)
            })
            .filter(|x| x.is_finite())
            .map_or(1.0, |x| x.max(1.0));
        if let Some(m) = crate::analysis::stats::Arm::of(&replies) {
            let kept = m.mean / (rate * per_conn);
            if kept >= crate::analysis::curves::KEPT {
                return finding(
                    Verdict::Inconclusive,
                    format!(
                        "{head}; B answered {:.0}% of {} there: not past its knee, so \
                         replies/s there measure the load, not the server",
                        100.0 * kept,
                        if per_conn > 1.0 {
                            format!(
                                "what it answers per offered connection below its knee \
                                 ({per_conn:.2} replies each)"
                            )
                        } else {
                            "the offered rate".into()
                        }
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
    decide(claim, level, ([&va, &vb], 0.0), &head, finding)
}

/// The verdict of `claim` on the ratio of A's values to B's at the two-sided `level`, each
/// arm's variance at least `floor` (`Ratio::of_floored_at`; no ratio when a value was zero or
/// missing), with its evidence after `head`.
fn decide(
    claim: Claim,
    level: f64,
    ([va, vb], floor): ([&[f64]; 2], f64),
    head: &str,
    finding: impl Fn(Verdict, String) -> Finding,
) -> Finding {
    let Some(r) = Ratio::of_floored_at(va, vb, floor, level) else {
        return finding(
            Verdict::Inconclusive,
            format!("{head}; a value is zero or missing, so no ratio"),
        );
    };
    let verdict = decided(claim.decide(r.lo, r.hi));
    let mut f = finding(
        verdict,
        format!(
            "{head}; A/B = {:.2} [{}: {:.2}–{:.2}], Welch df {:.1}, resolution ±{:.0}%; claim {}",
            r.ratio,
            level_words(level),
            r.lo,
            r.hi,
            r.df,
            r.resolution() * 100.0,
            claim.words()
        ),
    );
    f.interval = Some([r.ratio, r.lo, r.hi]);
    f.trials = Some(([va.to_vec(), vb.to_vec()], floor));
    f
}

/// What arm B is called in a one-arm rule's finding (`judge_value`).
pub(crate) const NO_ARM_B: &str = "no arm B: A is the quantity itself";

/// Decides a one-arm `rule` (`rules::ONE_ARM`: its quantity is the value itself, with no arm
/// B): the geometric mean of `a`'s valid trials of `f` at the rule's grid rate, with its 90% t
/// interval on the logarithms (the ratio to an arm of ones, whose variance is nil: a one-sample
/// interval with n − 1 degrees of freedom).
pub(crate) fn judge_value(
    (s, level): (&Summary, f64),
    rule: &Rule,
    a: Side,
    f: &dyn Fn(&PointResult) -> Option<f64>,
    unit: &str,
) -> Finding {
    let claim = rule.claim.expect("judge_value takes interval rules");
    let pick = Pick {
        side: &a,
        swept: None,
    };
    let finding = |verdict: Verdict, evidence: String| Finding {
        rule: rule.id.into(),
        source: rule.source.into(),
        claim: format!("{} Rule: {}.", rule.seed, claim.words()),
        verdict,
        evidence,
        interval: None,
        arms: Some([pick.words(s), NO_ARM_B.into()]),
        trials: None,
    };
    let Some(rate) = grid_rate(s, &[pick], rule.at) else {
        return finding(
            Verdict::Inconclusive,
            format!("no offered rate measured for A ({})", pick.words(s)),
        );
    };
    let (va, na) = trials(s, pick, rate, f);
    let head = format!(
        "at {}/s offered: A {}",
        thousands(rate),
        arm_words(&pick.words(s), &va, na, unit)
    );
    if va.len() < rule.trials {
        return finding(
            Verdict::Inconclusive,
            format!(
                "{head}; the rule needs ≥ {} valid trials with the value",
                rule.trials
            ),
        );
    }
    let ones = vec![1.0; va.len()];
    let Some(r) = Ratio::of_floored_at(&va, &ones, 0.0, level) else {
        return finding(
            Verdict::Inconclusive,
            format!("{head}; a value is zero or missing, so no interval"),
        );
    };
    let mut out = finding(
        decided(claim.decide(r.lo, r.hi)),
        format!(
            "{head}; geometric mean {} [{}: {}–{}], t df {:.0}; claim {} (A/B is A itself)",
            num(r.ratio),
            level_words(level),
            num(r.lo),
            num(r.hi),
            r.df,
            claim.words()
        ),
    );
    out.interval = Some([r.ratio, r.lo, r.hi]);
    out.trials = Some(([va, ones], 0.0));
    out
}

/// Each capacity search of `side`: the capacities of those whose bracket closed, and how many
/// searches there were.
pub(crate) fn knee_trials(s: &Summary, side: &Side) -> (Vec<f64>, usize) {
    let res = s.experiment.knee_resolution();
    let of: Vec<&crate::model::knee::Knee> = s
        .knees
        .iter()
        .filter(|k| k.series == side.series && k.idle == side.idle)
        .collect();
    let v = of.iter().filter_map(|k| k.capacity(res)).collect();
    (v, of.len())
}

/// Decides `rule` on the arms' capacities (`At::Knee` in a run with a capacity search): the
/// ratio of their trials' capacities, each arm's variance at least that of a value known only
/// to within its bracket (`Ratio::of_floored`).
fn judge_knee(
    (s, level): (&Summary, f64),
    rule: &Rule,
    claim: Claim,
    (a, b): (Side, Side),
    finding: impl Fn(Verdict, String) -> Finding,
) -> Finding {
    let res = s.experiment.knee_resolution();
    let (va, na) = knee_trials(s, &a);
    let (vb, nb) = knee_trials(s, &b);
    let head = format!(
        "capacity (bisected to ±{:.1}%): A {}; B {}",
        (res.sqrt() - 1.0) * 100.0,
        arm_words(&a.words(), &va, na, "replies/s"),
        arm_words(&b.words(), &vb, nb, "replies/s")
    );
    if va.len() < rule.trials || vb.len() < rule.trials {
        return finding(
            Verdict::Inconclusive,
            format!(
                "{head}; the rule needs ≥ {} closed searches per arm",
                rule.trials
            ),
        );
    }
    let floor = res.ln().powi(2) / 12.0;
    decide(claim, level, ([&va, &vb], floor), &head, finding)
}

/// One arm in evidence: "select, no idle: n = 2 of 3 trials, mean 2,000 replies/s [90%: …]".
fn arm_words(who: &str, v: &[f64], n: usize, unit: &str) -> String {
    let mut w = format!("{who}: n = {}", v.len());
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
}
