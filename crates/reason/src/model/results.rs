//! What a run measured, and the files that hold it: `summary.json` (everything, the source of
//! `evlab report`), `points.csv` (one row per point) and `samples.csv` (one row per sample).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::model::load::{LoadSummary, Sample};
use crate::model::machine::Machine;
use crate::model::spec::{Series, ServerKind, Spec};
use crate::LabError;

pub const FORMAT: u32 = 2;

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Failed,
    Interrupted,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SyscallRow {
    pub calls: u64,
    pub errors: u64,
    /// Time inside the call (only with `--profile`).
    pub ns: Option<u64>,
}

/// The server's own counters over the measured run (evlab only; from `/.evlab/stats` deltas).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerCounters {
    pub requests: u64,
    pub accepted: u64,
    pub waits: u64,
    /// Of the waits, those that handed the server at least one event it acts on, where the
    /// server counts them (readiness mechanisms; runs from 2026-12-06 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_with_events: Option<u64>,
    pub events: u64,
    pub discarded: u64,
    pub interest_changes: u64,
    pub max_active: u64,
    pub syscalls: BTreeMap<String, SyscallRow>,
    /// Connections each worker accepted over the run (`per_worker[].accepted` deltas): how the
    /// accept mode spread them.
    #[serde(default)]
    pub per_worker_accepted: Vec<u64>,
    /// Each worker's accept wake-ups over the run (listener readiness it acted on by
    /// accepting), and of those the ones that found nothing (`per_worker[].accept_wakeups`,
    /// `accept_empty` deltas): the accept herd, worker by worker (process by process with
    /// `--as processes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_worker_accept_wakeups: Vec<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_worker_accept_empty: Vec<u64>,
}

impl ServerCounters {
    pub fn syscalls_total(&self) -> u64 {
        self.syscalls.values().map(|r| r.calls).sum()
    }
    pub fn events_per_wait(&self) -> Option<f64> {
        (self.waits > 0).then(|| self.events as f64 / self.waits as f64)
    }
    /// Descriptors each wait returned on average: the events handed to the server and those
    /// dropped as of no interest (epoll2's), over the waits.
    pub fn returned_per_wait(&self) -> Option<f64> {
        (self.waits > 0).then(|| (self.events + self.discarded) as f64 / self.waits as f64)
    }
    /// The share of the waits that handed the server at least one event it acts on, where
    /// counted.
    pub fn useful_wait_share(&self) -> Option<f64> {
        let useful = self.waits_with_events?;
        (self.waits > 0).then(|| useful as f64 / self.waits as f64)
    }
    /// Accept wake-ups of every worker per connection accepted (1: one per connection; more:
    /// workers woken for connections others took), where counted.
    pub fn accept_wakeups_per_conn(&self) -> Option<f64> {
        let w: u64 = self.per_worker_accept_wakeups.iter().sum();
        (w > 0 && self.accepted > 0).then(|| w as f64 / self.accepted as f64)
    }
    /// Accept wake-ups that found no connection, per connection accepted, where counted.
    pub fn empty_wakeups_per_conn(&self) -> Option<f64> {
        let e: u64 = self.per_worker_accept_empty.iter().sum();
        (!self.per_worker_accept_wakeups.is_empty() && self.accepted > 0)
            .then(|| e as f64 / self.accepted as f64)
    }
    /// The busiest worker's accepts over the mean (1: even; N: one worker of N took them all),
    /// with more than one worker and at least one accept.
    pub fn accept_imbalance(&self) -> Option<f64> {
        let w = &self.per_worker_accepted;
        let total: u64 = w.iter().sum();
        (w.len() > 1 && total > 0)
            .then(|| *w.iter().max().unwrap_or(&0) as f64 * w.len() as f64 / total as f64)
    }
}

