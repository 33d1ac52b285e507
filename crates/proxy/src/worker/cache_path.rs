//! The cache path: a hit answered from a stored object, and the head a stored object keeps.

use super::*;
use evlab_http::freshness::{self, RequestDirectives, Reuse};
use evlab_http::same_origin_key;

impl<E: Engine> Worker<E> {
    /// What the cache keeps of a length-delimited response of `total` body bytes whose head
    /// for the client is `head`, if it may and can be stored: the request asked to store
    /// (`Exchange::store_key`), the status is 200, nothing forbids a shared cache to reuse it
    /// for others and it is still fresh ([`evlab_http::CacheInfo::shared_fresh_for`]), its
    /// framing is beyond doubt (`whole`: no bytes after the body), and it fits the cache and
    /// what the worker may be receiving for it at once (`--keep-bytes`, reserved here).
    pub(super) fn store_for(
        &mut self,
        x: &mut Exchange,
        h: &ResponseHead,
        total: u64,
        whole: bool,
        head: &[u8],
    ) -> Option<Store> {
        x.store_key.as_ref()?;
        let fresh_for = h.cache.shared_storage(
            h.status,
            h.last_modified,
            x.req_facts,
            SystemTime::now(),
            &self.cfg.freshness_policy(),
        )?;
        let validators = h.last_modified.is_some() || field_in(head, "etag").is_some();
        let vary = freshness::vary_names(head)?;
        // A response stale on arrival is kept only to be validated.
        let cacheable = storable_status(h.status, &h.cache)
            && !h.suspect
            && whole
            && (fresh_for > Duration::ZERO || validators)
            && self.cache.may_store(total);
        if !cacheable {
            return None;
        }
        if self.keeping.saturating_add(total) > self.cfg.keep_bytes {
            // The objects being received for the cache hold enough (slow readers of large
            // objects, say): this one is only forwarded.
            self.stats.cache_not_kept.inc();
            return None;
        }
        self.keeping += total;
        Some(Store {
            key: x.store_key.take().expect("a key"),
            vary,
            status: h.status,
            // A hit says its own Age (see `answer_hit`), not the origin's.
            head: without_age(head),
            last_modified: h.last_modified,
            fresh_for,
            age: h.cache.age,
            shared: h.cache.explicitly_shared(),
            validators,
            never_stale: h.cache.never_stale(),
        })
    }

    /// Consults the cache for the request for `key`: answers it from a stored response that
    /// may answer it (fresh, or stale within what the request accepts), or gives back a stored
    /// response to validate with the origin (it has validators, and the request no
    /// preconditions of its own), or says there is none to use. A request with a Cookie is
    /// answered only by an object its origin said may be shared: one stored for an anonymous
    /// request on a guess may not be what this user's cookie would get (Varnish does not look
    /// such requests up at all).
    pub(super) fn consult(&mut self, c: &mut Client, key: &str, q: &Query<'_>) -> Consulted {
        let found = self
            .cache
            .get(key, self.now)
            .filter(|obj| obj.shared || !q.facts.cookie);
        let Some(obj) = found else {
            return Consulted::Miss;
        };
        let age = obj.age(self.now);
        match freshness::reuse(age, obj.lifetime(), obj.never_stale, q.directives) {
            Reuse::Use => {
                let status = self.answer_hit(c, obj, q.minor, !c.close_after, q.cond, q.head);
                self.log_answered(c, status, Some(CacheMark::Hit));
                Consulted::Answered
            }
            Reuse::Validate if obj.validators && !q.conditional => Consulted::Validate(obj),
            Reuse::Validate => Consulted::Miss,
        }
    }

    /// An unsafe request for `url` was answered without an error (its answer's head is `head`):
    /// what is stored for it goes, and so does what is stored for its same-origin `Location`
    /// and `Content-Location`.
    pub(super) fn invalidate(&mut self, url: &str, head: &[u8]) {
        self.cache.remove(url);
        for name in ["location", "content-location"] {
            if let Some(k) = field_in(head, name).and_then(|v| same_origin_key(url, v)) {
                self.cache.remove(&k);
            }
        }
    }

