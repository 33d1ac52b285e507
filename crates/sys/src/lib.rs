//! evlab-sys: counted syscalls, and the safe wrappers of the process-level calls evlab makes.
//!
//! Every syscall the server and the load generator make goes through these wrappers. Each thread
//! owns a block of counters that only it writes (a relaxed load and store, no locked instruction on
//! the hot path); any thread may read every block through [`ThreadCounters`] handles or
//! [`snapshot_all`]. With profiling on ([`set_profiling`]) each call is also timed with the vDSO
//! clock, which is how evlab prints the paper's Table 1 (share of time per syscall) without gprof.
//!
//! It also has the uncounted, safe wrappers for process-level calls (limits, usage, signals,
//! `uname`, users, capabilities, fork-to-exec setup) that the other crates need, and the
//! counting allocator of the allocation tests ([`alloc_count`]). `unsafe` stays in this crate,
//! each block with its SAFETY line; the only other places that have any are the readiness
//! mechanisms of `evlab-poll`, the io_uring submissions of the completion engines and the
//! micro-benchmarks' own process and io_uring helpers (`crates/micro/src/os.rs`).

use std::ffi::CStr;
use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd as StdOwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

pub mod alloc_count;
pub mod cgroup;
mod mapping;
mod process;
pub use mapping::{Advice, Mapping};
pub use process::*;
mod prefork;
pub use prefork::{
    fork_run, pipe_blocking, reap_any, threads_in_process, unblock_signals_in_this_thread,
    wait_child, ChildExit, SharedCells,
};

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
}

impl ThreadCounters {
    fn new() -> ThreadCounters {
        ThreadCounters {
            calls: std::array::from_fn(|_| AtomicU64::new(0)),
            nanos: std::array::from_fn(|_| AtomicU64::new(0)),
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
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

/// Counts summed over threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub calls: [u64; NSYSCALLS],
    pub nanos: [u64; NSYSCALLS],
    pub errors: [u64; NSYSCALLS],
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            calls: [0; NSYSCALLS],
            nanos: [0; NSYSCALLS],
            errors: [0; NSYSCALLS],
        }
    }
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
        }
        d
    }
    /// Non-zero rows: (name, calls, errors, nanos).
    pub fn rows(&self) -> Vec<(&'static str, u64, u64, u64)> {
        Syscall::ALL
            .iter()
            .filter(|s| self.calls(**s) > 0)
            .map(|s| (s.name(), self.calls(*s), self.errors(*s), self.nanos(*s)))
            .collect()
    }
}

/// Runs `f` as syscall `sc`: counts it, times it when profiling, and turns -1 into errno.
#[inline(always)]
fn counted(sc: Syscall, f: impl FnOnce() -> libc::c_long) -> io::Result<libc::c_long> {
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
        if r < 0 {
            ThreadCounters::bump(&c.errors[i], 1);
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
        if r.is_err() {
            ThreadCounters::bump(&c.errors[i], 1);
        }
        r
    })
}

// ---- sockets ----

pub fn socket(domain: i32, ty: i32, proto: i32) -> io::Result<RawFd> {
    // SAFETY: socket(2) takes plain integers.
    counted(Syscall::Socket, || unsafe {
        libc::socket(domain, ty, proto) as libc::c_long
    })
    .map(|r| r as RawFd)
}

/// A `sockaddr_storage` and its length for an IPv4 or IPv6 address.
pub fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage, which is suitably aligned.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage, which is suitably aligned.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

fn from_sockaddr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            let ip = std::net::Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::new(ip.into(), u16::from_be(sin.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::new(ip.into(), u16::from_be(sin6.sin6_port)))
        }
        _ => None,
    }
}

pub fn bind(fd: RawFd, addr: &SocketAddr) -> io::Result<()> {
    let (ss, len) = sockaddr(addr);
    // SAFETY: `ss` holds a valid address of length `len`.
    counted(Syscall::Bind, || unsafe {
        libc::bind(fd, &ss as *const _ as *const libc::sockaddr, len) as libc::c_long
    })
    .map(drop)
}

