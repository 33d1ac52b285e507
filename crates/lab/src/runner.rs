//! The sweep: for every trial, idle count, series and rate, one point — a fresh server pinned to
//! its CPU, idle holders, one measured `evlab load` run, the server's counters and CPU time —
//! then everything stopped and checked gone. A failed point is recorded and the sweep goes on;
//! Ctrl-C ends the current point and the results so far are written.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::loadjson::{self, LoadArgs};
use crate::machine;
use crate::peers;
use crate::procs::{self, interrupted, Child};
use crate::progress::Progress;
use crate::report;
use crate::results::{
    self, PointResult, ServerCounters, SkippedSeries, Status, Summary, SyscallRow,
};
use crate::spec::{Series, ServerKind, Spec, Workload};
use crate::LabError;

pub struct RunOptions {
    /// The `evlab` binary (the running one, or the test's).
    pub evlab: PathBuf,
    pub spec: Spec,
    pub spec_path: String,
    pub spec_text: String,
    pub duration_override: Option<f64>,
    /// `results/`: the run goes to `<results>/<name>/<timestamp>/` unless `out_dir` is given.
    pub results_root: PathBuf,
    pub out_dir: Option<PathBuf>,
    /// The `evlab run …` command line, recorded.
    pub command: String,
    pub quiet: bool,
}

/// Which evlab mechanisms this kernel supports: name → `Ok(())` or the reason it is not.
pub fn mechanism_support(evlab: &Path) -> BTreeMap<String, Result<(), String>> {
    let mut out = BTreeMap::new();
    let Some(text) =
        procs::command_line_output(&[&evlab.display().to_string(), "serve", "--list-mechanisms"])
    else {
        return out;
    };
    for line in text.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if let Some((_, tail)) = line.split_once("supported: ") {
            let r = if tail.trim_start().starts_with("yes") {
                Ok(())
            } else {
                Err(tail
                    .trim()
                    .trim_start_matches("no")
                    .trim_start_matches(':')
                    .trim()
                    .to_string())
            };
            out.insert(name.to_string(), r);
        }
    }
    out
}

fn stamp() -> String {
    results::utc(results::now_secs())
        .replace(['-', ':'], "")
        .replace('T', "-")
        .trim_end_matches('Z')
        .to_string()
}

/// A scratch directory for docroots and peer configs, removed at the end of the run.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, LabError> {
        let base = std::env::temp_dir().join(format!(
            "evlab-run-{}-{}",
            std::process::id(),
            results::now_secs()
        ));
        std::fs::create_dir_all(&base)?;
        Ok(Scratch(base))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Plan {
    series: Vec<Series>,
    skipped: Vec<SkippedSeries>,
}

fn plan(opts: &RunOptions) -> Plan {
    let support = mechanism_support(&opts.evlab);
    let needs_lighttpd = opts
        .spec
        .mechanisms
        .iter()
        .chain(opts.spec.series.iter().map(|s| &s.mechanism))
        .any(|m| m.starts_with("lighttpd"));
    let handlers = if needs_lighttpd && peers::installed("lighttpd") {
        peers::lighttpd_handlers()
    } else {
        vec![]
    };
    let supported = |m: &str| matches!(support.get(m), Some(Ok(())));
    let mut series = Vec::new();
    let mut skipped = Vec::new();
    let mut skip = |label: &str, reason: String| {
        skipped.push(SkippedSeries {
            series: label.to_string(),
            reason,
        })
    };
    if needs_lighttpd && handlers.is_empty() {
        skip(
            "lighttpd",
            if peers::installed("lighttpd") {
                "lighttpd -V lists no usable event handler".into()
            } else {
                "lighttpd is not installed".into()
            },
        );
    }
    for s in opts.spec.series_list(&supported, &handlers) {
        match s.kind {
            ServerKind::Evlab => match support.get(&s.mechanism) {
                Some(Ok(())) => series.push(s),
                Some(Err(why)) => skip(&s.label, format!("not supported here: {why}")),
                None => skip(
                    &s.label,
                    "`evlab serve --list-mechanisms` does not list it".into(),
                ),
            },
            ServerKind::Nginx if !peers::installed("nginx") => {
                skip(&s.label, "nginx is not installed".into())
            }
            ServerKind::Lighttpd if !handlers.contains(&s.mechanism) => skip(
                &s.label,
                format!("this lighttpd has no `{}` event handler", s.mechanism),
            ),
            _ => series.push(s),
        }
    }
    Plan { series, skipped }
}

