//! The proxy's completion engine (`uring`): io_uring requests, not readiness.
//!
//! One ring per worker (SINGLE_ISSUER, DEFER_TASKRUN where the kernel has them), driven by the
//! same state machine as the readiness mechanisms (`worker/`): this type is the worker's
//! [`Engine`]. Its wait is the turn's one `io_uring_enter` (on the runtime's [`Ring`], as the
//! server's engine's), which submits what the turn queued; each completion is turned into what
//! the state machine asked for (bytes taken, a send ended) and, when it waits on it, an event
//! on the descriptor. Each transfer is a request (see `engine.rs`). What it submits:
//!
//! - the listener: one multishot IORING_OP_ACCEPT; accepted descriptors wait in a queue that
//!   `accept` empties;
//! - reads: IORING_OP_RECV into a buffer of the engine's, sized by what the state machine
//!   asked for (so a head read in the splice modes still takes at most 4 KiB and leaves the
//!   body in the socket). When the state machine reads again its buffer is empty (a response
//!   head, a copied body's next batch, a client's next requests) and the request's buffer
//!   becomes its buffer, swapped, not copied; only a read that adds to bytes the state
//!   machine already holds (the rest of a head that came in pieces, say) copies. After a
//!   recv that came back short (a request or a response read whole: the socket is empty),
//!   the next one waits for bytes first (IORING_RECVSEND_POLL_FIRST) rather than try, fail
//!   and then wait; after a full one it tries at once;
//! - writes: the parts of a response (`Engine::write_parts`: the client's output, a cached body,
//!   a copied body's batch; a tunnel's batch) go with the send itself. Vectors are taken
//!   whole (the state machine goes on with an empty one from the pool, and the send's
//!   vectors come back to that pool for the next recvs), a cached object is held by
//!   its `Rc`: one IORING_OP_SEND (MSG_WAITALL) for one part, IORING_OP_SENDMSG for several,
//!   nothing copied. Copied into the send: a body kept for the cache in copy mode (it stays
//!   the object) and what goes to the origin (`writev`: the request is kept for a retry on a
//!   fresh connection), up to 256 KiB. The next write waits for the send to complete, and so
//!   does a shutdown asked for meanwhile. A send's completion is an event only if a write
//!   was answered "in flight" meanwhile (or it failed): the state machine counted the bytes
//!   as written when the send took them, so one nobody waits for completes silently. A send
//!   with nothing to wait for first goes quiet, where the kernel passes a start-up probe
//!   (`probe_quiet`): MSG_DONTWAIT, so that it runs within the enter that submits it, and
//!   IOSQE_CQE_SKIP_SUCCESS, so that it posts a completion only if it was not whole
//!   (partial, EAGAIN, an error), which resubmits the rest behind a POLLOUT poll. A whole
//!   one is settled after its enter (`settle_quiet`) and ends no enter: its completion would
//!   otherwise wake the enter that submits it with nothing for the worker;
//! - splice: IORING_OP_SPLICE origin socket → pipe, behind a linked IORING_OP_POLL_ADD (POLLIN,
//!   its success not posted), since a splice that finds the socket empty fails with EAGAIN
//!   rather than wait; pipe → client socket directly, and behind a POLLOUT poll once the socket
//!   answered EAGAIN. Splice-keep's copy into the second pipe is IORING_OP_TEE; the tee'd bytes
//!   are then read out of the first pipe with IORING_OP_READ straight into the object's vector,
//!   which the request holds until it completes (`Engine::read_pipe`);
//! - other descriptors registered readable (the shutdown waker): a one-shot POLL_ADD.
//!
//! Costs and traps:
//! - No transfer is made outside the ring but one: splice-release's head, written into the
//!   body's empty pipe with write(2) (`Engine::write_pipe`), which cannot block and saves the ring
//!   enter a send's completion would end. The bytes of a copied response are copied
//!   once, by the kernel into the recv's buffer and out of the send's: the same buffer (the
//!   body bytes that came with a head too: the head's buffer becomes the body's, sent after
//!   the client's output). What the engine still copies: what goes to the origin (request heads,
//!   small), a body being kept for the cache in copy mode, and a read that adds to bytes
//!   already held.
//! - Buffers circulate through one pool, the worker's (`Engine::bufs`: the engine holds it, and
//!   the worker takes and gives through it): a send's vectors return to it and feed the next
//!   recvs; a state machine's buffer swapped out by a recv goes there too; a closed
//!   connection's buffers too, so that the next connection's recvs find them (with a pool of
//!   the engine's own beside the worker's, buffers piled up in one while the other allocated,
//!   one 64 KiB buffer per connection, and the allocator's slow paths followed). A recv's
//!   buffer is taken only if it is large enough (the most recent such, among the last few
//!   given back), else a new one is allocated: growing a small one is a reallocation that
//!   copies its old contents, which are garbage here. The state machine gets back a buffer
//!   as large as each vector a send takes from it.
//! - Splice and tee run in the kernel's io-wq threads (io_uring marks them always async), so
//!   each costs a hand-over to a kernel thread, one of this process's (`iou-wrk-*`): that is
//!   where this engine's splice costs more than splice(2) under epoll (docs/proxy.md has the
//!   measured share).
//! - A request holds its file: closing a descriptor cancels its reads first; a send already
//!   taken is left to finish (its bytes were promised to the peer), and cancelled if it has not
//!   after [`ORPHAN_GRACE`]. Completions that come back for a descriptor closed (and its number
//!   reused) meanwhile are recognised by the request's slot and dropped.
//! - A pipe given back while a splice or tee on it is in flight may yet receive bytes: it is
//!   closed, never pooled.
//! - Kernels whose io_uring lacks IORING_OP_SPLICE or IORING_OP_TEE (probed at start) make the
//!   splice modes copy; the proxy says so on stderr once.
//!
//! This file holds the engine's state (the ring, the request slots, each descriptor's state)
//! and its readiness face (`Poller`); `submit` arms requests, `complete` enters the ring and
//! turns completions into what the state machine sees, `quiet` holds the quiet sends and their
//! start-up probe, and `transfers` the `Engine` the worker waits and transfers through.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use evlab_poll::{Event, Events, Interest, Token};
use evlab_runtime::{BufPool, Ring};
use evlab_sys as sys;
use io_uring::{cqueue, opcode, squeue, types};

