//! Micro-benchmark experiments (`[micro]` in a spec): `evlab run pipetest` and the like. The lab
//! runs the benchmark's subcommand once as a child process of the `evlab` binary, in a process
//! group of its own (forked workers included), with `--json` into the results directory, records
//! the run in `micro.json` and writes the report (`render::micro`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::run::plan::{new_summary, RunOptions};
use crate::run::procs::{self, Child};
use evlab_reason::model::micro::{MicroRun, RECORD};
use evlab_reason::model::results::{self, Summary};
use evlab_reason::model::spec::MicroSpec;
use evlab_reason::render::micro::write_report;
use evlab_reason::LabError;

/// The longest a benchmark may run (the defaults take a minute or two).
const LIMIT: Duration = Duration::from_secs(4 * 3600);

/// The subcommand's words for a benchmark.
fn words(benchmark: &str) -> &'static [&'static str] {
    match benchmark {
        "pipetest" => &["pipetest"],
        "herd" => &["herd"],
        "fdalloc" => &["micro", "fdalloc"],
        "readahead" => &["micro", "readahead"],
        _ => &["micro", "malloc"],
    }
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
    let mut summary = new_summary(opts, &[], vec![]);
    // Before anything is measured: is the machine quiet? Recorded either way, as a sweep does
    // (a note, not a warning: `--quiet` stays quiet; the report says it).
    let quiet = crate::run::machine::quiet_check(1.0);
    if let (Some(why), false) = (quiet.problem(), opts.quiet) {
        eprintln!(
            "evlab run: the machine is not quiet ({why}); the benchmark's timings may be \
             disturbed and its intervals wide"
        );
    }
    summary.quiet = Some(quiet.clone());
    if !opts.quiet {
        eprintln!(
            "evlab run: {}",
            evlab_reason::model::text::shell_line(&argv)
        );
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
    let record = MicroRun {
        format: results::FORMAT,
        name: spec.name.clone(),
        description: spec.description.clone(),
        spec_path: opts.spec_path.clone(),
        benchmark: m.benchmark.clone(),
        json: format!("{}.json", m.benchmark),
        bench_command: command,
        command: opts.command.clone(),
        started: summary.started.clone(),
        finished: summary.finished.clone(),
        wall_s: summary.wall_s,
        interrupted: summary.interrupted,
        failure: failure.clone(),
        machine: summary.machine.clone(),
        quiet: Some(quiet),
    };
    let text = serde_json::to_string_pretty(&record)
        .map_err(|e| LabError::Io(format!("cannot encode {RECORD}: {e}")))?;
    results::write_atomic(&out.join(RECORD), &(text + "\n"))?;
    write_report(&out)?;
    match failure {
        Some(why) if !summary.interrupted => Err(LabError::Point(format!(
            "{}: {why} (report: {})",
            m.benchmark,
            out.join("report.md").display()
        ))),
        _ => Ok((out, summary)),
    }
}
