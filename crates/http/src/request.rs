//! Request-head parsing, by these rules:
//!
//! `parse_request(buf, limits)` looks at the start of `buf` (bytes received so far on a
//! connection, possibly holding several pipelined requests) and returns:
//! - `Parse::Partial` if no complete head yet and no error is certain yet;
//! - `Parse::Complete(req)` with `req.head_len` = bytes of this head (request line + headers +
//!   final CRLF CRLF), so the caller consumes exactly that and can parse the next one;
//! - `Parse::Error(e)` with the exact status, whether the connection may stay open, and how many
//!   bytes to consume (meaningful only when keep_alive is true).
//!
//! Rules (each must have a row in the table-driven tests):
//! - Leading empty lines (CRLF) before a request line are ignored (RFC 9112 §2.2).
//! - More than `limits.max_head` bytes without a complete head: 414 if the request line itself is
//!   not complete within `limits.max_request_line` bytes, else 431. Close.
//! - Request line too long even though the head is complete (line > max_request_line): 414, close.
//! - Syntax errors (bad token chars, missing version, bare LF handling as httparse does, header
//!   without colon, whitespace before colon, obs-fold, control chars): 400, close.
//!   More than 64 header fields: 431, close (decision: Request Header Fields Too Large names the
//!   problem exactly, and RFC 6585 §5 allows it for "too many" as well as "too large").
//! - Version: HTTP/1.0 and HTTP/1.1 accepted. Any other well-formed `HTTP/<d>.<d>` (HTTP/2.0,
//!   HTTP/1.2, HTTP/3.0, HTTP/0.9 written as such): 505, close. Anything else in the version spot: 400.
//! - HTTP/1.1 without Host, or with more than one Host: 400, close (RFC 9112 §3.2).
//! - Method: GET and HEAD served. Known methods POST PUT DELETE OPTIONS PATCH TRACE CONNECT:
//!   405 (the response will carry `Allow: GET, HEAD`). Any other syntactically valid token: 501.
//!   Both keep the connection open if the request has no body (no Content-Length > 0, no
//!   Transfer-Encoding) and the request is otherwise keep-alive; else close.
//! - Transfer-Encoding present: if chunked is not the final coding → 400 close; else (we take no
//!   request bodies) → 501 close. Transfer-Encoding together with Content-Length → 400 close.
//! - Content-Length: must be 1*DIGIT, no sign, fits u64; several values (in one field separated by
//!   commas or in several fields) that are all equal count as one; different → 400 close; invalid
//!   → 400 close. Content-Length 0 is fine. Content-Length > 0 on GET/HEAD → 413 close (no request
//!   bodies accepted); on 405/501 methods → that status, close.
//! - Target: origin-form (`/path?query`) or absolute-form (`http://host[:port]/path`, the path
//!   taken from it; scheme http or https, case-insensitive). `*` or anything else → 400 close.
//!   Query and fragment are stripped. The path is percent-decoded and normalised with
//!   `path::normalize`: encoded NUL or invalid escape → 400 close; a `..` that would climb
//!   above the root → 403 (keep-alive allowed: the head is well-formed).
//! - Keep-alive: HTTP/1.1 unless a `Connection` header lists `close` (token list, any case);
//!   HTTP/1.0 only if `Connection` lists `keep-alive`.
//! - `If-Modified-Since`: parsed with httpdate (all three RFC 9110 formats); invalid → ignored.
//! - `If-Match`, `If-None-Match`, `If-Unmodified-Since`, `If-Range` and `Range` are kept for
//!   [`conditional::evaluate`](crate::conditional::evaluate) (their values, the date parsed),
//!   never judged here: an invalid one is ignored when the answer is chosen, not refused.
//! - The raw request target is kept (`Request::target`): a directory asked for without its
//!   slash is redirected to the same target with it, query included.
//! - Every error with `keep_alive == false` has `consumed` = 0 (the caller closes anyway).
//!
//! Performance: no heap allocation for a plain request (`Cow::Borrowed` path when nothing to
//! decode or normalise). This runs once per request on the server's hot path.

