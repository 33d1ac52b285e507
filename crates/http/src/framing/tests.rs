use super::*;

#[test]
fn chunked_bodies_decode_at_every_split() {
    let body: &[u8] = b"5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
    let end = body.len() - 4;
    for step in 1..body.len() {
        let mut s = ChunkedScanner::new();
        let mut out = Vec::new();
        let mut off = 0;
        let mut got = None;
        for part in body.chunks(step) {
            if let Some(k) = s.decode(part, &mut out).unwrap() {
                got = Some(off + k);
                break;
            }
            off += part.len();
        }
        assert_eq!(
            (got, out.as_slice()),
            (Some(end), &b"hello0123456789"[..]),
            "step {step}"
        );
    }
}

fn scan_at_every_split(body: &[u8]) -> Result<Option<usize>, &'static str> {
    let mut whole = ChunkedScanner::new();
    let want = whole.feed(body);
    for step in 1..body.len().max(2) {
        let mut s = ChunkedScanner::new();
        let mut got = Ok(None);
        let mut off = 0;
        for part in body.chunks(step) {
            got = s.feed(part).map(|r| r.map(|k| off + k));
            off += part.len();
            if !matches!(got, Ok(None)) {
                break;
            }
        }
        assert_eq!(got, want, "{:?} step {step}", String::from_utf8_lossy(body));
    }
    want
}

#[test]
fn chunked_table() {
    let done: &[&[u8]] = &[
        b"0\r\n\r\n",
        b"5\r\nhello\r\n0\r\n\r\n",
        b"5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\nY: 2\r\n\r\n",
        b"3\nabc\n0\n\n",
        b"1f \r\n0123456789012345678901234567890\r\n0\r\n\r\n",
    ];
    for body in done {
        assert_eq!(scan_at_every_split(body), Ok(Some(body.len())), "{body:?}");
        let mut more = body.to_vec();
        more.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        assert_eq!(scan_at_every_split(&more), Ok(Some(body.len())));
    }
    let partial: &[&[u8]] = &[b"5\r\nhel", b"0\r\nX: 1\r\n", b"5\r\nhello\r\n"];
    for body in partial {
        assert_eq!(scan_at_every_split(body), Ok(None), "{body:?}");
    }
    let bad: &[&[u8]] = &[b"x\r\n", b"5\r\nhelloX", b"\r\n", b"11111111111111111\r\n"];
    for body in bad {
        assert!(ChunkedScanner::new().feed(body).is_err(), "{body:?}");
    }
    let long = [b'0'; MAX_LINE + 2];
    assert!(ChunkedScanner::new().feed(&long).is_err());
}

#[test]
fn chunk_data_may_be_skipped_unscanned() {
    let mut s = ChunkedScanner::new();
    assert_eq!(s.feed(b"10000\r\n"), Ok(None));
    assert_eq!(s.data_left(), 0x10000);
    s.skipped(0x10000);
    assert_eq!(s.data_left(), 0);
    assert_eq!(s.feed(b"\r\n0\r\n\r\n"), Ok(Some(7)));
    assert!(s.done());
}

#[test]
fn strict_chunked_table() {
    let done: &[&[u8]] = &[
        b"0\r\n\r\n",
        b"5\r\nhello\r\n0\r\n\r\n",
        b"5;ext=1\r\nhello\r\nA \t;x\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n",
        b"00005\r\nhello\r\n0\r\n\r\n",
        // Extensions by the grammar: names, token and quoted values, BWS, escapes.
        b"1 ; a = b ;c;d=\"x; y\\\"z\" \r\nq\r\n0;e=\"\"\r\nT:\r\nU: v w\r\n\r\n",
    ];
    for body in done {
        for step in 1..body.len() {
            let mut s = ChunkedScanner::strict();
            let mut got = Ok(None);
            let mut off = 0;
            for part in body.chunks(step) {
                got = s.feed(part).map(|r| r.map(|k| off + k));
                off += part.len();
                if !matches!(got, Ok(None)) {
                    break;
                }
            }
            assert_eq!(got, Ok(Some(body.len())), "{body:?} step {step}");
        }
    }
    let bad: &[&[u8]] = &[
        b"3\nabc\r\n0\r\n\r\n",
        b"3\r\nabc\n0\r\n\r\n",
        b"0\r\n\n",
        b"0\r\nX: 1\n\r\n",
        b"5 x\r\nhello\r\n",
        b"5\rx",
        b"-5\r\n",
        b"0x5\r\n",
        b"\r\n",
        b"11111111111111111\r\n",
        b"5;a\x01\r\n",
        b"5\r\nhelloXY",
        b"0\r\n\rX",
        // Extensions off the grammar: a quoted string never closed (the line's end inside it),
        // no name, a name followed by another word, an empty value, a bad escape.
        b"0;a=\"open\r\nno field\r\n\r\n",
        b"1;=x\r\n",
        b"1;a b\r\n",
        b"1;a=\r\n",
        b"1;a=\"\\\x01\"\r\n",
        b"1;a=b c\r\n",
        // Trailer lines that are no fields: no colon, a space before the name (obs-fold), an
        // empty name.
        b"0\r\nno field\r\n\r\n",
        b"0\r\n X: 1\r\n\r\n",
        b"0\r\n: 1\r\n\r\n",
    ];
    for body in bad {
        assert!(ChunkedScanner::strict().feed(body).is_err(), "{body:?}");
    }
}

