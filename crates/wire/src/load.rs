//! `evlab load --json`: one [`LoadReport`], serialized as is. `evlab load` builds it
//! (`evlab_load::summary::report`) and `evlab run` reads it back. All times are in milliseconds
//! unless named `_s`:
//! `{ "tool", "version", "config": {server, port, rate, poisson, num_conns, duration_s, timeout_s,
//!    threads, pipeline, source_addrs, workload},
//!    "duration_s", "connections": {initiated, completed, max_concurrent, rate, conn_time_ms:
//!    {min, avg, max, median, stddev}, connect_ms: {same}, replies_per_conn},
//!    "requests": {sent, rate}, "replies": {total, rate: {min, avg, max, stddev, samples},
//!    response_ms: {avg}, transfer_ms: {avg}, size: {header, content, footer, total},
//!    status: {"1xx".."5xx", "other" (only when not 0)}}, "latency_ms": {p50, p90, p99, p999,
//!    max, mean}, "late_starts": {count, max_ms}, "schedule": {offered_rate,
//!    achieved_start_rate, lateness_ms: {p50, p90, p99, p999, max}, end_lag_ms,
//!    lag_ms: [per interval]},
//!    "cpu": {user_s, system_s, percent}, "net": {kb_per_s, bytes_in, bytes_out},
//!    "errors": {total, client_timo, socket_timo, connrefused, connreset, fd_unavail,
//!    addrunavail, ftab_full, other, parse},
//!    "samples": [{start_s, end_s, replies, reply_rate} per interval],
//!    "syscalls": {NAME: {calls, errors, per_conn, us_per_conn (with --profile)}},
//!    "interrupted" (stopped by SIGINT or SIGTERM: the figures cover what was done until then),
//!    "clock": {start_at (with --start-at), started_at, late_ms (with --start-at), ended_at},
//!    "latency_histogram": {format, unit, significant_figures, lowest_discernible_value,
//!    highest_trackable_value, count, data} }`
//!
//! `clock` and `latency_histogram` are absent from reports written before they existed;
//! [`crate::merge`] needs both.
//!
//! A syscall's `errors` include the expected ones: every non-blocking `connect` "fails" with
//! EINPROGRESS, every drained socket's last `read` with EAGAIN.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub use crate::histogram::EncodedHistogram;
pub use crate::StatusClasses;

/// The whole `--json` document: what `evlab_load::summary::report` builds and `evlab run`
/// reads back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// "evlab load".
    pub tool: String,
    /// The build: `evlab --version` without the name (version, git commit, clean or dirty,
    /// rustc) when written by the evlab binary.
    pub version: String,
    pub config: RunConfig,
    /// Seconds from the first scheduled start to the end of the run.
    pub duration_s: f64,
    pub connections: Connections,
    pub requests: Requests,
    pub replies: Replies,
    /// Each call's time from its scheduled start to the end of its reply (corrected for
    /// coordinated omission: a call sent late is measured from when it was due).
    pub latency_ms: Latency,
    /// Each call's time from when it was sent to the end of its reply: wrk's latency, which a
    /// stalled server's queue does not reach. (Absent in reports written before the field
    /// existed, and in merged reports.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_uncorrected_ms: Option<Latency>,
    pub late_starts: LateStarts,
    pub schedule: Schedule,
    pub cpu: Cpu,
    pub net: Net,
    pub errors: ErrorCounts,
    /// One per sample interval, the last one possibly partial.
    pub samples: Vec<Sample>,
    /// Per syscall the generator made, by name.
    pub syscalls: BTreeMap<String, SyscallUse>,
    /// The run was stopped by SIGINT or SIGTERM before it was done: the figures cover what was
    /// done until then. (Absent in reports written before the field existed: false.)
    #[serde(default)]
    pub interrupted: bool,
    /// When the run really started and ended, by the wall clock. (Absent in reports written
    /// before the field existed.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<Clock>,
    /// The latency histogram ([`LoadReport::latency_ms`]'s), exactly, in microseconds: what
    /// several clients' reports are merged by. (Absent in reports written before the field
    /// existed.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_histogram: Option<EncodedHistogram>,
}

/// The run on the wall clock (CLOCK_REALTIME), Unix seconds with a fractional part: what a lab
/// needs to find the window several clients have in common (the latest start to the earliest
/// end), once it knows each host's clock offset.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    /// `--start-at`: the instant the run was asked to start at, when it was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<f64>,
    /// The schedule's origin: the first connection's slot (with fixed gaps, the first
    /// connection's start), from which `duration_s` and the samples count. With `--start-at`,
    /// that instant, or the moment the generator was ready if that was later.
    pub started_at: f64,
    /// With `--start-at`: how far `started_at` was behind it, ms (0 when on time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_ms: Option<f64>,
    /// The end of the run (its last connection closed), read from the wall clock.
    pub ended_at: f64,
}

