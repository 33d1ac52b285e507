//! What a reverse proxy needs of HTTP/1.1, and nothing about sockets:
//!
//! - [`write_forward_request`]: a request head, already judged by
//!   [`parse_request`](crate::parse_request), rewritten for the origin: the target in origin
//!   form, the hop-by-hop fields (RFC 9110 §7.6.1) dropped, the client's version kept (so an
//!   HTTP/1.0 client's request never brings back a chunked body it could not read).
//! - [`parse_response_head`]: an origin's response head, its framing (RFC 9112 §6.3), whether
//!   the origin keeps the connection, what a shared cache needs to know
//!   ([`crate::freshness`]), and the head rewritten for the client in the same pass.
//!
//! Response framing (RFC 9112 §6.3) and the chunked scanner are [`crate::framing`]'s: an error
//! there is the proxy's 502, and the connection closed; a suspect head
//! ([`ResponseHead::suspect`]) is neither reused nor cached.

use std::borrow::Cow;
use std::time::SystemTime;

use std::mem::MaybeUninit;

use crate::framing::{parse_head, Framing, HeadParse, Reading, MAX_RESPONSE_FIELDS};
use crate::freshness::{parse_date, tokens, CacheInfo, RequestDirectives};

/// Most header fields in a request head forwarded.
const MAX_HEADERS: usize = 100;

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
    /// The head is framed, but not beyond doubt ([`ResponseFraming::suspect`]): the connection
    /// must not carry another exchange and the response must not be cached.
    ///
    /// [`ResponseFraming::suspect`]: crate::framing::ResponseFraming::suspect
    pub suspect: bool,
}

/// What [`parse_response_head`] found.
pub type ResponseParse = HeadParse<ResponseHead>;

/// Fields that frame a message or route it: never dropped because a `Connection` field names
/// them (dropping them would change where a body ends, or where a request goes).
fn framing_or_routing(name: &[u8]) -> bool {
    [&b"content-length"[..], b"transfer-encoding", b"host"]
        .iter()
        .any(|f| f.eq_ignore_ascii_case(name))
}

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

