//! A point across hosts (`evlab run --hosts FILE`): the server on the server host (pinned as
//! here), idle holders on the first client host, the load split evenly over every client host,
//! each started at one agreed instant (in its own clock: the instant plus its measured offset)
//! and returning its report on stdout; the reports merged exactly (`evlab_wire::merge`), each
//! client judged on its own; the server's CPU time and context switches read on its host, its
//! counters over the bridge; then every process the point started stopped and checked gone on
//! its host.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::run::argv;
use crate::run::counters;
use crate::run::hosts::Remote;
use crate::run::peers;
use crate::run::point::{self, PointCtx};
use crate::run::procs::{self, interrupted};
use crate::run::remote_budget::RemoteGroup;
pub use crate::run::remote_hosts::HostsRun;
use crate::run::remote_hosts::{now_s, with_copies};
use crate::run::remote_peers;
use crate::run::remote_proxy;
use evlab_reason::model::hosts::{Host, PointHost, Role};
use evlab_reason::model::load::{self, LoadArgs, LoadReport, LoadSummary};
use evlab_reason::model::results::PointResult;
use evlab_reason::model::spec::{Series, ServerKind};
use evlab_reason::model::text::shell_line;
use evlab_reason::LabError;

/// How far ahead of now the clients of a point are told to start: time for their ssh sessions,
/// launched side by side over connections already open, to start each client and for it to
/// get ready (on a 2-core machine running four namespace hosts and two compilers, 0.5 s left a
/// client 74 ms late once).
const LEAD_S: f64 = 1.0;

/// What one point started on its hosts, stopped in reverse order whatever happens.
#[derive(Default)]
pub(crate) struct RemoteProcs {
    /// With `[proxy]`: the origin, on the origin host (stopped last).
    pub origin: Option<Remote>,
    pub server: Option<Remote>,
    pub idle: Option<Remote>,
    pub clients: Vec<Remote>,
    /// The server's CPU budget's group on its host, removed once it is stopped.
    pub budget: Option<RemoteGroup>,
}

impl RemoteProcs {
    /// Stops the clients, the idle holder and the server, each checked gone on its host;
    /// what was not is returned, for a flag.
    pub(crate) fn stop(&mut self, hr: &HostsRun) -> Option<String> {
        let ssh = &hr.ssh;
        let grace = Duration::from_secs(5);
        let mut left = Vec::new();
        let all = self
            .clients
            .iter_mut()
            .chain(self.idle.as_mut())
            .chain(self.server.as_mut())
            .chain(self.origin.as_mut());
        for r in all {
            left.extend(ssh.stop(r, grace));
        }
        if let (Some(g), Some(cg)) = (self.budget.take(), &hr.cgroup) {
            if let Err(e) = cg.remove(ssh, hr.hosts.server(), &g) {
                left.push(e.to_string());
            }
        }
        (!left.is_empty()).then(|| left.join("; "))
    }

    /// The host of the first process whose ssh connection was lost (before `stop`).
    fn lost_host(&mut self) -> Option<String> {
        self.clients
            .iter_mut()
            .chain(self.idle.as_mut())
            .chain(self.server.as_mut())
            .chain(self.origin.as_mut())
            .find_map(|r| r.lost().then(|| r.host.name.clone()))
    }
}

/// One client's finished run.
pub(crate) struct ClientRun {
    pub host: Host,
    pub report: LoadReport,
    pub json: String,
}

