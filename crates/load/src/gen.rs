//! The open-loop generator.
//!
//! As httperf: connections ("sessions") start on an absolute schedule — every 1/rate seconds, or
//! with exponential gaps for `poisson` — whatever the server does, so offered load can exceed
//! capacity. Each connection makes its session's calls in order (or `pipeline` at a time),
//! every stage bounded by `timeout`. A thread that falls behind its schedule starts the late
//! connections at once and counts them (`late_starts`): a saturated generator is visible, never
//! silent.
//!
//! Latency is measured from each call's *scheduled* start — the connection's slot in the
//! schedule for its first call, the moment the previous reply completed (plus think time) for
//! later ones — so a stalled server cannot hide behind a generator that waited for it
//! (coordinated omission).
//!
//! Threads split the schedule (thread k takes starts k, k+T, k+2T, …); each runs its own
//! edge-triggered epoll loop through `evlab-poll` (every syscall counted), and binds its
//! sockets to a pool of 127.0.0.0/8 source addresses so that TIME_WAIT never exhausts the
//! ephemeral ports of one address.
//!
//! Nothing is allocated per connection or per request. A connection's buffers (its session's
//! calls, its output, its in-flight queue, its parser) make a *shell*, returned to a free list
//! when it closes and taken by the next connection; a shell is made only when every shell is in
//! use, so a thread makes exactly as many as it holds connections open at once. Deadlines are
//! kept in lists linked through the connection table. What grows with the run is the table
//! indexed by descriptor, doubled as the highest descriptor grows, and with it the lists bounded
//! by its length. [`run_pooled`] reports both counts ([`Pools`]).

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use evlab_sys as sys;

use crate::summary::{self, Clock, LoadReport, RunConfig, RunInfo, Stats};
use crate::StopSignal;

mod worker;

use worker::Worker;

/// How often [`run_watched`] looks at the run: a stop is seen within this, and the threads
/// stop within their own 100 ms wait.
const WATCH_EVERY: Duration = Duration::from_millis(50);
/// Without `--start-at`, the schedule begins this long after the threads are ready: time for
/// each to get from the start line into its loop.
const LEAD: Duration = Duration::from_millis(20);
/// `--start-at` further ahead than this is taken for a mistake (milliseconds given for
/// seconds, a wrong day) rather than waited for.
pub const MAX_START_AHEAD: Duration = Duration::from_secs(3600);
/// `--start-at` further behind than this is refused rather than started at once, late: clients
/// told one instant start within its first second or so, so one this late would not start with
/// them, and an instant long past (`5`: 1970) is a mistake. A lateness below it is run and
/// reported (`clock.late_ms`, and a warning).
pub const MAX_START_LATE: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct LoadConfig {
    pub server: SocketAddr,
    pub host: String,
    pub rate: f64,
    pub poisson: bool,
    pub num_conns: Option<u64>,
    pub duration: Option<Duration>,
    pub timeout: Duration,
    pub think_timeout: Duration,
    pub threads: usize,
    pub pipeline: usize,
    pub source_addrs: Vec<Ipv4Addr>,
    pub sample_interval: Duration,
    pub seed: u64,
    /// Time every syscall (adds two clock reads to each); counts are always kept.
    pub profile: bool,
    /// Start the schedule at this wall-clock instant (Unix seconds), once everything is ready;
    /// at once, and said to be late, if it has passed by then. `None`: as soon as ready.
    pub start_at: Option<f64>,
    /// Keep every reply's latency ([`crate::summary::EachReply`]), not only the histogram.
    pub each_reply: bool,
    /// End the whole run this long after its start (its schedule's origin), whatever is in
    /// flight: connections still open are closed, counted neither as completed nor as errors
    /// (wrk's `-d`, k6's duration). A fixed set of busy connections is so measured over a
    /// fixed window.
    pub stop_after: Option<Duration>,
    /// wrk's model: every connection repeats its session's calls until the window
    /// (`stop_after`) closes, and a connection that closes is replaced at once, so that
    /// `num_conns` stay busy.
    pub endless: bool,
    /// wrk2's model (with `endless`): each connection's calls are due this far apart, from its
    /// start, whatever the server does; a call sent late is measured from when it was due.
    pub pace: Option<Duration>,
    /// Header lines added to every request (`Name: value\r\n` each); a `Host` or
    /// `User-Agent` among them replaces the generator's own.
    pub headers: Vec<u8>,
}

