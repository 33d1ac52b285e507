//! What a run measured, merged over threads, and the report: httperf's lines and labels (so
//! scripts that read httperf's output keep working), plus latency percentiles and late starts.
//!
//! `--json FILE` writes one [`LoadReport`], serialized as is: those types, defined in
//! `evlab-wire` (`evlab_wire::load`, where the document's fields are listed), are the schema, and
//! `evlab run` reads the file back into them.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

/// The report's data, defined in `evlab-wire` (its readers depend on that crate, not on this
/// one).
pub use evlab_wire::load::{
    Clock, Connections, Cpu, EncodedHistogram, ErrorCounts, Errors, LateStarts, Latency, Lateness,
    LoadReport, Mean, Net, Replies, ReplyRate, ReplySize, Requests, RunConfig, Sample, Schedule,
    StatusClasses, SyscallUse, TimeSummary,
};

/// The unit of [`Stats::latency`] (and of every histogram here), as the report states it.
pub const HISTOGRAM_UNIT: &str = "us";

/// Counting errors into [`Errors`], as httperf files them.
pub trait ErrorTally {
    /// Files an errno where httperf does.
    fn count_errno(&mut self, errno: i32);
    fn merge(&mut self, o: &Errors);
}

impl ErrorTally for Errors {
    fn count_errno(&mut self, errno: i32) {
        match errno {
            libc::ECONNREFUSED => self.connrefused += 1,
            libc::ECONNRESET | libc::EPIPE => self.connreset += 1,
            libc::ETIMEDOUT => self.socket_timo += 1,
            libc::EMFILE => self.fd_unavail += 1,
            libc::ENFILE => self.ftab_full += 1,
            libc::EADDRNOTAVAIL | libc::EADDRINUSE => self.addrunavail += 1,
            _ => self.other += 1,
        }
    }

    fn merge(&mut self, o: &Errors) {
        self.add(o);
    }
}

/// One thread's measurements (merged at the end).
#[derive(Clone, Debug)]
pub struct Stats {
    pub initiated: u64,
    pub completed: u64,
    pub requests: u64,
    pub replies: u64,
    /// Replies per status class, indexed by [`StatusClasses::slot`].
    pub status: [u64; StatusClasses::SLOTS],
    pub header_bytes: u64,
    pub body_bytes: u64,
    pub footer_bytes: u64,
    pub bytes_out: u64,
    pub bytes_in: u64,
    pub errors: Errors,
    pub late_starts: u64,
    pub max_late_us: u64,
    /// How late each start was (µs; on time records as 1): jitter and saturation told apart.
    pub lateness: Histogram<u64>,
    /// Offset from t0 of the first scheduled start, and of the last actual start (µs).
    pub first_sched_us: Option<u64>,
    pub last_start_us: u64,
    /// How far behind schedule the last start was (µs): the lag at the end of the run.
    pub end_lag_us: u64,
    /// The largest lateness of the starts scheduled in each sample interval (µs).
    pub lag_samples: Vec<u64>,
    pub max_concurrent: u64,
    /// Microseconds, from each call's due time (corrected for coordinated omission).
    pub latency: Histogram<u64>,
    /// Microseconds, from when each call was sent (wrk's uncorrected latency).
    pub latency_uncorrected: Histogram<u64>,
    pub conn_time: Histogram<u64>,
    pub connect_time: Histogram<u64>,
    pub response_time_sum_us: u64,
    pub transfer_time_sum_us: u64,
    pub replies_per_conn_sum: u64,
    /// Replies completed per sample interval.
    pub samples: Vec<u64>,
    /// Every reply's latency, with `LoadConfig::each_reply` (empty otherwise).
    pub each: Vec<EachReply>,
}

/// One reply: when its request was due (µs from the schedule's origin), its latency (µs, as
/// the histogram records it) and its status code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EachReply {
    pub due_us: u64,
    pub latency_us: u64,
    pub status: u16,
}

