//! The readiness loop: one per worker thread, generic over the event mechanism.
//!
//! The μserver's phases (paper §3, slides "Server Phases"): get events; accept new connections
//! (up to the accept-limit); process the connections that are ready. Level-triggered mechanisms
//! follow the μserver's interest changes exactly: a connection waits for readable, reads a
//! request, switches to writable, writes the reply when told it may, and switches back; with
//! epoll-lt each switch is an `epoll_ctl(MOD)`. Edge-triggered epoll keeps its own readiness
//! state and writes at once when the socket is known to be writable.

use std::io;
use std::os::fd::RawFd;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use evlab_http::{ContentCache, DateCache, Status};
use evlab_poll::{sys, Events, Interest, Mechanism, Poller, Token};

use crate::conn::{Conn, State, WriteResult};
use crate::handler::{process_input, respond_error, Ctx};
use crate::stats::{Shared, WorkerStats};
use crate::timers::TimerQueue;
use crate::Config;

/// How long to wait before retrying accept after EMFILE/ENFILE.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// How long a graceful shutdown waits for responses in flight.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Bytes read per read(2) at least.
const READ_CHUNK: usize = 4096;

pub(crate) type Ready = Sender<Result<(), (usize, io::Error)>>;

/// Tells `Server::start` whether this worker came up, and passes the result on.
pub(crate) fn announce<T>(worker: usize, ready: Ready, made: io::Result<T>) -> io::Result<T> {
    let _ = ready.send(match &made {
        Ok(_) => Ok(()),
        Err(e) => Err((worker, io::Error::new(e.kind(), e.to_string()))),
    });
    made
}

pub fn run(
    worker: usize,
    listen_fd: RawFd,
    cfg: Arc<Config>,
    shared: Arc<Shared>,
    ready: Ready,
) -> io::Result<()> {
    // One arm per mechanism of the registry: a readiness mechanism runs the generic loop over
    // its Poller type, the completion engine runs its own loop.
    macro_rules! dispatch {
        ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {
            match cfg.mechanism {
                $(Mechanism::$v => dispatch!(@run $kind $args),)*
            }
        };
        (@run readiness ($ty:ty)) => { run_with::<$ty>(worker, listen_fd, cfg, shared, ready) };
        (@run completion $args:tt) => { crate::uring::run(worker, listen_fd, cfg, shared, ready) };
    }
    evlab_poll::for_each_mechanism!(dispatch)
}

fn run_with<P: Poller>(
    worker: usize,
    listen_fd: RawFd,
    cfg: Arc<Config>,
    shared: Arc<Shared>,
    ready: Ready,
) -> io::Result<()> {
    let mut w = announce(
        worker,
        ready,
        Worker::<P>::new(worker, listen_fd, cfg, shared),
    )?;
    let r = w.run();
    w.teardown();
    r
}

enum Next {
    Keep,
    Close,
}

struct Worker<P: Poller> {
    poller: P,
    events: Events,
    conns: Vec<Option<Conn>>,
    ctx: Ctx,
    listen_fd: RawFd,
    waker_fd: RawFd,
    /// The listener is registered (accepting is not paused).
    accepting: bool,
    accept_retry_at: Option<Instant>,
    /// Edge-triggered and the last accept round stopped at the accept-limit: connections may
    /// still be pending without a new edge to announce them.
    accept_pending: bool,
    shutting_down: Option<Instant>,
    active: usize,
}

