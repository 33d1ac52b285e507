//! HTTP/1.1 response framing (RFC 9112 §6.3, §7.1), one copy for whoever reads responses: how
//! a head's fields delimit its body ([`Framing`]), and where a chunked body ends
//! ([`ChunkedScanner`]).
//!
//! Response framing, in the order RFC 9112 §6.3 gives it: no body for a HEAD request, 1xx, 204
//! and 304; `Transfer-Encoding` whose final coding is `chunked`: chunked; any other
//! `Transfer-Encoding`: until the server closes; a valid `Content-Length`: that many bytes;
//! otherwise until close. A body delimited by close never leaves the connection reusable.
//!
//! Ambiguous framing is how responses are smuggled past a proxy (one party reads a body where
//! another reads the next response), so it is refused as nginx refuses it: `Transfer-Encoding`
//! together with `Content-Length`, `Content-Length` given more than once (even with equal
//! values), or an invalid one, is an error. A `Connection` field that names `Content-Length` or
//! `Transfer-Encoding` does not remove them (nginx and HAProxy keep framing fields whatever
//! `Connection` says), but the response is suspect: its connection is not reused.

use crate::freshness::{parse_u64, tokens};
use crate::path::hex;

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

/// Largest response head accepted.
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Most header fields in a response head accepted.
pub(crate) const MAX_RESPONSE_FIELDS: usize = 100;

/// What reading a response head at the start of a buffer found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeadParse<H> {
    /// No complete head yet.
    Partial,
    /// An interim (1xx other than 101) response of this many bytes: skip it, the real one follows.
    Interim(usize),
    Complete(H),
    /// Not a response that can be read; the reason, for logs and tests.
    Error(&'static str),
}

impl<H> HeadParse<H> {
    /// The same answer with a complete head's `H` made into another.
    #[inline]
    pub fn map<G>(self, f: impl FnOnce(H) -> G) -> HeadParse<G> {
        match self {
            HeadParse::Partial => HeadParse::Partial,
            HeadParse::Interim(n) => HeadParse::Interim(n),
            HeadParse::Complete(h) => HeadParse::Complete(f(h)),
            HeadParse::Error(e) => HeadParse::Error(e),
        }
    }
}

/// A complete response head's status and framing, and nothing else of it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ResponseFraming {
    pub status: u16,
    pub minor_version: u8,
    /// Bytes of the head (any empty lines before the status line, the status line, the fields,
    /// the blank line).
    pub head_len: usize,
    pub framing: Framing,
    /// The server keeps the connection open after this response: neither `Connection: close`
    /// nor HTTP/1.0 without `keep-alive`, a body not delimited by close, and not suspect.
    pub keep_alive: bool,
    /// The `Content-Length` given (also for HEAD and 304, where it describes the would-be body).
    pub content_length: Option<u64>,
    /// The head is framed, but not beyond doubt: a `Connection` field names a framing field, or
    /// an HTTP/1.0 response has `Transfer-Encoding` (RFC 9112 §6.1: the framing is faulty). The
    /// connection must not carry another exchange, and a cache must not store the response.
    pub suspect: bool,
}

/// Reads the response head at the start of `buf` as a user agent does, for its framing only: the
/// load generator reads every response with it. `head_request`: it answers a HEAD (no body
/// whatever the fields say). Copies and allocates nothing; fields other than `Content-Length`,
/// `Transfer-Encoding` and `Connection` are checked for syntax and otherwise ignored.
///
/// As a user agent must (RFC 9112 §5.2), it takes a field folded onto a next line (obs-fold) as
/// one value, where the proxy's [`parse_response_head`](crate::parse_response_head) answers 502
/// as a proxy may.
pub fn parse_response_framing(buf: &[u8], head_request: bool) -> HeadParse<ResponseFraming> {
    let mut fields = [std::mem::MaybeUninit::uninit(); MAX_RESPONSE_FIELDS];
    let reading = Reading {
        head_request,
        http10_client: false,
        unfold: true,
    };
    parse_head(buf, reading, &mut fields, |_, _| {}).map(|h| h.framing)
}

/// How a head is to be read: for [`parse_head`].
#[derive(Copy, Clone, Debug)]
pub(crate) struct Reading {
    /// It answers a HEAD request.
    pub(crate) head_request: bool,
    /// It goes on to an HTTP/1.0 client, which cannot read a transfer coding other than
    /// chunked (that the proxy removes): any other is an error.
    pub(crate) http10_client: bool,
    /// Obsolete line folding is taken as a user agent must (RFC 9112 §5.2); else an error.
    pub(crate) unfold: bool,
}

/// A complete head: its framing, and for a caller that wants more of it, its reason phrase and
/// its fields.
pub(crate) struct Head<'h, 'b> {
    pub(crate) framing: ResponseFraming,
    pub(crate) reason: &'b str,
    pub(crate) fields: &'h [httparse::Header<'b>],
}

