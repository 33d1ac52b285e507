//! malloc: the Linux Scalability Project's malloc-test.
//!
//! The seed's program (CITI's `malloc-test`) has each of N threads run a loop of balanced
//! `malloc(512)` / `free` pairs, timed with `gettimeofday`, less the time of an empty loop of
//! the same length; the LSP ran 10 million requests and compared threads of one process with
//! separate processes, then went far past the number of CPUs. If the allocator scales, every
//! worker takes as long as one alone until the CPUs are used up, and from there the elapsed
//! time grows linearly with the workers (slope: one worker's time over the number of CPUs).
//!
//! evlab's loop allocates a `Vec<u8>` of `size` bytes and drops it, which Rust's `System`
//! allocator — the one the `evlab` binary links, as it names no other global allocator —
//! turns into glibc's `malloc` and `free`. So "glibc's allocator" and "the one the project
//! links" are the same allocator here, and the report says which glibc. `std::hint::black_box`
//! keeps the compiler from eliding the pair. Workers are threads started together at a barrier,
//! or processes forked before the clock starts and released together through a pipe. Each
//! worker times the empty loop before the release and its own malloc loop after it; the wall
//! time runs from the release to the last worker's end (for processes, the arrival of its
//! times, not its exit).
//!
//! One deviation: malloc-test took the empty loop's time off each worker's; evlab reports it
//! beside (`null_ns_per_iteration`) and leaves the malloc loop's time whole. Today the empty
//! loop costs about a nanosecond an iteration, and taking off a loop timed at another moment,
//! possibly preempted, only adds noise.

use std::hint::black_box;
use std::io::{Read, Write};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::os;
use evlab_sys as sys;

use evlab_reason::analysis::sample::median;

use crate::{this_machine, MicroError};

/// The findings, figure and table, from the report alone (`evlab-reason`, which the lab reads
/// them with too).
pub use evlab_reason::analysis::micro::malloc::{
    findings, LINEAR_AT_MOST, RULE_IDS, THREADS_AT_MOST,
};
pub use evlab_reason::render::micro::malloc::{plots, render};

/// The report's data, defined in `evlab-wire` (the lab reads it from there).
pub use evlab_wire::micro::malloc::{Mode, Point, Report};

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    pub modes: Vec<Mode>,
    /// Numbers of workers, one point each.
    pub workers: Vec<usize>,
    /// malloc/free pairs per worker.
    pub iterations: u64,
    /// Bytes per allocation (malloc-test's default: 512).
    pub size: usize,
    /// Rounds: every point once per round; the figures are the medians of the rounds, the
    /// findings decided on the interval over them.
    pub repeat: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            modes: vec![Mode::Threads, Mode::Processes],
            workers: vec![1, 2, 4, 8, 16, 32, 64],
            iterations: 10_000_000,
            size: 512,
            repeat: REPEAT,
        }
    }
}

/// What one worker measured.
#[derive(Copy, Clone, Debug, Default)]
struct Timing {
    null: Duration,
    elapsed: Duration,
}

/// The empty loop whose time is taken off the worker's (malloc-test's "null loop"); run
/// before the clock starts.
fn null_loop(iterations: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iterations {
        black_box(i);
        black_box(i);
    }
    t.elapsed()
}

/// The malloc/free pairs.
fn malloc_loop(iterations: u64, size: usize) -> Duration {
    let t = Instant::now();
    for _ in 0..iterations {
        let v: Vec<u8> = Vec::with_capacity(black_box(size));
        black_box(&v);
        drop(v);
    }
    t.elapsed()
}

/// Which allocator `malloc_loop` measures.
pub fn allocator() -> String {
    format!(
        "glibc {} malloc/free, through Rust's System allocator (the global allocator the evlab \
         binary links)",
        os::glibc_version()
    )
}

