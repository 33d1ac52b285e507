//! Request paths: [`normalize`] turns a request target's path (from '/', query removed) into
//! the path the content cache looks up.
//!
//! It percent-decodes (`%xx`, hex digits of either case; `+` stays `+`), then resolves `.` and
//! `..` segments and collapses repeated slashes, keeping a trailing slash (a directory). A path
//! that does not start with '/', has an invalid escape, contains NUL (raw or encoded) or decodes
//! to bytes that are not UTF-8 is [`PathError::Invalid`]; a `..` that would climb above `/` is
//! [`PathError::Escapes`]. The common path — no '%', no "//", no dot segment — comes back
//! borrowed, unchanged and unallocated.
//!
//! Decoding happens before dot-segment resolution on purpose: the file system sees the decoded
//! bytes, so `%2e%2e` and `%2F` must act as `..` and `/` here, or they would slip past.
//! A `raw` that does not start with '/' is Invalid.
//!
//! [`Beneath`] then opens such a path under the document root without ever leaving it, whatever
//! symlinks the tree holds or however it changes meanwhile:
//! - With `openat2(2)` (Linux 5.6+) the kernel resolves the path from the root's descriptor with
//!   `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: no step may climb above the root, and absolute
//!   paths and symlinks, and `/proc` magic links, are refused (EXDEV). A directory swapped for a
//!   symlink mid-resolution cannot lead out.
//! - When the kernel lacks `openat2` (ENOSYS) or a seccomp filter refuses it (EPERM), and when
//!   `openat2` refuses a path with EXDEV or EAGAIN, [`Beneath`] walks the path itself, one
//!   component at a time: each is opened with `openat(dir, name, O_PATH | O_NOFOLLOW)` from the
//!   descriptor of the directory before it, so the kernel never follows a symlink or `..` on
//!   its own. A symlink is read (`readlinkat`) and its target resolved the same way: a relative
//!   target from the link's directory, `..` popping the walk's own stack of directory
//!   descriptors (at the root: EXDEV), an absolute target only when it names a path under the
//!   canonical root (it is then resolved from the root's descriptor), anything else EXDEV; at
//!   most 40 links (ELOOP). The final file is opened by name from its directory's descriptor
//!   with `O_NOFOLLOW`.
//!
//! So symlinks that stay under the root are followed either way (the walk also follows absolute
//! ones that spell the canonical root, which `openat2` refuses), and no symlink leads out. After
//! warming up, the walk allocates nothing: its buffers are kept.

use std::borrow::Cow;
use std::ffi::CStr;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use evlab_sys as sys;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PathError {
    Invalid,
    Escapes,
}

pub fn normalize(raw: &str) -> Result<Cow<'_, str>, PathError> {
    let bytes = raw.as_bytes();
    if bytes.first() != Some(&b'/') {
        return Err(PathError::Invalid);
    }
    if plainly_clean(bytes)? || is_clean(bytes)? {
        return Ok(Cow::Borrowed(raw));
    }
    let decoded = decode(bytes)?;
    resolve(&decoded).map(Cow::Owned)
}

/// The quick test every request takes: true when the path has no '%', no "//" and no '.'
/// right after a '/', so it can hold no encoding, empty segment or dot segment (false: ask
/// [`is_clean`], which tells `/.well-known` from `/./x`). Err on a raw NUL.
fn plainly_clean(bytes: &[u8]) -> Result<bool, PathError> {
    let mut plain = true;
    let mut prev = 0u8;
    for &b in bytes {
        match b {
            0 => return Err(PathError::Invalid),
            b'%' => plain = false,
            b'/' | b'.' if prev == b'/' => plain = false,
            _ => {}
        }
        prev = b;
    }
    Ok(plain)
}

/// One pass over the path: true when it is already normal (nothing to decode, no empty segment
/// but a trailing one, no dot segment). Err on a raw NUL.
fn is_clean(bytes: &[u8]) -> Result<bool, PathError> {
    let mut clean = true;
    let mut seg_start = 1;
    for i in 1..=bytes.len() {
        let b = bytes.get(i).copied();
        match b {
            None | Some(b'/') => {
                let seg = &bytes[seg_start..i];
                let last = b.is_none();
                if (seg.is_empty() && !last) || seg == b"." || seg == b".." {
                    clean = false;
                }
                seg_start = i + 1;
            }
            Some(b'%') => clean = false,
            Some(0) => return Err(PathError::Invalid),
            Some(_) => {}
        }
    }
    Ok(clean)
}

