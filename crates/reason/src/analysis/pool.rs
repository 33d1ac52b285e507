//! `evlab pool`: several runs of one experiment, each finding's log ratio pooled with the run
//! as a random effect.
//!
//! Each run gives, per finding, the difference of the arms' mean logarithms `y` and its
//! variance `v` (each arm's variance of the logarithms over its trials, at least the rule's
//! floor, over its trial count: what the run's own interval is built on). The runs are pooled
//! by a random-effects model, `y_i ~ N(μ, v_i + τ²)`:
//!
//! - τ², the variance between runs, by restricted maximum likelihood (REML; the fixed-point
//!   iteration of Viechtbauer 2005), which is less biased with few runs than
//!   DerSimonian-Laird's moment estimate;
//! - μ's 90% interval by Hartung-Knapp: its variance from the weighted spread of the runs about
//!   μ, with a t quantile on k − 1 degrees of freedom, the scale factor at least 1 (the
//!   modified form, so that runs which happen to agree closely do not make the interval
//!   narrower than the runs' own variances allow). DerSimonian-Laird's normal interval is too
//!   narrow at k < 10;
//! - I², the share of the spread between runs not explained by their own variances.
//!
//! The pooled ratio is e^μ and is decided by the rule's claim, as a run's is. A paper family's
//! "no difference" findings are pooled only beside a pooled negative control that passes
//! (`findings::controls`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::findings::{self, ControlStatus, Finding};
use crate::analysis::rules::RULES;
use crate::analysis::sample::{t_quantile, LEVEL};
use crate::analysis::stats::log_difference;
use crate::model::results::Summary;
use crate::model::spec::Family;

/// One finding pooled over the runs that judged it.
#[derive(Debug, Clone, Serialize)]
pub struct Pooled {
    pub id: String,
    /// Arms A and B in words, where the rule compares two (a rule may give several findings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arms: Option<[String; 2]>,
    pub claim: String,
    /// Runs that gave the finding an estimate.
    pub k: usize,
    pub ratio: f64,
    pub lo: f64,
    pub hi: f64,
    /// The standard deviation between runs of the log ratio.
    pub tau: f64,
    /// The share of the spread between runs beyond their own variances (0 to 1).
    pub i2: f64,
    pub verdict: &'static str,
}

/// The pooled verdicts of several runs of one experiment.
#[derive(Debug, Clone, Serialize)]
pub struct Pool {
    pub experiment: String,
    pub runs: Vec<String>,
    /// The pooled negative control of a paper experiment: unless it passed, the pooled "no
    /// difference" findings are not judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negative_control: Option<ControlStatus>,
    pub findings: Vec<Pooled>,
}

/// A finding across runs: its rule and its arms.
type Key = (String, Option<[String; 2]>);

/// One run's estimate of a log ratio and its variance.
fn estimate(f: &Finding) -> Option<(f64, f64)> {
    let ([a, b], floor) = f.trials.as_ref()?;
    let (d, va, vb) = log_difference(a, b, *floor)?;
    Some((d, va + vb))
}