//!
//! Decisions where the rules above are silent (each has rows in the tests):
//! - Order of judgement, first match wins: syntax (400/431/505) → request-line length (414) →
//!   Host (400) → framing: Transfer-Encoding with Content-Length, chunked not final, bad
//!   Content-Length (400) → method (405/501) → body on GET/HEAD: chunked 501, length 413 →
//!   target (400/403). So `OPTIONS *` and `CONNECT host:443` get 405, not 400, and a POST with a
//!   chunked body gets 405 (closing), not 501: the method is the more useful answer.
//! - The size limits hold however the bytes arrived: only the first `max_head` bytes are
//!   parsed, so a complete head longer than `max_head` is refused just like an incomplete one.
//!   A request line longer than `max_request_line` is refused with 414 as soon as that many
//!   bytes of it are in, without waiting for `max_head`. The line's length excludes its CRLF
//!   and any leading empty lines; those count towards `max_head`.
//! - A version that is wrong but could still become a well-formed `HTTP/d.d` (`HTTP/2` so far)
//!   is `Partial`: 505 and 400 cannot be told apart yet.
//! - More than one Host is 400 for HTTP/1.0 too (RFC 9112 §3.2 says "any request"); a Host
//!   value with characters outside the URI authority grammar (space, `@`, `/`, ...) is 400.
//!   An empty Host is valid. The absolute-form's authority follows the same rule, and must not
//!   be empty; userinfo (`user@`) is refused (RFC 9110 §4.2.4).
//! - A Content-Length list element that is empty (`5,`) is invalid. Method names are case
//!   sensitive: `get` is an unknown method, 501.
//! - `If-Modified-Since` given more than once is ignored (a full response is always correct).
//! - `head_only` is true whenever the method is HEAD, errors included; `minor_version` is the
//!   request's when its version was read, else 1.

use std::borrow::Cow;
use std::mem::MaybeUninit;
use std::time::SystemTime;

use crate::conditional::Conditions;
use crate::path::{self, PathError};
use crate::response::Status;

/// Header slots on the stack; one more field than this is refused with 431.
const MAX_HEADERS: usize = 64;

/// Methods RFC 9110 defines (plus PATCH) that a static server refuses with 405 and `Allow`.
const KNOWN_METHODS: [&str; 7] = [
    "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT",
];

/// Limits on a request head.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Whole head, request line included (default 8 KiB).
    pub max_head: usize,
    /// Request line alone (default 8 KiB).
    pub max_request_line: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head: 8192,
            max_request_line: 8192,
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

/// A request head the server will serve (GET or HEAD, no body).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: Method,
    /// Decoded, normalised, starting with '/', no query. Borrowed from the buffer when possible.
    pub path: Cow<'a, str>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    pub keep_alive: bool,
    pub if_modified_since: Option<SystemTime>,
    /// The other preconditions and `Range`.
    pub cond: Conditions<'a>,
    /// The request target as sent (origin- or absolute-form, query included).
    pub target: &'a str,
    /// Bytes of the head, to consume.
    pub head_len: usize,
}

impl Request<'_> {
    /// The target's path as it was sent, percent-encoding included, and its query (from its
    /// `?`, or empty), the fragment dropped: what a redirect to the same resource with a slash
    /// appended is made of (`path + "/" + query`).
    pub fn target_parts(&self) -> (&str, &str) {
        let t = self.target;
        let t = t.find('#').map_or(t, |i| &t[..i]);
        let t = match t.find("://") {
            Some(i) if !t.starts_with('/') => {
                let rest = &t[i + 3..];
                rest.find(['/', '?']).map_or("", |j| &rest[j..])
            }
            _ => t,
        };
        match t.find('?') {
            Some(i) => (&t[..i], &t[i..]),
            None => (t, ""),
        }
    }
}

