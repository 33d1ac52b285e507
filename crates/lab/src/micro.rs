//! Micro-benchmark experiments (`[micro]` in a spec): `evlab run pipetest` and the like.
//!
//! The lab runs the benchmark's subcommand once as a child process of the `evlab` binary, in a
//! process group of its own (forked workers included), with `--json` into the results directory,
//! and writes `report.md` and `report.html`: the benchmark's table and the seed's findings judged
//! on the run, with the numbers that decided each. No `summary.json` is written, so `evlab
//! report` does not apply to these directories; the benchmark's JSON is the raw result.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use evlab_micro::{Finding, Verdict};

use crate::procs::{self, Child};
use crate::results::{self, Summary};
use crate::runner::RunOptions;
use crate::spec::MicroSpec;
use crate::{machine, LabError};

/// The longest a benchmark may run (the defaults take a minute or two).
const LIMIT: Duration = Duration::from_secs(4 * 3600);

/// The subcommand's words for a benchmark.
fn words(benchmark: &str) -> &'static [&'static str] {
    match benchmark {
        "pipetest" => &["pipetest"],
        "herd" => &["herd"],
        "fdalloc" => &["micro", "fdalloc"],
        _ => &["micro", "malloc"],
    }
}

/// What was run and what it found.
struct Outcome {
    table: String,
    findings: Vec<Finding>,
}

fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, LabError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| LabError::Io(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        LabError::Io(format!(
            "{}: not the benchmark's report: {e}",
            path.display()
        ))
    })
}

fn outcome(benchmark: &str, json: &Path) -> Result<Outcome, LabError> {
    use evlab_micro::{fdalloc, herd, malloc, pipetest};
    Ok(match benchmark {
        "pipetest" => {
            let r: pipetest::Report = read(json)?;
            Outcome {
                table: pipetest::render(&r),
                findings: r.findings,
            }
        }
        "herd" => {
            let r: herd::Report = read(json)?;
            Outcome {
                table: herd::render(&r),
                findings: r.findings,
            }
        }
        "fdalloc" => {
            let r: fdalloc::Report = read(json)?;
            Outcome {
                table: fdalloc::render(&r),
                findings: r.findings,
            }
        }
        _ => {
            let r: malloc::Report = read(json)?;
            Outcome {
                table: malloc::render(&r),
                findings: r.findings,
            }
        }
    })
}

/// Runs the micro-benchmark experiment; returns the results directory and a summary with no
/// sweep points.
pub fn run(
    opts: &RunOptions,
    m: &MicroSpec,
    stamp: String,
) -> Result<(PathBuf, Summary), LabError> {
    let t0 = Instant::now();
    let spec = &opts.spec;
    let out = match &opts.out_dir {
        Some(d) => d.clone(),
        None => opts.results_root.join(&spec.name).join(stamp),
    };
    std::fs::create_dir_all(&out)
        .map_err(|e| LabError::Io(format!("cannot create {}: {e}", out.display())))?;
    let json = out.join(format!("{}.json", m.benchmark));
    let mut argv: Vec<String> = vec![opts.evlab.display().to_string()];
    argv.extend(words(&m.benchmark).iter().map(|w| w.to_string()));
    argv.extend(m.args.iter().cloned());
    argv.push("--json".into());
    argv.push(json.display().to_string());
    let mut summary = Summary {
        format: results::FORMAT,
        experiment: spec.clone(),
        spec_path: opts.spec_path.clone(),
        spec_text: opts.spec_text.clone(),
        command: opts.command.clone(),
        duration_override: opts.duration_override,
        started: results::utc(results::now_secs()),
        finished: None,
        wall_s: 0.0,
        interrupted: false,
        machine: machine::collect(env!("CARGO_PKG_VERSION")),
        series: vec![],
        skipped: vec![],
        calibration: None,
        points: vec![],
    };
    if !opts.quiet {
        eprintln!("evlab run: {}", procs::shell_line(&argv));
    }
    let mut child = Child::spawn(&m.benchmark, &argv, &[], None)?;
    let command = child.command.clone();
    let status = child.wait_exit(LIMIT)?;
    let left = child.stop(Duration::from_secs(5));
    summary.interrupted = status.is_none() && procs::interrupted();
    let failure = match status {
        _ if !left.is_empty() => Some(format!(
            "processes of the benchmark's group were left behind: {left:?}"
        )),
        Some(s) if s.success() => None,
        Some(s) => Some(format!("{s}; stderr: {}", child.stderr_tail(5))),
        None if summary.interrupted => Some("interrupted".into()),
        None => Some(format!("still running after {} s", LIMIT.as_secs())),
    };
    summary.finished = Some(results::utc(results::now_secs()));
    summary.wall_s = t0.elapsed().as_secs_f64();
    let body = match &failure {
        None => {
            let o = outcome(&m.benchmark, &json)?;
            report_md(&summary, &command, &o)
        }
        Some(why) => format!(
            "# {}\n\n{}\n\nThe benchmark failed: {why}\n\nCommand: `{command}`\n",
            spec.name,
            spec.description.trim()
        ),
    };
    results::write_atomic(&out.join("report.md"), &body)?;
    results::write_atomic(&out.join("report.html"), &html(&spec.name, &body))?;
    match failure {
        Some(why) if !summary.interrupted => Err(LabError::Point(format!(
            "{}: {why} (report: {})",
            m.benchmark,
            out.join("report.md").display()
        ))),
        _ => Ok((out, summary)),
    }
}

fn report_md(s: &Summary, command: &str, o: &Outcome) -> String {
    let mut md = format!(
        "# {}\n\n{}\n\n",
        s.experiment.name,
        s.experiment.description.trim()
    );
    md.push_str(
        "## The seed's findings on this run\n\n| finding | verdict | numbers |\n|---|---|---|\n",
    );
    for f in &o.findings {
        let v = match f.verdict {
            Verdict::Holds => "holds",
            Verdict::DoesNotHold => "**does not hold**",
            Verdict::NotMeasured => "not measured",
        };
        md.push_str(&format!(
            "| {} | {v} | {} |\n",
            f.claim.replace('|', "\\|"),
            f.evidence.replace('|', "\\|")
        ));
    }
    md.push_str(&format!(
        "\n## Results\n\n```text\n{}```\n\n## How it was run\n\n- `{}`\n- by `{}`\n- {} to {} ({:.0} s); machine: {}, {}, {} CPUs\n\nThe benchmark's JSON beside this file is the raw result; `docs/micro.md` says what it measures.\n",
        o.table,
        command,
        s.command,
        s.started,
        s.finished.as_deref().unwrap_or("?"),
        s.wall_s,
        s.machine.hostname,
        s.machine.kernel,
        s.machine.cpus,
    ));
    md
}

/// The Markdown, escaped into a self-contained page.
fn html(title: &str, md: &str) -> String {
    let esc = |t: &str| {
        t.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{}</title></head>\n<body><pre>{}</pre></body></html>\n",
        esc(title),
        esc(md)
    )
}
