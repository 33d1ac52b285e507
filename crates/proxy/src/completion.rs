//! The proxy's completion engine (`uring`): io_uring requests, not readiness.
//!
//! One ring per worker (SINGLE_ISSUER, DEFER_TASKRUN where the kernel has them), driven by the
//! same state machine as the readiness mechanisms (`worker/`): this type is both the
//! worker's [`Poller`] (its `wait` is the one `io_uring_enter` of a turn, which submits what
//! the turn queued and harvests completions as events) and its [`Io`] (each transfer is a
//! request; see `xfer.rs`). What it submits:
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
//! - writes: the parts of a response (`Io::write_parts`: the client's output, a cached body,
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
//!   which the request holds until it completes (`Io::read_pipe`);
//! - other descriptors registered readable (the shutdown waker): a one-shot POLL_ADD.
//!
//! Costs and traps:
//! - No transfer is made outside the ring but one: splice-release's head, written into the
//!   body's empty pipe with write(2) (`Io::write_pipe`), which cannot block and saves the ring
//!   enter a send's completion would end. The bytes of a copied response are copied
//!   once, by the kernel into the recv's buffer and out of the send's: the same buffer (the
//!   body bytes that came with a head too: the head's buffer becomes the body's, sent after
//!   the client's output). What the engine still copies: what goes to the origin (request heads,
//!   small), a body being kept for the cache in copy mode, and a read that adds to bytes
//!   already held.
//! - Buffers circulate through one pool, the worker's (`Io::bufs`: the engine holds it, and
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

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use evlab_poll::{Event, Events, Interest, Mechanism, Poller, PollerStats, Support, Token};
use evlab_runtime::BufPool;
use evlab_sys as sys;
use io_uring::{cqueue, opcode, squeue, types, IoUring, Probe};

