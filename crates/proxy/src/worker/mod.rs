//! One proxy worker: an event loop generic over its [`Engine`] (a readiness mechanism, or the
//! io_uring completion engine). It waits and makes every transfer through it; under the
//! completion engine, "in flight" ([`pending`]) clears readiness as EAGAIN does, and a short
//! read proves nothing (`Engine::COMPLETION`).
//!
//! A client connection goes through these phases, one request at a time (pipelined requests
//! wait in its input buffer and are answered in order, as nginx and HAProxy do):
//!
//! - `Idle`: parse the requests buffered. A cache hit or an error is answered at once (its
//!   bytes queued behind whatever is still being sent); a miss takes an origin connection
//!   (an idle one from the pool, or a new one) and moves to `Fetch`.
//! - `Fetch`: the request is written to the origin (with the body bytes that came with its
//!   head; a body with more to come is then read from the client a batch at a time and
//!   written on, a chunked one scanned strictly as it passes) and, once all of it is sent, its
//!   response head read and parsed. A
//!   pooled connection that fails before any byte of the answer (the origin closed it while
//!   idle) is replaced by a fresh one and the request sent again, once; otherwise the client
//!   gets 502 (504 after `--timeout`).
//! - `Body`: the head, rewritten, is queued for the client with whatever body bytes came with
//!   it, and the rest of the body moves by the forwarding mode: through a user-space buffer
//!   (copy), or origin → pipe → client (splice), with a tee'd second pipe read into the cache
//!   (splice-keep), or through a pipe sized for the body that may carry the head ahead of it
//!   (splice-release). When it is all received and sent, the origin connection goes back to
//!   the pool (if the origin keeps it, and, but in splice-release, if nothing follows the body
//!   in its socket) and the client back to `Idle`.
//! - `Lingering`: the proxy closed its side after a `Connection: close`; it reads and
//!   discards until the client closes, so that its last response is not destroyed by a reset.
//! - `Tunnel`: a CONNECT to a target of `--allow-connect`; bytes are relayed both ways (a
//!   pipe each way in the splice modes, a buffer each way in copy mode), and each side's EOF
//!   is passed on as a shutdown of the other once what it sent is through.
//!
//! Readiness is kept per descriptor (readable, writable), set by events and cleared by EAGAIN
//! or a short transfer, so the same code serves level- and edge-triggered mechanisms: after
//! each event the connection and its origin are driven as far as they can go, then the
//! interest each still needs is registered (a syscall for epoll-lt, free for the others). A
//! connection that could go on after a bounded amount of work is driven again in the next turn
//! without waiting, so one large transfer cannot starve the others.
//!
//! This file holds the worker's state, its loop and the dispatch of events to connections. The
//! rest is one room per job, each an `impl Worker` of its own:
//! - `client`: accepting, reading requests in, writing responses out, lingering, errors;
//! - `request`: a request parsed and dispatched, and its body pulled from the client;
//! - `cache_path`: hits, and what a response stored in the cache keeps;
//! - `origins`: the origin pool;
//! - `response`: the request sent, the response head parsed, the exchange finished;
//! - `modes`: the forwarding modes (copy, splice, splice-keep, splice-release) and pipes;
//! - `tunnel`: CONNECT tunnels;
//! - `timeouts`: each client's deadline and what its expiry answers;
//! - `log`: the access log's lines.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use evlab_http::{
    parse_proxy_request, parse_response_head, push_via, write_error, write_forward_request,
    write_head, ChunkedScanner, DateCache, ForwardOptions, Framing, ProxyParse, RequestBody,
    RequestFacts, ResponseHead, ResponseParse, Status,
};
use evlab_poll::{Events, Interest};
use evlab_runtime::ServiceState;
use evlab_runtime::{
    earliest, AcceptFailure, BufPool, Deadlines, Gate, Ready, Spares, Timeouts, Timer, Trim, Waker,
    ACCEPT_RETRY,
};
use evlab_sys as sys;

