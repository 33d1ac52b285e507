//! Pipes and what moves bytes through them without a copy: pipe2, the pipe's size
//! (F_SETPIPE_SZ, F_GETPIPE_SZ), splice, tee, and FIONREAD (pipes and sockets alike).

use std::io;
use std::os::fd::RawFd;

use crate::counters::{counted, Syscall};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{close, read, thread_counters, would_block, write};

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
        // The EAGAIN is a "not yet", counted apart from errors.
        assert_eq!(d.errors(Syscall::Splice), 0);
        assert_eq!(d.would_block(Syscall::Splice), 1);
        assert_eq!(d.calls(Syscall::Tee), 2);
        assert_eq!(d.calls(Syscall::Fcntl), 2);
    }
}
