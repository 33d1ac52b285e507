//! poll(2), and the raw select(2) syscall over bitmaps of any size (glibc's fd_set stops at
//! 1,024 descriptors).

use std::io;

use crate::counters::{counted, Syscall};

#[inline]
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: `fds` is valid for reading and writing `fds.len()` entries.
    counted(Syscall::Poll, || unsafe {
        libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) as libc::c_long
    })
    .map(|n| n as usize)
}

/// The raw select(2) syscall over bitmaps of `nfds` bits (rounded up to whole words). glibc's
/// wrapper would do too, but FD_SET and friends stop at 1,024; the syscall itself takes any
/// `nfds` up to the descriptor limit.
///
/// # Safety
/// Each non-null pointer must point at `nfds.div_ceil(64)` writable words.
#[inline]
pub unsafe fn select_raw(
    nfds: i32,
    read: *mut u64,
    write: *mut u64,
    except: *mut u64,
    timeout: Option<std::time::Duration>,
) -> io::Result<usize> {
    let mut tv = timeout.map(|d| libc::timeval {
        tv_sec: d.as_secs() as libc::time_t,
        tv_usec: d.subsec_micros() as libc::suseconds_t,
    });
    let tvp = tv
        .as_mut()
        .map_or(std::ptr::null_mut(), |t| t as *mut libc::timeval);
    // SAFETY: the caller guarantees the bitmaps cover `nfds` bits; `tvp` is null or valid.
    counted(Syscall::Select, || unsafe {
        libc::syscall(libc::SYS_select, nfds, read, write, except, tvp)
    })
    .map(|n| n as usize)
}
