//! What a reverse proxy needs of HTTP/1.1, and nothing about sockets:
//!
//! - [`write_forward_request`]: a request head, already judged by
//!   [`parse_request`](crate::parse_request), rewritten for the origin: the target in origin
//!   form, the hop-by-hop fields (RFC 9110 §7.6.1) dropped, the client's version kept (so an
//!   HTTP/1.0 client's request never brings back a chunked body it could not read).
//! - [`parse_response_head`]: an origin's response head, its framing (RFC 9112 §6.3), whether
//!   the origin keeps the connection, what a shared cache needs to know (RFC 9111 §3, kept
//!   simple: see [`CacheInfo`]), and the head rewritten for the client in the same pass.
//! - [`ChunkedScanner`]: finds where a chunked body ends while its bytes pass through unchanged.
//!
//! Response framing, in the order RFC 9112 §6.3 gives it: no body for a HEAD request, 1xx, 204
//! and 304; `Transfer-Encoding` whose final coding is `chunked`: chunked; any other
//! `Transfer-Encoding`: until the origin closes; a valid `Content-Length`: that many bytes (an
//! invalid or conflicting one is an error: the proxy answers 502); otherwise until close. A
//! body delimited by close, or a response with both `Transfer-Encoding` and `Content-Length`,
//! never leaves the origin connection reusable.

use std::borrow::Cow;
use std::time::SystemTime;

/// Most header fields in a response head the proxy accepts.
const MAX_HEADERS: usize = 100;

/// How a response body is delimited.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body (HEAD, 1xx, 204, 304), whatever the headers say.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding, trailers included.
    Chunked,
    /// Until the origin closes the connection.
    UntilClose,
}

/// What a shared cache needs from a response's fields. Anything that makes caching doubtful
/// (`no-store`, `private`, `no-cache`, `Vary`, `Set-Cookie`) makes it uncacheable: the proxy
/// stores only what it may reuse without revalidating.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheInfo {
    pub no_store: bool,
    pub private: bool,
    pub no_cache: bool,
    /// `s-maxage` if given (it is for shared caches), else `max-age`.
    pub max_age: Option<u64>,
    pub vary: bool,
    pub set_cookie: bool,
}

impl CacheInfo {
    /// Nothing forbids a shared cache to store and reuse the response.
    pub fn storable(&self) -> bool {
        !(self.no_store || self.private || self.no_cache || self.vary || self.set_cookie)
            && self.max_age != Some(0)
    }
}

