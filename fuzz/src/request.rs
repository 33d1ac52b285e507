//! Properties of the request-head parser, `evlab_http::parse_request`.
//!
//! The input is parsed as a server would: under each of [`LIMITS`], and again from just past
//! every head a server would consume (pipelining), up to [`MAX_PIPELINE`] heads. Each parse:
//!
//! - never panics; `Partial` only while the buffer and the request line so far are within the
//!   limits;
//! - `Complete`: `0 < head_len <= len`, `head_len <= max_head`, the head ends with LF, its
//!   request line is within `max_request_line`, the method is the one the bytes start with,
//!   minor version 0 or 1, and the path is normal (`/`, no dot or empty segments, no NUL);
//! - `Error`: an error status and minor version 0 or 1; a closing error consumes 0; only 403,
//!   405 and 501 may keep the connection, consuming a whole head (`0 < consumed <= len`,
//!   `<= max_head`, ending with LF);
//! - re-parsing the consumed head alone gives the same answer (nothing past it mattered);
//! - incremental consistency: a prefix of the input (bytes that arrived first) parses as
//!   `Partial` or as the whole's answer; the one exception is a request line over
//!   `max_request_line`, refused with 414 as soon as that many bytes are in, while the whole may
//!   be refused for a syntax error seen later (both close);
//! - a head complete under tight limits is the same complete head under the default ones;
//! - its preconditions and Range, judged against files of several lengths and validators
//!   (`evlab_http::conditional::evaluate`), never panic; a 206's part lies inside the file and
//!   is what the Range field's one range resolves to; a file without a Range field or of
//!   length 0 never gets a 206 or a 416.
//!
//! The proxy's judgement, `parse_proxy_request`, of the same bytes: never panics; waits
//! exactly when the server's does; a head the server serves is the same head to the proxy,
//! without a body; a body is `Content-Length` > 0 or chunked in HTTP/1.1; CONNECT has a target
//! and no body; a closing error consumes nothing and only 403 keeps the connection. The input
//! is also a request body for the strict chunked scanner: the same answer all at once and in
//! pieces, and what it accepts the lenient scanner accepts with the same end.
#![allow(dead_code)]

use std::time::{Duration, UNIX_EPOCH};

use evlab_http::conditional::{self, Outcome, Ranges, Validators};
use evlab_http::{
    parse_proxy_request, parse_request, ChunkedScanner, Limits, Method, Parse, ProxyParse, Request,
    RequestBody, Status,
};

/// Tokens for seeded mutations (the replay tests) and `fuzz/dict/request.dict`.
pub const TOKENS: &[&[u8]] = &[
    b"GET ",
    b"HEAD ",
    b"POST ",
    b"OPTIONS ",
    b" HTTP/1.1\r\n",
    b" HTTP/1.0\r\n",
    b" HTTP/2.0\r\n",
    b"\r\n",
    b"\r\n\r\n",
    b"\n",
    b"Host: x\r\n",
    b"Host: ",
    b"Connection: close\r\n",
    b"Connection: keep-alive\r\n",
    b"Content-Length: ",
    b"Content-Length: 0\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: ",
    b"If-Modified-Since: ",
    b"Sun, 06 Nov 1994 08:49:37 GMT",
    b"Range: bytes=",
    b"Range: bytes=0-9\r\n",
    b"-500",
    b"9500-",
    b"99999999999999999999",
    b"If-Range: ",
    b"If-Match: ",
    b"If-None-Match: ",
    b"If-Unmodified-Since: ",
    b"\"5-a\"",
    b"W/",
    b"*",
    b"http://",
    b"https://",
    b"%2e%2e",
    b"%00",
    b"/../",
    b"//",
    b"?",
    b"#",
    b": ",
    b",",
    b" ",
    b"\t",
];

/// The server's defaults, and limits small enough for short fuzz inputs to cross.
pub const LIMITS: [Limits; 3] = [
    Limits {
        max_head: 8192,
        max_request_line: 8192,
    },
    Limits {
        max_head: 96,
        max_request_line: 40,
    },
    Limits {
        max_head: 40,
        max_request_line: 96,
    },
];

/// Heads parsed one after another from one input.
pub const MAX_PIPELINE: usize = 8;

/// `exhaustive`: check every prefix for incremental consistency, not just a few.
pub fn check(data: &[u8], exhaustive: bool) {
    check_chunked(data);
    for limits in &LIMITS {
        let mut rest = data;
        for _ in 0..MAX_PIPELINE {
            match check_one(rest, limits, exhaustive) {
                Some(n) if n < rest.len() => rest = &rest[n..],
                _ => break,
            }
        }
    }
}

