//! One point: a fresh server (or proxy and origin) pinned to its CPU inside its budget, idle
//! holders, one measured `evlab load` run, the server's counters and CPU time; then everything
//! stopped and checked gone, and the point judged valid or flagged.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::run::argv;
use crate::run::cgroup::{CpuBudget, Parent};
use crate::run::counters::{children_cpu_seconds, counters_delta, ctx_switches, fetch_stats};
use crate::run::fileset::{polymix_dir, polymix_fileset_argv};
use crate::run::machine;
use crate::run::peers;
use crate::run::plan::RunOptions;
use crate::run::procs::{self, interrupted, Child};
use evlab_reason::model::load::{self, LoadArgs, LoadReport, LoadSummary, ServerStats};
use evlab_reason::model::results::{self, PointResult, Status};
use evlab_reason::model::spec::{Series, ServerKind, Spec, Workload};
use evlab_reason::LabError;

#[derive(Clone, Copy)]
pub(crate) struct PointCtx<'a> {
    pub opts: &'a RunOptions,
    pub scratch: &'a Path,
    pub fileset: Option<&'a Path>,
    pub out: &'a Path,
    pub server_cpus: &'a [usize],
    pub client_cpus: &'a [usize],
    pub duration: f64,
    /// The server's CPU budget for the sweep, if any.
    pub budget: Option<&'a CpuBudget>,
    /// Where budgets are made: found and tried before anything is measured (None: the
    /// experiment has no budget).
    pub cgroup: Option<&'a Parent>,
}

/// Processes of one point, stopped in reverse order whatever happens.
#[derive(Default)]
pub(crate) struct Procs {
    pub server: Option<Child>,
    pub idle: Option<Child>,
    /// The origin behind a measured proxy (`[proxy]`): started first, stopped last.
    pub origin: Option<Child>,
}

impl Procs {
    /// The argv of each process started, in start order: origin, server, idle holder.
    pub fn started(&self) -> Vec<Vec<String>> {
        [&self.origin, &self.server, &self.idle]
            .into_iter()
            .flatten()
            .map(|c| c.argv.clone())
            .collect()
    }

    /// Stops everything (idle holder first) and returns what outlived its stop, for a flag.
    pub fn stop(&mut self) -> Option<String> {
        let mut left = Vec::new();
        for c in [
            self.idle.as_mut(),
            self.server.as_mut(),
            self.origin.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            let l = c.stop(Duration::from_secs(5));
            if !l.is_empty() {
                left.push(format!("{} left processes {l:?} (killed)", c.name));
            }
        }
        (!left.is_empty()).then(|| left.join("; "))
    }
}

pub(crate) fn run_point(
    ctx: &PointCtx,
    index: usize,
    s: &Series,
    swept: Option<f64>,
    idle: usize,
    rate: f64,
    trial: u32,
) -> PointResult {
    let t0 = Instant::now();
    let mut p = new_point(ctx, index, s, swept, idle, rate, trial);
    let mut procs = Procs::default();
    let r = measure(ctx, &mut p, &mut procs);
    // Stop in reverse order of start, and check that nothing of this point outlives it.
    if let Some(left) = procs.stop() {
        p.flags.push(left);
    }
    finish_point(&mut p, r, t0);
    p
}

/// A point's record before it is measured.
pub(crate) fn new_point(
    ctx: &PointCtx,
    index: usize,
    s: &Series,
    swept: Option<f64>,
    idle: usize,
    rate: f64,
    trial: u32,
) -> PointResult {
    let mut p = PointResult::new(index, s, idle, rate, trial, ctx.duration);
    p.swept = ctx
        .opts
        .spec
        .sweep
        .as_ref()
        .zip(swept)
        .map(|(sw, value)| results::Swept {
            name: sw.name(),
            value,
        });
    p.server_cpu_budget = ctx.budget.map(|b| b.share);
    p
}

/// A measured point's status (failed or interrupted, with the reason) and its wall time.
pub(crate) fn finish_point(p: &mut PointResult, r: Result<(), LabError>, t0: Instant) {
    if let Err(e) = r {
        let msg = e.to_string();
        p.status = if interrupted() {
            Status::Interrupted
        } else {
            Status::Failed
        };
        p.reason = Some(msg);
    }
    p.wall_s = t0.elapsed().as_secs_f64();
}

/// A fresh document root for a point (the file set is shared: it is read-only).
pub(crate) fn docroot(ctx: &PointCtx, pdir: &Path) -> Result<PathBuf, LabError> {
    std::fs::create_dir_all(pdir)?;
    let d = docroot_path(ctx, pdir);
    if ctx.fileset.is_none() {
        std::fs::create_dir_all(&d)?;
        std::fs::write(d.join("one"), b"a")?;
    }
    Ok(d)
}