/// Names listed in `Connection` fields: hop-by-hop too (RFC 9110 §7.6.1), except the fields
/// that frame or route a message (see [`framing_or_routing`]).
fn listed_in_connection(headers: &[httparse::Header<'_>], name: &str) -> bool {
    !framing_or_routing(name.as_bytes())
        && headers
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

/// Parses the response head at the start of `buf`. `head_request`: it answers a HEAD (no body
/// whatever the fields say). `http10_client`: the response goes to an HTTP/1.0 client, which
/// cannot read a transfer coding, so `Transfer-Encoding` is not passed on (the caller removes
/// the chunked framing from the body; a response with any other transfer coding is an error).
/// On `Complete`, appends to `rewritten` the head for the client without its final blank
/// line: `HTTP/1.1 <code> <reason>` and the end-to-end fields, so the caller can add its own
/// (`Connection`, say) and the blank line.
pub fn parse_response_head(
    buf: &[u8],
    head_request: bool,
    http10_client: bool,
    rewritten: &mut Vec<u8>,
) -> ResponseParse {
    let mut fields = [MaybeUninit::uninit(); MAX_RESPONSE_FIELDS];
    let mut cache = CacheInfo::default();
    let mut last_modified = None;
    let reading = Reading {
        head_request,
        http10_client,
        // A proxy may refuse obs-fold with a 502 (RFC 9112 §5.2), and does.
        unfold: false,
    };
    let other = |name: &str, value: &[u8]| {
        if name.eq_ignore_ascii_case("last-modified") {
            last_modified = parse_date(value);
        } else {
            cache.field(name, value);
        }
    };
    let head = match parse_head(buf, reading, &mut fields, other) {
        HeadParse::Complete(head) => head,
        HeadParse::Partial => return HeadParse::Partial,
        HeadParse::Interim(n) => return HeadParse::Interim(n),
        HeadParse::Error(e) => return HeadParse::Error(e),
    };
    let f = head.framing;
    rewrite_head(
        rewritten,
        (f.status, head.reason, f.head_len),
        head.fields,
        http10_client,
    );
    HeadParse::Complete(ResponseHead {
        status: f.status,
        minor_version: f.minor_version,
        head_len: f.head_len,
        framing: f.framing,
        keep_alive: f.keep_alive,
        content_length: f.content_length,
        last_modified,
        cache,
        suspect: f.suspect,
    })
}

/// Appends the head for the client: `HTTP/1.1 <status> <reason>` and the end-to-end `fields`
/// (for an HTTP/1.0 client, no `Transfer-Encoding`), without the final blank line.
fn rewrite_head(
    out: &mut Vec<u8>,
    (status, reason, head_len): (u16, &str, usize),
    fields: &[httparse::Header<'_>],
    http10_client: bool,
) {
    out.reserve(head_len + 32);
    out.extend_from_slice(b"HTTP/1.1 ");
    crate::response::push_decimal(out, u64::from(status));
    out.push(b' ');
    out.extend_from_slice(reason.as_bytes());
    out.extend_from_slice(b"\r\n");
    for h in fields {
        if hop_by_hop(h.name) || listed_in_connection(fields, h.name) {
            continue;
        }
        if http10_client && h.name.eq_ignore_ascii_case("transfer-encoding") {
            continue;
        }
        push_field(out, h);
    }
}

/// Appends the proxy's own `Via` field line to a message it forwards, request or response
/// (RFC 9110 §7.6.3: a proxy MUST send one in each direction), with the protocol version the
/// message was received in (`minor`: HTTP/1.`minor`); a field line of its own is the same as
/// appending to any `Via` the message carried.
pub fn push_via(out: &mut Vec<u8>, minor: u8, pseudonym: &str) {
    out.extend_from_slice(if minor == 0 {
        b"Via: 1.0 "
    } else {
        b"Via: 1.1 "
    });
    out.extend_from_slice(pseudonym.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// What [`write_forward_request`] learnt of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forward<'a> {
    /// The target in origin form (`/path?query`): what was sent.
    pub target: Cow<'a, str>,
    /// What the response may be cached under: scheme, host (lower-cased, without the scheme's
    /// default port) and the target in origin form, so that one host's answer is never served
    /// for another's.
    pub key: String,
    pub head_request: bool,
    /// Carries credentials: a shared cache does not answer it, and stores its answer only
    /// when the answer says so (RFC 9111 §3.5; [`crate::freshness`]).
    pub authorization: bool,
    /// Carries a `Cookie`: its answer is stored only with explicit shared freshness.
    pub cookie: bool,
    /// What the request's `Cache-Control` (and `Pragma`) asks of a cache.
    pub directives: RequestDirectives,
    /// The request carries a precondition of its own (`If-None-Match`, `If-Modified-Since`,
    /// `If-Match`, `If-Unmodified-Since`, `If-Range`): a cache passes it on as it is rather
    /// than validate its stored response for it.
    pub conditional: bool,
    /// Its `If-None-Match`, the first if several.
    pub if_none_match: Option<&'a [u8]>,
}

/// What the proxy adds to or replaces in every request it forwards.
#[derive(Copy, Clone, Debug, Default)]
pub struct ForwardOptions<'o> {
    /// Sent as `Host` instead of the client's (`--origin-host`).
    pub origin_host: Option<&'o str>,
    /// The proxy's pseudonym in `Via` (RFC 9110 §7.6.3); none: no `Via` added.
    pub via: Option<&'o str>,
    /// The client's address, appended to `X-Forwarded-For` (the client's fields, joined
    /// into one in their order) or sent as a new one; none: the client's fields pass as they
    /// are.
    pub forwarded_for: Option<&'o str>,
    /// The proxy answers `Expect: 100-continue` itself: that expectation is not forwarded.
    pub drop_expect_continue: bool,
}

/// Why a request cannot be forwarded (the proxy answers 400).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ForwardError {
    /// Not a complete head, or a target that is neither origin-form nor http(s) absolute-form.
    Malformed,
    /// More than one `Host`.
    Hosts,
    /// The absolute-form target names another authority than `Host` (RFC 9112 §3.2.2 lets a
    /// server ignore `Host` then; a proxy that caches must not let the two disagree).
    HostMismatch,
}

/// Rewrites a request head for the origin and appends it to `out`: the request line with the
/// target in origin form and the client's HTTP version, `Host` first (the `--origin-host` if
/// given, else the client's, else the absolute-form target's authority), every other
/// end-to-end field, `Via`, and for an HTTP/1.0 client `Connection: keep-alive` (the proxy
/// keeps its origin connections). `head` must be a complete head that
/// [`parse_request`](crate::parse_request) accepted.
pub fn write_forward_request<'a>(
    head: &'a [u8],
    opts: &ForwardOptions<'_>,
    out: &mut Vec<u8>,
) -> Result<Forward<'a>, ForwardError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(ForwardError::Malformed),
    }
    let (Some(method), Some(raw_target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(ForwardError::Malformed);
    };
    let (scheme, authority, target) = split_target(raw_target).ok_or(ForwardError::Malformed)?;
    let fields: &[httparse::Header<'a>] = req.headers;
    let mut hosts = fields
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("host"));
    let host = hosts.next().map(|h| h.value);
    if hosts.next().is_some() {
        return Err(ForwardError::Hosts);
    }
    let key = cache_key(scheme, authority, host, &target)?;
    out.reserve(head.len() + 64);
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(if minor == 0 {
        b" HTTP/1.0\r\n"
    } else {
        b" HTTP/1.1\r\n"
    });
    let host_out = opts
        .origin_host
        .map(str::as_bytes)
        .or(host)
        .or(authority.map(str::as_bytes));
    if let Some(h) = host_out {
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(h);
        out.extend_from_slice(b"\r\n");
    }
    let mut authorization = false;
    let mut cookie = false;
    let mut directives = RequestDirectives::default();
    let mut conditional = false;
    let mut if_none_match = None;
    let mut xff: Option<Vec<u8>> = None;
    for h in fields {
        if h.name.eq_ignore_ascii_case("host")
            || hop_by_hop(h.name)
            || listed_in_connection(fields, h.name)
        {
            continue;
        }
        if opts.forwarded_for.is_some() && h.name.eq_ignore_ascii_case("x-forwarded-for") {
            let v = h.value.trim_ascii();
            if !v.is_empty() {
                let acc = xff.get_or_insert_with(Vec::new);
                if !acc.is_empty() {
                    acc.extend_from_slice(b", ");
                }
                acc.extend_from_slice(v);
            }
            continue;
        }
        if opts.drop_expect_continue
            && h.name.eq_ignore_ascii_case("expect")
            && h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue")
        {
            continue;
        }
        if h.name.eq_ignore_ascii_case("authorization") {
            authorization = true;
        } else if h.name.eq_ignore_ascii_case("cookie") {
            cookie = true;
        } else if directives.field(h.name, h.value) {
        } else if h.name.len() > 3 && h.name.as_bytes()[..3].eq_ignore_ascii_case(b"if-") {
            conditional = true;
            if h.name.eq_ignore_ascii_case("if-none-match") && if_none_match.is_none() {
                if_none_match = Some(h.value);
            }
        }
        push_field(out, h);
    }
    end_forward(out, opts, xff, minor);
    Ok(Forward {
        target,
        key,
        head_request: method == "HEAD",
        authorization,
        cookie,
        directives,
        conditional,
        if_none_match,
    })
}

