//! Request-head parsing. SPEC FOR THE IMPLEMENTER (replace `todo!()`s, keep signatures):
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
//!   without colon, whitespace before colon, obs-fold, control chars, too many headers > 64): 400, close.
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
//! - Every error with `keep_alive == false` has `consumed` = 0 (the caller closes anyway).
//!
//! Performance: no heap allocation for a plain request (`Cow::Borrowed` path when nothing to
//! decode or normalise). This runs once per request on the server's hot path.

use std::borrow::Cow;
use std::time::SystemTime;

use crate::response::Status;

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
    /// Bytes of the head, to consume.
    pub head_len: usize,
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
    let _ = (buf, limits, Status::BadRequest);
    todo!()
}
