//! malloc's findings (the Linux Scalability Project's malloc-test): threads against processes,
//! and the elapsed time past the CPUs, each over the rounds. `evlab-micro` runs the benchmark.

use evlab_wire::micro::malloc::{Mode, Report};
use evlab_wire::micro::{Finding, Verdict};

use crate::analysis::micro::{Judged, Measure};
use crate::analysis::sample::{Interval, MIN_REPEATS};

/// Threads "about as well as" processes: a wall time at most this many times the processes'.
pub const THREADS_AT_MOST: f64 = 1.25;
/// "Linear past the CPUs": the largest wall time per thread at most this many times the
/// smallest.
pub const LINEAR_AT_MOST: f64 = 2.0;

/// The LSP's findings: threads do about as well as processes (they lost about 10%), and past
/// the CPUs the elapsed time grows linearly with the workers. Each is computed per round (the
/// rounds interleaved over the points, so round i of every point ran under the same
/// conditions) and decided on the 90% t interval of its mean over the rounds.
pub fn findings(r: &Report) -> Vec<Finding> {
    judged(r).into_iter().map(|j| j.finding).collect()
}

/// [`findings`], each with the measure it was decided on (for threads against processes,
/// the number of workers whose interval reaches highest, the one nearest failing).
pub fn judged(r: &Report) -> Vec<Judged> {
    vec![threads_as_processes(r), linear_past_cpus(r)]
}

/// The wall time of `mode` with `n` workers in each round, when every round was recorded.
fn walls(r: &Report, mode: Mode, n: usize) -> Option<&[f64]> {
    r.points
        .iter()
        .find(|p| p.mode == mode && p.workers == n)
        .map(|p| p.wall_runs_seconds.as_slice())
        .filter(|w| w.len() == r.repeat && w.iter().all(|x| *x > 0.0))
}

fn with_rounds(iv: &Interval, mut why: String) -> String {
    if iv.n < MIN_REPEATS {
        why.push_str(&format!(" ({} round(s): {MIN_REPEATS} needed)", iv.n));
    }
    why
}

/// Per N measured both ways, the threads' wall time over the processes' in each round: the
/// claim holds when every N's interval lies at or below [`THREADS_AT_MOST`], fails when one
/// lies wholly above it.
fn threads_as_processes(r: &Report) -> Judged {
    const CLAIM: &str = "threads do about as well as processes (wall time within 25%; the LSP's \
                         threads lost about 10%; 90% interval over the rounds)";
    let mut per_n: Vec<(usize, Interval)> = r
        .points
        .iter()
        .filter(|p| p.mode == Mode::Threads)
        .filter_map(|p| {
            let t = walls(r, Mode::Threads, p.workers)?;
            let q = walls(r, Mode::Processes, p.workers)?;
            let ratios: Vec<f64> = t.iter().zip(q).map(|(a, b)| a / b).collect();
            Some((p.workers, Interval::of_mean(&ratios)?))
        })
        .collect();
    per_n.sort_by_key(|x| x.0);
    let Some((worst_n, worst)) = per_n
        .iter()
        .max_by(|a, b| a.1.hi.total_cmp(&b.1.hi))
        .copied()
    else {
        return Judged::new(
            Finding::decided(
                RULE_IDS[0],
                CLAIM,
                Verdict::NotMeasured,
                "threads and processes were not both measured in every round".into(),
            ),
            None,
        );
    };
    let verdicts: Vec<Verdict> = per_n
        .iter()
        .map(|(_, iv)| iv.at_most(THREADS_AT_MOST))
        .collect();
    let verdict = if verdicts.contains(&Verdict::NotReproduced) {
        Verdict::NotReproduced
    } else if verdicts.iter().all(|v| *v == Verdict::Reproduced) {
        Verdict::Reproduced
    } else {
        Verdict::Inconclusive
    };
    let why = format!(
        "threads' wall time over the processes', per round: at {worst_n} workers (the highest \
         upper end) {}; {} numbers of workers judged",
        worst.words(2, "rounds"),
        per_n.len()
    );
    Judged::new(
        Finding::decided(RULE_IDS[0], CLAIM, verdict, with_rounds(&worst, why)),
        Measure::of(
            &worst,
            format!("threads' wall time ÷ processes', {worst_n} workers"),
        ),
    )
}

