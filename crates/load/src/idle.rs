//! The idle-connection holder: httperf's `idleconn` without its limits.
//!
//! The paper pre-loads the server with 10,000 idle connections so that the event mechanism must
//! track many descriptors of which few are active (paper §4.1; the LSE page's "dead"
//! connections). `idleconn` does this with `select`, so it stops at 1,024 descriptors; this holder
//! uses edge-triggered epoll (through `evlab-poll`, every syscall counted by `evlab-sys`) and goes
//! to the descriptor limit. It sends nothing, unless [`IdleConfig::request_uri`] is set: then each connection sends
//! one `GET` as soon as it is up and reads its reply, and stays idle after it — Davide Libenzi's
//! `deadconn_last`, the LSE page's "dead" connections, which a server has seen as keep-alive
//! connections waiting for their next request rather than as fresh ones waiting for their first. When the server closes (or resets) a connection, the slot is re-opened
//! at once and counted; a connect that fails is counted by cause and retried after an exponential
//! backoff with jitter, per slot, so a refusing server is never hammered in a spin.
//!
//! Source addresses: towards a loopback server, each socket is bound to an address of its own
//! pool, 127.1.0.0/16 ([`idle_source_addr`]), distinct from the load generator's, with
//! `IP_BIND_ADDRESS_NO_PORT` so that the port is chosen at connect time per 4-tuple. The idle
//! holder then never competes with `evlab load` for ephemeral ports, and neither exhausts them.
//!
//! "Up" is the client's view: the handshake completed. On Linux that happens in the kernel before
//! the server calls `accept`, as long as its listen backlog has room; a server that never accepts
//! still shows all connections up once its backlog absorbs them.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use evlab_poll::{EpollEt, Events, Interest, Poller, Token};
use evlab_sys as sys;

use crate::reply::{Progress, ReplyReader};
use crate::rng::Rng;
pub use crate::StopSignal;

/// Addresses in the idle holder's source pool (127.1.0.1 … 127.1.255.254, skipping .0 and .255).
pub const MAX_SOURCE_ADDRS: usize = 256 * 254;

/// Connections per source address when the pool size is automatic: well under the ~28,000
/// ephemeral ports Linux offers per 4-tuple family, so re-opens never run short.
pub const CONNS_PER_SOURCE_ADDR: usize = 10_000;

/// Address `k` of the idle pool: 127.1.(k / 254).(k % 254 + 1).
pub fn idle_source_addr(k: usize) -> Ipv4Addr {
    let k = k % MAX_SOURCE_ADDRS;
    Ipv4Addr::new(127, 1, (k / 254) as u8, (k % 254 + 1) as u8)
}

#[derive(Clone, Debug)]
pub struct IdleConfig {
    pub server: SocketAddr,
    /// Connections to hold.
    pub conns: usize,
    /// Source addresses from the idle pool; 0 picks `ceil(conns / 10,000)`. Used only when the
    /// server is an IPv4 loopback address (elsewhere the kernel picks the source).
    pub source_addrs: usize,
    /// Stop after this long; `None` runs until stopped.
    pub duration: Option<Duration>,
    /// Connection attempts per second (filling and re-opening); `None` is unlimited, but still
    /// at most `max_per_loop` per pass of the event loop.
    pub rate: Option<f64>,
    /// Connection attempts started per pass of the event loop.
    pub max_per_loop: usize,
    /// Connection attempts in flight at once, so the server's SYN and accept queues are not
    /// flooded (a dropped SYN costs a 1 s retransmission).
    pub max_connecting: usize,
    /// A connect that takes longer is abandoned, counted as a timeout and retried.
    pub connect_timeout: Duration,
    /// First retry delay after a failed connect; doubles per consecutive failure of a slot.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// How often `on_progress` hears a [`IdleEvent::Tick`].
    pub progress_interval: Duration,
    /// Close with RST at exit (SO_LINGER 0), leaving no TIME_WAIT behind for the next run.
    pub reset_on_exit: bool,
    /// Seeds the backoff jitter.
    pub seed: u64,
    /// Request-first mode (`deadconn_last`): each connection, once up, sends one
    /// `GET <uri> HTTP/1.1` (keep-alive) and reads its reply before it stays idle. A connection
    /// counts as up for [`IdleEvent::AllUp`] only once its reply has arrived.
    pub request_uri: Option<String>,
}