/// A request the server must refuse with `status`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RequestError {
    pub status: Status,
    /// Whether the connection may stay open after the error response.
    pub keep_alive: bool,
    /// Bytes to consume when `keep_alive` (the head's length); 0 otherwise.
    pub consumed: usize,
    /// HEAD requests get the error head without a body.
    pub head_only: bool,
    /// 0 or 1; the error response is written with the same minor version.
    pub minor_version: u8,
    /// Short reason for logs and tests.
    pub reason: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parse<'a> {
    Partial,
    Complete(Request<'a>),
    Error(RequestError),
}

pub fn parse_request<'a>(buf: &'a [u8], limits: &Limits) -> Parse<'a> {
    // Parsing no more than `max_head` bytes makes the limit independent of how the bytes were
    // split across reads, and bounds the work done on a hostile buffer.
    let window = &buf[..buf.len().min(limits.max_head)];
    // Uninitialised slots: initialising 64 headers would cost more than parsing a short head.
    let mut slots = [MaybeUninit::<httparse::Header<'a>>::uninit(); MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let res = req.parse_with_uninit_headers(window, &mut slots);
    match res {
        Ok(httparse::Status::Complete(head_len)) => judge(&req, head_len, limits),
        other => not_complete(buf, &req, limits, other),
    }
}

/// How a request's body is framed (RFC 9112 §6.3), as the proxy forwards it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RequestBody {
    /// No body (no Transfer-Encoding, Content-Length absent or 0).
    None,
    /// Exactly this many bytes (> 0).
    Length(u64),
    /// Chunked transfer coding (the final coding; HTTP/1.1 only).
    Chunked,
}

/// A request head a proxy will forward: any method, any body framing it can delimit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyRequest<'a> {
    pub method: &'a str,
    /// As [`Request::path`]; for CONNECT, the authority-form target (`host:port`).
    pub path: Cow<'a, str>,
    /// CONNECT: the tunnel's target, `host:port` as the client wrote it.
    pub connect: Option<&'a str>,
    pub body: RequestBody,
    /// `Expect: 100-continue` on an HTTP/1.1 request with a body (RFC 9110 §10.1.1: ignored
    /// for HTTP/1.0 and without a body).
    pub expect_continue: bool,
    pub minor_version: u8,
    pub keep_alive: bool,
    pub if_modified_since: Option<SystemTime>,
    pub head_len: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProxyParse<'a> {
    Partial,
    Complete(ProxyRequest<'a>),
    Error(RequestError),
}

/// As [`parse_request`], judged for a proxy: every syntax, size, Host and framing rule is the
/// same (Transfer-Encoding with Content-Length, a chunked that is not final, an invalid,
/// duplicate-and-different or oversized Content-Length: 400, close), but any method is
/// forwarded with its body. Decisions of its own: chunked in an HTTP/1.0 request is 400 (RFC
/// 9112 §6.1: its framing is faulty); CONNECT needs an authority-form target `host:port` with a
/// port and no body (else 400); other targets must be origin- or absolute-form (so `OPTIONS *`
/// is 400, as for the server).
pub fn parse_proxy_request<'a>(buf: &'a [u8], limits: &Limits) -> ProxyParse<'a> {
    let window = &buf[..buf.len().min(limits.max_head)];
    let mut slots = [MaybeUninit::<httparse::Header<'a>>::uninit(); MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let res = req.parse_with_uninit_headers(window, &mut slots);
    let p = match res {
        Ok(httparse::Status::Complete(head_len)) => return judge_proxy(&req, head_len, limits),
        other => not_complete(buf, &req, limits, other),
    };
    match p {
        Parse::Error(e) => ProxyParse::Error(e),
        // `not_complete` never answers Complete.
        Parse::Partial | Parse::Complete(_) => ProxyParse::Partial,
    }
}