    /// The origin answered 304 to the validation of `old`: the stored response is freshened
    /// with the 304's fields (RFC 9111 §4.3.4, §3.2) and answers the client; the exchange ends
    /// with the 304, which has no body.
    pub(super) fn revalidated(
        &mut self,
        c: &mut Client,
        h: ResponseHead,
        head_start: usize,
        old: Rc<Object>,
    ) {
        self.stats.record_status(304);
        let x = c.x.as_mut().expect("an exchange");
        let fields = c.out.split_off(head_start);
        let head = merge_head(&old.head, &fields);
        let obj = self.freshened(&old, head, x.req_facts);
        if let (Some(k), Some((o, vary))) = (x.store_key.as_deref(), obj.as_ref()) {
            self.cache.insert_for(k, vary, &x.req, o.clone());
        }
        let obj = obj.map(|(o, _)| o);
        let obj = obj.unwrap_or(old);
        let x = c.x.as_mut().expect("an exchange");
        let keep = x.client_keep && !c.close_after;
        let (minor, head_request) = (x.client_minor, x.head_request);
        let cond = std::mem::take(&mut x.cond);
        let status = self.answer_hit(c, obj, minor, keep, &cond, head_request);
        if let Some(e) = c.log.back_mut().filter(|e| e.end.is_none()) {
            e.status = status;
            e.cache = CacheMark::Hit;
        }
        let x = c.x.as_mut().expect("an exchange");
        let early = unsent_body(x);
        let mut b = Xfer::new(Framing::None, false, h.keep_alive && !early);
        b.in_done = true;
        if x.resp.len() > h.head_len {
            // Bytes after a bodiless response: the connection cannot be trusted again.
            b.reusable = false;
            self.stats.origin_errors.inc();
        }
        x.resp.clear();
        x.body = Some(b);
        c.phase = Phase::Body;
    }

    /// The stored response `old` with its head now `head` (a 304's fields merged in): its
    /// freshness computed anew from that head; `None` when the merged head may no longer be
    /// stored for others.
    fn freshened(
        &self,
        old: &Object,
        head: Box<[u8]>,
        req: RequestFacts,
    ) -> Option<(Rc<Object>, Vec<String>)> {
        let mut full = head.to_vec();
        full.extend_from_slice(b"\r\n");
        let ResponseParse::Complete(mh) = parse_response_head(&full, true, false, &mut Vec::new())
        else {
            return None;
        };
        let fresh = mh.cache.shared_storage(
            old.status,
            mh.last_modified,
            req,
            SystemTime::now(),
            &self.cfg.freshness_policy(),
        )?;
        let vary = freshness::vary_names(&head)?;
        let obj = Rc::new(Object {
            status: old.status,
            head: without_age(&head),
            body: old.body.clone(),
            last_modified: mh.last_modified,
            expires: self.now.checked_add(fresh)?,
            stored: self.now,
            age: mh.cache.age,
            shared: mh.cache.explicitly_shared(),
            validators: mh.last_modified.is_some() || field_in(&head, "etag").is_some(),
            never_stale: mh.cache.never_stale(),
        });
        Some((obj, vary))
    }