/// Where the request line starts (past empty lines) and its length without CR LF (so far, if
/// it has no LF yet), as the module documentation of `request.rs` defines them.
fn request_line_len(buf: &[u8]) -> usize {
    let mut start = 0;
    loop {
        if buf[start..].starts_with(b"\r\n") {
            start += 2;
        } else if buf[start..].starts_with(b"\n") {
            start += 1;
        } else {
            break;
        }
    }
    let rest = &buf[start..];
    match rest.iter().position(|&b| b == b'\n') {
        Some(i) => rest[..i].strip_suffix(b"\r").map_or(i, <[u8]>::len),
        None => rest.strip_suffix(b"\r").map_or(rest.len(), <[u8]>::len),
    }
}

fn skip_empty_lines(buf: &[u8]) -> &[u8] {
    let mut b = buf;
    while let Some(rest) = b.strip_prefix(b"\r\n").or_else(|| b.strip_prefix(b"\n")) {
        b = rest;
    }
    b
}

/// Checks one parse of `buf`; returns the bytes a server would consume before parsing the
/// next head (None when it would wait or close).
fn check_one(buf: &[u8], limits: &Limits, exhaustive: bool) -> Option<usize> {
    let got = parse_request(buf, limits);
    check_proxy(buf, limits, &got);
    let next = match &got {
        Parse::Partial => {
            assert!(buf.len() <= limits.max_head, "Partial past max_head");
            assert!(
                request_line_len(buf) <= limits.max_request_line,
                "Partial with a request line past max_request_line"
            );
            None
        }
        Parse::Complete(req) => {
            let n = req.head_len;
            assert!(n > 0 && n <= buf.len(), "head_len {n} of {}", buf.len());
            assert!(n <= limits.max_head, "head_len {n} past max_head");
            assert_eq!(buf[n - 1], b'\n', "head does not end with LF");
            assert!(
                request_line_len(&buf[..n]) <= limits.max_request_line,
                "Complete with a request line past max_request_line"
            );
            let method: &[u8] = match req.method {
                Method::Get => b"GET ",
                Method::Head => b"HEAD ",
            };
            assert!(skip_empty_lines(buf).starts_with(method), "method {req:?}");
            assert!(req.minor_version <= 1);
            assert_normal_path(&req.path);
            check_conditions(req);
            if *limits != Limits::default() {
                assert_eq!(
                    parse_request(buf, &Limits::default()),
                    got,
                    "complete under tight limits, not under the defaults"
                );
            }
            Some(n)
        }
        Parse::Error(e) => {
            assert!(e.minor_version <= 1);
            assert!(
                !matches!(e.status, Status::Ok | Status::NotModified),
                "error with status {:?}",
                e.status
            );
            if e.keep_alive {
                assert!(
                    matches!(
                        e.status,
                        Status::Forbidden | Status::MethodNotAllowed | Status::NotImplemented
                    ),
                    "{:?} keeps the connection",
                    e.status
                );
                let n = e.consumed;
                assert!(n > 0 && n <= buf.len(), "consumed {n} of {}", buf.len());
                assert!(n <= limits.max_head, "consumed {n} past max_head");
                assert_eq!(buf[n - 1], b'\n', "consumed head does not end with LF");
                Some(n)
            } else {
                assert_eq!(e.consumed, 0, "closing error consumes bytes");
                None
            }
        }
    };
    if let Some(n) = next {
        assert_eq!(
            parse_request(&buf[..n], limits),
            got,
            "the head alone parses differently"
        );
    }
    let mut check_prefix = |k: usize| {
        let part = parse_request(&buf[..k], limits);
        let line_too_long = matches!(
            &part,
            Parse::Error(e) if e.status == Status::UriTooLong && !e.keep_alive
        );
        let whole_closes = matches!(&got, Parse::Error(e) if !e.keep_alive);
        assert!(
            part == Parse::Partial || part == got || (line_too_long && whole_closes),
            "prefix of {k} bytes: {part:?}, whole: {got:?}"
        );
    };
    if exhaustive {
        (0..buf.len()).for_each(&mut check_prefix);
    } else if !buf.is_empty() {
        let len = buf.len();
        let mut points = [len - 1, len / 2, len / 3, 2 * len / 3, 0];
        if let Some(n) = next {
            points[4] = n - 1;
        }
        points.into_iter().for_each(&mut check_prefix);
    }
    next
}

