//! The content cache: the files of the document root, opened (and, when small, read) once and
//! served from memory, as the paper's file set fits in the server's cache.
//!
//! There is one cache per worker thread (entries are `Rc`, no locks). [`ContentCache::new`]
//! canonicalises the root and fails, naming the path, when it is missing or not a directory.
//! [`ContentCache::lookup`] takes a normalised path from `request::parse_request` and answers:
//! - [`Lookup::Found`] for a regular file under the root. A path naming a directory (with or
//!   without a trailing `/`) is served by the `index.html` inside it, or is NotFound when there
//!   is none: no listings.
//! - [`Lookup::NotFound`] for a missing file, anything that is not a regular file (fifo, socket,
//!   device), and a path whose canonical target lies outside the canonical root.
//! - [`Lookup::Forbidden`] when opening fails with `EACCES` or `EPERM`.
//! - [`Lookup::Unavailable`] when the file could not be opened or read for a reason that may
//!   clear by itself (no descriptors left, `EIO`): the server answers 503. Such an answer is
//!   not cached for a new path, and for a cached one lasts only until its next revalidation,
//!   which always retries.
//!
//! Answers, found or not, are cached by path and trusted for `revalidate` (1 s by default);
//! after that the next lookup `stat`s the path again and reloads only if the file changed, so
//! a busy path costs at most one `stat` per interval. Files up to `max_in_memory` bytes are read
//! into [`Entry::body`]; larger ones keep an empty body and are sent from [`Entry::file`] (which
//! is always kept open) by `sendfile`. [`Entry::headers`] holds the precomputed
//! `Content-Type`, `Content-Length` and `Last-Modified` lines, in that order, ready for
//! `response::write_head`'s `extra`. [`Entry::mtime`] is truncated to whole seconds, as
//! If-Modified-Since compares it. `max_entries` bounds the map: when it is full the map is
//! emptied and starts over, which is simple and cannot be gamed into unbounded memory.
//!
//! How a file is resolved, and why:
//! - The root is canonical, and every load canonicalises `root + path` and checks that the
//!   result is under the root (component-wise), so a symlink anywhere in the path that leads
//!   out is NotFound (not Forbidden: the server does not say what exists outside).
//! - The canonical path is opened with `O_NOFOLLOW | O_NONBLOCK`: a symlink swapped in after
//!   the check fails to open instead of being followed, and a fifo swapped in after the stat
//!   cannot block the worker in `open`. The opened file is `fstat`ed, and only a regular file
//!   is served.
//! - A failed load that may succeed later without the file changing (out of descriptors,
//!   `EIO`) is not cached as a negative entry, or is stored so that its next revalidation
//!   reloads it.
//! - Revalidation compares (device, inode, size, mtime, ctime, mode) of `stat(root + path)`
//!   (or of its `index.html`), so `chmod` and in-place rewrites within the same second are
//!   seen too.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

use crate::date;
use crate::mime;
use crate::response::push_decimal;

#[derive(Clone, Debug)]
pub struct CacheConfig {
    pub root: PathBuf,
    pub max_in_memory: u64,
    pub revalidate: Duration,
    pub max_entries: usize,
}

impl CacheConfig {
    pub fn new(root: impl Into<PathBuf>) -> CacheConfig {
        CacheConfig {
            root: root.into(),
            max_in_memory: 64 << 20,
            revalidate: Duration::from_secs(1),
            max_entries: 100_000,
        }
    }
}

#[derive(Debug)]
pub struct Entry {
    pub body: Box<[u8]>,
    pub in_memory: bool,
    pub file: File,
    pub len: u64,
    pub mtime: SystemTime,
    pub headers: Box<[u8]>,
}

#[derive(Clone, Debug)]
pub enum Lookup {
    Found(Rc<Entry>),
    NotFound,
    Forbidden,
    /// The file could not be read for a reason that may clear by itself (no descriptors left,
    /// EIO): 503, and nothing cached.
    Unavailable,
}

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("document root {path}: {source}")]
    Root {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("document root {0} is not a directory")]
    NotADirectory(PathBuf),
}

/// What `stat` says about a path's file, to tell whether a cached answer still holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Ident {
    Missing,
    Denied,
    /// Some other stat error (ELOOP, ENAMETOOLONG...), by errno.
    Error(i32),
    File(Stamp),
    /// Never equal to a fresh probe: the next revalidation reloads.
    Retry,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    mode: u32,
}

