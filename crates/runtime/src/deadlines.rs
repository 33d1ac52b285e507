//! Deadlines for connections: one per connection, re-armed lazily.
//!
//! A connection has at most one deadline at a time — for the server, the end of its wait for a
//! request head, of its wait for the peer to take a reply, or of its lingering close; for the
//! proxy, the first of its header, send, connect and progress timeouts — kept in the
//! connection itself ([`Timer`]) and changed with a store, nothing else, on every request. The
//! queue holds one entry per connection, at the deadline that was current when it was queued
//! (`Timer::armed_at`). When an entry comes due, the connection's deadline is looked at again:
//! if it moved later meanwhile (the connection did something), the entry is queued again at
//! the new deadline; otherwise the deadline has passed and the connection expires.
//!
//! So a keep-alive connection answering 100,000 requests a second costs one queue operation per
//! timeout length, not one per request, and the queue's size is bounded by the number of
//! connections, not by the request rate times the timeout. Only a deadline that moves *earlier*
//! (a lingering close after a long header wait) queues a second entry; the earlier one becomes
//! stale, is recognised by `armed_at`, and is dropped when it comes due or when the queue is
//! compacted.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// A connection's deadline and the one its queued entry stands for.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Timer {
    deadline: Option<Instant>,
    armed_at: Option<Instant>,
}

impl Timer {
    /// When the connection times out in its current state.
    #[inline]
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether `due` is this connection's current queue entry (not a stale one).
    #[inline]
    pub fn stands_for(&self, due: &Due) -> bool {
        self.armed_at == Some(due.at)
    }
}

/// A connection that has a deadline: its descriptor, its identity among the connections that
/// used that descriptor number, and its [`Timer`].
pub trait Timed {
    fn fd(&self) -> RawFd;
    fn id(&self) -> u32;
    fn timer(&mut self) -> &mut Timer;
}

/// Implements [`Timed`] for a connection type with the fields `fd: RawFd`, `id: u32` and
/// `timer: Timer`.
#[macro_export]
macro_rules! timed_by_fields {
    ($t:ty) => {
        impl $crate::Timed for $t {
            #[inline]
            fn fd(&self) -> std::os::fd::RawFd {
                self.fd
            }
            #[inline]
            fn id(&self) -> u32 {
                self.id
            }
            #[inline]
            fn timer(&mut self) -> &mut $crate::Timer {
                &mut self.timer
            }
        }
    };
}

/// One queued deadline: when, and which connection (descriptor and identity, since descriptor
/// numbers are reused).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Due {
    pub at: Instant,
    pub fd: RawFd,
    pub id: u32,
}

#[derive(Debug, Default)]
pub struct Deadlines {
    heap: BinaryHeap<Reverse<Due>>,
    /// The most entries ever queued at once.
    max_len: usize,
}

impl Deadlines {
    pub fn new() -> Deadlines {
        Deadlines::default()
    }

    /// Sets (or clears, with `None`) the connection's deadline. Queues an entry only when the
    /// connection has none queued at or before `at`.
    #[inline]
    pub fn set<C: Timed>(&mut self, c: &mut C, at: Option<Instant>) {
        c.timer().deadline = at;
        if let Some(at) = at {
            if c.timer().armed_at.is_none_or(|queued| at < queued) {
                self.queue(c, at);
            }
        }
    }

    fn queue<C: Timed>(&mut self, c: &mut C, at: Instant) {
        c.timer().armed_at = Some(at);
        self.heap.push(Reverse(Due {
            at,
            fd: c.fd(),
            id: c.id(),
        }));
        self.max_len = self.max_len.max(self.heap.len());
    }

    /// The earliest queued deadline (perhaps stale, which only wakes the loop early).
    pub fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|r| r.0.at)
    }

    /// Removes and returns the first entry due at `now`.
    #[inline]
    pub fn pop_due(&mut self, now: Instant) -> Option<Due> {
        match self.heap.peek() {
            Some(r) if r.0.at <= now => self.heap.pop().map(|r| r.0),
            _ => None,
        }
    }

    /// Handles an entry popped for `c` (already matched by descriptor and identity): returns
    /// true when the connection's deadline has passed; otherwise re-queues it at its current
    /// deadline, if any.
    pub fn expired<C: Timed>(&mut self, c: &mut C, due: Due, now: Instant) -> bool {
        let t = c.timer();
        if !t.stands_for(&due) {
            return false; // stale: a later entry (or an earlier one) stands for this connection
        }
        t.armed_at = None;
        match t.deadline {
            Some(at) if at <= now => true,
            Some(at) => {
                self.queue(c, at);
                false
            }
            None => false,
        }
    }

    /// Drops stale entries once they outnumber the live connections, keeping the queue
    /// within twice the connection count. `live` tells whether an entry still stands.
    pub fn compact(&mut self, connections: usize, live: impl Fn(&Due) -> bool) {
        if self.heap.len() > 2 * connections + 64 {
            self.heap.retain(|r| live(&r.0));
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Releases spare capacity left by a burst of connections; returns the bytes released.
    pub fn shrink(&mut self) -> usize {
        let (cap, len) = (self.heap.capacity(), self.heap.len());
        if cap > 4 * len + 1024 {
            self.heap.shrink_to(2 * len + 256);
            (cap - self.heap.capacity()) * std::mem::size_of::<Reverse<Due>>()
        } else {
            0
        }
    }

    pub fn max_len(&self) -> usize {
        self.max_len
    }
}

/// The timeouts a connection's deadline is made of, as `evlab serve` and `evlab proxy` both
/// take them (`None`: off), and how each is measured.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeouts {
    /// A request head must be complete within this total time from when the connection began
    /// to wait for it (at accept, or once the previous response was out): bytes trickling in
    /// do not extend it. nginx's `client_header_timeout`.
    pub header: Option<Duration>,
    /// The peer must take some of what waits for it within this time: restarted by every write
    /// that makes progress. nginx's `send_timeout`.
    pub send: Option<Duration>,
}