/// Every reply as CSV (`due_us,latency_us,status`), by when it was due.
pub fn each_reply_csv(each: &[EachReply]) -> String {
    let mut v = each.to_vec();
    v.sort_by_key(|e| (e.due_us, e.latency_us));
    let mut out = String::with_capacity(24 * v.len() + 32);
    out.push_str("due_us,latency_us,status\n");
    for e in v {
        out.push_str(&format!("{},{},{}\n", e.due_us, e.latency_us, e.status));
    }
    out
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            initiated: 0,
            completed: 0,
            requests: 0,
            replies: 0,
            status: [0; StatusClasses::SLOTS],
            header_bytes: 0,
            body_bytes: 0,
            footer_bytes: 0,
            bytes_out: 0,
            bytes_in: 0,
            errors: Errors::default(),
            late_starts: 0,
            max_late_us: 0,
            lateness: hist(),
            first_sched_us: None,
            last_start_us: 0,
            end_lag_us: 0,
            lag_samples: Vec::new(),
            max_concurrent: 0,
            latency: hist(),
            latency_uncorrected: hist(),
            conn_time: hist(),
            connect_time: hist(),
            response_time_sum_us: 0,
            transfer_time_sum_us: 0,
            replies_per_conn_sum: 0,
            samples: Vec::new(),
            each: Vec::new(),
        }
    }
}

impl Stats {
    /// Replies with a 2xx or 3xx status.
    pub fn ok_replies(&self) -> u64 {
        self.status[StatusClasses::slot(200)] + self.status[StatusClasses::slot(300)]
    }

    pub fn sample(&mut self, index: usize) {
        if self.samples.len() <= index {
            self.samples.resize(index + 1, 0);
        }
        self.samples[index] += 1;
    }

    /// One connection started `late` µs behind its slot, scheduled at `sched_us` and started at
    /// `now_us` (both from t0); `sample` is the interval its slot falls in.
    pub fn record_start(&mut self, sched_us: u64, now_us: u64, sample: usize) {
        let late = now_us.saturating_sub(sched_us);
        let _ = self.lateness.record(late.max(1));
        self.first_sched_us = Some(self.first_sched_us.map_or(sched_us, |f| f.min(sched_us)));
        self.last_start_us = self.last_start_us.max(now_us);
        self.end_lag_us = late;
        if self.lag_samples.len() <= sample {
            self.lag_samples.resize(sample + 1, 0);
        }
        self.lag_samples[sample] = self.lag_samples[sample].max(late);
    }

    /// Starts per second between the first slot and the last actual start: equal to the offered
    /// rate when the generator kept its schedule, lower when it fell behind for good.
    pub fn achieved_start_rate(&self) -> Option<f64> {
        let first = self.first_sched_us?;
        let span = self.last_start_us.checked_sub(first)?;
        (self.initiated >= 2 && span > 0).then(|| (self.initiated - 1) as f64 * 1e6 / span as f64)
    }

    pub fn merge(&mut self, o: &Stats) {
        self.initiated += o.initiated;
        self.completed += o.completed;
        self.requests += o.requests;
        self.replies += o.replies;
        for (a, b) in self.status.iter_mut().zip(o.status) {
            *a += b;
        }
        self.header_bytes += o.header_bytes;
        self.body_bytes += o.body_bytes;
        self.footer_bytes += o.footer_bytes;
        self.bytes_out += o.bytes_out;
        self.bytes_in += o.bytes_in;
        self.errors.merge(&o.errors);
        self.late_starts += o.late_starts;
        self.max_late_us = self.max_late_us.max(o.max_late_us);
        let _ = self.lateness.add(&o.lateness);
        self.first_sched_us = match (self.first_sched_us, o.first_sched_us) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if o.last_start_us >= self.last_start_us {
            self.last_start_us = o.last_start_us;
            self.end_lag_us = self.end_lag_us.max(o.end_lag_us);
        }
        if self.lag_samples.len() < o.lag_samples.len() {
            self.lag_samples.resize(o.lag_samples.len(), 0);
        }
        for (i, l) in o.lag_samples.iter().enumerate() {
            self.lag_samples[i] = self.lag_samples[i].max(*l);
        }
        self.max_concurrent += o.max_concurrent;
        let _ = self.latency.add(&o.latency);
        let _ = self.latency_uncorrected.add(&o.latency_uncorrected);
        let _ = self.conn_time.add(&o.conn_time);
        let _ = self.connect_time.add(&o.connect_time);
        self.response_time_sum_us += o.response_time_sum_us;
        self.transfer_time_sum_us += o.transfer_time_sum_us;
        self.replies_per_conn_sum += o.replies_per_conn_sum;
        if self.samples.len() < o.samples.len() {
            self.samples.resize(o.samples.len(), 0);
        }
        for (i, s) in o.samples.iter().enumerate() {
            self.samples[i] += s;
        }
        self.each.extend_from_slice(&o.each);
    }
}