pub fn listen(fd: RawFd, backlog: i32) -> io::Result<()> {
    // SAFETY: listen(2) takes plain integers.
    counted(Syscall::Listen, || unsafe {
        libc::listen(fd, backlog) as libc::c_long
    })
    .map(drop)
}

/// connect(2); a non-blocking socket answers `Err(EINPROGRESS)`, which callers expect.
pub fn connect(fd: RawFd, addr: &SocketAddr) -> io::Result<()> {
    let (ss, len) = sockaddr(addr);
    // SAFETY: `ss` holds a valid address of length `len`.
    counted(Syscall::Connect, || unsafe {
        libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len) as libc::c_long
    })
    .map(drop)
}

pub fn getsockname(fd: RawFd) -> io::Result<SocketAddr> {
    // SAFETY: zeroed sockaddr_storage is valid; the kernel writes at most `len` bytes.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `ss` and `len` are valid for writing.
    counted(Syscall::Getsockname, || unsafe {
        libc::getsockname(fd, &mut ss as *mut _ as *mut libc::sockaddr, &mut len) as libc::c_long
    })?;
    from_sockaddr(&ss).ok_or_else(|| io::Error::other("not an inet socket"))
}

/// accept4(2) with the given flags (SOCK_NONBLOCK | SOCK_CLOEXEC, typically).
#[inline]
/// accept4(2) that also says who connected (the address costs no syscall of its own).
pub fn accept4_peer(fd: RawFd, flags: i32) -> io::Result<(RawFd, Option<SocketAddr>)> {
    // SAFETY: zeroed sockaddr_storage is valid; the kernel writes at most `len` bytes.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `ss` and `len` are valid for writing.
    let r = counted(Syscall::Accept4, || unsafe {
        libc::accept4(
            fd,
            &mut ss as *mut _ as *mut libc::sockaddr,
            &mut len,
            flags,
        ) as libc::c_long
    })?;
    Ok((r as RawFd, from_sockaddr(&ss)))
}

/// getpeername(2).
pub fn getpeername(fd: RawFd) -> io::Result<SocketAddr> {
    // SAFETY: zeroed sockaddr_storage is valid; the kernel writes at most `len` bytes.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `ss` and `len` are valid for writing.
    counted(Syscall::Getpeername, || unsafe {
        libc::getpeername(fd, &mut ss as *mut _ as *mut libc::sockaddr, &mut len) as libc::c_long
    })?;
    from_sockaddr(&ss).ok_or_else(|| io::Error::other("not an inet socket"))
}

pub fn accept4(fd: RawFd, flags: i32) -> io::Result<RawFd> {
    // SAFETY: null address pointers are allowed by accept4(2).
    counted(Syscall::Accept4, || unsafe {
        libc::accept4(fd, std::ptr::null_mut(), std::ptr::null_mut(), flags) as libc::c_long
    })
    .map(|r| r as RawFd)
}

pub fn setsockopt_int(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the option value is a valid c_int of the given size.
    counted(Syscall::Setsockopt, || unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &value as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        ) as libc::c_long
    })
    .map(drop)
}

/// SO_LINGER: `Some(0)` makes close(2) send RST and skip TIME_WAIT.
pub fn set_linger(fd: RawFd, secs: Option<i32>) -> io::Result<()> {
    let l = libc::linger {
        l_onoff: secs.is_some() as i32,
        l_linger: secs.unwrap_or(0),
    };
    // SAFETY: `l` is a valid linger struct of the given size.
    counted(Syscall::Setsockopt, || unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        ) as libc::c_long
    })
    .map(drop)
}

pub fn getsockopt_int(fd: RawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut v: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writing.
    counted(Syscall::Getsockopt, || unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut v as *mut i32 as *mut libc::c_void,
            &mut len,
        ) as libc::c_long
    })?;
    Ok(v)
}

/// The pending error of a socket (SO_ERROR), as an `io::Error` if there is one.
pub fn take_socket_error(fd: RawFd) -> io::Result<Option<io::Error>> {
    let e = getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_ERROR)?;
    Ok(if e == 0 {
        None
    } else {
        Some(io::Error::from_raw_os_error(e))
    })
}