/// Per round, the largest wall time per thread over the smallest, among the thread counts of
/// at least the number of CPUs: the claim holds when the interval lies at or below
/// [`LINEAR_AT_MOST`].
fn linear_past_cpus(r: &Report) -> Judged {
    const CLAIM: &str = "past the CPUs, the elapsed time grows linearly with the threads (wall \
                         time per thread within 2x; 90% interval over the rounds)";
    let cpus = r.machine.cpus.max(1);
    let past: Vec<(usize, &[f64])> = r
        .points
        .iter()
        .filter(|p| p.mode == Mode::Threads && p.workers >= cpus)
        .filter_map(|p| Some((p.workers, walls(r, Mode::Threads, p.workers)?)))
        .collect();
    let spreads: Vec<f64> = (0..r.repeat)
        .map(|i| {
            let per: Vec<f64> = past.iter().map(|(n, w)| w[i] / *n as f64).collect();
            let lo = per.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = per.iter().copied().fold(0.0, f64::max);
            hi / lo
        })
        .collect();
    let iv = (past.len() >= 2)
        .then(|| Interval::of_mean(&spreads))
        .flatten();
    let Some(iv) = iv else {
        return Judged::new(
            Finding::decided(
                RULE_IDS[1],
                CLAIM,
                Verdict::NotMeasured,
                format!(
                    "fewer than two thread counts of {cpus} or more were measured in every round"
                ),
            ),
            None,
        );
    };
    let why = format!(
        "largest over smallest wall time per thread, per round, for {} to {} threads ({cpus} \
         CPUs): {}",
        past.iter().map(|p| p.0).min().unwrap_or(0),
        past.iter().map(|p| p.0).max().unwrap_or(0),
        iv.words(2, "rounds")
    );
    let what = format!(
        "largest ÷ smallest wall time per thread, {} to {} threads",
        past.iter().map(|p| p.0).min().unwrap_or(0),
        past.iter().map(|p| p.0).max().unwrap_or(0),
    );
    Judged::new(
        Finding::decided(
            RULE_IDS[1],
            CLAIM,
            iv.at_most(LINEAR_AT_MOST),
            with_rounds(&iv, why),
        ),
        Measure::of(&iv, what),
    )
}

/// The registry ids of malloc's findings (the lab's `analysis::rules`, docs/findings.md).
pub const RULE_IDS: [&str; 2] = ["malloc-threads-as-processes", "malloc-linear-past-cpus"];

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::sample::median;
    use evlab_wire::micro::malloc::Point;

    /// What `evlab-micro` writes of the allocator it measures.
    pub(crate) const ALLOCATOR: &str = "glibc 2.36 malloc/free, through Rust's System allocator \
                                        (the global allocator the evlab binary links)";

    /// A report of 2 CPUs whose walls per round are `t(n, round)` for threads and
    /// `p(n, round)` for processes, at 1, 2, 4 and 64 workers.
    fn rounds(
        repeat: usize,
        t: &dyn Fn(usize, usize) -> f64,
        p: &dyn Fn(usize, usize) -> f64,
    ) -> Report {
        let mut machine = crate::analysis::micro::machine();
        machine.cpus = 2;
        let pt = |mode: Mode, n: usize, f: &dyn Fn(usize, usize) -> f64| {
            let w: Vec<f64> = (0..repeat).map(|i| f(n, i)).collect();
            Point {
                mode,
                workers: n,
                pairs: 0,
                wall_seconds: median(&w).unwrap_or(0.0),
                worker_seconds_mean: 0.0,
                worker_seconds_max: 0.0,
                ns_per_pair: 0.0,
                null_ns_per_iteration: 0.0,
                pairs_per_sec: 0.0,
                wall_runs_seconds: w,
            }
        };
        let mut points = Vec::new();
        for n in [1, 2, 4, 64] {
            points.push(pt(Mode::Threads, n, t));
            points.push(pt(Mode::Processes, n, p));
        }
        Report {
            benchmark: "malloc".into(),
            machine,
            allocator: ALLOCATOR.into(),
            iterations: 1000,
            size: 512,
            repeat,
            points,
            findings: vec![],
        }
    }

    fn verdicts(r: &Report) -> Vec<Verdict> {
        findings(r).iter().map(|f| f.verdict).collect()
    }

    #[test]
    fn findings_are_decided_on_intervals_over_the_rounds() {
        use Verdict::*;
        // The seed's shape: threads 10% slower, time linear in the workers past 2 CPUs.
        let jitter = |i: usize| 1.0 + 0.01 * i as f64;
        let lin = |n: usize, i: usize| n.max(2) as f64 * 0.1 * jitter(i);
        let r = rounds(5, &|n, i| 1.1 * lin(n, i), &lin);
        assert_eq!(verdicts(&r), [Reproduced, Reproduced]);
        let f = findings(&r);
        assert!(
            f[0].evidence.contains("1.10 [") && f[0].evidence.contains("over 5 rounds"),
            "{}",
            f[0].evidence
        );
        assert!(
            f[1].evidence.contains("for 2 to 64 threads (2 CPUs)"),
            "{}",
            f[1].evidence
        );
        // Threads twice as slow at 64 workers, and contention growing with the threads.
        let r = rounds(
            5,
            &|n, i| {
                if n == 64 {
                    2.0 * lin(n, i) * n as f64 / 8.0
                } else {
                    lin(n, i)
                }
            },
            &|n, i| lin(n, i) * if n == 64 { n as f64 / 8.0 } else { 1.0 },
        );
        assert_eq!(verdicts(&r), [NotReproduced, NotReproduced]);
        // Rounds that straddle the thresholds, and too few rounds, decide nothing.
        let wild = |n: usize, i: usize| lin(n, i) * [0.8, 1.6, 1.0][i];
        let r = rounds(3, &wild, &lin);
        assert_eq!(verdicts(&r)[0], Inconclusive);
        let r = rounds(2, &|n, i| 1.1 * lin(n, i), &lin);
        assert_eq!(verdicts(&r), [Inconclusive, Inconclusive]);
        // A report without rounds (written before them) judges nothing.
        let mut r = rounds(3, &lin, &lin);
        for p in r.points.iter_mut() {
            p.wall_runs_seconds.clear();
        }
        assert_eq!(verdicts(&r), [NotMeasured, NotMeasured]);
    }
}
