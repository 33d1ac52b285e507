//! Micro-benchmark experiments (`[micro]` in a spec): `evlab run pipetest` and the like. The lab
//! runs the benchmark's subcommand once as a child process of the `evlab` binary, in a process
//! group of its own (forked workers included), with `--json` into the results directory, records
//! the run in `micro.json` and writes the report (`render::micro`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::run::hosts::Ssh;
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
    let argv = bench_argv(
        &opts.evlab.display().to_string(),
        m,
        &json.display().to_string(),
    );
    let mut summary = new_summary(opts, &[], vec![]);
    if let Some(hosts) = &opts.hosts {
        let there = on_host(opts, hosts, m, &json)?;
        summary.machine = there.machine;
        summary.interrupted = there.interrupted;
        let failure = there.failure;
        return record(opts, m, &out, summary, t0, (there.command, failure), None);
    }
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
    record(opts, m, &out, summary, t0, (command, failure), Some(quiet))
}

/// The benchmark's argv: `evlab` (a path), its subcommand's words, the spec's arguments and
/// `--json JSON`.
fn bench_argv(evlab: &str, m: &MicroSpec, json: &str) -> Vec<String> {
    let mut argv: Vec<String> = vec![evlab.to_string()];
    argv.extend(words(&m.benchmark).iter().map(|w| w.to_string()));
    argv.extend(m.args.iter().cloned());
    argv.push("--json".into());
    argv.push(json.to_string());
    argv
}

/// Writes the run's record (`micro.json`) and its report; a failure (not an interruption) is
/// the error, naming the report.
fn record(
    opts: &RunOptions,
    m: &MicroSpec,
    out: &std::path::Path,
    mut summary: Summary,
    t0: Instant,
    (command, failure): (String, Option<String>),
    quiet: Option<evlab_reason::model::machine::Quiet>,
) -> Result<(PathBuf, Summary), LabError> {
    let spec = &opts.spec;
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
        quiet,
    };
    let text = serde_json::to_string_pretty(&record)
        .map_err(|e| LabError::Io(format!("cannot encode {RECORD}: {e}")))?;
    results::write_atomic(&out.join(RECORD), &(text + "\n"))?;
    write_report(out)?;
    match failure {
        Some(why) if !summary.interrupted => Err(LabError::Point(format!(
            "{}: {why} (report: {})",
            m.benchmark,
            out.join("report.md").display()
        ))),
        _ => Ok((out.to_path_buf(), summary)),
    }
}

/// What a run on another host gave: the command as run there, the host's machine, and why
/// it produced no report, if it did not.
struct There {
    command: String,
    machine: evlab_reason::model::machine::Machine,
    failure: Option<String>,
    interrupted: bool,
}

/// Runs the benchmark on the host `--on` names (default: the server host) over ssh: this
/// evlab copied there if it differs, run in a process group of its own (checked gone after),
/// its JSON report brought back to `json` here and removed there.
fn on_host(
    opts: &RunOptions,
    hosts: &evlab_reason::model::hosts::Hosts,
    m: &MicroSpec,
    json: &std::path::Path,
) -> Result<There, LabError> {
    let host = match &opts.on {
        Some(name) => hosts
            .hosts
            .iter()
            .find(|h| &h.name == name)
            .ok_or_else(|| {
                LabError::Io(format!("--on {name}: the hosts file names no such host"))
            })?,
        None => hosts.server(),
    };
    let ssh = Ssh::new(hosts)?;
    let check = ssh.check(host, &opts.evlab, true)?;
    let wd = ssh
        .ok(host, &format!("cd {} && pwd", host.workdir()), &[])?
        .trim()
        .to_string();
    let machine = crate::run::machine::parse_remote(
        &ssh.ok(host, crate::run::machine::REMOTE_SCRIPT, &[])?,
        check.evlab_version.trim_start_matches("evlab "),
    );
    let remote_json = format!("{wd}/{}-{}.json", m.benchmark, std::process::id());
    let argv = bench_argv(&format!("{wd}/evlab"), m, &remote_json);
    if !opts.quiet {
        eprintln!(
            "evlab run: on host {} ({}): {}",
            host.name,
            check.kernel,
            evlab_reason::model::text::shell_line(&argv)
        );
    }
    let mut r = ssh.spawn(host, &m.benchmark, &argv)?;
    let command = format!(
        "ssh {} -- {}   # on host {}",
        host.destination,
        evlab_reason::model::text::shell_line(std::slice::from_ref(&r.command)),
        host.name
    );
    let status = r.ssh.wait_exit(LIMIT)?;
    let interrupted = status.is_none() && procs::interrupted();
    let left = ssh.stop(&mut r, Duration::from_secs(5));
    let mut failure = match status {
        _ if left.is_some() => left,
        Some(s) if s.success() => None,
        Some(s) => Some(format!("{s}; stderr: {}", r.ssh.stderr_tail(5))),
        None if interrupted => Some("interrupted".into()),
        None => Some(format!("still running after {} s", LIMIT.as_secs())),
    };
    if failure.is_none() {
        match ssh.ok(host, &format!("cat {remote_json}"), &[]) {
            Ok(text) => std::fs::write(json, text)?,
            Err(e) => failure = Some(format!("its report could not be brought back: {e}")),
        }
    }
    let _ = ssh.ok(host, &format!("rm -f {remote_json}"), &[]);
    Ok(There {
        command,
        machine,
        failure,
        interrupted,
    })
}
