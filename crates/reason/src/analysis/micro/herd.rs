//! herd's findings (the Linux Scalability Project's thundering herd in `accept`): wake-ups per
//! accepted connection over the rounds, a herd or wake-one per way of waiting. `evlab-micro`
//! runs the benchmark.

use evlab_wire::micro::herd::{As, Mode, Point, Report, Status};
use evlab_wire::micro::{Finding, Verdict};

use crate::analysis::micro::{Judged, Measure};
use crate::analysis::sample::{Interval, MIN_REPEATS};

/// A herd: at least one waiter woken for nothing per connection, on average.
pub const HERD_AT_LEAST: f64 = 2.0;
/// Wake-one: at most half a waiter woken for nothing per connection (1 is the floor).
pub const ONE_AT_MOST: f64 = 1.5;

/// Where a mode's rule reads: of the points with at least 4 workers, the one measured in the
/// most rounds, then threads before processes, then the most workers.
fn judged_point(r: &Report, mode: Mode) -> Option<(As, usize)> {
    let ok = |p: &&Point| p.mode == mode && p.status == Status::Ok && p.accepted > 0;
    let rounds = |as_: As, n: usize| {
        r.points
            .iter()
            .filter(ok)
            .filter(|p| p.as_ == as_ && p.workers == n)
            .count()
    };
    r.points
        .iter()
        .filter(ok)
        .filter(|p| p.workers >= 4)
        .map(|p| (p.as_, p.workers))
        .max_by_key(|&(as_, n)| (rounds(as_, n), as_ == As::Threads, n))
}

/// The LSP's finding on today's ways of waiting: the wake-ups per accepted connection at the
/// point [`judged_point`] picks, one value per round, decided on the 90% t interval of their
/// mean: a herd when the interval lies wholly at or above [`HERD_AT_LEAST`], wake-one when it
/// lies wholly at or below [`ONE_AT_MOST`].
pub fn findings(r: &Report) -> Vec<Finding> {
    judged(r).into_iter().map(|j| j.finding).collect()
}

/// [`findings`], each with the measure it was decided on: the mean wake-ups per accept.
pub fn judged(r: &Report) -> Vec<Judged> {
    let judge = |id: &str, claim: &str, mode: Mode, herd: bool| {
        let Some((as_, n)) = judged_point(r, mode) else {
            return Judged::new(
                Finding::decided(
                    id,
                    claim,
                    Verdict::NotMeasured,
                    format!("{} was not measured with 4 or more workers", mode.name()),
                ),
                None,
            );
        };
        let at: Vec<&Point> = r
            .points
            .iter()
            .filter(|p| p.mode == mode && p.as_ == as_ && p.workers == n)
            .filter(|p| p.status == Status::Ok && p.accepted > 0)
            .collect();
        let wakeups: Vec<f64> = at.iter().map(|p| p.wakeups_per_accept).collect();
        let cpu: Vec<f64> = at.iter().map(|p| p.cpu_us_per_accept).collect();
        let Some(iv) = Interval::of_mean(&wakeups) else {
            return Judged::new(
                Finding::decided(
                    id,
                    claim,
                    Verdict::NotMeasured,
                    format!("{}: no finite wake-up count", mode.name()),
                ),
                None,
            );
        };
        let verdict = if herd {
            iv.at_least(HERD_AT_LEAST)
        } else {
            iv.at_most(ONE_AT_MOST)
        };
        let mut why = format!(
            "{} with {n} {}: wake-ups per accept {}; {:.1} us CPU per accept (mean)",
            mode.name(),
            as_.name(),
            iv.words(2, "rounds"),
            cpu.iter().sum::<f64>() / cpu.len().max(1) as f64,
        );
        if iv.n < MIN_REPEATS {
            why.push_str(&format!(" ({} round(s): {MIN_REPEATS} needed)", iv.n));
        }
        let what = format!(
            "wake-ups per accept, {} with {n} {}",
            mode.name(),
            as_.name()
        );
        Judged::new(
            Finding::decided(id, claim, verdict, why),
            Measure::of(&iv, what),
        )
    };
    vec![
        judge(
            RULE_IDS[0],
            "blocking accept wakes one worker per connection (the herd is gone)",
            Mode::Accept,
            false,
        ),
        judge(
            RULE_IDS[1],
            "poll on a shared listener wakes a herd",
            Mode::Poll,
            true,
        ),
        judge(
            RULE_IDS[2],
            "epoll on a shared listener wakes a herd",
            Mode::Epoll,
            true,
        ),
        judge(
            RULE_IDS[3],
            "EPOLLEXCLUSIVE wakes one worker per connection",
            Mode::Exclusive,
            false,
        ),
    ]
}

