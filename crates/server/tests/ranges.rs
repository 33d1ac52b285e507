//! Ranges, validators and the directory redirect, over real sockets: every case below runs on
//! every mechanism of the registry and every way a body reaches the socket (the cache's
//! memory, sendfile from the cache for a file too large to hold, `--file-io sendfile` with
//! TCP_CORK, `read` and `mmap`), on one keep-alive connection, then pipelined.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;

use common::*;
use evlab_server::{Config, FileIo};

/// A few hundred KB: larger than a body copied behind its head, a socket buffer and a read.
const LEN: usize = 300 * 1024;

fn content() -> Vec<u8> {
    (0..LEN)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(11) as u8)
        .collect()
}

/// A way a body leaves: its name and the configuration that chooses it.
type Mode = (&'static str, fn(&mut Config));

fn modes() -> Vec<Mode> {
    vec![
        ("cache, in memory", |_| {}),
        ("cache, too large to hold", |c| c.max_in_memory = 1024),
        ("sendfile, cork", |c| {
            c.file_io = FileIo::Sendfile;
            c.cork = true;
        }),
        ("read", |c| c.file_io = FileIo::Read),
        ("mmap", |c| c.file_io = FileIo::Mmap),
    ]
}

/// One request on `s` with the extra header lines `fields`; reads its answer.
fn ask(s: &mut TcpStream, buf: &mut Vec<u8>, method: &str, path: &str, fields: &str) -> Response {
    let req = format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{fields}\r\n");
    s.write_all(req.as_bytes()).unwrap();
    read_response(s, buf, method == "HEAD").expect("a response")
}

/// A 206 of bytes `first..=last` of `want`, exactly.
fn assert_part(r: &Response, want: &[u8], first: usize, last: usize, what: &str) {
    assert_eq!(r.status, 206, "{what}: {r:?}");
    let range = format!("bytes {first}-{last}/{LEN}");
    assert_eq!(r.header("content-range"), Some(range.as_str()), "{what}");
    let n = (last - first + 1).to_string();
    assert_eq!(r.header("content-length"), Some(n.as_str()), "{what}");
    assert_eq!(r.header("accept-ranges"), Some("bytes"), "{what}");
    assert!(r.body == want[first..=last], "{what}: other bytes");
}

fn assert_whole(r: &Response, want: &[u8], what: &str) {
    assert_eq!(r.status, 200, "{what}: {r:?}");
    assert_eq!(r.header("accept-ranges"), Some("bytes"), "{what}");
    assert!(r.header("content-range").is_none(), "{what}");
    assert!(r.body == want, "{what}: other bytes");
}

/// Ranges: one, a suffix, open-ended, clamped, unsatisfiable, several, HEAD, If-Range.
fn ranges(s: &mut TcpStream, buf: &mut Vec<u8>, want: &[u8], etag: &str) {
    let get =
        |s: &mut TcpStream, buf: &mut Vec<u8>, fields: &str| ask(s, buf, "GET", "/f.bin", fields);
    assert_part(&get(s, buf, "Range: bytes=0-9\r\n"), want, 0, 9, "0-9");
    assert_part(
        &get(s, buf, "Range: bytes=-500\r\n"),
        want,
        LEN - 500,
        LEN - 1,
        "-500",
    );
    let open = format!("Range: bytes={}-\r\n", LEN - 700);
    assert_part(&get(s, buf, &open), want, LEN - 700, LEN - 1, "open-ended");
    let r = get(s, buf, "Range: bytes=100-99999999\r\n");
    assert_part(&r, want, 100, LEN - 1, "clamped");
    // A part larger than a socket buffer, from the middle: it stops where it should.
    let r = get(s, buf, "Range: bytes=1000-200999\r\n");
    assert_part(&r, want, 1000, 200_999, "middle");
    let r = get(s, buf, &format!("Range: bytes={LEN}-\r\n"));
    assert_eq!(r.status, 416, "{r:?}");
    let star = format!("bytes */{LEN}");
    assert_eq!(r.header("content-range"), Some(star.as_str()));
    let r = get(s, buf, "Range: bytes=99999999999999999999-\r\n");
    assert_eq!(r.status, 416, "overflowing first-byte-pos");
    assert_whole(
        &get(s, buf, "Range: bytes=0-1,5-6\r\n"),
        want,
        "several ranges",
    );
    assert_whole(&get(s, buf, "Range: bytes=5-1\r\n"), want, "invalid range");
    assert_whole(&get(s, buf, "Range: items=0-1\r\n"), want, "another unit");
    let h = ask(s, buf, "HEAD", "/f.bin", "Range: bytes=0-9\r\n");
    assert_eq!((h.status, h.header("content-length")), (206, Some("10")));
    assert_eq!(
        h.header("content-range"),
        Some(&*format!("bytes 0-9/{LEN}"))
    );
    assert!(h.body.is_empty());
    let r = get(
        s,
        buf,
        &format!("Range: bytes=10-19\r\nIf-Range: {etag}\r\n"),
    );
    assert_part(&r, want, 10, 19, "If-Range, the current ETag");
    let r = get(s, buf, "Range: bytes=10-19\r\nIf-Range: \"other\"\r\n");
    assert_whole(&r, want, "If-Range, another ETag");
}

/// Validators: the ETag, If-None-Match (GET and HEAD), If-Match.
fn validators(s: &mut TcpStream, buf: &mut Vec<u8>, want: &[u8], etag: &str) {
    let get =
        |s: &mut TcpStream, buf: &mut Vec<u8>, fields: &str| ask(s, buf, "GET", "/f.bin", fields);
    let r = get(s, buf, "");
    assert_whole(&r, want, "plain");
    assert_eq!(r.header("etag"), Some(etag));
    let lm = r.header("last-modified").unwrap().to_string();
    for method in ["GET", "HEAD"] {
        let r = ask(
            s,
            buf,
            method,
            "/f.bin",
            &format!("If-None-Match: {etag}\r\n"),
        );
        assert_eq!(r.status, 304, "{method}: {r:?}");
        assert_eq!(r.header("etag"), Some(etag));
        // Beside an ETag, no other metadata (RFC 9110 §15.4.5).
        assert!(r.header("last-modified").is_none());
        assert!(r.header("content-length").is_none() && r.body.is_empty());
    }
    assert_eq!(get(s, buf, "If-None-Match: *\r\n").status, 304);
    let fields = format!("If-None-Match: \"other\"\r\nIf-Modified-Since: {lm}\r\n");
    let r = get(s, buf, &fields);
    assert_whole(&r, want, "If-None-Match misses; If-Modified-Since ignored");
    let r = get(s, buf, "If-Match: \"wrong\"\r\n");
    assert_eq!(r.status, 412, "{r:?}");
    assert_whole(
        &get(s, buf, &format!("If-Match: {etag}\r\n")),
        want,
        "If-Match",
    );
    assert_whole(&get(s, buf, "If-Match: *\r\n"), want, "If-Match: *");
}

/// A directory without its slash: 301 to it with the slash, the query kept.
fn redirects(s: &mut TcpStream, buf: &mut Vec<u8>) {
    for (path, location) in [("/sub", "/sub/"), ("/sub?x=1", "/sub/?x=1")] {
        let r = ask(s, buf, "GET", path, "");
        assert_eq!(
            (r.status, r.header("location")),
            (301, Some(location)),
            "{path}"
        );
        let h = ask(s, buf, "HEAD", path, "");
        assert_eq!(
            (h.status, h.header("location")),
            (301, Some(location)),
            "{path}"
        );
    }
    let r = ask(s, buf, "GET", "/sub/", "");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"sub index\n"[..]));
}

