//! One connection: its input buffer, its queue of output, and where it is in the request cycle.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;

use evlab_http::Entry;
use evlab_poll::{sys, Interest};

/// Bodies up to this size are copied behind their head so that both leave in one write; larger
/// ones are referenced in place (no copy) and leave in the same writev.
pub const COPY_BODY_MAX: usize = 16 * 1024;

/// Stop parsing pipelined requests while this much output is queued, so a client that sends
/// without reading cannot make the server buffer without bound.
pub const OUT_HIGH_WATER: usize = 256 * 1024;

const MAX_IOV: usize = 16;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Waiting for (more of) a request.
    Reading,
    /// Responses queued; waiting to write them.
    Writing,
    /// After an error response: reading and discarding until the peer closes, so that our
    /// response is not destroyed by a reset (the "lingering close").
    Lingering,
}

#[derive(Debug)]
enum Chunk {
    /// Bytes of `Out::buf` up to this end offset.
    Buf { end: usize },
    /// An in-memory body, from `off` to its end.
    Mem { entry: Rc<Entry>, off: usize },
    /// A body sent by sendfile(2), from `off` to its end.
    File { entry: Rc<Entry>, off: u64 },
    /// Set (true) or clear (false) TCP_CORK at this point of the stream.
    Cork(bool),
}

/// What is left to send, in order.
#[derive(Debug, Default)]
pub struct Out {
    buf: Vec<u8>,
    /// Bytes of `buf` already sent.
    pos: usize,
    /// Bytes of `buf` already recorded as chunks.
    committed: usize,
    chunks: VecDeque<Chunk>,
    pending: usize,
}

pub enum WriteResult {
    /// Everything was sent.
    Done,
    /// The socket's buffer is full.
    Blocked,
}

impl Out {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    #[inline]
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// The buffer to append a head (and small body) to; call [`Out::commit_buf`] after.
    #[inline]
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Records bytes appended to `buf()` since the last commit.
    #[inline]
    pub fn commit_buf(&mut self) {
        let end = self.buf.len();
        if end == self.committed {
            return;
        }
        self.pending += end - self.committed;
        self.committed = end;
        if let Some(Chunk::Buf { end: e }) = self.chunks.back_mut() {
            *e = end;
        } else {
            self.chunks.push_back(Chunk::Buf { end });
        }
    }

    pub fn push_mem(&mut self, entry: Rc<Entry>) {
        self.commit_buf();
        self.pending += entry.body.len();
        self.chunks.push_back(Chunk::Mem { entry, off: 0 });
    }

    pub fn push_file(&mut self, entry: Rc<Entry>) {
        self.commit_buf();
        self.pending += entry.len as usize;
        self.chunks.push_back(Chunk::File { entry, off: 0 });
    }

    pub fn push_cork(&mut self, on: bool) {
        self.commit_buf();
        self.chunks.push_back(Chunk::Cork(on));
    }

    /// Writes as much as the socket takes. Returns bytes written alongside.
    pub fn write_to(&mut self, fd: RawFd) -> io::Result<(WriteResult, usize)> {
        let mut total = 0;
        loop {
            match self.chunks.front_mut() {
                None => {
                    self.buf.clear();
                    self.pos = 0;
                    self.committed = 0;
                    self.pending = 0;
                    return Ok((WriteResult::Done, total));
                }
                Some(Chunk::Cork(on)) => {
                    sys::setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_CORK, *on as i32)?;
                    self.chunks.pop_front();
                }
                Some(Chunk::File { entry, off }) => {
                    let len = entry.len;
                    let remaining = (len - *off) as usize;
                    if remaining == 0 {
                        self.chunks.pop_front();
                        continue;
                    }
                    let mut o = *off as i64;
                    match sys::sendfile(fd, entry.file.as_raw_fd(), &mut o, remaining.min(1 << 30))
                    {
                        Ok(0) => {
                            // The file shrank under us: the promised length cannot be sent.
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "file truncated during sendfile",
                            ));
                        }
                        Ok(n) => {
                            *off = o as u64;
                            total += n;
                            self.pending = self.pending.saturating_sub(n);
                            if *off >= len {
                                self.chunks.pop_front();
                            }
                        }
                        Err(e) if sys::would_block(&e) => return Ok((WriteResult::Blocked, total)),
                        Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                        Err(e) => return Err(e),
                    }
                }
                Some(_) => {
                    // Gather the run of memory chunks into one writev.
                    let mut iov: [IoSlice<'_>; MAX_IOV] = [IoSlice::new(&[]); MAX_IOV];
                    let mut n_iov = 0;
                    let mut want = 0;
                    let mut start = self.pos;
                    for c in self.chunks.iter() {
                        if n_iov == MAX_IOV {
                            break;
                        }
                        let s: &[u8] = match c {
                            Chunk::Buf { end } => {
                                let s = &self.buf[start..*end];
                                start = *end;
                                s
                            }
                            Chunk::Mem { entry, off } => &entry.body[*off..],
                            _ => break,
                        };
                        if s.is_empty() {
                            continue;
                        }
                        iov[n_iov] = IoSlice::new(s);
                        n_iov += 1;
                        want += s.len();
                    }
                    if n_iov == 0 {
                        // Only empty memory chunks at the front: drop them.
                        self.advance(0);
                        continue;
                    }
                    let r = if n_iov == 1 {
                        sys::write(fd, &iov[0])
                    } else {
                        sys::writev(fd, &iov[..n_iov])
                    };
                    match r {
                        Ok(n) => {
                            total += n;
                            self.advance(n);
                            if n < want {
                                // A short write: the socket buffer is full now.
                                return Ok((WriteResult::Blocked, total));
                            }
                        }
                        Err(e) if sys::would_block(&e) => return Ok((WriteResult::Blocked, total)),
                        Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }

    /// Consumes `n` written bytes from the front memory chunks (and drops empty ones).
    fn advance(&mut self, mut n: usize) {
        self.pending = self.pending.saturating_sub(n);
        while let Some(front) = self.chunks.front_mut() {
            match front {
                Chunk::Buf { end } => {
                    let avail = *end - self.pos;
                    if n >= avail {
                        n -= avail;
                        self.pos = *end;
                        self.chunks.pop_front();
                    } else {
                        self.pos += n;
                        return;
                    }
                }
                Chunk::Mem { entry, off } => {
                    let avail = entry.body.len() - *off;
                    if n >= avail {
                        n -= avail;
                        self.chunks.pop_front();
                    } else {
                        *off += n;
                        return;
                    }
                }
                _ => return,
            }
        }
    }
}

/// A connection.
#[derive(Debug)]
pub struct Conn {
    pub fd: RawFd,
    pub state: State,
    /// The interest registered with the mechanism.
    pub interest: Interest,
    /// Readiness as the connection knows it: set by events; cleared by EAGAIN or a short
    /// transfer (edge-triggered), or after each event's work (level-triggered).
    pub readable: bool,
    pub writable: bool,
    pub rbuf: Vec<u8>,
    pub out: Out,
    /// Close once the output drains.
    pub close_after: bool,
    /// ... and do it as a lingering close.
    pub linger: bool,
    /// Identifies the current request cycle, for the header timer.
    pub gen: u64,
}

impl Conn {
    pub fn new(fd: RawFd, gen: u64) -> Conn {
        Conn {
            fd,
            state: State::Reading,
            interest: Interest::READABLE,
            readable: false,
            writable: false,
            rbuf: Vec::new(),
            out: Out::default(),
            close_after: false,
            linger: false,
            gen,
        }
    }
}