fn not_complete<'a>(
    buf: &'a [u8],
    req: &httparse::Request<'_, 'a>,
    limits: &Limits,
    res: Result<httparse::Status<usize>, httparse::Error>,
) -> Parse<'a> {
    let who = Who::of(req);
    match res {
        Ok(httparse::Status::Complete(_)) | Ok(httparse::Status::Partial) => {
            incomplete(buf, limits, who)
        }
        Err(httparse::Error::TooManyHeaders) => {
            who.fail(Status::HeaderFieldsTooLarge, "more than 64 header fields")
        }
        Err(httparse::Error::Version) => bad_version(buf, req, limits, who),
        Err(httparse::Error::Token) => who.fail(Status::BadRequest, "invalid request line"),
        Err(httparse::Error::HeaderName) => {
            who.fail(Status::BadRequest, "invalid header field name")
        }
        Err(httparse::Error::HeaderValue) => {
            who.fail(Status::BadRequest, "invalid header field value")
        }
        Err(httparse::Error::NewLine) => who.fail(Status::BadRequest, "invalid line ending"),
        Err(httparse::Error::Status) => who.fail(Status::BadRequest, "malformed request head"),
    }
}

/// What is known of the request for writing an error: HEAD or not, and its minor version.
#[derive(Copy, Clone)]
struct Who {
    head_only: bool,
    minor: u8,
}

impl Who {
    fn of(req: &httparse::Request<'_, '_>) -> Who {
        Who {
            head_only: req.method == Some("HEAD"),
            minor: req.version.map_or(1, |v| v.min(1)),
        }
    }

    /// An error after which the connection closes.
    fn fail<'a>(self, status: Status, reason: &'static str) -> Parse<'a> {
        Parse::Error(self.error(status, reason))
    }

    /// The same, as the error itself.
    fn error(self, status: Status, reason: &'static str) -> RequestError {
        RequestError {
            status,
            keep_alive: false,
            consumed: 0,
            head_only: self.head_only,
            minor_version: self.minor,
            reason,
        }
    }

    fn refuse<'a>(
        self,
        status: Status,
        keep_alive: bool,
        head_len: usize,
        reason: &'static str,
    ) -> Parse<'a> {
        Parse::Error(RequestError {
            status,
            keep_alive,
            consumed: if keep_alive { head_len } else { 0 },
            head_only: self.head_only,
            minor_version: self.minor,
            reason,
        })
    }
}

/// Where the request line starts (after leading empty lines, RFC 9112 §2.2) and, if its end is
/// in `buf`, its length without the line terminator.
fn request_line(buf: &[u8]) -> (usize, Option<usize>) {
    let mut start = 0;
    loop {
        match buf.get(start..) {
            Some([b'\r', b'\n', ..]) => start += 2,
            Some([b'\n', ..]) => start += 1,
            _ => break,
        }
    }
    let rest = buf.get(start..).unwrap_or(&[]);
    let end = rest.iter().position(|&b| b == b'\n').map(|i| {
        if i > 0 && rest.get(i - 1) == Some(&b'\r') {
            i - 1
        } else {
            i
        }
    });
    (start, end)
}

/// No complete head within `max_head`: wait, or refuse if no complete head could be accepted.
fn incomplete<'a>(buf: &[u8], limits: &Limits, who: Who) -> Parse<'a> {
    let (start, end) = request_line(buf);
    let so_far = buf.len().saturating_sub(start);
    let line_len = end.unwrap_or(match buf.last() {
        Some(b'\r') => so_far.saturating_sub(1),
        _ => so_far,
    });
    if line_len > limits.max_request_line {
        return who.fail(Status::UriTooLong, "request line too long");
    }
    if buf.len() > limits.max_head {
        return if end.is_none() {
            who.fail(
                Status::UriTooLong,
                "request line incomplete within the head limit",
            )
        } else {
            who.fail(Status::HeaderFieldsTooLarge, "request head too large")
        };
    }
    Parse::Partial
}