/// Everything the report needs besides the measurements.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub config: RunConfig,
    pub duration_s: f64,
    pub sample_interval_s: f64,
    /// Connections (sessions) per second asked for.
    pub offered_rate: f64,
    pub user_s: f64,
    pub system_s: f64,
    /// The CPU quota binding the generator (CPUs), and its group's throttled time over the run
    /// (s), where a quota binds it.
    pub quota: Option<(f64, Option<f64>)>,
    /// The generator's syscalls (the time inside them with `profiled` only).
    pub syscalls: Vec<evlab_sys::SyscallRow>,
    pub profiled: bool,
    /// When the run started and ended by the wall clock.
    pub clock: Clock,
}

fn ms(us: f64) -> f64 {
    us / 1000.0
}

/// Reply rate per sample: (min, avg, max, stddev, n). Only whole intervals count, as httperf.
pub fn reply_rate(s: &Stats, info: &RunInfo) -> (f64, f64, f64, f64, usize) {
    let whole = (info.duration_s / info.sample_interval_s).floor() as usize;
    let v: Vec<f64> = s
        .samples
        .iter()
        .take(whole.min(s.samples.len()))
        .map(|&c| c as f64 / info.sample_interval_s)
        .collect();
    if v.is_empty() {
        // Shorter than one sample interval: no samples (as httperf), but the average over the
        // whole run is still the reply rate.
        let avg = s.replies as f64 / info.duration_s.max(1e-9);
        return (avg, avg, avg, 0.0, 0);
    }
    let n = v.len() as f64;
    let avg = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / n;
    let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = v.iter().cloned().fold(0.0, f64::max);
    (min, avg, max, var.sqrt(), v.len())
}

/// The samples of a run, one per interval. The last one ends with the run: when the run ended
/// inside it, it is marked `partial`, ends at the run's end and its rate is over what it
/// covered, so a cut-off interval never reads as a drop (nor an interrupted run as longer
/// than it was).
pub fn samples(s: &Stats, info: &RunInfo) -> Vec<Sample> {
    let iv = info.sample_interval_s;
    let end = info.duration_s;
    s.samples
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let start_s = i as f64 * iv;
            let full = (i + 1) as f64 * iv;
            // A run's end a hair past a boundary (float noise) is not a new interval.
            let partial = end < full - 1e-9 && end > start_s;
            let end_s = if partial { end } else { full };
            Sample {
                start_s,
                end_s,
                replies: c,
                reply_rate: c as f64 / (end_s - start_s),
                partial,
            }
        })
        .collect()
}

/// The `--samples` CSV: a header row, then one row per sample interval (`partial` 1: the
/// interval the run ended in, its rate over the part it covered).
pub fn samples_csv(samples: &[Sample]) -> String {
    let mut out = String::from("sample,start_s,end_s,replies,reply_rate,partial\n");
    for (i, x) in samples.iter().enumerate() {
        out.push_str(&format!(
            "{},{:.3},{:.3},{},{:.3},{}\n",
            i,
            x.start_s,
            x.end_s,
            x.replies,
            x.reply_rate,
            u8::from(x.partial)
        ));
    }
    out
}

/// The report of a finished run.
pub fn report(s: &Stats, info: &RunInfo) -> LoadReport {
    LoadReport {
        // Encoded once, at the end; a histogram of u64 counts always encodes.
        latency_histogram: EncodedHistogram::encode(&s.latency, HISTOGRAM_UNIT).ok(),
        ..figures(s, info)
    }
}

/// A quantile of `h` in milliseconds (0 for an empty histogram).
fn quantile_ms(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        ms(h.value_at_quantile(q) as f64)
    }
}

/// The distribution of `h` in milliseconds.
fn time_summary(h: &Histogram<u64>) -> TimeSummary {
    TimeSummary {
        min: if h.is_empty() {
            0.0
        } else {
            ms(h.min() as f64)
        },
        avg: ms(h.mean()),
        max: ms(h.max() as f64),
        median: quantile_ms(h, 0.5),
        stddev: ms(h.stdev()),
    }
}

