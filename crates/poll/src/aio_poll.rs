//! aio-poll: Linux AIO's `IOCB_CMD_POLL` (Linux 4.18), pipetest's "aio-poll".
//!
//! Each registered descriptor has at most one one-shot poll request (an `iocb`) in an AIO
//! context. `wait` submits every request that must be armed — new registrations and the
//! descriptors reported by the previous wait — in one `io_submit`, then sleeps in
//! `io_getevents`. A completion carries the poll bits that were ready; the request is then
//! spent, and is re-armed at the next wait, after the caller has read or written, so that the
//! new request reports what is left, not what was just consumed.
//!
//! Costs and traps, frankly:
//! - One-shot: every event costs a new request (batched: one `io_submit` per wait for all of
//!   them) and a wait-queue insertion in the kernel, on top of the `io_getevents`. A request
//!   polls the file when submitted and completes at once if it is ready, so each arm reports
//!   the current level: `edge_triggered` is false, and the server uses the level-triggered
//!   cycle (one read per event, interest switched between reading and writing).
//! - Interest changes are free while no request is armed, which in the μserver's cycle is
//!   always (the change follows the event that spent the request). Widening the interest of an
//!   armed request (or deregistering one) needs `io_cancel`, and the kernel finds the request
//!   by walking the context's list of every active request ("TODO: use a hash or array, this
//!   sucks", fs/aio.c): its cost grows with the idle connections. Narrowing keeps the armed
//!   request and drops the bits no longer wanted.
//! - A wakeup that carries no poll bits cannot complete a request where it happens: the kernel
//!   queues a work item and a kworker polls the file and completes it. TCP wakes a socket that
//!   way for a FIN (`sock_def_wakeup`), so a peer's close reaches the server a scheduling hop
//!   later than with epoll; on a busy machine the churn of the allocation test left up to 200
//!   short connections open in the server at once. Data and new connections wake with poll
//!   bits and complete at once.
//! - A cancelled poll still completes, later, and a request may complete just before it is
//!   cancelled: the upper half of `aio_data` is a sequence number bumped on every cancel and
//!   deregistration, and completions that do not match it are dropped (counted as discarded).
//! - `io_cancel` finds a request by the address of the `iocb` it was submitted from, and reads
//!   its `aio_key`: each descriptor's `iocb` lives at a fixed address (in boxed chunks of 256)
//!   for as long as the poller.
//! - The context is sized when created (`io_setup`), and every request in flight, or completed
//!   but not yet reaped, holds a slot. It starts at 256 and doubles when full: a new context
//!   is set up, the old one destroyed (which cancels and waits for its requests) and every
//!   armed descriptor re-armed in the new one. Context sizes count against the system-wide
//!   `fs.aio-max-nr` (65,536 by default): an `io_setup` refused there fails `wait`.
//! - The completion ring is mapped into user space and could be read without a syscall (fio's
//!   `userspace_reap`); this mechanism uses `io_getevents`, as pipetest did.

use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::time::Duration;

use crate::{Event, Events, Interest, Mechanism, Poller, PollerStats, Support, Token};
use evlab_sys::{self as sys, AioContext, IoEvent, Iocb};

/// `iocb`s per boxed chunk (their addresses must not move).
const CHUNK: usize = 256;
/// Requests in flight the first context holds.
const FIRST_CAPACITY: u32 = 256;

#[derive(Copy, Clone, Debug)]
struct Slot {
    token: usize,
    interest: Interest,
    registered: bool,
    /// A request is outstanding in the kernel, polling for `armed_for`.
    armed: bool,
    armed_for: Interest,
    /// In `AioPoll::to_arm`.
    queued: bool,
    /// The upper half of the outstanding request's `aio_data`.
    seq: u32,
}

impl Default for Slot {
    fn default() -> Slot {
        Slot {
            token: 0,
            interest: Interest::NONE,
            registered: false,
            armed: false,
            armed_for: Interest::NONE,
            queued: false,
            seq: 0,
        }
    }
}

