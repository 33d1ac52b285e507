//! evlab-poll: the readiness mechanisms of the μserver study behind one trait.
//!
//! Every mechanism here is what the paper (or today's kernel) does, syscall for syscall; see
//! `docs/mechanisms.md`. Every syscall they make goes through `evlab-sys`, which counts each one
//! per thread (and times it with profiling on): that is how evlab prints the paper's Table 1
//! without gprof.
//!
//! The contract of [`Poller`] follows mio's: events are hints. A level-triggered mechanism reports
//! a descriptor as long as it stays ready for the interest registered; an edge-triggered one
//! ([`Poller::edge_triggered`]) reports only transitions, so the caller must read (or write) until
//! `EAGAIN` (or a short transfer) before it may wait for that descriptor again.

#![deny(clippy::too_many_lines)]

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

#[macro_use]
mod registry;

/// Declares the module of every readiness mechanism in the registry: an entry
/// `readiness($crate::name::Type)` declares `pub mod name;`, so a mechanism's file needs no line
/// here. A module that holds several mechanisms (`epoll`) is declared once, by hand, below.
///
/// `cargo fmt` finds modules by reading `mod` items, not by expanding macros, so it does not
/// see these files; `.ci/run` checks them with `rustfmt` directly.
macro_rules! declare_mechanism_modules {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {
        $(declare_mechanism_modules!(@one $kind $args);)*
    };
    (@one readiness ($c:tt :: epoll :: $t:ident)) => {};
    (@one readiness ($c:tt :: $module:ident :: $t:ident)) => {
        pub mod $module;
    };
    (@one completion $args:tt) => {};
}

for_each_mechanism!(declare_mechanism_modules);

/// epoll-lt, epoll-et and epoll2.
pub mod epoll;
#[doc(hidden)]
pub mod testing;
pub mod uring_probe;

pub use epoll::{Epoll2, EpollEt, EpollLt};
pub use epoll_ctlv::EpollCtlv;
pub use poll::Poll;
pub use registry::{Kind, Mechanism, Support, UnknownMechanism};
pub use select::Select;
pub use uring_poll::UringPoll;

/// Caller's name for a registered descriptor, returned with its events.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token(pub usize);

/// What a caller wants to hear about.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Interest(u8);

impl Interest {
    pub const NONE: Interest = Interest(0);
    pub const READABLE: Interest = Interest(1);
    pub const WRITABLE: Interest = Interest(2);
    pub const BOTH: Interest = Interest(3);

    #[inline]
    pub fn readable(self) -> bool {
        self.0 & 1 != 0
    }
    #[inline]
    pub fn writable(self) -> bool {
        self.0 & 2 != 0
    }
    #[inline]
    pub fn with(self, other: Interest) -> Interest {
        Interest(self.0 | other.0)
    }
    #[inline]
    pub fn without(self, other: Interest) -> Interest {
        Interest(self.0 & !other.0)
    }
    #[inline]
    pub fn is_none(self) -> bool {
        self.0 == 0
    }
}

/// One readiness report.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub token: Token,
    flags: u8,
}

impl Event {
    pub const READABLE: u8 = 1;
    pub const WRITABLE: u8 = 2;
    /// An error is pending on the descriptor (EPOLLERR, POLLERR, POLLNVAL).
    pub const ERROR: u8 = 4;
    /// The peer hung up (EPOLLHUP, POLLHUP); reading will see EOF.
    pub const HUP: u8 = 8;
    /// The peer shut down its writing side (EPOLLRDHUP, POLLRDHUP): after the data already
    /// buffered, a read will see EOF. An edge-triggered reader must read on to that EOF, since
    /// no later edge will announce it.
    pub const RDHUP: u8 = 16;

    #[inline]
    pub fn new(token: Token, flags: u8) -> Event {
        Event { token, flags }
    }
    /// Readable, or about to fail a read with EOF or an error: either way, read it.
    #[inline]
    pub fn readable(&self) -> bool {
        self.flags & (Self::READABLE | Self::ERROR | Self::HUP | Self::RDHUP) != 0
    }
    /// The peer will send nothing more (RDHUP or HUP).
    #[inline]
    pub fn peer_closed(&self) -> bool {
        self.flags & (Self::RDHUP | Self::HUP) != 0
    }
    /// Writable, or about to fail a write with an error: either way, write it.
    #[inline]
    pub fn writable(&self) -> bool {
        self.flags & (Self::WRITABLE | Self::ERROR | Self::HUP) != 0
    }
    #[inline]
    pub fn error(&self) -> bool {
        self.flags & Self::ERROR != 0
    }
    #[inline]
    pub fn hup(&self) -> bool {
        self.flags & Self::HUP != 0
    }
    #[inline]
    pub fn flags(&self) -> u8 {
        self.flags
    }
}

/// A reusable buffer of events filled by [`Poller::wait`].
#[derive(Debug)]
pub struct Events {
    list: Vec<Event>,
    capacity: usize,
}

impl Events {
    pub fn with_capacity(capacity: usize) -> Events {
        let capacity = capacity.max(1);
        Events {
            list: Vec::with_capacity(capacity),
            capacity,
        }
    }
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.list.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
    #[inline]
    pub fn clear(&mut self) {
        self.list.clear();
    }
    /// Adds an event unless the buffer is full; returns whether it was added.
    #[inline]
    pub fn push(&mut self, ev: Event) -> bool {
        if self.list.len() < self.capacity {
            self.list.push(ev);
            true
        } else {
            false
        }
    }
    #[inline]
    pub fn is_full(&self) -> bool {
        self.list.len() >= self.capacity
    }
    pub fn iter(&self) -> std::slice::Iter<'_, Event> {
        self.list.iter()
    }
    pub fn as_slice(&self) -> &[Event] {
        &self.list
    }
}

