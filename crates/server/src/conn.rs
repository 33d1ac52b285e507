//! One connection: its input buffer, its queue of output, and where it is in the request cycle.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;

use evlab_http::Entry;
use evlab_runtime::Timer;
use evlab_sys as sys;

/// Bodies up to this size are copied behind their head so that both leave in one write; larger
/// ones are referenced in place (no copy) and leave in the same writev.
pub const COPY_BODY_MAX: usize = 16 * 1024;
/// What `--file-io read` reads of a file at a time.
pub const READ_CHUNK: usize = 64 * 1024;

/// Stop parsing pipelined requests while this much output is queued, so a client that sends
/// without reading cannot make the server buffer without bound.
pub const OUT_HIGH_WATER: usize = 256 * 1024;

const MAX_IOV: usize = 16;

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum State {
    /// Waiting for (more of) a request.
    #[default]
    Reading,
    /// Responses queued; waiting to write them.
    Writing,
    /// A response queued but held back for the origin delay (`Config::origin_delay`): nothing
    /// is read or written until the connection's deadline passes, then it is writing.
    Delayed,
    /// After an error response: reading and discarding until the peer closes, so that our
    /// response is not destroyed by a reset (the "lingering close").
    Lingering,
}

#[derive(Debug)]
enum Chunk {
    /// Bytes of `Out::buf` up to this end offset.
    Buf { end: usize },
    /// An in-memory body, bytes `off..end` (the whole body, or a range's part of it).
    Mem {
        entry: Rc<Entry>,
        off: usize,
        end: usize,
    },
    /// A body sent by sendfile(2), bytes `off..end` of the file.
    File {
        entry: Rc<Entry>,
        off: u64,
        end: u64,
    },
    /// A body read from its file (`--file-io read`), bytes `off..end`: at the front of the
    /// queue, each `READ_CHUNK` read goes in front of it as an `Owned` chunk.
    Read {
        entry: Rc<Entry>,
        off: u64,
        end: u64,
    },
    /// Bytes read from a file, from `off` to their end.
    Owned { data: Vec<u8>, off: usize },
    /// A body written from a mapping of its file (`--file-io mmap`), bytes `off..end`.
    Map {
        map: Rc<sys::Mapping>,
        off: usize,
        end: usize,
    },
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
    /// A read buffer of `--file-io read` kept between its chunks.
    spare: Vec<u8>,
}

/// What is at the front of the queue after the syscall-only work is done.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Front {
    /// Nothing left.
    Done,
    /// The socket is full (sendfile would block).
    Blocked,
    /// Memory chunks, to be written with write/writev (or an io_uring send).
    Memory,
}

pub enum WriteResult {
    /// Everything was sent.
    Done,
    /// The socket's buffer is full.
    Blocked,
}