/// The value of the experiment's `[sweep]` flag a point ran with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Swept {
    /// The axis' name (`workers`).
    pub name: String,
    pub value: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PointResult {
    pub index: usize,
    pub series: String,
    pub kind: ServerKind,
    pub mechanism: String,
    /// With `[sweep]`: the swept flag's value (the series' line is drawn against it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swept: Option<Swept>,
    pub idle: usize,
    /// The rate asked of the load generator (`--rate`).
    pub rate: f64,
    pub trial: u32,
    pub duration_s: f64,
    pub status: Status,
    pub reason: Option<String>,
    pub wall_s: f64,
    pub load: Option<LoadSummary>,
    /// Server CPU (all its processes) over the measured run, seconds.
    pub server_cpu_s: Option<f64>,
    pub server_cpu_us_per_reply: Option<f64>,
    /// Share of the server's CPU used during the measured run (1.0 = its CPU was saturated).
    pub server_cpu_util: Option<f64>,
    /// Share of the client CPUs the load generator used.
    pub client_cpu_util: Option<f64>,
    pub server: Option<ServerCounters>,
    /// Share of the client CPUs busy during the measured run, from /proc/stat: user, system,
    /// irq and softirq. Loopback's packet processing runs in softirq on the sending CPU and is
    /// not in the generator's own CPU time, so this is the figure that says "saturated". With
    /// `[proxy]` and the origin on a client CPU, the origin's own CPU time is taken out.
    #[serde(default)]
    pub client_cpu_busy: Option<f64>,
    /// The same for the server's CPU.
    #[serde(default)]
    pub server_cpu_busy: Option<f64>,
    /// The largest share of time the hypervisor took (steal) on the server's or client's CPUs.
    #[serde(default)]
    pub steal: Option<f64>,
    /// The server's CPU budget (cgroup CPU quota, share of one CPU), when one was set.
    #[serde(default)]
    pub server_cpu_budget: Option<f64>,
    /// Context switches of the server's threads over the measured run, voluntary plus
    /// involuntary (every `/proc/PID/task/*/status` of its processes, after − before): each
    /// worker woken for a connection it does not get is one more.
    #[serde(default)]
    pub server_ctx_switches: Option<u64>,
    /// `evlab run --hosts`: each client host's share of the load, as its own report said
    /// (absent for a point run on this machine).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<crate::model::hosts::PointHost>,
    /// `evlab run --hosts`: the TCP segments each host (server and clients, by name)
    /// retransmitted over the measured run (`RetransSegs` of its /proc/net/snmp, after −
    /// before: all of the host's TCP, its ssh sessions too). With `[network]` loss, not zero.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub tcp_retransmits: std::collections::BTreeMap<String, u64>,
    /// Validity flags: any one makes the point invalid (httperf's manual: such runs do not
    /// measure the server). Verdicts use valid points only.
    pub flags: Vec<String>,
    /// Observations that do not invalidate the point (isolated lateness, steal).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The exact commands, in start order, to reproduce this point by hand.
    pub commands: Vec<String>,
    /// Each process the point started, in start order, as it was started: its argv (after a
    /// `taskset -c CPUS` when pinned), the server on `127.0.0.1:0` as asked (what
    /// `evlab run --plan` shows).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<Vec<String>>,
    #[serde(skip)]
    pub samples: Vec<Sample>,
}

impl PointResult {
    /// A point not yet measured.
    pub fn new(
        index: usize,
        series: &crate::model::spec::Series,
        idle: usize,
        rate: f64,
        trial: u32,
        duration_s: f64,
    ) -> PointResult {
        PointResult {
            index,
            series: series.label.clone(),
            kind: series.kind,
            mechanism: series.mechanism.clone(),
            swept: None,
            idle,
            rate,
            trial,
            duration_s,
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
            server_ctx_switches: None,
            hosts: vec![],
            tcp_retransmits: Default::default(),
            flags: vec![],
            notes: vec![],
            commands: vec![],
            argv: vec![],
            samples: vec![],
        }
    }

