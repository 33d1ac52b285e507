//! `evlab run` and `evlab report`: thin over `evlab_lab`.

use std::path::PathBuf;

use anyhow::Context;
use evlab_lab::model::micro;
use evlab_lab::model::results::Summary;
use evlab_lab::model::spec::Spec;
use evlab_lab::model::text::shell_line;
use evlab_lab::render::{self, report};
use evlab_lab::run::plan::RunOptions;
use evlab_lab::run::{listing, procs, sweep};

use crate::output;

/// The shipped experiments, built in so that `evlab run quick` works from any directory.
const BUILTIN: &[(&str, &str)] = &[
    ("quick", include_str!("../../../experiments/quick.toml")),
    (
        "fig1-one-byte",
        include_str!("../../../experiments/fig1-one-byte.toml"),
    ),
    (
        "fig2-specweb",
        include_str!("../../../experiments/fig2-specweb.toml"),
    ),
    (
        "fig3-epoll-variants",
        include_str!("../../../experiments/fig3-epoll-variants.toml"),
    ),
    (
        "fig4-specweb-epoll-variants",
        include_str!("../../../experiments/fig4-specweb-epoll-variants.toml"),
    ),
    (
        "fig5-one-byte-idle",
        include_str!("../../../experiments/fig5-one-byte-idle.toml"),
    ),
    (
        "fig6-specweb-idle",
        include_str!("../../../experiments/fig6-specweb-idle.toml"),
    ),
    (
        "fig7-accept-limit",
        include_str!("../../../experiments/fig7-accept-limit.toml"),
    ),
    (
        "table1-syscalls",
        include_str!("../../../experiments/table1-syscalls.toml"),
    ),
    ("peers", include_str!("../../../experiments/peers.toml")),
    ("testbed", include_str!("../../../experiments/testbed.toml")),
    (
        "pipetest",
        include_str!("../../../experiments/pipetest.toml"),
    ),
    (
        "lse-deadconn",
        include_str!("../../../experiments/lse-deadconn.toml"),
    ),
    ("herd", include_str!("../../../experiments/herd.toml")),
    (
        "herd-serve",
        include_str!("../../../experiments/herd-serve.toml"),
    ),
    (
        "herd-capacity",
        include_str!("../../../experiments/herd-capacity.toml"),
    ),
    ("fdalloc", include_str!("../../../experiments/fdalloc.toml")),
    ("malloc", include_str!("../../../experiments/malloc.toml")),
    (
        "readahead",
        include_str!("../../../experiments/readahead.toml"),
    ),
    (
        "fig-proxy-cpu",
        include_str!("../../../experiments/fig-proxy-cpu.toml"),
    ),
    (
        "fig-proxy-sizes",
        include_str!("../../../experiments/fig-proxy-sizes.toml"),
    ),
    (
        "fig-proxy-sizes-cacheable",
        include_str!("../../../experiments/fig-proxy-sizes-cacheable.toml"),
    ),
    (
        "fig-proxy-combined",
        include_str!("../../../experiments/fig-proxy-combined.toml"),
    ),
    (
        "fig-proxy-rt",
        include_str!("../../../experiments/fig-proxy-rt.toml"),
    ),
    (
        "fig-proxy-rate",
        include_str!("../../../experiments/fig-proxy-rate.toml"),
    ),
    (
        "fig-proxy-conns",
        include_str!("../../../experiments/fig-proxy-conns.toml"),
    ),
];

/// The names of the built-in experiments, for the completion scripts.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(name, _)| *name).collect()
}

pub const RUN_EXAMPLES: &str = "\
Examples:
  evlab run
      the default experiment (quick); prints where its report is
  evlab run --list
      the shipped experiments: points, time, what each needs and shows
  evlab run fig5-one-byte-idle --duration 10
      the paper's Fig. 5 with 10 s points instead of 120 s
  evlab run quick --trials 3
      exactly 3 trials, not as many as quick's sequential rule chooses
      (3 to 6, within 270 s)
  evlab run my-experiment.toml --out /tmp/my-run
      an experiment of your own, into exactly that directory
  evlab run --resume results/quick/20261127-101500
      go on with an interrupted run: its valid points are kept, the rest
      measured, into it
  evlab run quick --cgroup /sys/fs/cgroup/cpu/evlab
      as an ordinary user: the server's CPU budget in a group that root made
      and gave to you (EVLAB_CGROUP=DIR does the same; without either, evlab
      looks for <cpu root>/evlab)

The results directory is checked (created, written to) before anything runs. Ctrl-C stops \
the run; the report of the points finished is still written (exit status 130), and \
`--resume DIR` goes on with it.";

