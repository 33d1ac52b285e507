//! The completion engine (the `uring` mechanism): io_uring's completions, not readiness.
//!
//! One ring per worker thread (SINGLE_ISSUER, DEFER_TASKRUN where the kernel has them). The
//! listener has one multishot accept; each connection one multishot recv that takes its buffers
//! from a ring of provided buffers; replies go out as `writev` requests built from the same
//! output queue the readiness loop uses, and the HTTP work is the same code (`handler.rs`). The
//! server sleeps in exactly one syscall, `io_uring_enter`, which also submits everything the
//! previous round queued: accepts re-armed, sends, cancels and closes.
//!
//! Costs and traps:
//! - A multishot request can end (no IORING_CQE_F_MORE: out of buffers, an error, a full
//!   completion ring); it must be re-armed or the connection goes deaf.
//! - Every buffer a recv completion names must go back to the buffer ring, even for a
//!   completion that arrives after its connection was closed, or the ring runs dry.
//! - A send request holds pointers into the connection's output queue, so nothing may be
//!   appended to that queue until the send completes; requests that arrive meanwhile wait in the
//!   input buffer and are parsed when the send is done (pipelining keeps its order).
//! - Closing a connection with a recv armed: the recv holds the file, so it is cancelled first;
//!   completions that straggle in afterwards are recognised by a generation and dropped. Only a
//!   recv that is still armed is cancelled: one that ended (the peer's FIN, the usual way a
//!   one-request connection ends) needs nothing. A cancel is not free: the kernel finds the
//!   request in a hash table of every armed poll, so with 10,000 idle connections each cancel
//!   walks a long bucket — and a cancel that finds nothing walks all of it.
//! - sendfile has no io_uring twin here: bodies not held in memory (and `--sendfile`) are sent
//!   with sendfile(2) directly, with a one-shot POLLOUT request when the socket is full.
//! - Back-pressure: a multishot recv keeps delivering while a reply cannot leave. Once more
//!   than [`RBUF_PAUSE`] bytes of unanswered input are held, the recv is cancelled, and it is
//!   re-armed when the replies have drained and the input has been answered — as the readiness
//!   engines simply stop reading.
//! - `--accept-limit` does not apply: a multishot accept takes every connection as it comes.
//!
//! The connection's lifecycle (table, deadlines, accept gate, shutdown, what follows a drained
//! reply) is the core's (`core.rs`), shared with the readiness engine.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use evlab_poll::PollerStats;
use evlab_sys as sys;
use io_uring::{cqueue, opcode, squeue, types};

use crate::conn::{Conn, Front, State};
use evlab_runtime::{AcceptFailure, ProvidedBuffers, Ring, ACCEPT_RETRY};

use crate::core::{Core, Engine};
use crate::handler::{Ctx, Drained};

const OP_ACCEPT: u64 = 1;
const OP_RECV: u64 = 2;
const OP_SEND: u64 = 3;
const OP_WAKE: u64 = 4;
const OP_CANCEL: u64 = 5;
const OP_CLOSE: u64 = 6;
const OP_POLLOUT: u64 = 7;
const OP_ACCEPT_CANCEL: u64 = 8;

const RING_ENTRIES: u32 = 4096;
const CQ_ENTRIES: u32 = 32768;
const BUF_COUNT: u16 = 4096;
const BUF_SIZE: usize = 4096;
const BGID: u16 = 0;
const MAX_IOV: usize = 16;
/// Unanswered input held before the recv is paused (back-pressure).
pub const RBUF_PAUSE: usize = 64 * 1024;
/// A safety net: input beyond this (the recv's last buffers after a pause) closes the
/// connection.
const RBUF_ABUSE: usize = 1 << 20;

#[inline]
fn ud(op: u64, fd: RawFd, gen: u32) -> u64 {
    (op << 56) | ((gen as u64 & 0xff_ffff) << 32) | fd as u32 as u64
}

#[inline]
fn ud_parts(u: u64) -> (u64, RawFd, u32) {
    (
        u >> 56,
        (u & 0xffff_ffff) as u32 as RawFd,
        ((u >> 32) & 0xff_ffff) as u32,
    )
}

/// What the completion engine knows of one connection.
#[derive(Debug)]
pub struct Armed {
    /// The multishot recv is armed (set when queued, cleared by a completion without
    /// IORING_CQE_F_MORE): only then must a close cancel it.
    recv_armed: bool,
    /// The recv was cancelled for back-pressure; re-armed once the input is answered.
    recv_paused: bool,
    send_inflight: bool,
    wait_pollout: bool,
    /// The iovecs of the send in flight. Boxed so that they stay put while the shell moves
    /// (the kernel reads them when the request is submitted).
    iov: Box<[libc::iovec; MAX_IOV]>,
}

