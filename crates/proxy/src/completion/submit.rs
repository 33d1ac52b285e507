//! Submissions: the queue pushed (or flushed when full), and each kind of request armed: accept,
//! polls, recv, a pipe's read, sends (with their parts and message) and splices behind a linked
//! poll.

use super::*;

impl Uring {
    /// Queues entries that must be submitted together (a linked pair).
    #[inline]
    pub(super) fn push(&mut self, sqes: &[squeue::Entry]) -> io::Result<()> {
        // SAFETY: every pointer an entry carries points into a request's buffer held in
        // `self.ops` (its heap memory stays put when the table grows) until the request
        // completes; `Drop` waits for them, or leaks the buffers if they do not come back.
        unsafe { self.ring.push(sqes) }
    }

    pub(super) fn cancel(&mut self, i: u32) {
        let sqe = opcode::AsyncCancel::new(i as u64)
            .build()
            .user_data(UD_IGNORE);
        let _ = self.push(&[sqe]);
    }

    pub(super) fn link_poll(&self, fd: RawFd, mask: i16) -> squeue::Entry {
        let mut flags = squeue::Flags::IO_LINK;
        if self.skip_success {
            flags |= squeue::Flags::SKIP_SUCCESS;
        }
        opcode::PollAdd::new(types::Fd(fd), mask as u32)
            .build()
            .flags(flags)
            .user_data(UD_IGNORE)
    }

    pub(super) fn arm_accept(&mut self) -> io::Result<()> {
        let fd = self.listen_fd;
        let i = self.new_op(Kind::Accept, fd, fd);
        let sqe = opcode::AcceptMulti::new(types::Fd(fd))
            .flags(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
            .build()
            .user_data(i as u64);
        self.accept_op = Some(i);
        self.push(&[sqe])
    }

    pub(super) fn arm_poll(&mut self, fd: RawFd) -> io::Result<()> {
        let i = self.new_op(Kind::Poll, fd, fd);
        self.st(fd).rd = Some(i);
        let sqe = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32)
            .build()
            .user_data(i as u64);
        self.push(&[sqe])
    }

    /// Watches a connect under way: no send is taken (nor writability said) before it is up,
    /// as under readiness, where the connection's first writable event says so.
    pub(super) fn arm_connect_poll(&mut self, fd: RawFd) -> io::Result<()> {
        let i = self.new_op(Kind::Connect, fd, fd);
        self.st(fd).wr = Some(i);
        let sqe = opcode::PollAdd::new(types::Fd(fd), libc::POLLOUT as u32)
            .build()
            .user_data(i as u64);
        self.push(&[sqe])
    }

    pub(super) fn arm_recv(&mut self, fd: RawFd, len: usize) -> io::Result<()> {
        let len = len.clamp(1, RECV_MAX);
        let mut buf = self.take_buf(len);
        let ptr = buf.as_mut_ptr();
        let i = self.new_op(Kind::Recv, fd, fd);
        let op = &mut self.ops[i as usize];
        (op.buf, op.len) = (buf, len);
        let st = self.st(fd);
        st.rd = Some(i);
        // A recv that finds the socket empty fails, then waits behind an internal poll: after
        // a short recv (a request or a response read whole, nothing yet behind it) the next
        // one waits first and spares the failed attempt.
        let ioprio = if st.recv_full { 0 } else { RECVSEND_POLL_FIRST };
        let sqe = opcode::Recv::new(types::Fd(fd), ptr, len as u32)
            .ioprio(ioprio)
            .build()
            .user_data(i as u64);
        self.push(&[sqe])
    }

    /// Reads at most `len` bytes from a pipe into the spare capacity of `buf`, which the
    /// request holds until it completes. Issued at once, not behind a poll: the bytes are
    /// known to be there (a non-blocking pipe would answer EAGAIN otherwise).
    pub(super) fn arm_read_pipe(
        &mut self,
        fd: RawFd,
        mut buf: Vec<u8>,
        len: usize,
        notify: RawFd,
    ) -> io::Result<()> {
        let len = len.min(u32::MAX as usize);
        buf.reserve(len);
        // SAFETY of the pointer: the spare capacity of the vector the request holds (see
        // `push`); `reserve` above made `len` bytes of it.
        let ptr = unsafe { buf.as_mut_ptr().add(buf.len()) };
        let i = self.new_op(Kind::ReadPipe, fd, notify);
        let op = &mut self.ops[i as usize];
        (op.buf, op.len, op.fd_in) = (buf, len, fd);
        let st = self.st(fd);
        st.refs += 1;
        st.rd = Some(i);
        let sqe = opcode::Read::new(types::Fd(fd), ptr, len as u32)
            .offset(u64::MAX)
            .build()
            .user_data(i as u64);
        self.push(&[sqe])
    }