/// Parses the response head at the start of `buf` into `fields`, with its framing; each field
/// that does not frame the body (nor says whether the connection stays) is given to `other`.
/// The one response-head parser of both [`parse_response_framing`] and the proxy's
/// [`parse_response_head`](crate::parse_response_head).
#[inline]
pub(crate) fn parse_head<'h, 'b>(
    buf: &'b [u8],
    reading: Reading,
    fields: &'h mut [std::mem::MaybeUninit<httparse::Header<'b>>],
    mut other: impl FnMut(&'b str, &'b [u8]),
) -> HeadParse<Head<'h, 'b>> {
    let window = &buf[..buf.len().min(MAX_RESPONSE_HEAD)];
    let mut resp = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default()
        .allow_obsolete_multiline_headers_in_responses(reading.unfold)
        .parse_response_with_uninit_headers(&mut resp, window, fields);
    let head_len = match parsed {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_RESPONSE_HEAD => {
            return HeadParse::Error("response head too large")
        }
        Ok(httparse::Status::Partial) => return HeadParse::Partial,
        Err(httparse::Error::TooManyHeaders) => {
            return HeadParse::Error("too many response header fields")
        }
        Err(_) => return HeadParse::Error("malformed response head"),
    };
    let httparse::Response {
        version,
        code,
        reason,
        headers,
    } = resp;
    let (Some(status), Some(minor)) = (code, version) else {
        return HeadParse::Error("malformed status line");
    };
    // httparse takes any three digits; RFC 9110 §15 defines 100 to 999.
    if !(100..=999).contains(&status) {
        return HeadParse::Error("status code outside 100..=999");
    }
    if status == 101 {
        return HeadParse::Error("101 Switching Protocols was not asked for");
    }
    if (100..200).contains(&status) {
        return HeadParse::Interim(head_len);
    }
    let fields: &'h [httparse::Header<'b>] = headers;
    let mut f = FramingFields {
        only_chunked: true,
        close: minor == 0,
        ..FramingFields::default()
    };
    for h in fields {
        if !f.field(h.name, h.value, minor) {
            other(h.name, h.value);
        }
    }
    let no_body = reading.head_request || status == 204 || status == 304;
    let framing = match f.framing(no_body, reading.http10_client) {
        Ok(framing) => framing,
        Err(e) => return HeadParse::Error(e),
    };
    HeadParse::Complete(Head {
        framing: ResponseFraming {
            status,
            minor_version: minor,
            head_len,
            framing,
            keep_alive: !f.close && !f.suspect && framing != Framing::UntilClose,
            content_length: f.content_length,
            suspect: f.suspect,
        },
        reason: reason.unwrap_or(""),
        fields,
    })
}

/// What a response's framing and connection fields say (RFC 9112 §6.3, §9.3).
#[derive(Default)]
struct FramingFields {
    content_length: Option<u64>,
    length_fields: usize,
    length_error: bool,
    transfer_encoding: bool,
    chunked_final: bool,
    only_chunked: bool,
    close: bool,
    suspect: bool,
}

impl FramingFields {
    /// Takes a `Content-Length`, `Transfer-Encoding` or `Connection` field into account
    /// (false: not one of them). `minor`: the response's HTTP/1.`minor`.
    fn field(&mut self, name: &str, value: &[u8], minor: u8) -> bool {
        if name.eq_ignore_ascii_case("content-length") {
            for t in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                self.length_fields += 1;
                match parse_u64(t) {
                    None => self.length_error = true,
                    Some(v) => self.content_length = Some(v),
                }
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            self.transfer_encoding = true;
            // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding is read as framed, then
            // the connection closed (the sender may have meant something else by it).
            self.suspect |= minor == 0;
            for t in tokens(value) {
                self.chunked_final = t.eq_ignore_ascii_case(b"chunked");
                self.only_chunked &= self.chunked_final;
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for t in tokens(value) {
                if t.eq_ignore_ascii_case(b"close") {
                    self.close = true;
                } else if t.eq_ignore_ascii_case(b"keep-alive") && minor == 0 {
                    self.close = false;
                } else if t.eq_ignore_ascii_case(b"content-length")
                    || t.eq_ignore_ascii_case(b"transfer-encoding")
                {
                    self.suspect = true;
                }
            }
        } else {
            return false;
        }
        true
    }

    /// How the body is delimited, or why the response cannot be passed on (ambiguous framing,
    /// or a transfer coding an HTTP/1.0 client cannot read).
    fn framing(&self, no_body: bool, http10_client: bool) -> Result<Framing, &'static str> {
        if self.transfer_encoding && self.length_fields > 0 {
            return Err("Transfer-Encoding together with Content-Length");
        }
        if self.length_fields > 1 {
            return Err("Content-Length given more than once");
        }
        if self.length_error {
            return Err("invalid Content-Length");
        }
        Ok(if no_body {
            Framing::None
        } else if self.transfer_encoding {
            if http10_client && !self.only_chunked {
                return Err("a transfer coding an HTTP/1.0 client cannot read");
            }
            if self.chunked_final {
                Framing::Chunked
            } else {
                Framing::UntilClose
            }
        } else if let Some(l) = self.content_length {
            Framing::Length(l)
        } else {
            Framing::UntilClose
        })
    }
}

