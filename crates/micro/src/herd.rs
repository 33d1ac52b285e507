//! herd: the Linux Scalability Project's thundering herd in `accept`.
//!
//! N workers wait for connections on one listener; a client in this process connects, the
//! worker that gets the connection writes one byte and closes it, and the client reads the byte
//! and resets its end (no TIME_WAIT; sources spread over 127.3.x.y besides). Before the 2.2
//! kernels' "wake one" patch every waiter woke for each connection and all but one went back to
//! sleep; the LSP timed how long the wait queue took to settle, and counted requests per second
//! on a loaded web server.
//!
//! What evlab measures per way of waiting ([`Mode`]) and per N (threads, or forked processes):
//! - wake-ups per accepted connection: the workers' voluntary context switches (getrusage
//!   RUSAGE_THREAD, taken before each wait; the wait that ends the run is left out) over the
//!   connections accepted. One is the floor: the worker that accepts slept once to wait for it;
//!   a herd adds one for every worker woken for nothing.
//! - empty wake-ups: a wait that returned readiness, then `accept` found no connection (the
//!   herd made visible; blocking accept hides these inside the kernel);
//! - CPU time per accept: the workers' CPU time (user + system) over the connections;
//! - wall time per connection, and the client's latency percentiles (connect to the byte);
//! - connections per worker (balance).
//!
//! The client makes one connection at a time by default (`clients`), so every connection finds
//! every worker waiting: the LSP's "tap". Workers are stopped by `shutdown(SHUT_RD)` on the
//! listeners, which wakes every waiter with an error.

use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::os;
use evlab_sys::{self as sys, Usage};

use evlab_reason::analysis::sample::{percentiles, Percentiles};

use crate::{this_machine, MicroError};

/// The findings, figures and table, from the report alone (`evlab-reason`, which the lab reads
/// them with too).
pub use evlab_reason::analysis::micro::herd::{findings, HERD_AT_LEAST, ONE_AT_MOST, RULE_IDS};
pub use evlab_reason::render::micro::herd::{plots, render};

/// The report's data, defined in `evlab-wire` (the lab reads it from there).
pub use evlab_wire::micro::herd::{As, Mode, Point, Report, Status, WorkerStats};

/// Whether the mode's listener is non-blocking (those that wait for readiness first).
fn nonblocking(mode: Mode) -> bool {
    matches!(mode, Mode::Poll | Mode::Epoll | Mode::Exclusive)
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    pub modes: Vec<Mode>,
    pub workers: Vec<usize>,
    pub as_: Vec<As>,
    /// Connections per point.
    pub conns: usize,
    /// Client threads, each making one connection at a time.
    pub clients: usize,
    /// Pause between the workers' last "ready" and the first connection, so that all of them
    /// are asleep in their wait.
    pub settle: Duration,
    /// How long the client waits for a connection's byte, and the run for its workers to stop.
    pub timeout: Duration,
    /// Rounds: every point is measured once per round, the rounds one after the other, so that
    /// a disturbance of the machine falls on one round of every point rather than on every
    /// round of one (the findings' intervals are over the rounds).
    pub repeat: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            modes: Mode::ALL.to_vec(),
            workers: vec![1, 2, 4, 8, 16, 32, 64],
            as_: vec![As::Threads, As::Processes],
            conns: 1000,
            clients: 1,
            settle: Duration::from_millis(50),
            timeout: Duration::from_secs(10),
            repeat: REPEAT,
        }
    }
}

/// Runs every point, calling `progress` after each; a failed point is reported and the sweep
/// goes on.
pub fn run(cfg: &Config, mut progress: impl FnMut(&Point)) -> Result<Report, MicroError> {
    if cfg.modes.is_empty() || cfg.as_.is_empty() {
        return Err(MicroError::Config("no mode to run".into()));
    }
    if cfg.workers.is_empty() || cfg.workers.contains(&0) {
        return Err(MicroError::Config(
            "workers: give one or more counts, each at least 1".into(),
        ));
    }
    if cfg.conns == 0 || cfg.clients == 0 || cfg.repeat == 0 {
        return Err(MicroError::Config(
            "connections, clients and repeat must each be at least 1".into(),
        ));
    }
    let machine = this_machine();
    let mut points = Vec::new();
    for round in 0..cfg.repeat {
        for &as_ in &cfg.as_ {
            for &mode in &cfg.modes {
                for &n in &cfg.workers {
                    let mut p = point(cfg, mode, as_, n);
                    p.round = round;
                    progress(&p);
                    points.push(p);
                }
            }
        }
    }
    let mut r = Report {
        benchmark: "herd".into(),
        machine,
        conns: cfg.conns,
        clients: cfg.clients,
        repeat: cfg.repeat,
        points,
        findings: Vec::new(),
    };
    r.findings = findings(&r);
    Ok(r)
}

