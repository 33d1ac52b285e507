//! Micro-benchmark experiments (`[micro]` in a spec): `evlab run pipetest` and the like.
//!
//! The lab runs the benchmark's subcommand once as a child process of the `evlab` binary, in a
//! process group of its own (forked workers included), with `--json` into the results directory,
//! and writes `report.md` and `report.html`: the findings chart an experiment's report opens
//! with (`render::report::answer`, each rule's quantity and interval, with findings.json
//! beside it from the same entries), the seed's findings judged on the run, with the
//! numbers that decided each, the seed's figure(s) as `fig-*.svg` (each report's
//! [`Plot`]s, from its module here, drawn by [`crate::render::svg`]), and the benchmark's table
//! (from the same module). The
//! benchmark's JSON is the raw result; `micro.json` records the run (no `summary.json`: there
//! is no sweep), and [`write_report`] renders the report from those two alone, which is what
//! `evlab report DIR` does for such a directory.

use std::path::Path;

use std::fmt::Write as _;

use evlab_wire::micro::{Finding, Verdict};

use crate::analysis::findings::ControlStatus;
use crate::analysis::micro::{self as analysis, Judged};
use crate::analysis::rules::RULES;
use crate::render::report::answer::{
    chart_and_controls, status_word, why_none, word_colour, ChartFrame, ChartRow,
};
use crate::render::seeds::seed_ratio;
use crate::render::verdicts::{self, Entry, Verdicts};

use crate::model::micro::{MicroRun, RECORD};
use crate::model::results::{self};
use crate::model::spec::MICRO_BENCHMARKS;
use crate::render::block::Block;
use crate::render::plot::Plot;
use crate::render::report::quiet_words;
use crate::render::svg::{self, Chart, Line, Scale};
use crate::LabError;

pub mod fdalloc;
pub mod herd;
pub mod malloc;
pub mod pipetest;
pub mod readahead;

/// What was run and what it found.
struct Outcome {
    table: String,
    findings: Vec<Finding>,
    /// Today's rules on the same report, each finding with the measure that decided it: what
    /// the findings chart draws, matched to `findings` by rule.
    judged: Vec<Judged>,
    plots: Vec<Plot>,
}

fn read<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T, LabError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| LabError::Io(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| LabError::Io(format!("{}: not {what}: {e}", path.display())))
}

/// Reads the benchmark's report (an `evlab-wire` type) and renders its table and figures.
fn outcome(benchmark: &str, json: &Path) -> Result<Outcome, LabError> {
    use evlab_wire::micro as wire;
    const WHAT: &str = "the benchmark's report";
    Ok(match benchmark {
        "pipetest" => {
            let r: wire::pipetest::Report = read(json, WHAT)?;
            Outcome {
                table: pipetest::render(&r),
                plots: pipetest::plots(&r),
                judged: analysis::pipetest::judged(&r),
                findings: r.findings,
            }
        }
        "herd" => {
            let r: wire::herd::Report = read(json, WHAT)?;
            Outcome {
                table: herd::render(&r),
                plots: herd::plots(&r),
                judged: analysis::herd::judged(&r),
                findings: r.findings,
            }
        }
        "fdalloc" => {
            let r: wire::fdalloc::Report = read(json, WHAT)?;
            Outcome {
                table: fdalloc::render(&r),
                plots: fdalloc::plots(&r),
                judged: analysis::fdalloc::judged(&r),
                findings: r.findings,
            }
        }
        "malloc" => {
            let r: wire::malloc::Report = read(json, WHAT)?;
            Outcome {
                table: malloc::render(&r),
                plots: malloc::plots(&r),
                judged: analysis::malloc::judged(&r),
                findings: r.findings,
            }
        }
        "readahead" => {
            let r: wire::readahead::Report = read(json, WHAT)?;
            Outcome {
                table: readahead::render(&r),
                plots: readahead::plots(&r),
                judged: analysis::readahead::judged(&r),
                findings: r.findings,
            }
        }
        other => {
            return Err(LabError::Io(format!(
                "unknown micro-benchmark `{other}`; valid: {}",
                MICRO_BENCHMARKS.join(", ")
            )))
        }
    })
}

/// Writes `report.md`, `report.html` and the figures (`fig-*.svg`) of the micro-benchmark run
/// in `dir` from its `micro.json` and the benchmark's JSON alone, so that `evlab report DIR`
/// writes the same files as the run did.
pub fn write_report(dir: &Path) -> Result<(), LabError> {
    let run: MicroRun = read(&dir.join(RECORD), "a micro-benchmark run's record")?;
    let (doc, verdicts) = document(dir, &run)?;
    for b in &doc {
        if let Block::Figure { file, svg, .. } = b {
            results::write_atomic(&dir.join(file), svg)?;
        }
    }
    if let Some(v) = &verdicts {
        verdicts::write(dir, v)?;
    }
    results::write_atomic(&dir.join("report.md"), &crate::render::page::markdown(&doc))?;
    results::write_atomic(
        &dir.join("report.html"),
        &crate::render::page::html(&run.name, &doc),
    )
}

