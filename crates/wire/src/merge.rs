//! Several `evlab load` clients' reports merged into one ([`MergedLoad`]), exactly: counts add,
//! latency percentiles come from the clients' histograms added together (never from averaging
//! percentiles), and rates are given both over the common window (latest start to earliest
//! end, from the clients' wall clocks) and as each client's own rate summed.
//!
//! `evlab load-merge FILE…` prints one; the lab merges its clients' reports with the same
//! [`merge`].

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::histogram::{self, EncodedHistogram, HistogramError};
use crate::load::{Clock, ErrorCounts, Errors, LateStarts, Latency, LoadReport};
use crate::StatusClasses;

/// The merged report. Serialized as
/// `{ "tool", "version", "clients": [{name, started_at, ended_at, late_ms, duration_s,
///    offered_rate, replies, reply_rate, p99_ms, interrupted}], "window": {start, end,
///    duration_s}, "connections": {initiated, completed, max_concurrent}, "requests": {sent},
///    "replies": {total, status}, "errors": {total, by cause}, "net": {bytes_in, bytes_out},
///    "late_starts": {count, max_ms}, "latency_ms": {p50, p90, p99, p999, max, mean},
///    "rates": {…}, "latency_histogram": {…}, "interrupted" }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergedLoad {
    /// "evlab load-merge".
    pub tool: String,
    pub version: String,
    /// One per report merged, in the order given.
    pub clients: Vec<ClientPart>,
    /// The common window: the latest start to the earliest end.
    pub window: Window,
    pub connections: MergedConnections,
    pub requests: MergedRequests,
    pub replies: MergedReplies,
    pub errors: ErrorCounts,
    pub net: MergedNet,
    /// Late starts summed; the latest of any client.
    pub late_starts: LateStarts,
    /// From the merged histogram.
    pub latency_ms: Latency,
    pub rates: MergedRates,
    /// The clients' histograms added: merge it again, or read it with HdrHistogram's tools.
    pub latency_histogram: EncodedHistogram,
    /// Any client was stopped before it was done.
    pub interrupted: bool,
}

/// One client, as its report said.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientPart {
    /// What the caller named it (`evlab load-merge`: the file).
    pub name: String,
    /// Its schedule's origin and its end, wall clock (Unix seconds).
    pub started_at: f64,
    pub ended_at: f64,
    /// How late it started after `--start-at`, when it was given one.
    pub late_ms: Option<f64>,
    pub duration_s: f64,
    pub offered_rate: f64,
    pub replies: u64,
    /// Its replies over its own duration.
    pub reply_rate: f64,
    pub p99_ms: f64,
    pub interrupted: bool,
}

/// A span of wall clock, Unix seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start: f64,
    pub end: f64,
    pub duration_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergedConnections {
    pub initiated: u64,
    pub completed: u64,
    /// Summed: an upper bound on the connections open at once over all clients.
    pub max_concurrent: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergedRequests {
    pub sent: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergedReplies {
    pub total: u64,
    pub status: StatusClasses,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergedNet {
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// Rates two ways: over the common window, and each client's own summed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergedRates {
    /// Replies all clients completed inside the window (from their sample intervals: one
    /// wholly inside counts in full, one the window cuts counts in proportion to its overlap,
    /// so a shorter `--sample-interval` makes this finer).
    pub window_replies: f64,
    /// `window_replies` over the window's length.
    pub window_reply_rate: f64,
    /// Each client's replies over its own duration, summed.
    pub reply_rate_sum: f64,
    /// Each client's connection starts over its own duration, summed.
    pub connection_rate_sum: f64,
    pub request_rate_sum: f64,
    /// The rates the clients were asked for, summed.
    pub offered_rate_sum: f64,
}

/// Why reports cannot be merged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
    #[error("no report to merge")]
    Empty,
    #[error("{0}: no latency_histogram (written by an evlab load without one)")]
    NoHistogram(String),
    #[error("{0}: no clock (written by an evlab load that did not record its wall clock)")]
    NoClock(String),
    #[error("{name}: {err}")]
    Histogram { name: String, err: HistogramError },
    #[error(
        "the runs have no common window: the latest start ({start:.6}) is not before the \
         earliest end ({end:.6})"
    )]
    NoOverlap { start: f64, end: f64 },
}

