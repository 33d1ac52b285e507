use super::*;
use crate::framing::MAX_RESPONSE_HEAD;

fn parse(head: &str, head_request: bool) -> (ResponseParse, String) {
    let mut out = Vec::new();
    let r = parse_response_head(head.as_bytes(), head_request, false, &mut out);
    (r, String::from_utf8(out).unwrap())
}

fn complete(head: &str, head_request: bool) -> (ResponseHead, String) {
    match parse(head, head_request) {
        (ResponseParse::Complete(h), s) => (h, s),
        other => panic!("{head:?}: {other:?}"),
    }
}

/// One row per framing rule: (head, HEAD request, framing, origin keeps the connection).
#[test]
fn framing_table() {
    let rows: &[(&str, bool, Framing, bool)] = &[
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            false,
            Framing::Length(5),
            true,
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            true,
            Framing::None,
            true,
        ),
        (
            "HTTP/1.1 204 No Content\r\n\r\n",
            false,
            Framing::None,
            true,
        ),
        (
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
            false,
            Framing::None,
            true,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            false,
            Framing::Chunked,
            true,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            false,
            Framing::Chunked,
            true,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            false,
            Framing::UntilClose,
            false,
        ),
        // Connection naming a framing field: the field still frames, the connection is
        // not reused.
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: Content-Length\r\n\r\n",
            false,
            Framing::Length(3),
            false,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: transfer-encoding\r\n\r\n",
            false,
            Framing::Chunked,
            false,
        ),
        ("HTTP/1.1 200 OK\r\n\r\n", false, Framing::UntilClose, false),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\n",
            false,
            Framing::Length(7),
            false,
        ),
        (
            "HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\n",
            false,
            Framing::Length(7),
            false,
        ),
        (
            "HTTP/1.0 200 OK\r\nContent-Length: 7\r\nConnection: keep-alive\r\n\r\n",
            false,
            Framing::Length(7),
            true,
        ),
        (
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
            false,
            Framing::Length(0),
            true,
        ),
    ];
    for (head, hr, framing, ka) in rows {
        let (h, _) = complete(head, *hr);
        assert_eq!((h.framing, h.keep_alive), (*framing, *ka), "{head:?}");
        assert_eq!(h.head_len, head.len());
    }
}

#[test]
fn errors_partial_and_interim() {
    for bad in [
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "garbage\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
        // Ambiguous framing, the stuff of response smuggling: refused as nginx does.
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 7\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n",
        // Status codes outside 100..=999.
        "HTTP/1.1 000 Zero\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 1000 High\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 99 Short\r\nContent-Length: 0\r\n\r\n",
    ] {
        assert!(
            matches!(parse(bad, false).0, ResponseParse::Error(_)),
            "{bad:?}"
        );
    }
    assert_eq!(
        parse("HTTP/1.1 200 OK\r\nContent-Le", false).0,
        ResponseParse::Partial
    );
    let early = "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n";
    assert_eq!(parse(early, false).0, ResponseParse::Interim(early.len()));
    let mut huge = String::from("HTTP/1.1 200 OK\r\nX: ");
    huge.push_str(&"a".repeat(MAX_RESPONSE_HEAD));
    assert!(matches!(parse(&huge, false).0, ResponseParse::Error(_)));
}