/// Runs the experiment; returns the results directory and what was measured.
pub fn run(opts: RunOptions) -> Result<(PathBuf, Summary), LabError> {
    let t0 = Instant::now();
    let spec = &opts.spec;
    let duration = opts.duration_override.unwrap_or(spec.duration_s);
    let out = match &opts.out_dir {
        Some(d) => d.clone(),
        None => opts.results_root.join(&spec.name).join(stamp()),
    };
    std::fs::create_dir_all(&out)
        .map_err(|e| LabError::Io(format!("cannot create {}: {e}", out.display())))?;
    let mut progress = Progress::new(opts.quiet);
    let Plan { series, skipped } = plan(&opts);
    for s in &skipped {
        progress.note(&format!("evlab run: skipping {}: {}", s.series, s.reason));
    }
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
        series: series.clone(),
        skipped,
        calibration: None,
        points: vec![],
    };
    let ncpu = procs::online_cpus();
    let pin =
        |cpus: &[usize]| -> Vec<usize> { cpus.iter().copied().filter(|&c| c < ncpu).collect() };
    let server_cpus = pin(&[spec.server_cpu]);
    let client_cpus = pin(&spec.client_cpus);
    if server_cpus.is_empty() || client_cpus.is_empty() {
        progress.note(&format!(
            "evlab run: warning: this machine has {ncpu} CPU(s); server_cpu {} / client_cpus {:?} \
             are not all available, so those processes are not pinned",
            spec.server_cpu, spec.client_cpus
        ));
    }
    let scratch = Scratch::new()?;
    let fileset = if spec.workload == Workload::Specweb {
        // One file set per run: it is read-only, and the server caches what it serves.
        let dir = scratch.0.join("fileset");
        let argv = vec![
            opts.evlab.display().to_string(),
            "fileset".into(),
            dir.display().to_string(),
            "--dirs".into(),
            spec.fileset_dirs.to_string(),
        ];
        progress.note(&format!("evlab run: {}", procs::shell_line(&argv)));
        let st = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdout(std::process::Stdio::null())
            .status()?;
        if !st.success() {
            return Err(LabError::Io(format!(
                "`{}` failed ({st})",
                procs::shell_line(&argv)
            )));
        }
        Some(dir)
    } else {
        None
    };

    let fixed_rates = !spec.rates.is_empty();
    let per_series_rates = if fixed_rates {
        spec.rates.len()
    } else {
        let rs = spec.rate_search.as_ref().expect("validated");
        ((rs.max - rs.start) / rs.step).floor() as usize + 1
    };
    let total = spec.trials as usize * spec.idle.len() * series.len() * per_series_rates;
    let estimate = duration + spec.warmup_s + spec.pause_s + 1.5;
    let samples_path = out.join("samples.csv");
    let mut samples_text = format!("{}\n", results::SAMPLES_HEADER);
    results::write_atomic(&samples_path, &samples_text)?;
    progress.note(&format!(
        "evlab run: {} — {} series × {} rates × {} idle counts × {} trials, {duration} s per point; results in {}",
        spec.name,
        series.len(),
        per_series_rates,
        spec.idle.len(),
        spec.trials,
        out.display()
    ));

    let mut index = 0;
    'all: for trial in 1..=spec.trials {
        for &idle in &spec.idle {
            for s in &series {
                let mut below = 0;
                let rates: Vec<f64> = if fixed_rates {
                    spec.rates.clone()
                } else {
                    let rs = spec.rate_search.as_ref().expect("validated");
                    (0..per_series_rates)
                        .map(|i| rs.start + rs.step * i as f64)
                        .collect()
                };
                for rate in rates {
                    if interrupted() {
                        summary.interrupted = true;
                        break 'all;
                    }
                    index += 1;
                    progress.start_point(
                        index,
                        total,
                        &format!("{} idle={idle} rate={rate}/s trial {trial}", s.label),
                        estimate,
                    );
                    let ctx = PointCtx {
                        opts: &opts,
                        scratch: &scratch.0,
                        fileset: fileset.as_deref(),
                        out: &out,
                        server_cpus: &server_cpus,
                        client_cpus: &client_cpus,
                        duration,
                    };
                    let p = run_point(&ctx, index, s, idle, rate, trial);
                    progress.finish_point(index, total, &p);
                    if p.status == Status::Interrupted {
                        summary.interrupted = true;
                    }
                    samples_text.push_str(&results::samples_csv_rows(&p));
                    let reply = p.reply_rate();
                    summary.points.push(p);
                    results::write_atomic(&samples_path, &samples_text)?;
                    summary.wall_s = t0.elapsed().as_secs_f64();
                    write_tables(&summary, &out)?;
                    if summary.interrupted {
                        break 'all;
                    }
                    if let Some(rs) = &spec.rate_search {
                        if !matches!(reply, Some(r) if r >= rs.below * rate) {
                            below += 1;
                            if below >= rs.past {
                                break;
                            }
                        }
                    }
                    if spec.pause_s > 0.0 {
                        std::thread::sleep(Duration::from_secs_f64(spec.pause_s));
                    }
                }
            }
        }
    }
    summary.finished = Some(results::utc(results::now_secs()));
    summary.wall_s = t0.elapsed().as_secs_f64();
    write_tables(&summary, &out)?;
    report::write(&summary, &out)?;
    Ok((out, summary))
}

