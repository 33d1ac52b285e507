//! The client side: accepting connections, reading requests in, writing responses out, lingering
//! before a close, and errors answered by the proxy itself.

use super::*;

impl Client {
    /// After a write (whose parts moved their own positions): what has all gone is dropped.
    pub(super) fn settle_output(&mut self) {
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        }
        if self
            .hit
            .as_ref()
            .is_some_and(|(o, off)| *off == o.body.len())
        {
            self.hit = None;
        }
    }

    pub(super) fn blank(now: Instant) -> Client {
        Client {
            fd: -1,
            id: 0,
            f: Flags::new(Interest::READABLE, true),
            phase: Phase::Idle,
            rbuf: Vec::new(),
            out: Vec::new(),
            out_pos: 0,
            hit: None,
            x: None,
            need_input: true,
            peer_eof: false,
            close_after: false,
            timer: Timer::default(),
            progress_at: now,
            head_since: None,
            send_since: None,
            peer: None,
            xff: None,
            tunnel: None,
            written: 0,
            log: VecDeque::new(),
        }
    }

    pub(super) fn out_pending(&self) -> usize {
        self.out.len() - self.out_pos + self.hit.as_ref().map_or(0, |(o, off)| o.body.len() - off)
    }

    /// Bytes waiting for the client anywhere: queued output, a copy buffer, a pipe.
    pub(super) fn has_output(&self) -> bool {
        if self.out_pending() > 0 {
            return true;
        }
        if let Some(t) = &self.tunnel {
            return t.down.held() > 0;
        }
        match self.x.as_ref().and_then(|x| x.body.as_ref()) {
            // A head held in the pipe goes with the body, once the origin's splice is in.
            Some(b) => {
                b.buf.len() > b.sent || (!b.head_held && src_pipe(b).is_some_and(|p| p.len > 0))
            }
            None => false,
        }
    }
}

evlab_runtime::timed_by_fields!(Client);

impl<E: Engine> Worker<E> {
    pub(super) fn accept_ready(&mut self) -> io::Result<()> {
        loop {
            if !self.gate.has_room() {
                self.pause_accept(None);
                return Ok(());
            }
            match self.engine.accept(self.listen_fd) {
                Ok((fd, peer)) => {
                    self.engine.adopt(fd, Role::Conn);
                    if self.engine.watch(fd, Interest::READABLE).is_err() {
                        self.stats.conns.accept_errors.inc();
                        self.engine.close(fd);
                        continue;
                    }
                    self.add_client(fd, peer);
                }
                Err(e) => {
                    let failure = AcceptFailure::of(e.raw_os_error().unwrap_or(0));
                    if failure.counted() {
                        self.stats.conns.accept_errors.inc();
                    }
                    match failure {
                        AcceptFailure::Transient => {}
                        AcceptFailure::Exhausted => {
                            self.pause_accept(Some(self.now + ACCEPT_RETRY));
                            return Ok(());
                        }
                        _ => return Ok(()),
                    }
                }
            }
        }
    }

    pub(super) fn add_client(&mut self, fd: RawFd, peer: Option<SocketAddr>) {
        self.next_id = self.next_id.wrapping_add(1);
        let now = self.now;
        let mut c = self
            .spares
            .take()
            .unwrap_or_else(|| Box::new(Client::blank(now)));
        let (rbuf, out) = (std::mem::take(&mut c.rbuf), std::mem::take(&mut c.out));
        *c = Client::blank(now);
        c.rbuf = rbuf;
        c.out = out;
        c.fd = fd;
        c.id = self.next_id;
        c.peer = peer;
        self.gate.active += 1;
        self.stats.conns.opened(self.gate.active);
        self.rearm(&mut c);
        *self.slot(fd) = Slot::Client(c);
    }

    pub(super) fn close_client(&mut self, c: Box<Client>) {
        self.close_client_as(c, false);
    }

    /// Closes a client; `abort`: one told nothing more (it took none of its output), whose
    /// output still on its way is dropped ([`Engine::abort`]).
    pub(super) fn close_client_as(&mut self, mut c: Box<Client>, abort: bool) {
        if let Some(x) = c.x.take() {
            self.drop_exchange(*x, false);
        }
        if let Some(t) = c.tunnel.take() {
            c.written += t.down.sent;
            self.drop_tunnel(*t);
        }
        if !c.log.is_empty() {
            self.log_done(&mut c, true);
        }
        let _ = self.engine.unwatch(c.fd);
        if abort {
            self.engine.abort(c.fd);
        } else {
            self.engine.close(c.fd);
        }
        *self.slot(c.fd) = Slot::Free;
        c.hit = None;
        c.rbuf.clear();
        c.out.clear();
        if c.rbuf.capacity() > 64 * 1024 {
            c.rbuf = Vec::new();
        }
        if c.out.capacity() > 64 * 1024 {
            c.out = Vec::new();
        }
        self.spares.put(c);
        self.gate.active -= 1;
        self.stats.conns.closed(self.gate.active);
        self.resume_accept();
    }

