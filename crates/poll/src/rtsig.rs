//! rtsig: POSIX real-time signals, the readiness mechanism of Linux servers from 2000 to 2004
//! (phhttpd, the μserver's and thttpd's "sigio" variants), before epoll.
//!
//! Each registered descriptor gets `F_SETOWN_EX` (`F_OWNER_TID`: the thread that waits),
//! `F_SETSIG` (a real-time signal) and `O_ASYNC | O_NONBLOCK`. From then on every wakeup of its
//! file — data arrived, a connection to accept, send space freed after a write hit EAGAIN, a
//! hang-up — queues one real-time signal carrying the descriptor (`si_fd`) and the poll bits
//! (`si_band`). `wait` takes them with `sigtimedwait`: blocking for the first, then with a zero
//! timeout until the queue is empty or `Events` is full.
//!
//! Costs and traps, frankly:
//! - One syscall per event, plus one that finds the queue empty: there is no batch dequeue
//!   (Provos and Lever's `sigtimedwait4` was never merged). Registering costs four `fcntl` calls
//!   and a `poll`; deregistering two `fcntl` calls. Interest changes are free.
//! - Signals report wakeups, not levels: the caller keeps its own readiness state and drains to
//!   EAGAIN (`edge_triggered` is true). A descriptor that is already readable when it is
//!   registered raises no signal, so `register` polls it once and reports what it finds
//!   (readable and writable, whatever the interest: the initial edge, as epoll-et's ADD gives).
//!   A file without `fasync` support (a regular file, an eventfd) takes O_ASYNC silently and
//!   never signals: only sockets, pipes, FIFOs and terminals work here.
//! - The queue is bounded by RLIMIT_SIGPENDING, counted per user across all of its processes.
//!   When it is full the kernel drops the real-time signal and sends SIGIO instead (one, not
//!   queued). Then every queued real-time signal is flushed and one `poll(2)` over every
//!   registered descriptor (by its interest) says what is ready, as phhttpd did; the sweep's
//!   findings are reported over the next waits. `PollerStats::overflows` counts these.
//! - Signals are queued by number, not by file: signals queued for a descriptor that was
//!   deregistered (and perhaps closed and its number reused) are still in the queue. A signal
//!   for a number not registered is dropped (counted as `discarded`). A number deregistered
//!   since the queue was last seen empty may be a new file: its signals are checked with a
//!   zero-timeout `poll` of the descriptor before they are reported, so a stale hang-up never
//!   reaches a new connection.
//! - The signal: one per poller per thread, from SIGRTMIN+4 (glibc takes the two below
//!   SIGRTMIN for itself; Rust's runtime uses none; +0..+3 are left to other libraries), up to
//!   eight pollers per thread. It and SIGIO are blocked in the creating thread with
//!   `pthread_sigmask` (masks are per thread) and stay blocked after the poller is dropped, since
//!   a signal still in flight would otherwise kill the process. With F_OWNER_TID the kernel
//!   queues them to that thread alone, so other threads (and other pollers' threads) never see
//!   them. A poller therefore belongs to its thread (`RtSig` is not `Send`).
//! - The owner of a file's signals is one per *file*, not per registration: a listener shared
//!   by several workers signals only the worker that registered it last (no thundering herd).
//!   A process-wide table of who registered which descriptor hands the file over to another
//!   registered worker when its owner deregisters, and wakes that worker with SIGIO (a sweep),
//!   so a paused worker never silences the others.

use std::cell::Cell;
use std::collections::VecDeque;
use std::io;
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::{Event, Events, Interest, Mechanism, Poller, PollerStats, Support, Token};
use evlab_sys::{self as sys, FOwnerEx, SigPoll, SigSet};

/// The first signal used, as an offset from SIGRTMIN.
const SIG_OFFSET: i32 = 4;
/// Pollers one thread may hold at once (each needs a signal of its own).
const SIGS_PER_THREAD: u32 = 8;

