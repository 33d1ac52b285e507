//! pipetest: Ben LaHaise's scalability test of readiness on pipes (the LSE epoll page).
//!
//! `num_pipes` non-blocking pipes are made and the read end of every one is registered for
//! readability. `message_threads` tokens — not OS threads: one thread runs everything — start
//! at generation 0. Each time a token is read from a pipe it counts as a pass, its generation
//! goes up, and unless it reached `max_generation` it is written to its next pipe. The writes
//! wait in a queue and go out just before the next wait, as in the C program. The clock runs
//! from seeding the tokens (the pipes are made and registered before) to the last token's last
//! pass, and the figure is passes per second, against the number of pipes.
//!
//! With one message thread at most one pipe holds data at any time while all the others are
//! registered and idle: poll and select copy and scan every one of them at every wait, epoll
//! only hands back the one that is ready. That is the seed's figure: poll falling as the pipes
//! grow, epoll flat.
//!
//! Where the next pipe is ([`Route`]): the surviving pipetest.c (Red Hat's 2006 revision)
//! writes a token back to the same pipe, `num_pipes - thread - 1`, and keeps the rule it
//! replaced under `#if 0`: pipe `(generation × 17 + thread + thread × (num_pipes /
//! message_threads)) mod num_pipes`, which passes the token round the pipes. The 2002 program
//! the seed ran is not available; evlab takes the older rule as the default (`stride17`) and
//! offers the other as `last`. For poll and select the two cost the same; for epoll only the
//! ready descriptor is touched either way.
//!
//! Deviations from the C program, none of which changes the work per pass:
//! - a read takes up to 256 tokens (the C program asked for one token's bytes). With one
//!   message thread a pipe never holds more than one token, so this is the same single read;
//!   with several it lets an edge-triggered mechanism drain the pipe in one read (a read
//!   shorter than the buffer proves it empty), where the C program only ran level-triggered;
//! - every mechanism waits with a 100 ms timeout (the C program's epoll did; its poll waited
//!   forever), so that a stalled run ends with an error instead of hanging;
//! - the clock is `Instant` (CLOCK_MONOTONIC), not `gettimeofday`.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use evlab_poll::{Events, Interest, Kind, Mechanism, Poller, Support, Token};
use evlab_sys::{self as sys, Syscall};

use evlab_reason::analysis::sample::median;

use crate::{this_machine, MicroError};

/// The findings, figure and table, from the report alone (`evlab-reason`, which the lab reads
/// them with too).
pub use evlab_reason::analysis::micro::pipetest::{
    findings, slopes, K_BETTER, K_HALFWAY, RULE_IDS,
};
pub use evlab_reason::render::micro::pipetest::{plots, render};

/// The report's data, defined in `evlab-wire` (the lab reads it from there).
pub use evlab_wire::micro::pipetest::{Point, Report, Route, Run, Slope, Status};

/// A token's bytes: generation (i64), the read end it was sent to (i32), its thread (i32), as
/// C's `struct token`.
pub const TOKEN_BYTES: usize = 16;
/// Tokens one read may take.
const READ_TOKENS: usize = 256;
/// Descriptors kept free beside the pipes (the mechanism's own, stdio, the ring of io_uring).
pub const FD_SLOP: u64 = 64;

