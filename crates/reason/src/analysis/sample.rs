//! One sample's statistics: medians and percentiles of repeated measurements, Student's t
//! (computed, not tabled), and the t interval of a mean that the micro-benchmarks' findings are
//! decided on. The Welch intervals of [`crate::analysis::stats`] use the same t: there is one.
//!
//! The decisions follow the lab's discipline (`docs/findings.md`): a 90% two-sided interval
//! over at least [`MIN_REPEATS`] interleaved repeats; "reproduced" only when the whole interval
//! clears the threshold, "not reproduced" when the whole interval lies on the other side,
//! "inconclusive" otherwise.

use evlab_wire::micro::Verdict;

/// Two-sided confidence level of every interval.
pub const LEVEL: f64 = 0.90;

/// The fewest repeats a verdict is decided on.
pub const MIN_REPEATS: usize = 3;

/// ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9: about 15 digits).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 − x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let num = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
        for num in [
            num,
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0)),
        ] {
            d = 1.0 + num * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + num / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b).
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// P(T ≤ t) for Student's t with `df` degrees of freedom (df may be fractional: Welch's).
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * inc_beta(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// Student's t density.
fn t_pdf(t: f64, df: f64) -> f64 {
    (ln_gamma((df + 1.0) / 2.0) - ln_gamma(df / 2.0)).exp() / (df * std::f64::consts::PI).sqrt()
        * (1.0 + t * t / df).powf(-(df + 1.0) / 2.0)
}

/// The `p` quantile of Student's t (0.5 < p < 1): Newton's method from the normal quantile's
/// neighbourhood, kept inside a bracket that bisection narrows whenever a step leaves it.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while t_cdf(hi, df) < p {
        lo = hi;
        hi *= 2.0;
        if hi > 1e12 {
            return f64::INFINITY;
        }
    }
    let mut t = 0.5 * (lo + hi);
    for _ in 0..100 {
        let f = t_cdf(t, df) - p;
        if f.abs() < 1e-13 {
            break;
        }
        if f < 0.0 {
            lo = t;
        } else {
            hi = t;
        }
        let next = t - f / t_pdf(t, df);
        t = if next > lo && next < hi {
            next
        } else {
            0.5 * (lo + hi)
        };
    }
    t
}

pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The sample variance (n − 1).
pub fn variance(v: &[f64]) -> f64 {
    let m = mean(v);
    v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() as f64 - 1.0)
}

/// The 0.95 quantile of Student's t with `df` degrees of freedom (two-sided 90%).
pub fn t95(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        _ => t_quantile(0.95, df as f64),
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
        // mean 2, s = 1, n = 3: half-width 2.920 / sqrt(3) (the table's 3 decimals).
        let i = Interval::of_mean(&[1.0, 2.0, 3.0]).unwrap();
        let half = 2.920 / 3f64.sqrt();
        assert!((i.mean - 2.0).abs() < 1e-12);
        assert!((i.lo - (2.0 - half)).abs() < 1e-3 && (i.hi - (2.0 + half)).abs() < 1e-3);
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