/// One point: across `hosts` when given (else `point::run_point`, on this machine), measured,
/// then everything it started stopped and checked gone on its host (what was not is a flag).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_point(
    ctx: &PointCtx,
    hosts: Option<&HostsRun>,
    index: usize,
    s: &Series,
    swept: Option<f64>,
    idle: usize,
    rate: f64,
    trial: u32,
) -> PointResult {
    let Some(hr) = hosts else {
        return point::run_point(ctx, index, s, swept, idle, rate, trial);
    };
    let t0 = Instant::now();
    let mut retried = None;
    loop {
        let mut p = point::new_point(ctx, index, s, swept, idle, rate, trial);
        let mut procs = RemoteProcs::default();
        let mut r = measure_in(ctx, hr, &mut p, &mut procs);
        // A lost ssh connection leaves the point's outcome unknown: measured again once, from
        // the start, on a new connection; lost again, the point fails naming the host.
        let lost = if r.is_err() { procs.lost_host() } else { None };
        if let Some(left) = procs.stop(hr) {
            p.flags.push(left);
        }
        match (lost, &retried) {
            (Some(host), None) if !interrupted() => {
                let why = r.err().map(|e| e.to_string()).unwrap_or_default();
                retried = Some(format!(
                    "measured again: the ssh connection to host {host} was lost in the first \
                     attempt ({why})"
                ));
                continue;
            }
            (Some(host), Some(_)) => {
                let why = r.err().map(|e| e.to_string()).unwrap_or_default();
                r = Err(LabError::Point(format!(
                    "the ssh connection to host {host} was lost, and again when the point was \
                     measured again: {why}"
                )));
            }
            _ => {}
        }
        if let Some(n) = retried {
            p.notes.push(n);
        }
        point::finish_point(&mut p, r, t0);
        return p;
    }
}

fn measure_in(
    ctx: &PointCtx,
    hr: &HostsRun,
    p: &mut PointResult,
    procs: &mut RemoteProcs,
) -> Result<(), LabError> {
    let spec = &ctx.opts.spec;
    let series = point::point_series(spec, p);
    let share = hr.share_for(spec, &p.series);
    let port = start_server(ctx, hr, &series, share, p, procs)?;
    let addr = SocketAddr::new(hr.server_ip, port);
    procs::wait_answers(addr, "/one", Duration::from_secs(10))?;
    if p.idle > 0 && spec.holds_idle(&p.series) {
        start_idle(hr, p, port, procs)?;
        settle(hr, procs);
    }
    if spec.warmup_s > 0.0 {
        let ask = ClientsAsk::point(spec, p, spec.warmup_s);
        run_clients(ctx, hr, port, &ask, &mut p.commands, procs)?;
    }
    let server = hr.hosts.server();
    let pid = procs.server.as_ref().expect("started").pgid;
    // A proxy's stats are not a server's: only the μserver's are fetched, as on one machine.
    let stats_before = match (spec.proxy.as_ref(), p.kind) {
        (None, ServerKind::Evlab) => Some(counters::fetch_stats(addr)?),
        _ => None,
    };
    let ((cpu0, cs0), retrans0) = readings(hr, pid)?;
    let (t, t_wall) = (Instant::now(), now_s());
    let ask = ClientsAsk::point(spec, p, ctx.duration);
    let (at, runs) = run_clients(ctx, hr, port, &ask, &mut p.commands, procs)?;
    // The clients start at `at`, after a lead in which the server waits: its share of a CPU is
    // over the time from their start on.
    let lead = (at - t_wall).max(0.0);
    let alive = procs.server.as_mut().is_some_and(|s| s.alive());
    let after = if alive {
        Some(readings(hr, pid)?)
    } else {
        None
    };
    for (host, n) in after.iter().flat_map(|a| &a.1) {
        if let Some(before) = retrans0.get(host) {
            p.tcp_retransmits
                .insert(host.clone(), n.saturating_sub(*before));
        }
    }
    if !alive {
        let s = procs.server.as_ref().expect("started");
        p.flags.push(format!(
            "server exited during the run on host {}: {}",
            server.name,
            s.ssh.stderr_tail(3)
        ));
    } else if let Some(((cpu1, cs1), _)) = after {
        let wall = (t.elapsed().as_secs_f64() - lead).max(1e-9);
        let cpu = (cpu1 - cpu0).max(0.0);
        p.server_cpu_s = Some(cpu);
        p.server_cpu_util = Some(cpu / wall);
        p.server_ctx_switches = Some(cs1.saturating_sub(cs0));
        if let Some(before) = &stats_before {
            let after = counters::fetch_stats(addr)?;
            p.server = Some(counters::counters_delta(before, &after));
        }
    }
    p.commands.push(format!(
        "# each client host's run ends by itself; then on host {}: kill $server",
        server.name
    ));
    let raw_dir = ctx.out.join("load");
    let _ = std::fs::create_dir_all(&raw_dir);
    for c in &runs {
        let _ = std::fs::write(
            raw_dir.join(format!("point-{:03}-{}.json", p.index, c.host.name)),
            &c.json,
        );
        if ctx.opts.spec.keep_latencies {
            let csv = hr.fetch_latencies(&c.host, p.index)?;
            std::fs::write(
                raw_dir.join(format!(
                    "point-{:03}-{}.latencies.csv",
                    p.index, c.host.name
                )),
                csv,
            )?;
        }
    }
    record(ctx, hr, p, at, &runs)
}

