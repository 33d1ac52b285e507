//! epoll-ctlv: level-triggered epoll whose interest changes travel in batches.
//!
//! The paper proposed `epoll_ctlv`, one syscall carrying many `epoll_ctl` operations; it never
//! shipped, but io_uring's IORING_OP_EPOLL_CTL is the same thing on a real kernel. ADD and MOD are
//! queued in user space and submitted together in one `io_uring_enter` just before waiting.
//! Where the kernel has IORING_OP_EPOLL_WAIT (6.15+), the wait rides in the same enter: one
//! syscall for all the changes and the wait. Elsewhere the batch is one enter and the wait an
//! `epoll_wait`.
//!
//! Costs and traps:
//! - DEL is done at once with `epoll_ctl`: the descriptor is about to be closed, and a queued DEL
//!   would reach a closed (or reused) number — the paper made the same choice (§3).
//! - A change still queued when its descriptor is deregistered must be dropped, not submitted:
//!   by then the number may belong to another connection.
//! - The epoll_event of each queued op is read by the kernel during submission, so the queue
//!   must not move while an enter is under way.
//! - An IORING_OP_EPOLL_WAIT has no timeout of its own; a wait that times out stays armed in the
//!   kernel and its completion is collected by a later call, into the same buffer.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::epoll::{from_epoll, to_epoll};
use crate::{
    timeout_ms, uring_probe, Event, Events, Interest, Mechanism, Poller, PollerStats, Support,
    Token,
};
use evlab_sys::{self as sys, OwnedFd, Syscall};

const TAG_CTL: u64 = 1;
const TAG_WAIT: u64 = 2;
const RING_ENTRIES: u32 = 1024;

#[derive(Copy, Clone)]
struct Pending {
    op: i32,
    fd: RawFd,
    ev: libc::epoll_event,
}

pub struct EpollCtlv {
    epfd: OwnedFd,
    ring: IoUring,
    pending: Vec<Pending>,
    /// The wait's event buffer; fixed once sized, since the kernel may hold a pointer into it.
    evbuf: Vec<libc::epoll_event>,
    uring_wait: bool,
    wait_inflight: bool,
    stats: PollerStats,
    ctl_errors: u64,
}

impl std::fmt::Debug for EpollCtlv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpollCtlv")
            .field("epfd", &self.epfd)
            .field("pending", &self.pending.len())
            .field("uring_wait", &self.uring_wait)
            .finish()
    }
}

impl EpollCtlv {
    /// Errors the kernel returned for batched operations (they cannot be returned to the caller
    /// of `register`, which has long since returned).
    pub fn ctl_errors(&self) -> u64 {
        self.ctl_errors
    }

    /// Pushes the queued changes (and, when `with_wait`, the wait) into the submission queue,
    /// submitting early if the queue fills. Returns how many ctl ops were pushed.
    fn push_batch(&mut self, with_wait: bool) -> io::Result<usize> {
        let n = self.pending.len();
        let mut i = 0;
        while i < n {
            let p = &self.pending[i];
            let sqe = opcode::EpollCtl::new(
                types::Fd(self.epfd.0),
                types::Fd(p.fd),
                p.op,
                &p.ev as *const libc::epoll_event as *const types::epoll_event,
            )
            .build()
            .user_data(TAG_CTL);
            if !self.push(&sqe)? {
                continue; // submitted to make room; retry this one
            }
            i += 1;
        }
        if with_wait && !self.wait_inflight {
            let sqe = opcode::EpollWait::new(
                types::Fd(self.epfd.0),
                self.evbuf.as_mut_ptr() as *mut types::epoll_event,
                self.evbuf.len() as u32,
            )
            .build()
            .user_data(TAG_WAIT);
            while !self.push(&sqe)? {}
            self.wait_inflight = true;
        }
        Ok(n)
    }

    /// Pushes one entry; when the queue is full, submits what is there and returns false.
    fn push(&mut self, sqe: &squeue::Entry) -> io::Result<bool> {
        // SAFETY: every pointer in the entry (an epoll_event in `pending`, or `evbuf`) stays
        // valid and unmoved until the submission that carries it has returned (`pending` is
        // cleared only after the enter; `evbuf` is never resized once a wait is in flight).
        let pushed = unsafe { self.ring.submission().push(sqe).is_ok() };
        if !pushed {
            sys::count_io(Syscall::IoUringEnter, || self.ring.submit())?;
        }
        Ok(pushed)
    }

