//! Incremental HTTP/1.1 response parsing for the load generator.
//!
//! Bytes are fed as they arrive; the parser keeps only what it must (an incomplete head or chunk
//! line) and counts bodies without storing them. Framing follows RFC 9112 §6.3: no body for
//! HEAD, 1xx, 204 and 304; chunked (with trailers) when Transfer-Encoding says so; else
//! Content-Length; else until the server closes.

/// One complete response.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub header_bytes: usize,
    pub body_bytes: u64,
    /// Bytes of chunk framing and trailers (httperf's "footer").
    pub footer_bytes: u64,
    /// The server said it will close (Connection: close, or HTTP/1.0 without keep-alive).
    pub close: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Not an HTTP response (garbage, a bad status line, a bad header).
    Malformed(&'static str),
    /// A head larger than we accept.
    HeadTooLarge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkDataEnd,
    Trailers,
    UntilClose,
}

/// What the parser reports after a feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Need more bytes.
    More,
    /// A reply completed; `consumed` bytes of the fed slice belong to it (the rest is the next
    /// reply's).
    Done { reply: Reply, consumed: usize },
}

const MAX_HEAD: usize = 64 * 1024;

#[derive(Debug, Default)]
pub struct ResponseParser {
    head: Vec<u8>,
    line: Vec<u8>,
    reply: Option<Reply>,
    body: Option<Body>,
    /// The request this response answers was HEAD.
    pub head_request: bool,
    /// Bytes of this response seen so far (head included).
    pub seen: u64,
}

impl ResponseParser {
    pub fn new() -> ResponseParser {
        ResponseParser::default()
    }

    /// A parser whose head buffer takes `head` bytes before it must grow (made once, so that
    /// replies do not grow it one by one).
    pub fn with_head_capacity(head: usize) -> ResponseParser {
        ResponseParser {
            head: Vec::with_capacity(head),
            ..ResponseParser::default()
        }
    }

    /// True once the status line and headers are complete.
    pub fn in_body(&self) -> bool {
        self.reply.is_some()
    }

    /// True if no byte of a response has arrived yet.
    pub fn is_idle(&self) -> bool {
        self.seen == 0
    }

    /// Ready for a new connection, keeping its buffers' capacity.
    pub fn clear(&mut self) {
        self.reset();
        self.head_request = false;
    }

    fn reset(&mut self) {
        self.head.clear();
        self.line.clear();
        self.reply = None;
        self.body = None;
        self.seen = 0;
    }

    /// The server closed the connection: completes a close-delimited body.
    pub fn eof(&mut self) -> Option<Reply> {
        match (self.body, self.reply) {
            (Some(Body::UntilClose), Some(r)) => {
                self.reset();
                Some(r)
            }
            _ => None,
        }
    }

    /// Feeds bytes; stops at the end of the first complete reply.
    pub fn feed(&mut self, data: &[u8]) -> Result<Progress, ParseError> {
        let mut i = 0;
        while i < data.len() {
            let Some(reply) = self.reply.as_mut() else {
                // A head step's `More`: the reply is not complete yet, go on while bytes remain.
                match self.feed_head(data, &mut i) {
                    Ok(Progress::More) => continue,
                    done => return done,
                }
            };
            match self.body {
                Some(Body::Length(rem)) => {
                    let n = (rem as usize).min(data.len() - i);
                    reply.body_bytes += n as u64;
                    self.seen += n as u64;
                    i += n;
                    let rem = rem - n as u64;
                    if rem == 0 {
                        let r = *reply;
                        self.reset();
                        return Ok(Progress::Done {
                            reply: r,
                            consumed: i,
                        });
                    }
                    self.body = Some(Body::Length(rem));
                }
                Some(Body::UntilClose) => {
                    let n = data.len() - i;
                    reply.body_bytes += n as u64;
                    self.seen += n as u64;
                    i += n;
                }
                Some(Body::ChunkData(rem)) => {
                    let n = (rem as usize).min(data.len() - i);
                    reply.body_bytes += n as u64;
                    self.seen += n as u64;
                    i += n;
                    let rem = rem - n as u64;
                    self.body = Some(if rem == 0 {
                        Body::ChunkDataEnd
                    } else {
                        Body::ChunkData(rem)
                    });
                }
                Some(Body::ChunkSize) | Some(Body::ChunkDataEnd) | Some(Body::Trailers) => {
                    // Line-oriented states: collect one line.
                    let b = data[i];
                    i += 1;
                    self.seen += 1;
                    reply.footer_bytes += 1;
                    match self.chunk_line_byte(b, i) {
                        Ok(Progress::More) => {}
                        done => return done,
                    }
                }
                None => break,
            }
        }
        Ok(Progress::More)
    }