/// The report's figures, all but the encoded histogram (which the text report does not need).
fn figures(s: &Stats, info: &RunInfo) -> LoadReport {
    let d = info.duration_s.max(1e-9);
    let cpu = info.user_s + info.system_s;
    LoadReport {
        tool: "evlab load".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        config: info.config.clone(),
        duration_s: info.duration_s,
        connections: connections(s, d),
        requests: Requests {
            sent: s.requests,
            rate: s.requests as f64 / d,
        },
        replies: replies(s, info),
        latency_ms: Latency::from_histogram(&s.latency, 1000.0),
        latency_uncorrected_ms: Some(Latency::from_histogram(&s.latency_uncorrected, 1000.0)),
        late_starts: LateStarts {
            count: s.late_starts,
            max_ms: ms(s.max_late_us as f64),
        },
        schedule: schedule(s, info),
        cpu: Cpu {
            user_s: info.user_s,
            system_s: info.system_s,
            percent: 100.0 * cpu / d,
            quota_cpus: info.quota.map(|q| q.0),
            throttled_s: info.quota.and_then(|q| q.1),
        },
        net: Net {
            kb_per_s: (s.bytes_in + s.bytes_out) as f64 / 1024.0 / d,
            bytes_in: s.bytes_in,
            bytes_out: s.bytes_out,
        },
        errors: ErrorCounts {
            total: s.errors.total(),
            by_cause: s.errors.clone(),
        },
        samples: samples(s, info),
        syscalls: syscall_uses(s, info),
        interrupted: false,
        clock: Some(info.clock.clone()),
        latency_histogram: None,
    }
}

/// The connections' figures, over a run of `d` seconds.
fn connections(s: &Stats, d: f64) -> Connections {
    Connections {
        initiated: s.initiated,
        completed: s.completed,
        max_concurrent: s.max_concurrent,
        rate: s.initiated as f64 / d,
        conn_time_ms: time_summary(&s.conn_time),
        connect_ms: time_summary(&s.connect_time),
        replies_per_conn: if s.completed > 0 {
            s.replies_per_conn_sum as f64 / s.completed as f64
        } else {
            0.0
        },
    }
}

/// The replies' figures: their rate over the sample intervals, times, sizes and statuses.
fn replies(s: &Stats, info: &RunInfo) -> Replies {
    let (rmin, ravg, rmax, rsd, rn) = reply_rate(s, info);
    let replies = s.replies.max(1) as f64;
    Replies {
        total: s.replies,
        rate: ReplyRate {
            min: rmin,
            avg: ravg,
            max: rmax,
            stddev: rsd,
            samples: rn,
        },
        response_ms: Mean {
            avg: ms(s.response_time_sum_us as f64 / replies),
        },
        transfer_ms: Mean {
            avg: ms(s.transfer_time_sum_us as f64 / replies),
        },
        size: ReplySize {
            header: s.header_bytes as f64 / replies,
            content: s.body_bytes as f64 / replies,
            footer: s.footer_bytes as f64 / replies,
            total: (s.header_bytes + s.body_bytes + s.footer_bytes) as f64 / replies,
        },
        status: StatusClasses::from_slots(s.status),
    }
}

/// How the starts kept to the schedule.
fn schedule(s: &Stats, info: &RunInfo) -> Schedule {
    Schedule {
        offered_rate: info.offered_rate,
        achieved_start_rate: s.achieved_start_rate(),
        lateness_ms: Lateness {
            p50: quantile_ms(&s.lateness, 0.5),
            p90: quantile_ms(&s.lateness, 0.9),
            p99: quantile_ms(&s.lateness, 0.99),
            p999: quantile_ms(&s.lateness, 0.999),
            max: ms(s.max_late_us as f64),
        },
        end_lag_ms: ms(s.end_lag_us as f64),
        lag_ms: s.lag_samples.iter().map(|&l| ms(l as f64)).collect(),
    }
}

