//! Request framing and bodies: the client's requests parsed one at a time and dispatched
//! (stats, CONNECT, the cache, the origin), and a request body pulled from the client in
//! batches.

use super::cache_path::{field_in, Consulted, Query};
use super::*;
use evlab_http::Forward;

/// What answering one buffered request came to.
enum Answered {
    /// The head is not all here yet.
    NeedInput,
    /// Answered (or refused): the next buffered request may follow.
    Next,
    /// The client now waits on the origin or a tunnel.
    Stop,
}

/// What the dispatch needs of a parsed request head, copied out of the client's buffer.
struct Asked {
    head_len: usize,
    minor: u8,
    keep: bool,
    ims: Option<SystemTime>,
    body: RequestBody,
    expect_continue: bool,
    /// GET or HEAD without a body: what a cache may answer (RFC 9111 §4). Any other method is
    /// forwarded, never looked up, and its answer never stored.
    safe: bool,
    /// May be sent twice (RFC 9110 §9.2.2). A request that may not never goes on a pooled
    /// connection, which the origin may have closed meanwhile: it could then be neither
    /// retried nor answered but with 502.
    idempotent: bool,
}

impl<E: Engine> Worker<E> {
    /// Answers the requests buffered, up to the first that must go to the origin.
    pub(super) fn answer(&mut self, c: &mut Client) -> Step {
        let mut progress = false;
        c.need_input = false;
        while c.phase == Phase::Idle
            && c.hit.is_none()
            && !c.close_after
            && c.out_pending() < OUT_HIGH_WATER
        {
            if c.rbuf.is_empty() {
                c.need_input = true;
                break;
            }
            match self.answer_one(c) {
                Answered::NeedInput => {
                    c.need_input = true;
                    break;
                }
                Answered::Next => progress = true,
                Answered::Stop => {
                    progress = true;
                    break;
                }
            }
        }
        Ok(progress)
    }

    /// The first buffered request: refused, answered by the proxy (stats, a cache hit), turned
    /// into a tunnel, or sent on its way to the origin.
    fn answer_one(&mut self, c: &mut Client) -> Answered {
        let req = match parse_proxy_request(&c.rbuf, &self.cfg.limits) {
            ProxyParse::Partial => return Answered::NeedInput,
            ProxyParse::Error(e) => {
                self.stats.requests.inc();
                self.open_log_line(c);
                self.error_response(c, e.status, e.minor_version, e.keep_alive, e.head_only);
                if e.keep_alive {
                    c.rbuf.drain(..e.consumed);
                } else {
                    c.rbuf.clear();
                }
                return Answered::Next;
            }
            ProxyParse::Complete(req) => req,
        };
        self.stats.requests.inc();
        let safe = matches!(req.method, "GET" | "HEAD") && req.body == RequestBody::None;
        let a = Asked {
            head_len: req.head_len,
            minor: req.minor_version,
            keep: req.keep_alive,
            ims: req.if_modified_since,
            body: req.body,
            expect_continue: req.expect_continue,
            safe,
            idempotent: matches!(
                req.method,
                "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
            ),
        };
        let stats_asked = self.cfg.stats && safe && req.path == STATS_PATH;
        let connect = req.connect.map(|t| t.to_ascii_lowercase());
        drop(req);
        self.open_log_line(c);
        if !a.keep {
            c.close_after = true;
        }
        if let Some(target) = connect {
            c.rbuf.drain(..a.head_len);
            self.connect_tunnel(c, &target, a.minor, a.keep);
            return if c.phase == Phase::Tunnel {
                Answered::Stop
            } else {
                Answered::Next
            };
        }
        if stats_asked {
            self.answer_stats(c, a.minor, a.keep);
            c.rbuf.drain(..a.head_len);
            return Answered::Next;
        }
        self.forward_request(c, &a)
    }

    /// The access log's line for the request at the head of the client's buffer.
    fn open_log_line(&mut self, c: &mut Client) {
        if self.log.is_some() {
            let rbuf = std::mem::take(&mut c.rbuf);
            self.log_open(c, &rbuf);
            c.rbuf = rbuf;
        }
    }