    /// The series' label, with the swept value when there is one: `shared workers=4`.
    pub fn label(&self) -> String {
        match &self.swept {
            Some(w) => format!(
                "{} {}={}",
                self.series,
                w.name,
                crate::model::spec::SweepSpec::arg(w.value)
            ),
            None => self.series.clone(),
        }
    }
    /// The swept value, when the experiment sweeps a flag.
    pub fn swept_value(&self) -> Option<f64> {
        self.swept.as_ref().map(|w| w.value)
    }
    /// Server context switches per connection it accepted (or, without its counters, per
    /// connection the client made).
    pub fn ctx_switches_per_conn(&self) -> Option<f64> {
        let n = self.server_ctx_switches?;
        let conns = self
            .server
            .as_ref()
            .map(|c| c.accepted)
            .filter(|&a| a > 0)
            .or_else(|| self.load.as_ref()?.connections)
            .filter(|&c| c > 0)?;
        Some(n as f64 / conns as f64)
    }
    pub fn accept_wakeups_per_conn(&self) -> Option<f64> {
        self.server.as_ref()?.accept_wakeups_per_conn()
    }
    pub fn empty_wakeups_per_conn(&self) -> Option<f64> {
        self.server.as_ref()?.empty_wakeups_per_conn()
    }
    pub fn accept_imbalance(&self) -> Option<f64> {
        self.server.as_ref()?.accept_imbalance()
    }
    /// The wall time of the measured run, seconds: the server's CPU time over it divided by
    /// the share of the run that CPU time was (both recorded; `run::point`).
    pub fn run_wall_s(&self) -> Option<f64> {
        let cpu = self.server_cpu_s.filter(|x| *x > 0.0)?;
        let util = self.server_cpu_util.filter(|x| *x > 0.0)?;
        Some(cpu / util).filter(|w| w.is_finite())
    }
    /// The share of the measured run's wall time the server spent inside `call` (profiled
    /// runs only, `evlab serve --profile`). Each call is timed with a monotonic clock around
    /// it, so the time is wall time: what the server waited inside the call (blocked, or
    /// throttled by its CPU budget, or preempted) counts. It is a share of the run's wall time,
    /// not of the server's CPU time: on a quarter of a CPU the server runs a quarter of the
    /// wall time, and a call's wall time over the CPU time would come out up to 4× too large
    /// (Table 1's shares added up to 378-408% when they were read so).
    pub fn syscall_share(&self, call: &str) -> Option<f64> {
        let ns = self.server.as_ref()?.syscalls.get(call)?.ns?;
        Some(ns as f64 / (self.run_wall_s()? * 1e9))
    }
    pub fn ok(&self) -> bool {
        self.status == Status::Ok
    }
    pub fn reply_rate(&self) -> Option<f64> {
        self.load.as_ref()?.reply_rate_avg
    }
    pub fn p99_ms(&self) -> Option<f64> {
        self.load.as_ref()?.latency_ms.p99
    }
    pub fn errors(&self) -> Option<u64> {
        self.load.as_ref().map(|l| l.errors.sum())
    }
    /// Errors as a share of the connections the client started (an error ends its
    /// connection, so this is the share of connections that failed), 0..1.
    pub fn error_share(&self) -> Option<f64> {
        let l = self.load.as_ref()?;
        let conns = l.connections.filter(|&c| c > 0)?;
        Some(l.errors.sum() as f64 / conns as f64)
    }
    pub fn valid(&self) -> bool {
        self.ok() && self.flags.is_empty()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SkippedSeries {
    pub series: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub format: u32,
    pub experiment: Spec,
    pub spec_path: String,
    pub spec_text: String,
    /// The `evlab run` command line that made these results.
    pub command: String,
    /// `--duration` given on the command line (overrides `duration_s`).
    pub duration_override: Option<f64>,
    pub started: String,
    pub finished: Option<String>,
    pub wall_s: f64,
    pub interrupted: bool,
    pub machine: Machine,
    pub series: Vec<Series>,
    pub skipped: Vec<SkippedSeries>,
    /// What `evlab run` measured of this machine before the sweep (when the experiment asks
    /// for it): the client's ceiling, the server's CPU budget, each series' capacity.
    #[serde(default)]
    pub calibration: Option<crate::model::calibration::Calibration>,
    /// What the machine was doing in the second before the run (absent in summaries written
    /// before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet: Option<crate::model::machine::Quiet>,
    pub points: Vec<PointResult>,
    /// Each capacity search (`[knee]`), in the order run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knees: Vec<crate::model::knee::Knee>,
    /// Each `evlab run --resume` that went on with this run, in order (absent when none did).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumed: Vec<Resumption>,
    /// `evlab run --hosts FILE`: each host as checked before the first point (its kernel,
    /// evlab, clock offset); absent for a run on this machine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<crate::model::hosts::HostCheck>,
    /// `[network]` across hosts: each condition as applied on its host (and removed after).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<crate::model::hosts::NetworkApplied>,
    /// With `[sequential]`: the rule that chose the trials, the trials committed to and each
    /// look (absent in a run of a fixed number of trials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequential: Option<crate::model::sequential::Record>,
}

/// One `evlab run --resume DIR`: what it kept of the run so far and what it measured again.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Resumption {
    /// When it started (UTC).
    pub at: String,
    pub command: String,
    /// The build that measured the new points (`Machine::evlab_version`'s form).
    pub evlab_version: String,
    /// Valid points and closed capacity searches kept from before.
    pub kept_points: usize,
    pub kept_knees: usize,
    /// Points (missing, failed or flagged before) and searches measured by this resumption.
    pub measured_points: usize,
    pub measured_knees: usize,
}

impl Summary {
    pub fn duration_s(&self) -> f64 {
        self.duration_override.unwrap_or(self.experiment.duration_s)
    }