// ---- data ----

#[inline]
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writing `buf.len()` bytes.
    counted(Syscall::Read, || unsafe {
        libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) as libc::c_long
    })
    .map(|n| n as usize)
}

/// read(2) into the spare capacity of `buf`, extending its length by what was read.
#[inline]
pub fn read_into(fd: RawFd, buf: &mut Vec<u8>) -> io::Result<usize> {
    read_into_max(fd, buf, usize::MAX)
}

/// read(2) of at most `max` bytes into the spare capacity of `buf`, extending its length by
/// what was read.
#[inline]
pub fn read_into_max(fd: RawFd, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
    let spare: &mut [MaybeUninit<u8>] = buf.spare_capacity_mut();
    let (ptr, cap) = (spare.as_mut_ptr(), spare.len().min(max));
    // SAFETY: the spare capacity is valid for writing `cap` bytes.
    let n = counted(Syscall::Read, || unsafe {
        libc::read(fd, ptr as *mut libc::c_void, cap) as libc::c_long
    })? as usize;
    // SAFETY: the kernel initialised the first `n` bytes of the spare capacity.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// pread(2) of at most `max` bytes at `offset` into the spare capacity of `buf`, extending its
/// length by what was read.
#[inline]
pub fn pread_into_max(fd: RawFd, buf: &mut Vec<u8>, offset: u64, max: usize) -> io::Result<usize> {
    let spare: &mut [MaybeUninit<u8>] = buf.spare_capacity_mut();
    let (ptr, cap) = (spare.as_mut_ptr(), spare.len().min(max));
    // SAFETY: the spare capacity is valid for writing `cap` bytes.
    let n = counted(Syscall::Pread, || unsafe {
        libc::pread(fd, ptr as *mut libc::c_void, cap, offset as libc::off_t) as libc::c_long
    })? as usize;
    // SAFETY: the kernel initialised the first `n` bytes of the spare capacity.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

#[inline]
pub fn recv(fd: RawFd, buf: &mut [u8], flags: i32) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writing `buf.len()` bytes.
    counted(Syscall::Recv, || unsafe {
        libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), flags) as libc::c_long
    })
    .map(|n| n as usize)
}

#[inline]
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reading `buf.len()` bytes.
    counted(Syscall::Write, || unsafe {
        libc::write(fd, buf.as_ptr() as *const libc::c_void, buf.len()) as libc::c_long
    })
    .map(|n| n as usize)
}

/// send(2) with MSG_NOSIGNAL always added, so a reset peer gives EPIPE rather than SIGPIPE.
#[inline]
pub fn send(fd: RawFd, buf: &[u8], flags: i32) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reading `buf.len()` bytes.
    counted(Syscall::Send, || unsafe {
        libc::send(
            fd,
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            flags | libc::MSG_NOSIGNAL,
        ) as libc::c_long
    })
    .map(|n| n as usize)
}

#[inline]
pub fn writev(fd: RawFd, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    let n = bufs.len().min(libc::UIO_MAXIOV as usize);
    // SAFETY: IoSlice is ABI-compatible with iovec; `bufs` is valid for `n` entries.
    counted(Syscall::Writev, || unsafe {
        libc::writev(fd, bufs.as_ptr() as *const libc::iovec, n as i32) as libc::c_long
    })
    .map(|n| n as usize)
}

/// sendfile(2) from `in_fd` at `*offset`, advancing it.
#[inline]
pub fn sendfile(out_fd: RawFd, in_fd: RawFd, offset: &mut i64, count: usize) -> io::Result<usize> {
    // SAFETY: `offset` is a valid, writable off_t.
    counted(Syscall::Sendfile, || unsafe {
        libc::sendfile(out_fd, in_fd, offset as *mut i64, count) as libc::c_long
    })
    .map(|n| n as usize)
}

#[inline]
pub fn close(fd: RawFd) -> io::Result<()> {
    // SAFETY: the caller owns `fd` and does not use it again.
    counted(Syscall::Close, || unsafe {
        libc::close(fd) as libc::c_long
    })
    .map(drop)
}