use crate::access_log::{request_words, CacheMark, Entry, LogBuf};
use crate::cache::{Object, ObjectCache};
use crate::engine::{pending, Engine, Part, Role, Unasked};
use crate::pipes::{Pipe, PipePool};
use crate::stats::{Shared, WorkerStats};
use crate::{Config, ForwardMode, RELEASE_PIPE_MAX};

mod cache_path;
mod client;
mod log;
mod modes;
mod origins;
mod request;
mod response;
mod timeouts;
mod tunnel;

#[cfg(test)]
mod rig;

use modes::{mode_name, scan_chunks, src_pipe};
use request::unsent_body;
use response::connection_field;

/// The path the proxy answers itself with `--stats`.
pub const STATS_PATH: &str = "/.evlab/stats";
/// In the splice modes, the first read of a response takes at most this much, so that most of
/// a body is left in the socket to be spliced (the paper's Squid read 2,896 bytes).
const HEAD_READ_SPLICE: usize = 4096;
/// The most output splice-release puts into a body's pipe ahead of the body (a head and the
/// body bytes read with it, 4 KiB and its rewriting; more is sent as it is).
const HEAD_IN_PIPE_MAX: usize = 16 * 1024;
/// Stop answering pipelined requests while this much output waits for the client.
const OUT_HIGH_WATER: usize = 256 * 1024;
/// Cached bodies up to this size are copied behind their head (one write); larger ones are
/// sent from the cached object.
const COPY_HIT_MAX: usize = 16 * 1024;
/// Steps one connection may take per event before others get their turn.
const DRIVE_BUDGET: usize = 32;
/// Closed clients' shells kept for reuse.
const SPARES_MAX: usize = 1024;
/// Copy buffers the pool keeps at most (each up to twice `--buffer-size`).
const POOL_BUFFERS: usize = 256;
/// How long an origin connection stays in the idle pool before the completion engine watches
/// it (`Engine::watch_idle`). A connection taken again sooner is looked at before its request
/// instead (`Engine::unasked`, as every reused one is), so what it sent meanwhile is caught all
/// the same; watching at once would cost a poll armed and cancelled per request on a busy
/// connection. Readiness mechanisms watch through their registration and ignore this.
const IDLE_WATCH_DELAY: Duration = Duration::from_millis(10);
/// How late a worker with nothing else to do may wake to arm an idle watch that is due. A
/// busy worker arms it at the end of its first turn past the delay; a wait never ends for it
/// sooner than this, since a timer that is due soon is the earliest of the CPU's and is
/// programmed, and cancelled, on every wait (a costly exit on a virtual machine).
const IDLE_WATCH_SLACK: Duration = Duration::from_secs(1);

/// What is known of a descriptor's readiness, and the interest registered for it.
#[derive(Debug)]
struct Flags {
    readable: bool,
    writable: bool,
    /// The peer shut down its side: read on to EOF, a short read proves nothing.
    peer_closed: bool,
    /// Hung up or in error: whatever is still to be read, nothing more will come.
    hup: bool,
    interest: Interest,
}

impl Flags {
    fn new(interest: Interest, writable: bool) -> Flags {
        Flags {
            readable: false,
            writable,
            peer_closed: false,
            hup: false,
            interest,
        }
    }
}