/// A complete response head from an origin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    pub minor_version: u8,
    /// Bytes of the head (status line, fields, blank line).
    pub head_len: usize,
    pub framing: Framing,
    /// The origin keeps the connection open after this response.
    pub keep_alive: bool,
    /// The `Content-Length` given (also for HEAD and 304, where it describes the would-be body).
    pub content_length: Option<u64>,
    pub last_modified: Option<SystemTime>,
    pub cache: CacheInfo,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponseParse {
    /// No complete head yet.
    Partial,
    /// An interim (1xx other than 101) response of this many bytes: skip it, the real one follows.
    Interim(usize),
    Complete(ResponseHead),
    /// Not a response the proxy can pass on; the reason, for logs and tests.
    Error(&'static str),
}

/// Largest response head accepted.
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Whether a field is hop-by-hop: it describes one connection and is never forwarded.
fn hop_by_hop(name: &str) -> bool {
    const HOP: [&str; 6] = [
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "upgrade",
        "proxy-authenticate",
    ];
    HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// Elements of a comma-separated field value, whitespace trimmed.
fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(|t| t.trim_ascii())
        .filter(|t| !t.is_empty())
}

/// Names listed in `Connection` fields: hop-by-hop too (RFC 9110 §7.6.1).
fn listed_in_connection(headers: &[httparse::Header<'_>], name: &str) -> bool {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .any(|h| tokens(h.value).any(|t| t.eq_ignore_ascii_case(name.as_bytes())))
}

fn push_field(out: &mut Vec<u8>, h: &httparse::Header<'_>) {
    out.extend_from_slice(h.name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(h.value);
    out.extend_from_slice(b"\r\n");
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n: u64 = 0;
    for &d in digits {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(n)
}

/// Parses the response head at the start of `buf`. `head_request`: it answers a HEAD (no body
/// whatever the fields say). On `Complete`, appends to `rewritten` the head for the client
/// without its final blank line: `HTTP/1.1 <code> <reason>` and the end-to-end fields, so the
/// caller can add its own (`Connection`, say) and the blank line.
pub fn parse_response_head(
    buf: &[u8],
    head_request: bool,
    rewritten: &mut Vec<u8>,
) -> ResponseParse {
    let window = &buf[..buf.len().min(MAX_RESPONSE_HEAD)];
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(window) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_RESPONSE_HEAD => {
            return ResponseParse::Error("response head too large")
        }
        Ok(httparse::Status::Partial) => return ResponseParse::Partial,
        Err(httparse::Error::TooManyHeaders) => {
            return ResponseParse::Error("too many response header fields")
        }
        Err(_) => return ResponseParse::Error("malformed response head"),
    };
    let (Some(status), Some(minor)) = (resp.code, resp.version) else {
        return ResponseParse::Error("malformed status line");
    };
    if status == 101 {
        return ResponseParse::Error("101 Switching Protocols was not asked for");
    }
    if (100..200).contains(&status) {
        return ResponseParse::Interim(head_len);
    }
    let fields: &[httparse::Header<'_>] = resp.headers;
    let mut content_length: Option<u64> = None;
    let mut length_error = false;
    let mut transfer_encoding = false;
    let mut chunked_final = false;
    let mut close = minor == 0;
    let mut cache = CacheInfo::default();
    let mut s_maxage = None;
    let mut last_modified = None;
    for h in fields {
        let n = h.name;
        if n.eq_ignore_ascii_case("content-length") {
            for t in h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                match (parse_u64(t), content_length) {
                    (None, _) => length_error = true,
                    (Some(v), Some(prev)) if v != prev => length_error = true,
                    (Some(v), _) => content_length = Some(v),
                }
            }
        } else if n.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = true;
            if let Some(last) = tokens(h.value).last() {
                chunked_final = last.eq_ignore_ascii_case(b"chunked");
            }
        } else if n.eq_ignore_ascii_case("connection") {
            for t in tokens(h.value) {
                if t.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if t.eq_ignore_ascii_case(b"keep-alive") && minor == 0 {
                    close = false;
                }
            }
        } else if n.eq_ignore_ascii_case("cache-control") {
            for t in tokens(h.value) {
                let (k, v) = match t.iter().position(|&b| b == b'=') {
                    Some(i) => (t[..i].trim_ascii(), Some(t[i + 1..].trim_ascii())),
                    None => (t, None),
                };
                let v = v.map(|v| v.strip_prefix(b"\"").unwrap_or(v));
                let v = v.map(|v| v.strip_suffix(b"\"").unwrap_or(v));
                if k.eq_ignore_ascii_case(b"no-store") {
                    cache.no_store = true;
                } else if k.eq_ignore_ascii_case(b"private") {
                    cache.private = true;
                } else if k.eq_ignore_ascii_case(b"no-cache") {
                    cache.no_cache = true;
                } else if k.eq_ignore_ascii_case(b"max-age") {
                    // An invalid value makes the response stale at once (RFC 9111 §4.2.1).
                    cache.max_age = Some(v.and_then(parse_u64).unwrap_or(0));
                } else if k.eq_ignore_ascii_case(b"s-maxage") {
                    s_maxage = Some(v.and_then(parse_u64).unwrap_or(0));
                }
            }
        } else if n.eq_ignore_ascii_case("pragma") {
            if tokens(h.value).any(|t| t.eq_ignore_ascii_case(b"no-cache")) {
                cache.no_cache = true;
            }
        } else if n.eq_ignore_ascii_case("vary") {
            cache.vary = true;
        } else if n.eq_ignore_ascii_case("set-cookie") {
            cache.set_cookie = true;
        } else if n.eq_ignore_ascii_case("last-modified") {
            last_modified = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| httpdate::parse_http_date(s.trim()).ok());
        }
    }
    if s_maxage.is_some() {
        cache.max_age = s_maxage;
    }
    let no_body = head_request || status == 204 || status == 304;
    let framing = if no_body {
        Framing::None
    } else if transfer_encoding {
        if chunked_final {
            Framing::Chunked
        } else {
            Framing::UntilClose
        }
    } else if length_error {
        return ResponseParse::Error("invalid or conflicting Content-Length");
    } else if let Some(l) = content_length {
        Framing::Length(l)
    } else {
        Framing::UntilClose
    };
    // Transfer-Encoding with Content-Length may be a smuggling attempt: never reuse.
    let keep_alive = !close
        && framing != Framing::UntilClose
        && !(transfer_encoding && content_length.is_some());

    let reason = resp.reason.unwrap_or("");
    rewritten.reserve(head_len + 32);
    rewritten.extend_from_slice(b"HTTP/1.1 ");
    crate::response::push_decimal(rewritten, u64::from(status));
    rewritten.push(b' ');
    rewritten.extend_from_slice(reason.as_bytes());
    rewritten.extend_from_slice(b"\r\n");
    for h in fields {
        if hop_by_hop(h.name) || listed_in_connection(fields, h.name) {
            continue;
        }
        // Both framings given: Transfer-Encoding wins and Content-Length must not pass
        // (RFC 9112 §6.3, item 3).
        if transfer_encoding && h.name.eq_ignore_ascii_case("content-length") {
            continue;
        }
        push_field(rewritten, h);
    }
    ResponseParse::Complete(ResponseHead {
        status,
        minor_version: minor,
        head_len,
        framing,
        keep_alive,
        content_length: if length_error { None } else { content_length },
        last_modified,
        cache,
    })
}

/// What [`write_forward_request`] learnt of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forward<'a> {
    /// The target in origin form (`/path?query`): what was sent, and the cache key.
    pub target: Cow<'a, str>,
    pub head_request: bool,
    /// Carries credentials: a shared cache must not answer it, nor store its answer
    /// (RFC 9111 §3.5).
    pub authorization: bool,
    /// The client asked not to be answered from a cache (`Cache-Control: no-cache` or
    /// `no-store`, `Pragma: no-cache`).
    pub no_cache: bool,
}