thread_local! {
    static TID: Cell<libc::pid_t> = const { Cell::new(0) };
    /// Bit `i`: signal SIGRTMIN + SIG_OFFSET + i is some poller's of this thread.
    static SIGS_IN_USE: Cell<u32> = const { Cell::new(0) };
    /// Bumped whenever a poller of this thread takes a SIGIO: SIGIO is one bit per thread, so
    /// every poller of the thread must sweep, not only the one that took it.
    static SIGIO_SEEN: Cell<u64> = const { Cell::new(0) };
}

fn this_tid() -> libc::pid_t {
    TID.with(|t| {
        if t.get() == 0 {
            t.set(sys::gettid());
        }
        t.get()
    })
}

fn errno(e: &io::Error) -> Option<i32> {
    e.raw_os_error()
}

// ---- who owns a file's signals, process-wide ----

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Owner {
    tid: libc::pid_t,
    sig: i32,
    id: u64,
}

/// Who has one descriptor registered. Almost always a single poller, kept inline so that a
/// new descriptor number costs no allocation; `others` is used only by a file several workers
/// share (a listener).
#[derive(Debug, Default)]
struct FileOwners {
    first: Option<Owner>,
    others: Vec<Owner>,
    /// The one the kernel signals.
    current: Option<Owner>,
}

impl FileOwners {
    fn add(&mut self, o: Owner) {
        if self.first.is_none() {
            self.first = Some(o);
        } else {
            self.others.push(o);
        }
    }

    fn remove(&mut self, o: Owner) {
        if self.first == Some(o) {
            self.first = self.others.pop();
        } else {
            self.others.retain(|x| *x != o);
        }
    }

    /// The most recent registrant still there.
    fn last(&self) -> Option<Owner> {
        self.others.last().copied().or(self.first)
    }
}

/// Striped by descriptor, so that two workers registering their own connections rarely meet.
const STRIPES: usize = 64;
static OWNERS: [Mutex<Vec<FileOwners>>; STRIPES] = [const { Mutex::new(Vec::new()) }; STRIPES];
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The stripe holding `fd`, and `fd`'s index in it.
fn stripe(fd: RawFd) -> (MutexGuard<'static, Vec<FileOwners>>, usize) {
    let i = fd as usize;
    let guard = OWNERS[i % STRIPES]
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    (guard, i / STRIPES)
}

/// Sizes every stripe for the first 1,024 descriptors, once, so that a descriptor number the
/// process has not used before costs no allocation on a hot path.
fn presize_stripes() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        for s in &OWNERS {
            let mut tab = s.lock().unwrap_or_else(|e| e.into_inner());
            if tab.len() < 1024 / STRIPES {
                tab.resize_with(1024 / STRIPES, FileOwners::default);
            }
        }
    });
}

/// Points `fd`'s signals at `owner`, then turns them on.
fn own(fd: RawFd, owner: Owner) -> io::Result<()> {
    sys::fcntl_set_owner(
        fd,
        FOwnerEx {
            kind: sys::F_OWNER_TID,
            pid: owner.tid,
        },
    )?;
    sys::fcntl_int(fd, sys::F_SETSIG, owner.sig)?;
    let fl = sys::fcntl_int(fd, libc::F_GETFL, 0)?;
    let want = fl | libc::O_ASYNC | libc::O_NONBLOCK;
    if want != fl {
        sys::fcntl_int(fd, libc::F_SETFL, want)?;
    }
    Ok(())
}

/// Turns `fd`'s signals off.
fn disown(fd: RawFd) -> io::Result<()> {
    let fl = sys::fcntl_int(fd, libc::F_GETFL, 0)?;
    if fl & libc::O_ASYNC != 0 {
        sys::fcntl_int(fd, libc::F_SETFL, fl & !libc::O_ASYNC)?;
    }
    Ok(())
}

