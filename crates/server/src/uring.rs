//! The `uring` mechanism: a completion-based engine, not a readiness loop.
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
//! - `--accept-limit` does not apply: a multishot accept takes every connection as it comes.

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use evlab_http::{ContentCache, DateCache, Status};
use evlab_poll::{sys, PollerStats};
use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::conn::{Conn, Front, State};
use crate::handler::{process_input, respond_error, Ctx};
use crate::stats::{Shared, WorkerStats};
use crate::timers::TimerQueue;
use crate::worker::{announce, Ready};
use crate::Config;

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
/// A client that keeps sending while its replies cannot leave is cut off past this much input.
const RBUF_ABUSE: usize = 1 << 20;
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

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

/// A ring of provided buffers shared with the kernel (IORING_REGISTER_PBUF_RING).
struct BufRing {
    entries: *mut types::BufRingEntry,
    layout: std::alloc::Layout,
    mem: Vec<u8>,
    tail: u16,
    mask: u16,
}

impl BufRing {
    fn new(ring: &IoUring) -> io::Result<BufRing> {
        let n = BUF_COUNT as usize;
        let layout = std::alloc::Layout::from_size_align(
            n * std::mem::size_of::<types::BufRingEntry>(),
            4096,
        )
        .map_err(|e| io::Error::other(e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let entries = unsafe { std::alloc::alloc_zeroed(layout) } as *mut types::BufRingEntry;
        if entries.is_null() {
            return Err(io::Error::from_raw_os_error(libc::ENOMEM));
        }
        let mut br = BufRing {
            entries,
            layout,
            mem: vec![0u8; n * BUF_SIZE],
            tail: 0,
            mask: BUF_COUNT - 1,
        };
        // SAFETY: `entries` is page-aligned, zeroed, sized for BUF_COUNT entries, and lives until
        // after the ring is dropped (field order in `Engine`).
        sys::count_io(sys::Syscall::IoUringRegister, || unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, BUF_COUNT, BGID, 0)
        })?;
        for bid in 0..BUF_COUNT {
            br.push(bid);
        }
        br.publish();
        Ok(br)
    }