impl Default for Armed {
    fn default() -> Armed {
        Armed {
            recv_armed: false,
            recv_paused: false,
            send_inflight: false,
            wait_pollout: false,
            iov: Box::new(
                [libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                }; MAX_IOV],
            ),
        }
    }
}

// Field order matters: the ring must be dropped before the buffer memory it points into.
pub(crate) struct Completion {
    ring: Ring,
    bufs: ProvidedBuffers,
    listen_fd: RawFd,
    waker_fd: RawFd,
    wake_buf: Box<u64>,
    /// The multishot accept is armed.
    accept_armed: bool,
}

type C = Core<Armed>;

impl Completion {
    pub fn new(core: &mut C, listen_fd: RawFd) -> io::Result<Completion> {
        let ring = Ring::new(RING_ENTRIES, CQ_ENTRIES)?;
        let bufs = ProvidedBuffers::new(&ring, BUF_COUNT, BUF_SIZE, BGID)?;
        let mut e = Completion {
            ring,
            bufs,
            listen_fd,
            waker_fd: core.waker.rx,
            wake_buf: Box::new(0),
            accept_armed: false,
        };
        e.arm_accept()?;
        e.arm_wake()?;
        Ok(e)
    }

    fn push(&mut self, sqe: &squeue::Entry) -> io::Result<()> {
        // SAFETY: every pointer an entry carries (iovecs, the wake buffer) points into memory
        // owned by `self` or a connection's boxed iovecs, which stay put until the request
        // is submitted (IORING_FEAT_SUBMIT_STABLE) or completes.
        unsafe { self.ring.push(std::slice::from_ref(sqe)) }
    }