fn point(cfg: &Config, mode: Mode, as_: As, n: usize) -> Point {
    let mut p = Point {
        mode,
        round: 0,
        as_,
        workers: n,
        status: Status::Ok,
        reason: None,
        connections: 0,
        client_errors: 0,
        accepted: 0,
        per_worker: Vec::new(),
        wakeups_per_accept: 0.0,
        empty_wakeups: 0,
        involuntary_switches: 0,
        cpu_us_per_accept: 0.0,
        wall_us_per_connection: 0.0,
        balance_cv: 0.0,
        latency: Percentiles::default(),
        worker_stats: Vec::new(),
    };
    if mode == Mode::Uring {
        if let evlab_poll::Support::No(why) = os::UringAcceptor::support() {
            p.status = Status::Skipped;
            p.reason = Some(format!("io_uring accept unavailable: {why}"));
            return p;
        }
    }
    let out = match as_ {
        As::Threads => in_threads(cfg, mode, n),
        As::Processes => in_processes(cfg, mode, n),
    };
    let (client, workers) = match out {
        Ok(x) => x,
        Err(e) => {
            p.status = Status::Failed;
            p.reason = Some(e.to_string());
            return p;
        }
    };
    let accepted: u64 = workers.iter().map(|w| w.accepts).sum();
    let vol: u64 = workers.iter().map(|w| w.voluntary_switches).sum();
    let cpu: f64 = workers.iter().map(|w| w.cpu_us).sum();
    let per = |x: f64| {
        if accepted > 0 {
            x / accepted as f64
        } else {
            0.0
        }
    };
    p.connections = client.done;
    p.client_errors = client.errors;
    p.accepted = accepted;
    p.per_worker = workers.iter().map(|w| w.accepts).collect();
    p.wakeups_per_accept = per(vol as f64);
    p.empty_wakeups = workers.iter().map(|w| w.empty_wakeups).sum();
    p.involuntary_switches = workers.iter().map(|w| w.involuntary_switches).sum();
    p.cpu_us_per_accept = per(cpu);
    p.wall_us_per_connection = if client.done > 0 {
        client.elapsed.as_secs_f64() * 1e6 / client.done as f64
    } else {
        0.0
    };
    p.balance_cv = cv(&p.per_worker);
    let mut lat = client.latencies;
    p.latency = percentiles(&mut lat);
    let errors: Vec<String> = workers
        .iter()
        .enumerate()
        .filter_map(|(i, w)| w.error.as_ref().map(|e| format!("worker {i}: {e}")))
        .collect();
    if !errors.is_empty() {
        p.status = Status::Failed;
        p.reason = Some(errors.join("; "));
    } else if let Some(e) = client.first_error {
        p.status = Status::Failed;
        p.reason = Some(format!(
            "{} of {} connections failed; the first: {e}",
            client.errors, cfg.conns
        ));
    }
    p.worker_stats = workers;
    p
}