/// httparse only knows HTTP/1.0 and HTTP/1.1; tell a well-formed other version (505) from
/// garbage (400), or wait when the bytes so far could still be either.
fn bad_version<'a>(
    buf: &'a [u8],
    req: &httparse::Request<'_, 'a>,
    limits: &Limits,
    who: Who,
) -> Parse<'a> {
    // A version already known to be wrong (400) or another HTTP version (505) is judged before
    // the line's length, as syntax comes before 414 in the order of judgement, so the answer
    // does not depend on where the reads split the line (fuzzing found a prefix answered 400
    // while the whole line got 414); an undecided version waits in `incomplete`, which refuses
    // a line over the limit with 414 as soon as it is.
    // httparse accepted the method and the target, each followed by exactly one space, so the
    // version starts one byte after the target (which borrows from `buf`).
    let version = req.path.and_then(|target| {
        let off = (target.as_ptr() as usize).checked_sub(buf.as_ptr() as usize)?;
        buf.get(off.checked_add(target.len())?.checked_add(1)?..)
    });
    let Some(rest) = version else {
        return who.fail(Status::BadRequest, "invalid HTTP version");
    };
    match rest.iter().position(|&b| b == b'\n') {
        Some(i) => {
            let v = &rest[..i];
            let v = v.strip_suffix(b"\r").unwrap_or(v);
            if v.len() == 8 && version_prefix(v) {
                who.fail(Status::VersionNotSupported, "unsupported HTTP version")
            } else {
                who.fail(Status::BadRequest, "invalid HTTP version")
            }
        }
        None if version_prefix(rest) => incomplete(buf, limits, who),
        None => who.fail(Status::BadRequest, "invalid HTTP version"),
    }
}

/// Whether `v` is a prefix of `HTTP/<digit>.<digit>\r`.
fn version_prefix(v: &[u8]) -> bool {
    v.len() <= 9
        && v.iter().enumerate().all(|(i, &b)| match i {
            0..=4 => b == b"HTTP/"[i],
            5 | 7 => b.is_ascii_digit(),
            6 => b == b'.',
            _ => b == b'\r',
        })
}

