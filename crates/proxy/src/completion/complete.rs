//! Completions: the ring entered and harvested, and each completion turned into what the state
//! machine sees (bytes taken, a send ended, an event raised).

use super::*;

impl Uring {
    /// One enter, its completions handled, the quiet sends settled.
    pub(super) fn turn_ring(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.ring.enter(timeout)?;
        let submitted = self.ring.all_submitted();
        self.harvest();
        self.settle_quiet(submitted);
        Ok(())
    }

    pub(super) fn harvest(&mut self) {
        for k in 0..self.ring.harvest() {
            let (u, res, flags) = self.ring.done(k);
            if u != UD_IGNORE {
                self.on_cqe(u as u32, res, flags);
            }
        }
    }

    pub(super) fn on_cqe(&mut self, i: u32, res: i32, flags: u32) {
        let Some(op) = self.ops.get_mut(i as usize).filter(|o| o.live) else {
            return;
        };
        let kind = op.kind;
        if kind == Kind::Accept {
            return self.on_accept(i, res, flags);
        }
        // A quiet send that posts was not whole: handled here, not settled as whole.
        op.quiet = false;
        let (fd, notify, fd_in, fd_out, len) = (op.fd, op.notify, op.fd_in, op.fd_out, op.len);
        if kind == Kind::Send && res > 0 && (res as usize) < len && !self.closing {
            return self.on_short_send(i, fd, res as usize);
        }
        let close_after = op.close_after;
        let closing = self.closing;
        let st = self.st(fd);
        let live = match kind {
            Kind::Send | Kind::SpliceOut | Kind::Connect => st.wr == Some(i),
            _ => st.rd == Some(i),
        };
        if kind == Kind::Send && live && !closing && (res == -libc::EAGAIN || res == -libc::EINTR) {
            // A non-blocking socket may answer EAGAIN rather than wait: wait for room, from the
            // same slot.
            st.wr = None;
            if self.submit_send(i, true).is_err() {
                self.st(fd).err = Some(libc::EIO);
                self.event(fd, Event::READABLE | Event::WRITABLE);
            }
            return;
        }
        // What the request read into is kept; the rest of its buffers go back to the pool.
        let buf = std::mem::take(&mut self.ops[i as usize].buf);
        self.free_op(i);
        if close_after {
            let _ = sys::close(fd);
        }
        if !live || closing {
            self.give_buf(buf);
            return;
        }
        let st = self.st(fd);
        match kind {
            Kind::Accept => {}
            Kind::Connect => {
                st.wr = None;
                self.event(fd, Event::WRITABLE);
            }
            Kind::Poll => {
                st.rd = None;
                // A connection's poll watches an idle origin connection once: the worker
                // decides what comes next (a read would wait behind a poll re-armed here).
                let again = st.registered && st.want_read && st.role != Some(Role::Conn);
                self.event(fd, Event::READABLE);
                if again {
                    let _ = self.arm_poll(fd);
                }
            }
            Kind::Recv => self.on_recv(fd, res, len, buf),
            Kind::Send => {
                if res < 0 {
                    st.wr = None;
                    st.err = Some(-res);
                    self.event(fd, Event::READABLE | Event::WRITABLE);
                    return;
                }
                self.send_ended(fd);
            }
            Kind::SpliceIn => {
                st.rd = None;
                // The poll saw bytes, yet the splice found none to move: the pipe is full
                // (the state machine drains it), or the poll was spurious (try again).
                if res == -libc::EAGAIN
                    && sys::fionread(fd_out).ok() == Some(0)
                    && self
                        .arm_splice(Kind::SpliceIn, fd_in, fd_out, len, notify, false)
                        .is_ok()
                {
                    return;
                }
                self.st(fd).rd_done = Some(res);
                self.event(notify, Event::READABLE);
            }
            Kind::SpliceOut => {
                st.wr = None;
                if res == -libc::EAGAIN
                    && self
                        .arm_splice(Kind::SpliceOut, fd_in, fd_out, len, notify, true)
                        .is_ok()
                {
                    return;
                }
                self.st(fd).wr_done = Some(res);
                self.event(notify, Event::WRITABLE);
            }
            Kind::Tee => {
                st.rd = None;
                st.rd_done = Some(res);
                self.event(notify, 0);
            }
            Kind::ReadPipe => self.on_read_pipe(fd, res, len, notify, buf),
        }
    }

    /// A short send (a full socket; MSG_WAITALL makes them rare otherwise) of `sent` bytes:
    /// the rest waits for room, from the same slot.
    pub(super) fn on_short_send(&mut self, i: u32, fd: RawFd, sent: usize) {
        let op = &mut self.ops[i as usize];
        let mut n = sent;
        for (h, off) in op.out.iter_mut() {
            let k = n.min(h.bytes().len() - *off);
            *off += k;
            n -= k;
        }
        op.out.retain(|(h, off)| *off < h.bytes().len());
        let orphan = op.close_after;
        let live = self.st(fd).wr == Some(i);
        if (live || orphan) && self.submit_send(i, true).is_ok() {
            return;
        }
        // Not resubmitted (the slot is freed if the submission failed).
        self.free_op(i);
        if orphan {
            let _ = sys::close(fd);
        }
        if live {
            let st = self.st(fd);
            st.wr = None;
            st.err = Some(libc::EIO);
            self.event(fd, Event::READABLE | Event::WRITABLE);
        }
    }