impl Stamp {
    fn of(md: &Metadata) -> Stamp {
        Stamp {
            dev: md.dev(),
            ino: md.ino(),
            size: md.size(),
            mtime: (md.mtime(), md.mtime_nsec()),
            ctime: (md.ctime(), md.ctime_nsec()),
            mode: md.mode(),
        }
    }
}

struct Slot {
    checked: Instant,
    ident: Ident,
    lookup: Lookup,
}

pub struct ContentCache {
    cfg: CacheConfig,
    map: HashMap<Box<str>, Slot>,
    /// Where revalidation builds a path, so that checking a cached entry allocates nothing.
    scratch: Vec<u8>,
}

impl ContentCache {
    pub fn new(cfg: CacheConfig) -> Result<ContentCache, CacheError> {
        let root = std::fs::canonicalize(&cfg.root).map_err(|source| CacheError::Root {
            path: cfg.root.clone(),
            source,
        })?;
        if !root.is_dir() {
            return Err(CacheError::NotADirectory(cfg.root));
        }
        Ok(ContentCache {
            cfg: CacheConfig { root, ..cfg },
            map: HashMap::new(),
            scratch: Vec::new(),
        })
    }
    pub fn root(&self) -> &std::path::Path {
        &self.cfg.root
    }
    pub fn lookup(&mut self, path: &str, now: Instant) -> Lookup {
        let cfg = &self.cfg;
        if let Some(slot) = self.map.get_mut(path) {
            if now.saturating_duration_since(slot.checked) <= cfg.revalidate {
                return slot.lookup.clone();
            }
            let ident = probe_with(&mut self.scratch, &cfg.root, path);
            if ident == slot.ident && ident != Ident::Retry {
                slot.checked = now;
                return slot.lookup.clone();
            }
            let (ident, lookup) = load(cfg, path, ident);
            *slot = Slot {
                checked: now,
                ident,
                lookup: lookup.clone(),
            };
            return lookup;
        }
        if !is_safe(path) {
            // Not from `parse_request`; refuse without caching what a caller made up.
            return Lookup::NotFound;
        }
        let ident = probe(&cfg.root, path);
        let (ident, lookup) = load(cfg, path, ident);
        if ident == Ident::Retry && matches!(lookup, Lookup::NotFound | Lookup::Unavailable) {
            return lookup;
        }
        if self.map.len() >= self.cfg.max_entries {
            self.map.clear();
        }
        self.map.insert(
            path.into(),
            Slot {
                checked: now,
                ident,
                lookup: lookup.clone(),
            },
        );
        lookup
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A normalised request path: starts with '/', no NUL, no `..` segment. The canonical-root
/// check would catch an escape anyway; this keeps the cache from being keyed by junk.
fn is_safe(path: &str) -> bool {
    path.starts_with('/') && !path.contains('\0') && !path.split('/').any(|s| s == "..")
}

/// `root` + `path`, byte for byte: `Path::join` would drop `root` for an absolute path and
/// would lose a trailing slash that must reach the kernel (`file/` is ENOTDIR).
fn fs_path(root: &Path, path: &str) -> PathBuf {
    let mut p = root.as_os_str().to_owned().into_vec();
    p.extend_from_slice(path.as_bytes());
    PathBuf::from(OsString::from_vec(p))
}

fn ident_of_error(e: &io::Error) -> Ident {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => Ident::Missing,
        Some(libc::EACCES) | Some(libc::EPERM) => Ident::Denied,
        Some(errno) => Ident::Error(errno),
        None => Ident::Retry,
    }
}

/// [`probe`] with the path built in `buf` (std passes a short path to the kernel from the
/// stack): revalidating a cached entry makes no allocation.
fn probe_with(buf: &mut Vec<u8>, root: &Path, path: &str) -> Ident {
    buf.clear();
    buf.extend_from_slice(root.as_os_str().as_bytes());
    buf.extend_from_slice(path.as_bytes());
    match std::fs::metadata(OsStr::from_bytes(buf)) {
        Ok(md) if md.is_dir() => probe(root, path),
        Ok(md) => Ident::File(Stamp::of(&md)),
        Err(e) => ident_of_error(&e),
    }
}

/// The file a path would be served from, as `stat` sees it (following symlinks).
fn probe(root: &Path, path: &str) -> Ident {
    let p = fs_path(root, path);
    match std::fs::metadata(&p) {
        Ok(md) if md.is_dir() => match std::fs::metadata(p.join("index.html")) {
            Ok(md) => Ident::File(Stamp::of(&md)),
            Err(e) => ident_of_error(&e),
        },
        Ok(md) => Ident::File(Stamp::of(&md)),
        Err(e) => ident_of_error(&e),
    }
}

/// Why a load did not produce an entry.
enum Miss {
    NotFound,
    Forbidden,
    /// A condition that may clear without the file changing (EMFILE, EIO...).
    Transient,
}

impl From<io::Error> for Miss {
    fn from(e: io::Error) -> Miss {
        match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => Miss::Forbidden,
            Some(libc::ENOENT)
            | Some(libc::ENOTDIR)
            | Some(libc::ELOOP)
            | Some(libc::ENAMETOOLONG)
            | Some(libc::ENXIO)
            | Some(libc::ENODEV) => Miss::NotFound,
            _ => Miss::Transient,
        }
    }
}

