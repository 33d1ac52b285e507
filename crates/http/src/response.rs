//! Response heads and error responses, written straight into a connection's output buffer.
//!
//! [`write_head`] appends the status line and the headers every response carries —
//! `HTTP/1.<minor> <code> <reason>`, `Server: evlab`, `Date` — then the `Connection` header the
//! request's version calls for (`keep-alive` for a kept HTTP/1.0 connection, `close` for any
//! connection about to close, nothing for a kept HTTP/1.1 one), then the caller's `extra` lines
//! verbatim (a cache entry's precomputed `Content-Type`, `Content-Length` and `Last-Modified`)
//! and the blank line. It is on the hot path of every reply: it reserves once and formats
//! numbers by hand, allocating nothing beyond growing `out`.
//!
//! [`write_error`] appends a whole error response: the same head, `Content-Type: text/html;
//! charset=utf-8`, its `Content-Length` (and `Allow: GET, HEAD` for 405), and a small HTML body
//! naming the status, which is left out for a HEAD request while `Content-Length` still gives
//! its size. 304 Not Modified has neither body nor content headers and is written with
//! `write_head`.
//!
//! A `minor_version` other than 0 is written as 1: evlab speaks HTTP/1.1, and 0 is the only
//! peer version it answers in kind.

/// Every status evlab's server (and proxy) sends.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Ok,
    PartialContent,
    MovedPermanently,
    NotModified,
    BadRequest,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    LengthRequired,
    ContentTooLarge,
    UriTooLong,
    PreconditionFailed,
    RangeNotSatisfiable,
    HeaderFieldsTooLarge,
    InternalServerError,
    NotImplemented,
    /// A proxy's origin answered with something that is not a response, or not at all.
    BadGateway,
    ServiceUnavailable,
    /// A proxy's origin did not answer in time.
    GatewayTimeout,
    VersionNotSupported,
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::PartialContent => 206,
            Status::MovedPermanently => 301,
            Status::NotModified => 304,
            Status::BadRequest => 400,
            Status::Forbidden => 403,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::RequestTimeout => 408,
            Status::LengthRequired => 411,
            Status::ContentTooLarge => 413,
            Status::UriTooLong => 414,
            Status::PreconditionFailed => 412,
            Status::RangeNotSatisfiable => 416,
            Status::HeaderFieldsTooLarge => 431,
            Status::InternalServerError => 500,
            Status::NotImplemented => 501,
            Status::BadGateway => 502,
            Status::ServiceUnavailable => 503,
            Status::GatewayTimeout => 504,
            Status::VersionNotSupported => 505,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::PartialContent => "Partial Content",
            Status::MovedPermanently => "Moved Permanently",
            Status::NotModified => "Not Modified",
            Status::BadRequest => "Bad Request",
            Status::Forbidden => "Forbidden",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::RequestTimeout => "Request Timeout",
            Status::LengthRequired => "Length Required",
            Status::ContentTooLarge => "Content Too Large",
            Status::UriTooLong => "URI Too Long",
            Status::PreconditionFailed => "Precondition Failed",
            Status::RangeNotSatisfiable => "Range Not Satisfiable",
            Status::HeaderFieldsTooLarge => "Request Header Fields Too Large",
            Status::InternalServerError => "Internal Server Error",
            Status::NotImplemented => "Not Implemented",
            Status::BadGateway => "Bad Gateway",
            Status::ServiceUnavailable => "Service Unavailable",
            Status::GatewayTimeout => "Gateway Timeout",
            Status::VersionNotSupported => "HTTP Version Not Supported",
        }
    }
}

