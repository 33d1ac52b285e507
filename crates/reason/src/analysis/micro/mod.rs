//! The micro-benchmarks' findings, one module per benchmark: each one's thresholds, its rule ids
//! (the registry's, [`crate::analysis::rules`]) and the function that judges its report (an
//! `evlab-wire` document, which `evlab-micro` measures and writes). Their tables and figures are
//! [`crate::render::micro`]'s.

pub mod fdalloc;
pub mod herd;
pub mod malloc;
pub mod pipetest;
pub mod readahead;

use evlab_wire::micro::Finding;

use crate::analysis::sample::Interval;

/// The quantity a micro rule decided on, as the findings chart draws it and findings.json
/// gives it: a factor (10^k for an exponent k, so that the rule's threshold is one too), its
/// 90% interval, the rounds it is over, and what it is in words ("10^k per tenfold of pipes,
/// poll").
#[derive(Clone, Debug, PartialEq)]
pub struct Measure {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
    pub n: usize,
    pub what: String,
}

impl Measure {
    /// The interval's mean and ends themselves; none when it is unbounded (one round).
    pub fn of(iv: &Interval, what: String) -> Option<Measure> {
        (iv.lo.is_finite() && iv.hi.is_finite()).then_some(Measure {
            value: iv.mean,
            lo: iv.lo,
            hi: iv.hi,
            n: iv.n,
            what,
        })
    }

    /// An interval of an exponent k as the factor per tenfold, 10^k (its ends likewise).
    pub fn per_tenfold(iv: &Interval, what: String) -> Option<Measure> {
        Measure::of(iv, what).map(|m| Measure {
            value: 10f64.powf(m.value),
            lo: 10f64.powf(m.lo),
            hi: 10f64.powf(m.hi),
            ..m
        })
    }
}

/// A finding with the measure that decided it (none when nothing was measured, or its
/// interval is unbounded).
#[derive(Clone, Debug, PartialEq)]
pub struct Judged {
    pub finding: Finding,
    pub measure: Option<Measure>,
}

impl Judged {
    pub(crate) fn new(finding: Finding, measure: Option<Measure>) -> Judged {
        Judged { finding, measure }
    }
}

/// A machine for the tests' reports.
#[cfg(test)]
pub(crate) fn machine() -> evlab_wire::micro::Machine {
    evlab_wire::micro::Machine {
        kernel: "6.18.0".into(),
        cpus: 2,
        glibc: "2.36".into(),
        nofile: 20_000,
    }
}