pub fn shutdown(fd: RawFd, how: i32) -> io::Result<()> {
    // SAFETY: shutdown(2) takes plain integers.
    counted(Syscall::Shutdown, || unsafe {
        libc::shutdown(fd, how) as libc::c_long
    })
    .map(drop)
}

pub fn eventfd(init: u32, flags: i32) -> io::Result<RawFd> {
    // SAFETY: eventfd(2) takes plain integers.
    counted(Syscall::Eventfd, || unsafe {
        libc::eventfd(init, flags) as libc::c_long
    })
    .map(|r| r as RawFd)
}

/// A non-blocking, close-on-exec pipe: (read end, write end). Not counted: set-up only.
pub fn pipe() -> io::Result<(RawFd, RawFd)> {
    let mut fds = [-1 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2(2) to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

/// A non-blocking, close-on-exec pipe for splicing: (read end, write end). Counted as
/// `pipe2`, unlike [`pipe`]: a proxy creates these while it runs.
pub fn pipe2_counted() -> io::Result<(RawFd, RawFd)> {
    let mut fds = [-1 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2(2) to fill.
    counted(Syscall::Pipe2, || unsafe {
        libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) as libc::c_long
    })?;
    Ok((fds[0], fds[1]))
}

/// fcntl(F_SETPIPE_SZ): asks for a pipe of at least `size` bytes; returns the size granted
/// (a power-of-two number of pages; unprivileged callers are capped by
/// `/proc/sys/fs/pipe-max-size`).
pub fn set_pipe_size(fd: RawFd, size: usize) -> io::Result<usize> {
    let size = size.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: F_SETPIPE_SZ takes an int argument; no memory is involved.
    counted(Syscall::Fcntl, || unsafe {
        libc::fcntl(fd, libc::F_SETPIPE_SZ, size) as libc::c_long
    })
    .map(|n| n as usize)
}

/// fcntl(F_GETPIPE_SZ): the pipe's capacity in bytes.
pub fn pipe_size(fd: RawFd) -> io::Result<usize> {
    // SAFETY: F_GETPIPE_SZ takes no argument; no memory is involved.
    counted(Syscall::Fcntl, || unsafe {
        libc::fcntl(fd, libc::F_GETPIPE_SZ) as libc::c_long
    })
    .map(|n| n as usize)
}

/// splice(2) of up to `len` bytes from `fd_in` to `fd_out` (one of them a pipe), at the
/// descriptors' own positions, with SPLICE_F_NONBLOCK | SPLICE_F_MOVE added to `flags`. With
/// both descriptors non-blocking, EAGAIN means the source is empty or the pipe is full (which
/// one, the caller must tell from what it knows of the pipe). Ok(0) from a socket is its EOF.
#[inline]
pub fn splice(fd_in: RawFd, fd_out: RawFd, len: usize, flags: u32) -> io::Result<usize> {
    let flags = flags | libc::SPLICE_F_NONBLOCK | libc::SPLICE_F_MOVE;
    // SAFETY: null offsets use (and advance) the descriptors' own positions; no memory of
    // ours is read or written.
    counted(Syscall::Splice, || unsafe {
        libc::splice(
            fd_in,
            std::ptr::null_mut(),
            fd_out,
            std::ptr::null_mut(),
            len,
            flags,
        ) as libc::c_long
    })
    .map(|n| n as usize)
}

/// tee(2): duplicates up to `len` bytes at the front of pipe `fd_in` into pipe `fd_out`
/// without consuming them, with SPLICE_F_NONBLOCK. EAGAIN: `fd_in` empty or `fd_out` full.
#[inline]
pub fn tee(fd_in: RawFd, fd_out: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: tee(2) takes descriptors and integers; no memory of ours is involved.
    counted(Syscall::Tee, || unsafe {
        libc::tee(fd_in, fd_out, len, libc::SPLICE_F_NONBLOCK) as libc::c_long
    })
    .map(|n| n as usize)
}

/// ioctl(FIONREAD): the bytes waiting to be read in a pipe or socket. Counted (`ioctl`): the
/// proxy's completion engine asks it of every pipe given back to the pool and after a splice
/// from a socket that found nothing, one a spliced response.
pub fn fionread(fd: RawFd) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which is valid and writable for
    // the call.
    counted(Syscall::Ioctl, || unsafe {
        libc::ioctl(fd, libc::FIONREAD, &mut n as *mut libc::c_int) as libc::c_long
    })?;
    Ok(n.max(0) as usize)
}

/// A blocking TCP connection whose receive buffer is set before it connects, so that the
/// window it advertises stays that small (a slow reader, for tests and the lab).
pub fn connect_with_rcvbuf(addr: &SocketAddr, rcvbuf: i32) -> io::Result<std::net::TcpStream> {
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let fd = socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)?;
    // SAFETY: `fd` is a socket just created here and owned by nobody else.
    let owned = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, rcvbuf)?;
    connect(fd, addr)?;
    Ok(std::net::TcpStream::from(owned))
}