fn take_ownership(fd: RawFd, me: Owner) -> io::Result<()> {
    let (mut tab, i) = stripe(fd);
    if i >= tab.len() {
        tab.resize_with((i + 1).next_power_of_two(), FileOwners::default);
    }
    let entry = &mut tab[i];
    if let Err(e) = own(fd, me) {
        if entry.current == Some(me) {
            entry.current = None;
        }
        return Err(e);
    }
    entry.add(me);
    entry.current = Some(me);
    Ok(())
}

fn release_ownership(fd: RawFd, me: Owner) -> io::Result<()> {
    let (mut tab, i) = stripe(fd);
    let Some(entry) = tab.get_mut(i) else {
        return disown(fd);
    };
    entry.remove(me);
    if entry.current.is_some() && entry.current != Some(me) {
        return Ok(()); // another poller owns the file; it keeps it
    }
    match entry.last() {
        None => {
            entry.current = None;
            disown(fd)
        }
        Some(next) => {
            // Hand the file over, then wake the new owner with SIGIO: whatever became ready
            // while we owned it was signalled to us, so it sweeps.
            entry.current = Some(next);
            own(fd, next)?;
            sys::tgkill(next.tid, libc::SIGIO)
        }
    }
}

// ---- the mechanism ----

#[derive(Copy, Clone, Debug)]
struct Slot {
    token: usize,
    interest: Interest,
    registered: bool,
    /// Index in `RtSig::fds` while registered.
    dense: u32,
    /// Readiness found by a `poll` (at registration or in a sweep) and not yet reported.
    pending: u8,
    /// `RtSig::epoch` when this number was last deregistered: until the queue is next seen
    /// empty, its signals may be the old file's.
    deregistered_in: u64,
}

impl Default for Slot {
    fn default() -> Slot {
        Slot {
            token: 0,
            interest: Interest::NONE,
            registered: false,
            dense: 0,
            pending: 0,
            deregistered_in: 0,
        }
    }
}

pub struct RtSig {
    me: Owner,
    /// Our signal and SIGIO.
    set: SigSet,
    /// Our signal alone (to flush the queue).
    own_sig: SigSet,
    slots: Vec<Slot>,
    /// The registered descriptors, dense (for sweeps).
    fds: Vec<RawFd>,
    /// Descriptors with `Slot::pending` readiness, in the order found.
    pending: VecDeque<RawFd>,
    sweep: Vec<libc::pollfd>,
    /// Bumped each time the signal queue is seen empty.
    epoch: u64,
    /// The thread's SIGIO count when we last swept.
    sigio_seen: u64,
    stats: PollerStats,
    /// Signals go to the creating thread and are blocked there only.
    _thread: PhantomData<*const ()>,
}

impl std::fmt::Debug for RtSig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RtSig")
            .field("sig", &self.me.sig)
            .field("tid", &self.me.tid)
            .field("registered", &self.fds.len())
            .field("pending", &self.pending.len())
            .finish()
    }
}

const ANY: i16 = libc::POLLIN | libc::POLLOUT | libc::POLLRDHUP;

fn from_poll(re: i16) -> u8 {
    let mut f = 0;
    if re & (libc::POLLIN | libc::POLLPRI) != 0 {
        f |= Event::READABLE;
    }
    if re & libc::POLLRDHUP != 0 {
        f |= Event::RDHUP;
    }
    if re & libc::POLLOUT != 0 {
        f |= Event::WRITABLE;
    }
    if re & (libc::POLLERR | libc::POLLNVAL) != 0 {
        f |= Event::ERROR;
    }
    if re & libc::POLLHUP != 0 {
        f |= Event::HUP;
    }
    f
}