use crate::cache::Object;
use crate::engine::{in_flight, Engine, Part, Role, Unasked};

mod complete;
mod quiet;
mod submit;
mod transfers;

const RING_ENTRIES: u32 = 4096;
const CQ_ENTRIES: u32 = 32768;
/// The most one send takes (the rest of a write waits for it to complete).
const SEND_MAX: usize = 256 * 1024;
/// The most one recv asks for.
const RECV_MAX: usize = 256 * 1024;
/// A send left running after its descriptor was closed is cancelled after this long.
const ORPHAN_GRACE: Duration = Duration::from_secs(10);
/// IORING_RECVSEND_POLL_FIRST (the crate does not export it): a recv's `ioprio` flag, "arm
/// the poll before trying" (Linux 5.19, as the multishot accept this engine requires).
const RECVSEND_POLL_FIRST: u16 = 1;
/// user_data of requests whose completions need nothing: cancels, and linked polls.
const UD_IGNORE: u64 = u64::MAX;
/// user_data of the start-up probe's sends (see `Uring::probe_quiet`).
const UD_PROBE: u64 = u64::MAX - 1;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    Accept,
    Poll,
    /// POLLOUT on a socket whose connect is under way (the write side): its completion is
    /// the connection up (or failed, which the first send then reports).
    Connect,
    Recv,
    Send,
    /// Socket → pipe (the socket's read side).
    SpliceIn,
    /// Pipe → socket (the socket's write side).
    SpliceOut,
    /// Pipe → pipe (the first pipe's read side).
    Tee,
    /// Pipe → the state machine's vector, held by the request (the pipe's read side).
    ReadPipe,
}

