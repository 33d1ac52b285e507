//! The knee: each series' capacity at each idle count in each trial, found by bisection on one
//! server (`[knee]` in an experiment; `run::knee` measures it).
//!
//! A grid of fixed rates reads a server past its knee at one rate, where an overloaded server's
//! reply rate is what its queue, its timeouts and the client's retries make of it: in the
//! quick runs of 2026-11-25, select with no idle connections answered 4,095, 7,322 and 5,540
//! replies/s at 9,700/s offered in three trials, so no difference under about 2× could be told
//! there. The capacity is instead the highest rate a server keeps up with, as the paper's
//! figures show it (where the reply rate leaves the offered rate): short steps of load on one
//! server (idle connections held throughout), each judged kept or not by the rule below, the
//! bracket between the highest kept and the lowest not kept narrowed by bisection (in log
//! terms) until its ends are within `resolution` of each other. The capacity is the bracket's
//! geometric middle; a bracket that never closed (the client could go no higher, or nothing
//! was kept down to the floor) gives none, and says why.
//!
//! A step is kept when the server's reply rate once settled — the replies of the sample
//! intervals (`SAMPLE_S`) from `settle_s` to the end of the step, per second — is at least
//! `KEPT` of the offered requests (the offered connections × the requests each is expected to
//! make, `KneeStep::calls_per_conn`), and at least `ANSWERED` of its requests were answered.
//! (Until 2026-12-06 the rule read replies against connections; the first Fig. 4 run, whose
//! SPECweb99-like sessions make 7.3 requests each, showed every step up to the client's
//! ceiling kept (12 of 15 searches ended there) while the reply rate had stopped growing at
//! about 2,000 sessions/s: with one request per connection the two rules are the same.) A
//! server short of the offered rate by a share e answers 1/(1 + e) of it once busy, so steps
//! over capacity by more than about 5% are not kept. The rule reads throughput, not latency: a
//! first version also asked for p99 ≤ 50 ms, and a trial run (before any run was judged)
//! showed select holding 10,000 idle connections on a quarter of a CPU answering every
//! connection at 394/s with p99 near 90 ms (each scan of 10,001 descriptors waits out quota
//! periods), so that version called a server that keeps up with the load one that does not.

use serde::{Deserialize, Serialize};

/// `[knee]`: how the capacity search runs. Every key has a default.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KneeSpec {
    /// Steps at most per search (the search stops earlier once its bracket is closed).
    #[serde(default = "default_steps")]
    pub steps: u32,
    /// Seconds of load per step.
    #[serde(default = "default_step_s")]
    pub step_s: f64,
    /// The bracket is closed when its upper end is at most this many times its lower end.
    #[serde(default = "default_resolution")]
    pub resolution: f64,
    /// Seconds at the start of a step whose replies the rule does not read: the first
    /// connections' replies arrive a reply time after the step starts.
    #[serde(default = "default_settle_s")]
    pub settle_s: f64,
    /// The client's timeout during a step (s): a step's reply is read within `step_s`, so
    /// waiting longer for a slow one tells nothing more.
    #[serde(default = "default_timeout_s")]
    pub timeout_s: f64,
}

fn default_steps() -> u32 {
    8
}
fn default_step_s() -> f64 {
    0.7
}
fn default_resolution() -> f64 {
    1.06
}
fn default_settle_s() -> f64 {
    0.2
}
fn default_timeout_s() -> f64 {
    0.3
}

impl Default for KneeSpec {
    fn default() -> Self {
        KneeSpec {
            steps: default_steps(),
            step_s: default_step_s(),
            resolution: default_resolution(),
            settle_s: default_settle_s(),
            timeout_s: default_timeout_s(),
        }
    }
}

impl KneeSpec {
    /// Whether the keys make a search that can run, or which is wrong and why.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(2..=20).contains(&self.steps) {
            return Err(("knee.steps", format!("{}: from 2 to 20", self.steps)));
        }
        for (key, v) in [
            ("knee.step_s", self.step_s),
            ("knee.timeout_s", self.timeout_s),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err((key, format!("{v}: must be a positive number")));
            }
        }
        if !(self.settle_s.is_finite()
            && self.settle_s >= 0.0
            && self.settle_s + 2.0 * SAMPLE_S <= self.step_s)
        {
            return Err((
                "knee.settle_s",
                format!(
                    "{}: from 0, leaving at least two {SAMPLE_S} s samples of the {} s step",
                    self.settle_s, self.step_s
                ),
            ));
        }
        if !(self.resolution.is_finite() && self.resolution > 1.0 && self.resolution <= 2.0) {
            return Err((
                "knee.resolution",
                format!("{}: a ratio above 1 and at most 2", self.resolution),
            ));
        }
        Ok(())
    }
}

