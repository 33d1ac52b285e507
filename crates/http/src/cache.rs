//! The content cache: the files of the document root, opened (and, when small, read) once and
//! served from memory, as the paper's file set fits in the server's cache.
//!
//! There is one cache per worker thread (entries are `Rc`, no locks). [`ContentCache::new`]
//! canonicalises the root, fails (naming the path) when it is missing or not a directory, and
//! keeps an `O_PATH` descriptor of it: every file is opened beneath that descriptor
//! ([`path::Beneath`](crate::path::Beneath)). [`ContentCache::lookup_with`] takes a normalised
//! path from `request::parse_request` and answers:
//! - [`Lookup::Found`] for a regular file under the root, its body loaded: the caller answers
//!   200 with it. A path naming a directory (with or without a trailing `/`) is served by the
//!   `index.html` inside it, or is NotFound when there is none: no listings.
//! - [`Lookup::Head`] for the same file when the caller said it needs no body (HEAD, or a
//!   conditional GET it answers 304): its length, mtime and header lines only. Nothing is read
//!   and no descriptor is kept for it; the body is loaded by the first lookup that needs it.
//! - [`Lookup::NotFound`] for a missing file, anything that is not a regular file (fifo, socket,
//!   device), and a path that resolves outside the root (a symlink leading out: NotFound, not
//!   Forbidden, as the server does not say what exists outside).
//! - [`Lookup::Forbidden`] when opening fails with `EACCES` or `EPERM`.
//! - [`Lookup::Unavailable`] when the file could not be opened or read for a reason that may
//!   clear by itself (no descriptors left, `EIO`): the server answers 503. Such an answer is
//!   not cached for a new path, and for a cached one lasts only until its next revalidation,
//!   which always retries.
//!
//! Answers, found or not, are cached by path and trusted for `revalidate` (1 s by default);
//! after that the next lookup checks the path again and reloads only if the file changed, so a
//! busy path costs at most one check per interval. The check opens the path `O_PATH` beneath
//! the root and `fstat`s it (the same resolution as serving, never a path-based `stat` that
//! could follow a symlink out) and compares (device, inode, size, mtime, ctime, mode), of the
//! directory's `index.html` for a directory, so `chmod` and in-place rewrites within the same
//! second are seen too. It builds the path in a kept buffer: revalidating allocates nothing. If
//! the check itself fails for want of descriptors, the cached answer stands for another
//! interval.
//!
//! What the cache holds is bounded three ways, per worker:
//! - `max_bytes` (default 64 MiB; `evlab serve --cache-bytes`): the bodies held in memory, in
//!   bytes. Files up to `max_in_memory` bytes (and no larger than `max_bytes`) are read into
//!   [`Entry::body`]; larger ones keep an empty body and are sent from [`Entry::file`] by
//!   `sendfile`.
//! - `max_files` (default 1,024; `--cache-files`): the entries whose body is loaded, each of
//!   which keeps its file open in [`Entry::file`].
//! - `max_entries` (default 100,000): the paths remembered (answers without bodies, misses
//!   included, are a hundred bytes or so each); when it is full the map is emptied and starts
//!   over, which is simple and cannot be gamed into unbounded memory.
//!
//! Loaded entries form a list in order of use (a hit moves its entry to the front: a few index
//! updates, no allocation); loading a body first drops the least recently used bodies until the
//! new one fits both bounds. A dropped body is only unlinked from the cache: a response still
//! sending it keeps it alive until done. The path's answer stays cached without it (a HEAD is
//! still answered from it), and the next GET reads the body again.
//!
//! [`Entry::headers`] and [`Meta::headers`] hold the precomputed `Content-Type`,
//! `Content-Length` and `Last-Modified` lines, in that order, ready for `response::write_head`'s
//! `extra`. `mtime` is truncated to whole seconds, as If-Modified-Since compares it. Files are
//! opened with `O_NONBLOCK | O_NOCTTY` only after an `O_PATH` open said they are regular files,
//! and `fstat`ed again once open: a fifo or device swapped in can neither block the worker nor
//! be served.

use std::collections::HashMap;
use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use evlab_sys as sys;

use crate::date;
use crate::mime;
use crate::path::Beneath;
use crate::response::push_decimal;

