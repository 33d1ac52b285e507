//! `evlab compare A B`: what changed from one run to another, decided as the findings are.
//!
//! Every point both runs measured is compared on its valid trials: B's mean over A's, with the
//! 90% Welch interval on the logarithms (`analysis::stats::Ratio`), "significant" only when
//! the interval excludes 1 (as benchstat marks a change, and "~" otherwise). The capacities of
//! a run with a capacity search are compared the same way, per series and idle count. Each
//! finding is judged again on each run with today's rules, and a verdict that differs is
//! named first: the exit status of `evlab compare` says whether one did.
//!
//! Points are matched by series, idle count and rank in the series' rate grid when both runs
//! measured the same number of rates (a calibrated grid moves with the machine, so the same
//! grid position is the same question), else by the exact offered rate.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::analysis::findings::{self, Finding, Verdict};
use crate::analysis::stats::Ratio;
use crate::model::results::{PointResult, Summary};
use crate::model::text::thousands;

/// One quantity compared between the runs.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// Where: "select, 10,000 idle, rate 1 of 2 (1,500/s and 1,520/s offered)".
    pub what: String,
    /// "replies/s", "server CPU µs/reply", "capacity (requests/s)".
    pub quantity: String,
    pub a_n: usize,
    pub a_mean: f64,
    pub b_n: usize,
    pub b_mean: f64,
    /// B/A and its 90% interval, when each side has two values or more.
    pub ratio: Option<[f64; 3]>,
    /// The interval excludes 1.
    pub significant: bool,
}

impl Change {
    fn of(what: String, quantity: &str, a: &[f64], b: &[f64]) -> Option<Change> {
        if a.is_empty() || b.is_empty() {
            return None;
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let r = Ratio::of(b, a);
        Some(Change {
            what,
            quantity: quantity.to_string(),
            a_n: a.len(),
            a_mean: mean(a),
            b_n: b.len(),
            b_mean: mean(b),
            significant: r.as_ref().is_some_and(|r| r.lo > 1.0 || r.hi < 1.0),
            ratio: r.map(|r| [r.ratio, r.lo, r.hi]),
        })
    }
}

/// One finding as each run's data decide it (today's rules on both).
#[derive(Debug, Clone, Serialize)]
pub struct FindingChange {
    pub rule: String,
    pub claim: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arms: Option<[String; 2]>,
    /// `None`: the run measured nothing this finding reads.
    pub a: Option<Verdict>,
    pub b: Option<Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a_interval: Option<[f64; 3]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_interval: Option<[f64; 3]>,
}

impl FindingChange {
    /// The verdicts differ (a finding judged in one run and not the other counts).
    pub fn changed(&self) -> bool {
        self.a != self.b
    }

    /// Reproduced in one run, not reproduced in the other: opposite decisive verdicts.
    pub fn opposite(&self) -> bool {
        use Verdict::{NotReproduced, Reproduced};
        matches!(
            (self.a, self.b),
            (Some(Reproduced), Some(NotReproduced)) | (Some(NotReproduced), Some(Reproduced))
        )
    }
}

/// One side of a comparison, as the reader needs to know it.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub path: String,
    pub experiment: String,
    pub started: String,
    /// The evlab build that ran it (`evlab --version` without the name).
    pub build: String,
    pub trials: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub a: Run,
    pub b: Run,
    /// What makes the comparison less than like for like (mixed builds, other experiments).
    pub warnings: Vec<String>,
    /// Changed verdicts first (opposite ones before the rest), then the unchanged.
    pub findings: Vec<FindingChange>,
    pub capacities: Vec<Change>,
    pub points: Vec<Change>,
}

impl Comparison {
    /// Findings whose verdict differs between the runs.
    pub fn verdicts_changed(&self) -> usize {
        self.findings.iter().filter(|f| f.changed()).count()
    }
}

fn run_of(path: &str, s: &Summary) -> Run {
    Run {
        path: path.to_string(),
        experiment: s.experiment.name.clone(),
        started: s.started.clone(),
        build: s.machine.evlab_version.clone(),
        trials: s.trials(),
    }
}

