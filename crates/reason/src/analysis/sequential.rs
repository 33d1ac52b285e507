//! The look after each block of trials of a run with `[sequential]` (`model::sequential`): is
//! another block possible (fewer than `most` trials, and its forecast within the budget)? If
//! not, the look is final and decides at what is left of the run's α; if so, it is interim and
//! decides at α_interim only, and the run stops when every finding is decided there. The
//! findings are judged by the report's own code at the look's level (`findings::findings_at`).
//!
//! Why this spending: with the looks' errors added (Bonferroni), a run's chance of a wrong
//! decision on a finding is at most α_interim × the interim looks + the final look's α = α,
//! whatever the looks saw. Haybittle–Peto's constant strict bound costs the final look almost
//! nothing (90.2% instead of 90% after one interim look) and a run whose first look is final
//! decides exactly as a fixed design of `first` trials does.

use crate::analysis::findings::{self, Finding, Verdict};
use crate::model::results::Summary;
use crate::model::sequential::{Look, LookKind, Record, Stop};

/// Where the run stands in time at a look: seconds since its start (calibration included),
/// and the mean wall time of a trial so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clock {
    pub elapsed_s: f64,
    pub trial_s: f64,
}

/// Whether a finding is decided: reproduced or not reproduced (not inconclusive, partly or not
/// judged).
pub fn is_decided(f: &Finding) -> bool {
    matches!(f.verdict, Verdict::Reproduced | Verdict::NotReproduced)
}

/// The look after `trials` trials of a run whose record so far is `record`, at `clock`;
/// `judge` gives the run's findings at a level. Returns the look (with why the run stops, if
/// it does) and the trials of the next block (0: stop).
pub fn look(
    record: &Record,
    trials: u32,
    clock: Clock,
    judge: &dyn Fn(f64) -> Vec<Finding>,
) -> (Look, u32) {
    let rule = &record.rule;
    let next = rule.next_block(trials);
    let forecast_s = (next > 0).then(|| clock.trial_s * f64::from(next));
    let out_of_time = match (forecast_s, rule.budget_s) {
        (Some(f), Some(b)) if clock.elapsed_s + f > b => Some(Stop::OutOfTime {
            forecast_s: f,
            left_s: b - clock.elapsed_s,
        }),
        _ => None,
    };
    let (kind, level) = if next == 0 || out_of_time.is_some() {
        (LookKind::Final, rule.final_level(record.interims()))
    } else {
        (LookKind::Interim, rule.interim_level())
    };
    let fs = judge(level);
    let undecided: Vec<String> = fs
        .iter()
        .filter(|f| !is_decided(f))
        .map(|f| f.rule.clone())
        .collect();
    let stop = if next == 0 {
        Some(Stop::MostTrials)
    } else if out_of_time.is_some() {
        out_of_time
    } else if undecided.is_empty() {
        Some(Stop::AllDecided)
    } else {
        None
    };
    let look = Look {
        trials,
        kind,
        level,
        judged: fs.len(),
        decided: fs.len() - undecided.len(),
        undecided,
        elapsed_s: clock.elapsed_s,
        next_block_s: forecast_s,
        stopped: stop.map(|s| s.to_string()),
    };
    (look, if stop.is_some() { 0 } else { next })
}

/// The look after the trials `s` has committed to, recorded in `s`: the findings judged by the
/// report's code at the look's level. Returns the trials of the next block (0: stop; also for a
/// run with no `[sequential]`), already committed to in the record.
pub fn look_and_record(s: &mut Summary, clock: Clock) -> u32 {
    let Some(record) = s.sequential.as_ref() else {
        return 0;
    };
    let trials = record.trials;
    let judge = |level: f64| findings::findings_at(s, level);
    let (l, next) = look(record, trials, clock, &judge);
    if let Some(r) = s.sequential.as_mut() {
        r.looks.push(l);
        r.trials += next;
    }
    next
}