/// The figure of a plot, drawn as the experiments' figures are.
pub fn figure(p: &Plot) -> (String, String) {
    let scale = |log: bool| if log { Scale::Log } else { Scale::Linear };
    let chart = Chart {
        title: p.title.clone(),
        x_label: p.x_label.clone(),
        y_label: p.y_label.clone(),
        lines: p
            .lines
            .iter()
            .map(|l| Line {
                label: l.label.clone(),
                points: l.points.iter().map(|q| (q.x, q.y)).collect(),
                flagged: vec![false; l.points.len()],
                ranges: l.points.iter().map(|q| q.range).collect(),
                stray: vec![],
            })
            .collect(),
        diagonal: false,
        y_scale: scale(p.y_log),
    };
    (
        format!("fig-{}.svg", p.name),
        svg::line_chart_x(&chart, scale(p.x_log)),
    )
}

/// The report's blocks, and findings.json's document (none for a failed run, or one whose
/// findings predate the rules).
fn document(dir: &Path, run: &MicroRun) -> Result<(Vec<Block>, Option<Verdicts>), LabError> {
    let mut d = vec![
        Block::H(1, run.name.clone()),
        Block::P(run.description.trim().to_string()),
    ];
    let mut verdicts = None;
    match &run.failure {
        Some(why) => d.push(Block::P(format!("The benchmark failed: {why}"))),
        None => {
            let o = outcome(&run.benchmark, &dir.join(&run.json))?;
            // Reports written before the rules were registered name none: no rule column, and
            // no chart (their findings were decided on medians, without an interval).
            let ruled = o.findings.iter().any(|f| !f.rule.is_empty());
            if ruled {
                let (rows, negative) = chart_rows(&o);
                d.push(Block::P(answer_sentence(&run.name, &o.findings)));
                let items: Vec<(String, &'static str, String)> = (negative
                    != ControlStatus::Absent)
                    .then(|| {
                        (
                            "Negative control".to_string(),
                            status_word(negative),
                            "the same rule on a linear-scan allocator in user space (the \
                             source's single bitmap): a known growth the rule must not call flat"
                                .to_string(),
                        )
                    })
                    .into_iter()
                    .collect();
                let (html, md) = chart_and_controls(&frame(&rows), &rows, &items);
                d.push(Block::Raw { html, md });
                verdicts = Some(verdicts::micro_verdicts(
                    &run.name,
                    rows.into_iter().map(|r| r.entry).collect(),
                    negative,
                ));
            }
            d.push(Block::H(2, "Findings on this run".into()));
            let mut head: Vec<String> = vec!["finding".into(), "verdict".into(), "numbers".into()];
            if ruled {
                head.insert(0, "rule".into());
            }
            d.push(Block::Table(
                head,
                o.findings
                    .iter()
                    .map(|f| {
                        let v = match f.verdict {
                            Verdict::NotReproduced => "**not reproduced**",
                            v => v.word(),
                        };
                        let mut row = vec![f.claim.clone(), v.into(), f.evidence.clone()];
                        if ruled {
                            row.insert(0, format!("`{}`", f.rule));
                        }
                        row
                    })
                    .collect(),
            ));
            if !ruled && !o.findings.is_empty() {
                d.push(Block::P(
                    "This report predates the registered micro rules: its findings were judged \
                     on the medians by the rules of its day (\"holds\" read as reproduced), \
                     which `docs/findings.md` keeps in each rule's history."
                        .into(),
                ));
            }
            if ruled {
                d.push(Block::P(
                    "Each rule, its threshold and how it follows from the source's numbers are \
                     in `docs/findings.md` (family `micro`)."
                        .into(),
                ));
            }
            if !o.plots.is_empty() {
                d.push(Block::H(2, "Figures".into()));
                for p in &o.plots {
                    let (file, svg) = figure(p);
                    d.push(Block::Figure {
                        file,
                        svg,
                        alt: p.title.clone(),
                    });
                }
            }
            d.push(Block::H(2, "Results".into()));
            d.push(Block::Code(o.table.lines().map(str::to_string).collect()));
        }
    }
    d.push(Block::H(2, "How it was run".into()));
    d.push(Block::List(vec![
        format!("`{}`", run.bench_command),
        format!("by `{}` (experiment: {})", run.command, run.spec_path),
        format!(
            "{} to {} ({:.0} s){}; machine: {}, {}, {} CPUs",
            run.started,
            run.finished.as_deref().unwrap_or("?"),
            run.wall_s,
            if run.interrupted { ", interrupted" } else { "" },
            run.machine.hostname,
            run.machine.kernel,
            run.machine.cpus,
        ),
    ]));
    if let Some(q) = &run.quiet {
        d.push(Block::P(quiet_words(
            q,
            "disturbed timings and wide intervals",
        )));
    }
    d.push(Block::P(format!(
        "`{}` beside this file is the raw result and `{RECORD}` the run's record; \
         `evlab report DIR` writes this report again from them. `docs/micro.md` says what the \
         benchmark measures.",
        run.json
    )));
    Ok((d, verdicts))
}