impl LoadConfig {
    /// `num_conns` connections at `rate` per second to `server`, otherwise as `evlab load`'s
    /// defaults: one call each, 5 s timeout, one thread, 64 loopback source addresses, fixed
    /// gaps, 5 s samples.
    pub fn new(server: SocketAddr, rate: f64, num_conns: u64) -> LoadConfig {
        LoadConfig {
            server,
            host: server.to_string(),
            rate,
            poisson: false,
            num_conns: Some(num_conns),
            duration: None,
            timeout: Duration::from_secs(5),
            think_timeout: Duration::ZERO,
            threads: 1,
            pipeline: 1,
            source_addrs: source_pool(&server, 64),
            sample_interval: Duration::from_secs(5),
            seed: 1,
            profile: false,
            start_at: None,
            each_reply: false,
            stop_after: None,
            endless: false,
            pace: None,
            headers: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Config(String),
    #[error("load thread {0}: {1}")]
    Thread(usize, io::Error),
    #[error("a load thread panicked")]
    Panicked,
}

/// A pool of source addresses in 127.0.0.0/8 for a loopback target: `n` of them from
/// 127.2.0.1 on (the idle holder uses 127.1.0.0/16), or none for another target.
pub fn source_pool(target: &SocketAddr, n: usize) -> Vec<Ipv4Addr> {
    match target.ip() {
        IpAddr::V4(ip) if ip.is_loopback() && n > 0 => (0..n)
            .map(|i| Ipv4Addr::new(127, 2, (i / 250) as u8, (i % 250 + 1) as u8))
            .collect(),
        _ => Vec::new(),
    }
}

/// Live counters for a progress line.
#[derive(Debug, Default)]
pub struct Live {
    pub replies: AtomicU64,
    pub started: AtomicU64,
    pub errors: AtomicU64,
}

pub use crate::workload::WorkloadFactory;

/// What a run's threads made for their pools, summed over threads: the only allocations of the
/// hot path, counted exactly so that a test can tell them from an allocation per connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pools {
    /// Connection shells made: one connection's calls, output, in-flight queue and parser head,
    /// each its own buffer. A shell is made only when every one is in use, so this equals
    /// `Stats::max_concurrent` (both summed over threads).
    pub shells: u64,
    /// Times a thread's descriptor-indexed table doubled. Each doubling reallocates four
    /// buffers once: the connection table, the poller's registration table (which grows at the
    /// same descriptors by the same rule), the free list of shells and the heap of thinking
    /// sessions (both reserved to the table's length, which bounds them).
    pub table_grows: u64,
}

/// The configuration can make a run that ends by itself, or what is wrong with it.
fn check_config(cfg: &LoadConfig) -> Result<(), LoadError> {
    if !(cfg.rate > 0.0 && cfg.rate.is_finite()) {
        return Err(LoadError::Config(format!(
            "--rate must be a positive number of connections per second, not {}",
            cfg.rate
        )));
    }
    if cfg.endless && (cfg.stop_after.is_none() || cfg.num_conns.is_none()) {
        return Err(LoadError::Config(
            "endless sessions need a number of connections and a window (-c and -d)".into(),
        ));
    }
    if cfg.pace.is_some() && (!cfg.endless || cfg.pipeline > 1) {
        return Err(LoadError::Config(
            "a paced rate (-R) is for endless sessions one call at a time (-c, no --pipeline)"
                .into(),
        ));
    }
    if cfg.num_conns.is_none() && cfg.duration.is_none() {
        return Err(LoadError::Config(
            "give --num-conns or --duration: every run must end by itself".into(),
        ));
    }
    if let Some(at) = cfg.start_at {
        check_start_at(at, unix_now())?;
    }
    Ok(())
}

/// Runs the load; returns the merged measurements.
pub fn run(
    cfg: &LoadConfig,
    workload: &WorkloadFactory<'_>,
    stop: &AtomicBool,
    live: &Live,
) -> Result<(Stats, RunInfo), LoadError> {
    run_pooled(cfg, workload, stop, live).map(|(stats, info, _)| (stats, info))
}

/// [`run`], also returning what the threads made for their pools.
pub fn run_pooled(
    cfg: &LoadConfig,
    workload: &WorkloadFactory<'_>,
    stop: &AtomicBool,
    live: &Live,
) -> Result<(Stats, RunInfo, Pools), LoadError> {
    check_config(cfg)?;
    let threads = cfg.threads.max(1);
    if cfg.profile {
        sys::set_profiling(true);
    }
    let sys0 = sys::snapshot_all();
    let ru0 = rusage();
    let quota = sys::cgroup::own_cpu_quota();
    let throttled0 = quota.as_ref().and_then(|q| q.throttled_us());
    // Every thread makes its workload and its poller, then all wait at the start line; only
    // then is the schedule's origin fixed (at `start_at`, or just ahead), and given to them.
    let ready = Barrier::new(threads + 1);
    let origin: OnceLock<Instant> = OnceLock::new();
    let mut start = None;
    let results: Vec<Result<(Stats, Pools), LoadError>> = std::thread::scope(|sc| {
        let (ready, origin) = (&ready, &origin);
        let handles: Vec<_> = (0..threads)
            .map(|tid| {
                let w = workload(tid);
                sc.spawn(move || {
                    let wk = Worker::new(cfg, tid, threads, w);
                    ready.wait(); // everyone ready
                    ready.wait(); // the origin is set
                    let t0 = *origin
                        .get()
                        .expect("the origin is set before the second wait");
                    wk.and_then(|wk| wk.run(t0, stop, live))
                        .map_err(|e| LoadError::Thread(tid, e))
                })
            })
            .collect();
        ready.wait();
        let (t0, clock) = schedule_origin(cfg.start_at);
        let _ = origin.set(t0);
        start = Some((t0, clock));
        ready.wait();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(LoadError::Panicked)))
            .collect()
    });
    let end = Instant::now();
    let ended_at = unix_now();
    let (t0, mut clock) = start.expect("the origin was fixed");
    clock.ended_at = ended_at;
    let ru1 = rusage();
    let syscalls = sys::snapshot_all().since(&sys0).rows();
    let mut total = Stats::default();
    let mut pools = Pools::default();
    for r in results {
        let (stats, p) = r?;
        total.merge(&stats);
        pools.shells += p.shells;
        pools.table_grows += p.table_grows;
    }
    let config = RunConfig {
        server: cfg.server.ip().to_string(),
        port: cfg.server.port(),
        rate: cfg.rate,
        poisson: cfg.poisson,
        num_conns: cfg.num_conns,
        duration_s: cfg.duration.map(|d| d.as_secs_f64()),
        stop_after_s: cfg.stop_after.map(|d| d.as_secs_f64()),
        timeout_s: cfg.timeout.as_secs_f64(),
        threads,
        pipeline: cfg.pipeline,
        source_addrs: cfg.source_addrs.len(),
        workload: None,
        closed_loop: cfg.endless,
        request_rate: cfg
            .pace
            .zip(cfg.num_conns)
            .map(|(p, n)| n as f64 / p.as_secs_f64()),
    };
    let info = RunInfo {
        config,
        duration_s: end.saturating_duration_since(t0).as_secs_f64(),
        sample_interval_s: cfg.sample_interval.as_secs_f64(),
        offered_rate: cfg.rate,
        user_s: ru1.0 - ru0.0,
        system_s: ru1.1 - ru0.1,
        quota: quota.map(|q| {
            let throttled = throttled0.zip(q.throttled_us());
            let throttled_s = throttled.map(|(a, b)| b.saturating_sub(a) as f64 / 1e6);
            (q.cpus, throttled_s)
        }),
        syscalls,
        profiled: cfg.profile,
        clock,
    };
    Ok((total, info, pools))
}

