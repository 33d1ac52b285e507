//! How many points a run will measure and how long it will take: before the run (`evlab run
//! --list`) and while it goes (the progress line's ETA), each an estimate and said to be one.
//!
//! Fixed rates give an exact count of points (or, with `rates = "auto"`, at most that many:
//! calibrated rates capped at the client's ceiling are measured once). A `rate_search` rises by
//! `step` from `start` and stops at its series' knee — where replies fall under `below` ×
//! offered `past` times, or the client becomes the limit — so counting every rate up to `max`
//! (the old ETA: "1/348, about 11h45m") is the most it could take, not what it takes. The
//! expected count per series comes from, best first:
//!
//! 1. the count of a finished search of the same series and idle count (an earlier trial);
//! 2. the mean count of the searches finished so far at that idle count, then at any;
//! 3. the series' calibrated capacity (when the run calibrated): the rates up to
//!    capacity / `below`, plus `past`;
//! 4. with nothing measured yet, the knee's expected value if all that is known is that it lies
//!    between `start` and `max` — equally likely in any decade (a log-uniform prior, as for any
//!    scale): (max − start) / ln(max / start).
//!
//! A search still running has reached at least its last rate, so its knee is expected above
//! that (the same prior, truncated), and it has at least one point to go.
//!
//! Time per point: the measured duration, the warm-up and the pause, plus start-up and stop
//! (`POINT_OVERHEAD_S`) and the idle connections' set-up (`IDLE_SETUP_S`); measured on the
//! reference runs (results/reference: 2.05–2.5 s for 2 s points without idle connections, 2.4–3.3 s
//! with 10,000). While the run goes, the model is scaled by how long the finished points took
//! against it.

use std::collections::BTreeMap;

use evlab_reason::model::spec::{RateSearch, Spec};

/// Seconds a point takes beyond its load: the server's start and stop, the stats, the files.
pub const POINT_OVERHEAD_S: f64 = 0.5;
/// Seconds per idle connection to set up (10,000 took 0.5–1.3 s on the reference machine).
pub const IDLE_SETUP_S: f64 = 8e-5;
/// Calibration: the client's ceiling (two short tries on one server) …
const CALIBRATION_BASE_S: f64 = 3.0;
/// … and a saturation probe per series (a server, up to four 0.7 s steps).
const CALIBRATION_PROBE_S: f64 = 2.8;

/// Steps a capacity search (`[knee]`) is expected to take: kept, not kept, and the two guided
/// by the step not kept (`model::knee::next_rate`), sometimes one more.
pub const KNEE_STEPS: f64 = 4.0;
/// Seconds a knee step takes beyond its load: the generator's start and the server's drain.
const KNEE_STEP_OVERHEAD_S: f64 = 0.2;

/// Seconds one capacity search takes at `idle` idle connections, by the model: its steps
/// (an overloaded one waits out the step's timeout, so half of them on average), plus a
/// point's start-up.
pub fn knee_seconds(spec: &Spec, idle: usize) -> f64 {
    spec.knee.as_ref().map_or(0.0, |k| {
        KNEE_STEPS * (k.step_s + k.timeout_s / 2.0 + KNEE_STEP_OVERHEAD_S)
            + POINT_OVERHEAD_S
            + idle as f64 * IDLE_SETUP_S
    })
}

/// The rates a search may visit: `start`, `start + step`, … up to `max`.
pub fn search_rates(rs: &RateSearch) -> usize {
    ((rs.max - rs.start) / rs.step + 1e-9).floor() as usize + 1
}

/// The points a search visits when its knee (the last rate kept up with) is at `knee`: every
/// rate up to it, then `past` more; at most every rate.
pub fn search_points_at(rs: &RateSearch, knee: f64) -> f64 {
    let up_to = ((knee.clamp(rs.start, rs.max) - rs.start) / rs.step + 1e-9).floor() + 1.0;
    (up_to + rs.past as f64).min(search_rates(rs) as f64)
}

/// The expected knee of a search known only to have kept up with `from` (its start, or the last
/// rate it reached): log-uniform between `from` and `max`.
pub fn prior_knee(from: f64, max: f64) -> f64 {
    if max <= from * (1.0 + 1e-9) {
        return max;
    }
    (max - from) / (max / from).ln()
}