    /// Sends what request `i`'s parts still hold (a new request, or the rest of one), after a
    /// POLLOUT poll if `wait_room`: one part with IORING_OP_SEND, several with
    /// IORING_OP_SENDMSG. If it cannot be queued the request ends (its buffers to the pool).
    pub(super) fn submit_send(&mut self, i: u32, wait_room: bool) -> io::Result<()> {
        let quiet = !wait_room && self.quiet_ok;
        let op = &mut self.ops[i as usize];
        let fd = op.fd;
        op.kind = Kind::Send;
        op.quiet = quiet;
        let mut flags = libc::MSG_WAITALL | libc::MSG_NOSIGNAL;
        if quiet {
            // Done within the enter that submits it, whole or not (see `settle_quiet`).
            flags |= libc::MSG_DONTWAIT;
        }
        // SAFETY of the pointers: they point into the parts' heap memory (a vector's, or a
        // shared object's, which the request holds an `Rc` of) and into the boxed message,
        // none of which moves or is freed while the request is in flight; see `push`.
        let sqe = if let [(h, off)] = op.out.as_slice() {
            let rest = &h.bytes()[*off..];
            op.len = rest.len();
            opcode::Send::new(types::Fd(fd), rest.as_ptr(), rest.len() as u32)
                .flags(flags)
                .build()
        } else {
            let msg = op.msg.get_or_insert_with(|| {
                Box::new(Msg {
                    // SAFETY: msghdr and iovec are plain C structs for which all zeroes is a
                    // valid (empty) value.
                    hdr: unsafe { std::mem::zeroed() },
                    iov: unsafe { std::mem::zeroed() },
                })
            });
            let mut len = 0;
            for (k, (h, off)) in op.out.iter().enumerate() {
                let rest = &h.bytes()[*off..];
                len += rest.len();
                msg.iov[k] = libc::iovec {
                    iov_base: rest.as_ptr() as *mut libc::c_void,
                    iov_len: rest.len(),
                };
            }
            msg.hdr.msg_iov = msg.iov.as_mut_ptr();
            msg.hdr.msg_iovlen = op.out.len() as _;
            let hdr: *const libc::msghdr = &msg.hdr;
            op.len = len;
            opcode::SendMsg::new(types::Fd(fd), hdr)
                .flags(flags as u32)
                .build()
        };
        if !op.close_after {
            self.st(fd).wr = Some(i);
        }
        let mut sqe = sqe.user_data(i as u64);
        if quiet {
            sqe = sqe.flags(squeue::Flags::SKIP_SUCCESS);
            self.quiet.push(i);
        }
        let r = if wait_room {
            let poll = self.link_poll(fd, libc::POLLOUT);
            self.push(&[poll, sqe])
        } else {
            self.push(&[sqe])
        };
        if r.is_err() {
            let st = self.st(fd);
            if st.wr == Some(i) {
                st.wr = None;
            }
            self.free_op(i);
        }
        r
    }

    pub(super) fn arm_splice(
        &mut self,
        kind: Kind,
        fd_in: RawFd,
        fd_out: RawFd,
        len: usize,
        notify: RawFd,
        wait_room: bool,
    ) -> io::Result<()> {
        let key = if kind == Kind::SpliceOut {
            fd_out
        } else {
            fd_in
        };
        let len = len.min(u32::MAX as usize);
        let i = self.new_op(kind, key, notify);
        let op = &mut self.ops[i as usize];
        (op.fd_in, op.fd_out, op.len) = (fd_in, fd_out, len);
        self.st(fd_in).refs += 1;
        self.st(fd_out).refs += 1;
        let flags = libc::SPLICE_F_NONBLOCK | libc::SPLICE_F_MOVE;
        let sqe = match kind {
            Kind::Tee => opcode::Tee::new(types::Fd(fd_in), types::Fd(fd_out), len as u32)
                .flags(libc::SPLICE_F_NONBLOCK)
                .build(),
            _ => opcode::Splice::new(types::Fd(fd_in), -1, types::Fd(fd_out), -1, len as u32)
                .flags(flags)
                .build(),
        }
        .user_data(i as u64);
        let st = self.st(key);
        if kind == Kind::SpliceOut {
            st.wr = Some(i);
        } else {
            st.rd = Some(i);
        }
        match kind {
            // A socket splice that finds nothing to read fails: wait for bytes first.
            Kind::SpliceIn => {
                let poll = self.link_poll(fd_in, libc::POLLIN);
                self.push(&[poll, sqe])
            }
            Kind::SpliceOut if wait_room => {
                let poll = self.link_poll(fd_out, libc::POLLOUT);
                self.push(&[poll, sqe])
            }
            _ => self.push(&[sqe]),
        }
    }
}