    pub(super) fn pause_accept(&mut self, retry_at: Option<Instant>) {
        if self.gate.close(retry_at) {
            let _ = self.engine.unwatch(self.listen_fd);
        }
    }

    pub(super) fn resume_accept(&mut self) {
        if !self.gate.may_open() {
            return;
        }
        if self
            .engine
            .watch(self.listen_fd, Interest::READABLE)
            .is_ok()
        {
            self.gate.opened();
            // Connections may have queued meanwhile; an edge-triggered listener would not
            // report them again.
            if self.edge {
                let _ = self.accept_ready();
            }
        }
    }

    pub(super) fn begin_shutdown(&mut self) {
        match self.gate.begin_shutdown(self.now) {
            None => return,
            Some(true) => {
                let _ = self.engine.unwatch(self.listen_fd);
            }
            Some(false) => {}
        }
        for o in std::mem::take(&mut self.idle) {
            self.close_origin(o);
        }
        for fd in 0..self.slots.len() {
            let idle = match &mut self.slots[fd] {
                Slot::Client(c) => {
                    c.close_after = true;
                    c.x.is_none() && !c.has_output()
                }
                _ => false,
            };
            if idle {
                let c = self.take_client(fd as RawFd).expect("a client");
                self.close_client(c);
            }
        }
    }

    pub(super) fn teardown(&mut self) {
        for fd in 0..self.slots.len() {
            if let Some(c) = self.take_client(fd as RawFd) {
                self.close_client(c);
            }
        }
        for o in std::mem::take(&mut self.idle) {
            self.close_origin(o);
        }
        if self.gate.accepting() {
            let _ = self.engine.unwatch(self.listen_fd);
        }
        let _ = self.engine.unwatch(self.waker.rx);
        self.pipes.clear();
        if let Some(l) = self.log.as_mut() {
            l.flush();
        }
        self.shared.registry.remove_waker(&self.waker);
        self.waker.close();
        self.publish();
    }

