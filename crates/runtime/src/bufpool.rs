//! Buffers lent to connections while they have bytes to hold, so that a connection waiting
//! between requests holds none, and a busy worker reuses the same few buffers instead of
//! allocating per request or per connection. Bounded in bytes; a buffer that grew past
//! `keep_max` (a large pipelined burst) is freed, not pooled. [`BufPool::trim`] gives back what
//! sat unused through an interval, so the pool follows the recent peak, not the highest ever.

#[derive(Debug)]
pub struct BufPool {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
    /// The fewest buffers the pool held since the last [`BufPool::trim`]: that many were not
    /// needed at any moment of the interval.
    low: usize,
    new_capacity: usize,
    keep_max: usize,
    max_bytes: usize,
}

impl Default for BufPool {
    /// The server's pool: request heads and small replies.
    fn default() -> BufPool {
        BufPool::new(Self::NEW_CAPACITY, Self::KEEP_MAX, Self::POOL_BYTES)
    }
}

impl BufPool {
    /// A new buffer's capacity by default: a request head, or a head plus a small body.
    pub const NEW_CAPACITY: usize = 8 * 1024;
    /// Larger buffers are freed when returned (by default).
    pub const KEEP_MAX: usize = 64 * 1024;
    /// What the pool may hold at most (by default).
    pub const POOL_BYTES: usize = 8 << 20;
    /// Buffers a trim always leaves in the pool.
    pub const TRIM_KEEP: usize = 16;
    /// How many of the most recently returned buffers a take looks through for one large
    /// enough.
    pub const FIT_SCAN: usize = 8;

    /// A pool whose new buffers have `new_capacity`, which keeps returned buffers of up to
    /// `keep_max` bytes and holds at most `max_bytes`.
    pub fn new(new_capacity: usize, keep_max: usize, max_bytes: usize) -> BufPool {
        BufPool {
            bufs: Vec::new(),
            bytes: 0,
            low: 0,
            new_capacity,
            keep_max,
            max_bytes,
        }
    }