/// The header fields evlab acts on, gathered in one pass.
#[derive(Default)]
struct Fields<'a> {
    hosts: u32,
    host_invalid: bool,
    content_length: Option<u64>,
    content_length_seen: bool,
    content_length_error: Option<&'static str>,
    transfer_encoding: bool,
    /// The last non-empty transfer coding over all Transfer-Encoding fields, in order.
    final_coding: Option<&'a [u8]>,
    /// A transfer coding other than `chunked` was named (RFC 9112 §6.1: not implemented here).
    other_coding: bool,
    close: bool,
    keep_alive: bool,
    ims: Option<&'a [u8]>,
    ims_count: u32,
    expect_continue: bool,
    /// `If-Match`, `If-None-Match`, `If-Unmodified-Since`, `If-Range`, `Range`: the last value
    /// of each and how many times it was given.
    cond: [(Option<&'a [u8]>, u32); 5],
}

const IF_MATCH: usize = 0;
const IF_NONE_MATCH: usize = 1;
const IF_UNMODIFIED_SINCE: usize = 2;
const IF_RANGE: usize = 3;
const RANGE: usize = 4;

impl<'a> Fields<'a> {
    fn gather(headers: &[httparse::Header<'a>]) -> Fields<'a> {
        let mut f = Fields::default();
        for h in headers {
            let name = h.name;
            let value = h.value;
            // Dispatch on length first: most fields (User-Agent, Accept...) then cost one
            // comparison of integers.
            match name.len() {
                6 if name.eq_ignore_ascii_case("expect") => {
                    f.expect_continue |= value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
                }
                4 if name.eq_ignore_ascii_case("host") => {
                    f.hosts += 1;
                    if !valid_authority(value) {
                        f.host_invalid = true;
                    }
                }
                10 if name.eq_ignore_ascii_case("connection") => {
                    for token in list(value) {
                        if token.eq_ignore_ascii_case(b"close") {
                            f.close = true;
                        } else if token.eq_ignore_ascii_case(b"keep-alive") {
                            f.keep_alive = true;
                        }
                    }
                }
                14 if name.eq_ignore_ascii_case("content-length") => {
                    f.content_length_seen = true;
                    if f.content_length_error.is_none() {
                        if let Err(e) = add_content_length(value, &mut f.content_length) {
                            f.content_length_error = Some(e);
                        }
                    }
                }
                17 if name.eq_ignore_ascii_case("transfer-encoding") => {
                    f.transfer_encoding = true;
                    for coding in list(value) {
                        if !coding.is_empty() {
                            f.final_coding = Some(coding);
                            f.other_coding |= !coding.eq_ignore_ascii_case(b"chunked");
                        }
                    }
                }
                17 if name.eq_ignore_ascii_case("if-modified-since") => {
                    f.ims_count += 1;
                    f.ims = Some(value);
                }
                5 if name.eq_ignore_ascii_case("range") => f.cond(RANGE, value),
                8 if name.eq_ignore_ascii_case("if-match") => f.cond(IF_MATCH, value),
                8 if name.eq_ignore_ascii_case("if-range") => f.cond(IF_RANGE, value),
                13 if name.eq_ignore_ascii_case("if-none-match") => f.cond(IF_NONE_MATCH, value),
                19 if name.eq_ignore_ascii_case("if-unmodified-since") => {
                    f.cond(IF_UNMODIFIED_SINCE, value)
                }
                _ => {}
            }
        }
        f
    }

    #[inline]
    fn cond(&mut self, which: usize, value: &'a [u8]) {
        let c = &mut self.cond[which];
        c.0 = Some(value.trim_ascii());
        c.1 += 1;
    }

    /// The conditional fields, as [`Conditions`] documents them: a field given more than once
    /// is ignored, or, for If-None-Match and If-Range, present and never matching.
    fn conditions(&self) -> Conditions<'a> {
        let once = |i: usize| match self.cond[i] {
            (v, 1) => v,
            _ => None,
        };
        let never_if_repeated = |i: usize| match self.cond[i] {
            (v, 1) => v,
            (_, 0) => None,
            _ => Some(&b""[..]),
        };
        Conditions {
            if_match: once(IF_MATCH),
            if_none_match: never_if_repeated(IF_NONE_MATCH),
            if_unmodified_since: once(IF_UNMODIFIED_SINCE).and_then(parse_date),
            if_range: never_if_repeated(IF_RANGE),
            range: once(RANGE),
        }
    }
}

fn parse_date(v: &[u8]) -> Option<SystemTime> {
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| httpdate::parse_http_date(s).ok())
}

/// Elements of a comma-separated field value, optional whitespace trimmed (RFC 9110 §5.6.1).
fn list(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(trim_ows)
}

fn trim_ows(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| b != b' ' && b != b'\t');
    let end = s.iter().rposition(|&b| b != b' ' && b != b'\t');
    match (start, end) {
        (Some(a), Some(b)) => &s[a..=b],
        _ => &[],
    }
}

/// Folds one Content-Length field into `acc`; equal repeats count as one (RFC 9110 §8.6).
fn add_content_length(value: &[u8], acc: &mut Option<u64>) -> Result<(), &'static str> {
    for digits in list(value) {
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return Err("invalid Content-Length");
        }
        let mut n: u64 = 0;
        for &d in digits {
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(d - b'0')))
                .ok_or("Content-Length too large")?;
        }
        match *acc {
            Some(prev) if prev != n => return Err("conflicting Content-Length values"),
            _ => *acc = Some(n),
        }
    }
    Ok(())
}

/// Host and absolute-form authority: `host[:port]` as RFC 3986 spells reg-name, IP-literal and
/// port, without userinfo. Checked by character class only; the server serves one site.
fn valid_authority(v: &[u8]) -> bool {
    v.iter().all(|&b| AUTHORITY[b as usize])
}

/// The bytes [`valid_authority`] accepts, as a table: a Host is checked on every request.
static AUTHORITY: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let extra = b"-._~!$&'()*+,;=:[]%";
    let mut i = 0;
    while i < extra.len() {
        t[extra[i] as usize] = true;
        i += 1;
    }
    t
};