/// Loads `path` into an entry; returns the identity to store with the answer.
fn load(cfg: &CacheConfig, path: &str, ident: Ident) -> (Ident, Lookup) {
    match open_under_root(&cfg.root, path).and_then(|opened| read_entry(cfg, path, opened)) {
        Ok(entry) => (ident, Lookup::Found(Rc::new(entry))),
        Err(Miss::NotFound) => (ident, Lookup::NotFound),
        Err(Miss::Forbidden) => (ident, Lookup::Forbidden),
        Err(Miss::Transient) => (Ident::Retry, Lookup::Unavailable),
    }
}

/// Canonicalises `root + path` (and its `index.html` for a directory), checks it is under the
/// root, and opens it without following a symlink swapped in since.
fn open_under_root(root: &Path, path: &str) -> Result<Opened, Miss> {
    let canon = std::fs::canonicalize(fs_path(root, path))?;
    if !canon.starts_with(root) {
        return Err(Miss::NotFound);
    }
    let md = std::fs::metadata(&canon)?;
    let index = md.is_dir();
    let canon = if index {
        // index.html may itself be a symlink: canonicalise it too.
        let index = std::fs::canonicalize(canon.join("index.html"))?;
        if !index.starts_with(root) {
            return Err(Miss::NotFound);
        }
        if !std::fs::metadata(&index)?.is_file() {
            return Err(Miss::NotFound);
        }
        index
    } else if md.is_file() {
        canon
    } else {
        // Never open a fifo, socket or device: opening can block or have side effects.
        return Err(Miss::NotFound);
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&canon)?;
    let md = file.metadata()?;
    if !md.is_file() {
        return Err(Miss::NotFound);
    }
    Ok(Opened { file, md, index })
}

struct Opened {
    file: File,
    md: Metadata,
    /// A directory was asked for and its index.html opened.
    index: bool,
}

fn read_entry(cfg: &CacheConfig, path: &str, opened: Opened) -> Result<Entry, Miss> {
    let Opened { file, md, index } = opened;
    let mtime = date::truncate_secs(md.modified().unwrap_or(SystemTime::UNIX_EPOCH));
    let mut len = md.len();
    let in_memory = len <= cfg.max_in_memory;
    let body = if in_memory {
        let body = read_all(&file, len)?;
        // The file may have shrunk since fstat: what was read is what gets served.
        len = body.len() as u64;
        body
    } else {
        Box::default()
    };
    // Typed by the name the client asked for, as other servers do (a symlink is transparent);
    // a directory is served by its index.html.
    let ctype = mime::content_type(if index { "index.html" } else { path });
    Ok(Entry {
        headers: headers(ctype, len, mtime),
        body,
        in_memory,
        file,
        len,
        mtime,
    })
}