/// Runs every point.
pub fn run(cfg: &Config, mut progress: impl FnMut(&Point)) -> Result<Report, MicroError> {
    if cfg.workers.is_empty() || cfg.workers.contains(&0) {
        return Err(MicroError::Config(
            "workers: give one or more counts, each at least 1".into(),
        ));
    }
    if cfg.iterations == 0 || cfg.size == 0 || cfg.repeat == 0 {
        return Err(MicroError::Config(
            "iterations, size and repeat must each be at least 1".into(),
        ));
    }
    if cfg.modes.is_empty() {
        return Err(MicroError::Config("no mode to run".into()));
    }
    let machine = this_machine();
    // Rounds: every point once per round, so that a disturbance of the machine falls on one
    // round of every point, and the findings' ratios can be paired by round.
    let keys: Vec<(Mode, usize)> = cfg
        .modes
        .iter()
        .flat_map(|&m| cfg.workers.iter().map(move |&n| (m, n)))
        .collect();
    let mut runs: Vec<Vec<RunTimes>> = keys.iter().map(|_| Vec::new()).collect();
    for _ in 0..cfg.repeat {
        for (i, &(mode, n)) in keys.iter().enumerate() {
            let run = match mode {
                Mode::Threads => in_threads(n, cfg)?,
                Mode::Processes => in_processes(n, cfg)?,
            };
            progress(&summarize(mode, n, cfg, std::slice::from_ref(&run)));
            runs[i].push(run);
        }
    }
    let points: Vec<Point> = keys
        .iter()
        .zip(&runs)
        .map(|(&(mode, n), r)| summarize(mode, n, cfg, r))
        .collect();
    let mut r = Report {
        benchmark: "malloc".into(),
        machine,
        allocator: allocator(),
        iterations: cfg.iterations,
        size: cfg.size,
        repeat: cfg.repeat,
        points,
        findings: Vec::new(),
    };
    r.findings = findings(&r);
    Ok(r)
}

struct RunTimes {
    wall: Duration,
    workers: Vec<Timing>,
}

fn summarize(mode: Mode, n: usize, cfg: &Config, runs: &[RunTimes]) -> Point {
    let m = |f: &dyn Fn(&RunTimes) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    let mean_of = |r: &RunTimes, f: fn(&Timing) -> Duration| {
        r.workers.iter().map(|t| f(t).as_secs_f64()).sum::<f64>() / r.workers.len().max(1) as f64
    };
    let mean = |r: &RunTimes| mean_of(r, |t| t.elapsed);
    let wall = m(&|r| r.wall.as_secs_f64()).unwrap_or(0.0);
    let worker_mean = m(&mean).unwrap_or(0.0);
    let pairs = cfg.iterations * n as u64;
    Point {
        mode,
        workers: n,
        pairs,
        wall_seconds: wall,
        worker_seconds_mean: worker_mean,
        worker_seconds_max: m(&|r| {
            r.workers
                .iter()
                .map(|t| t.elapsed.as_secs_f64())
                .fold(0.0, f64::max)
        })
        .unwrap_or(0.0),
        ns_per_pair: worker_mean * 1e9 / cfg.iterations as f64,
        null_ns_per_iteration: m(&|r| mean_of(r, |t| t.null)).unwrap_or(0.0) * 1e9
            / cfg.iterations as f64,
        pairs_per_sec: if wall > 0.0 { pairs as f64 / wall } else { 0.0 },
        wall_runs_seconds: runs.iter().map(|r| r.wall.as_secs_f64()).collect(),
    }
}

fn in_threads(n: usize, cfg: &Config) -> Result<RunTimes, MicroError> {
    let barrier = Arc::new(Barrier::new(n + 1));
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let b = barrier.clone();
        let (iters, size) = (cfg.iterations, cfg.size);
        let h = std::thread::Builder::new()
            .name(format!("malloc-{i}"))
            .spawn(move || {
                let null = null_loop(iters);
                b.wait();
                let start = Instant::now();
                let elapsed = malloc_loop(iters, size);
                (Timing { null, elapsed }, start, Instant::now())
            })
            .map_err(MicroError::io("starting a worker thread"))?;
        handles.push(h);
    }
    barrier.wait();
    // Each worker notes its own start: this thread may run late after the barrier.
    let mut workers = Vec::with_capacity(n);
    let mut span: Option<(Instant, Instant)> = None;
    for h in handles {
        let (t, s, e) = h
            .join()
            .map_err(|_| MicroError::Config("a worker thread panicked".into()))?;
        workers.push(t);
        span = Some(span.map_or((s, e), |(a, b)| (a.min(s), b.max(e))));
    }
    let (start, end) = span.unwrap_or_else(|| (Instant::now(), Instant::now()));
    Ok(RunTimes {
        wall: end - start,
        workers,
    })
}

