//! Steps of load across hosts (`evlab run --hosts` with calibration or `[knee]`): the server
//! on the server host, pinned and budgeted as a point's is, idle connections held from the first
//! client host; each step split over every client host, started at one agreed instant by the
//! start barrier points use (a shorter lead: [`STEP_LEAD_S`]), its reports merged exactly, and
//! judged on the merged result. [`On`] says where a search or a probe runs.

use std::time::Instant;

use crate::run::point::PointCtx;
use crate::run::remote::{self, ClientRun, ClientsAsk, HostsRun, RemoteProcs};
use crate::run::stepper::{Local, StepAsk, StepRun, Stepper};
use evlab_reason::model::results::PointResult;
use evlab_reason::model::spec::Series;
use evlab_reason::LabError;

/// How far ahead of now the clients of a step are told to start (a point's is 1 s): their ssh
/// sessions are launched side by side over connections already open (multiplexed), about 0.1 s
/// on a busy machine. A client that starts a tenth of a step late makes the step invalid, and
/// an invalid step is measured again once. (With 0.4 s, 8 of quick's 164 steps on four
/// namespace hosts started 75-336 ms late while two compilers shared the machine's 2 CPUs.)
pub(crate) const STEP_LEAD_S: f64 = 0.5;

/// Where the servers of a search or a probe run.
#[derive(Clone, Copy)]
pub(crate) enum On<'h> {
    /// On this machine, in the context's budget.
    Here,
    /// Across the hosts of a hosts file, in a CPU budget of the given share on the server host.
    Hosts(&'h HostsRun, Option<f64>),
}

impl<'h> On<'h> {
    /// Starts series `s`'s server with `idle` idle connections held; `dir` names its scratch
    /// (and, across hosts, its budget's group). On failure: the error and the commands that
    /// were run.
    pub(crate) fn start<'a>(
        self,
        ctx: &PointCtx<'a>,
        s: &Series,
        idle: usize,
        dir: &str,
    ) -> Result<Box<dyn Stepper + 'a>, (LabError, Vec<String>)>
    where
        'h: 'a,
    {
        match self {
            On::Here => Ok(Box::new(Local::start(ctx, s, idle, dir)?)),
            On::Hosts(hr, share) => Ok(Box::new(Across::start(ctx, hr, s, idle, share, dir)?)),
        }
    }

    /// With hosts: the same hosts, the server in a budget of `share` (None: its whole CPU).
    pub(crate) fn with_share(self, share: Option<f64>) -> On<'h> {
        match self {
            On::Here => On::Here,
            On::Hosts(hr, _) => On::Hosts(hr, share),
        }
    }
}

/// The server on the server host under steps from every client host.
pub(crate) struct Across<'a> {
    ctx: PointCtx<'a>,
    hr: &'a HostsRun,
    procs: RemoteProcs,
    port: u16,
    /// Collects the commands (and names the budget's group by its index).
    record: PointResult,
    steps: usize,
}

/// Numbers the groups of searches and probes on the server host apart from the points'.
static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl<'a> Across<'a> {
    fn start(
        ctx: &PointCtx<'a>,
        hr: &'a HostsRun,
        s: &Series,
        idle: usize,
        share: Option<f64>,
        dir: &str,
    ) -> Result<Across<'a>, (LabError, Vec<String>)> {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut record = PointResult::new(100_000 + n, s, idle, 0.0, 0, 0.0);
        record.commands.push(format!("# {dir}"));
        let mut procs = RemoteProcs::default();
        let r = (|| {
            let port = remote::start_server(ctx, hr, s, share, &mut record, &mut procs)?;
            let addr = std::net::SocketAddr::new(hr.server_ip, port);
            crate::run::procs::wait_answers(addr, "/one", std::time::Duration::from_secs(10))?;
            if idle > 0 && ctx.opts.spec.holds_idle(&s.label) {
                record.idle = idle;
                remote::start_idle(hr, &mut record, port, &mut procs)?;
                remote::settle(hr, &procs);
            }
            Ok(port)
        })();
        match r {
            Ok(port) => Ok(Across {
                ctx: *ctx,
                hr,
                procs,
                port,
                record,
                steps: 0,
            }),
            Err(e) => {
                procs.stop(hr);
                Err((e, record.commands))
            }
        }
    }
}

