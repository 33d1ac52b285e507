//! The readiness engine: one per worker thread, generic over the event mechanism.
//!
//! The μserver's phases (paper §3, slides "Server Phases"): get events; accept new connections
//! (up to the accept-limit); process the connections that are ready. Level-triggered mechanisms
//! follow the μserver's interest changes exactly: a connection waits for readable, reads a
//! request, switches to writable, writes the reply when told it may, and switches back; with
//! epoll-lt each switch is an `epoll_ctl(MOD)`. Edge-triggered epoll keeps its own readiness
//! state and writes at once when the socket is known to be writable.
//!
//! Everything else — the connection table, deadlines, the accept gate, shutdown — is the
//! core's (`core.rs`).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use evlab_poll::{Events, Interest, Poller, PollerStats, Token};
use evlab_sys as sys;

use evlab_runtime::{AcceptFailure, BufPool, ACCEPT_RETRY};

use crate::conn::{Conn, State, WriteResult};
use crate::core::{Core, Engine};
use crate::handler::{Ctx, Drained};
use evlab_runtime::ServiceState;

/// Bytes read per read(2) at least.
const READ_CHUNK: usize = 4096;

/// What the readiness engine knows of one connection.
#[derive(Debug)]
pub struct Flags {
    /// The interest registered with the mechanism.
    interest: Interest,
    /// Readiness as the connection knows it: set by events; cleared by EAGAIN or a short
    /// transfer (edge-triggered), or after each event's work (level-triggered).
    readable: bool,
    writable: bool,
    /// The peer shut down its side (RDHUP): read on to EOF, a short read proves nothing.
    peer_closed: bool,
    /// Queued in the flush list.
    flush_queued: bool,
}

impl Default for Flags {
    fn default() -> Flags {
        Flags {
            interest: Interest::READABLE,
            readable: false,
            writable: false,
            peer_closed: false,
            flush_queued: false,
        }
    }
}

enum Next {
    Keep,
    Close,
}

/// Replies deferred to the end of a sweep (`Config::batch_writes`).
struct Flush {
    deferring: bool,
    list: Vec<RawFd>,
}

pub(crate) struct Readiness<P: Poller> {
    poller: P,
    events: Events,
    listen_fd: RawFd,
    /// `--accept-mode exclusive`: the listener is registered with EPOLLEXCLUSIVE.
    exclusive: bool,
    waker_fd: RawFd,
    edge: bool,
    /// Edge-triggered and the last accept round stopped at the accept-limit: connections may
    /// still be pending without a new edge to announce them.
    accept_pending: bool,
    flush: Flush,
    /// Waits that returned at least one event for the loop (`Engine::waits_with_events`).
    waits_with_events: u64,
}

impl<P: Poller> Readiness<P> {
    pub fn new(core: &mut Core<Flags>, listen_fd: RawFd) -> io::Result<Readiness<P>> {
        let mut poller = P::new()?;
        let waker_fd = core.waker.rx;
        poller.register(waker_fd, Token(waker_fd as usize), Interest::READABLE)?;
        let exclusive = core.ctx.cfg.accept_mode == crate::AcceptMode::Exclusive;
        if exclusive {
            poller.register_exclusive(listen_fd, Token(listen_fd as usize))?;
        } else {
            poller.register(listen_fd, Token(listen_fd as usize), Interest::READABLE)?;
        }
        let edge = poller.edge_triggered();
        Ok(Readiness {
            poller,
            events: Events::with_capacity(core.ctx.cfg.events_per_wait),
            listen_fd,
            exclusive,
            waker_fd,
            edge,
            accept_pending: false,
            flush: Flush {
                deferring: false,
                list: Vec::new(),
            },
            waits_with_events: 0,
        })
    }

    fn accept_ready(&mut self, core: &mut Core<Flags>) -> io::Result<()> {
        let limit = core.ctx.cfg.accept_limit.unwrap_or(usize::MAX);
        let mut accepted = 0;
        core.ctx.stats.accept_wakeups.inc();
        while accepted < limit {
            if !core.has_room() {
                return core.pause_accept(self, None);
            }
            match sys::accept4(self.listen_fd, libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) {
                Ok(fd) => {
                    accepted += 1;
                    if let Err(e) = self
                        .poller
                        .register(fd, Token(fd as usize), Interest::READABLE)
                    {
                        core.ctx.stats.conns.accept_errors.inc();
                        let _ = sys::close(fd);
                        if e.raw_os_error() == Some(libc::ENOMEM) {
                            let retry = core.ctx.now + ACCEPT_RETRY;
                            return core.pause_accept(self, Some(retry));
                        }
                        continue;
                    }
                    core.add(fd);
                }
                Err(e) => {
                    let failure = AcceptFailure::of(e.raw_os_error().unwrap_or(0));
                    if failure == AcceptFailure::Empty {
                        // Woken for a connection another worker took (the herd), or the
                        // round's drain to EAGAIN.
                        core.ctx.stats.accept_eagain.inc();
                        if accepted == 0 {
                            core.ctx.stats.accept_empty.inc();
                        }
                    }
                    if failure.counted() {
                        core.ctx.stats.conns.accept_errors.inc();
                    }
                    match failure {
                        AcceptFailure::Transient => {}
                        AcceptFailure::Exhausted => {
                            // Out of descriptors: keep serving what we have; retry accepting
                            // when a connection closes or shortly, never spinning on a
                            // listener we cannot drain.
                            let retry = core.ctx.now + ACCEPT_RETRY;
                            return core.pause_accept(self, Some(retry));
                        }
                        AcceptFailure::Empty | AcceptFailure::Cancelled | AcceptFailure::Other => {
                            return Ok(())
                        }
                    }
                }
            }
        }
        // Stopped at the limit with connections perhaps still queued.
        if self.edge {
            self.accept_pending = true;
        }
        Ok(())
    }

