//! What a worker's loop runs on: an [`Engine`], which waits and moves bytes.
//!
//! The proxy's state machine (`worker/`) waits through its engine and makes every transfer
//! through it. There are two kinds:
//!
//! - [`Readiness`]: a readiness mechanism ([`Poller`]: epoll, poll, select, …) says which
//!   descriptors are ready, and the transfers are the non-blocking syscalls, made at once (the
//!   trait's default methods: `EAGAIN` means "wait for an event").
//! - the completion engine (`completion/`, on the io_uring runtime `evlab_runtime::ring`, as
//!   the server's is) answers from what its io_uring requests brought: the first call submits
//!   the request and answers [`pending`]; the request's completion comes back from the wait
//!   as an event on the descriptor, and the same call made again returns its result.
//!
//! So the decisions (what to read, how much, when to splice, when a pipe must be drained, when
//! to close) are written once.

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::rc::Rc;

use std::time::Duration;

use evlab_poll::{Events, Interest, Poller, PollerStats, Token};
use evlab_runtime::BufPool;
use evlab_sys as sys;

use crate::cache::Object;

/// What a descriptor handed to [`Engine::adopt`] is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The listening socket (the completion engine arms a multishot accept on it).
    Listener,
    /// A client or origin connection: all its transfers go through the [`Engine`].
    Conn,
}

/// The answer of a completion engine to a transfer whose request is in flight (or was just
/// submitted): its completion will come as an event. Never returned by readiness mechanisms.
pub(crate) fn pending(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINPROGRESS)
}

pub(crate) fn in_flight() -> io::Error {
    io::Error::from_raw_os_error(libc::EINPROGRESS)
}

/// What an origin connection holds between two exchanges.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Unasked {
    /// Nothing: it may carry the next request.
    Quiet,
    /// The origin closed it, or it failed: unusable, but nothing it said is in doubt.
    Closed,
    /// Bytes no request asked for (beyond a response's end, or a response to nothing): the
    /// origin and the proxy disagree on where responses end, so the connection is unusable and
    /// the response before them suspect.
    Bytes,
}

/// `recv(MSG_PEEK)`: what waits in a socket, without taking it.
pub(crate) fn peek_unasked(fd: RawFd) -> Unasked {
    let mut b = [0u8; 1];
    match sys::recv(fd, &mut b, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
        Ok(0) => Unasked::Closed,
        Ok(_) => Unasked::Bytes,
        Err(e) if sys::would_block(&e) => Unasked::Quiet,
        Err(e) if e.raw_os_error() == Some(libc::EINTR) => peek_unasked(fd),
        Err(_) => Unasked::Closed,
    }
}

/// One part of a write, `bytes[*pos..]`: what a response is made of.
pub(crate) enum Part<'a> {
    /// Bytes in a vector of the state machine's: a completion engine takes the vector itself
    /// (and leaves an empty one in its place, `*pos` 0) instead of copying its bytes.
    Owned(&'a mut Vec<u8>, &'a mut usize),
    /// A cached object's body: a completion engine holds the object until the send is done.
    Shared(&'a Rc<Object>, &'a mut usize),
    /// Bytes that stay where they are (a body being kept for the cache): a completion
    /// engine copies them.
    Borrowed(&'a [u8], &'a mut usize),
}

impl Part<'_> {
    #[inline]
    pub(crate) fn rest(&self) -> &[u8] {
        match self {
            Part::Owned(v, pos) => &v[**pos..],
            Part::Shared(o, pos) => &o.body[**pos..],
            Part::Borrowed(b, pos) => &b[**pos..],
        }
    }

    #[inline]
    fn advance(&mut self, n: usize) -> usize {
        let k = n.min(self.rest().len());
        match self {
            Part::Owned(_, pos) | Part::Shared(_, pos) | Part::Borrowed(_, pos) => **pos += k,
        }
        k
    }
}

