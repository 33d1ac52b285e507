//! The statistics verdicts are decided with: a Welch t interval on the ratio of two arms'
//! means (on the logarithms, so that a relative effect has the same interval whichever arm is
//! larger), and the three-way decision against a threshold fixed before the data.
//!
//! The level is 90% two-sided (the uselect paper's), so each one-sided bound is at 95%: a claim
//! is "reproduced" only when the whole interval clears its threshold, "not reproduced" when the
//! whole interval lies on the other side, and "inconclusive" otherwise. Equivalence ("no
//! difference") is the two one-sided tests: the whole interval inside the margin.

use serde::Serialize;

// Student's t, the level and the fewest repeats are one sample's ([`crate::analysis::sample`]),
// which the micro-benchmarks' findings are judged on by the same discipline.
pub use crate::analysis::sample::{
    mean, t_cdf, t_quantile, variance, Interval, LEVEL, MIN_REPEATS as MIN_TRIALS,
};

/// One arm of a comparison: its trials' values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Arm {
    pub n: usize,
    pub mean: f64,
    /// The arm's own 90% t interval of its mean.
    pub lo: f64,
    pub hi: f64,
}

impl Arm {
    /// The mean of `v` with its own 90% t interval (unbounded with one value).
    pub fn of(v: &[f64]) -> Option<Arm> {
        Interval::of_mean(v).map(|i| Arm {
            n: i.n,
            mean: i.mean,
            lo: i.lo,
            hi: i.hi,
        })
    }
}

/// The ratio of arm A's mean to arm B's (geometric means: a Welch interval on the logarithms),
/// with its 90% interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ratio {
    pub a: Arm,
    pub b: Arm,
    pub ratio: f64,
    pub lo: f64,
    pub hi: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
}

impl Ratio {
    /// None when either arm has a value that is not positive and finite, or fewer than two
    /// values (no spread to build an interval on).
    pub fn of(a: &[f64], b: &[f64]) -> Option<Ratio> {
        Ratio::of_floored(a, b, 0.0)
    }

    /// As [`Ratio::of`], each arm's variance (of the logarithms) at least `floor`: the variance
    /// of a measurement that is only known to within a bracket (a capacity bisected to a ratio
    /// r is uniform within it: ln(r)²/12), so that trials which fell in one bracket do not make
    /// an interval narrower than the measurement can be.
    pub fn of_floored(a: &[f64], b: &[f64], floor: f64) -> Option<Ratio> {
        Ratio::of_floored_at(a, b, floor, LEVEL)
    }

    /// As [`Ratio::of_floored`], the ratio's interval at the two-sided `level` (a sequential
    /// run's looks decide at others, `analysis::sequential`); the arms' own intervals stay at
    /// [`LEVEL`]: they describe, the ratio decides.
    pub fn of_floored_at(a: &[f64], b: &[f64], floor: f64, level: f64) -> Option<Ratio> {
        let (d, va, vb) = log_difference(a, b, floor)?;
        let (na, nb) = (a.len() as f64, b.len() as f64);
        let se2 = va + vb;
        let (half, df) = if se2 <= 0.0 {
            // Identical values in both arms: the interval is the point.
            (0.0, na + nb - 2.0)
        } else {
            let df = se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
            (t_quantile(1.0 - (1.0 - level) / 2.0, df) * se2.sqrt(), df)
        };
        Some(Ratio {
            a: Arm::of(a)?,
            b: Arm::of(b)?,
            ratio: d.exp(),
            lo: (d - half).exp(),
            hi: (d + half).exp(),
            df,
        })
    }

    /// The interval's half-width as a share (±8%): the smallest relative difference this
    /// comparison can tell from none.
    pub fn resolution(&self) -> f64 {
        ((self.hi / self.lo).ln() / 2.0).exp() - 1.0
    }
}

/// The difference of the arms' mean logarithms, ln(A/B), and the variance of each arm's mean
/// logarithm (its variance of the logarithms, at least `floor`, over its count); None when an
/// arm has fewer than two values or one that is not positive and finite.
pub fn log_difference(a: &[f64], b: &[f64], floor: f64) -> Option<(f64, f64, f64)> {
    let ok = |v: &[f64]| v.len() >= 2 && v.iter().all(|x| x.is_finite() && *x > 0.0);
    if !ok(a) || !ok(b) {
        return None;
    }
    let la: Vec<f64> = a.iter().map(|x| x.ln()).collect();
    let lb: Vec<f64> = b.iter().map(|x| x.ln()).collect();
    let va = variance(&la).max(floor) / la.len() as f64;
    let vb = variance(&lb).max(floor) / lb.len() as f64;
    Some((mean(&la) - mean(&lb), va, vb))
}