pub fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: all-zero is a valid stat; the kernel fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is valid for writing.
    counted(Syscall::Fstat, || unsafe {
        libc::fstat(fd, &mut st) as libc::c_long
    })?;
    Ok(st)
}

/// openat2(2) with `how` = {`flags`, mode 0, `resolve`}: `path` is resolved from `dir` under
/// the `RESOLVE_*` rules (RESOLVE_BENEATH: never above `dir`, no absolute paths or symlinks).
/// Counted as `open`. ENOSYS before Linux 5.6; seccomp filters may answer EPERM or ENOSYS.
pub fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: i32,
    resolve: u64,
) -> io::Result<StdOwnedFd> {
    // SAFETY: open_how is plain integers, for which all-zero is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = resolve;
    let fd = dir.as_raw_fd();
    // SAFETY: `path` is NUL-terminated and `how` a valid open_how of the size passed; both
    // outlive the call. A descriptor returned is new and owned by nobody else.
    let r = counted(Syscall::Open, || unsafe {
        libc::syscall(
            libc::SYS_openat2,
            fd,
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    })?;
    // SAFETY: `r` is a descriptor the kernel just opened for this call alone.
    Ok(unsafe { StdOwnedFd::from_raw_fd(r as RawFd) })
}

/// openat(2) of `path` relative to `dir` (mode 0: never creates). Counted as `open`.
pub fn openat(dir: BorrowedFd<'_>, path: &CStr, flags: i32) -> io::Result<StdOwnedFd> {
    let fd = dir.as_raw_fd();
    // SAFETY: `path` is NUL-terminated and outlives the call.
    let r = counted(Syscall::Open, || unsafe {
        libc::openat(fd, path.as_ptr(), flags, 0 as libc::c_uint) as libc::c_long
    })?;
    // SAFETY: `r` is a descriptor the kernel just opened for this call alone.
    Ok(unsafe { StdOwnedFd::from_raw_fd(r as RawFd) })
}

// ---- event mechanisms ----

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

// ---- descriptor flags and signal-driven I/O (rtsig) ----

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

/// A non-blocking TCP listening socket (SO_REUSEADDR; SO_REUSEPORT when asked). TCP_NODELAY is set here once: accepted sockets inherit it,
/// so a response that leaves in two writes (head, then sendfile without cork) is never held
/// back by Nagle, at no per-connection cost.
pub fn tcp_listener(
    addr: &std::net::SocketAddr,
    backlog: i32,
    reuseport: bool,
) -> io::Result<RawFd> {
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let fd = socket(
        domain,
        libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        0,
    )?;
    let setup = || -> io::Result<()> {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        if reuseport {
            setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
        }
        setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
        bind(fd, addr)?;
        listen(fd, backlog)?;
        Ok(())
    };
    match setup() {
        Ok(()) => Ok(fd),
        Err(e) => {
            let _ = close(fd);
            Err(e)
        }
    }
}

/// glibc's `malloc_trim(0)`: gives the kernel back the free memory of every malloc arena (its
/// top and whole free pages inside it), so that RSS follows what is in use rather than the
/// highest it ever was. Returns whether anything was released; always false where the C
/// library is not glibc. Not counted: it is a library call (its madvise calls are the kernel's).
pub fn malloc_trim() -> bool {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: malloc_trim takes a size and touches only the allocator's own state.
        unsafe { libc::malloc_trim(0) != 0 }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        false
    }
}

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
    // SAFETY: `set` is a valid sigset_t; the old mask is not asked for.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set.0, std::ptr::null_mut()) };
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

