//! fdalloc's findings (the Linux Scalability Project's descriptor allocation): the exponent k
//! of time ∝ n^k of the second open over the rounds, flat or not, and its negative control
//! judged by the same rule. `evlab-micro` runs the benchmark.

use evlab_wire::micro::fdalloc::{Point, Report};
use evlab_wire::micro::{Finding, Verdict};

use crate::analysis::micro::{Judged, Measure};
use crate::analysis::sample::{power_exponent, Interval, MIN_REPEATS};
use crate::model::text::num;

/// The threshold on the exponent k of time ∝ n^k of the second open, from the seed's own
/// claim (`seeds/linux-scalability-project.txt`): with one bitmap "the time to find an open
/// file descriptor increases linearly with the number of open files" (k = 1); with the
/// two-level bitmap it does not grow (k = 0). Half-way between them in log terms — over any
/// range n0..n, the geometric mean of the flat ratio 1 and the linear ratio n/n0 — is k = ½:
/// "flat" is k < ½, nearer flat than linear.
pub const K_LINEAR_HALF: f64 = 0.5;

/// The registry ids of fdalloc's findings (the lab's `analysis::rules`, docs/findings.md).
pub const RULE_IDS: [&str; 2] = ["fdalloc-flat", "fdalloc-negative-control"];
pub const FLAT_RULE: &str = RULE_IDS[0];
pub const FLAT_CLAIM: &str =
    "the second open does not grow with n (a two-level bitmap, as the LSP \
                          proposed): time ∝ n^k with k < 0.5, nearer flat than linear (90% \
                          interval over the rounds)";

/// The flatness rule on `points`: k fitted to each round's second call against n, decided on
/// the 90% t interval of its mean. Used alike for the kernel and for the control.
pub fn flat(points: &[Point], repeat: usize, call: &str, rule: &str, claim: &str) -> Finding {
    flat_judged(points, repeat, call, rule, claim).finding
}

/// [`flat`], with the measure it was decided on: 10^k per tenfold of n.
pub fn flat_judged(points: &[Point], repeat: usize, call: &str, rule: &str, claim: &str) -> Judged {
    let mut pts: Vec<&Point> = points.iter().collect();
    pts.sort_by_key(|p| p.n);
    let complete = repeat > 0 && pts.iter().all(|p| p.second_runs_ns.len() == repeat);
    let rounds = if complete { repeat } else { 0 };
    let ks: Option<Vec<f64>> = (0..rounds)
        .map(|i| {
            let xy: Vec<(f64, f64)> = pts
                .iter()
                .map(|p| (p.n as f64, p.second_runs_ns[i].max(1.0)))
                .collect();
            power_exponent(&xy)
        })
        .collect();
    let iv = ks
        .filter(|_| complete && pts.len() >= 2)
        .and_then(|k| Interval::of_mean(&k));
    let (Some(iv), Some(lo), Some(hi)) = (iv, pts.first(), pts.last()) else {
        return Judged::new(
            Finding::decided(
                rule,
                claim,
                Verdict::NotMeasured,
                "fewer than two values of n were measured in every round".into(),
            ),
            None,
        );
    };
    let mut why = format!(
        "second {call}: k = {}, n = {}..{}; medians {} ns at n = {}, {} ns at n = {} (x{:.2})",
        iv.words(2, "rounds"),
        lo.n,
        hi.n,
        num(lo.second_open_ns, 0),
        lo.n,
        num(hi.second_open_ns, 0),
        hi.n,
        hi.second_open_ns / lo.second_open_ns.max(1.0)
    );
    if iv.n < MIN_REPEATS {
        why.push_str(&format!(" ({} round(s): {MIN_REPEATS} needed)", iv.n));
    }
    Judged::new(
        Finding::decided(rule, claim, iv.at_most(K_LINEAR_HALF), why),
        Measure::per_tenfold(&iv, format!("10^k per tenfold of n, the second {call}")),
    )
}