/// What a reader should know before trusting a comparison of `a` and `b`.
fn warnings(a: &Run, b: &Run, sa: &Summary, sb: &Summary) -> Vec<String> {
    let mut w = Vec::new();
    if a.experiment != b.experiment {
        w.push(format!(
            "different experiments: {} and {}",
            a.experiment, b.experiment
        ));
    } else if sa.spec_text != sb.spec_text {
        w.push("the experiment's file differs between the runs".into());
    }
    if a.build != b.build {
        w.push(format!("mixed builds: A {}; B {}", a.build, b.build));
    }
    for (side, r) in [("A", a), ("B", b)] {
        if r.build.contains(", dirty") {
            w.push(format!(
                "{side} was made by a build with uncommitted changes ({})",
                r.build
            ));
        } else if !r.build.contains("commit ") {
            w.push(format!(
                "{side} records no git commit (made before builds were recorded: {})",
                r.build
            ));
        }
    }
    for (side, s) in [("A", sa), ("B", sb)] {
        if s.interrupted {
            w.push(format!("{side} was interrupted"));
        }
    }
    w
}

/// The finding key: its rule and arms (a rule may be judged on several pairs).
fn key(f: &Finding) -> (String, Option<[String; 2]>) {
    (f.rule.clone(), f.arms.clone())
}

fn finding_changes(sa: &Summary, sb: &Summary) -> Vec<FindingChange> {
    let fa = findings::findings(sa);
    let fb = findings::findings(sb);
    let mut keys: Vec<(String, Option<[String; 2]>)> = fa.iter().map(key).collect();
    for f in &fb {
        if !keys.contains(&key(f)) {
            keys.push(key(f));
        }
    }
    let mut out: Vec<FindingChange> = keys
        .into_iter()
        .map(|k| {
            let a = fa.iter().find(|f| key(f) == k);
            let b = fb.iter().find(|f| key(f) == k);
            let claim = a.or(b).map(|f| f.claim.clone()).unwrap_or_default();
            FindingChange {
                rule: k.0,
                claim,
                arms: k.1,
                a: a.map(|f| f.verdict),
                b: b.map(|f| f.verdict),
                a_interval: a.and_then(|f| f.interval),
                b_interval: b.and_then(|f| f.interval),
            }
        })
        .collect();
    // Stable: opposite verdicts, then other changes, then the rest, each in the run's order.
    out.sort_by_key(|f| (!f.opposite(), !f.changed()));
    out
}

type PointKey = (String, usize);

/// The valid trials of each (series, idle), by offered rate.
fn by_rate(s: &Summary) -> BTreeMap<PointKey, BTreeMap<u64, Vec<&PointResult>>> {
    let mut m: BTreeMap<PointKey, BTreeMap<u64, Vec<&PointResult>>> = BTreeMap::new();
    for p in s.points.iter().filter(|p| p.valid()) {
        m.entry((p.series.clone(), p.idle))
            .or_default()
            .entry(p.rate.round() as u64)
            .or_default()
            .push(p);
    }
    m
}

fn side_words(series: &str, idle: usize) -> String {
    if idle == 0 {
        format!("{series}, no idle")
    } else {
        format!("{series}, {} idle", thousands(idle as f64))
    }
}

fn point_changes(sa: &Summary, sb: &Summary) -> Vec<Change> {
    let (ma, mb) = (by_rate(sa), by_rate(sb));
    let series_order: Vec<&str> = sa.series.iter().map(|s| s.label.as_str()).collect();
    let mut keys: Vec<&PointKey> = ma.keys().filter(|k| mb.contains_key(*k)).collect();
    keys.sort_by_key(|(s, i)| (series_order.iter().position(|x| x == s), *i));
    let mut out = Vec::new();
    for k in keys {
        let (ra, rb) = (&ma[k], &mb[k]);
        let pairs: Vec<(u64, u64, String)> = if ra.len() == rb.len() {
            ra.keys()
                .zip(rb.keys())
                .enumerate()
                .map(|(i, (&x, &y))| {
                    let at = if x == y {
                        format!("{}/s offered", thousands(x as f64))
                    } else {
                        format!(
                            "{}/s and {}/s offered",
                            thousands(x as f64),
                            thousands(y as f64)
                        )
                    };
                    if ra.len() == 1 {
                        (x, y, at)
                    } else {
                        (x, y, format!("rate {} of {} ({at})", i + 1, ra.len()))
                    }
                })
                .collect()
        } else {
            let common: BTreeSet<&u64> = ra.keys().filter(|x| rb.contains_key(*x)).collect();
            common
                .into_iter()
                .map(|&x| (x, x, format!("{}/s offered", thousands(x as f64))))
                .collect()
        };
        for (x, y, at) in pairs {
            let what = format!("{}, {at}", side_words(&k.0, k.1));
            // At two offered rates (a calibrated grid), reply rates differ by the offer alone:
            // compare the share of the offer that was answered instead.
            let replies: (&str, fn(&PointResult) -> Option<f64>) = if x == y {
                ("replies/s", PointResult::reply_rate)
            } else {
                ("replies/s ÷ offered", |p: &PointResult| {
                    p.reply_rate().map(|r| r / p.rate)
                })
            };
            for (quantity, f) in [
                replies,
                ("server CPU µs/reply", |p: &PointResult| {
                    p.server_cpu_us_per_reply
                }),
            ] {
                let va: Vec<f64> = ra[&x].iter().filter_map(|p| f(p)).collect();
                let vb: Vec<f64> = rb[&y].iter().filter_map(|p| f(p)).collect();
                out.extend(Change::of(what.clone(), quantity, &va, &vb));
            }
        }
    }
    out
}