/// What both readers of a head found: status, framing, keep-alive, suspect; or an error.
type Read = Result<(u16, Framing, bool, bool), ()>;

fn read_framing(head: &str) -> Read {
    match parse_response_framing(head.as_bytes(), false) {
        HeadParse::Complete(f) => {
            assert_eq!(f.head_len, head.len(), "{head:?}");
            Ok((f.status, f.framing, f.keep_alive, f.suspect))
        }
        HeadParse::Error(_) => Err(()),
        other => panic!("{head:?}: {other:?}"),
    }
}

fn read_proxy(head: &str) -> Read {
    match crate::parse_response_head(head.as_bytes(), false, false, &mut Vec::new()) {
        HeadParse::Complete(h) => Ok((h.status, h.framing, h.keep_alive, h.suspect)),
        HeadParse::Error(_) => Err(()),
        other => panic!("{head:?}: {other:?}"),
    }
}

/// The rules on which the load generator's own parser (before it read with this module) and
/// this one disagreed, one row each, as RFC 9112 decides them; the proxy reads each the same.
#[test]
fn framing_disagreements_table() {
    let many_fields = format!(
        "HTTP/1.1 200 OK\r\n{}Content-Length: 1\r\n\r\n",
        "X: y\r\n".repeat(80)
    );
    let rows: &[(&str, Read)] = &[
        // §6.3 item 5 and RFC 9110 §8.6: differing lengths are invalid framing; a repeated
        // equal one may be rejected, and is (it was: the last one counted).
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            Err(()),
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
            Err(()),
        ),
        ("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n", Err(())),
        // Content-Length = 1*DIGIT (it was: Rust's u64 parse, which takes a sign).
        ("HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", Err(())),
        // §6.3 item 3: both together "ought to be handled as an error" (it was: chunked won,
        // and a coding other than chunked left the length to frame the body).
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
            Err(()),
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\n",
            Err(()),
        ),
        // §6.3 item 4: a final coding other than chunked is read until close.
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            Ok((200, Framing::UntilClose, false, false)),
        ),
        // RFC 9110 §5.6.1: empty list elements are ignored (it was: the last, empty, element
        // was not chunked).
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, \r\n\r\n",
            Ok((200, Framing::Chunked, true, false)),
        ),
        // §6.1: HTTP/1.0 with Transfer-Encoding is read as framed, then the connection closed
        // (both readers kept it alive with Connection: keep-alive).
        (
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n",
            Ok((200, Framing::Chunked, false, true)),
        ),
        // A 101 nobody asked for (no request carries Upgrade) is an error (it was: an interim
        // response, and the real one awaited).
        (
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
            Err(()),
        ),
        // RFC 9110 §15: three digits, 100 to 999 (it was: any three digits).
        ("HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n", Err(())),
        // §2.2: a bare LF may end a line.
        (
            "HTTP/1.1 200 OK\nContent-Length: 1\n\n",
            Ok((200, Framing::Length(1), true, false)),
        ),
        // A close-delimited body never leaves the connection reusable (the generator now
        // knows so from the head).
        (
            "HTTP/1.1 200 OK\r\n\r\n",
            Ok((200, Framing::UntilClose, false, false)),
        ),
        // Up to 100 fields (it was 64).
        (&many_fields, Ok((200, Framing::Length(1), true, false))),
    ];
    for (head, want) in rows {
        assert_eq!(read_framing(head), *want, "framing: {head:?}");
        assert_eq!(read_proxy(head), *want, "proxy: {head:?}");
    }
}