/// A connection to the origin.
#[derive(Debug)]
struct Origin {
    fd: RawFd,
    f: Flags,
    /// Taken from the idle pool (so it may have been closed by the origin meanwhile).
    reused: bool,
    /// Its connect is under way since then (`--connect-timeout` runs); `None` once it is up.
    connecting_since: Option<Instant>,
    /// The cache key of the last response read from it that was stored: if the origin then
    /// sends bytes nobody asked for, that response is suspect and dropped from the cache.
    stored: Option<Box<str>>,
    /// The turn of the loop in which it was last seen to hold nothing unasked; checked again
    /// before a request only after a wait (anything arriving since would be an event).
    quiet_turn: u64,
    /// The turn in which a read from it came back short: the socket was empty then, so the
    /// end of a body needs no syscall to show that nothing follows it (readiness only: a
    /// completion's short read proves nothing).
    drained_turn: u64,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    /// A request body read whole before the origin is contacted (`--request-buffering`).
    Buffer,
    Fetch,
    Body,
    Lingering,
    /// A CONNECT tunnel: bytes relayed both ways until both sides have ended.
    Tunnel,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Mode {
    Copy,
    Splice,
    SpliceKeep,
    /// Splice through a pipe sized for the declared length (`splice-release`).
    Release,
}

/// A response body on its way from the origin to the client.
#[derive(Debug)]
struct Xfer {
    mode: Mode,
    framing: Framing,
    /// Length-delimited: bytes still to receive from the origin.
    left: u64,
    scanner: ChunkedScanner,
    /// Chunked, to an HTTP/1.0 client: the chunks' data only is passed on, and the end of the
    /// body is the close of the connection.
    dechunk: bool,
    /// Copy: bytes read from the origin; `buf[sent..]` not yet written to the client. When the
    /// body is kept for the cache (`keep_in_buf`), this is the object itself and is never
    /// cleared; otherwise it starts over once written.
    buf: Vec<u8>,
    sent: usize,
    keep_in_buf: bool,
    /// Splice-keep: the object's body, read from the tee'd pipe.
    keep: Vec<u8>,
    /// Splice-keep: bytes tee'd into the second pipe not yet read out of the first.
    keep_due: usize,
    /// Splice: the origin's bytes go in here. Splice-keep: they are tee'd from here into `tee`,
    /// then read out of here into `keep`.
    pipe: Option<Pipe>,
    tee: Option<Pipe>,
    /// Splice-release: the head is in the pipe ahead of the body, held there until the
    /// splice from the origin in flight (or about to be made) has brought the body's next
    /// bytes, so that head and body leave in one splice (see `head_into_pipe`).
    head_held: bool,
    /// A splice from the origin is in flight (completion engine): its result is to come.
    filling: bool,
    /// Everything of the body has been received.
    in_done: bool,
    /// The origin failed before the body's end: send what arrived, then close the client.
    failed: bool,
    /// The origin connection may serve another request afterwards.
    reusable: bool,
    /// What the cache stores, if the object is cacheable.
    store: Option<Store>,
    /// Bytes of the worker's `--keep-bytes` this body reserved (its length, if kept).
    reserved: u64,
}

impl Xfer {
    /// A body framed by `framing`, not begun: copied until a mode is chosen for it.
    fn new(framing: Framing, dechunk: bool, reusable: bool) -> Xfer {
        Xfer {
            mode: Mode::Copy,
            framing,
            left: 0,
            scanner: ChunkedScanner::new(),
            dechunk,
            buf: Vec::new(),
            sent: 0,
            keep_in_buf: false,
            keep: Vec::new(),
            keep_due: 0,
            pipe: None,
            tee: None,
            head_held: false,
            filling: false,
            in_done: false,
            failed: false,
            reusable,
            store: None,
            reserved: 0,
        }
    }
}

#[derive(Debug)]
struct Store {
    /// The URL it is stored for.
    key: Box<str>,
    /// The request fields its `Vary` names (empty: none).
    vary: Vec<String>,
    status: u16,
    validators: bool,
    never_stale: bool,
    head: Box<[u8]>,
    last_modified: Option<SystemTime>,
    fresh_for: Duration,
    /// The response's `Age` when it arrived (0 without one).
    age: u64,
    shared: bool,
}

/// A request body on its way from the client to the origin (always through `Exchange::req`:
/// see docs/proxy-internals.md, "Request bodies").
#[derive(Debug)]
struct ReqBody {
    /// Content-Length: bytes still to come from the client; chunked: `None`.
    left: Option<u64>,
    /// Chunked: where the body ends (strict: what the origin might read otherwise is a 400).
    scanner: ChunkedScanner,
    /// Every byte of it has been taken from the client (and is in `req` or sent).
    done: bool,
}

/// One request forwarded to the origin, and its response.
#[derive(Debug)]
struct Exchange {
    origin: Option<Origin>,
    /// Only a fresh connection will do (a pooled one failed for this request already).
    fresh_only: bool,
    /// What goes to the origin: the head and the body bytes that came with it, then each
    /// further batch of the body read from the client.
    req: Vec<u8>,
    req_pos: usize,
    req_body: Option<ReqBody>,
    /// `req` was refilled from the client: what was sent before is gone, so the request
    /// cannot be sent again on another connection.
    streamed: bool,
    head_request: bool,
    client_minor: u8,
    client_keep: bool,
    /// The response may be stored for this URL.
    store_key: Option<Box<str>>,
    /// What the request says about sharing its response (Authorization, Cookie).
    req_facts: RequestFacts,
    /// The client's own preconditions, for an answer from the cache.
    cond: Cond,
    /// An unsafe request's target: once its answer is not an error, what is stored for it,
    /// and for the same-origin `Location` and `Content-Location` of the answer, is dropped
    /// (RFC 9111 §4.4).
    invalidate: Option<Box<str>>,
    /// A stored response being validated by this request (sent with its validators): a 304
    /// freshens it and it answers the client; any other answer replaces it.
    revalidating: Option<Rc<Object>>,
    retried: bool,
    got_bytes: bool,
    /// The last read of the response head filled all it asked for: more of the response
    /// waits in the socket behind it.
    head_full: bool,
    /// The origin's bytes while the head is incomplete.
    resp: Vec<u8>,
    body: Option<Xfer>,
}

/// What a client's conditional request says a cached answer must be tested against.
#[derive(Debug, Default)]
struct Cond {
    ims: Option<SystemTime>,
    inm: Option<Box<[u8]>>,
}

/// A client connection.
#[derive(Debug)]
struct Client {
    fd: RawFd,
    id: u32,
    f: Flags,
    phase: Phase,
    /// Input not yet answered.
    rbuf: Vec<u8>,
    /// Output for the client: heads, small bodies, error responses.
    out: Vec<u8>,
    out_pos: usize,
    /// A cached body being sent after `out`.
    hit: Option<(Rc<Object>, usize)>,
    x: Option<Box<Exchange>>,
    /// More input is needed before the next request can be answered.
    need_input: bool,
    peer_eof: bool,
    /// Close once the responses queued are out.
    close_after: bool,
    /// Its one deadline: the first of the clocks below that runs out (see `Worker::rearm`).
    timer: Timer,
    /// The last progress either way (`--timeout`).
    progress_at: Instant,
    /// Waiting for a request head since then (`--header-timeout`, a total time).
    head_since: Option<Instant>,
    /// Output waits for it; the last write that made progress, or when output began to wait
    /// (`--send-timeout`).
    send_since: Option<Instant>,
    /// Who connected (from accept4, or asked once when first needed).
    peer: Option<SocketAddr>,
    /// `peer`'s address as `X-Forwarded-For` gives it, written once per connection.
    xff: Option<Box<str>>,
    tunnel: Option<Box<Tunnel>>,
    /// Bytes written to it so far (the access log's offsets; a tunnel's are added at its end).
    written: u64,
    /// With the access log: its requests whose lines are not written yet, oldest first.
    log: VecDeque<Entry>,
}

/// Bytes relayed one way through a CONNECT tunnel: through a buffer, or a pipe (splice modes).
#[derive(Debug, Default)]
struct Pump {
    buf: Vec<u8>,
    pos: usize,
    pipe: Option<Pipe>,
    /// The source has ended (EOF): once the bytes held are out, the destination is shut.
    eof: bool,
    /// The destination's sending side has been shut.
    shut: bool,
    /// Bytes written to the destination.
    sent: u64,
}

impl Pump {
    fn held(&self) -> usize {
        self.buf.len() - self.pos + self.pipe.as_ref().map_or(0, |p| p.len)
    }
}

/// A CONNECT tunnel: the connection to the target, and a pump each way.
#[derive(Debug)]
struct Tunnel {
    target: Origin,
    /// The connection to the target is up and the client has been told so.
    established: bool,
    up: Pump,
    down: Pump,
}

enum Slot {
    Free,
    Client(Box<Client>),
    /// Being driven (taken out of the table for the while).
    Busy,
    /// An origin connection serving the client on this descriptor.
    Origin(RawFd),
    /// An origin connection idle in the pool, with the serial number of this stay there (see
    /// `idle_watch`).
    Idle(u64),
}

/// The connection must be closed.
struct Close;

type Step = Result<bool, Close>;

pub(crate) struct Worker<E: Engine> {
    engine: E,
    events: Events,
    edge: bool,
    listen_fd: RawFd,
    waker: Waker,
    cfg: Arc<Config>,
    shared: Arc<Shared>,
    stats: Arc<WorkerStats>,
    now: Instant,
    date: DateCache,
    cache: ObjectCache,
    pipes: PipePool,
    bufs: BufPool,
    slots: Vec<Slot>,
    idle: Vec<Origin>,
    /// Completion engines only: the idle origin connections to watch, each at its time
    /// ([`IDLE_WATCH_DELAY`] after it went idle; so in order), with the serial number of that
    /// stay (`Slot::Idle`). An entry whose connection left the pool meanwhile is dropped.
    idle_watch: VecDeque<(Instant, RawFd, u64)>,
    idle_serial: u64,
    /// Closed clients' shells, boxed as in the table so they move without copying.
    spares: Spares<Box<Client>>,
    timers: Deadlines,
    timeouts: Timeouts,
    /// When the pools next give back what sat unused (as the server's workers do).
    trim: Trim,
    /// Clients to drive again this turn without an event (their budget ran out).
    again: Vec<(RawFd, u32)>,
    next_id: u32,
    /// The accept gate, the clients open and the shutdown.
    gate: Gate,
    /// Waits so far: what happened "in this turn" happened with no wait in between.
    turn: u64,
    /// Bytes reserved by the objects being received for the cache (`--keep-bytes`).
    keeping: u64,
    /// The access log's lines not written yet (`None`: no log).
    log: Option<LogBuf>,
}

/// Runs a worker on engine `E` until shutdown.
pub(crate) fn run<E: Engine>(
    listen_fd: RawFd,
    cfg: Arc<Config>,
    shared: Arc<Shared>,
    ready: Ready,
) -> io::Result<()> {
    let made = Worker::<E>::new(listen_fd, cfg, shared.clone());
    ready.report(&made);
    let mut w = made?;
    let r = w.run();
    w.teardown();
    r
}

impl<E: Engine> Worker<E> {
    fn new(listen_fd: RawFd, cfg: Arc<Config>, shared: Arc<Shared>) -> io::Result<Worker<E>> {
        let mut engine = E::new()?;
        let mut waker = Waker::new()?;
        let registered = engine.watch(waker.rx, Interest::READABLE).and_then(|()| {
            engine.adopt(listen_fd, Role::Listener);
            engine.watch(listen_fd, Interest::READABLE)
        });
        if let Err(e) = registered {
            waker.close();
            return Err(e);
        }
        let stats = Arc::new(WorkerStats::for_this_thread());
        shared.registry.add(stats.clone(), &waker);
        let edge = engine.edge_triggered();
        let mut date = DateCache::new();
        let now = Instant::now();
        date.tick(now);
        let mut bufs = BufPool::default();
        *engine.bufs(&mut bufs) = BufPool::new(
            cfg.buffer_size,
            2 * cfg.buffer_size,
            POOL_BUFFERS * cfg.buffer_size,
        );
        Ok(Worker {
            events: Events::with_capacity(cfg.events_per_wait),
            engine,
            edge,
            listen_fd,
            waker,
            now,
            date,
            cache: ObjectCache::new(cfg.cache_bytes, cfg.cache_max_object),
            pipes: PipePool::new(cfg.pipes, cfg.pipe_size),
            bufs,
            slots: Vec::new(),
            idle: Vec::new(),
            idle_watch: VecDeque::new(),
            idle_serial: 0,
            spares: Spares::new(SPARES_MAX),
            timers: Deadlines::new(),
            trim: Trim::new(now),
            timeouts: Timeouts {
                header: cfg.header_timeout,
                send: cfg.send_timeout,
            },
            again: Vec::new(),
            next_id: 0,
            gate: Gate::new(cfg.max_conns),
            turn: 1,
            keeping: 0,
            log: cfg.access_log.clone().map(LogBuf::new),
            stats,
            shared,
            cfg,
        })
    }