pub const REPORT_EXAMPLES: &str = "\
Examples:
  evlab report results/quick/20261123-101500
      write report.md, report.html and the figures again from its summary.json
  evlab report results/pipetest/20261123-101500
      the same for a micro-benchmark experiment, from its micro.json and
      pipetest.json";

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Experiment: a name (quick, fig1-one-byte, …; see --list) or a TOML file
    #[arg(default_value = "quick")]
    pub experiment: String,
    /// Length of each point, overriding the experiment's duration_s (the paper's points are
    /// 120 s): seconds, or with a unit (500ms, 10s, 2m)
    #[arg(long, value_name = "DURATION", value_parser = crate::args::seconds)]
    pub duration: Option<f64>,
    /// Where results go: DIR/<experiment>/<timestamp>/
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// Write the results into exactly this directory instead
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Directory of experiment files (names are looked up here before the built-in copies)
    #[arg(long, default_value = "experiments")]
    pub experiments_dir: PathBuf,
    /// List the built-in experiments, each with its points, its estimated time here, what it
    /// needs (root or a cgroup, peers, descriptors, hosts; ✗ where this machine lacks it) and
    /// what it shows, and exit
    #[arg(long)]
    pub list: bool,
    /// One line per finished point and the last line (where the report is); no progress bar,
    /// ETA or notes
    #[arg(long, short)]
    pub quiet: bool,
    /// The evlab binary that runs the servers, idle holders and load (default: this one; another
    /// build can be measured with this one's runner)
    #[arg(long, value_name = "FILE")]
    pub evlab: Option<PathBuf>,
    /// The placebo control: both arms of every comparison get the same condition (one
    /// mechanism, flags and CPU budget for every series, no idle connections held), so that no finding claiming a
    /// difference may come out "reproduced". Results go to <experiment>-placebo/
    #[arg(long)]
    pub placebo: bool,
    /// The cgroup the server's CPU budgets are made in (a group of the cpu controller that this
    /// user may make groups in); default: $EVLAB_CGROUP, else the controller's root as root, or
    /// as an ordinary user <cpu root>/evlab (v1), /sys/fs/cgroup/evlab or the user's own
    /// delegated group (v2). Checked before anything is measured; the error says what root runs
    #[arg(long, value_name = "DIR")]
    pub cgroup: Option<PathBuf>,
    /// Go on with an interrupted run in DIR: its experiment, calibration, valid points and
    /// finished capacity searches are kept; only missing, failed or flagged points (and
    /// interrupted searches) are measured, into the same directory
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "placebo", "duration", "list"])]
    pub resume: Option<PathBuf>,
    /// Run the server and the load on these hosts over OpenSSH (a hosts file; docs/hosts.md):
    /// the server on the `server` host, idle holders on the first client, the load split over
    /// every client host, a proxy's origin on the `origin` host; calibration and capacity
    /// searches with their steps split the same way; peers on the server host; a URI list
    /// copied to the clients; a micro-benchmark on the server host (or --on HOST). FILE may also
    /// be an Ansible-style INI inventory
    #[arg(long, value_name = "FILE", conflicts_with = "resume")]
    pub hosts: Option<PathBuf>,
    /// With --hosts and a micro-benchmark experiment (pipetest, herd, fdalloc, malloc,
    /// readahead): the host it runs on, by its name in the hosts file; default: the server host
    #[arg(long, value_name = "HOST", requires = "hosts")]
    pub on: Option<String>,
    /// Print the plan and exit, measuring nothing: every point and capacity search in the
    /// order the run makes them, with the argv of each process it starts (what only the run
    /// can know, such as ports, is a placeholder)
    #[arg(long, conflicts_with_all = ["resume", "hosts", "list"])]
    pub plan: bool,
    /// With --plan: the plan as JSON
    #[arg(long, requires = "plan")]
    pub json: bool,
    /// The number the order of the arms (series × idle count) in each trial is drawn from;
    /// default: the experiment's `order_seed`, else drawn and recorded. `--plan` says which
    #[arg(long, value_name = "N", conflicts_with = "resume")]
    pub order_seed: Option<u64>,
    /// A fixed number of trials, instead of the experiment's `trials` or of its sequential rule
    /// (`[sequential]`: trials added in blocks until its findings are decided or its time is up)
    #[arg(
        long,
        value_name = "N",
        conflicts_with_all = ["resume", "list"],
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub trials: Option<u32>,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// A results directory of `evlab run` (holding summary.json, or micro.json for a
    /// micro-benchmark experiment)
    pub dir: PathBuf,
}