/// μ, its 90% interval's half-width, τ² and I² of the estimates `e` (at least one).
pub fn random_effects(e: &[(f64, f64)]) -> (f64, f64, f64, f64) {
    let k = e.len();
    // A run whose arms were identical has no variance: give it the smallest positive one seen,
    // so that it weighs as the most precise without dividing by zero.
    let least = e
        .iter()
        .map(|&(_, v)| v)
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let least = if least.is_finite() { least } else { 1e-12 };
    let e: Vec<(f64, f64)> = e.iter().map(|&(y, v)| (y, v.max(least))).collect();
    let weighted = |tau2: f64| {
        let w: Vec<f64> = e.iter().map(|&(_, v)| 1.0 / (v + tau2)).collect();
        let sw: f64 = w.iter().sum();
        let mu = w.iter().zip(&e).map(|(w, (y, _))| w * y).sum::<f64>() / sw;
        (w, sw, mu)
    };
    // I² from the fixed-effect fit (Cochran's Q).
    let (w0, _, mu0) = weighted(0.0);
    let q: f64 = w0
        .iter()
        .zip(&e)
        .map(|(w, (y, _))| w * (y - mu0).powi(2))
        .sum();
    let i2 = if k > 1 && q > 0.0 {
        ((q - (k - 1) as f64) / q).max(0.0)
    } else {
        0.0
    };
    if k == 1 {
        // One run: its own interval (Welch's df would need the arms; a normal quantile on the
        // run's variance is what is left, and pooling one run decides little anyway).
        let half = t_quantile(1.0 - (1.0 - LEVEL) / 2.0, 2.0) * e[0].1.sqrt();
        return (e[0].0, half, 0.0, 0.0);
    }
    // REML: τ² ← Σw²((y − μ)² − v) / Σw² + 1/Σw, from 0, until it settles.
    let mut tau2 = 0.0_f64;
    for _ in 0..200 {
        let (w, sw, mu) = weighted(tau2);
        let sw2: f64 = w.iter().map(|w| w * w).sum();
        let num: f64 = w
            .iter()
            .zip(&e)
            .map(|(w, (y, v))| w * w * ((y - mu).powi(2) - v))
            .sum();
        let next = (num / sw2 + 1.0 / sw).max(0.0);
        if (next - tau2).abs() <= 1e-12 * (1.0 + tau2) {
            tau2 = next;
            break;
        }
        tau2 = next;
    }
    // Hartung-Knapp, the scale factor at least 1.
    let (w, sw, mu) = weighted(tau2);
    let spread: f64 = w
        .iter()
        .zip(&e)
        .map(|(w, (y, _))| w * (y - mu).powi(2))
        .sum::<f64>()
        / (k - 1) as f64;
    let se = (spread.max(1.0) / sw).sqrt();
    let half = t_quantile(1.0 - (1.0 - LEVEL) / 2.0, (k - 1) as f64) * se;
    (mu, half, tau2, i2)
}

/// Pools `runs` (name, summary), all of one experiment.
pub fn pool(runs: &[(String, Summary)]) -> Result<Pool, String> {
    let Some((_, first)) = runs.first() else {
        return Err("no runs to pool".into());
    };
    let name = &first.experiment.name;
    if let Some((p, s)) = runs.iter().find(|(_, s)| &s.experiment.name != name) {
        return Err(format!(
            "{p} is a run of {}, not of {name}: pool runs of one experiment",
            s.experiment.name
        ));
    }
    // Each finding's estimates, keyed by its rule and arms, in the first run's order.
    let mut order: Vec<Key> = Vec::new();
    let mut by: BTreeMap<Key, (String, Vec<(f64, f64)>)> = BTreeMap::new();
    for (_, s) in runs {
        for f in findings::by_rules(s, findings::verdict_level(s)) {
            let key = (f.rule.clone(), f.arms.clone());
            let Some(e) = estimate(&f) else { continue };
            let slot = by.entry(key.clone()).or_insert_with(|| {
                order.push(key.clone());
                (f.claim.clone(), Vec::new())
            });
            slot.1.push(e);
        }
    }
    // The rules' own order (docs/findings.md), then the order they came in.
    let place = |id: &str| RULES.iter().position(|r| r.id == id).unwrap_or(usize::MAX);
    order.sort_by_key(|(id, _)| place(id));
    let mut pooled: Vec<Finding> = Vec::new();
    let mut stats = Vec::new();
    for key in order {
        let (claim, e) = &by[&key];
        let Some(rule) = RULES.iter().find(|r| r.id == key.0) else {
            continue;
        };
        let Some(c) = rule.claim else { continue };
        let (mu, half, tau2, i2) = random_effects(e);
        let (lo, hi) = ((mu - half).exp(), (mu + half).exp());
        pooled.push(Finding {
            rule: key.0.clone(),
            source: rule.source.into(),
            claim: claim.clone(),
            verdict: findings::decided(c.decide(lo, hi)),
            evidence: String::new(),
            interval: Some([mu.exp(), lo, hi]),
            arms: key.1.clone(),
            trials: None,
        });
        stats.push((e.len(), tau2.sqrt(), i2));
    }
    let negative = if first.experiment.family() == Family::Paper {
        findings::withhold_unguarded(&mut pooled);
        Some(findings::negative_control_status(&pooled))
    } else {
        None
    };
    let findings = pooled
        .into_iter()
        .zip(stats)
        .map(|(f, (k, tau, i2))| {
            let [ratio, lo, hi] = f.interval.unwrap_or([f64::NAN; 3]);
            Pooled {
                id: f.rule,
                arms: f.arms,
                claim: f.claim,
                k,
                ratio,
                lo,
                hi,
                tau,
                i2,
                verdict: f.verdict.word(),
            }
        })
        .collect();
    Ok(Pool {
        experiment: name.clone(),
        runs: runs.iter().map(|(p, _)| p.clone()).collect(),
        negative_control: negative,
        findings,
    })
}