/// What the run was asked to do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub server: String,
    pub port: u16,
    /// Connections (sessions) per second.
    pub rate: f64,
    pub poisson: bool,
    /// `--num-conns`, when the run was sized by connections.
    pub num_conns: Option<u64>,
    /// `--duration`, when the run was sized by time.
    pub duration_s: Option<f64>,
    /// `--stop-after`: the whole run ended this long after its start, whatever was in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_after_s: Option<f64>,
    pub timeout_s: f64,
    pub threads: usize,
    pub pipeline: usize,
    /// Source addresses connections were spread over.
    pub source_addrs: usize,
    /// What each connection asks for (`/one x 1`, `specweb:DIR`, …), as the command line said;
    /// absent when the generator ran as a library.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// wrk's model (`-c`): `num_conns` connections kept busy with endless sessions for the
    /// window. (False, and absent, for httperf's.)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closed_loop: bool,
    /// wrk2's model (`-R`): the requests per second held over those connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_rate: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Connections {
    pub initiated: u64,
    pub completed: u64,
    pub max_concurrent: u64,
    /// Starts per second over the run.
    pub rate: f64,
    /// Open to close of completed connections.
    pub conn_time_ms: TimeSummary,
    pub connect_ms: TimeSummary,
    pub replies_per_conn: f64,
}

/// A distribution of times, milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeSummary {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    pub median: f64,
    pub stddev: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Requests {
    pub sent: u64,
    pub rate: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Replies {
    pub total: u64,
    pub rate: ReplyRate,
    pub response_ms: Mean,
    pub transfer_ms: Mean,
    /// Bytes per reply, by part.
    pub size: ReplySize,
    pub status: StatusClasses,
}

/// Replies per second over whole sample intervals (as httperf).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplyRate {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    pub stddev: f64,
    /// Whole sample intervals counted (0: the run was shorter than one; the figures are then
    /// the average over the run).
    pub samples: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mean {
    pub avg: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplySize {
    pub header: f64,
    pub content: f64,
    pub footer: f64,
    pub total: f64,
}

/// Percentiles, maximum and mean, milliseconds (0 when nothing was recorded).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

impl Latency {
    /// The figures of `h`, whose values are in a unit `units_per_ms` of which make a
    /// millisecond (zeros when it is empty): the one definition used by a client's report and
    /// by a merge of several.
    pub fn from_histogram(h: &Histogram<u64>, units_per_ms: f64) -> Latency {
        let at = |q: f64| {
            if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(q) as f64 / units_per_ms
            }
        };
        Latency {
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            p999: at(0.999),
            max: h.max() as f64 / units_per_ms,
            mean: h.mean() / units_per_ms,
        }
    }
}

/// Starts more than 1 ms behind their slot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LateStarts {
    pub count: u64,
    pub max_ms: f64,
}

/// How the generator kept its schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Connections per second asked for.
    pub offered_rate: f64,
    /// Starts per second between the first slot and the last actual start; `null` with fewer
    /// than two starts.
    pub achieved_start_rate: Option<f64>,
    /// How late each start was.
    pub lateness_ms: Lateness,
    /// How far behind its slot the last start was.
    pub end_lag_ms: f64,
    /// The largest lateness of the starts scheduled in each sample interval.
    pub lag_ms: Vec<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lateness {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// The generator's own CPU time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cpu {
    pub user_s: f64,
    pub system_s: f64,
    /// User plus system over the run's duration, percent of one CPU.
    pub percent: f64,
    /// The CPU quota of the generator's cgroup (or an ancestor's), in CPUs, where one binds
    /// it: a generator at a tenth of a CPU is saturated at 10%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_cpus: Option<f64>,
    /// How long that group was throttled during the run (its `cpu.stat`), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_s: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Net {
    pub kb_per_s: f64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// Errors by cause, and their total.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts {
    pub total: u64,
    #[serde(flatten)]
    pub by_cause: Errors,
}

/// Errors by cause, as httperf counts them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Errors {
    pub client_timo: u64,
    pub socket_timo: u64,
    pub connrefused: u64,
    pub connreset: u64,
    pub fd_unavail: u64,
    pub addrunavail: u64,
    pub ftab_full: u64,
    pub other: u64,
    /// Garbage or truncated responses (counted in `other` by httperf; kept apart here too).
    pub parse: u64,
}

impl Errors {
    /// Adds `o`'s counts, cause by cause.
    pub fn add(&mut self, o: &Errors) {
        self.client_timo += o.client_timo;
        self.socket_timo += o.socket_timo;
        self.connrefused += o.connrefused;
        self.connreset += o.connreset;
        self.fd_unavail += o.fd_unavail;
        self.addrunavail += o.addrunavail;
        self.ftab_full += o.ftab_full;
        self.other += o.other;
        self.parse += o.parse;
    }

    /// Every error, whatever its cause.
    pub fn total(&self) -> u64 {
        self.client_timo
            + self.socket_timo
            + self.connrefused
            + self.connreset
            + self.fd_unavail
            + self.addrunavail
            + self.ftab_full
            + self.other
            + self.parse
    }
}

/// One sample interval: replies completed between `start_s` and `end_s` (seconds from the
/// first scheduled start).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub start_s: f64,
    pub end_s: f64,
    pub replies: u64,
    /// Replies over the interval's length (`end_s - start_s`).
    pub reply_rate: f64,
    /// The interval the run ended in, cut off at the run's end (absent in reports written
    /// before it was marked, whose last interval read as whole). Written only when true, so a
    /// whole interval reads and writes back as it did before the mark existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

/// One syscall's use by the generator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyscallUse {
    /// Calls, including those that failed or would have blocked.
    pub calls: u64,
    pub errors: u64,
    /// Calls that would have blocked (EAGAIN, EINPROGRESS), not counted in `errors`.
    #[serde(default, skip_serializing_if = "crate::counts::is_zero")]
    pub would_block: u64,
    pub per_conn: f64,
    /// Microseconds per connection spent inside the call (with `--profile` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub us_per_conn: Option<f64>,
}