pub struct AioPoll {
    ctx: AioContext,
    /// Requests the context was set up for.
    capacity: u32,
    /// Requests submitted whose completion has not been reaped (armed or being cancelled).
    in_flight: u32,
    slots: Vec<Slot>,
    /// Each descriptor's `iocb`, by number, at a fixed address.
    iocbs: Vec<Box<[Iocb; CHUNK]>>,
    /// Descriptors to arm at the next wait.
    to_arm: Vec<RawFd>,
    batch: Vec<*mut Iocb>,
    batch_fds: Vec<RawFd>,
    ring: Vec<IoEvent>,
    /// Arms the kernel refused, reported as errors at the next wait: (fd, seq).
    refused: Vec<(RawFd, u32)>,
    next_seq: u32,
    stats: PollerStats,
}

// SAFETY: the raw pointers in `batch` point into `iocbs`, which the poller owns; they are only
// used during a submission on the thread that holds the poller. An AIO context is usable from
// any thread of the process.
unsafe impl Send for AioPoll {}

impl std::fmt::Debug for AioPoll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AioPoll")
            .field("capacity", &self.capacity)
            .field("in_flight", &self.in_flight)
            .field("to_arm", &self.to_arm.len())
            .finish()
    }
}

fn errno(e: &io::Error) -> Option<i32> {
    e.raw_os_error()
}

fn poll_events(interest: Interest) -> u64 {
    let mut e = 0;
    if interest.readable() {
        e |= libc::POLLIN | libc::POLLRDHUP;
    }
    if interest.writable() {
        e |= libc::POLLOUT;
    }
    e as u16 as u64
}

fn subset(a: Interest, of: Interest) -> bool {
    (!a.readable() || of.readable()) && (!a.writable() || of.writable())
}

/// The poll bits of a completion, as the flags `interest` wants (errors and hang-ups always).
fn flags(res: i64, interest: Interest) -> u8 {
    if res < 0 {
        return Event::ERROR;
    }
    let m = res as i16;
    let mut f = 0;
    if m & (libc::POLLERR | libc::POLLNVAL) != 0 {
        f |= Event::ERROR;
    }
    if m & libc::POLLHUP != 0 {
        f |= Event::HUP;
    }
    if interest.readable() {
        if m & (libc::POLLIN | libc::POLLPRI) != 0 {
            f |= Event::READABLE;
        }
        if m & libc::POLLRDHUP != 0 {
            f |= Event::RDHUP;
        }
    }
    if interest.writable() && m & libc::POLLOUT != 0 {
        f |= Event::WRITABLE;
    }
    f
}