/// Reads `len` bytes from the start with pread, leaving the file offset alone for sendfile.
fn read_all(file: &File, len: u64) -> Result<Box<[u8]>, Miss> {
    let len = usize::try_from(len).map_err(|_| Miss::Transient)?;
    let mut body = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        match file.read_at(&mut body[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    body.truncate(filled);
    Ok(body.into_boxed_slice())
}

/// `Content-Type`, `Content-Length`, `Last-Modified`, in that order, each ending in CRLF.
fn headers(ctype: &str, len: u64, mtime: SystemTime) -> Box<[u8]> {
    let mut h = Vec::with_capacity(96 + ctype.len());
    h.extend_from_slice(b"Content-Type: ");
    h.extend_from_slice(ctype.as_bytes());
    h.extend_from_slice(b"\r\nContent-Length: ");
    push_decimal(&mut h, len);
    h.extend_from_slice(b"\r\nLast-Modified: ");
    h.extend_from_slice(&date::format_http_date(mtime));
    h.extend_from_slice(b"\r\n");
    h.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::time::UNIX_EPOCH;

    /// A directory under the system temp dir, unique to this process and test, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let p = std::env::temp_dir().join(format!("evlab-http-{}-{tag}", std::process::id()));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(p.join("root")).unwrap();
            fs::create_dir_all(p.join("outside")).unwrap();
            TempDir(p)
        }
        fn root(&self) -> PathBuf {
            self.0.join("root")
        }
        fn write(&self, rel: &str, body: &[u8]) -> PathBuf {
            let p = self.0.join(rel);
            if let Some(dir) = p.parent() {
                fs::create_dir_all(dir).unwrap();
            }
            fs::write(&p, body).unwrap();
            p
        }
        fn cache(&self) -> ContentCache {
            self.cache_with(|_| {})
        }
        fn cache_with(&self, f: impl FnOnce(&mut CacheConfig)) -> ContentCache {
            let mut cfg = CacheConfig::new(self.root());
            f(&mut cfg);
            ContentCache::new(cfg).unwrap()
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            // Make anything chmod-ed readable again so removal cannot fail on it.
            let _ = fs::set_permissions(
                self.0.join("root/secret.txt"),
                fs::Permissions::from_mode(0o644),
            );
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn found(l: Lookup) -> Rc<Entry> {
        match l {
            Lookup::Found(e) => e,
            other => panic!("not found: {other:?}"),
        }
    }

    fn is_not_found(l: &Lookup) -> bool {
        matches!(l, Lookup::NotFound)
    }

    #[test]
    fn root_must_be_a_directory() {
        let t = TempDir::new("root");
        let missing = t.0.join("nope");
        match ContentCache::new(CacheConfig::new(&missing)) {
            Err(e @ CacheError::Root { .. }) => {
                assert!(e.to_string().contains("nope"), "{e}")
            }
            other => panic!("{:?}", other.err()),
        }
        let file = t.write("root/f.txt", b"x");
        match ContentCache::new(CacheConfig::new(&file)) {
            Err(e @ CacheError::NotADirectory(_)) => {
                assert!(e.to_string().contains("f.txt"), "{e}")
            }
            other => panic!("{:?}", other.err()),
        }
        let c = t.cache();
        assert_eq!(c.root(), fs::canonicalize(t.root()).unwrap());
        assert!(c.is_empty());
    }

    #[test]
    fn serves_a_file_with_exact_headers() {
        let t = TempDir::new("found");
        let p = t.write("root/hello.txt", b"hello");
        let f = fs::File::options().write(true).open(&p).unwrap();
        // Nanoseconds are there to be truncated.
        f.set_modified(UNIX_EPOCH + Duration::new(784_111_777, 123_456_789))
            .unwrap();
        drop(f);
        let mut c = t.cache();
        let e = found(c.lookup("/hello.txt", Instant::now()));
        assert_eq!(&*e.body, b"hello");
        assert!(e.in_memory);
        assert_eq!(e.len, 5);
        assert_eq!(e.mtime, UNIX_EPOCH + Duration::from_secs(784_111_777));
        assert_eq!(
            std::str::from_utf8(&e.headers).unwrap(),
            "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\n\
             Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
        );
        assert_eq!(e.file.metadata().unwrap().len(), 5);
        assert_eq!(c.len(), 1);
        // A hit is the same entry.
        let again = found(c.lookup("/hello.txt", Instant::now()));
        assert!(Rc::ptr_eq(&e, &again));
        // A file is not a directory.
        assert!(is_not_found(&c.lookup("/hello.txt/", Instant::now())));
        assert!(is_not_found(&c.lookup("/missing.txt", Instant::now())));
    }

    #[test]
    fn pre_epoch_mtime_does_not_panic() {
        let t = TempDir::new("epoch");
        let p = t.write("root/old.bin", b"");
        let f = fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(UNIX_EPOCH - Duration::from_secs(86_400 * 365))
            .unwrap();
        drop(f);
        let e = found(t.cache().lookup("/old.bin", Instant::now()));
        assert_eq!(e.mtime, UNIX_EPOCH);
        assert_eq!(
            &*e.headers,
            b"Content-Type: application/octet-stream\r\nContent-Length: 0\r\n\
              Last-Modified: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
        );
        assert!(e.in_memory);
        assert!(e.body.is_empty());
    }

    #[test]
    fn directories_serve_index_html() {
        let t = TempDir::new("index");
        t.write("root/index.html", b"<root>");
        t.write("root/dir/index.html", b"<dir>");
        fs::create_dir_all(t.root().join("empty")).unwrap();
        let mut c = t.cache();
        let now = Instant::now();
        let e = found(c.lookup("/", now));
        assert_eq!(&*e.body, b"<root>");
        assert!(e
            .headers
            .starts_with(b"Content-Type: text/html; charset=utf-8\r\n"));
        assert_eq!(&*found(c.lookup("/dir/", now)).body, b"<dir>");
        assert_eq!(&*found(c.lookup("/dir", now)).body, b"<dir>");
        assert_eq!(&*found(c.lookup("/dir/index.html", now)).body, b"<dir>");
        // No listings.
        assert!(is_not_found(&c.lookup("/empty/", now)));
        assert!(is_not_found(&c.lookup("/empty", now)));
    }

    #[test]
    fn non_regular_files_are_not_found() {
        let t = TempDir::new("fifo");
        let fifo = t.root().join("pipe");
        evlab_poll::sys::mkfifo(&fifo, 0o644).expect("mkfifo");
        let mut c = t.cache();
        // Would block forever if the cache opened the fifo without O_NONBLOCK or stat first.
        assert!(is_not_found(&c.lookup("/pipe", Instant::now())));
        // A directory whose index.html is a fifo.
        fs::create_dir_all(t.root().join("d")).unwrap();
        evlab_poll::sys::mkfifo(&t.root().join("d/index.html"), 0o644).expect("mkfifo");
        assert!(is_not_found(&c.lookup("/d/", Instant::now())));
    }

    #[test]
    fn symlinks_must_stay_under_the_root() {
        let t = TempDir::new("symlink");
        t.write("outside/secret.txt", b"secret");
        t.write("root/real.txt", b"real");
        t.write("root/sub/inner.txt", b"inner");
        // A sibling whose name extends the root's: a string prefix test would let it through.
        t.write("rootx/evil.txt", b"evil");
        let root = t.root();
        symlink("../outside/secret.txt", root.join("leak")).unwrap();
        symlink(t.0.join("outside"), root.join("leakdir")).unwrap();
        symlink("../rootx/evil.txt", root.join("prefix")).unwrap();
        symlink("real.txt", root.join("alias.txt")).unwrap();
        symlink("sub", root.join("subalias")).unwrap();
        fs::create_dir_all(root.join("idx")).unwrap();
        symlink("../../outside/secret.txt", root.join("idx/index.html")).unwrap();
        let mut c = t.cache();
        let now = Instant::now();
        assert!(is_not_found(&c.lookup("/leak", now)));
        assert!(is_not_found(&c.lookup("/leakdir/secret.txt", now)));
        assert!(is_not_found(&c.lookup("/prefix", now)));
        assert!(is_not_found(&c.lookup("/idx/", now)));
        assert_eq!(&*found(c.lookup("/alias.txt", now)).body, b"real");
        assert_eq!(&*found(c.lookup("/subalias/inner.txt", now)).body, b"inner");
        // Paths that did not come from the parser are refused outright.
        assert!(is_not_found(&c.lookup("/../outside/secret.txt", now)));
        assert!(is_not_found(&c.lookup("relative.txt", now)));
    }

    #[test]
    fn changes_are_seen_after_revalidation() {
        let t = TempDir::new("reval");
        let p = t.write("root/f.txt", b"one");
        let mut c = t.cache_with(|cfg| cfg.revalidate = Duration::ZERO);
        let t0 = Instant::now();
        let e = found(c.lookup("/f.txt", t0));
        assert_eq!(&*e.body, b"one");
        fs::write(&p, b"second").unwrap();
        // Same instant: not re-checked yet.
        assert!(Rc::ptr_eq(&e, &found(c.lookup("/f.txt", t0))));
        let e2 = found(c.lookup("/f.txt", t0 + Duration::from_millis(1)));
        assert_eq!(&*e2.body, b"second");
        assert_eq!(e2.len, 6);
        // Unchanged: the same entry survives revalidation.
        let e3 = found(c.lookup("/f.txt", t0 + Duration::from_millis(2)));
        assert!(Rc::ptr_eq(&e2, &e3));
        // Vanishes, then reappears.
        fs::remove_file(&p).unwrap();
        assert!(is_not_found(
            &c.lookup("/f.txt", t0 + Duration::from_millis(3))
        ));
        fs::write(&p, b"third").unwrap();
        assert_eq!(
            &*found(c.lookup("/f.txt", t0 + Duration::from_millis(4))).body,
            b"third"
        );
        // A file that did not exist at first is found once it does.
        assert!(is_not_found(&c.lookup("/new.txt", t0)));
        t.write("root/new.txt", b"new");
        assert_eq!(
            &*found(c.lookup("/new.txt", t0 + Duration::from_millis(5))).body,
            b"new"
        );
    }

    #[test]
    fn revalidates_at_most_once_per_interval() {
        let t = TempDir::new("interval");
        let p = t.write("root/f.txt", b"one");
        let mut c = t.cache();
        let t0 = Instant::now();
        let e = found(c.lookup("/f.txt", t0));
        fs::write(&p, b"two!").unwrap();
        // Within the second the cached answer stands, without a stat.
        let within = found(c.lookup("/f.txt", t0 + Duration::from_millis(999)));
        assert!(Rc::ptr_eq(&e, &within));
        let after = found(c.lookup("/f.txt", t0 + Duration::from_millis(1001)));
        assert_eq!(&*after.body, b"two!");
    }

    #[test]
    fn unreadable_file_is_forbidden() {
        let t = TempDir::new("forbidden");
        let p = t.write("root/secret.txt", b"secret");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o000)).unwrap();
        if fs::File::open(&p).is_ok() {
            // Root (CAP_DAC_OVERRIDE) reads mode-000 files, so there is nothing to deny.
            eprintln!("skipped: unreadable_file_is_forbidden: running with privileges that ignore file modes");
            return;
        }
        let mut c = t.cache();
        assert!(matches!(
            c.lookup("/secret.txt", Instant::now()),
            Lookup::Forbidden
        ));
    }

    #[test]
    fn large_files_stay_on_disk() {
        let t = TempDir::new("large");
        let big = vec![b'x'; 10_000];
        t.write("root/big.bin", &big);
        t.write("root/small.bin", &big[..100]);
        let mut c = t.cache_with(|cfg| cfg.max_in_memory = 100);
        let e = found(c.lookup("/big.bin", Instant::now()));
        assert!(!e.in_memory);
        assert!(e.body.is_empty());
        assert_eq!(e.len, 10_000);
        assert!(std::str::from_utf8(&e.headers)
            .unwrap()
            .contains("\r\nContent-Length: 10000\r\n"));
        // The descriptor is open and positioned at 0 for sendfile.
        let mut buf = [0u8; 4];
        assert_eq!(e.file.read_at(&mut buf, 9_996).unwrap(), 4);
        let s = found(c.lookup("/small.bin", Instant::now()));
        assert!(s.in_memory);
        assert_eq!(s.body.len(), 100);
    }

    #[test]
    fn max_entries_bounds_the_map() {
        let t = TempDir::new("bound");
        for i in 0..5 {
            t.write(&format!("root/{i}.txt"), b"x");
        }
        let mut c = t.cache_with(|cfg| cfg.max_entries = 3);
        let now = Instant::now();
        for i in 0..5 {
            found(c.lookup(&format!("/{i}.txt"), now));
            assert!(c.len() <= 3);
        }
        // Misses count too.
        for i in 0..10 {
            let _ = c.lookup(&format!("/nope{i}"), now);
            assert!(c.len() <= 3);
        }
    }
}