    /// Collects completions; returns the number of epoll events delivered into `evbuf`, if the
    /// wait completed.
    fn harvest(&mut self) -> Option<usize> {
        let mut waited = None;
        for cqe in self.ring.completion() {
            match cqe.user_data() {
                TAG_CTL if cqe.result() < 0 => self.ctl_errors += 1,
                TAG_WAIT => {
                    if !cqueue::more(cqe.flags()) {
                        self.wait_inflight = false;
                    }
                    waited = Some(cqe.result().max(0) as usize);
                }
                _ => {}
            }
        }
        waited
    }

    fn deliver(&mut self, n: usize, events: &mut Events) {
        for raw in &self.evbuf[..n.min(self.evbuf.len())] {
            events.push(Event::new(Token(raw.u64 as usize), from_epoll(raw.events)));
        }
    }

    fn queue(&mut self, op: i32, fd: RawFd, token: Token, interest: Interest) {
        self.pending.push(Pending {
            op,
            fd,
            ev: libc::epoll_event {
                events: to_epoll(interest),
                u64: token.0 as u64,
            },
        });
    }

    fn record_batch(&mut self, n: usize) {
        if n > 0 {
            self.stats.batches += 1;
            self.stats.interest_changes += n as u64;
        }
        self.pending.clear();
    }
}

impl Poller for EpollCtlv {
    const MECHANISM: Mechanism = Mechanism::EpollCtlv;

    fn support() -> Support {
        let s = uring_probe::support();
        Support::unless(s.missing(&[("IORING_OP_EPOLL_CTL", s.epoll_ctl)]))
    }

    fn new() -> io::Result<Self> {
        Self::support().require(Self::MECHANISM.name())?;
        let s = uring_probe::support();
        let epfd = OwnedFd(sys::epoll_create1(libc::EPOLL_CLOEXEC)?);
        let ring = uring_probe::new_ring(RING_ENTRIES, RING_ENTRIES * 4, true)?;
        Ok(EpollCtlv {
            epfd,
            ring,
            pending: Vec::new(),
            evbuf: Vec::new(),
            uring_wait: s.epoll_wait,
            wait_inflight: false,
            stats: PollerStats::default(),
            ctl_errors: 0,
        })
    }

    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        self.queue(libc::EPOLL_CTL_ADD, fd, token, interest);
        Ok(())
    }

    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        self.queue(libc::EPOLL_CTL_MOD, fd, token, interest);
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        let before = self.pending.len();
        let mut added_unsubmitted = false;
        self.pending.retain(|p| {
            if p.fd == fd {
                added_unsubmitted |= p.op == libc::EPOLL_CTL_ADD;
                false
            } else {
                true
            }
        });
        self.stats.interest_changes_free += (before - self.pending.len()) as u64;
        if added_unsubmitted {
            // The kernel never heard of it.
            return Ok(());
        }
        self.stats.interest_changes += 1;
        sys::epoll_ctl(self.epfd.0, libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        events.clear();
        self.stats.waits += 1;
        if self.evbuf.is_empty() {
            self.evbuf = vec![libc::epoll_event { events: 0, u64: 0 }; events.capacity()];
        }
        if !self.uring_wait {
            // One enter for the batch, then an ordinary epoll_wait.
            let n = self.push_batch(false)?;
            if n > 0 {
                sys::count_io(Syscall::IoUringEnter, || self.ring.submit_and_wait(n))?;
                self.harvest();
            }
            self.record_batch(n);
            let got = match sys::epoll_wait(self.epfd.0, &mut self.evbuf, timeout_ms(timeout)) {
                Ok(k) => k,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => 0,
                Err(e) => return Err(e),
            };
            self.deliver(got, events);
            self.stats.events += events.len() as u64;
            return Ok(events.len());
        }
        let n = self.push_batch(true)?;
        let want = n + 1;
        let r = match timeout {
            None => sys::count_io(Syscall::IoUringEnter, || self.ring.submit_and_wait(want)),
            Some(d) => {
                let ts = types::Timespec::from(d);
                let args = types::SubmitArgs::new().timespec(&ts);
                sys::count_io(Syscall::IoUringEnter, || {
                    self.ring.submitter().submit_with_args(want, &args)
                })
            }
        };
        self.record_batch(n);
        match r {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => {}
            Err(e) => return Err(e),
        }
        if let Some(k) = self.harvest() {
            self.deliver(k, events);
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
