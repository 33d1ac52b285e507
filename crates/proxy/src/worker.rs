//! One proxy worker: an event loop generic over the mechanism (a readiness [`Poller`], or the
//! completion engine, which looks like one). Every transfer goes through [`Io`]; under the
//! completion engine, "in flight" ([`pending`]) clears readiness as EAGAIN does, and a short
//! read proves nothing (`Io::COMPLETION`).
//!
//! [`Poller`]: evlab_poll::Poller
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
use evlab_poll::{Events, Interest, Token};
use evlab_runtime::{
    earliest, AcceptFailure, BufPool, Deadlines, Gate, Ready, Spares, Timed, Timeouts, Timer, Trim,
    Waker, ACCEPT_RETRY,
};
use evlab_sys as sys;

use crate::access_log::{request_words, CacheMark, Entry, LogBuf};
use crate::cache::{Object, ObjectCache};
use crate::pipes::{Pipe, PipePool};
use crate::stats::{Shared, WorkerStats};
use crate::xfer::{pending, Io, Part, Role, Unasked};
use crate::{Config, ForwardMode, RELEASE_PIPE_MAX};

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
/// it (`Io::watch_idle`). A connection taken again sooner is looked at before its request
/// instead (`Io::unasked`, as every reused one is), so what it sent meanwhile is caught all
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

#[derive(Debug)]
struct Store {
    key: Box<str>,
    head: Box<[u8]>,
    last_modified: Option<SystemTime>,
    fresh_for: Duration,
    /// The response's `Age` when it arrived (0 without one).
    age: u64,
    shared: bool,
}

/// A request body on its way from the client to the origin (always through `Exchange::req`:
/// see docs/proxy.md, "Request bodies").
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
    /// The response may be stored under this key.
    store_key: Option<Box<str>>,
    /// What the request says about sharing its response (Authorization, Cookie).
    req_facts: RequestFacts,
    retried: bool,
    got_bytes: bool,
    /// The last read of the response head filled all it asked for: more of the response
    /// waits in the socket behind it.
    head_full: bool,
    /// The origin's bytes while the head is incomplete.
    resp: Vec<u8>,
    body: Option<Xfer>,
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

impl Client {
    /// After a write (whose parts moved their own positions): what has all gone is dropped.
    fn settle_output(&mut self) {
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        }
        if self
            .hit
            .as_ref()
            .is_some_and(|(o, off)| *off == o.body.len())
        {
            self.hit = None;
        }
    }

    fn blank(now: Instant) -> Client {
        Client {
            fd: -1,
            id: 0,
            f: Flags::new(Interest::READABLE, true),
            phase: Phase::Idle,
            rbuf: Vec::new(),
            out: Vec::new(),
            out_pos: 0,
            hit: None,
            x: None,
            need_input: true,
            peer_eof: false,
            close_after: false,
            timer: Timer::default(),
            progress_at: now,
            head_since: None,
            send_since: None,
            peer: None,
            xff: None,
            tunnel: None,
            written: 0,
            log: VecDeque::new(),
        }
    }

    fn out_pending(&self) -> usize {
        self.out.len() - self.out_pos + self.hit.as_ref().map_or(0, |(o, off)| o.body.len() - off)
    }

    /// Bytes waiting for the client anywhere: queued output, a copy buffer, a pipe.
    fn has_output(&self) -> bool {
        if self.out_pending() > 0 {
            return true;
        }
        if let Some(t) = &self.tunnel {
            return t.down.held() > 0;
        }
        match self.x.as_ref().and_then(|x| x.body.as_ref()) {
            // A head held in the pipe goes with the body, once the origin's splice is in.
            Some(b) => {
                b.buf.len() > b.sent || (!b.head_held && src_pipe(b).is_some_and(|p| p.len > 0))
            }
            None => false,
        }
    }
}

impl Timed for Client {
    #[inline]
    fn fd(&self) -> RawFd {
        self.fd
    }
    #[inline]
    fn id(&self) -> u32 {
        self.id
    }
    #[inline]
    fn timer(&mut self) -> &mut Timer {
        &mut self.timer
    }
}