    /// The trials the run made (or, interrupted, set out to make): the experiment's `trials`,
    /// or those its sequential rule committed to.
    pub fn trials(&self) -> u32 {
        self.sequential
            .as_ref()
            .map_or(self.experiment.trials, |q| q.trials)
    }

    /// The distinct offered rates of the points `keep` takes, lowest first.
    pub fn offered_rates(&self, keep: impl Fn(&PointResult) -> bool) -> Vec<f64> {
        let mut rates: Vec<f64> = self
            .points
            .iter()
            .filter(|p| keep(p))
            .map(|p| p.rate)
            .collect();
        rates.sort_by(f64::total_cmp);
        rates.dedup();
        rates
    }

    pub fn idle_counts(&self) -> Vec<usize> {
        let mut v = self.experiment.idle.clone();
        v.dedup();
        v
    }

    pub fn write_json(&self, dir: &Path) -> Result<(), LabError> {
        let s = serde_json::to_string_pretty(self).map_err(|e| LabError::Io(e.to_string()))?;
        write_atomic(&dir.join("summary.json"), &s)
    }

    pub fn read_json(dir: &Path) -> Result<Summary, LabError> {
        let p = dir.join("summary.json");
        let s = std::fs::read_to_string(&p)
            .map_err(|e| LabError::Io(format!("cannot read {}: {e}", p.display())))?;
        let s: Summary = serde_json::from_str(&s)
            .map_err(|e| LabError::Io(format!("{}: not an evlab summary: {e}", p.display())))?;
        s.migrate()
            .map_err(|e| LabError::Io(format!("{}: {e}", p.display())))
    }