    pub(super) fn answer_hit(
        &mut self,
        c: &mut Client,
        obj: Rc<Object>,
        minor: u8,
        keep: bool,
        cond: &Cond,
        head_only: bool,
    ) -> u16 {
        self.stats.hits.inc();
        if not_modified(&obj, cond) {
            self.stats.not_modified.inc();
            // What a 200 would have said that a 304 must repeat (RFC 9110 §15.4.5).
            let mut extra = Vec::with_capacity(128);
            for name in [
                "etag",
                "cache-control",
                "expires",
                "vary",
                "content-location",
            ] {
                if let Some(v) = field_in(&obj.head, name) {
                    extra.extend_from_slice(name.as_bytes());
                    extra.extend_from_slice(b": ");
                    extra.extend_from_slice(v);
                    extra.extend_from_slice(b"\r\n");
                }
            }
            extra.extend_from_slice(b"X-Cache: HIT\r\n");
            write_head(
                &mut c.out,
                Status::NotModified,
                minor,
                self.date.get(),
                keep,
                &extra,
            );
            self.stats.record_status(304);
            return 304;
        }
        c.out.extend_from_slice(&obj.head);
        // Age: what it had when stored, and how long it has been here (RFC 9111 §5.1).
        let here = self.now.saturating_duration_since(obj.stored).as_secs();
        let age = obj
            .age
            .saturating_add(here)
            .min(evlab_http::MAX_DELTA_SECONDS);
        let _ = std::io::Write::write_fmt(&mut c.out, format_args!("Age: {age}\r\n"));
        c.out.extend_from_slice(b"X-Cache: HIT\r\n");
        connection_field(&mut c.out, minor, keep);
        c.out.extend_from_slice(b"\r\n");
        self.stats.record_status(obj.status);
        if head_only || obj.body.is_empty() {
            return obj.status;
        }
        self.stats.bytes_hit.add(obj.body.len() as u64);
        if obj.body.len() <= COPY_HIT_MAX {
            c.out.extend_from_slice(&obj.body);
        } else {
            let status = obj.status;
            c.hit = Some((obj, 0));
            return status;
        }
        obj.status
    }
}

/// What a lookup needs of the request besides its key.
pub(super) struct Query<'q> {
    pub facts: RequestFacts,
    pub directives: &'q RequestDirectives,
    /// The request has preconditions of its own.
    pub conditional: bool,
    pub cond: &'q Cond,
    pub minor: u8,
    pub head: bool,
}

/// What the cache did with a request.
pub(super) enum Consulted {
    Answered,
    /// This stored response is to be validated with the origin.
    Validate(Rc<Object>),
    Miss,
}

/// Whether the client's preconditions say its copy is current (RFC 9110 §13.1.2, §13.1.3,
/// §13.2.2): `If-None-Match` by weak comparison with the stored `ETag`, else
/// `If-Modified-Since` on or after the stored `Last-Modified`; evaluated on a 200 only.
fn not_modified(obj: &Object, cond: &Cond) -> bool {
    if obj.status != 200 {
        return false;
    }
    match &cond.inm {
        Some(inm) => match field_in(&obj.head, "etag") {
            Some(etag) => freshness::none_match(inm, etag),
            None => inm.trim_ascii() == b"*",
        },
        None => cond
            .ims
            .is_some_and(|ims| obj.last_modified.is_some_and(|lm| lm <= ims)),
    }
}

/// The value of the first `name` field in a head (lines ending in CRLF, no blank line).
pub(super) fn field_in<'h>(head: &'h [u8], name: &str) -> Option<&'h [u8]> {
    freshness::head_fields(head)
        .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, v)| v)
}

/// A stored head with a 304's fields merged in (RFC 9111 §3.2): the stored status line and
/// the stored fields the 304 does not carry, then the 304's, but its `Content-Length` (which
/// describes no body of its own), its `Age` and its `X-Cache`.
pub(super) fn merge_head(stored: &[u8], fields_304: &[u8]) -> Box<[u8]> {
    let lines = |h: &[u8]| -> Vec<Vec<u8>> {
        h.split(|&b| b == b'\n')
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l).to_vec())
            .filter(|l| !l.is_empty())
            .collect()
    };
    let name = |l: &[u8]| -> Vec<u8> {
        let end = l.iter().position(|&b| b == b':').unwrap_or(l.len());
        l[..end].trim_ascii().to_ascii_lowercase()
    };
    let old = lines(stored);
    let new: Vec<Vec<u8>> = lines(fields_304)
        .into_iter()
        .skip(1)
        .filter(|l| !matches!(name(l).as_slice(), b"content-length" | b"age" | b"x-cache"))
        .collect();
    let replaced: Vec<Vec<u8>> = new.iter().map(|l| name(l)).collect();
    let mut out = Vec::with_capacity(stored.len() + fields_304.len());
    for (i, l) in old.iter().enumerate() {
        if i > 0 && replaced.contains(&name(l)) {
            continue;
        }
        out.extend_from_slice(l);
        out.extend_from_slice(b"\r\n");
    }
    for l in &new {
        out.extend_from_slice(l);
        out.extend_from_slice(b"\r\n");
    }
    out.into_boxed_slice()
}