impl IdleConfig {
    pub fn new(server: SocketAddr, conns: usize) -> IdleConfig {
        IdleConfig {
            server,
            conns,
            source_addrs: 0,
            duration: None,
            rate: None,
            max_per_loop: 256,
            max_connecting: 1024,
            connect_timeout: Duration::from_secs(5),
            backoff_initial: Duration::from_millis(10),
            backoff_max: Duration::from_secs(5),
            progress_interval: Duration::from_secs(1),
            reset_on_exit: true,
            seed: 1,
            request_uri: None,
        }
    }

    /// The source addresses this configuration binds to (empty: the kernel chooses).
    pub fn source_pool(&self) -> Vec<Ipv4Addr> {
        match self.server.ip() {
            IpAddr::V4(ip) if ip.is_loopback() => {
                let k = if self.source_addrs == 0 {
                    self.conns.div_ceil(CONNS_PER_SOURCE_ADDR).max(1)
                } else {
                    self.source_addrs
                };
                (0..k.min(MAX_SOURCE_ADDRS)).map(idle_source_addr).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// Failed connection attempts, by cause (httperf's names where they exist).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdleFailures {
    /// ECONNREFUSED.
    pub refused: u64,
    /// ECONNRESET, EPIPE during the handshake.
    pub reset: u64,
    /// The connect timeout passed, or ETIMEDOUT.
    pub timeout: u64,
    /// EADDRNOTAVAIL, EADDRINUSE: no source port left.
    pub addr_unavail: u64,
    /// EMFILE, ENFILE, ENOBUFS, ENOMEM: no descriptor or memory.
    pub fd_unavail: u64,
    /// ENETUNREACH, EHOSTUNREACH.
    pub unreachable: u64,
    pub other: u64,
}

impl IdleFailures {
    pub fn total(&self) -> u64 {
        self.refused
            + self.reset
            + self.timeout
            + self.addr_unavail
            + self.fd_unavail
            + self.unreachable
            + self.other
    }

    fn count(&mut self, e: &io::Error) {
        let slot = match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => &mut self.refused,
            Some(libc::ECONNRESET | libc::EPIPE) => &mut self.reset,
            Some(libc::ETIMEDOUT) => &mut self.timeout,
            Some(libc::EADDRNOTAVAIL | libc::EADDRINUSE) => &mut self.addr_unavail,
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
                &mut self.fd_unavail
            }
            Some(libc::ENETUNREACH | libc::EHOSTUNREACH) => &mut self.unreachable,
            _ => &mut self.other,
        };
        *slot += 1;
    }
}

impl std::fmt::Display for IdleFailures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "connrefused {} connreset {} timeout {} addrunavail {} fd-unavail {} unreachable {} other {}",
            self.refused,
            self.reset,
            self.timeout,
            self.addr_unavail,
            self.fd_unavail,
            self.unreachable,
            self.other
        )
    }
}

