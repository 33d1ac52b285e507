//! Signal-driven I/O (the rtsig mechanism) and the signals it rests on: fcntl's descriptor
//! flags, owner and signal (F_SETOWN_EX, F_SETSIG) and the constants libc lacks, signal sets and
//! the per-thread mask, sigtimedwait with its SIGPOLL payload, gettid and tgkill.

use std::io;
use std::os::fd::RawFd;

use crate::counters::{counted, Syscall};

// ---- descriptor flags and owners ----

/// fcntl(2) commands and values the libc crate does not define for every target
/// (`<linux/fcntl.h>`, `<asm-generic/siginfo.h>`).
pub const F_SETSIG: i32 = 10;
pub const F_GETSIG: i32 = 11;
pub const F_SETOWN_EX: i32 = 15;
pub const F_GETOWN_EX: i32 = 16;
pub const F_OWNER_TID: i32 = 0;
pub const F_OWNER_PID: i32 = 1;
/// `si_code` of a signal raised for I/O readiness (`POLL_IN` … `POLL_HUP`); `si_band` holds the
/// poll bits.
pub const POLL_IN: i32 = 1;
pub const POLL_OUT: i32 = 2;
pub const POLL_MSG: i32 = 3;
pub const POLL_ERR: i32 = 4;
pub const POLL_PRI: i32 = 5;
pub const POLL_HUP: i32 = 6;

/// fcntl(2) with an integer argument (F_GETFL, F_SETFL, F_SETSIG, F_GETSIG, …).
#[inline]
pub fn fcntl_int(fd: RawFd, cmd: i32, arg: i32) -> io::Result<i32> {
    // SAFETY: the commands taken here read an integer argument, never a pointer.
    counted(Syscall::Fcntl, || unsafe {
        libc::fcntl(fd, cmd, arg) as libc::c_long
    })
    .map(|r| r as i32)
}

/// `struct f_owner_ex` of `<linux/fcntl.h>`.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FOwnerEx {
    pub kind: i32,
    pub pid: libc::pid_t,
}

/// F_SETOWN_EX: who receives the signals of `fd`'s file (`F_OWNER_TID`: that one thread).
#[inline]
pub fn fcntl_set_owner(fd: RawFd, owner: FOwnerEx) -> io::Result<()> {
    // SAFETY: `owner` is a valid f_owner_ex, read by the call.
    counted(Syscall::Fcntl, || unsafe {
        libc::fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx) as libc::c_long
    })
    .map(drop)
}

/// F_GETOWN_EX: who receives the signals of `fd`'s file.
pub fn fcntl_get_owner(fd: RawFd) -> io::Result<FOwnerEx> {
    let mut owner = FOwnerEx::default();
    // SAFETY: `owner` is a valid, writable f_owner_ex.
    counted(Syscall::Fcntl, || unsafe {
        libc::fcntl(fd, F_GETOWN_EX, &mut owner as *mut FOwnerEx) as libc::c_long
    })?;
    Ok(owner)
}

// ---- threads, signal sets and masks ----

