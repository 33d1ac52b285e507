//! Each rule on synthetic null data drawn from the committed spread (issue 20, "Controls"):
//! the spread of the quantity a rule reads, taken from the committed reference runs, and the
//! rule's own decision (`Ratio::of_floored`, `Claim::decide`) on seeded synthetic arms with
//! that spread. A rule that claims a difference must be "reproduced" in at most 5% of draws
//! where both arms have the same true value; an equivalence rule must pass a pair at twice
//! its margin in at most 5%.

use std::collections::BTreeMap;
use std::path::Path;

use super::findings;
use crate::analysis::rules::RULES;
use crate::analysis::stats::{mean, variance, Claim, Decision, Ratio, Rng};
use crate::model::results::Summary;
use crate::model::spec::Family;

/// The machine whose committed runs give the spread.
const REFERENCE: &str = "../../results/reference/amd-epyc-2vcpu-linux-6.18";
/// Synthetic draws per rule and case.
const DRAWS: usize = 1000;
/// Draws per rule at its threshold, where the true rate is about α itself: enough that the
/// Monte Carlo error (one standard error, √(α(1 − α)/n) = 0.34 points) stays small beside it.
const EDGE_DRAWS: usize = 4_000;
/// The Monte Carlo allowance at the threshold: three standard errors of a rate of exactly α
/// over `EDGE_DRAWS` draws (1.03 points).
const EDGE_ALLOWANCE: f64 = 0.0103;
/// The largest share of draws a rule may decide the wrong way.
const ALPHA: f64 = 0.05;

/// The coefficient of variation of one arm's trials (sample standard deviation over mean).
fn cv(v: &[f64]) -> f64 {
    variance(v).sqrt() / mean(v)
}

/// The spread a rule reads in the committed runs: its largest coefficient of variation among
/// the arms (one series at one idle count) it decided on, where it came from, and the variance
/// floor that decision was taken with (a bisected capacity's bracket, else 0).
#[derive(Debug, Clone, Default)]
struct Spread {
    cv: f64,
    at: String,
    floor: f64,
}

/// Every committed summary.json under [`REFERENCE`], read as `evlab report` reads it.
fn committed() -> Vec<(String, Summary)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(REFERENCE);
    let mut out = Vec::new();
    for e in std::fs::read_dir(&root).unwrap().flatten() {
        let dir = e.path();
        if dir.join("summary.json").is_file() {
            let s = Summary::read_json(&dir).unwrap();
            out.push((e.file_name().to_string_lossy().into_owned(), s));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Per rule, its committed spread (rules that no committed run decided on are absent).
fn spreads(runs: &[(String, Summary)]) -> BTreeMap<&'static str, Spread> {
    let mut out: BTreeMap<&'static str, Spread> = BTreeMap::new();
    for (name, s) in runs {
        for f in findings(s) {
            let (Some(rule), Some(([a, b], floor))) =
                (RULES.iter().find(|r| r.id == f.rule), f.trials.as_ref())
            else {
                continue;
            };
            let e = out.entry(rule.id).or_default();
            for (arm, v) in f.arms.iter().flatten().zip([a, b]) {
                let c = cv(v);
                if c > e.cv {
                    e.cv = c;
                    e.floor = *floor;
                    e.at = format!("{name}: {arm}, n = {}", v.len());
                }
            }
        }
    }
    out
}

/// How often `claim` is "reproduced" on `DRAWS` synthetic pairs of `n` trials per arm, A's
/// true value `true_ratio` × B's, each trial log-normal with coefficient of variation `cv`,
/// decided as the rule decides (each arm's variance at least `floor`).
fn rate(
    claim: Claim,
    true_ratio: f64,
    (cv, n, floor): (f64, usize, f64),
    draws: usize,
    seed: u64,
) -> f64 {
    // The log-normal whose coefficient of variation is `cv`.
    let sigma = (1.0 + cv * cv).ln().sqrt();
    let mut rng = Rng::new(seed);
    let mut yes = 0;
    for _ in 0..draws {
        let mut arm = |m: f64| -> Vec<f64> {
            (0..n)
                .map(|_| 1000.0 * m * (sigma * rng.normal()).exp())
                .collect()
        };
        let (a, b) = (arm(true_ratio), arm(1.0));
        let r = Ratio::of_floored(&a, &b, floor).unwrap();
        if claim.decide(r.lo, r.hi) == Decision::Reproduced {
            yes += 1;
        }
    }
    yes as f64 / draws as f64
}

/// What a rule's null is, by its claim.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// It claims a difference (A/B ≤ x < 1 or ≥ x > 1): the null is no difference at all.
    Difference,
    /// It claims no difference or no more than a small one (equivalence within m, or A/B ≥ x
    /// with x ≤ 1 and its mirror): the null is a true gap twice its margin (1 ± 2m, or
    /// 1 − 2(1 − x)), on the side or sides where the claim can fail.
    NoDifference,
}

fn kind(c: Claim) -> Kind {
    if c.claims_a_difference() {
        Kind::Difference
    } else {
        Kind::NoDifference
    }
}