/// What a rule claims of the ratio A/B, fixed before the data.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Claim {
    /// A/B ≥ x (a gain, or a rise, of at least x − 1).
    AtLeast(f64),
    /// A/B ≤ x (a drop of at least 1 − x).
    AtMost(f64),
    /// No difference: 1/(1 + m) ≤ A/B ≤ 1 + m.
    Within(f64),
}

/// The three outcomes an interval can give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Decision {
    Reproduced,
    NotReproduced,
    Inconclusive,
}

impl Claim {
    /// The decision on a ratio's interval [lo, hi].
    pub fn decide(self, lo: f64, hi: f64) -> Decision {
        match self {
            Claim::AtLeast(x) if lo >= x => Decision::Reproduced,
            Claim::AtLeast(x) if hi < x => Decision::NotReproduced,
            Claim::AtMost(x) if hi <= x => Decision::Reproduced,
            Claim::AtMost(x) if lo > x => Decision::NotReproduced,
            Claim::Within(m) if lo >= 1.0 / (1.0 + m) && hi <= 1.0 + m => Decision::Reproduced,
            Claim::Within(m) if hi < 1.0 / (1.0 + m) || lo > 1.0 + m => Decision::NotReproduced,
            _ => Decision::Inconclusive,
        }
    }

    /// The claim in words, as a ratio: "≥ 1.25×", "≤ 0.80×", "within ±10%".
    pub fn words(self) -> String {
        match self {
            Claim::AtLeast(x) => format!("A/B ≥ {x:.2}"),
            Claim::AtMost(x) => format!("A/B ≤ {x:.2}"),
            Claim::Within(m) => format!("{:.2} ≤ A/B ≤ {:.2}", 1.0 / (1.0 + m), 1.0 + m),
        }
    }

    /// The claim's threshold on the side a difference claim must clear, for the placebo
    /// control: whether the claim says the arms differ.
    pub fn claims_a_difference(self) -> bool {
        match self {
            Claim::AtLeast(x) => x > 1.0,
            Claim::AtMost(x) => x < 1.0,
            Claim::Within(_) => false,
        }
    }
}

/// A small deterministic generator (SplitMix64) for the rules' null-data checks.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    /// A whole number below `n` (n > 0; the bias of the modulo is below 2^-40 for n < 2^24).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// `v` in a random order (Fisher–Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }

    /// A standard normal deviate (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// How often `claim` is "reproduced" on `runs` synthetic comparisons of `n` trials per arm,
