//! The forwarding modes: copy through a buffer, splice through a pipe, splice-keep with a tee'd
//! copy for the cache, splice-release with the head in the pipe; pipes chosen, grown and given
//! back.

use super::*;

/// The pipe the client's bytes come from.
pub(super) fn src_pipe(b: &Xfer) -> Option<&Pipe> {
    match b.mode {
        Mode::Copy => None,
        Mode::Splice | Mode::Release => b.pipe.as_ref(),
        Mode::SpliceKeep => b.tee.as_ref(),
    }
}

impl<E: Engine> Worker<E> {
    /// Chooses the forwarding mode of a length-delimited body of `total` bytes, of which
    /// `first` came with the head, and readies what the mode keeps for the cache: the copy
    /// buffer as the object, or the tee'd copy's buffer. A spliced body is not stored.
    pub(super) fn set_mode(&mut self, b: &mut Xfer, total: u64, first: &[u8]) {
        let cacheable = b.store.is_some();
        let (mode, pipe, tee) = self.choose_mode(b.left, cacheable);
        (b.mode, b.pipe, b.tee) = (mode, pipe, tee);
        match b.mode {
            Mode::Copy if cacheable => {
                b.keep_in_buf = true;
                b.buf = Vec::with_capacity(total as usize);
                b.buf.extend_from_slice(first);
                b.sent = first.len();
            }
            Mode::SpliceKeep => {
                b.keep = Vec::with_capacity(total as usize);
                b.keep.extend_from_slice(first);
            }
            Mode::Splice | Mode::Release => {
                b.store = None;
                self.keeping -= std::mem::take(&mut b.reserved);
            }
            Mode::Copy => {}
        }
    }

    /// Splice-release, when the head's read left more of the response in the origin's
    /// socket: what waits for the client (the head, the body bytes read with it) is written
    /// into the body's empty pipe, and the splice from the origin appends the body to it, so
    /// that one splice gives head and body to the client. Under a readiness mechanism a
    /// `write` into the pipe replaces the head's `send` (the same count); under the completion
    /// engine it also saves the ring enter that the send's completion, alone, would end: the
    /// next enter is the one that brings the body. Nothing is moved when other output waits
    /// (a cached body, more than [`HEAD_IN_PIPE_MAX`] bytes).
    pub(super) fn head_into_pipe(&mut self, c: &mut Client) {
        let pending = c.out.len() - c.out_pos;
        if pending == 0 || pending > HEAD_IN_PIPE_MAX || c.hit.is_some() {
            return;
        }
        let Some(b) = c.x.as_mut().and_then(|x| x.body.as_mut()) else {
            return;
        };
        let Some(p) = b.pipe.take() else {
            return;
        };
        // Room for the head too, so the body still moves in one splice: where the largest
        // pipe cannot hold both (bodies near 1 MiB), the head is sent as it is.
        let whole = b.left.saturating_add(pending as u64);
        let mut p = self.release_pipe(p, whole);
        if p.len != 0 || (p.room() as u64) < whole {
            b.pipe = Some(p);
            return;
        }
        let mut written = 0;
        while written < pending {
            let rest = &c.out[c.out_pos + written..];
            match self.engine.write_pipe(p.wr, rest) {
                Ok(n) if n > 0 => written += n,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                // An empty pipe with room takes a few pages whole: never seen. What went in
                // stays ahead of what did not, so the rest cannot follow: the response is cut
                // short (the client closed once what is in the pipe is out).
                _ if written > 0 => {
                    c.out.truncate(c.out_pos + written);
                    b.failed = true;
                    b.reusable = false;
                    self.stats.conns.io_errors.inc();
                    break;
                }
                _ => break,
            }
        }
        c.out_pos += written;
        if c.out_pos == c.out.len() {
            c.out.clear();
            c.out_pos = 0;
        }
        p.len += written;
        b.head_held = written > 0 && !b.failed;
        b.pipe = Some(p);
    }

