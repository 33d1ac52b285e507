//! A shutdown request shared by the event loops of one process: a flag, and the write end of
//! each loop's waker pipe, written so that every loop leaves its wait and sees the flag.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;

use evlab_sys as sys;

#[derive(Debug, Default)]
pub struct Shutdown {
    requested: AtomicBool,
    wakers: Mutex<Vec<RawFd>>,
}

impl Shutdown {
    /// A loop's waker (the write end of its pipe) joins those woken by [`Shutdown::request`].
    pub fn add_waker(&self, fd: RawFd) {
        self.wakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(fd);
    }

    /// A loop that ends takes its waker out before closing it.
    pub fn remove_waker(&self, fd: RawFd) {
        self.wakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&w| w != fd);
    }

    /// The wakers' descriptors (for a signal handler, which cannot take a lock).
    pub fn wakers(&self) -> Vec<RawFd> {
        self.wakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn requested(&self) -> bool {
        self.requested.load(Relaxed)
    }

    /// Sets the flag and wakes every loop.
    pub fn request(&self) {
        self.requested.store(true, Relaxed);
        for &fd in self.wakers.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = sys::write(fd, &1u64.to_ne_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_sets_the_flag_and_writes_every_waker() {
        let s = Shutdown::default();
        let (r1, w1) = sys::pipe().unwrap();
        let (r2, w2) = sys::pipe().unwrap();
        s.add_waker(w1);
        s.add_waker(w2);
        s.remove_waker(w2);
        assert_eq!(s.wakers(), vec![w1]);
        assert!(!s.requested());
        s.request();
        assert!(s.requested());
        let mut b = [0u8; 8];
        assert_eq!(sys::read(r1, &mut b).unwrap(), 8);
        assert!(
            sys::read(r2, &mut b).is_err(),
            "a removed waker is not written"
        );
        for fd in [r1, w1, r2, w2] {
            let _ = sys::close(fd);
        }
    }
}