    fn run(&mut self) -> io::Result<()> {
        if self.shared.shutdown_requested() {
            self.begin_shutdown();
        }
        while !self.gate.done(self.now) {
            let timeout = self.wait_timeout();
            self.turn(timeout)?;
        }
        Ok(())
    }

    /// One turn of the loop: a wait of at most `timeout`, every event handled, the clients
    /// whose budget ran out driven again, new connections accepted, deadlines expired, pools
    /// trimmed, stats published and the access log flushed when due.
    #[inline]
    fn turn(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.engine.wait(&mut self.events, timeout)?;
        self.now = Instant::now();
        self.turn += 1;
        self.date.tick(self.now);
        let mut accept_now = false;
        for i in 0..self.events.len() {
            let ev = self.events.as_slice()[i];
            let fd = ev.token.0 as RawFd;
            if fd == self.listen_fd {
                accept_now |= ev.readable();
            } else if fd == self.waker.rx {
                let woken = ev.readable() && self.waker.drain();
                if woken || self.shared.shutdown_requested() {
                    self.begin_shutdown();
                }
            } else {
                self.on_event(fd, ev);
            }
        }
        let again = std::mem::take(&mut self.again);
        for (fd, id) in again {
            if matches!(self.slots.get(fd as usize), Some(Slot::Client(c)) if c.id == id) {
                self.drive_client(fd);
            }
        }
        if accept_now && self.gate.open() {
            self.accept_ready()?;
        }
        self.expire();
        let bufs = self.engine.bufs(&mut self.bufs);
        self.trim
            .run(self.now, bufs, &mut self.spares, &mut self.timers);
        self.publish();
        if let Some(l) = self.log.as_mut().filter(|l| l.due(self.now)) {
            l.flush();
        }
        Ok(())
    }

