//! A read-only shared mapping of a whole file, with its advice (`madvise`) and residency
//! (`mincore`): the server's `--file-io mmap` and the read-ahead micro-benchmark. mmap and
//! munmap are counted.

use std::io;
use std::os::fd::RawFd;

/// What `madvise` may be told of a mapping.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Advice {
    /// MADV_SEQUENTIAL: read ahead aggressively, free behind.
    Sequential,
    /// MADV_WILLNEED: start reading the whole range now.
    WillNeed,
}

/// A read-only shared mapping of a whole file, unmapped when dropped.
pub struct Mapping {
    addr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone; reading it from another
// thread is as safe as from this one.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` from offset 0 (`len` > 0).
    pub fn new(fd: RawFd, len: usize) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an empty file cannot be mapped",
            ));
        }
        let mut addr = std::ptr::null_mut();
        // SAFETY: a new read-only shared mapping chosen by the kernel; the result is checked
        // against MAP_FAILED before use.
        crate::counters::counted(crate::Syscall::Mmap, || unsafe {
            addr = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            );
            if addr == libc::MAP_FAILED {
                -1
            } else {
                0
            }
        })?;
        Ok(Mapping { addr, len })
    }

    /// Tells the kernel how the mapping will be read.
    pub fn advise(&self, advice: Advice) -> io::Result<()> {
        let a = match advice {
            Advice::Sequential => libc::MADV_SEQUENTIAL,
            Advice::WillNeed => libc::MADV_WILLNEED,
        };
        // SAFETY: the range is exactly this live mapping.
        if unsafe { libc::madvise(self.addr, self.len, a) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// The mapped bytes (a read faults the pages in). A file truncated under the mapping makes
    /// a read past its new end fault with SIGBUS, which kills the process: map only files that
    /// nothing shortens while they are mapped (a benchmark's, a static document root's).
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `addr` is a live mapping of `len` readable bytes for as long as `self` is;
        // the caller maps only files nothing truncates meanwhile (see above).
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }

    /// The share of the mapping's pages that are in the page cache now (`mincore`), 0 to 1.
    pub fn resident(&self) -> io::Result<f64> {
        // SAFETY: sysconf takes an integer.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
        let pages = self.len.div_ceil(page);
        let mut vec = vec![0u8; pages];
        // SAFETY: `vec` has one byte per page of this live mapping, as mincore requires.
        if unsafe { libc::mincore(self.addr, self.len, vec.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(vec.iter().filter(|b| **b & 1 == 1).count() as f64 / pages as f64)
    }
}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping").field("len", &self.len).finish()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        let _ = crate::counters::counted(crate::Syscall::Munmap, || unsafe {
            libc::munmap(self.addr, self.len) as libc::c_long
        });
    }
}