/// The path of an origin-form or absolute-form target, query and fragment stripped.
fn target_path(target: &str) -> Option<&str> {
    fn strip(s: &str) -> &str {
        // Byte search: '?' and '#' are ASCII, so the cut is on a character boundary.
        s.bytes()
            .position(|b| b == b'?' || b == b'#')
            .map_or(s, |i| &s[..i])
    }
    if target.starts_with('/') {
        return Some(strip(target));
    }
    let (scheme, rest) = target.split_once("://")?;
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return None;
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, after) = rest.split_at(end);
    if authority.is_empty() || !valid_authority(authority.as_bytes()) {
        return None;
    }
    if after.starts_with('/') {
        Some(strip(after))
    } else {
        // RFC 9112 §3.2.1: an absolute-form with an empty path means "/".
        Some("/")
    }
}

/// What every judgement (the server's and the proxy's) decides first, in the same order.
struct Judged<'a> {
    who: Who,
    method: &'a str,
    target: &'a str,
    minor: u8,
    keep_alive: bool,
    f: Fields<'a>,
}

fn judge_common<'a>(
    req: &httparse::Request<'_, 'a>,
    limits: &Limits,
) -> Result<Judged<'a>, RequestError> {
    let who = Who::of(req);
    let (Some(method), Some(target), Some(_)) = (req.method, req.path, req.version) else {
        // httparse fills all three before it reports a complete head.
        return Err(who.error(Status::BadRequest, "malformed request line"));
    };
    let minor = who.minor;
    // httparse allows exactly one space between the three parts and an 8-byte version.
    let line_len = method.len() + 1 + target.len() + 1 + 8;
    if line_len > limits.max_request_line {
        return Err(who.error(Status::UriTooLong, "request line too long"));
    }

    let f = Fields::gather(req.headers);
    let keep_alive = if minor == 1 {
        !f.close
    } else {
        f.keep_alive && !f.close
    };
    if minor == 1 && f.hosts == 0 {
        return Err(who.error(Status::BadRequest, "HTTP/1.1 request without Host"));
    }
    if f.hosts > 1 {
        return Err(who.error(Status::BadRequest, "more than one Host"));
    }
    if f.host_invalid {
        return Err(who.error(Status::BadRequest, "invalid Host"));
    }
    if f.transfer_encoding && f.content_length_seen {
        return Err(who.error(
            Status::BadRequest,
            "Transfer-Encoding together with Content-Length",
        ));
    }
    let chunked = f
        .final_coding
        .is_some_and(|c| c.eq_ignore_ascii_case(b"chunked"));
    if f.transfer_encoding && !chunked {
        return Err(who.error(
            Status::BadRequest,
            "chunked is not the final transfer coding",
        ));
    }
    if f.other_coding {
        // `identity, chunked`, `gzip, chunked`: a coding this server does not implement; the
        // body cannot be read, so neither can what follows it (RFC 9112 §6.1).
        return Err(who.error(Status::NotImplemented, "transfer coding not implemented"));
    }
    if let Some(reason) = f.content_length_error {
        return Err(who.error(Status::BadRequest, reason));
    }
    Ok(Judged {
        who,
        method,
        target,
        minor,
        keep_alive,
        f,
    })
}

fn if_modified_since(f: &Fields<'_>) -> Option<SystemTime> {
    match (f.ims_count, f.ims) {
        (1, Some(v)) => parse_date(v),
        _ => None,
    }
}

