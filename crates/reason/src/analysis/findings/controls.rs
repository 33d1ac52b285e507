//! How a run's controls came out, and what that does to its verdicts (docs/findings.md). A
//! control passes only when it is decided its own way: the positive control "reproduced", the
//! negative control "not reproduced", and a placebo run with no rule that claims a difference
//! reproduced.

use serde::Serialize;

use super::common::{Finding, Verdict};
use crate::analysis::rules::RULES;
use crate::analysis::stats::Claim;

/// A control's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ControlStatus {
    /// The run has no such control.
    Absent,
    Passed,
    /// Decided the wrong way.
    Failed,
    /// Not decided either way.
    Underpowered,
}

impl ControlStatus {
    pub fn word(self) -> &'static str {
        match self {
            ControlStatus::Absent => "absent",
            ControlStatus::Passed => "passed",
            ControlStatus::Failed => "failed",
            ControlStatus::Underpowered => "underpowered",
        }
    }

    /// A control's status from its findings' verdicts, `want` being its own way.
    fn of(verdicts: &[Verdict], want: Verdict) -> ControlStatus {
        if verdicts.is_empty() {
            ControlStatus::Absent
        } else if verdicts.iter().all(|&v| v == want) {
            ControlStatus::Passed
        } else if verdicts
            .iter()
            .any(|&v| matches!(v, Verdict::Reproduced | Verdict::NotReproduced) && v != want)
        {
            ControlStatus::Failed
        } else {
            ControlStatus::Underpowered
        }
    }
}

/// The negative control (control-budget-not-equivalent, each pair of known difference): passed
/// only when every pair was decided not equivalent.
pub fn negative_control_status(fs: &[Finding]) -> ControlStatus {
    let v: Vec<Verdict> = fs
        .iter()
        .filter(|f| f.rule == "control-budget-not-equivalent")
        .map(|f| f.verdict)
        .collect();
    ControlStatus::of(&v, Verdict::NotReproduced)
}

/// The positive control: control-positive in a placebo run, fig5-select-cpu in any other;
/// passed only when reproduced.
pub fn positive_control_status(placebo: bool, fs: &[Finding]) -> ControlStatus {
    let id = if placebo {
        "control-positive"
    } else {
        "fig5-select-cpu"
    };
    let v: Vec<Verdict> = fs
        .iter()
        .filter(|f| f.rule == id)
        .map(|f| f.verdict)
        .take(1)
        .collect();
    ControlStatus::of(&v, Verdict::Reproduced)
}

/// Whether rule `id` claims a difference (and is not a control).
pub fn claims_a_difference(id: &str) -> bool {
    !id.starts_with("control-")
        && RULES
            .iter()
            .find(|r| r.id == id)
            .and_then(|r| r.claim)
            .is_some_and(|c| c.claims_a_difference())
}

/// The placebo control of a placebo run: passed when no rule that claims a difference came out
/// reproduced (the run gave both arms of every comparison the same condition).
pub fn placebo_status(placebo: bool, fs: &[Finding]) -> ControlStatus {
    if !placebo {
        return ControlStatus::Absent;
    }
    if fs
        .iter()
        .any(|f| claims_a_difference(&f.rule) && f.verdict == Verdict::Reproduced)
    {
        ControlStatus::Failed
    } else {
        ControlStatus::Passed
    }
}

/// How many "reproduced" verdicts chance alone would give among the decided rules that claim a
/// difference, were there no effect at all: each is decided on a 90% interval, so at most 5%
/// of them (one side of it) each. Returns (those rules, the expected count).
pub fn chance_reproduced(fs: &[Finding]) -> (usize, f64) {
    let k = fs
        .iter()
        .filter(|f| claims_a_difference(&f.rule) && f.interval.is_some())
        .count();
    (k, k as f64 / 20.0)
}

/// Withholds the "no difference" verdicts of a run whose negative control did not pass: an
/// equivalence test that was not shown to tell a known difference apart cannot say "no
/// difference". What it measured stays in the evidence.
pub(crate) fn withhold_unguarded(fs: &mut [Finding]) {
    let why = match negative_control_status(fs) {
        ControlStatus::Passed => return,
        ControlStatus::Absent => "this run has no negative control",
        ControlStatus::Failed => {
            "this run judged a known difference equivalent (negative control failed)"
        }
        ControlStatus::Underpowered => {
            "this run could not tell a known difference apart (negative control underpowered)"
        }
    };
    let equivalence = |id: &str| {
        !id.starts_with("control-")
            && RULES
                .iter()
                .find(|r| r.id == id)
                .is_some_and(|r| matches!(r.claim, Some(Claim::Within(_))))
    };
    for f in fs.iter_mut().filter(|f| equivalence(&f.rule)) {
        f.evidence = format!(
            "not judged: {why}; as measured it reads {}: {}",
            f.verdict.word(),
            f.evidence
        );
        f.verdict = Verdict::NotJudged;
    }
}
