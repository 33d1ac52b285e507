//! The syscall counters: the [`Syscall`] list, one block of counters per thread written only by
//! that thread ([`ThreadCounters`]), their sums ([`Snapshot`], [`snapshot_all`]), the profiling
//! switch, and `counted`, through which every counted wrapper of this crate makes its call.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

macro_rules! syscalls {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// The syscalls evlab counts.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        #[repr(usize)]
        pub enum Syscall { $($variant),* }

        impl Syscall {
            pub const ALL: &'static [Syscall] = &[$(Syscall::$variant),*];
            pub fn name(self) -> &'static str {
                match self { $(Syscall::$variant => $name),* }
            }
        }
    };
}

syscalls! {
    Accept4 => "accept4",
    Read => "read",
    Recv => "recv",
    Write => "write",
    Writev => "writev",
    Send => "send",
    Sendfile => "sendfile",
    Close => "close",
    Shutdown => "shutdown",
    Socket => "socket",
    Bind => "bind",
    Listen => "listen",
    Connect => "connect",
    Setsockopt => "setsockopt",
    Getsockopt => "getsockopt",
    Getsockname => "getsockname",
    EpollCreate => "epoll_create1",
    EpollCtl => "epoll_ctl",
    EpollWait => "epoll_wait",
    Select => "select",
    Poll => "poll",
    IoUringSetup => "io_uring_setup",
    IoUringEnter => "io_uring_enter",
    IoUringRegister => "io_uring_register",
    Open => "open",
    Fstat => "fstat",
    Eventfd => "eventfd",
    Fcntl => "fcntl",
    SigTimedWait => "sigtimedwait",
    Tgkill => "tgkill",
    IoSetup => "io_setup",
    IoDestroy => "io_destroy",
    IoSubmit => "io_submit",
    IoGetevents => "io_getevents",
    IoCancel => "io_cancel",
    Splice => "splice",
    Tee => "tee",
    Pipe2 => "pipe2",
    Getpeername => "getpeername",
    Pread => "pread64",
    Mmap => "mmap",
    Munmap => "munmap",
    Ioctl => "ioctl",
}

/// Number of counted syscalls.
pub const NSYSCALLS: usize = Syscall::ALL.len();

static PROFILING: AtomicBool = AtomicBool::new(false);

/// Turns per-call timing on or off for every thread.
pub fn set_profiling(on: bool) {
    PROFILING.store(on, Relaxed);
}

pub fn profiling() -> bool {
    PROFILING.load(Relaxed)
}

/// One thread's counters. Only the owning thread writes; anyone may read.
#[derive(Debug)]
pub struct ThreadCounters {
    calls: [AtomicU64; NSYSCALLS],
    nanos: [AtomicU64; NSYSCALLS],
    errors: [AtomicU64; NSYSCALLS],
    would_block: [AtomicU64; NSYSCALLS],
}

impl ThreadCounters {
    fn new() -> ThreadCounters {
        ThreadCounters {
            calls: std::array::from_fn(|_| AtomicU64::new(0)),
            nanos: std::array::from_fn(|_| AtomicU64::new(0)),
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
            would_block: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    #[inline]
    fn bump(cell: &AtomicU64, by: u64) {
        // Single writer: a plain load and store, no locked read-modify-write.
        cell.store(cell.load(Relaxed).wrapping_add(by), Relaxed);
    }

    /// Adds this block to a snapshot.
    pub fn add_to(&self, snap: &mut Snapshot) {
        for i in 0..NSYSCALLS {
            snap.calls[i] += self.calls[i].load(Relaxed);
            snap.nanos[i] += self.nanos[i].load(Relaxed);
            snap.errors[i] += self.errors[i].load(Relaxed);
            snap.would_block[i] += self.would_block[i].load(Relaxed);
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot::default();
        self.add_to(&mut s);
        s
    }
}

fn registry() -> &'static Mutex<Vec<Arc<ThreadCounters>>> {
    static REG: OnceLock<Mutex<Vec<Arc<ThreadCounters>>>> = OnceLock::new();
    REG.get_or_init(|| Mutex::new(Vec::new()))
}

thread_local! {
    static COUNTERS: Arc<ThreadCounters> = {
        let c = Arc::new(ThreadCounters::new());
        registry().lock().unwrap_or_else(|e| e.into_inner()).push(c.clone());
        c
    };
}

/// The calling thread's counters, to be read later from another thread.
pub fn thread_counters() -> Arc<ThreadCounters> {
    COUNTERS.with(|c| c.clone())
}

/// The sum over every thread of this process that ever made a counted call.
pub fn snapshot_all() -> Snapshot {
    let mut s = Snapshot::default();
    for c in registry().lock().unwrap_or_else(|e| e.into_inner()).iter() {
        c.add_to(&mut s);
    }
    s
}

/// Counts summed over threads. A call that would have blocked (EAGAIN, EINPROGRESS, EALREADY:
/// a nonblocking descriptor's answer "not yet") is counted in `would_block`, not in `errors`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub calls: [u64; NSYSCALLS],
    pub nanos: [u64; NSYSCALLS],
    pub errors: [u64; NSYSCALLS],
    pub would_block: [u64; NSYSCALLS],
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            calls: [0; NSYSCALLS],
            nanos: [0; NSYSCALLS],
            errors: [0; NSYSCALLS],
            would_block: [0; NSYSCALLS],
        }
    }
}

