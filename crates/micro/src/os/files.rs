//! Safe wrappers for the read-ahead micro-benchmark (`evlab micro readahead`): a file's pages
//! dropped from the page cache and counted there (the mapping and its advice are
//! `evlab_sys::Mapping`, which the server's `--file-io mmap` uses too). None is on a server's hot
//! path; none is counted.

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

/// The share of `fd`'s first `len` bytes in the page cache (a mapping made only to ask
/// `mincore`, and touched by nothing).
pub fn resident(fd: RawFd, len: usize) -> io::Result<f64> {
    evlab_sys::Mapping::new(fd, len)?.resident()
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
    use evlab_sys::{Advice, Mapping};
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
