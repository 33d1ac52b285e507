//! Medians and percentiles for the benchmarks' repeated measurements, and the t interval of a
//! mean that the findings are decided on.
//!
//! The decisions follow the lab's discipline (`docs/findings.md`): a 90% two-sided interval
//! over at least [`MIN_REPEATS`] interleaved repeats; "reproduced" only when the whole interval
//! clears the threshold, "not reproduced" when the whole interval lies on the other side,
//! "inconclusive" otherwise.

use crate::Verdict;

/// Two-sided confidence level of every interval.
pub const LEVEL: f64 = 0.90;

/// The fewest repeats a verdict is decided on.
pub const MIN_REPEATS: usize = 3;

/// Student's t, the 0.95 quantile (two-sided 90%), for 1 to 30 degrees of freedom (any
/// statistics table).
const T95: [f64; 30] = [
    6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771,
    1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706,
    1.703, 1.701, 1.699, 1.697,
];

/// The 0.95 quantile of Student's t with `df` degrees of freedom: the table up to 30, beyond
/// it the Cornish–Fisher expansion around the normal's 1.645 (within 0.001 of the tables).
pub fn t95(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T95[df - 1],
        _ => {
            let z: f64 = 1.644_853_626_951_472_2;
            let n = df as f64;
            let (z3, z5) = (z.powi(3), z.powi(5));
            z + (z3 + z) / (4.0 * n)
                + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * n * n)
                + (3.0 * z.powi(7) + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * n.powi(3))
        }
    }
}

/// The mean of repeated values with its 90% t interval.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Interval {
    pub n: usize,
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    /// `None` when `xs` is empty or holds a value that is not finite; with one value the
    /// interval is unbounded.
    pub fn of_mean(xs: &[f64]) -> Option<Interval> {
        if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Some(Interval {
                n,
                mean,
                lo: f64::NEG_INFINITY,
                hi: f64::INFINITY,
            });
        }
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n as f64 - 1.0);
        let half = t95(n - 1) * (var / n as f64).sqrt();
        Some(Interval {
            n,
            mean,
            lo: mean - half,
            hi: mean + half,
        })
    }

    /// The claim "the mean is at least `x`": reproduced when the whole interval is at or above
    /// it, not reproduced when the whole interval is below, inconclusive otherwise or with
    /// fewer than [`MIN_REPEATS`] values.
    pub fn at_least(&self, x: f64) -> Verdict {
        if self.n < MIN_REPEATS {
            Verdict::Inconclusive
        } else if self.lo >= x {
            Verdict::Reproduced
        } else if self.hi < x {
            Verdict::NotReproduced
        } else {
            Verdict::Inconclusive
        }
    }

    /// The claim "the mean is at most `x`", as [`Interval::at_least`].
    pub fn at_most(&self, x: f64) -> Verdict {
        if self.n < MIN_REPEATS {
            Verdict::Inconclusive
        } else if self.hi <= x {
            Verdict::Reproduced
        } else if self.lo > x {
            Verdict::NotReproduced
        } else {
            Verdict::Inconclusive
        }
    }

    /// "0.12 [0.08, 0.16] over 5 sweeps", `over` naming the repeats.
    pub fn words(&self, digits: usize, over: &str) -> String {
        if self.n < 2 {
            return format!(
                "{:.*} over {} {over} (no interval)",
                digits, self.mean, self.n
            );
        }
        format!(
            "{:.*} [{:.*}, {:.*}] over {} {over}",
            digits, self.mean, digits, self.lo, digits, self.hi, self.n
        )
    }
}

/// The slope of the least-squares line of `y` on `x`; `None` with fewer than two distinct x or
/// a value that is not finite.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.iter().any(|(x, y)| !x.is_finite() || !y.is_finite()) {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (points.len() >= 2 && sxx > 0.0).then(|| sxy / sxx)
}

/// The exponent k of y ∝ x^k fitted on the logarithms; `None` when a value is not positive.
pub fn power_exponent(points: &[(f64, f64)]) -> Option<f64> {
    if points.iter().any(|(x, y)| *x <= 0.0 || *y <= 0.0) {
        return None;
    }
    let logs: Vec<(f64, f64)> = points.iter().map(|(x, y)| (x.ln(), y.ln())).collect();
    slope(&logs)
}

