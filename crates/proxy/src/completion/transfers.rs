//! The [`Engine`] the worker waits and makes every transfer through, on the ring.

use super::*;

impl Engine for Uring {
    const COMPLETION: bool = true;

    fn new() -> io::Result<Uring> {
        Uring::open()
    }

    fn watch(&mut self, fd: RawFd, interest: Interest) -> io::Result<()> {
        self.watch_fd(fd, interest)
    }

    fn rewatch(&mut self, fd: RawFd, interest: Interest) -> io::Result<()> {
        self.ring.stats.interest_changes_free += 1;
        self.watch_fd(fd, interest)
    }

    fn unwatch(&mut self, fd: RawFd) -> io::Result<()> {
        self.unwatch_fd(fd)
    }

    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        self.wait_events(events, timeout)
    }

    /// A completion is reported once.
    fn edge_triggered(&self) -> bool {
        true
    }

    fn stats(&self) -> evlab_poll::PollerStats {
        self.ring.stats
    }

    fn bufs<'a>(&'a mut self, _worker: &'a mut BufPool) -> &'a mut BufPool {
        &mut self.bufs
    }

    fn adopt(&mut self, fd: RawFd, role: Role) {
        // A new descriptor: nothing known of an earlier one with its number may carry over.
        let st = self.st(fd);
        let refs = st.refs;
        let rx = std::mem::take(&mut st.rx);
        *st = FdState {
            role: Some(role),
            refs,
            ..FdState::default()
        };
        self.give_buf(rx);
        if role == Role::Listener {
            self.listen_fd = fd;
        }
    }

    fn accept(&mut self, listen_fd: RawFd) -> io::Result<(RawFd, Option<std::net::SocketAddr>)> {
        if let Some(fd) = self.accepted.pop_front() {
            return Ok((fd, None));
        }
        if let Some(e) = self.accept_err.take() {
            return Err(errno(e));
        }
        if self.accept_op.is_none() && self.st(listen_fd).registered {
            self.arm_accept()?;
        }
        Err(errno(libc::EAGAIN))
    }

    fn read_max(&mut self, fd: RawFd, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        let want = max.min(buf.capacity() - buf.len());
        self.recv_now(fd, want)?;
        let st = self.st(fd);
        if buf.is_empty() && st.rx_pos == 0 && !st.rx.is_empty() && st.rx.len() <= want {
            // The whole of a recv into an empty buffer (a copied body's next batch, a client's
            // next requests): hand the request's buffer over instead of copying it.
            let n = st.rx.len();
            std::mem::swap(buf, &mut st.rx);
            let old = std::mem::take(&mut st.rx);
            self.give_buf(old);
            return Ok(n);
        }
        self.take_rx(fd, want, |src| {
            let n = src.len().min(want);
            buf.extend_from_slice(&src[..n]);
            n
        })
    }

    fn read(&mut self, fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len();
        self.take_rx(fd, want, |src| {
            let n = src.len().min(want);
            buf[..n].copy_from_slice(&src[..n]);
            n
        })
    }

    fn watch_connect(&mut self, fd: RawFd) -> io::Result<()> {
        self.arm_connect_poll(fd)
    }

    fn writev(&mut self, fd: RawFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let st = self.st(fd);
        if let Some(e) = st.err {
            return Err(errno(e));
        }
        if st.wr.is_some() {
            st.wr_wanted = true;
            return Err(in_flight());
        }
        let total: usize = bufs.iter().map(|b| b.len()).sum::<usize>().min(SEND_MAX);
        if total == 0 {
            return Ok(0);
        }
        let mut copy = self.take_buf(total);
        for b in bufs {
            let k = b.len().min(total - copy.len());
            copy.extend_from_slice(&b[..k]);
            if copy.len() == total {
                break;
            }
        }
        let i = self.new_op(Kind::Send, fd, fd);
        self.ops[i as usize].out.push((Held::Vec(copy), 0));
        self.submit_send(i, false)?;
        Ok(total)
    }

    fn write_parts(&mut self, fd: RawFd, parts: &mut [Part<'_>]) -> io::Result<usize> {
        let st = self.st(fd);
        if let Some(e) = st.err {
            return Err(errno(e));
        }
        if st.wr.is_some() {
            st.wr_wanted = true;
            return Err(in_flight());
        }
        // What the send takes: the first SEND_PARTS parts with bytes left.
        let total: usize = parts
            .iter()
            .map(|p| p.rest().len())
            .filter(|&n| n > 0)
            .take(SEND_PARTS)
            .sum();
        if total == 0 {
            return Ok(0);
        }
        let i = self.new_op(Kind::Send, fd, fd);
        let Uring { ops, bufs, .. } = self;
        let out = &mut ops[i as usize].out;
        for p in parts.iter_mut() {
            let n = p.rest().len();
            if n == 0 || out.len() == SEND_PARTS {
                continue;
            }
            let held = match p {
                // The vector itself: the state machine goes on with an empty one as large
                // (it would otherwise grow a small one, a reallocation, for its next batch).
                Part::Owned(v, pos) => {
                    let from = std::mem::replace(*pos, 0);
                    let fresh = bufs.take_exact(v.capacity());
                    (Held::Vec(std::mem::replace(*v, fresh)), from)
                }
                Part::Shared(o, pos) => {
                    let from = std::mem::replace(*pos, o.body.len());
                    (Held::Obj(Rc::clone(o)), from)
                }
                Part::Borrowed(b, pos) => {
                    let mut v = bufs.take_exact(n);
                    v.extend_from_slice(&b[**pos..]);
                    **pos = b.len();
                    (Held::Vec(v), 0)
                }
            };
            out.push(held);
        }
        self.submit_send(i, false)?;
        Ok(total)
    }

    fn splice(
        &mut self,
        fd_in: RawFd,
        fd_out: RawFd,
        len: usize,
        notify: RawFd,
    ) -> io::Result<usize> {
        let from_socket = self.st(fd_in).role == Some(Role::Conn);
        let (kind, key) = if from_socket {
            (Kind::SpliceIn, fd_in)
        } else {
            (Kind::SpliceOut, fd_out)
        };
        let st = self.st(key);
        let done = if from_socket {
            st.rd_done.take()
        } else {
            st.wr_done.take()
        };
        if let Some(r) = done {
            return result(r);
        }
        if from_socket && st.rx_pos < st.rx.len() {
            // Bytes already read into user space would be overtaken: never happens, since
            // reads take no more than the state machine asks for.
            return Err(io::Error::other("bytes read ahead of a splice"));
        }
        if let Some(e) = st.err {
            return Err(errno(e));
        }
        let busy = if from_socket { st.rd } else { st.wr };
        if !from_socket && busy.is_some() {
            st.wr_wanted = true;
        }
        if busy.is_none() {
            self.arm_splice(kind, fd_in, fd_out, len, notify, false)?;
        }
        Err(in_flight())
    }

    fn read_pipe(
        &mut self,
        fd: RawFd,
        buf: &mut Vec<u8>,
        max: usize,
        notify: RawFd,
    ) -> io::Result<usize> {
        // The vector itself goes with the request (the kernel reads into it; no bytes are
        // copied after), and comes back with the bytes appended: meanwhile the state machine
        // holds an empty one, and touches it not while the read is in flight.
        let st = self.st(fd);
        if let Some(r) = st.rd_done.take() {
            let rx = std::mem::take(&mut st.rx);
            st.rx_pos = 0;
            let old = std::mem::replace(buf, rx);
            self.give_buf(old);
            return result(r);
        }
        if st.rd.is_none() {
            let taken = std::mem::take(buf);
            self.arm_read_pipe(fd, taken, max, notify)?;
        }
        Err(in_flight())
    }

    fn tee(&mut self, fd_in: RawFd, fd_out: RawFd, len: usize, notify: RawFd) -> io::Result<usize> {
        let st = self.st(fd_in);
        if let Some(r) = st.rd_done.take() {
            return result(r);
        }
        if st.rd.is_none() {
            self.arm_splice(Kind::Tee, fd_in, fd_out, len, notify, false)?;
        }
        Err(in_flight())
    }

    fn shutdown_write(&mut self, fd: RawFd) {
        let st = self.st(fd);
        if st.wr.is_some() {
            st.shut_pending = true;
        } else {
            let _ = sys::shutdown(fd, libc::SHUT_WR);
        }
    }

    fn close(&mut self, fd: RawFd) {
        self.forget(fd);
        let st = self.st(fd);
        st.role = None;
        // A send taken from the worker may not even be submitted yet: the descriptor stays
        // open (its number unused) until the send is done, then closes.
        if std::mem::take(&mut st.close_deferred) {
            return;
        }
        // A splice or tee naming the descriptor is still in the kernel, cancelled or not. One
        // behind a linked poll is issued only when the poll fires, and looks the number up
        // then: closed now, the number could belong to a new connection by that time, and the
        // splice would take that connection's bytes. So the descriptor stays open until the
        // last such request completes; a socket is shut so that its poll fires at once.
        if st.refs > 0 {
            st.close_on_free = true;
            let _ = sys::shutdown(fd, libc::SHUT_RDWR);
            return;
        }
        let _ = sys::close(fd);
    }

    /// A send in flight to a client that reads nothing waits for room forever (MSG_WAITALL):
    /// shutting the socket both ways makes it fail at once, and its completion closes the
    /// descriptor, rather than an orphan's grace later.
    fn abort(&mut self, fd: RawFd) {
        let _ = sys::shutdown(fd, libc::SHUT_RDWR);
        self.close(fd);
    }

    fn pipe_busy(&mut self, rd: RawFd, wr: RawFd) -> bool {
        // A request in flight, or a result not taken (bytes the state machine has not
        // counted): the pipe may hold more than it knows. Either way nothing about these
        // descriptors may outlive them.
        let busy = [rd, wr].into_iter().any(|fd| {
            let st = self.st(fd);
            st.refs > 0
                || st.rd.is_some()
                || st.wr.is_some()
                || st.rd_done.is_some()
                || st.wr_done.is_some()
        }) || sys::fionread(rd).ok() != Some(0);
        // The kernel's count too: the state machine's may lag a completion (a tee's copy,
        // a splice's bytes) when the exchange ends early, and a pooled pipe with bytes would
        // hand them to the next body (seen: a client that left mid-body in splice-keep).
        if busy {
            self.forget(rd);
            self.forget(wr);
        }
        busy
    }

    fn unasked(&mut self, fd: RawFd) -> Unasked {
        let waits = self.ring.stats.waits;
        let st = self.st(fd);
        if st.rx_pos < st.rx.len() || st.rd_done.is_some() {
            return Unasked::Bytes;
        }
        if st.err.is_some() || st.eof {
            return Unasked::Closed;
        }
        if st.rd.is_none() && st.drained_at == waits {
            // A recv harvested in this turn found the socket empty behind its bytes, and all
            // it brought has been taken: as good as a peek, without the syscall.
            return Unasked::Quiet;
        }
        let reading = st
            .rd
            .and_then(|i| self.ops.get(i as usize).filter(|o| o.live))
            .is_some_and(|op| op.kind != Kind::Poll);
        if reading {
            // A read in flight may have taken bytes already: whatever they are, the
            // connection cannot be trusted with another request.
            return Unasked::Closed;
        }
        // A poll takes nothing: what arrived is still in the socket.
        crate::engine::peek_unasked(fd)
    }

    fn watch_idle(&mut self, fd: RawFd) {
        // A poll, not a recv: a recv would take the bytes, and those that arrive after the
        // next request is sent could not be told from its response.
        if self.st(fd).rd.is_none() && self.arm_poll(fd).is_err() {
            self.st(fd).err = Some(libc::EIO);
        }
    }

    fn unwatch_idle(&mut self, fd: RawFd) {
        if let Some(i) = self.st(fd).rd {
            let poll = self.ops.get(i as usize).filter(|o| o.live);
            if poll.is_some_and(|o| o.kind == Kind::Poll) {
                // Its completion (cancelled or not) no longer matches `rd` and is dropped.
                self.st(fd).rd = None;
                self.cancel(i);
            }
        }
        // Nothing is in flight to wake the fetch once the request is out: the worker marks
        // the connection readable itself, and its read (a recv queued behind the request's
        // send) comes in the same turn. An event here would cost a turn of its own, and make
        // the next enter not wait.
    }

    fn can_splice(&self) -> bool {
        self.splice_ok
    }
}