    fn wait_timeout(&self) -> Option<Duration> {
        if !self.again.is_empty() {
            return Some(Duration::ZERO);
        }
        let first = earliest(self.timers.next(), self.gate.wake_at(self.now));
        let first = earliest(first, self.log.as_ref().and_then(|l| l.deadline()));
        // Watches due are armed at the end of any turn; a wait for one alone is coarse (see
        // `IDLE_WATCH_SLACK`).
        let first = earliest(
            first,
            self.idle_watch.front().map(|w| w.0 + IDLE_WATCH_SLACK),
        );
        first.map(|t| t.saturating_duration_since(self.now))
    }

    /// Copies the pools' and the mechanism's counts into the shared stats.
    fn publish(&self) {
        let st = &self.stats;
        st.poller.set(&self.engine.stats());
        let c = &self.cache.counts;
        st.cache_stored.set(c.stored);
        st.cache_evicted.set(c.evicted);
        st.cache_expired.set(c.expired);
        st.cache_rejected.set(c.rejected);
        st.cache_objects.set(self.cache.len() as u64);
        st.cache_bytes.set(self.cache.bytes());
        st.cache_keeping.set(self.keeping);
        let p = &self.pipes.counts;
        st.pipes_created.set(p.created);
        st.pipes_closed_with_data.set(p.closed_with_data);
        st.pipes_max_open.set(p.max_open);
        st.pipes_open.set(self.pipes.open() as u64);
        st.pipes_idle.set(self.pipes.idle() as u64);
        st.origin_idle.set(self.idle.len() as u64);
    }