/// Rewrites a request head for the origin and appends it to `out`: the request line with the
/// target in origin form and the client's HTTP version, every end-to-end field, and for an
/// HTTP/1.0 client `Connection: keep-alive` (the proxy keeps its origin connections). `head`
/// must be a complete head that [`parse_request`](crate::parse_request) accepted; `None`
/// otherwise.
pub fn write_forward_request<'a>(head: &'a [u8], out: &mut Vec<u8>) -> Option<Forward<'a>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return None,
    }
    let (method, target, minor) = (req.method?, req.path?, req.version?);
    let target = origin_form(target)?;
    let fields: &[httparse::Header<'a>] = req.headers;
    out.reserve(head.len() + 32);
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(if minor == 0 {
        b" HTTP/1.0\r\n"
    } else {
        b" HTTP/1.1\r\n"
    });
    let mut authorization = false;
    let mut no_cache = false;
    for h in fields {
        if hop_by_hop(h.name) || listed_in_connection(fields, h.name) {
            continue;
        }
        if h.name.eq_ignore_ascii_case("authorization") {
            authorization = true;
        } else if h.name.eq_ignore_ascii_case("cache-control") {
            no_cache |= tokens(h.value).any(|t| {
                t.eq_ignore_ascii_case(b"no-cache") || t.eq_ignore_ascii_case(b"no-store")
            });
        } else if h.name.eq_ignore_ascii_case("pragma") {
            no_cache |= tokens(h.value).any(|t| t.eq_ignore_ascii_case(b"no-cache"));
        }
        push_field(out, h);
    }
    if minor == 0 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Some(Forward {
        target,
        head_request: method == "HEAD",
        authorization,
        no_cache,
    })
}

/// An origin-form target (`/path?query`) from an origin-form or absolute-form one; the
/// fragment, which a client should not send, is dropped.
fn origin_form(target: &str) -> Option<Cow<'_, str>> {
    let cut = |s: &str| s.find('#').map_or(s.len(), |i| i);
    if target.starts_with('/') {
        return Some(Cow::Borrowed(&target[..cut(target)]));
    }
    let (scheme, rest) = target.split_once("://")?;
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return None;
    }
    let start = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let after = &rest[start..];
    let after = &after[..cut(after)];
    if after.starts_with('/') {
        Some(Cow::Borrowed(after))
    } else {
        // An empty path means "/" (RFC 9112 §3.2.1); a query may follow.
        Some(Cow::Owned(format!("/{after}")))
    }
}