/// The server's CPU time (s) and context switches, and each host's TCP retransmits so far.
type Readings = ((f64, u64), BTreeMap<String, u64>);

/// What a point reads on its hosts before and after its load, in one round of ssh commands
/// run side by side: the server's CPU time and context switches (on the server host), and
/// the TCP segments each host (server, clients, the origin in a proxy run) has retransmitted
/// so far, by its /proc/net/snmp (a host that cannot be read is left out).
fn readings(hr: &HostsRun, pid: u32) -> Result<Readings, LabError> {
    const SNMP: &str = "evlab-snmp";
    let hosts: Vec<&Host> = hr
        .hosts
        .hosts
        .iter()
        .filter(|h| h.role != Role::Origin || hr.origin.is_some())
        .collect();
    let server = hr.hosts.server();
    let usage = format!(
        "{}; echo {SNMP} && cat /proc/net/snmp",
        crate::run::hosts::usage_command(pid)
    );
    let commands: Vec<String> = hosts
        .iter()
        .map(|h| match h.name == server.name {
            true => usage.clone(),
            false => format!("echo {SNMP} && cat /proc/net/snmp"),
        })
        .collect();
    let what: Vec<(&Host, &str)> = hosts
        .iter()
        .zip(&commands)
        .map(|(h, c)| (*h, c.as_str()))
        .collect();
    let mut cpu = None;
    let mut retrans = BTreeMap::new();
    for (h, text) in hosts.iter().zip(hr.ssh.ok_all(&what)) {
        let text = match text {
            Ok(t) => t,
            Err(e) if h.name == server.name => return Err(e),
            Err(_) => continue,
        };
        let (before, snmp) = text.split_once(SNMP).unwrap_or((&text, ""));
        if h.name == server.name {
            cpu = crate::run::hosts::parse_proc_usage(before, hr.ticks);
        }
        if let Some(n) = retrans_segs(snmp) {
            retrans.insert(h.name.clone(), n);
        }
    }
    let cpu = cpu.ok_or_else(|| {
        LabError::Point(format!(
            "host {}: cannot read process {pid}'s CPU time from its /proc",
            server.name
        ))
    })?;
    Ok((cpu, retrans))
}

