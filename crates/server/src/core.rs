//! The server core: everything a worker does that does not depend on how it learns of I/O.
//!
//! A worker is a [`Core`] and an [`Engine`]. The core owns the connection table (slots indexed
//! by descriptor, shells recycled), the accept gate (pause at `--max-conns` or when out of
//! descriptors, resume when a connection closes or a retry time passes), the deadlines (header,
//! send and linger timeouts, one per connection), the statistics, the buffer pool and the
//! graceful shutdown. The engine holds only what differs between mechanisms: how it waits, how
//! bytes come in and go out, and what it must do to stop watching a descriptor.
//!
//! Two engines exist: the readiness engine (`readiness.rs`, generic over every
//! [`evlab_poll::Poller`]) and the completion engine (`completion.rs`, io_uring). Because the
//! lifecycle lives here once, they cannot drift apart: what happens after a reply drains
//! ([`Ctx::drained`]), when a deadline passes, when a connection closes while accepting is
//! paused, or when the server shuts down, is the same code for both.

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use evlab_http::{ContentCache, DateCache, Status};
use evlab_poll::PollerStats;
use evlab_runtime::{BufPool, Deadlines, Gate, Ready, Spares, Timeouts, Trim, Waker};

use crate::conn::{Conn, State};
use crate::handler::{respond_error, Ctx};
use crate::stats::{Shared, WorkerStats};
use crate::Config;
use evlab_runtime::ServiceState;

/// Closed connections' shells kept for reuse.
const SPARES_MAX: usize = 4096;

/// One connection's place in the table: the connection and the engine's state for it.
#[derive(Debug, Default)]
pub struct Slot<X> {
    pub c: Conn,
    pub x: X,
}

/// What differs between mechanisms. The core calls these; the engine calls back into the core
/// (`Core::add`, `Core::close`, `Ctx::drained`, …) from `turn`.
pub(crate) trait Engine: Sized {
    /// The engine's own state per connection (recycled with the connection's shell).
    type Extra: Default;

    /// Waits for I/O (at most `timeout`; `None` waits until something happens), then handles
    /// what happened. Must call [`Core::tick`] right after waking.
    fn turn(&mut self, core: &mut Core<Self::Extra>, timeout: Option<Duration>) -> io::Result<()>;

    /// Stops watching the connection's descriptor and closes it.
    /// Leaves `x` ready for another connection.
    fn close(&mut self, ctx: &mut Ctx, c: &Conn, x: &mut Self::Extra) -> io::Result<()>;

    /// Stops taking new connections (the gate closes).
    fn stop_accepting(&mut self) -> io::Result<()>;

    /// Takes new connections again (the gate opens).
    fn start_accepting(&mut self) -> io::Result<()>;

    /// Output was queued for `fd` outside the engine's own handling (a 408 when a request head
    /// timed out): send it.
    fn send_queued(&mut self, core: &mut Core<Self::Extra>, fd: RawFd) -> io::Result<()>;

    /// How soon the engine needs to run again regardless of deadlines (`Some(ZERO)`: at once).
    fn wake_at(&self) -> Option<Duration> {
        None
    }

    /// The mechanism's own counters.
    fn poller_stats(&self) -> PollerStats;

    /// Waits that handed the loop at least one event it acts on (a readiness engine's; none
    /// counted by the others). Copied with [`Engine::poller_stats`], so that the two agree.
    fn waits_with_events(&self) -> u64 {
        0
    }

    /// After every connection was closed at the end: release what the engine holds.
    fn finish(&mut self, core: &mut Core<Self::Extra>);
}

/// The engine-independent state of one worker.
pub(crate) struct Core<X> {
    pub ctx: Ctx,
    pub conns: Vec<Option<Slot<X>>>,
    spares: Spares<Slot<X>>,
    trim: Trim,
    next_id: u32,
    /// The accept gate, the open connections and the shutdown.
    pub gate: Gate,
    /// Written by `Shared::request_shutdown` (and the signal handler) to wake this worker;
    /// the engine watches `waker.rx`.
    pub waker: Waker,
}