impl<P: Poller> Worker<P> {
    fn new(
        worker: usize,
        listen_fd: RawFd,
        cfg: Arc<Config>,
        shared: Arc<Shared>,
    ) -> io::Result<Worker<P>> {
        let cache = ContentCache::new(cfg.cache_config())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let mut poller = P::new()?;
        let waker_fd = sys::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC)?;
        poller.register(waker_fd, Token(waker_fd as usize), Interest::READABLE)?;
        poller.register(listen_fd, Token(listen_fd as usize), Interest::READABLE)?;
        let stats = Arc::new(WorkerStats::for_this_thread(worker));
        shared.add_worker(stats.clone(), waker_fd);
        let edge = poller.edge_triggered();
        let now = Instant::now();
        let mut date = DateCache::new();
        date.refresh(SystemTime::now());
        Ok(Worker {
            poller,
            events: Events::with_capacity(cfg.events_per_wait),
            conns: Vec::new(),
            ctx: Ctx {
                header_timers: cfg.header_timeout.map(TimerQueue::new),
                linger_timers: TimerQueue::new(cfg.linger),
                cfg,
                shared,
                stats,
                cache,
                date,
                now,
                next_gen: 1,
                edge,
                scratch: vec![0; 16 * 1024],
                flush: Vec::new(),
                deferring: false,
            },
            listen_fd,
            waker_fd,
            accepting: true,
            accept_retry_at: None,
            accept_pending: false,
            shutting_down: None,
            active: 0,
        })
    }

    fn run(&mut self) -> io::Result<()> {
        if self.ctx.shared.shutdown_requested() {
            self.begin_shutdown();
        }
        loop {
            if let Some(deadline) = self.shutting_down {
                if self.active == 0 || self.ctx.now >= deadline {
                    return Ok(());
                }
            }
            let timeout = self.next_timeout();
            self.poller.wait(&mut self.events, timeout)?;
            self.ctx.now = Instant::now();
            self.ctx.date.refresh(SystemTime::now());
            let mut accept_now = std::mem::take(&mut self.accept_pending);
            self.ctx.deferring = self.ctx.cfg.batch_writes && self.ctx.edge;
            for i in 0..self.events.len() {
                let ev = self.events.as_slice()[i];
                let fd = ev.token.0 as RawFd;
                if fd == self.listen_fd {
                    accept_now |= ev.readable();
                } else if fd == self.waker_fd {
                    // Registered once for IN|OUT by some mechanisms: an eventfd is always
                    // writable, so only a value actually written means "stop".
                    let mut b = [0u8; 8];
                    let woken = ev.readable() && sys::read(self.waker_fd, &mut b).is_ok();
                    if (woken || self.ctx.shared.shutdown_requested())
                        && self.shutting_down.is_none()
                    {
                        self.begin_shutdown();
                    }
                } else {
                    self.on_event(fd, ev.readable(), ev.writable(), ev.peer_closed());
                }
            }
            self.ctx.deferring = false;
            self.flush_writes();
            if accept_now && self.accepting && self.shutting_down.is_none() {
                self.accept_ready();
            }
            self.expire_timers();
            self.ctx.stats.set_poller(&self.poller.stats());
        }
    }

    fn next_timeout(&self) -> Option<Duration> {
        if self.accept_pending {
            return Some(Duration::ZERO);
        }
        self.ctx
            .wait_timeout(self.accept_retry_at, self.shutting_down)
    }

    // ---- accepting ----

    fn accept_ready(&mut self) {
        let limit = self.ctx.cfg.accept_limit.unwrap_or(usize::MAX);
        let mut accepted = 0;
        while accepted < limit {
            if self.active >= self.ctx.cfg.max_conns {
                self.pause_accept(None);
                return;
            }
            match sys::accept4(self.listen_fd, libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) {
                Ok(fd) => {
                    accepted += 1;
                    if let Err(e) = self.add_conn(fd) {
                        self.ctx.stats.accept_errors.inc();
                        let _ = sys::close(fd);
                        if e.raw_os_error() == Some(libc::ENOMEM) {
                            self.pause_accept(Some(self.ctx.now + ACCEPT_RETRY));
                            return;
                        }
                    }
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) => return,
                    Some(libc::EINTR) | Some(libc::ECONNABORTED) | Some(libc::EPROTO) => {}
                    Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS)
                    | Some(libc::ENOMEM) => {
                        // Out of descriptors: keep serving what we have; retry accepting when a
                        // connection closes or shortly, never spinning on a listener we cannot drain.
                        self.ctx.stats.accept_errors.inc();
                        self.pause_accept(Some(self.ctx.now + ACCEPT_RETRY));
                        return;
                    }
                    _ => {
                        self.ctx.stats.accept_errors.inc();
                        return;
                    }
                },
            }
        }
        // Stopped at the limit with connections perhaps still queued.
        if self.ctx.edge {
            self.accept_pending = true;
        }
    }

    fn pause_accept(&mut self, retry_at: Option<Instant>) {
        if self.accepting && self.poller.deregister(self.listen_fd).is_ok() {
            self.accepting = false;
            self.ctx.stats.accept_pauses.inc();
        }
        self.accept_retry_at = retry_at;
        self.accept_pending = false;
    }

    fn resume_accept(&mut self) {
        if self.accepting || self.shutting_down.is_some() {
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
            self.accepting = true;
            self.accept_retry_at = None;
            // Connections may have queued while paused; an edge-triggered listener would not
            // report them again.
            self.accept_pending = self.ctx.edge;
        }
    }

    fn add_conn(&mut self, fd: RawFd) -> io::Result<()> {
        let i = fd as usize;
        if i >= self.conns.len() {
            self.conns.resize_with((i + 1).next_power_of_two(), || None);
        }
        self.poller.register(fd, Token(i), Interest::READABLE)?;
        let gen = self.ctx.next_gen();
        let c = Conn::new(fd, gen);
        if let Some(t) = self.ctx.header_timers.as_mut() {
            t.push(self.ctx.now, fd, gen);
        }
        self.conns[i] = Some(c);
        self.active += 1;
        let st = &self.ctx.stats;
        st.accepted.inc();
        st.active.set(self.active as u64);
        if self.active as u64 > st.max_active.get() {
            st.max_active.set(self.active as u64);
        }
        Ok(())
    }

    fn close_conn(&mut self, fd: RawFd) {
        let i = fd as usize;
        if let Some(slot) = self.conns.get_mut(i) {
            if slot.take().is_some() {
                let _ = self.poller.deregister(fd);
                let _ = sys::close(fd);
                self.active -= 1;
                self.ctx.stats.closed.inc();
                self.ctx.stats.active.set(self.active as u64);
                if !self.accepting {
                    self.resume_accept();
                }
            }
        }
    }

    // ---- connections ----

    fn on_event(&mut self, fd: RawFd, readable: bool, writable: bool, peer_closed: bool) {
        let edge = self.ctx.edge;
        let next = {
            let Some(c) = self.conns.get_mut(fd as usize).and_then(|s| s.as_mut()) else {
                return; // a stale event for a descriptor closed earlier in this batch
            };
            if edge {
                c.readable |= readable;
                c.writable |= writable;
                c.peer_closed |= peer_closed;
            } else {
                c.readable = readable;
                c.writable = writable;
            }
            drive(&mut self.ctx, &mut self.poller, c)
        };
        if let Next::Close = next {
            self.close_conn(fd);
        }
    }

    /// Writes the replies deferred during the sweep (edge-triggered only: interest is unchanged
    /// while a reply waits, so deferring costs no syscall).
    fn flush_writes(&mut self) {
        let mut list = std::mem::take(&mut self.ctx.flush);
        for &fd in &list {
            let next = match self.conns.get_mut(fd as usize).and_then(|s| s.as_mut()) {
                Some(c) if c.flush_queued => {
                    c.flush_queued = false;
                    drive(&mut self.ctx, &mut self.poller, c)
                }
                _ => continue,
            };
            if let Next::Close = next {
                self.close_conn(fd);
            }
        }
        list.clear();
        self.ctx.flush = list;
    }

    fn expire_timers(&mut self) {
        let now = self.ctx.now;
        while let Some(t) = self.ctx.header_timers.as_mut().and_then(|q| q.pop_due(now)) {
            let expired = match self.conns.get_mut(t.fd as usize).and_then(|s| s.as_mut()) {
                Some(c) if c.gen == t.gen && c.state == State::Reading && c.out.is_empty() => {
                    self.ctx.stats.header_timeouts.inc();
                    if c.rbuf.is_empty() {
                        true
                    } else {
                        // Part of a head arrived: say why we give up.
                        c.rbuf.clear();
                        respond_error(&mut self.ctx, c, Status::RequestTimeout, 1, false, false);
                        c.writable = true;
                        matches!(drive(&mut self.ctx, &mut self.poller, c), Next::Close)
                    }
                }
                _ => false,
            };
            if expired {
                self.close_conn(t.fd);
            }
        }
        while let Some(t) = self.ctx.linger_timers.pop_due(now) {
            let due = matches!(
                self.conns.get(t.fd as usize).and_then(|s| s.as_ref()),
                Some(c) if c.gen == t.gen && c.state == State::Lingering
            );
            if due {
                self.close_conn(t.fd);
            }
        }
        if let Some(at) = self.accept_retry_at {
            if now >= at {
                self.accept_retry_at = None;
                self.resume_accept();
            }
        }
    }

    // ---- shutdown ----

    fn begin_shutdown(&mut self) {
        self.shutting_down = Some(self.ctx.now + SHUTDOWN_GRACE);
        if self.accepting {
            let _ = self.poller.deregister(self.listen_fd);
            self.accepting = false;
        }
        self.accept_pending = false;
        self.accept_retry_at = None;
        let fds: Vec<RawFd> = self.conns.iter().flatten().map(|c| c.fd).collect();
        for fd in fds {
            let idle = match self.conns[fd as usize].as_mut() {
                Some(c) => {
                    c.close_after = true;
                    c.state != State::Writing
                }
                None => false,
            };
            if idle {
                self.close_conn(fd);
            }
        }
    }

    fn teardown(&mut self) {
        let fds: Vec<RawFd> = self.conns.iter().flatten().map(|c| c.fd).collect();
        for fd in fds {
            self.close_conn(fd);
        }
        if self.accepting {
            let _ = self.poller.deregister(self.listen_fd);
        }
        let _ = self.poller.deregister(self.waker_fd);
        self.ctx.shared.remove_waker(self.waker_fd);
        let _ = sys::close(self.waker_fd);
        self.ctx.stats.set_poller(&self.poller.stats());
    }
}