/// The cache key of the URI `reference` (a `Location` or `Content-Location` value) resolved
/// against the request whose key is `base` (RFC 3986 §5.2: absolute, network-path,
/// absolute-path or relative), if it names the same origin (scheme and authority): a cache may
/// invalidate only those (RFC 9111 §4.4).
pub fn same_origin_key(base: &str, reference: &[u8]) -> Option<String> {
    let reference = std::str::from_utf8(reference).ok()?.trim();
    let (scheme, rest) = base.split_once("://")?;
    let path_at = rest.find('/').unwrap_or(rest.len());
    let (origin, base_path) = (&base[..scheme.len() + 3 + path_at], &rest[path_at..]);
    let path = if reference.contains("://") {
        let (s, authority, target) = split_target(reference)?;
        let candidate = format!("{s}://{}", normalise_authority(authority?.as_bytes(), s));
        if candidate != origin {
            return None;
        }
        target.into_owned()
    } else if let Some(net) = reference.strip_prefix("//") {
        return same_origin_key(base, format!("{scheme}://{net}").as_bytes());
    } else if reference.starts_with('/') {
        reference.to_string()
    } else if reference.is_empty() || reference.starts_with('#') {
        base_path.to_string()
    } else if reference.starts_with('?') {
        let p = base_path.split('?').next().unwrap_or("/");
        format!("{p}{reference}")
    } else {
        let dir = base_path.split('?').next().unwrap_or("/");
        let dir = &dir[..dir.rfind('/').map_or(0, |i| i + 1)];
        format!("{dir}{reference}")
    };
    let path = path.split('#').next().unwrap_or("");
    let (p, q) = match path.find('?') {
        Some(i) => (&path[..i], &path[i..]),
        None => (path, ""),
    };
    Some(format!("{origin}{}{q}", remove_dot_segments(p)))
}

