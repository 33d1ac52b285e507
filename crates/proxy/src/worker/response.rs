//! The response path: the request sent to the origin, its response head read and parsed, the body
//! set on its way by the forwarding mode, and the exchange finished (the object stored, the origin
//! connection given back).

use super::*;

impl<E: Engine> Worker<E> {
    /// Fetch: connect, send the request, read and parse the response head.
    pub(super) fn fetch(&mut self, c: &mut Client) -> Step {
        let cfd = c.fd;
        let x = c.x.as_mut().expect("an exchange while fetching");
        if x.origin.is_none() {
            match self.origin_for(cfd, x.fresh_only) {
                Ok(o) => x.origin = Some(o),
                Err(_) => {
                    self.stats.origin_errors.inc();
                    return self.origin_failed(c);
                }
            }
        }
        let unsent = unsent_body(x);
        let o = x.origin.as_mut().expect("an origin");
        if o.f.writable || o.f.readable {
            // Writable (or an answer) since the connect began: it is up, or failed, which
            // the next transfer says.
            o.connecting_since = None;
        }
        // An origin may answer before it has the whole body (an early 413, say) and stop
        // reading: while a body is being sent, its answer is looked for first.
        let answer_early = o.f.readable && unsent;
        if answer_early {
            // Read the head below.
        } else if x.req_pos < x.req.len() {
            if !o.f.writable {
                return Ok(false);
            }
            return match self
                .engine
                .writev(o.fd, &[IoSlice::new(&x.req[x.req_pos..])])
            {
                Ok(n) => {
                    x.req_pos += n;
                    // A completion engine takes at most its send size at once (a buffered
                    // body is larger): what is left is asked for again, and the engine
                    // answers "in flight" until there is room.
                    if x.req_pos < x.req.len() && !E::COMPLETION {
                        o.f.writable = false;
                    }
                    Ok(true)
                }
                Err(e) if sys::would_block(&e) || pending(&e) => {
                    o.f.writable = false;
                    Ok(false)
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(true),
                Err(_) => {
                    self.stats.origin_errors.inc();
                    self.origin_failed(c)
                }
            };
        }
        if !answer_early && x.req_body.as_ref().is_some_and(|b| !b.done) {
            return self.read_request_body(c);
        }
        if !o.f.readable {
            return Ok(false);
        }
        let limit = if self.cfg.forward.splices() {
            HEAD_READ_SPLICE
        } else {
            self.cfg.buffer_size
        };
        if x.resp.capacity() - x.resp.len() < limit {
            x.resp.reserve(limit);
        }
        let read = self.engine.read_max(o.fd, &mut x.resp, limit);
        match read {
            Ok(0) => {
                self.stats.origin_errors.inc();
                self.origin_failed(c)
            }
            Ok(n) => {
                x.got_bytes = true;
                x.head_full = n == limit;
                o.drained_turn = 0;
                if n < limit && !o.f.peer_closed && !E::COMPLETION {
                    o.f.readable = false;
                    o.drained_turn = self.turn;
                }
                self.touch(c);
                self.parse_head(c)
            }
            Err(e) if sys::would_block(&e) || pending(&e) => {
                o.f.readable = false;
                // Nothing yet: the request's sending goes on.
                Ok(answer_early)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(true),
            Err(_) => {
                self.stats.origin_errors.inc();
                self.origin_failed(c)
            }
        }
    }

    pub(super) fn parse_head(&mut self, c: &mut Client) -> Step {
        loop {
            let x = c.x.as_mut().expect("an exchange");
            let before = c.out.len();
            let http10 = x.client_minor == 0;
            match parse_response_head(&x.resp, x.head_request, http10, &mut c.out) {
                ResponseParse::Partial => return Ok(true),
                ResponseParse::Interim(n) => {
                    // A proxy passes 1xx on (RFC 9110 §15.2), but to an HTTP/1.0 client, which
                    // cannot read one, and but 100 Continue, which answers the expectation the
                    // proxy answered itself and did not forward.
                    if !http10 && x.resp.get(9..12) != Some(&b"100"[..]) {
                        c.out.extend_from_slice(&x.resp[..n]);
                    }
                    x.resp.drain(..n);
                }
                ResponseParse::Error(_) => {
                    self.stats.origin_errors.inc();
                    return self.origin_failed(c);
                }
                ResponseParse::Complete(h) => {
                    // Via toward the client too (RFC 9110 §7.6.3), with the origin's version;
                    // a cached copy keeps it, as it came through this proxy.
                    if let Some(v) = self.cfg.via.as_deref() {
                        push_via(&mut c.out, h.minor_version, v);
                    }
                    self.start_body(c, h, before);
                    return Ok(true);
                }
            }
        }
    }

    /// The origin failed (refused, reset, closed, or garbage) before a response head: send the
    /// request again on a fresh connection if a pooled one failed before any byte of the
    /// answer; otherwise answer 502.
    pub(super) fn origin_failed(&mut self, c: &mut Client) -> Step {
        let x = c.x.as_mut().expect("an exchange");
        let reused = x.origin.as_ref().is_some_and(|o| o.reused);
        if let Some(o) = x.origin.take() {
            self.close_origin(o);
        }
        if reused && !x.got_bytes && !x.retried && !x.streamed {
            x.retried = true;
            x.fresh_only = true;
            x.req_pos = 0;
            x.resp.clear();
            self.stats.origin_retries.inc();
            return Ok(true);
        }
        let x = c.x.take().expect("an exchange");
        let (minor, keep, head) = (x.client_minor, x.client_keep, x.head_request);
        self.drop_exchange(*x, false);
        self.stats.bad_gateway.inc();
        self.error_response(c, Status::BadGateway, minor, keep && !c.close_after, head);
        c.phase = Phase::Idle;
        Ok(true)
    }

    /// The response head is in: queue it for the client and set the body's transfer up.
    pub(super) fn start_body(&mut self, c: &mut Client, h: ResponseHead, head_start: usize) {
        let x = c.x.as_mut().expect("an exchange");
        if let Some(url) = x.invalidate.take() {
            if (200..400).contains(&h.status) {
                self.invalidate(&url, &c.out[head_start..]);
            }
        }
        let x = c.x.as_mut().expect("an exchange");
        if let Some(old) = x.revalidating.take() {
            if h.status == 304 {
                return self.revalidated(c, h, head_start, old);
            }
            // Any other answer replaces what was stored (or, if not stored itself, leaves
            // nothing stale behind).
            if let Some(k) = x.store_key.as_deref() {
                self.cache.remove(k);
            }
        }
        self.stats.record_status(h.status);
        // Answered before the whole request body was sent: the rest of the body is not sent,
        // so neither connection can carry another request (the client's remaining body bytes
        // are read and discarded while lingering).
        let early = unsent_body(x);
        if early {
            c.close_after = true;
        }
        // An HTTP/1.0 client cannot read chunks: it gets their data, ended by the close.
        let dechunk = h.framing == Framing::Chunked && x.client_minor == 0;
        if h.framing == Framing::UntilClose || dechunk || self.gate.shutting_down() {
            c.close_after = true;
        }
        // The head as a cache would keep it: cut out of what goes to the client, only when the
        // response is stored.
        let head_end = c.out.len();
        c.out.extend_from_slice(b"X-Cache: MISS\r\n");
        let keep = x.client_keep && !c.close_after;
        connection_field(&mut c.out, x.client_minor, keep);
        c.out.extend_from_slice(b"\r\n");
        let resp = std::mem::take(&mut x.resp);
        let prefix = &resp[h.head_len..];
        let mut b = Xfer::new(h.framing, dechunk, h.keep_alive && !early);
        let mut take = prefix.len();
        let mut dechunked = Vec::new();
        match h.framing {
            Framing::None => {
                // Bytes after a bodiless response are not the client's (and make the
                // connection unusable; see below).
                take = 0;
                b.in_done = true;
                if h.status == 204 {
                    b.store = self.store_for(x, &h, 0, true, &c.out[head_start..head_end]);
                }
            }
            Framing::Length(total) => {
                take = usize::try_from(total).map_or(take, |t| take.min(t));
                b.left = total - take as u64;
                b.in_done = b.left == 0;
                // Bytes after the body (see below) make the whole response suspect.
                let whole = take == prefix.len();
                b.store = self.store_for(x, &h, total, whole, &c.out[head_start..head_end]);
                if b.store.is_some() {
                    b.reserved = total;
                }
                self.set_mode(&mut b, total, &prefix[..take]);
            }
            Framing::Chunked => match scan_chunks(&mut b, prefix, &mut dechunked) {
                Ok(Some(k)) => {
                    take = k;
                    b.in_done = true;
                }
                Ok(None) => {}
                Err(_) => {
                    take = 0;
                    b.failed = true;
                }
            },
            Framing::UntilClose => b.reusable = false,
        }
        if take < prefix.len() {
            // Bytes after the response: the origin and the proxy disagree on where it ends
            // (a smuggled response?). Never reuse the connection; nothing of it is cached.
            b.reusable = false;
            b.store = None;
            self.stats.origin_errors.inc();
        }
        self.hand_over(c, b, resp, (h.head_len, take), &dechunked, h.status);
    }

    /// The body's first bytes (`take` of them behind the head's `head_len` in `resp`, or the
    /// chunks' data `dechunked` for an HTTP/1.0 client), read with the head, queued for the
    /// client, and the body set on its way. A copied body's first bytes stay where they are:
    /// the head's buffer becomes the body's, its head counted as sent, and they leave behind
    /// the client's output in the same write rather than being copied into it.
    fn hand_over(
        &mut self,
        c: &mut Client,
        mut b: Xfer,
        mut resp: Vec<u8>,
        (head_len, take): (usize, usize),
        dechunked: &[u8],
        status: u16,
    ) {
        let prefix_in_buf = b.mode == Mode::Copy && !b.keep_in_buf && !b.dechunk && take > 0;
        if b.dechunk {
            c.out.extend_from_slice(dechunked);
            self.stats.bytes_copy.add(dechunked.len() as u64);
        } else {
            if !prefix_in_buf {
                c.out.extend_from_slice(&resp[head_len..head_len + take]);
            }
            self.stats.bytes_copy.add(take as u64);
        }
        if b.mode == Mode::Copy && !b.keep_in_buf && !b.in_done && !prefix_in_buf {
            b.buf = self.take_buffer();
        }
        match b.mode {
            Mode::Copy => self.stats.copied.inc(),
            Mode::Splice => self.stats.spliced.inc(),
            Mode::SpliceKeep => self.stats.spliced_keep.inc(),
            Mode::Release => self.stats.spliced_release.inc(),
        }
        if b.failed {
            self.stats.origin_errors.inc();
        }
        if let Some(e) = c.log.back_mut().filter(|e| e.end.is_none()) {
            e.status = status;
            e.mode = mode_name(b.mode);
        }
        let x = c.x.as_mut().expect("an exchange");
        if prefix_in_buf {
            resp.truncate(head_len + take);
            b.sent = head_len;
            b.buf = resp;
            x.resp = Vec::new();
        } else {
            x.resp = resp;
            x.resp.clear();
        }
        let release = b.mode == Mode::Release && x.head_full;
        x.body = Some(b);
        c.phase = Phase::Body;
        if release {
            self.head_into_pipe(c);
        }
    }

    /// The origin failed inside a body: what arrived still goes to the client, then the
    /// client's connection closes (its response is cut short, and only a close can say so).
    pub(super) fn body_failed(&mut self, c: &mut Client) -> Result<(), Close> {
        let x = c.x.as_mut().expect("an exchange");
        let b = x.body.as_mut().expect("a body");
        b.failed = true;
        b.reusable = false;
        b.store = None;
        self.stats.origin_errors.inc();
        if let Some(o) = x.origin.take() {
            self.close_origin(o);
        }
        Ok(())
    }

    pub(super) fn body_complete(&self, c: &Client) -> bool {
        let Some(b) = c.x.as_ref().and_then(|x| x.body.as_ref()) else {
            return false;
        };
        // A body cut short closes the client: everything queued before must be out first.
        (b.in_done || (b.failed && c.out_pending() == 0))
            && b.sent == b.buf.len()
            && b.pipe.as_ref().is_none_or(|p| p.len == 0)
            && b.tee.as_ref().is_none_or(|p| p.len == 0)
    }

    /// The body is through: store it, pool the origin connection, go back to `Idle` (or close
    /// the client if the body was cut short).
    pub(super) fn finish_exchange(&mut self, c: &mut Client) -> Result<(), Close> {
        let mut x = c.x.take().expect("an exchange");
        let mut b = x.body.take().expect("a body");
        if b.failed {
            self.stats.truncated.inc();
            c.x = Some(x);
            c.x.as_mut().expect("put back").body = Some(b);
            return Err(Close);
        }
        // The response is read only once the whole request body has been sent, so this holds;
        // a connection that carried part of a body is never pooled, whatever happened.
        let mut reusable = b.reusable && x.req_body.as_ref().is_none_or(|r| r.done);
        if let Some(o) = x.origin.as_mut() {
            o.stored = None;
            // The body has ended where the head said; anything behind it already is no answer
            // to any request (an until-close body ends with the close, and is never reused).
            // Splice-release (AutoRelease) ends by itself at the declared length and looks no
            // further: what it splices is never stored, so the only use of a look now would be
            // the connection's fate, and a pooled connection is looked at before its next
            // request anyway (`origin_for`, or its idle watch's event). What is already known
            // (the origin shut its side) decides at no cost.
            if b.mode == Mode::Release && b.store.is_none() {
                if o.f.peer_closed || o.f.hup {
                    reusable = false;
                }
            } else if b.framing != Framing::UntilClose {
                let drained = !E::COMPLETION
                    && o.drained_turn == self.turn
                    && !o.f.readable
                    && !o.f.hup
                    && !o.f.peer_closed;
                let unasked = if drained {
                    Unasked::Quiet
                } else {
                    self.engine.unasked(o.fd)
                };
                match unasked {
                    Unasked::Quiet => o.quiet_turn = self.turn,
                    Unasked::Closed => reusable = false,
                    Unasked::Bytes => {
                        reusable = false;
                        b.store = None;
                        self.stats.origin_errors.inc();
                    }
                }
            }
        }
        if let Some(s) = b.store.take() {
            let body = if b.keep_in_buf {
                std::mem::take(&mut b.buf)
            } else {
                std::mem::take(&mut b.keep)
            };
            // fresh_for is at most 2^31 s; checked all the same, as nothing may panic here.
            if let Some(expires) = self.now.checked_add(s.fresh_for) {
                let stored = self.cache.insert_for(
                    &s.key,
                    &s.vary,
                    &x.req,
                    Rc::new(Object {
                        status: s.status,
                        head: s.head,
                        body,
                        last_modified: s.last_modified,
                        expires,
                        stored: self.now,
                        age: s.age,
                        shared: s.shared,
                        validators: s.validators,
                        never_stale: s.never_stale,
                    }),
                );
                if stored && reusable {
                    if let Some(o) = x.origin.as_mut() {
                        o.stored = Some(s.key);
                    }
                }
            }
        }
        x.body = Some(b);
        self.drop_exchange(*x, reusable);
        c.phase = Phase::Idle;
        let end = c.written + c.out_pending() as u64;
        if let Some(e) = c.log.back_mut().filter(|e| e.end.is_none()) {
            e.end = Some(end);
        }
        Ok(())
    }
}

/// The `Connection` field a response to the client needs.
pub(super) fn connection_field(out: &mut Vec<u8>, minor: u8, keep: bool) {
    if !keep {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if minor == 0 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::super::rig::{ok, Rig};
    use super::*;

    #[test]
    fn connection_fields() {
        let f = |minor, keep| {
            let mut out = Vec::new();
            connection_field(&mut out, minor, keep);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(f(1, true), "");
        assert_eq!(f(1, false), "Connection: close\r\n");
        assert_eq!(f(0, true), "Connection: keep-alive\r\n");
        assert_eq!(f(0, false), "Connection: close\r\n");
    }

    /// A response followed by bytes the origin should not have sent is passed on cut at its
    /// length, never stored, and its connection never reused.
    #[test]
    fn bytes_after_a_response_spoil_it() {
        let mut r = Rig::new(
            |_| {},
            |_| {
                let mut v = ok("body", "Cache-Control: max-age=60\r\n");
                v.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil");
                v
            },
        );
        assert_eq!(r.get("/p", "").text(), "body");
        assert_eq!(r.get("/p", "").header("x-cache"), Some("MISS"));
        assert_eq!(r.origin.conns(), 2);
        assert!(r.w.stats.origin_errors.get() >= 2);
    }

    /// Interim responses reach an HTTP/1.1 client before the final one (but 100 Continue), and
    /// not an HTTP/1.0 one; the stored response carries none.
    #[test]
    fn interim_responses_are_passed_on() {
        let mut r = Rig::new(
            |_| {},
            |_| {
                let mut v = b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n".to_vec();
                v.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                v.extend_from_slice(&ok("x", "Cache-Control: max-age=60\r\n"));
                v
            },
        );
        let mut s = r.client();
        s.write_all(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let early = r.read(&mut s, true);
        assert_eq!(
            (early.status, early.header("link")),
            (103, Some("</s.css>"))
        );
        let last = r.read(&mut s, false);
        assert_eq!((last.status, last.text().as_str()), (200, "x"));
        let hit = r.get("/a", "");
        assert_eq!((hit.status, hit.header("x-cache")), (200, Some("HIT")));
        let mut s = r.client();
        let a = r.ask(&mut s, "GET /b HTTP/1.0\r\nHost: t\r\n\r\n");
        assert_eq!(a.status, 200, "an HTTP/1.0 client gets no 1xx");
    }

    /// An origin that refuses the connection: 502.
    #[test]
    fn a_refused_origin_is_502() {
        let mut r = Rig::new(|_| {}, |_| ok("x", ""));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let mut cfg = (*r.w.cfg).clone();
        cfg.origin = port;
        r.w.cfg = Arc::new(cfg);
        assert_eq!(r.get("/p", "").status, 502);
    }
}
