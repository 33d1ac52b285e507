//! uring-poll: the web-proxy paper's user-level connection tracking ("uselect") on io_uring.
//!
//! Each descriptor gets one multishot IORING_OP_POLL_ADD when registered. From then on the kernel
//! writes a completion into the ring — memory shared with us — every time the socket wakes with a
//! readiness of interest, and `wait` harvests those completions from memory with no syscall. It
//! enters the kernel only when the ring is empty (to sleep), when it has registrations or removals
//! to submit, when the kernel flags pending work or an overflow, or after `max_pass` consecutive
//! answers from memory (uselect's MaxPass), so that deferred work cannot starve.
//!
//! Costs and traps:
//! - Multishot poll reports wakeups, not levels: like epoll-et, the caller must drain to EAGAIN
//!   and keep its own readiness state (`edge_triggered` is true). Interest changes cost nothing.
//! - Completions are posted by task work that runs when this thread next enters the kernel; a
//!   busy server enters it for every read and write, so readiness is usually already in memory
//!   when it asks. An idle one sleeps in `io_uring_enter`.
//! - A multishot request can end (no IORING_CQE_F_MORE), for instance when the completion ring
//!   overflowed; it is then re-armed. Overflowed completions are kept by the kernel (NODROP) and
//!   flushed by the next enter.
//! - A removed request holds the file until the removal is submitted (at the next wait), so a
//!   closed socket's FIN can leave one loop iteration late. Completions for a descriptor number
//!   that has since been reused are recognised by a generation in `user_data` and dropped.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::{uring_probe, Event, Events, Interest, Mechanism, Poller, PollerStats, Support, Token};
use evlab_sys::{self as sys, Syscall};

const TAG_REMOVE: u64 = 1 << 63;
const RING_ENTRIES: u32 = 4096;
const CQ_ENTRIES: u32 = 32768;

#[derive(Copy, Clone, Debug, Default)]
struct Slot {
    token: usize,
    gen: u32,
    registered: bool,
}

pub struct UringPoll {
    ring: IoUring,
    slots: Vec<Slot>,
    next_gen: u32,
    /// Entries pushed to the submission queue and not yet submitted.
    queued: usize,
    passes: u32,
    max_pass: u32,
    rearmed: u64,
    stats: PollerStats,
}

impl std::fmt::Debug for UringPoll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringPoll")
            .field("queued", &self.queued)
            .field("passes", &self.passes)
            .finish()
    }
}

const MASK: u32 = (libc::POLLIN | libc::POLLOUT | libc::POLLRDHUP) as u32;

#[inline]
fn user_data(fd: RawFd, gen: u32) -> u64 {
    ((gen as u64 & 0x7fff_ffff) << 32) | fd as u32 as u64
}

impl UringPoll {
    /// Multishot polls re-armed after the kernel ended them.
    pub fn rearmed(&self) -> u64 {
        self.rearmed
    }

    fn push(&mut self, sqe: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: poll and poll-remove entries carry no pointers.
            if unsafe { self.ring.submission().push(sqe).is_ok() } {
                self.queued += 1;
                return Ok(());
            }
            sys::count_io(Syscall::IoUringEnter, || self.ring.submit())?;
            self.queued = 0;
        }
    }

    fn arm(&mut self, fd: RawFd, gen: u32) -> io::Result<()> {
        let sqe = opcode::PollAdd::new(types::Fd(fd), MASK)
            .multi(true)
            .build()
            .user_data(user_data(fd, gen));
        self.push(&sqe)
    }

    /// Moves completions from the shared ring into `events`, re-arming ended multishots.
    fn harvest(&mut self, events: &mut Events) -> io::Result<()> {
        let mut rearm: Vec<(RawFd, u32)> = Vec::new();
        {
            let mut cq = self.ring.completion();
            while !events.is_full() {
                let Some(cqe) = cq.next() else { break };
                let ud = cqe.user_data();
                if ud & TAG_REMOVE != 0 {
                    continue;
                }
                let fd = (ud & 0xffff_ffff) as u32 as RawFd;
                let gen = ((ud >> 32) & 0x7fff_ffff) as u32;
                let Some(slot) = self.slots.get(fd as usize).copied() else {
                    continue;
                };
                if !slot.registered || slot.gen & 0x7fff_ffff != gen {
                    continue; // for a descriptor since deregistered, or reused
                }
                let res = cqe.result();
                let flags = if res < 0 {
                    if res == -libc::ECANCELED {
                        0
                    } else {
                        Event::ERROR
                    }
                } else {
                    let m = res as u32;
                    let mut f = 0;
                    if m & (libc::POLLIN | libc::POLLPRI) as u32 != 0 {
                        f |= Event::READABLE;
                    }
                    if m & libc::POLLRDHUP as u32 != 0 {
                        f |= Event::RDHUP;
                    }
                    if m & libc::POLLOUT as u32 != 0 {
                        f |= Event::WRITABLE;
                    }
                    if m & (libc::POLLERR | libc::POLLNVAL) as u32 != 0 {
                        f |= Event::ERROR;
                    }
                    if m & libc::POLLHUP as u32 != 0 {
                        f |= Event::HUP;
                    }
                    f
                };
                if !cqueue::more(cqe.flags()) && res >= 0 || res == -libc::ECANCELED {
                    rearm.push((fd, gen));
                }
                if flags != 0 {
                    events.push(Event::new(Token(slot.token), flags));
                }
            }
        }
        for (fd, gen) in rearm {
            self.rearmed += 1;
            self.arm(fd, gen)?;
        }
        Ok(())
    }

    fn enter(&mut self, want: usize, timeout: Option<Duration>) -> io::Result<()> {
        let r = enter(&self.ring, want, timeout);
        self.queued = 0;
        self.passes = 0;
        r
    }
}