/// The first widening factor of a search that starts near the knee (a search recorded before
/// every trial started from calibration's capacity began from an earlier trial's): each further
/// widening doubles it in log terms (1.15, 1.32, 1.75, …).
pub const NEAR_WIDENING: f64 = 1.15;
/// The first widening of a search that starts from calibration's capacity (no idle
/// connections, rates ×1.5 apart), which the knee may be far from.
pub const FAR_WIDENING: f64 = 1.5;

/// The steps' sampling interval (s).
pub const SAMPLE_S: f64 = 0.1;

/// One step of a search: its load and the rule's reading of it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KneeStep {
    pub offered: f64,
    pub connections: u64,
    /// 2xx replies.
    pub replies: u64,
    /// The server's reply rate once settled (see the module's notes), replies/s.
    pub settled_rate: f64,
    pub p99_ms: f64,
    pub achieved_start_rate: Option<f64>,
    pub client_cpu_busy: Option<f64>,
    /// The requests each connection is expected to make (`Spec::requests_per_conn`); 1 in
    /// searches recorded before it was.
    #[serde(default = "one")]
    pub calls_per_conn: f64,
    /// Kept up with, by [`KneeStep::judge`].
    pub kept: bool,
    /// Why the step says nothing of the server (the client fell behind, or was saturated):
    /// it is repeated once (`next_rate`), and a second such step ends the search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid: Option<String>,
    /// Other processes busy while the step ran, as a point's note says them; the step is
    /// judged as measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<String>,
}

fn one() -> f64 {
    1.0
}

impl Default for KneeStep {
    /// Nothing offered, one request per connection.
    fn default() -> Self {
        KneeStep {
            offered: 0.0,
            connections: 0,
            replies: 0,
            settled_rate: 0.0,
            p99_ms: 0.0,
            achieved_start_rate: None,
            client_cpu_busy: None,
            calls_per_conn: 1.0,
            kept: false,
            invalid: None,
            busy: None,
        }
    }
}

/// The share of a step's requests that must be answered for it to be kept…
pub const ANSWERED: f64 = 0.95;
/// … and the share of the offered rate its settled reply rate must reach.
pub const KEPT: f64 = 0.95;

impl KneeStep {
    /// Whether the step kept up, by the rule in the module's notes.
    pub fn judge(&self) -> bool {
        let c = self.calls_per_conn;
        self.replies as f64 >= ANSWERED * self.connections.max(1) as f64 * c
            && self.settled_rate >= KEPT * self.offered * c
    }
}

/// The reply rate over the samples (`SAMPLE_S` each, from the step's start) that begin at or
/// after `settle_s` and end by `step_s`.
pub fn settled_rate(samples: &[(f64, f64, u64)], settle_s: f64, step_s: f64) -> f64 {
    let eps = 1e-6;
    let (n, span) = samples
        .iter()
        .filter(|(start, end, _)| *start >= settle_s - eps && *end <= step_s + eps)
        .fold((0u64, 0.0), |(n, t), (start, end, c)| {
            (n + c, t + (end - start))
        });
    if span > 0.0 {
        n as f64 / span
    } else {
        0.0
    }
}

/// `Knee::stopped` of a search that Ctrl-C ended (`evlab run --resume` makes it again).
pub const INTERRUPTED: &str = "interrupted";

/// One search: a series at an idle count in one trial.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Knee {
    pub series: String,
    pub idle: usize,
    pub trial: u32,
    /// The rate the search started from, and where that came from.
    pub start: f64,
    pub start_from: String,
    /// The first widening factor (`NEAR_WIDENING` or `FAR_WIDENING`).
    pub widening: f64,
    pub steps: Vec<KneeStep>,
    /// Why the search stopped before its bracket closed, or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    pub wall_s: f64,
    /// The `evlab serve`/`idle`/`load` commands, as a shell would run them.
    #[serde(default)]
    pub commands: Vec<String>,
    /// Each process the search started, as for a point (`PointResult::argv`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<Vec<String>>,
}

impl Knee {
    /// The highest rate kept up with (valid steps only).
    pub fn kept(&self) -> Option<f64> {
        self.valid_steps()
            .filter(|s| s.kept)
            .map(|s| s.offered)
            .reduce(f64::max)
    }