/// The registry ids of the micro-benchmark's findings (the lab's `analysis::rules`,
/// docs/findings.md).
pub const RULE_IDS: [&str; 4] = [
    "herd-micro-accept-wakes-one",
    "herd-micro-poll-wakes-herd",
    "herd-micro-epoll-wakes-herd",
    "herd-micro-exclusive-wakes-one",
];

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use evlab_wire::micro::Percentiles;

    pub(crate) fn pt(mode: Mode, as_: As, n: usize, wakeups: f64, status: Status) -> Point {
        Point {
            mode,
            round: 0,
            as_,
            workers: n,
            status,
            reason: None,
            connections: 10,
            client_errors: 0,
            accepted: if status == Status::Ok { 10 } else { 0 },
            per_worker: vec![],
            wakeups_per_accept: wakeups,
            empty_wakeups: 0,
            involuntary_switches: 0,
            cpu_us_per_accept: 10.0 * wakeups,
            wall_us_per_connection: 50.0,
            balance_cv: 0.5,
            latency: Percentiles::default(),
            worker_stats: vec![],
        }
    }

    pub(crate) fn report(points: Vec<Point>, repeat: usize) -> Report {
        Report {
            benchmark: "herd".into(),
            machine: crate::analysis::micro::machine(),
            conns: 10,
            clients: 1,
            repeat,
            points,
            findings: vec![],
        }
    }

    /// `values[mode][round]` wake-ups per accept at 4 and 64 threads in every round.
    fn rounds(values: &[(Mode, &[f64])]) -> Report {
        let mut points = Vec::new();
        let repeat = values.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
        for (mode, v) in values {
            for (round, &w) in v.iter().enumerate() {
                for n in [4, 64] {
                    let mut p = pt(*mode, As::Threads, n, w, Status::Ok);
                    p.round = round;
                    points.push(p);
                }
            }
        }
        report(points, repeat)
    }

    fn verdicts(r: &Report) -> Vec<Verdict> {
        findings(r).iter().map(|f| f.verdict).collect()
    }

    #[test]
    fn findings_are_decided_on_the_interval_over_rounds() {
        use Verdict::*;
        let r = rounds(&[
            (Mode::Accept, &[1.0, 1.01, 1.0]),
            (Mode::Poll, &[3.1, 2.9, 3.0]),
            (Mode::Epoll, &[2.5, 2.6, 2.4]),
            (Mode::Exclusive, &[1.02, 1.0, 1.01]),
        ]);
        assert_eq!(
            verdicts(&r),
            [Reproduced, Reproduced, Reproduced, Reproduced]
        );
        let f = &findings(&r)[1];
        assert_eq!(f.rule, RULE_IDS[1]);
        assert!(
            f.evidence
                .starts_with("poll with 64 threads: wake-ups per accept 3.00 [")
                && f.evidence.contains("over 3 rounds"),
            "{}",
            f.evidence
        );
        // The opposite shape: the herd gone for poll, back for accept.
        let r = rounds(&[
            (Mode::Accept, &[3.0, 3.1, 2.9]),
            (Mode::Poll, &[1.0, 1.0, 1.01]),
            (Mode::Epoll, &[1.0, 1.01, 1.0]),
            (Mode::Exclusive, &[2.0, 2.1, 2.2]),
        ]);
        assert_eq!(
            verdicts(&r),
            [NotReproduced, NotReproduced, NotReproduced, NotReproduced]
        );
        // Rounds that straddle the threshold, and too few rounds, decide nothing.
        let r = rounds(&[
            (Mode::Accept, &[1.0, 2.0, 1.2]),
            (Mode::Poll, &[3.0, 3.1]),
            (Mode::Epoll, &[1.0, 4.0, 2.5]),
            (Mode::Exclusive, &[1.0]),
        ]);
        assert_eq!(
            verdicts(&r),
            [Inconclusive, Inconclusive, Inconclusive, Inconclusive]
        );
    }

    #[test]
    fn a_point_missing_from_a_round_moves_the_judged_point_down() {
        let mut r = rounds(&[(Mode::Poll, &[3.0, 3.1, 2.9])]);
        // 64 threads failed in round 2: the rule reads 4 threads, measured in every round.
        for p in r.points.iter_mut() {
            if p.workers == 64 && p.round == 1 {
                p.status = Status::Failed;
            }
        }
        let f = &findings(&r)[1];
        assert_eq!(f.verdict, Verdict::Reproduced);
        assert!(
            f.evidence.starts_with("poll with 4 threads"),
            "{}",
            f.evidence
        );
        assert_eq!(findings(&r)[0].verdict, Verdict::NotMeasured);
    }
}
