//! Quiet sends: a send that posts nothing when whole (MSG_DONTWAIT, IOSQE_CQE_SKIP_SUCCESS), made
//! safe by a start-up probe of how this kernel answers, and settled after the enter that submits
//! it.

use super::*;

impl Uring {
    /// Settles the quiet sends. A quiet send (MSG_DONTWAIT, IOSQE_CQE_SKIP_SUCCESS; one taken
    /// with nothing to wait for first) runs within the enter that submits it and posts a
    /// completion only if it was not whole (partial, EAGAIN, an error: failures under
    /// MSG_WAITALL), which `on_cqe` handles. So once an enter has taken every queued entry
    /// (`submitted`; no quiet send is queued while completions are handled) and the
    /// completions are harvested (none held back by an overflow), each quiet send that posted
    /// nothing was whole. Its completion would otherwise end the enter that submits it with
    /// nothing for the worker: half of the ring enters at 16 KiB.
    pub(super) fn settle_quiet(&mut self, submitted: bool) {
        if self.quiet.is_empty() || !submitted || self.ring.cq_overflow() {
            return;
        }
        let mut quiet = std::mem::take(&mut self.quiet);
        for &i in &quiet {
            let op = &mut self.ops[i as usize];
            if op.live && op.quiet {
                op.quiet = false;
                self.send_whole(i);
            }
        }
        quiet.clear();
        self.quiet = quiet;
    }

    /// Whether the worker waits on a quiet send not settled yet (a write answered "in flight"
    /// behind it, or a shutdown of the write side asked for after it: the close that follows a
    /// 400, say): then the wait must not sleep past the enter that settles it.
    pub(super) fn quiet_awaited(&self) -> bool {
        self.quiet.iter().any(|&i| {
            let op = &self.ops[i as usize];
            op.live
                && op.quiet
                && self
                    .fds
                    .get(op.fd as usize)
                    .is_some_and(|st| st.wr == Some(i) && (st.wr_wanted || st.shut_pending))
        })
    }

    /// Send `i` is done, all of it: its buffers back, its descriptor's shutdown or close done,
    /// and a write that waited told.
    pub(super) fn send_whole(&mut self, i: u32) {
        let op = &self.ops[i as usize];
        let (fd, close_after) = (op.fd, op.close_after);
        let live = self.st(fd).wr == Some(i);
        self.free_op(i);
        if close_after {
            let _ = sys::close(fd);
        }
        if live && !self.closing {
            self.send_ended(fd);
        }
    }

    /// The live send on `fd` ended whole: the write side is free, a shutdown asked for meanwhile
    /// is done, and a write answered "in flight" is told.
    pub(super) fn send_ended(&mut self, fd: RawFd) {
        let st = self.st(fd);
        st.wr = None;
        if std::mem::take(&mut st.shut_pending) {
            let _ = sys::shutdown(fd, libc::SHUT_WR);
        }
        if std::mem::take(&mut st.wr_wanted) {
            self.event(fd, Event::WRITABLE);
        }
    }