impl<'a> IntoIterator for &'a Events {
    type Item = &'a Event;
    type IntoIter = std::slice::Iter<'a, Event>;
    fn into_iter(self) -> Self::IntoIter {
        self.list.iter()
    }
}

/// What a mechanism did, beyond the syscalls `evlab_sys` counts.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PollerStats {
    /// Calls to `wait`.
    pub waits: u64,
    /// Events handed to the caller.
    pub events: u64,
    /// Events the kernel reported that were not of interest and were dropped in user space (epoll2).
    pub discarded: u64,
    /// Interest changes that cost a syscall (or a queued io_uring request).
    pub interest_changes: u64,
    /// Interest changes absorbed in user space (no syscall).
    pub interest_changes_free: u64,
    /// Batches of interest changes submitted together (epoll-ctlv).
    pub batches: u64,
    /// Waits answered from memory with no syscall (uring-poll).
    pub waits_from_memory: u64,
    /// Waits that entered the kernel.
    pub waits_from_kernel: u64,
    /// Full rescans of every registered descriptor because the kernel's queue of events lost
    /// some (rtsig: SIGIO after the signal queue overflowed, then one poll(2) sweep; also when
    /// a file shared with another thread is handed over to this one).
    pub overflows: u64,
}

impl PollerStats {
    pub fn merge(&mut self, o: &PollerStats) {
        self.waits += o.waits;
        self.events += o.events;
        self.discarded += o.discarded;
        self.interest_changes += o.interest_changes;
        self.interest_changes_free += o.interest_changes_free;
        self.batches += o.batches;
        self.waits_from_memory += o.waits_from_memory;
        self.waits_from_kernel += o.waits_from_kernel;
        self.overflows += o.overflows;
    }
}

/// A readiness mechanism. The server's loop is generic over it, so the hot path has no dynamic
/// dispatch; [`Mechanism`] picks the type once at start-up.
pub trait Poller: Sized {
    /// Which mechanism this is.
    const MECHANISM: Mechanism;

    /// Whether this kernel allows the mechanism, and if not, why. Probed before [`Poller::new`]
    /// by tests and `--list-mechanisms`; most mechanisms need nothing beyond the syscalls
    /// every Linux has.
    fn support() -> Support {
        Support::Yes
    }

    /// Creates the mechanism; fails with a clear error when the kernel refuses it.
    fn new() -> io::Result<Self>;

    /// Starts watching `fd`. `fd` must not be registered already.
    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()>;

    /// Starts watching a listening socket shared with other threads' pollers so that a new
    /// connection wakes one of their waits, not all (EPOLLEXCLUSIVE, Linux 4.5): the server's
    /// `--accept-mode exclusive`. Only readable interest; undone by [`Poller::deregister`], and
    /// never re-registered with [`Poller::reregister`] (the kernel refuses EPOLL_CTL_MOD on an
    /// exclusive entry). Mechanisms without an exclusive wake-up refuse with `Unsupported`.
    fn register_exclusive(&mut self, fd: RawFd, token: Token) -> io::Result<()> {
        let _ = (fd, token);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{} has no exclusive wake-up: --accept-mode exclusive needs EPOLLEXCLUSIVE, \
                 which only epoll-lt, epoll-et and epoll2 use (give shared or reuseport)",
                Self::MECHANISM.name()
            ),
        ))
    }

    /// Changes the interest (and token) of a registered `fd`. Mechanisms that register once
    /// (epoll2, epoll-et) record it in user space and make no syscall.
    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()>;

    /// Stops watching `fd`; call it before closing `fd`.
    fn deregister(&mut self, fd: RawFd) -> io::Result<()>;

    /// Waits for events (at most `events.capacity()`); `None` waits forever. Clears `events` first.
    /// An interrupted wait (EINTR) returns `Ok(0)`.
    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize>;

    /// True when only transitions are reported: the caller must drain to `EAGAIN`.
    fn edge_triggered(&self) -> bool;

    /// What the mechanism did so far.
    fn stats(&self) -> PollerStats;
}

/// Converts a wait timeout to milliseconds for epoll_wait/poll, rounding up so that a short
/// timeout never becomes a busy loop.
pub(crate) fn timeout_ms(timeout: Option<Duration>) -> i32 {
    match timeout {
        None => -1,
        Some(d) => {
            let ms = d.as_nanos().div_ceil(1_000_000);
            ms.min(i32::MAX as u128) as i32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_rounds_up() {
        assert_eq!(timeout_ms(None), -1);
        assert_eq!(timeout_ms(Some(Duration::from_micros(10))), 1);
        assert_eq!(timeout_ms(Some(Duration::ZERO)), 0);
        assert_eq!(timeout_ms(Some(Duration::from_millis(1500))), 1500);
    }

    #[test]
    fn events_respect_capacity() {
        let mut ev = Events::with_capacity(2);
        assert!(ev.push(Event::new(Token(1), Event::READABLE)));
        assert!(ev.push(Event::new(Token(2), Event::WRITABLE)));
        assert!(!ev.push(Event::new(Token(3), Event::READABLE)));
        assert_eq!(ev.len(), 2);
        assert!(ev.as_slice()[0].readable() && !ev.as_slice()[0].writable());
        let hup = Event::new(Token(4), Event::HUP);
        assert!(hup.readable() && hup.writable());
    }
}