/// Coefficient of variation (standard deviation over mean) of counts.
fn cv(xs: &[u64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<u64>() as f64 / n;
    if mean == 0.0 {
        return 0.0;
    }
    let var = xs.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    var.sqrt() / mean
}

// ---- listeners ----

/// The listeners of a point: one shared, or one per worker for `reuseport`.
struct Listeners {
    fds: Vec<sys::OwnedFd>,
    addr: SocketAddr,
}

impl Listeners {
    fn open(mode: Mode, n: usize) -> io::Result<Listeners> {
        let count = if mode == Mode::Reuseport { n } else { 1 };
        let mut fds = Vec::with_capacity(count);
        let mut addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        for _ in 0..count {
            let mut ty = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
            if nonblocking(mode) {
                ty |= libc::SOCK_NONBLOCK;
            }
            let fd = sys::OwnedFd(sys::socket(libc::AF_INET, ty, 0)?);
            if mode == Mode::Reuseport {
                sys::setsockopt_int(fd.0, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
            }
            sys::bind(fd.0, &addr)?;
            sys::listen(fd.0, 4096)?;
            addr = sys::getsockname(fd.0)?;
            fds.push(fd);
        }
        Ok(Listeners { fds, addr })
    }

    /// The listener worker `i` waits on.
    fn for_worker(&self, i: usize) -> RawFd {
        self.fds[i % self.fds.len()].0
    }

    /// Wakes every waiter with an error: the workers' signal to stop.
    fn shut(&self) {
        for fd in &self.fds {
            let _ = sys::shutdown(fd.0, libc::SHUT_RD);
        }
    }
}

// ---- workers ----

enum Step {
    Accepted(RawFd),
    Empty,
    Stop,
}

/// What a worker waits in.
enum Waiter {
    Accept,
    Poll,
    Epoll(sys::OwnedFd),
    Uring(Box<os::UringAcceptor>),
}

impl Waiter {
    fn new(mode: Mode, l: RawFd) -> io::Result<Waiter> {
        Ok(match mode {
            Mode::Accept | Mode::Reuseport => Waiter::Accept,
            Mode::Poll => Waiter::Poll,
            Mode::Epoll | Mode::Exclusive => {
                let ep = sys::OwnedFd(sys::epoll_create1(libc::EPOLL_CLOEXEC)?);
                let mut ev = libc::EPOLLIN as u32;
                if mode == Mode::Exclusive {
                    ev |= libc::EPOLLEXCLUSIVE as u32;
                }
                sys::epoll_ctl(ep.0, libc::EPOLL_CTL_ADD, l, ev, 0)?;
                Waiter::Epoll(ep)
            }
            Mode::Uring => Waiter::Uring(Box::new(os::UringAcceptor::new(l)?)),
        })
    }

    /// Waits once, then accepts (or finds nothing, or learns the run is over).
    fn next(&mut self, l: RawFd) -> io::Result<Step> {
        let nonblocking_accept = || match sys::accept4(l, libc::SOCK_CLOEXEC) {
            Ok(fd) => Ok(Step::Accepted(fd)),
            Err(e) if sys::would_block(&e) || is_transient(&e) => Ok(Step::Empty),
            Err(_) => Ok(Step::Stop),
        };
        match self {
            Waiter::Accept => match sys::accept4(l, libc::SOCK_CLOEXEC) {
                Ok(fd) => Ok(Step::Accepted(fd)),
                Err(e) if is_transient(&e) => Ok(Step::Empty),
                Err(_) => Ok(Step::Stop),
            },
            Waiter::Poll => {
                let mut p = [libc::pollfd {
                    fd: l,
                    events: libc::POLLIN,
                    revents: 0,
                }];
                match sys::poll(&mut p, -1) {
                    Ok(_) => nonblocking_accept(),
                    Err(e) if is_transient(&e) => Ok(Step::Empty),
                    Err(e) => Err(e),
                }
            }
            Waiter::Epoll(ep) => {
                let mut evs = [libc::epoll_event { events: 0, u64: 0 }];
                match sys::epoll_wait(ep.0, &mut evs, -1) {
                    Ok(_) => nonblocking_accept(),
                    Err(e) if is_transient(&e) => Ok(Step::Empty),
                    Err(e) => Err(e),
                }
            }
            Waiter::Uring(u) => match u.accept() {
                Ok(fd) => Ok(Step::Accepted(fd)),
                Err(e) if sys::would_block(&e) || is_transient(&e) => Ok(Step::Empty),
                Err(_) => Ok(Step::Stop),
            },
        }
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR) | Some(libc::ECONNABORTED)
    )
}

/// A worker: waits and accepts until the listener is shut; `ready` is called once, just before
/// the first wait.
fn worker(mode: Mode, l: RawFd, ready: &dyn Fn()) -> WorkerStats {
    let mut st = WorkerStats::default();
    let r = (|| -> io::Result<()> {
        let mut waiter = Waiter::new(mode, l)?;
        let start = sys::getrusage(sys::Who::Thread)?;
        let mut before: Usage;
        ready();
        loop {
            // Taken before each wait: the wait that ends the run is not counted.
            before = sys::getrusage(sys::Who::Thread)?;
            st.waits += 1;
            match waiter.next(l)? {
                Step::Accepted(fd) => {
                    st.accepts += 1;
                    let _ = sys::write(fd, b"a");
                    let _ = sys::close(fd);
                }
                Step::Empty => st.empty_wakeups += 1,
                Step::Stop => break,
            }
        }
        st.waits -= 1;
        let d = before.since(&start);
        st.voluntary_switches = d.voluntary;
        st.involuntary_switches = d.involuntary;
        st.cpu_us = d.cpu.total().as_secs_f64() * 1e6;
        Ok(())
    })();
    if let Err(e) = r {
        st.error = Some(e.to_string());
    }
    st
}

fn in_threads(cfg: &Config, mode: Mode, n: usize) -> io::Result<(ClientOut, Vec<WorkerStats>)> {
    let ls = Listeners::open(mode, n)?;
    let ready = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let l = ls.for_worker(i);
        let r = ready.clone();
        let h = std::thread::Builder::new()
            .name(format!("herd-{i}"))
            .spawn(move || {
                worker(mode, l, &|| {
                    r.fetch_add(1, SeqCst);
                })
            });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                ls.shut();
                for h in handles {
                    let _ = h.join();
                }
                return Err(e);
            }
        }
    }
    let deadline = Instant::now() + cfg.timeout;
    while ready.load(SeqCst) < n && handles.iter().all(|h| !h.is_finished()) {
        if Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let client = if ready.load(SeqCst) == n {
        std::thread::sleep(cfg.settle);
        Some(drive(ls.addr, cfg))
    } else {
        None
    };
    ls.shut();
    let deadline = Instant::now() + cfg.timeout;
    while !handles.iter().all(|h| h.is_finished()) {
        if Instant::now() > deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{} workers did not stop within {:?} of the listener's shutdown",
                    handles.iter().filter(|h| !h.is_finished()).count(),
                    cfg.timeout
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let workers: Vec<WorkerStats> = handles
        .into_iter()
        .map(|h| {
            h.join().unwrap_or_else(|_| WorkerStats {
                error: Some("the worker thread panicked".into()),
                ..WorkerStats::default()
            })
        })
        .collect();
    match client {
        Some(c) => Ok((c, workers)),
        None => Err(io::Error::other(format!(
            "the workers were not ready within {:?}: {}",
            cfg.timeout,
            workers
                .iter()
                .find_map(|w| w.error.clone())
                .unwrap_or_else(|| "no error reported".into())
        ))),
    }
}

/// Reads into `buf` until it is full, EOF or `deadline`; returns the bytes read.
fn read_until(f: &mut std::fs::File, buf: &mut [u8], deadline: Instant) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let mut p = [libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        match sys::poll(&mut p, ms) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e),
        }
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn in_processes(cfg: &Config, mode: Mode, n: usize) -> io::Result<(ClientOut, Vec<WorkerStats>)> {
    crate::malloc::wait_single_threaded().map_err(io::Error::other)?;
    let ls = Listeners::open(mode, n)?;
    let (ready_r, ready_w) = sys::pipe_blocking()?;
    let (res_r, res_w) = sys::pipe_blocking()?;
    let ready_w = std::fs::File::from(ready_w);
    let res_w = std::fs::File::from(res_w);
    let mut pids = Vec::with_capacity(n);
    let kill_all = |pids: &[u32]| {
        for &pid in pids {
            let _ = sys::kill(pid, libc::SIGKILL);
            let _ = sys::wait_child(pid);
        }
    };
    for i in 0..n {
        let l = ls.for_worker(i);
        let forked = sys::fork_run(libc::SIGKILL, || {
            use std::io::Write;
            let st = worker(mode, l, &|| {
                let _ = (&ready_w).write_all(b"r");
            });
            let mut line = serde_json::to_vec(&st).unwrap_or_default();
            line.push(b'\n');
            // A line of a few hundred bytes: one atomic pipe write.
            match (&res_w).write_all(&line) {
                Ok(()) => 0,
                Err(_) => 3,
            }
        });
        match forked {
            Ok(pid) => pids.push(pid),
            Err(e) => {
                ls.shut();
                kill_all(&pids);
                return Err(e);
            }
        }
    }
    // The workers hold the write ends now: EOF once they have all ended.
    drop(ready_w);
    drop(res_w);
    let mut ready_r = std::fs::File::from(ready_r);
    let mut res_r = std::fs::File::from(res_r);
    let mut marks = vec![0u8; n];
    let got = read_until(&mut ready_r, &mut marks, Instant::now() + cfg.timeout);
    if !matches!(got, Ok(k) if k == n) {
        ls.shut();
        kill_all(&pids);
        return Err(io::Error::other(format!(
            "only {} of {n} worker processes became ready within {:?}",
            got.unwrap_or(0),
            cfg.timeout
        )));
    }
    std::thread::sleep(cfg.settle);
    let client = drive(ls.addr, cfg);
    ls.shut();
    let mut text = vec![0u8; 64 * 1024 * n.max(1)];
    let deadline = Instant::now() + cfg.timeout;
    let got = read_until(&mut res_r, &mut text, deadline).unwrap_or(0);
    let workers: Vec<WorkerStats> = String::from_utf8_lossy(&text[..got])
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if workers.len() < n {
        kill_all(&pids);
        return Err(io::Error::other(format!(
            "only {} of {n} worker processes reported within {:?} of the listener's shutdown",
            workers.len(),
            cfg.timeout
        )));
    }
    let mut failed = Vec::new();
    for &pid in &pids {
        match sys::wait_child(pid) {
            Ok(st) if st.success() => {}
            Ok(st) => failed.push(format!("worker {pid}: {st}")),
            Err(e) => failed.push(format!("worker {pid}: {e}")),
        }
    }
    if !failed.is_empty() {
        return Err(io::Error::other(failed.join("; ")));
    }
    Ok((client, workers))
}

