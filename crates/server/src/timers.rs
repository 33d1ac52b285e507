//! Deadlines for connections.
//!
//! Every timeout of a kind has the same length, so deadlines are pushed in increasing order and
//! a FIFO is a complete timer queue: push and expire are O(1), and 10,000 idle connections cost
//! nothing between their deadlines. An entry that no longer applies (the connection moved on or
//! was closed, told by its generation) is simply dropped when it reaches the front.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

#[derive(Copy, Clone, Debug)]
pub struct Timer {
    pub deadline: Instant,
    pub fd: i32,
    /// The connection's generation when the timer was set.
    pub gen: u64,
}

#[derive(Debug)]
pub struct TimerQueue {
    pub length: Duration,
    q: VecDeque<Timer>,
}

impl TimerQueue {
    pub fn new(length: Duration) -> TimerQueue {
        TimerQueue {
            length,
            q: VecDeque::new(),
        }
    }

    #[inline]
    pub fn push(&mut self, now: Instant, fd: i32, gen: u64) {
        self.q.push_back(Timer {
            deadline: now + self.length,
            fd,
            gen,
        });
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.q.front().map(|t| t.deadline)
    }

    /// Pops the first timer that is due.
    #[inline]
    pub fn pop_due(&mut self, now: Instant) -> Option<Timer> {
        match self.q.front() {
            Some(t) if t.deadline <= now => self.q.pop_front(),
            _ => None,
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.q.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_expiry() {
        let t0 = Instant::now();
        let mut q = TimerQueue::new(Duration::from_secs(1));
        q.push(t0, 5, 1);
        q.push(t0 + Duration::from_millis(10), 6, 2);
        assert!(q.pop_due(t0).is_none());
        let t = q.pop_due(t0 + Duration::from_secs(1)).unwrap();
        assert_eq!((t.fd, t.gen), (5, 1));
        assert!(q.pop_due(t0 + Duration::from_secs(1)).is_none());
        assert_eq!(q.len(), 1);
        assert_eq!(q.next_deadline(), Some(t0 + Duration::from_millis(1010)));
    }
}