fn capacity_changes(sa: &Summary, sb: &Summary) -> Vec<Change> {
    let mut keys: Vec<PointKey> = Vec::new();
    for k in &sa.knees {
        let key = (k.series.clone(), k.idle);
        if !keys.contains(&key)
            && sb
                .knees
                .iter()
                .any(|x| (&x.series, x.idle) == (&k.series, k.idle))
        {
            keys.push(key);
        }
    }
    keys.into_iter()
        .filter_map(|(series, idle)| {
            let side = findings::Side {
                series: &series,
                idle,
            };
            let (va, _) = findings::knee_trials(sa, &side);
            let (vb, _) = findings::knee_trials(sb, &side);
            Change::of(side_words(&series, idle), "capacity (requests/s)", &va, &vb)
        })
        .collect()
}

/// Compares two runs' summaries (`a_path` and `b_path` name them in the output).
pub fn summaries(a_path: &str, sa: &Summary, b_path: &str, sb: &Summary) -> Comparison {
    let (a, b) = (run_of(a_path, sa), run_of(b_path, sb));
    Comparison {
        warnings: warnings(&a, &b, sa, sb),
        a,
        b,
        findings: finding_changes(sa, sb),
        capacities: capacity_changes(sa, sb),
        points: point_changes(sa, sb),
    }
}

/// The fraction of `pairs` seeded synthetic comparisons of `n` trials per side, B shifted by
/// `shift` standard deviations (of one trial, on the logarithms), that [`Change`] calls
/// significant: the false-positive rate at 0, the power above it.
pub fn significant_rate(n: usize, shift: f64, pairs: usize, seed: u64) -> f64 {
    let mut rng = crate::analysis::stats::Rng::new(seed);
    let sd = 0.1;
    let mut hits = 0;
    for _ in 0..pairs {
        let a: Vec<f64> = (0..n).map(|_| (8.0 + sd * rng.normal()).exp()).collect();
        let b: Vec<f64> = (0..n)
            .map(|_| (8.0 + sd * (shift + rng.normal())).exp())
            .collect();
        if Change::of(String::new(), "", &a, &b).is_some_and(|c| c.significant) {
            hits += 1;
        }
    }
    hits as f64 / pairs as f64
}