/// `si_band` holds poll bits (POLL_HUP's band is POLLHUP | POLLERR).
fn from_band(band: i64) -> u8 {
    let rd = (libc::POLLIN | libc::POLLPRI | libc::POLLRDNORM | libc::POLLRDBAND) as i64;
    let wr = (libc::POLLOUT | libc::POLLWRNORM | libc::POLLWRBAND) as i64;
    let mut f = 0;
    if band & rd != 0 {
        f |= Event::READABLE;
    }
    if band & wr != 0 {
        f |= Event::WRITABLE;
    }
    if band & libc::POLLRDHUP as i64 != 0 {
        f |= Event::RDHUP;
    }
    if band & libc::POLLERR as i64 != 0 {
        f |= Event::ERROR;
    }
    if band & libc::POLLHUP as i64 != 0 {
        f |= Event::HUP;
    }
    f
}

/// A zero-timeout poll of one descriptor.
fn poll_one(fd: RawFd, events: i16) -> io::Result<u8> {
    let mut p = [libc::pollfd {
        fd,
        events,
        revents: 0,
    }];
    let n = sys::poll(&mut p, 0)?;
    Ok(if n > 0 { from_poll(p[0].revents) } else { 0 })
}

impl RtSig {
    /// The real-time signal this poller's descriptors raise.
    pub fn signal(&self) -> i32 {
        self.me.sig
    }

    fn slot(&self, fd: RawFd) -> Option<&Slot> {
        self.slots.get(fd as usize).filter(|s| s.registered)
    }

    fn add_pending(&mut self, fd: RawFd, flags: u8) {
        if flags == 0 {
            return;
        }
        let s = &mut self.slots[fd as usize];
        if s.pending == 0 {
            self.pending.push_back(fd);
        }
        s.pending |= flags;
    }

    fn take_pending(&mut self, events: &mut Events) {
        while !events.is_full() {
            let Some(fd) = self.pending.pop_front() else {
                break;
            };
            let s = &mut self.slots[fd as usize];
            if s.registered && s.pending != 0 {
                events.push(Event::new(Token(s.token), s.pending));
            }
            s.pending = 0;
        }
    }

    /// One signal taken from the queue.
    fn on_signal(&mut self, si: SigPoll, events: &mut Events) {
        if si.signo != self.me.sig || si.fd < 0 {
            // sent by kill or sigqueue, not by a file
            self.stats.discarded += 1;
            return;
        }
        let Some(&slot) = self.slot(si.fd) else {
            self.stats.discarded += 1; // for a descriptor deregistered since
            return;
        };
        let mut flags = from_band(si.band);
        if slot.deregistered_in == self.epoch {
            // The number was deregistered since the queue was last empty: this signal may be
            // the old file's. Keep what the new file confirms (all of it if the poll fails:
            // a spurious event costs a read, a missing one a connection).
            if let Ok(now) = poll_one(si.fd, ANY) {
                flags = (flags & now) | (now & (Event::ERROR | Event::HUP | Event::RDHUP));
            }
        }
        if flags == 0 {
            self.stats.discarded += 1;
        } else {
            events.push(Event::new(Token(slot.token), flags));
        }
    }