    /// The buffer pool (the engine's when it has one: see `Engine::bufs`).
    fn pool(&mut self) -> &mut BufPool {
        self.engine.bufs(&mut self.bufs)
    }

    /// A buffer of --buffer-size from the pool.
    fn take_buffer(&mut self) -> Vec<u8> {
        let n = self.cfg.buffer_size;
        self.pool().take(n)
    }

    fn slot(&mut self, fd: RawFd) -> &mut Slot {
        let i = fd as usize;
        if i >= self.slots.len() {
            self.slots
                .resize_with((i + 1).next_power_of_two(), || Slot::Free);
        }
        &mut self.slots[i]
    }

    fn on_event(&mut self, fd: RawFd, ev: evlab_poll::Event) {
        let set = |f: &mut Flags| {
            f.readable |= ev.readable();
            f.writable |= ev.writable();
            f.peer_closed |= ev.peer_closed();
            f.hup |= ev.hup() || ev.error();
        };
        match self.slots.get_mut(fd as usize) {
            Some(Slot::Client(c)) => {
                // A tunnel reads on to the client's EOF: its last bytes may be in the socket.
                if (ev.hup() || ev.error()) && c.phase != Phase::Tunnel {
                    // Reset, or both directions shut: nothing can be sent any more.
                    let c = self.take_client(fd).expect("a client");
                    self.close_client(c);
                    return;
                }
                set(&mut c.f);
                self.drive_client(fd);
            }
            Some(Slot::Origin(cfd)) => {
                let cfd = *cfd;
                if let Some(Slot::Client(c)) = self.slots.get_mut(cfd as usize) {
                    if let Some(o) = c.x.as_mut().and_then(|x| x.origin.as_mut()) {
                        if o.fd == fd {
                            set(&mut o.f);
                        }
                    }
                    if let Some(t) = c.tunnel.as_mut() {
                        if t.target.fd == fd {
                            set(&mut t.target.f);
                        }
                    }
                    self.drive_client(cfd);
                }
            }
            Some(Slot::Idle(_)) => self.check_idle(fd),
            _ => {} // stale: closed earlier in this batch
        }
    }