/// RFC 3986 §5.2.4, on a path that starts with `/`.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segs: Vec<&str> = path.split('/').skip(1).collect();
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        match *seg {
            "." => {
                if last {
                    out.push("");
                }
            }
            ".." => {
                out.pop();
                if last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}

/// The cache key of a request: scheme, host (the absolute-form target's authority, which must
/// agree with `Host`, or `Host`), normalised, and the target in origin form.
fn cache_key(
    scheme: &str,
    authority: Option<&str>,
    host: Option<&[u8]>,
    target: &str,
) -> Result<String, ForwardError> {
    let key_host = match (authority, host) {
        (Some(a), Some(h)) => {
            let a = normalise_authority(a.as_bytes(), scheme);
            if a != normalise_authority(h, scheme) {
                return Err(ForwardError::HostMismatch);
            }
            a
        }
        (Some(a), None) => normalise_authority(a.as_bytes(), scheme),
        (None, Some(h)) => normalise_authority(h, scheme),
        (None, None) => String::new(),
    };
    Ok(format!("{scheme}://{key_host}{target}"))
}

/// Ends a request head for the origin: the client's address appended to `X-Forwarded-For`
/// (`xff`: what the client's own fields said), the proxy's `Via`, `Connection: keep-alive` for
/// HTTP/1.0, and the blank line.
fn end_forward(out: &mut Vec<u8>, opts: &ForwardOptions<'_>, xff: Option<Vec<u8>>, minor: u8) {
    if let Some(client) = opts.forwarded_for {
        out.extend_from_slice(b"X-Forwarded-For: ");
        if let Some(earlier) = xff {
            out.extend_from_slice(&earlier);
            out.extend_from_slice(b", ");
        }
        out.extend_from_slice(client.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if let Some(via) = opts.via {
        push_via(out, minor, via);
    }
    if minor == 0 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// A target's scheme (lower case; `http` for origin-form), its authority if absolute-form,
/// and the target in origin form; the fragment, which a client should not send, is dropped.
fn split_target(target: &str) -> Option<(&'static str, Option<&str>, Cow<'_, str>)> {
    let cut = |s: &str| s.find('#').map_or(s.len(), |i| i);
    if target.starts_with('/') {
        return Some(("http", None, Cow::Borrowed(&target[..cut(target)])));
    }
    let (scheme, rest) = target.split_once("://")?;
    let scheme = if scheme.eq_ignore_ascii_case("http") {
        "http"
    } else if scheme.eq_ignore_ascii_case("https") {
        "https"
    } else {
        return None;
    };
    let start = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..start];
    let after = &rest[start..];
    let after = &after[..cut(after)];
    let target = if after.starts_with('/') {
        Cow::Borrowed(after)
    } else {
        // An empty path means "/" (RFC 9112 §3.2.1); a query may follow.
        Cow::Owned(format!("/{after}"))
    };
    Some((scheme, Some(authority), target))
}

/// `host[:port]` as a cache compares it: lower case, without the scheme's default port (or an
/// empty one), so `Example.COM:80` and `example.com` are one host for http.
fn normalise_authority(a: &[u8], scheme: &str) -> String {
    let a = String::from_utf8_lossy(a.trim_ascii()).to_ascii_lowercase();
    // The port follows the last ':' that is not inside an IPv6 literal.
    let port_at = match a.rfind(']') {
        Some(b) => a[b..].rfind(':').map(|i| b + i),
        None => a.rfind(':'),
    };
    let Some(i) = port_at else {
        return a;
    };
    let port = &a[i + 1..];
    let default = if scheme == "https" { "443" } else { "80" };
    if port.is_empty() || port.trim_start_matches('0') == default {
        a[..i].to_string()
    } else {
        a
    }
}

#[cfg(test)]
mod tests;