/// Starts a worker: builds its core and engine, tells `Server::start` whether it came up, runs
/// it until shutdown, and closes everything it holds.
pub(crate) fn run_worker<E: Engine>(
    worker: usize,
    listen_fd: RawFd,
    cfg: Arc<Config>,
    shared: Arc<Shared>,
    ready: Ready,
    make: impl FnOnce(&mut Core<E::Extra>, RawFd) -> io::Result<E>,
) -> io::Result<()> {
    let made =
        Core::new(worker, cfg, shared).and_then(|mut core| match make(&mut core, listen_fd) {
            Ok(engine) => {
                // Before announcing: whoever waits for the workers may then take the list of
                // wakers (the signal handler does).
                let ctx = &core.ctx;
                ctx.shared.registry.add(ctx.stats.clone(), &core.waker);
                Ok((core, engine))
            }
            Err(e) => {
                core.waker.close();
                Err(e)
            }
        });
    ready.report(&made);
    let (mut core, mut engine) = made?;
    let r = core.run(&mut engine);
    core.teardown(&mut engine);
    r
}

impl<X: Default> Core<X> {
    fn new(worker: usize, cfg: Arc<Config>, shared: Arc<Shared>) -> io::Result<Core<X>> {
        let max_conns = cfg.max_conns;
        let timeouts = Timeouts {
            header: cfg.header_timeout,
            send: cfg.send_timeout,
        };
        let cache = ContentCache::new(cfg.cache_config())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let waker = Waker::new()?;
        let stats = Arc::new(WorkerStats::for_this_thread(worker));
        let mut date = DateCache::new();
        date.tick(Instant::now());
        let think =
            crate::handler::Think::new(cfg.origin_delay, cfg.origin_delay_sd, worker as u64 + 1);
        Ok(Core {
            ctx: Ctx {
                cfg,
                shared,
                stats,
                cache,
                date,
                now: Instant::now(),
                timers: Deadlines::new(),
                timeouts,
                pool: BufPool::default(),
                scratch: vec![0; 16 * 1024],
                think,
            },
            conns: Vec::new(),
            spares: Spares::new(SPARES_MAX),
            trim: Trim::new(Instant::now()),
            next_id: 0,
            gate: Gate::new(max_conns),
            waker,
        })
    }

    /// Called by the engine right after each wait: the time of this turn.
    #[inline]
    pub fn tick(&mut self) {
        self.ctx.now = Instant::now();
        self.ctx.date.tick(self.ctx.now);
    }

    /// The connection on `fd`, if open.
    #[inline]
    pub fn slot(&mut self, fd: RawFd) -> Option<&mut Slot<X>> {
        self.conns.get_mut(fd as usize).and_then(|s| s.as_mut())
    }

    /// Whether another connection may be taken.
    #[inline]
    pub fn has_room(&self) -> bool {
        self.gate.has_room()
    }

    /// Enters a freshly accepted descriptor in the table (the engine watches it already, or
    /// does so next); its header timeout starts.
    pub fn add(&mut self, fd: RawFd) -> &mut Slot<X> {
        let i = fd as usize;
        if i >= self.conns.len() {
            self.conns.resize_with((i + 1).next_power_of_two(), || None);
        }
        self.next_id = (self.next_id + 1) & 0xff_ffff;
        let mut slot = self.spares.take().unwrap_or_default();
        slot.c.reset(fd, self.next_id);
        self.ctx.await_request(&mut slot.c);
        self.gate.active += 1;
        self.ctx.stats.conns.opened(self.gate.active);
        self.conns[i].insert(slot)
    }

    /// Closes the connection on `fd` (if open) and recycles its shell; takes connections
    /// again if the gate was closed for want of room.
    pub fn close<E: Engine<Extra = X>>(&mut self, engine: &mut E, fd: RawFd) -> io::Result<()> {
        let Some(mut slot) = self.conns.get_mut(fd as usize).and_then(|s| s.take()) else {
            return Ok(());
        };
        let r = engine.close(&mut self.ctx, &slot.c, &mut slot.x);
        slot.c.rbuf.clear();
        self.ctx.pool.reclaim(&mut slot.c.rbuf);
        slot.c.out.reset();
        self.ctx.pool.reclaim(slot.c.out.buf_slot());
        self.spares.put(slot);
        self.gate.active -= 1;
        self.ctx.stats.conns.closed(self.gate.active);
        r?;
        self.resume_accept(engine)
    }

    /// Closes the gate; `retry_at`: when to try again even if no connection closes.
    pub fn pause_accept<E: Engine<Extra = X>>(
        &mut self,
        engine: &mut E,
        retry_at: Option<Instant>,
    ) -> io::Result<()> {
        if self.gate.close(retry_at) {
            self.ctx.stats.accept_pauses.inc();
            engine.stop_accepting()?;
        }
        Ok(())
    }

    /// Opens the gate, unless open, shutting down or full.
    pub fn resume_accept<E: Engine<Extra = X>>(&mut self, engine: &mut E) -> io::Result<()> {
        if !self.gate.may_open() {
            return Ok(());
        }
        self.gate.opened();
        engine.start_accepting()
    }