/// Merges `reports`, each named for the error messages and the `clients` list.
pub fn merge(reports: &[(String, LoadReport)]) -> Result<MergedLoad, MergeError> {
    let (first_name, first) = reports.first().ok_or(MergeError::Empty)?;
    let first_hist = first
        .latency_histogram
        .as_ref()
        .ok_or_else(|| MergeError::NoHistogram(first_name.clone()))?;
    let per_ms =
        histogram::units_per_ms(&first_hist.unit).map_err(|err| MergeError::Histogram {
            name: first_name.clone(),
            err,
        })?;
    let hists = decode_all(reports, first_hist)?;
    let all = add_histograms(reports, &hists, first_hist)?;
    let window = common_window(reports)?;
    let latency_histogram =
        EncodedHistogram::encode(&all, &first_hist.unit).map_err(|err| MergeError::Histogram {
            name: first_name.clone(),
            err,
        })?;
    let mut m = MergedLoad::empty(
        reports.len(),
        window,
        Latency::from_histogram(&all, per_ms),
        latency_histogram,
    );
    for ((name, r), h) in reports.iter().zip(&hists) {
        m.add(name, r, Latency::from_histogram(h, per_ms).p99);
    }
    m.errors.total = m.errors.by_cause.total();
    m.rates.window_reply_rate = m.rates.window_replies / m.window.duration_s;
    Ok(m)
}

/// Every report's histogram, decoded, once all are checked to be alike (and every report to
/// have a clock) before any is added.
fn decode_all(
    reports: &[(String, LoadReport)],
    first_hist: &EncodedHistogram,
) -> Result<Vec<Histogram<u64>>, MergeError> {
    let mut hists = Vec::with_capacity(reports.len());
    for (name, r) in reports {
        let e = r
            .latency_histogram
            .as_ref()
            .ok_or_else(|| MergeError::NoHistogram(name.clone()))?;
        let fail = |err| MergeError::Histogram {
            name: name.clone(),
            err,
        };
        first_hist.check_mergeable(e).map_err(fail)?;
        hists.push(e.decode().map_err(fail)?);
        if r.clock.is_none() {
            return Err(MergeError::NoClock(name.clone()));
        }
    }
    Ok(hists)
}

/// The clients' histograms added into one with the first's precision and the widest range.
fn add_histograms(
    reports: &[(String, LoadReport)],
    hists: &[Histogram<u64>],
    first_hist: &EncodedHistogram,
) -> Result<Histogram<u64>, MergeError> {
    let invalid = |name: &String, e: &dyn std::fmt::Debug| MergeError::Histogram {
        name: name.clone(),
        err: HistogramError::Invalid(format!("{e:?}")),
    };
    let high = hists.iter().map(Histogram::high).max().unwrap_or(2);
    let mut all = Histogram::<u64>::new_with_bounds(
        first_hist.lowest_discernible_value,
        high,
        first_hist.significant_figures,
    )
    .map_err(|e| invalid(&reports[0].0, &e))?;
    for ((name, _), h) in reports.iter().zip(hists) {
        all.add(h).map_err(|e| invalid(name, &e))?;
    }
    Ok(all)
}

/// The span every client ran in: the latest start to the earliest end, by their wall clocks.
fn common_window(reports: &[(String, LoadReport)]) -> Result<Window, MergeError> {
    let start = reports
        .iter()
        .map(|(_, r)| clock(r).started_at)
        .fold(f64::NEG_INFINITY, f64::max);
    let end = reports
        .iter()
        .map(|(_, r)| clock(r).ended_at)
        .fold(f64::INFINITY, f64::min);
    if end.partial_cmp(&start) != Some(std::cmp::Ordering::Greater) {
        return Err(MergeError::NoOverlap { start, end });
    }
    Ok(Window {
        start,
        end,
        duration_s: end - start,
    })
}

