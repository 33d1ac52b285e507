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