/// `RetransSegs` of a /proc/net/snmp text (its `Tcp:` header line, then its values).
fn retrans_segs(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (keys, values) = (tcp.next()?, tcp.next()?);
    let at = keys.split_whitespace().position(|k| k == "RetransSegs")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// `ssh DEST -- 'COMMAND'`, as a shell runs it by hand.
fn by_hand(r: &Remote, background: &str) -> String {
    format!(
        "ssh {} -- {}{background}   # on host {}",
        r.host.destination,
        shell_line(std::slice::from_ref(&r.command)),
        r.host.name
    )
}

/// `evlab serve` (or, with `[proxy]`, `evlab proxy` in front of the origin) on the server host,
/// on its address and a port it chooses (read back from its `listening on` line), with the
/// arguments a point on this machine has ([`argv`]), in a CPU budget of `share` there if
/// given; returns the port.
pub(crate) fn start_server(
    ctx: &PointCtx,
    hr: &HostsRun,
    s: &Series,
    share: Option<f64>,
    p: &mut PointResult,
    procs: &mut RemoteProcs,
) -> Result<u16, LabError> {
    let spec = &ctx.opts.spec;
    let host = hr.hosts.server();
    let mut argv = hr.taskset_argv(host, &[spec.server_cpu]);
    let listen = SocketAddr::new(hr.server_ip, 0).to_string();
    // With `[proxy]`: the origin first, on its host; the series' server is the proxy in front
    // of it.
    let origin = match &spec.proxy {
        Some(px) => {
            let (oh, ip) = hr.origin_host();
            let cpus: Vec<usize> = px.origin_cpu.into_iter().collect();
            let at = remote_proxy::OriginAt {
                host: oh,
                ip,
                evlab: hr.evlab_argv(oh, &cpus),
                docroot: hr.docroot(spec, &s.label),
            };
            Some(remote_proxy::start_origin(
                &hr.ssh,
                at,
                spec,
                p,
                &mut procs.origin,
            )?)
        }
        None => None,
    };
    // A peer listens on a port chosen here; evlab on one it chooses and prints.
    let mut peer_port = None;
    match (s.kind, origin) {
        (ServerKind::Evlab, Some(origin)) => {
            argv.push(hr.evlab_path(host));
            argv.extend(argv::proxy_args(spec, s, &listen, origin));
        }
        (ServerKind::Evlab, None) => {
            argv.push(hr.evlab_path(host));
            argv.extend(argv::serve_args(
                spec,
                s,
                &listen,
                &hr.docroot(spec, &s.label),
            ));
        }
        _ => {
            let hard = hr.peers.nofile;
            if let Some(why) =
                peers::cannot_hold(s.kind, origin.is_some(), p.idle, hard, "on the server host")
            {
                return Err(LabError::Point(why));
            }
            let port = remote_peers::free_port(&hr.ssh, host, p.index as u64)?;
            let dir = format!("{}/peer-{}", hr.dir(host), p.index);
            let conf = remote_peers::conf(
                s,
                &hr.peers,
                Path::new(&dir),
                Path::new(&hr.docroot(spec, &s.label)),
                SocketAddr::new(hr.server_ip, port),
                origin,
            )?;
            p.commands.push(remote_peers::write(&hr.ssh, host, &conf)?);
            argv.extend(conf.argv);
            peer_port = Some(port);
        }
    }
    if let (Some(share), Some(cg)) = (share, &hr.cgroup) {
        let g = procs
            .budget
            .insert(cg.make(&hr.ssh, host, share, &format!("p{}", p.index))?);
        p.server_cpu_budget = Some(g.share);
        p.commands.push(format!(
            "ssh {} -- {}   # on host {}: the server's CPU budget, {:.0}% of one CPU",
            host.destination,
            shell_line(std::slice::from_ref(&g.setup)),
            host.name,
            g.share * 100.0
        ));
    }
    let what = match s.kind {
        ServerKind::Evlab if origin.is_some() => "evlab proxy".to_string(),
        ServerKind::Evlab => "evlab serve".to_string(),
        _ => s.label.clone(),
    };
    let r = procs.server.insert(hr.ssh.spawn(host, &what, &argv)?);
    if let (Some(g), Some(cg)) = (&procs.budget, &hr.cgroup) {
        cg.join(&hr.ssh, host, g, r.pgid)?;
        p.commands.push(format!(
            "ssh {} -- 'echo $server > {}/cgroup.procs'   # on host {}",
            host.destination, g.dir, host.name
        ));
    }
    let port = match peer_port {
        Some(port) => port,
        None => remote_proxy::listening(r, "the server")?.port(),
    };
    p.commands.push(by_hand(r, " & server=$!"));
    Ok(port)
}

/// `evlab idle` on the first client host, holding the point's idle connections; waits until
/// it says they are all up.
pub(crate) fn start_idle(
    hr: &HostsRun,
    p: &mut PointResult,
    port: u16,
    procs: &mut RemoteProcs,
) -> Result<(), LabError> {
    let host = hr.hosts.clients().next().expect("prepare checked one");
    let mut argv = hr.evlab_argv(host, &[]);
    argv.extend([
        "idle".into(),
        "--server".into(),
        hr.server_ip.to_string(),
        "--port".into(),
        port.to_string(),
        p.idle.to_string(),
    ]);
    let r = procs.idle.insert(hr.ssh.spawn(host, "evlab idle", &argv)?);
    p.commands.push(by_hand(r, " & idle=$!"));
    let want = format!("idle: all {} connections up", p.idle);
    r.ssh.wait_line(
        |l| l.starts_with(&want),
        Duration::from_secs_f64(30.0 + p.idle as f64 / 500.0),
        "`idle: all … up` line",
    )?;
    Ok(())
}

/// Waits until the server has used under 1 ms of CPU in 100 ms (at most 3 s), read on its host.
pub(crate) fn settle(hr: &HostsRun, procs: &RemoteProcs) {
    let Some(pid) = procs.server.as_ref().map(|s| s.pgid) else {
        return;
    };
    let host = hr.hosts.server();
    let t0 = Instant::now();
    let mut last = hr.ssh.proc_usage(host, pid, hr.ticks).map_or(0.0, |x| x.0);
    while t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(100));
        let Ok((now, _)) = hr.ssh.proc_usage(host, pid, hr.ticks) else {
            return;
        };
        if now - last < 0.001 {
            return;
        }
        last = now;
    }
}