/// Where [`docroot`] puts a point's document root: the run's file set, else `pdir/www`.
pub(crate) fn docroot_path(ctx: &PointCtx, pdir: &Path) -> PathBuf {
    match ctx.fileset {
        Some(f) => f.to_path_buf(),
        None => pdir.join("www"),
    }
}

/// A Polymix series with its own object size reads its own file set: that set (None: the
/// run's) and the object size the series reads.
pub(crate) fn own_fileset(ctx: &PointCtx, label: &str) -> (Option<PathBuf>, String) {
    let spec = &ctx.opts.spec;
    let own_size = spec
        .series
        .iter()
        .find(|x| x.label == label)
        .and_then(|x| x.object_size.as_ref());
    let own_set = own_size
        .zip(ctx.fileset)
        .map(|(size, base)| polymix_dir(base, size));
    (own_set, own_size.unwrap_or(&spec.object_size).clone())
}

fn sh(path: &Path) -> String {
    evlab_reason::model::text::shell_line(&[path.display().to_string()])
}

/// Shell commands that make a point's directory and document root as `docroot` made them: a
/// fresh root holding `one` (one byte), or the run's file set, made by `evlab fileset` if it is
/// not there.
fn docroot_commands(ctx: &PointCtx, pdir: &Path, docroot: &Path, object_size: &str) -> Vec<String> {
    match ctx.fileset {
        Some(f) if ctx.opts.spec.workload == Workload::Polymix => vec![format!(
            "mkdir -p {} && {{ test -d {} || {{ {} > /dev/null && printf a > {}; }}; }}",
            sh(pdir),
            sh(f),
            evlab_reason::model::text::shell_line(&polymix_fileset_argv(
                &ctx.opts.evlab,
                &ctx.opts.spec,
                object_size,
                f
            )),
            sh(&f.join("one"))
        )],
        Some(f) => vec![format!(
            "mkdir -p {} && {{ test -d {} || {} fileset {} --dirs {} > /dev/null; }}",
            sh(pdir),
            sh(f),
            sh(&ctx.opts.evlab),
            sh(f),
            ctx.opts.spec.fileset_dirs
        )],
        None => vec![format!(
            "mkdir -p {} && printf a > {}",
            sh(docroot),
            sh(&docroot.join("one"))
        )],
    }
}

/// Waits, in the shell, until the server at `port` answers `GET /one` with a 200 (what the
/// runner waits for).
fn wait_answers_command(port: u16) -> String {
    format!("until curl -sf -o /dev/null http://127.0.0.1:{port}/one; do sleep 0.1; done")
}

/// Stops what the point's commands started in the background.
fn stop_command(idle: bool) -> String {
    if idle {
        "kill $idle $server; wait $idle $server".into()
    } else {
        "kill $server; wait $server".into()
    }
}

/// Waits for an evlab process's `listening on ADDR` line and returns ADDR.
fn listening_addr(c: &mut Child, what: &str) -> Result<SocketAddr, LabError> {
    let line = c.wait_line(
        |l| l.starts_with("listening on "),
        Duration::from_secs(10),
        "`listening on` line",
    )?;
    line["listening on ".len()..]
        .trim()
        .parse()
        .map_err(|_| LabError::Point(format!("{what} printed a bad address: {line}")))
}

/// A peer's generated config, written again by the point's commands (it was in the scratch
/// directory, which the run removes).
fn record_config(
    commands: &mut Vec<String>,
    conf_dir: &Path,
    argv: &[String],
) -> Result<(), LabError> {
    if let Some(conf) = peers::config_file(argv) {
        let text = std::fs::read_to_string(conf)?;
        commands.push(format!(
            "mkdir -p {} && cat > {} <<'EOF'\n{}EOF",
            sh(conf_dir),
            sh(Path::new(conf)),
            text
        ));
    }
    Ok(())
}