    pub(super) fn read_client(&mut self, c: &mut Client) -> Step {
        if c.rbuf.capacity() == 0 {
            c.rbuf = self.pool().take(8 * 1024);
        }
        if c.rbuf.capacity() - c.rbuf.len() < 2048 {
            c.rbuf.reserve(8 * 1024);
        }
        let offered = c.rbuf.capacity() - c.rbuf.len();
        match self.engine.read_max(c.fd, &mut c.rbuf, usize::MAX) {
            Ok(0) => {
                c.peer_eof = true;
                c.f.readable = false;
                Ok(true)
            }
            Ok(n) => {
                if n < offered && !c.f.peer_closed && !E::COMPLETION {
                    c.f.readable = false;
                }
                self.touch(c);
                Ok(true)
            }
            Err(e) if pending(&e) => {
                c.f.readable = false;
                Ok(false)
            }
            Err(e) if sys::would_block(&e) => {
                c.f.readable = false;
                if c.rbuf.is_empty() {
                    self.pool().give(std::mem::take(&mut c.rbuf));
                }
                Ok(false)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(true),
            Err(_) => Err(Close),
        }
    }

    /// Writes what waits for the client: queued output, a cached body, copied body bytes,
    /// then spliced ones.
    pub(super) fn write_client(&mut self, c: &mut Client) -> Step {
        if !c.f.writable {
            return Ok(false);
        }
        let mut progress = false;
        loop {
            let copy =
                c.x.as_mut()
                    .and_then(|x| x.body.as_mut())
                    .filter(|b| b.mode == Mode::Copy);
            // Absent parts are empty ones (skipped by every engine): no allocation per write.
            let (mut no_hit, mut no_copy) = (0, 0);
            let hit = match c.hit.as_mut() {
                Some((o, off)) => Part::Shared(o, off),
                None => Part::Borrowed(&[], &mut no_hit),
            };
            let copy = match copy {
                // The object being kept for the cache stays where it is.
                Some(b) if b.keep_in_buf => Part::Borrowed(&b.buf, &mut b.sent),
                Some(b) => Part::Owned(&mut b.buf, &mut b.sent),
                None => Part::Borrowed(&[], &mut no_copy),
            };
            let mut parts = [Part::Owned(&mut c.out, &mut c.out_pos), hit, copy];
            let want: usize = parts.iter().map(|p| p.rest().len()).sum();
            if want == 0 {
                break;
            }
            let r = self.engine.write_parts(c.fd, &mut parts);
            match r {
                Ok(n) => {
                    self.stats.bytes_to_clients.add(n as u64);
                    c.written += n as u64;
                    c.settle_output();
                    self.touch(c);
                    c.send_since = Some(self.now);
                    progress = true;
                    if n < want {
                        c.f.writable = false;
                        return Ok(true);
                    }
                }
                Err(e) if sys::would_block(&e) || pending(&e) => {
                    c.f.writable = false;
                    return Ok(progress);
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => {
                    self.stats.conns.io_errors.inc();
                    return Err(Close);
                }
            }
        }
        // Spliced bytes, once everything before them has gone.
        let fd = c.fd;
        let Some(b) = c.x.as_mut().and_then(|x| x.body.as_mut()) else {
            return Ok(progress);
        };
        if b.head_held {
            // It leaves with the body's first bytes (`head_into_pipe`).
            return Ok(progress);
        }
        let src = match b.mode {
            Mode::Copy => return Ok(progress),
            Mode::Splice | Mode::Release => b.pipe.as_mut(),
            Mode::SpliceKeep => b.tee.as_mut(),
        };
        let Some(p) = src else {
            return Ok(progress);
        };
        while p.len > 0 {
            match self.engine.splice(p.rd, fd, p.len, fd) {
                Ok(0) => break,
                Ok(n) => {
                    p.len -= n;
                    p.full = false;
                    self.stats.bytes_to_clients.add(n as u64);
                    c.written += n as u64;
                    progress = true;
                }
                Err(e) if sys::would_block(&e) || pending(&e) => {
                    c.f.writable = false;
                    break;
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => {
                    self.stats.conns.io_errors.inc();
                    return Err(Close);
                }
            }
        }
        if progress {
            self.touch(c);
            c.send_since = Some(self.now);
        }
        Ok(progress)
    }

    /// Every response is out and the connection is to close: shut our side and read until
    /// the client closes (or the linger time passes), so our last bytes are not lost to a
    /// reset caused by input we never read.
    pub(super) fn start_linger(&mut self, c: &mut Client) -> Result<(), Close> {
        if c.peer_eof {
            return Err(Close);
        }
        self.engine.shutdown_write(c.fd);
        c.phase = Phase::Lingering;
        c.rbuf.clear();
        let at = self.now + self.cfg.linger;
        self.timers.set(c, Some(at));
        self.linger(c)
    }

    pub(super) fn linger(&mut self, c: &mut Client) -> Result<(), Close> {
        let mut b = [0u8; 4096];
        while c.f.readable {
            match self.engine.read(c.fd, &mut b) {
                Ok(0) => return Err(Close),
                Ok(_) => {}
                Err(e) if sys::would_block(&e) || pending(&e) => c.f.readable = false,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => return Err(Close),
            }
        }
        Ok(())
    }

    pub(super) fn error_response(
        &mut self,
        c: &mut Client,
        status: Status,
        minor: u8,
        keep: bool,
        head_only: bool,
    ) {
        if self.log.is_some() && c.log.back().is_none_or(|e| e.end.is_some()) {
            // No request this answers was taken (a head that never ended, say).
            self.log_open(c, b"");
        }
        write_error(&mut c.out, status, minor, self.date.get(), keep, head_only);
        self.stats.record_status(status.code());
        self.log_answered(c, status.code(), None);
        if !keep {
            c.close_after = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::rig::{ok, Rig};

    /// `Connection: close` from the client: the answer, then the close; the connection counted
    /// open and closed.
    #[test]
    fn a_client_that_asks_to_close_is_closed_after_its_answer() {
        let mut r = Rig::new(|_| {}, |_| ok("x", ""));
        let mut s = r.client();
        assert_eq!(r.w.stats.conns.active.get(), 1);
        let a = r.ask(
            &mut s,
            "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(a.header("connection"), Some("close"));
        assert!(r.closed(&mut s), "the proxy's side shut after the answer");
        // It lingers until the client closes too (or `--linger` passes).
        drop(s);
        for _ in 0..400 {
            if r.w.stats.conns.closed.get() == 1 {
                break;
            }
            r.turn();
        }
        assert_eq!(r.w.stats.conns.closed.get(), 1);
        assert_eq!(r.w.stats.conns.active.get(), 0);
    }

    /// A request the proxy refuses itself gets its error page.
    #[test]
    fn errors_answered_by_the_worker() {
        let mut r = Rig::new(|_| {}, |_| ok("x", ""));
        let mut s = r.client();
        let a = r.ask(&mut s, "GET / HTTP/1.1\r\n\r\n");
        assert_eq!(a.status, 400, "no Host");
        assert_eq!(r.origin.requests(), 0);
    }
}