/// One run of the clients: the total rate, its length, and how it is read.
pub(crate) struct ClientsAsk {
    pub rate: f64,
    pub secs: f64,
    pub timeout_s: f64,
    pub sample_interval_s: f64,
    /// How far ahead of now the clients are told to start.
    pub lead_s: f64,
    /// The series (its file set) and a number naming the run's latency files.
    pub series: String,
    pub index: usize,
    /// Whether each client keeps its replies' latencies (`--latencies`).
    pub latencies: bool,
}

impl ClientsAsk {
    /// A point's run of `secs` seconds.
    fn point(spec: &evlab_reason::model::spec::Spec, p: &PointResult, secs: f64) -> Self {
        ClientsAsk {
            rate: p.rate,
            secs,
            timeout_s: spec.timeout_s,
            sample_interval_s: 1.0,
            lead_s: LEAD_S,
            series: p.series.clone(),
            index: p.index,
            latencies: spec.keep_latencies,
        }
    }
}

/// The load split over the client hosts: each gets the rate (and a fixed number of
/// connections) over their number, all told to start at one instant `at` (this machine's
/// clock; each host is given it in its own: plus its offset); waits for every one to end and
/// returns `at` and their reports, in the hosts file's order. Each client's command, as a
/// shell runs it, goes to `commands`.
pub(crate) fn run_clients(
    ctx: &PointCtx,
    hr: &HostsRun,
    port: u16,
    a: &ClientsAsk,
    commands: &mut Vec<String>,
    procs: &mut RemoteProcs,
) -> Result<(f64, Vec<ClientRun>), LabError> {
    let spec = &ctx.opts.spec;
    let secs = a.secs;
    let clients: Vec<&Host> = hr.hosts.clients().collect();
    let n = clients.len();
    let at = now_s() + a.lead_s;
    let first = procs.clients.len();
    let argvs: Vec<Vec<String>> = clients
        .iter()
        .map(|h| {
            let mut argv = hr.evlab_argv(h, &spec.client_cpus);
            let latencies = a.latencies.then(|| hr.latencies_path(h, a.index));
            let fileset = hr
                .fileset_for(h, spec, &a.series)
                .unwrap_or_else(|| "/".into());
            // A URI list is read from its copy on the host.
            let workload = match &spec.workload {
                evlab_reason::model::spec::Workload::UriList(f) => match hr.copy_of(h, f) {
                    Some(there) => evlab_reason::model::spec::Workload::UriList(there.into()),
                    None => spec.workload.clone(),
                },
                w => w.clone(),
            };
            // So is a session log.
            let extra = with_copies(&spec.load_flags, |f| hr.copy_of(h, Path::new(f)));
            let mut args = load::load_argv(&LoadArgs {
                port,
                workload: &workload,
                docroot: Path::new(&fileset),
                rate: a.rate / n as f64,
                duration_s: secs,
                calls_per_conn: spec.calls_per_conn,
                active_conns: spec.active_conns.map(|c| c.div_ceil(n as u64)),
                timeout_s: a.timeout_s,
                sample_interval_s: a.sample_interval_s,
                json: Path::new("-"),
                latencies: latencies.as_deref().map(Path::new),
                stop_after_s: spec.window().then_some(secs),
                extra: &extra,
            });
            if let Some(i) = args.iter().position(|a| a == "--server") {
                args[i + 1] = hr.server_ip.to_string();
            }
            let (offset_ms, _) = hr.offset(h);
            args.extend(["--start-at".into(), format!("{:.6}", at + offset_ms / 1e3)]);
            argv.extend(args);
            argv
        })
        .collect();
    // Launched side by side (each start waits for its process group's line), so the lead
    // need not grow with the number of client hosts.
    let what: Vec<(&Host, &str, &[String])> = clients
        .iter()
        .zip(&argvs)
        .map(|(h, argv)| (*h, "evlab load", &argv[..]))
        .collect();
    let started = hr.ssh.spawn_all(&what);
    let mut failed = None;
    for r in started {
        match r {
            Ok(r) => {
                commands.push(by_hand(&r, " &"));
                procs.clients.push(r);
            }
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let wait = if spec.active_conns.is_some() && !spec.window() {
        3.0 * secs
    } else {
        secs
    };
    let limit = Duration::from_secs_f64(a.lead_s + wait + a.timeout_s + 30.0);
    let mut runs = Vec::with_capacity(n);
    for (h, r) in clients.iter().zip(&mut procs.clients[first..]) {
        let status = r.ssh.wait_exit(limit)?;
        let Some(status) = status else {
            return Err(LabError::Point(if interrupted() {
                "interrupted".into()
            } else {
                format!(
                    "evlab load on host {} did not finish within {:.0} s",
                    h.name,
                    limit.as_secs_f64()
                )
            }));
        };
        if status.code() == Some(crate::run::hosts::SSH_FAILED) {
            return Err(LabError::Point(format!(
                "the ssh connection to host {} was lost during its evlab load (ssh exit \
                 status 255): {}; its report is lost, so none of the clients' reports is used",
                h.name,
                r.ssh.stderr_tail(2)
            )));
        }
        if !status.success() {
            return Err(LabError::Point(format!(
                "evlab load on host {} failed before its report ({status}): {}; none of the \
                 clients' reports is used",
                h.name,
                r.ssh.stderr_tail(4)
            )));
        }
        let json = r.ssh.rest_lines(Duration::from_secs(5)).join("\n") + "\n";
        r.ended();
        let report = load::parse_report(&json, &format!("host {}'s report", h.name))?;
        runs.push(ClientRun {
            host: (*h).clone(),
            report,
            json,
        });
    }
    Ok((at, runs))
}

/// The point from its clients' reports: merged exactly (each report's clock brought to this
/// machine's by its host's offset first), each client host judged on its own (late start,
/// fell behind, CPU saturated, out of resources) with a flag naming it.
fn record(
    ctx: &PointCtx,
    hr: &HostsRun,
    p: &mut PointResult,
    at: f64,
    runs: &[ClientRun],
) -> Result<(), LabError> {
    let spec = &ctx.opts.spec;
    let n = runs.len().max(1) as f64;
    let limit_ms = (0.01 * p.duration_s * 1e3).max(10.0);
    let mut named = Vec::with_capacity(runs.len());
    for c in runs {
        let (off, bound) = hr.offset(&c.host);
        let mut r = c.report.clone();
        if r.interrupted {
            return Err(LabError::Point(format!(
                "evlab load on host {} was stopped before it was done",
                c.host.name
            )));
        }
        let clock = r.clock.as_mut().ok_or_else(|| {
            LabError::Point(format!("host {}'s report has no clock", c.host.name))
        })?;
        clock.started_at -= off / 1e3;
        clock.ended_at -= off / 1e3;
        if let Some(s) = clock.start_at.as_mut() {
            *s -= off / 1e3;
        }
        let late_ms = (clock.started_at - at) * 1e3;
        if late_ms > limit_ms {
            p.flags.push(format!(
                "client on host {} started late: {late_ms:.1} ms after the agreed instant \
                 (its clock offset {off:+.2} ms ± {bound:.2} ms; the limit is {limit_ms:.0} ms)",
                c.host.name
            ));
        }
        judge_host(spec, p, c, n);
        let summary = LoadSummary::from(&c.report);
        p.hosts.push(PointHost {
            host: c.host.name.clone(),
            offered_rate: c.report.schedule.offered_rate,
            replies: c.report.replies.total,
            reply_rate: c.report.replies.total as f64 / c.report.duration_s.max(1e-9),
            p99_ms: summary.latency_ms.p99.unwrap_or(0.0),
            late_ms,
            clock_offset_ms: off,
            clock_bound_ms: bound,
        });
        named.push((c.host.name.clone(), r));
    }
    let m = evlab_wire::merge::merge(&named)
        .map_err(|e| LabError::Point(format!("the clients' reports cannot be merged: {e}")))?;
    let reports: Vec<LoadReport> = named.into_iter().map(|(_, r)| r).collect();
    p.load = Some(load::merged_summary(&m, &reports));
    p.samples = load::merged_samples(&reports);
    let replies = m.replies.total;
    if let Some(cpu) = p.server_cpu_s {
        p.server_cpu_us_per_reply = (replies > 0).then(|| cpu * 1e6 / replies as f64);
    }
    p.client_cpu_util = Some(reports.iter().map(|r| r.cpu.percent / 100.0).sum::<f64>() / n);
    Ok(())
}

/// One client host judged by the point's rule on its own report (its CPU: the generator's own,
/// as it reports it); its flags and notes name it.
fn judge_host(spec: &evlab_reason::model::spec::Spec, p: &mut PointResult, c: &ClientRun, n: f64) {
    let s = Series {
        label: p.series.clone(),
        kind: p.kind,
        mechanism: p.mechanism.clone(),
        flags: vec![],
    };
    let mut q = PointResult::new(p.index, &s, p.idle, p.rate / n, p.trial, p.duration_s);
    q.load = Some(LoadSummary::from(&c.report));
    q.client_cpu_util = Some(c.report.cpu.percent / 100.0);
    point::judge(spec, &mut q);
    if let Some(f) = point::quota_flag(spec, &c.report.cpu, c.report.duration_s) {
        q.flags.push(f);
    }
    let name = &c.host.name;
    for f in q.flags {
        p.flags.push(match f.strip_prefix("client ") {
            Some(rest) => format!("client on host {name} {rest}"),
            None => format!("{f} (client host {name})"),
        });
    }
    for x in q.notes {
        p.notes.push(format!("client host {name}: {x}"));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn retransmits_are_read_from_proc_net_snmp() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm RtoMin InSegs OutSegs RetransSegs InErrs\n\
                    Tcp: 1 200 5647072 8028345 6903 0\nUdp: InDatagrams\nUdp: 3\n";
        assert_eq!(super::retrans_segs(snmp), Some(6903));
        assert_eq!(super::retrans_segs("Tcp: RtoAlgorithm\n"), None);
    }
}