/// Starts the series' server (inside the budget, pinned), waits until it answers, and
/// returns its port; its commands (as a shell runs them: in the background, then a wait until
/// it answers) go to `commands`.
pub(crate) fn start_server(
    ctx: &PointCtx,
    s: &Series,
    idle: usize,
    docroot: &Path,
    pdir: &Path,
    procs: &mut Procs,
    commands: &mut Vec<String>,
) -> Result<u16, LabError> {
    let spec = &ctx.opts.spec;
    // With `[proxy]`: the origin first, outside the budget on its own CPU; the series' server
    // is then the proxy in front of it.
    let origin = match &spec.proxy {
        Some(px) => Some(start_origin(ctx, px, docroot, procs, commands)?),
        None => None,
    };
    let hard = peers::children_nofile().unwrap_or(usize::MAX);
    if let Some(why) = peers::cannot_hold(s.kind, origin.is_some(), idle, hard, "here") {
        return Err(LabError::Point(why));
    }
    let (server, port) = if s.kind == ServerKind::Evlab {
        let what = if origin.is_some() {
            "evlab proxy"
        } else {
            "evlab serve"
        };
        let argv = server_argv(ctx, s, docroot, pdir, 0, origin)?;
        start_evlab(ctx, what, &argv, commands)?
    } else {
        let port = procs::free_port()?;
        let argv = server_argv(ctx, s, docroot, pdir, port, origin)?;
        start_peer(ctx, s, pdir, commands, &argv, port)?
    };
    procs.server = Some(server);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    commands.push(wait_answers_command(port));
    procs::wait_answers(addr, "/one", Duration::from_secs(10))?;
    // The placebo control holds no idle connections, whatever the point's label says (but for
    // its positive control).
    if idle > 0 && ctx.opts.spec.holds_idle(&s.label) {
        start_idle(ctx, idle, port, pdir, procs, commands)?;
        // The holder's connections are up when the client sees them connected; the server may
        // still be accepting them (select at a quarter of a CPU scans a growing set for each):
        // the load starts once it has done so.
        if let Some(server) = procs.server.as_ref() {
            settle(server);
        }
    }
    Ok(port)
}

/// Waits until the server's process tree has used under 1 ms of CPU in 50 ms (at most 3 s):
/// what it had queued is done.
pub(crate) fn settle(server: &Child) {
    let t0 = Instant::now();
    let mut last = server.cpu_seconds();
    while t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(50));
        let now = server.cpu_seconds();
        if now - last < 0.001 {
            return;
        }
        last = now;
    }
}

/// Records the command that starts the server in the background, from `cwd` if given, inside
/// the budget's cgroup (made first) if any.
fn push_background(ctx: &PointCtx, commands: &mut Vec<String>, cwd: Option<&Path>, cmd: String) {
    let script = match cwd {
        Some(d) => format!("cd {} && exec {cmd}", sh(d)),
        None => format!("exec {cmd}"),
    };
    match (ctx.budget, cwd) {
        (Some(b), _) => {
            commands.push(format!(
                "{}   # as root, or the owner of its parent group: the server's CPU budget, {:.0}% of one CPU",
                b.setup_shell(),
                b.share * 100.0
            ));
            commands.push(format!("{} & server=$!", b.join_shell(&script)));
        }
        (None, Some(_)) => commands.push(format!("({script}) & server=$!")),
        (None, None) => commands.push(format!("{cmd} & server=$!")),
    }
}

/// Starts an evlab server (`what`: `evlab serve` or `evlab proxy`) on an ephemeral port and
/// returns it with the port it printed; the recorded command names that port, so that it
/// measures the same server again.
fn start_evlab(
    ctx: &PointCtx,
    what: &str,
    argv: &[String],
    commands: &mut Vec<String>,
) -> Result<(Child, u16), LabError> {
    let mut c = Child::spawn_in(what, argv, ctx.server_cpus, None, ctx.budget)?;
    let addr = listening_addr(&mut c, what)?;
    push_background(
        ctx,
        commands,
        None,
        c.command.replace(" 127.0.0.1:0 ", &format!(" {addr} ")),
    );
    Ok((c, addr.port()))
}

/// The measured server's argv, the binary first: `evlab serve` of `docroot` on an ephemeral
/// port ([`argv::serve_args`]), or with `[proxy]` `evlab proxy` in front of `origin`
/// ([`argv::proxy_args`]); or a peer on `port`, with the config it reads written into `pdir`'s
/// `peer` directory.
pub(crate) fn server_argv(
    ctx: &PointCtx,
    s: &Series,
    docroot: &Path,
    pdir: &Path,
    port: u16,
    origin: Option<SocketAddr>,
) -> Result<Vec<String>, LabError> {
    let spec = &ctx.opts.spec;
    let evlab = ctx.opts.evlab.display().to_string();
    let conf_dir = pdir.join("peer");
    if s.kind != ServerKind::Evlab {
        std::fs::create_dir_all(&conf_dir)?;
    }
    Ok(match (s.kind, origin) {
        (ServerKind::Evlab, Some(origin)) => {
            let mut v = vec![evlab];
            v.extend(argv::proxy_args(spec, s, "127.0.0.1:0", origin));
            v
        }
        (ServerKind::Evlab, None) => {
            let mut v = vec![evlab];
            let root = docroot.display().to_string();
            v.extend(argv::serve_args(spec, s, "127.0.0.1:0", &root));
            v
        }
        (ServerKind::Nginx, Some(origin)) => peers::nginx_proxy_argv(&conf_dir, origin, port)?,
        (ServerKind::Haproxy, Some(origin)) => peers::haproxy_argv(&conf_dir, origin, port)?,
        (ServerKind::Nginx, None) => peers::nginx_argv(&conf_dir, docroot, port)?,
        (ServerKind::Lighttpd, None) => {
            peers::lighttpd_argv(&conf_dir, docroot, port, &s.mechanism)?
        }
        (ServerKind::Lighttpd, Some(_)) => {
            return Err(LabError::Point(
                "lighttpd is not a proxy peer here (nginx proxy_pass and haproxy are)".into(),
            ))
        }
        (ServerKind::Haproxy, None) => {
            return Err(LabError::Point(
                "haproxy is a proxy peer: it needs `[proxy]`".into(),
            ))
        }
    })
}