#[derive(Clone, Debug)]
pub struct CacheConfig {
    pub root: PathBuf,
    /// Files larger than this are never read into memory (always `sendfile`).
    pub max_in_memory: u64,
    /// Bodies held in memory, in bytes.
    pub max_bytes: u64,
    /// Entries with a loaded body, each holding its file's descriptor.
    pub max_files: usize,
    pub revalidate: Duration,
    /// Paths remembered, answers without bodies and misses included.
    pub max_entries: usize,
    /// Resolve with `openat2` when the kernel has it; false always walks the path component
    /// by component (what a kernel without `openat2` gets; for tests).
    pub openat2: bool,
    /// Paths starting with this are answered with `Cache-Control: no-store` (the uncacheable
    /// objects of a proxy workload; `evlab serve --no-store-prefix`).
    pub no_store_prefix: Option<String>,
}

impl CacheConfig {
    pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;
    pub const DEFAULT_MAX_FILES: usize = 1024;

    pub fn new(root: impl Into<PathBuf>) -> CacheConfig {
        CacheConfig {
            root: root.into(),
            max_in_memory: 64 << 20,
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_files: Self::DEFAULT_MAX_FILES,
            revalidate: Duration::from_secs(1),
            max_entries: 100_000,
            openat2: true,
            no_store_prefix: None,
        }
    }
}

/// A file with its body: what a 200 with a body is sent from.
#[derive(Debug)]
pub struct Entry {
    pub body: Box<[u8]>,
    pub in_memory: bool,
    pub file: File,
    pub len: u64,
    pub mtime: SystemTime,
    pub headers: Box<[u8]>,
}

/// A file without its body: what a HEAD or a 304 needs.
#[derive(Debug)]
pub struct Meta {
    pub len: u64,
    pub mtime: SystemTime,
    pub headers: Box<[u8]>,
}

#[derive(Clone, Debug)]
pub enum Lookup {
    /// The file, its body loaded.
    Found(Rc<Entry>),
    /// The file, without its body: the caller said it needs none.
    Head(Rc<Meta>),
    NotFound,
    Forbidden,
    /// The file could not be read for a reason that may clear by itself (no descriptors left,
    /// EIO): 503, and nothing cached.
    Unavailable,
}

/// The io error is part of the message, not a `source`, so that `{:#}` chains (anyhow) do not
/// print it twice.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("document root {}: {error}", path.display())]
    Root {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("document root {0} is not a directory")]
    NotADirectory(PathBuf),
}

/// What a check of a path says about its file, to tell whether a cached answer still holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Ident {
    Missing,
    Denied,
    /// Some other error (ELOOP, EXDEV, ENAMETOOLONG...), by errno.
    Error(i32),
    File(Stamp),
    /// Never equal to a fresh check: the next revalidation reloads.
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
    fn of(st: &libc::stat) -> Stamp {
        Stamp {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size.max(0) as u64,
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
            mode: st.st_mode,
        }
    }
    fn is_file(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }
    /// The mtime in whole seconds (before 1970: 1970).
    fn mtime(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.mtime.0.max(0) as u64)
    }
}

/// What a path resolved to: its identity, and whether a directory's index.html stands for it.
#[derive(Copy, Clone, Debug)]
struct Probe {
    ident: Ident,
    index: bool,
}

#[derive(Debug)]
enum Answer {
    NotFound,
    Forbidden,
    Unavailable,
    File {
        meta: Rc<Meta>,
        /// Served by the directory's index.html.
        index: bool,
        /// The body, when loaded (then the slot is in the list of loaded slots).
        entry: Option<Rc<Entry>>,
    },
}

const NIL: u32 = u32::MAX;

#[derive(Debug)]
struct Slot {
    /// When the file was last checked, plus `revalidate`: after this instant it is checked
    /// again (kept as an instant so that a hit compares, rather than subtracts, times).
    fresh_until: Instant,
    ident: Ident,
    answer: Answer,
    /// The list of loaded slots, most recently used first.
    prev: u32,
    next: u32,
}

pub struct ContentCache {
    cfg: CacheConfig,
    beneath: Beneath,
    /// foldhash, seeded per process: SipHash cost more than the rest of a lookup, and the
    /// map is bounded (`max_entries`), so a seeded fast hash is enough against flooding.
    map: HashMap<Box<str>, u32, foldhash::fast::RandomState>,
    slots: Vec<Slot>,
    /// Most and least recently used loaded slots.
    head: u32,
    tail: u32,
    /// Body bytes and descriptors held by loaded slots.
    bytes: u64,
    files: usize,
    /// Where paths are built, so that checking a cached entry allocates nothing.
    scratch: Vec<u8>,
}