/// Why `on_progress` is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleEvent {
    /// Every `progress_interval`.
    Tick,
    /// All connections became up (again).
    AllUp,
    /// The holder is about to close everything and return.
    Stopping,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdleStatus {
    pub event: IdleEvent,
    pub target: usize,
    pub up: usize,
    pub connecting: usize,
    /// Slots waiting to (re)connect: queued, or backing off after a failure.
    pub waiting: usize,
    /// Successful connects.
    pub opened: u64,
    /// Successful connects in a slot whose previous connection the server closed or reset.
    pub reopened: u64,
    /// Established connections the server closed (EOF).
    pub closed_by_server: u64,
    /// Established connections the server reset, or that failed with another error.
    pub reset_by_server: u64,
    pub failed: IdleFailures,
    /// Bytes the server sent on connections that send nothing (e.g. a 408 before closing), or,
    /// in request-first mode, replies included.
    pub bytes_received: u64,
    /// Request-first mode: requests sent (one per connection that came up).
    pub requests_sent: u64,
    /// Request-first mode: complete replies received, by class.
    pub replies: u64,
    pub replies_2xx: u64,
    /// Request-first mode: up connections whose reply has not (fully) arrived yet.
    pub awaiting_reply: usize,
    pub elapsed: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The stop signal (SIGINT, SIGTERM, the caller's flag).
    Stopped,
    /// `duration` passed.
    Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdleSummary {
    /// The final status (event [`IdleEvent::Stopping`]).
    pub last: IdleStatus,
    /// Most connections up at once.
    pub peak_up: usize,
    /// When all connections were first up.
    pub all_up_after: Option<Duration>,
    pub source_addrs: usize,
    pub reason: StopReason,
}

impl std::fmt::Display for IdleSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.last;
        writeln!(
            f,
            "idle: target {} up {} (peak {}) opened {} reopened {} closed-by-server {} reset-by-server {}",
            s.target, s.up, self.peak_up, s.opened, s.reopened, s.closed_by_server, s.reset_by_server
        )?;
        writeln!(f, "idle: failed {} ({})", s.failed.total(), s.failed)?;
        if s.requests_sent > 0 {
            writeln!(
                f,
                "idle: request-first: requests {} replies {} (2xx {}) awaiting {}",
                s.requests_sent, s.replies, s.replies_2xx, s.awaiting_reply
            )?;
        }
        let all = match self.all_up_after {
            Some(d) => format!("all up after {:.3} s", d.as_secs_f64()),
            None => "never all up".to_string(),
        };
        write!(
            f,
            "idle: {all}; ran {:.3} s, stopped by {}; {} source addresses; {} bytes received",
            s.elapsed.as_secs_f64(),
            match self.reason {
                StopReason::Stopped => "signal",
                StopReason::Duration => "duration",
            },
            self.source_addrs,
            s.bytes_received
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IdleError {
    #[error(
        "cannot hold {requested} connections: the open-file limit is {limit}, which leaves room \
         for at most {max} (raise the hard limit, see `ulimit -Hn`, or ask for fewer)"
    )]
    FdLimit {
        requested: usize,
        limit: u64,
        max: u64,
    },
    #[error("bad idle configuration: {0}")]
    Config(String),
    #[error("{what}: {error}")]
    Io {
        what: &'static str,
        error: io::Error,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Waiting,
    Connecting,
    Up,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    fd: RawFd,
    state: State,
    /// Bumped per socket, so a stale connect deadline is recognised.
    gen: u32,
    /// Consecutive failed attempts (backoff exponent).
    attempts: u32,
    /// Was up before: its next successful connect is a re-open.
    was_up: bool,
    /// When the current connection came up.
    up_since: Instant,
    /// Request-first mode: its request is sent and its reply not complete yet.
    awaiting: bool,
}

/// Descriptors the process needs besides the connections (epoll, stdio, the runtime's own).
const FD_RESERVE: u64 = 16;
/// Reads per readiness event before the slot is put back on a queue (edge-triggered: it must be
/// drained eventually, but one chatty server must not starve the loop).
const READS_PER_EVENT: usize = 16;
/// A connection the server closes sooner than this after it came up is re-opened after a
/// backoff, not at once.
const SHORT_LIVED: Duration = Duration::from_millis(100);
/// The loop re-checks the stop signal at least this often.
const STOP_POLL: Duration = Duration::from_millis(100);

struct Holder<'c> {
    cfg: &'c IdleConfig,
    poller: EpollEt,
    slots: Vec<Slot>,
    /// Slots to (re)connect, earliest first.
    pending: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Connect deadlines, in order (the timeout is constant, so pushes are sorted).
    deadlines: VecDeque<(Instant, usize, u32)>,
    /// Up slots that still had data to read when their read budget ran out.
    redrain: VecDeque<usize>,
    pool: Vec<Ipv4Addr>,
    rng: Rng,
    up: usize,
    connecting: usize,
    peak_up: usize,
    opened: u64,
    reopened: u64,
    closed_by_server: u64,
    reset_by_server: u64,
    failed: IdleFailures,
    bytes: u64,
    start: Instant,
    /// Request-first mode: the request bytes, and one parser per slot awaiting its reply.
    request: Option<Vec<u8>>,
    parsers: Vec<Option<Box<ReplyReader>>>,
    requests_sent: u64,
    replies: u64,
    replies_2xx: u64,
    awaiting: usize,
}

impl Holder<'_> {
    fn status(&self, event: IdleEvent) -> IdleStatus {
        IdleStatus {
            event,
            target: self.cfg.conns,
            up: self.up,
            connecting: self.connecting,
            waiting: self.cfg.conns - self.up - self.connecting,
            opened: self.opened,
            reopened: self.reopened,
            closed_by_server: self.closed_by_server,
            reset_by_server: self.reset_by_server,
            failed: self.failed,
            bytes_received: self.bytes,
            requests_sent: self.requests_sent,
            replies: self.replies,
            replies_2xx: self.replies_2xx,
            awaiting_reply: self.awaiting,
            elapsed: self.start.elapsed(),
        }
    }

    fn backoff(&mut self, attempts: u32) -> Duration {
        let exp = attempts.saturating_sub(1).min(20);
        let base = self
            .cfg
            .backoff_initial
            .saturating_mul(1 << exp)
            .min(self.cfg.backoff_max);
        // Jitter in [0.5, 1.0) of the delay keeps slots that failed together from retrying
        // together.
        base.mul_f64(0.5 + 0.5 * self.rng.f64())
    }

    /// Closes slot `i`'s socket (if any) and queues it to connect again at `at`.
    fn requeue(&mut self, i: usize, at: Instant) {
        let fd = self.slots[i].fd;
        if fd >= 0 {
            let _ = self.poller.deregister(fd);
            let _ = sys::close(fd);
        }
        if self.slots[i].awaiting {
            self.slots[i].awaiting = false;
            self.awaiting -= 1;
            self.parsers[i] = None;
        }
        let s = &mut self.slots[i];
        s.fd = -1;
        s.state = State::Waiting;
        self.pending.push(Reverse((at, i)));
    }

    /// A connect attempt of slot `i` failed with `e`.
    fn connect_failed(&mut self, i: usize, e: &io::Error, now: Instant) {
        self.failed.count(e);
        if self.slots[i].state == State::Connecting {
            self.connecting -= 1;
        }
        self.slots[i].attempts += 1;
        let delay = self.backoff(self.slots[i].attempts);
        self.requeue(i, now + delay);
    }

    fn connected(&mut self, i: usize) {
        if self.slots[i].state == State::Connecting {
            self.connecting -= 1;
        }
        let s = &mut self.slots[i];
        s.state = State::Up;
        // `attempts` is reset when this connection proves long-lived (see `lost`), so a server
        // that accepts and closes at once still meets a growing backoff.
        self.opened += 1;
        if s.was_up {
            self.reopened += 1;
        }
        s.was_up = true;
        s.up_since = Instant::now();
        self.up += 1;
        self.peak_up = self.peak_up.max(self.up);
    }

    /// Request-first mode: sends slot `i`'s request on its fresh connection. The request is a few
    /// dozen bytes into an empty socket buffer, so one write takes it all or fails.
    fn send_request(&mut self, i: usize, now: Instant) {
        let Some(req) = &self.request else { return };
        match sys::write(self.slots[i].fd, req) {
            Ok(n) if n == req.len() => {
                self.requests_sent += 1;
                self.slots[i].awaiting = true;
                self.awaiting += 1;
                self.parsers[i] = Some(Box::new(ReplyReader::new()));
            }
            // A short write into an empty buffer, or an error: treat as a lost connection.
            Ok(_) | Err(_) => self.lost(i, false, now),
        }
    }

    /// Request-first mode: feeds bytes of slot `i`'s reply; false if they were not a reply.
    fn feed_reply(&mut self, i: usize, data: &[u8]) -> bool {
        let Some(p) = self.parsers[i].as_mut() else {
            return true;
        };
        match p.feed(data) {
            Ok(Progress::More) => true,
            Ok(Progress::Done { reply, consumed }) => {
                self.replies += 1;
                if (200..300).contains(&reply.status) {
                    self.replies_2xx += 1;
                }
                self.slots[i].awaiting = false;
                self.awaiting -= 1;
                self.parsers[i] = None;
                // Anything after the one reply is unexpected; counted as bytes only.
                let _ = consumed;
                true
            }
            Err(_) => false,
        }
    }

    /// The server closed (`eof`) or reset an established connection: re-open at once, as
    /// idleconn does; unless it lived less than [`SHORT_LIVED`], which looks like a server
    /// turning connections away (at its connection limit, say), so back off as after a failure
    /// rather than spin connect–close.
    fn lost(&mut self, i: usize, eof: bool, now: Instant) {
        if eof {
            self.closed_by_server += 1;
        } else {
            self.reset_by_server += 1;
        }
        self.up -= 1;
        let at = if now.saturating_duration_since(self.slots[i].up_since) < SHORT_LIVED {
            self.slots[i].attempts += 1;
            now + self.backoff(self.slots[i].attempts)
        } else {
            self.slots[i].attempts = 0;
            now
        };
        self.requeue(i, at);
    }

    fn start_connect(&mut self, i: usize, now: Instant) {
        let server = self.cfg.server;
        let domain = if server.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        self.slots[i].gen = self.slots[i].gen.wrapping_add(1);
        let fd = match sys::socket(
            domain,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        ) {
            Ok(fd) => fd,
            Err(e) => return self.connect_failed(i, &e, now),
        };
        self.slots[i].fd = fd;
        if !self.pool.is_empty() {
            let src = self.pool[i % self.pool.len()];
            // Lets the kernel pick the port at connect time, unique per 4-tuple rather than per
            // source address; an old kernel without it still works, with fewer ports.
            let _ = sys::setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1);
            if let Err(e) = sys::bind(fd, &SocketAddr::new(IpAddr::V4(src), 0)) {
                return self.connect_failed(i, &e, now);
            }
        }
        match sys::connect(fd, &server) {
            Ok(()) => {
                // Registered after connect: a socket that has not started connecting polls as
                // HUP, which would read as a finished connect.
                if let Err(e) = self.poller.register(fd, Token(i), Interest::READABLE) {
                    return self.connect_failed(i, &e, now);
                }
                self.connected(i);
                self.send_request(i, now);
            }
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
                if let Err(e) = self.poller.register(fd, Token(i), Interest::BOTH) {
                    return self.connect_failed(i, &e, now);
                }
                self.slots[i].state = State::Connecting;
                self.connecting += 1;
                let gen = self.slots[i].gen;
                self.deadlines
                    .push_back((now + self.cfg.connect_timeout, i, gen));
            }
            Err(e) => self.connect_failed(i, &e, now),
        }
    }

    /// Reads and discards what the server sent; notices EOF and resets.
    fn drain(&mut self, i: usize, now: Instant) {
        let mut buf = [0u8; 4096];
        for _ in 0..READS_PER_EVENT {
            match sys::read(self.slots[i].fd, &mut buf) {
                Ok(0) => return self.lost(i, true, now),
                Ok(n) => {
                    self.bytes += n as u64;
                    if self.slots[i].awaiting && !self.feed_reply(i, &buf[..n]) {
                        return self.lost(i, false, now);
                    }
                }
                Err(e) if sys::would_block(&e) => return,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => return self.lost(i, false, now),
            }
        }
        self.redrain.push_back(i);
    }

    fn on_event(&mut self, i: usize, ev: &evlab_poll::Event, now: Instant) {
        if i >= self.slots.len() {
            return;
        }
        match self.slots[i].state {
            State::Waiting => {}
            State::Connecting => {
                if !(ev.writable() || ev.error()) {
                    return;
                }
                match sys::take_socket_error(self.slots[i].fd) {
                    Ok(None) => {
                        self.connected(i);
                        self.send_request(i, now);
                        if self.slots[i].state != State::Up {
                            return;
                        }
                        // Edge-triggered: a FIN that came with the handshake will not be
                        // reported again.
                        if ev.readable() {
                            self.drain(i, now);
                        }
                    }
                    Ok(Some(e)) | Err(e) => self.connect_failed(i, &e, now),
                }
            }
            State::Up => {
                if ev.readable() {
                    self.drain(i, now);
                }
            }
        }
    }

    fn close_all(&mut self) {
        for s in &mut self.slots {
            if s.fd >= 0 {
                if self.cfg.reset_on_exit && s.state == State::Up {
                    let _ = sys::set_linger(s.fd, Some(0));
                }
                let _ = sys::close(s.fd);
                s.fd = -1;
            }
        }
    }
}