// ---- the client ----

struct ClientOut {
    done: u64,
    errors: u64,
    first_error: Option<String>,
    latencies: Vec<u64>,
    elapsed: Duration,
}

/// The `i`-th connection's source address: 127.3.x.y, a different one for each of 65,024
/// connections in turn.
fn source(i: usize) -> SocketAddr {
    let k = i % (256 * 254);
    SocketAddr::V4(SocketAddrV4::new(
        Ipv4Addr::new(127, 3, (k / 254) as u8, (k % 254 + 1) as u8),
        0,
    ))
}

/// One connection: connect, read the worker's byte, reset. Returns the latency.
fn tap(i: usize, dst: SocketAddr, timeout: Duration) -> io::Result<Duration> {
    let t0 = Instant::now();
    let mut s = os::connect_from(&source(i), &dst)?;
    s.set_read_timeout(Some(timeout))?;
    let mut b = [0u8; 1];
    let k = s.read(&mut b)?;
    let lat = t0.elapsed();
    // RST rather than FIN: neither end keeps a TIME_WAIT.
    let _ = sys::set_linger(s.as_raw_fd(), Some(0));
    if k != 1 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the connection closed without the worker's byte",
        ));
    }
    Ok(lat)
}

fn drive(dst: SocketAddr, cfg: &Config) -> ClientOut {
    let next = AtomicUsize::new(0);
    let out = Mutex::new(ClientOut {
        done: 0,
        errors: 0,
        first_error: None,
        latencies: Vec::with_capacity(cfg.conns),
        elapsed: Duration::ZERO,
    });
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..cfg.clients {
            s.spawn(|| {
                let mut lats = Vec::new();
                let (mut errors, mut first) = (0u64, None);
                loop {
                    let i = next.fetch_add(1, SeqCst);
                    if i >= cfg.conns {
                        break;
                    }
                    match tap(i, dst, cfg.timeout) {
                        Ok(l) => lats.push(l.as_nanos() as u64),
                        Err(e) => {
                            errors += 1;
                            first.get_or_insert_with(|| e.to_string());
                        }
                    }
                }
                let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
                o.done += lats.len() as u64;
                o.latencies.extend(lats);
                o.errors += errors;
                if o.first_error.is_none() {
                    o.first_error = first;
                }
            });
        }
    });
    let mut o = out.into_inner().unwrap_or_else(|e| e.into_inner());
    o.elapsed = start.elapsed();
    o
}

/// Rounds the CLI and the experiment make by default: a round of the default sweep takes
/// about 16 s here, and the rules need at least
/// [`MIN_REPEATS`](evlab_reason::analysis::sample::MIN_REPEATS).
pub const REPEAT: usize = 5;

#[cfg(test)]
mod tests;