    /// Takes bytes of the head from `data[*i..]` until it is complete, then frames the body
    /// from its headers; done if the reply has none.
    #[inline]
    fn feed_head(&mut self, data: &[u8], i: &mut usize) -> Result<Progress, ParseError> {
        // Accumulate the head until CRLFCRLF.
        let start_len = self.head.len();
        let take = (data.len() - *i).min(MAX_HEAD + 4 - start_len.min(MAX_HEAD));
        self.head.extend_from_slice(&data[*i..*i + take]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(&self.head) {
            Ok(httparse::Status::Partial) => {
                if self.head.len() > MAX_HEAD {
                    return Err(ParseError::HeadTooLarge);
                }
                self.seen += take as u64;
                *i += take;
                return Ok(Progress::More);
            }
            Ok(httparse::Status::Complete(n)) => n,
            Err(_) => return Err(ParseError::Malformed("bad status line or header")),
        };
        let used = n - start_len;
        self.seen += used as u64;
        *i += used;
        let status = resp.code.unwrap_or(0);
        let framing = Framing::of(resp.headers, resp.version.unwrap_or(1))?;
        if (100..200).contains(&status) {
            // An interim response: the real one follows.
            self.head.clear();
            self.seen = 0;
            return Ok(Progress::More);
        }
        let reply = Reply {
            status,
            header_bytes: n,
            body_bytes: 0,
            footer_bytes: 0,
            close: framing.close,
        };
        let no_body = self.head_request || status == 204 || status == 304;
        let body = if no_body {
            Body::Length(0)
        } else if framing.chunked {
            Body::ChunkSize
        } else if let Some(l) = framing.length {
            Body::Length(l)
        } else {
            Body::UntilClose
        };
        self.reply = Some(reply);
        self.body = Some(body);
        if body == Body::Length(0) {
            self.reset();
            return Ok(Progress::Done {
                reply,
                consumed: *i,
            });
        }
        Ok(Progress::More)
    }

    /// One byte `b` of a line of chunk framing, at `consumed`: kept until the line ends; done
    /// at the empty line that ends the trailers.
    #[inline]
    fn chunk_line_byte(&mut self, b: u8, consumed: usize) -> Result<Progress, ParseError> {
        if b != b'\n' {
            if self.line.len() > 4096 {
                return Err(ParseError::Malformed("chunk line too long"));
            }
            self.line.push(b);
            return Ok(Progress::More);
        }
        self.end_chunk_line(consumed)
    }

    /// A line of chunk framing is complete (in `line`, without its LF), its last byte at
    /// `consumed`: the CRLF after a chunk's data, a chunk's size, or a trailer; done at the
    /// empty line that ends the trailers.
    #[inline]
    fn end_chunk_line(&mut self, consumed: usize) -> Result<Progress, ParseError> {
        let line = std::mem::take(&mut self.line);
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        match self.body {
            Some(Body::ChunkDataEnd) => {
                if !line.is_empty() {
                    return Err(ParseError::Malformed("chunk not followed by CRLF"));
                }
                self.body = Some(Body::ChunkSize);
            }
            Some(Body::ChunkSize) => {
                let hex = line.split(|&b| b == b';').next().unwrap_or(&[]);
                let s = std::str::from_utf8(hex)
                    .map_err(|_| ParseError::Malformed("bad chunk size"))?;
                let size = u64::from_str_radix(s.trim(), 16)
                    .map_err(|_| ParseError::Malformed("bad chunk size"))?;
                self.body = Some(if size == 0 {
                    Body::Trailers
                } else {
                    Body::ChunkData(size)
                });
            }
            // The empty line that ends the trailers ends the reply.
            _ if line.is_empty() => {
                if let Some(reply) = self.reply {
                    self.reset();
                    return Ok(Progress::Done { reply, consumed });
                }
            }
            _ => {}
        }
        Ok(Progress::More)
    }
}

/// How a response's headers frame its body, and whether the server will close.
struct Framing {
    /// Content-Length, if given.
    length: Option<u64>,
    /// The last transfer coding is chunked.
    chunked: bool,
    /// Connection: close, or HTTP/1.0 without keep-alive.
    close: bool,
}

impl Framing {
    /// Reads the framing from the headers of a response of HTTP/1.`minor`.
    #[inline]
    fn of(headers: &[httparse::Header<'_>], minor: u8) -> Result<Framing, ParseError> {
        let mut f = Framing {
            length: None,
            chunked: false,
            close: minor == 0,
        };
        for h in headers {
            if h.name.eq_ignore_ascii_case("content-length") {
                let v = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .ok_or(ParseError::Malformed("bad Content-Length"))?;
                f.length = Some(v);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                f.chunked = h
                    .value
                    .rsplit(|&b| b == b',')
                    .next()
                    .map(|v| v.trim_ascii().eq_ignore_ascii_case(b"chunked"))
                    .unwrap_or(false);
            } else if h.name.eq_ignore_ascii_case("connection") {
                for tok in h.value.split(|&b| b == b',') {
                    let t = tok.trim_ascii();
                    if t.eq_ignore_ascii_case(b"close") {
                        f.close = true;
                    } else if t.eq_ignore_ascii_case(b"keep-alive") && minor == 0 {
                        f.close = false;
                    }
                }
            }
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(bytes: &[u8], step: usize) -> Vec<Reply> {
        let mut p = ResponseParser::new();
        let mut out = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        for chunk in bytes.chunks(step.max(1)) {
            pending.extend_from_slice(chunk);
            loop {
                match p.feed(&pending).unwrap() {
                    Progress::More => {
                        pending.clear();
                        break;
                    }
                    Progress::Done { reply, consumed } => {
                        out.push(reply);
                        pending.drain(..consumed);
                        if pending.is_empty() {
                            break;
                        }
                    }
                }
            }
        }
        if let Some(r) = p.eof() {
            out.push(r);
        }
        out
    }

    #[test]
    fn framings_at_every_split() {
        type Want = Vec<(u16, u64, bool)>;
        let cases: Vec<(&[u8], Want)> = vec![
            (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na", vec![(200, 1, false)]),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                vec![(200, 3, false), (404, 0, true)],
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: 1\r\n\r\n",
                vec![(200, 11, false)],
            ),
            (b"HTTP/1.0 200 OK\r\n\r\nuntil close", vec![(200, 11, true)]),
            (
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n",
                vec![(304, 0, false)],
            ),
        ];
        for (bytes, want) in cases {
            for step in [1, 2, 3, 7, 1000] {
                let got: Vec<(u16, u64, bool)> = parse_all(bytes, step)
                    .iter()
                    .map(|r| (r.status, r.body_bytes, r.close))
                    .collect();
                assert_eq!(
                    got,
                    want,
                    "{:?} step {step}",
                    String::from_utf8_lossy(bytes)
                );
            }
        }
    }

    #[test]
    fn head_request_has_no_body() {
        let mut p = ResponseParser::new();
        p.head_request = true;
        let r = p
            .feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
            .unwrap();
        assert!(matches!(r, Progress::Done { reply, .. } if reply.body_bytes == 0));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for g in [
            &b"garbage\r\n\r\n"[..],
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"\x00\x01\x02\r\n\r\n",
        ] {
            assert!(ResponseParser::new().feed(g).is_err(), "{g:?}");
        }
        let mut p = ResponseParser::new();
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert!(p.feed(bad).is_err());
        let huge = vec![b'a'; 70_000];
        let mut p = ResponseParser::new();
        p.feed(b"HTTP/1.1 200 OK\r\nX: ").unwrap();
        assert_eq!(p.feed(&huge), Err(ParseError::HeadTooLarge));
    }
}