/// Seconds one point takes at `idle` idle connections, by the model.
pub fn point_seconds(spec: &Spec, duration: f64, idle: usize) -> f64 {
    duration + spec.warmup_s + spec.pause_s + POINT_OVERHEAD_S + idle as f64 * IDLE_SETUP_S
}

/// Seconds calibration takes for `series` series (0 when the experiment does not calibrate).
pub fn calibration_seconds(spec: &Spec, series: usize) -> f64 {
    let auto_budget = matches!(
        spec.server_cpu_budget,
        Some(evlab_reason::model::spec::Budget::Auto)
    );
    if !(spec.rates.is_auto() || auto_budget) || series == 0 {
        return 0.0;
    }
    // An automatic budget probes the reference series once or twice more.
    let probes = series + if auto_budget { 2 } else { 0 };
    CALIBRATION_BASE_S + CALIBRATION_PROBE_S * probes as f64
}

/// How many points a run has.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Count {
    Exact(usize),
    /// Calibrated rates: at most this many (rates that coincide once capped are measured once).
    AtMost(usize),
    /// A rate search: this many expected, at most `max`.
    Expected {
        expected: f64,
        max: usize,
    },
}

impl Count {
    pub fn value(&self) -> f64 {
        match *self {
            Count::Exact(n) | Count::AtMost(n) => n as f64,
            Count::Expected { expected, .. } => expected,
        }
    }
}

impl std::fmt::Display for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Count::Exact(n) => write!(f, "{n}"),
            Count::AtMost(n) => write!(f, "≤{n}"),
            Count::Expected { expected, max } => write!(f, "~{:.0} (≤{max})", expected.ceil()),
        }
    }
}

/// A run's size and duration, estimated before it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    pub points: Count,
    pub seconds: f64,
}

/// Estimates an experiment with `series` series at `duration` seconds per point. A
/// `[[series]]` that runs at only some idle counts is counted at those, and one on its own
/// budget (a control) is not probed by calibration.
pub fn estimate(spec: &Spec, series: usize, duration: f64) -> Estimate {
    // A `[sweep]` runs every series at each of its values (a `[[series]]` with
    // `sweep_values` at those only).
    let at = |i: usize| -> usize {
        spec.sweep_values()
            .into_iter()
            .map(|v| {
                let left_out = spec
                    .series
                    .iter()
                    .filter(|s| {
                        s.idle.as_ref().is_some_and(|x| !x.contains(&i))
                            || !spec.series_sweeps_at(&s.label, v)
                    })
                    .count();
                series.saturating_sub(left_out)
            })
            .sum()
    };
    let runs: usize = spec.idle.iter().map(|&i| at(i)).sum::<usize>() * spec.trials as usize;
    let (points, per_series) = match &spec.rate_search {
        Some(rs) => {
            let e = search_points_at(rs, prior_knee(rs.start, rs.max));
            (
                Count::Expected {
                    expected: e * runs as f64,
                    max: search_rates(rs) * runs,
                },
                e,
            )
        }
        None if spec.rates.is_auto() => {
            let n = spec.auto_rates.len();
            (Count::AtMost(n * runs), n as f64)
        }
        None => {
            let n = spec.rates.fixed().len();
            (Count::Exact(n * runs), n as f64)
        }
    };
    let sweep_s: f64 = spec
        .idle
        .iter()
        .map(|&i| {
            at(i) as f64 * (per_series * point_seconds(spec, duration, i) + knee_seconds(spec, i))
        })
        .sum::<f64>()
        * spec.trials as f64;
    let controls = spec
        .series
        .iter()
        .filter(|s| s.cpu_budget.is_some())
        .count();
    Estimate {
        points,
        seconds: calibration_seconds(
            spec,
            series.saturating_sub(controls) * spec.sweep_values().len(),
        ) + sweep_s,
    }
}