/// Moves each part's position past the `n` bytes written from the front of them.
pub(crate) fn advance_parts(parts: &mut [Part<'_>], mut n: usize) {
    for p in parts {
        n -= p.advance(n);
    }
}

/// A worker's engine: how it waits (the `watch` methods and [`Engine::wait`]) and how it
/// moves bytes (the rest; a readiness engine takes the defaults, the syscalls). Every
/// descriptor's events carry the descriptor itself as their token.
pub(crate) trait Engine: Sized {
    /// Transfers complete asynchronously: a short read proves nothing (only [`pending`] says
    /// that nothing more is there), and writes are taken whole into the engine's own buffer.
    const COMPLETION: bool = false;

    /// An engine for this worker thread.
    fn new() -> io::Result<Self>;

    /// Watches `fd` for `interest`: its events come from [`Engine::wait`].
    fn watch(&mut self, fd: RawFd, interest: Interest) -> io::Result<()>;

    /// Changes what `fd` is watched for.
    fn rewatch(&mut self, fd: RawFd, interest: Interest) -> io::Result<()>;

    /// Stops watching `fd` (before it is closed).
    fn unwatch(&mut self, fd: RawFd) -> io::Result<()>;

    /// The turn's wait: the events of at most `timeout` from now into `events`.
    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize>;

    /// Whether an event is reported once per change (edge) rather than while it holds.
    fn edge_triggered(&self) -> bool;

    /// The waits' counts, as every mechanism keeps them.
    fn stats(&self) -> PollerStats;

    /// The buffer pool the worker takes from and gives to: its own (`worker`), or the
    /// engine's when the engine takes buffers too (a completion engine's recvs take one, a
    /// finished send gives its vectors back). One pool for both: with two, buffers pile up
    /// in one while the other allocates.
    fn bufs<'a>(&'a mut self, worker: &'a mut BufPool) -> &'a mut BufPool {
        worker
    }

    /// Says what `fd` is, before it is registered.
    fn adopt(&mut self, _fd: RawFd, _role: Role) {}

    /// A new connection, and its peer's address when it comes for free (accept4 gives it;
    /// the completion engine's multishot accept does not, and the worker asks once if needed).
    fn accept(&mut self, listen_fd: RawFd) -> io::Result<(RawFd, Option<SocketAddr>)> {
        sys::accept4_peer(listen_fd, libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
    }

    /// A non-blocking connect on `fd` is under way: the connection's writability is to say
    /// when it is up (a readiness mechanism's registration for writability does so).
    fn watch_connect(&mut self, _fd: RawFd) -> io::Result<()> {
        Ok(())
    }

    /// Reads at most `max` bytes into `buf`'s spare capacity.
    fn read_max(&mut self, fd: RawFd, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        sys::read_into_max(fd, buf, max)
    }

    fn read(&mut self, fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
        sys::read(fd, buf)
    }

    fn writev(&mut self, fd: RawFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if bufs.len() == 1 {
            sys::send(fd, &bufs[0], 0)
        } else {
            sys::writev(fd, bufs)
        }
    }

    /// Writes the parts in order (one writev) and moves their positions past what was written;
    /// returns how many bytes that was. A completion engine takes them all (see [`Part`]): the
    /// state machine must not count on finding them where they were.
    fn write_parts(&mut self, fd: RawFd, parts: &mut [Part<'_>]) -> io::Result<usize> {
        let mut iov = [IoSlice::new(&[]); 4];
        let mut k = 0;
        for p in parts.iter() {
            let rest = p.rest();
            if !rest.is_empty() && k < iov.len() {
                iov[k] = IoSlice::new(rest);
                k += 1;
            }
        }
        if k == 0 {
            return Ok(0);
        }
        let n = self.writev(fd, &iov[..k])?;
        advance_parts(parts, n);
        Ok(n)
    }

    /// Writes into a pipe known to be empty, with room for `buf` (splice-release's head, put
    /// ahead of the body): write(2) under every engine. It cannot block, and the completion
    /// engine makes it too, since a request would cost the ring enter it is there to save.
    fn write_pipe(&mut self, fd: RawFd, buf: &[u8]) -> io::Result<usize> {
        sys::write(fd, buf)
    }

    /// Reads at most `max` bytes from a pipe known to hold them (splice-keep's copy of what
    /// it tee'd) into `buf`'s spare capacity; `notify` as for [`Engine::splice`].
    fn read_pipe(
        &mut self,
        fd: RawFd,
        buf: &mut Vec<u8>,
        max: usize,
        _notify: RawFd,
    ) -> io::Result<usize> {
        sys::read_into_max(fd, buf, max)
    }

    /// splice(2) from `fd_in` to `fd_out`; `notify` is the registered descriptor whose event
    /// reports a completion (the socket's own, or the client's for pipe to pipe).
    fn splice(
        &mut self,
        fd_in: RawFd,
        fd_out: RawFd,
        len: usize,
        _notify: RawFd,
    ) -> io::Result<usize> {
        sys::splice(fd_in, fd_out, len, 0)
    }

    fn tee(
        &mut self,
        fd_in: RawFd,
        fd_out: RawFd,
        len: usize,
        _notify: RawFd,
    ) -> io::Result<usize> {
        sys::tee(fd_in, fd_out, len)
    }

    /// Shuts the sending side (after whatever was written has left).
    fn shutdown_write(&mut self, fd: RawFd) {
        let _ = sys::shutdown(fd, libc::SHUT_WR);
    }

    /// Closes a deregistered descriptor.
    fn close(&mut self, fd: RawFd) {
        let _ = sys::close(fd);
    }

    /// Closes a deregistered client that is to be told nothing more (it took none of its
    /// output): what is still on its way to it is dropped, not waited for.
    fn abort(&mut self, fd: RawFd) {
        self.close(fd);
    }

    /// A pipe goes back to the pool: true if a request still uses one of its ends (it must be
    /// closed, never pooled: bytes may still arrive in it).
    fn pipe_busy(&mut self, _rd: RawFd, _wr: RawFd) -> bool {
        false
    }

    /// Whether bodies may be spliced (the kernel's io_uring may lack splice and tee).
    fn can_splice(&self) -> bool {
        true
    }

    /// What an origin connection holds that no request asked for (after a response's end, or
    /// while idle), without consuming it. Only responses to requests actually sent may be read
    /// from a connection, so anything but [`Unasked::Quiet`] makes it unusable.
    fn unasked(&mut self, fd: RawFd) -> Unasked {
        peek_unasked(fd)
    }

    /// An idle origin connection is to be watched: report bytes or a close on it as a
    /// readable event, without reading them (a readiness mechanism does so by its registration;
    /// the worker asks the completion engine once a connection has been idle a while).
    fn watch_idle(&mut self, _fd: RawFd) {}

    /// An idle origin connection is taken for a request: stop watching it.
    fn unwatch_idle(&mut self, _fd: RawFd) {}
}

/// A readiness mechanism as a worker's engine: it waits as the mechanism does, and every
/// transfer is the syscall (the default methods).
pub(crate) struct Readiness<P: Poller>(P);

impl<P: Poller> Engine for Readiness<P> {
    fn new() -> io::Result<Self> {
        P::new().map(Readiness)
    }

    #[inline]
    fn watch(&mut self, fd: RawFd, interest: Interest) -> io::Result<()> {
        self.0.register(fd, Token(fd as usize), interest)
    }

    #[inline]
    fn rewatch(&mut self, fd: RawFd, interest: Interest) -> io::Result<()> {
        self.0.reregister(fd, Token(fd as usize), interest)
    }

    #[inline]
    fn unwatch(&mut self, fd: RawFd) -> io::Result<()> {
        self.0.deregister(fd)
    }

    #[inline]
    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        self.0.wait(events, timeout)
    }

    fn edge_triggered(&self) -> bool {
        self.0.edge_triggered()
    }

    fn stats(&self) -> PollerStats {
        self.0.stats()
    }
}