fn judge_proxy<'a>(
    req: &httparse::Request<'_, 'a>,
    head_len: usize,
    limits: &Limits,
) -> ProxyParse<'a> {
    let j = match judge_common(req, limits) {
        Ok(j) => j,
        Err(e) => return ProxyParse::Error(e),
    };
    let (who, f) = (j.who, &j.f);
    let fail = |status, reason| match who.fail(status, reason) {
        Parse::Error(e) => ProxyParse::Error(e),
        _ => ProxyParse::Partial,
    };
    let body = if f.transfer_encoding {
        if j.minor == 0 {
            return fail(
                Status::BadRequest,
                "Transfer-Encoding in an HTTP/1.0 request",
            );
        }
        RequestBody::Chunked
    } else {
        match f.content_length {
            Some(n) if n > 0 => RequestBody::Length(n),
            _ => RequestBody::None,
        }
    };
    let (path, connect) = if j.method == "CONNECT" {
        let t = j.target;
        let port_ok = t.rsplit_once(':').is_some_and(|(h, p)| {
            !h.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
        });
        if !port_ok || !valid_authority(t.as_bytes()) || t.contains(['/', '?', '#']) {
            return fail(Status::BadRequest, "CONNECT needs host:port");
        }
        if body != RequestBody::None {
            return fail(Status::BadRequest, "CONNECT with a body");
        }
        (Cow::Borrowed(t), Some(t))
    } else {
        let Some(raw) = target_path(j.target) else {
            return fail(Status::BadRequest, "invalid request target");
        };
        match path::normalize(raw) {
            Ok(p) => (p, None),
            Err(PathError::Invalid) => return fail(Status::BadRequest, "invalid path encoding"),
            Err(PathError::Escapes) => {
                // A body would be read as the next request: close unless there is none.
                let keep = j.keep_alive && body == RequestBody::None;
                return match who.refuse(Status::Forbidden, keep, head_len, "path escapes the root")
                {
                    Parse::Error(e) => ProxyParse::Error(e),
                    _ => ProxyParse::Partial,
                };
            }
        }
    };
    ProxyParse::Complete(ProxyRequest {
        method: j.method,
        path,
        connect,
        body,
        expect_continue: f.expect_continue && j.minor == 1 && body != RequestBody::None,
        minor_version: j.minor,
        keep_alive: j.keep_alive,
        if_modified_since: if_modified_since(f),
        head_len,
    })
}

fn judge<'a>(req: &httparse::Request<'_, 'a>, head_len: usize, limits: &Limits) -> Parse<'a> {
    let Judged {
        who,
        method,
        target,
        minor,
        keep_alive,
        f,
    } = match judge_common(req, limits) {
        Ok(j) => j,
        Err(e) => return Parse::Error(e),
    };
    let has_body = f.transfer_encoding || f.content_length.unwrap_or(0) > 0;

    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        other => {
            let (status, reason) = if KNOWN_METHODS.contains(&other) {
                (Status::MethodNotAllowed, "method not allowed")
            } else {
                (Status::NotImplemented, "method not implemented")
            };
            // Without a body the next request starts right after this head, so the
            // connection can carry on.
            return who.refuse(status, keep_alive && !has_body, head_len, reason);
        }
    };
    if f.transfer_encoding {
        return who.fail(
            Status::NotImplemented,
            "chunked request bodies are not accepted",
        );
    }
    if has_body {
        return who.fail(Status::ContentTooLarge, "request bodies are not accepted");
    }

    let Some(raw) = target_path(target) else {
        return who.fail(Status::BadRequest, "invalid request target");
    };
    let path = match path::normalize(raw) {
        Ok(p) => p,
        Err(PathError::Invalid) => return who.fail(Status::BadRequest, "invalid path encoding"),
        Err(PathError::Escapes) => {
            return who.refuse(
                Status::Forbidden,
                keep_alive,
                head_len,
                "path escapes the root",
            )
        }
    };
    let if_modified_since = if_modified_since(&f);
    Parse::Complete(Request {
        method,
        path,
        minor_version: minor,
        keep_alive,
        if_modified_since,
        cond: f.conditions(),
        target,
        head_len,
    })
}

#[cfg(test)]
mod tests;

/// Counts heap allocations made by the current thread, so a test can prove the hot path makes
/// none. Test builds only.
#[cfg(test)]
mod alloc_count {
    #[global_allocator]
    static GLOBAL: evlab_sys::alloc_count::Counting = evlab_sys::alloc_count::Counting;

    pub use evlab_sys::alloc_count::count;
}
