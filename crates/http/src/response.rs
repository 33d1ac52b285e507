//! Response heads and error responses. SPEC FOR THE IMPLEMENTER (keep signatures).
//!
//! `write_head` appends a status line and the common headers to `out`:
//!   `HTTP/1.<minor> <code> <reason>\r\nServer: evlab\r\nDate: <date>\r\n` then
//!   `Connection: keep-alive\r\n` when keep_alive and minor == 0, `Connection: close\r\n` when
//!   !keep_alive, nothing when keep_alive and minor == 1; then `extra` verbatim (the entry's
//!   precomputed `Content-Type/Content-Length/Last-Modified/...` lines), then the final `\r\n`.
//!   No allocation beyond growing `out`; use itoa-free manual formatting (it is hot).
//! `write_error` appends a complete error response: head as above plus
//!   `Content-Type: text/html; charset=utf-8\r\nContent-Length: N\r\n` (+ `Allow: GET, HEAD\r\n`
//!   for 405) and a tiny HTML body (`<html><head><title>404 Not Found</title></head><body><h1>404
//!   Not Found</h1></body></html>\n`) unless head_only (the Content-Length still says N).
//!   304 Not Modified has no body and no Content-Length/Content-Type: write it with `write_head`.

/// Every status evlab's server sends.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Ok,
    NotModified,
    BadRequest,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    LengthRequired,
    ContentTooLarge,
    UriTooLong,
    HeaderFieldsTooLarge,
    InternalServerError,
    NotImplemented,
    ServiceUnavailable,
    VersionNotSupported,
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::NotModified => 304,
            Status::BadRequest => 400,
            Status::Forbidden => 403,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::RequestTimeout => 408,
            Status::LengthRequired => 411,
            Status::ContentTooLarge => 413,
            Status::UriTooLong => 414,
            Status::HeaderFieldsTooLarge => 431,
            Status::InternalServerError => 500,
            Status::NotImplemented => 501,
            Status::ServiceUnavailable => 503,
            Status::VersionNotSupported => 505,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::NotModified => "Not Modified",
            Status::BadRequest => "Bad Request",
            Status::Forbidden => "Forbidden",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::RequestTimeout => "Request Timeout",
            Status::LengthRequired => "Length Required",
            Status::ContentTooLarge => "Content Too Large",
            Status::UriTooLong => "URI Too Long",
            Status::HeaderFieldsTooLarge => "Request Header Fields Too Large",
            Status::InternalServerError => "Internal Server Error",
            Status::NotImplemented => "Not Implemented",
            Status::ServiceUnavailable => "Service Unavailable",
            Status::VersionNotSupported => "HTTP Version Not Supported",
        }
    }
}

/// Appends a response head (see the module doc).
pub fn write_head(
    out: &mut Vec<u8>,
    status: Status,
    minor_version: u8,
    date: &[u8],
    keep_alive: bool,
    extra: &[u8],
) {
    let _ = (out, status, minor_version, date, keep_alive, extra);
    todo!()
}

/// Appends a whole error response (see the module doc).
pub fn write_error(
    out: &mut Vec<u8>,
    status: Status,
    minor_version: u8,
    date: &[u8],
    keep_alive: bool,
    head_only: bool,
) {
    let _ = (out, status, minor_version, date, keep_alive, head_only);
    todo!()
}