    /// Empties our signal queue, dropping what it held.
    fn flush(&mut self) -> io::Result<()> {
        loop {
            match sys::sigtimedwait(&self.own_sig, Some(Duration::ZERO)) {
                Ok(_) => self.stats.discarded += 1,
                Err(e) if errno(&e) == Some(libc::EAGAIN) => break,
                Err(e) if errno(&e) == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        self.epoch += 1;
        Ok(())
    }

    /// After SIGIO: the queue lost signals, so forget it and ask every descriptor.
    fn sweep(&mut self) -> io::Result<()> {
        self.stats.overflows += 1;
        self.flush()?;
        self.sweep.clear();
        for &fd in &self.fds {
            let s = &self.slots[fd as usize];
            let mut ev = 0;
            if s.interest.readable() {
                ev |= libc::POLLIN | libc::POLLRDHUP;
            }
            if s.interest.writable() {
                ev |= libc::POLLOUT;
            }
            self.sweep.push(libc::pollfd {
                fd,
                events: ev,
                revents: 0,
            });
        }
        if self.sweep.is_empty() {
            return Ok(());
        }
        let mut n = loop {
            match sys::poll(&mut self.sweep, 0) {
                Err(e) if errno(&e) == Some(libc::EINTR) => {}
                r => break r?,
            }
        };
        for i in 0..self.sweep.len() {
            if n == 0 {
                break;
            }
            let p = self.sweep[i];
            if p.revents != 0 {
                n -= 1;
                self.add_pending(p.fd, from_poll(p.revents));
            }
        }
        Ok(())
    }

    fn saw_sigio(&mut self) {
        let n = SIGIO_SEEN.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        self.sigio_seen = n;
    }

    /// Forgets `fd` here; the caller has already released the file.
    fn forget(&mut self, fd: RawFd) {
        let s = &mut self.slots[fd as usize];
        s.registered = false;
        s.pending = 0;
        s.deregistered_in = self.epoch;
        let d = s.dense as usize;
        self.fds.swap_remove(d);
        if d < self.fds.len() {
            let moved = self.fds[d];
            self.slots[moved as usize].dense = d as u32;
        }
    }
}

/// Runs the whole path once on a pipe, in a thread of its own (so the caller's signal mask is
/// left alone): some sandboxes refuse F_SETSIG or never deliver.
fn probe() -> Result<(), String> {
    let (min, max) = sys::sigrt_range();
    let sig = min + SIG_OFFSET;
    if sig + SIGS_PER_THREAD as i32 - 1 > max {
        return Err(format!(
            "needs real-time signals SIGRTMIN+{SIG_OFFSET}..+{}, this libc has {min}..{max}",
            SIG_OFFSET + SIGS_PER_THREAD as i32 - 1
        ));
    }
    let set = SigSet::of(&[sig, libc::SIGIO]).map_err(|e| format!("sigset: {e}"))?;
    sys::block_signals_in_this_thread(&set).map_err(|e| format!("pthread_sigmask: {e}"))?;
    let (r, w) = sys::pipe().map_err(|e| format!("pipe: {e}"))?;
    let _close = (sys::OwnedFd(r), sys::OwnedFd(w));
    let me = Owner {
        tid: sys::gettid(),
        sig,
        id: 0,
    };
    own(r, me).map_err(|e| format!("fcntl(F_SETOWN_EX, F_SETSIG, O_ASYNC): {e}"))?;
    sys::write(w, b"x").map_err(|e| format!("write: {e}"))?;
    let got = sys::sigtimedwait(&set, Some(Duration::from_secs(2)))
        .map_err(|e| format!("sigtimedwait: {e}"))?;
    if got.signo != sig || got.fd != r || from_band(got.band) & Event::READABLE == 0 {
        return Err(format!(
            "a readable pipe raised {got:?}, not signal {sig} for descriptor {r}"
        ));
    }
    Ok(())
}

impl Poller for RtSig {
    const MECHANISM: Mechanism = Mechanism::RtSig;

    fn support() -> Support {
        static SUPPORT: OnceLock<Support> = OnceLock::new();
        SUPPORT
            .get_or_init(|| {
                let r = std::thread::Builder::new()
                    .name("evlab-rtsig-probe".into())
                    .spawn(probe)
                    .map_err(|e| format!("probe thread: {e}"))
                    .and_then(|t| t.join().map_err(|_| "the probe panicked".to_string()))
                    .and_then(|r| r);
                Support::unless(r.err())
            })
            .clone()
    }

    fn new() -> io::Result<Self> {
        Self::support().require(Self::MECHANISM.name())?;
        let (min, _) = sys::sigrt_range();
        let used = SIGS_IN_USE.with(|c| c.get());
        let Some(i) = (0..SIGS_PER_THREAD).find(|i| used & (1 << i) == 0) else {
            return Err(io::Error::other(format!(
                "rtsig: at most {SIGS_PER_THREAD} pollers per thread (one signal each)"
            )));
        };
        let sig = min + SIG_OFFSET + i as i32;
        presize_stripes();
        let set = SigSet::of(&[sig, libc::SIGIO])?;
        let own_sig = SigSet::of(&[sig])?;
        sys::block_signals_in_this_thread(&set)?;
        SIGS_IN_USE.with(|c| c.set(used | 1 << i));
        let mut p = RtSig {
            me: Owner {
                tid: this_tid(),
                sig,
                id: NEXT_ID.fetch_add(1, Relaxed),
            },
            set,
            own_sig,
            slots: Vec::new(),
            fds: Vec::new(),
            pending: VecDeque::new(),
            sweep: Vec::new(),
            epoch: 1,
            sigio_seen: SIGIO_SEEN.with(|c| c.get()),
            stats: PollerStats::default(),
            _thread: PhantomData,
        };
        // Whatever an earlier poller of this thread left queued under this number is not ours.
        p.flush()?;
        p.stats.discarded = 0;
        Ok(p)
    }

    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        if self.slot(fd).is_some() {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        take_ownership(fd, self.me)?;
        let i = fd as usize;
        if i >= self.slots.len() {
            self.slots
                .resize((i + 1).next_power_of_two(), Slot::default());
            // Each descriptor is in these at most once: sized with the table, they never grow
            // while serving.
            let n = self.slots.len();
            self.fds.reserve(n.saturating_sub(self.fds.len()));
            self.pending.reserve(n.saturating_sub(self.pending.len()));
            self.sweep.reserve(n.saturating_sub(self.sweep.len()));
        }
        let s = &mut self.slots[i];
        s.token = token.0;
        s.interest = interest;
        s.registered = true;
        s.pending = 0;
        s.dense = self.fds.len() as u32;
        self.fds.push(fd);
        self.stats.interest_changes += 1;
        // Readiness from before O_ASYNC raised no signal: report it now (signals raised since
        // may report it again; events are hints).
        let now = poll_one(fd, ANY).unwrap_or(Event::READABLE | Event::WRITABLE);
        self.add_pending(fd, now);
        Ok(())
    }

    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        let s = self
            .slots
            .get_mut(fd as usize)
            .filter(|s| s.registered)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        s.token = token.0;
        s.interest = interest;
        self.stats.interest_changes_free += 1;
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        if self.slot(fd).is_none() {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        let r = release_ownership(fd, self.me);
        self.forget(fd);
        self.stats.interest_changes += 1;
        r
    }

    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        events.clear();
        self.stats.waits += 1;
        if SIGIO_SEEN.with(|c| c.get()) != self.sigio_seen {
            // Another poller of this thread took a SIGIO that may have been meant for us.
            self.sigio_seen = SIGIO_SEEN.with(|c| c.get());
            self.sweep()?;
        }
        self.take_pending(events);
        if events.is_full() {
            self.stats.waits_from_memory += 1;
            self.stats.events += events.len() as u64;
            return Ok(events.len());
        }
        self.stats.waits_from_kernel += 1;
        let mut t = if events.is_empty() {
            timeout
        } else {
            Some(Duration::ZERO)
        };
        let mut overflow = false;
        while !events.is_full() {
            match sys::sigtimedwait(&self.set, t) {
                Ok(si) if si.signo == libc::SIGIO => {
                    // SIGIO sorts before every real-time signal, so it comes first.
                    self.saw_sigio();
                    overflow = true;
                    break;
                }
                Ok(si) => {
                    t = Some(Duration::ZERO);
                    self.on_signal(si, events);
                }
                Err(e) if errno(&e) == Some(libc::EAGAIN) => {
                    self.epoch += 1;
                    break;
                }
                Err(e) if errno(&e) == Some(libc::EINTR) => break,
                Err(e) => return Err(e),
            }
        }
        if overflow {
            self.sweep()?;
            self.take_pending(events);
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

impl Drop for RtSig {
    fn drop(&mut self) {
        // Files still registered must stop signalling this thread: once it exits, its id may
        // go to a thread that does not block the signal, which the signal would kill.
        for i in (0..self.fds.len()).rev() {
            let fd = self.fds[i];
            let _ = release_ownership(fd, self.me);
        }
        let _ = self.flush();
        let bit = (self.me.sig - sys::sigrt_range().0 - SIG_OFFSET) as u32;
        let _ = SIGS_IN_USE.try_with(|c| c.set(c.get() & !(1 << bit)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    const SHORT: Option<Duration> = Some(Duration::from_millis(200));

    fn poller() -> Option<RtSig> {
        crate::testing::mechanism(Mechanism::RtSig).then(|| RtSig::new().unwrap())
    }

    fn pair() -> (UnixStream, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    /// Waits until `token` is reported with `flag` (or gives up after a few waits).
    fn seen(p: &mut RtSig, ev: &mut Events, token: usize, flag: u8) -> bool {
        for _ in 0..5 {
            p.wait(ev, SHORT).unwrap();
            if ev
                .iter()
                .any(|e| e.token.0 == token && e.flags() & flag != 0)
            {
                return true;
            }
        }
        false
    }

    #[test]
    fn data_pending_at_registration_is_reported() {
        let Some(mut p) = poller() else { return };
        let (mut a, b) = pair();
        a.write_all(b"early").unwrap();
        p.register(b.as_raw_fd(), Token(1), Interest::READABLE)
            .unwrap();
        let mut ev = Events::with_capacity(8);
        assert!(seen(&mut p, &mut ev, 1, Event::READABLE));
    }

    #[test]
    fn writable_again_after_eagain() {
        let Some(mut p) = poller() else { return };
        let (mut a, mut b) = pair();
        p.register(a.as_raw_fd(), Token(2), Interest::WRITABLE)
            .unwrap();
        let mut ev = Events::with_capacity(8);
        assert!(seen(&mut p, &mut ev, 2, Event::WRITABLE), "initial edge");
        let chunk = [0u8; 4096];
        while a.write(&chunk).is_ok() {}
        p.wait(&mut ev, Some(Duration::from_millis(20))).unwrap();
        assert!(!ev.iter().any(|e| e.token.0 == 2 && e.writable()));
        let mut sink = vec![0u8; 1 << 20];
        while b.read(&mut sink).is_ok() {}
        assert!(
            seen(&mut p, &mut ev, 2, Event::WRITABLE),
            "POLL_OUT once space frees"
        );
    }

    #[test]
    fn stale_signals_for_a_reused_number_are_dropped() {
        let Some(mut p) = poller() else { return };
        let (mut a, b) = pair();
        let fd = b.as_raw_fd();
        p.register(fd, Token(3), Interest::READABLE).unwrap();
        a.write_all(b"x").unwrap();
        drop(a); // queues POLL_IN and POLL_HUP for `fd`
        p.deregister(fd).unwrap();
        // A new, quiet socket under the same number.
        let (_c, d) = pair();
        // SAFETY: `fd` is owned by `b`, which stays alive; dup2 replaces that file atomically.
        assert_eq!(unsafe { libc::dup2(d.as_raw_fd(), fd) }, fd);
        p.register(fd, Token(4), Interest::READABLE).unwrap();
        let mut ev = Events::with_capacity(8);
        for _ in 0..3 {
            p.wait(&mut ev, Some(Duration::from_millis(20))).unwrap();
            assert!(
                !ev.iter().any(|e| e.token.0 == 4 && e.readable()),
                "{:?}",
                ev.as_slice()
            );
        }
        assert!(p.stats().discarded >= 1, "{:?}", p.stats());
        p.deregister(fd).unwrap();
    }

    fn set_sigpending_limit(soft: u64) -> u64 {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid, writable rlimit.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_SIGPENDING, &mut lim) },
            0
        );
        let old = lim.rlim_cur;
        lim.rlim_cur = soft.min(lim.rlim_max);
        // SAFETY: `lim` is a valid rlimit; lowering the soft limit needs no privilege.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_SIGPENDING, &lim) }, 0);
        old
    }

    /// With RLIMIT_SIGPENDING at 4 the queue overflows at once: the kernel sends SIGIO and the
    /// poll sweep must find every descriptor with data all the same.
    #[test]
    fn queue_overflow_falls_back_to_a_sweep() {
        let Some(mut p) = poller() else { return };
        let pairs: Vec<_> = (0..64).map(|_| pair()).collect();
        for (i, (_, b)) in pairs.iter().enumerate() {
            p.register(b.as_raw_fd(), Token(i), Interest::READABLE)
                .unwrap();
        }
        let mut ev = Events::with_capacity(16);
        // The initial (writable) edges.
        while p.wait(&mut ev, Some(Duration::from_millis(10))).unwrap() > 0 {}
        let old = set_sigpending_limit(4);
        for (a, _) in &pairs {
            (&*a).write_all(b"z").unwrap();
        }
        set_sigpending_limit(old);
        let mut readable = std::collections::HashSet::new();
        for _ in 0..20 {
            p.wait(&mut ev, Some(Duration::from_millis(50))).unwrap();
            readable.extend(ev.iter().filter(|e| e.readable()).map(|e| e.token.0));
            if readable.len() == pairs.len() {
                break;
            }
        }
        assert_eq!(readable.len(), pairs.len(), "{:?}", p.stats());
        assert!(p.stats().overflows >= 1, "{:?}", p.stats());
    }

    /// Two workers with one listener: the file signals only its last registrant; when that one
    /// deregisters, the other takes over and is woken to look.
    #[test]
    fn a_shared_file_is_handed_over() {
        if poller().is_none() {
            return;
        }
        let (mut a, b) = pair();
        let fd = b.as_raw_fd();
        let (registered_tx, registered_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let first = std::thread::spawn(move || {
            let mut p = RtSig::new().unwrap();
            p.register(fd, Token(10), Interest::READABLE).unwrap();
            let mut ev = Events::with_capacity(8);
            p.wait(&mut ev, Some(Duration::ZERO)).unwrap(); // initial edge
            registered_tx.send(()).unwrap();
            let ok = seen(&mut p, &mut ev, 10, Event::READABLE)
                || seen(&mut p, &mut ev, 10, Event::READABLE);
            done_rx.recv().unwrap();
            p.deregister(fd).unwrap();
            ok
        });
        registered_rx.recv().unwrap();
        let mut q = RtSig::new().unwrap();
        q.register(fd, Token(20), Interest::READABLE).unwrap();
        assert_eq!(
            sys::fcntl_get_owner(fd).unwrap().pid,
            this_tid(),
            "the last registrant owns the file"
        );
        q.deregister(fd).unwrap();
        a.write_all(b"x").unwrap();
        done_tx.send(()).unwrap();
        assert!(first.join().unwrap(), "the first worker never heard");
        drop(b);
    }

    #[test]
    fn two_pollers_in_one_thread_use_two_signals() {
        let Some(mut p) = poller() else { return };
        let mut q = RtSig::new().unwrap();
        assert_ne!(p.signal(), q.signal());
        let (mut a1, b1) = pair();
        let (mut a2, b2) = pair();
        p.register(b1.as_raw_fd(), Token(1), Interest::READABLE)
            .unwrap();
        q.register(b2.as_raw_fd(), Token(2), Interest::READABLE)
            .unwrap();
        let mut ev = Events::with_capacity(8);
        p.wait(&mut ev, Some(Duration::ZERO)).unwrap();
        q.wait(&mut ev, Some(Duration::ZERO)).unwrap();
        a1.write_all(b"1").unwrap();
        a2.write_all(b"2").unwrap();
        assert!(seen(&mut q, &mut ev, 2, Event::READABLE));
        assert!(seen(&mut p, &mut ev, 1, Event::READABLE));
        drop(q);
        let r = RtSig::new().unwrap();
        assert_ne!(
            r.signal(),
            p.signal(),
            "a freed signal is reused, a held one not"
        );
    }
}