    fn run<E: Engine<Extra = X>>(&mut self, engine: &mut E) -> io::Result<()> {
        if self.ctx.shared.shutdown_requested() {
            self.begin_shutdown(engine)?;
        }
        loop {
            if self.gate.done(self.ctx.now) {
                return Ok(());
            }
            let timeout = match engine.wake_at() {
                Some(d) => Some(d),
                None => self.ctx.wait_timeout(self.gate.wake_at(self.ctx.now)),
            };
            engine.turn(self, timeout)?;
            self.expire(engine)?;
            let ctx = &mut self.ctx;
            self.trim
                .run(ctx.now, &mut ctx.pool, &mut self.spares, &mut ctx.timers);
            let st = &self.ctx.stats;
            st.poller.set(&engine.poller_stats());
            st.waits_with_events.set(engine.waits_with_events());
            st.timer_entries.set(self.ctx.timers.len() as u64);
            st.max_timer_entries.set(self.ctx.timers.max_len() as u64);
            st.pool_bytes.set(self.ctx.pool.bytes() as u64);
            st.pool_buffers.set(self.ctx.pool.buffers() as u64);
            st.spare_shells.set(self.spares.len() as u64);
            st.table_slots.set(self.conns.capacity() as u64);
            self.ctx.shared.publish(st);
        }
    }

    /// Acts on every deadline that has passed.
    fn expire<E: Engine<Extra = X>>(&mut self, engine: &mut E) -> io::Result<()> {
        let now = self.ctx.now;
        while let Some(due) = self.ctx.timers.pop_due(now) {
            let Some(slot) = self.conns.get_mut(due.fd as usize).and_then(|s| s.as_mut()) else {
                continue;
            };
            if slot.c.id != due.id || !self.ctx.timers.expired(&mut slot.c, due, now) {
                continue;
            }
            let c = &mut slot.c;
            match c.state {
                State::Reading if !c.rbuf.is_empty() => {
                    // Part of a head arrived: say why we give up.
                    self.ctx.stats.header_timeouts.inc();
                    c.rbuf.clear();
                    respond_error(&mut self.ctx, c, Status::RequestTimeout, 1, false, false);
                    engine.send_queued(self, due.fd)?;
                }
                State::Reading => {
                    self.ctx.stats.header_timeouts.inc();
                    self.close(engine, due.fd)?;
                }
                State::Writing => {
                    self.ctx.stats.send_timeouts.inc();
                    self.close(engine, due.fd)?;
                }
                State::Lingering => self.close(engine, due.fd)?,
                State::Delayed => {
                    // The think time is over: send the reply it held.
                    self.ctx.delay_over(c);
                    engine.send_queued(self, due.fd)?;
                }
            }
        }
        let conns = &self.conns;
        self.ctx.timers.compact(self.gate.active, |d| {
            matches!(conns.get(d.fd as usize), Some(Some(s))
                if s.c.id == d.id && s.c.timer.stands_for(d))
        });
        if self.gate.retry_due(now) {
            self.resume_accept(engine)?;
        }
        Ok(())
    }

    /// Stops accepting; closes connections with nothing in flight and marks the rest to close
    /// once their replies are out.
    pub fn begin_shutdown<E: Engine<Extra = X>>(&mut self, engine: &mut E) -> io::Result<()> {
        match self.gate.begin_shutdown(self.ctx.now) {
            None => return Ok(()),
            Some(true) => engine.stop_accepting()?,
            Some(false) => {}
        }
        for i in 0..self.conns.len() {
            let idle = match self.conns[i].as_mut() {
                Some(s) => {
                    s.c.close_after = true;
                    !matches!(s.c.state, State::Writing | State::Delayed)
                }
                None => false,
            };
            if idle {
                self.close(engine, i as RawFd)?;
            }
        }
        Ok(())
    }

    fn teardown<E: Engine<Extra = X>>(&mut self, engine: &mut E) {
        for i in 0..self.conns.len() {
            if self.conns[i].is_some() {
                let _ = self.close(engine, i as RawFd);
            }
        }
        engine.finish(self);
        self.ctx.shared.registry.remove_waker(&self.waker);
        self.waker.close();
        self.ctx.stats.poller.set(&engine.poller_stats());
        let n = engine.waits_with_events();
        self.ctx.stats.waits_with_events.set(n);
        self.ctx.shared.publish(&self.ctx.stats);
    }
}
