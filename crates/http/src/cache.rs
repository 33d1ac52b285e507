//! The content cache: the files of the document root, opened (and, when small, read) once and
//! served from memory, as the paper's file set fits in the server's cache.
//!
//! There is one cache per worker thread (entries are `Rc`, no locks). [`ContentCache::new`]
//! canonicalises the root, fails (naming the path) when it is missing or not a directory, and
//! keeps an `O_PATH` descriptor of it: every file is opened beneath that descriptor
//! ([`path::Beneath`](crate::path::Beneath)). [`ContentCache::lookup_with`] takes a normalised
//! path from `request::parse_request` and answers:
//! - [`Lookup::Found`] for a regular file under the root, its body loaded: the caller answers
//!   200 with it. A path naming a directory with its trailing `/` is served by the
//!   `index.html` inside it, or is NotFound when there is none: no listings.
//! - [`Lookup::Redirect`] for a directory named without its trailing `/`: the caller answers
//!   301 to the path with it, so that the relative links of its index resolve beneath it.
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
//! `Content-Length`, `Accept-Ranges: bytes`, `Last-Modified` and `ETag` lines, in that order,
//! ready for `response::write_head`'s `extra`, with the offsets a 206 (the lines but
//! Content-Length) and a 304 (ETag and Cache-Control: RFC 9110 §15.4.5) send parts of.
//! The ETag (`conditional::push_etag`) is made from the size and the mtime to the nanosecond,
//! once, when the lines are. `mtime` is truncated to whole seconds, as If-Modified-Since compares it. Files are
//! opened with `O_NONBLOCK | O_NOCTTY` only after an `O_PATH` open said they are regular files,
//! and `fstat`ed again once open: a fifo or device swapped in can neither block the worker nor
//! be served.

use std::collections::HashMap;
use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::ops::Deref;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use evlab_sys as sys;

use crate::conditional::{self, Validators};
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
    pub headers: Headers,
}

/// A file without its body: what a HEAD or a 304 needs.
#[derive(Debug)]
pub struct Meta {
    pub len: u64,
    pub mtime: SystemTime,
    pub headers: Headers,
}

impl Entry {
    pub fn validators(&self) -> Validators<'_> {
        Validators {
            etag: self.headers.etag(),
            last_modified: self.mtime,
            len: self.len,
        }
    }
}

impl Meta {
    pub fn validators(&self) -> Validators<'_> {
        Validators {
            etag: self.headers.etag(),
            last_modified: self.mtime,
            len: self.len,
        }
    }
}

/// A file's header lines (see the module doc), and where their parts start: all of them
/// (`&*headers`) for a 200.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Headers {
    bytes: Box<[u8]>,
    /// End of the Content-Type line.
    ct_end: u32,
    /// End of the Content-Length line.
    cl_end: u32,
    /// Start of the ETag line (a 304 sends from there).
    validators: u32,
    /// End of the entity tag (before its CRLF).
    etag_end: u32,
}