    /// Whether this kernel runs a quiet send (MSG_WAITALL, MSG_DONTWAIT, IOSQE_CQE_SKIP_SUCCESS)
    /// as `settle_quiet` relies on: within the enter that submits it, posting nothing if it is
    /// whole and a completion otherwise. Tried on a socket pair with a small send buffer: a
    /// whole send, a partial one, one into the full buffer, and a partial one of several
    /// parts (IORING_OP_SENDMSG). A kernel that counted a partial send a success (posting
    /// nothing) would lose the rest of a response; there sends stay as they were, posting
    /// every completion.
    pub(super) fn probe_quiet(&mut self) -> bool {
        if !self.skip_success {
            return false;
        }
        let Ok((a, b)) = std::os::unix::net::UnixStream::pair() else {
            return false;
        };
        if a.set_nonblocking(true).is_err() || b.set_nonblocking(true).is_err() {
            return false;
        }
        let fd = std::os::fd::AsRawFd::as_raw_fd(&a);
        let _ = sys::setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, 4096);
        let big = vec![0u8; 1 << 20];
        let drain = |mut b: &std::os::unix::net::UnixStream| {
            let mut sink = vec![0u8; 1 << 16];
            let mut n = 0;
            while let Ok(k @ 1..) = std::io::Read::read(&mut b, &mut sink) {
                n += k;
            }
            n
        };
        let len = big.len();
        let partial = |r: Probed| matches!(r, Probed::Posted(n) if n > 0 && (n as usize) < len);
        let mut steps = [Probed::Other; 4];
        steps[0] = self.probe_send(fd, &[&big[..1]]);
        let mut ok = steps[0] == Probed::Silent && drain(&b) == 1;
        if ok {
            steps[1] = self.probe_send(fd, &[&big]);
            ok = partial(steps[1]);
        }
        if ok {
            steps[2] = self.probe_send(fd, &[&big[..1]]);
            ok = steps[2] == Probed::Posted(-libc::EAGAIN) && drain(&b) > 0;
        }
        if ok {
            steps[3] = self.probe_send(fd, &[&big[..1 << 19], &big[1 << 19..]]);
            ok = partial(steps[3]);
        }
        if steps.contains(&Probed::Unended) {
            // A send the probe could not see end may still read `big`.
            std::mem::forget(big);
        }
        drop((a, b));
        ok
    }

    /// One quiet send of `parts` on `fd` (IORING_OP_SEND for one part, SENDMSG for several),
    /// and what it did within its enter.
    pub(super) fn probe_send(&mut self, fd: RawFd, parts: &[&[u8]]) -> Probed {
        const UD_CANCEL: u64 = UD_PROBE - 1;
        let flags = libc::MSG_WAITALL | libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;
        let iov: Vec<libc::iovec> = parts
            .iter()
            .map(|p| libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            })
            .collect();
        // SAFETY: msghdr is a plain C struct for which all zeroes is a valid (empty) value.
        let mut hdr: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        hdr.msg_iov = iov.as_ptr() as *mut libc::iovec;
        hdr.msg_iovlen = iov.len() as _;
        let sqe = if let [p] = parts {
            opcode::Send::new(types::Fd(fd), p.as_ptr(), p.len() as u32)
                .flags(flags)
                .build()
        } else {
            opcode::SendMsg::new(types::Fd(fd), &*hdr)
                .flags(flags as u32)
                .build()
        }
        .flags(squeue::Flags::SKIP_SUCCESS)
        .user_data(UD_PROBE);
        // SAFETY: the parts (the caller's), `iov` and `hdr` stay valid until the request is
        // seen to end below, and are leaked if it is not.
        if unsafe { self.ring.push(&[sqe]) }.is_err() {
            return Probed::Other;
        }
        let harvest = |ring: &mut Ring, got: &mut Option<i32>, cancel: &mut Option<i32>| {
            for k in 0..ring.harvest() {
                match ring.done(k) {
                    (UD_PROBE, res, _) => *got = Some(res),
                    (UD_CANCEL, res, _) => *cancel = Some(res),
                    _ => {}
                }
            }
        };
        let (mut got, mut cancel) = (None, None);
        let entered = self.ring.enter(Some(Duration::ZERO));
        harvest(&mut self.ring, &mut got, &mut cancel);
        if let (Ok(()), Some(res)) = (&entered, got) {
            return Probed::Posted(res);
        }
        // Nothing posted: done and whole, or still running. The cancel tells: not found (the
        // send is done), or found (its completion, the cancellation, follows).
        let sqe = opcode::AsyncCancel::new(UD_PROBE)
            .build()
            .user_data(UD_CANCEL);
        // SAFETY: a cancel carries no pointer.
        let queued = unsafe { self.ring.push(&[sqe]) }.is_ok();
        for _ in 0..100 {
            if !queued || (cancel.is_some() && (got.is_some() || cancel == Some(-libc::ENOENT))) {
                break;
            }
            let _ = self.ring.enter(Some(Duration::from_millis(10)));
            harvest(&mut self.ring, &mut got, &mut cancel);
        }
        match (cancel, got) {
            (Some(c), None) if c == -libc::ENOENT && entered.is_ok() => Probed::Silent,
            (Some(c), None) if c == -libc::ENOENT => Probed::Other,
            (Some(_), Some(_)) => Probed::Other,
            _ => {
                std::mem::forget(iov);
                std::mem::forget(hdr);
                Probed::Unended
            }
        }
    }
}
