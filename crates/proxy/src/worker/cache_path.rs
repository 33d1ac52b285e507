//! The cache path: a hit answered from a stored object, and the head a stored object keeps.

use super::*;

impl<P: Io> Worker<P> {
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
        let fresh_for = h.cache.shared_fresh_for(
            h.status,
            h.last_modified,
            x.req_facts,
            SystemTime::now(),
            &self.cfg.freshness_policy(),
        );
        let cacheable = storable_status(h.status, &h.cache)
            && h.cache.storable()
            && !h.suspect
            && whole
            && fresh_for > Duration::ZERO
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
            status: h.status,
            // A hit says its own Age (see `answer_hit`), not the origin's.
            head: without_age(head),
            last_modified: h.last_modified,
            fresh_for,
            age: h.cache.age,
            shared: h.cache.explicitly_shared(),
        })
    }

    /// Answers the request for `key` from the cache if a fresh object may answer it; false: a
    /// miss.
    /// A request with a Cookie is answered only by an object its origin said may be shared:
    /// one stored for an anonymous request on a guess may not be what this user's cookie would
    /// get (Varnish does not look such requests up at all).
    pub(super) fn try_hit(
        &mut self,
        c: &mut Client,
        key: &str,
        facts: RequestFacts,
        head_request: bool,
        (minor, ims): (u8, Option<SystemTime>),
    ) -> bool {
        let hit = self
            .cache
            .get(key, self.now)
            .filter(|obj| obj.shared || !facts.cookie);
        let Some(obj) = hit else {
            return false;
        };
        let status = self.answer_hit(c, obj, minor, !c.close_after, ims, head_request);
        self.log_answered(c, status, Some(CacheMark::Hit));
        true
    }

    pub(super) fn answer_hit(
        &mut self,
        c: &mut Client,
        obj: Rc<Object>,
        minor: u8,
        keep: bool,
        ims: Option<SystemTime>,
        head_only: bool,
    ) -> u16 {
        self.stats.hits.inc();
        // Conditions are evaluated on a 200 only (RFC 9110 §13.2.1).
        let not_modified = obj.status == 200
            && ims.is_some_and(|ims| obj.last_modified.is_some_and(|lm| lm <= ims));
        if not_modified {
            self.stats.not_modified.inc();
            write_head(
                &mut c.out,
                Status::NotModified,
                minor,
                self.date.get(),
                keep,
                b"X-Cache: HIT\r\n",
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