/// A peer server (nginx, lighttpd, HAProxy) on `port`, as [`server_argv`] made it, from the
/// point's `peer` directory; its config is recorded with the commands, as the scratch directory
/// does not outlive the run.
fn start_peer(
    ctx: &PointCtx,
    s: &Series,
    pdir: &Path,
    commands: &mut Vec<String>,
    argv: &[String],
    port: u16,
) -> Result<(Child, u16), LabError> {
    let conf_dir = pdir.join("peer");
    let c = Child::spawn_in(&s.label, argv, ctx.server_cpus, Some(&conf_dir), ctx.budget)?;
    record_config(commands, &conf_dir, argv)?;
    push_background(ctx, commands, Some(&conf_dir), c.command.clone());
    Ok((c, port))
}

/// Idle connections to the server at `port`, on the (first) client CPU: they are idle once up.
/// Waits until the holder says they all are.
fn start_idle(
    ctx: &PointCtx,
    idle: usize,
    port: u16,
    pdir: &Path,
    procs: &mut Procs,
    commands: &mut Vec<String>,
) -> Result<(), LabError> {
    let argv = idle_argv(ctx, idle, &port.to_string());
    let c = Child::spawn("evlab idle", &argv, idle_cpus(ctx), None)?;
    let out = pdir.join("idle.out");
    commands.push(format!("{} > {} & idle=$!", c.command, sh(&out)));
    commands.push(format!(
        "until grep -q 'connections up' {}; do sleep 0.2; done",
        sh(&out)
    ));
    let c = procs.idle.insert(c);
    let want = format!("idle: all {idle} connections up");
    c.wait_line(
        |l| l.starts_with(&want),
        Duration::from_secs_f64(30.0 + idle as f64 / 500.0),
        "`idle: all … up` line",
    )?;
    Ok(())
}

/// The idle holder's argv, the binary first: `idle` connections to the server at `port`.
pub(crate) fn idle_argv(ctx: &PointCtx, idle: usize, port: &str) -> Vec<String> {
    let mut argv = vec![
        ctx.opts.evlab.display().to_string(),
        "idle".into(),
        "--server".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.into(),
        idle.to_string(),
    ];
    if ctx.opts.spec.idle_request_first {
        argv.extend(["--request-first".into(), "--uri".into(), "/one".into()]);
    }
    argv
}

/// The idle holder's CPU: the first client CPU.
pub(crate) fn idle_cpus<'a>(ctx: &PointCtx<'a>) -> &'a [usize] {
    &ctx.client_cpus[..ctx.client_cpus.len().min(1)]
}

/// The origin's argv (the binary first) and its CPUs: `evlab serve` on an ephemeral port with
/// the spec's origin flags, on `[proxy] origin_cpu` (where this machine has it: else not
/// pinned), by default the first client CPU.
pub(crate) fn origin_argv(
    ctx: &PointCtx,
    px: &evlab_reason::model::spec::ProxySpec,
    docroot: &Path,
) -> (Vec<String>, Vec<usize>) {
    let mut argv = vec![ctx.opts.evlab.display().to_string()];
    argv.extend(argv::origin_args(
        &ctx.opts.spec,
        px,
        "127.0.0.1:0",
        &docroot.display().to_string(),
    ));
    let cpus = match px.origin_cpu {
        Some(c) if c < procs::online_cpus() => vec![c],
        Some(_) => vec![],
        None => idle_cpus(ctx).to_vec(),
    };
    (argv, cpus)
}

/// Starts the origin behind a measured proxy: `evlab serve` (epoll-et) on the origin CPU,
/// outside the budget, with the spec's origin flags (and, for the Polymix workload, its
/// uncacheable prefix); waits until it answers; returns its address.
fn start_origin(
    ctx: &PointCtx,
    px: &evlab_reason::model::spec::ProxySpec,
    docroot: &Path,
    procs: &mut Procs,
    commands: &mut Vec<String>,
) -> Result<SocketAddr, LabError> {
    let (argv, cpu) = origin_argv(ctx, px, docroot);
    let mut c = Child::spawn("evlab serve (origin)", &argv, &cpu, None)?;
    let addr = listening_addr(&mut c, "evlab serve")?;
    commands.push(format!(
        "{} & origin=$!",
        c.command.replace(" 127.0.0.1:0 ", &format!(" {addr} "))
    ));
    procs.origin = Some(c);
    procs::wait_answers(addr, "/one", Duration::from_secs(10))?;
    Ok(addr)
}