/// The micro findings chart's frame: one log axis on which each row's quantity is a factor,
/// named under the row (an exponent k as 10^k per tenfold, so the rule's threshold is one).
fn frame(rows: &[ChartRow]) -> ChartFrame {
    let mut notes = vec![
        "Green: where the whole 90% interval must lie for the claim.".to_string(),
        "Colour and word: the verdict; bars: the 90% interval over the rounds.".into(),
    ];
    if rows.iter().any(|r| r.symbol.starts_with("10^")) {
        notes.push("10^k per tenfold: the factor a tenfold brings, for an exponent k.".into());
    }
    ChartFrame {
        title: "The findings: each rule's quantity, 90% interval".into(),
        x_label: "each row's quantity, named under it".into(),
        level: "90%".into(),
        guide: Some((1.0, "dashed: 1".into())),
        notes,
        heads: ["quantity".into(), "value [90%]".into()],
        value: "each rule's quantity".into(),
    }
}

/// The chart's rows: each finding as the report states it, with the measure today's rule
/// decided on from the same report; and the negative control's status (fdalloc's).
fn chart_rows(o: &Outcome) -> (Vec<ChartRow>, ControlStatus) {
    let mut negative = ControlStatus::Absent;
    let rows = o
        .findings
        .iter()
        .map(|f| {
            // Today's rule on the same report: its measure, unless it decides otherwise than
            // the report did (then no interval is drawn beside a verdict it did not give).
            let today = o.judged.iter().find(|j| j.finding.rule == f.rule);
            let differs = today.is_some_and(|j| j.finding.verdict != f.verdict);
            let m = today.filter(|_| !differs).and_then(|j| j.measure.as_ref());
            if f.rule == analysis::fdalloc::RULE_IDS[1] {
                negative = match f.verdict {
                    Verdict::NotReproduced => ControlStatus::Passed,
                    Verdict::Reproduced => ControlStatus::Failed,
                    _ => ControlStatus::Underpowered,
                };
            }
            let entry = Entry::micro(f, m);
            let claim = RULES.iter().find(|r| r.id == f.rule).and_then(|r| r.claim);
            let what = m.map_or(String::new(), |m| m.what.clone());
            ChartRow {
                colour: word_colour(entry.verdict),
                sub: what.clone(),
                pair: what.clone(),
                symbol: what,
                claim,
                claim_words: claim.map_or(String::new(), |c| c.words().replace("A/B", "value")),
                refs: seed_ratio(&f.rule)
                    .map(|x| (x.lo, x.hi, x.words.to_string()))
                    .into_iter()
                    .collect(),
                empty: if differs {
                    "no interval: today's rule decides this report otherwise".into()
                } else if f.verdict == Verdict::NotMeasured {
                    why_none(&f.evidence)
                } else {
                    "no interval: fewer than two rounds".into()
                },
                entry,
            }
        })
        .collect();
    (rows, negative)
}

/// The report's first sentence: what the run asked, and what it found.
fn answer_sentence(name: &str, fs: &[Finding]) -> String {
    let n = |v: Verdict| fs.iter().filter(|f| f.verdict == v).count();
    let mut found = format!(
        "{} reproduced, {} not reproduced, {} inconclusive",
        n(Verdict::Reproduced),
        n(Verdict::NotReproduced),
        n(Verdict::Inconclusive)
    );
    if n(Verdict::NotMeasured) > 0 {
        let _ = write!(found, " and {} not measured", n(Verdict::NotMeasured));
    }
    format!(
        "**In short:** this run of {name} asked whether {} finding{} of its source hold on this \
         machine, each decided on a 90% interval over its rounds, and found {found}.",
        fs.len(),
        if fs.len() == 1 { "" } else { "s" },
    )
}

#[cfg(test)]
mod tests;