impl ContentCache {
    pub fn new(cfg: CacheConfig) -> Result<ContentCache, CacheError> {
        let root = std::fs::canonicalize(&cfg.root).map_err(|error| CacheError::Root {
            path: cfg.root.clone(),
            error,
        })?;
        if !root.is_dir() {
            return Err(CacheError::NotADirectory(cfg.root));
        }
        let beneath = Beneath::new(&root, cfg.openat2).map_err(|error| CacheError::Root {
            path: cfg.root.clone(),
            error,
        })?;
        Ok(ContentCache {
            cfg: CacheConfig { root, ..cfg },
            beneath,
            map: HashMap::default(),
            slots: Vec::new(),
            head: NIL,
            tail: NIL,
            bytes: 0,
            files: 0,
            scratch: Vec::new(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.cfg.root
    }

    /// Whether files are resolved with `openat2` (false: by the component walk).
    pub fn uses_openat2(&self) -> bool {
        self.beneath.uses_openat2()
    }

    /// The answer for `path` with its body loaded (a GET).
    pub fn lookup(&mut self, path: &str, now: Instant) -> Lookup {
        self.lookup_with(path, now, |_| true)
    }

    /// The answer for `path`; for a file, `need_body` says from its [`Meta`] whether the body
    /// is wanted ([`Lookup::Found`]) or not ([`Lookup::Head`]: nothing read, nothing kept open).
    pub fn lookup_with(
        &mut self,
        path: &str,
        now: Instant,
        need_body: impl FnOnce(&Meta) -> bool,
    ) -> Lookup {
        let i = match self.map.get(path) {
            Some(&i) => {
                let slot = &self.slots[i as usize];
                if now > slot.fresh_until {
                    self.revalidate(i, path, now);
                }
                i
            }
            None => {
                if !is_safe(path) {
                    // Not from `parse_request`; refuse without caching what a caller made up.
                    return Lookup::NotFound;
                }
                let probe = self.probe(path);
                let (ident, answer) = self.derive(path, probe);
                if ident == Ident::Retry && !matches!(answer, Answer::File { .. }) {
                    return miss(&answer);
                }
                if self.map.len() >= self.cfg.max_entries {
                    self.clear();
                }
                let i = self.slots.len() as u32;
                self.slots.push(Slot {
                    fresh_until: self.fresh_until(now),
                    ident,
                    answer,
                    prev: NIL,
                    next: NIL,
                });
                self.map.insert(path.into(), i);
                i
            }
        };
        let slot = &self.slots[i as usize];
        let Answer::File { meta, entry, .. } = &slot.answer else {
            return miss(&slot.answer);
        };
        if !need_body(meta) {
            return Lookup::Head(meta.clone());
        }
        if let Some(entry) = entry {
            let entry = entry.clone();
            self.touch(i);
            return Lookup::Found(entry);
        }
        self.load_body(i, path)
    }

    /// Paths remembered.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of bodies held in memory.
    pub fn bytes_held(&self) -> u64 {
        self.bytes
    }

    /// Entries with a loaded body (each holds a descriptor).
    pub fn files_held(&self) -> usize {
        self.files
    }

    fn clear(&mut self) {
        self.map.clear();
        self.slots.clear();
        self.head = NIL;
        self.tail = NIL;
        self.bytes = 0;
        self.files = 0;
    }

    /// Until when a file checked at `now` is served without a new check.
    fn fresh_until(&self, now: Instant) -> Instant {
        now.checked_add(self.cfg.revalidate)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
    }

    /// Checks a cached path again; reloads its answer if the file changed.
    fn revalidate(&mut self, i: u32, path: &str, now: Instant) {
        let fresh_until = self.fresh_until(now);
        let probe = self.probe(path);
        let slot = &mut self.slots[i as usize];
        if probe.ident == slot.ident && probe.ident != Ident::Retry {
            slot.fresh_until = fresh_until;
            return;
        }
        if let Ident::Error(e) = probe.ident {
            if matches!(classify(e), Miss::Transient) && matches!(slot.answer, Answer::File { .. })
            {
                // The check could not be made (no descriptors left): what was served stands.
                slot.fresh_until = fresh_until;
                return;
            }
        }
        self.unload(i);
        let (ident, answer) = self.derive(path, probe);
        let slot = &mut self.slots[i as usize];
        slot.fresh_until = fresh_until;
        slot.ident = ident;
        slot.answer = answer;
    }

    /// Opens the file `path` stands for, `O_PATH`, beneath the root, and `fstat`s it (and, for
    /// a directory, its index.html).
    fn probe(&mut self, path: &str) -> Probe {
        let mut index = false;
        loop {
            let rel = rel_path(&mut self.scratch, path, index);
            let st = self
                .beneath
                .open(rel, libc::O_PATH)
                .and_then(|fd| sys::fstat(fd.as_raw_fd()));
            let ident = match st {
                Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR && !index => {
                    index = true;
                    continue;
                }
                Ok(st) => Ident::File(Stamp::of(&st)),
                Err(e) => ident_of_error(&e),
            };
            return Probe { ident, index };
        }
    }

    /// The answer for what a probe found: for a regular file, opened for reading (which checks
    /// that it may be read), `fstat`ed and closed again.
    fn derive(&mut self, path: &str, probe: Probe) -> (Ident, Answer) {
        match probe.ident {
            Ident::Missing => (probe.ident, Answer::NotFound),
            Ident::Denied => (probe.ident, Answer::Forbidden),
            Ident::Retry => (Ident::Retry, Answer::Unavailable),
            Ident::Error(e) => match classify(e) {
                Miss::NotFound => (probe.ident, Answer::NotFound),
                Miss::Forbidden => (probe.ident, Answer::Forbidden),
                Miss::Transient => (Ident::Retry, Answer::Unavailable),
            },
            Ident::File(stamp) if !stamp.is_file() => (probe.ident, Answer::NotFound),
            Ident::File(_) => match self.open_file(path, probe.index) {
                Ok((_, stamp)) => (
                    Ident::File(stamp),
                    Answer::File {
                        meta: Rc::new(meta(
                            path,
                            probe.index,
                            stamp.size,
                            stamp.mtime(),
                            no_store(&self.cfg, path),
                        )),
                        index: probe.index,
                        entry: None,
                    },
                ),
                Err(miss) => miss.answer(probe.ident),
            },
        }
    }

    /// Opens the regular file `path` (or its index.html) for reading, beneath the root.
    fn open_file(&mut self, path: &str, index: bool) -> Result<(File, Stamp), Miss> {
        let rel = rel_path(&mut self.scratch, path, index);
        let fd = self
            .beneath
            .open(rel, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY)?;
        let stamp = Stamp::of(&sys::fstat(fd.as_raw_fd())?);
        if !stamp.is_file() {
            return Err(Miss::NotFound);
        }
        Ok((File::from(fd), stamp))
    }

    /// Reads the body of slot `i` (a file whose body is not loaded) and keeps it if it fits.
    fn load_body(&mut self, i: u32, path: &str) -> Lookup {
        let Answer::File { index, .. } = self.slots[i as usize].answer else {
            unreachable!("load_body of a miss");
        };
        let opened = self
            .open_file(path, index)
            .and_then(|(file, stamp)| read_entry(&self.cfg, path, index, file, stamp));
        let (entry, stamp) = match opened {
            Ok(loaded) => loaded,
            Err(Miss::Transient) => return Lookup::Unavailable,
            Err(why) => {
                // The file changed into something not servable since it was checked.
                let (ident, answer) = why.answer(Ident::Retry);
                let slot = &mut self.slots[i as usize];
                slot.ident = ident;
                slot.answer = answer;
                return miss(&slot.answer);
            }
        };
        let entry = Rc::new(entry);
        let slot = &mut self.slots[i as usize];
        // What is served is what the next revalidation compares with.
        slot.ident = Ident::File(stamp);
        let Answer::File { meta, .. } = &mut slot.answer else {
            unreachable!();
        };
        if meta.len != entry.len || meta.mtime != entry.mtime {
            *meta = Rc::new(Meta {
                len: entry.len,
                mtime: entry.mtime,
                headers: entry.headers.clone(),
            });
        }
        let size = entry.body.len() as u64;
        // Make room: drop the least recently used bodies.
        while self.tail != NIL
            && (self.bytes + size > self.cfg.max_bytes || self.files + 1 > self.cfg.max_files)
        {
            self.unload(self.tail);
        }
        if self.bytes + size <= self.cfg.max_bytes && self.files < self.cfg.max_files {
            let Answer::File { entry: held, .. } = &mut self.slots[i as usize].answer else {
                unreachable!();
            };
            *held = Some(entry.clone());
            self.bytes += size;
            self.files += 1;
            self.link_front(i);
        }
        Lookup::Found(entry)
    }

    /// Drops slot `i`'s body, if loaded.
    fn unload(&mut self, i: u32) {
        let Answer::File { entry, .. } = &mut self.slots[i as usize].answer else {
            return;
        };
        let Some(entry) = entry.take() else { return };
        self.bytes -= entry.body.len() as u64;
        self.files -= 1;
        self.unlink(i);
    }

    fn touch(&mut self, i: u32) {
        if self.head != i {
            self.unlink(i);
            self.link_front(i);
        }
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let s = &self.slots[i as usize];
            (s.prev, s.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
        let s = &mut self.slots[i as usize];
        s.prev = NIL;
        s.next = NIL;
    }

    fn link_front(&mut self, i: u32) {
        let old = self.head;
        {
            let s = &mut self.slots[i as usize];
            s.prev = NIL;
            s.next = old;
        }
        if old == NIL {
            self.tail = i;
        } else {
            self.slots[old as usize].prev = i;
        }
        self.head = i;
    }
}

fn miss(answer: &Answer) -> Lookup {
    match answer {
        Answer::NotFound => Lookup::NotFound,
        Answer::Forbidden => Lookup::Forbidden,
        Answer::Unavailable => Lookup::Unavailable,
        Answer::File { .. } => unreachable!("a file is not a miss"),
    }
}

/// A normalised request path: starts with '/', no NUL, no `..` segment. Resolution beneath the
/// root would refuse an escape anyway; this keeps the cache from being keyed by junk.
fn is_safe(path: &str) -> bool {
    path.starts_with('/') && !path.contains('\0') && !path.split('/').any(|s| s == "..")
}

/// `path` relative to the root (and `index.html` inside it), NUL-terminated, built in `buf`. A
/// trailing slash is kept: it must reach the kernel (`file/` is ENOTDIR).
fn rel_path<'b>(buf: &'b mut Vec<u8>, path: &str, index: bool) -> &'b CStr {
    buf.clear();
    buf.push(b'.');
    buf.extend_from_slice(path.as_bytes());
    if index {
        if buf.last() != Some(&b'/') {
            buf.push(b'/');
        }
        buf.extend_from_slice(b"index.html");
    }
    buf.push(0);
    // `is_safe` paths hold no NUL.
    CStr::from_bytes_with_nul(buf).unwrap_or(c"")
}

fn ident_of_error(e: &io::Error) -> Ident {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => Ident::Missing,
        Some(libc::EACCES) | Some(libc::EPERM) => Ident::Denied,
        Some(errno) => Ident::Error(errno),
        None => Ident::Retry,
    }
}

/// Why a load did not produce an entry.
#[derive(Copy, Clone, Debug)]
enum Miss {
    NotFound,
    Forbidden,
    /// A condition that may clear without the file changing (EMFILE, EIO...).
    Transient,
}

impl Miss {
    /// The identity and answer to cache for this miss (`ident`: what the path was checked as).
    fn answer(self, ident: Ident) -> (Ident, Answer) {
        match self {
            Miss::NotFound => (ident, Answer::NotFound),
            Miss::Forbidden => (ident, Answer::Forbidden),
            Miss::Transient => (Ident::Retry, Answer::Unavailable),
        }
    }
}

fn classify(errno: i32) -> Miss {
    match errno {
        libc::EACCES | libc::EPERM => Miss::Forbidden,
        libc::ENOENT
        | libc::ENOTDIR
        | libc::ELOOP
        | libc::EXDEV
        | libc::ENAMETOOLONG
        | libc::ENXIO
        | libc::ENODEV => Miss::NotFound,
        _ => Miss::Transient,
    }
}

impl From<io::Error> for Miss {
    fn from(e: io::Error) -> Miss {
        e.raw_os_error().map_or(Miss::Transient, classify)
    }
}

fn meta(path: &str, index: bool, len: u64, mtime: SystemTime, no_store: bool) -> Meta {
    Meta {
        len,
        mtime,
        headers: headers(content_type(path, index), len, mtime, no_store),
    }
}

/// Whether `path` is under the configured no-store prefix.
fn no_store(cfg: &CacheConfig, path: &str) -> bool {
    cfg.no_store_prefix
        .as_deref()
        .is_some_and(|p| path.starts_with(p))
}

/// Typed by the name the client asked for, as other servers do (a symlink is transparent); a
/// directory is served by its index.html.
fn content_type(path: &str, index: bool) -> &'static str {
    mime::content_type(if index { "index.html" } else { path })
}