/// IORING_ENTER_GETEVENTS (the crate keeps its flags private).
const ENTER_GETEVENTS: u32 = 1;

/// One counted `io_uring_enter`: submits what is queued and waits for `want` completions, at
/// most `timeout`. A timeout, a signal, or a completion queue the kernel could not fill (EBUSY:
/// reap, then enter again) are not errors. Shared by every io_uring engine.
///
/// A zero timeout does not wait at all: the enter asks for no completion (GETEVENTS with
/// `min_complete` 0 still runs the ring's deferred work, so completions that are due are
/// posted). Asking for one with a zero timeout arms a timer in the kernel that fires at
/// once; on a virtual machine each such timer programmed and taken is an exit to the
/// hypervisor, and a new connection cost one (results/reference/amd-epyc-2vcpu-linux-6.18/
/// NOTES.md, "the timer a zero wait armed").
pub fn enter(ring: &IoUring, want: usize, timeout: Option<Duration>) -> io::Result<()> {
    let r = match timeout {
        Some(d) if d.is_zero() => {
            // SAFETY: only the queue's length is read; no other view of the submission
            // queue is alive (the caller's pushes are done, and the ring is not shared).
            let queued = unsafe { ring.submission_shared().len() } as u32;
            // SAFETY: the entries submitted are the caller's, their memory valid until they
            // complete (what `submit` requires as well); no argument goes with the enter.
            sys::count_io(Syscall::IoUringEnter, || unsafe {
                ring.submitter()
                    .enter::<libc::sigset_t>(queued, 0, ENTER_GETEVENTS, None)
            })
        }
        Some(d) if want > 0 => {
            let ts = types::Timespec::from(d);
            let args = types::SubmitArgs::new().timespec(&ts);
            sys::count_io(Syscall::IoUringEnter, || {
                ring.submitter().submit_with_args(want, &args)
            })
        }
        _ => sys::count_io(Syscall::IoUringEnter, || ring.submit_and_wait(want)),
    };
    match r {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

static MAX_PASS: AtomicU32 = AtomicU32::new(8);

/// uselect's MaxPass: how many consecutive waits uring-poll may answer from memory before it
/// enters the kernel anyway (to run deferred work and flush overflowed completions).
pub fn set_max_pass(n: u32) {
    MAX_PASS.store(n.max(1), Relaxed);
}

pub fn max_pass() -> u32 {
    MAX_PASS.load(Relaxed)
}

impl Poller for UringPoll {
    const MECHANISM: Mechanism = Mechanism::UringPoll;

    fn support() -> Support {
        let s = uring_probe::support();
        Support::unless(s.missing(&[("IORING_OP_POLL_ADD", s.poll_add)]))
    }

    fn new() -> io::Result<Self> {
        Self::support().require(Self::MECHANISM.name())?;
        let ring = uring_probe::new_ring(RING_ENTRIES, CQ_ENTRIES, true)?;
        Ok(UringPoll {
            ring,
            slots: Vec::new(),
            next_gen: 1,
            queued: 0,
            passes: 0,
            max_pass: max_pass(),
            rearmed: 0,
            stats: PollerStats::default(),
        })
    }

    fn register(&mut self, fd: RawFd, token: Token, _interest: Interest) -> io::Result<()> {
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        let i = fd as usize;
        if i >= self.slots.len() {
            self.slots
                .resize((i + 1).next_power_of_two(), Slot::default());
        }
        self.next_gen = self.next_gen.wrapping_add(1) & 0x7fff_ffff;
        let gen = self.next_gen;
        self.slots[i] = Slot {
            token: token.0,
            gen,
            registered: true,
        };
        self.stats.interest_changes += 1;
        self.arm(fd, gen)
    }

    fn reregister(&mut self, fd: RawFd, token: Token, _interest: Interest) -> io::Result<()> {
        let slot = self
            .slots
            .get_mut(fd as usize)
            .filter(|s| s.registered)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        slot.token = token.0;
        self.stats.interest_changes_free += 1;
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        let slot = self
            .slots
            .get_mut(fd as usize)
            .filter(|s| s.registered)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        slot.registered = false;
        let ud = user_data(fd, slot.gen);
        self.stats.interest_changes += 1;
        let sqe = opcode::PollRemove::new(ud)
            .build()
            .user_data(TAG_REMOVE | ud);
        self.push(&sqe)
    }

    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        events.clear();
        self.stats.waits += 1;
        // A wait is "from memory" exactly when it made no syscall.
        let mut entered = false;
        let (overflow, taskrun) = {
            let sq = self.ring.submission();
            (sq.cq_overflow(), sq.taskrun())
        };
        if overflow || taskrun || self.passes >= self.max_pass {
            // Let the kernel run what it deferred and flush what overflowed, without sleeping.
            self.enter(0, None)?;
            entered = true;
        }
        self.harvest(events)?;
        if events.is_empty() {
            // Nothing in memory: submit what is queued and sleep in the kernel.
            match timeout {
                Some(d) if d.is_zero() => self.enter(0, None)?,
                t => self.enter(1, t)?,
            }
            entered = true;
            self.harvest(events)?;
        } else if self.queued > 0 {
            // Registrations and removals must reach the kernel; no need to wait.
            self.enter(0, None)?;
            entered = true;
        }
        if entered {
            self.stats.waits_from_kernel += 1;
        } else {
            self.passes += 1;
            self.stats.waits_from_memory += 1;
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