impl Drop for Holder<'_> {
    fn drop(&mut self) {
        self.close_all();
    }
}

fn validate(cfg: &IdleConfig) -> Result<(), IdleError> {
    let bad = |m: String| Err(IdleError::Config(m));
    if cfg.conns == 0 {
        return bad("the number of connections must be at least 1".into());
    }
    if let Some(r) = cfg.rate {
        if !(r.is_finite() && r > 0.0) {
            return bad(format!(
                "rate {r}: must be a positive number of connections per second"
            ));
        }
    }
    if cfg.max_per_loop == 0 || cfg.max_connecting == 0 {
        return bad("max_per_loop and max_connecting must be at least 1".into());
    }
    if cfg.connect_timeout.is_zero() || cfg.progress_interval.is_zero() {
        return bad("connect timeout and progress interval must be positive".into());
    }
    if cfg.source_addrs > MAX_SOURCE_ADDRS {
        return bad(format!(
            "{} source addresses: the idle pool 127.1.0.0/16 has {MAX_SOURCE_ADDRS}",
            cfg.source_addrs
        ));
    }
    if cfg.server.port() == 0 {
        return bad("server port 0".into());
    }
    if let Some(uri) = &cfg.request_uri {
        if !uri.starts_with('/') || uri.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return bad(format!(
                "request URI {uri:?}: must be an absolute path (starting with /) without spaces or control characters"
            ));
        }
    }
    Ok(())
}