/// obs-fold (RFC 9112 §5.2): a user agent must unfold it, a proxy may answer 502 instead.
#[test]
fn obs_fold_is_unfolded_by_a_user_agent_refused_by_the_proxy() {
    let rows: &[(&str, Read)] = &[
        (
            "HTTP/1.1 200 OK\r\nConnection: keep-alive,\r\n close\r\nContent-Length: 1\r\n\r\n",
            Ok((200, Framing::Length(1), false, false)),
        ),
        (
            "HTTP/1.1 200 OK\r\nX-Long: a\r\n\tb\r\nContent-Length:\r\n 2\r\n\r\n",
            Ok((200, Framing::Length(2), true, false)),
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip,\r\n chunked\r\n\r\n",
            Ok((200, Framing::Chunked, true, false)),
        ),
    ];
    for (head, want) in rows {
        assert_eq!(read_framing(head), *want, "{head:?}");
        assert_eq!(read_proxy(head), Err(()), "{head:?}");
    }
}

/// An interim response's fields frame nothing: it is skipped whatever they say.
#[test]
fn interim_heads_are_skipped_whole() {
    let early = "HTTP/1.1 103 Early Hints\r\nContent-Length: x\r\n\r\n";
    assert_eq!(
        parse_response_framing(early.as_bytes(), false),
        HeadParse::Interim(early.len())
    );
    let head = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
    assert!(matches!(
        parse_response_framing(head.as_bytes(), true),
        HeadParse::Complete(ResponseFraming {
            framing: Framing::None,
            content_length: Some(5),
            ..
        })
    ));
    assert_eq!(
        parse_response_framing(&head.as_bytes()[..20], false),
        HeadParse::Partial
    );
}

/// Chunk lines on which the two disagreed (the scanner for responses, not the strict one).
#[test]
fn chunk_line_disagreements_table() {
    type Scan = Result<Option<usize>, ()>;
    let rows: &[(&[u8], Scan)] = &[
        // §7.1: chunk-size = 1*HEXDIG at the line's start (it was: trimmed, and a sign taken).
        (b" 5\r\nhello\r\n0\r\n\r\n", Err(())),
        (b"+5\r\nhello\r\n0\r\n\r\n", Err(())),
        // §7.1.1: extensions are ignored; what follows the digits and a delimiter is not read
        // (it was: an error unless it began with ';').
        (b"5 junk\r\nhello\r\n0\r\n\r\n", Ok(Some(20))),
        (b"5;a=\"b\"\r\nhello\r\n0\r\n\r\n", Ok(Some(21))),
        // §2.2: bare LF ends a line (both).
        (b"5\nhello\n0\n\n", Ok(Some(11))),
    ];
    for (body, want) in rows {
        let got = ChunkedScanner::new().feed(body).map_err(|_| ());
        assert_eq!(got, *want, "{:?}", String::from_utf8_lossy(body));
    }
    // Trailers are bounded in all, not only by line (it was: any number of lines).
    let mut body = b"0\r\n".to_vec();
    for _ in 0..20 {
        body.extend_from_slice(format!("X: {}\r\n", "a".repeat(4000)).as_bytes());
    }
    assert!(ChunkedScanner::new().feed(&body).is_err());
}

#[test]
fn data_bytes_count_the_body_without_its_framing() {
    let body: &[u8] = b"5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n";
    for step in 1..body.len() {
        let mut s = ChunkedScanner::new();
        for part in body.chunks(step) {
            s.feed(part).unwrap();
        }
        assert!(s.done());
        assert_eq!(s.data_bytes(), 15, "step {step}");
    }
    let mut s = ChunkedScanner::new();
    s.feed(b"10\r\n").unwrap();
    s.skipped(6);
    assert_eq!((s.data_bytes(), s.data_left()), (6, 10));
}

/// (The counting allocator is installed for this test binary in `request.rs`.)
#[test]
fn reading_a_heads_framing_allocates_nothing() {
    let head = b"HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: x\r\nContent-Type: text/html\r\nContent-Length: 1\r\n\r\nx";
    let (n, r) = evlab_sys::alloc_count::count(|| parse_response_framing(head, false));
    assert!(matches!(
        r,
        HeadParse::Complete(ResponseFraming {
            framing: Framing::Length(1),
            ..
        })
    ));
    assert_eq!(n, 0, "allocations while reading a head's framing");
}