/// Each syscall the generator made, per connection started.
fn syscall_uses(s: &Stats, info: &RunInfo) -> BTreeMap<String, SyscallUse> {
    let conns = s.initiated.max(1) as f64;
    info.syscalls
        .iter()
        .map(|r| {
            let row = SyscallUse {
                calls: r.calls,
                errors: r.errors,
                would_block: r.would_block,
                per_conn: r.calls as f64 / conns,
                us_per_conn: info.profiled.then(|| r.nanos as f64 / 1e3 / conns),
            };
            (r.name.to_string(), row)
        })
        .collect()
}

/// The reply-rate line: httperf's statistics over whole sample intervals when there are any; a
/// run shorter than one interval has none, and then only its average is given, said as such.
fn reply_rate_line(r: &ReplyRate, info: &RunInfo) -> String {
    if r.samples == 0 {
        return format!(
            "Reply rate [replies/s]: avg {:.1} (the run was shorter than one {} s sample)\n",
            r.avg, info.sample_interval_s
        );
    }
    format!(
        "Reply rate [replies/s]: min {:.1} avg {:.1} max {:.1} stddev {:.1} ({} sample{})\n",
        r.min,
        r.avg,
        r.max,
        r.stddev,
        r.samples,
        if r.samples == 1 { "" } else { "s" }
    )
}

/// When the run started and ended by the wall clock, and how late it started after
/// `--start-at`.
fn clock_line(c: &Clock) -> String {
    let mut o = format!(
        "Clock [Unix s]: started {:.6} ended {:.6}",
        c.started_at, c.ended_at
    );
    if let (Some(at), Some(late)) = (c.start_at, c.late_ms) {
        o.push_str(&format!(" (--start-at {at:.6}: {late:.3} ms late)"));
    }
    o.push('\n');
    o
}

/// What the text report holds besides httperf's block.
#[derive(Clone, Copy, Debug, Default)]
pub struct TextOptions {
    /// httperf's block alone (`--httperf`), without the summary that leads it.
    pub httperf_only: bool,
    /// The latency distribution (`--latency`), as wrk and wrk2 print it.
    pub distribution: bool,
}

/// The report as text: what wrk2 and oha lead with (requests/s, success, errors, latency
/// percentiles), with `--latency` the distribution, then httperf's report.
pub fn to_text_with(s: &Stats, info: &RunInfo, opts: TextOptions) -> String {
    let mut o = String::new();
    if !opts.httperf_only {
        lead_lines(&mut o, s, info);
    }
    if opts.distribution {
        distribution_lines(&mut o, s);
    }
    o.push_str(&to_text(s, info));
    o
}

/// The latency at percentile `p` (100: the largest) of `h`, in ms; None when it holds nothing.
pub fn percentile_ms(h: &Histogram<u64>, p: f64) -> Option<f64> {
    (!h.is_empty()).then(|| {
        ms(if p >= 100.0 {
            h.max()
        } else {
            h.value_at_quantile(p / 100.0)
        } as f64)
    })
}

/// The lines a wrk2 or oha user reads first: replies per second, the success rate, the
/// connections in error, and the latency percentiles.
fn lead_lines(o: &mut String, s: &Stats, info: &RunInfo) {
    let d = info.duration_s.max(1e-9);
    let ok = s.ok_replies();
    let pct = |a: u64, b: u64| {
        if b > 0 {
            format!("{:.2}%", 100.0 * a as f64 / b as f64)
        } else {
            "-".to_string()
        }
    };
    o.push_str(&format!(
        "Summary: {:.1} requests/s answered 2xx/3xx over {:.3} s; success {} of {} requests; \
         errors {} of {} connections\n",
        ok as f64 / d,
        info.duration_s,
        pct(ok, s.requests),
        s.requests,
        pct(s.errors.total(), s.initiated),
        s.initiated
    ));
    if s.latency.is_empty() {
        o.push_str("Summary latency: no replies\n\n");
        return;
    }
    let line = |h: &Histogram<u64>| {
        let q = |p: f64| percentile_ms(h, p).unwrap_or(0.0);
        format!(
            "p50 {:.3} p90 {:.3} p99 {:.3} p99.9 {:.3} max {:.3}",
            q(50.0),
            q(90.0),
            q(99.0),
            q(99.9),
            q(100.0)
        )
    };
    o.push_str(&format!("Summary latency [ms]: {}\n", line(&s.latency)));
    if info.config.closed_loop {
        // wrk's figure beside the corrected one: from each request's send, which a stalled
        // server's queue does not reach.
        o.push_str(&format!(
            "Summary latency, uncorrected [ms]: {} (from each request's send, as wrk measures)\n",
            line(&s.latency_uncorrected)
        ));
    }
    o.push('\n');
}