    fn on_event(
        &mut self,
        core: &mut Core<Flags>,
        fd: RawFd,
        readable: bool,
        writable: bool,
        peer_closed: bool,
    ) -> io::Result<()> {
        let edge = self.edge;
        let Some(slot) = core.conns.get_mut(fd as usize).and_then(|s| s.as_mut()) else {
            return Ok(()); // a stale event for a descriptor closed earlier in this batch
        };
        let x = &mut slot.x;
        if edge {
            x.readable |= readable;
            x.writable |= writable;
            x.peer_closed |= peer_closed;
        } else {
            x.readable = readable;
            x.writable = writable;
        }
        let next = drive(
            &mut core.ctx,
            &mut self.poller,
            &mut self.flush,
            edge,
            &mut slot.c,
            x,
        );
        if let Next::Close = next {
            core.close(self, fd)?;
        }
        Ok(())
    }

    /// Writes the replies deferred during the sweep (edge-triggered only: interest is unchanged
    /// while a reply waits, so deferring costs no syscall).
    fn flush_writes(&mut self, core: &mut Core<Flags>) -> io::Result<()> {
        let mut list = std::mem::take(&mut self.flush.list);
        for &fd in &list {
            let next = match core.conns.get_mut(fd as usize).and_then(|s| s.as_mut()) {
                Some(slot) if slot.x.flush_queued => {
                    slot.x.flush_queued = false;
                    drive(
                        &mut core.ctx,
                        &mut self.poller,
                        &mut self.flush,
                        self.edge,
                        &mut slot.c,
                        &mut slot.x,
                    )
                }
                _ => continue,
            };
            if let Next::Close = next {
                core.close(self, fd)?;
            }
        }
        list.clear();
        self.flush.list = list;
        Ok(())
    }
}

impl<P: Poller> Engine for Readiness<P> {
    type Extra = Flags;

    fn turn(&mut self, core: &mut Core<Flags>, timeout: Option<Duration>) -> io::Result<()> {
        self.poller.wait(&mut self.events, timeout)?;
        if !self.events.is_empty() {
            self.waits_with_events += 1;
        }
        core.tick();
        let mut accept_now = std::mem::take(&mut self.accept_pending);
        self.flush.deferring = core.ctx.cfg.batch_writes && self.edge;
        for i in 0..self.events.len() {
            let ev = self.events.as_slice()[i];
            let fd = ev.token.0 as RawFd;
            if fd == self.listen_fd {
                accept_now |= ev.readable();
            } else if fd == self.waker_fd {
                // Only bytes actually written mean "stop".
                let mut b = [0u8; 8];
                let woken = ev.readable() && sys::read(self.waker_fd, &mut b).is_ok();
                if woken || core.ctx.shared.shutdown_requested() {
                    core.begin_shutdown(self)?;
                }
            } else {
                self.on_event(core, fd, ev.readable(), ev.writable(), ev.peer_closed())?;
            }
        }
        self.flush.deferring = false;
        self.flush_writes(core)?;
        if accept_now && core.gate.open() {
            self.accept_ready(core)?;
        }
        Ok(())
    }

    fn close(&mut self, _ctx: &mut Ctx, c: &Conn, x: &mut Flags) -> io::Result<()> {
        *x = Flags::default();
        let _ = self.poller.deregister(c.fd);
        sys::close(c.fd)
    }

    fn stop_accepting(&mut self) -> io::Result<()> {
        self.accept_pending = false;
        self.poller.deregister(self.listen_fd)
    }

    fn start_accepting(&mut self) -> io::Result<()> {
        let token = Token(self.listen_fd as usize);
        if self.exclusive {
            self.poller.register_exclusive(self.listen_fd, token)?;
        } else {
            self.poller
                .register(self.listen_fd, token, Interest::READABLE)?;
        }
        // Connections may have queued while paused; an edge-triggered listener would not
        // report them again.
        self.accept_pending = self.edge;
        Ok(())
    }