    fn arm_accept(&mut self) -> io::Result<()> {
        let sqe = opcode::AcceptMulti::new(types::Fd(self.listen_fd))
            .flags(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
            .build()
            .user_data(ud(OP_ACCEPT, self.listen_fd, 0));
        self.push(&sqe)?;
        self.accept_armed = true;
        Ok(())
    }

    fn arm_wake(&mut self) -> io::Result<()> {
        let sqe = opcode::Read::new(
            types::Fd(self.waker_fd),
            &mut *self.wake_buf as *mut u64 as *mut u8,
            8,
        )
        .build()
        .user_data(ud(OP_WAKE, self.waker_fd, 0));
        self.push(&sqe)
    }

    fn arm_recv(&mut self, core: &mut C, fd: RawFd) -> io::Result<()> {
        let Some(slot) = core.slot(fd) else {
            return Ok(());
        };
        slot.x.recv_armed = true;
        let sqe = opcode::RecvMulti::new(types::Fd(fd), BGID)
            .build()
            .user_data(ud(OP_RECV, fd, slot.c.id));
        self.push(&sqe)
    }

    /// Waits (one-shot) for room in the socket: a full socket under sendfile, or a send
    /// answered EAGAIN.
    fn arm_pollout(&mut self, fd: RawFd, id: u32) -> io::Result<()> {
        let sqe = opcode::PollAdd::new(types::Fd(fd), libc::POLLOUT as u32)
            .build()
            .user_data(ud(OP_POLLOUT, fd, id));
        self.push(&sqe)
    }

    fn cancel(&mut self, ctx: &mut Ctx, target: u64, fd: RawFd) -> io::Result<()> {
        let cancel = opcode::AsyncCancel::new(target)
            .build()
            .user_data(ud(OP_CANCEL, fd, 0));
        ctx.stats.cancels.inc();
        self.push(&cancel)
    }

    /// Handles one completion; returns whether a buffer went back to the buffer ring.
    fn on_completion(&mut self, core: &mut C, u: u64, res: i32, flags: u32) -> io::Result<bool> {
        let (op, fd, id) = ud_parts(u);
        let live = matches!(core.slot(fd), Some(s) if s.c.id == id);
        // A buffer named by any completion goes back, whatever became of its connection.
        let buffer = cqueue::buffer_select(flags);
        match op {
            OP_ACCEPT => self.on_accept(core, res, flags)?,
            OP_RECV => {
                if live {
                    let data = buffer.filter(|_| res > 0).map(|b| (b, res as usize));
                    self.on_recv(core, fd, res, cqueue::more(flags), data)?;
                }
                if let Some(bid) = buffer {
                    self.bufs.give(bid);
                    return Ok(true);
                }
            }
            OP_SEND if live => self.on_send(core, fd, res)?,
            OP_POLLOUT if live => {
                if let Some(slot) = core.slot(fd) {
                    slot.x.wait_pollout = false;
                }
                self.kick_send(core, fd)?;
            }
            OP_WAKE => core.begin_shutdown(self)?,
            _ => {}
        }
        Ok(false)
    }

    fn on_accept(&mut self, core: &mut C, res: i32, flags: u32) -> io::Result<()> {
        if !cqueue::more(flags) {
            self.accept_armed = false;
        }
        if res >= 0 {
            if core.gate.shutting_down() {
                // Taken after shutdown began (the cancel was still on its way).
                let _ = sys::close(res);
            } else {
                core.add(res);
                self.arm_recv(core, res)?;
            }
        } else {
            let failure = AcceptFailure::of(-res);
            if failure.counted() {
                core.ctx.stats.conns.accept_errors.inc();
            }
            if failure == AcceptFailure::Exhausted {
                let retry = core.ctx.now + ACCEPT_RETRY;
                return core.pause_accept(self, Some(retry));
            }
        }
        if !core.has_room() {
            return core.pause_accept(self, None);
        }
        if !self.accept_armed && core.gate.accepting() {
            self.arm_accept()?;
        }
        Ok(())
    }

    fn on_recv(
        &mut self,
        core: &mut C,
        fd: RawFd,
        res: i32,
        more: bool,
        data: Option<(u16, usize)>,
    ) -> io::Result<()> {
        let Some(slot) = core.conns.get_mut(fd as usize).and_then(|s| s.as_mut()) else {
            return Ok(());
        };
        if !more {
            // The multishot recv is over (EOF, error, no buffers, cancelled): a close from here
            // on has nothing to cancel.
            slot.x.recv_armed = false;
        }
        let (c, x) = (&mut slot.c, &mut slot.x);
        if res > 0 {
            let Some((bid, len)) = data else {
                return core.close(self, fd);
            };
            if c.state != State::Lingering {
                core.ctx.pool.lend(&mut c.rbuf);
                c.rbuf.extend_from_slice(self.bufs.data(bid, len));
            }
            if c.rbuf.len() > RBUF_ABUSE {
                core.ctx.stats.conns.io_errors.inc();
                return core.close(self, fd);
            }
            if c.state == State::Reading {
                if core.ctx.answer(c) {
                    self.kick_send(core, fd)?;
                }
            } else if c.rbuf.len() > RBUF_PAUSE && x.recv_armed && !x.recv_paused {
                // Back-pressure: stop taking input until the replies leave.
                x.recv_paused = true;
                let target = ud(OP_RECV, fd, c.id);
                self.cancel(&mut core.ctx, target, fd)?;
            }
        } else if res == 0 {
            // The peer closed its side; complete requests it sent are still answered.
            c.peer_eof = true;
            if !matches!(c.state, State::Writing | State::Delayed) {
                return core.close(self, fd);
            }
            return Ok(());
        } else if res == -libc::ENOBUFS || res == -libc::ECANCELED {
            // The buffer ring ran dry (buffers are returned at the end of this round), or the
            // recv was paused.
        } else {
            core.ctx.stats.conns.io_errors.inc();
            return core.close(self, fd);
        }
        self.rearm_recv(core, fd)
    }

    /// Arms the recv again if it is over and nothing holds it back.
    fn rearm_recv(&mut self, core: &mut C, fd: RawFd) -> io::Result<()> {
        match core.slot(fd) {
            Some(s) if !s.x.recv_armed && !s.x.recv_paused && !s.c.peer_eof => {
                self.arm_recv(core, fd)
            }
            _ => Ok(()),
        }
    }

    /// Sends what the connection's queue holds, or arranges to.
    fn kick_send(&mut self, core: &mut C, fd: RawFd) -> io::Result<()> {
        loop {
            let Some(slot) = core.conns.get_mut(fd as usize).and_then(|s| s.as_mut()) else {
                return Ok(());
            };
            let (c, x) = (&mut slot.c, &mut slot.x);
            if x.send_inflight || x.wait_pollout {
                return Ok(());
            }
            match c.out.write_front_special(fd) {
                Ok((Front::Done, n)) => {
                    core.ctx.stats.bytes_sent.add(n as u64);
                    return self.on_drained(core, fd);
                }
                Ok((Front::Blocked, n)) => {
                    core.ctx.stats.bytes_sent.add(n as u64);
                    if n > 0 {
                        core.ctx.await_send(c);
                    }
                    x.wait_pollout = true;
                    return self.arm_pollout(fd, c.id);
                }
                Ok((Front::Memory, n)) => {
                    core.ctx.stats.bytes_sent.add(n as u64);
                    let (n_iov, _) = c.out.gather(&mut x.iov[..]);
                    if n_iov == 0 {
                        continue;
                    }
                    x.send_inflight = true;
                    let sqe = opcode::Writev::new(types::Fd(fd), x.iov.as_ptr(), n_iov as u32)
                        .build()
                        .user_data(ud(OP_SEND, fd, c.id));
                    return self.push(&sqe);
                }
                Err(_) => {
                    core.ctx.stats.conns.io_errors.inc();
                    return core.close(self, fd);
                }
            }
        }
    }

    fn on_send(&mut self, core: &mut C, fd: RawFd, res: i32) -> io::Result<()> {
        let Some(slot) = core.conns.get_mut(fd as usize).and_then(|s| s.as_mut()) else {
            return Ok(());
        };
        slot.x.send_inflight = false;
        if res == -libc::EAGAIN {
            // The socket is non-blocking, and a kernel may answer a full one with EAGAIN rather
            // than wait: wait for room, then send again.
            slot.x.wait_pollout = true;
            return self.arm_pollout(fd, slot.c.id);
        }
        if res < 0 {
            core.ctx.stats.conns.io_errors.inc();
            return core.close(self, fd);
        }
        slot.c.out.advance(res as usize);
        core.ctx.stats.bytes_sent.add(res as u64);
        if slot.c.out.is_empty() {
            self.on_drained(core, fd)
        } else {
            if res > 0 {
                core.ctx.await_send(&mut slot.c);
            }
            self.kick_send(core, fd)
        }
    }

    /// Every queued byte has left.
    fn on_drained(&mut self, core: &mut C, fd: RawFd) -> io::Result<()> {
        let Some(slot) = core.conns.get_mut(fd as usize).and_then(|s| s.as_mut()) else {
            return Ok(());
        };
        let next = core.ctx.drained(&mut slot.c);
        if next != Drained::Close && slot.x.recv_paused && slot.c.rbuf.len() < RBUF_PAUSE / 2 {
            slot.x.recv_paused = false;
        }
        match next {
            Drained::Close => core.close(self, fd),
            // A lingering connection's recv reads on, only to discard.
            Drained::Lingering | Drained::Idle | Drained::Delayed => self.rearm_recv(core, fd),
            Drained::Busy => {
                self.rearm_recv(core, fd)?;
                self.kick_send(core, fd)
            }
        }
    }
}

impl Engine for Completion {
    type Extra = Armed;