fn write_tables(summary: &Summary, out: &Path) -> Result<(), LabError> {
    summary.write_json(out)?;
    results::write_atomic(
        &out.join("points.csv"),
        &results::points_csv(&summary.points),
    )
}

struct PointCtx<'a> {
    opts: &'a RunOptions,
    scratch: &'a Path,
    fileset: Option<&'a Path>,
    out: &'a Path,
    server_cpus: &'a [usize],
    client_cpus: &'a [usize],
    duration: f64,
}

/// Processes of one point, stopped in reverse order whatever happens.
#[derive(Default)]
struct Procs {
    server: Option<Child>,
    idle: Option<Child>,
}

fn run_point(
    ctx: &PointCtx,
    index: usize,
    s: &Series,
    idle: usize,
    rate: f64,
    trial: u32,
) -> PointResult {
    let t0 = Instant::now();
    let mut p = PointResult {
        index,
        series: s.label.clone(),
        kind: s.kind,
        mechanism: s.mechanism.clone(),
        idle,
        rate,
        trial,
        duration_s: ctx.duration,
        status: Status::Ok,
        reason: None,
        wall_s: 0.0,
        load: None,
        server_cpu_s: None,
        server_cpu_us_per_reply: None,
        server_cpu_util: None,
        client_cpu_util: None,
        server: None,
        client_cpu_busy: None,
        server_cpu_busy: None,
        steal: None,
        server_cpu_budget: None,
        flags: vec![],
        notes: vec![],
        commands: vec![],
        samples: vec![],
    };
    let mut procs = Procs::default();
    let r = measure(ctx, &mut p, &mut procs);
    // Stop in reverse order of start, and check that nothing of this point outlives it.
    let mut left = Vec::new();
    for c in [procs.idle.as_mut(), procs.server.as_mut()]
        .into_iter()
        .flatten()
    {
        let l = c.stop(Duration::from_secs(5));
        if !l.is_empty() {
            left.push(format!("{} left processes {l:?} (killed)", c.name));
        }
    }
    if !left.is_empty() {
        p.flags.push(left.join("; "));
    }
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
    p
}

