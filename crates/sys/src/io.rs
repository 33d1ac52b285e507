//! Data on descriptors: read, write, recv, send, writev, sendfile, pread; close and shutdown;
//! eventfd; fstat and the content cache's openat/openat2; [`OwnedFd`] and [`would_block`].

use std::ffi::CStr;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd as StdOwnedFd, RawFd};

use crate::counters::{counted, Syscall};

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