use crate::cache::Object;
use crate::xfer::{in_flight, Io, Part, Role, Unasked};

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
    ring: IoUring,
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
    /// The worker's buffer pool (see `Io::bufs`).
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
    cqes: Vec<(u64, i32, u32)>,
    stats: PollerStats,
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

    /// Queues entries that must be submitted together (a linked pair).
    #[inline]
    fn push(&mut self, sqes: &[squeue::Entry]) -> io::Result<()> {
        // SAFETY: every pointer an entry carries points into a request's buffer held in
        // `self.ops` (its heap memory stays put when the table grows) until the request
        // completes; `Drop` waits for them, or leaks the buffers if they do not come back.
        // All of `sqes` or none is queued.
        if unsafe { self.ring.submission().push_multiple(sqes) }.is_ok() {
            return Ok(());
        }
        self.push_when_full(sqes)
    }

    /// The queue is full: submit what it holds, then queue.
    #[cold]
    #[inline(never)]
    fn push_when_full(&mut self, sqes: &[squeue::Entry]) -> io::Result<()> {
        sys::count_io(sys::Syscall::IoUringEnter, || self.ring.submit())?;
        // SAFETY: as in `push`.
        unsafe { self.ring.submission().push_multiple(sqes) }
            .map_err(|_| io::Error::other("submission queue full"))
    }

    fn cancel(&mut self, i: u32) {
        let sqe = opcode::AsyncCancel::new(i as u64)
            .build()
            .user_data(UD_IGNORE);
        let _ = self.push(&[sqe]);
    }

    fn link_poll(&self, fd: RawFd, mask: i16) -> squeue::Entry {
        let mut flags = squeue::Flags::IO_LINK;
        if self.skip_success {
            flags |= squeue::Flags::SKIP_SUCCESS;
        }
        opcode::PollAdd::new(types::Fd(fd), mask as u32)
            .build()
            .flags(flags)
            .user_data(UD_IGNORE)
    }

    fn event(&mut self, fd: RawFd, flags: u8) {
        if self.fds.get(fd as usize).is_some_and(|s| s.registered) {
            self.ready.push_back(Event::new(Token(fd as usize), flags));
        }
    }

    // ---- arming requests ----

    fn arm_accept(&mut self) -> io::Result<()> {
        let fd = self.listen_fd;
        let i = self.new_op(Kind::Accept, fd, fd);
        let sqe = opcode::AcceptMulti::new(types::Fd(fd))
            .flags(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
            .build()
            .user_data(i as u64);
        self.accept_op = Some(i);
        self.push(&[sqe])
    }

    fn arm_poll(&mut self, fd: RawFd) -> io::Result<()> {
        let i = self.new_op(Kind::Poll, fd, fd);
        self.st(fd).rd = Some(i);
        let sqe = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32)
            .build()
            .user_data(i as u64);
        self.push(&[sqe])
    }

    /// Watches a connect under way: no send is taken (nor writability said) before it is up,
    /// as under readiness, where the connection's first writable event says so.
    fn arm_connect_poll(&mut self, fd: RawFd) -> io::Result<()> {
        let i = self.new_op(Kind::Connect, fd, fd);
        self.st(fd).wr = Some(i);
        let sqe = opcode::PollAdd::new(types::Fd(fd), libc::POLLOUT as u32)
            .build()
            .user_data(i as u64);
        self.push(&[sqe])
    }

    fn arm_recv(&mut self, fd: RawFd, len: usize) -> io::Result<()> {
        let len = len.clamp(1, RECV_MAX);
        let mut buf = self.take_buf(len);
        let ptr = buf.as_mut_ptr();
        let i = self.new_op(Kind::Recv, fd, fd);
        let op = &mut self.ops[i as usize];
        (op.buf, op.len) = (buf, len);
        let st = self.st(fd);
        st.rd = Some(i);
        // A recv that finds the socket empty fails, then waits behind an internal poll: after
        // a short recv (a request or a response read whole, nothing yet behind it) the next
        // one waits first and spares the failed attempt.
        let ioprio = if st.recv_full { 0 } else { RECVSEND_POLL_FIRST };
        let sqe = opcode::Recv::new(types::Fd(fd), ptr, len as u32)
            .ioprio(ioprio)
            .build()
            .user_data(i as u64);
        self.push(&[sqe])
    }

    /// Reads at most `len` bytes from a pipe into the spare capacity of `buf`, which the
    /// request holds until it completes. Issued at once, not behind a poll: the bytes are
    /// known to be there (a non-blocking pipe would answer EAGAIN otherwise).
    fn arm_read_pipe(
        &mut self,
        fd: RawFd,
        mut buf: Vec<u8>,
        len: usize,
        notify: RawFd,
    ) -> io::Result<()> {
        let len = len.min(u32::MAX as usize);
        buf.reserve(len);
        // SAFETY of the pointer: the spare capacity of the vector the request holds (see
        // `push`); `reserve` above made `len` bytes of it.
        let ptr = unsafe { buf.as_mut_ptr().add(buf.len()) };
        let i = self.new_op(Kind::ReadPipe, fd, notify);
        let op = &mut self.ops[i as usize];
        (op.buf, op.len, op.fd_in) = (buf, len, fd);
        let st = self.st(fd);
        st.refs += 1;
        st.rd = Some(i);
        let sqe = opcode::Read::new(types::Fd(fd), ptr, len as u32)
            .offset(u64::MAX)
            .build()
            .user_data(i as u64);
        self.push(&[sqe])
    }

    /// Sends what request `i`'s parts still hold (a new request, or the rest of one), after a
    /// POLLOUT poll if `wait_room`: one part with IORING_OP_SEND, several with
    /// IORING_OP_SENDMSG. If it cannot be queued the request ends (its buffers to the pool).
    fn submit_send(&mut self, i: u32, wait_room: bool) -> io::Result<()> {
        let quiet = !wait_room && self.quiet_ok;
        let op = &mut self.ops[i as usize];
        let fd = op.fd;
        op.kind = Kind::Send;
        op.quiet = quiet;
        let mut flags = libc::MSG_WAITALL | libc::MSG_NOSIGNAL;
        if quiet {
            // Done within the enter that submits it, whole or not (see `settle_quiet`).
            flags |= libc::MSG_DONTWAIT;
        }
        // SAFETY of the pointers: they point into the parts' heap memory (a vector's, or a
        // shared object's, which the request holds an `Rc` of) and into the boxed message,
        // none of which moves or is freed while the request is in flight; see `push`.
        let sqe = if let [(h, off)] = op.out.as_slice() {
            let rest = &h.bytes()[*off..];
            op.len = rest.len();
            opcode::Send::new(types::Fd(fd), rest.as_ptr(), rest.len() as u32)
                .flags(flags)
                .build()
        } else {
            let msg = op.msg.get_or_insert_with(|| {
                Box::new(Msg {
                    // SAFETY: msghdr and iovec are plain C structs for which all zeroes is a
                    // valid (empty) value.
                    hdr: unsafe { std::mem::zeroed() },
                    iov: unsafe { std::mem::zeroed() },
                })
            });
            let mut len = 0;
            for (k, (h, off)) in op.out.iter().enumerate() {
                let rest = &h.bytes()[*off..];
                len += rest.len();
                msg.iov[k] = libc::iovec {
                    iov_base: rest.as_ptr() as *mut libc::c_void,
                    iov_len: rest.len(),
                };
            }
            msg.hdr.msg_iov = msg.iov.as_mut_ptr();
            msg.hdr.msg_iovlen = op.out.len() as _;
            let hdr: *const libc::msghdr = &msg.hdr;
            op.len = len;
            opcode::SendMsg::new(types::Fd(fd), hdr)
                .flags(flags as u32)
                .build()
        };
        if !op.close_after {
            self.st(fd).wr = Some(i);
        }
        let mut sqe = sqe.user_data(i as u64);
        if quiet {
            sqe = sqe.flags(squeue::Flags::SKIP_SUCCESS);
            self.quiet.push(i);
        }
        let r = if wait_room {
            let poll = self.link_poll(fd, libc::POLLOUT);
            self.push(&[poll, sqe])
        } else {
            self.push(&[sqe])
        };
        if r.is_err() {
            let st = self.st(fd);
            if st.wr == Some(i) {
                st.wr = None;
            }
            self.free_op(i);
        }
        r
    }

    fn arm_splice(
        &mut self,
        kind: Kind,
        fd_in: RawFd,
        fd_out: RawFd,
        len: usize,
        notify: RawFd,
        wait_room: bool,
    ) -> io::Result<()> {
        let key = if kind == Kind::SpliceOut {
            fd_out
        } else {
            fd_in
        };
        let len = len.min(u32::MAX as usize);
        let i = self.new_op(kind, key, notify);
        let op = &mut self.ops[i as usize];
        (op.fd_in, op.fd_out, op.len) = (fd_in, fd_out, len);
        self.st(fd_in).refs += 1;
        self.st(fd_out).refs += 1;
        let flags = libc::SPLICE_F_NONBLOCK | libc::SPLICE_F_MOVE;
        let sqe = match kind {
            Kind::Tee => opcode::Tee::new(types::Fd(fd_in), types::Fd(fd_out), len as u32)
                .flags(libc::SPLICE_F_NONBLOCK)
                .build(),
            _ => opcode::Splice::new(types::Fd(fd_in), -1, types::Fd(fd_out), -1, len as u32)
                .flags(flags)
                .build(),
        }
        .user_data(i as u64);
        let st = self.st(key);
        if kind == Kind::SpliceOut {
            st.wr = Some(i);
        } else {
            st.rd = Some(i);
        }
        match kind {
            // A socket splice that finds nothing to read fails: wait for bytes first.
            Kind::SpliceIn => {
                let poll = self.link_poll(fd_in, libc::POLLIN);
                self.push(&[poll, sqe])
            }
            Kind::SpliceOut if wait_room => {
                let poll = self.link_poll(fd_out, libc::POLLOUT);
                self.push(&[poll, sqe])
            }
            _ => self.push(&[sqe]),
        }
    }

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

    fn enter(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stats.waits_from_kernel += 1;
        evlab_poll::uring_poll::enter(&self.ring, 1, timeout)
    }

    /// Settles the quiet sends. A quiet send (MSG_DONTWAIT, IOSQE_CQE_SKIP_SUCCESS; one taken
    /// with nothing to wait for first) runs within the enter that submits it and posts a
    /// completion only if it was not whole (partial, EAGAIN, an error: failures under
    /// MSG_WAITALL), which `on_cqe` handles. So once an enter has taken every queued entry
    /// (`submitted`; no quiet send is queued while completions are handled) and the
    /// completions are harvested (none held back by an overflow), each quiet send that posted
    /// nothing was whole. Its completion would otherwise end the enter that submits it with
    /// nothing for the worker: half of the ring enters at 16 KiB.
    fn settle_quiet(&mut self, submitted: bool) {
        if self.quiet.is_empty() || !submitted || self.ring.submission().cq_overflow() {
            return;
        }
        let mut quiet = std::mem::take(&mut self.quiet);
        for &i in &quiet {
            let op = &mut self.ops[i as usize];
            if op.live && op.quiet {
                op.quiet = false;
                self.send_whole(i);
            }
        }
        quiet.clear();
        self.quiet = quiet;
    }

    /// Whether the worker waits on a quiet send not settled yet (a write answered "in flight"
    /// behind it): then the wait must not sleep past the enter that settles it.
    fn quiet_awaited(&self) -> bool {
        self.quiet.iter().any(|&i| {
            let op = &self.ops[i as usize];
            op.live
                && op.quiet
                && self
                    .fds
                    .get(op.fd as usize)
                    .is_some_and(|st| st.wr == Some(i) && st.wr_wanted)
        })
    }

    /// Send `i` is done, all of it: its buffers back, its descriptor's shutdown or close done,
    /// and a write that waited told.
    fn send_whole(&mut self, i: u32) {
        let op = &self.ops[i as usize];
        let (fd, close_after) = (op.fd, op.close_after);
        let live = self.st(fd).wr == Some(i);
        self.free_op(i);
        if close_after {
            let _ = sys::close(fd);
        }
        if live && !self.closing {
            self.send_ended(fd);
        }
    }

    /// The live send on `fd` ended whole: the write side is free, a shutdown asked for meanwhile
    /// is done, and a write answered "in flight" is told.
    fn send_ended(&mut self, fd: RawFd) {
        let st = self.st(fd);
        st.wr = None;
        if std::mem::take(&mut st.shut_pending) {
            let _ = sys::shutdown(fd, libc::SHUT_WR);
        }
        if std::mem::take(&mut st.wr_wanted) {
            self.event(fd, Event::WRITABLE);
        }
    }

    /// Whether this kernel runs a quiet send (MSG_WAITALL, MSG_DONTWAIT, IOSQE_CQE_SKIP_SUCCESS)
    /// as `settle_quiet` relies on: within the enter that submits it, posting nothing if it is
    /// whole and a completion otherwise. Tried on a socket pair with a small send buffer: a
    /// whole send, a partial one, one into the full buffer, and a partial one of several
    /// parts (IORING_OP_SENDMSG). A kernel that counted a partial send a success (posting
    /// nothing) would lose the rest of a response; there sends stay as they were, posting
    /// every completion.
    fn probe_quiet(&mut self) -> bool {
        if !self.skip_success {
            return false;
        }
        let Ok((a, b)) = std::os::unix::net::UnixStream::pair() else {
            return false;
        };
        if a.set_nonblocking(true).is_err() || b.set_nonblocking(true).is_err() {
            return false;
        }
        let fd = std::os::fd::AsRawFd::as_raw_fd(&a);
        let _ = sys::setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, 4096);
        let big = vec![0u8; 1 << 20];
        let drain = |mut b: &std::os::unix::net::UnixStream| {
            let mut sink = vec![0u8; 1 << 16];
            let mut n = 0;
            while let Ok(k @ 1..) = std::io::Read::read(&mut b, &mut sink) {
                n += k;
            }
            n
        };
        let len = big.len();
        let partial = |r: Probed| matches!(r, Probed::Posted(n) if n > 0 && (n as usize) < len);
        let mut steps = [Probed::Other; 4];
        steps[0] = self.probe_send(fd, &[&big[..1]]);
        let mut ok = steps[0] == Probed::Silent && drain(&b) == 1;
        if ok {
            steps[1] = self.probe_send(fd, &[&big]);
            ok = partial(steps[1]);
        }
        if ok {
            steps[2] = self.probe_send(fd, &[&big[..1]]);
            ok = steps[2] == Probed::Posted(-libc::EAGAIN) && drain(&b) > 0;
        }
        if ok {
            steps[3] = self.probe_send(fd, &[&big[..1 << 19], &big[1 << 19..]]);
            ok = partial(steps[3]);
        }
        if steps.contains(&Probed::Unended) {
            // A send the probe could not see end may still read `big`.
            std::mem::forget(big);
        }
        drop((a, b));
        ok
    }

    /// One quiet send of `parts` on `fd` (IORING_OP_SEND for one part, SENDMSG for several),
    /// and what it did within its enter.
    fn probe_send(&mut self, fd: RawFd, parts: &[&[u8]]) -> Probed {
        const UD_CANCEL: u64 = UD_PROBE - 1;
        let flags = libc::MSG_WAITALL | libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;
        let iov: Vec<libc::iovec> = parts
            .iter()
            .map(|p| libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            })
            .collect();
        // SAFETY: msghdr is a plain C struct for which all zeroes is a valid (empty) value.
        let mut hdr: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        hdr.msg_iov = iov.as_ptr() as *mut libc::iovec;
        hdr.msg_iovlen = iov.len() as _;
        let sqe = if let [p] = parts {
            opcode::Send::new(types::Fd(fd), p.as_ptr(), p.len() as u32)
                .flags(flags)
                .build()
        } else {
            opcode::SendMsg::new(types::Fd(fd), &*hdr)
                .flags(flags as u32)
                .build()
        }
        .flags(squeue::Flags::SKIP_SUCCESS)
        .user_data(UD_PROBE);
        // SAFETY: the parts (the caller's), `iov` and `hdr` stay valid until the request is
        // seen to end below, and are leaked if it is not.
        if unsafe { self.ring.submission().push(&sqe) }.is_err() {
            return Probed::Other;
        }
        let harvest = |ring: &mut IoUring, got: &mut Option<i32>, cancel: &mut Option<i32>| {
            for cqe in ring.completion() {
                match cqe.user_data() {
                    UD_PROBE => *got = Some(cqe.result()),
                    UD_CANCEL => *cancel = Some(cqe.result()),
                    _ => {}
                }
            }
        };
        let (mut got, mut cancel) = (None, None);
        let entered = evlab_poll::uring_poll::enter(&self.ring, 0, Some(Duration::ZERO));
        harvest(&mut self.ring, &mut got, &mut cancel);
        if let (Ok(()), Some(res)) = (&entered, got) {
            return Probed::Posted(res);
        }
        // Nothing posted: done and whole, or still running. The cancel tells: not found (the
        // send is done), or found (its completion, the cancellation, follows).
        let sqe = opcode::AsyncCancel::new(UD_PROBE)
            .build()
            .user_data(UD_CANCEL);
        // SAFETY: a cancel carries no pointer.
        let queued = unsafe { self.ring.submission().push(&sqe) }.is_ok();
        for _ in 0..100 {
            if !queued || (cancel.is_some() && (got.is_some() || cancel == Some(-libc::ENOENT))) {
                break;
            }
            let _ = evlab_poll::uring_poll::enter(&self.ring, 1, Some(Duration::from_millis(10)));
            harvest(&mut self.ring, &mut got, &mut cancel);
        }
        match (cancel, got) {
            (Some(c), None) if c == -libc::ENOENT && entered.is_ok() => Probed::Silent,
            (Some(c), None) if c == -libc::ENOENT => Probed::Other,
            (Some(_), Some(_)) => Probed::Other,
            _ => {
                std::mem::forget(iov);
                std::mem::forget(hdr);
                Probed::Unended
            }
        }
    }

    /// One enter, its completions handled, the quiet sends settled.
    fn turn_ring(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.enter(timeout)?;
        let submitted = self.ring.submission().is_empty();
        self.harvest();
        self.settle_quiet(submitted);
        Ok(())
    }

    fn harvest(&mut self) {
        self.cqes.clear();
        for cqe in self.ring.completion() {
            self.cqes.push((cqe.user_data(), cqe.result(), cqe.flags()));
        }
        for k in 0..self.cqes.len() {
            let (u, res, flags) = self.cqes[k];
            if u != UD_IGNORE {
                self.on_cqe(u as u32, res, flags);
            }
        }
    }

    fn on_cqe(&mut self, i: u32, res: i32, flags: u32) {
        let Some(op) = self.ops.get_mut(i as usize).filter(|o| o.live) else {
            return;
        };
        let kind = op.kind;
        if kind == Kind::Accept {
            return self.on_accept(i, res, flags);
        }
        // A quiet send that posts was not whole: handled here, not settled as whole.
        op.quiet = false;
        let (fd, notify, fd_in, fd_out, len) = (op.fd, op.notify, op.fd_in, op.fd_out, op.len);
        if kind == Kind::Send && res > 0 && (res as usize) < len && !self.closing {
            return self.on_short_send(i, fd, res as usize);
        }
        let close_after = op.close_after;
        let closing = self.closing;
        let st = self.st(fd);
        let live = match kind {
            Kind::Send | Kind::SpliceOut | Kind::Connect => st.wr == Some(i),
            _ => st.rd == Some(i),
        };
        if kind == Kind::Send && live && !closing && (res == -libc::EAGAIN || res == -libc::EINTR) {
            // A non-blocking socket may answer EAGAIN rather than wait: wait for room, from the
            // same slot.
            st.wr = None;
            if self.submit_send(i, true).is_err() {
                self.st(fd).err = Some(libc::EIO);
                self.event(fd, Event::READABLE | Event::WRITABLE);
            }
            return;
        }
        // What the request read into is kept; the rest of its buffers go back to the pool.
        let buf = std::mem::take(&mut self.ops[i as usize].buf);
        self.free_op(i);
        if close_after {
            let _ = sys::close(fd);
        }
        if !live || closing {
            self.give_buf(buf);
            return;
        }
        let st = self.st(fd);
        match kind {
            Kind::Accept => {}
            Kind::Connect => {
                st.wr = None;
                self.event(fd, Event::WRITABLE);
            }
            Kind::Poll => {
                st.rd = None;
                // A connection's poll watches an idle origin connection once: the worker
                // decides what comes next (a read would wait behind a poll re-armed here).
                let again = st.registered && st.want_read && st.role != Some(Role::Conn);
                self.event(fd, Event::READABLE);
                if again {
                    let _ = self.arm_poll(fd);
                }
            }
            Kind::Recv => self.on_recv(fd, res, len, buf),
            Kind::Send => {
                if res < 0 {
                    st.wr = None;
                    st.err = Some(-res);
                    self.event(fd, Event::READABLE | Event::WRITABLE);
                    return;
                }
                self.send_ended(fd);
            }
            Kind::SpliceIn => {
                st.rd = None;
                // The poll saw bytes, yet the splice found none to move: the pipe is full
                // (the state machine drains it), or the poll was spurious (try again).
                if res == -libc::EAGAIN
                    && sys::fionread(fd_out).ok() == Some(0)
                    && self
                        .arm_splice(Kind::SpliceIn, fd_in, fd_out, len, notify, false)
                        .is_ok()
                {
                    return;
                }
                self.st(fd).rd_done = Some(res);
                self.event(notify, Event::READABLE);
            }
            Kind::SpliceOut => {
                st.wr = None;
                if res == -libc::EAGAIN
                    && self
                        .arm_splice(Kind::SpliceOut, fd_in, fd_out, len, notify, true)
                        .is_ok()
                {
                    return;
                }
                self.st(fd).wr_done = Some(res);
                self.event(notify, Event::WRITABLE);
            }
            Kind::Tee => {
                st.rd = None;
                st.rd_done = Some(res);
                self.event(notify, 0);
            }
            Kind::ReadPipe => self.on_read_pipe(fd, res, len, notify, buf),
        }
    }

    /// A short send (a full socket; MSG_WAITALL makes them rare otherwise) of `sent` bytes:
    /// the rest waits for room, from the same slot.
    fn on_short_send(&mut self, i: u32, fd: RawFd, sent: usize) {
        let op = &mut self.ops[i as usize];
        let mut n = sent;
        for (h, off) in op.out.iter_mut() {
            let k = n.min(h.bytes().len() - *off);
            *off += k;
            n -= k;
        }
        op.out.retain(|(h, off)| *off < h.bytes().len());
        let orphan = op.close_after;
        let live = self.st(fd).wr == Some(i);
        if (live || orphan) && self.submit_send(i, true).is_ok() {
            return;
        }
        // Not resubmitted (the slot is freed if the submission failed).
        self.free_op(i);
        if orphan {
            let _ = sys::close(fd);
        }
        if live {
            let st = self.st(fd);
            st.wr = None;
            st.err = Some(libc::EIO);
            self.event(fd, Event::READABLE | Event::WRITABLE);
        }
    }

    /// A recv of at most `len` bytes into `buf` completed with `res`: the bytes become the
    /// descriptor's input; an end of stream or an error is noted; an EAGAIN asks again.
    #[inline]
    fn on_recv(&mut self, fd: RawFd, res: i32, len: usize, mut buf: Vec<u8>) {
        let waits = self.stats.waits;
        let st = self.st(fd);
        st.rd = None;
        if res > 0 {
            st.recv_full = res as usize >= len;
            if (res as usize) < len {
                st.drained_at = waits;
            }
            // SAFETY: the kernel wrote `res` bytes (at most the `len` asked for, within the
            // capacity reserved) at the front of the buffer.
            unsafe { buf.set_len((res as usize).min(len)) };
            let old = std::mem::replace(&mut st.rx, buf);
            st.rx_pos = 0;
            self.give_buf(old);
        } else {
            if res == 0 {
                st.eof = true;
            } else if res == -libc::EAGAIN || res == -libc::EINTR {
                self.give_buf(buf);
                if self.arm_recv(fd, len).is_ok() {
                    return;
                }
                self.st(fd).err = Some(libc::EIO);
                buf = Vec::new();
            } else {
                st.err = Some(-res);
            }
            // An end of stream or an error leaves the buffer unused: back to the pool (the
            // next connection's first recv takes it, instead of allocating one).
            self.give_buf(buf);
        }
        // Not for a recv `recv_at_once` waits on: its caller takes what it brought.
        if fd != self.taking {
            self.event(fd, Event::READABLE);
        }
    }

    /// A read of at most `len` bytes out of a pipe, appended to `buf`, completed with `res`:
    /// the vector goes back to the state machine with its bytes (see `read_pipe`).
    fn on_read_pipe(&mut self, fd: RawFd, res: i32, len: usize, notify: RawFd, mut buf: Vec<u8>) {
        if res > 0 {
            let n = buf.len() + (res as usize).min(len);
            // SAFETY: the kernel wrote `res` bytes (at most the `len` asked for, within the
            // capacity reserved) after the vector's contents.
            unsafe { buf.set_len(n) };
        }
        let st = self.st(fd);
        st.rd = None;
        let old = std::mem::replace(&mut st.rx, buf);
        st.rx_pos = 0;
        st.rd_done = Some(res);
        self.give_buf(old);
        self.event(notify, 0);
    }

    fn on_accept(&mut self, i: u32, res: i32, flags: u32) {
        let more = cqueue::more(flags);
        if !more {
            self.free_op(i);
            if self.accept_op == Some(i) {
                self.accept_op = None;
            }
        }
        if res >= 0 {
            if self.closing {
                let _ = sys::close(res);
            } else {
                self.accepted.push_back(res);
            }
        } else if res != -libc::ECANCELED {
            self.accept_err = Some(-res);
        }
        let fd = self.listen_fd;
        // Accepting resumed while the cancel of the last accept was on its way: arm anew (not
        // while an error waits to pause accepting).
        let registered = self.st(fd).registered;
        if self.accept_op.is_none() && registered && !self.closing && self.accept_err.is_none() {
            let _ = self.arm_accept();
        }
        self.event(fd, Event::READABLE);
    }

    /// A read that finds nothing held, after a recv that filled all it asked for (more is
    /// likely waiting: a large body's next batch): the recv is armed and submitted now, with
    /// what the turn queued before it (an enter that waits for nothing), so that if it
    /// completes there the state machine takes its bytes in this turn. Without it each
    /// batch of a large body cost a worker turn of its own (20 per 1 MiB response, against
    /// epoll-et's 4.4 waits, whose reads go on until the socket is empty); the enter it
    /// costs is the one the end of the turn would have made. The recv's own event is not
    /// queued: the caller takes what it brought.
    #[inline]
    fn recv_now(&mut self, fd: RawFd, want: usize) -> io::Result<()> {
        let st = self.st(fd);
        if want == 0
            || !st.recv_full
            || st.rd.is_some()
            || st.rx_pos < st.rx.len()
            || st.err.is_some()
            || st.eof
        {
            return Ok(());
        }
        self.recv_at_once(fd, want)
    }

    #[inline(never)]
    fn recv_at_once(&mut self, fd: RawFd, want: usize) -> io::Result<()> {
        self.arm_recv(fd, want)?;
        self.taking = fd;
        let r = self.turn_ring(Some(Duration::ZERO));
        self.taking = -1;
        r
    }

    /// Takes what a read finds: bytes received, an error, EOF; else arms a recv of `want`.
    fn take_rx(
        &mut self,
        fd: RawFd,
        want: usize,
        copy: impl FnOnce(&[u8]) -> usize,
    ) -> io::Result<usize> {
        if want == 0 {
            return Ok(0);
        }
        let st = self.st(fd);
        if st.rx_pos < st.rx.len() {
            let n = copy(&st.rx[st.rx_pos..]);
            st.rx_pos += n;
            if st.rx_pos == st.rx.len() {
                let rx = std::mem::take(&mut st.rx);
                st.rx_pos = 0;
                self.give_buf(rx);
            }
            return Ok(n);
        }
        if let Some(e) = st.err {
            return Err(errno(e));
        }
        if st.eof {
            return Ok(0);
        }
        if st.rd.is_none() {
            self.arm_recv(fd, want)?;
        }
        Err(in_flight())
    }
}