    /// `--stats`: the counters as JSON, never stored by anyone.
    fn answer_stats(&mut self, c: &mut Client, minor: u8, keep: bool) {
        let body = self.shared.to_json();
        let extra = format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\nCache-Control: no-store\r\n",
            body.len()
        );
        write_head(
            &mut c.out,
            Status::Ok,
            minor,
            self.date.get(),
            keep,
            extra.as_bytes(),
        );
        c.out.extend_from_slice(body.as_bytes());
        self.stats.record_status(200);
        self.log_answered(c, 200, None);
    }

    /// A request for the origin: rewritten, answered from the cache if it may be, else made an
    /// exchange with the body bytes that came with its head.
    fn forward_request(&mut self, c: &mut Client, a: &Asked) -> Answered {
        set_forwarded_for(c);
        let mut fwd = self.pool().take(a.head_len + 64);
        let opts = ForwardOptions {
            origin_host: self.cfg.origin_host.as_deref(),
            via: self.cfg.via.as_deref(),
            forwarded_for: c.xff.as_deref(),
            drop_expect_continue: true,
        };
        let Ok(f) = write_forward_request(&c.rbuf[..a.head_len], &opts, &mut fwd) else {
            return self.refuse_request(c, fwd, Status::BadRequest, a.minor);
        };
        // What is kept of the rewritten head (its target borrows the client's buffer).
        let Forward {
            key,
            head_request,
            authorization,
            cookie,
            directives,
            conditional,
            if_none_match,
            ..
        } = f;
        let facts = RequestFacts {
            authorization,
            cookie,
        };
        let cond = Cond {
            ims: a.ims,
            inm: if_none_match.map(Box::from),
        };
        let q = Query {
            facts,
            directives: &directives,
            conditional,
            cond: &cond,
            minor: a.minor,
            head: head_request,
        };
        let lookup = a.safe && self.cache.enabled() && !authorization;
        let revalidating = match self.look_up(c, &key, &fwd, a, &q, lookup) {
            Ok(r) => r,
            Err(answered) => {
                self.pool().give(fwd);
                c.rbuf.drain(..a.head_len);
                return answered;
            }
        };
        if let Some(obj) = &revalidating {
            add_validators(&mut fwd, obj);
        }
        // A request with Authorization is not answered from the cache, but its response may
        // be stored if it says it may be shared (RFC 9111 §3.5; `shared_fresh_for`).
        let store = a.safe && self.cache.enabled() && !directives.no_store && !head_request;
        let (req_body, taken) = match self.first_body_bytes(c, a, &mut fwd) {
            Ok(b) => b,
            Err(status) => return self.refuse_request(c, fwd, status, a.minor),
        };
        let unread = req_body.as_ref().is_some_and(|b| !b.done);
        self.count_lookup(c, lookup && store);
        if a.expect_continue && req_body.as_ref().is_some_and(|b| !b.done) {
            // Answered here, not by the origin: the proxy reads the body only to forward it,
            // and the origin then never waits for a 100 of its own (docs/proxy-internals.md).
            c.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        c.rbuf.drain(..taken);
        if c.rbuf.is_empty() {
            self.pool().give(std::mem::take(&mut c.rbuf));
        }
        let resp = self.take_buffer();
        c.x = Some(Box::new(Exchange {
            origin: None,
            fresh_only: !a.idempotent,
            req: fwd,
            req_pos: 0,
            req_body,
            streamed: false,
            head_request,
            client_minor: a.minor,
            client_keep: a.keep,
            // An unsafe method may change what the target is (RFC 9111 §4.4).
            invalidate: (!a.safe && self.cache.enabled()).then(|| Box::<str>::from(&*key)),
            store_key: store.then(|| Box::<str>::from(key)),
            req_facts: facts,
            cond,
            revalidating,
            retried: false,
            got_bytes: false,
            head_full: false,
            resp,
            body: None,
        }));
        c.phase = if unread && self.cfg.request_buffering {
            Phase::Buffer
        } else {
            Phase::Fetch
        };
        Answered::Stop
    }

    /// The cache's part in a request for `url` whose head for the origin is `head` (`lookup`: it
    /// may be answered from the cache):
    /// `Err` when it is answered (from the cache, or 504 for `only-if-cached` with nothing that
    /// may answer), else the stored response to validate, if any.
    fn look_up(
        &mut self,
        c: &mut Client,
        url: &str,
        head: &[u8],
        a: &Asked,
        q: &Query<'_>,
        lookup: bool,
    ) -> Result<Option<Rc<Object>>, Answered> {
        let found = lookup.then(|| {
            // The URL itself (borrowed: no allocation) unless its responses vary; a variant is
            // selected by the head as forwarded, as it is stored (`Exchange::req`).
            let at = self.cache.lookup_key(url, head);
            self.consult(c, &at, q)
        });
        let revalidating = match found {
            Some(Consulted::Answered) => return Err(Answered::Next),
            Some(Consulted::Validate(obj)) => Some(obj),
            Some(Consulted::Miss) | None => None,
        };
        if q.directives.only_if_cached {
            // Nothing stored may answer it, and the origin is not to be asked (RFC 9111
            // §5.2.1.7).
            self.error_response(c, Status::GatewayTimeout, a.minor, a.keep, q.head);
            return Err(Answered::Next);
        }
        Ok(revalidating)
    }

    /// A forwarded request counted a cache miss (it was looked up, and its answer may be
    /// stored) or a bypass.
    fn count_lookup(&mut self, c: &mut Client, miss: bool) {
        if miss {
            self.stats.misses.inc();
            if let Some(e) = c.log.back_mut() {
                e.cache = CacheMark::Miss;
            }
        } else {
            self.stats.bypassed.inc();
        }
    }

    /// A request refused before the origin saw any of it: `status`, then the close (what
    /// follows cannot be framed, or is a body nobody reads).
    fn refuse_request(
        &mut self,
        c: &mut Client,
        fwd: Vec<u8>,
        status: Status,
        minor: u8,
    ) -> Answered {
        self.pool().give(fwd);
        self.error_response(c, status, minor, false, false);
        c.rbuf.clear();
        Answered::Next
    }

    /// The body bytes that came with the head, appended to `fwd` behind it (they go out in one
    /// write), and how many bytes of the client's buffer the request took. A chunked body is
    /// checked first, so that a malformed one is refused (400) before the origin sees any of
    /// the request; a declared length past what is buffered is 413.
    fn first_body_bytes(
        &mut self,
        c: &Client,
        a: &Asked,
        fwd: &mut Vec<u8>,
    ) -> Result<(Option<ReqBody>, usize), Status> {
        let rest = &c.rbuf[a.head_len..];
        match a.body {
            RequestBody::None => Ok((None, a.head_len)),
            RequestBody::Length(n) if self.cfg.request_buffering && n > self.cfg.request_buffer => {
                Err(Status::ContentTooLarge)
            }
            RequestBody::Length(n) => {
                let avail = rest.len().min(usize::try_from(n).unwrap_or(usize::MAX));
                fwd.extend_from_slice(&rest[..avail]);
                let left = n - avail as u64;
                let body = ReqBody {
                    left: Some(left),
                    scanner: ChunkedScanner::new(),
                    done: left == 0,
                };
                Ok((Some(body), a.head_len + avail))
            }
            RequestBody::Chunked => {
                let mut scanner = ChunkedScanner::strict();
                let (n, done) = match scanner.feed(rest) {
                    Ok(Some(k)) => (k, true),
                    Ok(None) => (rest.len(), false),
                    Err(_) => return Err(Status::BadRequest),
                };
                fwd.extend_from_slice(&rest[..n]);
                let body = ReqBody {
                    left: None,
                    scanner,
                    done,
                };
                Ok((Some(body), a.head_len + n))
            }
        }
    }

    /// Reads the next batch of the request body from the client into `req`. Buffering (the
    /// Buffer phase, `--request-buffering on`): behind what `req` holds; once all of it is in,
    /// the request goes to the origin whole (Fetch), and a chunked body that grows past
    /// `--request-buffer` is 413. Streaming (Fetch, `off`), once what `req` held is sent: in its
    /// place, and the request can no longer be sent again. A chunked body is scanned as it
    /// comes: bytes after its end are the client's next request, a malformed one is 400.
    pub(super) fn read_request_body(&mut self, c: &mut Client) -> Step {
        if !c.f.readable {
            return Ok(false);
        }
        let buffering = c.phase == Phase::Buffer;
        let (buffer_size, bound) = (self.cfg.buffer_size, self.cfg.request_buffer);
        let x = c.x.as_mut().expect("an exchange");
        let b = x.req_body.as_mut().expect("a request body");
        if !buffering {
            x.req.clear();
            x.req_pos = 0;
        }
        let start = x.req.len();
        let max = b.left.map_or(buffer_size, |l| {
            buffer_size.min(usize::try_from(l).unwrap_or(usize::MAX))
        });
        x.req.reserve(max);
        match self.engine.read_max(c.fd, &mut x.req, max) {
            // The client ended inside its body: the request can never be complete (an origin
            // connection that carried part of it is closed with the client).
            Ok(0) => {
                c.peer_eof = true;
                Err(Close)
            }
            Ok(n) => {
                x.streamed |= !buffering;
                if n < max && !c.f.peer_closed && !E::COMPLETION {
                    c.f.readable = false;
                }
                match b.left.as_mut() {
                    Some(left) => {
                        *left -= n as u64;
                        b.done = *left == 0;
                    }
                    None => match b.scanner.feed(&x.req[start..]) {
                        Ok(Some(k)) => {
                            c.rbuf.extend_from_slice(&x.req[start + k..]);
                            x.req.truncate(start + k);
                            b.done = true;
                        }
                        Ok(None) if buffering && x.req.len() as u64 > bound => {
                            return self.refuse_body(c, Status::ContentTooLarge);
                        }
                        Ok(None) => {}
                        Err(_) => return self.refuse_body(c, Status::BadRequest),
                    },
                }
                if buffering && b.done {
                    c.phase = Phase::Fetch;
                }
                self.touch(c);
                Ok(true)
            }
            Err(e) if sys::would_block(&e) || pending(&e) => {
                c.f.readable = false;
                Ok(false)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(true),
            Err(_) => Err(Close),
        }
    }

    /// A request refused while its body was being read: `status`, then the close (what
    /// follows in the connection cannot be framed); an origin connection that carried part of
    /// it is closed, never pooled.
    fn refuse_body(&mut self, c: &mut Client, status: Status) -> Step {
        let x = c.x.take().expect("an exchange");
        let minor = x.client_minor;
        self.drop_exchange(*x, false);
        c.rbuf.clear();
        self.error_response(c, status, minor, false, false);
        c.phase = Phase::Idle;
        Ok(true)
    }
}

/// The client's address as `X-Forwarded-For` gives it. The completion engine's accept does not
/// give the address: asked once per connection, when its first request is forwarded.
fn set_forwarded_for(c: &mut Client) {
    if c.xff.is_none() {
        if c.peer.is_none() {
            c.peer = sys::getpeername(c.fd).ok();
        }
        c.xff = c.peer.map(|a| a.ip().to_string().into_boxed_str());
    }
}

/// Adds the stored response's validators to a request head for the origin (which ends in its
/// blank line: a request the cache looks up has no body), so that the origin may answer 304.
fn add_validators(fwd: &mut Vec<u8>, obj: &Object) {
    fwd.truncate(fwd.len() - 2);
    for (name, field) in [
        ("etag", "If-None-Match"),
        ("last-modified", "If-Modified-Since"),
    ] {
        if let Some(v) = field_in(&obj.head, name) {
            fwd.extend_from_slice(field.as_bytes());
            fwd.extend_from_slice(b": ");
            fwd.extend_from_slice(v);
            fwd.extend_from_slice(b"\r\n");
        }
    }
    fwd.extend_from_slice(b"\r\n");
}

/// The request has a body not all sent to the origin yet.
pub(super) fn unsent_body(x: &Exchange) -> bool {
    x.req_body
        .as_ref()
        .is_some_and(|b| !b.done || x.req_pos < x.req.len())
}

#[cfg(test)]
mod tests {
    use super::super::rig::{ok, Rig};
    use super::*;

    /// The proxy's own stats page: answered without the origin, never stored by anyone.
    #[test]
    fn the_stats_page_is_answered_by_the_worker() {
        let mut r = Rig::new(|c| c.stats = true, |_| ok("origin", ""));
        let a = r.get(STATS_PATH, "");
        assert_eq!(a.status, 200);
        assert_eq!(a.header("cache-control"), Some("no-store"));
        assert!(a.text().starts_with('{'), "{}", a.text());
        assert_eq!(r.origin.requests(), 0);
        // Without --stats the path is the origin's.
        let mut r = Rig::new(|_| {}, |_| ok("origin", ""));
        assert_eq!(r.get(STATS_PATH, "").text(), "origin");
    }

    /// Requests pipelined in one write are answered in order, the refused one with 400 and a
    /// close (bytes after an unparseable head cannot be framed).
    #[test]
    fn pipelined_requests_are_answered_in_order() {
        let mut r = Rig::new(|_| {}, |head| ok(head.split(' ').nth(1).unwrap_or(""), ""));
        let mut s = r.client();
        let two = "GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n";
        assert_eq!(r.ask(&mut s, two).text(), "/a");
        assert_eq!(r.read(&mut s, false).text(), "/b");
        let bad = r.ask(
            &mut s,
            "GET /c HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        );
        assert_eq!(bad.status, 400);
        assert!(r.closed(&mut s));
        assert_eq!(r.origin.requests(), 2);
    }

    /// The body bytes that came with the head go to the origin behind it; a malformed chunked
    /// body is refused before the origin sees anything.
    #[test]
    fn bodies_that_came_with_the_head() {
        let mut r = Rig::new(
            |_| {},
            |head| {
                ok(
                    crate::worker::rig::field(head, "content-length").unwrap_or("none"),
                    "",
                )
            },
        );
        let mut s = r.client();
        let a = r.ask(
            &mut s,
            "POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello",
        );
        assert_eq!(a.text(), "5");
        let mut s = r.client();
        let a = r.ask(
            &mut s,
            "POST /p HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
        );
        assert_eq!(a.status, 400);
        assert_eq!(r.origin.requests(), 1);
    }
}