    fn send_queued(&mut self, core: &mut Core<Flags>, fd: RawFd) -> io::Result<()> {
        let Some(slot) = core.conns.get_mut(fd as usize).and_then(|s| s.as_mut()) else {
            return Ok(());
        };
        slot.x.writable = true;
        let next = drive(
            &mut core.ctx,
            &mut self.poller,
            &mut self.flush,
            self.edge,
            &mut slot.c,
            &mut slot.x,
        );
        if let Next::Close = next {
            core.close(self, fd)?;
        }
        Ok(())
    }

    fn wake_at(&self) -> Option<Duration> {
        self.accept_pending.then_some(Duration::ZERO)
    }

    fn poller_stats(&self) -> PollerStats {
        self.poller.stats()
    }

    fn waits_with_events(&self) -> u64 {
        self.waits_with_events
    }

    fn finish(&mut self, core: &mut Core<Flags>) {
        if core.gate.accepting() {
            let _ = self.poller.deregister(self.listen_fd);
        }
        let _ = self.poller.deregister(self.waker_fd);
    }
}

/// Advances one connection as far as its readiness allows, then registers the interest its
/// state needs.
fn drive<P: Poller>(
    ctx: &mut Ctx,
    poller: &mut P,
    flush: &mut Flush,
    edge: bool,
    c: &mut Conn,
    x: &mut Flags,
) -> Next {
    loop {
        match c.state {
            State::Reading => {
                if !x.readable {
                    break;
                }
                match read_some(&mut ctx.pool, c) {
                    Ok((0, _)) => {
                        // The peer closed its side. Every complete request was answered as it
                        // arrived (a reply still queued would mean we are writing, not
                        // reading), so what is left is at most part of a head.
                        x.readable = false;
                        c.peer_eof = true;
                        return Next::Close;
                    }
                    Ok((n, offered)) => {
                        // Level-triggered: one read per event, as the μserver. Edge-triggered:
                        // a read that did not fill what was offered drained the socket at that
                        // instant, and any later arrival is a new edge, so no read for EAGAIN.
                        if !edge || (n < offered && !x.peer_closed) {
                            x.readable = false;
                        }
                        if ctx.answer(c) && ctx.cfg.eager_write && !edge {
                            x.writable = true;
                        }
                    }
                    Err(e) if sys::would_block(&e) => {
                        x.readable = false;
                        ctx.pool.reclaim(&mut c.rbuf);
                        break;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(_) => {
                        ctx.stats.conns.io_errors.inc();
                        return Next::Close;
                    }
                }
            }
            State::Writing => {
                if !x.writable {
                    break;
                }
                if flush.deferring {
                    // Written after the sweep, with every other reply this sweep produced.
                    if !x.flush_queued {
                        x.flush_queued = true;
                        flush.list.push(c.fd);
                    }
                    return Next::Keep;
                }
                match c.out.write_to(c.fd) {
                    Ok((res, n)) => {
                        ctx.stats.bytes_sent.add(n as u64);
                        if let WriteResult::Blocked = res {
                            x.writable = false;
                            if n > 0 {
                                ctx.await_send(c);
                            }
                            break;
                        }
                        match ctx.drained(c) {
                            Drained::Close => return Next::Close,
                            Drained::Lingering | Drained::Busy | Drained::Delayed => {}
                            // Level-triggered: the μserver switches interest back to reading
                            // and waits to be told the next request has arrived.
                            Drained::Idle if !edge => break,
                            Drained::Idle => {}
                        }
                    }
                    Err(_) => {
                        ctx.stats.conns.io_errors.inc();
                        return Next::Close;
                    }
                }
            }
            // Held for the origin delay: the core's deadline moves it on (`send_queued`).
            State::Delayed => break,
            State::Lingering => {
                if !x.readable {
                    break;
                }
                match sys::read(c.fd, &mut ctx.scratch) {
                    Ok(0) => return Next::Close,
                    Ok(_) => {}
                    Err(e) if sys::would_block(&e) => {
                        x.readable = false;
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
        // Nothing to read (pipelined requests wait their turn) and nothing to write yet.
        State::Delayed => Interest::NONE,
    };
    if want != x.interest {
        if poller.reregister(c.fd, Token(c.fd as usize), want).is_err() {
            ctx.stats.conns.io_errors.inc();
            return Next::Close;
        }
        x.interest = want;
    }
    Next::Keep
}

/// Reads into the connection's buffer (lent from the pool); returns bytes read and offered.
fn read_some(pool: &mut BufPool, c: &mut Conn) -> io::Result<(usize, usize)> {
    pool.lend(&mut c.rbuf);
    if c.rbuf.capacity() - c.rbuf.len() < READ_CHUNK / 2 {
        c.rbuf.reserve(READ_CHUNK.max(c.rbuf.len()));
    }
    let offered = c.rbuf.capacity() - c.rbuf.len();
    sys::read_into(c.fd, &mut c.rbuf).map(|n| (n, offered))
}
