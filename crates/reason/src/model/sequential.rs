//! Trials chosen by a rule fixed in advance (`[sequential]` in an experiment): `first` trials,
//! then a look at the findings after each block of `block` more, until every finding is
//! decided, `most` trials are run, or the next block is not forecast to end within `budget_s`
//! of the run's start. `analysis::sequential` makes each look; this is what the experiment
//! asks for and what summary.json records of the looks.
//!
//! The error rate over the looks is held to the run's (α = 0.10, its 90% intervals) by
//! spending it (Haybittle–Peto, bounded by Bonferroni): an interim look, after which another
//! block could still run, decides only on a strict interval (α_interim = 0.002, 99.8%); the
//! final look, after which none can, decides on what is left, α − α_interim × the interim
//! looks made. A run whose first look is final (on this machine `quick`'s fourth trial never
//! fits its 270 s) decides at 90% exactly, as a fixed design would.

use serde::{Deserialize, Serialize};

/// The run's α over all its looks: that of the lab's fixed design, 1 − `analysis::sample::LEVEL`
/// (a test there holds them equal; written as a number so that summary.json says 0.1).
pub const RUN_ALPHA: f64 = 0.10;

/// What an interim look spends of the run's α (two-sided): its intervals are 99.8%.
pub const INTERIM_ALPHA: f64 = 0.002;

/// `[sequential]`: how many trials, and when to stop adding them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SequentialSpec {
    /// Trials before the first look; every run makes them (every interval rule needs 3).
    #[serde(default = "default_first")]
    pub first: u32,
    /// Trials each look may add.
    #[serde(default = "default_block")]
    pub block: u32,
    /// The most trials a run makes.
    pub most: u32,
    /// Seconds from the run's start (calibration included): no block is started unless it is
    /// forecast to end within them. None: no limit but `most`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_s: Option<f64>,
}

fn default_first() -> u32 {
    3
}
fn default_block() -> u32 {
    1
}

/// The most interim looks a rule may make: each spends `INTERIM_SHARE_LIMIT` of its α at most
/// together, so the final look keeps at least half of it.
const INTERIM_SHARE_LIMIT: f64 = 0.5;

impl SequentialSpec {
    /// The interim looks a run can make at most: one after each block but the last.
    pub fn most_interims(&self) -> u32 {
        self.most
            .saturating_sub(self.first)
            .div_ceil(self.block.max(1))
    }

    /// Each key's bounds; the error names the key. The interim looks may spend at most half of
    /// the run's α, so that the final look keeps the rest.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let (alpha, interim_alpha) = (RUN_ALPHA, INTERIM_ALPHA);
        if self.first < 2 {
            return Err((
                "first",
                format!(
                    "{}: at least 2 trials before the first look (an interval needs two; \
                     the rules need 3)",
                    self.first
                ),
            ));
        }
        if self.block == 0 {
            return Err(("block", "must be at least 1 trial".into()));
        }
        if self.most < self.first {
            return Err((
                "most",
                format!("{}: at least `first` ({})", self.most, self.first),
            ));
        }
        if let Some(b) = self.budget_s {
            if !(b.is_finite() && b > 0.0) {
                return Err((
                    "budget_s",
                    format!("{b}: must be a positive number of seconds"),
                ));
            }
        }
        let spent = f64::from(self.most_interims()) * interim_alpha;
        if spent > INTERIM_SHARE_LIMIT * alpha {
            return Err((
                "most",
                format!(
                    "{}: up to {} interim looks would spend {spent:.3} of the run's α = {alpha}, \
                     more than half; fewer looks (a smaller `most` or a larger `block`)",
                    self.most,
                    self.most_interims()
                ),
            ));
        }
        Ok(())
    }
}

/// The rule a run's looks followed, as recorded: the experiment's `[sequential]` and the α it
/// spends.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Rule {
    pub first: u32,
    pub block: u32,
    pub most: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_s: Option<f64>,
    /// The run's error rate over all its looks (two-sided; 1 − the level of a fixed design's
    /// intervals).
    pub alpha: f64,
    /// What each interim look spends of it.
    pub interim_alpha: f64,
}

