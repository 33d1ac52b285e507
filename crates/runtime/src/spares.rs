//! Closed connections' shells, kept for the next connection so that accepting allocates nothing
//! once a worker has warmed up. Bounded; [`Spares::trim`] frees the shells that sat unused
//! through an interval beyond a reserve, so memory follows the recent peak of connections.

#[derive(Debug)]
pub struct Spares<T> {
    v: Vec<T>,
    max: usize,
    /// The fewest spare shells since the last trim.
    low: usize,
}

impl<T> Spares<T> {
    /// At most `max` shells are kept.
    pub fn new(max: usize) -> Spares<T> {
        Spares {
            v: Vec::new(),
            max,
            low: 0,
        }
    }

    /// A spare shell, if there is one.
    #[inline]
    pub fn take(&mut self) -> Option<T> {
        let s = self.v.pop();
        self.low = self.low.min(self.v.len());
        s
    }

    /// Keeps a closed connection's shell (dropped if there are enough).
    #[inline]
    pub fn put(&mut self, s: T) {
        if self.v.len() < self.max {
            self.v.push(s);
        }
    }

    /// Frees the shells that no moment since the last trim needed, beyond `keep`; returns how
    /// many went.
    pub fn trim(&mut self, keep: usize) -> usize {
        let excess = self.low.min(self.v.len()).saturating_sub(keep);
        if excess > 0 {
            self.v.drain(..excess);
            self.v.shrink_to(2 * self.v.len());
        }
        self.low = self.v.len();
        excess
    }

    pub fn len(&self) -> usize {
        self.v.len()
    }

    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::Spares;

    #[test]
    fn bounded_and_trimmed_to_what_was_used() {
        let mut s = Spares::new(10);
        for i in 0..20 {
            s.put(i);
        }
        assert_eq!(s.len(), 10);
        assert_eq!(s.trim(2), 0, "the first trim starts the interval");
        assert_eq!(s.take(), Some(9));
        assert_eq!(s.take(), Some(8));
        s.put(8);
        // At most 2 were out at once: 8 sat unused through the interval, all but 2 go.
        assert_eq!(s.trim(2), 6);
        assert_eq!(s.len(), 3);
    }
}
