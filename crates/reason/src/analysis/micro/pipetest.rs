//! pipetest's findings (the LSE epoll page's): the exponent k of rate ∝ pipes^k fitted to each
//! sweep, and the three claims decided on its interval. `evlab-micro` runs the benchmark.

use evlab_wire::micro::pipetest::{Point, Report, Slope, Status};
use evlab_wire::micro::{Finding, Verdict};

use crate::analysis::micro::{Judged, Measure};
use crate::analysis::sample::{power_exponent, Interval, MIN_REPEATS};
use crate::model::text::num;

/// The threshold on the exponent k of rate ∝ pipes^k, from the LSE page's own claim. The page
/// (`seeds/epoll-scalability-page.txt`) gives its pipetest results as figures only; its words
/// are that sys_epoll stays flat while poll falls as the pipes grow, because poll copies and
/// scans every registered pipe at every wait: its rate falls in proportion to the pipes. The
/// two shapes are k = 0 (flat) and k = −1 (proportional). Half-way between them in log terms
/// — over any range of pipes N0..N, the geometric mean of the flat ratio 1 and the
/// proportional ratio N0/N, which is (N0/N)^½ — is k = −½: a line nearer flat than
/// proportional has k > −½, one nearer proportional k < −½.
pub const K_HALFWAY: f64 = -0.5;

/// The least difference k(epoll-lt) − k(other) that "scales better" means: flat against
/// proportional is a difference of 1, and half of it (the same half-way in log terms) is ½.
pub const K_BETTER: f64 = 0.5;

/// The registry ids of pipetest's findings (the lab's `analysis::rules`, docs/findings.md).
pub const RULE_IDS: [&str; 3] = [
    "pipetest-poll-falls",
    "pipetest-epoll-flat",
    "pipetest-epoll-beats-poll-aio",
];

/// Each mechanism's k, fitted to each sweep over the points measured in every sweep.
pub fn slopes(r: &Report) -> Vec<Slope> {
    let mut out = Vec::new();
    for m in &r.mechanisms {
        let pts: Vec<&Point> = r
            .points
            .iter()
            .filter(|p| &p.mechanism == m && p.status == Status::Ok)
            .filter(|p| p.runs.len() == r.repeat && r.repeat > 0)
            .collect();
        let mut pipes: Vec<usize> = pts.iter().map(|p| p.pipes).collect();
        pipes.sort_unstable();
        pipes.dedup();
        if pipes.len() < 2 {
            continue;
        }
        let k: Option<Vec<f64>> = (0..r.repeat)
            .map(|i| {
                let xy: Vec<(f64, f64)> = pts
                    .iter()
                    .map(|p| (p.pipes as f64, p.runs[i].passes_per_sec))
                    .collect();
                power_exponent(&xy)
            })
            .collect();
        let Some(k) = k else { continue };
        let Some(iv) = Interval::of_mean(&k) else {
            continue;
        };
        let bounded = iv.n >= 2;
        out.push(Slope {
            mechanism: m.clone(),
            k,
            pipes,
            mean: iv.mean,
            lo: bounded.then_some(iv.lo),
            hi: bounded.then_some(iv.hi),
        });
    }
    out
}

/// The LSE page's findings, each decided on the 90% t interval of k (or of the difference of
/// two mechanisms' k, sweep by sweep) over the sweeps: poll falls, sys_epoll (level-triggered,
/// as on the page) stays flat, and sys_epoll scales better than poll and AIO poll.
pub fn findings(r: &Report) -> Vec<Finding> {
    judged(r).into_iter().map(|j| j.finding).collect()
}