impl Out {
    /// Empties the queue for a new connection; the chunk queue keeps a small capacity.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.pos = 0;
        self.committed = 0;
        self.pending = 0;
        self.chunks.clear();
        if self.chunks.capacity() > 64 {
            self.chunks = VecDeque::new();
        }
        // A spare shell holds no read buffer.
        self.spare = Vec::new();
    }

    /// The head buffer, for the worker's pool to lend to or reclaim from.
    #[inline]
    pub fn buf_slot(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

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

    /// Bytes `part` of an in-memory body (all of it for a 200), referenced, not copied.
    pub fn push_mem(&mut self, entry: Rc<Entry>, part: Range<u64>) {
        self.commit_buf();
        let (off, end) = (part.start as usize, part.end as usize);
        self.pending += end - off;
        self.chunks.push_back(Chunk::Mem { entry, off, end });
    }

    /// Bytes `part` of a file, to send with sendfile(2) from that offset.
    pub fn push_file(&mut self, entry: Rc<Entry>, part: Range<u64>) {
        self.commit_buf();
        self.pending += (part.end - part.start) as usize;
        self.chunks.push_back(Chunk::File {
            entry,
            off: part.start,
            end: part.end,
        });
    }

    /// Bytes `part` of a file to read (pread) and write, a chunk at a time.
    pub fn push_read(&mut self, entry: Rc<Entry>, part: Range<u64>) {
        self.commit_buf();
        self.pending += (part.end - part.start) as usize;
        self.chunks.push_back(Chunk::Read {
            entry,
            off: part.start,
            end: part.end,
        });
    }

    /// Bytes `part` of a file to write from a mapping of the file, made now; the entry back
    /// when the file cannot be mapped.
    pub fn push_map(&mut self, entry: Rc<Entry>, part: Range<u64>) -> Result<(), Rc<Entry>> {
        let Ok(map) = sys::Mapping::new(entry.file.as_raw_fd(), entry.len as usize) else {
            return Err(entry);
        };
        self.commit_buf();
        let (off, end) = (part.start as usize, part.end as usize);
        self.pending += end - off;
        self.chunks.push_back(Chunk::Map {
            map: Rc::new(map),
            off,
            end,
        });
        Ok(())
    }

    pub fn push_cork(&mut self, on: bool) {
        self.commit_buf();
        self.chunks.push_back(Chunk::Cork(on));
    }

    /// Writes as much as the socket takes. Returns bytes written alongside.
    pub fn write_to(&mut self, fd: RawFd) -> io::Result<(WriteResult, usize)> {
        // The common case, one run of head (and small body) bytes, goes out in one write with
        // none of the general queue walk.
        if let (1, Some(&Chunk::Buf { end })) = (self.chunks.len(), self.chunks.front()) {
            return self.write_buf_only(fd, end);
        }
        let mut total = 0;
        loop {
            let (front, n) = self.write_front_special(fd)?;
            total += n;
            match front {
                Front::Done => return Ok((WriteResult::Done, total)),
                Front::Blocked => return Ok((WriteResult::Blocked, total)),
                Front::Memory => {}
            }
            let mut iov = [IoSlice::new(&[]); MAX_IOV];
            let (n_iov, want) = self.slices(&mut iov);
            if n_iov == 0 {
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

    /// [`Out::write_to`] when the queue is one `Buf` chunk ending at `end`.
    fn write_buf_only(&mut self, fd: RawFd, end: usize) -> io::Result<(WriteResult, usize)> {
        loop {
            match sys::write(fd, &self.buf[self.pos..end]) {
                Ok(n) if self.pos + n == end => {
                    self.chunks.pop_front();
                    self.buf.clear();
                    self.pos = 0;
                    self.committed = 0;
                    self.pending = 0;
                    return Ok((WriteResult::Done, n));
                }
                Ok(n) => {
                    // A short write: the socket buffer is full now.
                    self.pos += n;
                    self.pending = self.pending.saturating_sub(n);
                    return Ok((WriteResult::Blocked, n));
                }
                Err(e) if sys::would_block(&e) => return Ok((WriteResult::Blocked, 0)),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Does what must be done with syscalls at the front of the queue — TCP_CORK changes and
    /// sendfile — until memory chunks (or nothing) are at the front or the socket is full.
    pub fn write_front_special(&mut self, fd: RawFd) -> io::Result<(Front, usize)> {
        let mut total = 0;
        loop {
            match self.chunks.front_mut() {
                None => {
                    self.buf.clear();
                    self.pos = 0;
                    self.committed = 0;
                    self.pending = 0;
                    return Ok((Front::Done, total));
                }
                Some(Chunk::Cork(on)) => {
                    sys::setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_CORK, *on as i32)?;
                    self.chunks.pop_front();
                }
                Some(Chunk::File { entry, off, end }) => {
                    let len = *end;
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
                        Err(e) if sys::would_block(&e) => return Ok((Front::Blocked, total)),
                        Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                        Err(e) => return Err(e),
                    }
                }
                Some(Chunk::Read { entry, off, end }) => {
                    let remaining = *end - *off;
                    if remaining == 0 {
                        self.chunks.pop_front();
                        continue;
                    }
                    let mut data = std::mem::take(&mut self.spare);
                    data.clear();
                    let want = (remaining as usize).min(READ_CHUNK);
                    data.reserve(want);
                    match sys::pread_into_max(entry.file.as_raw_fd(), &mut data, *off, want) {
                        Ok(0) => {
                            // The file shrank under us: the promised length cannot be sent.
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "file truncated during read",
                            ));
                        }
                        Ok(n) => {
                            *off += n as u64;
                            self.chunks.push_front(Chunk::Owned { data, off: 0 });
                            return Ok((Front::Memory, total));
                        }
                        Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                        Err(e) => return Err(e),
                    }
                }
                Some(_) => return Ok((Front::Memory, total)),
            }
        }
    }

    /// Fills `out` with the run of memory chunks at the front; returns (slices, bytes).
    fn slices<'a>(&'a mut self, out: &mut [IoSlice<'a>]) -> (usize, usize) {
        // Chunks emptied by earlier writes go first, so that an empty front never hides data.
        self.advance(0);
        let mut n = 0;
        let mut want = 0;
        let mut start = self.pos;
        for c in self.chunks.iter() {
            if n == out.len() {
                break;
            }
            let s: &[u8] = match c {
                Chunk::Buf { end } => {
                    let s = &self.buf[start..*end];
                    start = *end;
                    s
                }
                Chunk::Mem { entry, off, end } => &entry.body[*off..*end],
                Chunk::Owned { data, off } => &data[*off..],
                Chunk::Map { map, off, end } => &map.bytes()[*off..*end],
                _ => break,
            };
            if s.is_empty() {
                continue;
            }
            out[n] = IoSlice::new(s);
            n += 1;
            want += s.len();
        }
        (n, want)
    }

    /// Fills `iov` with the run of memory chunks at the front, for a request the kernel reads
    /// later (io_uring); returns (iovecs, bytes). The pointers stay valid until the queue is
    /// advanced or appended to.
    pub fn gather(&mut self, iov: &mut [libc::iovec]) -> (usize, usize) {
        let mut slices = [IoSlice::new(&[]); MAX_IOV];
        let max = iov.len().min(MAX_IOV);
        let (n, want) = self.slices(&mut slices[..max]);
        for (v, s) in iov.iter_mut().zip(&slices[..n]) {
            *v = libc::iovec {
                iov_base: s.as_ptr() as *mut libc::c_void,
                iov_len: s.len(),
            };
        }
        (n, want)
    }

    /// Consumes `n` written bytes from the front memory chunks (and drops empty ones).
    pub fn advance(&mut self, mut n: usize) {
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
                Chunk::Mem { off, end, .. } => {
                    let avail = *end - *off;
                    if n >= avail {
                        n -= avail;
                        self.chunks.pop_front();
                    } else {
                        *off += n;
                        return;
                    }
                }
                Chunk::Owned { data, off } => {
                    let avail = data.len() - *off;
                    if n >= avail {
                        n -= avail;
                        // Its buffer serves the next read.
                        if let Some(Chunk::Owned { data, .. }) = self.chunks.pop_front() {
                            self.spare = data;
                        }
                    } else {
                        *off += n;
                        return;
                    }
                }
                Chunk::Map { off, end, .. } => {
                    let avail = *end - *off;
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
        if self.chunks.is_empty() {
            // Everything sent: the head buffer starts over (the io_uring engine learns of the
            // end from a send's completion, not from `write_front_special`).
            self.buf.clear();
            self.pos = 0;
            self.committed = 0;
            self.pending = 0;
        }
    }
}

/// A connection: what every engine keeps for it. Engine-specific state (readiness flags, armed
/// io_uring requests) lives beside it in the engine's `Extra`.
///
/// A `Conn` is a recycled shell: when a connection closes, its slot goes back to the worker's
/// spares with its small allocations (the chunk queue) intact, and its buffers go back to the
/// worker's `BufPool` (`evlab_runtime`), so accepting and serving allocate nothing once a worker has warmed up.
#[derive(Debug, Default)]
pub struct Conn {
    pub fd: RawFd,
    /// Names this connection among all that have used the descriptor number: timers and
    /// io_uring completions for an earlier connection on the same descriptor are recognised.
    pub id: u32,
    pub state: State,
    /// Input not yet answered: part of a request head, or pipelined requests waiting behind a
    /// full output queue. Empty (capacity 0) while the connection waits between requests.
    pub rbuf: Vec<u8>,
    pub out: Out,
    /// Close once the output drains.
    pub close_after: bool,
    /// ... and do it as a lingering close.
    pub linger: bool,
    /// The peer shut down its side: nothing more will arrive; close once every complete
    /// request received has been answered.
    pub peer_eof: bool,
    /// When the connection times out in its current state (`evlab_runtime::deadlines`).
    pub timer: Timer,
}

impl Conn {
    /// Makes a (recycled) shell stand for a new connection.
    pub fn reset(&mut self, fd: RawFd, id: u32) {
        self.fd = fd;
        self.id = id;
        self.state = State::Reading;
        self.rbuf.clear();
        self.out.reset();
        self.close_after = false;
        self.linger = false;
        self.peer_eof = false;
        self.timer = Timer::default();
    }
}

evlab_runtime::timed_by_fields!(Conn);