fn load_spec(a: &RunArgs) -> anyhow::Result<(Spec, String, String)> {
    let p = PathBuf::from(&a.experiment);
    let on_disk = if p.is_file() {
        Some(p)
    } else {
        let named = a.experiments_dir.join(format!("{}.toml", a.experiment));
        named.is_file().then_some(named)
    };
    if let Some(path) = on_disk {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let spec = Spec::parse(&text, &path.display().to_string())?;
        return Ok((spec, path.display().to_string(), text));
    }
    if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == a.experiment) {
        let origin = format!("experiments/{name}.toml (built in)");
        let spec = Spec::parse(text, &origin)?;
        return Ok((spec, origin, text.to_string()));
    }
    Err(crate::args::usage(format!(
        "no experiment `{}`: not a file, not in {}, not built in (built in: {})",
        a.experiment,
        a.experiments_dir.display(),
        BUILTIN.iter().map(|b| b.0).collect::<Vec<_>>().join(", ")
    )))
}

pub fn run(a: RunArgs) -> anyhow::Result<()> {
    if let Some(d) = a.duration {
        anyhow::ensure!(
            d.is_finite() && d > 0.0,
            "--duration {d}: must be a positive number of seconds"
        );
    }
    if a.list {
        let evlab = match &a.evlab {
            Some(p) => p.clone(),
            None => std::env::current_exe().context("cannot find the evlab binary")?,
        };
        let width = terminal_width().unwrap_or(listing::MAX_WIDTH);
        let here = listing::Here::probe(a.cgroup.as_deref());
        print!(
            "{}",
            listing::list(BUILTIN, &evlab, a.duration, &here, width)
        );
        return Ok(());
    }
    if let Some(dir) = &a.resume {
        return resume(&a, dir);
    }
    let (mut spec, spec_path, spec_text) = load_spec(&a)?;
    if a.placebo {
        anyhow::ensure!(
            spec.micro.is_none(),
            "--placebo: `{}` is a micro-benchmark, which has no arms to make equal",
            spec.name
        );
        spec.make_placebo();
    }
    if let Some(seed) = a.order_seed {
        spec.order_seed = Some(seed);
    }
    if let Some(n) = a.trials {
        anyhow::ensure!(
            spec.micro.is_none(),
            "--trials: `{}` is a micro-benchmark, which runs no trials of points (its own flags \
             set its repeats)",
            spec.name
        );
        spec.trials = n;
        spec.sequential = None;
    }
    let hosts = match &a.hosts {
        Some(f) => Some(evlab_lab::model::hosts::Hosts::load(f)?),
        None => {
            if let Some(why) = evlab_lab::model::hosts::needs_hosts(&spec) {
                anyhow::bail!("{why}");
            }
            None
        }
    };
    if a.plan {
        return print_plan(&a, spec, spec_path, spec_text);
    }
    // Where the results go must be writable before the first point runs, not after the last.
    match &a.out {
        Some(d) => output::writable_dir("--out", d)?,
        None => output::writable_dir("--results", &a.results)?,
    }
    let evlab = match a.evlab {
        Some(p) => p,
        None => std::env::current_exe().context("cannot find the evlab binary")?,
    };
    procs::install_interrupt_handler();
    let command = shell_line(&std::env::args().collect::<Vec<_>>());
    finish(sweep::run(RunOptions {
        evlab,
        spec,
        spec_path,
        spec_text,
        duration_override: a.duration,
        results_root: a.results,
        out_dir: a.out,
        command,
        quiet: a.quiet,
        cgroup: a.cgroup,
        resume: None,
        hosts,
        on: a.on,
    })?)
}

/// The terminal's width, as help wraps to it: the terminal's own, else `$COLUMNS`.
fn terminal_width() -> Option<usize> {
    terminal_size::terminal_size()
        .map(|(w, _)| usize::from(w.0))
        .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok())
        .filter(|w| *w > 0)
}

/// `evlab run NAME --plan [--json]`: the run's plan on this machine, measuring nothing.
fn print_plan(a: &RunArgs, spec: Spec, spec_path: String, spec_text: String) -> anyhow::Result<()> {
    anyhow::ensure!(
        spec.micro.is_none(),
        "--plan: `{}` is a micro-benchmark: it runs one benchmark (`evlab run {} --list` says \
         which), with no points to plan",
        spec.name,
        a.experiment
    );
    let evlab = match &a.evlab {
        Some(p) => p.clone(),
        None => std::env::current_exe().context("cannot find the evlab binary")?,
    };
    let opts = RunOptions {
        evlab: evlab.clone(),
        spec,
        spec_path,
        spec_text,
        duration_override: a.duration,
        results_root: a.results.clone(),
        out_dir: a.out.clone(),
        command: String::new(),
        quiet: true,
        cgroup: a.cgroup.clone(),
        resume: None,
        hosts: None,
        on: None,
    };
    let plan = evlab_lab::run::dryrun::dry_run(opts)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&plan.to_json())?);
    } else {
        print!("{}", plan.to_text(&evlab));
    }
    Ok(())
}