/// The value of one hexadecimal digit (a percent-escape's, a chunk size's).
pub(crate) fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn decode(bytes: &[u8]) -> Result<String, PathError> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'%' => {
                let hi = bytes.get(i + 1).copied().and_then(hex);
                let lo = bytes.get(i + 2).copied().and_then(hex);
                match (hi, lo) {
                    (Some(hi), Some(lo)) => {
                        let v = hi << 4 | lo;
                        if v == 0 {
                            return Err(PathError::Invalid);
                        }
                        out.push(v);
                        i += 3;
                    }
                    _ => return Err(PathError::Invalid),
                }
            }
            0 => return Err(PathError::Invalid),
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| PathError::Invalid)
}

/// Resolves dot segments and empty segments of a decoded path starting with '/'.
fn resolve(path: &str) -> Result<String, PathError> {
    // `out` holds "/seg/seg" (empty for the root), so `..` is a truncation at the last '/'.
    let mut out = String::with_capacity(path.len());
    let mut trailing = false;
    for seg in path.get(1..).unwrap_or("").split('/') {
        trailing = false;
        match seg {
            "" | "." => trailing = true,
            ".." => {
                let cut = out.rfind('/').ok_or(PathError::Escapes)?;
                out.truncate(cut);
                trailing = true;
            }
            _ => {
                out.push('/');
                out.push_str(seg);
            }
        }
    }
    if out.is_empty() || trailing {
        out.push('/');
    }
    Ok(out)
}

/// Symlinks followed in one resolution before ELOOP, as the kernel allows.
const MAX_LINKS: u32 = 40;

/// The resolve flags of every `openat2` made beneath the root.
const RESOLVE: u64 = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;

/// Opens paths beneath a root directory's descriptor (see the module's documentation).
#[derive(Debug)]
pub struct Beneath {
    root: OwnedFd,
    /// The canonical root, without a trailing '/' ("" for `/`): absolute symlink targets under
    /// it are followed by the walk.
    root_path: Vec<u8>,
    openat2: bool,
    // The walk's buffers, kept between calls.
    stack: Vec<OwnedFd>,
    rest: Vec<u8>,
    spliced: Vec<u8>,
    name: Vec<u8>,
    link: Vec<u8>,
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

impl Beneath {
    /// Opens `root` (which should be canonical) as an `O_PATH` directory descriptor. With
    /// `openat2` false, or when the kernel refuses `openat2`, every open walks the path.
    pub fn new(root: &Path, openat2: bool) -> io::Result<Beneath> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(root)?;
        let root_fd = OwnedFd::from(file);
        let openat2 = openat2
            && match sys::openat2(
                root_fd.as_fd(),
                c".",
                libc::O_PATH | libc::O_CLOEXEC,
                RESOLVE,
            ) {
                Ok(_) => true,
                // Kernel older than 5.6, or a seccomp filter; EINVAL/E2BIG: an unknown struct.
                Err(e) => !matches!(
                    e.raw_os_error(),
                    Some(libc::ENOSYS | libc::EPERM | libc::EINVAL | libc::E2BIG)
                ),
            };
        let mut root_path = root.as_os_str().as_bytes().to_vec();
        while root_path.last() == Some(&b'/') {
            root_path.pop();
        }
        Ok(Beneath {
            root: root_fd,
            root_path,
            openat2,
            stack: Vec::new(),
            rest: Vec::new(),
            spliced: Vec::new(),
            name: Vec::new(),
            link: vec![0; libc::PATH_MAX as usize],
        })
    }

    /// Whether opens go through `openat2` first (false: the kernel lacks it, or it was off).
    pub fn uses_openat2(&self) -> bool {
        self.openat2
    }

    /// Opens `rel` (relative to the root; "." is the root itself) with `flags` (`O_CLOEXEC` is
    /// added), following only symlinks that stay beneath the root. A path that would leave the
    /// root fails with EXDEV.
    pub fn open(&mut self, rel: &CStr, flags: i32) -> io::Result<OwnedFd> {
        if self.openat2 {
            match sys::openat2(self.root.as_fd(), rel, flags | libc::O_CLOEXEC, RESOLVE) {
                // EXDEV: an absolute symlink (perhaps into the root) or a way out; EAGAIN: a
                // rename raced a `..`. The walk tells which, and never leaves the root.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EXDEV | libc::EAGAIN)) => {}
                r => return r,
            }
        }
        self.walk(rel.to_bytes(), flags | libc::O_CLOEXEC)
    }