/// where A's true mean is `true_ratio` × B's and each trial varies by `cv` (its coefficient
/// of variation, normal on the log scale).
pub fn reproduced_rate(
    claim: Claim,
    true_ratio: f64,
    cv: f64,
    n: usize,
    runs: usize,
    seed: u64,
) -> f64 {
    let mut rng = Rng::new(seed);
    let mut yes = 0;
    for _ in 0..runs {
        let a: Vec<f64> = (0..n)
            .map(|_| 1000.0 * true_ratio * (cv * rng.normal()).exp())
            .collect();
        let b: Vec<f64> = (0..n).map(|_| 1000.0 * (cv * rng.normal()).exp()).collect();
        if let Some(r) = Ratio::of(&a, &b) {
            if claim.decide(r.lo, r.hi) == Decision::Reproduced {
                yes += 1;
            }
        }
    }
    yes as f64 / runs as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        // Two-sided 90%: the 0.95 quantile (any statistics table).
        for (df, q) in [
            (1.0, 6.314),
            (2.0, 2.920),
            (3.0, 2.353),
            (4.0, 2.132),
            (10.0, 1.812),
            (30.0, 1.697),
            (1e6, 1.645),
        ] {
            let t = t_quantile(0.95, df);
            assert!((t - q).abs() < 1e-3, "df {df}: {t} vs {q}");
        }
        assert!((t_quantile(0.975, 5.0) - 2.571).abs() < 1e-3);
        assert!((t_cdf(0.0, 3.5) - 0.5).abs() < 1e-12);
        assert!((t_cdf(-2.353, 3.0) - 0.05).abs() < 1e-3);
    }

    #[test]
    fn welch_ratio_of_known_samples() {
        // A is twice B with a little spread: the interval holds 2 and is narrow.
        let r = Ratio::of(&[200.0, 204.0, 196.0], &[100.0, 101.0, 99.0]).unwrap();
        assert!((r.ratio - 2.0).abs() < 0.01, "{r:?}");
        assert!(r.lo < 2.0 && r.hi > 2.0 && r.hi / r.lo < 1.1, "{r:?}");
        assert_eq!(r.a.n, 3);
        // Identical constant arms: the interval is the point 1.
        let r = Ratio::of(&[5.0; 3], &[5.0; 3]).unwrap();
        assert_eq!((r.lo, r.ratio, r.hi), (1.0, 1.0, 1.0));
        // No interval without two positive values per arm.
        assert!(Ratio::of(&[1.0], &[1.0, 2.0]).is_none());
        assert!(Ratio::of(&[0.0, 1.0], &[1.0, 2.0]).is_none());
        assert!(Ratio::of(&[f64::NAN, 1.0], &[1.0, 2.0]).is_none());
    }

    #[test]
    fn each_claim_gives_each_outcome() {
        use Decision::*;
        let cases = [
            (Claim::AtLeast(1.25), 1.3, 1.5, Reproduced),
            (Claim::AtLeast(1.25), 1.0, 1.2, NotReproduced),
            (Claim::AtLeast(1.25), 1.1, 1.4, Inconclusive),
            (Claim::AtMost(0.8), 0.3, 0.7, Reproduced),
            (Claim::AtMost(0.8), 0.85, 1.1, NotReproduced),
            (Claim::AtMost(0.8), 0.7, 0.9, Inconclusive),
            (Claim::Within(0.1), 0.95, 1.05, Reproduced),
            (Claim::Within(0.1), 1.2, 1.4, NotReproduced),
            (Claim::Within(0.1), 0.5, 0.8, NotReproduced),
            (Claim::Within(0.1), 0.95, 1.2, Inconclusive),
        ];
        for (c, lo, hi, want) in cases {
            assert_eq!(c.decide(lo, hi), want, "{c:?} on [{lo}, {hi}]");
        }
    }

    /// With no true effect, a difference claim is "reproduced" at most 5% of the time (one
    /// side of a 90% interval); with a true difference of twice the margin, an equivalence
    /// claim passes at most 5% of the time; and a large true effect is found.
    #[test]
    fn false_positives_stay_under_five_percent() {
        for cv in [0.02, 0.05, 0.15] {
            for n in [3, 5] {
                for claim in [Claim::AtMost(0.8), Claim::AtLeast(1.25)] {
                    // The null: no difference at all (the placebo).
                    let fp = reproduced_rate(claim, 1.0, cv, n, 4000, 7);
                    assert!(fp <= 0.05, "{claim:?} cv {cv} n {n}: {fp}");
                    // At the threshold itself: the test's own 5%.
                    let x = match claim {
                        Claim::AtMost(x) | Claim::AtLeast(x) => x,
                        Claim::Within(_) => unreachable!(),
                    };
                    let at = reproduced_rate(claim, x, cv, n, 4000, 11);
                    assert!(at <= 0.065, "{claim:?} at threshold, cv {cv} n {n}: {at}");
                }
                // The negative control of an equivalence rule: a true difference of twice
                // the margin is not judged equivalent.
                let m = 0.10;
                let fp = reproduced_rate(Claim::Within(m), 1.0 + 2.0 * m, cv, n, 4000, 13);
                assert!(fp <= 0.05, "within cv {cv} n {n}: {fp}");
            }
        }
        // Power: select with 10,000 idle connections at a third of its rate is found.
        assert!(reproduced_rate(Claim::AtMost(0.8), 0.33, 0.15, 3, 2000, 17) > 0.9);
        assert!(reproduced_rate(Claim::Within(0.1), 1.0, 0.02, 3, 2000, 19) > 0.8);
    }

    #[test]
    fn a_floor_widens_an_interval_of_identical_trials() {
        let same = Ratio::of(&[100.0, 100.0, 100.0], &[50.0, 50.0, 50.0]).unwrap();
        assert_eq!((same.lo, same.hi), (same.ratio, same.ratio));
        let floor = 1.06f64.ln().powi(2) / 12.0;
        let r = Ratio::of_floored(&[100.0, 100.0, 100.0], &[50.0, 50.0, 50.0], floor).unwrap();
        assert!((r.ratio - 2.0).abs() < 1e-12);
        assert!(r.lo < 2.0 && r.hi > 2.0 && r.lo > 1.9, "{r:?}");
        // A spread wider than the floor is left as it is.
        let wide = [80.0, 100.0, 120.0];
        assert_eq!(
            Ratio::of(&wide, &[50.0, 60.0, 70.0]),
            Ratio::of_floored(&wide, &[50.0, 60.0, 70.0], floor)
        );
    }

    #[test]
    fn resolution_is_the_half_width() {
        let r = Ratio {
            a: Arm::of(&[1.0, 1.0]).unwrap(),
            b: Arm::of(&[1.0, 1.0]).unwrap(),
            ratio: 1.0,
            lo: 1.0 / 1.1,
            hi: 1.1,
            df: 4.0,
        };
        assert!((r.resolution() - 0.1).abs() < 1e-9);
    }
}