/// Finds where a chunked body ends while its bytes pass through unchanged (the proxy forwards
/// chunk framing as it came). Chunk-size lines, chunk extensions and trailer lines are each
/// limited to 4 KiB, and trailers to 64 KiB in all.
#[derive(Clone, Debug, Default)]
pub struct ChunkedScanner {
    state: Chunk,
    /// Bytes of the current line (size line or trailer line).
    line: usize,
    trailers: usize,
}

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
enum Chunk {
    /// In a chunk-size line: the size so far, digits seen, past the digits (extension).
    #[default]
    SizeStart,
    Size {
        n: u64,
        ext: bool,
    },
    Data(u64),
    /// After a chunk's data: its CRLF.
    DataEnd {
        cr: bool,
    },
    /// At the start of a trailer line (or of the final blank line).
    TrailerStart,
    /// Inside a trailer line.
    Trailer,
    /// The final blank line's CR was seen.
    LastCr,
    Done,
}

const MAX_LINE: usize = 4096;
const MAX_TRAILERS: usize = 64 * 1024;

impl ChunkedScanner {
    pub fn new() -> ChunkedScanner {
        ChunkedScanner::default()
    }

    /// Whether the body's end has been found.
    pub fn done(&self) -> bool {
        self.state == Chunk::Done
    }

    /// Bytes of chunk data the scanner is inside of and may skip without looking (0 when it
    /// is at framing). A transfer may move that many bytes without scanning them, then call
    /// [`ChunkedScanner::skipped`].
    pub fn data_left(&self) -> u64 {
        match self.state {
            Chunk::Data(n) => n,
            _ => 0,
        }
    }

    /// `n` (≤ [`ChunkedScanner::data_left`]) bytes of chunk data went by unscanned.
    pub fn skipped(&mut self, n: u64) {
        if let Chunk::Data(left) = self.state {
            let left = left - n.min(left);
            self.state = if left == 0 {
                Chunk::DataEnd { cr: false }
            } else {
                Chunk::Data(left)
            };
        }
    }

    /// Looks at the next bytes of the body. Returns `Ok(Some(k))` when the body ends after the
    /// first `k` bytes of `data` (what follows is not part of it), `Ok(None)` when all of
    /// `data` belongs to the body and more is to come.
    pub fn feed(&mut self, data: &[u8]) -> Result<Option<usize>, &'static str> {
        let mut i = 0;
        while i < data.len() {
            match self.state {
                Chunk::Done => return Ok(Some(i)),
                Chunk::Data(left) => {
                    let n = (left as usize).min(data.len() - i);
                    i += n;
                    self.skipped(n as u64);
                    continue;
                }
                _ => {}
            }
            let b = data[i];
            i += 1;
            self.line += 1;
            if self.line > MAX_LINE {
                return Err("chunk line too long");
            }
            self.state = match self.state {
                Chunk::SizeStart => match hex(b) {
                    Some(d) => Chunk::Size {
                        n: u64::from(d),
                        ext: false,
                    },
                    None => return Err("bad chunk size"),
                },
                Chunk::Size { n, ext } => match b {
                    b'\n' => {
                        self.line = 0;
                        if n == 0 {
                            Chunk::TrailerStart
                        } else {
                            Chunk::Data(n)
                        }
                    }
                    _ if ext => Chunk::Size { n, ext },
                    b';' | b' ' | b'\t' | b'\r' => Chunk::Size { n, ext: true },
                    _ => match hex(b) {
                        Some(d) if n >> 60 == 0 => Chunk::Size {
                            n: n << 4 | u64::from(d),
                            ext: false,
                        },
                        Some(_) => return Err("chunk size too large"),
                        None => return Err("bad chunk size"),
                    },
                },
                Chunk::DataEnd { cr } => match b {
                    b'\r' if !cr => Chunk::DataEnd { cr: true },
                    b'\n' => {
                        self.line = 0;
                        Chunk::SizeStart
                    }
                    _ => return Err("chunk data not followed by CRLF"),
                },
                Chunk::TrailerStart => match b {
                    b'\r' => Chunk::LastCr,
                    b'\n' => Chunk::Done,
                    _ => Chunk::Trailer,
                },
                Chunk::LastCr => match b {
                    b'\n' => Chunk::Done,
                    _ => Chunk::Trailer,
                },
                Chunk::Trailer => {
                    self.trailers += 1;
                    if self.trailers > MAX_TRAILERS {
                        return Err("trailers too large");
                    }
                    if b == b'\n' {
                        self.line = 0;
                        Chunk::TrailerStart
                    } else {
                        Chunk::Trailer
                    }
                }
                Chunk::Data(_) | Chunk::Done => unreachable!("handled above"),
            };
            if self.state == Chunk::Done {
                return Ok(Some(i));
            }
        }
        Ok(if self.state == Chunk::Done {
            Some(i)
        } else {
            None
        })
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(head: &str, head_request: bool) -> (ResponseParse, String) {
        let mut out = Vec::new();
        let r = parse_response_head(head.as_bytes(), head_request, &mut out);
        (r, String::from_utf8(out).unwrap())
    }