/// What [`run_watched`] tells its caller while the run lasts.
#[derive(Clone, Copy, Debug)]
pub enum Watch<'a> {
    /// The run goes on: its counters so far, `elapsed` after it began.
    Tick { elapsed: Duration, live: &'a Live },
    /// The stop signal was seen `elapsed` after the run began: the threads are told to stop,
    /// and the report will cover what was done until then. Said once; no tick follows.
    Stopping { elapsed: Duration },
}

/// A watched run's measurements, and whether it was stopped before it was done.
#[derive(Debug)]
pub struct Outcome {
    pub stats: Stats,
    pub info: RunInfo,
    pub interrupted: bool,
}

impl Outcome {
    /// The run's report ([`summary::report`]), stamped with the `version` that made it, the
    /// `workload`'s label and whether it was interrupted.
    pub fn report(&self, version: &str, workload: String) -> LoadReport {
        let mut r = summary::report(&self.stats, &self.info);
        r.version = version.into();
        r.interrupted = self.interrupted;
        r.config.workload = Some(workload);
        r
    }
}

/// [`run`] on a thread of its own, watched from this one every 50 ms: once `stop` says so, the
/// threads are told to stop (and `on_watch` hears [`Watch::Stopping`]); until then `on_watch`
/// hears a [`Watch::Tick`] each time. The watching costs the generator's process a wake-up
/// per 50 ms, counted in its CPU time.
pub fn run_watched(
    cfg: &LoadConfig,
    workload: &WorkloadFactory<'_>,
    stop: &(impl StopSignal + ?Sized),
    mut on_watch: impl FnMut(Watch<'_>),
) -> Result<Outcome, LoadError> {
    let stopping = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let live = Live::default();
    let mut interrupted = false;
    let (stats, info) = std::thread::scope(|sc| {
        let runner = sc.spawn(|| {
            let r = run(cfg, workload, &stopping, &live);
            done.store(true, Relaxed);
            r
        });
        let t0 = Instant::now();
        while !done.load(Relaxed) {
            std::thread::sleep(WATCH_EVERY);
            if !interrupted && stop.should_stop() {
                interrupted = true;
                stopping.store(true, Relaxed);
                on_watch(Watch::Stopping {
                    elapsed: t0.elapsed(),
                });
            }
            if !interrupted {
                on_watch(Watch::Tick {
                    elapsed: t0.elapsed(),
                    live: &live,
                });
            }
        }
        runner.join().unwrap_or(Err(LoadError::Panicked))
    })?;
    Ok(Outcome {
        stats,
        info,
        interrupted,
    })
}

/// The wall clock (CLOCK_REALTIME), Unix seconds.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// `--start-at` is a wall-clock instant, neither too far ahead of `now` nor too far behind.
pub fn check_start_at(at: f64, now: f64) -> Result<(), LoadError> {
    if !(at.is_finite() && at > 0.0) {
        return Err(LoadError::Config(format!(
            "--start-at must be a wall-clock instant in Unix seconds (such as {now:.3}), not {at}"
        )));
    }
    let late = now - at;
    if late > MAX_START_LATE.as_secs_f64() {
        let how_long = if late >= 2.0 * 86_400.0 {
            format!("{:.0} days", late / 86_400.0)
        } else {
            format!("{late:.1} s")
        };
        return Err(LoadError::Config(format!(
            "--start-at {at} passed {how_long} ago by this host's clock ({now:.3}), more than \
             the {} s a client may start late: give an instant ahead, such as $(date -d \
             '+5 sec' +%s.%N); if it is right, this host's clock is ahead (`evlab hosts` \
             shows each host's)",
            MAX_START_LATE.as_secs()
        )));
    }
    if at - now > MAX_START_AHEAD.as_secs_f64() {
        return Err(LoadError::Config(format!(
            "--start-at {at} is {:.0} s ahead of this host's clock ({now:.3}): more than {} s, \
             taken for a mistake (Unix seconds, not milliseconds)",
            at - now,
            MAX_START_AHEAD.as_secs()
        )));
    }
    Ok(())
}

/// The schedule's origin as an `Instant`, and as the wall clock: at `start_at` if it is still
/// ahead, at once (and late by how much) if it has passed, or [`LEAD`] ahead without one.
fn schedule_origin(start_at: Option<f64>) -> (Instant, Clock) {
    // Read together, so that one maps onto the other to within the time between the reads.
    let mono = Instant::now();
    let wall = unix_now();
    let (t0, started_at) = match start_at {
        Some(at) if at > wall => (mono + Duration::from_secs_f64(at - wall), at),
        Some(_) => (mono, wall),
        None => (mono + LEAD, wall + LEAD.as_secs_f64()),
    };
    let clock = Clock {
        start_at,
        started_at,
        late_ms: start_at.map(|at| ((started_at - at) * 1e3).max(0.0)),
        ended_at: started_at,
    };
    (t0, clock)
}

fn rusage() -> (f64, f64) {
    let t = sys::getrusage(sys::Who::Process).unwrap_or_default().cpu;
    (t.user.as_secs_f64(), t.system.as_secs_f64())
}

/// For tests and the CLI: a stop flag that is never raised.
pub fn never() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}