    /// Copy, splice or splice-keep for a body with `left` bytes still to receive, with the
    /// pipes it needs.
    pub(super) fn choose_mode(
        &mut self,
        left: u64,
        cacheable: bool,
    ) -> (Mode, Option<Pipe>, Option<Pipe>) {
        let forward = self.cfg.forward;
        if !forward.splices() || left < self.cfg.splice_min.max(1) || !self.engine.can_splice() {
            return (Mode::Copy, None, None);
        }
        let keep = forward == ForwardMode::SpliceKeep && cacheable;
        let want = if keep { 2 } else { 1 };
        if !self.pipes.available(want) {
            self.pipes.counts.exhausted += 1;
            self.stats.no_pipe.inc();
            return (Mode::Copy, None, None);
        }
        // A pipe2 error (out of descriptors) falls back to copying too.
        let first = match self.pipes.take() {
            Ok(Some(p)) => p,
            _ => {
                self.stats.no_pipe.inc();
                return (Mode::Copy, None, None);
            }
        };
        if forward == ForwardMode::SpliceRelease {
            return (Mode::Release, Some(self.release_pipe(first, left)), None);
        }
        if !keep {
            return (Mode::Splice, Some(first), None);
        }
        match self.pipes.take() {
            Ok(Some(t)) => (Mode::SpliceKeep, Some(first), Some(t)),
            _ => {
                self.pipes.give(first);
                self.stats.no_pipe.inc();
                (Mode::Copy, None, None)
            }
        }
    }

    /// Splice-release: the body's pipe, grown once to hold the `left` bytes still to come (a
    /// power of two, at most [`RELEASE_PIPE_MAX`]), so that one splice takes all the socket
    /// holds and one gives it all to the client, instead of a 64 KiB pipe-full at a time. A
    /// pipe keeps its size in the pool, so the fcntl is paid once per pipe, not per body; where
    /// the kernel refuses (the per-user limit on pipe pages), the pipe keeps the size it has.
    pub(super) fn release_pipe(&mut self, mut p: Pipe, left: u64) -> Pipe {
        let want = usize::try_from(left)
            .unwrap_or(usize::MAX)
            .min(RELEASE_PIPE_MAX)
            .next_power_of_two();
        if p.cap < want {
            match sys::set_pipe_size(p.wr, want) {
                Ok(cap) => p.cap = cap,
                Err(_) => self.stats.pipes_not_grown.inc(),
            }
        }
        p
    }