impl AioPoll {
    /// Requests the current context holds in flight.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    fn seq(&mut self) -> u32 {
        self.next_seq = self.next_seq.wrapping_add(1);
        self.next_seq
    }

    fn iocb(&mut self, fd: RawFd) -> *mut Iocb {
        let (c, i) = (fd as usize / CHUNK, fd as usize % CHUNK);
        while self.iocbs.len() <= c {
            self.iocbs.push(Box::new([Iocb::default(); CHUNK]));
        }
        &mut self.iocbs[c][i] as *mut Iocb
    }

    fn queue(&mut self, fd: RawFd) {
        let s = &mut self.slots[fd as usize];
        if !s.queued && !s.interest.is_none() {
            s.queued = true;
            self.to_arm.push(fd);
        }
    }

    /// Cancels `fd`'s armed request; its completion, if one still comes, is dropped.
    fn cancel(&mut self, fd: RawFd) -> io::Result<()> {
        let iocb = self.iocb(fd);
        // SAFETY: `iocb` is this descriptor's iocb, in a chunk the poller owns for its lifetime.
        match unsafe { sys::io_cancel(self.ctx, iocb) } {
            // Old kernels completed a cancelled request in io_cancel's result, not in the ring.
            Ok(()) => self.in_flight = self.in_flight.saturating_sub(1),
            // Being cancelled: the completion comes through the ring.
            Err(e) if errno(&e) == Some(libc::EINPROGRESS) => {}
            // Completed already: the completion is in the ring.
            Err(e) if matches!(errno(&e), Some(libc::EINVAL) | Some(libc::ENOENT)) => {}
            Err(e) => return Err(e),
        }
        self.stats.interest_changes += 1;
        let seq = self.seq();
        let s = &mut self.slots[fd as usize];
        s.armed = false;
        s.seq = seq;
        Ok(())
    }

    /// A context for at least `need` requests in flight; every armed descriptor is re-armed in it.
    fn grow(&mut self, need: u32) -> io::Result<()> {
        let capacity = need
            .checked_next_power_of_two()
            .unwrap_or(need)
            .max(self.capacity.saturating_mul(2));
        let ctx = sys::io_setup(capacity).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "aio-poll: io_setup({capacity}) to hold {need} polls: {e} (fs.aio-max-nr bounds the whole system)"
                ),
            )
        })?;
        let old = std::mem::replace(&mut self.ctx, ctx);
        // Cancels the old context's requests and waits for them; their completions go with it.
        let _ = sys::io_destroy(old);
        self.capacity = capacity;
        self.in_flight = 0;
        for fd in 0..self.slots.len() {
            let s = &mut self.slots[fd];
            if s.registered {
                s.armed = false;
                self.queue(fd as RawFd);
            }
        }
        Ok(())
    }

    /// Submits every queued arm, in one io_submit where the kernel takes them all.
    fn submit(&mut self) -> io::Result<()> {
        let armable = |s: &Slot| s.registered && !s.armed && !s.interest.is_none();
        let need = self
            .to_arm
            .iter()
            .filter(|&&fd| armable(&self.slots[fd as usize]))
            .count() as u32;
        if need > 0 && self.in_flight + need > self.capacity {
            self.grow(self.in_flight + need)?;
        }
        self.batch.clear();
        self.batch_fds.clear();
        let mut to_arm = std::mem::take(&mut self.to_arm);
        for &fd in &to_arm {
            let s = self.slots[fd as usize];
            self.slots[fd as usize].queued = false;
            if !armable(&s) {
                continue;
            }
            let iocb = self.iocb(fd);
            // SAFETY: `iocb` points into a chunk the poller owns; no request from it is being
            // submitted now, and the kernel keeps no reference to its contents.
            unsafe {
                *iocb = Iocb {
                    aio_data: (s.seq as u64) << 32 | fd as u32 as u64,
                    aio_lio_opcode: sys::IOCB_CMD_POLL,
                    aio_fildes: fd as u32,
                    aio_buf: poll_events(s.interest),
                    ..Iocb::default()
                };
            }
            self.batch.push(iocb);
            self.batch_fds.push(fd);
        }
        to_arm.clear();
        self.to_arm = to_arm;
        let mut done = 0;
        while done < self.batch.len() {
            // SAFETY: every pointer is a descriptor's iocb, at a fixed address in a chunk the
            // poller owns until it is dropped (after io_destroy).
            let r = unsafe { sys::io_submit(self.ctx, &self.batch[done..]) };
            self.stats.batches += 1;
            match r {
                Ok(n) if n > 0 => {
                    for &fd in &self.batch_fds[done..done + n] {
                        let s = &mut self.slots[fd as usize];
                        s.armed = true;
                        s.armed_for = s.interest;
                    }
                    self.in_flight += n as u32;
                    self.stats.interest_changes += n as u64;
                    done += n;
                }
                Err(e) if errno(&e) == Some(libc::EAGAIN) => {
                    // Out of slots after all (the kernel caches some per CPU): a larger context.
                    for k in done..self.batch_fds.len() {
                        self.queue(self.batch_fds[k]);
                    }
                    self.grow(self.capacity.saturating_mul(2))?;
                    return self.submit();
                }
                Err(e) if errno(&e) == Some(libc::EINTR) => {}
                Ok(_) | Err(_) => {
                    // The first of the rest was refused (e.g. a file that cannot poll).
                    let fd = self.batch_fds[done];
                    let seq = self.slots[fd as usize].seq;
                    self.refused.push((fd, seq));
                    done += 1;
                }
            }
        }
        Ok(())
    }
}

