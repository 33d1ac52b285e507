//! Each rule on synthetic null data drawn from the committed spread (issue 20, "Controls"):
//! the spread of the quantity a rule reads, taken from the committed reference runs, and the
//! rule's own decision (`Ratio::of_floored`, `Claim::decide`) on seeded synthetic arms with
//! that spread. A rule that claims a difference must be "reproduced" in at most 5% of draws
//! where both arms have the same true value; an equivalence rule must pass a pair at twice
//! its margin in at most 5%.

use std::collections::BTreeMap;
use std::path::Path;

use super::findings;
use crate::analysis::rules::{one_arm, RULES};
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
/// decided as the rule decides (each arm's variance at least `floor`). A one-arm rule
/// (`rules::ONE_ARM`) has no arm B: its B is a constant, as `judge_value` decides.
fn rate(
    claim: Claim,
    true_ratio: f64,
    (cv, n, floor, one_arm): (f64, usize, f64, bool),
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
        let a = arm(true_ratio);
        let b = if one_arm { vec![1000.0; n] } else { arm(1.0) };
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
            let shape = (s.cv, r.trials, s.floor, one_arm(r.id));
            let fp = rate(claim, truth, shape, null.draws, seed);
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

/// Draws per rule and truth in the power table.
const POWER_DRAWS: usize = 1000;
/// The power the table reports the effect at.
const POWER: f64 = 0.8;

/// The true ratio, between `from` (where the rule cannot say "reproduced") and `to` (far on the
/// claim's side), at which `claim` is reproduced in `POWER` of the draws: bisection in log terms.
fn effect_at_power(
    claim: Claim,
    (from, to): (f64, f64),
    s: &Spread,
    (n, one_arm): (usize, bool),
    seed: u64,
) -> f64 {
    let (mut lo, mut hi) = (from.ln(), to.ln());
    // Twelve halvings of a range of ln 8: to within 0.05% of the ratio.
    for _ in 0..12 {
        let mid = 0.5 * (lo + hi);
        let shape = (s.cv, n, s.floor, one_arm);
        if rate(claim, mid.exp(), shape, POWER_DRAWS, seed) >= POWER {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi.exp()
}

/// docs/power.md: for every rule that judges two arms, at its n and its committed spread, the
/// true effect it decides in 80% of runs (a difference rule: the ratio it then says
/// "reproduced"; a "no difference" rule: how often it says so when there is no difference at
/// all). Stated before a run, so that an inconclusive verdict can be read against it.
fn power_markdown() -> String {
    use std::fmt::Write as _;
    let runs = committed();
    let spread = spreads(&runs);
    let mut o = String::from(
        "# What each rule can decide\n\n\
         <!-- Generated from crates/reason/src/analysis/rules.rs and the committed runs under \
         results/reference by crates/reason/src/analysis/findings/null_tests.rs; a test keeps \
         this file equal to it. Regenerate: EVLAB_BLESS=1 cargo test -p evlab-reason \
         docs_power_md -->\n\n\
         Each rule of [findings.md](findings.md) decides on a 90% interval over its n trials per \
         arm. How small an effect that can decide depends on how much a trial varies, which is \
         measured, not assumed: the **spread** is the largest coefficient of variation of one \
         arm's trials among the committed reference runs that rule decided on (the arm and run \
         are named). From it, on seeded synthetic runs drawn as the null tests draw them \
         (1,000 per truth, log-normal trials):\n\n\
         - for a rule that claims a difference, **80% power at** is the true A/B at which the \
         rule says \"reproduced\" in 80% of runs: an effect smaller than that is likely to come \
         out inconclusive, and an inconclusive verdict says little about it;\n\
         - for a rule that claims no difference (or no more than a small one), **reproduced when \
         A = B** is how often it says \"reproduced\" when the arms are truly equal (its power); \
         at n = 3 and a spread of a few percent or more this is low, which is why those rules \
         are so often inconclusive.\n\n\
         A rule whose quantity is one arm's value itself (A/B is A: table1-epoll2-useful-waits) \
         is drawn with no arm B. Rules no committed run decided on take the widest spread of any \
         rule (marked *). The \
         micro-benchmarks' rules are judged on whole sweeps and are not here.\n\n\
         | rule | claim | n | spread (cv) | 80% power at | reproduced when A = B |\n\
         |---|---|---:|---:|---:|---:|\n",
    );
    let widest = spread
        .values()
        .cloned()
        .reduce(|a, b| if b.cv > a.cv { b } else { a })
        .unwrap_or_default();
    for (i, r) in RULES.iter().enumerate() {
        let Some(claim) = r.claim else { continue };
        if r.family == Family::Micro {
            continue;
        }
        let (s, mark) = match spread.get(r.id) {
            Some(s) => (s.clone(), ""),
            None => (widest.clone(), "*"),
        };
        let seed = 50_000 + i as u64;
        let shape = (r.trials, one_arm(r.id));
        let at_power = |from: f64, to: f64| {
            format!("{:.2}", effect_at_power(claim, (from, to), &s, shape, seed))
        };
        let (effect, equal) = match claim {
            Claim::AtLeast(x) if x > 1.0 => (at_power(x, x * 8.0), String::new()),
            Claim::AtMost(x) if x < 1.0 || shape.1 => (at_power(x, x / 8.0), String::new()),
            Claim::Within(_) | Claim::AtLeast(_) | Claim::AtMost(_) => (
                String::new(),
                format!(
                    "{:.0}%",
                    100.0
                        * rate(
                            claim,
                            1.0,
                            (s.cv, r.trials, s.floor, false),
                            POWER_DRAWS,
                            seed
                        )
                ),
            ),
        };
        let _ = writeln!(
            o,
            "| `{}` | {} | {} | {:.3}{mark} | {effect} | {equal} |",
            r.id,
            claim.words(),
            r.trials,
            s.cv
        );
    }
    o
}

/// docs/power.md is what the rules and the committed runs give.
#[test]
fn docs_power_md_is_generated_from_the_rules_and_the_committed_spread() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/power.md");
    let want = power_markdown();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    if text == want {
        return;
    }
    if std::env::var_os("EVLAB_BLESS").is_some() {
        std::fs::write(&path, want).unwrap();
    } else {
        panic!(
            "{} differs from what the rules and the committed runs give; regenerate it with \
             EVLAB_BLESS=1 cargo test -p evlab-reason docs_power_md",
            path.display()
        );
    }
}