/// The pipe a token of `thread` at `generation` is written to.
pub fn next_pipe(
    route: Route,
    generation: u64,
    thread: usize,
    pipes: usize,
    threads: usize,
) -> usize {
    match route {
        Route::Stride17 => {
            let spread = (pipes / threads.max(1)) as u64;
            let t = thread as u64;
            ((generation.wrapping_mul(17) + t + t * spread) % pipes as u64) as usize
        }
        Route::Last => pipes - (thread % pipes) - 1,
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    pub mechanisms: Vec<Mechanism>,
    /// The numbers of pipes, one point each.
    pub pipes: Vec<usize>,
    /// Tokens in flight (the C program's `message_threads`).
    pub message_threads: usize,
    /// Passes each token makes (the C program's `max_generation`).
    pub max_generation: u64,
    pub route: Route,
    /// Sweeps (every point once each, interleaved); a point's figure is the median of its
    /// runs, and the findings are decided on the spread of the sweeps' fits.
    pub repeat: usize,
    /// A run that passes no token for this long fails.
    pub stall_timeout: Duration,
}

impl Default for Config {
    /// The seed's configuration: one message thread, 300 generations.
    fn default() -> Config {
        Config {
            mechanisms: readiness_mechanisms(),
            pipes: vec![10, 100, 1000, 10000, 16000],
            message_threads: 1,
            max_generation: 300,
            route: Route::default(),
            repeat: 3,
            stall_timeout: Duration::from_secs(10),
        }
    }
}

/// Every readiness mechanism of the registry, in its order: the ones pipetest can run.
pub fn readiness_mechanisms() -> Vec<Mechanism> {
    Mechanism::ALL
        .into_iter()
        .filter(|m| m.kind() == Kind::Readiness)
        .collect()
}

/// Runs the whole sweep `repeat` times over (each run of a point in its own sweep, so that
/// a disturbance of the machine falls on one sweep's points rather than on one point's runs),
/// calling `progress` after each run; a point that fails is reported, left out of the later
/// sweeps, and the sweep goes on.
pub fn run(cfg: &Config, mut progress: impl FnMut(&Point)) -> Result<Report, MicroError> {
    validate(cfg)?;
    let machine = this_machine();
    let mut points = Vec::new();
    for &pipes in &cfg.pipes {
        for &m in &cfg.mechanisms {
            let p = point(m, pipes, machine.nofile);
            if p.status != Status::Ok {
                progress(&p);
            }
            points.push(p);
        }
    }
    for _ in 0..cfg.repeat {
        for p in points.iter_mut().filter(|p| p.status == Status::Ok) {
            let m = Mechanism::from_name(&p.mechanism).expect("a mechanism of the registry");
            match run_dyn(m, cfg, p.pipes) {
                Ok(r) => p.runs.push(r),
                Err(e) => {
                    p.status = Status::Failed;
                    p.reason = Some(format!("{m} with {} pipes: {e}", p.pipes));
                }
            }
            let rates: Vec<f64> = p.runs.iter().map(|r| r.passes_per_sec).collect();
            p.passes_per_sec = median(&rates);
            progress(p);
        }
    }
    for p in points.iter_mut().filter(|p| p.status == Status::Failed) {
        p.passes_per_sec = None;
    }
    let mut r = Report {
        benchmark: "pipetest".into(),
        machine,
        message_threads: cfg.message_threads,
        max_generation: cfg.max_generation,
        route: cfg.route,
        repeat: cfg.repeat,
        mechanisms: cfg
            .mechanisms
            .iter()
            .map(|m| m.name().to_string())
            .collect(),
        pipes: cfg.pipes.clone(),
        points,
        findings: Vec::new(),
        slopes: Vec::new(),
    };
    r.slopes = slopes(&r);
    r.findings = findings(&r);
    Ok(r)
}

fn validate(cfg: &Config) -> Result<(), MicroError> {
    let bad = |s: String| Err(MicroError::Config(s));
    if cfg.mechanisms.is_empty() {
        return bad("no mechanism to run".into());
    }
    if let Some(m) = cfg.mechanisms.iter().find(|m| m.kind() != Kind::Readiness) {
        return bad(format!(
            "{m} is not a readiness mechanism; pipetest runs {}",
            readiness_mechanisms()
                .iter()
                .map(|m| m.name())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if cfg.pipes.is_empty() {
        return bad("no number of pipes given".into());
    }
    if let Some(p) = cfg.pipes.iter().find(|&&p| p < 2) {
        return bad(format!("{p} pipes: pipetest needs at least 2"));
    }
    if cfg.message_threads == 0 {
        return bad("message threads must be at least 1".into());
    }
    if cfg.max_generation == 0 {
        return bad("max generation must be at least 1".into());
    }
    if cfg.repeat == 0 {
        return bad("repeat must be at least 1".into());
    }
    // A pipe holds 64 KiB: at most 4,096 tokens may wait in one.
    if cfg.message_threads > 4096 {
        return bad(format!(
            "{} message threads: at most 4,096 (a pipe's 64 KiB of tokens)",
            cfg.message_threads
        ));
    }
    Ok(())
}

/// A point before its runs: skipped, with the reason, when the mechanism is unavailable or
/// its descriptors do not fit.
fn point(m: Mechanism, pipes: usize, nofile: u64) -> Point {
    let mut p = Point {
        mechanism: m.name().to_string(),
        pipes,
        status: Status::Ok,
        reason: None,
        passes_per_sec: None,
        runs: Vec::new(),
    };
    if let Support::No(why) = m.support() {
        p.status = Status::Skipped;
        p.reason = Some(format!("{m} unavailable: {why}"));
        return p;
    }
    let need = 2 * pipes as u64 + FD_SLOP;
    if need > nofile {
        p.status = Status::Skipped;
        p.reason = Some(format!(
            "{pipes} pipes need {need} descriptors; the limit is {nofile} (raise the hard \
             RLIMIT_NOFILE)"
        ));
    }
    p
}

/// Runs once with the mechanism `m`, dispatched to its type through the registry.
pub fn run_dyn(m: Mechanism, cfg: &Config, pipes: usize) -> io::Result<Run> {
    macro_rules! dispatch {
        ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {
            match m {
                $(Mechanism::$v => dispatch!(@run $kind $args),)*
            }
        };
        (@run readiness ($ty:ty)) => { run_once::<$ty>(cfg, pipes) };
        (@run completion $args:tt) => {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{m} is not a readiness mechanism"),
            ))
        };
    }
    evlab_poll::for_each_mechanism!(dispatch)
}

/// The pipes of one run; closed when dropped.
struct Pipes(Vec<(RawFd, RawFd)>);

impl Pipes {
    fn make(n: usize) -> io::Result<Pipes> {
        let mut p = Pipes(Vec::with_capacity(n));
        for _ in 0..n {
            p.0.push(sys::pipe()?);
        }
        Ok(p)
    }
}

impl Drop for Pipes {
    fn drop(&mut self) {
        for &(r, w) in &self.0 {
            let _ = sys::close(r);
            let _ = sys::close(w);
        }
    }
}

#[derive(Copy, Clone, Debug)]
struct Toke {
    generation: i64,
    tofd: i32,
    thread: i32,
}

impl Toke {
    fn bytes(&self) -> [u8; TOKEN_BYTES] {
        let mut b = [0u8; TOKEN_BYTES];
        b[..8].copy_from_slice(&self.generation.to_ne_bytes());
        b[8..12].copy_from_slice(&self.tofd.to_ne_bytes());
        b[12..].copy_from_slice(&self.thread.to_ne_bytes());
        b
    }

    fn from_bytes(b: &[u8]) -> Toke {
        let word = |at: usize| -> [u8; 4] { b[at..at + 4].try_into().unwrap() };
        Toke {
            generation: i64::from_ne_bytes(b[..8].try_into().unwrap()),
            tofd: i32::from_ne_bytes(word(8)),
            thread: i32::from_ne_bytes(word(12)),
        }
    }
}

/// One run with the mechanism `P`: make and register the pipes, seed the tokens, pass them
/// until every one reached `max_generation`.
pub fn run_once<P: Poller>(cfg: &Config, npipes: usize) -> io::Result<Run> {
    let pipes = Pipes::make(npipes)?;
    let mut poller = P::new()?;
    let t_setup = Instant::now();
    for (i, &(r, _)) in pipes.0.iter().enumerate() {
        poller.register(r, Token(i), Interest::READABLE)?;
    }
    let setup_seconds = t_setup.elapsed().as_secs_f64();

    let threads = cfg.message_threads;
    let mut events = Events::with_capacity(npipes.min(1024));
    let mut pass = Passing::new(cfg, &pipes);
    let (mut waits, mut nevents) = (0u64, 0u64);

    let counters = sys::thread_counters();
    let before = counters.snapshot();
    let start = Instant::now();
    for thread in 0..threads {
        pass.send(Toke {
            generation: 0,
            tofd: -1,
            thread: thread as i32,
        });
    }
    pass.last_pass = Instant::now();
    while pass.complete < threads {
        pass.flush()?;
        let n = poller.wait(&mut events, Some(Duration::from_millis(100)))?;
        waits += 1;
        nevents += n as u64;
        if n == 0 {
            pass.check_stall()?;
            continue;
        }
        for ev in events.iter() {
            if ev.readable() {
                pass.drain(ev.token.0)?;
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let d = counters.snapshot().since(&before);
    let syscalls = Syscall::ALL
        .iter()
        .filter(|s| d.calls(**s) > 0)
        .map(|s| (s.name().to_string(), d.calls(*s)))
        .collect();
    let (passes, empty_reads) = (pass.passes, pass.empty_reads);
    drop(pass);
    drop(poller);
    drop(pipes);
    Ok(Run {
        passes,
        seconds,
        passes_per_sec: if seconds > 0.0 {
            passes as f64 / seconds
        } else {
            0.0
        },
        setup_seconds,
        waits,
        events: nevents,
        empty_reads,
        syscalls,
    })
}

/// Token `t` addressed to the pipe its route gives it next, and that pipe's index.
#[inline]
fn route(cfg: &Config, pipes: &Pipes, mut t: Toke) -> (usize, Toke) {
    let idx = next_pipe(
        cfg.route,
        t.generation as u64,
        t.thread as usize,
        pipes.0.len(),
        cfg.message_threads,
    );
    t.tofd = pipes.0[idx].0;
    (idx, t)
}

/// The tokens of one run in flight: the writes waiting for the next wait, the reads that pass
/// them on, and what their passing counted.
struct Passing<'a> {
    cfg: &'a Config,
    pipes: &'a Pipes,
    /// Tokens to write before the next wait, with the index of their pipe.
    pending: Vec<(usize, Toke)>,
    buf: Vec<u8>,
    passes: u64,
    /// Tokens that reached `max_generation`.
    complete: usize,
    /// Readiness reported on a pipe with nothing to read.
    empty_reads: u64,
    last_pass: Instant,
}

impl<'a> Passing<'a> {
    fn new(cfg: &'a Config, pipes: &'a Pipes) -> Passing<'a> {
        Passing {
            cfg,
            pipes,
            pending: Vec::with_capacity(cfg.message_threads),
            buf: vec![0u8; READ_TOKENS * TOKEN_BYTES],
            passes: 0,
            complete: 0,
            empty_reads: 0,
            last_pass: Instant::now(),
        }
    }

    /// Queues token `t` for the pipe its route gives it next.
    #[inline]
    fn send(&mut self, t: Toke) {
        self.pending.push(route(self.cfg, self.pipes, t));
    }

    /// Writes the queued tokens, each to its pipe.
    #[inline]
    fn flush(&mut self) -> io::Result<()> {
        for (idx, t) in self.pending.drain(..) {
            let n = sys::write(self.pipes.0[idx].1, &t.bytes())?;
            if n != TOKEN_BYTES {
                return Err(io::Error::other(format!(
                    "short write of a token: {n} of {TOKEN_BYTES} bytes"
                )));
            }
        }
        Ok(())
    }

    /// A wait that returned nothing: an error once no token has passed for `stall_timeout`.
    fn check_stall(&self) -> io::Result<()> {
        if self.last_pass.elapsed() > self.cfg.stall_timeout {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "no token passed for {:?} ({} passes done, {} tokens left)",
                    self.cfg.stall_timeout,
                    self.passes,
                    self.cfg.message_threads - self.complete
                ),
            ));
        }
        Ok(())
    }

    /// Reads pipe `idx` until it is empty, passing on every token read (or counting it
    /// complete).
    #[inline]
    fn drain(&mut self, idx: usize) -> io::Result<()> {
        let r = self.pipes.0[idx].0;
        let max_gen = self.cfg.max_generation as i64;
        let mut first = true;
        loop {
            let got = match sys::read(r, &mut self.buf) {
                Ok(0) => return Err(io::Error::other(format!("EOF on pipe {idx}"))),
                Ok(k) => k,
                Err(e) if sys::would_block(&e) => {
                    if first {
                        self.empty_reads += 1;
                    }
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            first = false;
            if got % TOKEN_BYTES != 0 {
                return Err(io::Error::other(format!(
                    "read {got} bytes from pipe {idx}: not whole tokens"
                )));
            }
            for chunk in self.buf[..got].chunks_exact(TOKEN_BYTES) {
                let mut t = Toke::from_bytes(chunk);
                if t.tofd != r {
                    return Err(io::Error::other(format!(
                        "a token for descriptor {} arrived on {r}",
                        t.tofd
                    )));
                }
                self.passes += 1;
                t.generation += 1;
                if t.generation < max_gen {
                    self.pending.push(route(self.cfg, self.pipes, t));
                } else {
                    self.complete += 1;
                }
            }
            self.last_pass = Instant::now();
            if got < self.buf.len() {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests;