fn probe() -> Result<(), String> {
    let ctx = sys::io_setup(1).map_err(|e| match errno(&e) {
        Some(libc::ENOSYS) => {
            format!("io_setup: {e} (kernel without CONFIG_AIO, or a seccomp filter)")
        }
        Some(libc::EAGAIN) => format!("io_setup: {e} (fs.aio-max-nr reached)"),
        _ => format!("io_setup: {e}"),
    })?;
    let r = (|| {
        let (rd, wr) = sys::pipe().map_err(|e| format!("pipe: {e}"))?;
        let _close = (sys::OwnedFd(rd), sys::OwnedFd(wr));
        sys::write(wr, b"x").map_err(|e| format!("write: {e}"))?;
        let mut iocb = Iocb {
            aio_data: 7,
            aio_lio_opcode: sys::IOCB_CMD_POLL,
            aio_fildes: rd as u32,
            aio_buf: libc::POLLIN as u64,
            ..Iocb::default()
        };
        // SAFETY: `iocb` outlives the submission and the wait for its completion below.
        unsafe { sys::io_submit(ctx, &[&mut iocb as *mut Iocb]) }.map_err(|e| {
            if errno(&e) == Some(libc::EINVAL) {
                format!("io_submit(IOCB_CMD_POLL): {e} (the kernel has no AIO poll: Linux 4.18+)")
            } else {
                format!("io_submit(IOCB_CMD_POLL): {e}")
            }
        })?;
        let mut ev = [IoEvent::default()];
        let n = sys::io_getevents(ctx, 1, &mut ev, Some(Duration::from_secs(2)))
            .map_err(|e| format!("io_getevents: {e}"))?;
        if n != 1 || ev[0].data != 7 || ev[0].res & libc::POLLIN as i64 == 0 {
            return Err(format!(
                "a poll of a readable pipe completed as {:?} ({n} events)",
                ev[0]
            ));
        }
        Ok(())
    })();
    let _ = sys::io_destroy(ctx);
    r
}

impl Poller for AioPoll {
    const MECHANISM: Mechanism = Mechanism::AioPoll;

    fn support() -> Support {
        static SUPPORT: OnceLock<Support> = OnceLock::new();
        SUPPORT
            .get_or_init(|| Support::unless(probe().err()))
            .clone()
    }