/// The most parts one send takes (a response's head, a cached or copied body).
const SEND_PARTS: usize = 3;

/// Bytes a send holds until it completes: taken from the state machine, or shared with it.
#[derive(Debug)]
enum Held {
    Vec(Vec<u8>),
    Obj(Rc<Object>),
}

impl Held {
    fn bytes(&self) -> &[u8] {
        match self {
            Held::Vec(v) => v,
            Held::Obj(o) => &o.body,
        }
    }
}

/// The message of a send of several parts. Boxed: the kernel reads it after submission, so it
/// must not move while the request is in flight (the slot table moves its entries as it grows).
struct Msg {
    hdr: libc::msghdr,
    iov: [libc::iovec; SEND_PARTS],
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Msg")
    }
}

/// A request slot: a request in flight while `live`. A finished request's slot is reused in
/// place (its fields written, not a new value moved in), and keeps its part list's capacity and
/// its message for the slot's next send.
#[derive(Debug)]
struct Op {
    live: bool,
    kind: Kind,
    /// The descriptor whose read or write side the request is.
    fd: RawFd,
    /// Where the completion is reported.
    notify: RawFd,
    fd_in: RawFd,
    fd_out: RawFd,
    /// Recv: where the bytes land.
    buf: Vec<u8>,
    /// Send: its parts, each `bytes()[off..]` still to go.
    out: Vec<(Held, usize)>,
    msg: Option<Box<Msg>>,
    /// Recv, read, splice, tee: the bytes asked for. Send: the bytes submitted.
    len: usize,
    serial: u64,
    /// A send whose descriptor the worker closed: close it once the send is done.
    close_after: bool,
    /// A quiet send (see `Uring::settle_quiet`) whose outcome is not known yet.
    quiet: bool,
}

impl Op {
    fn idle() -> Op {
        Op {
            live: false,
            kind: Kind::Poll,
            fd: -1,
            notify: -1,
            fd_in: -1,
            fd_out: -1,
            buf: Vec::new(),
            out: Vec::new(),
            msg: None,
            len: 0,
            serial: 0,
            close_after: false,
            quiet: false,
        }
    }
}

/// What a probe's quiet send did (see `Uring::probe_quiet`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Probed {
    /// Posted nothing and is done.
    Silent,
    /// Posted this result within its enter.
    Posted(i32),
    /// Not seen to end: its memory is leaked, as the kernel may yet read it.
    Unended,
    /// Anything else (not submitted, ended late).
    Other,
}

/// What the engine knows of one descriptor.
#[derive(Debug, Default)]
struct FdState {
    role: Option<Role>,
    registered: bool,
    want_read: bool,
    /// The request in flight on the read side, and on the write side.
    rd: Option<u32>,
    wr: Option<u32>,
    /// Bytes received, `rx[rx_pos..]` not yet handed over.
    rx: Vec<u8>,
    rx_pos: usize,
    /// The result of a splice or tee not yet taken (bytes, or -errno).
    rd_done: Option<i32>,
    wr_done: Option<i32>,
    eof: bool,
    err: Option<i32>,
    /// Shut the write side once the send in flight completes.
    shut_pending: bool,
    /// A write was answered "in flight" while a send was: its completion is to say so (a
    /// send nobody waits for completes silently, without waking the state machine).
    wr_wanted: bool,
    /// Splice and tee requests in flight that name this descriptor (pipes).
    refs: u32,
    /// A send left running will close the descriptor.
    close_deferred: bool,
    /// Closed by the worker while splice or tee requests naming it were in flight: closed
    /// when the last of them completes (see `close`).
    close_on_free: bool,
    /// The wait in whose harvest a recv came back short (the socket was empty when it ran):
    /// until the next wait, nothing is known to have arrived since.
    drained_at: u64,
    /// The last recv filled all it asked for: more is likely waiting, and the next recv is
    /// tried at once rather than behind a poll (IORING_RECVSEND_POLL_FIRST).
    recv_full: bool,
}