    /// Body: bring what the origin has into the buffer or pipe (and, splice-keep, tee it
    /// into the cache's copy).
    pub(super) fn fill(&mut self, c: &mut Client) -> Step {
        let x = c.x.as_mut().expect("an exchange");
        let b = x.body.as_mut().expect("a body");
        let mut progress = false;
        if b.mode == Mode::SpliceKeep {
            progress |= tee_into_keep(&mut self.engine, c.fd, b, &self.stats)?;
        }
        if b.in_done || b.failed {
            b.head_held = false;
            self.close_hung_up_origin(x);
            return Ok(progress);
        }
        let Some(o) = x.origin.as_mut() else {
            b.head_held = false;
            return Ok(progress);
        };
        let room = room(b, self.cfg.buffer_size);
        if room == 0 {
            b.head_held = false;
            if o.f.hup {
                // Hung up while we cannot read: a level-triggered mechanism would report it
                // on every wait. What it sent after the buffered bytes is lost anyway.
                return self.body_failed(c).map(|_| true);
            }
            return Ok(progress);
        }
        if !o.f.readable {
            // A head waits for the body only while a splice that brings it is in flight.
            b.head_held &= b.filling;
            return Ok(progress);
        }
        let max = match b.framing {
            Framing::Length(_) => room.min(b.left.min(usize::MAX as u64) as usize),
            _ => room,
        };
        let r = match b.mode {
            Mode::Copy => {
                if b.buf.capacity() - b.buf.len() < max {
                    b.buf.reserve(max);
                }
                self.engine.read_max(o.fd, &mut b.buf, max)
            }
            _ => {
                let wr = b.pipe.as_ref().expect("a pipe").wr;
                self.engine.splice(o.fd, wr, max, o.fd)
            }
        };
        let held = std::mem::take(&mut b.head_held);
        b.filling = matches!(&r, Err(e) if pending(e));
        if b.filling {
            b.head_held = held;
        }
        match r {
            Ok(0) => {
                if b.framing == Framing::UntilClose {
                    b.in_done = true;
                    b.reusable = false;
                    return Ok(true);
                }
                self.body_failed(c).map(|_| true)
            }
            Ok(n) => {
                match b.mode {
                    Mode::Copy => {
                        if !b.dechunk {
                            self.stats.bytes_copy.add(n as u64);
                        }
                        o.drained_turn = 0;
                        if n < max && !o.f.peer_closed && !E::COMPLETION {
                            o.f.readable = false;
                            o.drained_turn = self.turn;
                        }
                    }
                    _ => {
                        o.drained_turn = 0;
                        self.stats.bytes_splice.add(n as u64);
                        b.pipe.as_mut().expect("a pipe").len += n;
                    }
                }
                if frame_received(b, n, &self.stats).is_err() {
                    return self.body_failed(c).map(|_| true);
                }
                self.touch(c);
                Ok(true)
            }
            Err(e) if pending(&e) => {
                o.f.readable = false;
                Ok(progress)
            }
            Err(e) if sys::would_block(&e) => {
                match b.pipe.as_mut() {
                    // A pipe that holds only a head (a few pages of many) is not full: the
                    // socket is empty (a readiness mechanism's EAGAIN says so).
                    Some(_) if held && !E::COMPLETION => o.f.readable = false,
                    // Full, or the socket is empty: drain the pipe, then try again.
                    Some(p) if b.mode != Mode::Copy && p.len > 0 => p.full = true,
                    _ => o.f.readable = false,
                }
                Ok(progress)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(true),
            Err(_) => self.body_failed(c).map(|_| true),
        }
    }

    /// The body is all in (or the origin failed): an origin that hung up after it cannot be
    /// reused, and a level-triggered mechanism would report the hang-up on every wait while
    /// the client drains, so it is closed now.
    fn close_hung_up_origin(&mut self, x: &mut Exchange) {
        if !x.origin.as_ref().is_some_and(|o| o.f.hup) {
            return;
        }
        let b = x.body.as_mut().expect("a body");
        b.reusable = false;
        let o = x.origin.take().expect("an origin");
        if self.engine.unasked(o.fd) == Unasked::Bytes {
            // It sent more than the response before it closed: nothing is cached.
            b.store = None;
            self.stats.origin_errors.inc();
        }
        self.close_origin(o);
    }

    /// A pipe back to the pool; one that a request still uses may yet receive bytes, so it is
    /// closed like one that holds some.
    pub(super) fn give_pipe(&mut self, mut p: Pipe) {
        if self.engine.pipe_busy(p.rd, p.wr) {
            p.len = p.len.max(1);
        }
        self.pipes.give(p);
    }
}

/// Splice-keep: duplicates what the first pipe holds into the second (bound for the client)
/// and reads it out of the first into the object, so the first pipe only ever holds bytes not
/// yet duplicated.
pub(super) fn tee_into_keep(
    io: &mut impl Engine,
    client: RawFd,
    b: &mut Xfer,
    stats: &WorkerStats,
) -> Step {
    let (Some(p), Some(t)) = (b.pipe.as_mut(), b.tee.as_mut()) else {
        return Ok(false);
    };
    let mut progress = false;
    loop {
        // What was tee'd is read out of the first pipe before anything more is tee'd (a tee
        // copies from the pipe's front).
        while b.keep_due > 0 {
            if b.keep.capacity() - b.keep.len() < b.keep_due {
                b.keep.reserve(b.keep_due);
            }
            match io.read_pipe(p.rd, &mut b.keep, b.keep_due, client) {
                Ok(0) => return Err(Close),
                Ok(k) => {
                    b.keep_due -= k;
                    p.len -= k;
                    progress = true;
                }
                // The request is in flight; its completion comes as an event on the client.
                Err(e) if pending(&e) => return Ok(progress),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                // The bytes were just seen in the pipe: anything else is a broken pipe.
                Err(_) => return Err(Close),
            }
        }
        if p.len == 0 || t.full {
            break;
        }
        match io.tee(p.rd, t.wr, p.len, client) {
            Ok(0) => break,
            Ok(n) => {
                t.len += n;
                stats.bytes_tee.add(n as u64);
                b.keep_due = n;
                p.full = false;
                progress = true;
            }
            // The request is in flight; its completion comes as an event on the client.
            Err(e) if pending(&e) => break,
            // The second pipe is full; with nothing in it, our count of the first is wrong.
            Err(e) if sys::would_block(&e) && t.len > 0 => t.full = true,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            Err(_) => return Err(Close),
        }
    }
    Ok(progress)
}

/// Scans the next bytes of a chunked body, and when it goes to an HTTP/1.0 client appends
/// the chunks' data to `out`.
pub(super) fn scan_chunks(
    b: &mut Xfer,
    data: &[u8],
    out: &mut Vec<u8>,
) -> Result<Option<usize>, &'static str> {
    if b.dechunk {
        b.scanner.decode(data, out)
    } else {
        b.scanner.feed(data)
    }
}

/// A body's forwarding mode as the access log names it.
pub(super) fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Copy => "copy",
        Mode::Splice => "splice",
        Mode::SpliceKeep => "splice-keep",
        Mode::Release => "splice-release",
    }
}