/// [`findings`], each with the measure it was decided on: 10^k per tenfold of pipes (for the
/// comparison, 10^d of the pair whose interval reaches lowest, the one nearest failing).
pub fn judged(r: &Report) -> Vec<Judged> {
    let slopes = if r.slopes.is_empty() {
        slopes(r)
    } else {
        r.slopes.clone()
    };
    let of = |m: &str| slopes.iter().find(|s| s.mechanism == m);
    // The ends of a mechanism's line (medians), for the evidence.
    let ends = |m: &str| -> String {
        let mut pts: Vec<(usize, f64)> = r
            .points
            .iter()
            .filter(|p| p.mechanism == m && p.status == Status::Ok)
            .filter_map(|p| p.passes_per_sec.map(|v| (p.pipes, v)))
            .collect();
        pts.sort_by_key(|p| p.0);
        match (pts.first(), pts.last()) {
            (Some(a), Some(b)) if b.0 > a.0 => format!(
                "; median {} passes/s at {} pipes, {} at {}",
                num(a.1, 0),
                a.0,
                num(b.1, 0),
                b.0
            ),
            _ => String::new(),
        }
    };
    let say = |s: &Slope| {
        let iv = Interval::of_mean(&s.k).expect("finite k");
        format!(
            "{}: k = {}, {}..{} pipes{}",
            s.mechanism,
            iv.words(2, "sweeps"),
            s.pipes.first().unwrap_or(&0),
            s.pipes.last().unwrap_or(&0),
            ends(&s.mechanism)
        )
    };
    let missing = |m: &str| format!("{m} was not measured at two numbers of pipes");
    let one = |id: &str, claim: &str, m: &str, decide: fn(&Interval) -> Verdict| match of(m) {
        Some(s) => {
            let iv = Interval::of_mean(&s.k).expect("finite k");
            let mut why = say(s);
            if iv.n < MIN_REPEATS {
                why.push_str(&format!(" ({} sweep(s): {MIN_REPEATS} needed)", iv.n));
            }
            Judged::new(
                Finding::decided(id, claim, decide(&iv), why),
                Measure::per_tenfold(&iv, format!("10^k per tenfold of pipes, {m}")),
            )
        }
        None => Judged::new(
            Finding::decided(id, claim, Verdict::NotMeasured, missing(m)),
            None,
        ),
    };
    let better = better(&slopes);
    vec![
        one(
            RULE_IDS[0],
            "poll falls as the pipes grow: rate ∝ pipes^k with k < -0.5, nearer a scan of \
             every pipe (k = -1) than flat (90% interval over the sweeps)",
            "poll",
            |iv| iv.at_most(K_HALFWAY),
        ),
        one(
            RULE_IDS[1],
            "sys_epoll (epoll-lt) stays about flat: rate ∝ pipes^k with k > -0.5, nearer flat \
             than a scan of every pipe (90% interval over the sweeps)",
            "epoll-lt",
            |iv| iv.at_least(K_HALFWAY),
        ),
        Judged::new(
            Finding::decided(
                RULE_IDS[2],
                "sys_epoll scales better than poll and AIO poll: k(epoll-lt) − k(poll) ≥ 0.5 and \
                 k(epoll-lt) − k(aio-poll) ≥ 0.5 (90% interval of the sweeps' differences)",
                better.0,
                better.1,
            ),
            better.2,
        ),
    ]
}

