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

/// What a response's framing and connection fields say (RFC 9112 §6.3, §9.3).
#[derive(Default)]
pub(crate) struct FramingFields {
    pub(crate) content_length: Option<u64>,
    pub(crate) length_fields: usize,
    pub(crate) length_error: bool,
    pub(crate) transfer_encoding: bool,
    pub(crate) chunked_final: bool,
    pub(crate) only_chunked: bool,
    pub(crate) close: bool,
    pub(crate) suspect: bool,
}

impl FramingFields {
    /// Takes a `Content-Length`, `Transfer-Encoding` or `Connection` field into account
    /// (false: not one of them). `minor`: the response's HTTP/1.`minor`.
    pub(crate) fn field(&mut self, name: &str, value: &[u8], minor: u8) -> bool {
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
    pub(crate) fn framing(
        &self,
        no_body: bool,
        http10_client: bool,
    ) -> Result<Framing, &'static str> {
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

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