/// One finished `evlab load` run.
pub(crate) struct LoadRun {
    pub report: LoadReport,
    /// The report as the generator wrote it.
    pub json: String,
    /// Its `--latencies` file, where the spec keeps them.
    pub latencies: Option<PathBuf>,
    /// The generator's own CPU time (getrusage of the reaped child), seconds.
    pub cpu_s: f64,
    pub wall_s: f64,
    pub command: String,
    /// The load's argv as started (`Child::argv`).
    pub argv: Vec<String>,
    /// Busy share of the client CPUs and the largest steal share on the client and server
    /// CPUs, from /proc/stat over the run.
    pub client_busy: Option<f64>,
    pub server_busy: Option<f64>,
    pub steal: Option<f64>,
    /// Processes other than the run's own that used CPU meanwhile (`machine::others_between`).
    pub others: Vec<(u32, String, f64)>,
}

pub(crate) struct LoadAsk<'a> {
    pub port: u16,
    pub docroot: &'a Path,
    pub pdir: &'a Path,
    pub rate: f64,
    pub secs: f64,
    pub timeout_s: f64,
    /// The reply rate's sampling interval (s).
    pub sample_interval_s: f64,
    pub tag: &'a str,
}

/// The load's argv (the binary first), where its report goes and its latencies (where the
/// spec keeps them): [`load::load_argv`] with the spec's workload and flags.
pub(crate) fn load_argv(ctx: &PointCtx, a: &LoadAsk) -> (Vec<String>, PathBuf, Option<PathBuf>) {
    let spec = &ctx.opts.spec;
    let json = a.pdir.join(format!("load-{}.json", a.tag));
    let latencies = (spec.keep_latencies && a.tag == "run")
        .then(|| a.pdir.join(format!("latencies-{}.csv", a.tag)));
    let mut argv = vec![ctx.opts.evlab.display().to_string()];
    argv.extend(load::load_argv(&LoadArgs {
        port: a.port,
        workload: &spec.workload,
        docroot: a.docroot,
        rate: a.rate,
        duration_s: a.secs,
        calls_per_conn: spec.calls_per_conn,
        active_conns: spec.active_conns,
        timeout_s: a.timeout_s,
        sample_interval_s: a.sample_interval_s,
        json: &json,
        latencies: latencies.as_deref(),
        stop_after_s: spec.window().then_some(a.secs),
        extra: &spec.load_flags,
    }));
    (argv, json, latencies)
}

pub(crate) fn run_load(ctx: &PointCtx, name: &str, a: &LoadAsk) -> Result<LoadRun, LabError> {
    let spec = &ctx.opts.spec;
    let (argv, json, latencies) = load_argv(ctx, a);
    let ru0 = children_cpu_seconds();
    let procs0 = machine::process_reading();
    let (cl0, sv0) = (
        machine::cpu_ticks(ctx.client_cpus),
        machine::cpu_ticks(ctx.server_cpus),
    );
    let t = Instant::now();
    let mut c = Child::spawn(name, &argv, ctx.client_cpus, None)?;
    // With a fixed set of active connections the run lasts as long as its calls take, which a
    // slow series (poll among many dead connections) stretches: allow it three durations.
    let secs = if spec.active_conns.is_some() && !spec.window() {
        3.0 * a.secs
    } else {
        a.secs
    };
    let limit = Duration::from_secs_f64(secs + a.timeout_s + 30.0);
    let status = c.wait_exit(limit)?;
    let wall = t.elapsed().as_secs_f64();
    let (cl1, sv1) = (
        machine::cpu_ticks(ctx.client_cpus),
        machine::cpu_ticks(ctx.server_cpus),
    );
    let others = machine::others_between(&procs0, &machine::process_reading(), std::process::id());
    let command = c.command.clone();
    let shown = c.argv.clone();
    let Some(status) = status else {
        c.stop(Duration::from_secs(2));
        return Err(LabError::Point(if interrupted() {
            "interrupted".into()
        } else {
            format!(
                "evlab load did not finish within {:.0} s",
                limit.as_secs_f64()
            )
        }));
    };
    // The load child is reaped now: its CPU time is in RUSAGE_CHILDREN (nothing else of
    // ours was reaped in between).
    let cpu = children_cpu_seconds() - ru0;
    if !status.success() {
        return Err(LabError::Point(format!(
            "evlab load failed ({status}): {}",
            c.stderr_tail(4)
        )));
    }
    let (report, text) = load::read_report(&json)?;
    let cl = machine::cpu_shares(&cl0, &cl1);
    let sv = machine::cpu_shares(&sv0, &sv1);
    Ok(LoadRun {
        report,
        json: text,
        latencies,
        cpu_s: cpu,
        wall_s: wall,
        command,
        argv: shown,
        client_busy: cl.map(|x| x.0),
        server_busy: sv.map(|x| x.0),
        steal: match (cl, sv) {
            (None, None) => None,
            (a, b) => Some(a.map_or(0.0, |x| x.1).max(b.map_or(0.0, |x| x.1))),
        },
        others,
    })
}

