//! epoll: epoll_create1, epoll_ctl, epoll_wait, and epoll_pwait2 for a timeout finer than a
//! millisecond (with its fallback on kernels without it).

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use crate::counters::{counted, Syscall};

pub fn epoll_create1(flags: i32) -> io::Result<RawFd> {
    // SAFETY: epoll_create1(2) takes a plain integer.
    counted(Syscall::EpollCreate, || unsafe {
        libc::epoll_create1(flags) as libc::c_long
    })
    .map(|r| r as RawFd)
}

#[inline]
pub fn epoll_ctl(epfd: RawFd, op: i32, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: data };
    // SAFETY: `ev` is a valid epoll_event (ignored by the kernel for DEL).
    counted(Syscall::EpollCtl, || unsafe {
        libc::epoll_ctl(epfd, op, fd, &mut ev) as libc::c_long
    })
    .map(drop)
}

#[inline]
pub fn epoll_wait(
    epfd: RawFd,
    events: &mut [libc::epoll_event],
    timeout_ms: i32,
) -> io::Result<usize> {
    let max = events.len().min(i32::MAX as usize) as i32;
    // SAFETY: `events` is valid for writing `max` entries.
    counted(Syscall::EpollWait, || unsafe {
        libc::epoll_wait(epfd, events.as_mut_ptr(), max, timeout_ms) as libc::c_long
    })
    .map(|n| n as usize)
}

static NO_PWAIT2: AtomicBool = AtomicBool::new(false);

/// epoll_pwait2(2): like epoll_wait, with a nanosecond timeout (epoll_wait rounds to whole
/// milliseconds, which makes a schedule of sub-millisecond gaps late). Falls back to
/// epoll_wait on kernels without it. Counted as epoll_wait.
#[inline]
pub fn epoll_wait_precise(
    epfd: RawFd,
    events: &mut [libc::epoll_event],
    timeout: Option<std::time::Duration>,
) -> io::Result<usize> {
    let Some(d) = timeout else {
        return epoll_wait(epfd, events, -1);
    };
    if NO_PWAIT2.load(Relaxed) {
        let ms = d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
        return epoll_wait(epfd, events, ms);
    }
    let ts = libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    };
    let max = events.len().min(i32::MAX as usize) as i32;
    // SAFETY: `events` is valid for `max` entries; `ts` is a valid timespec; no signal mask.
    let r = counted(Syscall::EpollWait, || unsafe {
        libc::epoll_pwait2(epfd, events.as_mut_ptr(), max, &ts, std::ptr::null()) as libc::c_long
    });
    match r {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            NO_PWAIT2.store(true, Relaxed);
            epoll_wait_precise(epfd, events, timeout)
        }
        r => r.map(|n| n as usize),
    }
}