/// A 206, a 416 and a HEAD 206 pipelined in one write: each answer is whole and in order.
fn pipelined(t: &TestServer, want: &[u8]) {
    let mut s = connect(t.addr);
    let one = |range: &str| format!("GET /f.bin HTTP/1.1\r\nHost: t\r\nRange: {range}\r\n\r\n");
    let mut req = one("bytes=2000-150000");
    req += &one(&format!("bytes={}-", LEN + 5));
    req += &one("bytes=-3");
    req += "HEAD /f.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=0-0\r\n\r\n";
    req += "GET /one HTTP/1.1\r\nHost: t\r\n\r\n";
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut next = |head_only| read_response(&mut s, &mut buf, head_only).unwrap();
    assert_part(&next(false), want, 2000, 150_000, "pipelined 206");
    assert_eq!(next(false).status, 416);
    assert_part(&next(false), want, LEN - 3, LEN - 1, "pipelined suffix");
    let h = next(true);
    assert_eq!((h.status, h.header("content-length")), (206, Some("1")));
    let r = next(false);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"a"[..]));
    assert!(buf.is_empty(), "bytes after the last answer");
}

pub fn ranges_and_validators(m: &str) {
    let want = content();
    for (mode, tweak) in modes() {
        let Some(t) = start(m, tweak) else { return };
        let file = t.docroot().join("f.bin");
        std::fs::write(&file, &want).unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        let ns = meta.mtime() as u64 * 1_000_000_000 + meta.mtime_nsec() as u64;
        let etag = format!("\"{:x}-{ns:x}\"", LEN);
        let mut s = connect(t.addr);
        let mut buf = Vec::new();
        ranges(&mut s, &mut buf, &want, &etag);
        validators(&mut s, &mut buf, &want, &etag);
        redirects(&mut s, &mut buf);
        pipelined(&t, &want);
        let v = t.stats();
        let calls = |name: &str| v.syscalls.get(name).map_or(0, |c| c.calls);
        let used = match mode {
            "cache, in memory" => calls("sendfile") + calls("pread64") + calls("mmap") == 0,
            "read" => calls("pread64") > 0 && calls("sendfile") == 0,
            "mmap" => calls("mmap") > 0 && calls("sendfile") == 0,
            _ => calls("sendfile") > 0,
        };
        assert!(used, "{m}, {mode}: not the calls of the mode: {v:?}");
        assert_eq!(v.connections.io_errors, 0, "{m}, {mode}: {v:?}");
    }
}

/// One test per mechanism of the registry (`each::EpollLt::ranges_and_validators`).
macro_rules! mechanism_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {
        mod each {$(
        #[allow(non_snake_case)]
        mod $v {
            #[test]
            fn ranges_and_validators() {
                crate::ranges_and_validators($name)
            }
        }
        )*}
    };
}

evlab_poll::for_each_mechanism!(mechanism_tests);