impl Rule {
    /// The rule an experiment's `[sequential]` sets, with the α it spends.
    pub fn of(q: &SequentialSpec) -> Rule {
        Rule {
            first: q.first,
            block: q.block,
            most: q.most,
            budget_s: q.budget_s,
            alpha: RUN_ALPHA,
            interim_alpha: INTERIM_ALPHA,
        }
    }

    /// The trials the block after `trials` would add (0: `most` is reached).
    pub fn next_block(&self, trials: u32) -> u32 {
        self.block.min(self.most.saturating_sub(trials))
    }

    /// The level an interim look decides at.
    pub fn interim_level(&self) -> f64 {
        1.0 - self.interim_alpha
    }

    /// The level the final look decides at, after `interims` interim looks: what they spent is
    /// taken off the run's α (Bonferroni: the looks' errors add up to α at most).
    pub fn final_level(&self, interims: usize) -> f64 {
        1.0 - (self.alpha - self.interim_alpha * interims as f64)
    }

    /// The rule in words: "3 trials, then 1 more at a time up to 6 while the next is forecast
    /// to end within 270 s of the start".
    pub fn words(&self) -> String {
        let budget = match self.budget_s {
            Some(b) => format!(
                " while the next {} forecast to end within {} s of the run's start",
                if self.block == 1 { "is" } else { "block is" },
                crate::model::text::num(b, 0)
            ),
            None => String::new(),
        };
        format!(
            "{} trials, then {} more at a time up to {}{budget}, until every finding is \
             decided; an interim look decides at {}, the final one at what is left of α = {}",
            self.first,
            self.block,
            self.most,
            level_words(self.interim_level()),
            crate::model::text::num(self.alpha, 2)
        )
    }
}

/// A look's kind: interim (another block could follow) or final (none could).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LookKind {
    Interim,
    Final,
}

/// One look at the findings, after a block.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Look {
    /// After how many trials.
    pub trials: u32,
    pub kind: LookKind,
    /// The two-sided level its intervals decided at.
    pub level: f64,
    /// Findings the run judged, and how many of them were decided (reproduced or not
    /// reproduced).
    pub judged: usize,
    pub decided: usize,
    /// The rules of the findings left undecided.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undecided: Vec<String>,
    /// Seconds since the run's start.
    pub elapsed_s: f64,
    /// The next block's forecast, seconds (none: `most` is reached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_block_s: Option<f64>,
    /// Why the run stopped here ("all decided", "most trials", "out of time: …"); none: it
    /// went on with another block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// Why a run stops adding trials.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    AllDecided,
    MostTrials,
    /// The next block, forecast to take `forecast_s`, would not end within the budget:
    /// `left_s` were left of it.
    OutOfTime {
        forecast_s: f64,
        left_s: f64,
    },
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Stop::AllDecided => write!(f, "all decided"),
            Stop::MostTrials => write!(f, "most trials"),
            Stop::OutOfTime { forecast_s, left_s } if left_s > 0.0 => write!(
                f,
                "out of time: next block forecast {forecast_s:.0} s, {left_s:.0} s left"
            ),
            Stop::OutOfTime { forecast_s, left_s } => write!(
                f,
                "out of time: next block forecast {forecast_s:.0} s, the time budget already {:.0} s past",
                -left_s
            ),
        }
    }
}

/// What summary.json records of a run whose trials a rule chose: the rule, the trials the run
/// has committed to so far (the first block, then each block a look added), and each look.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    pub rule: Rule,
    pub trials: u32,
    pub looks: Vec<Look>,
}

impl Record {
    pub fn new(rule: Rule) -> Record {
        Record {
            trials: rule.first,
            rule,
            looks: Vec::new(),
        }
    }

