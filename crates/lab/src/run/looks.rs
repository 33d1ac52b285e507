//! The looks of a run whose trials a rule chooses (`[sequential]`), as the sweep makes them:
//! after each block, the findings judged on the summary so far (`analysis::sequential::look`,
//! by the report's own judging code), the look recorded in summary.json and said in a line, and
//! the next block's trials, if there is one.

use std::ops::RangeInclusive;
use std::time::Instant;

use crate::run::progress::Progress;
use evlab_reason::analysis::sequential::{self, mean_trial_s};
use evlab_reason::model::results::Summary;
use evlab_reason::model::sequential::{level_words, LookKind};

/// The run's clock for its time budget: from the run's start, calibration included. A resumed
/// run counts what the runs before it measured (their calibration, points and searches as
/// recorded) before its own start.
pub(crate) struct Clock {
    t0: Instant,
    before_s: f64,
}

impl Clock {
    pub(crate) fn new(t0: Instant, s: &Summary) -> Clock {
        let before_s = if s.resumed.is_empty() {
            0.0
        } else {
            s.calibration.as_ref().map_or(0.0, |c| c.wall_s)
                + s.points.iter().map(|p| p.wall_s).sum::<f64>()
                + s.knees.iter().map(|k| k.wall_s).sum::<f64>()
        };
        Clock { t0, before_s }
    }

    fn elapsed_s(&self) -> f64 {
        self.before_s + self.t0.elapsed().as_secs_f64()
    }
}

/// After a block of a sequential run: the look, recorded in `s` and said in a line. Returns the
/// trials of the next block, already committed to in the record; None when the run stops (or
/// has no `[sequential]`).
pub(crate) fn after_block(
    s: &mut Summary,
    clock: &Clock,
    progress: &Progress,
) -> Option<RangeInclusive<u32>> {
    let done = s.sequential.as_ref()?.trials;
    let c = sequential::Clock {
        elapsed_s: clock.elapsed_s(),
        trial_s: mean_trial_s(s, done).unwrap_or(0.0),
    };
    let next = sequential::look_and_record(s, c);
    if let Some(l) = s.sequential.as_ref().and_then(|q| q.looks.last()) {
        let what = match l.kind {
            LookKind::Interim => "interim",
            LookKind::Final => "final",
        };
        let then = match (&l.stopped, l.next_block_s) {
            (Some(why), _) => format!("stopped: {why}"),
            (None, forecast) => format!(
                "{} next{}",
                match next {
                    1 => format!("trial {}", done + 1),
                    n => format!("trials {}–{}", done + 1, done + n),
                },
                forecast.map_or(String::new(), |f| format!(
                    " (forecast {f:.0} s, at {:.0} s of the run)",
                    c.elapsed_s
                ))
            ),
        };
        progress.note(&format!(
            "evlab run: look after {done} trials ({what}, {}): {} of {} findings decided; {then}",
            level_words(l.level),
            l.decided,
            l.judged
        ));
    }
    (next > 0).then(|| done + 1..=done + next)
}