/// How many bytes the body's buffer (emptied first if all of it was sent) or pipe takes now.
#[inline]
fn room(b: &mut Xfer, buffer_size: usize) -> usize {
    match b.mode {
        Mode::Copy => {
            if !b.keep_in_buf && b.sent == b.buf.len() && b.sent > 0 {
                b.buf.clear();
                b.sent = 0;
            }
            if b.keep_in_buf {
                buffer_size.saturating_sub(b.buf.len() - b.sent)
            } else {
                buffer_size.saturating_sub(b.buf.len())
            }
        }
        _ => {
            let p = b.pipe.as_ref().expect("a pipe");
            if p.full {
                0
            } else {
                p.room()
            }
        }
    }
}

/// Accounts `n` bytes of the body just received by its framing: what is left of a length,
/// or the chunks scanned (decoded for an HTTP/1.0 client); bytes after a chunked body's end
/// make the origin connection unusable. `Err`: a malformed chunked body.
#[inline]
fn frame_received(b: &mut Xfer, n: usize, stats: &WorkerStats) -> Result<(), ()> {
    match b.framing {
        Framing::Length(_) => {
            b.left -= n as u64;
            b.in_done = b.left == 0;
        }
        Framing::Chunked if b.dechunk => {
            let start = b.buf.len() - n;
            let raw = b.buf.split_off(start);
            let r = b.scanner.decode(&raw, &mut b.buf);
            stats.bytes_copy.add((b.buf.len() - start) as u64);
            match r {
                Ok(Some(k)) => {
                    if k < raw.len() {
                        b.reusable = false;
                        stats.origin_errors.inc();
                    }
                    b.in_done = true;
                }
                Ok(None) => {}
                Err(_) => return Err(()),
            }
        }
        Framing::Chunked => {
            let start = b.buf.len() - n;
            match b.scanner.feed(&b.buf[start..]) {
                Ok(Some(k)) => {
                    if start + k < b.buf.len() {
                        b.buf.truncate(start + k);
                        b.reusable = false;
                        stats.origin_errors.inc();
                    }
                    b.in_done = true;
                }
                Ok(None) => {}
                Err(_) => {
                    b.buf.truncate(start);
                    return Err(());
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::rig::{ok, Rig};
    use super::*;

    fn body(framing: Framing) -> Xfer {
        Xfer::new(framing, false, true)
    }

    #[test]
    fn room_empties_a_sent_buffer_first() {
        let mut b = body(Framing::Length(100));
        b.buf.extend_from_slice(b"0123456789");
        assert_eq!(room(&mut b, 64), 54);
        b.sent = 10;
        assert_eq!(room(&mut b, 64), 64, "all sent: the buffer starts over");
        assert!(b.buf.is_empty());
        b.keep_in_buf = true;
        b.buf.extend_from_slice(b"0123456789");
        b.sent = 4;
        assert_eq!(room(&mut b, 64), 58, "a kept object is never cleared");
    }

    #[test]
    fn frames_received() {
        let stats = WorkerStats::for_this_thread();
        let mut b = body(Framing::Length(10));
        b.left = 10;
        b.buf.extend_from_slice(b"01234");
        frame_received(&mut b, 5, &stats).unwrap();
        assert_eq!((b.left, b.in_done), (5, false));
        frame_received(&mut b, 5, &stats).unwrap();
        assert!(b.in_done);
        // Chunked: the end found, bytes after it cut and counted.
        let mut b = body(Framing::Chunked);
        b.buf.extend_from_slice(b"3\r\nabc\r\n0\r\n\r\nXY");
        let n = b.buf.len();
        frame_received(&mut b, n, &stats).unwrap();
        assert!(b.in_done && !b.reusable);
        assert!(b.buf.ends_with(b"0\r\n\r\n"));
        assert_eq!(stats.origin_errors.get(), 1);
        // Malformed: an error, the bad bytes dropped.
        let mut b = body(Framing::Chunked);
        b.buf.extend_from_slice(b"zz\r\n");
        assert!(frame_received(&mut b, 4, &stats).is_err());
        assert!(b.buf.is_empty());
    }

    /// Each mode carries a large body whole; splice modes count spliced bodies.
    #[test]
    fn each_mode_forwards_a_large_body() {
        let big = "x".repeat(300_000);
        for mode in [
            ForwardMode::Copy,
            ForwardMode::Splice,
            ForwardMode::SpliceKeep,
            ForwardMode::SpliceRelease,
        ] {
            let b = big.clone();
            let mut r = Rig::new(|c| c.forward = mode, move |_| ok(&b, ""));
            let a = r.get("/big", "");
            assert_eq!(a.body.len(), big.len(), "{mode:?}");
            let spliced = r.w.stats.spliced.get()
                + r.w.stats.spliced_keep.get()
                + r.w.stats.spliced_release.get();
            assert_eq!(spliced, u64::from(mode != ForwardMode::Copy), "{mode:?}");
        }
    }
}