/// Finds where a chunked body ends while its bytes pass through unchanged (the proxy forwards
/// chunk framing as it came). Chunk-size lines, chunk extensions and trailer lines are each
/// limited to 4 KiB, and trailers to 64 KiB in all.
#[derive(Clone, Debug, Default)]
pub struct ChunkedScanner {
    state: Chunk,
    /// Request bodies ([`ChunkedScanner::strict`]): every line ends in CRLF, nothing but
    /// whitespace between the size and `;`, no control characters in extensions or trailers.
    strict: bool,
    /// Bytes of the current line (size line or trailer line).
    line: usize,
    trailers: usize,
    /// Bytes of chunk data so far (the body without its framing).
    data: u64,
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
    /// Strict: whitespace after the size digits (only more of it, `;` or CR may follow).
    SizeWs(u64),
    /// Strict: the CR ending a size line.
    SizeCr(u64),
    /// Strict: the CR ending a trailer line.
    TrailerCr,
    /// Strict: inside a chunk extension (RFC 9112 §7.1.1), at `at`.
    Ext {
        n: u64,
        at: ExtAt,
    },
    /// Strict: a trailer line's value, after its name and colon.
    TrailerValue,
    Done,
}

/// Where a strict scanner is in a chunk extension: `*( BWS ";" BWS name [ BWS "=" BWS value ] )`,
/// a name a token, a value a token or a quoted string.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum ExtAt {
    /// After `;`: white space, then a name.
    BeforeName,
    Name,
    /// White space after a name: `=`, `;` or the line's end.
    AfterName,
    /// After `=`: white space, then a value.
    BeforeValue,
    Token,
    Quoted,
    /// After a backslash in a quoted string.
    Escaped,
    /// After a value: white space, `;` or the line's end.
    AfterValue,
}

/// A token's characters (RFC 9110 §5.6.2).
fn tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

impl ExtAt {
    /// The place after byte `b` of an extension, `None` at the CR that ends the size line, or
    /// an error for a byte the grammar does not allow there.
    fn next(self, b: u8) -> Result<Option<ExtAt>, &'static str> {
        use ExtAt::*;
        let ws = b == b' ' || b == b'\t';
        Ok(Some(match (self, b) {
            (Quoted, b'"') => AfterValue,
            (Quoted, b'\\') => Escaped,
            (Quoted, _) if b == b'\t' || (b >= 0x20 && b != 0x7f) => Quoted,
            (Escaped, _) if b == b'\t' || (b >= 0x20 && b != 0x7f) => Quoted,
            (Quoted | Escaped, _) => return Err("bad quoted string in a chunk extension"),
            (BeforeName | AfterName | BeforeValue | AfterValue, _) if ws => self,
            (Name, _) if ws => AfterName,
            (Token, _) if ws => AfterValue,
            (BeforeName | Name, _) if tchar(b) => Name,
            (BeforeValue | Token, _) if tchar(b) => Token,
            (BeforeValue, b'"') => Quoted,
            (Name | AfterName, b'=') => BeforeValue,
            (Name | AfterName | Token | AfterValue, b';') => BeforeName,
            (Name | AfterName | Token | AfterValue, b'\r') => return Ok(None),
            _ => return Err("bad chunk extension"),
        }))
    }
}

const MAX_LINE: usize = 4096;
const MAX_TRAILERS: usize = 64 * 1024;

impl ChunkedScanner {
    pub fn new() -> ChunkedScanner {
        ChunkedScanner::default()
    }