#[test]
fn rewriting_drops_hop_by_hop_fields() {
    let text = "HTTP/1.1 200 Fine\r\nServer: x\r\nConnection: close, X-Secret\r\n\
                Keep-Alive: 5\r\nX-Secret: 1\r\nContent-Length: 2\r\nProxy-Connection: x\r\n\
                Upgrade: h2c\r\n\r\nok";
    let (h, out) = complete(text, false);
    assert_eq!(
        out,
        "HTTP/1.1 200 Fine\r\nServer: x\r\nContent-Length: 2\r\n"
    );
    assert_eq!(
        h.head_len,
        text.len() - 2,
        "the body is not part of the head"
    );
    assert!(!h.keep_alive);
    // A Connection field naming a framing field removes the others it names, not that one.
    let (h, out) = complete(
        "HTTP/1.1 200 OK\r\nConnection: Content-Length, X-A\r\nX-A: 1\r\nContent-Length: 2\r\n\r\n",
        false,
    );
    assert_eq!(out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n");
    assert!(h.suspect && !h.keep_alive);
    // An HTTP/1.0 client gets no Transfer-Encoding (the caller de-chunks the body); a
    // coding other than chunked it could not read at all.
    let mut out = Vec::new();
    let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX: y\r\n\r\n";
    let r = parse_response_head(text.as_bytes(), false, true, &mut out);
    assert!(matches!(
        r,
        ResponseParse::Complete(ResponseHead {
            framing: Framing::Chunked,
            ..
        })
    ));
    assert_eq!(out, b"HTTP/1.1 200 OK\r\nX: y\r\n");
    let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
    let r = parse_response_head(text.as_bytes(), false, true, &mut Vec::new());
    assert!(matches!(r, ResponseParse::Error(_)), "{r:?}");
    // An HTTP/1.0 origin's status line is sent as HTTP/1.1, the proxy's own version.
    let (_, out) = complete("HTTP/1.0 404 Nope\r\n\r\n", false);
    assert_eq!(out, "HTTP/1.1 404 Nope\r\n");
}

#[test]
fn references_resolve_to_same_origin_keys() {
    let base = "http://a.example/x/y?q=1";
    let rows: &[(&str, Option<&str>)] = &[
        ("http://a.example/z", Some("http://a.example/z")),
        ("HTTP://A.EXAMPLE:80/z?k", Some("http://a.example/z?k")),
        ("http://b.example/z", None),
        ("https://a.example/z", None),
        ("//a.example/z", Some("http://a.example/z")),
        ("//b.example/z", None),
        ("/z/../w", Some("http://a.example/w")),
        ("w", Some("http://a.example/x/w")),
        ("../w", Some("http://a.example/w")),
        ("./", Some("http://a.example/x/")),
        ("?r=2", Some("http://a.example/x/y?r=2")),
        ("w#frag", Some("http://a.example/x/w")),
        ("ftp://a.example/z", None),
    ];
    for (r, want) in rows {
        assert_eq!(same_origin_key(base, r.as_bytes()).as_deref(), *want, "{r}");
    }
}

#[test]
fn last_modified_is_read() {
    let (h, _) = complete(
        "HTTP/1.1 200 OK\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n",
        false,
    );
    assert_eq!(
        h.last_modified,
        Some(httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap())
    );
}

#[test]
fn forwarded_requests() {
    let plain = ForwardOptions::default();
    let fwd_with = |head: &str, opts: &ForwardOptions<'_>| {
        let mut out = Vec::new();
        let f = write_forward_request(head.as_bytes(), opts, &mut out).map(|f| {
            (
                f.target.into_owned(),
                f.key,
                f.head_request,
                f.authorization,
                f.directives.no_cache || f.directives.no_store,
            )
        });
        (f, String::from_utf8(out).unwrap())
    };
    let fwd = |head: &str| fwd_with(head, &plain);
    assert_eq!(
        fwd("GET /a?b=1 HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nTE: trailers\r\nAccept: */*\r\n\r\n"),
        (
            Ok(("/a?b=1".into(), "http://h/a?b=1".into(), false, false, false)),
            "GET /a?b=1 HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n".into()
        )
    );
    // Absolute-form without Host (HTTP/1.0): the authority is the Host sent and keyed.
    assert_eq!(
        fwd("HEAD http://example.com:8080/x#frag HTTP/1.0\r\nAuthorization: Basic x\r\n\r\n"),
        (
            Ok(("/x".into(), "http://example.com:8080/x".into(), true, true, false)),
            "HEAD /x HTTP/1.0\r\nHost: example.com:8080\r\nAuthorization: Basic x\r\nConnection: keep-alive\r\n\r\n"
                .into()
        )
    );
    assert_eq!(
        fwd("GET http://h?q HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\n\r\n").0,
        Ok(("/?q".into(), "http://h/?q".into(), false, false, true))
    );
    let no_store = "GET / HTTP/1.1\r\nHost: h\r\nCache-Control: max-age=0, no-store\r\n\r\n";
    assert!(fwd(no_store).0.unwrap().4);
    assert_eq!(
        fwd("GET / HTTP/1.1\r\nHost: h\r\n").0,
        Err(ForwardError::Malformed)
    );
    assert_eq!(
        fwd("GET ftp://h/ HTTP/1.1\r\nHost: h\r\n\r\n").0,
        Err(ForwardError::Malformed)
    );
}

