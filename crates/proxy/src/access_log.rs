//! The access log (`--access-log FILE`, `-` for stdout): one line per request, off by default.
//!
//! A line is formatted into its worker's buffer when the request's last byte has gone to the
//! client (or when the client's connection ends first), and the buffer is written out in
//! batches: when it holds [`BATCH_BYTES`], at most [`BATCH_AGE`] after its first line, and when
//! the worker stops. A request therefore costs no write of its own; with the log off it costs no
//! allocation, clock read or write (a byte count per client write, and a test or two of an
//! empty queue). Writes of several workers go one batch at a time through a lock, so their
//! lines never interleave.
//!
//! The line: `ADDR METHOD TARGET STATUS BYTES CACHE MODE TTLB_US`, separated by single spaces:
//! the client's address and port; the method and target as the request line gave them (bytes
//! outside printable ASCII as `\xNN`, `-` when the request line could not be read); the status
//! sent (`0` if none was: the client left first); the bytes written to the client for it,
//! head included; `HIT`, `MISS` (looked up, not found) or `-` (not a cacheable request, an
//! error, or the cache off); the forwarding mode of its body (`copy`, `splice`, `splice-keep`,
//! `-` when nothing was forwarded from the origin: a hit, an error, a CONNECT refused; a tunnel
//! has the mode of the tunnel); and the microseconds from the turn of the loop in which the
//! proxy took the request to the write that handed its last byte to the kernel.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use evlab_sys as sys;

/// A worker writes its buffered lines once they hold this many bytes …
pub(crate) const BATCH_BYTES: usize = 32 * 1024;
/// … or once its oldest line has waited this long.
pub(crate) const BATCH_AGE: Duration = Duration::from_secs(1);

/// Where the lines go: a file opened for appending, or the standard output.
#[derive(Debug)]
pub struct AccessLog {
    file: Mutex<File>,
    /// Batches that could not be written whole (disk full, a closed pipe): dropped.
    failed: AtomicU64,
}

impl AccessLog {
    /// Opens `path` for appending (created with mode 0644 if missing); `-` is the standard
    /// output.
    pub fn open(path: &str) -> io::Result<AccessLog> {
        let file = if path == "-" {
            File::from(io::stdout().as_fd().try_clone_to_owned()?)
        } else {
            File::options().append(true).create(true).open(path)?
        };
        Ok(AccessLog {
            file: Mutex::new(file),
            failed: AtomicU64::new(0),
        })
    }

    /// Batches that were dropped because a write failed.
    pub fn failed_batches(&self) -> u64 {
        self.failed.load(Relaxed)
    }

    /// Writes `buf` whole (one write(2), more only if the kernel takes part of it).
    pub(crate) fn write_batch(&self, mut buf: &[u8]) {
        let f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let fd = f.as_raw_fd();
        while !buf.is_empty() {
            match sys::write(fd, buf) {
                Ok(0) => break,
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // A non-blocking stdout: wait for it rather than drop lines.
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(_) => break,
            }
        }
        if !buf.is_empty() {
            self.failed.fetch_add(1, Relaxed);
        }
    }
}

/// What a line says of the cache.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum CacheMark {
    None,
    Hit,
    Miss,
}

impl CacheMark {
    fn name(self) -> &'static str {
        match self {
            CacheMark::None => "-",
            CacheMark::Hit => "HIT",
            CacheMark::Miss => "MISS",
        }
    }
}

/// A request whose line is not written yet.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The client's byte offset (all bytes written to it so far) where its response begins …
    pub first: u64,
    /// … and where it ends, once known (every byte of it queued or sent).
    pub end: Option<u64>,
    pub start: Instant,
    /// `METHOD TARGET`, escaped.
    pub request: Box<str>,
    pub status: u16,
    pub cache: CacheMark,
    pub mode: &'static str,
}

/// `METHOD TARGET` from the start of a request head, escaped; `- -` if there is no such line.
pub(crate) fn request_words(head: &[u8]) -> Box<str> {
    let line_end = head
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(head.len().min(8192));
    let mut words = head[..line_end]
        .split(|&b| b == b' ')
        .filter(|w| !w.is_empty());
    let mut out = String::new();
    for (i, w) in [words.next(), words.next()].into_iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        match w {
            Some(w) => escape(w, &mut out),
            None => out.push('-'),
        }
    }
    out.into_boxed_str()
}

fn escape(w: &[u8], out: &mut String) {
    use std::fmt::Write;
    for &b in w.iter().take(4096) {
        if b.is_ascii_graphic() && b != b'\\' {
            out.push(b as char);
        } else {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
}

/// A worker's buffered lines.
#[derive(Debug)]
pub(crate) struct LogBuf {
    pub sink: std::sync::Arc<AccessLog>,
    pub buf: Vec<u8>,
    /// When the oldest line in `buf` was added.
    pub since: Option<Instant>,
}

impl LogBuf {
    pub fn new(sink: std::sync::Arc<AccessLog>) -> LogBuf {
        LogBuf {
            sink,
            buf: Vec::with_capacity(BATCH_BYTES + 1024),
            since: None,
        }
    }

    /// Adds the line of `e`, which sent `bytes` to `peer` and ended at `done`.
    pub fn line(
        &mut self,
        peer: Option<std::net::SocketAddr>,
        e: &Entry,
        bytes: u64,
        done: Instant,
    ) {
        use std::io::Write;
        let us = done.saturating_duration_since(e.start).as_micros();
        let _ = match peer {
            Some(a) => write!(self.buf, "{a}"),
            None => write!(self.buf, "-"),
        };
        let _ = writeln!(
            self.buf,
            " {} {} {bytes} {} {} {us}",
            e.request,
            e.status,
            e.cache.name(),
            e.mode
        );
        if self.since.is_none() {
            self.since = Some(done);
        }
    }

    /// Whether the buffer is due to be written at `now`.
    pub fn due(&self, now: Instant) -> bool {
        self.buf.len() >= BATCH_BYTES || self.since.is_some_and(|t| now >= t + BATCH_AGE)
    }

    /// When the buffer will be due by age, if it holds anything.
    pub fn deadline(&self) -> Option<Instant> {
        self.since.map(|t| t + BATCH_AGE)
    }

    pub fn flush(&mut self) {
        if !self.buf.is_empty() {
            self.sink.write_batch(&self.buf);
            self.buf.clear();
        }
        self.since = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_words_are_escaped() {
        assert_eq!(
            &*request_words(b"GET /a?b=1 HTTP/1.1\r\nHost: x\r\n"),
            "GET /a?b=1"
        );
        assert_eq!(
            &*request_words(b"GET  /x\tHTTP/1.1\r\n"),
            "GET /x\\x09HTTP/1.1"
        );
        assert_eq!(&*request_words(b"\r\n"), "- -");
        assert_eq!(&*request_words(b"BREW\r\n"), "BREW -");
        assert_eq!(&*request_words(b"G\\T /\xff HTTP/1.1\n"), "G\\x5cT /\\xff");
    }
}