    /// The lowest rate not kept up with, above the highest kept (valid steps only).
    pub fn failed(&self) -> Option<f64> {
        let kept = self.kept().unwrap_or(0.0);
        self.valid_steps()
            .filter(|s| !s.kept && s.offered > kept)
            .map(|s| s.offered)
            .reduce(f64::min)
    }

    fn valid_steps(&self) -> impl Iterator<Item = &KneeStep> {
        self.steps.iter().filter(|s| s.invalid.is_none())
    }

    /// The capacity: the geometric middle of a closed bracket, else none.
    pub fn capacity(&self, resolution: f64) -> Option<f64> {
        match (self.kept(), self.failed()) {
            (Some(k), Some(f)) if f / k <= resolution * (1.0 + 1e-9) => Some((k * f).sqrt()),
            _ => None,
        }
    }

    /// The bracket's half-width as a share (±2.4% for a ratio of 1.05), when it is closed.
    pub fn half_width(&self, resolution: f64) -> Option<f64> {
        self.capacity(resolution)?;
        let (k, f) = (self.kept()?, self.failed()?);
        Some((f / k).sqrt() - 1.0)
    }
}

/// Steps that measured the client a search takes before it ends: the first is repeated.
pub const MAX_INVALID: usize = 1;

/// The next rate a search should offer, or None when it is over: its bracket closed, or a
/// bound reached with nothing more to learn (kept at the ceiling, or not kept at the floor).
///
/// Until a step is not kept, the rate widens upwards (`widening`, then its square, …). A step
/// not kept tells more than "too much": an overloaded server answers at its capacity, so its
/// settled reply rate ÷ `KEPT` estimates where steps stop being kept. The search then offers
/// that estimate ÷ √`resolution` and × √`resolution` in turn (each only while it lies inside
/// the bracket), which close the bracket in two steps when the estimate is right; otherwise
/// it halves the bracket (in log terms).
pub fn next_rate(k: &Knee, spec: &KneeSpec, floor: f64, ceiling: f64) -> Option<f64> {
    let valid: Vec<&KneeStep> = k.valid_steps().collect();
    let invalid = k.steps.len() - valid.len();
    if invalid > MAX_INVALID || k.steps.len() >= spec.steps as usize {
        return None;
    }
    // A step that measured the client is offered again, once: over a 0.7 s step a stall of
    // 25 ms of the client is already 3.6% of its schedule.
    if let Some(last) = k.steps.last().filter(|s| s.invalid.is_some()) {
        return Some(last.offered);
    }
    let first = if k.widening > 1.0 {
        k.widening
    } else {
        FAR_WIDENING
    };
    let widen = |n: usize| first.powf(2f64.powi(n.saturating_sub(1) as i32));
    let eps = 1e-9;
    let (lo, hi) = (k.kept(), k.failed());
    // The estimate from the lowest step not kept (above every kept one).
    let estimate = hi.and_then(|h| {
        valid
            .iter()
            .find(|s| s.offered == h)
            .map(|s| s.settled_rate / KEPT)
            .filter(|e| *e > 0.0)
    });
    let half = spec.resolution.sqrt();
    // Rates are offered whole: a candidate is new only if its whole value is.
    let inside = |c: f64| {
        let c = c.round();
        lo.is_none_or(|l| c > l) && hi.is_none_or(|h| c < h) && c >= floor.round()
    };
    // Rounded inwards, so that the two close a bracket of `resolution` once whole.
    let guided = estimate.and_then(|e| {
        [(e / half).ceil(), (e * half).floor()]
            .into_iter()
            .find(|&c| inside(c))
    });
    let next = match (lo, hi) {
        (None, None) => Some(k.start.clamp(floor, ceiling)),
        (Some(lo), Some(hi)) => {
            (hi / lo > spec.resolution * (1.0 + eps)).then(|| guided.unwrap_or((lo * hi).sqrt()))
        }
        (Some(lo), None) => {
            (lo < ceiling * (1.0 - eps)).then(|| (lo * widen(valid.len())).min(ceiling))
        }
        (None, Some(hi)) => (hi > floor * (1.0 + eps))
            .then(|| guided.unwrap_or_else(|| (hi / widen(valid.len())).max(floor))),
    };
    // A whole rate, never one already offered (a bracket too narrow for whole rates is over).
    next.map(f64::round)
        .filter(|r| !valid.iter().any(|s| s.offered == *r))
}