fn measure(ctx: &PointCtx, p: &mut PointResult, procs: &mut Procs) -> Result<(), LabError> {
    let spec = &ctx.opts.spec;
    let (own_set, object_size) = own_fileset(ctx, &p.series);
    let ctx = &PointCtx {
        fileset: own_set.as_deref().or(ctx.fileset),
        ..*ctx
    };
    let pdir = ctx.scratch.join(format!("point-{}", p.index));
    let docroot = docroot(ctx, &pdir)?;
    // The scratch directory goes when the run ends: the point's commands begin by making
    // what it held again, so that they work after the run.
    p.commands
        .extend(docroot_commands(ctx, &pdir, &docroot, &object_size));
    let series = point_series(spec, p);
    let port = start_server(
        ctx,
        &series,
        p.idle,
        &docroot,
        &pdir,
        procs,
        &mut p.commands,
    )?;
    p.argv = procs.started();
    let ask = |secs: f64, tag: &'static str| LoadAsk {
        port,
        docroot: &docroot,
        pdir: &pdir,
        rate: p.rate,
        secs,
        timeout_s: spec.timeout_s,
        sample_interval_s: 1.0,
        tag,
    };
    if spec.warmup_s > 0.0 {
        let w = run_load(ctx, "evlab load (warm-up)", &ask(spec.warmup_s, "warmup"))?;
        p.commands.push(format!("{}   # warm-up", w.command));
        p.argv.push(w.argv);
    }
    let run_ask = ask(ctx.duration, "run");
    let m = measured_run(ctx, p, procs, &run_ask)?;
    record(ctx, p, &m);
    judge(spec, p);
    if !m.server_alive {
        let server = procs.server.as_ref().expect("started");
        p.flags.push(format!(
            "server exited during the run: {}",
            server.stderr_tail(3)
        ));
    }
    Ok(())
}

/// The point's series as started: the spec's series with the swept flag, if any, last (after
/// the series' own flags).
pub(crate) fn point_series(spec: &Spec, p: &PointResult) -> Series {
    let mut flags = if p.kind == evlab_reason::model::spec::ServerKind::Evlab {
        spec.run_flags(&p.series)
    } else {
        spec.series
            .iter()
            .find(|x| x.label == p.series)
            .map(|x| x.flags.clone())
            .unwrap_or_default()
    };
    if let (Some(sw), Some(v)) = (&spec.sweep, p.swept_value()) {
        flags.extend([
            sw.flag.clone(),
            evlab_reason::model::spec::SweepSpec::arg(v),
        ]);
    }
    Series {
        label: p.series.clone(),
        kind: p.kind,
        mechanism: p.mechanism.clone(),
        flags,
    }
}

/// What the measured load run saw of the server (and origin) around it.
struct Measured {
    run: LoadRun,
    /// The server's and the origin's CPU time over the run, seconds.
    server_cpu_s: f64,
    origin_cpu_s: Option<f64>,
    ctx_switches: (Option<u64>, Option<u64>),
    stats: (Option<ServerStats>, Option<ServerStats>),
    server_alive: bool,
}

