//! findings.json, written beside report.md: each verdict and the controls, for a program to
//! read (`evlab pool`, a notebook) without parsing the report. A sweep's run and a
//! micro-benchmark's alike: [`write`] writes it for both, and the findings chart draws each
//! row from the same [`Entry`].

use std::path::Path;

use serde::Serialize;

use crate::analysis::findings::{self, ControlStatus, Finding};
use crate::analysis::micro::Measure;
use crate::analysis::rules::{registration, Registration};
use crate::model::results::{write_atomic, Summary};
use crate::LabError;

/// The document.
#[derive(Debug, Serialize)]
pub struct Verdicts {
    pub experiment: String,
    pub placebo: bool,
    /// In a run whose trials a sequential rule chose: the two-sided level of every interval
    /// below (its stopping look's); absent: 90%.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<f64>,
    pub controls: Controls,
    /// The rules that claim a difference and were judged on an interval, and how many of them
    /// chance alone would make come out reproduced with no effect anywhere (5% each).
    pub chance: Chance,
    pub findings: Vec<Entry>,
}

#[derive(Debug, Serialize)]
pub struct Controls {
    pub positive: ControlStatus,
    pub negative: ControlStatus,
    pub placebo: ControlStatus,
}

#[derive(Debug, Serialize)]
pub struct Chance {
    pub rules: usize,
    pub expected_reproduced: f64,
}

/// One finding.
#[derive(Debug, Serialize)]
pub struct Entry {
    pub id: String,
    pub claim: String,
    /// As the report says it: "reproduced", "not reproduced", "partly", "inconclusive",
    /// "not judged".
    pub verdict: &'static str,
    /// A/B and its interval (90%, or `level`), where the rule decided on a ratio; for a
    /// micro-benchmark, the quantity its rule decided on (a factor: 10^k for an exponent k).
    pub ratio: Option<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    /// Valid trials of the arm with fewer, where the rule decided on a ratio (a
    /// micro-benchmark's: its rounds).
    pub n: Option<usize>,
    pub registration: Registration,
}

impl Entry {
    pub(crate) fn of(f: &Finding) -> Entry {
        let [ratio, lo, hi] = f
            .interval
            .map_or([None; 3], |[r, l, h]| [Some(r), Some(l), Some(h)]);
        Entry {
            id: f.rule.clone(),
            claim: f.claim.clone(),
            verdict: f.verdict.word(),
            ratio,
            lo,
            hi,
            n: f.trials.as_ref().map(|([a, b], _)| a.len().min(b.len())),
            registration: registration(&f.rule).0,
        }
    }
}

impl Entry {
    /// A micro-benchmark's finding, with the measure its rule decided on.
    pub(crate) fn micro(f: &evlab_wire::micro::Finding, m: Option<&Measure>) -> Entry {
        Entry {
            id: f.rule.clone(),
            claim: f.claim.clone(),
            verdict: f.verdict.word(),
            ratio: m.map(|m| m.value),
            lo: m.map(|m| m.lo),
            hi: m.map(|m| m.hi),
            n: m.map(|m| m.n),
            registration: registration(&f.rule).0,
        }
    }
}

/// The verdicts of a micro-benchmark's run `name`: its entries, and its negative control's
/// status (absent but for fdalloc's). It has no positive or placebo control; the chance line
/// counts its rules judged on an interval, the negative control left out.
pub(crate) fn micro_verdicts(name: &str, entries: Vec<Entry>, negative: ControlStatus) -> Verdicts {
    let rules = entries
        .iter()
        .filter(|e| e.ratio.is_some() && findings::claims_a_difference(&e.id))
        .filter(|e| !e.id.ends_with("negative-control"))
        .count();
    Verdicts {
        experiment: name.to_string(),
        placebo: false,
        level: None,
        controls: Controls {
            positive: ControlStatus::Absent,
            negative,
            placebo: ControlStatus::Absent,
        },
        chance: Chance {
            rules,
            expected_reproduced: rules as f64 / 20.0,
        },
        findings: entries,
    }
}

/// The verdicts of `s`.
pub fn verdicts(s: &Summary) -> Verdicts {
    let fs = findings::findings(s);
    let level = findings::verdict_level(s);
    let placebo = s.experiment.placebo;
    let (rules, expected_reproduced) = findings::chance_reproduced(&fs);
    Verdicts {
        experiment: s.experiment.name.clone(),
        placebo,
        level: (s.sequential.is_some()).then_some(level),
        controls: Controls {
            positive: findings::positive_control_status(placebo, &fs),
            negative: findings::negative_control_status(&fs),
            placebo: findings::placebo_status(placebo, &fs),
        },
        chance: Chance {
            rules,
            expected_reproduced,
        },
        findings: fs.iter().map(Entry::of).collect(),
    }
}

/// findings.json's text for the run `s`.
pub fn to_json(s: &Summary) -> String {
    json(&verdicts(s))
}

/// findings.json's text.
pub fn json(v: &Verdicts) -> String {
    let mut out = serde_json::to_string_pretty(v).unwrap_or_default();
    out.push('\n');
    out
}

/// Writes `v` as `dir`/findings.json.
pub fn write(dir: &Path, v: &Verdicts) -> Result<(), LabError> {
    write_atomic(&dir.join("findings.json"), &json(v))
}