/// Reads the opened file into an entry (unless it is too large to hold in memory).
fn read_entry(
    cfg: &CacheConfig,
    path: &str,
    index: bool,
    file: File,
    stamp: Stamp,
) -> Result<(Entry, Stamp), Miss> {
    let mtime = stamp.mtime();
    let mut len = stamp.size;
    let in_memory = len <= cfg.max_in_memory && len <= cfg.max_bytes;
    let body = if in_memory {
        let body = read_all(&file, len)?;
        // The file may have shrunk since fstat: what was read is what gets served.
        len = body.len() as u64;
        body
    } else {
        Box::default()
    };
    let entry = Entry {
        headers: headers(content_type(path, index), len, mtime, no_store(cfg, path)),
        body,
        in_memory,
        file,
        len,
        mtime,
    };
    Ok((entry, stamp))
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

/// `Content-Type`, `Content-Length`, `Last-Modified`, in that order, each ending in CRLF; then
/// `Cache-Control: no-store` if asked.
fn headers(ctype: &str, len: u64, mtime: SystemTime, no_store: bool) -> Box<[u8]> {
    let mut h = Vec::with_capacity(96 + ctype.len());
    h.extend_from_slice(b"Content-Type: ");
    h.extend_from_slice(ctype.as_bytes());
    h.extend_from_slice(b"\r\nContent-Length: ");
    push_decimal(&mut h, len);
    h.extend_from_slice(b"\r\nLast-Modified: ");
    h.extend_from_slice(&date::format_http_date(mtime));
    h.extend_from_slice(b"\r\n");
    if no_store {
        h.extend_from_slice(b"Cache-Control: no-store\r\n");
    }
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
    fn no_store_prefix_marks_gets_and_heads() {
        let t = TempDir::new("nostore");
        t.write("root/polymix/u/000001", b"abc");
        t.write("root/polymix/c/000001", b"abc");
        let mut c = t.cache_with(|c| c.no_store_prefix = Some("/polymix/u/".into()));
        let now = Instant::now();
        let u = found(c.lookup("/polymix/u/000001", now));
        assert!(std::str::from_utf8(&u.headers)
            .unwrap()
            .ends_with("\r\nCache-Control: no-store\r\n"));
        let k = found(c.lookup("/polymix/c/000001", now));
        assert!(!std::str::from_utf8(&k.headers)
            .unwrap()
            .contains("no-store"));
        let mut c = t.cache_with(|c| c.no_store_prefix = Some("/polymix/u/".into()));
        let Lookup::Head(m) = c.lookup_with("/polymix/u/000001", now, |_| false) else {
            panic!("expected a head")
        };
        assert!(std::str::from_utf8(&m.headers)
            .unwrap()
            .contains("Cache-Control: no-store"));
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
        evlab_sys::mkfifo(&fifo, 0o644).expect("mkfifo");
        let mut c = t.cache();
        // Would block forever if the cache opened the fifo without O_NONBLOCK or stat first.
        assert!(is_not_found(&c.lookup("/pipe", Instant::now())));
        // A directory whose index.html is a fifo.
        fs::create_dir_all(t.root().join("d")).unwrap();
        evlab_sys::mkfifo(&t.root().join("d/index.html"), 0o644).expect("mkfifo");
        assert!(is_not_found(&c.lookup("/d/", Instant::now())));
    }

    #[test]
    fn symlinks_must_stay_under_the_root() {
        symlinks_stay_under_the_root(true);
    }

    /// The same through the component walk a kernel without openat2 gets.
    #[test]
    fn symlinks_must_stay_under_the_root_without_openat2() {
        symlinks_stay_under_the_root(false);
    }

    fn symlinks_stay_under_the_root(openat2: bool) {
        let t = TempDir::new(if openat2 { "symlink2" } else { "symlinkw" });
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
        // Absolute, but to a file under the root: followed (openat2 refuses it; the walk,
        // which it falls back to, checks it names the canonical root).
        let canon_root = fs::canonicalize(&root).unwrap();
        symlink(canon_root.join("sub"), root.join("abs-sub")).unwrap();
        symlink("sub/../../root/real.txt", root.join("updown")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        let mut c = t.cache_with(|cfg| cfg.openat2 = openat2);
        if openat2 && !c.uses_openat2() {
            eprintln!("this kernel has no openat2: the walk serves both cases");
        }
        assert!(openat2 || !c.uses_openat2());
        let now = Instant::now();
        assert_eq!(&*found(c.lookup("/abs-sub/inner.txt", now)).body, b"inner");
        // Climbs above the root on the way, even if it comes back: refused.
        assert!(is_not_found(&c.lookup("/updown", now)));
        assert!(is_not_found(&c.lookup("/loop", now)));
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

    /// This thread's effective CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, dropped while it lives
    /// (capabilities are per thread; other tests' threads keep theirs) and taken back from the
    /// permitted set when dropped. Without them (not root) it changes nothing.
    struct DacPrivilegesDropped(Option<evlab_sys::CapData>);

    /// Two words of capabilities; `Some` sets them, `None` only reads them.
    fn capabilities(set: Option<[evlab_sys::CapData; 2]>) -> Option<[evlab_sys::CapData; 2]> {
        match set {
            Some(d) => evlab_sys::set_capabilities(d).ok().map(|()| d),
            None => evlab_sys::capabilities().ok(),
        }
    }

    impl DacPrivilegesDropped {
        fn new() -> DacPrivilegesDropped {
            const DAC: u32 = 1 << 1 | 1 << 2; // CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            let Some(before) = capabilities(None) else {
                return DacPrivilegesDropped(None);
            };
            let mut less = before;
            less[0].effective &= !DAC;
            capabilities(Some(less)).expect("capset: dropping effective capabilities");
            DacPrivilegesDropped(Some(before[0]))
        }
    }

    impl Drop for DacPrivilegesDropped {
        fn drop(&mut self) {
            if let Some(first) = self.0 {
                let mut d = capabilities(None).unwrap_or_default();
                d[0] = first;
                let _ = capabilities(Some(d));
            }
        }
    }

    #[test]
    fn unreadable_file_is_forbidden() {
        let t = TempDir::new("forbidden");
        let p = t.write("root/secret.txt", b"secret");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o000)).unwrap();
        // Root reads mode-000 files (CAP_DAC_OVERRIDE): this thread gives that up.
        let _modes_apply = DacPrivilegesDropped::new();
        if !evlab_poll::testing::require(
            "file-modes",
            fs::File::open(&p).is_err(),
            "this thread reads a mode-000 file even without CAP_DAC_OVERRIDE",
        ) {
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

    /// Issue "Hardening", item 1, without a server, for both resolutions: `d` swapped again and
    /// again with a symlink to a directory outside while fresh paths `L<i>/secret.txt` (with
    /// `L<i> -> d`) are looked up.
    fn swap_race(openat2: bool) {
        let t = TempDir::new(if openat2 { "race2" } else { "racew" });
        let root = t.root();
        t.write("outside/dir/secret.txt", b"OUTSIDE");
        t.write("root/d/secret.txt", b"inside");
        symlink(t.0.join("outside/dir"), root.join("x")).unwrap();
        for i in 0..2000 {
            symlink("d", root.join(format!("L{i}"))).unwrap();
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let stop = stop.clone();
            let (d, x) = (root.join("d"), root.join("x"));
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    evlab_sys::rename_exchange(&d, &x).unwrap();
                }
            })
        };
        let mut c = t.cache_with(|cfg| cfg.openat2 = openat2);
        let (mut inside, mut outside) = (0, 0);
        for i in 0..2000 {
            match c.lookup(&format!("/L{i}/secret.txt"), Instant::now()) {
                Lookup::Found(e) if &*e.body == b"inside" => inside += 1,
                Lookup::Found(_) => outside += 1,
                _ => {}
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        swapper.join().unwrap();
        if root.join("d").is_symlink() {
            evlab_sys::rename_exchange(&root.join("d"), &root.join("x")).unwrap();
        }
        assert_eq!(
            outside, 0,
            "served the file outside the root {outside} times"
        );
        assert!(inside > 0);
    }

    #[test]
    fn swapped_directory_never_leads_outside() {
        swap_race(true);
    }

    #[test]
    fn swapped_directory_never_leads_outside_without_openat2() {
        swap_race(false);
    }

    #[test]
    fn head_reads_no_body_and_keeps_no_descriptor() {
        let t = TempDir::new("head");
        let body: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        t.write("root/f.bin", &body);
        let mut c = t.cache();
        let now = Instant::now();
        let Lookup::Head(m) = c.lookup_with("/f.bin", now, |_| false) else {
            panic!("not a head");
        };
        assert_eq!(m.len, 100_000);
        assert!(std::str::from_utf8(&m.headers)
            .unwrap()
            .contains("\r\nContent-Length: 100000\r\n"));
        assert_eq!((c.bytes_held(), c.files_held()), (0, 0));
        // need_body sees the meta; the first GET loads the body.
        let e = found(c.lookup_with("/f.bin", now, |m| m.len == 100_000));
        assert_eq!(&*e.body, &body[..]);
        assert_eq!(e.headers, m.headers);
        assert_eq!((c.bytes_held(), c.files_held()), (100_000, 1));
        // A HEAD of a loaded entry answers from the same meta.
        assert!(matches!(
            c.lookup_with("/f.bin", now, |_| false),
            Lookup::Head(_)
        ));
        assert!(Rc::ptr_eq(&e, &found(c.lookup("/f.bin", now))));
    }

    #[test]
    fn bodies_are_bounded_by_bytes_least_recently_used_first() {
        let t = TempDir::new("bytes");
        let bodies: Vec<Vec<u8>> = (0..6u8).map(|i| vec![b'a' + i; 1000]).collect();
        for (i, b) in bodies.iter().enumerate() {
            t.write(&format!("root/{i}.bin"), b);
        }
        t.write("root/huge.bin", &[b'h'; 5000]);
        let mut c = t.cache_with(|cfg| cfg.max_bytes = 3000);
        let now = Instant::now();
        for (i, body) in bodies.iter().enumerate().take(3) {
            assert_eq!(&*found(c.lookup(&format!("/{i}.bin"), now)).body, &body[..]);
        }
        assert_eq!((c.bytes_held(), c.files_held()), (3000, 3));
        // 0 is used again: 1 is now the least recently used, and goes first.
        let zero = found(c.lookup("/0.bin", now));
        let three = found(c.lookup("/3.bin", now));
        assert_eq!(&*three.body, &bodies[3][..]);
        assert_eq!((c.bytes_held(), c.files_held()), (3000, 3));
        assert!(Rc::ptr_eq(&zero, &found(c.lookup("/0.bin", now))));
        let one = found(c.lookup("/1.bin", now));
        assert_eq!(&*one.body, &bodies[1][..], "reloaded byte for byte");
        // 2 went to make room for 1.
        let two = found(c.lookup("/2.bin", now));
        assert_eq!(&*two.body, &bodies[2][..]);
        assert!(c.bytes_held() <= 3000);
        // Larger than the whole bound: sent from the file, holding no memory.
        let huge = found(c.lookup("/huge.bin", now));
        assert!(!huge.in_memory && huge.body.is_empty() && huge.len == 5000);
        assert!(c.bytes_held() <= 3000);
        // A dropped body stays alive for whoever still holds it.
        for i in 0..6 {
            found(c.lookup(&format!("/{i}.bin"), now));
        }
        assert_eq!(&*zero.body, &bodies[0][..]);
    }

    #[test]
    fn descriptors_are_bounded() {
        let t = TempDir::new("files");
        for i in 0..10 {
            t.write(&format!("root/{i}.txt"), b"x");
        }
        let mut c = t.cache_with(|cfg| cfg.max_files = 4);
        let now = Instant::now();
        for round in 0..3 {
            for i in 0..10 {
                let e = found(c.lookup(&format!("/{i}.txt"), now));
                assert_eq!(&*e.body, b"x", "round {round}");
                assert!(c.files_held() <= 4);
            }
        }
        assert_eq!(c.files_held(), 4);
        assert_eq!(
            c.len(),
            10,
            "the paths' answers stay cached without their bodies"
        );
        // No descriptor at all: every GET opens and reads, nothing is kept.
        let mut none = t.cache_with(|cfg| cfg.max_files = 0);
        assert_eq!(&*found(none.lookup("/1.txt", now)).body, b"x");
        assert_eq!((none.bytes_held(), none.files_held()), (0, 0));
    }

    #[test]
    fn a_changed_file_drops_its_body() {
        let t = TempDir::new("changed");
        let p = t.write("root/f.txt", b"12345");
        let mut c = t.cache_with(|cfg| cfg.revalidate = Duration::ZERO);
        let t0 = Instant::now();
        found(c.lookup("/f.txt", t0));
        assert_eq!(c.bytes_held(), 5);
        fs::write(&p, b"123").unwrap();
        let Lookup::Head(m) = c.lookup_with("/f.txt", t0 + Duration::from_millis(1), |_| false)
        else {
            panic!("not a head");
        };
        assert_eq!(m.len, 3);
        assert_eq!((c.bytes_held(), c.files_held()), (0, 0));
        fs::remove_file(&p).unwrap();
        assert!(is_not_found(
            &c.lookup("/f.txt", t0 + Duration::from_millis(2))
        ));
    }
}