/// Compares two `evlab load --json` reports: one run per side, so every change is shown
/// without an interval and none is called significant (the report says so).
pub fn loads(
    a_path: &str,
    a: &evlab_wire::load::LoadReport,
    b_path: &str,
    b: &evlab_wire::load::LoadReport,
) -> Comparison {
    let run = |path: &str, r: &evlab_wire::load::LoadReport| Run {
        path: path.to_string(),
        experiment: format!(
            "evlab load, {}/s offered",
            thousands(r.schedule.offered_rate)
        ),
        started: String::new(),
        build: r.version.clone(),
        trials: 1,
    };
    let (ra, rb) = (run(a_path, a), run(b_path, b));
    let mut warnings = vec![
        "one run per side: no interval, so no change can be called significant (compare two \
         results directories of 3 or more trials for that)"
            .to_string(),
    ];
    if ra.build != rb.build {
        warnings.push(format!("mixed builds: A {}; B {}", ra.build, rb.build));
    }
    if a.schedule.offered_rate != b.schedule.offered_rate {
        warnings.push("the offered rates differ".into());
    }
    let one = |what: &str, quantity: &str, x: f64, y: f64| Change {
        what: what.to_string(),
        quantity: quantity.to_string(),
        a_n: 1,
        a_mean: x,
        b_n: 1,
        b_mean: y,
        ratio: None,
        significant: false,
    };
    let (la, lb) = (&a.latency_ms, &b.latency_ms);
    let points = vec![
        one(
            "the run",
            "replies/s",
            a.replies.rate.avg,
            b.replies.rate.avg,
        ),
        one(
            "the run",
            "errors",
            a.errors.total as f64,
            b.errors.total as f64,
        ),
        one("the run", "latency p50 (ms)", la.p50, lb.p50),
        one("the run", "latency p99 (ms)", la.p99, lb.p99),
        one("the run", "latency p99.9 (ms)", la.p999, lb.p999),
        one("the run", "client CPU (%)", a.cpu.percent, b.cpu.percent),
    ];
    Comparison {
        a: ra,
        b: rb,
        warnings,
        findings: Vec::new(),
        capacities: Vec::new(),
        points,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::findings::tests::{fig5, with_knees};

    /// The paper's shape: select and poll lose most of their capacity to idle connections.
    fn paper() -> Summary {
        let s = fig5(&|m| match m {
            "select" | "poll" => 2000.0,
            "epoll-lt" => 4500.0,
            _ => 5000.0,
        });
        with_knees(s, &|m, idle| match (m, idle) {
            ("select" | "poll", 10_000) => 3000.0,
            _ => 6000.0,
        })
    }

    #[test]
    fn a_run_against_itself_changes_nothing() {
        let s = paper();
        let c = summaries("a", &s, "b", &s);
        assert_eq!(c.verdicts_changed(), 0);
        assert!(!c.findings.is_empty());
        assert!(c.findings.iter().all(|f| f.a.is_some() && f.a == f.b));
        // 4 series × 2 idle counts × 2 rates × 2 quantities, and a capacity per series and idle.
        assert_eq!(c.points.len(), 32);
        assert_eq!(c.capacities.len(), 8);
        assert!(c.points.iter().chain(&c.capacities).all(|x| !x.significant));
        let p = &c.points[0];
        assert_eq!(p.what, "select, no idle, rate 1 of 2 (2,000/s offered)");
        assert_eq!((p.a_n, p.b_n), (3, 3));
        assert_eq!(p.ratio.map(|r| r[0]), Some(1.0));
        // The same build on both sides: no warning (the summaries' builds are equal).
        assert!(
            c.warnings.iter().all(|w| !w.starts_with("mixed builds")),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn changed_verdicts_come_first_and_significant_changes_are_marked() {
        let a = paper();
        // select keeps its capacity with the idle connections in B.
        let b = with_knees(
            fig5(&|m| match m {
                "poll" => 2000.0,
                "epoll-lt" => 4500.0,
                _ => 5000.0,
            }),
            &|m, idle| match (m, idle) {
                ("poll", 10_000) => 3000.0,
                _ => 6000.0,
            },
        );
        let c = summaries("a", &a, "b", &b);
        assert!(c.verdicts_changed() >= 2, "{:#?}", c.findings);
        let first = &c.findings[0];
        assert!(first.opposite(), "{first:?}");
        assert!(first.rule.starts_with("fig5-select"), "{first:?}");
        // Every changed verdict comes before every unchanged one.
        let changed: Vec<bool> = c.findings.iter().map(FindingChange::changed).collect();
        assert!(changed.windows(2).all(|w| w[0] || !w[1]), "{changed:?}");
        let cap = c
            .capacities
            .iter()
            .find(|x| x.what == "select, 10,000 idle")
            .unwrap();
        assert!(cap.significant, "{cap:?}");
        assert!((cap.ratio.unwrap()[0] - 2.0).abs() < 0.01, "{cap:?}");
        let same = c
            .capacities
            .iter()
            .find(|x| x.what == "poll, 10,000 idle")
            .unwrap();
        assert!(!same.significant, "{same:?}");
    }

    #[test]
    fn mixed_and_dirty_builds_are_warned_about() {
        let a = paper();
        let mut b = paper();
        b.machine.evlab_version = "0.1.0 (commit 0123456789ab, dirty; rustc 1.91.0)".into();
        let c = summaries("a", &a, "b", &b);
        assert!(c.warnings.iter().any(|w| w.starts_with("mixed builds")));
        assert!(c
            .warnings
            .iter()
            .any(|w| w.starts_with("B was made by a build with uncommitted")));
    }

    /// 200 seeded pairs of 3 trials per side (issue 24): with no shift at most 10% are called
    /// significant (the interval's level); the power at 2 and 3 standard deviations is what
    /// a two-sided 90% Welch interval on 3 + 3 trials gives (no test of that level can reach
    /// 80% at 2: even a z-test that knew the standard deviation has 79%).
    #[test]
    fn the_significance_call_holds_its_level_and_has_the_power_of_its_test() {
        let none = significant_rate(3, 0.0, 200, 7);
        assert!(none <= 0.10, "{none}");
        let two = significant_rate(3, 2.0, 200, 7);
        let three = significant_rate(3, 3.0, 200, 7);
        eprintln!("called significant: {none} with no shift, {two} at 2 SD, {three} at 3 SD");
        assert!(two >= 0.45, "{two}");
        assert!(three >= 0.75 && three > two, "{three}");
    }
}