/// One syscall's counts, as [`Snapshot::rows`] gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallRow {
    pub name: &'static str,
    /// Calls, including those that failed or would have blocked.
    pub calls: u64,
    pub errors: u64,
    pub would_block: u64,
    /// Nanoseconds inside the call (when profiling).
    pub nanos: u64,
}

/// Whether an error is a nonblocking call's "not yet" rather than a failure.
#[inline]
pub fn is_would_block(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN | libc::EINPROGRESS | libc::EALREADY)
    )
}

impl Snapshot {
    pub fn calls(&self, s: Syscall) -> u64 {
        self.calls[s as usize]
    }
    pub fn nanos(&self, s: Syscall) -> u64 {
        self.nanos[s as usize]
    }
    pub fn errors(&self, s: Syscall) -> u64 {
        self.errors[s as usize]
    }
    pub fn would_block(&self, s: Syscall) -> u64 {
        self.would_block[s as usize]
    }
    pub fn total_calls(&self) -> u64 {
        self.calls.iter().sum()
    }
    pub fn total_nanos(&self) -> u64 {
        self.nanos.iter().sum()
    }
    /// `self - earlier`, saturating.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let mut d = Snapshot::default();
        for i in 0..NSYSCALLS {
            d.calls[i] = self.calls[i].saturating_sub(earlier.calls[i]);
            d.nanos[i] = self.nanos[i].saturating_sub(earlier.nanos[i]);
            d.errors[i] = self.errors[i].saturating_sub(earlier.errors[i]);
            d.would_block[i] = self.would_block[i].saturating_sub(earlier.would_block[i]);
        }
        d
    }
    /// The syscalls made at least once, in [`Syscall::ALL`]'s order.
    pub fn rows(&self) -> Vec<SyscallRow> {
        Syscall::ALL
            .iter()
            .filter(|s| self.calls(**s) > 0)
            .map(|&s| SyscallRow {
                name: s.name(),
                calls: self.calls(s),
                errors: self.errors(s),
                would_block: self.would_block(s),
                nanos: self.nanos(s),
            })
            .collect()
    }
}

/// Runs `f` as syscall `sc`: counts it, times it when profiling, and turns -1 into errno (read
/// at once, before the clock or the counters run any code of their own).
#[inline(always)]
pub(crate) fn counted(sc: Syscall, f: impl FnOnce() -> libc::c_long) -> io::Result<libc::c_long> {
    count_io(sc, || {
        let r = f();
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r)
        }
    })
}

/// Counts and times an externally made syscall (for callers that must issue one themselves).
#[inline]
pub fn count(sc: Syscall, f: impl FnOnce() -> libc::c_long) -> io::Result<libc::c_long> {
    counted(sc, f)
}

/// Counts and times a syscall made inside a library (the io-uring crate's `io_uring_enter`).
#[inline(always)]
pub fn count_io<T>(sc: Syscall, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    COUNTERS.with(|c| {
        let i = sc as usize;
        ThreadCounters::bump(&c.calls[i], 1);
        let r = if PROFILING.load(Relaxed) {
            let t = Instant::now();
            let r = f();
            ThreadCounters::bump(&c.nanos[i], t.elapsed().as_nanos() as u64);
            r
        } else {
            f()
        };
        if let Err(e) = &r {
            if is_would_block(e) {
                ThreadCounters::bump(&c.would_block[i], 1);
            } else {
                ThreadCounters::bump(&c.errors[i], 1);
            }
        }
        r
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{close, eventfd, read, write};

    #[test]
    fn counts_calls_and_errors_per_thread() {
        let before = thread_counters().snapshot();
        let mut buf = [0u8; 4];
        assert!(read(-1, &mut buf).is_err());
        let fd = eventfd(0, libc::EFD_NONBLOCK).unwrap();
        assert!(write(fd, &1u64.to_ne_bytes()).is_ok());
        close(fd).unwrap();
        let d = thread_counters().snapshot().since(&before);
        assert_eq!(d.calls(Syscall::Read), 1);
        assert_eq!(d.errors(Syscall::Read), 1);
        assert_eq!(d.calls(Syscall::Write), 1);
        assert_eq!(d.errors(Syscall::Write), 0);
        assert_eq!(d.calls(Syscall::Close), 1);
        // A read of an empty nonblocking eventfd would block: counted so, not as an error.
        let fd = eventfd(0, libc::EFD_NONBLOCK).unwrap();
        let before = thread_counters().snapshot();
        assert!(read(fd, &mut [0u8; 8]).is_err());
        close(fd).unwrap();
        let d = thread_counters().snapshot().since(&before);
        assert_eq!(
            (d.errors(Syscall::Read), d.would_block(Syscall::Read)),
            (0, 1)
        );
        let row = d.rows().into_iter().find(|r| r.name == "read").unwrap();
        assert_eq!((row.calls, row.errors, row.would_block), (1, 0, 1));
        // another thread's counts are not this thread's
        std::thread::spawn(|| {
            let _ = close(-1);
        })
        .join()
        .unwrap();
        assert_eq!(
            thread_counters()
                .snapshot()
                .since(&before)
                .calls(Syscall::Close),
            1
        );
        assert!(snapshot_all().calls(Syscall::Close) >= 2);
    }
}