pub(crate) struct Uring {
    ring: Ring,
    ops: Vec<Op>,
    free_ops: Vec<u32>,
    live: usize,
    serial: u64,
    fds: Vec<FdState>,
    listen_fd: RawFd,
    accept_op: Option<u32>,
    accepted: VecDeque<RawFd>,
    accept_err: Option<i32>,
    /// Events for the worker not yet handed over.
    ready: VecDeque<Event>,
    /// The worker's buffer pool (see `Engine::bufs`).
    bufs: BufPool,
    orphans: Vec<(Instant, u32, u64)>,
    splice_ok: bool,
    skip_success: bool,
    /// Sends go quiet (see `settle_quiet`): the start-up probe found this kernel posts
    /// nothing for a whole one and a completion for any other, within the enter.
    quiet_ok: bool,
    /// Quiet sends submitted whose outcome is not settled yet.
    quiet: Vec<u32>,
    closing: bool,
    /// The descriptor whose recv `recv_at_once` is waiting on in this enter (else -1).
    taking: RawFd,
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

fn result(r: i32) -> io::Result<usize> {
    if r < 0 {
        Err(errno(-r))
    } else {
        Ok(r as usize)
    }
}

impl Uring {
    #[inline]
    fn st(&mut self, fd: RawFd) -> &mut FdState {
        let i = fd as usize;
        if i >= self.fds.len() {
            self.grow_fds(i);
        }
        &mut self.fds[i]
    }

    /// Out of line: the table grows a few times in a worker's life, and `st` runs a few dozen
    /// times per request.
    #[cold]
    #[inline(never)]
    fn grow_fds(&mut self, i: usize) {
        self.fds
            .resize_with((i + 1).next_power_of_two(), FdState::default);
    }

    /// An empty buffer of at least `cap` bytes: the most recently given back that is large
    /// enough (its memory is the likeliest still in the cache), else a new one. Never a small
    /// one grown: `reserve` reallocates, and the allocator copies the old capacity's bytes,
    /// which here are garbage.
    #[inline]
    fn take_buf(&mut self, cap: usize) -> Vec<u8> {
        self.bufs.take_exact(cap)
    }

    #[inline]
    fn give_buf(&mut self, b: Vec<u8>) {
        self.bufs.give(b);
    }

    /// Gives back the buffers a finished request held (its part list and message stay in the
    /// slot for its next send).
    #[inline]
    fn give_op_bufs(&mut self, i: u32) {
        let Uring { ops, bufs, .. } = self;
        let op = &mut ops[i as usize];
        if op.buf.capacity() > 0 {
            bufs.give(std::mem::take(&mut op.buf));
        }
        while let Some((h, _)) = op.out.pop() {
            if let Held::Vec(v) = h {
                bufs.give(v);
            }
        }
    }

    /// A slot for a new request, its fields written in place; the caller fills in the rest.
    #[inline]
    fn new_op(&mut self, kind: Kind, fd: RawFd, notify: RawFd) -> u32 {
        self.live += 1;
        self.serial += 1;
        let i = match self.free_ops.pop() {
            Some(i) => i,
            None => {
                self.ops.push(Op::idle());
                (self.ops.len() - 1) as u32
            }
        };
        let op = &mut self.ops[i as usize];
        debug_assert!(!op.live && op.buf.capacity() == 0 && op.out.is_empty());
        op.live = true;
        op.kind = kind;
        op.fd = fd;
        op.notify = notify;
        op.fd_in = -1;
        op.fd_out = -1;
        op.len = 0;
        op.serial = self.serial;
        op.close_after = false;
        op.quiet = false;
        i
    }