    fn new() -> io::Result<Self> {
        Self::support().require(Self::MECHANISM.name())?;
        let ctx = sys::io_setup(FIRST_CAPACITY)?;
        Ok(AioPoll {
            ctx,
            capacity: FIRST_CAPACITY,
            in_flight: 0,
            slots: Vec::new(),
            iocbs: Vec::new(),
            to_arm: Vec::new(),
            batch: Vec::new(),
            batch_fds: Vec::new(),
            ring: Vec::new(),
            refused: Vec::new(),
            next_seq: 0,
            stats: PollerStats::default(),
        })
    }

    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        let i = fd as usize;
        if i >= self.slots.len() {
            self.slots
                .resize((i + 1).next_power_of_two(), Slot::default());
            // Each descriptor is in these at most once: sized with the table, they never grow
            // while serving.
            let n = self.slots.len();
            self.to_arm.reserve(n.saturating_sub(self.to_arm.len()));
            self.batch.reserve(n.saturating_sub(self.batch.len()));
            self.batch_fds
                .reserve(n.saturating_sub(self.batch_fds.len()));
        }
        if self.slots[i].registered {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        self.iocb(fd);
        let seq = self.seq();
        let s = &mut self.slots[i];
        s.token = token.0;
        s.interest = interest;
        s.registered = true;
        s.armed = false;
        s.seq = seq;
        self.queue(fd);
        Ok(())
    }

    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        let s = self
            .slots
            .get_mut(fd as usize)
            .filter(|s| s.registered)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        s.token = token.0;
        let widened = s.armed && !subset(interest, s.armed_for);
        s.interest = interest;
        if widened {
            // The armed request does not poll for all of it: replace it.
            self.cancel(fd)?;
        } else {
            self.stats.interest_changes_free += 1;
        }
        if !self.slots[fd as usize].armed {
            self.queue(fd);
        }
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        let armed = match self.slots.get(fd as usize) {
            Some(s) if s.registered => s.armed,
            _ => return Err(io::Error::from_raw_os_error(libc::ENOENT)),
        };
        if armed {
            self.cancel(fd)?;
        } else {
            self.stats.interest_changes_free += 1;
        }
        let seq = self.seq();
        let s = &mut self.slots[fd as usize];
        s.registered = false;
        s.seq = seq;
        Ok(())
    }

    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        events.clear();
        self.stats.waits += 1;
        while !events.is_full() {
            let Some((fd, seq)) = self.refused.pop() else {
                break;
            };
            let s = &self.slots[fd as usize];
            if s.registered && s.seq == seq {
                events.push(Event::new(Token(s.token), Event::ERROR));
            }
        }
        self.submit()?;
        let room = events.capacity() - events.len();
        if room == 0 {
            self.stats.waits_from_memory += 1;
            self.stats.events += events.len() as u64;
            return Ok(events.len());
        }
        self.stats.waits_from_kernel += 1;
        if self.ring.len() < room {
            self.ring.resize(room, IoEvent::default());
        }
        let (min, t) = if events.is_empty() {
            (1, timeout)
        } else {
            (0, Some(Duration::ZERO))
        };
        let n = match sys::io_getevents(self.ctx, min, &mut self.ring[..room], t) {
            Ok(n) => n,
            Err(e) if errno(&e) == Some(libc::EINTR) => 0,
            Err(e) => return Err(e),
        };
        for k in 0..n {
            let ev = self.ring[k];
            self.in_flight = self.in_flight.saturating_sub(1);
            let fd = (ev.data & 0xffff_ffff) as u32 as RawFd;
            let seq = (ev.data >> 32) as u32;
            let Some(s) = self.slots.get_mut(fd as usize) else {
                self.stats.discarded += 1;
                continue;
            };
            if !s.registered || s.seq != seq {
                self.stats.discarded += 1; // cancelled, or for a descriptor deregistered since
                continue;
            }
            s.armed = false;
            let f = flags(ev.res, s.interest);
            let token = s.token;
            self.queue(fd);
            if f == 0 {
                self.stats.discarded += 1;
            } else {
                events.push(Event::new(Token(token), f));
            }
        }
        self.stats.events += events.len() as u64;
        Ok(events.len())
    }

    fn edge_triggered(&self) -> bool {
        false
    }

    fn stats(&self) -> PollerStats {
        self.stats
    }
}

