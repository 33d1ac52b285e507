//! Properties of what the proxy reads from an origin: `evlab_http::parse_response_head` (the
//! response head, its framing, its cache fields, the head rewritten for the client) and
//! `CacheInfo::shared_fresh_for` (the freshness arithmetic that once panicked on a large
//! `max-age`, and the shared cache's policy).
//!
//! The first byte of the input chooses the request the response answers (HEAD or not, with
//! Authorization or a Cookie or neither) and the client's version (HTTP/1.0 or 1.1), and gives
//! a `now`, a lifetime for the policy's override and heuristic cap, and whether the override is
//! set; the rest is the origin's bytes.
//!
//! - never panics, whatever the bytes, the flags and the clock;
//! - `Complete`: `0 < head_len <= len` and `<= MAX_RESPONSE_HEAD`; the head ends with LF; the
//!   status is 100..=999 and not 1xx but 101 (which is refused); no body (`Framing::None`) for
//!   HEAD, 204 and 304; `Length(n)` only with `content_length == Some(n)`; `keep_alive` never
//!   with a body delimited by close; a suspect head is never kept alive; the head re-parses
//!   alone to the same answer, and every shorter prefix of it is `Partial`;
//! - the rewritten head starts `HTTP/1.1 <status> `, has no blank line, no hop-by-hop field
//!   (`Connection`, `Keep-Alive`, `Proxy-Connection`, `TE`, `Upgrade`,
//!   `Proxy-Authenticate`), and for an HTTP/1.0 client no `Transfer-Encoding`;
//! - `Interim(n)`: `0 < n <= len`, and the bytes after it parse on their own;
//! - freshness: `shared_fresh_for` is at most `MAX_DELTA_SECONDS` seconds for any `now` from
//!   the epoch to far in the future, and adding it to an `Instant` or a `SystemTime` cannot
//!   overflow; it is zero for a response a shared cache must not store (`no-store`, `private`,
//!   `no-cache`, `Vary`, a lifetime of 0), for an answer to Authorization
//!   without `public`, `s-maxage` or `must-revalidate`, and for a Cookie's answer or a
//!   `Set-Cookie` response without explicit shared freshness.
#![allow(dead_code)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use evlab_http::{
    parse_response_head, Framing, Policy, RequestFacts, ResponseParse, MAX_DELTA_SECONDS,
};

/// Tokens for seeded mutations (the replay tests) and `fuzz/dict/origin.dict`.
pub const TOKENS: &[&[u8]] = &[
    b"HTTP/1.1 200 OK\r\n",
    b"HTTP/1.0 200 OK\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"HTTP/1.1 101 Switching Protocols\r\n",
    b"HTTP/1.1 204 No Content\r\n",
    b"HTTP/1.1 304 Not Modified\r\n",
    b"\r\n",
    b"\r\n\r\n",
    b"Content-Length: ",
    b"Content-Length: 5\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: gzip, chunked\r\n",
    b"Connection: close\r\n",
    b"Connection: keep-alive\r\n",
    b"Connection: Content-Length, Transfer-Encoding\r\n",
    b"Keep-Alive: timeout=5\r\n",
    b"Cache-Control: max-age=",
    b"Cache-Control: s-maxage=9223372036854775807\r\n",
    b"Cache-Control: no-store, private, no-cache\r\n",
    b"Expires: Thu, 01 Jan 1970 00:00:00 GMT\r\n",
    b"Expires: Fri, 31 Dec 9999 23:59:59 GMT\r\n",
    b"Date: Wed, 25 Nov 2026 07:00:00 GMT\r\n",
    b"Age: 18446744073709551616\r\n",
    b"Vary: *\r\n",
    b"Set-Cookie: a=b\r\n",
    b"Last-Modified: Tue, 24 Nov 2026 07:00:00 GMT\r\n",
    b"99999999999999999999",
    b"-1",
    b": ",
    b"\n",
    b"\r",
    b" ",
];

const HOP_BY_HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "upgrade",
    "proxy-authenticate",
];

/// What the first byte chooses: the request, the client's version, the clock and the policy.
struct Context {
    head: bool,
    http10: bool,
    req: RequestFacts,
    now: SystemTime,
    policy: Policy,
}

