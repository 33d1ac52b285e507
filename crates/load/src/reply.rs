//! The load generator's replies read from a stream of reads, with the http crate's response
//! framing ([`evlab_http::parse_response_framing`], [`ChunkedScanner`]): this module keeps no
//! rule of its own, only where a reply is between reads.
//!
//! Bytes are fed as they arrive; a reply's head is read where it lies in the read, and only a
//! head split across reads is kept (in a buffer made once per reader); bodies are counted, never
//! stored.

use evlab_http::framing::MAX_RESPONSE_HEAD;
use evlab_http::{parse_response_framing, ChunkedScanner, Framing, HeadParse};

/// One complete response.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub header_bytes: usize,
    pub body_bytes: u64,
    /// Bytes of chunk framing and trailers (httperf's "footer").
    pub footer_bytes: u64,
    /// The connection carries no further reply: `Connection: close`, HTTP/1.0 without
    /// keep-alive, a body delimited by close, or framing not beyond doubt.
    pub close: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyError {
    /// Not an HTTP response, or one whose framing cannot be trusted (the http crate's reason).
    Malformed(&'static str),
}

/// What the reader reports after a feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Need more bytes.
    More,
    /// A reply completed; `consumed` bytes of the fed slice belong to it (the rest is the next
    /// reply's).
    Done { reply: Reply, consumed: usize },
}

/// Where the body of a reply whose head was read is.
#[derive(Debug, Clone)]
enum Body {
    Length(u64),
    Chunked(ChunkedScanner),
    UntilClose,
}

#[derive(Debug, Default)]
pub struct ReplyReader {
    /// A head split across reads, until it is complete; empty otherwise.
    head: Vec<u8>,
    /// The reply whose head was read, and its body.
    body: Option<(Reply, Body)>,
    /// The request this response answers was HEAD.
    pub head_request: bool,
    /// Bytes of this response seen so far (head included).
    pub seen: u64,
}

impl ReplyReader {
    pub fn new() -> ReplyReader {
        ReplyReader::default()
    }

    /// A reader whose buffer for split heads takes `head` bytes before it must grow (made
    /// once, so that replies do not grow it one by one).
    pub fn with_head_capacity(head: usize) -> ReplyReader {
        ReplyReader {
            head: Vec::with_capacity(head),
            ..ReplyReader::default()
        }
    }

    /// True once the status line and headers are complete.
    pub fn in_body(&self) -> bool {
        self.body.is_some()
    }

    /// True if no byte of a response has arrived yet.
    pub fn is_idle(&self) -> bool {
        self.seen == 0
    }

    /// Ready for a new connection, keeping its buffer's capacity.
    pub fn clear(&mut self) {
        self.reset();
        self.head_request = false;
    }

    fn reset(&mut self) {
        self.head.clear();
        self.body = None;
        self.seen = 0;
    }

    /// The server closed the connection: completes a close-delimited body.
    pub fn eof(&mut self) -> Option<Reply> {
        match self.body.take() {
            Some((reply, Body::UntilClose)) => {
                self.reset();
                Some(reply)
            }
            body => {
                self.body = body;
                None
            }
        }
    }

    /// Feeds bytes; stops at the end of the first complete reply.
    pub fn feed(&mut self, data: &[u8]) -> Result<Progress, ReplyError> {
        let mut i = 0;
        loop {
            let Some((reply, body)) = self.body.as_mut() else {
                if i == data.len() {
                    return Ok(Progress::More);
                }
                match self.feed_head(data, &mut i)? {
                    Some(done) => return Ok(done),
                    None => continue,
                }
            };
            let rest = &data[i..];
            let (taken, done) = match body {
                Body::Length(left) => {
                    let n = rest.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                    *left -= n as u64;
                    reply.body_bytes += n as u64;
                    (n, *left == 0)
                }
                Body::UntilClose => {
                    reply.body_bytes += rest.len() as u64;
                    (rest.len(), false)
                }
                Body::Chunked(scanner) => {
                    let end = scanner.feed(rest).map_err(ReplyError::Malformed)?;
                    let n = end.unwrap_or(rest.len());
                    let framed = reply.body_bytes + reply.footer_bytes + n as u64;
                    reply.body_bytes = scanner.data_bytes();
                    reply.footer_bytes = framed - reply.body_bytes;
                    (n, end.is_some())
                }
            };
            i += taken;
            self.seen += taken as u64;
            if done {
                let reply = *reply;
                self.reset();
                return Ok(Progress::Done { reply, consumed: i });
            }
            return Ok(Progress::More);
        }
    }