impl Poller for Uring {
    const MECHANISM: Mechanism = Mechanism::Uring;

    fn support() -> Support {
        evlab_poll::uring_probe::engine_support()
    }

    fn new() -> io::Result<Uring> {
        let ring = evlab_poll::uring_probe::new_engine_ring(RING_ENTRIES, CQ_ENTRIES)?;
        let mut p = Probe::new();
        let splice_ok = ring.submitter().register_probe(&mut p).is_ok()
            && p.is_supported(opcode::Splice::CODE)
            && p.is_supported(opcode::Tee::CODE);
        if !splice_ok {
            static SAID: AtomicBool = AtomicBool::new(false);
            if !SAID.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "evlab proxy: this kernel's io_uring lacks IORING_OP_SPLICE or IORING_OP_TEE; \
                     the uring engine copies every body"
                );
            }
        }
        let skip_success = ring.params().is_feature_skip_cqe_on_success();
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
            cqes: Vec::with_capacity(1024),
            stats: PollerStats::default(),
        };
        u.quiet_ok = u.probe_quiet();
        Ok(u)
    }

    fn register(&mut self, fd: RawFd, _token: Token, interest: Interest) -> io::Result<()> {
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

    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        self.stats.interest_changes_free += 1;
        self.register(fd, token, interest)
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
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

    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        events.clear();
        self.stats.waits += 1;
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
            if !self.ready.is_empty() || self.cqes.is_empty() || timeout == Some(Duration::ZERO) {
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
        self.stats.events += events.len() as u64;
        Ok(events.len())
    }

    fn edge_triggered(&self) -> bool {
        true
    }

    fn stats(&self) -> PollerStats {
        self.stats
    }
}

