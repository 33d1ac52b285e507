//! evlab-http: everything HTTP about evlab's server, and nothing about sockets.
//!
//! - [`request`]: request heads parsed (httparse underneath) and judged as RFC 9112 asks:
//!   each malformed or hostile head maps to one exact status and a keep-alive decision.
//! - [`response`]: status lines, heads and error responses written into a caller's buffer.
//! - [`date`]: the `Date` header, formatted once per second.
//! - [`path`]: percent-decoding and dot-segment normalisation that never leaves the root.
//! - [`conditional`]: entity tags, preconditions (RFC 9110 §13) and byte ranges (§14).
//! - [`cache`]: the content cache: files under the document root served from memory,
//!   revalidated by stat at most once a second.
//! - [`mime`]: content types by extension.
//! - [`freshness`]: what a shared cache may store and for how long (RFC 9111), safe by default.
//! - [`framing`]: response framing (RFC 9112 §6.3), one copy for the proxy and the load
//!   generator: how a head delimits its body, and where a chunked body ends.
//! - [`proxy`]: what the reverse proxy needs: request heads rewritten for the origin, origin
//!   response heads parsed (framing, reuse, cacheability) and rewritten.

#![deny(clippy::too_many_lines)]

pub mod cache;
pub mod conditional;
pub mod date;
pub mod framing;
pub mod freshness;
pub mod mime;
pub mod path;
pub mod proxy;
pub mod request;
pub mod response;

pub use cache::{CacheConfig, ContentCache, Entry, Lookup};
pub use conditional::{Conditions, Outcome, Validators};
pub use date::DateCache;
pub use framing::{parse_response_framing, ChunkedScanner, Framing, HeadParse, ResponseFraming};
pub use freshness::{CacheInfo, Policy, RequestDirectives, RequestFacts, Reuse, MAX_DELTA_SECONDS};
pub use proxy::{
    parse_response_head, push_via, same_origin_key, write_forward_request, Forward, ForwardError,
    ForwardOptions, ResponseHead, ResponseParse,
};
pub use request::{
    parse_proxy_request, parse_request, Limits, Method, Parse, ProxyParse, ProxyRequest, Request,
    RequestBody, RequestError,
};
pub use response::{start_head, write_error, write_error_with, write_head, Status};