/// Whether a response of `status` may be stored: a final status, but 206 (parts are passed
/// on, not stored or combined) and 304 (it updates a stored response, it is not one); a status
/// the cache does not know only without `must-understand` (RFC 9111 §3, §5.2.2.3). Whether
/// it has the freshness to be stored is `shared_fresh_for`'s question: any status with explicit
/// freshness, the heuristically cacheable ones (RFC 9110 §15.1) with a heuristic.
pub(super) fn storable_status(status: u16, cache: &evlab_http::CacheInfo) -> bool {
    (200..600).contains(&status)
        && status != 206
        && status != 304
        && (!cache.must_understand || evlab_http::freshness::understood(status))
}

/// A stored head without its `Age` field lines (the head's lines end in CRLF; no blank line).
pub(super) fn without_age(head: &[u8]) -> Box<[u8]> {
    let mut out = Vec::with_capacity(head.len());
    for line in head.split_inclusive(|&b| b == b'\n') {
        let is_age = line.len() > 4 && line[..4].eq_ignore_ascii_case(b"age:");
        if !is_age {
            out.extend_from_slice(line);
        }
    }
    out.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::super::rig::{ok, Rig};
    use super::*;

    #[test]
    fn a_stored_head_loses_its_age() {
        let head = b"HTTP/1.1 200 OK\r\nAge: 5\r\nContent-Length: 2\r\nage:7\r\nX-Age: 1\r\n";
        assert_eq!(
            &*without_age(head),
            &b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Age: 1\r\n"[..]
        );
    }

    /// A miss is stored and the next request is a hit with an `Age` of its own; a request
    /// with a Cookie is not answered by an object stored on a guess, but is by one its origin
    /// said may be shared.
    #[test]
    fn hits_and_who_they_may_answer() {
        let mut r = Rig::new(
            |_| {},
            |head| {
                if head.starts_with("GET /shared") {
                    ok("shared", "Cache-Control: s-maxage=60\r\n")
                } else {
                    ok("page", "Cache-Control: max-age=60\r\nAge: 3\r\n")
                }
            },
        );
        assert_eq!(r.get("/p", "").header("x-cache"), Some("MISS"));
        let hit = r.get("/p", "");
        assert_eq!(
            (hit.header("x-cache"), hit.text().as_str()),
            (Some("HIT"), "page")
        );
        let age: u64 = hit.header("age").unwrap().parse().unwrap();
        assert!((3..10).contains(&age), "{age}");
        assert_eq!(
            r.get("/p", "Cookie: s=1\r\n").header("x-cache"),
            Some("MISS")
        );
        r.get("/shared", "");
        assert_eq!(
            r.get("/shared", "Cookie: s=1\r\n").header("x-cache"),
            Some("HIT")
        );
        assert_eq!(r.origin.requests(), 3);
    }

    /// Any final status with explicit freshness is stored and answered with its own status;
    /// 206 and a status the cache does not know under `must-understand` are not.
    #[test]
    fn statuses_stored() {
        let mut r = Rig::new(
            |_| {},
            |head| {
                let path = head.split(' ').nth(1).unwrap_or("");
                let code: u16 = path[1..4].parse().unwrap();
                let extra = if path.ends_with("mu") {
                    "Cache-Control: max-age=60, no-store, must-understand\r\n"
                } else {
                    "Cache-Control: max-age=60\r\n"
                };
                let body = if code == 204 { "" } else { "b" };
                let mut v = format!("HTTP/1.1 {code} X\r\n{extra}").into_bytes();
                if code != 204 {
                    v.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
                }
                v.extend_from_slice(b"\r\n");
                v.extend_from_slice(body.as_bytes());
                v
            },
        );
        for (path, stored) in [
            ("/404", true),
            ("/204", true),
            ("/299", true),
            ("/503", true),
            ("/206", false),
            ("/200mu", true),
            ("/599mu", false),
        ] {
            let first = r.get(path, "");
            let again = r.get(path, "");
            assert_eq!(again.status, first.status, "{path}");
            assert_eq!(again.header("x-cache") == Some("HIT"), stored, "{path}");
        }
    }

    /// A stale response with an `ETag` is validated with `If-None-Match`; the origin's 304
    /// freshens it (its new fields merged in) and the client gets the stored body.
    #[test]
    fn stale_responses_are_validated() {
        let mut r = Rig::new(
            |_| {},
            |head| {
                if crate::worker::rig::field(head, "if-none-match") == Some("\"v1\"") {
                    b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nCache-Control: max-age=60\r\nX-New: 2\r\n\r\n".to_vec()
                } else {
                    ok(
                        "body",
                        "ETag: \"v1\"\r\nCache-Control: max-age=0\r\nX-New: 1\r\n",
                    )
                }
            },
        );
        assert_eq!(r.get("/p", "").text(), "body");
        let a = r.get("/p", "");
        assert_eq!(
            (
                a.status,
                a.text().as_str(),
                a.header("x-new"),
                a.header("x-cache")
            ),
            (200, "body", Some("2"), Some("HIT"))
        );
        assert_eq!(a.header("content-length"), Some("4"));
        assert_eq!(r.origin.requests(), 2);
        // Freshened: the next one is a plain hit.
        assert_eq!(r.get("/p", "").header("x-cache"), Some("HIT"));
        assert_eq!(r.origin.requests(), 2);
        // A client's own If-None-Match that matches: 304 from the cache, with the ETag.
        let c = r.get("/p", "If-None-Match: W/\"v1\"\r\n");
        assert_eq!((c.status, c.header("etag")), (304, Some("\"v1\"")));
        assert_eq!(r.origin.requests(), 2);
    }

    /// Request directives: no-cache validates, only-if-cached is 504 without an object,
    /// max-stale serves a stale one unless it must be revalidated.
    #[test]
    fn request_directives() {
        let mut r = Rig::new(
            |_| {},
            |head| {
                let lm = "Last-Modified: Sat, 01 Jan 2000 00:00:00 GMT\r\n";
                if head.contains("/must") {
                    ok(
                        "m",
                        &format!("{lm}Cache-Control: max-age=0, must-revalidate\r\n"),
                    )
                } else {
                    ok("s", "Cache-Control: max-age=0\r\n")
                }
            },
        );
        let a = r.get("/nothing", "Cache-Control: only-if-cached\r\n");
        assert_eq!(a.status, 504);
        assert_eq!(r.origin.requests(), 0);
        r.get("/must", "");
        let b = r.get("/must", "Cache-Control: max-stale\r\n");
        assert_eq!(
            b.header("x-cache"),
            Some("MISS"),
            "must-revalidate: validated"
        );
        assert_eq!(r.origin.requests(), 2);
        // A stale object without validators is not kept at all.
        r.get("/s", "");
        assert_eq!(
            r.get("/s", "Cache-Control: max-stale\r\n")
                .header("x-cache"),
            Some("MISS")
        );
    }

    /// A response with `Vary` is stored as a variant: each value of the named field gets its
    /// own, an absent field is a value of its own, and `Vary: *` is never stored.
    #[test]
    fn variants() {
        let mut r = Rig::new(
            |_| {},
            |head| {
                let lang = crate::worker::rig::field(head, "accept-language").unwrap_or("none");
                let vary = if head.contains("/star") {
                    "*"
                } else {
                    "Accept-Language"
                };
                ok(
                    lang,
                    &format!("Cache-Control: max-age=60\r\nVary: {vary}\r\n"),
                )
            },
        );
        let en = "Accept-Language: en\r\n";
        let de = "Accept-Language: de\r\n";
        assert_eq!(r.get("/p", en).text(), "en");
        assert_eq!(r.get("/p", de).text(), "de");
        assert_eq!(r.get("/p", "").text(), "none");
        for (lang, want) in [(en, "en"), (de, "de"), ("", "none")] {
            let a = r.get("/p", lang);
            assert_eq!(
                (a.text().as_str(), a.header("x-cache")),
                (want, Some("HIT"))
            );
        }
        assert_eq!(r.origin.requests(), 3);
        assert_eq!(r.w.cache.len(), 3);
        // An unsafe method drops every variant.
        let mut s = r.client();
        r.ask(
            &mut s,
            "POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n",
        );
        assert_eq!(r.get("/p", en).header("x-cache"), Some("MISS"));
        assert_eq!(r.get("/p", de).header("x-cache"), Some("MISS"));
        r.get("/star", en);
        assert_eq!(r.get("/star", en).header("x-cache"), Some("MISS"));
    }

    /// A successful unsafe request drops its target and its answer's same-origin `Location`
    /// and `Content-Location`; a failed one drops nothing; another origin's is left alone.
    #[test]
    fn unsafe_methods_invalidate() {
        let mut r = Rig::new(
            |_| {},
            |head| {
                if head.starts_with("POST /ok") {
                    ok("done", "Location: /a\r\nContent-Location: http://t/b\r\n")
                } else if head.starts_with("POST /other") {
                    ok("done", "Location: http://elsewhere/c\r\n")
                } else if head.starts_with("POST") {
                    b"HTTP/1.1 500 No\r\nContent-Length: 0\r\nLocation: /a\r\n\r\n".to_vec()
                } else {
                    ok("page", "Cache-Control: max-age=60\r\n")
                }
            },
        );
        let post = |r: &mut Rig, path: &str| {
            let mut s = r.client();
            r.ask(
                &mut s,
                &format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"),
            )
        };
        let cached = |r: &mut Rig, path: &str| r.get(path, "").header("x-cache") == Some("HIT");
        for p in ["/a", "/b", "/c", "/fail"] {
            r.get(p, "");
        }
        post(&mut r, "/fail");
        assert!(
            cached(&mut r, "/fail") && cached(&mut r, "/a"),
            "a failed POST drops nothing"
        );
        post(&mut r, "/other");
        assert!(cached(&mut r, "/c"), "another origin's Location");
        post(&mut r, "/ok");
        assert!(!cached(&mut r, "/a") && !cached(&mut r, "/b"));
    }

    #[test]
    fn heads_merge_and_fields_are_found() {
        let stored = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nETag: \"a\"\r\nX-Old: 1\r\n";
        let fields = b"HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\nContent-Length: 0\r\nX-New: 2\r\nAge: 3\r\n";
        let m = merge_head(stored, fields);
        assert_eq!(
            std::str::from_utf8(&m).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Old: 1\r\nETag: \"a\"\r\nX-New: 2\r\n"
        );
        assert_eq!(field_in(&m, "x-new"), Some(&b"2"[..]));
        assert_eq!(field_in(&m, "ETAG"), Some(&b"\"a\""[..]));
        assert_eq!(field_in(&m, "missing"), None);
    }

    /// `--keep-bytes`: a miss that would pass what the worker may be receiving for the cache
    /// is forwarded without being kept.
    #[test]
    fn store_for_respects_keep_bytes() {
        let mut r = Rig::new(
            |c| c.keep_bytes = 3,
            |_| ok("four", "Cache-Control: max-age=60\r\n"),
        );
        assert_eq!(r.get("/p", "").text(), "four");
        assert_eq!(r.get("/p", "").header("x-cache"), Some("MISS"));
        assert_eq!(r.w.stats.cache_not_kept.get(), 2);
        assert_eq!(r.w.keeping, 0);
    }
}