    /// Brings a summary written by an older evlab to today's format, or says why it cannot.
    /// Format 1 (before 2026-11-25) had no `findings` key: the family its shape implies is
    /// written in, so the summary is judged as it was then, by name.
    pub fn migrate(mut self) -> Result<Summary, String> {
        match self.format {
            1 => {
                self.experiment.findings = Some(self.experiment.family());
                self.format = FORMAT;
                Ok(self)
            }
            FORMAT => Ok(self),
            f => Err(format!(
                "summary format {f}; this evlab reads formats 1 to {FORMAT} (a newer evlab \
                 wrote it)"
            )),
        }
    }
}

/// Writes by rename, so a reader (or a Ctrl-C) never sees half a file.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), LabError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| LabError::Io(format!("cannot write {}: {e}", path.display())))
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn optf(v: Option<f64>, digits: usize) -> String {
    v.map(|v| format!("{v:.digits$}")).unwrap_or_default()
}

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub const POINTS_HEADER: &str = "point,series,kind,mechanism,idle,rate,trial,duration_s,status,\
offered_rate,reply_rate_avg,reply_rate_min,reply_rate_max,reply_rate_stddev,replies,connections,\
errors,client_timo,connrefused,connreset,fd_unavail,addrunavail,ftab_full,other_errors,\
p50_ms,p90_ms,p99_ms,p999_ms,max_ms,late_starts,client_cpu_util,server_cpu_util,server_cpu_s,\
server_cpu_us_per_reply,server_syscalls_per_request,server_events_per_wait,flags,reason,\
sweep,sweep_value,server_ctx_switches,accepted_per_worker,accept_wakeups_per_worker,\
accept_empty_per_worker";

/// A per-worker count of the point's server counters, space-separated (one cell).
fn per_worker(p: &PointResult, f: fn(&ServerCounters) -> &Vec<u64>) -> String {
    p.server
        .as_ref()
        .map(|c| {
            f(c).iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

pub fn points_csv(points: &[PointResult]) -> String {
    let mut s = String::from(POINTS_HEADER);
    s.push('\n');
    for p in points {
        let l = p.load.clone().unwrap_or_default();
        let e = &l.errors;
        let spr = p
            .server
            .as_ref()
            .and_then(|c| (c.requests > 0).then(|| c.syscalls_total() as f64 / c.requests as f64));
        let cells = [
            p.index.to_string(),
            csv_cell(&p.series),
            format!("{:?}", p.kind).to_lowercase(),
            csv_cell(&p.mechanism),
            p.idle.to_string(),
            p.rate.to_string(),
            p.trial.to_string(),
            p.duration_s.to_string(),
            format!("{:?}", p.status).to_lowercase(),
            optf(l.offered_rate, 1),
            optf(l.reply_rate_avg, 1),
            optf(l.reply_rate_min, 1),
            optf(l.reply_rate_max, 1),
            optf(l.reply_rate_stddev, 1),
            opt(l.replies),
            opt(l.connections),
            if p.load.is_some() {
                e.sum().to_string()
            } else {
                String::new()
            },
            opt(e.client_timo),
            opt(e.connrefused),
            opt(e.connreset),
            opt(e.fd_unavail),
            opt(e.addrunavail),
            opt(e.ftab_full),
            opt(e.other),
            optf(l.latency_ms.p50, 3),
            optf(l.latency_ms.p90, 3),
            optf(l.latency_ms.p99, 3),
            optf(l.latency_ms.p999, 3),
            optf(l.latency_ms.max, 3),
            opt(l.late_starts),
            optf(p.client_cpu_util, 3),
            optf(p.server_cpu_util, 3),
            optf(p.server_cpu_s, 4),
            optf(p.server_cpu_us_per_reply, 2),
            optf(spr, 2),
            optf(p.server.as_ref().and_then(|c| c.events_per_wait()), 3),
            csv_cell(&p.flags.join("; ")),
            csv_cell(p.reason.as_deref().unwrap_or("")),
            csv_cell(p.swept.as_ref().map_or("", |w| w.name.as_str())),
            p.swept
                .as_ref()
                .map(|w| w.value.to_string())
                .unwrap_or_default(),
            opt(p.server_ctx_switches),
            per_worker(p, |c| &c.per_worker_accepted),
            per_worker(p, |c| &c.per_worker_accept_wakeups),
            per_worker(p, |c| &c.per_worker_accept_empty),
        ];
        s.push_str(&cells.join(","));
        s.push('\n');
    }
    s
}

pub const SAMPLES_HEADER: &str =
    "point,series,idle,rate,trial,t_s,reply_rate,conn_rate,errors,p99_ms";

pub fn samples_csv_rows(p: &PointResult) -> String {
    let mut s = String::new();
    for x in &p.samples {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{}",
            p.index,
            csv_cell(&p.series),
            p.idle,
            p.rate,
            p.trial,
            x.t_s,
            opt(x.reply_rate),
            opt(x.conn_rate),
            opt(x.errors),
            opt(x.p99_ms)
        );
    }
    s
}

/// ISO-8601 UTC time of `secs` since the epoch (no date crate for one function).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn format_1_summaries_migrate_and_newer_ones_are_refused() {
        use crate::model::spec::Family;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format1");
        let s = super::Summary::read_json(&dir).unwrap();
        assert_eq!(s.format, super::FORMAT);
        assert_eq!(s.experiment.findings, Some(Family::Paper));
        let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
        let mut v: super::Summary = serde_json::from_str(&text).unwrap();
        v.format = super::FORMAT + 1;
        let e = v.migrate().unwrap_err();
        assert!(e.contains("a newer evlab wrote it"), "{e}");
    }

    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn csv_quotes_cells() {
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_cell("x\"y,"), "\"x\"\"y,\"");
    }
}