    fn turn(&mut self, core: &mut C, timeout: Option<Duration>) -> io::Result<()> {
        self.ring.stats.waits += 1;
        self.ring.enter(timeout)?;
        core.tick();
        let mut recycled = false;
        for k in 0..self.ring.harvest() {
            let (u, res, flags) = self.ring.done(k);
            recycled |= self.on_completion(core, u, res, flags)?;
        }
        if recycled {
            self.bufs.publish();
        }
        Ok(())
    }

    fn close(&mut self, ctx: &mut Ctx, c: &Conn, x: &mut Armed) -> io::Result<()> {
        let fd = c.fd;
        // Cancel what is armed on it (the recv holds the file), then close it: all in the next
        // enter, in this order. Cancels name each request by its user_data, which the kernel
        // finds by hash; cancelling "everything on this fd" walks every armed request, which
        // with 10,000 idle connections made each close cost milliseconds. Even by user_data a
        // cancel walks a hash bucket shared with other armed requests (io_poll_find), so
        // nothing is cancelled that is not armed: after the peer's FIN the recv has already
        // ended, and a cancel for it would walk its bucket to the end to find nothing.
        let armed = [
            (x.recv_armed, OP_RECV),
            (x.send_inflight, OP_SEND),
            (x.wait_pollout, OP_POLLOUT),
        ];
        for (on, op) in armed {
            if on {
                self.cancel(ctx, ud(op, fd, c.id), fd)?;
            }
        }
        // The shell is recycled: only the boxed iovecs are kept.
        x.recv_armed = false;
        x.recv_paused = false;
        x.send_inflight = false;
        x.wait_pollout = false;
        let close = opcode::Close::new(types::Fd(fd))
            .build()
            .user_data(ud(OP_CLOSE, fd, 0));
        self.push(&close)
    }

    fn stop_accepting(&mut self) -> io::Result<()> {
        if self.accept_armed {
            let sqe = opcode::AsyncCancel::new(ud(OP_ACCEPT, self.listen_fd, 0))
                .build()
                .user_data(ud(OP_ACCEPT_CANCEL, self.listen_fd, 0));
            self.push(&sqe)?;
        }
        Ok(())
    }

    fn start_accepting(&mut self) -> io::Result<()> {
        if !self.accept_armed {
            self.arm_accept()?;
        }
        Ok(())
    }

    fn send_queued(&mut self, core: &mut C, fd: RawFd) -> io::Result<()> {
        self.kick_send(core, fd)
    }

    fn poller_stats(&self) -> PollerStats {
        self.ring.stats
    }

    fn finish(&mut self, _core: &mut C) {
        let _ = self.ring.submit();
    }
}
