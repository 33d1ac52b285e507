//! The accept gate: whether a worker takes new connections, why it stopped, when it tries
//! again, and the graceful shutdown that closes it for good.
//!
//! The gate closes at `--max-conns` (and opens again when a connection closes) or when
//! accepting fails for want of descriptors or memory (and opens again when a connection
//! closes, or [`ACCEPT_RETRY`] later), so a listener that cannot be drained is never spun on.
//! A shutdown closes it and gives the responses in flight [`SHUTDOWN_GRACE`].

use std::time::{Duration, Instant};

/// How long to wait before retrying accept after EMFILE/ENFILE/ENOBUFS/ENOMEM.
pub const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// How long a graceful shutdown waits for responses in flight.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// While shutting down, the loop wakes at least this often to see whether it is done.
const SHUTDOWN_POLL: Duration = Duration::from_millis(100);

/// What a failed accept means (the errno policy every accept loop follows).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AcceptFailure {
    /// EAGAIN: no connection waits; stop until the listener is ready again.
    Empty,
    /// EINTR, ECONNABORTED, EPROTO: this one is gone; take the next.
    Transient,
    /// EMFILE, ENFILE, ENOBUFS, ENOMEM: out of descriptors or memory. Counted; the gate
    /// closes until a connection closes or [`ACCEPT_RETRY`] has passed.
    Exhausted,
    /// ECANCELED: an io_uring accept cancelled on purpose (the gate closed).
    Cancelled,
    /// Anything else: counted; stop this round.
    Other,
}

impl AcceptFailure {
    pub fn of(errno: i32) -> AcceptFailure {
        match errno {
            libc::EAGAIN => AcceptFailure::Empty,
            libc::EINTR | libc::ECONNABORTED | libc::EPROTO => AcceptFailure::Transient,
            libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM => AcceptFailure::Exhausted,
            libc::ECANCELED => AcceptFailure::Cancelled,
            _ => AcceptFailure::Other,
        }
    }

    /// Whether it is counted as an accept error.
    pub fn counted(self) -> bool {
        matches!(self, AcceptFailure::Exhausted | AcceptFailure::Other)
    }
}

/// One worker's gate and count of open connections.
#[derive(Debug)]
pub struct Gate {
    /// Connections open.
    pub active: usize,
    max_conns: usize,
    accepting: bool,
    retry_at: Option<Instant>,
    shutting_down: Option<Instant>,
}

impl Gate {
    /// An open gate for at most `max_conns` connections at once.
    pub fn new(max_conns: usize) -> Gate {
        Gate {
            active: 0,
            max_conns,
            accepting: true,
            retry_at: None,
            shutting_down: None,
        }
    }

    /// The engine is taking connections.
    #[inline]
    pub fn accepting(&self) -> bool {
        self.accepting
    }

    /// Whether another connection may be taken.
    #[inline]
    pub fn has_room(&self) -> bool {
        self.active < self.max_conns
    }

    #[inline]
    pub fn shutting_down(&self) -> bool {
        self.shutting_down.is_some()
    }

    /// Taking connections is wanted now: the gate is open and no shutdown began.
    #[inline]
    pub fn open(&self) -> bool {
        self.accepting && self.shutting_down.is_none()
    }

    /// Closes the gate; `retry_at`: when to try again even if no connection closes. True when
    /// it was open: the engine must stop taking connections.
    pub fn close(&mut self, retry_at: Option<Instant>) -> bool {
        self.retry_at = retry_at;
        std::mem::replace(&mut self.accepting, false)
    }

    /// Whether the gate may open: closed, room, no shutdown. The engine then starts taking
    /// connections and calls [`Gate::opened`].
    pub fn may_open(&self) -> bool {
        !self.accepting && self.shutting_down.is_none() && self.has_room()
    }

    pub fn opened(&mut self) {
        self.accepting = true;
        self.retry_at = None;
    }

    /// The retry time has come (it is then forgotten).
    pub fn retry_due(&mut self, now: Instant) -> bool {
        match self.retry_at {
            Some(at) if now >= at => {
                self.retry_at = None;
                true
            }
            _ => false,
        }
    }

    /// Starts the graceful shutdown: `None` if it had begun already, else whether the gate
    /// was open (the engine must stop taking connections).
    pub fn begin_shutdown(&mut self, now: Instant) -> Option<bool> {
        if self.shutting_down.is_some() {
            return None;
        }
        self.shutting_down = Some(now + SHUTDOWN_GRACE);
        self.retry_at = None;
        Some(std::mem::replace(&mut self.accepting, false))
    }

    /// The worker may stop: shutting down, and every connection closed or the grace over.
    pub fn done(&self, now: Instant) -> bool {
        self.shutting_down
            .is_some_and(|end| self.active == 0 || now >= end)
    }

    /// When the loop must wake for the gate's sake, if at all.
    pub fn wake_at(&self, now: Instant) -> Option<Instant> {
        let shut = self.shutting_down.map(|t| t.min(now + SHUTDOWN_POLL));
        crate::deadlines::earliest(self.retry_at, shut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_errno_policy() {
        assert_eq!(AcceptFailure::of(libc::EAGAIN), AcceptFailure::Empty);
        assert_eq!(
            AcceptFailure::of(libc::ECONNABORTED),
            AcceptFailure::Transient
        );
        for e in [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM] {
            assert_eq!(AcceptFailure::of(e), AcceptFailure::Exhausted);
            assert!(AcceptFailure::of(e).counted());
        }
        assert!(!AcceptFailure::of(libc::ECANCELED).counted());
        assert!(AcceptFailure::of(libc::EINVAL).counted());
    }

    #[test]
    fn closes_when_full_reopens_with_room_and_never_after_shutdown() {
        let t0 = Instant::now();
        let mut g = Gate::new(2);
        assert!(g.open());
        g.active = 2;
        assert!(!g.has_room());
        assert!(g.close(None));
        assert!(
            !g.close(None),
            "closing a closed gate asks nothing of the engine"
        );
        assert!(!g.may_open(), "full");
        g.active = 1;
        assert!(g.may_open());
        g.opened();
        assert!(g.close(Some(t0 + ACCEPT_RETRY)));
        assert!(!g.retry_due(t0));
        assert_eq!(g.wake_at(t0), Some(t0 + ACCEPT_RETRY));
        assert!(g.retry_due(t0 + ACCEPT_RETRY));
        assert!(!g.retry_due(t0 + ACCEPT_RETRY), "forgotten once due");
        assert_eq!(g.begin_shutdown(t0), Some(false));
        assert_eq!(g.begin_shutdown(t0), None);
        assert!(!g.may_open());
        assert!(!g.done(t0), "a connection is still open");
        assert_eq!(g.wake_at(t0), Some(t0 + SHUTDOWN_POLL));
        assert!(g.done(t0 + SHUTDOWN_GRACE));
        g.active = 0;
        assert!(g.done(t0));
    }
}