/// The cache key names the host, however it is spelt; Host and an absolute-form target
/// must agree; `--origin-host` replaces the Host sent; `Connection: Host` drops nothing.
#[test]
fn hosts_keys_and_via() {
    let key = |head: &str| {
        write_forward_request(head.as_bytes(), &ForwardOptions::default(), &mut Vec::new())
            .map(|f| f.key)
    };
    let rows: &[(&str, Result<&str, ForwardError>)] = &[
        (
            "GET /p HTTP/1.1\r\nHost: good.example\r\n\r\n",
            Ok("http://good.example/p"),
        ),
        (
            "GET /p HTTP/1.1\r\nHost: evil.example\r\n\r\n",
            Ok("http://evil.example/p"),
        ),
        (
            "GET /p HTTP/1.1\r\nHost: GOOD.Example:80\r\n\r\n",
            Ok("http://good.example/p"),
        ),
        (
            "GET /p HTTP/1.1\r\nHost: good.example:\r\n\r\n",
            Ok("http://good.example/p"),
        ),
        (
            "GET /p HTTP/1.1\r\nHost: good.example:8080\r\n\r\n",
            Ok("http://good.example:8080/p"),
        ),
        (
            "GET /p HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
            Ok("http://[::1]/p"),
        ),
        (
            "GET /p HTTP/1.1\r\nHost: [::1]\r\n\r\n",
            Ok("http://[::1]/p"),
        ),
        (
            "GET https://a.example:443/p HTTP/1.1\r\nHost: A.example\r\n\r\n",
            Ok("https://a.example/p"),
        ),
        (
            "GET https://a.example:80/p HTTP/1.1\r\nHost: a.example:80\r\n\r\n",
            Ok("https://a.example:80/p"),
        ),
        (
            "GET http://Good.Example/p HTTP/1.1\r\nHost: good.example:80\r\n\r\n",
            Ok("http://good.example/p"),
        ),
        ("GET /p HTTP/1.0\r\n\r\n", Ok("http:///p")),
        (
            "GET http://evil.example/p HTTP/1.1\r\nHost: good.example\r\n\r\n",
            Err(ForwardError::HostMismatch),
        ),
        (
            "GET http://good.example:81/p HTTP/1.1\r\nHost: good.example\r\n\r\n",
            Err(ForwardError::HostMismatch),
        ),
        (
            "GET https://good.example/p HTTP/1.1\r\nHost: good.example:80\r\n\r\n",
            Err(ForwardError::HostMismatch),
        ),
        (
            "GET /p HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            Err(ForwardError::Hosts),
        ),
        (
            "GET /p HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n",
            Err(ForwardError::Hosts),
        ),
    ];
    for (head, want) in rows {
        assert_eq!(key(head).as_deref().map_err(|e| *e), *want, "{head:?}");
    }
    let opts = ForwardOptions {
        origin_host: Some("origin.internal"),
        via: Some("evlab"),
        ..ForwardOptions::default()
    };
    let mut out = Vec::new();
    let head = "GET /p HTTP/1.1\r\nX-A: 1\r\nHost: good.example\r\nConnection: Host, X-A\r\n\r\n";
    let f = write_forward_request(head.as_bytes(), &opts, &mut out).unwrap();
    assert_eq!(f.key, "http://good.example/p", "keyed by the client's Host");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "GET /p HTTP/1.1\r\nHost: origin.internal\r\nVia: 1.1 evlab\r\n\r\n"
    );
    // Connection: Host drops nothing Host-wise; the Via of an HTTP/1.0 request says 1.0.
    let opts = ForwardOptions {
        origin_host: None,
        via: Some("evlab"),
        ..ForwardOptions::default()
    };
    let mut out = Vec::new();
    let head =
        "GET /p HTTP/1.0\r\nHost: good.example\r\nConnection: Host\r\nVia: 1.1 other\r\n\r\n";
    write_forward_request(head.as_bytes(), &opts, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "GET /p HTTP/1.0\r\nHost: good.example\r\nVia: 1.1 other\r\nVia: 1.0 evlab\r\nConnection: keep-alive\r\n\r\n"
    );
}

#[test]
fn forwarded_for_is_appended_and_expect_dropped() {
    let opts = ForwardOptions {
        forwarded_for: Some("10.0.0.9"),
        drop_expect_continue: true,
        ..ForwardOptions::default()
    };
    let mut out = Vec::new();
    write_forward_request(
        b"POST /p HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 1.1.1.1\r\nExpect: 100-continue\r\nx-forwarded-for: 2.2.2.2 \r\nContent-Length: 1\r\n\r\n",
        &opts,
        &mut out,
    )
    .unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("X-Forwarded-For: 1.1.1.1, 2.2.2.2, 10.0.0.9\r\n"),
        "{out}"
    );
    assert_eq!(out.matches("orwarded-For").count(), 1, "{out}");
    assert!(!out.contains("Expect"), "{out}");
    assert!(out.contains("Content-Length: 1\r\n"), "{out}");
    let mut out = Vec::new();
    write_forward_request(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", &opts, &mut out).unwrap();
    assert!(String::from_utf8(out)
        .unwrap()
        .contains("\r\nX-Forwarded-For: 10.0.0.9\r\n"));
}
