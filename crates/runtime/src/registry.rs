//! The workers of one process: their counters, their wakers and the shutdown request, shared
//! between the workers and whoever reads their stats or stops them (the command, a signal).

use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

use evlab_sys::{self as sys, Snapshot, ThreadCounters};

use crate::shutdown::Shutdown;

/// A worker's counters, as far as the registry needs them.
pub trait WorkerCounters {
    /// The worker thread's syscall counters.
    fn syscalls(&self) -> &ThreadCounters;
}

#[derive(Debug)]
pub struct Registry<W> {
    shutdown: Shutdown,
    workers: Mutex<Vec<Arc<W>>>,
    baseline: Mutex<Snapshot>,
}

impl<W> Default for Registry<W> {
    fn default() -> Registry<W> {
        Registry {
            shutdown: Shutdown::default(),
            workers: Mutex::new(Vec::new()),
            baseline: Mutex::new(Snapshot::default()),
        }
    }
}

impl<W: WorkerCounters> Registry<W> {
    /// A worker that came up: its counters, and its waker for [`Registry::request_shutdown`].
    pub fn add(&self, w: Arc<W>, waker: &Waker) {
        self.workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(w);
        self.shutdown.add_waker(waker.tx);
    }

    /// A worker that ends takes its waker out before closing it (its counters stay).
    pub fn remove_waker(&self, waker: &Waker) {
        self.shutdown.remove_waker(waker.tx);
    }

    /// The wakers' descriptors (for a signal handler, which cannot take a lock).
    pub fn wakers(&self) -> Vec<RawFd> {
        self.shutdown.wakers()
    }

    pub fn shutdown_requested(&self) -> bool {
        self.shutdown.requested()
    }

    /// Sets the flag and wakes every worker.
    pub fn request_shutdown(&self) {
        self.shutdown.request();
    }

    /// Every worker's counters, in the order they came up.
    pub fn list(&self) -> Vec<Arc<W>> {
        self.workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Syscalls of all workers since start (or since the last [`Registry::reset_syscalls`]).
    pub fn syscalls(&self) -> Snapshot {
        self.total()
            .since(&self.baseline.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Starts syscall counting afresh (after warm-up, say).
    pub fn reset_syscalls(&self) {
        *self.baseline.lock().unwrap_or_else(|e| e.into_inner()) = self.total();
    }

    fn total(&self) -> Snapshot {
        let mut s = Snapshot::default();
        for w in self.list() {
            w.syscalls().add_to(&mut s);
        }
        s
    }
}

/// A worker's waker: a pipe whose write end a shutdown request (or the signal handler) writes
/// to. Its read end is in the worker's event mechanism; a pipe's read end is never writable,
/// so mechanisms that watch both directions at once (epoll2) are not woken by it for nothing.
#[derive(Debug)]
pub struct Waker {
    /// Read end: watched by the worker.
    pub rx: RawFd,
    /// Write end: written to wake it.
    pub tx: RawFd,
}

impl Waker {
    pub fn new() -> io::Result<Waker> {
        let (rx, tx) = sys::pipe()?;
        Ok(Waker { rx, tx })
    }

    /// Takes what woke the worker; true if something had.
    pub fn drain(&self) -> bool {
        let mut b = [0u8; 8];
        sys::read(self.rx, &mut b).is_ok()
    }

    /// Closes both ends (once: they are -1 after).
    pub fn close(&mut self) {
        for fd in [&mut self.tx, &mut self.rx] {
            if *fd >= 0 {
                let _ = sys::close(*fd);
                *fd = -1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct W(Arc<ThreadCounters>);

    impl WorkerCounters for W {
        fn syscalls(&self) -> &ThreadCounters {
            &self.0
        }
    }

    #[test]
    fn a_shutdown_request_wakes_every_registered_worker() {
        let r: Registry<W> = Registry::default();
        let (mut a, mut b) = (Waker::new().unwrap(), Waker::new().unwrap());
        r.add(Arc::new(W(sys::thread_counters())), &a);
        r.add(Arc::new(W(sys::thread_counters())), &b);
        r.remove_waker(&b);
        assert_eq!(r.wakers(), vec![a.tx]);
        assert_eq!(r.list().len(), 2);
        assert!(!r.shutdown_requested());
        r.request_shutdown();
        assert!(r.shutdown_requested());
        assert!(a.drain());
        assert!(!b.drain(), "a removed waker is not written");
        a.close();
        b.close();
    }
}