// ---- Linux AIO (aio-poll) ----

/// `IOCB_CMD_POLL` of `<linux/aio_abi.h>` (Linux 4.18).
pub const IOCB_CMD_POLL: u16 = 5;

/// `struct iocb` of `<linux/aio_abi.h>`, little-endian field order (`aio_key` before
/// `aio_rw_flags`). 64 bytes.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Iocb {
    /// Returned in `IoEvent::data`.
    pub aio_data: u64,
    /// Written by the kernel at submission (KIOCB_KEY, 0); io_cancel checks it.
    pub aio_key: u32,
    pub aio_rw_flags: i32,
    pub aio_lio_opcode: u16,
    pub aio_reqprio: i16,
    pub aio_fildes: u32,
    /// For IOCB_CMD_POLL: the poll events asked for.
    pub aio_buf: u64,
    pub aio_nbytes: u64,
    pub aio_offset: i64,
    pub aio_reserved2: u64,
    pub aio_flags: u32,
    pub aio_resfd: u32,
}

/// `struct io_event` of `<linux/aio_abi.h>`. 32 bytes.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct IoEvent {
    /// The iocb's `aio_data`.
    pub data: u64,
    /// The address of the iocb submitted.
    pub obj: u64,
    /// For IOCB_CMD_POLL: the poll bits that were ready, or `-errno`.
    pub res: i64,
    pub res2: i64,
}

#[cfg(target_endian = "little")]
const _: () = assert!(std::mem::size_of::<Iocb>() == 64 && std::mem::size_of::<IoEvent>() == 32);

/// An AIO context (`aio_context_t`).
pub type AioContext = u64;

/// io_setup(2): a context for up to `nr_events` requests in flight. The kernel counts
/// `nr_events` against the system-wide `fs.aio-max-nr` until io_destroy.
pub fn io_setup(nr_events: u32) -> io::Result<AioContext> {
    let mut ctx: AioContext = 0;
    // SAFETY: `ctx` is a valid, writable aio_context_t, zero as io_setup requires.
    counted(Syscall::IoSetup, || unsafe {
        libc::syscall(libc::SYS_io_setup, nr_events, &mut ctx as *mut AioContext)
    })?;
    Ok(ctx)
}

/// io_destroy(2): cancels every request of `ctx`, waits for them, and frees it.
pub fn io_destroy(ctx: AioContext) -> io::Result<()> {
    // SAFETY: io_destroy takes the context by value.
    counted(Syscall::IoDestroy, || unsafe {
        libc::syscall(libc::SYS_io_destroy, ctx)
    })
    .map(drop)
}

/// io_submit(2): submits `iocbs` in order; returns how many were taken (fewer when one fails:
/// its error is the call's only if it is the first).
///
/// # Safety
/// Each pointer must be valid for reads and writes of an [`Iocb`] for the duration of the call
/// (the kernel copies each and writes its `aio_key`), and, to be cancelled later with
/// [`io_cancel`], stay valid at the same address until its completion is reaped.
pub unsafe fn io_submit(ctx: AioContext, iocbs: &[*mut Iocb]) -> io::Result<usize> {
    // SAFETY: the caller guarantees the pointers; the array itself is valid for its length.
    counted(Syscall::IoSubmit, || unsafe {
        libc::syscall(
            libc::SYS_io_submit,
            ctx,
            iocbs.len() as libc::c_long,
            iocbs.as_ptr(),
        )
    })
    .map(|n| n as usize)
}

