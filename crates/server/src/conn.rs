//! One connection: its input buffer, its queue of output, and where it is in the request cycle.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::time::Instant;

use evlab_http::Entry;
use evlab_poll::sys;

/// Bodies up to this size are copied behind their head so that both leave in one write; larger
/// ones are referenced in place (no copy) and leave in the same writev.
pub const COPY_BODY_MAX: usize = 16 * 1024;

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
                        Err(e) if sys::would_block(&e) => return Ok((Front::Blocked, total)),
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
                Chunk::Mem { entry, off } => &entry.body[*off..],
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
/// worker's [`BufPool`], so accepting and serving allocate nothing once a worker has warmed up.
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
    /// When the connection times out in its current state (see `timers.rs`).
    pub deadline: Option<Instant>,
    /// The deadline of this connection's entry in the timer queue.
    pub armed_at: Option<Instant>,
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
        self.deadline = None;
        self.armed_at = None;
    }
}

/// Buffers lent to connections while they have bytes to hold, so that a connection waiting
/// between requests holds none, and a busy worker reuses the same few buffers instead of
/// allocating per request or per connection. Bounded in bytes; a buffer that grew past
/// [`BufPool::KEEP_MAX`] (a large pipelined burst) is freed, not pooled.
#[derive(Debug, Default)]
pub struct BufPool {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
    /// The fewest buffers the pool held since the last [`BufPool::trim`]: that many were not
    /// needed at any moment of the interval.
    low: usize,
}

impl BufPool {
    /// A new buffer's capacity: a request head, or a head plus a small body.
    pub const NEW_CAPACITY: usize = 8 * 1024;
    /// Larger buffers are freed when returned.
    pub const KEEP_MAX: usize = 64 * 1024;
    /// What the pool may hold at most.
    pub const POOL_BYTES: usize = 8 << 20;
    /// Buffers a trim always leaves in the pool.
    pub const TRIM_KEEP: usize = 16;

    /// Gives `v` a buffer if it has none.
    #[inline]
    pub fn lend(&mut self, v: &mut Vec<u8>) {
        if v.capacity() == 0 {
            *v = match self.bufs.pop() {
                Some(b) => {
                    self.bytes -= b.capacity();
                    self.low = self.low.min(self.bufs.len());
                    b
                }
                None => Vec::with_capacity(Self::NEW_CAPACITY),
            };
        }
    }

    /// Frees the buffers that sat unused since the last trim (beyond [`BufPool::TRIM_KEEP`]),
    /// oldest first, so the pool follows the recent peak of buffers lent at once, not the
    /// highest ever. Returns the bytes freed.
    pub fn trim(&mut self) -> usize {
        let excess = self
            .low
            .min(self.bufs.len())
            .saturating_sub(Self::TRIM_KEEP);
        let freed: usize = self.bufs.drain(..excess).map(|b| b.capacity()).sum();
        self.bytes -= freed;
        if excess > 0 {
            self.bufs.shrink_to(2 * self.bufs.len());
        }
        self.low = self.bufs.len();
        freed
    }

    /// Bytes of the buffers held for lending.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Buffers held for lending.
    pub fn buffers(&self) -> usize {
        self.bufs.len()
    }

    /// Takes `v`'s buffer back if it holds nothing.
    #[inline]
    pub fn reclaim(&mut self, v: &mut Vec<u8>) {
        if v.is_empty() && v.capacity() > 0 {
            let b = std::mem::take(v);
            let cap = b.capacity();
            if cap <= Self::KEEP_MAX && self.bytes + cap <= Self::POOL_BYTES {
                self.bytes += cap;
                self.bufs.push(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BufPool;

    fn lend_n(pool: &mut BufPool, n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|_| {
                let mut v = Vec::new();
                pool.lend(&mut v);
                v
            })
            .collect()
    }

    fn reclaim_all(pool: &mut BufPool, bufs: Vec<Vec<u8>>) {
        for mut v in bufs {
            pool.reclaim(&mut v);
        }
    }

    #[test]
    fn trim_frees_what_sat_unused_through_the_interval() {
        let mut pool = BufPool::default();
        // A burst of 40 connections fills the pool.
        let burst = lend_n(&mut pool, 40);
        reclaim_all(&mut pool, burst);
        assert_eq!(pool.buffers(), 40);
        // The first trim only starts the interval: all 40 may have been needed in it.
        assert_eq!(pool.trim(), 0);
        // Then at most 10 at once: 30 sat unused, all but the reserve go.
        let some = lend_n(&mut pool, 10);
        reclaim_all(&mut pool, some);
        let freed = pool.trim();
        assert_eq!(pool.buffers(), 40 - (30 - BufPool::TRIM_KEEP));
        assert_eq!(freed, (30 - BufPool::TRIM_KEEP) * BufPool::NEW_CAPACITY);
        assert_eq!(pool.bytes(), pool.buffers() * BufPool::NEW_CAPACITY);
        // A busy interval (every buffer lent at some moment) frees nothing.
        let n = pool.buffers();
        let all = lend_n(&mut pool, n);
        reclaim_all(&mut pool, all);
        assert_eq!(pool.trim(), 0);
    }
}