/// `1h05m`, `4m20s`, `37s`.
pub fn hms(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// One series' rates at one idle count in one trial: the unit the sweep runs in order.
#[derive(Debug, Clone)]
pub struct Leg {
    pub series: String,
    pub idle: usize,
    pub trial: u32,
    /// Fixed rates: how many. A search: `None`.
    fixed: Option<usize>,
    done: usize,
    /// The search stopped (or the fixed rates are done).
    over: bool,
    /// The last rate measured.
    last_rate: Option<f64>,
    /// Its capacity search (`[knee]`) is done, or it has none.
    knee_over: bool,
}

/// The run's forecast, refined as points finish.
pub struct Forecast {
    legs: Vec<Leg>,
    search: Option<RateSearch>,
    /// Calibrated capacity per series, replies/s.
    capacity: BTreeMap<String, f64>,
    /// Model seconds per point at each idle count.
    model: BTreeMap<usize, f64>,
    /// Model seconds per capacity search at each idle count (empty: no `[knee]`).
    knee_model: BTreeMap<usize, f64>,
    /// Measured and modelled seconds of the finished points, to scale the model.
    measured_s: f64,
    modelled_s: f64,
}

impl Forecast {
    /// `legs` in the order the sweep runs them; `fixed`: the number of fixed rates (ignored for
    /// a search).
    pub fn new(
        spec: &Spec,
        duration: f64,
        legs: &[(String, usize, u32)],
        fixed: usize,
        capacity: BTreeMap<String, f64>,
    ) -> Forecast {
        let mut f = Forecast {
            legs: Vec::new(),
            knee_model: spec
                .idle
                .iter()
                .filter(|_| spec.knee.is_some())
                .map(|&i| (i, knee_seconds(spec, i)))
                .collect(),
            model: spec
                .idle
                .iter()
                .map(|&i| (i, point_seconds(spec, duration, i)))
                .collect(),
            search: spec.rate_search.clone(),
            capacity,
            measured_s: 0.0,
            modelled_s: 0.0,
        };
        f.extend(spec, legs, fixed);
        f
    }

    /// `legs` run after those forecast so far (a block a sequential run's look added); what
    /// the finished points and searches took goes on scaling the model.
    pub fn extend(&mut self, spec: &Spec, legs: &[(String, usize, u32)], fixed: usize) {
        let fixed = self.search.is_none().then_some(fixed);
        self.legs
            .extend(legs.iter().map(|(series, idle, trial)| Leg {
                series: series.clone(),
                idle: *idle,
                trial: *trial,
                fixed,
                done: 0,
                over: false,
                last_rate: None,
                knee_over: spec.knee.is_none(),
            }));
    }

    pub fn legs(&self) -> &[Leg] {
        &self.legs
    }

    /// Whether the count of points is exact (fixed rates) rather than expected (a search).
    pub fn exact(&self) -> bool {
        self.search.is_none()
    }

    /// A point of leg `i` finished at `rate`, having taken `wall_s`.
    pub fn point_done(&mut self, i: usize, rate: f64, wall_s: f64) {
        let l = &mut self.legs[i];
        l.done += 1;
        l.last_rate = Some(rate);
        if l.fixed.is_some_and(|n| l.done >= n) {
            l.over = true;
        }
        self.measured_s += wall_s;
        self.modelled_s += self.model.get(&l.idle).copied().unwrap_or(wall_s);
    }

    /// A point of leg `i` kept from the run resumed: done, and no time spent on it now.
    pub fn point_kept(&mut self, i: usize, rate: f64) {
        let l = &mut self.legs[i];
        l.done += 1;
        l.last_rate = Some(rate);
        if l.fixed.is_some_and(|n| l.done >= n) {
            l.over = true;
        }
    }

    /// Leg `i`'s capacity search finished, having taken `wall_s`.
    pub fn knee_done(&mut self, i: usize, wall_s: f64) {
        let l = &mut self.legs[i];
        l.knee_over = true;
        self.measured_s += wall_s;
        self.modelled_s += self.knee_model.get(&l.idle).copied().unwrap_or(wall_s);
    }

    /// Leg `i` has no more points (its search stopped, or the rates ran out).
    pub fn leg_over(&mut self, i: usize) {
        self.legs[i].over = true;
    }

    /// The expected number of points of a search leg that has not stopped.
    fn expected_search_points(&self, leg: &Leg) -> f64 {
        let rs = self.search.as_ref().expect("a search");
        let finished = |same_idle: bool, same_series: bool| -> Vec<f64> {
            self.legs
                .iter()
                .filter(|l| l.over && l.done > 0)
                .filter(|l| !same_idle || l.idle == leg.idle)
                .filter(|l| !same_series || l.series == leg.series)
                .map(|l| l.done as f64)
                .collect()
        };
        let mean = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        let from = leg.last_rate.unwrap_or(rs.start);
        let guess = mean(finished(true, true))
            .or_else(|| mean(finished(true, false)))
            .or_else(|| mean(finished(false, false)))
            .or_else(|| {
                self.capacity
                    .get(&leg.series)
                    .map(|c| search_points_at(rs, c / rs.below))
            })
            .unwrap_or_else(|| search_points_at(rs, prior_knee(from, rs.max)));
        let left = search_rates(rs) - leg.done;
        let at_least = if leg.done > 0 { leg.done + 1 } else { 1 };
        guess.max(at_least as f64).min((leg.done + left) as f64)
    }

    /// The points the whole run is expected to have (exact for fixed rates).
    pub fn total(&self) -> f64 {
        self.legs.iter().map(|l| self.leg_total(l)).sum()
    }

    fn leg_total(&self, l: &Leg) -> f64 {
        match l.fixed {
            _ if l.over => l.done as f64,
            Some(n) => n as f64,
            None => self.expected_search_points(l),
        }
    }

    /// Seconds left: the points left at each idle count × the model, scaled by how the finished
    /// points compared with it.
    pub fn remaining_s(&self) -> f64 {
        let scale = if self.modelled_s > 0.0 {
            self.measured_s / self.modelled_s
        } else {
            1.0
        };
        self.legs
            .iter()
            .map(|l| {
                let left = (self.leg_total(l) - l.done as f64).max(0.0);
                let knee = if l.knee_over {
                    0.0
                } else {
                    self.knee_model.get(&l.idle).copied().unwrap_or(0.0)
                };
                (left * self.model.get(&l.idle).copied().unwrap_or(0.0) + knee) * scale
            })
            .sum()
    }

    /// "12/64" or, for a search, "12/~40".
    pub fn position(&self, n: usize) -> String {
        if self.exact() {
            format!("{n}/{}", self.total().round())
        } else {
            format!("{n}/~{}", self.total().ceil())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> Spec {
        Spec::parse(
            &format!("name = \"t\"\nmechanisms = [\"poll\", \"select\"]\n{extra}"),
            "t",
        )
        .unwrap()
    }

    fn search_spec() -> Spec {
        // The case: 348 possible rates.
        spec(
            "rate_search = { start = 100, step = 100, max = 34800 }\nduration_s = 10\nidle = [0]\n",
        )
    }

    #[test]
    fn fixed_rates_are_counted_exactly_and_timed_by_the_model() {
        let s = spec("rates = [1000, 2000, 3000]\nidle = [0, 10000]\nduration_s = 2\ntrials = 2\n");
        let e = estimate(&s, 2, 2.0);
        assert_eq!(e.points, Count::Exact(24));
        // 12 points at 2.5 s, 12 at 3.3 s; no calibration.
        assert!(
            (e.seconds - (12.0 * 2.5 + 12.0 * 3.3)).abs() < 1e-6,
            "{e:?}"
        );
        assert_eq!(e.points.to_string(), "24");
    }

    #[test]
    fn the_herd_macro_benchmark_counts_each_series_at_its_own_worker_counts() {
        // Threads at seven worker counts (1 … 64), processes at ten (1 … 512), three modes each.
        let q = Spec::parse(
            include_str!("../../../../experiments/herd-serve.toml"),
            "herd-serve.toml",
        )
        .unwrap();
        let series = q.series_list(&|_| true, &[]);
        assert_eq!(series.len(), 6);
        assert_eq!(estimate(&q, series.len(), 8.0).points.to_string(), "153");
    }

    #[test]
    fn quick_is_estimated_near_what_the_reference_runs_took() {
        let q = Spec::parse(
            include_str!("../../../../experiments/quick.toml"),
            "quick.toml",
        )
        .unwrap();
        // 6 series, the control with no idle connections only: 11 × 1 rate × 3 trials, and a
        // capacity search after each point.
        let e = estimate(&q, 6, q.duration_s);
        assert_eq!(e.points, Count::AtMost(33));
        assert_eq!(e.points.to_string(), "≤33");
        // The promise of the README: five minutes on 2 cores.
        assert!((150.0..300.0).contains(&e.seconds), "{e:?}");
    }

    #[test]
    fn a_search_is_expected_at_its_knee_not_at_every_rate() {
        let s = search_spec();
        let rs = s.rate_search.clone().unwrap();
        assert_eq!(search_rates(&rs), 348);
        let e = estimate(&s, 2, 10.0);
        let Count::Expected { expected, max } = e.points else {
            panic!("{e:?}")
        };
        assert_eq!(max, 696);
        // The log-uniform prior: knee ≈ 5,930/s → 60 rates + 2 past, per series.
        assert!((100.0..150.0).contains(&expected), "{expected}");
        assert!(e.seconds < 0.25 * 696.0 * 10.5, "{e:?}");
        assert!(e.points.to_string().starts_with('~'));
        assert_eq!(search_points_at(&rs, 50.0), 3.0);
        assert_eq!(search_points_at(&rs, 1e9), 348.0);
        assert_eq!(search_points_at(&rs, 1000.0), 12.0);
    }

    #[test]
    fn the_forecast_is_refined_by_finished_searches() {
        let s = search_spec();
        let legs = vec![("poll".to_string(), 0, 1), ("select".to_string(), 0, 1)];
        let mut f = Forecast::new(&s, 10.0, &legs, 0, BTreeMap::new());
        let before = f.total();
        assert!((100.0..150.0).contains(&before), "{before}");
        // poll's search: 10 points (knee at 800/s), each 11 s.
        for k in 0..10 {
            f.point_done(0, 100.0 + 100.0 * k as f64, 11.0);
            assert!(f.total() >= (k + 1) as f64 + 1.0);
        }
        f.leg_over(0);
        // select is now expected like poll: 10 more.
        assert_eq!(f.total(), 20.0);
        assert_eq!(f.position(11), "11/~20");
        // 10 points left at 11 s each (the model said 10.5: scaled by the measured 11/10.5).
        assert!(
            (f.remaining_s() - 110.0).abs() < 1e-6,
            "{}",
            f.remaining_s()
        );
        // select runs past poll's count: always at least one more point until it stops.
        for k in 0..15 {
            f.point_done(1, 100.0 + 100.0 * k as f64, 11.0);
        }
        assert_eq!(f.total(), 26.0);
        f.leg_over(1);
        assert_eq!(f.total(), 25.0);
        assert_eq!(f.remaining_s(), 0.0);
    }

    #[test]
    fn calibrated_capacity_sets_the_expected_knee() {
        let s = search_spec();
        let legs = vec![("poll".to_string(), 0, 1)];
        let cap = BTreeMap::from([("poll".to_string(), 1800.0)]);
        let f = Forecast::new(&s, 10.0, &legs, 0, cap);
        // 1,800 / 0.9 = 2,000/s: 20 rates, then 2 past.
        assert_eq!(f.total(), 22.0);
    }

    #[test]
    fn fixed_forecast_counts_exactly() {
        let s = spec("rates = [1000, 2000]\n");
        let legs = vec![("poll".to_string(), 0, 1), ("select".to_string(), 0, 1)];
        let mut f = Forecast::new(&s, 1.0, &legs, 2, BTreeMap::new());
        assert_eq!(f.position(1), "1/4");
        f.point_done(0, 1000.0, 1.5);
        assert_eq!(f.total(), 4.0);
        assert!((f.remaining_s() - 3.0 * 1.5).abs() < 1e-9);
    }

    #[test]
    fn hms_formats() {
        assert_eq!(hms(37.4), "37s");
        assert_eq!(hms(260.0), "4m20s");
        assert_eq!(hms(3900.0), "1h05m");
    }
}