/// The latency distribution at wrk's percentiles, from the histogram.
fn distribution_lines(o: &mut String, s: &Stats) {
    if s.latency.is_empty() {
        return;
    }
    o.push_str("Latency distribution [ms] (from each call's scheduled start):\n");
    for p in [50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0] {
        let v = percentile_ms(&s.latency, p).unwrap_or(0.0);
        o.push_str(&format!("  {p:>6}%  {v:.3}\n"));
    }
    o.push('\n');
}

/// httperf's report, line for line where the meaning is the same.
pub fn to_text(s: &Stats, info: &RunInfo) -> String {
    let r = figures(s, info);
    let d = info.duration_s.max(1e-9);
    let mut o = String::new();
    o.push_str(&format!(
        "Total: connections {} requests {} replies {} test-duration {:.3} s\n\n",
        s.initiated, s.requests, s.replies, info.duration_s
    ));
    connection_lines(&mut o, s, &r, d);
    request_lines(&mut o, s, d);
    reply_lines(&mut o, s, &r, info);
    cpu_and_net_lines(&mut o, s, info, d);
    error_lines(&mut o, &s.errors);
    latency_and_schedule_lines(&mut o, s, &r, info);
    syscall_lines(&mut o, s, info);
    o
}

/// The connections' paragraph: their rate, times and length.
fn connection_lines(o: &mut String, s: &Stats, r: &LoadReport, d: f64) {
    let conn_rate = s.initiated as f64 / d;
    o.push_str(&format!(
        "Connection rate: {:.1} conn/s ({:.1} ms/conn, <={} concurrent connections)\n",
        conn_rate,
        if conn_rate > 0.0 {
            1000.0 / conn_rate
        } else {
            0.0
        },
        s.max_concurrent
    ));
    // A distribution with nothing in it says so rather than print zeros as if measured.
    if s.conn_time.is_empty() {
        o.push_str("Connection time [ms]: no connection completed\n");
    } else {
        o.push_str(&format!(
            "Connection time [ms]: min {:.1} avg {:.1} max {:.1} median {:.1} stddev {:.1}\n",
            r.connections.conn_time_ms.min,
            r.connections.conn_time_ms.avg,
            r.connections.conn_time_ms.max,
            r.connections.conn_time_ms.median,
            r.connections.conn_time_ms.stddev
        ));
    }
    if s.connect_time.is_empty() {
        o.push_str("Connection time [ms]: no connection was established\n");
    } else {
        o.push_str(&format!(
            "Connection time [ms]: connect {:.1}\n",
            r.connections.connect_ms.avg
        ));
    }
    o.push_str(&format!(
        "Connection length [replies/conn]: {:.3}\n\n",
        r.connections.replies_per_conn
    ));
}

/// The requests' paragraph: their rate and size.
fn request_lines(o: &mut String, s: &Stats, d: f64) {
    let req_rate = s.requests as f64 / d;
    o.push_str(&format!(
        "Request rate: {:.1} req/s ({:.1} ms/req)\n",
        req_rate,
        if req_rate > 0.0 {
            1000.0 / req_rate
        } else {
            0.0
        }
    ));
    o.push_str(&format!(
        "Request size [B]: {:.1}\n\n",
        if s.requests > 0 {
            s.bytes_out as f64 / s.requests as f64
        } else {
            0.0
        }
    ));
}

/// The replies' paragraph: their rate, times, sizes and statuses.
fn reply_lines(o: &mut String, s: &Stats, r: &LoadReport, info: &RunInfo) {
    o.push_str(&reply_rate_line(&r.replies.rate, info));
    if s.replies == 0 {
        o.push_str("Reply time [ms]: no replies\nReply size [B]: no replies\n");
    } else {
        o.push_str(&format!(
            "Reply time [ms]: response {:.1} transfer {:.1}\n",
            r.replies.response_ms.avg, r.replies.transfer_ms.avg
        ));
        o.push_str(&format!(
            "Reply size [B]: header {:.1} content {:.1} footer {:.1} (total {:.1})\n",
            r.replies.size.header,
            r.replies.size.content,
            r.replies.size.footer,
            r.replies.size.total
        ));
    }
    o.push_str(&format!(
        "Reply status: 1xx={} 2xx={} 3xx={} 4xx={} 5xx={}\n\n",
        s.status[1], s.status[2], s.status[3], s.status[4], s.status[5]
    ));
}