/// The descriptors `cfg.conns` connections need fit under the open-file limit (raised to its
/// hard limit first).
fn check_fd_limit(cfg: &IdleConfig) -> Result<(), IdleError> {
    let limit = evlab_sys::raise_fd_limit().map_err(|error| IdleError::Io {
        what: "cannot read the open-file limit",
        error,
    })?;
    if cfg.conns as u64 + FD_RESERVE > limit {
        return Err(IdleError::FdLimit {
            requested: cfg.conns,
            limit,
            max: limit.saturating_sub(FD_RESERVE),
        });
    }
    Ok(())
}

/// The token bucket of [`IdleConfig::rate`]: connects start as tokens accrue, at most a
/// twentieth of a second's worth in a burst. Without a rate it limits nothing.
struct Pacer {
    rate: Option<f64>,
    burst: f64,
    tokens: f64,
    last_refill: Instant,
}

impl Pacer {
    fn new(rate: Option<f64>, start: Instant) -> Pacer {
        let burst = rate.map_or(0.0, |r| (r / 20.0).max(1.0));
        Pacer {
            rate,
            burst,
            tokens: burst.min(1.0),
            last_refill: start,
        }
    }

    /// Adds the tokens accrued since the last refill.
    fn refill(&mut self, now: Instant) {
        if let Some(rate) = self.rate {
            let accrued = rate * now.duration_since(self.last_refill).as_secs_f64();
            self.tokens = (self.tokens + accrued).min(self.burst);
            self.last_refill = now;
        }
    }

