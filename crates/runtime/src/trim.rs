//! Giving back what sat unused: every [`TRIM_EVERY`] a worker frees the pooled buffers and
//! spare shells that no moment of the interval needed (beyond a reserve) and the deadline
//! queue's spare capacity, then asks the allocator to return free pages, so that its memory
//! follows the recent peak of connections (a burst during a stall elsewhere) rather than the
//! highest since start.

use std::time::{Duration, Instant};

use evlab_sys as sys;

use crate::{BufPool, Deadlines, Spares};

/// How often a worker gives back what sat unused.
pub const TRIM_EVERY: Duration = Duration::from_secs(10);
/// Spare shells a trim always leaves.
pub const SPARES_KEEP: usize = 64;

/// When a worker next gives back what sat unused.
#[derive(Debug)]
pub struct Trim {
    next: Instant,
}

impl Trim {
    pub fn new(now: Instant) -> Trim {
        Trim {
            next: now + TRIM_EVERY,
        }
    }

    /// If an interval has passed: frees what sat unused through it in `pool`, `spares` and
    /// `timers`, then the allocator's free pages if anything was freed. Returns the bytes
    /// freed (0 when not due).
    pub fn run<T>(
        &mut self,
        now: Instant,
        pool: &mut BufPool,
        spares: &mut Spares<T>,
        timers: &mut Deadlines,
    ) -> usize {
        if now < self.next {
            return 0;
        }
        self.next = now + TRIM_EVERY;
        let mut freed = pool.trim();
        freed += spares.trim(SPARES_KEEP) * std::mem::size_of::<T>();
        freed += timers.shrink();
        if freed > 0 {
            sys::malloc_trim();
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frees_only_when_due_and_only_what_sat_unused() {
        let t0 = Instant::now();
        let mut t = Trim::new(t0);
        let mut pool = BufPool::default();
        let mut spares: Spares<[u8; 100]> = Spares::new(1000);
        let mut timers = Deadlines::new();
        for _ in 0..200 {
            spares.put([0; 100]);
        }
        assert_eq!(t.run(t0, &mut pool, &mut spares, &mut timers), 0, "not due");
        // The first trim starts the interval (the shells were all taken at its start).
        spares.trim(SPARES_KEEP);
        let freed = t.run(t0 + TRIM_EVERY, &mut pool, &mut spares, &mut timers);
        assert_eq!(freed, (200 - SPARES_KEEP) * 100);
        assert_eq!(spares.len(), SPARES_KEEP);
        assert_eq!(
            t.run(t0 + TRIM_EVERY, &mut pool, &mut spares, &mut timers),
            0
        );
    }
}