/// sys_epoll against each of poll and aio-poll, sweep by sweep (the sweeps are interleaved, so
/// sweep i of both ran under the same conditions): the verdict, its evidence, and the measure
/// of the pair whose interval reaches lowest.
fn better(slopes: &[Slope]) -> (Verdict, String, Option<Measure>) {
    let of = |m: &str| slopes.iter().find(|s| s.mechanism == m);
    let missing = |m: &str| format!("{m} was not measured at two numbers of pipes");
    // sys_epoll against each of the others, sweep by sweep (the sweeps are interleaved, so
    // sweep i of both ran under the same conditions).
    let ep = of("epoll-lt");
    let others: Vec<(&str, Option<&Slope>)> =
        ["poll", "aio-poll"].iter().map(|m| (*m, of(m))).collect();
    match ep {
        None => (Verdict::NotMeasured, missing("epoll-lt"), None),
        Some(e) => {
            let mut verdicts = Vec::new();
            let mut words = Vec::new();
            let mut lowest: Option<Measure> = None;
            for (m, o) in others {
                let Some(o) = o else {
                    verdicts.push(Verdict::NotMeasured);
                    words.push(missing(m));
                    continue;
                };
                let d: Vec<f64> = e.k.iter().zip(&o.k).map(|(a, b)| a - b).collect();
                let iv = Interval::of_mean(&d).expect("finite k");
                verdicts.push(iv.at_least(K_BETTER));
                let measure = Measure::per_tenfold(
                    &iv,
                    format!("10^d per tenfold of pipes, d = k(epoll-lt) − k({m})"),
                );
                if let Some(x) = measure.filter(|x| lowest.as_ref().is_none_or(|l| x.lo < l.lo)) {
                    lowest = Some(x);
                }
                words.push(format!(
                    "k(epoll-lt) − k({m}) = {} (k({m}) = {:.2})",
                    iv.words(2, "sweeps"),
                    o.mean
                ));
            }
            let v = if verdicts.contains(&Verdict::NotMeasured) {
                Verdict::NotMeasured
            } else if verdicts.contains(&Verdict::NotReproduced) {
                Verdict::NotReproduced
            } else if verdicts.iter().all(|v| *v == Verdict::Reproduced) {
                Verdict::Reproduced
            } else {
                Verdict::Inconclusive
            };
            let n = e.k.len();
            let mut why = format!("k(epoll-lt) = {:.2}; {}", e.mean, words.join("; "));
            if n < MIN_REPEATS {
                why.push_str(&format!(" ({n} sweep(s): {MIN_REPEATS} needed)"));
            }
            (v, why, lowest)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::analysis::sample::median;
    use evlab_wire::micro::pipetest::{Route, Run};

    pub(crate) fn run_at(v: f64) -> Run {
        Run {
            passes: 300,
            seconds: 300.0 / v,
            passes_per_sec: v,
            setup_seconds: 0.0,
            waits: 0,
            events: 0,
            empty_reads: 0,
            syscalls: BTreeMap::new(),
        }
    }

    /// A report whose mechanism m, in sweep i, has rate 100,000 × (pipes / 10)^k[i] at 10, 100
    /// and 1,000 pipes.
    pub(crate) fn synthetic(lines: &[(&str, &[f64])]) -> Report {
        let repeat = lines.first().map_or(0, |l| l.1.len());
        let pipes = vec![10, 100, 1000];
        let mut points = Vec::new();
        for &n in &pipes {
            for (m, ks) in lines {
                let runs: Vec<Run> = ks
                    .iter()
                    .map(|k| run_at(1e5 * (n as f64 / 10.0).powf(*k)))
                    .collect();
                points.push(Point {
                    mechanism: m.to_string(),
                    pipes: n,
                    status: Status::Ok,
                    reason: None,
                    passes_per_sec: median(
                        &runs.iter().map(|r| r.passes_per_sec).collect::<Vec<_>>(),
                    ),
                    runs,
                });
            }
        }
        let mut r = Report {
            benchmark: "pipetest".into(),
            machine: crate::analysis::micro::machine(),
            message_threads: 1,
            max_generation: 300,
            route: Route::Stride17,
            repeat,
            mechanisms: lines.iter().map(|l| l.0.to_string()).collect(),
            pipes,
            points,
            findings: vec![],
            slopes: vec![],
        };
        r.slopes = slopes(&r);
        r
    }

    fn verdicts(r: &Report) -> Vec<Verdict> {
        findings(r).iter().map(|f| f.verdict).collect()
    }

    #[test]
    fn each_finding_is_decided_on_the_interval_of_k() {
        use Verdict::*;
        let poll: &[f64] = &[-0.90, -0.92, -0.88];
        let flat: &[f64] = &[-0.05, -0.07, -0.06];
        let aio: &[f64] = &[-0.80, -0.85, -0.90];
        let r = synthetic(&[("poll", poll), ("epoll-lt", flat), ("aio-poll", aio)]);
        let s = &r.slopes[0];
        assert_eq!(s.mechanism, "poll");
        assert_eq!(s.pipes, [10, 100, 1000]);
        assert!(
            (s.k[1] + 0.92).abs() < 1e-9 && (s.mean + 0.90).abs() < 1e-9,
            "{s:?}"
        );
        assert!(s.lo.unwrap() < -0.9 && s.hi.unwrap() > -0.9);
        let f = findings(&r);
        assert_eq!(verdicts(&r), [Reproduced; 3]);
        let ids: Vec<&str> = f.iter().map(|f| f.rule.as_str()).collect();
        assert_eq!(ids, RULE_IDS);
        assert!(f[1].evidence.contains("k = -0.06 ["), "{}", f[1].evidence);
        assert!(
            f[2].evidence.contains("k(epoll-lt) − k(aio-poll) = 0.79"),
            "{}",
            f[2].evidence
        );

        // epoll falling as poll does: not flat, not better.
        let r = synthetic(&[("poll", poll), ("epoll-lt", aio), ("aio-poll", aio)]);
        assert_eq!(verdicts(&r), [Reproduced, NotReproduced, NotReproduced]);
        // poll flat: does not fall; epoll not better than it.
        let r = synthetic(&[("poll", flat), ("epoll-lt", flat), ("aio-poll", aio)]);
        assert_eq!(verdicts(&r), [NotReproduced, Reproduced, NotReproduced]);
        // Sweeps that straddle the threshold: inconclusive.
        let wide: &[f64] = &[-0.2, -0.8, -0.5];
        let r = synthetic(&[("poll", poll), ("epoll-lt", wide), ("aio-poll", aio)]);
        assert_eq!(verdicts(&r), [Reproduced, Inconclusive, Inconclusive]);
        let r = synthetic(&[("poll", wide), ("epoll-lt", flat), ("aio-poll", aio)]);
        assert_eq!(verdicts(&r), [Inconclusive, Reproduced, Inconclusive]);
        // Two sweeps decide nothing, however clear.
        let r = synthetic(&[
            ("poll", &poll[..2]),
            ("epoll-lt", &flat[..2]),
            ("aio-poll", &aio[..2]),
        ]);
        assert_eq!(verdicts(&r), [Inconclusive; 3]);
        assert!(findings(&r)[0].evidence.contains("3 needed"));
        // A mechanism missing: not measured.
        let r = synthetic(&[("poll", poll), ("epoll-lt", flat)]);
        assert_eq!(verdicts(&r), [Reproduced, Reproduced, NotMeasured]);
        assert!(findings(&r)[2]
            .evidence
            .contains("aio-poll was not measured"));
        let mut r = synthetic(&[("poll", poll)]);
        r.points.retain(|p| p.pipes == 10);
        r.slopes = slopes(&r);
        assert_eq!(verdicts(&r), [NotMeasured; 3]);
    }

    /// Each finding comes with the measure that decided it, as a factor per tenfold: 10^k for
    /// one mechanism, 10^d of the pair nearest failing for the comparison; none where nothing
    /// was measured.
    #[test]
    fn each_finding_carries_its_measure_per_tenfold() {
        let r = synthetic(&[
            ("poll", &[-0.90, -0.92, -0.88]),
            ("epoll-lt", &[-0.05, -0.07, -0.06]),
            ("aio-poll", &[-0.50, -0.52, -0.48]),
        ]);
        let j = judged(&r);
        assert_eq!(
            j.iter().map(|j| j.finding.clone()).collect::<Vec<_>>(),
            findings(&r)
        );
        let m: Vec<&Measure> = j.iter().map(|j| j.measure.as_ref().unwrap()).collect();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(m[0].value, 10f64.powf(-0.90)), "{:?}", m[0]);
        assert!(m[0].lo < m[0].value && m[0].value < m[0].hi);
        assert!(m[0].hi < crate::analysis::rules::PIPES_HALFWAY);
        assert_eq!(m[0].n, 3);
        assert_eq!(m[0].what, "10^k per tenfold of pipes, poll");
        // Against aio-poll (d = 0.44) epoll's lead is smaller than against poll (0.84).
        assert!(close(m[2].value, 10f64.powf(0.44)), "{:?}", m[2]);
        assert!(m[2].what.ends_with("k(aio-poll)"), "{}", m[2].what);
        let r = synthetic(&[("poll", &[-0.9, -0.9, -0.9])]);
        assert!(judged(&r)[1].measure.is_none());
        // One sweep: an unbounded interval, so no measure to draw.
        let r = synthetic(&[("poll", &[-0.9])]);
        assert!(judged(&r)[0].measure.is_none());
    }
}
