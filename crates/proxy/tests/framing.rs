//! A request refused for its framing is answered 400 and its connection closed at once, on
//! every engine (issue 39, "Framing and timeouts on every engine"), before the origin hears of
//! it (a coding it does not implement is 501, RFC 9112 §6.1): bytes after a message that
//! cannot be framed cannot be framed either (RFC 9112 §6.3). The proxy lingers 10 s after a
//! close it starts, so a connection still open a second after the 400 is one not closed; the
//! completion engine once closed it only at the linger's end.

#[allow(unused_macros)] // `modes!`: this file runs copy mode only
mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{connect, proxy_with, read_response, read_some, ThreadOrigin};

/// Requests whose framing or target the proxy refuses, and the status it refuses them with.
const HOSTILE: [(&str, &[u8], u16); 9] = [
    (
        "Content-Length with Transfer-Encoding",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    ),
    (
        "two Content-Lengths",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        400,
    ),
    (
        "a NUL in a value",
        b"GET / HTTP/1.1\r\nHost: t\r\nX: a\0b\r\n\r\n",
        400,
    ),
    ("no Host", b"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", 400),
    (
        "userinfo in the authority",
        b"GET http://user@t/ HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
    ),
    (
        "a quoted chunk extension never closed, then a line that is no field",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0;a=\"open\r\nno field\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
    ),
    (
        "a trailer line that is no field",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nno field\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
    ),
    (
        "identity before chunked",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n",
        501,
    ),
    (
        "a coding not implemented",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        501,
    ),
];

mod cases {
    use super::*;

    pub fn framing_errors_close_at_once(m: &str) {
        let o = ThreadOrigin::start(|_| {});
        let Some(p) = proxy_with(o.addr, m, "copy", |c| {
            c.linger = Duration::from_secs(10);
            c.timeout = Some(Duration::from_secs(10));
        }) else {
            return;
        };
        for (what, req, status) in HOSTILE {
            let mut s = connect(&p);
            s.write_all(req).unwrap();
            let r = read_response(&mut s, &mut Vec::new(), false);
            assert_eq!(r.status, status, "{m}: {what}");
            let t = Instant::now();
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let mut b = [0u8; 64];
            let end = read_some(&mut s, &mut b);
            assert!(
                matches!(end, Ok(0)) && t.elapsed() < Duration::from_secs(1),
                "{m}: {what}: {end:?} after {:?}, not a close at once",
                t.elapsed()
            );
        }
        let st = p.shared().stats();
        assert_eq!(
            st.origin.connects, 0,
            "{m}: the origin heard of a refused request"
        );
        p.shutdown().unwrap();
    }
}

macro_rules! framing_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {$(
        #[allow(non_snake_case)]
        mod $v {
            #[test]
            fn framing_errors_close_at_once() {
                crate::cases::framing_errors_close_at_once($name)
            }
        }
    )*};
}

evlab_poll::for_each_mechanism!(framing_tests);