/// A report's clock ([`decode_all`] has checked that it has one).
fn clock(r: &LoadReport) -> Clock {
    r.clock.clone().unwrap_or_default()
}

impl MergedLoad {
    /// A merge of `clients` reports over `window`, their latency already merged, nothing
    /// counted yet.
    fn empty(
        clients: usize,
        window: Window,
        latency_ms: Latency,
        latency_histogram: EncodedHistogram,
    ) -> MergedLoad {
        MergedLoad {
            tool: "evlab load-merge".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            clients: Vec::with_capacity(clients),
            window,
            connections: MergedConnections {
                initiated: 0,
                completed: 0,
                max_concurrent: 0,
            },
            requests: MergedRequests { sent: 0 },
            replies: MergedReplies {
                total: 0,
                status: StatusClasses::default(),
            },
            errors: ErrorCounts {
                total: 0,
                by_cause: Errors::default(),
            },
            net: MergedNet {
                bytes_in: 0,
                bytes_out: 0,
            },
            late_starts: LateStarts {
                count: 0,
                max_ms: 0.0,
            },
            latency_ms,
            rates: MergedRates {
                window_replies: 0.0,
                window_reply_rate: 0.0,
                reply_rate_sum: 0.0,
                connection_rate_sum: 0.0,
                request_rate_sum: 0.0,
                offered_rate_sum: 0.0,
            },
            latency_histogram,
            interrupted: false,
        }
    }

    /// Adds client `name`'s report `r` (whose own p99 is `p99_ms`): its counts to the sums,
    /// its replies inside the window and its rates, and its part to `clients`. The errors'
    /// total and the window's rate are left for the end.
    fn add(&mut self, name: &str, r: &LoadReport, p99_ms: f64) {
        let c = clock(r);
        let d = r.duration_s.max(1e-9);
        self.connections.initiated += r.connections.initiated;
        self.connections.completed += r.connections.completed;
        self.connections.max_concurrent += r.connections.max_concurrent;
        self.requests.sent += r.requests.sent;
        self.replies.total += r.replies.total;
        self.replies.status.add(&r.replies.status);
        self.errors.by_cause.add(&r.errors.by_cause);
        self.net.bytes_in += r.net.bytes_in;
        self.net.bytes_out += r.net.bytes_out;
        self.late_starts.count += r.late_starts.count;
        self.late_starts.max_ms = self.late_starts.max_ms.max(r.late_starts.max_ms);
        self.rates.window_replies += replies_within(r, c.started_at, &self.window);
        self.rates.reply_rate_sum += r.replies.total as f64 / d;
        self.rates.connection_rate_sum += r.connections.initiated as f64 / d;
        self.rates.request_rate_sum += r.requests.sent as f64 / d;
        self.rates.offered_rate_sum += r.schedule.offered_rate;
        self.interrupted |= r.interrupted;
        self.clients.push(ClientPart {
            name: name.to_string(),
            started_at: c.started_at,
            ended_at: c.ended_at,
            late_ms: c.late_ms,
            duration_s: r.duration_s,
            offered_rate: r.schedule.offered_rate,
            replies: r.replies.total,
            reply_rate: r.replies.total as f64 / d,
            p99_ms,
            interrupted: r.interrupted,
        });
    }
}

/// The replies of `r` (whose schedule began at `started_at`) that fell inside `w`, from its
/// sample intervals; the last interval ends with the run.
fn replies_within(r: &LoadReport, started_at: f64, w: &Window) -> f64 {
    r.samples
        .iter()
        .map(|s| {
            let a = started_at + s.start_s;
            let b = started_at + s.end_s.min(r.duration_s).max(s.start_s);
            let overlap = (b.min(w.end) - a.max(w.start)).max(0.0);
            if b > a {
                s.replies as f64 * overlap / (b - a)
            } else if a >= w.start && a <= w.end {
                s.replies as f64
            } else {
                0.0
            }
        })
        .sum()
}