fn measure(ctx: &PointCtx, p: &mut PointResult, procs: &mut Procs) -> Result<(), LabError> {
    let spec = &ctx.opts.spec;
    let evlab = ctx.opts.evlab.display().to_string();
    let pdir = ctx.scratch.join(format!("point-{}", p.index));
    std::fs::create_dir_all(&pdir)?;
    // A fresh document root per point (the file set is shared: it is read-only).
    let docroot = match ctx.fileset {
        Some(f) => f.to_path_buf(),
        None => {
            let d = pdir.join("www");
            std::fs::create_dir_all(&d)?;
            std::fs::write(d.join("one"), b"a")?;
            d
        }
    };

    // The server.
    let (server, port) = match p.kind {
        ServerKind::Evlab => {
            let mut argv = vec![
                evlab.clone(),
                "serve".into(),
                "--listen".into(),
                "127.0.0.1:0".into(),
                "--root".into(),
                docroot.display().to_string(),
                "--mechanism".into(),
                p.mechanism.clone(),
                "--stats".into(),
            ];
            if spec.profile {
                argv.push("--profile".into());
            }
            argv.extend(spec.server_flags.iter().cloned());
            let series_flags = ctx
                .opts
                .spec
                .series
                .iter()
                .find(|x| x.label == p.series)
                .map(|x| x.flags.clone())
                .unwrap_or_default();
            argv.extend(series_flags);
            let mut c = Child::spawn("evlab serve", &argv, ctx.server_cpus, None)?;
            let line = c.wait_line(
                |l| l.starts_with("listening on "),
                Duration::from_secs(10),
                "`listening on` line",
            )?;
            let addr: SocketAddr = line["listening on ".len()..].trim().parse().map_err(|_| {
                LabError::Point(format!("evlab serve printed a bad address: {line}"))
            })?;
            p.commands
                .push(c.command.replace(" 127.0.0.1:0 ", &format!(" {addr} ")));
            (c, addr.port())
        }
        ServerKind::Nginx | ServerKind::Lighttpd => {
            if p.kind == ServerKind::Lighttpd {
                // lighttpd accepts at most half its descriptor limit as connections; past that it
                // answers nobody, which would be recorded as a server that serves nothing.
                let cap = peers::lighttpd_max_connections();
                if p.idle + 1000 > cap {
                    return Err(LabError::Point(format!(
                        "lighttpd accepts at most {cap} connections here (half its descriptor limit): it cannot hold {} idle connections plus the load",
                        p.idle
                    )));
                }
            }
            let port = procs::free_port()?;
            let conf_dir = pdir.join("peer");
            std::fs::create_dir_all(&conf_dir)?;
            let argv = if p.kind == ServerKind::Nginx {
                peers::nginx_argv(&conf_dir, &docroot, port)?
            } else {
                peers::lighttpd_argv(&conf_dir, &docroot, port, &p.mechanism)?
            };
            let c = Child::spawn(&p.series, &argv, ctx.server_cpus, Some(&conf_dir))?;
            p.commands.push(c.command.clone());
            (c, port)
        }
    };
    let server = procs.server.insert(server);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    procs::wait_answers(addr, "/one", Duration::from_secs(10))?;

    // Idle connections, on the (first) client CPU: they are idle once up.
    if p.idle > 0 {
        let argv = vec![
            evlab.clone(),
            "idle".into(),
            "--server".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            p.idle.to_string(),
        ];
        let c = Child::spawn(
            "evlab idle",
            &argv,
            &ctx.client_cpus[..ctx.client_cpus.len().min(1)],
            None,
        )?;
        p.commands.push(c.command.clone());
        let c = procs.idle.insert(c);
        let want = format!("idle: all {} connections up", p.idle);
        c.wait_line(
            |l| l.starts_with(&want),
            Duration::from_secs_f64(30.0 + p.idle as f64 / 500.0),
            "`idle: all … up` line",
        )?;
    }

    let run_load =
        |name: &str, secs: f64, tag: &str| -> Result<(Value, String, f64, f64, String), LabError> {
            let json = pdir.join(format!("load-{tag}.json"));
            let samples = pdir.join(format!("samples-{tag}.txt"));
            let mut argv = vec![evlab.clone()];
            argv.extend(loadjson::load_argv(&LoadArgs {
                port,
                workload: &spec.workload,
                docroot: &docroot,
                rate: p.rate,
                duration_s: secs,
                calls_per_conn: spec.calls_per_conn,
                timeout_s: spec.timeout_s,
                json: &json,
                samples: &samples,
                extra: &spec.load_flags,
            }));
            let ru0 = children_cpu_seconds();
            let t = Instant::now();
            let mut c = Child::spawn(name, &argv, ctx.client_cpus, None)?;
            let limit = Duration::from_secs_f64(secs + spec.timeout_s + 30.0);
            let status = c.wait_exit(limit)?;
            let wall = t.elapsed().as_secs_f64();
            let command = c.command.clone();
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
            let text = std::fs::read_to_string(&json).map_err(|e| {
                LabError::Point(format!(
                    "evlab load wrote no JSON ({}): {e}",
                    json.display()
                ))
            })?;
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| LabError::Point(format!("evlab load's JSON does not parse: {e}")))?;
            let samples = std::fs::read_to_string(&samples).unwrap_or_default();
            Ok((v, samples, cpu, wall, command))
        };

    if spec.warmup_s > 0.0 {
        let (_, _, _, _, cmd) = run_load("evlab load (warm-up)", spec.warmup_s, "warmup")?;
        p.commands.push(format!("{cmd}   # warm-up"));
    }

    let stats_before = if p.kind == ServerKind::Evlab {
        Some(fetch_stats(addr)?)
    } else {
        None
    };
    let cpu_before = server.cpu_seconds();
    let (v, samples, client_cpu, wall, cmd) = run_load("evlab load", ctx.duration, "run")?;
    let cpu_after = server.cpu_seconds();
    p.commands.push(cmd);
    let server_alive = server.alive();
    let stats_after = match (&stats_before, server_alive) {
        (Some(_), true) => Some(fetch_stats(addr)?),
        _ => None,
    };
    // Keep the raw generator report beside the summary, for anyone who doubts the adapter.
    let raw_dir = ctx.out.join("load");
    let _ = std::fs::create_dir_all(&raw_dir);
    let _ = std::fs::write(
        raw_dir.join(format!("point-{:03}.json", p.index)),
        serde_json::to_string_pretty(&v).unwrap_or_default(),
    );

    let load = loadjson::parse_summary(&v);
    p.samples = loadjson::parse_samples(&samples);
    let replies = load.replies.or(load.status_2xx).filter(|&r| r > 0);
    let server_cpu = (cpu_after - cpu_before).max(0.0);
    p.server_cpu_s = Some(server_cpu);
    p.server_cpu_util = Some(server_cpu / wall.max(1e-9));
    p.server_cpu_us_per_reply = replies.map(|r| server_cpu * 1e6 / r as f64);
    let ncl = ctx.client_cpus.len().max(1) as f64;
    p.client_cpu_util = Some(client_cpu / (wall.max(1e-9) * ncl));
    if let (Some(a), Some(b)) = (&stats_before, &stats_after) {
        p.server = Some(counters_delta(a, b));
    }

    // Validity (httperf's manual): a saturated client or a client out of resources measures
    // the client, not the server.
    let conns = load
        .connections
        .unwrap_or((p.rate * ctx.duration) as u64)
        .max(1);
    if let Some(late) = load.late_starts {
        if late as f64 > spec.late_start_limit * conns as f64 {
            p.flags.push(format!(
                "client saturated: {late} late starts ({:.1}% of {conns} connections)",
                late as f64 * 100.0 / conns as f64
            ));
        }
    }
    let cu = p.client_cpu_util.unwrap_or(0.0);
    if cu >= spec.client_cpu_limit {
        p.flags
            .push(format!("client saturated: client CPU {:.0}%", cu * 100.0));
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
    if !server_alive {
        p.flags.push(format!(
            "server exited during the run: {}",
            server.stderr_tail(3)
        ));
    }
    p.load = Some(load);
    Ok(())
}

fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn fetch_stats(addr: SocketAddr) -> Result<Value, LabError> {
    let (code, body) = procs::http_get(addr, "/.evlab/stats", Duration::from_secs(5))
        .map_err(|e| LabError::Point(format!("GET /.evlab/stats: {e}")))?;
    if code != 200 {
        return Err(LabError::Point(format!(
            "GET /.evlab/stats answered {code} (was the server started with --stats?)"
        )));
    }
    serde_json::from_str(&body)
        .map_err(|e| LabError::Point(format!("/.evlab/stats is not JSON: {e}")))
}

fn num(v: &Value, path: &str) -> u64 {
    path.split('.')
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// The server's counters over the measured run: after − before (the stats requests themselves
/// are one request each, negligible against thousands).
pub fn counters_delta(a: &Value, b: &Value) -> ServerCounters {
    let d = |k: &str| num(b, k).saturating_sub(num(a, k));
    let mut syscalls = BTreeMap::new();
    if let Some(m) = b.get("syscalls").and_then(Value::as_object) {
        for (name, row) in m {
            let before = a.get("syscalls").and_then(|s| s.get(name));
            let f = |k: &str| {
                row.get(k).and_then(Value::as_u64).map(|x| {
                    x.saturating_sub(
                        before
                            .and_then(|r| r.get(k))
                            .and_then(Value::as_u64)
                            .unwrap_or(0),
                    )
                })
            };
            let r = SyscallRow {
                calls: f("calls").unwrap_or(0),
                errors: f("errors").unwrap_or(0),
                ns: f("ns"),
            };
            if r.calls > 0 {
                syscalls.insert(name.clone(), r);
            }
        }
    }
    ServerCounters {
        requests: d("requests"),
        accepted: d("connections.accepted"),
        waits: d("events.waits"),
        events: d("events.events"),
        discarded: d("events.discarded"),
        interest_changes: d("events.interest_changes"),
        max_active: num(b, "connections.max_active"),
        syscalls,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counter_deltas() {
        let a = json!({"requests": 10, "events": {"waits": 5, "events": 9},
            "syscalls": {"read": {"calls": 10, "errors": 0, "ns": 100}, "open": {"calls": 3, "errors": 0}}});
        let b = json!({"requests": 110, "events": {"waits": 55, "events": 109},
            "connections": {"max_active": 7},
            "syscalls": {"read": {"calls": 110, "errors": 1, "ns": 1100}, "open": {"calls": 3, "errors": 0},
                         "close": {"calls": 100, "errors": 0, "ns": 50}}});
        let c = counters_delta(&a, &b);
        assert_eq!(c.requests, 100);
        assert_eq!(c.waits, 50);
        assert_eq!(c.max_active, 7);
        assert_eq!(c.syscalls["read"].calls, 100);
        assert_eq!(c.syscalls["read"].ns, Some(1000));
        assert_eq!(c.syscalls["close"].ns, Some(50));
        assert!(!c.syscalls.contains_key("open"));
        assert_eq!(c.syscalls_total(), 200);
    }
}