impl Deref for Headers {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Headers {
    /// The Content-Type line.
    pub fn content_type(&self) -> &[u8] {
        &self.bytes[..self.ct_end as usize]
    }
    /// The lines after Content-Length: Accept-Ranges, Last-Modified, ETag, Cache-Control.
    pub fn after_length(&self) -> &[u8] {
        &self.bytes[self.cl_end as usize..]
    }
    /// ETag and Cache-Control (if sent): a 304's lines. Not Last-Modified: beside an ETag, RFC
    /// 9110 §15.4.5 asks a 304 for no other representation metadata.
    pub fn validators(&self) -> &[u8] {
        &self.bytes[self.validators as usize..]
    }
    /// The strong entity tag, quotes included.
    pub fn etag(&self) -> &[u8] {
        &self.bytes[self.validators as usize + b"ETag: ".len()..self.etag_end as usize]
    }
}

#[derive(Clone, Debug)]
pub enum Lookup {
    /// The file, its body loaded.
    Found(Rc<Entry>),
    /// The file, without its body: the caller said it needs none.
    Head(Rc<Meta>),
    NotFound,
    Forbidden,
    /// A directory named without its trailing slash: 301 to the path with it.
    Redirect,
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
    /// The mtime in nanoseconds, for the ETag.
    fn mtime_ns(&self) -> u64 {
        conditional::mtime_ns(self.mtime.0, self.mtime.1)
    }
}

/// What a path resolved to: its identity, whether a directory's index.html stands for it, and
/// whether it is a directory named without its slash.
#[derive(Copy, Clone, Debug)]
struct Probe {
    ident: Ident,
    index: bool,
    redirect: bool,
}

#[derive(Debug)]
enum Answer {
    NotFound,
    Forbidden,
    Unavailable,
    Redirect,
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
                    if !path.ends_with('/') {
                        let ident = Ident::File(Stamp::of(&st));
                        return Probe {
                            ident,
                            index,
                            redirect: true,
                        };
                    }
                    index = true;
                    continue;
                }
                Ok(st) => Ident::File(Stamp::of(&st)),
                Err(e) => ident_of_error(&e),
            };
            return Probe {
                ident,
                index,
                redirect: false,
            };
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
            Ident::File(_) if probe.redirect => (probe.ident, Answer::Redirect),
            Ident::File(stamp) if !stamp.is_file() => (probe.ident, Answer::NotFound),
            Ident::File(_) => match self.open_file(path, probe.index) {
                Ok((_, stamp)) => (
                    Ident::File(stamp),
                    Answer::File {
                        meta: Rc::new(meta(path, probe.index, &stamp, no_store(&self.cfg, path))),
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
        if meta.len != entry.len || meta.headers != entry.headers {
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
        Answer::Redirect => Lookup::Redirect,
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

fn meta(path: &str, index: bool, stamp: &Stamp, no_store: bool) -> Meta {
    let (len, mtime) = (stamp.size, stamp.mtime());
    Meta {
        len,
        mtime,
        headers: headers(content_type(path, index), len, stamp, no_store),
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
        headers: headers(content_type(path, index), len, &stamp, no_store(cfg, path)),
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

/// `Content-Type`, `Content-Length`, `Accept-Ranges`, `Last-Modified`, `ETag`, in that order,
/// each ending in CRLF; then `Cache-Control: no-store` if asked. `len` is what is served (a
/// file that shrank while read: what was read); the ETag is made from it and the stamp's mtime.
fn headers(ctype: &str, len: u64, stamp: &Stamp, no_store: bool) -> Headers {
    let mut h = Vec::with_capacity(160 + ctype.len());
    h.extend_from_slice(b"Content-Type: ");
    h.extend_from_slice(ctype.as_bytes());
    h.extend_from_slice(b"\r\n");
    let ct_end = h.len();
    h.extend_from_slice(b"Content-Length: ");
    push_decimal(&mut h, len);
    h.extend_from_slice(b"\r\n");
    let cl_end = h.len();
    h.extend_from_slice(b"Accept-Ranges: bytes\r\nLast-Modified: ");
    h.extend_from_slice(&date::format_http_date(stamp.mtime()));
    h.extend_from_slice(b"\r\n");
    let validators = h.len();
    h.extend_from_slice(b"ETag: ");
    conditional::push_etag(&mut h, len, stamp.mtime_ns());
    let etag_end = h.len();
    h.extend_from_slice(b"\r\n");
    if no_store {
        h.extend_from_slice(b"Cache-Control: no-store\r\n");
    }
    // Under 300 bytes: a content type is one of the short ones of `mime`.
    let at = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    Headers {
        bytes: h.into_boxed_slice(),
        ct_end: at(ct_end),
        cl_end: at(cl_end),
        validators: at(validators),
        etag_end: at(etag_end),
    }
}

#[cfg(test)]
mod tests;