/// The pooled verdicts as a table for the terminal.
pub fn text(p: &Pool) -> String {
    use std::fmt::Write as _;
    let mut o = format!(
        "evlab pool: {} runs of {}, the run a random effect (REML τ, Hartung-Knapp 90% interval)\n\n",
        p.runs.len(),
        p.experiment
    );
    let _ = writeln!(
        o,
        "{:<30} {:>2}  {:>6}  {:<13}  {:>5}  {:>4}  verdict",
        "finding", "k", "A/B", "90% interval", "τ(ln)", "I²"
    );
    for f in &p.findings {
        let _ = writeln!(
            o,
            "{:<30} {:>2}  {:>6.2}  {:<13}  {:>5.3}  {:>3.0}%  {}",
            f.id,
            f.k,
            f.ratio,
            format!("[{:.2}, {:.2}]", f.lo, f.hi),
            f.tau,
            100.0 * f.i2,
            f.verdict
        );
        if let Some([a, b]) = &f.arms {
            let _ = writeln!(o, "  A = {a}; B = {b}");
        }
    }
    match p.negative_control {
        Some(ControlStatus::Passed) => o.push_str(
            "\nNegative control, pooled: passed (decided not equivalent), so the pooled \"no \
             difference\" verdicts stand.\n",
        ),
        Some(st) => {
            let _ = writeln!(
                o,
                "\nNegative control, pooled: {}, so the pooled \"no difference\" verdicts are \
                 not judged.",
                st.word()
            );
        }
        None => {}
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_that_agree_pool_to_their_common_value_with_no_heterogeneity() {
        let e = vec![(0.10, 0.01), (0.10, 0.01), (0.10, 0.01), (0.10, 0.01)];
        let (mu, half, tau2, i2) = random_effects(&e);
        assert!((mu - 0.10).abs() < 1e-12);
        assert_eq!(tau2, 0.0);
        assert_eq!(i2, 0.0);
        // Hartung-Knapp with the factor at least 1: t(0.95, 3) × √(v / k).
        let want = 2.353_363_4 * (0.01_f64 / 4.0).sqrt();
        assert!((half - want).abs() < 1e-6, "{half} {want}");
    }

    #[test]
    fn runs_that_disagree_beyond_their_variances_have_tau_and_a_wider_interval() {
        // Four runs at ±0.3 around 0, each with variance 0.001: the spread is between runs.
        let e = vec![(0.3, 0.001), (-0.3, 0.001), (0.3, 0.001), (-0.3, 0.001)];
        let (mu, half, tau2, i2) = random_effects(&e);
        assert!(mu.abs() < 1e-9);
        // REML's τ² for equal variances: the sample variance of y less v (0.12 − 0.001).
        assert!((tau2 - 0.119).abs() < 1e-6, "{tau2}");
        assert!(i2 > 0.95, "{i2}");
        // The interval covers the spread of the runs' means, far beyond √(v/k).
        assert!(half > 0.2, "{half}");
    }

    #[test]
    fn a_single_run_keeps_its_own_variance() {
        let (mu, half, tau2, i2) = random_effects(&[(0.2, 0.04)]);
        assert_eq!((mu, tau2, i2), (0.2, 0.0, 0.0));
        assert!((half - 2.919_986 * 0.2).abs() < 1e-5, "{half}");
    }
}
