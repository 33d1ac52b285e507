//! Properties of the load generator's reader of replies, `evlab_load::reply::ReplyReader`: the
//! http crate's response framing (`evlab_http::parse_response_framing`, `ChunkedScanner`) driven
//! over a stream of reads.
//!
//! The input is a byte stream from a server, fed as the generator feeds it: each `Done` hands
//! back `consumed`, the rest of that read is fed again, and at the end of the stream `eof()` is
//! called. It is fed three ways — all at once, one byte at a time, and in pieces whose sizes
//! come from the data — once as answers to GET and once as answers to HEAD.
//!
//! - never panics, and every `Done` consumes at least one byte and no more than it was given
//!   (the generator's feed loop always progresses);
//! - the three feedings give the same replies, the same error and the same end-of-stream reply;
//! - lengths are consistent: a reply's bytes in the stream are `header_bytes + body_bytes +
//!   footer_bytes`, plus the heads of the interim (1xx) responses before it; while a reply is
//!   incomplete `seen` counts its bytes so far; after `Done` the reader is idle;
//! - framing: no reply is 1xx; HEAD answers, 204 and 304 have no body and no footer; a
//!   reply's head is within the 64 KiB limit.
#![allow(dead_code)]

use evlab_load::reply::{Progress, Reply, ReplyError, ReplyReader};

/// Tokens for seeded mutations (the replay tests) and `fuzz/dict/response.dict`.
pub const TOKENS: &[&[u8]] = &[
    b"HTTP/1.1 200 OK\r\n",
    b"HTTP/1.0 200 OK\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"HTTP/1.1 204 No Content\r\n",
    b"HTTP/1.1 304 Not Modified\r\n",
    b"\r\n",
    b"\r\n\r\n",
    b"Content-Length: ",
    b"Content-Length: 5\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: gzip, chunked\r\n",
    b"Connection: close\r\n",
    b"Connection: keep-alive\r\n",
    b"0\r\n\r\n",
    b"5\r\nhello\r\n",
    b";ext=1",
    b"ffffffff",
    b": ",
    b",",
];

/// The largest head the reader accepts (`evlab_http::framing::MAX_RESPONSE_HEAD`).
const MAX_HEADER_BYTES: usize = 64 * 1024;

#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Each reply with the stream bytes it took (interim responses included).
    pub replies: Vec<(Reply, usize)>,
    pub error: Option<ReplyError>,
    pub eof: Option<Reply>,
}

pub fn check(data: &[u8], _exhaustive: bool) {
    for head_request in [false, true] {
        let whole = feed(data, head_request, |_| usize::MAX);
        let bytes = feed(data, head_request, |_| 1);
        assert_eq!(whole, bytes, "all at once vs byte at a time");
        let mut seed = data.iter().fold(0x9e37_79b9_u32, |h, &b| {
            h.rotate_left(5) ^ u32::from(b).wrapping_mul(0x0100_0193)
        });
        let pieces = feed(data, head_request, |_| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            1 + (seed % 23) as usize
        });
        assert_eq!(whole, pieces, "all at once vs in pieces");
        check_outcome(data, head_request, &whole);
    }
}

/// Whether the stream at a reply's start holds an interim (1xx) head first.
fn starts_interim(stream: &[u8]) -> bool {
    let mut s = stream;
    while let Some(rest) = s.strip_prefix(b"\r\n").or_else(|| s.strip_prefix(b"\n")) {
        s = rest;
    }
    s.get(9) == Some(&b'1')
}

fn check_outcome(data: &[u8], head_request: bool, out: &Outcome) {
    let mut start = 0;
    for (reply, took) in &out.replies {
        let framed = reply.header_bytes as u64 + reply.body_bytes + reply.footer_bytes;
        if starts_interim(&data[start..]) {
            assert!(
                framed <= *took as u64,
                "{reply:?} is larger than its {took} bytes"
            );
        } else {
            assert_eq!(framed, *took as u64, "{reply:?} took {took} bytes");
        }
        check_reply(reply, head_request);
        start += took;
    }
    if let Some(reply) = &out.eof {
        assert!(out.error.is_none(), "end-of-stream reply after an error");
        check_reply(reply, head_request);
        let framed = reply.header_bytes as u64 + reply.body_bytes + reply.footer_bytes;
        assert!(
            framed <= (data.len() - start) as u64,
            "{reply:?} past the stream"
        );
        assert_eq!(reply.footer_bytes, 0, "close-delimited reply with a footer");
    }
}

fn check_reply(reply: &Reply, head_request: bool) {
    assert!(
        !(100..200).contains(&reply.status),
        "interim reply {reply:?}"
    );
    if head_request || reply.status == 204 || reply.status == 304 {
        assert_eq!(
            (reply.body_bytes, reply.footer_bytes),
            (0, 0),
            "reply without a body has one: {reply:?}"
        );
    }
    assert!(reply.header_bytes > 0 && reply.header_bytes <= MAX_HEADER_BYTES);
}

/// Feeds `data` in pieces of `piece(remaining)` bytes (at least 1) as the generator does.
pub fn feed(data: &[u8], head_request: bool, mut piece: impl FnMut(usize) -> usize) -> Outcome {
    let mut p = ReplyReader::new();
    p.head_request = head_request;
    let mut out = Outcome {
        replies: Vec::new(),
        error: None,
        eof: None,
    };
    let mut off = 0;
    let mut reply_start = 0;
    while off < data.len() {
        let n = piece(data.len() - off).clamp(1, data.len() - off);
        let mut read = &data[off..off + n];
        while !read.is_empty() {
            match p.feed(read) {
                Err(e) => {
                    out.error = Some(e);
                    return out;
                }
                Ok(Progress::More) => {
                    off += read.len();
                    read = &[];
                    let so_far = (off - reply_start) as u64;
                    assert!(p.seen <= so_far, "seen {} of {so_far} bytes", p.seen);
                    if !starts_interim(&data[reply_start..]) {
                        assert_eq!(p.seen, so_far, "seen");
                    }
                }
                Ok(Progress::Done { reply, consumed }) => {
                    assert!(
                        consumed > 0 && consumed <= read.len(),
                        "consumed {consumed} of {}",
                        read.len()
                    );
                    assert!(p.is_idle() && !p.in_body(), "not idle after a reply");
                    off += consumed;
                    read = &read[consumed..];
                    out.replies.push((reply, off - reply_start));
                    reply_start = off;
                }
            }
        }
    }
    out.eof = p.eof();
    out
}