    /// `budget` connects, or fewer if there are fewer whole tokens.
    fn limit(&self, budget: usize) -> usize {
        if self.rate.is_some() {
            budget.min(self.tokens as usize)
        } else {
            budget
        }
    }

    fn spend(&mut self, started: usize) {
        if self.rate.is_some() {
            self.tokens -= started as f64;
        }
    }

    /// How long until a connect that is due may start, when the in-flight cap has room: until
    /// the next token; or no time, when the pass's budget ran out with more to start.
    fn wait(&self) -> Duration {
        match self.rate {
            Some(rate) if self.tokens < 1.0 => Duration::from_secs_f64((1.0 - self.tokens) / rate),
            _ => Duration::ZERO,
        }
    }
}

impl<'c> Holder<'c> {
    /// A holder of `cfg.conns` slots, every one due to connect at `start`.
    fn new(cfg: &'c IdleConfig, poller: EpollEt, start: Instant) -> Holder<'c> {
        Holder {
            cfg,
            poller,
            slots: vec![
                Slot {
                    fd: -1,
                    state: State::Waiting,
                    gen: 0,
                    attempts: 0,
                    was_up: false,
                    up_since: start,
                    awaiting: false,
                };
                cfg.conns
            ],
            pending: (0..cfg.conns).map(|i| Reverse((start, i))).collect(),
            deadlines: VecDeque::new(),
            redrain: VecDeque::new(),
            pool: cfg.source_pool(),
            rng: Rng::new(cfg.seed),
            up: 0,
            connecting: 0,
            peak_up: 0,
            opened: 0,
            reopened: 0,
            closed_by_server: 0,
            reset_by_server: 0,
            failed: IdleFailures::default(),
            bytes: 0,
            start,
            request: cfg.request_uri.as_ref().map(|uri| {
                format!(
                    "GET {uri} HTTP/1.1\r\nHost: {}\r\nUser-Agent: evlab-idle\r\n\r\n",
                    cfg.server
                )
                .into_bytes()
            }),
            parsers: if cfg.request_uri.is_some() {
                (0..cfg.conns).map(|_| None).collect()
            } else {
                Vec::new()
            },
            requests_sent: 0,
            replies: 0,
            replies_2xx: 0,
            awaiting: 0,
        }
    }

    /// Connects that took too long: abandoned, counted as timeouts, retried after a backoff.
    fn expire_connects(&mut self, now: Instant) {
        while let Some(&(deadline, i, gen)) = self.deadlines.front() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_front();
            if self.slots[i].gen == gen && self.slots[i].state == State::Connecting {
                let e = io::Error::from_raw_os_error(libc::ETIMEDOUT);
                self.connect_failed(i, &e, now);
            }
        }
    }