/// The mean wall time of the trials 1..=`trials` of `s`, seconds: each trial's points and
/// capacity searches as recorded (so that a resumed run counts the trials it kept). None when
/// nothing was recorded.
pub fn mean_trial_s(s: &Summary, trials: u32) -> Option<f64> {
    let mut per = vec![0.0; trials as usize];
    let walls = s
        .points
        .iter()
        .map(|p| (p.trial, p.wall_s))
        .chain(s.knees.iter().map(|k| (k.trial, k.wall_s)));
    for (t, w) in walls {
        if (1..=trials).contains(&t) {
            per[t as usize - 1] += w;
        }
    }
    let run: Vec<f64> = per.into_iter().filter(|w| *w > 0.0).collect();
    (!run.is_empty()).then(|| run.iter().sum::<f64>() / run.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::findings::Verdict::*;
    use crate::analysis::sample::LEVEL;
    use crate::model::sequential::{Rule, SequentialSpec, INTERIM_ALPHA, RUN_ALPHA};

    #[test]
    fn the_runs_alpha_is_the_fixed_designs() {
        assert_eq!(1.0 - RUN_ALPHA, LEVEL);
        assert_eq!(1.0 - INTERIM_ALPHA, 0.998);
    }

    fn rule_of(first: u32, block: u32, most: u32, budget_s: Option<f64>) -> Record {
        Record::new(Rule::of(&SequentialSpec {
            first,
            block,
            most,
            budget_s,
        }))
    }

    fn finding(id: &str, verdict: Verdict) -> Finding {
        Finding {
            rule: id.into(),
            source: String::new(),
            claim: String::new(),
            verdict,
            evidence: String::new(),
            interval: None,
            arms: None,
            trials: None,
        }
    }

    /// Synthetic findings whose verdicts depend on the level they are judged at: `strict`
    /// at a level above 99%, `loose` below.
    fn judged(
        strict: &'static [Verdict],
        loose: &'static [Verdict],
    ) -> impl Fn(f64) -> Vec<Finding> {
        move |level| {
            let v = if level > 0.99 { strict } else { loose };
            v.iter()
                .enumerate()
                .map(|(i, &x)| finding(&format!("r{i}"), x))
                .collect()
        }
    }

    const CLOCK: Clock = Clock {
        elapsed_s: 100.0,
        trial_s: 50.0,
    };

    #[test]
    fn an_interim_look_with_every_finding_decided_stops() {
        let r = rule_of(3, 1, 6, Some(270.0));
        let (l, next) = look(&r, 3, CLOCK, &judged(&[Reproduced, NotReproduced], &[]));
        assert_eq!((l.kind, l.level, next), (LookKind::Interim, 0.998, 0));
        assert_eq!((l.judged, l.decided), (2, 2));
        assert_eq!(l.stopped.as_deref(), Some("all decided"));
        assert_eq!(l.next_block_s, Some(50.0));
    }

    #[test]
    fn an_interim_look_with_an_undecided_finding_adds_a_block() {
        let r = rule_of(3, 2, 6, Some(270.0));
        let (l, next) = look(
            &r,
            3,
            CLOCK,
            &judged(&[Reproduced, Inconclusive, NotJudged], &[]),
        );
        assert_eq!((l.kind, next), (LookKind::Interim, 2));
        assert_eq!(l.undecided, ["r1", "r2"]);
        assert_eq!(l.stopped, None);
        assert_eq!(l.next_block_s, Some(100.0), "two trials of 50 s");
        // A "partly" is not decided either.
        let (_, next) = look(&r, 3, CLOCK, &judged(&[Partly], &[]));
        assert_eq!(next, 2);
    }

    #[test]
    fn a_block_that_would_not_fit_makes_the_look_final() {
        let r = rule_of(3, 1, 6, Some(270.0));
        // 250 s spent, a trial takes 83 s: 20 s left.
        let clock = Clock {
            elapsed_s: 250.0,
            trial_s: 83.0,
        };
        let (l, next) = look(&r, 3, clock, &judged(&[], &[Inconclusive, Reproduced]));
        assert_eq!((l.kind, next), (LookKind::Final, 0));
        assert_eq!(
            l.level, 0.9,
            "no interim look made: the fixed design's level"
        );
        assert_eq!(
            l.stopped.as_deref(),
            Some("out of time: next block forecast 83 s, 20 s left")
        );
        assert_eq!((l.judged, l.decided), (2, 1));
        // Exactly within the budget still fits.
        let fits = Clock {
            elapsed_s: 187.0,
            trial_s: 83.0,
        };
        let (l, next) = look(&r, 3, fits, &judged(&[Inconclusive], &[]));
        assert_eq!((l.kind, next), (LookKind::Interim, 1));
        // Past the budget already.
        let over = Clock {
            elapsed_s: 280.0,
            trial_s: 83.0,
        };
        let (l, _) = look(&r, 3, over, &judged(&[], &[Inconclusive]));
        assert_eq!(
            l.stopped.as_deref(),
            Some("out of time: next block forecast 83 s, the time budget already 10 s past")
        );
    }

    #[test]
    fn the_most_trials_make_the_look_final_without_a_budget() {
        let r = rule_of(3, 1, 3, None);
        let (l, next) = look(&r, 3, CLOCK, &judged(&[], &[Inconclusive]));
        assert_eq!((l.kind, l.level, next), (LookKind::Final, 0.9, 0));
        assert_eq!(l.stopped.as_deref(), Some("most trials"));
        assert_eq!(l.next_block_s, None);
        // No budget: time never stops a run.
        let r = rule_of(3, 1, 6, None);
        let late = Clock {
            elapsed_s: 1e6,
            trial_s: 1e3,
        };
        assert_eq!(look(&r, 3, late, &judged(&[Inconclusive], &[])).1, 1);
    }

    /// α spent over the looks: after no interim look the final one decides at the fixed
    /// design's 90%; after one at 90.2% (α 0.098), after two at 90.4%; every interim look at
    /// 99.8%; and the looks' α add up to the run's 0.10 (Bonferroni).
    #[test]
    fn alpha_is_spent_over_the_looks() {
        let mut r = rule_of(3, 1, 6, None);
        let undecided = judged(&[Inconclusive], &[Inconclusive]);
        let mut spent = 0.0;
        for trials in 3..6 {
            let (l, next) = look(&r, trials, CLOCK, &undecided);
            assert_eq!((l.kind, l.level, next), (LookKind::Interim, 0.998, 1));
            spent += 1.0 - l.level;
            r.looks.push(l);
            r.trials += next;
        }
        assert_eq!(r.interims(), 3);
        let (l, next) = look(&r, 6, CLOCK, &undecided);
        assert_eq!((l.kind, next), (LookKind::Final, 0));
        assert!((l.level - 0.906).abs() < 1e-12, "{}", l.level);
        spent += 1.0 - l.level;
        assert!((spent - 0.10).abs() < 1e-12, "{spent}");
        let rule = &r.rule;
        assert_eq!(rule.final_level(0), LEVEL, "exactly the fixed design's");
        assert!((rule.final_level(1) - 0.902).abs() < 1e-12);
        assert!((rule.final_level(2) - 0.904).abs() < 1e-12);
    }

    #[test]
    fn the_verdicts_read_at_the_level_of_the_look_that_stopped() {
        let mut r = rule_of(3, 1, 6, Some(270.0));
        // Interrupted before any look: the final level with nothing spent.
        assert_eq!(r.verdict_level(), 0.9);
        let (l, _) = look(&r, 3, CLOCK, &judged(&[Inconclusive], &[]));
        r.looks.push(l);
        assert!(
            (r.verdict_level() - 0.902).abs() < 1e-12,
            "interrupted after one"
        );
        let (l, _) = look(&r, 4, CLOCK, &judged(&[Reproduced], &[]));
        assert_eq!(l.stopped.as_deref(), Some("all decided"));
        r.looks.push(l);
        assert_eq!(r.verdict_level(), 0.998, "stopped at an interim look");
        assert!(r.looks_words().ends_with("; stopped: all decided"));
    }
}