/// Advances one connection as far as its readiness allows, then registers the interest its
/// state needs.
fn drive<P: Poller>(ctx: &mut Ctx, poller: &mut P, c: &mut Conn) -> Next {
    let edge = ctx.edge;
    loop {
        match c.state {
            State::Reading => {
                if !c.readable {
                    break;
                }
                match read_some(c) {
                    Ok((0, _)) => {
                        // Peer closed its side; nothing more will come.
                        if c.out.is_empty() {
                            return Next::Close;
                        }
                        c.readable = false;
                        c.close_after = true;
                        c.state = State::Writing;
                    }
                    Ok((n, offered)) => {
                        // Level-triggered: one read per event, as the μserver. Edge-triggered:
                        // a read that did not fill what was offered drained the socket at that
                        // instant, and any later arrival is a new edge, so no read for EAGAIN.
                        if !edge || (n < offered && !c.peer_closed) {
                            c.readable = false;
                        }
                        process_input(ctx, c);
                        if !c.out.is_empty() {
                            c.state = State::Writing;
                            if ctx.cfg.eager_write && !edge {
                                c.writable = true;
                            }
                        }
                    }
                    Err(e) if sys::would_block(&e) => {
                        c.readable = false;
                        break;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(_) => {
                        ctx.stats.io_errors.inc();
                        return Next::Close;
                    }
                }
            }
            State::Writing => {
                if !c.writable {
                    break;
                }
                if ctx.deferring {
                    // Written after the sweep, with every other reply this sweep produced.
                    if !c.flush_queued {
                        c.flush_queued = true;
                        ctx.flush.push(c.fd);
                    }
                    return Next::Keep;
                }
                match c.out.write_to(c.fd) {
                    Ok((res, n)) => {
                        ctx.stats.bytes_sent.add(n as u64);
                        if let WriteResult::Blocked = res {
                            c.writable = false;
                            break;
                        }
                        // Everything sent.
                        if c.close_after {
                            if c.linger {
                                start_linger(ctx, c);
                                continue;
                            }
                            return Next::Close;
                        }
                        c.state = State::Reading;
                        // Requests already buffered are answered without waiting for readiness.
                        if !c.rbuf.is_empty() {
                            process_input(ctx, c);
                            if !c.out.is_empty() {
                                c.state = State::Writing;
                                continue;
                            }
                        }
                        if let Some(t) = ctx.header_timers.as_mut() {
                            t.push(ctx.now, c.fd, c.gen);
                        }
                        if !edge {
                            // Level-triggered: the μserver switches interest back to reading and
                            // waits to be told the next request has arrived.
                            break;
                        }
                    }
                    Err(_) => {
                        ctx.stats.io_errors.inc();
                        return Next::Close;
                    }
                }
            }
            State::Lingering => {
                if !c.readable {
                    break;
                }
                match sys::read(c.fd, &mut ctx.scratch) {
                    Ok(0) => return Next::Close,
                    Ok(_) => {}
                    Err(e) if sys::would_block(&e) => {
                        c.readable = false;
                        break;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(_) => return Next::Close,
                }
            }
        }
    }
    let want = match c.state {
        State::Reading | State::Lingering => Interest::READABLE,
        State::Writing => Interest::WRITABLE,
    };
    if want != c.interest {
        if poller.reregister(c.fd, Token(c.fd as usize), want).is_err() {
            ctx.stats.io_errors.inc();
            return Next::Close;
        }
        c.interest = want;
    }
    Next::Keep
}

/// Reads into the connection's buffer; returns bytes read and bytes offered.
fn read_some(c: &mut Conn) -> io::Result<(usize, usize)> {
    if c.rbuf.capacity() - c.rbuf.len() < READ_CHUNK / 2 {
        c.rbuf.reserve(READ_CHUNK.max(c.rbuf.len()));
    }
    let offered = c.rbuf.capacity() - c.rbuf.len();
    sys::read_into(c.fd, &mut c.rbuf).map(|n| (n, offered))
}

fn start_linger(ctx: &mut Ctx, c: &mut Conn) {
    let _ = sys::shutdown(c.fd, libc::SHUT_WR);
    c.state = State::Lingering;
    c.close_after = true;
    c.gen = ctx.next_gen();
    c.rbuf = Vec::new();
    ctx.linger_timers.push(ctx.now, c.fd, c.gen);
}
