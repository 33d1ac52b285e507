//! Safe wrappers for the read-ahead micro-benchmark (`evlab micro readahead`): a file's pages
//! dropped from the page cache and counted there, and a read-only mapping with its advice.
//! None is on a server's hot path; none is counted.

use std::io;
use std::os::fd::RawFd;

/// Writes the file's dirty pages to disk (`fdatasync`), so that they can be dropped.
pub fn fdatasync(fd: RawFd) -> io::Result<()> {
    // SAFETY: fdatasync takes a descriptor and no memory.
    if unsafe { libc::fdatasync(fd) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Asks the kernel to drop the file's clean pages from the page cache
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`): the next read of them goes to the disk.
pub fn drop_cached(fd: RawFd) -> io::Result<()> {
    // SAFETY: posix_fadvise takes a descriptor and integers; offset 0, length 0 is the whole
    // file.
    let r = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

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
        super::counted(super::Syscall::Mmap, || unsafe {
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
        let _ = super::counted(super::Syscall::Munmap, || unsafe {
            libc::munmap(self.addr, self.len) as libc::c_long
        });
    }
}

/// The share of `fd`'s first `len` bytes in the page cache (a mapping made only to ask
/// `mincore`, and touched by nothing).
pub fn resident(fd: RawFd, len: usize) -> io::Result<f64> {
    Mapping::new(fd, len)?.resident()
}

/// The file system `path` is on, by name where evlab knows its magic number (`statfs`).
pub fn filesystem(path: &std::path::Path) -> io::Result<String> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
    // SAFETY: statfs fills the zeroed struct it is given; the path is a valid C string.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let magic = st.f_type as u64;
    Ok(match magic {
        0xEF53 => "ext4".into(),
        0x0102_1994 => "tmpfs".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x794C_7630 => "overlayfs".into(),
        0x6969 => "nfs".into(),
        other => format!("file system 0x{other:x}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_file_read_is_resident_and_a_mapping_reads_its_bytes() {
        let path = std::env::temp_dir().join(format!("evlab-files-{}", std::process::id()));
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        fdatasync(f.as_raw_fd()).unwrap();
        drop(f);
        let f = std::fs::File::open(&path).unwrap();
        let m = Mapping::new(f.as_raw_fd(), 1 << 20).unwrap();
        m.advise(Advice::Sequential).unwrap();
        m.advise(Advice::WillNeed).unwrap();
        assert_eq!(m.bytes().len(), 1 << 20);
        assert!(m.bytes().iter().all(|&b| b == 7));
        // Every page was just read through the mapping: all resident.
        let r = resident(f.as_raw_fd(), 1 << 20).unwrap();
        assert!(r > 0.99, "{r}");
        // Dropping is a request the kernel may refuse on some file systems; it never errs here.
        drop_cached(f.as_raw_fd()).unwrap();
        assert!(Mapping::new(f.as_raw_fd(), 0).is_err());
        std::fs::remove_file(&path).unwrap();
    }
}