/// The answers `req`'s preconditions and Range select for files of a few lengths.
fn check_conditions(req: &Request<'_>) {
    let range = req.cond.range.map(conditional::parse_range);
    for len in [0u64, 1, 10, 10_000, u64::MAX] {
        for etag in [&b"\"5-a\""[..], b"\"0-0\""] {
            let v = Validators {
                etag,
                last_modified: UNIX_EPOCH + Duration::from_secs(784_111_777),
                len,
            };
            let got = conditional::evaluate(&req.cond, req.if_modified_since, &v);
            match got {
                Outcome::Part { first, last } => {
                    assert!(first <= last && last < len, "{got:?} of {len}");
                    let Some(Ranges::One(spec)) = range else {
                        panic!("{got:?} without one range: {range:?}");
                    };
                    assert_eq!(spec.resolve(len), Some((first, last)));
                }
                Outcome::Unsatisfiable => {
                    assert!(len > 0 && matches!(range, Some(Ranges::One(_))), "{got:?}");
                }
                _ => {}
            }
        }
    }
}

/// '/', then segments that are neither empty (but the last) nor dots; no NUL.
fn assert_normal_path(p: &str) {
    assert!(p.starts_with('/'), "{p:?} does not start with '/'");
    assert!(!p.contains('\0'), "{p:?} contains NUL");
    let segs: Vec<&str> = p[1..].split('/').collect();
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        assert!(
            *seg != "." && *seg != ".." && (last || !seg.is_empty()),
            "{p:?} has segment {seg:?}"
        );
    }
}

fn check_proxy(buf: &[u8], limits: &Limits, server: &Parse<'_>) {
    let proxy = parse_proxy_request(buf, limits);
    assert_eq!(
        matches!(server, Parse::Partial),
        matches!(proxy, ProxyParse::Partial),
        "server {server:?}, proxy {proxy:?}"
    );
    match &proxy {
        ProxyParse::Partial => {}
        ProxyParse::Complete(r) => {
            assert!(r.head_len > 0 && r.head_len <= buf.len().min(limits.max_head));
            assert_eq!(buf[r.head_len - 1], b'\n');
            assert!(r.minor_version <= 1);
            assert!(skip_empty_lines(buf).starts_with(r.method.as_bytes()));
            match r.body {
                RequestBody::Length(n) => assert!(n > 0),
                RequestBody::Chunked => assert_eq!(r.minor_version, 1),
                RequestBody::None => assert!(!r.expect_continue),
            }
            match r.connect {
                Some(t) => {
                    assert!(r.method == "CONNECT" && r.body == RequestBody::None && t.contains(':'))
                }
                None => assert_normal_path(&r.path),
            }
            if let Parse::Complete(s) = server {
                assert_eq!(
                    (
                        s.head_len,
                        s.minor_version,
                        s.keep_alive,
                        &s.path,
                        s.if_modified_since
                    ),
                    (
                        r.head_len,
                        r.minor_version,
                        r.keep_alive,
                        &r.path,
                        r.if_modified_since
                    ),
                );
                assert_eq!(r.body, RequestBody::None);
            }
        }
        ProxyParse::Error(e) => {
            assert!(e.minor_version <= 1);
            if e.keep_alive {
                assert_eq!(e.status, Status::Forbidden, "{e:?} keeps the connection");
                assert!(e.consumed > 0 && e.consumed <= buf.len());
            } else {
                assert_eq!(e.consumed, 0);
            }
            assert!(
                !matches!(server, Parse::Complete(_)),
                "the server serves what the proxy refuses: {e:?}"
            );
        }
    }
}

fn check_chunked(data: &[u8]) {
    let whole = ChunkedScanner::strict().feed(data);
    let mut s = ChunkedScanner::strict();
    let mut off = 0;
    let mut got = Ok(None);
    for part in data.chunks(7) {
        got = s.feed(part).map(|r| r.map(|k| off + k));
        off += part.len();
        if !matches!(got, Ok(None)) {
            break;
        }
    }
    assert_eq!(whole, got, "strict chunked: all at once vs in pieces");
    if let Ok(Some(end)) = whole {
        assert_eq!(
            ChunkedScanner::new().feed(data),
            Ok(Some(end)),
            "strict accepts what lenient reads otherwise"
        );
    }
}