/// The calling thread's id (what F_OWNER_TID and tgkill name). Not counted: the result is
/// cached per thread by callers.
pub fn gettid() -> libc::pid_t {
    // SAFETY: gettid takes no argument and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// A set of signals.
#[derive(Copy, Clone)]
pub struct SigSet(libc::sigset_t);

impl SigSet {
    pub fn of(sigs: &[i32]) -> io::Result<SigSet> {
        // SAFETY: sigset_t is plain data; sigemptyset initialises it.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid sigset_t.
        if unsafe { libc::sigemptyset(&mut set) } != 0 {
            return Err(io::Error::last_os_error());
        }
        for &s in sigs {
            // SAFETY: `set` is a valid, initialised sigset_t.
            if unsafe { libc::sigaddset(&mut set, s) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(SigSet(set))
    }
}

impl std::fmt::Debug for SigSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigSet")
    }
}

/// Blocks `set` in the calling thread only (pthread_sigmask; the mask is per thread). Not
/// counted: set-up only.
pub fn block_signals_in_this_thread(set: &SigSet) -> io::Result<()> {
    thread_sigmask(libc::SIG_BLOCK, set)
}

/// Unblocks `set` in the calling thread (a forked child undoing the mask its parent blocked
/// before forking, so that no signal is lost in between).
pub fn unblock_signals_in_this_thread(set: &SigSet) -> io::Result<()> {
    thread_sigmask(libc::SIG_UNBLOCK, set)
}

/// pthread_sigmask(`how`, `set`) of the calling thread, without asking for the old mask.
fn thread_sigmask(how: libc::c_int, set: &SigSet) -> io::Result<()> {
    // SAFETY: `set` is a valid sigset_t; the old mask is not asked for.
    let rc = unsafe { libc::pthread_sigmask(how, &set.0, std::ptr::null_mut()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// The first and last real-time signal numbers this libc leaves to applications.
pub fn sigrt_range() -> (i32, i32) {
    (libc::SIGRTMIN(), libc::SIGRTMAX())
}

/// What `sigtimedwait` returned: the signal and, for a signal raised by I/O readiness
/// (F_SETSIG), the descriptor and its poll bits.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SigPoll {
    pub signo: i32,
    pub code: i32,
    /// `si_band`: POLLIN, POLLOUT, … for `code` in `POLL_IN..=POLL_HUP`.
    pub band: i64,
    /// `si_fd`, for `code` in `POLL_IN..=POLL_HUP`.
    pub fd: RawFd,
}

/// The x86_64/aarch64 layout of `siginfo_t` for SIGPOLL (`<asm-generic/siginfo.h>`): three
/// ints, the union aligned to 8, `si_band` (a long) then `si_fd`; 128 bytes in all.
#[cfg(target_pointer_width = "64")]
#[repr(C)]
struct SigInfoPoll {
    signo: i32,
    errno: i32,
    code: i32,
    _pad: i32,
    band: i64,
    fd: i32,
    _rest: [u8; 100],
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<SigInfoPoll>() == std::mem::size_of::<libc::siginfo_t>());

// ---- waiting for and sending signals ----

/// sigtimedwait(2): takes one pending signal of `set` (the calling thread's own queue first,
/// then the process's), waiting up to `timeout` (`None`: for ever; zero: just look). EAGAIN
/// when none came in time, EINTR when a handler ran.
#[cfg(target_pointer_width = "64")]
#[inline]
pub fn sigtimedwait(set: &SigSet, timeout: Option<std::time::Duration>) -> io::Result<SigPoll> {
    // SAFETY: all-zero is a valid siginfo.
    let mut info: SigInfoPoll = unsafe { std::mem::zeroed() };
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `set` is valid; `info` has the size and alignment of siginfo_t; `tsp` is null or
    // a valid timespec.
    let signo = counted(Syscall::SigTimedWait, || unsafe {
        libc::sigtimedwait(
            &set.0,
            &mut info as *mut SigInfoPoll as *mut libc::siginfo_t,
            tsp,
        ) as libc::c_long
    })?;
    let poll = (POLL_IN..=POLL_HUP).contains(&info.code);
    Ok(SigPoll {
        signo: signo as i32,
        code: info.code,
        band: if poll { info.band } else { 0 },
        fd: if poll { info.fd } else { -1 },
    })
}

/// tgkill(2): sends `sig` to one thread of this process.
pub fn tgkill(tid: libc::pid_t, sig: i32) -> io::Result<()> {
    let pid = std::process::id() as libc::pid_t;
    // SAFETY: tgkill takes plain integers; the target is a thread of this process.
    counted(Syscall::Tgkill, || unsafe {
        libc::syscall(libc::SYS_tgkill, pid, tid, sig)
    })
    .map(drop)
}
