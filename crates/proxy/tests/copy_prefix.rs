//! Copy mode's first body bytes: those that arrive in the same read as the response's head are
//! not copied into the client's output; the head's buffer becomes the body's, its head counted
//! as sent, and they leave behind the client's head in the same write. These tests make that
//! path meet every edge it has, on every mechanism of the registry
//! (`evlab_poll::for_each_mechanism!`), and check each response byte for byte: no body, a body
//! wholly inside the head's read, a head and body that fill the proxy's buffer exactly (no room
//! left for the next read until the client took them), a head longer than the buffer, and
//! bodies that go on for several buffers; all on one kept client connection, so the buffers
//! that change hands are reused by the responses after them.

#[allow(unused_macros)] // `modes!`: this file runs copy mode only
mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::{connect, next_head, proxy_with, read_response, ThreadOrigin};

/// The proxy's read buffer in these tests: small, so that heads and bodies reach its edges.
const BUFFER: usize = 4096;

fn body_of(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + seed) % 251) as u8).collect()
}

/// The head the origin sends for `GET /p<pad>/b<len>/s<seed>`: an `X-Pad` field of `pad`
/// bytes makes it as long as a case needs.
fn head_of(pad: usize, len: usize) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nCache-Control: no-store\r\nX-Pad: {}\r\n\r\n",
        "p".repeat(pad)
    )
}

/// The numbers in a path `/p<pad>/b<len>/s<seed>`.
fn parse_path(path: &str) -> Option<(usize, usize, usize)> {
    let mut it = path.split('/').skip(1);
    let mut num = |prefix: &str| it.next()?.strip_prefix(prefix)?.parse().ok();
    Some((num("p")?, num("b")?, num("s")?))
}

/// The origin (one thread per connection): answers each request on kept connections with the
/// head and body its path names, in one write (so the proxy finds body bytes with the head).
fn serve(mut s: TcpStream) {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let (mut buf, mut chunk) = (Vec::new(), [0u8; 4096]);
    while let Some(head) = next_head(&mut s, &mut buf, &mut chunk) {
        let path = head.split(' ').nth(1).unwrap_or("");
        let Some((pad, len, seed)) = parse_path(path) else {
            return;
        };
        let mut out = head_of(pad, len).into_bytes();
        out.extend_from_slice(&body_of(len, seed));
        if s.write_all(&out).is_err() {
            return;
        }
    }
}

/// The cases, as (pad, body length). What fills the proxy's read buffer is the origin's head
/// (the client's is rewritten into its own output), whose four-digit length adds three bytes
/// to the head of a length of 0.
fn cases() -> Vec<(usize, usize)> {
    let fill = |pad: usize| BUFFER - head_of(pad, 0).len() - 3;
    vec![
        (0, 0),
        (0, 1),
        (0, 100),
        // Head and body one byte short of the proxy's buffer, filling it, one byte past it.
        (100, fill(100) - 1),
        (100, fill(100)),
        (100, fill(100) + 1),
        (0, 3 * BUFFER + 7),
        // A head longer than the buffer, with a body after it.
        (BUFFER + 300, 2 * BUFFER + 11),
        (0, 64 * 1024),
        (BUFFER / 2, BUFFER / 2),
        (0, 5),
    ]
}

fn byte_exact(m: &str) {
    let o = ThreadOrigin::start(serve);
    let Some(p) = proxy_with(o.addr, m, "copy", |c| {
        c.cache_bytes = 0;
        c.buffer_size = BUFFER;
    }) else {
        return;
    };
    let mut s = connect(&p);
    let mut buf = Vec::new();
    // Twice over: the second pass runs on buffers the first one handed around.
    for (i, (pad, len)) in cases().into_iter().chain(cases()).enumerate() {
        write!(s, "GET /p{pad}/b{len}/s{i} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let r = read_response(&mut s, &mut buf, false);
        assert_eq!(r.status, 200, "case {i} ({pad}, {len}) on {m}: {}", r.head);
        assert_eq!(
            r.header("x-pad").map(str::len),
            Some(pad),
            "case {i} on {m}: the head's field"
        );
        assert_eq!(r.body.len(), len, "case {i} ({pad}, {len}) on {m}");
        assert!(
            r.body == body_of(len, i),
            "case {i} ({pad}, {len}) on {m}: the body's bytes differ"
        );
    }
    assert!(buf.is_empty(), "bytes after the last response on {m}");
    let st = p.shared().stats();
    assert_eq!(
        st.transfers.copied,
        2 * cases().len() as u64,
        "{m}: every response copied"
    );
    assert_eq!(st.origin.errors, 0, "{m}");
    p.shutdown().unwrap();
}

macro_rules! prefix_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {$(
        #[allow(non_snake_case)]
        mod $v {
            #[test]
            fn copied_bodies_read_with_their_heads_are_byte_exact() {
                crate::byte_exact($name)
            }
        }
    )*};
}

evlab_poll::for_each_mechanism!(prefix_tests);