/// The true ratios A/B of the null of `claim`.
fn nulls(claim: Claim) -> Vec<f64> {
    match claim {
        _ if claim.claims_a_difference() => vec![1.0],
        Claim::Within(m) => vec![1.0 + 2.0 * m, 1.0 / (1.0 + 2.0 * m)],
        Claim::AtLeast(x) => vec![1.0 - 2.0 * (1.0 - x)],
        Claim::AtMost(x) => vec![1.0 + 2.0 * (x - 1.0)],
    }
}

/// The true ratios A/B exactly at the edge of `claim`: its threshold, or each end of its margin.
fn thresholds(claim: Claim) -> Vec<f64> {
    match claim {
        Claim::AtLeast(x) | Claim::AtMost(x) => vec![x],
        Claim::Within(m) => vec![1.0 + m, 1.0 / (1.0 + m)],
    }
}

/// Which synthetic truths a check draws at, how many times, and the largest share of
/// "reproduced" it allows.
struct Null {
    truths: fn(Claim) -> Vec<f64>,
    draws: usize,
    limit: f64,
}

/// The nulls of the first checks: no effect for a difference, twice the margin for the rest.
const FAR: Null = Null {
    truths: nulls,
    draws: DRAWS,
    limit: ALPHA,
};

/// The true effect exactly at the threshold.
const EDGE: Null = Null {
    truths: thresholds,
    draws: EDGE_DRAWS,
    limit: ALPHA + EDGE_ALLOWANCE,
};

/// Runs every rule of `families` whose claim is of `want` on synthetic nulls at its committed
/// spread, prints what each gave, and fails naming those decided the wrong way in more than
/// `ALPHA` of the draws.
fn check(families: &[Family], want: Kind) {
    check_with(families, Some(want), &FAR)
}

/// As [`check`], for the claims of `want` (`None`: every claim), at the truths of `null`.
fn check_with(families: &[Family], want: Option<Kind>, null: &Null) {
    let runs = committed();
    assert!(runs.len() >= 10, "only {} committed runs", runs.len());
    let spread = spreads(&runs);
    // The fallback for a rule no committed run decided on: the largest spread of any rule.
    let widest = spread
        .values()
        .cloned()
        .reduce(|a, b| if b.cv > a.cv { b } else { a })
        .unwrap();
    let mut table = Vec::new();
    let mut failed = Vec::new();
    let mut checked = 0;
    for (i, r) in RULES.iter().enumerate() {
        // A withdrawn rule decides nothing.
        let Some(claim) = r.claim else { continue };
        if !families.contains(&r.family) || want.is_some_and(|w| kind(claim) != w) {
            continue;
        }
        let (s, whence) = match spread.get(r.id) {
            Some(s) => (s.clone(), s.at.clone()),
            None => (
                widest.clone(),
                format!(
                    "no committed run decided it, so the widest spread of any rule: {}",
                    widest.at
                ),
            ),
        };
        for (j, truth) in (null.truths)(claim).into_iter().enumerate() {
            let seed = 1000 + 10 * i as u64 + j as u64;
            let fp = rate(claim, truth, (s.cv, r.trials, s.floor), null.draws, seed);
            let line = format!(
                "{}: {} at a true A/B of {truth:.2}, cv {:.3} ({whence}), n = {}, floor {:.5}: \
                 reproduced in {:.2}% of {}",
                r.id,
                claim.words(),
                s.cv,
                r.trials,
                s.floor,
                100.0 * fp,
                null.draws
            );
            if fp > null.limit {
                failed.push(line.clone());
            }
            table.push(line);
            checked += 1;
        }
    }
    eprintln!("{}", table.join("\n"));
    assert!(checked > 0, "no rule of {families:?}");
    assert!(
        failed.is_empty(),
        "over {}:\n{}",
        null.limit,
        failed.join("\n")
    );
}

/// The micro family's rules are not here: `analysis::micro` judges them on a benchmark's whole
/// sweep (an exponent over its rounds, in micro.json), not on two arms of a summary.json.
#[test]
fn the_papers_difference_rules_keep_their_false_positives_at_the_committed_spread() {
    check(&[Family::Paper], Kind::Difference);
}

#[test]
fn the_other_families_difference_rules_keep_their_false_positives_at_the_committed_spread() {
    check(
        &[Family::Proxy, Family::Herd, Family::Deadconn],
        Kind::Difference,
    );
}

#[test]
fn the_no_difference_rules_do_not_pass_a_gap_of_twice_their_margin_at_the_committed_spread() {
    check(
        &[Family::Paper, Family::Proxy, Family::Herd, Family::Deadconn],
        Kind::NoDifference,
    );
}

/// A rule whose true effect sits exactly at its threshold says "reproduced" at most α of the
/// time (with the Monte Carlo allowance of `EDGE_ALLOWANCE`): every rule, every family that
/// judges two arms, at its committed spread.
#[test]
fn every_rule_at_its_threshold_is_reproduced_at_most_alpha_of_the_time() {
    check_with(
        &[Family::Paper, Family::Proxy, Family::Herd, Family::Deadconn],
        None,
        &EDGE,
    );
}