/// Appends `n` in decimal without going through `fmt` (which is slow on a hot path).
pub fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Status line, Server, Date and Connection: everything but the caller's headers.
fn push_common(
    out: &mut Vec<u8>,
    status: Status,
    minor_version: u8,
    date: &[u8],
    keep_alive: bool,
) {
    if status == Status::Ok && keep_alive && minor_version != 0 {
        // Nearly every reply: one copy for the status line and the fixed header.
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\nServer: evlab\r\nDate: ");
        out.extend_from_slice(date);
        out.extend_from_slice(b"\r\n");
        return;
    }
    out.extend_from_slice(if minor_version == 0 {
        b"HTTP/1.0 "
    } else {
        b"HTTP/1.1 "
    });
    let code = status.code();
    out.extend_from_slice(&[
        b'0' + (code / 100 % 10) as u8,
        b'0' + (code / 10 % 10) as u8,
        b'0' + (code % 10) as u8,
        b' ',
    ]);
    out.extend_from_slice(status.reason().as_bytes());
    out.extend_from_slice(b"\r\nServer: evlab\r\nDate: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if minor_version == 0 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
}

/// Upper bound of `push_common`'s output besides the date, so `out` grows at most once.
const COMMON_MAX: usize = 9 + 4 + 40 + 24 + 8 + 2 + 24;

/// Appends a response head (see the module doc).
pub fn write_head(
    out: &mut Vec<u8>,
    status: Status,
    minor_version: u8,
    date: &[u8],
    keep_alive: bool,
    extra: &[u8],
) {
    out.reserve(COMMON_MAX + date.len() + extra.len() + 2);
    push_common(out, status, minor_version, date, keep_alive);
    out.extend_from_slice(extra);
    out.extend_from_slice(b"\r\n");
}

/// Appends the start of a response head, as [`write_head`] does before its `extra`: the caller
/// appends its header lines (`more`: how many bytes of them, reserved at once) and the blank line.
pub fn start_head(
    out: &mut Vec<u8>,
    status: Status,
    minor_version: u8,
    date: &[u8],
    keep_alive: bool,
    more: usize,
) {
    out.reserve(COMMON_MAX + date.len() + more + 2);
    push_common(out, status, minor_version, date, keep_alive);
}

const BODY_PARTS: [&[u8]; 3] = [
    b"<html><head><title>",
    b"</title></head><body><h1>",
    b"</h1></body></html>\n",
];

/// Appends a whole error response (see the module doc).
pub fn write_error(
    out: &mut Vec<u8>,
    status: Status,
    minor_version: u8,
    date: &[u8],
    keep_alive: bool,
    head_only: bool,
) {
    write_error_with(out, status, minor_version, date, keep_alive, head_only, b"");
}

/// [`write_error`] with the caller's header lines (each ending in CRLF) after the content
/// headers: a 416's `Content-Range`, a 301's `Location`.
pub fn write_error_with(
    out: &mut Vec<u8>,
    status: Status,
    minor_version: u8,
    date: &[u8],
    keep_alive: bool,
    head_only: bool,
    extra: &[u8],
) {
    let reason = status.reason().as_bytes();
    // "<code> <reason>" appears twice in the body.
    let title_len = 4 + reason.len();
    let body_len = BODY_PARTS.iter().map(|p| p.len()).sum::<usize>() + 2 * title_len;
    out.reserve(COMMON_MAX + date.len() + 128 + body_len + extra.len());
    push_common(out, status, minor_version, date, keep_alive);
    out.extend_from_slice(b"Content-Type: text/html; charset=utf-8\r\nContent-Length: ");
    push_decimal(out, body_len as u64);
    out.extend_from_slice(b"\r\n");
    if status == Status::MethodNotAllowed {
        out.extend_from_slice(b"Allow: GET, HEAD\r\n");
    }
    out.extend_from_slice(extra);
    out.extend_from_slice(b"\r\n");
    if head_only {
        return;
    }
    let mut title = [0u8; 4];
    let code = status.code();
    title[0] = b'0' + (code / 100 % 10) as u8;
    title[1] = b'0' + (code / 10 % 10) as u8;
    title[2] = b'0' + (code % 10) as u8;
    title[3] = b' ';
    out.extend_from_slice(BODY_PARTS[0]);
    out.extend_from_slice(&title);
    out.extend_from_slice(reason);
    out.extend_from_slice(BODY_PARTS[1]);
    out.extend_from_slice(&title);
    out.extend_from_slice(reason);
    out.extend_from_slice(BODY_PARTS[2]);
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";

    fn head(status: Status, minor: u8, ka: bool, extra: &[u8]) -> String {
        let mut out = Vec::new();
        write_head(&mut out, status, minor, DATE, ka, extra);
        String::from_utf8(out).unwrap()
    }

    fn error(status: Status, minor: u8, ka: bool, head_only: bool) -> String {
        let mut out = Vec::new();
        write_error(&mut out, status, minor, DATE, ka, head_only);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn head_connection_rules() {
        assert_eq!(
            head(Status::Ok, 1, true, b""),
            "HTTP/1.1 200 OK\r\nServer: evlab\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n"
        );
        assert_eq!(
            head(Status::Ok, 0, true, b""),
            "HTTP/1.0 200 OK\r\nServer: evlab\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
             Connection: keep-alive\r\n\r\n"
        );
        assert_eq!(
            head(Status::Ok, 1, false, b""),
            "HTTP/1.1 200 OK\r\nServer: evlab\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
             Connection: close\r\n\r\n"
        );
        assert_eq!(
            head(Status::Ok, 0, false, b""),
            "HTTP/1.0 200 OK\r\nServer: evlab\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
             Connection: close\r\n\r\n"
        );
    }

    #[test]
    fn head_with_extra_and_304() {
        let extra = b"Content-Type: text/plain; charset=utf-8\r\nContent-Length: 1\r\n\
                      Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n";
        assert_eq!(
            head(Status::Ok, 1, true, extra),
            "HTTP/1.1 200 OK\r\nServer: evlab\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
             Content-Type: text/plain; charset=utf-8\r\nContent-Length: 1\r\n\
             Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n"
        );
        assert_eq!(
            head(Status::NotModified, 1, true, b""),
            "HTTP/1.1 304 Not Modified\r\nServer: evlab\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n"
        );
    }

    #[test]
    fn appends_without_clobbering() {
        let mut out = b"previous".to_vec();
        write_head(&mut out, Status::Ok, 1, DATE, true, b"");
        assert!(out.starts_with(b"previousHTTP/1.1 200 OK\r\n"));
    }

    #[test]
    fn error_404_exact() {
        let body = "<html><head><title>404 Not Found</title></head><body><h1>404 Not Found</h1></body></html>\n";
        let want = format!(
            "HTTP/1.1 404 Not Found\r\nServer: evlab\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
             Content-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        assert_eq!(body.len(), 90);
        assert_eq!(error(Status::NotFound, 1, true, false), want);
    }

    #[test]
    fn error_head_only_keeps_length() {
        assert_eq!(
            error(Status::NotFound, 0, false, true),
            "HTTP/1.0 404 Not Found\r\nServer: evlab\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
             Connection: close\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 90\r\n\r\n"
        );
    }

    #[test]
    fn error_405_has_allow() {
        let body = "<html><head><title>405 Method Not Allowed</title></head><body><h1>405 Method Not Allowed</h1></body></html>\n";
        let want = format!(
            "HTTP/1.1 405 Method Not Allowed\r\nServer: evlab\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
             Content-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nAllow: GET, HEAD\r\n\r\n{body}",
            body.len()
        );
        assert_eq!(error(Status::MethodNotAllowed, 1, true, false), want);
    }

    #[test]
    fn every_error_length_matches_body() {
        let all = [
            Status::MovedPermanently,
            Status::PreconditionFailed,
            Status::RangeNotSatisfiable,
            Status::BadRequest,
            Status::Forbidden,
            Status::NotFound,
            Status::MethodNotAllowed,
            Status::RequestTimeout,
            Status::LengthRequired,
            Status::ContentTooLarge,
            Status::UriTooLong,
            Status::HeaderFieldsTooLarge,
            Status::InternalServerError,
            Status::NotImplemented,
            Status::BadGateway,
            Status::ServiceUnavailable,
            Status::GatewayTimeout,
            Status::VersionNotSupported,
        ];
        for s in all {
            let text = error(s, 1, false, false);
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            let cl: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(cl, body.len(), "{s:?}");
            let title = format!("{} {}", s.code(), s.reason());
            assert!(body.contains(&format!("<title>{title}</title>")), "{s:?}");
            assert!(head.starts_with(&format!("HTTP/1.1 {title}\r\n")));
        }
    }

    #[test]
    fn new_statuses_and_extra_lines() {
        let rows = [
            (Status::PartialContent, 206, "Partial Content"),
            (Status::MovedPermanently, 301, "Moved Permanently"),
            (Status::PreconditionFailed, 412, "Precondition Failed"),
            (Status::RangeNotSatisfiable, 416, "Range Not Satisfiable"),
        ];
        for (s, code, reason) in rows {
            assert_eq!((s.code(), s.reason()), (code, reason));
        }
        let mut out = Vec::new();
        write_error_with(
            &mut out,
            Status::RangeNotSatisfiable,
            1,
            DATE,
            true,
            true,
            b"Content-Range: bytes */10\r\n",
        );
        assert!(String::from_utf8(out)
            .unwrap()
            .ends_with("\r\nContent-Range: bytes */10\r\n\r\n"));
    }

    #[test]
    fn decimal() {
        for n in [0u64, 7, 10, 91, 1234567890, u64::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }
}