/// The measured load run, with the server's counters, CPU time and context switches read just
/// before and after it; its commands (the load, then the stops) go to the point's.
fn measured_run(
    ctx: &PointCtx,
    p: &mut PointResult,
    procs: &mut Procs,
    ask: &LoadAsk,
) -> Result<Measured, LabError> {
    let spec = &ctx.opts.spec;
    let addr: SocketAddr = ([127, 0, 0, 1], ask.port).into();
    let server = procs.server.as_mut().expect("started");
    // A proxy's stats are not a server's (`ServerStats`): only the μserver's are fetched.
    let stats_before = if p.kind == ServerKind::Evlab && spec.proxy.is_none() {
        Some(fetch_stats(addr)?)
    } else {
        None
    };
    let cpu_before = server.cpu_seconds();
    let ctx_before = ctx_switches(server.pid);
    let origin_before = procs.origin.as_ref().map(|o| o.cpu_seconds());
    let run = run_load(ctx, "evlab load", ask)?;
    let server = procs.server.as_mut().expect("started");
    let cpu_after = server.cpu_seconds();
    let ctx_after = ctx_switches(server.pid);
    // The origin's CPU time over the run (it shares the client CPU unless `origin_cpu`).
    let origin_cpu = procs
        .origin
        .as_ref()
        .zip(origin_before)
        .map(|(o, b)| (o.cpu_seconds() - b).max(0.0));
    p.commands.push(run.command.clone());
    p.argv.push(run.argv.clone());
    p.commands
        .push(stop_command(p.idle > 0 && spec.holds_idle(&p.series)));
    if spec.proxy.is_some() {
        p.commands.push("kill $origin; wait $origin".into());
    }
    let server_alive = server.alive();
    let stats_after = match (&stats_before, server_alive) {
        (Some(_), true) => Some(fetch_stats(addr)?),
        _ => None,
    };
    // Keep the generator's report as it wrote it, beside the summary.
    let raw_dir = ctx.out.join("load");
    let _ = std::fs::create_dir_all(&raw_dir);
    let _ = std::fs::write(
        raw_dir.join(format!("point-{:03}.json", p.index)),
        &run.json,
    );
    if let Some(l) = &run.latencies {
        std::fs::copy(
            l,
            raw_dir.join(format!("point-{:03}.latencies.csv", p.index)),
        )?;
    }
    Ok(Measured {
        run,
        server_cpu_s: (cpu_after - cpu_before).max(0.0),
        origin_cpu_s: origin_cpu,
        ctx_switches: (ctx_before, ctx_after),
        stats: (stats_before, stats_after),
        server_alive,
    })
}

/// The point's measurements from its run: the load's summary and samples, CPU times and
/// shares, the server's counters.
fn record(ctx: &PointCtx, p: &mut PointResult, m: &Measured) {
    let spec = &ctx.opts.spec;
    let run = &m.run;
    let load = LoadSummary::from(&run.report);
    p.samples = load::samples(&run.report);
    let replies = load.replies.or(load.status_2xx).filter(|&r| r > 0);
    let server_cpu = m.server_cpu_s;
    let wall = run.wall_s.max(1e-9);
    p.server_cpu_s = Some(server_cpu);
    p.server_cpu_util = Some(server_cpu / wall);
    p.server_cpu_us_per_reply = replies.map(|r| server_cpu * 1e6 / r as f64);
    let ncl = ctx.client_cpus.len().max(1) as f64;
    p.client_cpu_util = Some(run.cpu_s / (wall * ncl));
    p.client_cpu_busy = run.client_busy;
    if let Some(f) = quota_flag(spec, &run.report.cpu, run.report.duration_s) {
        p.flags.push(f);
    }
    // An origin on a client CPU is not the client: its share is not counted as the client's.
    let origin_on_client = spec.proxy.as_ref().is_some_and(|px| match px.origin_cpu {
        Some(c) => ctx.client_cpus.contains(&c),
        None => !ctx.client_cpus.is_empty(),
    });
    if let (Some(busy), Some(o), true) = (p.client_cpu_busy, m.origin_cpu_s, origin_on_client) {
        p.client_cpu_busy = Some((busy - o / (wall * ncl)).max(0.0));
    }
    p.server_cpu_busy = run.server_busy;
    p.steal = run.steal;
    p.notes.extend(machine::others_note(&run.others));
    if let (Some(a), Some(b)) = &m.stats {
        p.server = Some(counters_delta(a, b));
        // A worker process lost mid-run measured a smaller server than the point says.
        if let Some(died) = b
            .processes
            .as_ref()
            .map(|x| &x.died)
            .filter(|d| !d.is_empty())
        {
            let who: Vec<String> = died
                .iter()
                .map(|d| format!("worker {} (pid {}): {}", d.worker, d.pid, d.how))
                .collect();
            p.flags.push(format!(
                "server lost {} worker process(es): {}",
                died.len(),
                who.join("; ")
            ));
        }
    }
    if let (Some(a), Some(b)) = m.ctx_switches {
        p.server_ctx_switches = Some(b.saturating_sub(a));
    }
    p.load = Some(load);
}

/// Whether the lag behind the schedule kept growing to the end: over the last three sample
/// intervals (or more) the per-interval lag only rose, and ended at 50 ms or more. An isolated
/// stall rises and falls. (Shorter runs are judged by their achieved start rate alone.)
fn lag_grows(lag: &[f64]) -> bool {
    let tail = &lag[lag.len().saturating_sub(3)..];
    tail.len() >= 3
        && tail.last().is_some_and(|&l| l >= 50.0)
        && tail.windows(2).all(|w| w[1] > w[0])
}