    fn push(&mut self, bid: u16) {
        let i = (self.tail & self.mask) as usize;
        // SAFETY: `i` < BUF_COUNT; the entry is ours to write until the tail is published.
        let e = unsafe { &mut *self.entries.add(i) };
        e.set_addr(self.mem.as_ptr() as u64 + bid as u64 * BUF_SIZE as u64);
        e.set_len(BUF_SIZE as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail lives in the first entry's reserved field; the kernel reads it with
        // acquire semantics, so a release store publishes the entries written before it.
        unsafe {
            let tail =
                types::BufRingEntry::tail(self.entries) as *const std::sync::atomic::AtomicU16;
            (*tail).store(self.tail, std::sync::atomic::Ordering::Release);
        }
    }

    fn data(&self, bid: u16, len: usize) -> &[u8] {
        let start = bid as usize * BUF_SIZE;
        &self.mem[start..start + len.min(BUF_SIZE)]
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the ring that used it is gone.
        unsafe { std::alloc::dealloc(self.entries as *mut u8, self.layout) };
    }
}

struct UConn {
    c: Conn,
    /// Names this connection in `user_data`, so that completions for an earlier connection on
    /// the same descriptor number are recognised (`c.gen` changes per request: timers only).
    id: u32,
    /// The multishot recv is armed (set when queued, cleared by a completion without
    /// IORING_CQE_F_MORE): only then must a close cancel it.
    recv_armed: bool,
    send_inflight: bool,
    wait_pollout: bool,
    eof: bool,
    iov: Box<[libc::iovec; MAX_IOV]>,
}

// Field order matters: the ring must be dropped before the buffer memory it points into.
struct Engine {
    ring: IoUring,
    bufs: BufRing,
    ctx: Ctx,
    conns: Vec<Option<UConn>>,
    listen_fd: RawFd,
    waker_fd: RawFd,
    wake_buf: Box<u64>,
    accepting: bool,
    accept_retry_at: Option<Instant>,
    shutting_down: Option<Instant>,
    active: usize,
    cqes: Vec<(u64, i32, u32)>,
    stats: PollerStats,
}

pub fn run(
    worker: usize,
    listen_fd: RawFd,
    cfg: Arc<Config>,
    shared: Arc<Shared>,
    ready: Ready,
) -> io::Result<()> {
    let mut e = announce(worker, ready, Engine::new(worker, listen_fd, cfg, shared))?;
    let r = e.run();
    e.teardown();
    r
}

impl Engine {
    fn new(
        worker: usize,
        listen_fd: RawFd,
        cfg: Arc<Config>,
        shared: Arc<Shared>,
    ) -> io::Result<Engine> {
        let cache = ContentCache::new(cfg.cache_config())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let ring = evlab_poll::uring_probe::new_engine_ring(RING_ENTRIES, CQ_ENTRIES)?;
        let bufs = BufRing::new(&ring)?;
        let waker_fd = sys::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC)?;
        let stats = Arc::new(WorkerStats::for_this_thread(worker));
        shared.add_worker(stats.clone(), waker_fd);
        let mut date = DateCache::new();
        date.refresh(SystemTime::now());
        let mut e = Engine {
            ring,
            bufs,
            ctx: Ctx {
                header_timers: cfg.header_timeout.map(TimerQueue::new),
                linger_timers: TimerQueue::new(cfg.linger),
                cfg,
                shared,
                stats,
                cache,
                date,
                now: Instant::now(),
                next_gen: 1,
                edge: true,
                scratch: Vec::new(),
                flush: Vec::new(),
                deferring: false,
            },
            conns: Vec::new(),
            listen_fd,
            waker_fd,
            wake_buf: Box::new(0),
            accepting: false,
            accept_retry_at: None,
            shutting_down: None,
            active: 0,
            cqes: Vec::with_capacity(1024),
            stats: PollerStats::default(),
        };
        e.arm_accept()?;
        e.arm_wake()?;
        Ok(e)
    }