/// The median of `xs` (the mean of the middle two for an even count); `None` when empty.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The percentiles a report carries, defined in `evlab-wire`.
pub use evlab_wire::micro::Percentiles;

/// The `p`-th percentile (0–100) of `sorted`, by the nearest-rank method; 0 when empty.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Sorts `nanos` and reads the percentiles off it.
pub fn percentiles(nanos: &mut [u64]) -> Percentiles {
    nanos.sort_unstable();
    let us = |n: u64| n as f64 / 1000.0;
    Percentiles {
        count: nanos.len(),
        p50_us: us(percentile(nanos, 50.0)),
        p90_us: us(percentile(nanos, 90.0)),
        p99_us: us(percentile(nanos, 99.0)),
        max_us: us(nanos.last().copied().unwrap_or(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_percentiles() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&v, 0.0), 1);
        assert_eq!(percentile(&[], 50.0), 0);
        let mut n = vec![3000, 1000, 2000];
        let p = percentiles(&mut n);
        assert_eq!((p.count, p.p50_us, p.max_us), (3, 2.0, 3.0));
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        // The 0.95 quantile of Student's t (two-sided 90%), from the tables.
        for (df, q) in [
            (1, 6.314),
            (2, 2.920),
            (4, 2.132),
            (10, 1.812),
            (30, 1.697),
            (40, 1.684),
            (60, 1.671),
            (120, 1.658),
            (1_000_000, 1.645),
        ] {
            assert!((t95(df) - q).abs() < 1e-3, "df {df}: {} vs {q}", t95(df));
        }
        assert!(t95(0).is_infinite());
        // The expansion meets the table where they join.
        assert!((t95(31) - 1.696).abs() < 1e-3, "{}", t95(31));
    }

    #[test]
    fn intervals_of_known_samples() {
        // mean 2, s = 1, n = 3: half-width 2.920 / sqrt(3).
        let i = Interval::of_mean(&[1.0, 2.0, 3.0]).unwrap();
        let half = 2.920 / 3f64.sqrt();
        assert!((i.mean - 2.0).abs() < 1e-12);
        assert!((i.lo - (2.0 - half)).abs() < 1e-9 && (i.hi - (2.0 + half)).abs() < 1e-9);
        assert_eq!(i.words(2, "sweeps"), "2.00 [0.31, 3.69] over 3 sweeps");
        let one = Interval::of_mean(&[5.0]).unwrap();
        assert!(one.lo.is_infinite() && one.hi.is_infinite());
        assert!(Interval::of_mean(&[]).is_none());
        assert!(Interval::of_mean(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn each_claim_gives_each_outcome() {
        use Verdict::*;
        let iv = |lo: f64, hi: f64, n: usize| Interval {
            n,
            mean: (lo + hi) / 2.0,
            lo,
            hi,
        };
        assert_eq!(iv(-0.3, -0.1, 3).at_least(-0.5), Reproduced);
        assert_eq!(iv(-0.9, -0.6, 3).at_least(-0.5), NotReproduced);
        assert_eq!(iv(-0.6, -0.4, 3).at_least(-0.5), Inconclusive);
        assert_eq!(
            iv(-0.3, -0.1, 2).at_least(-0.5),
            Inconclusive,
            "two repeats"
        );
        assert_eq!(iv(-0.9, -0.6, 3).at_most(-0.5), Reproduced);
        assert_eq!(iv(-0.3, -0.1, 3).at_most(-0.5), NotReproduced);
        assert_eq!(iv(-0.6, -0.4, 3).at_most(-0.5), Inconclusive);
    }

    #[test]
    fn power_law_exponents() {
        let pts: Vec<(f64, f64)> = [10.0, 100.0, 1000.0]
            .iter()
            .map(|&x: &f64| (x, 5.0 * x.powf(-0.7)))
            .collect();
        assert!((power_exponent(&pts).unwrap() + 0.7).abs() < 1e-12);
        assert_eq!(power_exponent(&[(10.0, 1.0)]), None);
        assert_eq!(power_exponent(&[(10.0, 1.0), (10.0, 2.0)]), None);
        assert_eq!(power_exponent(&[(10.0, 0.0), (20.0, 2.0)]), None);
    }
}