    /// Ends request `i`: its buffers go back to the pool (take first what is to be kept), its
    /// slot is free, and a pipe closed meanwhile is closed once no request names it.
    #[inline]
    fn free_op(&mut self, i: u32) {
        if !self.ops.get(i as usize).is_some_and(|o| o.live) {
            return;
        }
        self.give_op_bufs(i);
        let op = &mut self.ops[i as usize];
        op.live = false;
        let (kind, fd_in, fd_out) = (op.kind, op.fd_in, op.fd_out);
        self.live -= 1;
        self.free_ops.push(i);
        if matches!(
            kind,
            Kind::SpliceIn | Kind::SpliceOut | Kind::Tee | Kind::ReadPipe
        ) {
            self.unref_pipes(fd_in, fd_out);
        }
    }

    /// A splice, tee or pipe read ended: the descriptors it named are no longer held by it.
    #[inline(never)]
    fn unref_pipes(&mut self, fd_in: RawFd, fd_out: RawFd) {
        for fd in [fd_in, fd_out].into_iter().filter(|&fd| fd >= 0) {
            let st = self.st(fd);
            st.refs = st.refs.saturating_sub(1);
            if st.refs == 0 && std::mem::take(&mut st.close_on_free) {
                let _ = sys::close(fd);
            }
        }
    }

    fn event(&mut self, fd: RawFd, flags: u8) {
        if self.fds.get(fd as usize).is_some_and(|s| s.registered) {
            self.ready.push_back(Event::new(Token(fd as usize), flags));
        }
    }

    // ---- arming requests ----

    /// Forgets what is known of `fd`: reads in flight are cancelled; a send is left to finish
    /// (bounded by [`ORPHAN_GRACE`]), any other write cancelled.
    fn forget(&mut self, fd: RawFd) {
        if fd < 0 || fd as usize >= self.fds.len() {
            return;
        }
        let (rd, wr) = {
            let st = &mut self.fds[fd as usize];
            (st.rd.take(), st.wr.take())
        };
        if let Some(i) = rd {
            self.cancel(i);
        }
        let mut orphaned = false;
        if let Some(i) = wr {
            let op = &mut self.ops[i as usize];
            if op.live && op.kind == Kind::Send {
                // The worker closes what it deregisters: the send will do it.
                op.close_after = true;
                orphaned = true;
                let serial = op.serial;
                self.orphans
                    .push((Instant::now() + ORPHAN_GRACE, i, serial));
            } else {
                self.cancel(i);
            }
        }
        let st = &mut self.fds[fd as usize];
        let rx = std::mem::take(&mut st.rx);
        let (role, refs, close_on_free) = (st.role, st.refs, st.close_on_free);
        let close_deferred = st.close_deferred || orphaned;
        *st = FdState {
            role,
            refs,
            close_deferred,
            close_on_free,
            ..FdState::default()
        };
        self.give_buf(rx);
    }

    fn sweep_orphans(&mut self) {
        if self.orphans.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut expired = Vec::new();
        self.orphans.retain(|&(at, i, serial)| {
            if at <= now {
                expired.push((i, serial));
                false
            } else {
                true
            }
        });
        for (i, serial) in expired {
            let op = &self.ops[i as usize];
            if op.live && op.serial == serial {
                self.cancel(i);
            }
        }
    }