    /// Reads a head from `data[*i..]` (after the part of it kept from earlier reads), moving
    /// `*i` past what it took: `None` when it took an interim response, or all of `data`
    /// into an incomplete head; a reply without a body is done at once.
    #[inline]
    fn feed_head(&mut self, data: &[u8], i: &mut usize) -> Result<Option<Progress>, ReplyError> {
        let kept = self.head.len();
        let rest = &data[*i..];
        let parsed = if kept == 0 {
            parse_response_framing(rest, self.head_request)
        } else {
            // Never more than the largest head, so that an endless one is an error at once.
            let take = rest.len().min(MAX_RESPONSE_HEAD.saturating_sub(kept));
            self.head.extend_from_slice(&rest[..take]);
            parse_response_framing(&self.head, self.head_request)
        };
        let f = match parsed {
            HeadParse::Complete(f) => f,
            HeadParse::Partial => {
                // (All of `rest` is in `head` already unless it was empty: a partial head
                // is shorter than the largest.)
                if kept == 0 {
                    self.head.extend_from_slice(rest);
                }
                self.seen += rest.len() as u64;
                *i = data.len();
                return Ok(None);
            }
            HeadParse::Interim(n) => {
                // The real response follows; the interim one is counted in no reply.
                *i += n - kept;
                self.head.clear();
                self.seen = 0;
                return Ok(None);
            }
            HeadParse::Error(e) => return Err(ReplyError::Malformed(e)),
        };
        *i += f.head_len - kept;
        self.seen += (f.head_len - kept) as u64;
        self.head.clear();
        let reply = Reply {
            status: f.status,
            header_bytes: f.head_len,
            body_bytes: 0,
            footer_bytes: 0,
            close: !f.keep_alive,
        };
        let body = match f.framing {
            Framing::None | Framing::Length(0) => {
                self.reset();
                return Ok(Some(Progress::Done {
                    reply,
                    consumed: *i,
                }));
            }
            Framing::Length(n) => Body::Length(n),
            Framing::Chunked => Body::Chunked(ChunkedScanner::new()),
            Framing::UntilClose => Body::UntilClose,
        };
        self.body = Some((reply, body));
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(bytes: &[u8], step: usize) -> Vec<Reply> {
        let mut p = ReplyReader::new();
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
        let mut p = ReplyReader::new();
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
            assert!(ReplyReader::new().feed(g).is_err(), "{g:?}");
        }
        let mut p = ReplyReader::new();
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert!(p.feed(bad).is_err());
        let huge = vec![b'a'; 70_000];
        let mut p = ReplyReader::new();
        p.feed(b"HTTP/1.1 200 OK\r\nX: ").unwrap();
        assert_eq!(
            p.feed(&huge),
            Err(ReplyError::Malformed("response head too large"))
        );
    }

    /// Replies read from a stream at every split, with their exact byte counts: (status,
    /// header, body, footer, close) each, or where an error stops the stream.
    #[test]
    fn byte_counts_and_rules_at_every_split() {
        type Row = (u16, usize, u64, u64, bool);
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: 1\r\n\r\n";
        let cases: Vec<(&[u8], Vec<Row>, bool)> = vec![
            // Chunk framing and trailers are the footer: 3+2 + 9+2 + 3 + 8+2.
            (chunked, vec![(200, 47, 11, 29, false)], false),
            // An interim head is in no reply's bytes; a head split across reads is read whole.
            (
                b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 204 No Content\r\n\r\n",
                vec![(200, 38, 2, 0, false), (204, 27, 0, 0, false)],
                false,
            ),
            // HTTP/1.0 with Transfer-Encoding: framed, then closed (RFC 9112 §6.1).
            (
                b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                vec![(200, 71, 0, 5, true)],
                false,
            ),
            // obs-fold unfolded, as a user agent must (RFC 9112 §5.2).
            (
                b"HTTP/1.1 200 OK\r\nConnection: keep-alive,\r\n close\r\nContent-Length: 1\r\n\r\nx",
                vec![(200, 71, 1, 0, true)],
                false,
            ),
            // Ambiguous framing after a good reply: the good one, then an error.
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
                vec![(200, 38, 0, 0, false)],
                true,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
                vec![],
                true,
            ),
            (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", vec![], true),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n +5\r\nhello\r\n0\r\n\r\n", vec![], true),
        ];
        for (bytes, want, error) in cases {
            for step in [1, 2, 3, 7, 1000] {
                let mut p = ReplyReader::new();
                let mut got: Vec<Row> = Vec::new();
                let mut failed = false;
                'reads: for read in bytes.chunks(step) {
                    let mut read = read;
                    while !read.is_empty() {
                        match p.feed(read) {
                            Ok(Progress::More) => break,
                            Ok(Progress::Done { reply: r, consumed }) => {
                                got.push((
                                    r.status,
                                    r.header_bytes,
                                    r.body_bytes,
                                    r.footer_bytes,
                                    r.close,
                                ));
                                read = &read[consumed..];
                            }
                            Err(_) => {
                                failed = true;
                                break 'reads;
                            }
                        }
                    }
                }
                let text = String::from_utf8_lossy(bytes);
                assert_eq!((&got, failed), (&want, error), "{text:?} step {step}");
            }
        }
    }

    /// Reading replies allocates nothing, a head split across reads included (into the buffer
    /// made once).
    #[test]
    fn no_allocation_per_reply() {
        let mut stream = Vec::new();
        for _ in 0..50 {
            stream
                .extend_from_slice(b"HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 3\r\n\r\nabc");
            stream.extend_from_slice(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            );
        }
        let mut p = ReplyReader::with_head_capacity(1024);
        let (n, replies) = alloc_count::count(|| {
            let mut replies = 0;
            for read in stream.chunks(17) {
                let mut read = read;
                while let Ok(Progress::Done { consumed, .. }) = p.feed(read) {
                    replies += 1;
                    read = &read[consumed..];
                }
            }
            replies
        });
        assert_eq!((n, replies), (0, 100));
    }
}

/// Counts heap allocations made by the current thread, so a test can prove reading replies
/// makes none. Test builds only.
#[cfg(test)]
mod alloc_count {
    #[global_allocator]
    static GLOBAL: evlab_sys::alloc_count::Counting = evlab_sys::alloc_count::Counting;

    pub use evlab_sys::alloc_count::count;
}