    fn walk(&mut self, rel: &[u8], flags: i32) -> io::Result<OwnedFd> {
        let Beneath {
            root,
            root_path,
            stack,
            rest,
            spliced,
            name,
            link,
            ..
        } = self;
        stack.clear();
        rest.clear();
        rest.extend_from_slice(rel);
        if rest.first() == Some(&b'/') {
            return Err(errno(libc::EXDEV));
        }
        let mut links = 0;
        loop {
            let top: BorrowedFd<'_> = stack.last().unwrap_or(&*root).as_fd();
            let Some(start) = rest.iter().position(|&b| b != b'/') else {
                // Nothing left: the directory reached is the answer.
                return sys::openat(top, c".", flags);
            };
            let end = rest[start..]
                .iter()
                .position(|&b| b == b'/')
                .map_or(rest.len(), |p| start + p);
            let last = !rest[end..].iter().any(|&b| b != b'/');
            let must_be_dir = end < rest.len();
            name.clear();
            name.extend_from_slice(&rest[start..end]);
            name.push(0);
            rest.drain(..end);
            match &name[..name.len() - 1] {
                b"." => continue,
                b".." => {
                    if stack.pop().is_none() {
                        return Err(errno(libc::EXDEV));
                    }
                    continue;
                }
                _ => {}
            }
            let cname = CStr::from_bytes_with_nul(name).map_err(|_| errno(libc::EINVAL))?;
            let fd = sys::openat(
                top,
                cname,
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )?;
            let st = sys::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd))?;
            match st.st_mode & libc::S_IFMT {
                libc::S_IFLNK => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(errno(libc::ELOOP));
                    }
                    let n = sys::readlinkat(fd.as_fd(), c"", link)?;
                    if n == 0 {
                        return Err(errno(libc::ENOENT));
                    }
                    let mut target = &link[..n];
                    if target.first() == Some(&b'/') {
                        // Absolute: only a path under the canonical root, resolved from it.
                        let under = target.starts_with(root_path)
                            && target.get(root_path.len()).is_none_or(|&b| b == b'/');
                        if !under {
                            return Err(errno(libc::EXDEV));
                        }
                        target = &target[root_path.len()..];
                        stack.clear();
                    }
                    spliced.clear();
                    spliced.extend_from_slice(target);
                    spliced.extend_from_slice(rest);
                    std::mem::swap(rest, spliced);
                }
                libc::S_IFDIR => {
                    if last {
                        return sys::openat(fd.as_fd(), c".", flags);
                    }
                    stack.push(fd);
                }
                _ => {
                    if must_be_dir {
                        return Err(errno(libc::ENOTDIR));
                    }
                    if flags & libc::O_PATH != 0 {
                        return Ok(fd);
                    }
                    return sys::openat(top, cname, flags | libc::O_NOFOLLOW);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick test never calls a path clean that the exact one would not: every path of up
    /// to six bytes over the characters that matter.
    #[test]
    fn plainly_clean_implies_clean() {
        let alphabet = [b'/', b'.', b'a', b'%', 0];
        let mut checked = 0;
        for len in 1..=6u32 {
            for mut code in 0..alphabet.len().pow(len - 1) {
                let mut p = vec![b'/'];
                for _ in 1..len {
                    p.push(alphabet[code % alphabet.len()]);
                    code /= alphabet.len();
                }
                match (plainly_clean(&p), is_clean(&p)) {
                    (Ok(true), exact) => assert_eq!(exact, Ok(true), "{p:?}"),
                    (Result::Err(e), exact) => assert_eq!(exact, Result::Err(e), "{p:?}"),
                    (Ok(false), _) => {}
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 1 + 5 + 25 + 125 + 625 + 3125);
    }

    enum Want {
        Same,
        Owned(&'static str),
        Err(PathError),
    }
    use Want::*;

    #[test]
    fn table() {
        let rows: &[(&str, Want)] = &[
            ("/", Same),
            ("/one", Same),
            ("/a/b/c.html", Same),
            ("/dir/", Same),
            ("/a+b", Same),
            ("/...", Same),
            ("/a/.hidden", Same),
            ("/a..b/c", Same),
            ("/ünïcode", Same),
            ("/a%20b", Owned("/a b")),
            ("/a%2fb", Owned("/a/b")),
            ("/%41%62", Owned("/Ab")),
            ("/%e2%82%AC", Owned("/€")),
            ("/100%25", Owned("/100%")),
            ("/a/./b", Owned("/a/b")),
            ("/a/../b", Owned("/b")),
            ("/a/b/..", Owned("/a/")),
            ("/a/b/../", Owned("/a/")),
            ("/a/.", Owned("/a/")),
            ("/a/..", Owned("/")),
            ("/.", Owned("/")),
            ("//", Owned("/")),
            ("//a///b", Owned("/a/b")),
            ("/a//", Owned("/a/")),
            ("/a/b/../../c", Owned("/c")),
            ("/%2e/a", Owned("/a")),
            ("/a/%2e%2e/b", Owned("/b")),
            ("/a/%2E%2E", Owned("/")),
            ("/..", Err(PathError::Escapes)),
            ("/../", Err(PathError::Escapes)),
            ("/../etc/passwd", Err(PathError::Escapes)),
            ("/a/../..", Err(PathError::Escapes)),
            ("/a/../../b", Err(PathError::Escapes)),
            ("/%2e%2e/x", Err(PathError::Escapes)),
            ("/%2E%2e%2Fetc", Err(PathError::Escapes)),
            ("/a%2f..%2f..%2fb", Err(PathError::Escapes)),
            ("/a%00b", Err(PathError::Invalid)),
            ("/a\0b", Err(PathError::Invalid)),
            ("/a%", Err(PathError::Invalid)),
            ("/a%4", Err(PathError::Invalid)),
            ("/a%zz", Err(PathError::Invalid)),
            ("/a%g0", Err(PathError::Invalid)),
            ("/%ff", Err(PathError::Invalid)),
            ("/%c0%af", Err(PathError::Invalid)),
            ("", Err(PathError::Invalid)),
            ("a/b", Err(PathError::Invalid)),
            ("*", Err(PathError::Invalid)),
        ];
        for (raw, want) in rows {
            let got = normalize(raw);
            match want {
                Same => assert!(
                    matches!(got, Ok(Cow::Borrowed(p)) if p == *raw),
                    "{raw:?}: {got:?}"
                ),
                Owned(p) => assert!(
                    matches!(&got, Ok(Cow::Owned(o)) if o == p),
                    "{raw:?}: {got:?}, want {p:?}"
                ),
                Err(e) => assert_eq!(got, Result::Err(*e), "{raw:?}"),
            }
        }
    }

    /// The walk on its own: what it follows, what it refuses, with which errno.
    #[test]
    fn walk_stays_beneath_the_root() {
        use std::os::unix::fs::symlink;
        let base = std::env::temp_dir().join(format!("evlab-beneath-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("root");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f"), b"f").unwrap();
        std::fs::write(base.join("out"), b"out").unwrap();
        symlink("a/b", root.join("ab")).unwrap();
        symlink("../f", root.join("a/b/up")).unwrap();
        symlink("../../../out", root.join("a/b/esc")).unwrap();
        symlink(base.join("out"), root.join("abs-out")).unwrap();
        symlink(root.join("a/b/f"), root.join("abs-in")).unwrap();
        symlink("x", root.join("x")).unwrap();
        let root = std::fs::canonicalize(&root).unwrap();
        for openat2 in [false, true] {
            let mut b = Beneath::new(&root, openat2).unwrap();
            let read = |b: &mut Beneath, p: &CStr| {
                b.open(p, libc::O_RDONLY).map(|fd| {
                    let mut s = Vec::new();
                    io::Read::read_to_end(&mut std::fs::File::from(fd), &mut s).unwrap();
                    s
                })
            };
            let err = |r: io::Result<Vec<u8>>| r.unwrap_err().raw_os_error();
            assert_eq!(read(&mut b, c"a/b/f").unwrap(), b"f");
            assert_eq!(read(&mut b, c"ab/f").unwrap(), b"f");
            assert_eq!(read(&mut b, c"ab/../b/./f").unwrap(), b"f");
            assert_eq!(read(&mut b, c"abs-in").unwrap(), b"f");
            assert_eq!(err(read(&mut b, c"a/b/up")), Some(libc::ENOENT));
            assert_eq!(err(read(&mut b, c"a/b/esc")), Some(libc::EXDEV));
            assert_eq!(err(read(&mut b, c"abs-out")), Some(libc::EXDEV));
            assert_eq!(err(read(&mut b, c"..")), Some(libc::EXDEV));
            assert_eq!(err(read(&mut b, c"/etc/passwd")), Some(libc::EXDEV));
            assert_eq!(err(read(&mut b, c"x")), Some(libc::ELOOP));
            assert_eq!(err(read(&mut b, c"a/b/f/")), Some(libc::ENOTDIR));
            assert_eq!(err(read(&mut b, c"a/b/f/g")), Some(libc::ENOTDIR));
            assert!(b.open(c"ab/", libc::O_PATH).is_ok());
            assert!(b.open(c".", libc::O_PATH).is_ok());
        }
        let _ = std::fs::remove_dir_all(&base);
    }
}