impl Drop for AioPoll {
    fn drop(&mut self) {
        // Cancels every request and waits for them, before the iocbs they name are freed.
        let _ = sys::io_destroy(self.ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    fn poller() -> Option<AioPoll> {
        crate::testing::mechanism(Mechanism::AioPoll).then(|| AioPoll::new().unwrap())
    }

    fn pair() -> (UnixStream, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    /// Past the first context's 256 requests: the context grows, every descriptor stays armed.
    #[test]
    fn the_context_grows_and_rearms() {
        let Some(mut p) = poller() else { return };
        let pairs: Vec<_> = (0..600).map(|_| pair()).collect();
        for (i, (_, b)) in pairs.iter().enumerate() {
            p.register(b.as_raw_fd(), Token(i), Interest::READABLE)
                .unwrap();
        }
        let mut ev = Events::with_capacity(1024);
        p.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
        assert!(ev.is_empty());
        assert!(p.capacity() >= 600, "{}", p.capacity());
        for (a, _) in pairs.iter().step_by(7) {
            (&*a).write_all(b"z").unwrap();
        }
        let mut seen = std::collections::HashSet::new();
        for _ in 0..5 {
            p.wait(&mut ev, Some(Duration::from_millis(100))).unwrap();
            seen.extend(ev.iter().map(|e| e.token.0));
            if seen.len() == pairs.len().div_ceil(7) {
                break;
            }
        }
        assert_eq!(seen.len(), pairs.len().div_ceil(7));
        assert!(seen.iter().all(|t| t % 7 == 0));
    }

    /// Narrowing keeps the armed request, widening cancels it, and so does deregistering an
    /// armed descriptor; the cancelled requests' completions are dropped by sequence.
    #[test]
    fn widening_and_deregistering_cancel_narrowing_does_not() {
        let Some(mut p) = poller() else { return };
        let (_a, b) = pair();
        let fd = b.as_raw_fd();
        let cancels = |f: &mut dyn FnMut()| {
            let before = sys::thread_counters().snapshot();
            f();
            let d = sys::thread_counters().snapshot().since(&before);
            d.calls(sys::Syscall::IoCancel)
        };
        p.register(fd, Token(1), Interest::READABLE).unwrap();
        let mut ev = Events::with_capacity(8);
        p.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
        assert!(ev.is_empty(), "nothing to read");
        let n = cancels(&mut || {
            p.reregister(fd, Token(1), Interest::NONE).unwrap();
            p.reregister(fd, Token(1), Interest::READABLE).unwrap();
        });
        assert_eq!(n, 0, "narrowing keeps the armed poll");
        let n = cancels(&mut || p.reregister(fd, Token(2), Interest::BOTH).unwrap());
        assert_eq!(n, 1, "widening replaces it");
        p.wait(&mut ev, Some(Duration::from_millis(100))).unwrap();
        assert_eq!(ev.len(), 1, "{:?}", ev.as_slice());
        assert_eq!(ev.as_slice()[0].token, Token(2));
        assert!(ev.as_slice()[0].writable());
        // Spent, so the change is free; armed again (and quiet) by the next wait.
        let n = cancels(&mut || p.reregister(fd, Token(2), Interest::READABLE).unwrap());
        assert_eq!(n, 0);
        p.wait(&mut ev, Some(Duration::from_millis(20))).unwrap();
        assert!(ev.is_empty(), "{:?}", ev.as_slice());
        let n = cancels(&mut || p.deregister(fd).unwrap());
        assert_eq!(n, 1, "an armed poll is cancelled");
        for _ in 0..3 {
            p.wait(&mut ev, Some(Duration::from_millis(20))).unwrap();
            assert!(ev.is_empty(), "{:?}", ev.as_slice());
        }
        assert!(p.stats().discarded >= 1, "{:?}", p.stats());
    }

    /// Registrations and re-arms go to the kernel together: one io_submit per wait.
    #[test]
    fn arms_are_batched_into_one_submit() {
        let Some(mut p) = poller() else { return };
        let pairs: Vec<_> = (0..50).map(|_| pair()).collect();
        let before = sys::thread_counters().snapshot();
        for (i, (_, b)) in pairs.iter().enumerate() {
            p.register(b.as_raw_fd(), Token(i), Interest::WRITABLE)
                .unwrap();
        }
        let mut ev = Events::with_capacity(64);
        p.wait(&mut ev, Some(Duration::from_millis(100))).unwrap();
        let d = sys::thread_counters().snapshot().since(&before);
        assert_eq!(d.calls(sys::Syscall::IoSubmit), 1, "{:?}", d.rows());
        assert_eq!(ev.len(), 50);
        let s = p.stats();
        assert_eq!((s.batches, s.interest_changes), (1, 50));
    }
}