/// The LSP's finding (with a two-level bitmap the search for n does not grow with n; with one
/// bitmap it grew linearly), and its negative control: the same rule on the linear-scan
/// allocator must not find it flat.
pub fn findings(r: &Report) -> Vec<Finding> {
    judged(r).into_iter().map(|j| j.finding).collect()
}

/// [`findings`], each with the measure it was decided on; the control's is measured again
/// from its points, by the same function that judged it.
pub fn judged(r: &Report) -> Vec<Judged> {
    let mut out = vec![flat_judged(
        &r.points,
        r.repeat,
        r.op.name(),
        FLAT_RULE,
        FLAT_CLAIM,
    )];
    if let Some(c) = &r.negative_control {
        let v = c.finding.verdict;
        let outcome = match v {
            Verdict::NotReproduced => "the control passes: the rule can find growth",
            Verdict::Reproduced => "the control FAILS: the rule called a linear search flat",
            Verdict::Inconclusive => "the control is not decided",
            Verdict::NotMeasured => "the control was not measured",
        };
        let measure = flat_judged(&c.points, r.repeat, "allocation", FLAT_RULE, FLAT_CLAIM)
            .measure
            .map(|m| Measure {
                what: "10^k per tenfold of n, the linear scan's second allocation".into(),
                ..m
            });
        out.push(Judged::new(
            Finding::decided(
                RULE_IDS[1],
                "negative control: the same rule on a linear-scan allocator in user space (the \
                 LSP's single bitmap) must come out not reproduced",
                v,
                format!("{}; {outcome}", c.finding.evidence),
            ),
            measure,
        ));
    }
    out
}

#[cfg(test)]
/// Points at n = 1,000, 2,000, 4,000, 8,000 whose second call takes c × n^k[i] ns in round i.
pub(crate) fn synthetic(ks: &[f64]) -> Vec<Point> {
    [1000u64, 2000, 4000, 8000]
        .iter()
        .map(|&n| {
            let runs: Vec<f64> = ks
                .iter()
                .map(|k| 300.0 * (n as f64 / 1000.0).powf(*k))
                .collect();
            Point {
                n,
                first_fd: 3,
                second_fd: n,
                first_open_ns: 300.0,
                second_open_ns: crate::analysis::sample::median(&runs).unwrap(),
                both_ns: 600.0,
                second_runs_ns: runs,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flat_rule_gives_each_outcome_on_synthetic_rounds() {
        use Verdict::*;
        let v = |ks: &[f64]| flat(&synthetic(ks), ks.len(), "open", FLAT_RULE, FLAT_CLAIM);
        let f = v(&[0.01, -0.02, 0.0, 0.02, -0.01]);
        assert_eq!(f.verdict, Reproduced, "{}", f.evidence);
        assert_eq!(f.rule, "fdalloc-flat");
        assert!(f.evidence.contains("k = 0.00 ["), "{}", f.evidence);
        assert_eq!(v(&[0.9, 0.95, 1.0, 0.92]).verdict, NotReproduced);
        assert_eq!(v(&[0.1, 0.9, 0.5, 0.3]).verdict, Inconclusive);
        let two = v(&[0.0, 0.01]);
        assert_eq!(two.verdict, Inconclusive, "two rounds decide nothing");
        assert!(two.evidence.contains("3 needed"), "{}", two.evidence);
        // One n, or medians without their rounds (a report from before the rule): not measured.
        let mut one = synthetic(&[0.0, 0.0, 0.0]);
        one.truncate(1);
        assert_eq!(
            flat(&one, 3, "open", FLAT_RULE, FLAT_CLAIM).verdict,
            NotMeasured
        );
        let mut old = synthetic(&[0.0, 0.0, 0.0]);
        old.iter_mut().for_each(|p| p.second_runs_ns.clear());
        assert_eq!(
            flat(&old, 3, "open", FLAT_RULE, FLAT_CLAIM).verdict,
            NotMeasured
        );
    }
}