    /// The interim looks made (each spent `interim_alpha`).
    pub fn interims(&self) -> usize {
        self.looks
            .iter()
            .filter(|l| l.kind == LookKind::Interim)
            .count()
    }

    /// The look that stopped the run, if one did.
    pub fn stopped(&self) -> Option<&Look> {
        self.looks.last().filter(|l| l.stopped.is_some())
    }

    /// The level of the run's verdicts: the look's that stopped it, or (a run interrupted
    /// before a look stopped it) the final level after the interim looks made.
    pub fn verdict_level(&self) -> f64 {
        self.stopped()
            .map_or_else(|| self.rule.final_level(self.interims()), |l| l.level)
    }

    /// The looks in words: "after 3 trials (interim, 99.8%: 9 of 14 decided), after 4 (final,
    /// 90.2%: 12 of 14 decided): stopped, out of time: …".
    pub fn looks_words(&self) -> String {
        let mut w: Vec<String> = self
            .looks
            .iter()
            .enumerate()
            .map(|(i, l)| {
                format!(
                    "after {}{} ({}, {}: {} of {} decided)",
                    l.trials,
                    if i == 0 { " trials" } else { "" },
                    match l.kind {
                        LookKind::Interim => "interim",
                        LookKind::Final => "final",
                    },
                    level_words(l.level),
                    l.decided,
                    l.judged
                )
            })
            .collect();
        if w.is_empty() {
            w.push("none".into());
        }
        let end = match self.stopped() {
            Some(l) => format!("; stopped: {}", l.stopped.as_deref().unwrap_or("")),
            None => "; not stopped by the rule (interrupted)".into(),
        };
        format!("{}{end}", w.join(", "))
    }
}

/// A level as a percentage, with a decimal only where it has one: "90%", "99.8%", "90.2%".
pub fn level_words(level: f64) -> String {
    let p = level * 100.0;
    if (p - p.round()).abs() < 1e-6 {
        format!("{p:.0}%")
    } else {
        let s = format!("{p:.2}");
        format!("{}%", s.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(first: u32, block: u32, most: u32, budget_s: Option<f64>) -> SequentialSpec {
        SequentialSpec {
            first,
            block,
            most,
            budget_s,
        }
    }

    #[test]
    fn levels_are_said_with_the_decimals_they_have() {
        assert_eq!(level_words(0.90), "90%");
        assert_eq!(level_words(0.998), "99.8%");
        assert_eq!(level_words(1.0 - (0.10 - 0.002)), "90.2%");
        assert_eq!(level_words(0.9025), "90.25%");
    }

    #[test]
    fn the_spec_is_checked_key_by_key() {
        let v = |q: SequentialSpec| q.validate().map_err(|(k, _)| k);
        assert_eq!(v(spec(3, 1, 6, Some(270.0))), Ok(()));
        assert_eq!(v(spec(3, 1, 3, None)), Ok(()));
        assert_eq!(v(spec(1, 1, 6, None)), Err("first"));
        assert_eq!(v(spec(3, 0, 6, None)), Err("block"));
        assert_eq!(v(spec(4, 1, 3, None)), Err("most"));
        assert_eq!(v(spec(3, 1, 6, Some(0.0))), Err("budget_s"));
        assert_eq!(v(spec(3, 1, 6, Some(f64::NAN))), Err("budget_s"));
        // 25 interim looks spend half of α: allowed; 26 are not.
        assert_eq!(v(spec(3, 1, 28, None)), Ok(()));
        assert_eq!(v(spec(3, 1, 29, None)), Err("most"));
        assert_eq!(v(spec(3, 2, 29, None)), Ok(()));
    }

    #[test]
    fn blocks_stop_at_the_most_trials() {
        let r = Rule::of(&spec(3, 2, 6, None));
        assert_eq!(
            (r.next_block(3), r.next_block(5), r.next_block(6)),
            (2, 1, 0)
        );
        assert_eq!(spec(3, 2, 6, None).most_interims(), 2);
        assert_eq!(spec(3, 1, 3, None).most_interims(), 0);
    }
}