impl Stepper for Across<'_> {
    fn started(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let argv = [&self.procs.origin, &self.procs.server, &self.procs.idle]
            .into_iter()
            .flatten()
            .map(|r| vec![r.command.clone()])
            .collect();
        (self.record.commands.clone(), argv)
    }

    fn step(&mut self, a: &StepAsk) -> Result<StepRun, LabError> {
        self.steps += 1;
        let t = Instant::now();
        let ask = ClientsAsk {
            rate: a.rate,
            secs: a.secs,
            timeout_s: a.timeout_s,
            sample_interval_s: a.sample_interval_s,
            lead_s: STEP_LEAD_S,
            series: self.record.series.clone(),
            index: self.record.index,
            latencies: false,
        };
        let mut commands = vec![];
        let (at, runs) = remote::run_clients(
            &self.ctx,
            self.hr,
            self.port,
            &ask,
            &mut commands,
            &mut self.procs,
        )?;
        // Each client has ended (its report came back over its session): nothing to stop.
        let argv: Vec<String> = self
            .procs
            .clients
            .iter()
            .map(|r| r.command.clone())
            .collect();
        self.procs.clients.clear();
        let mut run = merged(self.hr, at, a.secs, &runs)?;
        run.wall_s = t.elapsed().as_secs_f64();
        run.command = commands.join("\n");
        run.argv = argv;
        Ok(run)
    }

    fn settle(&mut self) -> Result<(), LabError> {
        let server = self.procs.server.as_mut().expect("started");
        if !server.alive() {
            return Err(LabError::Point(format!(
                "server exited on host {}: {}",
                server.host.name,
                server.ssh.stderr_tail(3)
            )));
        }
        remote::settle(self.hr, &self.procs);
        Ok(())
    }

    fn stop(&mut self) -> Option<String> {
        self.procs.stop(self.hr)
    }
}

/// One step from its clients' reports: counts summed, samples summed interval by interval,
/// the 99th percentile from the histograms added (`evlab_wire::merge`), the busiest client's
/// CPU; a client that started more than a tenth of the step late makes it invalid.
fn merged(hr: &HostsRun, at: f64, secs: f64, runs: &[ClientRun]) -> Result<StepRun, LabError> {
    let mut out = StepRun::default();
    let mut named = Vec::with_capacity(runs.len());
    for c in runs {
        let r = &c.report;
        if r.interrupted {
            return Err(LabError::Point(format!(
                "evlab load on host {} was stopped before it was done",
                c.host.name
            )));
        }
        let (off, _) = hr.offset(&c.host);
        let late_ms = r
            .clock
            .as_ref()
            .map_or(0.0, |k| (k.started_at - off / 1e3 - at) * 1e3);
        if late_ms > 100.0 * secs && out.invalid.is_none() {
            out.invalid = Some(format!(
                "client on host {} started {late_ms:.0} ms late",
                c.host.name
            ));
        }
        out.connections += r.connections.initiated;
        out.replies += r.replies.status.s2xx;
        for (i, x) in r.samples.iter().enumerate() {
            match out.samples.get_mut(i) {
                Some(s) => s.2 += x.replies,
                None => out.samples.push((x.start_s, x.end_s, x.replies)),
            }
        }
        out.achieved_start_rate = match (out.achieved_start_rate, r.schedule.achieved_start_rate) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        let busy = r.cpu.percent / 100.0;
        out.client_busy = Some(out.client_busy.map_or(busy, |b: f64| b.max(busy)));
        named.push((c.host.name.clone(), r.clone()));
    }
    let m = evlab_wire::merge::merge(&named)
        .map_err(|e| LabError::Point(format!("the clients' reports cannot be merged: {e}")))?;
    out.p99_ms = m.latency_ms.p99;
    Ok(out)
}