    /// A recv of at most `len` bytes into `buf` completed with `res`: the bytes become the
    /// descriptor's input; an end of stream or an error is noted; an EAGAIN asks again.
    #[inline]
    pub(super) fn on_recv(&mut self, fd: RawFd, res: i32, len: usize, mut buf: Vec<u8>) {
        let waits = self.ring.stats.waits;
        let st = self.st(fd);
        st.rd = None;
        if res > 0 {
            st.recv_full = res as usize >= len;
            if (res as usize) < len {
                st.drained_at = waits;
            }
            // SAFETY: the kernel wrote `res` bytes (at most the `len` asked for, within the
            // capacity reserved) at the front of the buffer.
            unsafe { buf.set_len((res as usize).min(len)) };
            let old = std::mem::replace(&mut st.rx, buf);
            st.rx_pos = 0;
            self.give_buf(old);
        } else {
            if res == 0 {
                st.eof = true;
            } else if res == -libc::EAGAIN || res == -libc::EINTR {
                self.give_buf(buf);
                if self.arm_recv(fd, len).is_ok() {
                    return;
                }
                self.st(fd).err = Some(libc::EIO);
                buf = Vec::new();
            } else {
                st.err = Some(-res);
            }
            // An end of stream or an error leaves the buffer unused: back to the pool (the
            // next connection's first recv takes it, instead of allocating one).
            self.give_buf(buf);
        }
        // Not for a recv `recv_at_once` waits on: its caller takes what it brought.
        if fd != self.taking {
            self.event(fd, Event::READABLE);
        }
    }

    /// A read of at most `len` bytes out of a pipe, appended to `buf`, completed with `res`:
    /// the vector goes back to the state machine with its bytes (see `read_pipe`).
    pub(super) fn on_read_pipe(
        &mut self,
        fd: RawFd,
        res: i32,
        len: usize,
        notify: RawFd,
        mut buf: Vec<u8>,
    ) {
        if res > 0 {
            let n = buf.len() + (res as usize).min(len);
            // SAFETY: the kernel wrote `res` bytes (at most the `len` asked for, within the
            // capacity reserved) after the vector's contents.
            unsafe { buf.set_len(n) };
        }
        let st = self.st(fd);
        st.rd = None;
        let old = std::mem::replace(&mut st.rx, buf);
        st.rx_pos = 0;
        st.rd_done = Some(res);
        self.give_buf(old);
        self.event(notify, 0);
    }

    pub(super) fn on_accept(&mut self, i: u32, res: i32, flags: u32) {
        let more = cqueue::more(flags);
        if !more {
            self.free_op(i);
            if self.accept_op == Some(i) {
                self.accept_op = None;
            }
        }
        if res >= 0 {
            if self.closing {
                let _ = sys::close(res);
            } else {
                self.accepted.push_back(res);
            }
        } else if res != -libc::ECANCELED {
            self.accept_err = Some(-res);
        }
        let fd = self.listen_fd;
        // Accepting resumed while the cancel of the last accept was on its way: arm anew (not
        // while an error waits to pause accepting).
        let registered = self.st(fd).registered;
        if self.accept_op.is_none() && registered && !self.closing && self.accept_err.is_none() {
            let _ = self.arm_accept();
        }
        self.event(fd, Event::READABLE);
    }

    /// A read that finds nothing held, after a recv that filled all it asked for (more is
    /// likely waiting: a large body's next batch): the recv is armed and submitted now, with
    /// what the turn queued before it (an enter that waits for nothing), so that if it
    /// completes there the state machine takes its bytes in this turn. Without it each
    /// batch of a large body cost a worker turn of its own (20 per 1 MiB response, against
    /// epoll-et's 4.4 waits, whose reads go on until the socket is empty); the enter it
    /// costs is the one the end of the turn would have made. The recv's own event is not
    /// queued: the caller takes what it brought.
    #[inline]
    pub(super) fn recv_now(&mut self, fd: RawFd, want: usize) -> io::Result<()> {
        let st = self.st(fd);
        if want == 0
            || !st.recv_full
            || st.rd.is_some()
            || st.rx_pos < st.rx.len()
            || st.err.is_some()
            || st.eof
        {
            return Ok(());
        }
        self.recv_at_once(fd, want)
    }

    #[inline(never)]
    pub(super) fn recv_at_once(&mut self, fd: RawFd, want: usize) -> io::Result<()> {
        self.arm_recv(fd, want)?;
        self.taking = fd;
        let r = self.turn_ring(Some(Duration::ZERO));
        self.taking = -1;
        r
    }

    /// Takes what a read finds: bytes received, an error, EOF; else arms a recv of `want`.
    pub(super) fn take_rx(
        &mut self,
        fd: RawFd,
        want: usize,
        copy: impl FnOnce(&[u8]) -> usize,
    ) -> io::Result<usize> {
        if want == 0 {
            return Ok(0);
        }
        let st = self.st(fd);
        if st.rx_pos < st.rx.len() {
            let n = copy(&st.rx[st.rx_pos..]);
            st.rx_pos += n;
            if st.rx_pos == st.rx.len() {
                let rx = std::mem::take(&mut st.rx);
                st.rx_pos = 0;
                self.give_buf(rx);
            }
            return Ok(n);
        }
        if let Some(e) = st.err {
            return Err(errno(e));
        }
        if st.eof {
            return Ok(0);
        }
        if st.rd.is_none() {
            self.arm_recv(fd, want)?;
        }
        Err(in_flight())
    }
}