fn context(b: u8) -> Context {
    // From the epoch to a few thousand years on, and a lifetime up to 2^40 s.
    let now = UNIX_EPOCH + Duration::from_secs(u64::from(b >> 2).pow(7).min(1 << 40));
    let lifetime = Duration::from_secs(1u64 << (b % 41));
    Context {
        head: b & 1 != 0,
        http10: b & 2 != 0,
        req: RequestFacts {
            authorization: b & 4 != 0,
            cookie: b & 8 != 0,
        },
        now,
        policy: Policy {
            override_ttl: (b & 16 != 0).then_some(lifetime),
            heuristic_max: lifetime,
        },
    }
}

fn field_names(head: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(head);
    text.split("\r\n")
        .skip(1)
        .filter_map(|l| {
            l.split_once(':')
                .map(|(n, _)| n.trim().to_ascii_lowercase())
        })
        .collect()
}

pub fn check(data: &[u8], _exhaustive: bool) {
    let Some((&first, bytes)) = data.split_first() else {
        return;
    };
    let cx = context(first);
    let (head_req, http10, now) = (cx.head, cx.http10, cx.now);
    let mut rewritten = Vec::new();
    let r = parse_response_head(bytes, head_req, http10, &mut rewritten);
    match &r {
        ResponseParse::Partial | ResponseParse::Error(_) => {}
        ResponseParse::Interim(n) => {
            assert!(
                *n > 0 && *n <= bytes.len(),
                "interim {n} of {}",
                bytes.len()
            );
            let mut again = Vec::new();
            let _ = parse_response_head(&bytes[*n..], head_req, http10, &mut again);
        }
        ResponseParse::Complete(h) => {
            assert!(h.head_len > 0 && h.head_len <= bytes.len(), "{h:?}");
            assert!(
                h.head_len <= evlab_http::framing::MAX_RESPONSE_HEAD,
                "{h:?}"
            );
            assert_eq!(bytes[h.head_len - 1], b'\n', "{h:?}");
            assert!((100..=999).contains(&h.status), "{h:?}");
            assert!(
                !(100..200).contains(&h.status),
                "a 1xx head is complete: {h:?}"
            );
            if head_req || h.status == 204 || h.status == 304 {
                assert_eq!(h.framing, Framing::None, "{h:?}");
            }
            if let Framing::Length(n) = h.framing {
                assert_eq!(h.content_length, Some(n), "{h:?}");
            }
            if h.framing == Framing::UntilClose || h.suspect {
                assert!(!h.keep_alive, "{h:?}");
            }
            // Alone, and in any shorter prefix.
            let mut again = Vec::new();
            let alone = parse_response_head(&bytes[..h.head_len], head_req, http10, &mut again);
            assert_eq!(alone, r, "the head alone parses differently");
            assert_eq!(again, rewritten, "the head alone is rewritten differently");
            for cut in [h.head_len - 1, h.head_len / 2, 1] {
                let mut scratch = Vec::new();
                let p = parse_response_head(&bytes[..cut], head_req, http10, &mut scratch);
                assert_eq!(p, ResponseParse::Partial, "prefix of {cut} bytes: {p:?}");
            }
            // The head for the client.
            let status = format!("HTTP/1.1 {} ", h.status);
            assert!(rewritten.starts_with(status.as_bytes()), "{rewritten:?}");
            assert!(
                !rewritten.windows(4).any(|w| w == b"\r\n\r\n"),
                "a blank line inside the rewritten head"
            );
            for name in field_names(&rewritten) {
                assert!(!HOP_BY_HOP.contains(&name.as_str()), "{name} forwarded");
                if http10 {
                    assert_ne!(name, "transfer-encoding", "TE sent to an HTTP/1.0 client");
                }
            }
            // Freshness.
            let c = h.cache;
            let fresh = c.shared_fresh_for(h.status, h.last_modified, cx.req, now, &cx.policy);
            let cap = Duration::from_secs(MAX_DELTA_SECONDS);
            assert!(fresh <= cap, "{fresh:?} from {c:?}");
            assert!(Instant::now().checked_add(fresh).is_some(), "{fresh:?}");
            assert!(now.checked_add(fresh).is_some(), "{fresh:?}");
            let not_stored = c.no_store
                || c.private
                || c.no_cache
                || c.vary
                || c.s_maxage.or(c.max_age) == Some(0)
                || (cx.req.authorization
                    && !(c.public || c.s_maxage.is_some() || c.must_revalidate))
                || ((cx.req.cookie || c.set_cookie) && !c.explicitly_shared());
            if not_stored {
                assert_eq!(fresh, Duration::ZERO, "{c:?} {:?}", cx.req);
            }
        }
    }
}