    /// Up slots with more to read, at most `max_per_loop` of them per pass.
    fn drain_again(&mut self, now: Instant) {
        for _ in 0..self.redrain.len().min(self.cfg.max_per_loop) {
            if let Some(i) = self.redrain.pop_front() {
                if self.slots[i].state == State::Up {
                    self.drain(i, now);
                }
            }
        }
    }

    /// New connects, bounded per pass, by the in-flight cap and by the rate.
    fn start_due(&mut self, pacer: &mut Pacer, now: Instant) {
        pacer.refill(now);
        let budget = pacer.limit(
            self.cfg
                .max_per_loop
                .min(self.cfg.max_connecting.saturating_sub(self.connecting)),
        );
        let mut started = 0;
        while started < budget {
            match self.pending.peek() {
                Some(&Reverse((at, i))) if at <= now => {
                    self.pending.pop();
                    self.start_connect(i, now);
                    started += 1;
                }
                _ => break,
            }
        }
        pacer.spend(started);
    }

    /// How long the next wait may last: no longer than the next thing to do (a progress tick,
    /// the end, a connect deadline, a slot to drain again, a connect due).
    fn wait_timeout(
        &self,
        pacer: &Pacer,
        next_tick: Instant,
        end: Option<Instant>,
        now: Instant,
    ) -> Duration {
        let mut timeout = STOP_POLL.min(next_tick.saturating_duration_since(now));
        if let Some(e) = end {
            timeout = timeout.min(e.saturating_duration_since(now));
        }
        if let Some(&(deadline, _, _)) = self.deadlines.front() {
            timeout = timeout.min(deadline.saturating_duration_since(now));
        }
        if !self.redrain.is_empty() {
            timeout = Duration::ZERO;
        }
        if let Some(&Reverse((at, _))) = self.pending.peek() {
            if at > now {
                timeout = timeout.min(at - now);
            } else if self.connecting < self.cfg.max_connecting {
                timeout = timeout.min(pacer.wait());
            }
            // else: the in-flight cap is full; connects finishing will wake the wait.
        }
        timeout
    }
}