    // ---- completions ----
}

// How the engine waits: the `Engine` methods that are not transfers (`transfers.rs` has those).
impl Uring {
    pub(super) fn open() -> io::Result<Uring> {
        let ring = Ring::new(RING_ENTRIES, CQ_ENTRIES)?;
        let splice_ok = ring.supports(&[opcode::Splice::CODE, opcode::Tee::CODE]);
        if !splice_ok {
            static SAID: AtomicBool = AtomicBool::new(false);
            if !SAID.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "evlab proxy: this kernel's io_uring lacks IORING_OP_SPLICE or IORING_OP_TEE; \
                     the uring engine copies every body"
                );
            }
        }
        let skip_success = ring.skips_success();
        let mut u = Uring {
            ring,
            ops: Vec::new(),
            free_ops: Vec::new(),
            live: 0,
            serial: 0,
            fds: Vec::new(),
            listen_fd: -1,
            accept_op: None,
            accepted: VecDeque::new(),
            accept_err: None,
            ready: VecDeque::new(),
            bufs: BufPool::default(),
            orphans: Vec::new(),
            splice_ok,
            skip_success,
            quiet_ok: false,
            quiet: Vec::new(),
            closing: false,
            taking: -1,
        };
        u.quiet_ok = u.probe_quiet();
        // The probe's enters are not the worker's.
        u.ring.stats = Default::default();
        Ok(u)
    }

    pub(super) fn watch_fd(&mut self, fd: RawFd, interest: Interest) -> io::Result<()> {
        let st = self.st(fd);
        st.registered = true;
        st.want_read = interest.readable();
        match st.role {
            Some(Role::Listener) => {
                if interest.readable() && self.accept_op.is_none() {
                    self.arm_accept()?;
                }
            }
            // Nothing is known of a connection until a transfer is tried: say it may be.
            Some(Role::Conn) => {
                let mut flags = 0;
                if interest.readable() && st.rd.is_none() {
                    flags |= Event::READABLE;
                }
                if interest.writable() && st.wr.is_none() {
                    flags |= Event::WRITABLE;
                }
                if flags != 0 {
                    self.ready.push_back(Event::new(Token(fd as usize), flags));
                }
            }
            None => {
                if interest.readable() && st.rd.is_none() {
                    self.arm_poll(fd)?;
                }
            }
        }
        Ok(())
    }

    pub(super) fn unwatch_fd(&mut self, fd: RawFd) -> io::Result<()> {
        if fd == self.listen_fd {
            self.st(fd).registered = false;
            if let Some(i) = self.accept_op {
                self.cancel(i);
            }
            return Ok(());
        }
        self.forget(fd);
        Ok(())
    }

    pub(super) fn wait_events(
        &mut self,
        events: &mut Events,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        events.clear();
        self.ring.stats.waits += 1;
        self.sweep_orphans();
        let mut timeout = if self.ready.is_empty() && !self.quiet_awaited() {
            timeout
        } else {
            Some(Duration::ZERO)
        };
        let start = timeout.filter(|t| !t.is_zero()).map(|_| Instant::now());
        loop {
            self.turn_ring(timeout)?;
            // Completions that need nothing of the worker (a send nobody waits for, done
            // during the enter that submitted it) end an enter as any other does: wait again,
            // for what is left of the timeout, rather than hand the worker an empty turn.
            if !self.ready.is_empty()
                || self.ring.harvested() == 0
                || timeout == Some(Duration::ZERO)
            {
                break;
            }
            if let (Some(t), Some(start)) = (timeout, start) {
                match t.checked_sub(start.elapsed()) {
                    Some(left) if !left.is_zero() => timeout = Some(left),
                    _ => break,
                }
            }
        }
        while let Some(ev) = self.ready.front() {
            if !events.push(*ev) {
                break;
            }
            self.ready.pop_front();
        }
        Ok(events.len())
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        // Requests still in flight write into (or read from) buffers this owns: cancel them and
        // wait for their completions, a bounded while.
        self.closing = true;
        let live: Vec<u32> = (0..self.ops.len() as u32)
            .filter(|&i| self.ops[i as usize].live)
            .collect();
        for i in live {
            self.cancel(i);
        }
        let until = Instant::now() + Duration::from_secs(2);
        while self.live > 0 && Instant::now() < until {
            if self.turn_ring(Some(Duration::from_millis(50))).is_err() {
                break;
            }
        }
        if self.live > 0 {
            // The kernel may still use them: leak rather than free under it.
            std::mem::forget(std::mem::take(&mut self.ops));
        }
        for fd in self.accepted.drain(..) {
            let _ = sys::close(fd);
        }
    }
}

#[cfg(test)]
mod tests;