    fn complete(head: &str, head_request: bool) -> (ResponseHead, String) {
        match parse(head, head_request) {
            (ResponseParse::Complete(h), s) => (h, s),
            other => panic!("{head:?}: {other:?}"),
        }
    }

    /// One row per framing rule: (head, HEAD request, framing, origin keeps the connection).
    #[test]
    fn framing_table() {
        let rows: &[(&str, bool, Framing, bool)] = &[
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
                false,
                Framing::Length(5),
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
                true,
                Framing::None,
                true,
            ),
            (
                "HTTP/1.1 204 No Content\r\n\r\n",
                false,
                Framing::None,
                true,
            ),
            (
                "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
                false,
                Framing::None,
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                false,
                Framing::Chunked,
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                false,
                Framing::Chunked,
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                false,
                Framing::UntilClose,
                false,
            ),
            // Both: chunked wins, and the connection is not reused.
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                false,
                Framing::Chunked,
                false,
            ),
            ("HTTP/1.1 200 OK\r\n\r\n", false, Framing::UntilClose, false),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\n",
                false,
                Framing::Length(7),
                false,
            ),
            (
                "HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\n",
                false,
                Framing::Length(7),
                false,
            ),
            (
                "HTTP/1.0 200 OK\r\nContent-Length: 7\r\nConnection: keep-alive\r\n\r\n",
                false,
                Framing::Length(7),
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n",
                false,
                Framing::Length(7),
                true,
            ),
            (
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
                false,
                Framing::Length(0),
                true,
            ),
        ];
        for (head, hr, framing, ka) in rows {
            let (h, _) = complete(head, *hr);
            assert_eq!((h.framing, h.keep_alive), (*framing, *ka), "{head:?}");
            assert_eq!(h.head_len, head.len());
        }
    }

    #[test]
    fn errors_partial_and_interim() {
        for bad in [
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            "garbage\r\n\r\n",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
        ] {
            assert!(
                matches!(parse(bad, false).0, ResponseParse::Error(_)),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse("HTTP/1.1 200 OK\r\nContent-Le", false).0,
            ResponseParse::Partial
        );
        let early = "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n";
        assert_eq!(parse(early, false).0, ResponseParse::Interim(early.len()));
        let mut huge = String::from("HTTP/1.1 200 OK\r\nX: ");
        huge.push_str(&"a".repeat(MAX_RESPONSE_HEAD));
        assert!(matches!(parse(&huge, false).0, ResponseParse::Error(_)));
    }

    #[test]
    fn rewriting_drops_hop_by_hop_fields() {
        let text = "HTTP/1.1 200 Fine\r\nServer: x\r\nConnection: close, X-Secret\r\n\
                    Keep-Alive: 5\r\nX-Secret: 1\r\nContent-Length: 2\r\nProxy-Connection: x\r\n\
                    Upgrade: h2c\r\n\r\nok";
        let (h, out) = complete(text, false);
        assert_eq!(
            out,
            "HTTP/1.1 200 Fine\r\nServer: x\r\nContent-Length: 2\r\n"
        );
        assert_eq!(
            h.head_len,
            text.len() - 2,
            "the body is not part of the head"
        );
        assert!(!h.keep_alive);
        let (_, out) = complete(
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            false,
        );
        assert_eq!(out, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n");
        // An HTTP/1.0 origin's status line is sent as HTTP/1.1, the proxy's own version.
        let (_, out) = complete("HTTP/1.0 404 Nope\r\n\r\n", false);
        assert_eq!(out, "HTTP/1.1 404 Nope\r\n");
    }

    #[test]
    fn cache_directives() {
        let info = |fields: &str| {
            complete(&format!("HTTP/1.1 200 OK\r\n{fields}\r\n"), false)
                .0
                .cache
        };
        assert!(info("").storable());
        assert!(info("Cache-Control: public, max-age=60\r\n").storable());
        assert_eq!(info("Cache-Control: max-age=60\r\n").max_age, Some(60));
        assert_eq!(
            info("Cache-Control: max-age=60, s-maxage=\"5\"\r\n").max_age,
            Some(5)
        );
        for no in [
            "Cache-Control: no-store\r\n",
            "Cache-Control: private\r\n",
            "Cache-Control: no-cache\r\n",
            "Cache-Control: max-age=0\r\n",
            "Cache-Control: max-age=soon\r\n",
            "Pragma: no-cache\r\n",
            "Vary: Accept-Encoding\r\n",
            "Set-Cookie: a=b\r\n",
        ] {
            assert!(!info(no).storable(), "{no:?}");
        }
        let (h, _) = complete(
            "HTTP/1.1 200 OK\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n",
            false,
        );
        assert_eq!(
            h.last_modified,
            Some(httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap())
        );
    }

    #[test]
    fn forwarded_requests() {
        let fwd = |head: &str| {
            let mut out = Vec::new();
            let f = write_forward_request(head.as_bytes(), &mut out).map(|f| {
                (
                    f.target.into_owned(),
                    f.head_request,
                    f.authorization,
                    f.no_cache,
                )
            });
            (f, String::from_utf8(out).unwrap())
        };
        assert_eq!(
            fwd("GET /a?b=1 HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nTE: trailers\r\nAccept: */*\r\n\r\n"),
            (
                Some(("/a?b=1".into(), false, false, false)),
                "GET /a?b=1 HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n".into()
            )
        );
        assert_eq!(
            fwd("HEAD http://example.com:8080/x#frag HTTP/1.0\r\nAuthorization: Basic x\r\n\r\n"),
            (
                Some(("/x".into(), true, true, false)),
                "HEAD /x HTTP/1.0\r\nAuthorization: Basic x\r\nConnection: keep-alive\r\n\r\n"
                    .into()
            )
        );
        assert_eq!(
            fwd("GET http://h?q HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\n\r\n").0,
            Some(("/?q".into(), false, false, true))
        );
        let no_store = "GET / HTTP/1.1\r\nHost: h\r\nCache-Control: max-age=0, no-store\r\n\r\n";
        assert!(fwd(no_store).0.unwrap().3);
        assert_eq!(fwd("GET / HTTP/1.1\r\nHost: h\r\n").0, None);
        assert_eq!(fwd("GET ftp://h/ HTTP/1.1\r\nHost: h\r\n\r\n").0, None);
    }

    fn scan_at_every_split(body: &[u8]) -> Result<Option<usize>, &'static str> {
        let mut whole = ChunkedScanner::new();
        let want = whole.feed(body);
        for step in 1..body.len().max(2) {
            let mut s = ChunkedScanner::new();
            let mut got = Ok(None);
            let mut off = 0;
            for part in body.chunks(step) {
                got = s.feed(part).map(|r| r.map(|k| off + k));
                off += part.len();
                if !matches!(got, Ok(None)) {
                    break;
                }
            }
            assert_eq!(got, want, "{:?} step {step}", String::from_utf8_lossy(body));
        }
        want
    }

    #[test]
    fn chunked_table() {
        let done: &[&[u8]] = &[
            b"0\r\n\r\n",
            b"5\r\nhello\r\n0\r\n\r\n",
            b"5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\nY: 2\r\n\r\n",
            b"3\nabc\n0\n\n",
            b"1f \r\n0123456789012345678901234567890\r\n0\r\n\r\n",
        ];
        for body in done {
            assert_eq!(scan_at_every_split(body), Ok(Some(body.len())), "{body:?}");
            let mut more = body.to_vec();
            more.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
            assert_eq!(scan_at_every_split(&more), Ok(Some(body.len())));
        }
        let partial: &[&[u8]] = &[b"5\r\nhel", b"0\r\nX: 1\r\n", b"5\r\nhello\r\n"];
        for body in partial {
            assert_eq!(scan_at_every_split(body), Ok(None), "{body:?}");
        }
        let bad: &[&[u8]] = &[b"x\r\n", b"5\r\nhelloX", b"\r\n", b"11111111111111111\r\n"];
        for body in bad {
            assert!(ChunkedScanner::new().feed(body).is_err(), "{body:?}");
        }
        let long = [b'0'; MAX_LINE + 2];
        assert!(ChunkedScanner::new().feed(&long).is_err());
    }

    #[test]
    fn chunk_data_may_be_skipped_unscanned() {
        let mut s = ChunkedScanner::new();
        assert_eq!(s.feed(b"10000\r\n"), Ok(None));
        assert_eq!(s.data_left(), 0x10000);
        s.skipped(0x10000);
        assert_eq!(s.data_left(), 0);
        assert_eq!(s.feed(b"\r\n0\r\n\r\n"), Ok(Some(7)));
        assert!(s.done());
    }
}