/// io_getevents(2): waits until at least `min_nr` completions are there (or `timeout` passes)
/// and takes up to `events.len()` of them.
pub fn io_getevents(
    ctx: AioContext,
    min_nr: usize,
    events: &mut [IoEvent],
    timeout: Option<std::time::Duration>,
) -> io::Result<usize> {
    let mut ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_mut()
        .map_or(std::ptr::null_mut(), |t| t as *mut libc::timespec);
    let max = events.len().min(i32::MAX as usize) as libc::c_long;
    // SAFETY: `events` is valid for writing `max` entries; `tsp` is null or a valid timespec.
    counted(Syscall::IoGetevents, || unsafe {
        libc::syscall(
            libc::SYS_io_getevents,
            ctx,
            min_nr.min(max as usize) as libc::c_long,
            max,
            events.as_mut_ptr(),
            tsp,
        )
    })
    .map(|n| n as usize)
}

/// io_cancel(2) of the request submitted from `iocb`. A poll being cancelled answers
/// EINPROGRESS and still posts a completion; a request already completed answers EINVAL.
///
/// # Safety
/// `iocb` must be valid for reads of an [`Iocb`] (the kernel reads its `aio_key`).
pub unsafe fn io_cancel(ctx: AioContext, iocb: *mut Iocb) -> io::Result<()> {
    let mut result = IoEvent::default();
    // SAFETY: the caller guarantees `iocb`; `result` is a valid, writable io_event.
    counted(Syscall::IoCancel, || unsafe {
        libc::syscall(libc::SYS_io_cancel, ctx, iocb, &mut result as *mut IoEvent)
    })
    .map(drop)
}

/// Closes a descriptor when dropped (for descriptors owned by a mechanism).
#[derive(Debug)]
pub struct OwnedFd(pub RawFd);

impl Drop for OwnedFd {
    fn drop(&mut self) {
        if self.0 >= 0 {
            let _ = close(self.0);
        }
    }
}

/// True for the errno values that mean "try again later" on a non-blocking descriptor.
#[inline]
pub fn would_block(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn splice_and_tee_move_bytes_between_pipes_and_are_counted() {
        let before = thread_counters().snapshot();
        let (a_r, a_w) = pipe2_counted().unwrap();
        let (b_r, b_w) = pipe2_counted().unwrap();
        let (c_r, c_w) = pipe2_counted().unwrap();
        let granted = set_pipe_size(a_r, 128 * 1024).unwrap();
        assert!(granted >= 128 * 1024, "{granted}");
        assert_eq!(pipe_size(a_w).unwrap(), granted);
        assert_eq!(write(a_w, b"hello splice").unwrap(), 12);
        assert_eq!(fionread(a_r).unwrap(), 12);
        // tee copies without consuming; splice then moves the same bytes on.
        assert_eq!(tee(a_r, b_w, 64).unwrap(), 12);
        assert_eq!(splice(a_r, c_w, 5, 0).unwrap(), 5);
        let mut buf = [0u8; 32];
        assert_eq!(read(b_r, &mut buf).unwrap(), 12);
        assert_eq!(&buf[..12], b"hello splice");
        assert_eq!(read(c_r, &mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        // Empty source, non-blocking: EAGAIN, not a sleep.
        assert!(would_block(&splice(b_r, c_w, 5, 0).unwrap_err()));
        assert!(would_block(&tee(b_r, c_w, 5).unwrap_err()));
        for fd in [a_r, a_w, b_r, b_w, c_r, c_w] {
            close(fd).unwrap();
        }
        let d = thread_counters().snapshot().since(&before);
        assert_eq!(d.calls(Syscall::Pipe2), 3);
        assert_eq!(d.calls(Syscall::Splice), 2);
        assert_eq!(d.errors(Syscall::Splice), 1);
        assert_eq!(d.calls(Syscall::Tee), 2);
        assert_eq!(d.calls(Syscall::Fcntl), 2);
    }

    #[test]
    fn sockaddr_round_trips() {
        for a in ["127.0.0.1:8080", "[::1]:443"] {
            let addr: SocketAddr = a.parse().unwrap();
            let (ss, _) = sockaddr(&addr);
            assert_eq!(from_sockaddr(&ss), Some(addr));
        }
    }
}