impl Timeouts {
    /// The end of a wait for a request head that began at `since`.
    #[inline]
    pub fn header_due(&self, since: Instant) -> Option<Instant> {
        self.header.and_then(|t| since.checked_add(t))
    }

    /// The end of a wait for the peer to take output, the last progress having been at `since`.
    #[inline]
    pub fn send_due(&self, since: Instant) -> Option<Instant> {
        self.send.and_then(|t| since.checked_add(t))
    }
}

/// The earlier of two optional instants.
#[inline]
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct C {
        fd: RawFd,
        id: u32,
        t: Timer,
    }

    impl Timed for C {
        fn fd(&self) -> RawFd {
            self.fd
        }
        fn id(&self) -> u32 {
            self.id
        }
        fn timer(&mut self) -> &mut Timer {
            &mut self.t
        }
    }

    fn conn(fd: RawFd, id: u32) -> C {
        C {
            fd,
            id,
            t: Timer::default(),
        }
    }

    #[test]
    fn shrink_releases_a_burst_s_capacity_only() {
        let mut d = Deadlines::new();
        let t = Instant::now();
        let mut conns: Vec<C> = (0..5000).map(|i| conn(i, 0)).collect();
        for c in conns.iter_mut() {
            d.set(c, Some(t + Duration::from_secs(1)));
        }
        // Little spare room: nothing to give back.
        assert_eq!(d.shrink(), 0);
        while d.pop_due(t + Duration::from_secs(2)).is_some() {}
        assert!(d.heap.capacity() >= 5000);
        assert!(d.shrink() > 0);
        assert!(d.heap.capacity() < 1024, "{}", d.heap.capacity());
    }

    #[test]
    fn moving_a_deadline_later_costs_no_entry() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut d = Deadlines::new();
        let mut c = conn(5, 1);
        d.set(&mut c, Some(t0 + s));
        for i in 1..1000 {
            d.set(&mut c, Some(t0 + s + Duration::from_millis(i)));
        }
        assert_eq!(d.len(), 1);
        // Due at the first deadline: not expired, re-queued at the current one.
        let due = d.pop_due(t0 + s).unwrap();
        assert!(!d.expired(&mut c, due, t0 + s));
        assert_eq!(d.len(), 1);
        assert_eq!(d.next(), Some(t0 + s + Duration::from_millis(999)));
        let at = t0 + 2 * s;
        let due = d.pop_due(at).unwrap();
        assert!(d.expired(&mut c, due, at));
        assert_eq!(d.len(), 0);
    }

    #[test]
    fn an_earlier_deadline_is_queued_and_the_old_entry_is_stale() {
        let t0 = Instant::now();
        let mut d = Deadlines::new();
        let mut c = conn(7, 3);
        d.set(&mut c, Some(t0 + Duration::from_secs(60)));
        d.set(&mut c, Some(t0 + Duration::from_secs(2)));
        assert_eq!(d.len(), 2);
        let due = d.pop_due(t0 + Duration::from_secs(2)).unwrap();
        assert!(d.expired(&mut c, due, t0 + Duration::from_secs(2)));
        // The 60 s entry no longer stands for anything.
        let late = t0 + Duration::from_secs(61);
        let due = d.pop_due(late).unwrap();
        assert!(!d.expired(&mut c, due, late));
        assert!(d.pop_due(late).is_none());
    }

    #[test]
    fn cleared_deadline_never_expires_and_compaction_bounds_the_queue() {
        let t0 = Instant::now();
        let mut d = Deadlines::new();
        let mut c = conn(9, 1);
        d.set(&mut c, Some(t0));
        d.set(&mut c, None);
        let due = d.pop_due(t0).unwrap();
        assert!(!d.expired(&mut c, due, t0));
        // Many earlier-moving deadlines leave stale entries; compaction keeps only live ones.
        let mut c = conn(10, 2);
        for i in (0..500).rev() {
            d.set(&mut c, Some(t0 + Duration::from_secs(i + 1)));
        }
        assert_eq!(d.len(), 500);
        let t = c.t;
        d.compact(1, |e| t.stands_for(e));
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn timeouts_measure_from_their_start_and_never_overflow() {
        let t0 = Instant::now();
        let s = Duration::from_secs(3);
        let t = Timeouts {
            header: Some(s),
            send: None,
        };
        assert_eq!(t.header_due(t0), Some(t0 + s));
        assert_eq!(t.send_due(t0), None);
        let huge = Timeouts {
            header: Some(Duration::MAX),
            send: Some(Duration::MAX),
        };
        assert_eq!(huge.header_due(t0), None);
        assert_eq!(earliest(Some(t0 + s), Some(t0)), Some(t0));
        assert_eq!(earliest(None, Some(t0)), Some(t0));
        assert_eq!(earliest(None, None), None);
    }
}