impl Io for Uring {
    const COMPLETION: bool = true;

    fn bufs<'a>(&'a mut self, _worker: &'a mut BufPool) -> &'a mut BufPool {
        &mut self.bufs
    }

    fn adopt(&mut self, fd: RawFd, role: Role) {
        // A new descriptor: nothing known of an earlier one with its number may carry over.
        let st = self.st(fd);
        let refs = st.refs;
        let rx = std::mem::take(&mut st.rx);
        *st = FdState {
            role: Some(role),
            refs,
            ..FdState::default()
        };
        self.give_buf(rx);
        if role == Role::Listener {
            self.listen_fd = fd;
        }
    }

    fn accept(&mut self, listen_fd: RawFd) -> io::Result<(RawFd, Option<std::net::SocketAddr>)> {
        if let Some(fd) = self.accepted.pop_front() {
            return Ok((fd, None));
        }
        if let Some(e) = self.accept_err.take() {
            return Err(errno(e));
        }
        if self.accept_op.is_none() && self.st(listen_fd).registered {
            self.arm_accept()?;
        }
        Err(errno(libc::EAGAIN))
    }

    fn read_max(&mut self, fd: RawFd, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        let want = max.min(buf.capacity() - buf.len());
        self.recv_now(fd, want)?;
        let st = self.st(fd);
        if buf.is_empty() && st.rx_pos == 0 && !st.rx.is_empty() && st.rx.len() <= want {
            // The whole of a recv into an empty buffer (a copied body's next batch, a client's
            // next requests): hand the request's buffer over instead of copying it.
            let n = st.rx.len();
            std::mem::swap(buf, &mut st.rx);
            let old = std::mem::take(&mut st.rx);
            self.give_buf(old);
            return Ok(n);
        }
        self.take_rx(fd, want, |src| {
            let n = src.len().min(want);
            buf.extend_from_slice(&src[..n]);
            n
        })
    }