/// The pipe the client's bytes come from.
fn src_pipe(b: &Xfer) -> Option<&Pipe> {
    match b.mode {
        Mode::Copy => None,
        Mode::Splice | Mode::Release => b.pipe.as_ref(),
        Mode::SpliceKeep => b.tee.as_ref(),
    }
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

pub(crate) struct Worker<P: Io> {
    poller: P,
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

/// Runs a worker with mechanism `P` until shutdown.
pub(crate) fn run<P: Io>(
    listen_fd: RawFd,
    cfg: Arc<Config>,
    shared: Arc<Shared>,
    ready: Ready,
) -> io::Result<()> {
    let made = Worker::<P>::new(listen_fd, cfg, shared.clone());
    ready.report(&made);
    let mut w = made?;
    let r = w.run();
    w.teardown();
    r
}

impl<P: Io> Worker<P> {
    fn new(listen_fd: RawFd, cfg: Arc<Config>, shared: Arc<Shared>) -> io::Result<Worker<P>> {
        let mut poller = P::new()?;
        let mut waker = Waker::new()?;
        let registered = poller
            .register(waker.rx, Token(waker.rx as usize), Interest::READABLE)
            .and_then(|()| {
                poller.adopt(listen_fd, Role::Listener);
                poller.register(listen_fd, Token(listen_fd as usize), Interest::READABLE)
            });
        if let Err(e) = registered {
            waker.close();
            return Err(e);
        }
        let stats = Arc::new(WorkerStats::for_this_thread());
        shared.registry.add(stats.clone(), &waker);
        let edge = poller.edge_triggered();
        let mut date = DateCache::new();
        let now = Instant::now();
        date.tick(now);
        let mut bufs = BufPool::default();
        *poller.bufs(&mut bufs) = BufPool::new(
            cfg.buffer_size,
            2 * cfg.buffer_size,
            POOL_BUFFERS * cfg.buffer_size,
        );
        Ok(Worker {
            events: Events::with_capacity(cfg.events_per_wait),
            poller,
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
        loop {
            if self.gate.done(self.now) {
                return Ok(());
            }
            let timeout = self.wait_timeout();
            self.poller.wait(&mut self.events, timeout)?;
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
            let bufs = self.poller.bufs(&mut self.bufs);
            self.trim
                .run(self.now, bufs, &mut self.spares, &mut self.timers);
            self.publish();
            if let Some(l) = self.log.as_mut().filter(|l| l.due(self.now)) {
                l.flush();
            }
        }
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
        st.poller.set(&self.poller.stats());
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

    /// The buffer pool (the engine's when it has one: see `Io::bufs`).
    fn pool(&mut self) -> &mut BufPool {
        self.poller.bufs(&mut self.bufs)
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

    fn accept_ready(&mut self) -> io::Result<()> {
        loop {
            if !self.gate.has_room() {
                self.pause_accept(None);
                return Ok(());
            }
            match self.poller.accept(self.listen_fd) {
                Ok((fd, peer)) => {
                    self.poller.adopt(fd, Role::Conn);
                    if self
                        .poller
                        .register(fd, Token(fd as usize), Interest::READABLE)
                        .is_err()
                    {
                        self.stats.conns.accept_errors.inc();
                        self.poller.close(fd);
                        continue;
                    }
                    self.add_client(fd, peer);
                }
                Err(e) => {
                    let failure = AcceptFailure::of(e.raw_os_error().unwrap_or(0));
                    if failure.counted() {
                        self.stats.conns.accept_errors.inc();
                    }
                    match failure {
                        AcceptFailure::Transient => {}
                        AcceptFailure::Exhausted => {
                            self.pause_accept(Some(self.now + ACCEPT_RETRY));
                            return Ok(());
                        }
                        _ => return Ok(()),
                    }
                }
            }
        }
    }

    fn add_client(&mut self, fd: RawFd, peer: Option<SocketAddr>) {
        self.next_id = self.next_id.wrapping_add(1);
        let now = self.now;
        let mut c = self
            .spares
            .take()
            .unwrap_or_else(|| Box::new(Client::blank(now)));
        let (rbuf, out) = (std::mem::take(&mut c.rbuf), std::mem::take(&mut c.out));
        *c = Client::blank(now);
        c.rbuf = rbuf;
        c.out = out;
        c.fd = fd;
        c.id = self.next_id;
        c.peer = peer;
        self.gate.active += 1;
        self.stats.conns.opened(self.gate.active);
        self.rearm(&mut c);
        *self.slot(fd) = Slot::Client(c);
    }

    fn close_client(&mut self, mut c: Box<Client>) {
        if let Some(x) = c.x.take() {
            self.drop_exchange(*x, false);
        }
        if let Some(t) = c.tunnel.take() {
            c.written += t.down.sent;
            self.drop_tunnel(*t);
        }
        if !c.log.is_empty() {
            self.log_done(&mut c, true);
        }
        let _ = self.poller.deregister(c.fd);
        self.poller.close(c.fd);
        *self.slot(c.fd) = Slot::Free;
        c.hit = None;
        c.rbuf.clear();
        c.out.clear();
        if c.rbuf.capacity() > 64 * 1024 {
            c.rbuf = Vec::new();
        }
        if c.out.capacity() > 64 * 1024 {
            c.out = Vec::new();
        }
        self.spares.put(c);
        self.gate.active -= 1;
        self.stats.conns.closed(self.gate.active);
        self.resume_accept();
    }

    fn pause_accept(&mut self, retry_at: Option<Instant>) {
        if self.gate.close(retry_at) {
            let _ = self.poller.deregister(self.listen_fd);
        }
    }

    fn resume_accept(&mut self) {
        if !self.gate.may_open() {
            return;
        }
        if self
            .poller
            .register(
                self.listen_fd,
                Token(self.listen_fd as usize),
                Interest::READABLE,
            )
            .is_ok()
        {
            self.gate.opened();
            // Connections may have queued meanwhile; an edge-triggered listener would not
            // report them again.
            if self.edge {
                let _ = self.accept_ready();
            }
        }
    }

    fn begin_shutdown(&mut self) {
        match self.gate.begin_shutdown(self.now) {
            None => return,
            Some(true) => {
                let _ = self.poller.deregister(self.listen_fd);
            }
            Some(false) => {}
        }
        for o in std::mem::take(&mut self.idle) {
            self.close_origin(o);
        }
        for fd in 0..self.slots.len() {
            let idle = match &mut self.slots[fd] {
                Slot::Client(c) => {
                    c.close_after = true;
                    c.x.is_none() && !c.has_output()
                }
                _ => false,
            };
            if idle {
                let c = self.take_client(fd as RawFd).expect("a client");
                self.close_client(c);
            }
        }
    }

    fn teardown(&mut self) {
        for fd in 0..self.slots.len() {
            if let Some(c) = self.take_client(fd as RawFd) {
                self.close_client(c);
            }
        }
        for o in std::mem::take(&mut self.idle) {
            self.close_origin(o);
        }
        if self.gate.accepting() {
            let _ = self.poller.deregister(self.listen_fd);
        }
        let _ = self.poller.deregister(self.waker.rx);
        self.pipes.clear();
        if let Some(l) = self.log.as_mut() {
            l.flush();
        }
        self.shared.registry.remove_waker(&self.waker);
        self.waker.close();
        self.publish();
    }

    // ---- deadlines ----

    /// The client made progress: its `--timeout` starts over (a store; the deadline follows
    /// when the drive ends, in `rearm`).
    #[inline]
    fn touch(&mut self, c: &mut Client) {
        c.progress_at = self.now;
    }

    /// Sets the client's one deadline to the first of the clocks that run in its state: no
    /// progress (`--timeout`), the request head's total time (`--header-timeout`, while it
    /// waits for a head with nothing to send), the peer taking none of its output
    /// (`--send-timeout`) and the origin's or a tunnel target's connect (`--connect-timeout`).
    /// A lingering close keeps the deadline `start_linger` gave it.
    fn rearm(&mut self, c: &mut Client) {
        if c.phase == Phase::Lingering {
            return;
        }
        let now = self.now;
        let output = c.has_output();
        if c.phase == Phase::Idle && !output && !c.close_after {
            c.head_since.get_or_insert(now);
        } else {
            c.head_since = None;
        }
        if output {
            c.send_since.get_or_insert(now);
        } else {
            c.send_since = None;
        }
        let mut at = self.cfg.timeout.and_then(|t| c.progress_at.checked_add(t));
        at = earliest(at, c.head_since.and_then(|t| self.timeouts.header_due(t)));
        at = earliest(at, c.send_since.and_then(|t| self.timeouts.send_due(t)));
        at = earliest(at, self.connect_due(c));
        self.timers.set(c, at);
    }

    /// When the connect of the client's origin connection (or its tunnel's) must be done by.
    fn connect_due(&self, c: &Client) -> Option<Instant> {
        let t = self.cfg.connect_timeout?;
        let origin = c.x.as_ref().and_then(|x| x.origin.as_ref());
        let target = c.tunnel.as_ref().map(|t| &t.target);
        let since = origin.or(target)?.connecting_since?;
        since.checked_add(t)
    }

    fn expire(&mut self) {
        if self.gate.retry_due(self.now) {
            self.resume_accept();
        }
        self.watch_idle_due();
        while let Some(due) = self.timers.pop_due(self.now) {
            let live =
                matches!(self.slots.get(due.fd as usize), Some(Slot::Client(c)) if c.id == due.id);
            if !live {
                continue;
            }
            let mut c = self.take_client(due.fd).expect("a client");
            if self.timers.expired(&mut *c, due, self.now) {
                self.timed_out(c);
            } else {
                *self.slot(due.fd) = Slot::Client(c);
            }
        }
        let slots = &self.slots;
        self.timers.compact(self.gate.active, |d| {
            matches!(slots.get(d.fd as usize), Some(Slot::Client(c))
                if c.id == d.id && c.timer.stands_for(d))
        });
    }

    /// The client's deadline passed: which of its clocks ran out decides what it is told.
    fn timed_out(&mut self, mut c: Box<Client>) {
        let fd = c.fd;
        let now = self.now;
        let overdue = |t: Option<Instant>| t.is_some_and(|t| t <= now);
        if c.phase == Phase::Lingering {
            self.close_client(c);
            return;
        }
        if overdue(self.connect_due(&c)) {
            // The origin (or the tunnel's target) did not take the connection in time: 504,
            // told apart from a refused connection's 502.
            self.stats.connect_timeouts.inc();
            self.stats.gateway_timeout.inc();
            let (minor, head) = match (c.x.take(), c.tunnel.take()) {
                (Some(x), _) => {
                    let r = (x.client_minor, x.head_request);
                    self.drop_exchange(*x, false);
                    r
                }
                (None, Some(t)) => {
                    self.drop_tunnel(*t);
                    (1, false)
                }
                (None, None) => (1, false),
            };
            self.error_response(&mut c, Status::GatewayTimeout, minor, false, head);
        } else if overdue(c.head_since.and_then(|t| self.timeouts.header_due(t))) {
            // A request head not complete in its total time, however it trickled in.
            self.stats.header_timeouts.inc();
            if c.rbuf.is_empty() {
                self.close_client(c);
                return;
            }
            c.rbuf.clear();
            self.error_response(&mut c, Status::RequestTimeout, 1, false, false);
        } else if overdue(c.send_since.and_then(|t| self.timeouts.send_due(t))) {
            // It took none of what waits for it: nothing more can be said to it.
            self.stats.send_timeouts.inc();
            self.close_client(c);
            return;
        } else {
            self.stats.timeouts.inc();
            if !self.progress_timed_out(&mut c) {
                self.close_client(c);
                return;
            }
        }
        c.phase = Phase::Idle;
        c.close_after = true;
        self.touch(&mut c);
        *self.slot(fd) = Slot::Client(c);
        self.drive_client(fd);
    }

    /// No progress for `--timeout`: a 504 if it waits for the origin's answer, a 408 if it
    /// stopped sending its request (head or body); false if it is simply to be closed.
    fn progress_timed_out(&mut self, c: &mut Client) -> bool {
        let pulling =
            c.x.as_ref()
                .is_some_and(|x| x.req_body.as_ref().is_some_and(|b| !b.done));
        let waiting_head = c.phase == Phase::Fetch && !pulling;
        let partial_request = c.phase == Phase::Idle && !c.rbuf.is_empty() && !c.has_output();
        if waiting_head {
            let x = c.x.take().expect("fetching");
            let (minor, head) = (x.client_minor, x.head_request);
            self.drop_exchange(*x, false);
            self.stats.gateway_timeout.inc();
            self.error_response(c, Status::GatewayTimeout, minor, false, head);
            true
        } else if partial_request || (c.phase == Phase::Fetch && pulling) {
            // The client stopped sending its request (head, or body).
            if let Some(x) = c.x.take() {
                self.drop_exchange(*x, false);
            }
            c.rbuf.clear();
            self.error_response(c, Status::RequestTimeout, 1, false, false);
            true
        } else {
            false
        }
    }

    // ---- origin connections ----

    fn origin_for(&mut self, client_fd: RawFd, fresh_only: bool) -> io::Result<Origin> {
        while let Some(mut o) = (!fresh_only).then(|| self.idle.pop()).flatten() {
            // Whatever arrived while it was idle (since the last event was seen) is no answer
            // to the request about to be sent: such a connection is never used again.
            let unasked = if o.quiet_turn == self.turn {
                Unasked::Quiet
            } else {
                self.poller.unasked(o.fd)
            };
            if unasked != Unasked::Quiet {
                self.unusable_origin(o, unasked);
                continue;
            }
            self.poller.unwatch_idle(o.fd);
            // A completion engine has nothing in flight on it to say when the answer comes:
            // its read, tried once the request is out, is.
            if P::COMPLETION {
                o.f.readable = true;
            }
            o.reused = true;
            o.connecting_since = None;
            o.f.writable = true;
            *self.slot(o.fd) = Slot::Origin(client_fd);
            self.stats.origin_reused.inc();
            return Ok(o);
        }
        let origin = self.cfg.origin;
        self.connect_to(origin, client_fd)
    }

    /// A new non-blocking connection to `origin`, registered for writability (its connect
    /// completes with the first event).
    fn connect_to(&mut self, origin: SocketAddr, client_fd: RawFd) -> io::Result<Origin> {
        let domain = if origin.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        let fd = sys::socket(
            domain,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )?;
        let connected = (|| {
            sys::setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
            self.poller.adopt(fd, Role::Conn);
            let done = match sys::connect(fd, &origin) {
                Ok(()) => true,
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
                    self.poller.watch_connect(fd)?;
                    false
                }
                Err(e) => return Err(e),
            };
            self.poller
                .register(fd, Token(fd as usize), Interest::WRITABLE)?;
            Ok(done)
        })();
        let done = match connected {
            Ok(done) => done,
            Err(e) => {
                self.poller.close(fd);
                return Err(e);
            }
        };
        self.stats.origin_connects.inc();
        *self.slot(fd) = Slot::Origin(client_fd);
        Ok(Origin {
            fd,
            f: Flags::new(Interest::WRITABLE, done),
            reused: false,
            connecting_since: (!done).then_some(self.now),
            stored: None,
            quiet_turn: 0,
            drained_turn: 0,
        })
    }

    /// Closes an origin connection that holds what no request asked for; bytes make its last
    /// stored response suspect, so it leaves the cache.
    fn unusable_origin(&mut self, mut o: Origin, unasked: Unasked) {
        if unasked == Unasked::Bytes {
            self.stats.origin_errors.inc();
            if let Some(key) = o.stored.take() {
                self.cache.remove(&key);
            }
        }
        self.close_origin(o);
    }

    fn close_origin(&mut self, o: Origin) {
        let _ = self.poller.deregister(o.fd);
        self.poller.close(o.fd);
        *self.slot(o.fd) = Slot::Free;
        self.stats.origin_closed.inc();
    }

    /// An origin connection has done its exchange: into the pool, or closed.
    fn release_origin(&mut self, mut o: Origin, reusable: bool) {
        if !reusable
            || o.f.hup
            || self.gate.shutting_down()
            || self.idle.len() >= self.cfg.origin_idle
        {
            self.close_origin(o);
            return;
        }
        // The completion engine watches an idle connection with the poll `watch_idle` arms;
        // a registration would only make it report a readiness to try, for nothing.
        if o.f.interest != Interest::READABLE && !P::COMPLETION {
            if self
                .poller
                .reregister(o.fd, Token(o.fd as usize), Interest::READABLE)
                .is_err()
            {
                self.close_origin(o);
                return;
            }
            o.f.interest = Interest::READABLE;
        }
        o.f.readable = false;
        o.f.peer_closed = false;
        let fd = o.fd;
        self.idle_serial += 1;
        *self.slot(fd) = Slot::Idle(self.idle_serial);
        if P::COMPLETION {
            self.idle_watch
                .push_back((self.now + IDLE_WATCH_DELAY, fd, self.idle_serial));
        }
        self.idle.push(o);
    }

    /// Watches the idle origin connections that have been idle [`IDLE_WATCH_DELAY`].
    fn watch_idle_due(&mut self) {
        while let Some(&(at, fd, serial)) = self.idle_watch.front() {
            if at > self.now {
                break;
            }
            self.idle_watch.pop_front();
            if matches!(self.slots.get(fd as usize), Some(Slot::Idle(s)) if *s == serial) {
                self.poller.watch_idle(fd);
            }
        }
    }

    /// An event on an idle origin connection: the origin closed it, or sent what it should
    /// not have. Either way it cannot serve another request. Nothing is read from it: bytes
    /// that no request asked for are never taken for a response.
    fn check_idle(&mut self, fd: RawFd) {
        let Some(i) = self.idle.iter().position(|o| o.fd == fd) else {
            return;
        };
        match self.poller.unasked(fd) {
            Unasked::Quiet => self.poller.watch_idle(fd),
            unasked => {
                let o = self.idle.swap_remove(i);
                self.unusable_origin(o, unasked);
            }
        }
    }

    /// Ends an exchange early (the client is closing): its origin connection is closed (a
    /// response may be half-read), its pipes go back to the pool (closed if they hold bytes).
    fn drop_exchange(&mut self, mut x: Exchange, origin_reusable: bool) {
        if let Some(o) = x.origin.take() {
            self.release_origin(o, origin_reusable);
        }
        let resp = std::mem::take(&mut x.resp);
        self.pool().give(resp);
        let req = std::mem::take(&mut x.req);
        self.pool().give(req);
        if let Some(mut b) = x.body.take() {
            self.keeping -= b.reserved;
            for p in [b.pipe.take(), b.tee.take()].into_iter().flatten() {
                self.give_pipe(p);
            }
            if !b.keep_in_buf {
                self.pool().give(std::mem::take(&mut b.buf));
            }
        }
    }

    /// A pipe back to the pool; one that a request still uses may yet receive bytes, so it is
    /// closed like one that holds some.
    fn give_pipe(&mut self, mut p: Pipe) {
        if self.poller.pipe_busy(p.rd, p.wr) {
            p.len = p.len.max(1);
        }
        self.pipes.give(p);
    }

    // ---- request bodies ----

    /// Fetch, the request's buffered bytes sent: reads the next batch of its body from the
    /// client into `req` (which goes to the origin next). A chunked body is scanned as it
    /// passes: bytes after its end are the client's next request, and a malformed one is 400.
    fn pull_request_body(&mut self, c: &mut Client) -> Step {
        if !c.f.readable {
            return Ok(false);
        }
        let buffer_size = self.cfg.buffer_size;
        let x = c.x.as_mut().expect("an exchange");
        let b = x.req_body.as_mut().expect("a request body");
        x.req.clear();
        x.req_pos = 0;
        let max = b.left.map_or(buffer_size, |l| {
            buffer_size.min(usize::try_from(l).unwrap_or(usize::MAX))
        });
        if x.req.capacity() < max {
            x.req.reserve(max);
        }
        match self.poller.read_max(c.fd, &mut x.req, max) {
            // The client ended inside its body: the request can never be complete, and the
            // origin connection that carried part of it is closed with the client.
            Ok(0) => {
                c.peer_eof = true;
                Err(Close)
            }
            Ok(n) => {
                x.streamed = true;
                if n < max && !c.f.peer_closed && !P::COMPLETION {
                    c.f.readable = false;
                }
                match b.left.as_mut() {
                    Some(left) => {
                        *left -= n as u64;
                        b.done = *left == 0;
                    }
                    None => match b.scanner.feed(&x.req) {
                        Ok(Some(k)) => {
                            c.rbuf.extend_from_slice(&x.req[k..]);
                            x.req.truncate(k);
                            b.done = true;
                        }
                        Ok(None) => {}
                        Err(_) => return self.bad_request_body(c),
                    },
                }
                self.touch(c);
                Ok(true)
            }
            Err(e) if sys::would_block(&e) || pending(&e) => {
                c.f.readable = false;
                Ok(false)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(true),
            Err(_) => Err(Close),
        }
    }

    /// A chunked request body turned out malformed after part of it was forwarded: the origin
    /// connection is closed (never pooled), the client gets 400 and the close.
    fn bad_request_body(&mut self, c: &mut Client) -> Step {
        let x = c.x.take().expect("an exchange");
        let minor = x.client_minor;
        self.drop_exchange(*x, false);
        c.rbuf.clear();
        self.error_response(c, Status::BadRequest, minor, false, false);
        c.phase = Phase::Idle;
        Ok(true)
    }

    // ---- CONNECT tunnels ----

    /// CONNECT to `target` (lower case): a tunnel if `--allow-connect` names it, else 403
    /// without connecting anywhere.
    fn connect_tunnel(&mut self, c: &mut Client, target: &str, minor: u8, keep: bool) {
        let allowed = self
            .cfg
            .allow_connect
            .iter()
            .find(|t| t.name == target)
            .map(|t| t.addr);
        let Some(addr) = allowed else {
            self.error_response(c, Status::Forbidden, minor, keep && !c.close_after, false);
            return;
        };
        let target = match self.connect_to(addr, c.fd) {
            Ok(o) => o,
            Err(_) => {
                self.stats.origin_errors.inc();
                self.stats.bad_gateway.inc();
                self.error_response(c, Status::BadGateway, minor, false, false);
                return;
            }
        };
        let (mut up, mut down) = (Pump::default(), Pump::default());
        // Splice modes splice both ways (the paper's bidirectional splice), each way through
        // its own pipe; without two pipes, or in copy mode, both ways are copied.
        if self.cfg.forward.splices() && self.poller.can_splice() && self.pipes.available(2) {
            match (self.pipes.take(), self.pipes.take()) {
                (Ok(Some(a)), Ok(Some(b))) => (up.pipe, down.pipe) = (Some(a), Some(b)),
                (a, b) => {
                    for p in [a, b].into_iter().flat_map(|r| r.ok().flatten()) {
                        self.pipes.give(p);
                    }
                    self.stats.no_pipe.inc();
                }
            }
        }
        if up.pipe.is_none() {
            up.buf = self.take_buffer();
            down.buf = self.take_buffer();
        }
        // Bytes the client sent behind its CONNECT (a TLS hello, say) are the tunnel's first,
        // and an EOF read with them is passed on after them.
        up.buf.extend_from_slice(&c.rbuf);
        c.rbuf.clear();
        up.eof = c.peer_eof;
        c.tunnel = Some(Box::new(Tunnel {
            target,
            established: false,
            up,
            down,
        }));
        c.phase = Phase::Tunnel;
    }

    /// Relays what each side has to the other; a side's EOF is passed on as a shutdown of
    /// the other once what it sent is through. Closes when both ways have ended.
    fn tunnel(&mut self, c: &mut Client) -> Step {
        let buffer_size = self.cfg.buffer_size;
        let mut progress = false;
        let t = c.tunnel.as_mut().expect("a tunnel");
        if !t.established {
            if t.target.f.hup {
                // The connection to the target failed.
                let t = c.tunnel.take().expect("a tunnel");
                self.drop_tunnel(*t);
                self.stats.origin_errors.inc();
                self.stats.bad_gateway.inc();
                self.error_response(c, Status::BadGateway, 1, false, false);
                c.phase = Phase::Idle;
                return Ok(true);
            }
            if !t.target.f.writable {
                return Ok(false);
            }
            t.established = true;
            t.target.connecting_since = None;
            c.out
                .extend_from_slice(b"HTTP/1.1 200 Connection Established\r\n\r\n");
            self.stats.record_status(200);
            let spliced = t.down.pipe.is_some();
            if let Some(e) = c.log.back_mut() {
                // Its line is written when the tunnel ends, with every byte it sent.
                e.status = 200;
                e.mode = if spliced { "splice" } else { "copy" };
            }
            progress = true;
        }
        progress |= self.write_client(c)?;
        let out_clear = c.out_pending() == 0;
        let cfd = c.fd;
        let t = c.tunnel.as_mut().expect("a tunnel");
        let (tfd, tf) = (t.target.fd, &mut t.target.f);
        progress |= pump(
            &mut self.poller,
            (cfd, &mut c.f),
            (tfd, tf),
            &mut t.up,
            true,
            buffer_size,
            &self.stats,
        )?;
        progress |= pump(
            &mut self.poller,
            (tfd, &mut t.target.f),
            (cfd, &mut c.f),
            &mut t.down,
            out_clear,
            buffer_size,
            &self.stats,
        )?;
        if progress {
            self.touch(c);
        }
        let t = c.tunnel.as_ref().expect("a tunnel");
        let up_done = t.up.shut;
        let down_done = t.down.shut;
        if up_done && down_done {
            return Err(Close);
        }
        // Hung up (both ways shut, or reset): what it sent has been passed on, and it takes
        // no more.
        if t.target.f.hup && down_done {
            return Err(Close);
        }
        if c.f.hup && up_done {
            return Err(Close);
        }
        Ok(progress)
    }

    fn set_tunnel_interest(&mut self, c: &mut Client) -> bool {
        let out_pending = c.out_pending() > 0;
        let t = c.tunnel.as_mut().expect("a tunnel");
        let room = |p: &Pump| match &p.pipe {
            Some(pipe) => !pipe.full && pipe.room() > 0,
            None => p.pos == p.buf.len(),
        };
        let mut cw = Interest::NONE;
        if t.established && !t.up.eof && room(&t.up) {
            cw = cw.with(Interest::READABLE);
        }
        if out_pending || t.down.held() > 0 {
            cw = cw.with(Interest::WRITABLE);
        }
        let mut tw = Interest::NONE;
        if t.established && !t.down.eof && room(&t.down) {
            tw = tw.with(Interest::READABLE);
        }
        if !t.established || t.up.held() > 0 {
            tw = tw.with(Interest::WRITABLE);
        }
        for (fd, f, want) in [(c.fd, &mut c.f, cw), (t.target.fd, &mut t.target.f, tw)] {
            if want != f.interest {
                if self
                    .poller
                    .reregister(fd, Token(fd as usize), want)
                    .is_err()
                {
                    return false;
                }
                f.interest = want;
            }
        }
        true
    }

    fn drop_tunnel(&mut self, mut t: Tunnel) {
        self.close_origin(t.target);
        for p in [&mut t.up, &mut t.down] {
            if let Some(pipe) = p.pipe.take() {
                self.give_pipe(pipe);
            }
            self.pool().give(std::mem::take(&mut p.buf));
        }
    }

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

    fn read_client(&mut self, c: &mut Client) -> Step {
        if c.rbuf.capacity() == 0 {
            c.rbuf = self.pool().take(8 * 1024);
        }
        if c.rbuf.capacity() - c.rbuf.len() < 2048 {
            c.rbuf.reserve(8 * 1024);
        }
        let offered = c.rbuf.capacity() - c.rbuf.len();
        match self.poller.read_max(c.fd, &mut c.rbuf, usize::MAX) {
            Ok(0) => {
                c.peer_eof = true;
                c.f.readable = false;
                Ok(true)
            }
            Ok(n) => {
                if n < offered && !c.f.peer_closed && !P::COMPLETION {
                    c.f.readable = false;
                }
                self.touch(c);
                Ok(true)
            }
            Err(e) if pending(&e) => {
                c.f.readable = false;
                Ok(false)
            }
            Err(e) if sys::would_block(&e) => {
                c.f.readable = false;
                if c.rbuf.is_empty() {
                    self.pool().give(std::mem::take(&mut c.rbuf));
                }
                Ok(false)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(true),
            Err(_) => Err(Close),
        }
    }

    fn error_response(
        &mut self,
        c: &mut Client,
        status: Status,
        minor: u8,
        keep: bool,
        head_only: bool,
    ) {
        if self.log.is_some() && c.log.back().is_none_or(|e| e.end.is_some()) {
            // No request this answers was taken (a head that never ended, say).
            self.log_open(c, b"");
        }
        write_error(&mut c.out, status, minor, self.date.get(), keep, head_only);
        self.stats.record_status(status.code());
        self.log_answered(c, status.code(), None);
        if !keep {
            c.close_after = true;
        }
    }

    // ---- the access log ----

    /// A request was taken from `c.rbuf` (whose start is its head, `head`): its line waits
    /// for its response.
    fn log_open(&mut self, c: &mut Client, head: &[u8]) {
        if self.log.is_none() {
            return;
        }
        c.log.push_back(Entry {
            first: c.written + c.out_pending() as u64,
            end: None,
            start: self.now,
            request: request_words(head),
            status: 0,
            cache: CacheMark::None,
            mode: "-",
        });
    }

    /// The open request's response is `status`; with `cache`, it is all queued now.
    fn log_answered(&mut self, c: &mut Client, status: u16, cache: Option<CacheMark>) {
        let end = c.written + c.out_pending() as u64;
        if let Some(e) = c.log.back_mut().filter(|e| e.end.is_none()) {
            e.status = status;
            e.end = Some(end);
            if let Some(m) = cache {
                e.cache = m;
            }
        }
    }

    /// Writes the lines of the requests whose responses are all out (every one when the
    /// client is `closing`, with what it was sent).
    fn log_done(&mut self, c: &mut Client, closing: bool) {
        let Some(log) = self.log.as_mut() else {
            c.log.clear();
            return;
        };
        let mut done = None;
        while let Some(e) = c.log.front() {
            let complete = e.end.is_some_and(|end| end <= c.written);
            if !complete && !closing {
                break;
            }
            let e = c.log.pop_front().expect("an entry");
            let now = *done.get_or_insert_with(Instant::now);
            if c.peer.is_none() {
                c.peer = sys::getpeername(c.fd).ok();
            }
            let end = e.end.unwrap_or(c.written).min(c.written);
            log.line(c.peer, &e, end.saturating_sub(e.first), now);
        }
    }

    /// Answers the requests buffered, up to the first that must go to the origin.
    fn answer(&mut self, c: &mut Client) -> Step {
        let mut progress = false;
        c.need_input = false;
        while c.phase == Phase::Idle
            && c.hit.is_none()
            && !c.close_after
            && c.out_pending() < OUT_HIGH_WATER
        {
            if c.rbuf.is_empty() {
                c.need_input = true;
                break;
            }
            let req = match parse_proxy_request(&c.rbuf, &self.cfg.limits) {
                ProxyParse::Partial => {
                    c.need_input = true;
                    break;
                }
                ProxyParse::Error(e) => {
                    progress = true;
                    self.stats.requests.inc();
                    if self.log.is_some() {
                        let rbuf = std::mem::take(&mut c.rbuf);
                        self.log_open(c, &rbuf);
                        c.rbuf = rbuf;
                    }
                    self.error_response(c, e.status, e.minor_version, e.keep_alive, e.head_only);
                    if e.keep_alive {
                        c.rbuf.drain(..e.consumed);
                    } else {
                        c.rbuf.clear();
                    }
                    continue;
                }
                ProxyParse::Complete(req) => req,
            };
            progress = true;
            self.stats.requests.inc();
            let head_len = req.head_len;
            let (minor, keep) = (req.minor_version, req.keep_alive);
            let ims = req.if_modified_since;
            let body = req.body;
            let expect_continue = req.expect_continue;
            // Only what a cache may answer (RFC 9111 §4): GET and HEAD without a body. Any
            // other method is forwarded, never looked up, and its answer never stored.
            let safe = matches!(req.method, "GET" | "HEAD") && body == RequestBody::None;
            // A request that may not be sent twice (RFC 9110 §9.2.2) never goes on a pooled
            // connection, which the origin may have closed meanwhile: it could then be neither
            // retried nor answered but with 502.
            let idempotent = matches!(
                req.method,
                "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
            );
            let stats_asked = self.cfg.stats && safe && req.path == STATS_PATH;
            let connect = req.connect.map(|t| t.to_ascii_lowercase());
            drop(req);
            if self.log.is_some() {
                let rbuf = std::mem::take(&mut c.rbuf);
                self.log_open(c, &rbuf);
                c.rbuf = rbuf;
            }
            if !keep {
                c.close_after = true;
            }
            if let Some(target) = connect {
                c.rbuf.drain(..head_len);
                self.connect_tunnel(c, &target, minor, keep);
                if c.phase == Phase::Tunnel {
                    break;
                }
                continue;
            }
            if stats_asked {
                let body = self.shared.to_json();
                let extra = format!(
                    "Content-Type: application/json\r\nContent-Length: {}\r\nCache-Control: no-store\r\n",
                    body.len()
                );
                write_head(
                    &mut c.out,
                    Status::Ok,
                    minor,
                    self.date.get(),
                    keep,
                    extra.as_bytes(),
                );
                c.out.extend_from_slice(body.as_bytes());
                self.stats.record_status(200);
                self.log_answered(c, 200, None);
                c.rbuf.drain(..head_len);
                continue;
            }
            if c.xff.is_none() {
                // The completion engine's accept does not give the address: asked once per
                // connection, when its first request is forwarded.
                if c.peer.is_none() {
                    c.peer = sys::getpeername(c.fd).ok();
                }
                c.xff = c.peer.map(|a| a.ip().to_string().into_boxed_str());
            }
            let mut fwd = self.pool().take(head_len + 64);
            let opts = ForwardOptions {
                origin_host: self.cfg.origin_host.as_deref(),
                via: self.cfg.via.as_deref(),
                forwarded_for: c.xff.as_deref(),
                drop_expect_continue: true,
            };
            let f = match write_forward_request(&c.rbuf[..head_len], &opts, &mut fwd) {
                Ok(f) => f,
                Err(_) => {
                    self.pool().give(fwd);
                    self.error_response(c, Status::BadRequest, minor, false, false);
                    c.rbuf.clear();
                    continue;
                }
            };
            let head_request = f.head_request;
            let lookup = safe && self.cache.enabled() && !f.authorization && !f.no_cache;
            if lookup {
                // A request with a Cookie is answered only by an object its origin said may be
                // shared: one stored for an anonymous request on a guess may not be what this
                // user's cookie would get (Varnish does not look such requests up at all).
                let hit = self
                    .cache
                    .get(&f.key, self.now)
                    .filter(|obj| obj.shared || !f.cookie);
                if let Some(obj) = hit {
                    self.pool().give(fwd);
                    let status = self.answer_hit(c, obj, minor, !c.close_after, ims, head_request);
                    self.log_answered(c, status, Some(CacheMark::Hit));
                    c.rbuf.drain(..head_len);
                    continue;
                }
            }
            if !safe {
                // An unsafe method changes what the target is (RFC 9111 §4.4): what was stored
                // for it is not served again.
                self.cache.remove(&f.key);
            }
            // A request with Authorization is not answered from the cache, but its response
            // may be stored if it says it may be shared (RFC 9111 §3.5; `shared_fresh_for`).
            let store = safe && self.cache.enabled() && !f.no_cache && !head_request;
            let store_key = store.then(|| Box::<str>::from(f.key));
            let req_facts = RequestFacts {
                authorization: f.authorization,
                cookie: f.cookie,
            };
            // The body bytes that came with the head go out behind it, in one write; a
            // chunked body is checked first, so that a malformed one is refused before the
            // origin sees any of the request.
            let mut taken = head_len;
            let req_body = match body {
                RequestBody::None => None,
                RequestBody::Length(n) => {
                    let avail =
                        (c.rbuf.len() - head_len).min(usize::try_from(n).unwrap_or(usize::MAX));
                    fwd.extend_from_slice(&c.rbuf[head_len..head_len + avail]);
                    taken += avail;
                    let left = n - avail as u64;
                    Some(ReqBody {
                        left: Some(left),
                        scanner: ChunkedScanner::new(),
                        done: left == 0,
                    })
                }
                RequestBody::Chunked => {
                    let mut scanner = ChunkedScanner::strict();
                    let rest = &c.rbuf[head_len..];
                    let (n, done) = match scanner.feed(rest) {
                        Ok(Some(k)) => (k, true),
                        Ok(None) => (rest.len(), false),
                        Err(_) => {
                            self.pool().give(fwd);
                            self.error_response(c, Status::BadRequest, minor, false, false);
                            c.rbuf.clear();
                            continue;
                        }
                    };
                    fwd.extend_from_slice(&rest[..n]);
                    taken += n;
                    Some(ReqBody {
                        left: None,
                        scanner,
                        done,
                    })
                }
            };
            if lookup && store_key.is_some() {
                self.stats.misses.inc();
                if let Some(e) = c.log.back_mut() {
                    e.cache = CacheMark::Miss;
                }
            } else {
                self.stats.bypassed.inc();
            }
            if expect_continue && req_body.as_ref().is_some_and(|b| !b.done) {
                // Answered here, not by the origin: the proxy reads the body only to forward
                // it, and the origin then never waits for a 100 of its own (docs/proxy.md).
                c.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            }
            c.rbuf.drain(..taken);
            if c.rbuf.is_empty() {
                self.pool().give(std::mem::take(&mut c.rbuf));
            }
            let resp = self.take_buffer();
            c.x = Some(Box::new(Exchange {
                origin: None,
                fresh_only: !idempotent,
                req: fwd,
                req_pos: 0,
                req_body,
                streamed: false,
                head_request,
                client_minor: minor,
                client_keep: keep,
                store_key,
                req_facts,
                retried: false,
                got_bytes: false,
                head_full: false,
                resp,
                body: None,
            }));
            c.phase = Phase::Fetch;
            break;
        }
        Ok(progress)
    }

    fn answer_hit(
        &mut self,
        c: &mut Client,
        obj: Rc<Object>,
        minor: u8,
        keep: bool,
        ims: Option<SystemTime>,
        head_only: bool,
    ) -> u16 {
        self.stats.hits.inc();
        let not_modified = ims.is_some_and(|ims| obj.last_modified.is_some_and(|lm| lm <= ims));
        if not_modified {
            self.stats.not_modified.inc();
            write_head(
                &mut c.out,
                Status::NotModified,
                minor,
                self.date.get(),
                keep,
                b"X-Cache: HIT\r\n",
            );
            self.stats.record_status(304);
            return 304;
        }
        c.out.extend_from_slice(&obj.head);
        // Age: what it had when stored, and how long it has been here (RFC 9111 §5.1).
        let here = self.now.saturating_duration_since(obj.stored).as_secs();
        let age = obj
            .age
            .saturating_add(here)
            .min(evlab_http::MAX_DELTA_SECONDS);
        let _ = std::io::Write::write_fmt(&mut c.out, format_args!("Age: {age}\r\n"));
        c.out.extend_from_slice(b"X-Cache: HIT\r\n");
        connection_field(&mut c.out, minor, keep);
        c.out.extend_from_slice(b"\r\n");
        self.stats.record_status(200);
        if head_only || obj.body.is_empty() {
            return 200;
        }
        self.stats.bytes_hit.add(obj.body.len() as u64);
        if obj.body.len() <= COPY_HIT_MAX {
            c.out.extend_from_slice(&obj.body);
        } else {
            c.hit = Some((obj, 0));
        }
        200
    }

    /// Fetch: connect, send the request, read and parse the response head.
    fn fetch(&mut self, c: &mut Client) -> Step {
        let cfd = c.fd;
        let x = c.x.as_mut().expect("an exchange while fetching");
        if x.origin.is_none() {
            match self.origin_for(cfd, x.fresh_only) {
                Ok(o) => x.origin = Some(o),
                Err(_) => {
                    self.stats.origin_errors.inc();
                    return self.origin_failed(c);
                }
            }
        }
        let unsent = unsent_body(x);
        let o = x.origin.as_mut().expect("an origin");
        if o.f.writable || o.f.readable {
            // Writable (or an answer) since the connect began: it is up, or failed, which
            // the next transfer says.
            o.connecting_since = None;
        }
        // An origin may answer before it has the whole body (an early 413, say) and stop
        // reading: while a body is being sent, its answer is looked for first.
        let answer_early = o.f.readable && unsent;
        if answer_early {
            // Read the head below.
        } else if x.req_pos < x.req.len() {
            if !o.f.writable {
                return Ok(false);
            }
            return match self
                .poller
                .writev(o.fd, &[IoSlice::new(&x.req[x.req_pos..])])
            {
                Ok(n) => {
                    x.req_pos += n;
                    if x.req_pos < x.req.len() {
                        o.f.writable = false;
                    }
                    Ok(true)
                }
                Err(e) if sys::would_block(&e) || pending(&e) => {
                    o.f.writable = false;
                    Ok(false)
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(true),
                Err(_) => {
                    self.stats.origin_errors.inc();
                    self.origin_failed(c)
                }
            };
        }
        if !answer_early && x.req_body.as_ref().is_some_and(|b| !b.done) {
            return self.pull_request_body(c);
        }
        if !o.f.readable {
            return Ok(false);
        }
        let limit = if self.cfg.forward.splices() {
            HEAD_READ_SPLICE
        } else {
            self.cfg.buffer_size
        };
        if x.resp.capacity() - x.resp.len() < limit {
            x.resp.reserve(limit);
        }
        let read = self.poller.read_max(o.fd, &mut x.resp, limit);
        match read {
            Ok(0) => {
                self.stats.origin_errors.inc();
                self.origin_failed(c)
            }
            Ok(n) => {
                x.got_bytes = true;
                x.head_full = n == limit;
                o.drained_turn = 0;
                if n < limit && !o.f.peer_closed && !P::COMPLETION {
                    o.f.readable = false;
                    o.drained_turn = self.turn;
                }
                self.touch(c);
                self.parse_head(c)
            }
            Err(e) if sys::would_block(&e) || pending(&e) => {
                o.f.readable = false;
                // Nothing yet: the request's sending goes on.
                Ok(answer_early)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(true),
            Err(_) => {
                self.stats.origin_errors.inc();
                self.origin_failed(c)
            }
        }
    }

    fn parse_head(&mut self, c: &mut Client) -> Step {
        loop {
            let x = c.x.as_mut().expect("an exchange");
            let before = c.out.len();
            let http10 = x.client_minor == 0;
            match parse_response_head(&x.resp, x.head_request, http10, &mut c.out) {
                ResponseParse::Partial => return Ok(true),
                ResponseParse::Interim(n) => {
                    x.resp.drain(..n);
                }
                ResponseParse::Error(_) => {
                    self.stats.origin_errors.inc();
                    return self.origin_failed(c);
                }
                ResponseParse::Complete(h) => {
                    // Via toward the client too (RFC 9110 §7.6.3), with the origin's version;
                    // a cached copy keeps it, as it came through this proxy.
                    if let Some(v) = self.cfg.via.as_deref() {
                        push_via(&mut c.out, h.minor_version, v);
                    }
                    self.start_body(c, h, before);
                    return Ok(true);
                }
            }
        }
    }

    /// The origin failed (refused, reset, closed, or garbage) before a response head: send the
    /// request again on a fresh connection if a pooled one failed before any byte of the
    /// answer; otherwise answer 502.
    fn origin_failed(&mut self, c: &mut Client) -> Step {
        let x = c.x.as_mut().expect("an exchange");
        let reused = x.origin.as_ref().is_some_and(|o| o.reused);
        if let Some(o) = x.origin.take() {
            self.close_origin(o);
        }
        if reused && !x.got_bytes && !x.retried && !x.streamed {
            x.retried = true;
            x.fresh_only = true;
            x.req_pos = 0;
            x.resp.clear();
            self.stats.origin_retries.inc();
            return Ok(true);
        }
        let x = c.x.take().expect("an exchange");
        let (minor, keep, head) = (x.client_minor, x.client_keep, x.head_request);
        self.drop_exchange(*x, false);
        self.stats.bad_gateway.inc();
        self.error_response(c, Status::BadGateway, minor, keep && !c.close_after, head);
        c.phase = Phase::Idle;
        Ok(true)
    }

    /// The response head is in: queue it for the client and set the body's transfer up.
    fn start_body(&mut self, c: &mut Client, h: ResponseHead, head_start: usize) {
        let x = c.x.as_mut().expect("an exchange");
        self.stats.record_status(h.status);
        // Answered before the whole request body was sent: the rest of the body is not sent,
        // so neither connection can carry another request (the client's remaining body bytes
        // are read and discarded while lingering).
        let early = unsent_body(x);
        if early {
            c.close_after = true;
        }
        // An HTTP/1.0 client cannot read chunks: it gets their data, ended by the close.
        let dechunk = h.framing == Framing::Chunked && x.client_minor == 0;
        if h.framing == Framing::UntilClose || dechunk || self.gate.shutting_down() {
            c.close_after = true;
        }
        // The head as a cache would keep it: cut out of what goes to the client, only when the
        // response is stored.
        let head_end = c.out.len();
        c.out.extend_from_slice(b"X-Cache: MISS\r\n");
        let keep = x.client_keep && !c.close_after;
        connection_field(&mut c.out, x.client_minor, keep);
        c.out.extend_from_slice(b"\r\n");
        let resp = std::mem::take(&mut x.resp);
        let prefix = &resp[h.head_len..];
        let mut b = Xfer {
            mode: Mode::Copy,
            framing: h.framing,
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
            reusable: h.keep_alive && !early,
            store: None,
            reserved: 0,
        };
        let mut take = prefix.len();
        let mut dechunked = Vec::new();
        match h.framing {
            Framing::None => {
                // Bytes after a bodiless response are not the client's (and make the
                // connection unusable; see below).
                take = 0;
                b.in_done = true;
            }
            Framing::Length(total) => {
                take = usize::try_from(total).map_or(take, |t| take.min(t));
                b.left = total - take as u64;
                b.in_done = b.left == 0;
                let fresh_for = h.cache.shared_fresh_for(
                    h.status,
                    h.last_modified,
                    x.req_facts,
                    SystemTime::now(),
                    &self.cfg.freshness_policy(),
                );
                // Bytes after the body (see below) make the whole response suspect.
                let mut cacheable = x.store_key.is_some()
                    && h.status == 200
                    && h.cache.storable()
                    && !h.suspect
                    && take == prefix.len()
                    && fresh_for > Duration::ZERO
                    && self.cache.may_store(total);
                if cacheable && self.keeping.saturating_add(total) > self.cfg.keep_bytes {
                    // The objects being received for the cache hold enough (slow readers of
                    // large objects, say): this one is only forwarded.
                    cacheable = false;
                    self.stats.cache_not_kept.inc();
                }
                if cacheable {
                    b.reserved = total;
                    self.keeping += total;
                    b.store = Some(Store {
                        key: x.store_key.take().expect("a key"),
                        // A hit says its own Age (see `answer_hit`), not the origin's.
                        head: without_age(&c.out[head_start..head_end]),
                        last_modified: h.last_modified,
                        fresh_for,
                        age: h.cache.age,
                        shared: h.cache.explicitly_shared(),
                    });
                }
                let (mode, pipe, tee) = self.choose_mode(b.left, cacheable);
                (b.mode, b.pipe, b.tee) = (mode, pipe, tee);
                match b.mode {
                    Mode::Copy if cacheable => {
                        b.keep_in_buf = true;
                        b.buf = Vec::with_capacity(total as usize);
                        b.buf.extend_from_slice(&prefix[..take]);
                        b.sent = take;
                    }
                    Mode::SpliceKeep => {
                        b.keep = Vec::with_capacity(total as usize);
                        b.keep.extend_from_slice(&prefix[..take]);
                    }
                    Mode::Splice | Mode::Release => {
                        b.store = None;
                        self.keeping -= std::mem::take(&mut b.reserved);
                    }
                    Mode::Copy => {}
                }
            }
            Framing::Chunked => match scan_chunks(&mut b, prefix, &mut dechunked) {
                Ok(Some(k)) => {
                    take = k;
                    b.in_done = true;
                }
                Ok(None) => {}
                Err(_) => {
                    take = 0;
                    b.failed = true;
                }
            },
            Framing::UntilClose => b.reusable = false,
        }
        if take < prefix.len() {
            // Bytes after the response: the origin and the proxy disagree on where it ends
            // (a smuggled response?). Never reuse the connection; nothing of it is cached.
            b.reusable = false;
            b.store = None;
            self.stats.origin_errors.inc();
        }
        // A copied body's first bytes, read with the head, stay where they are: the head's
        // buffer becomes the body's, its head counted as sent, and they leave behind the
        // client's output in the same write rather than being copied into it.
        let prefix_in_buf = b.mode == Mode::Copy && !b.keep_in_buf && !dechunk && take > 0;
        if dechunk {
            c.out.extend_from_slice(&dechunked);
            self.stats.bytes_copy.add(dechunked.len() as u64);
        } else {
            if !prefix_in_buf {
                c.out.extend_from_slice(&prefix[..take]);
            }
            self.stats.bytes_copy.add(take as u64);
        }
        if b.mode == Mode::Copy && !b.keep_in_buf && !b.in_done && !prefix_in_buf {
            b.buf = self.take_buffer();
        }
        match b.mode {
            Mode::Copy => self.stats.copied.inc(),
            Mode::Splice => self.stats.spliced.inc(),
            Mode::SpliceKeep => self.stats.spliced_keep.inc(),
            Mode::Release => self.stats.spliced_release.inc(),
        }
        if b.failed {
            self.stats.origin_errors.inc();
        }
        if let Some(e) = c.log.back_mut().filter(|e| e.end.is_none()) {
            e.status = h.status;
            e.mode = mode_name(b.mode);
        }
        if prefix_in_buf {
            let mut resp = resp;
            resp.truncate(h.head_len + take);
            b.sent = h.head_len;
            b.buf = resp;
            x.resp = Vec::new();
        } else {
            x.resp = resp;
            x.resp.clear();
        }
        let release = b.mode == Mode::Release && x.head_full;
        x.body = Some(b);
        c.phase = Phase::Body;
        if release {
            self.head_into_pipe(c);
        }
    }

    /// Splice-release, when the head's read left more of the response in the origin's
    /// socket: what waits for the client (the head, the body bytes read with it) is written
    /// into the body's empty pipe, and the splice from the origin appends the body to it, so
    /// that one splice gives head and body to the client. Under a readiness mechanism a
    /// `write` into the pipe replaces the head's `send` (the same count); under the completion
    /// engine it also saves the ring enter that the send's completion, alone, would end: the
    /// next enter is the one that brings the body. Nothing is moved when other output waits
    /// (a cached body, more than [`HEAD_IN_PIPE_MAX`] bytes).
    fn head_into_pipe(&mut self, c: &mut Client) {
        let pending = c.out.len() - c.out_pos;
        if pending == 0 || pending > HEAD_IN_PIPE_MAX || c.hit.is_some() {
            return;
        }
        let Some(b) = c.x.as_mut().and_then(|x| x.body.as_mut()) else {
            return;
        };
        let Some(p) = b.pipe.take() else {
            return;
        };
        // Room for the head too, so the body still moves in one splice: where the largest
        // pipe cannot hold both (bodies near 1 MiB), the head is sent as it is.
        let whole = b.left.saturating_add(pending as u64);
        let mut p = self.release_pipe(p, whole);
        if p.len != 0 || (p.room() as u64) < whole {
            b.pipe = Some(p);
            return;
        }
        let mut written = 0;
        while written < pending {
            let rest = &c.out[c.out_pos + written..];
            match self.poller.write_pipe(p.wr, rest) {
                Ok(n) if n > 0 => written += n,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                // An empty pipe with room takes a few pages whole: never seen. What went in
                // stays ahead of what did not, so the rest cannot follow: the response is cut
                // short (the client closed once what is in the pipe is out).
                _ if written > 0 => {
                    c.out.truncate(c.out_pos + written);
                    b.failed = true;
                    b.reusable = false;
                    self.stats.conns.io_errors.inc();
                    break;
                }
                _ => break,
            }
        }
        c.out_pos += written;
        if c.out_pos == c.out.len() {
            c.out.clear();
            c.out_pos = 0;
        }
        p.len += written;
        b.head_held = written > 0 && !b.failed;
        b.pipe = Some(p);
    }

    /// Copy, splice or splice-keep for a body with `left` bytes still to receive, with the
    /// pipes it needs.
    fn choose_mode(&mut self, left: u64, cacheable: bool) -> (Mode, Option<Pipe>, Option<Pipe>) {
        let forward = self.cfg.forward;
        if !forward.splices() || left < self.cfg.splice_min.max(1) || !self.poller.can_splice() {
            return (Mode::Copy, None, None);
        }
        let keep = forward == ForwardMode::SpliceKeep && cacheable;
        let want = if keep { 2 } else { 1 };
        if !self.pipes.available(want) {
            self.pipes.counts.exhausted += 1;
            self.stats.no_pipe.inc();
            return (Mode::Copy, None, None);
        }
        // A pipe2 error (out of descriptors) falls back to copying too.
        let first = match self.pipes.take() {
            Ok(Some(p)) => p,
            _ => {
                self.stats.no_pipe.inc();
                return (Mode::Copy, None, None);
            }
        };
        if forward == ForwardMode::SpliceRelease {
            return (Mode::Release, Some(self.release_pipe(first, left)), None);
        }
        if !keep {
            return (Mode::Splice, Some(first), None);
        }
        match self.pipes.take() {
            Ok(Some(t)) => (Mode::SpliceKeep, Some(first), Some(t)),
            _ => {
                self.pipes.give(first);
                self.stats.no_pipe.inc();
                (Mode::Copy, None, None)
            }
        }
    }

    /// Splice-release: the body's pipe, grown once to hold the `left` bytes still to come (a
    /// power of two, at most [`RELEASE_PIPE_MAX`]), so that one splice takes all the socket
    /// holds and one gives it all to the client, instead of a 64 KiB pipe-full at a time. A
    /// pipe keeps its size in the pool, so the fcntl is paid once per pipe, not per body; where
    /// the kernel refuses (the per-user limit on pipe pages), the pipe keeps the size it has.
    fn release_pipe(&mut self, mut p: Pipe, left: u64) -> Pipe {
        let want = usize::try_from(left)
            .unwrap_or(usize::MAX)
            .min(RELEASE_PIPE_MAX)
            .next_power_of_two();
        if p.cap < want {
            match sys::set_pipe_size(p.wr, want) {
                Ok(cap) => p.cap = cap,
                Err(_) => self.stats.pipes_not_grown.inc(),
            }
        }
        p
    }

    /// Body: bring what the origin has into the buffer or pipe (and, splice-keep, tee it
    /// into the cache's copy).
    fn fill(&mut self, c: &mut Client) -> Step {
        let x = c.x.as_mut().expect("an exchange");
        let b = x.body.as_mut().expect("a body");
        let mut progress = false;
        if b.mode == Mode::SpliceKeep {
            progress |= tee_into_keep(&mut self.poller, c.fd, b, &self.stats)?;
        }
        if b.in_done || b.failed {
            b.head_held = false;
            if x.origin.as_ref().is_some_and(|o| o.f.hup) {
                // Hung up after the body: it cannot be reused, and a level-triggered
                // mechanism would report the hang-up on every wait while the client drains.
                b.reusable = false;
                let o = x.origin.take().expect("an origin");
                if self.poller.unasked(o.fd) == Unasked::Bytes {
                    // It sent more than the response before it closed: nothing is cached.
                    b.store = None;
                    self.stats.origin_errors.inc();
                }
                self.close_origin(o);
            }
            return Ok(progress);
        }
        let Some(o) = x.origin.as_mut() else {
            b.head_held = false;
            return Ok(progress);
        };
        let room = match b.mode {
            Mode::Copy => {
                if !b.keep_in_buf && b.sent == b.buf.len() && b.sent > 0 {
                    b.buf.clear();
                    b.sent = 0;
                }
                if b.keep_in_buf {
                    self.cfg.buffer_size.saturating_sub(b.buf.len() - b.sent)
                } else {
                    self.cfg.buffer_size.saturating_sub(b.buf.len())
                }
            }
            _ => {
                let p = b.pipe.as_ref().expect("a pipe");
                if p.full {
                    0
                } else {
                    p.room()
                }
            }
        };
        if room == 0 {
            b.head_held = false;
            if o.f.hup {
                // Hung up while we cannot read: a level-triggered mechanism would report it
                // on every wait. What it sent after the buffered bytes is lost anyway.
                return self.body_failed(c).map(|_| true);
            }
            return Ok(progress);
        }
        if !o.f.readable {
            // A head waits for the body only while a splice that brings it is in flight.
            b.head_held &= b.filling;
            return Ok(progress);
        }
        let max = match b.framing {
            Framing::Length(_) => room.min(b.left.min(usize::MAX as u64) as usize),
            _ => room,
        };
        let r = match b.mode {
            Mode::Copy => {
                if b.buf.capacity() - b.buf.len() < max {
                    b.buf.reserve(max);
                }
                self.poller.read_max(o.fd, &mut b.buf, max)
            }
            _ => {
                let wr = b.pipe.as_ref().expect("a pipe").wr;
                self.poller.splice(o.fd, wr, max, o.fd)
            }
        };
        let held = std::mem::take(&mut b.head_held);
        b.filling = matches!(&r, Err(e) if pending(e));
        if b.filling {
            b.head_held = held;
        }
        match r {
            Ok(0) => {
                if b.framing == Framing::UntilClose {
                    b.in_done = true;
                    b.reusable = false;
                    return Ok(true);
                }
                self.body_failed(c).map(|_| true)
            }
            Ok(n) => {
                match b.mode {
                    Mode::Copy => {
                        if !b.dechunk {
                            self.stats.bytes_copy.add(n as u64);
                        }
                        o.drained_turn = 0;
                        if n < max && !o.f.peer_closed && !P::COMPLETION {
                            o.f.readable = false;
                            o.drained_turn = self.turn;
                        }
                    }
                    _ => {
                        o.drained_turn = 0;
                        self.stats.bytes_splice.add(n as u64);
                        b.pipe.as_mut().expect("a pipe").len += n;
                    }
                }
                match b.framing {
                    Framing::Length(_) => {
                        b.left -= n as u64;
                        b.in_done = b.left == 0;
                    }
                    Framing::Chunked if b.dechunk => {
                        let start = b.buf.len() - n;
                        let raw = b.buf.split_off(start);
                        let r = b.scanner.decode(&raw, &mut b.buf);
                        self.stats.bytes_copy.add((b.buf.len() - start) as u64);
                        match r {
                            Ok(Some(k)) => {
                                if k < raw.len() {
                                    b.reusable = false;
                                    self.stats.origin_errors.inc();
                                }
                                b.in_done = true;
                            }
                            Ok(None) => {}
                            Err(_) => return self.body_failed(c).map(|_| true),
                        }
                    }
                    Framing::Chunked => {
                        let start = b.buf.len() - n;
                        match b.scanner.feed(&b.buf[start..]) {
                            Ok(Some(k)) => {
                                if start + k < b.buf.len() {
                                    b.buf.truncate(start + k);
                                    b.reusable = false;
                                    self.stats.origin_errors.inc();
                                }
                                b.in_done = true;
                            }
                            Ok(None) => {}
                            Err(_) => {
                                b.buf.truncate(start);
                                return self.body_failed(c).map(|_| true);
                            }
                        }
                    }
                    _ => {}
                }
                self.touch(c);
                Ok(true)
            }
            Err(e) if pending(&e) => {
                o.f.readable = false;
                Ok(progress)
            }
            Err(e) if sys::would_block(&e) => {
                match b.pipe.as_mut() {
                    // A pipe that holds only a head (a few pages of many) is not full: the
                    // socket is empty (a readiness mechanism's EAGAIN says so).
                    Some(_) if held && !P::COMPLETION => o.f.readable = false,
                    // Full, or the socket is empty: drain the pipe, then try again.
                    Some(p) if b.mode != Mode::Copy && p.len > 0 => p.full = true,
                    _ => o.f.readable = false,
                }
                Ok(progress)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(true),
            Err(_) => self.body_failed(c).map(|_| true),
        }
    }

    /// The origin failed inside a body: what arrived still goes to the client, then the
    /// client's connection closes (its response is cut short, and only a close can say so).
    fn body_failed(&mut self, c: &mut Client) -> Result<(), Close> {
        let x = c.x.as_mut().expect("an exchange");
        let b = x.body.as_mut().expect("a body");
        b.failed = true;
        b.reusable = false;
        b.store = None;
        self.stats.origin_errors.inc();
        if let Some(o) = x.origin.take() {
            self.close_origin(o);
        }
        Ok(())
    }

    /// Writes what waits for the client: queued output, a cached body, copied body bytes,
    /// then spliced ones.
    fn write_client(&mut self, c: &mut Client) -> Step {
        if !c.f.writable {
            return Ok(false);
        }
        let mut progress = false;
        loop {
            let copy =
                c.x.as_mut()
                    .and_then(|x| x.body.as_mut())
                    .filter(|b| b.mode == Mode::Copy);
            // Absent parts are empty ones (skipped by every engine): no allocation per write.
            let (mut no_hit, mut no_copy) = (0, 0);
            let hit = match c.hit.as_mut() {
                Some((o, off)) => Part::Shared(o, off),
                None => Part::Borrowed(&[], &mut no_hit),
            };
            let copy = match copy {
                // The object being kept for the cache stays where it is.
                Some(b) if b.keep_in_buf => Part::Borrowed(&b.buf, &mut b.sent),
                Some(b) => Part::Owned(&mut b.buf, &mut b.sent),
                None => Part::Borrowed(&[], &mut no_copy),
            };
            let mut parts = [Part::Owned(&mut c.out, &mut c.out_pos), hit, copy];
            let want: usize = parts.iter().map(|p| p.rest().len()).sum();
            if want == 0 {
                break;
            }
            let r = self.poller.write_parts(c.fd, &mut parts);
            match r {
                Ok(n) => {
                    self.stats.bytes_to_clients.add(n as u64);
                    c.written += n as u64;
                    c.settle_output();
                    self.touch(c);
                    c.send_since = Some(self.now);
                    progress = true;
                    if n < want {
                        c.f.writable = false;
                        return Ok(true);
                    }
                }
                Err(e) if sys::would_block(&e) || pending(&e) => {
                    c.f.writable = false;
                    return Ok(progress);
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => {
                    self.stats.conns.io_errors.inc();
                    return Err(Close);
                }
            }
        }
        // Spliced bytes, once everything before them has gone.
        let fd = c.fd;
        let Some(b) = c.x.as_mut().and_then(|x| x.body.as_mut()) else {
            return Ok(progress);
        };
        if b.head_held {
            // It leaves with the body's first bytes (`head_into_pipe`).
            return Ok(progress);
        }
        let src = match b.mode {
            Mode::Copy => return Ok(progress),
            Mode::Splice | Mode::Release => b.pipe.as_mut(),
            Mode::SpliceKeep => b.tee.as_mut(),
        };
        let Some(p) = src else {
            return Ok(progress);
        };
        while p.len > 0 {
            match self.poller.splice(p.rd, fd, p.len, fd) {
                Ok(0) => break,
                Ok(n) => {
                    p.len -= n;
                    p.full = false;
                    self.stats.bytes_to_clients.add(n as u64);
                    c.written += n as u64;
                    progress = true;
                }
                Err(e) if sys::would_block(&e) || pending(&e) => {
                    c.f.writable = false;
                    break;
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => {
                    self.stats.conns.io_errors.inc();
                    return Err(Close);
                }
            }
        }
        if progress {
            self.touch(c);
            c.send_since = Some(self.now);
        }
        Ok(progress)
    }

    fn body_complete(&self, c: &Client) -> bool {
        let Some(b) = c.x.as_ref().and_then(|x| x.body.as_ref()) else {
            return false;
        };
        // A body cut short closes the client: everything queued before must be out first.
        (b.in_done || (b.failed && c.out_pending() == 0))
            && b.sent == b.buf.len()
            && b.pipe.as_ref().is_none_or(|p| p.len == 0)
            && b.tee.as_ref().is_none_or(|p| p.len == 0)
    }

    /// The body is through: store it, pool the origin connection, go back to `Idle` (or close
    /// the client if the body was cut short).
    fn finish_exchange(&mut self, c: &mut Client) -> Result<(), Close> {
        let mut x = c.x.take().expect("an exchange");
        let mut b = x.body.take().expect("a body");
        if b.failed {
            self.stats.truncated.inc();
            c.x = Some(x);
            c.x.as_mut().expect("put back").body = Some(b);
            return Err(Close);
        }
        // The response is read only once the whole request body has been sent, so this holds;
        // a connection that carried part of a body is never pooled, whatever happened.
        let mut reusable = b.reusable && x.req_body.as_ref().is_none_or(|r| r.done);
        if let Some(o) = x.origin.as_mut() {
            o.stored = None;
            // The body has ended where the head said; anything behind it already is no answer
            // to any request (an until-close body ends with the close, and is never reused).
            // Splice-release (AutoRelease) ends by itself at the declared length and looks no
            // further: what it splices is never stored, so the only use of a look now would be
            // the connection's fate, and a pooled connection is looked at before its next
            // request anyway (`origin_for`, or its idle watch's event). What is already known
            // (the origin shut its side) decides at no cost.
            if b.mode == Mode::Release && b.store.is_none() {
                if o.f.peer_closed || o.f.hup {
                    reusable = false;
                }
            } else if b.framing != Framing::UntilClose {
                let drained = !P::COMPLETION
                    && o.drained_turn == self.turn
                    && !o.f.readable
                    && !o.f.hup
                    && !o.f.peer_closed;
                let unasked = if drained {
                    Unasked::Quiet
                } else {
                    self.poller.unasked(o.fd)
                };
                match unasked {
                    Unasked::Quiet => o.quiet_turn = self.turn,
                    Unasked::Closed => reusable = false,
                    Unasked::Bytes => {
                        reusable = false;
                        b.store = None;
                        self.stats.origin_errors.inc();
                    }
                }
            }
        }
        if let Some(s) = b.store.take() {
            let body = if b.keep_in_buf {
                std::mem::take(&mut b.buf)
            } else {
                std::mem::take(&mut b.keep)
            };
            // fresh_for is at most 2^31 s; checked all the same, as nothing may panic here.
            if let Some(expires) = self.now.checked_add(s.fresh_for) {
                let stored = self.cache.insert(
                    &s.key,
                    Object {
                        head: s.head,
                        body,
                        last_modified: s.last_modified,
                        expires,
                        stored: self.now,
                        age: s.age,
                        shared: s.shared,
                    },
                );
                if stored && reusable {
                    if let Some(o) = x.origin.as_mut() {
                        o.stored = Some(s.key);
                    }
                }
            }
        }
        x.body = Some(b);
        self.drop_exchange(*x, reusable);
        c.phase = Phase::Idle;
        let end = c.written + c.out_pending() as u64;
        if let Some(e) = c.log.back_mut().filter(|e| e.end.is_none()) {
            e.end = Some(end);
        }
        Ok(())
    }

    /// Every response is out and the connection is to close: shut our side and read until
    /// the client closes (or the linger time passes), so our last bytes are not lost to a
    /// reset caused by input we never read.
    fn start_linger(&mut self, c: &mut Client) -> Result<(), Close> {
        if c.peer_eof {
            return Err(Close);
        }
        self.poller.shutdown_write(c.fd);
        c.phase = Phase::Lingering;
        c.rbuf.clear();
        let at = self.now + self.cfg.linger;
        self.timers.set(c, Some(at));
        self.linger(c)
    }

    fn linger(&mut self, c: &mut Client) -> Result<(), Close> {
        let mut b = [0u8; 4096];
        while c.f.readable {
            match self.poller.read(c.fd, &mut b) {
                Ok(0) => return Err(Close),
                Ok(_) => {}
                Err(e) if sys::would_block(&e) || pending(&e) => c.f.readable = false,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => return Err(Close),
            }
        }
        Ok(())
    }

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
            || pulling;
        let mut want = Interest::NONE;
        if want_read {
            want = want.with(Interest::READABLE);
        }
        if c.has_output() {
            want = want.with(Interest::WRITABLE);
        }
        if want != c.f.interest {
            if self
                .poller
                .reregister(c.fd, Token(c.fd as usize), want)
                .is_err()
            {
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
            if self
                .poller
                .reregister(o.fd, Token(o.fd as usize), want)
                .is_err()
            {
                return false;
            }
            o.f.interest = want;
        }
        true
    }
}

/// The request has a body not all sent to the origin yet.
fn unsent_body(x: &Exchange) -> bool {
    x.req_body
        .as_ref()
        .is_some_and(|b| !b.done || x.req_pos < x.req.len())
}

/// Splice-keep: duplicates what the first pipe holds into the second (bound for the client)
/// and reads it out of the first into the object, so the first pipe only ever holds bytes not
/// yet duplicated.
fn tee_into_keep(io: &mut impl Io, client: RawFd, b: &mut Xfer, stats: &WorkerStats) -> Step {
    let (Some(p), Some(t)) = (b.pipe.as_mut(), b.tee.as_mut()) else {
        return Ok(false);
    };
    let mut progress = false;
    loop {
        // What was tee'd is read out of the first pipe before anything more is tee'd (a tee
        // copies from the pipe's front).
        while b.keep_due > 0 {
            if b.keep.capacity() - b.keep.len() < b.keep_due {
                b.keep.reserve(b.keep_due);
            }
            match io.read_pipe(p.rd, &mut b.keep, b.keep_due, client) {
                Ok(0) => return Err(Close),
                Ok(k) => {
                    b.keep_due -= k;
                    p.len -= k;
                    progress = true;
                }
                // The request is in flight; its completion comes as an event on the client.
                Err(e) if pending(&e) => return Ok(progress),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                // The bytes were just seen in the pipe: anything else is a broken pipe.
                Err(_) => return Err(Close),
            }
        }
        if p.len == 0 || t.full {
            break;
        }
        match io.tee(p.rd, t.wr, p.len, client) {
            Ok(0) => break,
            Ok(n) => {
                t.len += n;
                stats.bytes_tee.add(n as u64);
                b.keep_due = n;
                p.full = false;
                progress = true;
            }
            // The request is in flight; its completion comes as an event on the client.
            Err(e) if pending(&e) => break,
            // The second pipe is full; with nothing in it, our count of the first is wrong.
            Err(e) if sys::would_block(&e) && t.len > 0 => t.full = true,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            Err(_) => return Err(Close),
        }
    }
    Ok(progress)
}

/// Scans the next bytes of a chunked body, and when it goes to an HTTP/1.0 client appends
/// the chunks' data to `out`.
fn scan_chunks(
    b: &mut Xfer,
    data: &[u8],
    out: &mut Vec<u8>,
) -> Result<Option<usize>, &'static str> {
    if b.dechunk {
        b.scanner.decode(data, out)
    } else {
        b.scanner.feed(data)
    }
}

/// A body's forwarding mode as the access log names it.
fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Copy => "copy",
        Mode::Splice => "splice",
        Mode::SpliceKeep => "splice-keep",
        Mode::Release => "splice-release",
    }
}

/// A stored head without its `Age` field lines (the head's lines end in CRLF; no blank line).
fn without_age(head: &[u8]) -> Box<[u8]> {
    let mut out = Vec::with_capacity(head.len());
    for line in head.split_inclusive(|&b| b == b'\n') {
        let is_age = line.len() > 4 && line[..4].eq_ignore_ascii_case(b"age:");
        if !is_age {
            out.extend_from_slice(line);
        }
    }
    out.into_boxed_slice()
}

/// The `Connection` field a response to the client needs.
fn connection_field(out: &mut Vec<u8>, minor: u8, keep: bool) {
    if !keep {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if minor == 0 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
}

/// Moves what `src` has to `dst` for a tunnel, through the pump's buffer or its pipe (bytes
/// in the buffer first: they came before any spliced), and shuts `dst`'s sending side once
/// `src` has ended and everything it sent is through. `may_write`: nothing is queued before
/// this pump's bytes on `dst`.
fn pump<P: Io>(
    io: &mut P,
    (src, sf): (RawFd, &mut Flags),
    (dst, df): (RawFd, &mut Flags),
    p: &mut Pump,
    may_write: bool,
    buffer_size: usize,
    stats: &WorkerStats,
) -> Step {
    let mut progress = false;
    for _ in 0..DRIVE_BUDGET {
        let mut moved = false;
        if !p.eof && sf.readable {
            let r = match p.pipe.as_mut() {
                Some(pipe) if !pipe.full && pipe.room() > 0 => {
                    Some(io.splice(src, pipe.wr, pipe.room(), src).inspect(|&n| {
                        pipe.len += n;
                        stats.bytes_splice.add(n as u64);
                    }))
                }
                None if p.pos == p.buf.len() => {
                    p.buf.clear();
                    p.pos = 0;
                    if p.buf.capacity() < buffer_size {
                        p.buf.reserve(buffer_size);
                    }
                    let r = io.read_max(src, &mut p.buf, buffer_size);
                    if let Ok(n) = r {
                        stats.bytes_copy.add(n as u64);
                        if n > 0 && n < buffer_size && !sf.peer_closed && !P::COMPLETION {
                            sf.readable = false;
                        }
                    }
                    Some(r)
                }
                _ => None,
            };
            match r {
                None => {}
                Some(Ok(0)) => {
                    p.eof = true;
                    moved = true;
                }
                Some(Ok(_)) => moved = true,
                Some(Err(e)) if pending(&e) => sf.readable = false,
                Some(Err(e)) if sys::would_block(&e) => match p.pipe.as_mut() {
                    // Full, or the socket is empty: drain the pipe, then try again.
                    Some(pipe) if pipe.len > 0 => pipe.full = true,
                    _ => sf.readable = false,
                },
                Some(Err(e)) if e.raw_os_error() == Some(libc::EINTR) => {}
                Some(Err(_)) => return Err(Close),
            }
        }
        if may_write && df.writable && p.pos < p.buf.len() {
            let want = p.buf.len() - p.pos;
            match io.write_parts(dst, &mut [Part::Owned(&mut p.buf, &mut p.pos)]) {
                Ok(n) => {
                    p.sent += n as u64;
                    moved = true;
                    if n < want {
                        df.writable = false;
                    }
                }
                Err(e) if sys::would_block(&e) || pending(&e) => df.writable = false,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => return Err(Close),
            }
        }
        if may_write && df.writable && p.pos == p.buf.len() {
            if let Some(pipe) = p.pipe.as_mut().filter(|pipe| pipe.len > 0) {
                match io.splice(pipe.rd, dst, pipe.len, dst) {
                    Ok(0) => {}
                    Ok(n) => {
                        pipe.len -= n;
                        pipe.full = false;
                        p.sent += n as u64;
                        moved = true;
                    }
                    Err(e) if sys::would_block(&e) || pending(&e) => df.writable = false,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(_) => return Err(Close),
                }
            }
        }
        if p.eof && p.held() == 0 && !p.shut {
            io.shutdown_write(dst);
            p.shut = true;
            moved = true;
        }
        progress |= moved;
        if !moved {
            break;
        }
    }
    Ok(progress)
}