/// A whole search against a simulated server of capacity `truth`: it answers min(offered,
/// truth), so its steps are kept up to truth ÷ KEPT (the unit tests' and the rules' tests'
/// model of a server).
#[cfg(test)]
pub(crate) fn simulate(
    truth: f64,
    start: f64,
    widening: f64,
    spec: &KneeSpec,
    (floor, ceiling): (f64, f64),
) -> Knee {
    let mut k = Knee {
        start,
        widening,
        ..Knee::default()
    };
    while let Some(r) = next_rate(&k, spec, floor, ceiling) {
        let mut step = KneeStep {
            offered: r,
            connections: 100,
            replies: 100,
            // Over capacity, the server answers at its capacity.
            settled_rate: r.min(truth),
            ..KneeStep::default()
        };
        step.kept = step.judge();
        k.steps.push(step);
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(truth: f64, start: f64, spec: &KneeSpec, floor: f64, ceiling: f64) -> Knee {
        simulate(truth, start, FAR_WIDENING, spec, (floor, ceiling))
    }

    fn search_from(
        truth: f64,
        start: f64,
        widening: f64,
        spec: &KneeSpec,
        floor: f64,
        ceiling: f64,
    ) -> Knee {
        simulate(truth, start, widening, spec, (floor, ceiling))
    }

    #[test]
    fn a_good_start_closes_the_bracket_around_the_truth() {
        let spec = KneeSpec::default();
        for (truth, start) in [
            (6000.0, 6083.0),
            (6000.0, 5800.0),
            (3000.0, 6083.0),
            (9000.0, 6083.0),
            (1500.0, 6083.0),
        ] {
            let k = search(truth, start, &spec, 100.0, 20_000.0);
            let c = k
                .capacity(spec.resolution)
                .unwrap_or_else(|| panic!("truth {truth} from {start}: not closed: {:?}", k.steps));
            let (lo, hi) = (k.kept().unwrap(), k.failed().unwrap());
            let edge = truth / KEPT;
            assert!(lo <= edge && edge < hi, "{lo}..{hi} misses {edge}");
            assert!(hi / lo <= spec.resolution * (1.0 + 1e-9));
            assert!((c / edge - 1.0).abs() <= 0.03, "{c} vs {edge}");
            assert!(k.steps.len() <= spec.steps as usize);
        }
    }

    #[test]
    fn a_start_near_the_truth_takes_few_steps() {
        let spec = KneeSpec::default();
        for truth in [5600.0, 6000.0, 6500.0] {
            let k = search_from(truth, 5900.0, NEAR_WIDENING, &spec, 100.0, 20_000.0);
            assert!(k.capacity(spec.resolution).is_some(), "{:?}", k.steps);
            assert!(k.steps.len() <= 4, "{truth}: {:?}", k.steps);
        }
        // From calibration's capacity, whose knee lies within ×1.5 above it, or from far
        // above a knee: the first step not kept tells where the knee is.
        for truth in [7000.0, 3000.0, 1500.0] {
            let k = search(truth, 6083.0, &spec, 100.0, 20_000.0);
            assert!(k.steps.len() <= 4, "{truth}: {:?}", k.steps);
        }
    }

    #[test]
    fn a_rate_is_offered_whole_and_never_twice() {
        // The estimate ÷ √resolution rounds to the rate just kept: it is not offered again.
        let spec = KneeSpec::default();
        let step = |offered: f64, settled_rate: f64, kept: bool| KneeStep {
            offered,
            connections: 1000,
            replies: 1000,
            settled_rate,
            kept,
            ..KneeStep::default()
        };
        let e: f64 = 6121.0 * spec.resolution.sqrt();
        let k = Knee {
            start: 8240.0,
            widening: FAR_WIDENING,
            steps: vec![step(8240.0, e * KEPT, false), step(6121.0, 6121.0, true)],
            ..Knee::default()
        };
        let next = next_rate(&k, &spec, 100.0, 20_000.0).unwrap();
        assert_eq!(next, next.round());
        assert!(next > 6121.0 && next < 8240.0, "{next}");
        let mut k = search(6000.0, 5555.5, &spec, 100.0, 20_000.0);
        assert!(k.steps.iter().all(|s| s.offered == s.offered.round()));
        k.steps.sort_by(|a, b| a.offered.total_cmp(&b.offered));
        assert!(k.steps.windows(2).all(|w| w[0].offered != w[1].offered));
    }

    #[test]
    fn bounds_end_a_search_with_no_capacity() {
        let spec = KneeSpec::default();
        // Kept at the client's ceiling: a lower bound only.
        let k = search(50_000.0, 6000.0, &spec, 100.0, 8000.0);
        assert_eq!(k.kept(), Some(8000.0));
        assert_eq!(k.capacity(spec.resolution), None);
        // Not kept at the floor.
        let k = search(10.0, 6000.0, &spec, 1000.0, 8000.0);
        assert_eq!(k.kept(), None);
        assert_eq!(k.capacity(spec.resolution), None);
        assert!(k.steps.iter().any(|s| s.offered == 1000.0));
    }

    #[test]
    fn the_step_limit_and_an_invalid_step_end_a_search() {
        let spec = KneeSpec {
            steps: 2,
            ..KneeSpec::default()
        };
        let k = search(1000.0, 6000.0, &spec, 100.0, 20_000.0);
        assert_eq!(k.steps.len(), 2);
        assert_eq!(k.capacity(spec.resolution), None);
        let mut k = Knee {
            start: 5000.0,
            ..Knee::default()
        };
        let bad = KneeStep {
            offered: 5000.0,
            invalid: Some("client saturated".into()),
            ..KneeStep::default()
        };
        k.steps.push(bad.clone());
        // The first is repeated at its rate…
        assert_eq!(
            next_rate(&k, &KneeSpec::default(), 100.0, 9000.0),
            Some(5000.0)
        );
        // … and a second ends the search.
        k.steps.push(bad);
        assert_eq!(next_rate(&k, &KneeSpec::default(), 100.0, 9000.0), None);
        assert_eq!(k.kept(), None);
    }

    #[test]
    fn a_repeated_step_that_is_valid_lets_the_search_go_on() {
        let spec = KneeSpec::default();
        let mut k = Knee {
            start: 5000.0,
            ..Knee::default()
        };
        k.steps.push(KneeStep {
            offered: 5000.0,
            invalid: Some("client fell behind".into()),
            ..KneeStep::default()
        });
        k.steps.push(KneeStep {
            offered: 5000.0,
            connections: 100,
            replies: 100,
            settled_rate: 5000.0,
            kept: true,
            ..KneeStep::default()
        });
        assert_eq!(k.kept(), Some(5000.0));
        let next = next_rate(&k, &spec, 100.0, 9000.0).unwrap();
        assert!(next > 5000.0, "{next}");
    }

    #[test]
    fn the_rule_needs_answers_and_the_offered_rate() {
        let s = |replies, settled_rate| KneeStep {
            offered: 1000.0,
            connections: 1000,
            replies,
            settled_rate,
            // Latency is not read.
            p99_ms: 900.0,
            ..KneeStep::default()
        };
        assert!(s(950, 950.0).judge());
        assert!(!s(949, 1000.0).judge());
        assert!(!s(1000, 949.0).judge());
        // Sessions of 7.3 requests: the rule reads requests, so 1,000 sessions/s answered at
        // 1,000 replies/s (a seventh of what they ask) are not kept up with.
        let sessions = |replies, settled_rate| KneeStep {
            calls_per_conn: 7.3,
            ..s(replies, settled_rate)
        };
        assert!(!sessions(1000, 1000.0).judge());
        assert!(sessions(6940, 6940.0).judge());
        assert!(!sessions(6940, 6930.0).judge());
    }

    #[test]
    fn the_settled_rate_reads_whole_samples_after_settling() {
        // 0.7 s at 0.1 s: 50 replies in each sample but the first two (10), then a tail.
        let mut v: Vec<(f64, f64, u64)> = (0..7)
            .map(|i| {
                let c = if i < 2 { 10 } else { 50 };
                (i as f64 * 0.1, (i + 1) as f64 * 0.1, c)
            })
            .collect();
        v.push((0.7, 0.8, 400));
        assert!((settled_rate(&v, 0.2, 0.7) - 500.0).abs() < 1e-6);
        assert_eq!(settled_rate(&v, 0.7, 0.7), 0.0);
    }

    #[test]
    fn bad_keys_are_refused() {
        for (spec, key) in [
            (
                KneeSpec {
                    steps: 1,
                    ..KneeSpec::default()
                },
                "knee.steps",
            ),
            (
                KneeSpec {
                    resolution: 1.0,
                    ..KneeSpec::default()
                },
                "knee.resolution",
            ),
            (
                KneeSpec {
                    step_s: f64::NAN,
                    ..KneeSpec::default()
                },
                "knee.step_s",
            ),
            (
                KneeSpec {
                    settle_s: 0.6,
                    ..KneeSpec::default()
                },
                "knee.settle_s",
            ),
        ] {
            assert_eq!(spec.validate().unwrap_err().0, key);
        }
        assert!(KneeSpec::default().validate().is_ok());
    }
}