    fn read(&mut self, fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len();
        self.take_rx(fd, want, |src| {
            let n = src.len().min(want);
            buf[..n].copy_from_slice(&src[..n]);
            n
        })
    }

    fn watch_connect(&mut self, fd: RawFd) -> io::Result<()> {
        self.arm_connect_poll(fd)
    }

    fn writev(&mut self, fd: RawFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let st = self.st(fd);
        if let Some(e) = st.err {
            return Err(errno(e));
        }
        if st.wr.is_some() {
            st.wr_wanted = true;
            return Err(in_flight());
        }
        let total: usize = bufs.iter().map(|b| b.len()).sum::<usize>().min(SEND_MAX);
        if total == 0 {
            return Ok(0);
        }
        let mut copy = self.take_buf(total);
        for b in bufs {
            let k = b.len().min(total - copy.len());
            copy.extend_from_slice(&b[..k]);
            if copy.len() == total {
                break;
            }
        }
        let i = self.new_op(Kind::Send, fd, fd);
        self.ops[i as usize].out.push((Held::Vec(copy), 0));
        self.submit_send(i, false)?;
        Ok(total)
    }

    fn write_parts(&mut self, fd: RawFd, parts: &mut [Part<'_>]) -> io::Result<usize> {
        let st = self.st(fd);
        if let Some(e) = st.err {
            return Err(errno(e));
        }
        if st.wr.is_some() {
            st.wr_wanted = true;
            return Err(in_flight());
        }
        // What the send takes: the first SEND_PARTS parts with bytes left.
        let total: usize = parts
            .iter()
            .map(|p| p.rest().len())
            .filter(|&n| n > 0)
            .take(SEND_PARTS)
            .sum();
        if total == 0 {
            return Ok(0);
        }
        let i = self.new_op(Kind::Send, fd, fd);
        let Uring { ops, bufs, .. } = self;
        let out = &mut ops[i as usize].out;
        for p in parts.iter_mut() {
            let n = p.rest().len();
            if n == 0 || out.len() == SEND_PARTS {
                continue;
            }
            let held = match p {
                // The vector itself: the state machine goes on with an empty one as large
                // (it would otherwise grow a small one, a reallocation, for its next batch).
                Part::Owned(v, pos) => {
                    let from = std::mem::replace(*pos, 0);
                    let fresh = bufs.take_exact(v.capacity());
                    (Held::Vec(std::mem::replace(*v, fresh)), from)
                }
                Part::Shared(o, pos) => {
                    let from = std::mem::replace(*pos, o.body.len());
                    (Held::Obj(Rc::clone(o)), from)
                }
                Part::Borrowed(b, pos) => {
                    let mut v = bufs.take_exact(n);
                    v.extend_from_slice(&b[**pos..]);
                    **pos = b.len();
                    (Held::Vec(v), 0)
                }
            };
            out.push(held);
        }
        self.submit_send(i, false)?;
        Ok(total)
    }

    fn splice(
        &mut self,
        fd_in: RawFd,
        fd_out: RawFd,
        len: usize,
        notify: RawFd,
    ) -> io::Result<usize> {
        let from_socket = self.st(fd_in).role == Some(Role::Conn);
        let (kind, key) = if from_socket {
            (Kind::SpliceIn, fd_in)
        } else {
            (Kind::SpliceOut, fd_out)
        };
        let st = self.st(key);
        let done = if from_socket {
            st.rd_done.take()
        } else {
            st.wr_done.take()
        };
        if let Some(r) = done {
            return result(r);
        }
        if from_socket && st.rx_pos < st.rx.len() {
            // Bytes already read into user space would be overtaken: never happens, since
            // reads take no more than the state machine asks for.
            return Err(io::Error::other("bytes read ahead of a splice"));
        }
        if let Some(e) = st.err {
            return Err(errno(e));
        }
        let busy = if from_socket { st.rd } else { st.wr };
        if !from_socket && busy.is_some() {
            st.wr_wanted = true;
        }
        if busy.is_none() {
            self.arm_splice(kind, fd_in, fd_out, len, notify, false)?;
        }
        Err(in_flight())
    }

    fn read_pipe(
        &mut self,
        fd: RawFd,
        buf: &mut Vec<u8>,
        max: usize,
        notify: RawFd,
    ) -> io::Result<usize> {
        // The vector itself goes with the request (the kernel reads into it; no bytes are
        // copied after), and comes back with the bytes appended: meanwhile the state machine
        // holds an empty one, and touches it not while the read is in flight.
        let st = self.st(fd);
        if let Some(r) = st.rd_done.take() {
            let rx = std::mem::take(&mut st.rx);
            st.rx_pos = 0;
            let old = std::mem::replace(buf, rx);
            self.give_buf(old);
            return result(r);
        }
        if st.rd.is_none() {
            let taken = std::mem::take(buf);
            self.arm_read_pipe(fd, taken, max, notify)?;
        }
        Err(in_flight())
    }

    fn tee(&mut self, fd_in: RawFd, fd_out: RawFd, len: usize, notify: RawFd) -> io::Result<usize> {
        let st = self.st(fd_in);
        if let Some(r) = st.rd_done.take() {
            return result(r);
        }
        if st.rd.is_none() {
            self.arm_splice(Kind::Tee, fd_in, fd_out, len, notify, false)?;
        }
        Err(in_flight())
    }

    fn shutdown_write(&mut self, fd: RawFd) {
        let st = self.st(fd);
        if st.wr.is_some() {
            st.shut_pending = true;
        } else {
            let _ = sys::shutdown(fd, libc::SHUT_WR);
        }
    }

    fn close(&mut self, fd: RawFd) {
        self.forget(fd);
        let st = self.st(fd);
        st.role = None;
        // A send taken from the worker may not even be submitted yet: the descriptor stays
        // open (its number unused) until the send is done, then closes.
        if std::mem::take(&mut st.close_deferred) {
            return;
        }
        // A splice or tee naming the descriptor is still in the kernel, cancelled or not. One
        // behind a linked poll is issued only when the poll fires, and looks the number up
        // then: closed now, the number could belong to a new connection by that time, and the
        // splice would take that connection's bytes. So the descriptor stays open until the
        // last such request completes; a socket is shut so that its poll fires at once.
        if st.refs > 0 {
            st.close_on_free = true;
            let _ = sys::shutdown(fd, libc::SHUT_RDWR);
            return;
        }
        let _ = sys::close(fd);
    }

    fn pipe_busy(&mut self, rd: RawFd, wr: RawFd) -> bool {
        // A request in flight, or a result not taken (bytes the state machine has not
        // counted): the pipe may hold more than it knows. Either way nothing about these
        // descriptors may outlive them.
        let busy = [rd, wr].into_iter().any(|fd| {
            let st = self.st(fd);
            st.refs > 0
                || st.rd.is_some()
                || st.wr.is_some()
                || st.rd_done.is_some()
                || st.wr_done.is_some()
        }) || sys::fionread(rd).ok() != Some(0);
        // The kernel's count too: the state machine's may lag a completion (a tee's copy,
        // a splice's bytes) when the exchange ends early, and a pooled pipe with bytes would
        // hand them to the next body (seen: a client that left mid-body in splice-keep).
        if busy {
            self.forget(rd);
            self.forget(wr);
        }
        busy
    }

    fn unasked(&mut self, fd: RawFd) -> Unasked {
        let waits = self.stats.waits;
        let st = self.st(fd);
        if st.rx_pos < st.rx.len() || st.rd_done.is_some() {
            return Unasked::Bytes;
        }
        if st.err.is_some() || st.eof {
            return Unasked::Closed;
        }
        if st.rd.is_none() && st.drained_at == waits {
            // A recv harvested in this turn found the socket empty behind its bytes, and all
            // it brought has been taken: as good as a peek, without the syscall.
            return Unasked::Quiet;
        }
        let reading = st
            .rd
            .and_then(|i| self.ops.get(i as usize).filter(|o| o.live))
            .is_some_and(|op| op.kind != Kind::Poll);
        if reading {
            // A read in flight may have taken bytes already: whatever they are, the
            // connection cannot be trusted with another request.
            return Unasked::Closed;
        }
        // A poll takes nothing: what arrived is still in the socket.
        crate::xfer::peek_unasked(fd)
    }

    fn watch_idle(&mut self, fd: RawFd) {
        // A poll, not a recv: a recv would take the bytes, and those that arrive after the
        // next request is sent could not be told from its response.
        if self.st(fd).rd.is_none() && self.arm_poll(fd).is_err() {
            self.st(fd).err = Some(libc::EIO);
        }
    }

    fn unwatch_idle(&mut self, fd: RawFd) {
        if let Some(i) = self.st(fd).rd {
            let poll = self.ops.get(i as usize).filter(|o| o.live);
            if poll.is_some_and(|o| o.kind == Kind::Poll) {
                // Its completion (cancelled or not) no longer matches `rd` and is dropped.
                self.st(fd).rd = None;
                self.cancel(i);
            }
        }
        // Nothing is in flight to wake the fetch once the request is out: the worker marks
        // the connection readable itself, and its read (a recv queued behind the request's
        // send) comes in the same turn. An event here would cost a turn of its own, and make
        // the next enter not wait.
    }

    fn can_splice(&self) -> bool {
        self.splice_ok
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
mod tests {
    use super::*;
    use crate::xfer::pending;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::IntoRawFd;

    fn engine() -> Option<Uring> {
        evlab_poll::testing::mechanism(Mechanism::Uring).then(|| Uring::new().expect("a ring"))
    }

    /// A connected pair: the engine's side (non-blocking, adopted, registered) and the peer.
    fn pair(u: &mut Uring) -> (RawFd, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (ours, _) = l.accept().unwrap();
        ours.set_nonblocking(true).unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let fd = ours.into_raw_fd();
        u.adopt(fd, Role::Conn);
        u.register(
            fd,
            Token(fd as usize),
            Interest::READABLE.with(Interest::WRITABLE),
        )
        .unwrap();
        (fd, peer)
    }

    /// Makes the call until it is no longer in flight, turning the ring meanwhile.
    fn until<T>(u: &mut Uring, mut f: impl FnMut(&mut Uring) -> io::Result<T>) -> io::Result<T> {
        let mut ev = Events::with_capacity(64);
        let t0 = Instant::now();
        loop {
            match f(u) {
                Err(e) if pending(&e) => {
                    assert!(t0.elapsed() < Duration::from_secs(5), "still in flight");
                    u.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
                }
                r => return r,
            }
        }
    }

    #[test]
    fn a_read_is_in_flight_then_brings_the_bytes_then_eof() {
        let Some(mut u) = engine() else { return };
        let (fd, mut peer) = pair(&mut u);
        let mut ev = Events::with_capacity(8);
        u.wait(&mut ev, Some(Duration::ZERO)).unwrap();
        assert!(ev
            .iter()
            .any(|e| e.token == Token(fd as usize) && e.readable()));
        let mut buf = Vec::with_capacity(4096);
        assert!(pending(&u.read_max(fd, &mut buf, 4096).unwrap_err()));
        peer.write_all(b"hello").unwrap();
        assert_eq!(
            until(&mut u, |u| u.read_max(fd, &mut buf, 4096)).unwrap(),
            5
        );
        assert_eq!(buf, b"hello");
        peer.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(
            until(&mut u, |u| u.read_max(fd, &mut buf, 4096)).unwrap(),
            0
        );
        u.deregister(fd).unwrap();
        Io::close(&mut u, fd);
    }

    /// A write is taken whole and sent afterwards: closing the descriptor at once (the
    /// worker's way after its last response) must not lose it, though the send is not even
    /// submitted yet.
    #[test]
    fn a_send_taken_before_the_close_still_arrives() {
        let Some(mut u) = engine() else { return };
        let (fd, mut peer) = pair(&mut u);
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut sent = 0;
        while sent < data.len() {
            sent += until(&mut u, |u| u.writev(fd, &[IoSlice::new(&data[sent..])])).unwrap();
        }
        u.shutdown_write(fd);
        u.deregister(fd).unwrap();
        Io::close(&mut u, fd);
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            peer.read_to_end(&mut got).map(|_| got)
        });
        let mut ev = Events::with_capacity(8);
        let t0 = Instant::now();
        while u.live > 0 && t0.elapsed() < Duration::from_secs(5) {
            u.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
        }
        assert_eq!(u.live, 0, "the send completed");
        assert!(
            reader.join().unwrap().unwrap() == data,
            "every byte, then EOF"
        );
    }

    /// A whole send posts no completion: it does not end the enter that submits it (one enter
    /// per wait, not two), and is settled after it; a write waiting on it is answered in that
    /// wait, not when the wait's timeout runs out.
    #[test]
    fn a_quiet_send_settles_within_the_enter_that_submits_it() {
        let Some(mut u) = engine() else { return };
        if !evlab_poll::testing::require(
            "io_uring",
            u.quiet_ok,
            "this kernel's io_uring failed the quiet-send probe (MSG_DONTWAIT and \
             IOSQE_CQE_SKIP_SUCCESS: a partial send must post its count)",
        ) {
            return;
        }
        let (fd, mut peer) = pair(&mut u);
        let mut ev = Events::with_capacity(8);
        // The registration's "may be readable, writable" event.
        u.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
        assert_eq!(u.writev(fd, &[IoSlice::new(b"hello")]).unwrap(), 5);
        assert!(u.st(fd).wr.is_some(), "in flight until its enter");
        let enters = u.stats.waits_from_kernel;
        u.wait(&mut ev, Some(Duration::from_millis(50))).unwrap();
        assert_eq!(
            u.stats.waits_from_kernel - enters,
            1,
            "the send's completion ended no enter"
        );
        assert!(
            ev.is_empty(),
            "nothing for the worker: {:?}",
            ev.iter().collect::<Vec<_>>()
        );
        assert!(
            u.st(fd).wr.is_none() && u.live == 0,
            "settled, its slot free"
        );
        let mut got = [0u8; 5];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
        // A write answered "in flight" behind a quiet send: the wait that settles the send says
        // the socket is writable, without sleeping its timeout.
        assert_eq!(u.writev(fd, &[IoSlice::new(b"one")]).unwrap(), 3);
        assert!(pending(&u.writev(fd, &[IoSlice::new(b"two")]).unwrap_err()));
        let t0 = Instant::now();
        u.wait(&mut ev, Some(Duration::from_secs(30))).unwrap();
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the wait slept its timeout"
        );
        assert!(
            ev.iter()
                .any(|e| e.token == Token(fd as usize) && e.writable()),
            "the waiting write is told"
        );
        assert_eq!(u.writev(fd, &[IoSlice::new(b"two")]).unwrap(), 3);
        until(&mut u, |u| {
            if u.st(fd).wr.is_some() {
                Err(in_flight())
            } else {
                Ok(())
            }
        })
        .unwrap();
        let mut got = [0u8; 6];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"onetwo");
        u.deregister(fd).unwrap();
        Io::close(&mut u, fd);
    }

    /// After a recv that filled all it asked for, the next read submits its recv at once and
    /// takes the bytes in the same call when they are there, without a wait and without an
    /// event for them; when the socket is empty, the recv is left in flight.
    #[test]
    fn a_read_after_a_full_recv_takes_the_next_bytes_at_once() {
        let Some(mut u) = engine() else { return };
        let (fd, mut peer) = pair(&mut u);
        let mut ev = Events::with_capacity(8);
        u.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
        let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 253) as u8).collect();
        peer.write_all(&data).unwrap();
        let piece = 16 * 1024;
        let mut got = Vec::new();
        // The first recv waits for bytes (nothing was known of the socket): in flight.
        let mut buf = Vec::with_capacity(piece);
        assert!(pending(&u.read_max(fd, &mut buf, piece).unwrap_err()));
        let n = until(&mut u, |u| u.read_max(fd, &mut buf, piece)).unwrap();
        assert_eq!(n, piece, "the first recv filled what it asked for");
        got.extend_from_slice(&buf);
        // The rest is in the socket: each next read takes its bytes in the same call.
        for _ in 0..3 {
            let mut buf = Vec::with_capacity(piece);
            let enters = u.stats.waits_from_kernel;
            let n = u.read_max(fd, &mut buf, piece).unwrap();
            assert_eq!(n, piece);
            assert_eq!(u.stats.waits_from_kernel - enters, 1, "one enter, no wait");
            got.extend_from_slice(&buf);
        }
        assert!(got == data, "the bytes in order");
        assert!(
            !u.ready.iter().any(|e| e.token == Token(fd as usize)),
            "no event for bytes already taken"
        );
        // The socket is empty now: the next read's recv is in flight.
        let mut buf = Vec::with_capacity(piece);
        assert!(pending(&u.read_max(fd, &mut buf, piece).unwrap_err()));
        u.deregister(fd).unwrap();
        Io::close(&mut u, fd);
    }

    /// A response's parts are taken, not copied: the vectors go with the send (the state
    /// machine keeps empty ones), a cached object is held, and the peer gets them in order.
    #[test]
    fn write_parts_takes_the_buffers_and_sends_them_in_order() {
        let Some(mut u) = engine() else { return };
        // The worker sizes the pool it hands the engine; this one keeps a 300 KB buffer.
        u.bufs = BufPool::new(64 * 1024, 1 << 20, 16 << 20);
        let (fd, mut peer) = pair(&mut u);
        let head = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        let obj = Rc::new(Object {
            status: 200,
            head: Box::from(&b""[..]),
            body: (0..100_000u32).map(|i| (i % 241) as u8).collect(),
            last_modified: None,
            expires: Instant::now(),
            stored: Instant::now(),
            age: 0,
            shared: false,
            validators: false,
            never_stale: false,
        });
        let tail: Vec<u8> = (0..300_000u32).map(|i| (i % 239) as u8).collect();
        let mut expect = head[2..].to_vec();
        expect.extend_from_slice(&obj.body[5..]);
        expect.extend_from_slice(&tail);
        let (mut out, mut out_pos) = (head, 2);
        let mut hit_pos = 5;
        let (mut body, mut sent) = (tail, 0);
        let body_ptr = body.as_ptr();
        let n = until(&mut u, |u| {
            u.write_parts(
                fd,
                &mut [
                    Part::Owned(&mut out, &mut out_pos),
                    Part::Shared(&obj, &mut hit_pos),
                    Part::Owned(&mut body, &mut sent),
                ],
            )
        })
        .unwrap();
        assert_eq!(n, expect.len());
        assert!(out.is_empty() && out_pos == 0 && body.is_empty() && sent == 0);
        assert_eq!(hit_pos, obj.body.len());
        assert_eq!(Rc::strong_count(&obj), 2, "the send holds the object");
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; expect.len()];
            peer.read_exact(&mut got).map(|_| got == expect)
        });
        let mut ev = Events::with_capacity(8);
        let t0 = Instant::now();
        while u.st(fd).wr.is_some() && t0.elapsed() < Duration::from_secs(5) {
            u.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
        }
        assert!(reader.join().unwrap().unwrap(), "every byte, in order");
        assert_eq!(Rc::strong_count(&obj), 1, "given back once sent");
        assert!(
            u.bufs.holds(body_ptr),
            "the body's own buffer came back to the pool: never copied"
        );
        u.deregister(fd).unwrap();
        Io::close(&mut u, fd);
    }

    #[test]
    fn splice_moves_socket_to_pipe_to_socket() {
        let Some(mut u) = engine() else { return };
        if !evlab_poll::testing::require(
            "io_uring",
            u.can_splice(),
            "this kernel's io_uring cannot splice (IORING_OP_SPLICE)",
        ) {
            return;
        }
        let (origin, mut origin_peer) = pair(&mut u);
        let (client, mut client_peer) = pair(&mut u);
        let (rd, wr) = sys::pipe2_counted().unwrap();
        let body: Vec<u8> = (0..30_000u32).map(|i| (i % 253) as u8).collect();
        origin_peer.write_all(&body).unwrap();
        let mut moved = 0;
        while moved < body.len() {
            let n = until(&mut u, |u| u.splice(origin, wr, body.len() - moved, origin)).unwrap();
            assert!(n > 0);
            let mut left = n;
            while left > 0 {
                left -= until(&mut u, |u| u.splice(rd, client, left, client)).unwrap();
            }
            moved += n;
        }
        let mut got = vec![0u8; body.len()];
        client_peer.read_exact(&mut got).unwrap();
        assert!(got == body);
        assert!(!u.pipe_busy(rd, wr), "nothing in flight on the pipe");
        for fd in [origin, client] {
            u.deregister(fd).unwrap();
            Io::close(&mut u, fd);
        }
        let _ = sys::close(rd);
        let _ = sys::close(wr);
    }
}