    /// A scanner for what a proxy forwards on a client's behalf (request bodies): the lenient
    /// spellings a response scanner tolerates (bare LF, anything after the size) are errors,
    /// since an origin may read them otherwise than the proxy did (request smuggling).
    pub fn strict() -> ChunkedScanner {
        ChunkedScanner {
            strict: true,
            ..ChunkedScanner::default()
        }
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

    /// Bytes of chunk data seen so far: the body without its chunk framing, extensions and
    /// trailers (which are the rest of what was fed).
    pub fn data_bytes(&self) -> u64 {
        self.data
    }

    /// `n` (≤ [`ChunkedScanner::data_left`]) bytes of chunk data went by unscanned.
    pub fn skipped(&mut self, n: u64) {
        if let Chunk::Data(left) = self.state {
            let n = n.min(left);
            self.data += n;
            let left = left - n;
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
        self.scan(data, None)
    }

    /// As [`ChunkedScanner::feed`], and appends the chunks' data (without framing, extensions
    /// or trailers) to `out`: the body as a reader that does not speak chunked (an HTTP/1.0
    /// client) must get it.
    pub fn decode(
        &mut self,
        data: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<usize>, &'static str> {
        self.scan(data, Some(out))
    }

    /// The strict scanner's next state after byte `b` (`ctl`: a control character), where its
    /// grammar is stricter than [`ChunkedScanner::step`]'s; `None`: the same as there.
    #[inline]
    fn strict_step(&mut self, b: u8, ctl: bool) -> Result<Option<Chunk>, &'static str> {
        Ok(match self.state {
            Chunk::Size { n, ext: false } => match b {
                b'\r' => Some(Chunk::SizeCr(n)),
                b' ' | b'\t' => Some(Chunk::SizeWs(n)),
                b';' => Some(Chunk::Ext {
                    n,
                    at: ExtAt::BeforeName,
                }),
                b'\n' => return Err("bare LF in a chunk size line"),
                _ => None,
            },
            Chunk::Ext { n, at } => Some(match at.next(b)? {
                Some(at) => Chunk::Ext { n, at },
                None => Chunk::SizeCr(n),
            }),
            Chunk::SizeWs(n) => match b {
                b' ' | b'\t' => Some(Chunk::SizeWs(n)),
                b';' => Some(Chunk::Ext {
                    n,
                    at: ExtAt::BeforeName,
                }),
                b'\r' => Some(Chunk::SizeCr(n)),
                _ => return Err("bad chunk size"),
            },
            Chunk::SizeCr(n) => match b {
                b'\n' => {
                    self.line = 0;
                    Some(if n == 0 {
                        Chunk::TrailerStart
                    } else {
                        Chunk::Data(n)
                    })
                }
                _ => return Err("CR without LF in a chunk size line"),
            },
            Chunk::DataEnd { cr: false } if b != b'\r' => {
                return Err("chunk data not followed by CRLF")
            }
            // A trailer line is a field line (RFC 9112 §5): a name of token characters, a colon,
            // and a value without control characters.
            Chunk::TrailerStart => match b {
                b'\r' => Some(Chunk::LastCr),
                _ if tchar(b) => Some(Chunk::Trailer),
                _ => return Err("bad trailer line"),
            },
            Chunk::LastCr if b != b'\n' => return Err("CR without LF after trailers"),
            Chunk::Trailer | Chunk::TrailerValue => {
                self.trailers += 1;
                if self.trailers > MAX_TRAILERS {
                    return Err("trailers too large");
                }
                match (self.state, b) {
                    (Chunk::Trailer, b':') => Some(Chunk::TrailerValue),
                    (Chunk::Trailer, _) if tchar(b) => Some(Chunk::Trailer),
                    (Chunk::Trailer, _) => return Err("a trailer line that is no field"),
                    (_, b'\r') => Some(Chunk::TrailerCr),
                    _ if ctl => return Err("control character in a trailer"),
                    _ => Some(Chunk::TrailerValue),
                }
            }
            Chunk::TrailerCr => match b {
                b'\n' => {
                    self.line = 0;
                    Some(Chunk::TrailerStart)
                }
                _ => return Err("CR without LF in a trailer"),
            },
            _ => None,
        })
    }

    /// The next state after byte `b` of a size line, a data end or the trailers.
    #[inline]
    fn step(&mut self, b: u8) -> Result<Chunk, &'static str> {
        Ok(match self.state {
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
            // Only the strict scanner enters these, and it handled them above.
            Chunk::SizeWs(_)
            | Chunk::SizeCr(_)
            | Chunk::TrailerCr
            | Chunk::Ext { .. }
            | Chunk::TrailerValue => return Err("bad chunk framing"),
        })
    }

    fn scan(
        &mut self,
        data: &[u8],
        mut out: Option<&mut Vec<u8>>,
    ) -> Result<Option<usize>, &'static str> {
        let mut i = 0;
        while i < data.len() {
            match self.state {
                Chunk::Done => return Ok(Some(i)),
                Chunk::Data(left) => {
                    let n = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(data.len() - i);
                    if let Some(out) = out.as_deref_mut() {
                        out.extend_from_slice(&data[i..i + n]);
                    }
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
            if self.strict {
                let ctl = (b < 0x20 && b != b'\t') || b == 0x7f;
                if let Some(next) = self.strict_step(b, ctl)? {
                    self.state = next;
                    if self.state == Chunk::Done {
                        return Ok(Some(i));
                    }
                    continue;
                }
            }
            self.state = self.step(b)?;
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

#[cfg(test)]
mod tests;