    /// Gives `v` a buffer if it has none.
    #[inline]
    pub fn lend(&mut self, v: &mut Vec<u8>) {
        if v.capacity() == 0 {
            *v = self
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(self.new_capacity));
        }
    }

    /// An empty buffer with room for at least `cap` bytes: the most recently returned one
    /// already that large (among the last [`BufPool::FIT_SCAN`]), else the last one grown,
    /// else a new one.
    #[inline]
    pub fn take(&mut self, cap: usize) -> Vec<u8> {
        if let Some(b) = self.take_fitting(cap) {
            return b;
        }
        match self.pop() {
            Some(mut b) => {
                b.reserve(cap);
                b
            }
            None => Vec::with_capacity(cap.max(self.new_capacity)),
        }
    }

    /// An empty buffer of at least `cap` bytes, never a smaller one grown: the most recently
    /// returned one that large (its memory the likeliest still in the cache), among the last
    /// [`BufPool::FIT_SCAN`], else a new one of exactly `cap`. For a buffer whose old
    /// contents are garbage: growing one reallocates, and the allocator copies them.
    #[inline]
    pub fn take_exact(&mut self, cap: usize) -> Vec<u8> {
        self.take_fitting(cap)
            .unwrap_or_else(|| Vec::with_capacity(cap))
    }

    #[inline]
    fn take_fitting(&mut self, cap: usize) -> Option<Vec<u8>> {
        if self.bufs.last()?.capacity() >= cap {
            return self.pop();
        }
        self.take_fitting_below(cap)
    }

    /// The last buffer did not fit: look below it.
    #[inline(never)]
    fn take_fitting_below(&mut self, cap: usize) -> Option<Vec<u8>> {
        let n = self.bufs.len();
        let i = (n.saturating_sub(Self::FIT_SCAN)..n - 1)
            .rev()
            .find(|&i| self.bufs[i].capacity() >= cap)?;
        let b = self.bufs.remove(i);
        self.bytes -= b.capacity();
        self.low = self.low.min(self.bufs.len());
        Some(b)
    }

    #[inline]
    fn pop(&mut self) -> Option<Vec<u8>> {
        let b = self.bufs.pop()?;
        self.bytes -= b.capacity();
        self.low = self.low.min(self.bufs.len());
        Some(b)
    }

    /// Takes `v`'s buffer back if it holds nothing.
    #[inline]
    pub fn reclaim(&mut self, v: &mut Vec<u8>) {
        if v.is_empty() && v.capacity() > 0 {
            self.give(std::mem::take(v));
        }
    }

    /// Takes a buffer back (emptied), unless it is too large or the pool is full.
    #[inline]
    pub fn give(&mut self, mut b: Vec<u8>) {
        let cap = b.capacity();
        if cap > 0 && cap <= self.keep_max && self.bytes + cap <= self.max_bytes {
            b.clear();
            self.bytes += cap;
            self.bufs.push(b);
        }
    }

    /// Frees the buffers that sat unused since the last trim (beyond [`BufPool::TRIM_KEEP`]),
    /// oldest first. Returns the bytes freed.
    pub fn trim(&mut self) -> usize {
        let excess = self
            .low
            .min(self.bufs.len())
            .saturating_sub(Self::TRIM_KEEP);
        let freed: usize = self.bufs.drain(..excess).map(|b| b.capacity()).sum();
        self.bytes -= freed;
        if excess > 0 {
            self.bufs.shrink_to(2 * self.bufs.len());
        }
        self.low = self.bufs.len();
        freed
    }

    /// Bytes of the buffers held for lending.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether the buffer whose memory starts at `p` is in the pool.
    pub fn holds(&self, p: *const u8) -> bool {
        self.bufs.iter().any(|b| b.as_ptr() == p)
    }

    /// Buffers held for lending.
    pub fn buffers(&self) -> usize {
        self.bufs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::BufPool;

    fn lend_n(pool: &mut BufPool, n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|_| {
                let mut v = Vec::new();
                pool.lend(&mut v);
                v
            })
            .collect()
    }

    fn reclaim_all(pool: &mut BufPool, bufs: Vec<Vec<u8>>) {
        for mut v in bufs {
            pool.reclaim(&mut v);
        }
    }

    #[test]
    fn trim_frees_what_sat_unused_through_the_interval() {
        let mut pool = BufPool::default();
        // A burst of 40 connections fills the pool.
        let burst = lend_n(&mut pool, 40);
        reclaim_all(&mut pool, burst);
        assert_eq!(pool.buffers(), 40);
        // The first trim only starts the interval: all 40 may have been needed in it.
        assert_eq!(pool.trim(), 0);
        // Then at most 10 at once: 30 sat unused, all but the reserve go.
        let some = lend_n(&mut pool, 10);
        reclaim_all(&mut pool, some);
        let freed = pool.trim();
        assert_eq!(pool.buffers(), 40 - (30 - BufPool::TRIM_KEEP));
        assert_eq!(freed, (30 - BufPool::TRIM_KEEP) * BufPool::NEW_CAPACITY);
        assert_eq!(pool.bytes(), pool.buffers() * BufPool::NEW_CAPACITY);
        // A busy interval (every buffer lent at some moment) frees nothing.
        let n = pool.buffers();
        let all = lend_n(&mut pool, n);
        reclaim_all(&mut pool, all);
        assert_eq!(pool.trim(), 0);
    }

    #[test]
    fn a_take_prefers_a_buffer_already_large_enough() {
        let mut pool = BufPool::new(1024, 1 << 20, 8 << 20);
        let big = Vec::<u8>::with_capacity(65536);
        let big_ptr = big.as_ptr();
        pool.give(big);
        pool.give(Vec::with_capacity(128)); // the last returned, too small
                                            // Neither take grows the small one while a large one is near the top.
        let b = pool.take_exact(60_000);
        assert_eq!(
            b.as_ptr(),
            big_ptr,
            "the 64 KiB buffer, not the small one grown"
        );
        assert_eq!((pool.buffers(), pool.bytes()), (1, 128));
        pool.give(b);
        let b = pool.take(60_000);
        assert_eq!(b.as_ptr(), big_ptr);
        // None fits: take_exact allocates exactly what was asked; take grows the last one.
        let e = pool.take_exact(200_000);
        assert_eq!(e.capacity(), 200_000);
        assert_eq!(pool.buffers(), 1, "the small one is left where it was");
        let g = pool.take(4096);
        assert!(g.capacity() >= 4096);
        assert_eq!((pool.buffers(), pool.bytes()), (0, 0));
    }

    #[test]
    fn bounded_in_bytes_and_in_buffer_size() {
        let mut pool = BufPool::new(1024, 2048, 4096);
        let b = pool.take(100);
        assert!(b.capacity() >= 1024);
        pool.give(Vec::with_capacity(4096)); // too large to keep
        assert_eq!(pool.buffers(), 0);
        for _ in 0..6 {
            pool.give(Vec::with_capacity(1024));
        }
        assert_eq!(pool.buffers(), 4, "held at most 4096 bytes");
        assert_eq!(pool.bytes(), 4096);
        // A buffer taken back comes out empty, with the room asked for.
        let mut v = pool.take(3000);
        assert!(v.is_empty() && v.capacity() >= 3000);
        v.push(1);
        pool.reclaim(&mut v);
        assert_eq!(v.len(), 1, "a buffer holding bytes is not taken");
        assert_eq!(pool.buffers(), 3);
    }
}