/// Waits (up to a second) until the threads this process ran have left, so that it may fork.
pub(crate) fn wait_single_threaded() -> Result<(), MicroError> {
    let t0 = Instant::now();
    loop {
        let n = sys::threads_in_process().map_err(MicroError::io("reading /proc/self/status"))?;
        if n == 1 {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(1) {
            return Err(MicroError::Config(format!(
                "workers are processes, forked while this process runs one thread, but {n} run"
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn in_processes(n: usize, cfg: &Config) -> Result<RunTimes, MicroError> {
    wait_single_threaded()?;
    let (start_r, start_w) = sys::pipe_blocking().map_err(MicroError::io("a pipe"))?;
    let (res_r, res_w) = sys::pipe_blocking().map_err(MicroError::io("a pipe"))?;
    let mut start_r = std::fs::File::from(start_r);
    let mut res_w = std::fs::File::from(res_w);
    let mut pids = Vec::with_capacity(n);
    let (iters, size) = (cfg.iterations, cfg.size);
    for _ in 0..n {
        let forked = sys::fork_run(libc::SIGKILL, || {
            let null = null_loop(iters);
            let mut go = [0u8; 1];
            if start_r.read_exact(&mut go).is_err() {
                return 2;
            }
            let t = Timing {
                null,
                elapsed: malloc_loop(iters, size),
            };
            let mut rec = [0u8; 16];
            rec[..8].copy_from_slice(&(t.null.as_nanos() as u64).to_ne_bytes());
            rec[8..].copy_from_slice(&(t.elapsed.as_nanos() as u64).to_ne_bytes());
            // 16 bytes: one atomic pipe write.
            if res_w.write_all(&rec).is_err() {
                return 3;
            }
            0
        });
        match forked {
            Ok(pid) => pids.push(pid),
            Err(e) => {
                for &pid in &pids {
                    let _ = sys::kill(pid, libc::SIGKILL);
                    let _ = sys::wait_child(pid);
                }
                return Err(MicroError::io("forking a worker")(e));
            }
        }
    }
    // The workers hold the write end now; once they have all ended, a read sees EOF.
    drop(res_w);
    let mut res = std::fs::File::from(res_r);
    let mut start_w = std::fs::File::from(start_w);
    let start = Instant::now();
    let go = vec![b'g'; n];
    let released = start_w.write_all(&go);
    // The wall clock stops at the last worker's times, not at its exit.
    let mut workers = Vec::with_capacity(n);
    let mut read_err = released
        .err()
        .map(|e| format!("releasing the workers: {e}"));
    while read_err.is_none() && workers.len() < n {
        let mut rec = [0u8; 16];
        match res.read_exact(&mut rec) {
            Ok(()) => {
                let a = u64::from_ne_bytes(rec[..8].try_into().unwrap());
                let b = u64::from_ne_bytes(rec[8..].try_into().unwrap());
                workers.push(Timing {
                    null: Duration::from_nanos(a),
                    elapsed: Duration::from_nanos(b),
                });
            }
            Err(e) => read_err = Some(format!("reading a worker's times: {e}")),
        }
    }
    let wall = start.elapsed();
    let mut failed: Vec<String> = read_err.into_iter().collect();
    for &pid in &pids {
        if !failed.is_empty() {
            let _ = sys::kill(pid, libc::SIGKILL);
        }
        match sys::wait_child(pid) {
            Ok(st) if st.success() || !failed.is_empty() => {}
            Ok(st) => failed.push(format!("worker {pid}: {st}")),
            Err(e) => failed.push(format!("worker {pid}: {e}")),
        }
    }
    if !failed.is_empty() {
        return Err(MicroError::Config(format!(
            "worker processes failed: {}",
            failed.join("; ")
        )));
    }
    Ok(RunTimes { wall, workers })
}

/// Rounds the CLI makes by default: a round of the default sweep takes about 8 s here, and the
/// rules need at least [`MIN_REPEATS`](evlab_reason::analysis::sample::MIN_REPEATS).
pub const REPEAT: usize = 5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_make_every_pair() {
        let cfg = Config {
            iterations: 1000,
            ..Config::default()
        };
        let r = in_threads(3, &cfg).unwrap();
        assert_eq!(r.workers.len(), 3);
        let p = summarize(Mode::Threads, 3, &cfg, &[r]);
        assert_eq!(p.pairs, 3000);
        assert!(p.worker_seconds_max >= p.worker_seconds_mean);
        assert!(allocator().contains("glibc"));
    }
}
