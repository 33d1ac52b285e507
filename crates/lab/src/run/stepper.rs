//! One server of a series and short steps of load against it: what calibration's probes and
//! the capacity search (`[knee]`) are made of, on this machine ([`Local`]) or across hosts
//! (`remote_steps::Across`). Each step is a whole `evlab load` run (split over the client hosts
//! across hosts, its reports merged), read as a [`StepRun`].

use std::path::PathBuf;

use crate::run::point::{self, LoadAsk, PointCtx, Procs};
use evlab_reason::model::spec::Series;
use evlab_reason::LabError;

/// One step: its rate, length, timeout, sampling interval and a tag naming its files.
pub(crate) struct StepAsk<'a> {
    /// What the progress and the process are called (`evlab load (knee)`).
    pub what: &'a str,
    pub rate: f64,
    pub secs: f64,
    pub timeout_s: f64,
    pub sample_interval_s: f64,
    pub tag: &'a str,
}

/// What one step measured: totals over every client, and how the client(s) fared.
#[derive(Clone, Debug, Default)]
pub(crate) struct StepRun {
    pub connections: u64,
    /// 2xx replies.
    pub replies: u64,
    /// Each sample's (start s, end s, replies), summed over the clients sample by sample.
    pub samples: Vec<(f64, f64, u64)>,
    pub p99_ms: f64,
    /// Connections started per second (summed over the clients).
    pub achieved_start_rate: Option<f64>,
    /// The busiest client's CPU share.
    pub client_busy: Option<f64>,
    /// From the first start to the last report.
    pub wall_s: f64,
    /// Each client's command, as a shell runs it, one per line.
    pub command: String,
    /// The load's argv (across hosts: the first client host's).
    pub argv: Vec<String>,
    /// Why the step says nothing of the server, beyond the client's own rules (a client host
    /// that started late).
    pub invalid: Option<String>,
    /// Other processes busy meanwhile (`machine::others_note`; on this machine only).
    pub busy: Option<String>,
}

/// A server under steps of load.
pub(crate) trait Stepper {
    /// The server's (and idle holder's) commands as a shell runs them, and their argv.
    fn started(&self) -> (Vec<String>, Vec<Vec<String>>);
    /// One step of load, ended and read.
    fn step(&mut self, a: &StepAsk) -> Result<StepRun, LabError>;
    /// Fails when the server has exited; else waits until what the last step left queued is
    /// done (the server used no CPU for a while).
    fn settle(&mut self) -> Result<(), LabError>;
    /// Stops everything it started, checked gone: what was not, for a flag.
    fn stop(&mut self) -> Option<String>;
}

/// The server on this machine, pinned, in the context's budget, with `idle` connections held.
pub(crate) struct Local<'a> {
    ctx: PointCtx<'a>,
    pdir: PathBuf,
    docroot: PathBuf,
    port: u16,
    procs: Procs,
    commands: Vec<String>,
}

impl<'a> Local<'a> {
    /// Starts series `s`'s server in the scratch directory `dir`.
    pub(crate) fn start(
        ctx: &PointCtx<'a>,
        s: &Series,
        idle: usize,
        dir: &str,
    ) -> Result<Local<'a>, (LabError, Vec<String>)> {
        let pdir = ctx.scratch.join(dir);
        let mut procs = Procs::default();
        let mut commands = vec![];
        let r = point::docroot(ctx, &pdir).and_then(|docroot| {
            let port =
                point::start_server(ctx, s, idle, &docroot, &pdir, &mut procs, &mut commands)?;
            Ok((docroot, port))
        });
        match r {
            Ok((docroot, port)) => Ok(Local {
                ctx: *ctx,
                pdir,
                docroot,
                port,
                procs,
                commands,
            }),
            Err(e) => {
                procs.stop();
                Err((e, commands))
            }
        }
    }
}

impl Stepper for Local<'_> {
    fn started(&self) -> (Vec<String>, Vec<Vec<String>>) {
        (self.commands.clone(), self.procs.started())
    }

    fn step(&mut self, a: &StepAsk) -> Result<StepRun, LabError> {
        let run = point::run_load(
            &self.ctx,
            a.what,
            &LoadAsk {
                port: self.port,
                docroot: &self.docroot,
                pdir: &self.pdir,
                rate: a.rate,
                secs: a.secs,
                timeout_s: a.timeout_s,
                sample_interval_s: a.sample_interval_s,
                tag: a.tag,
            },
        )?;
        let l = &run.report;
        Ok(StepRun {
            connections: l.connections.initiated,
            replies: l.replies.status.s2xx,
            samples: l
                .samples
                .iter()
                .map(|x| (x.start_s, x.end_s, x.replies))
                .collect(),
            p99_ms: l.latency_ms.p99,
            achieved_start_rate: l.schedule.achieved_start_rate,
            client_busy: run.client_busy,
            wall_s: run.wall_s,
            command: run.command,
            argv: run.argv,
            invalid: None,
            busy: crate::run::machine::others_note(&run.others),
        })
    }

    fn settle(&mut self) -> Result<(), LabError> {
        if let Some(server) = self.procs.server.as_mut() {
            if !server.alive() {
                return Err(LabError::Point(format!(
                    "server exited: {}",
                    server.stderr_tail(3)
                )));
            }
            point::settle(server);
        }
        Ok(())
    }

    fn stop(&mut self) -> Option<String> {
        self.procs.stop()
    }
}
