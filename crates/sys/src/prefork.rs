//! Pre-forked worker processes (Apache's prefork model, `evlab serve --as processes`): forking
//! a child that runs a closure, reaping children, and the anonymous shared mapping through
//! which children publish counters that any of them (or the parent) reads.
//!
//! Fork copies only the calling thread. A child of a threaded process inherits every lock
//! another thread held at that instant (the allocator's, stdout's, a registry's) with nobody
//! left to release it, so [`fork_run`] refuses unless the process runs a single thread: fork
//! first, start threads after (in the parent and in each child). None of this is counted: it
//! is set-up, not a server's work.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::AtomicU64;

/// How many threads this process runs (the `Threads:` line of `/proc/self/status`).
pub fn threads_in_process() -> io::Result<usize> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no Threads: line in /proc/self/status"))
}

/// Forks a child that runs `f` and leaves with the code it returns (101 if it panics); the
/// parent gets the child's pid. The child gets `death_signal` when the parent dies
/// (PR_SET_PDEATHSIG), and ends at once, with 102, if the parent is already gone by then.
///
/// Refused unless the process runs a single thread (see the module's note). The child leaves
/// with `_exit`: no destructor or atexit handler of the parent's state runs twice and nothing
/// buffered is flushed, so `f` must print through stderr (unbuffered) or flush what it wrote.
pub fn fork_run<F: FnOnce() -> i32>(death_signal: libc::c_int, f: F) -> io::Result<u32> {
    let threads = threads_in_process()?;
    if threads != 1 {
        return Err(io::Error::other(format!(
            "cannot fork a worker process: {threads} threads are running, and the child would \
             inherit their locks (fork before starting any thread)"
        )));
    }
    // SAFETY: getpid takes nothing and cannot fail.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the process has one thread (checked above; only this thread could start another),
    // so the child inherits no lock held by a thread it lacks. The child never returns from this
    // function: it runs `f` and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            // SAFETY: prctl(PR_SET_PDEATHSIG) takes plain integers.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, death_signal as libc::c_ulong) };
            // SAFETY: getppid takes nothing and cannot fail.
            let code = if unsafe { libc::getppid() } != parent {
                // The parent died between fork and prctl: nobody would signal this child.
                102
            } else {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101)
            };
            // SAFETY: _exit ends the child at once (see above).
            unsafe { libc::_exit(code) }
        }
        pid => Ok(pid as u32),
    }
}

/// A blocking, close-on-exec pipe: (read end, write end), for a parent to hear its forked
/// children (a child keeps the write end across the fork; no exec closes it).
pub fn pipe_blocking() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2(2) to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created for this call and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// How a child process ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ChildExit {
    Code(i32),
    Signal(i32),
}

impl ChildExit {
    pub fn success(self) -> bool {
        self == ChildExit::Code(0)
    }

    fn of(status: libc::c_int) -> ChildExit {
        if libc::WIFSIGNALED(status) {
            ChildExit::Signal(libc::WTERMSIG(status))
        } else {
            ChildExit::Code(libc::WEXITSTATUS(status))
        }
    }
}

impl std::fmt::Display for ChildExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildExit::Code(c) => write!(f, "exit code {c}"),
            ChildExit::Signal(s) => write!(f, "signal {s}"),
        }
    }
}

/// Reaps one ended child of this process, if any has ended (`waitpid(-1, WNOHANG)`): its pid
/// and how it ended; `None` when children remain but none has ended, ECHILD when none remain.
pub fn reap_any() -> io::Result<Option<(u32, ChildExit)>> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is valid for writing.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            return Ok(None);
        }
        return Ok(Some((r as u32, ChildExit::of(status))));
    }
}

/// Waits for the child `pid` to end (retrying on EINTR).
pub fn wait_child(pid: u32) -> io::Result<ChildExit> {
    if pid == 0 || pid > i32::MAX as u32 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is valid for writing.
        let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        return Ok(ChildExit::of(status));
    }
}

/// `len` 64-bit cells in an anonymous shared mapping (MAP_SHARED | MAP_ANONYMOUS), zeroed:
/// made before a fork, the same memory in the parent and every child, each writing its own
/// cells with relaxed stores and reading the others'. Unmapped when dropped (in each process
/// that drops it).
pub struct SharedCells {
    addr: *mut AtomicU64,
    len: usize,
}

// SAFETY: the cells are atomics, which any thread may read and write; the mapping is owned by
// this value alone and lives as long as it.
unsafe impl Send for SharedCells {}
// SAFETY: as above: shared access goes through `&[AtomicU64]` only.
unsafe impl Sync for SharedCells {}

impl SharedCells {
    pub fn new(len: usize) -> io::Result<SharedCells> {
        let bytes = len.max(1) * std::mem::size_of::<AtomicU64>();
        // SAFETY: a new anonymous shared mapping chosen by the kernel; the result is checked
        // against MAP_FAILED before use.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedCells {
            addr: addr.cast(),
            len,
        })
    }

    pub fn cells(&self) -> &[AtomicU64] {
        // SAFETY: the mapping holds `len` zero-initialised, 8-aligned (page-aligned) u64s,
        // which are valid AtomicU64s; it lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.addr, self.len) }
    }
}

impl std::fmt::Debug for SharedCells {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedCells({})", self.len)
    }
}

impl Drop for SharedCells {
    fn drop(&mut self) {
        let bytes = self.len.max(1) * std::mem::size_of::<AtomicU64>();
        // SAFETY: the mapping was made by `new` with this length and is unmapped once.
        unsafe { libc::munmap(self.addr.cast(), bytes) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn shared_cells_start_zeroed_and_hold_values() {
        let c = SharedCells::new(3).unwrap();
        assert!(c.cells().iter().all(|x| x.load(Relaxed) == 0));
        c.cells()[2].store(7, Relaxed);
        assert_eq!(c.cells()[2].load(Relaxed), 7);
    }

    #[test]
    fn a_blocking_pipe_carries_bytes_and_the_threads_are_counted() {
        use std::io::{Read, Write};
        assert!(threads_in_process().unwrap() >= 1);
        let (r, w) = pipe_blocking().unwrap();
        std::fs::File::from(w).write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        std::fs::File::from(r).read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
    }

    #[test]
    fn fork_is_refused_in_a_threaded_process() {
        // The test harness runs tests on threads of its own.
        let _t = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(2)));
        let e = fork_run(libc::SIGKILL, || 0).unwrap_err();
        assert!(e.to_string().contains("threads are running"), "{e}");
    }
}
