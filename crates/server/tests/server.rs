//! The server's behaviour, checked once per mechanism over real sockets: every case below is
//! expanded for every mechanism by `mechanism_tests!`, so a new mechanism inherits them all.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use evlab_poll::{Kind, Mechanism};
use evlab_server::FileIo;

/// Tests that hold thousands of descriptors take turns, so that `cargo test` (many tests in one
/// process) stays under the open-file limit.
static MANY_FDS: Mutex<()> = Mutex::new(());

mod cases {
    use super::*;

    pub fn get_one(m: &str) {
        let Some(t) = start(m, |_| {}) else { return };
        let r = get(t.addr, "/one");
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"a");
        assert_eq!(r.header("content-length"), Some("1"));
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        assert!(r.header("date").is_some_and(|d| d.ends_with(" GMT")));
        assert!(r.header("last-modified").is_some());
        assert_eq!(r.version, "HTTP/1.1");
        let r = get(t.addr, "/hello.txt");
        assert_eq!(r.body, b"hello, world\n");
        assert!(r.header("content-type").unwrap().starts_with("text/plain"));
        let r = get(t.addr, "/");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"<h1>evlab</h1>\n"[..])
        );
        let r = get(t.addr, "/empty");
        assert_eq!((r.status, r.body.len()), (200, 0));
        assert_eq!(r.header("content-length"), Some("0"));
    }

    pub fn head(m: &str) {
        let Some(t) = start(m, |_| {}) else { return };
        let mut s = connect(t.addr);
        s.write_all(
            b"HEAD /hello.txt HTTP/1.1\r\nHost: t\r\n\r\nGET /one HTTP/1.1\r\nHost: t\r\n\r\n",
        )
        .unwrap();
        let mut buf = Vec::new();
        let h = read_response(&mut s, &mut buf, true).unwrap();
        assert_eq!(h.status, 200);
        assert_eq!(h.header("content-length"), Some("13"));
        // The next bytes must be the GET's response, not a body for the HEAD.
        let g = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!((g.status, g.body.as_slice()), (200, &b"a"[..]));
        assert!(buf.is_empty());
    }

    pub fn not_found(m: &str) {
        let Some(t) = start(m, |_| {}) else { return };
        for p in ["/nope", "/emptydir/", "/escape", "/sub/nope.html"] {
            let r = get(t.addr, p);
            assert_eq!(r.status, 404, "{p}");
            assert!(!r.body.is_empty());
        }
        let r = get(t.addr, "/inside-link");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello, world\n"[..]));
        let r = get(t.addr, "/sub/");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"sub index\n"[..]));
        // Without its slash a directory is redirected, so that its relative links resolve.
        let r = get(t.addr, "/sub");
        assert_eq!((r.status, r.header("location")), (301, Some("/sub/")));
    }

    pub fn not_modified(m: &str) {
        let Some(t) = start(m, |_| {}) else { return };
        let r = get(t.addr, "/hello.txt");
        let lm = r.header("last-modified").unwrap().to_string();
        let mut s = connect(t.addr);
        let req = format!(
            "GET /hello.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: {lm}\r\n\r\n\
             GET /hello.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: Thu, 01 Jan 1970 00:00:01 GMT\r\n\r\n\
             GET /hello.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: not a date\r\n\r\n"
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut buf = Vec::new();
        let a = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(a.status, 304);
        assert!(a.body.is_empty());
        let b = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!((b.status, b.body.len()), (200, 13));
        let c = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(c.status, 200, "an invalid date is ignored");
    }

    pub fn keep_alive(m: &str) {
        let Some(t) = start(m, |_| {}) else { return };
        let mut s = connect(t.addr);
        let mut buf = Vec::new();
        for i in 0..5 {
            s.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap();
            let r = read_response(&mut s, &mut buf, false).unwrap();
            assert_eq!(r.status, 200, "request {i}");
            assert_eq!(r.header("connection"), None);
        }
        // HTTP/1.0 closes unless asked; keeps alive when asked.
        let mut s = connect(t.addr);
        s.write_all(b"GET /one HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.version, "HTTP/1.0");
        assert_eq!(r.header("connection"), Some("keep-alive"));
        s.write_all(b"GET /one HTTP/1.0\r\n\r\n").unwrap();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.header("connection"), Some("close"));
        assert!(closed_by_server(&mut s));
        let mut s = connect(t.addr);
        s.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!((r.status, r.header("connection")), (200, Some("close")));
        assert!(closed_by_server(&mut s));
    }

    /// `--origin-delay`: a reply is held for the think time (at least; never an upper bound),
    /// pipelined requests are each delayed in turn, a client that half-closes after asking
    /// still gets its answer, and the stats page is not delayed.
    pub fn origin_delay(m: &str) {
        const D: Duration = Duration::from_millis(120);
        let Some(t) = start(m, |c| {
            c.origin_delay = Some(D);
            c.stats = true;
        }) else {
            return;
        };
        let t0 = Instant::now();
        let r = get(t.addr, "/hello.txt");
        assert!(t0.elapsed() >= D, "{m}: answered after {:?}", t0.elapsed());
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello, world\n"[..]));
        // Three pipelined requests: each waits its own delay after the one before it.
        let mut s = connect(t.addr);
        let t0 = Instant::now();
        s.write_all(
            b"GET /one HTTP/1.1\r\nHost: t\r\n\r\nHEAD /hello.txt HTTP/1.1\r\nHost: t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n",
        )
        .unwrap();
        let mut buf = Vec::new();
        let a = read_response(&mut s, &mut buf, false).unwrap();
        let ta = t0.elapsed();
        let b = read_response(&mut s, &mut buf, true).unwrap();
        let tb = t0.elapsed();
        let c = read_response(&mut s, &mut buf, false).unwrap();
        let tc = t0.elapsed();
        assert_eq!((a.status, a.body.as_slice()), (200, &b"a"[..]));
        assert_eq!((b.status, b.header("content-length")), (200, Some("13")));
        assert_eq!(c.status, 404);
        assert!(
            ta >= D && tb >= 2 * D && tc >= 3 * D,
            "{m}: {ta:?} {tb:?} {tc:?}"
        );
        // The connection is still usable afterwards.
        s.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        let d = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(d.body, b"a");
        // Two requests, then the client shuts its side while the first is held.
        let mut s = connect(t.addr);
        let t0 = Instant::now();
        s.write_all(
            b"GET /one HTTP/1.1\r\nHost: t\r\n\r\nGET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n",
        )
        .unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut buf = Vec::new();
        let a = read_response(&mut s, &mut buf, false).unwrap();
        let b = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(
            (a.body.as_slice(), b.body.as_slice()),
            (&b"a"[..], &b"hello, world\n"[..])
        );
        assert!(t0.elapsed() >= 2 * D, "{m}: {:?}", t0.elapsed());
        assert!(
            closed_by_server(&mut s),
            "{m}: not closed after the half-close"
        );
        let v = stats_over_http(t.addr);
        assert_eq!(v.timers.delayed, 7, "{v:?}");
    }

    pub fn pipelining(m: &str) {
        let Some(t) = start(m, |_| {}) else { return };
        let mut s = connect(t.addr);
        s.write_all(
            b"GET /one HTTP/1.1\r\nHost: t\r\n\r\nGET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n",
        )
        .unwrap();
        let mut buf = Vec::new();
        let a = read_response(&mut s, &mut buf, false).unwrap();
        let b = read_response(&mut s, &mut buf, false).unwrap();
        let c = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!((a.status, a.body.as_slice()), (200, &b"a"[..]));
        assert_eq!((b.status, b.body.as_slice()), (200, &b"hello, world\n"[..]));
        assert_eq!(c.status, 404);
        // 100 pipelined requests, with the last asking to close.
        let mut req = Vec::new();
        for _ in 0..99 {
            req.extend_from_slice(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n");
        }
        req.extend_from_slice(b"GET /hello.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        s.write_all(&req).unwrap();
        for i in 0..99 {
            let r = read_response(&mut s, &mut buf, false).unwrap();
            assert_eq!(
                (r.status, r.body.as_slice()),
                (200, &b"a"[..]),
                "response {i}"
            );
        }
        let last = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(last.body, b"hello, world\n");
        assert!(closed_by_server(&mut s));
    }

    fn fetch_big(t: &TestServer) {
        let want = big_content();
        let mut s = connect(t.addr);
        let mut buf = Vec::new();
        for _ in 0..2 {
            s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap();
            let r = read_response(&mut s, &mut buf, false).unwrap();
            assert_eq!(r.status, 200);
            assert_eq!(r.body.len(), BIG_LEN);
            assert!(r.body == want, "4 MiB body differs");
        }
        s.write_all(
            b"HEAD /big.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /one HTTP/1.1\r\nHost: t\r\n\r\n",
        )
        .unwrap();
        let h = read_response(&mut s, &mut buf, true).unwrap();
        assert_eq!(h.header("content-length"), Some("4194304"));
        let o = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(o.body, b"a");
    }

    /// Every complete request received is answered before the close that follows the peer's
    /// FIN, even when the requests wait behind a large reply (uring answered 1 of 2 before:
    /// its EOF closed the connection with the second request still buffered).
    pub fn half_close_answers_all(m: &str) {
        let Some(t) = start(m, |_| {}) else { return };
        let want = big_content();
        for _ in 0..3 {
            let mut s = connect(t.addr);
            s.write_all(
                b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /one HTTP/1.1\r\nHost: t\r\n\r\n",
            )
            .unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut buf = Vec::new();
            let big = read_response(&mut s, &mut buf, false).expect("the big reply");
            assert_eq!(big.status, 200);
            assert!(big.body == want, "4 MiB body differs");
            let one = read_response(&mut s, &mut buf, false).expect("the second reply");
            assert_eq!((one.status, one.body.as_slice()), (200, &b"a"[..]));
            assert!(closed_by_server(&mut s));
        }
        // 300 pipelined requests and the FIN in one go: 300 answers, then the close.
        let mut s = connect(t.addr);
        let req = b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n".repeat(300);
        s.write_all(&req).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut buf = Vec::new();
        let mut n = 0;
        while let Some(r) = read_response(&mut s, &mut buf, false) {
            assert_eq!((r.status, r.body.as_slice()), (200, &b"a"[..]), "reply {n}");
            n += 1;
        }
        assert_eq!(n, 300);
    }

    /// Polls the stats until `done` holds; the deadline only turns a hang into a failure.
    fn wait_stats(t: &TestServer, what: &str, done: impl Fn(&evlab_server::ServerStats) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let v = t.stats();
            if done(&v) {
                return;
            }
            assert!(Instant::now() < deadline, "{what} never happened: {v:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A client that asks for a large file and stops reading is cut off after `send_timeout`;
    /// one that reads steadily is not, since every write that makes progress restarts the
    /// timer (nginx's send_timeout).
    pub fn send_timeout(m: &str) {
        let Some(t) = start(m, |c| {
            c.send_timeout = Some(Duration::from_secs(1));
            c.header_timeout = None;
            c.max_in_memory = 1 << 20;
        }) else {
            return;
        };
        // Far larger than any socket buffer (sparse: no disk, no memory).
        let huge: u64 = 256 << 20;
        std::fs::File::create(t.docroot().join("huge.bin"))
            .unwrap()
            .set_len(huge)
            .unwrap();
        let mut s = evlab_sys::connect_with_rcvbuf(&t.addr, 64 * 1024).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /huge.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        // Read 2 MiB every 100 ms for 1.5 s: the server never goes 1 s without progress.
        let mut b = vec![0u8; 256 * 1024];
        let mut got = 0u64;
        for _ in 0..15 {
            let mut chunk = 0;
            while chunk < 2 << 20 {
                chunk += s.read(&mut b).unwrap() as u64;
            }
            got += chunk;
            std::thread::sleep(Duration::from_millis(100));
        }
        let v = t.stats();
        assert_eq!(v.connections.send_timeouts, 0, "{v:?}");
        // Now stop reading: the server gives up on the reply and closes.
        wait_stats(&t, "a send timeout", |v| {
            v.connections.send_timeouts == 1 && v.connections.active == 0
        });
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest); // what was in flight, then EOF or a reset
        assert!(got + (rest.len() as u64) < huge, "the whole reply arrived");
    }

    /// Pipelined requests behind a reply the client reads slowly: the server stops taking
    /// input until the reply leaves, then answers every one (uring read on, copied 1 MiB of
    /// input and reset the client before: 0 answers).
    pub fn input_back_pressure(m: &str) {
        let Some(t) = start(m, |c| c.max_in_memory = 1 << 20) else {
            return;
        };
        // A reply larger than the socket buffers can hold (sparse: no disk, no memory).
        let len: u64 = 32 << 20;
        std::fs::File::create(t.docroot().join("large.bin"))
            .unwrap()
            .set_len(len)
            .unwrap();
        let mut s = evlab_sys::connect_with_rcvbuf(&t.addr, 64 * 1024).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // 200 requests of ~7 KiB each (a padding header under the 8 KiB head limit): 1.4 MB.
        let pad = "x".repeat(7000);
        let mut req = b"GET /large.bin HTTP/1.1\r\nHost: t\r\n\r\n".to_vec();
        for _ in 0..200 {
            req.extend_from_slice(
                format!("GET /one HTTP/1.1\r\nHost: t\r\nX-Pad: {pad}\r\n\r\n").as_bytes(),
            );
        }
        let mut w = s.try_clone().unwrap();
        let writer = std::thread::spawn(move || w.write_all(&req).is_ok());
        // Let the requests pile up behind the reply, then read everything.
        std::thread::sleep(Duration::from_millis(300));
        let mut buf = Vec::new();
        let large = read_response(&mut s, &mut buf, false).expect("the large reply");
        assert_eq!((large.status, large.body.len() as u64), (200, len));
        for i in 0..200 {
            let r = read_response(&mut s, &mut buf, false).unwrap_or_else(|| panic!("reply {i}"));
            assert_eq!((r.status, r.body.as_slice()), (200, &b"a"[..]), "reply {i}");
        }
        assert!(
            writer.join().unwrap(),
            "the server stopped taking the requests"
        );
        let v = t.stats();
        assert_eq!(v.connections.io_errors, 0, "{v:?}");
    }

    pub fn big_file_writev(m: &str) {
        let Some(t) = start(m, |_| {}) else { return };
        fetch_big(&t);
    }

    pub fn big_file_sendfile_cork(m: &str) {
        let Some(t) = start(m, |c| {
            c.file_io = FileIo::Sendfile;
            c.cork = true;
        }) else {
            return;
        };
        fetch_big(&t);
        let r = get(t.addr, "/one");
        assert_eq!(r.body, b"a");
    }

    pub fn big_file_sendfile_not_in_memory(m: &str) {
        let Some(t) = start(m, |c| {
            c.file_io = FileIo::Cache;
            c.max_in_memory = 1024;
        }) else {
            return;
        };
        fetch_big(&t);
    }

    /// `--file-io read` and `mmap` read the file for every response (pread 64 KiB at a time,
    /// or a mapping per response), byte-exact, keep-alive and pipelined with HEAD and a small
    /// file; the stats show the calls each mode makes and none of the others'.
    pub fn file_io_read_and_mmap(m: &str) {
        for mode in [FileIo::Read, FileIo::Mmap] {
            let Some(t) = start(m, |c| c.file_io = mode) else {
                return;
            };
            fetch_big(&t); // 2 GETs and a HEAD of 4 MiB, and /one
                           // The last mapping is unmapped just after its write returns, which the client's
                           // read of the reply may precede: the counts are read once it has been.
            let unmapped = |v: &evlab_wire::server::ServerStats| {
                v.syscalls.get("munmap").map_or(0, |c| c.calls) >= 3
            };
            let t0 = Instant::now();
            let mut v = t.stats();
            while mode == FileIo::Mmap && !unmapped(&v) && t0.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(10));
                v = t.stats();
            }
            let calls = |name: &str| v.syscalls.get(name).map_or(0, |c| c.calls);
            let (pread, mmap, munmap, sendfile) = (
                calls("pread64"),
                calls("mmap"),
                calls("munmap"),
                calls("sendfile"),
            );
            assert_eq!(sendfile, 0, "{mode:?}: {v:?}");
            match mode {
                // 4 MiB in 64 KiB reads, twice, and /one's byte, at least (once more where a
                // write was short: the read buffer is kept, not read again).
                FileIo::Read => {
                    assert!(pread > 2 * 64, "{pread} preads: {v:?}");
                    assert_eq!((mmap, munmap), (0, 0), "{v:?}");
                }
                // One mapping per response with a body (two of big.bin, one of /one), each
                // unmapped when sent; HEAD maps nothing.
                _ => {
                    assert_eq!((mmap, munmap), (3, 3), "{v:?}");
                    assert_eq!(pread, 0, "{v:?}");
                }
            }
            assert_eq!(v.connections.io_errors, 0, "{v:?}");
        }
    }

    pub fn eager_write(m: &str) {
        let Some(t) = start(m, |c| c.eager_write = true) else {
            return;
        };
        let mut s = connect(t.addr);
        let mut buf = Vec::new();
        for _ in 0..3 {
            s.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap();
            assert_eq!(read_response(&mut s, &mut buf, false).unwrap().body, b"a");
        }
        fetch_big(&t);
    }

    pub fn half_close(m: &str) {
        let Some(t) = start(m, |_| {}) else { return };
        for _ in 0..20 {
            let mut s = connect(t.addr);
            // Request and FIN together: an edge-triggered server must still see the EOF.
            s.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut all = Vec::new();
            s.read_to_end(&mut all)
                .expect("the server answers and closes");
            assert!(all.starts_with(b"HTTP/1.1 200 OK\r\n"));
            assert!(all.ends_with(b"\r\n\r\na"));
        }
    }

    pub fn batch_writes(m: &str) {
        let Some(t) = start(m, |c| c.batch_writes = true) else {
            return;
        };
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let addr = t.addr;
                std::thread::spawn(move || {
                    let mut s = connect(addr);
                    let mut buf = Vec::new();
                    for _ in 0..50 {
                        s.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\nGET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n")
                            .unwrap();
                        assert_eq!(read_response(&mut s, &mut buf, false).unwrap().body, b"a");
                        assert_eq!(
                            read_response(&mut s, &mut buf, false).unwrap().body,
                            b"hello, world\n"
                        );
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        fetch_big(&t);
    }

    /// Malformed or hostile requests: (name, bytes, status, connection stays open).
    fn hostile_table() -> Vec<(&'static str, Vec<u8>, u16, bool)> {
        let long_path = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(9000));
        let big_header = format!(
            "GET /one HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
            "b".repeat(10_000)
        );
        let mut many = String::from("GET /one HTTP/1.1\r\nHost: t\r\n");
        for i in 0..100 {
            many.push_str(&format!("X-{i}: v\r\n"));
        }
        many.push_str("\r\n");
        let r = |name, s: &str, st, open| (name, s.as_bytes().to_vec(), st, open);
        vec![
            r("garbage", "GARBAGE\r\n\r\n", 400, false),
            r("no host on 1.1", "GET /one HTTP/1.1\r\n\r\n", 400, false),
            r("two hosts", "GET /one HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, false),
            r("http/2.0", "GET /one HTTP/2.0\r\nHost: t\r\n\r\n", 505, false),
            r("http/1.2", "GET /one HTTP/1.2\r\nHost: t\r\n\r\n", 505, false),
            r("http/3.0", "GET /one HTTP/3.0\r\nHost: t\r\n\r\n", 505, false),
            r("bad protocol", "GET /one FOO/1.1\r\nHost: t\r\n\r\n", 400, false),
            r("http/0.9 style", "GET /one\r\n\r\n", 400, false),
            r("post no body", "POST /one HTTP/1.1\r\nHost: t\r\n\r\n", 405, true),
            r("post with body", "POST /one HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello", 405, false),
            r("put", "PUT /one HTTP/1.1\r\nHost: t\r\n\r\n", 405, true),
            r("delete", "DELETE /one HTTP/1.1\r\nHost: t\r\n\r\n", 405, true),
            r("options", "OPTIONS /one HTTP/1.1\r\nHost: t\r\n\r\n", 405, true),
            r("unknown method", "BREW /pot HTTP/1.1\r\nHost: t\r\n\r\n", 501, true),
            r("lowercase method", "get /one HTTP/1.1\r\nHost: t\r\n\r\n", 501, true),
            r("chunked body", "GET /one HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501, false),
            r("gzip not chunked", "GET /one HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 400, false),
            r("te and cl", "GET /one HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc", 400, false),
            r("cl not a number", "GET /one HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n", 400, false),
            r("cl negative", "GET /one HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n", 400, false),
            r("cl conflicting", "GET /one HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400, false),
            r("cl duplicate equal", "GET /one HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 5\r\n\r\nhello", 413, false),
            r("get with body", "GET /one HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello", 413, false),
            r("get cl zero", "GET /one HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", 200, true),
            r("header without colon", "GET /one HTTP/1.1\r\nHost t\r\n\r\n", 400, false),
            r("space before colon", "GET /one HTTP/1.1\r\nHost : t\r\n\r\n", 400, false),
            r("obs-fold", "GET /one HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n\r\n", 400, false),
            r("control char in value", "GET /one HTTP/1.1\r\nHost: t\r\nX-A: a\x01b\r\n\r\n", 400, false),
            ("request line too long", long_path.into_bytes(), 414, false),
            ("header too large", big_header.into_bytes(), 431, false),
            ("too many headers", many.into_bytes(), 431, false),
            r("dot-dot escape", "GET /../../etc/passwd HTTP/1.1\r\nHost: t\r\n\r\n", 403, true),
            r("encoded dot-dot", "GET /%2e%2e/%2E%2E/etc/passwd HTTP/1.1\r\nHost: t\r\n\r\n", 403, true),
            r("dot-dot inside root", "GET /sub/../hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", 200, true),
            r("encoded nul", "GET /one%00.txt HTTP/1.1\r\nHost: t\r\n\r\n", 400, false),
            r("bad escape", "GET /%zz HTTP/1.1\r\nHost: t\r\n\r\n", 400, false),
            r("asterisk target", "GET * HTTP/1.1\r\nHost: t\r\n\r\n", 400, false),
            r("absolute form", "GET http://t/one HTTP/1.1\r\nHost: t\r\n\r\n", 200, true),
            r("query stripped", "GET /one?x=1&y=2 HTTP/1.1\r\nHost: t\r\n\r\n", 200, true),
            r("symlink outside root", "GET /escape HTTP/1.1\r\nHost: t\r\n\r\n", 404, true),
            r("leading empty lines", "\r\n\r\nGET /one HTTP/1.1\r\nHost: t\r\n\r\n", 200, true),
            r("connection close", "GET /one HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 200, false),
            r("http/1.0 default close", "GET /one HTTP/1.0\r\n\r\n", 200, false),
            r("http/1.0 keep-alive", "GET /one HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 200, true),
            r("head of missing", "HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\n", 404, true),
            r("directory without index", "GET /emptydir/ HTTP/1.1\r\nHost: t\r\n\r\n", 404, true),
        ]
    }

    pub fn hostile_requests(m: &str) {
        let Some(t) = start(m, |_| {}) else { return };
        let table = hostile_table();
        assert!(table.len() >= 30);
        for (name, bytes, status, open) in table {
            let mut s = connect(t.addr);
            s.write_all(&bytes).unwrap();
            let head_only = bytes.starts_with(b"HEAD");
            let mut buf = Vec::new();
            let r = read_response(&mut s, &mut buf, head_only)
                .unwrap_or_else(|| panic!("{name}: no response"));
            assert_eq!(r.status, status, "{name}: status");
            if r.status == 405 {
                assert_eq!(r.header("allow"), Some("GET, HEAD"), "{name}: Allow");
            }
            if open {
                s.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
                    .unwrap();
                let next = read_response(&mut s, &mut buf, false)
                    .unwrap_or_else(|| panic!("{name}: connection should stay open"));
                assert_eq!(
                    (next.status, next.body.as_slice()),
                    (200, &b"a"[..]),
                    "{name}: next"
                );
            } else {
                assert!(closed_by_server(&mut s), "{name}: connection should close");
            }
        }
        // The server is unharmed.
        assert_eq!(get(t.addr, "/one").status, 200);
    }

    pub fn many_connections(m: &str) {
        let _turn = MANY_FDS.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = start(m, |_| {}) else { return };
        const N: usize = 3000;
        let mut conns: Vec<TcpStream> = Vec::with_capacity(N);
        for i in 0..N {
            let s = TcpStream::connect(t.addr).unwrap_or_else(|e| panic!("connect {i}: {e}"));
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            conns.push(s);
        }
        // All open at once before any request: the server holds N connections (past FD_SETSIZE).
        for s in conns.iter_mut() {
            s.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap();
        }
        let mut buf = Vec::new();
        for (i, s) in conns.iter_mut().enumerate() {
            buf.clear();
            let r = read_response(s, &mut buf, false).unwrap_or_else(|| panic!("conn {i}: EOF"));
            assert_eq!((r.status, r.body.as_slice()), (200, &b"a"[..]), "conn {i}");
        }
        let stats = stats_over_http(t.addr);
        assert!(stats.connections.max_active >= N as u64, "{stats:?}");
    }

    pub fn reset_mid_response(m: &str) {
        let Some(t) = start(m, |_| {}) else { return };
        let addr = t.addr;
        let mut a = connect(addr);
        a.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut got = vec![0u8; 65536];
        a.read_exact(&mut got).unwrap();
        // Others keep being served while A's response is stuck in flight.
        for _ in 0..20 {
            assert_eq!(get(addr, "/one").status, 200);
        }
        evlab_sys::set_linger(std::os::fd::AsRawFd::as_raw_fd(&a), Some(0)).unwrap();
        drop(a); // RST
        std::thread::sleep(Duration::from_millis(50));
        for _ in 0..20 {
            assert_eq!(get(addr, "/one").status, 200);
        }
        let mut s = connect(addr);
        s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut buf = Vec::new();
        assert_eq!(
            read_response(&mut s, &mut buf, false).unwrap().body.len(),
            BIG_LEN
        );
    }

    pub fn header_timeout(m: &str) {
        let Some(t) = start(m, |c| c.header_timeout = Some(Duration::from_millis(1000))) else {
            return;
        };
        // Part of a head, then silence: 408 and close.
        let mut s = connect(t.addr);
        s.write_all(b"GET /one HTTP/1.1\r\nHo").unwrap();
        let t0 = Instant::now();
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.status, 408);
        assert!(closed_by_server(&mut s));
        assert!(t0.elapsed() < Duration::from_secs(5));
        // Nothing at all: closed without a response.
        let mut idle = connect(t.addr);
        assert!(closed_by_server(&mut idle));
        // A keep-alive connection that goes quiet after a response is closed too.
        let mut k = connect(t.addr);
        k.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(&mut k, &mut buf, false).unwrap().status, 200);
        assert!(closed_by_server(&mut k));
        let stats = stats_over_http(t.addr);
        assert!(stats.connections.header_timeouts >= 3, "{stats:?}");
    }

    pub fn no_header_timeout(m: &str) {
        let Some(t) = start(m, |c| c.header_timeout = None) else {
            return;
        };
        let mut idle = connect(t.addr);
        idle.set_read_timeout(Some(Duration::from_millis(800)))
            .unwrap();
        let mut b = [0u8; 16];
        let e = loop {
            // Interrupted: see the retry in `common::read_response`.
            match idle.read(&mut b) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r.unwrap_err(),
            }
        };
        assert!(matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ));
        idle.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut buf = Vec::new();
        assert_eq!(
            read_response(&mut idle, &mut buf, false).unwrap().status,
            200
        );
    }

    pub fn stats_endpoint(m: &str) {
        let Some(t) = start(m, |c| c.profile = true) else {
            return;
        };
        for _ in 0..10 {
            get(t.addr, "/one");
        }
        let r = get(t.addr, "/.evlab/stats");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("application/json"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        // The document is a `ServerStats`, field for field: read into the type and written
        // out again, nothing is lost or added.
        let typed: evlab_server::ServerStats = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(serde_json::to_value(&typed).unwrap(), v);
        let v = typed;
        assert_eq!(v.mechanism, m);
        assert!(v.profile);
        assert!(v.requests >= 11, "{v:?}");
        assert!(v.responses.s2xx >= 10, "{v:?}");
        assert!(v.connections.accepted >= 11, "{v:?}");
        let call = |name: &str| v.syscalls.get(name);
        let mech = Mechanism::from_name(m).unwrap();
        if mech.kind() == Kind::Completion {
            // Multishot accept and recv: connections and requests arrive without syscalls.
            assert!(call("accept4").is_none(), "{v:?}");
            assert!(call("read").is_none(), "{v:?}");
            assert!(
                call("io_uring_enter").is_some_and(|c| c.ns.is_some()),
                "{v:?}"
            );
        } else {
            let accept4 = call("accept4").unwrap_or_else(|| panic!("no accept4: {v:?}"));
            assert!(accept4.calls >= 11, "{v:?}");
            assert!(accept4.ns.is_some(), "profiled: {v:?}");
        }
        let wait_call = mech.wait_syscall().name();
        assert!(call(wait_call).is_some_and(|c| c.calls >= 1), "{v:?}");
        if mech.kind() != Kind::Completion {
            // Every request was handed over by some wait, and no wait is counted twice.
            let useful = v.events.waits_with_events;
            assert!(useful >= 1 && useful <= v.events.waits, "{v:?}");
        }
        let epoll_ctl = call("epoll_ctl").map_or(0, |c| c.calls);
        if mech == Mechanism::EpollLt {
            // ADD + MOD to write + MOD back to read (+ DEL) per one-request connection.
            assert!(epoll_ctl >= 30, "{v:?}");
        }
        if mech == Mechanism::EpollCtlv {
            assert!(v.events.batches >= 1, "{v:?}");
            assert!(v.events.changes_per_batch >= 1.0, "{v:?}");
            assert!(epoll_ctl <= 12, "only DEL is immediate: {v:?}");
        }
        if mech == Mechanism::UringPoll {
            let (mem, kern) = (v.events.waits_from_memory, v.events.waits_from_kernel);
            assert_eq!(mem + kern, v.events.waits, "{v:?}");
        }
        // Disabled unless asked.
        let Some(t2) = start(m, |c| c.stats = false) else {
            return;
        };
        assert_eq!(get(t2.addr, "/.evlab/stats").status, 404);
    }

    pub fn graceful_shutdown(m: &str) {
        let Some(mut t) = start(m, |_| {}) else {
            return;
        };
        let addr = t.addr;
        let mut s = connect(addr);
        s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut first = vec![0u8; 65536];
        s.read_exact(&mut first).unwrap();
        let mut idle = connect(addr);
        std::thread::sleep(Duration::from_millis(50));
        let server = t.server.take().unwrap();
        server.request_shutdown();
        // The response in flight completes.
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        let mut all = first;
        all.extend_from_slice(&rest);
        let head_end = find(&all, b"\r\n\r\n").unwrap() + 4;
        assert_eq!(all.len() - head_end, BIG_LEN);
        assert!(all[head_end..] == big_content()[..]);
        // The idle connection is closed.
        assert!(closed_by_server(&mut idle));
        server.wait().unwrap();
        assert!(
            TcpStream::connect(addr).is_err(),
            "nothing listens after shutdown"
        );
    }

    pub fn accept_limit_one(m: &str) {
        let Some(t) = start(m, |c| c.accept_limit = Some(1)) else {
            return;
        };
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let addr = t.addr;
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        assert_eq!(get(addr, "/one").status, 200);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }

    pub fn max_conns_pauses_accept(m: &str) {
        let Some(t) = start(m, |c| {
            c.max_conns = 2;
            c.header_timeout = None;
        }) else {
            return;
        };
        let a = connect(t.addr);
        let b = connect(t.addr);
        std::thread::sleep(Duration::from_millis(100));
        // The third waits in the backlog, unanswered while two are open.
        let mut c = connect(t.addr);
        c.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut byte = [0u8; 1];
        assert!(c.read(&mut byte).is_err(), "answered past --max-conns");
        drop(a);
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = byte[..0].to_vec();
        let r = read_response(&mut c, &mut buf, false).unwrap();
        assert_eq!(r.status, 200);
        drop(b);
    }

    /// `--accept-mode exclusive`: on the epoll mechanisms, two workers on one listener
    /// registered with EPOLLEXCLUSIVE serve every connection, and their per-worker accept counts
    /// add up to all of them; every other mechanism is refused with the reason.
    pub fn exclusive_accept(m: &str) {
        let mech = Mechanism::from_name(m).unwrap();
        let epoll = matches!(
            mech,
            Mechanism::EpollLt | Mechanism::EpollEt | Mechanism::Epoll2
        );
        if !epoll {
            if !evlab_poll::testing::mechanism(mech) {
                return;
            }
            let root = make_root();
            let mut cfg = evlab_server::Config::new(
                "127.0.0.1:0".parse().unwrap(),
                root.dir.join("root"),
                mech,
            );
            cfg.workers = 2;
            cfg.accept_mode = evlab_server::AcceptMode::Exclusive;
            let e = match evlab_server::Server::start(cfg) {
                Ok(_) => panic!("{m}: exclusive accept mode was not refused"),
                Err(e) => e.to_string(),
            };
            assert!(e.contains("exclusive") && e.contains(m), "{e}");
            return;
        }
        let Some(t) = start(m, |c| {
            c.workers = 2;
            c.accept_mode = evlab_server::AcceptMode::Exclusive;
        }) else {
            return;
        };
        const N: u64 = 60;
        for _ in 0..N {
            assert_eq!(get(t.addr, "/one").status, 200);
        }
        let v = stats_over_http(t.addr);
        let per: Vec<u64> = v.per_worker.iter().map(|w| w.accepted).collect();
        assert_eq!(per.len(), 2, "{v:?}");
        // The stats request's own connection is the last accepted.
        assert_eq!(per.iter().sum::<u64>(), N + 1, "per-worker accepts {per:?}");
        assert_eq!(v.connections.accepted, N + 1);
    }

    pub fn workers_share_port(m: &str) {
        for mode in [
            evlab_server::AcceptMode::Reuseport,
            evlab_server::AcceptMode::Shared,
        ] {
            let Some(t) = start(m, |c| {
                c.workers = 2;
                c.accept_mode = mode;
            }) else {
                return;
            };
            for _ in 0..40 {
                assert_eq!(get(t.addr, "/one").status, 200);
            }
            let v = stats_over_http(t.addr);
            assert_eq!(v.workers, 2);
            assert_eq!(v.per_worker.len(), 2, "{v:?}");
            assert!(v.connections.accepted >= 41, "{mode:?}");
        }
    }
}

/// One module of every case per mechanism of the registry (`each::EpollLt::get_one`).
macro_rules! mechanism_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {
        mod each {$(
        #[allow(non_snake_case)]
        mod $v {
            const M: &str = $name;
            #[test] fn get_one() { crate::cases::get_one(M) }
            #[test] fn head() { crate::cases::head(M) }
            #[test] fn not_found() { crate::cases::not_found(M) }
            #[test] fn not_modified() { crate::cases::not_modified(M) }
            #[test] fn keep_alive() { crate::cases::keep_alive(M) }
            #[test] fn pipelining() { crate::cases::pipelining(M) }
            #[test] fn origin_delay() { crate::cases::origin_delay(M) }
            #[test] fn big_file_writev() { crate::cases::big_file_writev(M) }
            #[test] fn big_file_sendfile_cork() { crate::cases::big_file_sendfile_cork(M) }
            #[test] fn big_file_sendfile_not_in_memory() { crate::cases::big_file_sendfile_not_in_memory(M) }
            #[test] fn eager_write() { crate::cases::eager_write(M) }
            #[test] fn batch_writes() { crate::cases::batch_writes(M) }
            #[test] fn half_close() { crate::cases::half_close(M) }
            #[test] fn half_close_answers_all() { crate::cases::half_close_answers_all(M) }
            #[test] fn send_timeout() { crate::cases::send_timeout(M) }
            #[test] fn input_back_pressure() { crate::cases::input_back_pressure(M) }
            #[test] fn hostile_requests() { crate::cases::hostile_requests(M) }
            #[test] fn many_connections() { crate::cases::many_connections(M) }
            #[test] fn reset_mid_response() { crate::cases::reset_mid_response(M) }
            #[test] fn header_timeout() { crate::cases::header_timeout(M) }
            #[test] fn no_header_timeout() { crate::cases::no_header_timeout(M) }
            #[test] fn stats_endpoint() { crate::cases::stats_endpoint(M) }
            #[test] fn file_io_read_and_mmap() { crate::cases::file_io_read_and_mmap(M) }
            #[test] fn graceful_shutdown() { crate::cases::graceful_shutdown(M) }
            #[test] fn accept_limit_one() { crate::cases::accept_limit_one(M) }
            #[test] fn max_conns_pauses_accept() { crate::cases::max_conns_pauses_accept(M) }
            #[test] fn workers_share_port() { crate::cases::workers_share_port(M) }
            #[test] fn exclusive_accept() { crate::cases::exclusive_accept(M) }
        }
        )*}
    };
}

evlab_poll::for_each_mechanism!(mechanism_tests);

/// A million keep-alive requests with the default (60 s) header and send timeouts: the timer
/// queue holds one entry per connection, re-armed lazily, not one per request for as long as
/// the timeout (which grew the server to ~200 MB per worker at 100k requests/s). One engine of
/// each kind: readiness (epoll-et) and completion (uring).
fn timers_stay_bounded(m: &str) {
    const CONNS: usize = 8;
    const BATCH: usize = 100;
    const TOTAL: usize = 1_000_000;
    let Some(t) = start(m, |_| {}) else { return };
    let req = b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n".repeat(BATCH);
    let one = one_response_len(t.addr);
    let mut conns: Vec<TcpStream> = (0..CONNS).map(|_| connect(t.addr)).collect();
    let mut b = vec![0u8; 256 * 1024];
    for _ in 0..TOTAL / (CONNS * BATCH) {
        for s in conns.iter_mut() {
            s.write_all(&req).unwrap();
        }
        for s in conns.iter_mut() {
            let mut left = one * BATCH;
            while left > 0 {
                let n = s.read(&mut b[..left.min(256 * 1024)]).unwrap();
                assert!(n > 0, "closed early");
                left -= n;
            }
        }
    }
    let v = t.stats();
    assert_eq!(v.requests, TOTAL as u64 + 1, "{v:?}");
    assert_eq!(v.connections.header_timeouts, 0, "{v:?}");
    let max = v.timers.max_entries;
    // One entry per connection (the 8, the one that measured the length), plus at most as many
    // again from deadlines that moved earlier.
    let bound = 2 * (CONNS as u64 + 1);
    println!(
        "{m}: at most {max} timer entries over {TOTAL} requests on {} connections",
        CONNS + 1
    );
    assert!(
        max <= bound,
        "{m}: {max} timer entries (bound {bound}): {v:?}"
    );
}

#[test]
fn timers_stay_bounded_readiness() {
    timers_stay_bounded("epoll-et");
}

#[test]
fn timers_stay_bounded_completion() {
    timers_stay_bounded("uring");
}

/// `uring`: a connection the peer closed has no recv left to cancel (a multishot recv ends with
/// the FIN), so closing it must queue no IORING_OP_ASYNC_CANCEL. A cancel is a kernel hash
/// lookup among every armed request; with 10,000 idle connections one per closed connection
/// cost ~13% of the server's CPU at 20,000 connections/s. A connection the server closes itself
/// still has its recv armed, and that one must be cancelled (or the socket would never close).
#[test]
fn uring_cancels_only_armed_recvs() {
    let Some(t) = start("uring", |_| {}) else {
        return;
    };
    let closed = |t: &TestServer| t.stats().connections.closed;
    let wait_closed = |t: &TestServer, n: u64| {
        // Not a timing assumption: the deadline only turns a hang into a failure.
        let deadline = Instant::now() + Duration::from_secs(20);
        while closed(t) < n {
            assert!(
                Instant::now() < deadline,
                "closes never seen: {:?}",
                t.stats()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    // Client-closed, one request per connection (the paper's one-byte workload).
    for _ in 0..20 {
        let r = get(t.addr, "/one");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"a"[..]));
    }
    // Closed before any request.
    for _ in 0..5 {
        drop(connect(t.addr));
    }
    wait_closed(&t, 25);
    let v = t.stats();
    assert_eq!(v.events.cancels, 0, "{v:?}");

    // Server-closed: the recv is still armed, is cancelled, and the client sees the close.
    let mut s = connect(t.addr);
    s.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all)
        .expect("the server answers and closes");
    assert!(all.starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert!(all.ends_with(b"\r\n\r\na"));
    wait_closed(&t, 26);
    let v = t.stats();
    assert_eq!(v.events.cancels, 1, "{v:?}");
}
