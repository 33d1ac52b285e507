//! The pipes bodies are spliced through: a bounded pool per worker, as HAProxy keeps one.
//!
//! Rules learnt by HAProxy and h2o, kept here:
//! - Pipes are non-blocking (`pipe2(O_NONBLOCK)`, and every splice has SPLICE_F_NONBLOCK), so
//!   a full or empty pipe answers EAGAIN instead of stalling the event loop.
//! - A pipe's capacity is counted in page slots, not bytes: a socket splices in segments that
//!   may fill a slot only partly, so the pipe can refuse more well before it holds its capacity
//!   in bytes. EAGAIN from a splice into a pipe that holds data therefore means "full" (or the
//!   socket is empty — the caller cannot tell, so it drains the pipe first and tries again).
//! - A pipe given back with bytes still inside would hand them to the next transfer: it is
//!   closed, never pooled.
//! - The pool is bounded (`--pipes`, counting pipes in use and idle); when none is free, the
//!   transfer falls back to copying through user space.

use std::io;
use std::os::fd::RawFd;

use evlab_sys as sys;

/// One pipe and what is known of its contents.
#[derive(Debug)]
pub struct Pipe {
    pub rd: RawFd,
    pub wr: RawFd,
    /// Bytes inside.
    pub len: usize,
    /// Capacity in bytes (F_GETPIPE_SZ).
    pub cap: usize,
    /// The last splice into it answered EAGAIN while it held data: take from it before
    /// putting more in.
    pub full: bool,
}

impl Pipe {
    /// Room left by byte count (an upper bound: see the module doc).
    pub fn room(&self) -> usize {
        self.cap.saturating_sub(self.len)
    }
}

/// What the pool did, for the stats.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PipeCounts {
    pub created: u64,
    /// Pipes closed because they still held bytes.
    pub closed_with_data: u64,
    /// Transfers that wanted a pipe and found none.
    pub exhausted: u64,
    /// The most pipes open at once.
    pub max_open: u64,
}

#[derive(Debug)]
pub struct PipePool {
    free: Vec<Pipe>,
    /// Pipes in existence (idle in `free` or lent out).
    open: usize,
    max: usize,
    /// Requested capacity (F_SETPIPE_SZ); 0 keeps the kernel's default.
    size: usize,
    pub counts: PipeCounts,
}

impl PipePool {
    pub fn new(max: usize, size: usize) -> PipePool {
        PipePool {
            free: Vec::new(),
            open: 0,
            max,
            size,
            counts: PipeCounts::default(),
        }
    }

    /// Pipes open now (idle or lent).
    pub fn open(&self) -> usize {
        self.open
    }

    /// Idle pipes.
    pub fn idle(&self) -> usize {
        self.free.len()
    }

    /// Whether `n` pipes could be had now without failing for the bound.
    pub fn available(&self, n: usize) -> bool {
        self.free.len() + (self.max - self.open.min(self.max)) >= n
    }

    /// An empty pipe from the pool, or a new one if the bound allows; `Ok(None)` when the
    /// bound is reached (the caller copies instead).
    pub fn take(&mut self) -> io::Result<Option<Pipe>> {
        if let Some(p) = self.free.pop() {
            return Ok(Some(p));
        }
        if self.open >= self.max {
            self.counts.exhausted += 1;
            return Ok(None);
        }
        let (rd, wr) = sys::pipe2_counted()?;
        let sized = if self.size > 0 {
            sys::set_pipe_size(wr, self.size)
        } else {
            sys::pipe_size(wr)
        };
        let cap = match sized {
            Ok(cap) => cap,
            Err(e) => {
                let _ = sys::close(rd);
                let _ = sys::close(wr);
                return Err(e);
            }
        };
        self.open += 1;
        self.counts.created += 1;
        self.counts.max_open = self.counts.max_open.max(self.open as u64);
        Ok(Some(Pipe {
            rd,
            wr,
            len: 0,
            cap,
            full: false,
        }))
    }

    /// Takes a pipe back: pooled if empty, closed if it still holds bytes.
    pub fn give(&mut self, mut p: Pipe) {
        if p.len == 0 {
            p.full = false;
            self.free.push(p);
        } else {
            self.counts.closed_with_data += 1;
            self.close(p);
        }
    }

    fn close(&mut self, p: Pipe) {
        let _ = sys::close(p.rd);
        let _ = sys::close(p.wr);
        self.open -= 1;
    }

    /// Closes every idle pipe (at the end).
    pub fn clear(&mut self) {
        while let Some(p) = self.free.pop() {
            self.close(p);
        }
    }
}

impl Drop for PipePool {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_reused_and_a_pipe_with_data_is_closed() {
        let mut pool = PipePool::new(2, 0);
        assert!(pool.available(2));
        let a = pool.take().unwrap().unwrap();
        let mut b = pool.take().unwrap().unwrap();
        assert!(a.cap >= 4096 && a.room() == a.cap);
        assert!(!pool.available(1));
        assert!(pool.take().unwrap().is_none());
        assert_eq!(pool.counts.exhausted, 1);
        let a_rd = a.rd;
        pool.give(a);
        assert_eq!(pool.idle(), 1);
        let again = pool.take().unwrap().unwrap();
        assert_eq!(again.rd, a_rd, "an empty pipe is reused");
        sys::write(b.wr, b"left behind").unwrap();
        b.len = 11;
        pool.give(b);
        assert_eq!(pool.counts.closed_with_data, 1);
        assert_eq!(pool.open(), 1);
        pool.give(again);
        assert_eq!((pool.counts.created, pool.counts.max_open), (2, 2));
    }

    #[test]
    fn size_is_asked_for() {
        let mut pool = PipePool::new(1, 256 * 1024);
        let p = pool.take().unwrap().unwrap();
        assert!(p.cap >= 256 * 1024, "{}", p.cap);
        pool.give(p);
    }
}