/// The generator's CPU time (and its quota, where one binds it) and its network traffic.
fn cpu_and_net_lines(o: &mut String, s: &Stats, info: &RunInfo, d: f64) {
    let cpu = info.user_s + info.system_s;
    o.push_str(&format!(
        "CPU time [s]: user {:.2} system {:.2} (user {:.1}% system {:.1}% total {:.1}%)\n",
        info.user_s,
        info.system_s,
        100.0 * info.user_s / d,
        100.0 * info.system_s / d,
        100.0 * cpu / d
    ));
    if let Some((cpus, throttled)) = info.quota {
        o.push_str(&format!(
            "CPU quota: {cpus:.2} CPU (its cgroup's); {:.1}% of it used{}\n",
            100.0 * cpu / d / cpus,
            throttled.map_or(String::new(), |t| format!(", throttled {t:.2} s"))
        ));
    }
    let kbps = (s.bytes_in + s.bytes_out) as f64 / 1024.0 / d;
    o.push_str(&format!(
        "Net I/O: {:.1} KB/s ({:.1}*10^6 bps)\n\n",
        kbps,
        kbps * 1024.0 * 8.0 / 1e6
    ));
}

/// The errors, by cause as httperf names them.
fn error_lines(o: &mut String, e: &Errors) {
    o.push_str(&format!(
        "Errors: total {} client-timo {} socket-timo {} connrefused {} connreset {}\n",
        e.total(),
        e.client_timo,
        e.socket_timo,
        e.connrefused,
        e.connreset
    ));
    o.push_str(&format!(
        "Errors: fd-unavail {} addrunavail {} ftab-full {} other {}\n\n",
        e.fd_unavail,
        e.addrunavail,
        e.ftab_full,
        e.other + e.parse
    ));
}

/// The latency percentiles, the late starts, the wall clock and how the schedule was kept.
fn latency_and_schedule_lines(o: &mut String, s: &Stats, r: &LoadReport, info: &RunInfo) {
    if s.latency.is_empty() {
        o.push_str("Latency [ms]: no replies\n");
    } else {
        o.push_str(&format!(
            "Latency [ms]: p50 {:.3} p90 {:.3} p99 {:.3} p99.9 {:.3} max {:.3} (from each call's scheduled start)\n",
            r.latency_ms.p50,
            r.latency_ms.p90,
            r.latency_ms.p99,
            r.latency_ms.p999,
            r.latency_ms.max
        ));
    }
    o.push_str(&format!(
        "Late starts: {} more than 1 ms behind schedule (the latest start: {:.3} ms behind)\n",
        s.late_starts,
        ms(s.max_late_us as f64)
    ));
    o.push_str(&clock_line(&info.clock));
    o.push_str(&format!(
        "Schedule: lateness p50 {:.3} p99 {:.3} max {:.3} ms; lag at end {:.3} ms; {}\n",
        r.schedule.lateness_ms.p50,
        r.schedule.lateness_ms.p99,
        r.schedule.lateness_ms.max,
        ms(s.end_lag_us as f64),
        match s.achieved_start_rate() {
            Some(rate) => format!("starts {rate:.1}/s of {:.1}/s offered", info.offered_rate),
            None => format!(
                "{:.1}/s offered (too few starts for a start rate)",
                info.offered_rate
            ),
        }
    ));
}