/// The validity rule (httperf's manual: a run in which the client was the bottleneck or ran
/// out of resources measures the client). Invalid — a flag — only when the client fell behind
/// in a sustained way: it started connections at under `start_rate_limit` of the offered rate,
/// or its lag grew to the end, or its CPUs were busy `client_cpu_limit` of the time; or when it
/// ran out of descriptors or ports; or when the server did not serve the workload. Isolated
/// lateness (a VM's scheduling jitter) and steal are notes with their size, as are other
/// processes busy meanwhile (noted when the point is measured).
pub fn judge(spec: &Spec, p: &mut PointResult) {
    let Some(load) = p.load.clone() else {
        return;
    };
    let sch = &load.schedule;
    let offered = sch.offered_rate.unwrap_or(p.rate);
    let conns = load
        .connections
        .unwrap_or((p.rate * p.duration_s) as u64)
        .max(1);
    if let Some(a) = sch.achieved_start_rate {
        if a < spec.start_rate_limit * offered {
            p.flags.push(format!(
                "client fell behind: started {a:.0} connections/s of {offered:.0} offered ({:.1}%), {:.0} ms behind at the end",
                a * 100.0 / offered,
                sch.end_lag_ms.unwrap_or(0.0)
            ));
        }
    }
    if lag_grows(&sch.lag_ms) && !p.flags.iter().any(|f| f.starts_with("client fell behind")) {
        p.flags.push(format!(
            "client fell behind: its lag grew to {:.0} ms",
            sch.lag_ms.last().copied().unwrap_or(0.0)
        ));
    }
    let busy = p.client_cpu_busy.or(p.client_cpu_util).unwrap_or(0.0);
    if busy >= spec.client_cpu_limit {
        p.flags.push(format!(
            "client saturated: its CPU busy {:.0}% (the generator itself {:.0}%; the rest softirq or other processes)",
            busy * 100.0,
            p.client_cpu_util.unwrap_or(0.0) * 100.0
        ));
    }
    for (name, n) in [
        ("addrunavail", load.errors.addrunavail),
        ("fd-unavail", load.errors.fd_unavail),
        ("ftab-full", load.errors.ftab_full),
    ] {
        if let Some(n) = n.filter(|&n| n > 0) {
            p.flags
                .push(format!("client out of resources: {n} {name} errors"));
        }
    }
    // A server that answers with errors (a docroot it cannot read, say) is not serving the
    // workload: its replies/s must not be read as a result.
    if let (Some(replies), Some(ok)) = (load.replies, load.status_2xx) {
        if replies > ok {
            p.flags.push(format!(
                "not serving: {} of {replies} replies were not 2xx",
                replies - ok
            ));
        }
    }
    if let Some(late) = load.late_starts {
        if late as f64 > spec.late_start_limit * conns as f64 {
            p.notes.push(format!(
                "jitter: {late} starts ({:.1}%) over 1 ms late, p99 {:.1} ms, max {:.1} ms; the schedule was kept ({:.1}% of the offered start rate)",
                late as f64 * 100.0 / conns as f64,
                sch.late_p99_ms.unwrap_or(0.0),
                sch.late_max_ms.unwrap_or(0.0),
                sch.achieved_start_rate.map_or(100.0, |a| a * 100.0 / offered)
            ));
        }
    }
    if let Some(st) = p.steal.filter(|&s| s >= 0.02) {
        p.notes.push(format!(
            "steal: the hypervisor took {:.0}% of a CPU",
            st * 100.0
        ));
    }
}

/// The flag of a generator bound by its cgroup's CPU quota: it used at least
/// `client_cpu_limit` of the quota, or its group was throttled for more than the rest
/// (1 − `client_cpu_limit`) of the run's `duration_s`. Bound by its quota, however idle the
/// machine's CPUs look.
pub fn quota_flag(spec: &Spec, cpu: &evlab_wire::load::Cpu, duration_s: f64) -> Option<String> {
    let quota = cpu.quota_cpus.filter(|&q| q > 0.0)?;
    let used = cpu.percent / 100.0 / quota;
    let throttled = cpu.throttled_s.unwrap_or(0.0) / duration_s.max(1e-9);
    (used >= spec.client_cpu_limit || throttled > 1.0 - spec.client_cpu_limit).then(|| {
        format!(
            "client saturated: the generator used {:.0}% of its cgroup's CPU quota ({quota:.2} CPU){}",
            used * 100.0,
            cpu.throttled_s.map_or(String::new(), |t| format!(
                ", throttled {t:.2} s ({:.0}% of the run)",
                throttled * 100.0
            ))
        )
    })
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod quota_tests;