    fn take_client(&mut self, fd: RawFd) -> Option<Box<Client>> {
        match std::mem::replace(self.slot(fd), Slot::Busy) {
            Slot::Client(c) => Some(c),
            other => {
                *self.slot(fd) = other;
                None
            }
        }
    }

    fn drive_client(&mut self, fd: RawFd) {
        let Some(mut c) = self.take_client(fd) else {
            return;
        };
        let r = self.drive(&mut c);
        if !c.log.is_empty() {
            self.log_done(&mut c, false);
        }
        match r {
            Ok(more) => {
                if more {
                    self.again.push((c.fd, c.id));
                }
                if self.set_interest(&mut c) {
                    self.rearm(&mut c);
                    *self.slot(fd) = Slot::Client(c);
                } else {
                    self.stats.conns.io_errors.inc();
                    self.close_client(c);
                }
            }
            Err(Close) => self.close_client(c),
        }
    }

    // ---- accepting and closing ----

    // ---- deadlines ----

    // ---- origin connections ----

    // ---- request bodies ----

    // ---- CONNECT tunnels ----

    // ---- driving a client ----

    /// Advances the client (and its exchange) as far as readiness allows. Ok(true): the
    /// budget ran out with work left.
    fn drive(&mut self, c: &mut Client) -> Result<bool, Close> {
        for _ in 0..DRIVE_BUDGET {
            let mut progress = false;
            match c.phase {
                Phase::Lingering => return self.linger(c).map(|_| false),
                Phase::Idle => {
                    progress |= self.answer(c)?;
                    if c.phase == Phase::Idle && self.wants_input(c) && c.f.readable {
                        progress |= self.read_client(c)?;
                        if c.need_input {
                            progress |= self.answer(c)?;
                        }
                    }
                }
                Phase::Fetch => {
                    progress |= self.fetch(c)?;
                    if c.phase == Phase::Body && self.copy_in_progress(c) {
                        // The head just arrived and more of a copied body may already be
                        // readable: read it first, so head and body leave in one writev.
                        continue;
                    }
                }
                Phase::Buffer => progress |= self.read_request_body(c)?,
                Phase::Body => progress |= self.fill(c)?,
                Phase::Tunnel => progress |= self.tunnel(c)?,
            }
            progress |= self.write_client(c)?;
            if c.phase == Phase::Body && self.body_complete(c) {
                self.finish_exchange(c)?;
                progress = true;
            }
            if c.phase == Phase::Idle && !c.has_output() {
                if c.close_after {
                    return self.start_linger(c).map(|_| false);
                }
                if c.peer_eof && c.need_input {
                    // Every complete request was answered and nothing more can come.
                    return Err(Close);
                }
            }
            if !progress {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A copied body has more to receive and its origin is known readable.
    fn copy_in_progress(&self, c: &Client) -> bool {
        let Some(x) = c.x.as_ref() else {
            return false;
        };
        let readable = x.origin.as_ref().is_some_and(|o| o.f.readable);
        x.body
            .as_ref()
            .is_some_and(|b| b.mode == Mode::Copy && !b.in_done && !b.failed && readable)
    }

    fn wants_input(&self, c: &Client) -> bool {
        c.need_input && !c.peer_eof && !c.close_after && c.hit.is_none()
    }

    // ---- the access log ----

    /// Registers the interest the client and its origin connection still need; false if the
    /// mechanism refused.
    fn set_interest(&mut self, c: &mut Client) -> bool {
        if c.phase == Phase::Tunnel {
            return self.set_tunnel_interest(c);
        }
        let pulling = c.phase == Phase::Fetch
            && c.x.as_ref().is_some_and(|x| {
                x.body.is_none()
                    && x.req_pos == x.req.len()
                    && x.req_body.as_ref().is_some_and(|b| !b.done)
            });
        let want_read = c.phase == Phase::Lingering
            || (c.phase == Phase::Idle && self.wants_input(c))
            || c.phase == Phase::Buffer
            || pulling;
        let mut want = Interest::NONE;
        if want_read {
            want = want.with(Interest::READABLE);
        }
        if c.has_output() {
            want = want.with(Interest::WRITABLE);
        }
        if want != c.f.interest {
            if self.engine.rewatch(c.fd, want).is_err() {
                return false;
            }
            c.f.interest = want;
        }
        let buffer_size = self.cfg.buffer_size;
        let Some(x) = c.x.as_mut() else {
            return true;
        };
        let Some(o) = x.origin.as_mut() else {
            return true;
        };
        let want = match (&x.body, c.phase) {
            // With a body on its way, an early answer is watched for too.
            (None, _) if x.req_pos < x.req.len() && x.req_body.is_some() => {
                Interest::WRITABLE.with(Interest::READABLE)
            }
            (None, _) if x.req_pos < x.req.len() => Interest::WRITABLE,
            // Waiting for more of the request body from the client.
            (None, _) if pulling => Interest::READABLE,
            (None, _) => Interest::READABLE,
            (Some(b), _) if b.in_done || b.failed => Interest::NONE,
            (Some(b), _) => {
                let room = match b.mode {
                    Mode::Copy if b.keep_in_buf => b.buf.len() - b.sent < buffer_size,
                    Mode::Copy => b.buf.len() < buffer_size || b.sent == b.buf.len(),
                    _ => b.pipe.as_ref().is_some_and(|p| !p.full && p.room() > 0),
                };
                if room {
                    Interest::READABLE
                } else {
                    Interest::NONE
                }
            }
        };
        if want != o.f.interest {
            if self.engine.rewatch(o.fd, want).is_err() {
                return false;
            }
            o.f.interest = want;
        }
        true
    }
}