/// The syscalls per connection, and with `profiled` the time in each (none without a count).
fn syscall_lines(o: &mut String, s: &Stats, info: &RunInfo) {
    if info.syscalls.is_empty() {
        return;
    }
    let conns = s.initiated.max(1) as f64;
    let mut line = String::from("Syscalls [per conn]:");
    let mut time = String::from("Syscall time [us/conn]:");
    let mut total_ns = 0;
    for r in &info.syscalls {
        line.push_str(&format!(" {} {:.2}", r.name, r.calls as f64 / conns));
        time.push_str(&format!(" {} {:.2}", r.name, r.nanos as f64 / 1e3 / conns));
        total_ns += r.nanos;
    }
    o.push_str(&line);
    o.push('\n');
    if info.profiled {
        let cpu_us = (info.user_s + info.system_s) * 1e6 / conns;
        o.push_str(&format!(
            "{time} (total {:.2} of {:.2} us CPU per conn)\n",
            total_ns as f64 / 1e3 / conns,
            cpu_us
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> RunInfo {
        RunInfo {
            config: RunConfig {
                server: "127.0.0.1".into(),
                port: 8080,
                rate: 10.0,
                poisson: false,
                num_conns: Some(3),
                duration_s: None,
                stop_after_s: None,
                timeout_s: 5.0,
                threads: 1,
                pipeline: 1,
                source_addrs: 0,
                workload: None,
                closed_loop: false,
                request_rate: None,
            },
            duration_s: 0.5,
            sample_interval_s: 1.0,
            offered_rate: 10.0,
            user_s: 0.0,
            system_s: 0.0,
            quota: None,
            syscalls: Vec::new(),
            profiled: false,
            clock: Clock {
                start_at: Some(1_000.0),
                started_at: 1_000.25,
                late_ms: Some(250.0),
                ended_at: 1_000.75,
            },
        }
    }

    #[test]
    fn the_report_carries_the_histogram_exactly_and_the_clock() {
        let mut s = Stats::default();
        for us in [90, 120, 4_000, 250_000] {
            s.latency.record(us).unwrap();
        }
        s.replies = 4;
        let r = report(&s, &info());
        let h = r.latency_histogram.as_ref().unwrap();
        assert_eq!((h.unit.as_str(), h.significant_figures), ("us", 3));
        assert_eq!(h.decode().unwrap(), s.latency);
        // 250,000 µs's bucket (3 significant figures) ends at 250,111.
        assert!(
            (r.latency_ms.max - 250.111).abs() < 1e-9,
            "{}",
            r.latency_ms.max
        );
        assert_eq!(r.clock.as_ref().unwrap().late_ms, Some(250.0));
        // The text report says when it ran, and how late after --start-at.
        let t = to_text(&s, &info());
        assert!(
            t.contains("Clock [Unix s]: started 1000.250000 ended 1000.750000 (--start-at 1000.000000: 250.000 ms late)"),
            "{t}"
        );
        // Written as JSON and read back: the same report.
        let json = serde_json_round_trip(&r);
        assert_eq!(json, r);
    }

    fn serde_json_round_trip(r: &LoadReport) -> LoadReport {
        serde_json::from_str(&serde_json::to_string(r).unwrap()).unwrap()
    }

    #[test]
    fn schedule_figures_from_recorded_starts() {
        // Thread A: starts every 1 ms from 0, on time; thread B: every 1 ms from 0.5 ms, the last
        // 30 ms late. Merged: the lag at the end is B's (its last start was the latest).
        let mut a = Stats::default();
        let mut b = Stats::default();
        for i in 0..100u64 {
            a.record_start(i * 1000, i * 1000 + 10, (i / 50) as usize);
            a.initiated += 1;
            let late = if i == 99 { 30_000 } else { 20 };
            b.record_start(i * 1000 + 500, i * 1000 + 500 + late, (i / 50) as usize);
            b.initiated += 1;
        }
        assert_eq!(a.end_lag_us, 10);
        assert!((a.achieved_start_rate().unwrap() - 99.0 * 1e6 / 99_010.0).abs() < 1e-6);
        let mut m = Stats::default();
        m.merge(&a);
        m.merge(&b);
        assert_eq!(m.first_sched_us, Some(0));
        assert_eq!(m.last_start_us, 99_500 + 30_000);
        assert_eq!(m.end_lag_us, 30_000);
        assert_eq!(m.lag_samples, vec![20, 30_000]);
        assert_eq!(m.lateness.len(), 200);
        // 199 gaps over 129.5 ms: behind the 2,000/s schedule.
        let r = m.achieved_start_rate().unwrap();
        assert!((r - 199.0 * 1e6 / 129_500.0).abs() < 1e-6, "{r}");
        // A single start has no rate.
        let mut one = Stats::default();
        one.record_start(0, 5, 0);
        one.initiated = 1;
        assert_eq!(one.achieved_start_rate(), None);
    }
}