/// Holds `cfg.conns` idle connections to `cfg.server` until `stop` says so or `cfg.duration`
/// passes, then closes them all and returns what happened. `on_progress` hears a tick every
/// `progress_interval`, each time all connections become up, and once before returning.
pub fn run_idle(
    cfg: &IdleConfig,
    stop: &(impl StopSignal + ?Sized),
    mut on_progress: impl FnMut(&IdleStatus),
) -> Result<IdleSummary, IdleError> {
    validate(cfg)?;
    check_fd_limit(cfg)?;
    let poller = EpollEt::new().map_err(|error| IdleError::Io {
        what: "cannot create the epoll instance",
        error,
    })?;
    let start = Instant::now();
    let mut h = Holder::new(cfg, poller, start);
    let end = cfg.duration.map(|d| start + d);
    let mut next_tick = start + cfg.progress_interval;
    let mut pacer = Pacer::new(cfg.rate, start);
    let mut all_up_reported = false;
    let mut all_up_after = None;
    let mut events = Events::with_capacity(1024);

    let reason = loop {
        if stop.should_stop() {
            break StopReason::Stopped;
        }
        let now = Instant::now();
        if end.is_some_and(|e| now >= e) {
            break StopReason::Duration;
        }
        h.expire_connects(now);
        h.drain_again(now);
        h.start_due(&mut pacer, now);

        if h.up == cfg.conns && h.awaiting == 0 {
            if !all_up_reported {
                all_up_reported = true;
                all_up_after.get_or_insert(start.elapsed());
                on_progress(&h.status(IdleEvent::AllUp));
            }
        } else {
            all_up_reported = false;
        }
        if now >= next_tick {
            on_progress(&h.status(IdleEvent::Tick));
            next_tick = (next_tick + cfg.progress_interval).max(now);
        }

        let timeout = h.wait_timeout(&pacer, next_tick, end, now);
        h.poller
            .wait(&mut events, Some(timeout))
            .map_err(|error| IdleError::Io {
                what: "epoll_wait",
                error,
            })?;
        let now = Instant::now();
        for ev in events.iter() {
            h.on_event(ev.token.0, ev, now);
        }
    };

    let last = h.status(IdleEvent::Stopping);
    on_progress(&last);
    h.close_all();
    Ok(IdleSummary {
        last,
        peak_up: h.peak_up,
        all_up_after,
        source_addrs: h.pool.len(),
        reason,
    })
}

#[cfg(test)]
mod tests;
