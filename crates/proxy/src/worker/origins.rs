//! The origin pool: idle connections kept for reuse, new ones made, a pooled one found closed, and
//! what a finished exchange gives back.

use super::*;

impl<E: Engine> Worker<E> {
    pub(super) fn origin_for(&mut self, client_fd: RawFd, fresh_only: bool) -> io::Result<Origin> {
        while let Some(mut o) = (!fresh_only).then(|| self.idle.pop()).flatten() {
            // Whatever arrived while it was idle (since the last event was seen) is no answer
            // to the request about to be sent: such a connection is never used again.
            let unasked = if o.quiet_turn == self.turn {
                Unasked::Quiet
            } else {
                self.engine.unasked(o.fd)
            };
            if unasked != Unasked::Quiet {
                self.unusable_origin(o, unasked);
                continue;
            }
            self.engine.unwatch_idle(o.fd);
            // A completion engine has nothing in flight on it to say when the answer comes:
            // its read, tried once the request is out, is.
            if E::COMPLETION {
                o.f.readable = true;
            }
            o.reused = true;
            o.connecting_since = None;
            o.f.writable = true;
            *self.slot(o.fd) = Slot::Origin(client_fd);
            self.stats.origin_reused.inc();
            return Ok(o);
        }
        let origin = self.cfg.origin;
        self.connect_to(origin, client_fd)
    }

    /// A new non-blocking connection to `origin`, registered for writability (its connect
    /// completes with the first event).
    pub(super) fn connect_to(
        &mut self,
        origin: SocketAddr,
        client_fd: RawFd,
    ) -> io::Result<Origin> {
        let domain = if origin.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        let fd = sys::socket(
            domain,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )?;
        let connected = (|| {
            sys::setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
            self.engine.adopt(fd, Role::Conn);
            let done = match sys::connect(fd, &origin) {
                Ok(()) => true,
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
                    self.engine.watch_connect(fd)?;
                    false
                }
                Err(e) => return Err(e),
            };
            self.engine.watch(fd, Interest::WRITABLE)?;
            Ok(done)
        })();
        let done = match connected {
            Ok(done) => done,
            Err(e) => {
                self.engine.close(fd);
                return Err(e);
            }
        };
        self.stats.origin_connects.inc();
        *self.slot(fd) = Slot::Origin(client_fd);
        Ok(Origin {
            fd,
            f: Flags::new(Interest::WRITABLE, done),
            reused: false,
            connecting_since: (!done).then_some(self.now),
            stored: None,
            quiet_turn: 0,
            drained_turn: 0,
        })
    }

    /// Closes an origin connection that holds what no request asked for; bytes make its last
    /// stored response suspect, so it leaves the cache.
    pub(super) fn unusable_origin(&mut self, mut o: Origin, unasked: Unasked) {
        if unasked == Unasked::Bytes {
            self.stats.origin_errors.inc();
            if let Some(key) = o.stored.take() {
                self.cache.remove(&key);
            }
        }
        self.close_origin(o);
    }

    pub(super) fn close_origin(&mut self, o: Origin) {
        let _ = self.engine.unwatch(o.fd);
        self.engine.close(o.fd);
        *self.slot(o.fd) = Slot::Free;
        self.stats.origin_closed.inc();
    }

    /// An origin connection has done its exchange: into the pool, or closed.
    pub(super) fn release_origin(&mut self, mut o: Origin, reusable: bool) {
        if !reusable
            || o.f.hup
            || self.gate.shutting_down()
            || self.idle.len() >= self.cfg.origin_idle
        {
            self.close_origin(o);
            return;
        }
        // The completion engine watches an idle connection with the poll `watch_idle` arms;
        // a registration would only make it report a readiness to try, for nothing.
        if o.f.interest != Interest::READABLE && !E::COMPLETION {
            if self.engine.rewatch(o.fd, Interest::READABLE).is_err() {
                self.close_origin(o);
                return;
            }
            o.f.interest = Interest::READABLE;
        }
        o.f.readable = false;
        o.f.peer_closed = false;
        let fd = o.fd;
        self.idle_serial += 1;
        *self.slot(fd) = Slot::Idle(self.idle_serial);
        if E::COMPLETION {
            self.idle_watch
                .push_back((self.now + IDLE_WATCH_DELAY, fd, self.idle_serial));
        }
        self.idle.push(o);
    }

    /// Watches the idle origin connections that have been idle [`IDLE_WATCH_DELAY`].
    pub(super) fn watch_idle_due(&mut self) {
        while let Some(&(at, fd, serial)) = self.idle_watch.front() {
            if at > self.now {
                break;
            }
            self.idle_watch.pop_front();
            if matches!(self.slots.get(fd as usize), Some(Slot::Idle(s)) if *s == serial) {
                self.engine.watch_idle(fd);
            }
        }
    }

    /// An event on an idle origin connection: the origin closed it, or sent what it should
    /// not have. Either way it cannot serve another request. Nothing is read from it: bytes
    /// that no request asked for are never taken for a response.
    pub(super) fn check_idle(&mut self, fd: RawFd) {
        let Some(i) = self.idle.iter().position(|o| o.fd == fd) else {
            return;
        };
        match self.engine.unasked(fd) {
            Unasked::Quiet => self.engine.watch_idle(fd),
            unasked => {
                let o = self.idle.swap_remove(i);
                self.unusable_origin(o, unasked);
            }
        }
    }

    /// Ends an exchange early (the client is closing): its origin connection is closed (a
    /// response may be half-read), its pipes go back to the pool (closed if they hold bytes).
    pub(super) fn drop_exchange(&mut self, mut x: Exchange, origin_reusable: bool) {
        if let Some(o) = x.origin.take() {
            self.release_origin(o, origin_reusable);
        }
        let resp = std::mem::take(&mut x.resp);
        self.pool().give(resp);
        let req = std::mem::take(&mut x.req);
        self.pool().give(req);
        if let Some(mut b) = x.body.take() {
            self.keeping -= b.reserved;
            for p in [b.pipe.take(), b.tee.take()].into_iter().flatten() {
                self.give_pipe(p);
            }
            if !b.keep_in_buf {
                self.pool().give(std::mem::take(&mut b.buf));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::rig::{ok, Rig};

    /// Requests on one client connection and on the next share one origin connection, kept in
    /// the pool between them.
    #[test]
    fn an_origin_connection_is_reused() {
        let mut r = Rig::new(|_| {}, |_| ok("x", ""));
        for _ in 0..3 {
            assert_eq!(r.get("/p", "").text(), "x");
        }
        assert_eq!(r.origin.requests(), 3);
        assert_eq!(r.origin.conns(), 1);
        assert_eq!(r.w.idle.len(), 1);
    }

    /// An origin that answers with `Connection: close` is not pooled.
    #[test]
    fn a_closing_origin_is_not_pooled() {
        let mut r = Rig::new(|_| {}, |_| ok("x", "Connection: close\r\n"));
        r.get("/p", "");
        r.get("/p", "");
        assert_eq!(r.origin.conns(), 2);
        assert!(r.w.idle.is_empty());
    }

    /// `--origin-idle 0`: nothing is kept.
    #[test]
    fn no_pool_with_origin_idle_zero() {
        let mut r = Rig::new(|c| c.origin_idle = 0, |_| ok("x", ""));
        r.get("/p", "");
        r.get("/p", "");
        assert_eq!(r.origin.conns(), 2);
    }
}