/// `evlab run --resume DIR`: the run in DIR goes on, with its own experiment and duration.
fn resume(a: &RunArgs, dir: &std::path::Path) -> anyhow::Result<()> {
    anyhow::ensure!(
        dir.is_dir(),
        "--resume {}: not a directory (give the results directory of an `evlab run`)",
        dir.display()
    );
    if !dir.join("summary.json").exists() {
        anyhow::ensure!(
            !micro::is_micro_dir(dir),
            "--resume {}: a micro-benchmark's run has no points to keep; run it again",
            dir.display()
        );
        anyhow::bail!(
            "--resume {}: no summary.json there (not a results directory of `evlab run`)",
            dir.display()
        );
    }
    let earlier = Summary::read_json(dir)?;
    anyhow::ensure!(
        a.experiment == "quick" || a.experiment == earlier.experiment.name,
        "--resume {}: the run there is `{}`; name no other experiment (or none)",
        dir.display(),
        earlier.experiment.name
    );
    output::writable_dir("--resume", dir)?;
    let evlab = match &a.evlab {
        Some(p) => p.clone(),
        None => std::env::current_exe().context("cannot find the evlab binary")?,
    };
    procs::install_interrupt_handler();
    let command = shell_line(&std::env::args().collect::<Vec<_>>());
    finish(sweep::run(RunOptions {
        evlab,
        spec: earlier.experiment.clone(),
        spec_path: earlier.spec_path.clone(),
        spec_text: earlier.spec_text.clone(),
        duration_override: earlier.duration_override,
        results_root: a.results.clone(),
        out_dir: Some(dir.to_path_buf()),
        command,
        quiet: a.quiet,
        cgroup: a.cgroup.clone(),
        resume: Some(earlier),
        hosts: None,
        on: None,
    })?)
}

/// The run's last line: its points, verdicts and report; exit status 130 when interrupted.
fn finish((dir, summary): (PathBuf, Summary)) -> anyhow::Result<()> {
    let failed = summary.points.iter().filter(|p| !p.ok()).count();
    if let Some(m) = &summary.experiment.micro {
        println!(
            "evlab run: {} in {:.0} s{}; report: {}",
            m.benchmark,
            summary.wall_s,
            if summary.interrupted {
                ", interrupted"
            } else {
                ""
            },
            dir.join("report.html").display()
        );
    } else {
        let fs = evlab_lab::analysis::findings::findings(&summary);
        println!(
            "evlab run: {} points ({} failed) in {:.0} s{}{}; report: {}",
            summary.points.len(),
            failed,
            summary.wall_s,
            if summary.interrupted {
                ", interrupted"
            } else {
                ""
            },
            if fs.is_empty() {
                String::new()
            } else {
                format!(
                    "; {}",
                    evlab_lab::render::report::verdict_counts(&fs).to_lowercase()
                )
            },
            dir.join("report.html").display()
        );
    }
    if summary.interrupted {
        std::process::exit(130);
    }
    Ok(())
}

pub fn report(a: ReportArgs) -> anyhow::Result<()> {
    let dir = &a.dir;
    anyhow::ensure!(
        dir.is_dir(),
        "{} is not a directory (give a results directory of `evlab run`)",
        dir.display()
    );
    if dir.join("summary.json").exists() {
        let s = Summary::read_json(dir)?;
        output::writable_dir("the results directory", dir)?;
        report::write(&s, dir)?;
    } else if micro::is_micro_dir(dir) {
        output::writable_dir("the results directory", dir)?;
        render::micro::write_report(dir)?;
    } else if let Some(json) = micro::orphan_json(dir) {
        anyhow::bail!(
            "{} holds {json} but no {}: a micro-benchmark run from before its \
             report could be re-rendered; run the experiment again",
            dir.display(),
            micro::RECORD
        );
    } else {
        anyhow::bail!(
            "{} is not a results directory: it holds neither summary.json (an \
             experiment's sweep) nor {} (a micro-benchmark experiment)",
            dir.display(),
            micro::RECORD
        );
    }
    println!("evlab report: {}", dir.join("report.html").display());
    Ok(())
}