    fn push(&mut self, sqe: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every pointer an entry carries (iovecs, the wake buffer) points into memory
            // owned by `self` that stays put until the request completes.
            if unsafe { self.ring.submission().push(sqe).is_ok() } {
                return Ok(());
            }
            sys::count_io(sys::Syscall::IoUringEnter, || self.ring.submit())?;
        }
    }

    fn arm_accept(&mut self) -> io::Result<()> {
        let sqe = opcode::AcceptMulti::new(types::Fd(self.listen_fd))
            .flags(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
            .build()
            .user_data(ud(OP_ACCEPT, self.listen_fd, 0));
        self.push(&sqe)?;
        self.accepting = true;
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

    fn arm_recv(&mut self, fd: RawFd, gen: u32) -> io::Result<()> {
        let sqe = opcode::RecvMulti::new(types::Fd(fd), BGID)
            .build()
            .user_data(ud(OP_RECV, fd, gen));
        self.push(&sqe)?;
        if let Some(Some(uc)) = self.conns.get_mut(fd as usize) {
            uc.recv_armed = true;
        }
        Ok(())
    }

    fn run(&mut self) -> io::Result<()> {
        if self.ctx.shared.shutdown_requested() {
            self.begin_shutdown()?;
        }
        loop {
            if let Some(deadline) = self.shutting_down {
                if self.active == 0 || self.ctx.now >= deadline {
                    return Ok(());
                }
            }
            let timeout = self.next_timeout();
            self.stats.waits += 1;
            self.stats.waits_from_kernel += 1;
            let r = match timeout {
                None => sys::count_io(sys::Syscall::IoUringEnter, || self.ring.submit_and_wait(1)),
                Some(d) => {
                    let ts = types::Timespec::from(d);
                    let args = types::SubmitArgs::new().timespec(&ts);
                    sys::count_io(sys::Syscall::IoUringEnter, || {
                        self.ring.submitter().submit_with_args(1, &args)
                    })
                }
            };
            match r {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                    ) => {}
                Err(e) => return Err(e),
            }
            self.ctx.now = Instant::now();
            self.ctx.date.refresh(SystemTime::now());
            self.cqes.clear();
            for cqe in self.ring.completion() {
                self.cqes.push((cqe.user_data(), cqe.result(), cqe.flags()));
            }
            self.stats.events += self.cqes.len() as u64;
            let mut recycled = false;
            for i in 0..self.cqes.len() {
                let (u, res, flags) = self.cqes[i];
                recycled |= self.on_completion(u, res, flags)?;
            }
            if recycled {
                self.bufs.publish();
            }
            self.expire_timers()?;
            self.ctx.stats.set_poller(&self.stats);
        }
    }

    fn next_timeout(&self) -> Option<Duration> {
        self.ctx
            .wait_timeout(self.accept_retry_at, self.shutting_down)
    }

    /// Handles one completion; returns whether a buffer went back to the buffer ring.
    fn on_completion(&mut self, u: u64, res: i32, flags: u32) -> io::Result<bool> {
        let (op, fd, gen) = ud_parts(u);
        let mut recycled = false;
        // A buffer named by any completion goes back, whatever became of its connection.
        let buffer = cqueue::buffer_select(flags);
        match op {
            OP_ACCEPT => self.on_accept(res, flags)?,
            OP_RECV => {
                let data_len = if res > 0 { res as usize } else { 0 };
                let live = self.live(fd, gen);
                if live {
                    if !cqueue::more(flags) {
                        // The multishot recv is over (EOF, error, no buffers, cancelled): a
                        // close from here on has nothing to cancel.
                        if let Some(Some(uc)) = self.conns.get_mut(fd as usize) {
                            uc.recv_armed = false;
                        }
                    }
                    self.on_recv(fd, res, flags, buffer.map(|b| (b, data_len)))?;
                }
                if let Some(bid) = buffer {
                    self.bufs.push(bid);
                    recycled = true;
                }
            }
            OP_SEND if self.live(fd, gen) => self.on_send(fd, res)?,
            OP_POLLOUT if self.live(fd, gen) => {
                if let Some(Some(uc)) = self.conns.get_mut(fd as usize) {
                    uc.wait_pollout = false;
                }
                self.kick_send(fd)?;
            }
            OP_WAKE if self.shutting_down.is_none() => self.begin_shutdown()?,
            OP_ACCEPT_CANCEL | OP_CANCEL | OP_CLOSE => {}
            _ => {}
        }
        Ok(recycled)
    }

    fn live(&self, fd: RawFd, id: u32) -> bool {
        matches!(self.conns.get(fd as usize), Some(Some(uc)) if uc.id == id)
    }

    fn conn_gen(&self, fd: RawFd) -> u32 {
        match self.conns.get(fd as usize) {
            Some(Some(uc)) => uc.id,
            _ => 0,
        }
    }

    fn on_accept(&mut self, res: i32, flags: u32) -> io::Result<()> {
        if res >= 0 {
            self.add_conn(res)?;
        } else {
            match -res {
                libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM => {
                    self.ctx.stats.accept_errors.inc();
                    self.pause_accept(Some(self.ctx.now + ACCEPT_RETRY))?;
                    return Ok(());
                }
                libc::ECANCELED => {
                    self.accepting = false;
                    return Ok(());
                }
                _ => self.ctx.stats.accept_errors.inc(),
            }
        }
        if !cqueue::more(flags) {
            self.accepting = false;
            if self.shutting_down.is_none()
                && self.accept_retry_at.is_none()
                && self.active < self.ctx.cfg.max_conns
            {
                self.arm_accept()?;
            }
        }
        if self.active >= self.ctx.cfg.max_conns {
            self.pause_accept(None)?;
        }
        Ok(())
    }

    fn pause_accept(&mut self, retry_at: Option<Instant>) -> io::Result<()> {
        if self.accepting {
            self.cancel_accept()?;
            self.ctx.stats.accept_pauses.inc();
        }
        self.accept_retry_at = retry_at;
        Ok(())
    }

    fn cancel_accept(&mut self) -> io::Result<()> {
        let sqe = opcode::AsyncCancel::new(ud(OP_ACCEPT, self.listen_fd, 0))
            .build()
            .user_data(ud(OP_ACCEPT_CANCEL, self.listen_fd, 0));
        self.push(&sqe)?;
        self.accepting = false;
        Ok(())
    }

    fn resume_accept(&mut self) -> io::Result<()> {
        if !self.accepting && self.shutting_down.is_none() && self.active < self.ctx.cfg.max_conns {
            self.accept_retry_at = None;
            self.arm_accept()?;
        }
        Ok(())
    }

    fn add_conn(&mut self, fd: RawFd) -> io::Result<()> {
        let i = fd as usize;
        if i >= self.conns.len() {
            self.conns.resize_with((i + 1).next_power_of_two(), || None);
        }
        let gen = self.ctx.next_gen();
        let c = Conn::new(fd, gen);
        if let Some(t) = self.ctx.header_timers.as_mut() {
            t.push(self.ctx.now, fd, gen);
        }
        let id = gen as u32 & 0xff_ffff;
        self.conns[i] = Some(UConn {
            c,
            id,
            recv_armed: false,
            send_inflight: false,
            wait_pollout: false,
            eof: false,
            iov: Box::new(
                [libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                }; MAX_IOV],
            ),
        });
        self.active += 1;
        let st = &self.ctx.stats;
        st.accepted.inc();
        st.active.set(self.active as u64);
        if self.active as u64 > st.max_active.get() {
            st.max_active.set(self.active as u64);
        }
        self.arm_recv(fd, id)
    }

    fn on_recv(
        &mut self,
        fd: RawFd,
        res: i32,
        flags: u32,
        buffer: Option<(u16, usize)>,
    ) -> io::Result<()> {
        let gen = self.conn_gen(fd);
        if res > 0 {
            let Some((bid, len)) = buffer else {
                self.close_conn(fd)?;
                return Ok(());
            };
            let Some(Some(uc)) = self.conns.get_mut(fd as usize) else {
                return Ok(());
            };
            if uc.c.state != State::Lingering {
                uc.c.rbuf.extend_from_slice(self.bufs.data(bid, len));
            }
            if uc.c.rbuf.len() > RBUF_ABUSE {
                self.ctx.stats.io_errors.inc();
                return self.close_conn(fd);
            }
            if uc.c.state == State::Reading && !uc.send_inflight && uc.c.out.is_empty() {
                process_input(&mut self.ctx, &mut uc.c);
                if !uc.c.out.is_empty() {
                    uc.c.state = State::Writing;
                    self.kick_send(fd)?;
                }
            }
        } else if res == 0 {
            // The peer closed its side.
            let Some(Some(uc)) = self.conns.get_mut(fd as usize) else {
                return Ok(());
            };
            uc.eof = true;
            if uc.c.state == State::Lingering || (uc.c.out.is_empty() && !uc.send_inflight) {
                return self.close_conn(fd);
            }
            uc.c.close_after = true;
            return Ok(());
        } else if res == -libc::ENOBUFS {
            // The buffer ring ran dry; buffers are returned at the end of this round.
        } else if res != -libc::ECANCELED {
            self.ctx.stats.io_errors.inc();
            return self.close_conn(fd);
        }
        if !cqueue::more(flags) && self.live(fd, gen) {
            let eof = matches!(self.conns.get(fd as usize), Some(Some(uc)) if uc.eof);
            if !eof {
                self.arm_recv(fd, gen)?;
            }
        }
        Ok(())
    }

    /// Sends what the connection's queue holds, or arranges to.
    fn kick_send(&mut self, fd: RawFd) -> io::Result<()> {
        let gen = self.conn_gen(fd);
        let Some(Some(uc)) = self.conns.get_mut(fd as usize) else {
            return Ok(());
        };
        if uc.send_inflight || uc.wait_pollout {
            return Ok(());
        }
        match uc.c.out.write_front_special(fd) {
            Ok((Front::Done, n)) => {
                self.ctx.stats.bytes_sent.add(n as u64);
                self.on_drained(fd)
            }
            Ok((Front::Blocked, n)) => {
                self.ctx.stats.bytes_sent.add(n as u64);
                uc.wait_pollout = true;
                let sqe = opcode::PollAdd::new(types::Fd(fd), libc::POLLOUT as u32)
                    .build()
                    .user_data(ud(OP_POLLOUT, fd, gen));
                self.push(&sqe)
            }
            Ok((Front::Memory, n)) => {
                self.ctx.stats.bytes_sent.add(n as u64);
                let (n_iov, _) = uc.c.out.gather(&mut uc.iov[..]);
                if n_iov == 0 {
                    return self.kick_send(fd);
                }
                uc.send_inflight = true;
                let sqe = opcode::Writev::new(types::Fd(fd), uc.iov.as_ptr(), n_iov as u32)
                    .build()
                    .user_data(ud(OP_SEND, fd, gen));
                self.push(&sqe)
            }
            Err(_) => {
                self.ctx.stats.io_errors.inc();
                self.close_conn(fd)
            }
        }
    }

    fn on_send(&mut self, fd: RawFd, res: i32) -> io::Result<()> {
        let Some(Some(uc)) = self.conns.get_mut(fd as usize) else {
            return Ok(());
        };
        uc.send_inflight = false;
        if res < 0 {
            self.ctx.stats.io_errors.inc();
            return self.close_conn(fd);
        }
        uc.c.out.advance(res as usize);
        self.ctx.stats.bytes_sent.add(res as u64);
        if uc.c.out.is_empty() {
            self.on_drained(fd)
        } else {
            self.kick_send(fd)
        }
    }

    /// Every queued byte has left.
    fn on_drained(&mut self, fd: RawFd) -> io::Result<()> {
        let Some(Some(uc)) = self.conns.get_mut(fd as usize) else {
            return Ok(());
        };
        if uc.c.close_after || uc.eof {
            if uc.c.linger && !uc.eof {
                let _ = sys::shutdown(fd, libc::SHUT_WR);
                uc.c.state = State::Lingering;
                uc.c.rbuf = Vec::new();
                uc.c.gen = self.ctx.next_gen();
                // The armed recv keeps running: it now reads only to discard.
                self.ctx.linger_timers.push(self.ctx.now, fd, uc.c.gen);
                return Ok(());
            }
            return self.close_conn(fd);
        }
        uc.c.state = State::Reading;
        if !uc.c.rbuf.is_empty() {
            process_input(&mut self.ctx, &mut uc.c);
            if !uc.c.out.is_empty() {
                uc.c.state = State::Writing;
                return self.kick_send(fd);
            }
        }
        if let Some(t) = self.ctx.header_timers.as_mut() {
            t.push(self.ctx.now, fd, uc.c.gen);
        }
        Ok(())
    }

    fn close_conn(&mut self, fd: RawFd) -> io::Result<()> {
        let Some(slot) = self.conns.get_mut(fd as usize) else {
            return Ok(());
        };
        let Some(uc) = slot.take() else {
            return Ok(());
        };
        // Cancel what is armed on it (the recv holds the file), then close it: all in the next
        // enter, in this order. Cancels name each request by its user_data, which the kernel
        // finds by hash; cancelling "everything on this fd" walks every armed request, which
        // with 10,000 idle connections made each close cost milliseconds. Even by user_data a
        // cancel walks a hash bucket shared with other armed requests (io_poll_find), so
        // nothing is cancelled that is not armed: after the peer's FIN the recv has already
        // ended, and a cancel for it would walk its bucket to the end to find nothing.
        let mut armed = Vec::new();
        if uc.recv_armed {
            armed.push(ud(OP_RECV, fd, uc.id));
        }
        if uc.send_inflight {
            armed.push(ud(OP_SEND, fd, uc.id));
        }
        if uc.wait_pollout {
            armed.push(ud(OP_POLLOUT, fd, uc.id));
        }
        for target in armed {
            let cancel = opcode::AsyncCancel::new(target)
                .build()
                .user_data(ud(OP_CANCEL, fd, 0));
            self.push(&cancel)?;
            self.ctx.stats.cancels.inc();
        }
        let close = opcode::Close::new(types::Fd(fd))
            .build()
            .user_data(ud(OP_CLOSE, fd, 0));
        self.push(&close)?;
        self.active -= 1;
        self.ctx.stats.closed.inc();
        self.ctx.stats.active.set(self.active as u64);
        if !self.accepting && self.accept_retry_at.is_none() {
            self.resume_accept()?;
        }
        Ok(())
    }

    fn expire_timers(&mut self) -> io::Result<()> {
        let now = self.ctx.now;
        while let Some(t) = self.ctx.header_timers.as_mut().and_then(|q| q.pop_due(now)) {
            let Some(Some(uc)) = self.conns.get_mut(t.fd as usize) else {
                continue;
            };
            if uc.c.gen != t.gen
                || uc.c.state != State::Reading
                || !uc.c.out.is_empty()
                || uc.send_inflight
            {
                continue;
            }
            self.ctx.stats.header_timeouts.inc();
            if uc.c.rbuf.is_empty() {
                self.close_conn(t.fd)?;
            } else {
                uc.c.rbuf.clear();
                respond_error(
                    &mut self.ctx,
                    &mut uc.c,
                    Status::RequestTimeout,
                    1,
                    false,
                    false,
                );
                self.kick_send(t.fd)?;
            }
        }
        while let Some(t) = self.ctx.linger_timers.pop_due(now) {
            let due = matches!(self.conns.get(t.fd as usize), Some(Some(uc)) if uc.c.gen == t.gen && uc.c.state == State::Lingering);
            if due {
                self.close_conn(t.fd)?;
            }
        }
        if let Some(at) = self.accept_retry_at {
            if now >= at {
                self.accept_retry_at = None;
                self.resume_accept()?;
            }
        }
        Ok(())
    }

    fn begin_shutdown(&mut self) -> io::Result<()> {
        self.shutting_down = Some(self.ctx.now + SHUTDOWN_GRACE);
        self.accept_retry_at = None;
        if self.accepting {
            self.cancel_accept()?;
        }
        let fds: Vec<RawFd> = self.conns.iter().flatten().map(|u| u.c.fd).collect();
        for fd in fds {
            let idle = match self.conns[fd as usize].as_mut() {
                Some(uc) => {
                    uc.c.close_after = true;
                    uc.c.out.is_empty() && !uc.send_inflight && !uc.wait_pollout
                }
                None => false,
            };
            if idle {
                self.close_conn(fd)?;
            }
        }
        Ok(())
    }

    fn teardown(&mut self) {
        let fds: Vec<RawFd> = self.conns.iter().flatten().map(|u| u.c.fd).collect();
        for fd in fds {
            let _ = self.close_conn(fd);
        }
        let _ = sys::count_io(sys::Syscall::IoUringEnter, || self.ring.submit());
        self.ctx.shared.remove_waker(self.waker_fd);
        let _ = sys::close(self.waker_fd);
        self.ctx.stats.set_poller(&self.stats);
    }
}
