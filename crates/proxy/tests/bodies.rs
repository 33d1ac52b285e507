//! Request bodies, `Expect: 100-continue`, CONNECT tunnels and `X-Forwarded-For` (issue 21,
//! "Bodies"). The proxy runs in this process (`Proxy::start`, port 0) on every mechanism
//! of the registry (`evlab_poll::for_each_mechanism!`) and forwarding mode, one test per case,
//! mechanism and mode; a mechanism the kernel lacks prints its reason. The origin is a `TcpListener` on port 0 with a
//! thread per connection that reads each request's body by its framing and answers with what
//! it received: method, body length and hash (FNV-1a of the bytes as they arrived, chunk
//! framing included), so a body is checked byte for byte without echoing it.

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use common::{connect, field, find, next_head, proxy_with, read_response, read_some, Response};
use evlab_proxy::{ConnectTarget, Proxy, ProxyStats};

fn fnv(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Bytes that repeat only every 251 (a prime, so no read or chunk size lines up with it).
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ seed).collect()
}

// ---- the origin ----

/// One request as the origin received it.
#[derive(Clone, Debug)]
struct Seen {
    conn: usize,
    head: String,
    /// The body's bytes as they arrived (chunked: framing included).
    body: Vec<u8>,
    /// The body arrived whole (else the connection ended inside it).
    complete: bool,
}

struct Origin {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Every request head, as soon as it has arrived (before its body).
    heads: Arc<Mutex<Vec<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl Origin {
    fn start() -> Origin {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (flag, log, started) = (stop.clone(), seen.clone(), heads.clone());
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !flag.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        let (log, started, id) = (log.clone(), started.clone(), conns.len());
                        conns.push(std::thread::spawn(move || serve(s, id, log, started)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            for c in conns {
                let _ = c.join();
            }
        });
        Origin {
            addr,
            stop,
            seen,
            heads,
            thread: Some(thread),
        }
    }

    /// Waits until a request for `path` has been recorded (its body whole, or its connection
    /// ended inside it).
    fn wait_seen(&self, path: &str) {
        for _ in 0..2000 {
            if !self.seen(path).is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("{path}: the origin's connection never ended");
    }

    /// Waits until the head of a request for `path` has arrived.
    fn wait_for(&self, path: &str) {
        let want = format!(" {path} ");
        for _ in 0..2000 {
            if self.heads.lock().unwrap().iter().any(|h| h.contains(&want)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("{path} never reached the origin");
    }

    /// The requests received for `path`.
    fn seen(&self, path: &str) -> Vec<Seen> {
        let want = format!(" {path} ");
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|s| s.head.contains(&want))
            .cloned()
            .collect()
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Where a chunked body that starts `buf` ends, reading it as RFC 9112 §7.1 spells it.
fn chunked_end(buf: &[u8]) -> Option<usize> {
    let mut pos = 0;
    loop {
        let eol = pos + find(&buf[pos..], b"\r\n")?;
        let line = std::str::from_utf8(&buf[pos..eol]).ok()?;
        let digits = line.split(';').next()?.trim();
        let size = usize::from_str_radix(digits, 16).expect("the proxy forwarded a bad size");
        pos = eol + 2;
        if size == 0 {
            // Trailer lines, then the blank line.
            loop {
                let eol = pos + find(&buf[pos..], b"\r\n")?;
                let blank = eol == pos;
                pos = eol + 2;
                if blank {
                    return Some(pos);
                }
            }
        }
        if buf.len() < pos + size + 2 {
            return None;
        }
        pos += size + 2;
    }
}

fn serve(
    mut s: TcpStream,
    id: usize,
    log: Arc<Mutex<Vec<Seen>>>,
    started: Arc<Mutex<Vec<String>>>,
) {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let Some(head) = next_head(&mut s, &mut buf, &mut chunk) else {
            return;
        };
        started.lock().unwrap().push(head.clone());
        if head.starts_with("POST /early ") {
            // Refused on sight, before any of the body is read (as a server checking the
            // length would), then the rest read and dropped until the proxy closes.
            let r = b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 8\r\nConnection: close\r\n\r\ntoo much";
            let _ = s.write_all(r);
            let _ = s.shutdown(Shutdown::Write);
            let mut n = buf.len();
            while let Ok(k @ 1..) = s.read(&mut chunk) {
                n += k;
            }
            log.lock().unwrap().push(Seen {
                conn: id,
                head,
                body: vec![0; n],
                complete: false,
            });
            return;
        }
        let length: Option<usize> = field(&head, "content-length").map(|v| v.parse().unwrap());
        let chunked = field(&head, "transfer-encoding").is_some_and(|v| v.contains("chunked"));
        let complete = loop {
            let done = match (length, chunked) {
                (Some(n), _) => (buf.len() >= n).then_some(n),
                (None, true) => chunked_end(&buf),
                (None, false) => Some(0),
            };
            if let Some(n) = done {
                break Some(n);
            }
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => break None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let n = complete.unwrap_or(buf.len());
        let body: Vec<u8> = buf.drain(..n).collect();
        let method = head.split(' ').next().unwrap_or("").to_string();
        let answer = format!("{method} {} {:016x}", body.len(), fnv(&body));
        log.lock().unwrap().push(Seen {
            conn: id,
            head,
            body,
            complete: complete.is_some(),
        });
        if complete.is_none() {
            return;
        }
        let out = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nCache-Control: max-age=600\r\n\r\n{answer}",
            answer.len()
        );
        if s.write_all(out.as_bytes()).is_err() {
            return;
        }
    }
}

/// What the origin answers for a body.
fn answer(method: &str, body: &[u8]) -> String {
    format!("{method} {} {:016x}", body.len(), fnv(body))
}

// ---- a loopback echo listener, the CONNECT target ----

/// The bytes a tunnel test sends: [`pattern`] repeated.
const BLOCK: usize = 1 << 16;

/// Whether `data`, found at `offset` of the stream, is what the tunnel tests send there.
fn is_stream(block: &[u8], mut offset: usize, mut data: &[u8]) -> bool {
    while !data.is_empty() {
        let at = offset % BLOCK;
        let n = data.len().min(BLOCK - at);
        if data[..n] != block[at..at + n] {
            return false;
        }
        (offset, data) = (offset + n, &data[n..]);
    }
    true
}

/// Accepts connections on port 0 and echoes each until its EOF, then shuts its side; counts
/// the connections it accepted, and for each how many bytes it received and whether they
/// were the tunnel tests' stream.
struct Echo {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    received: Arc<Mutex<Vec<(usize, bool)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Echo {
    fn start() -> Echo {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, got, flag) = (accepted.clone(), received.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !flag.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((mut s, _)) => {
                        count.fetch_add(1, Ordering::SeqCst);
                        s.set_nonblocking(false).unwrap();
                        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                        let got = got.clone();
                        conns.push(std::thread::spawn(move || {
                            let mut b = vec![0u8; 256 * 1024];
                            let block = pattern(BLOCK, 0x77);
                            let (mut n, mut same) = (0usize, true);
                            loop {
                                match s.read(&mut b) {
                                    Ok(0) | Err(_) => break,
                                    Ok(k) => {
                                        same &= is_stream(&block, n, &b[..k]);
                                        n += k;
                                        if s.write_all(&b[..k]).is_err() {
                                            break;
                                        }
                                    }
                                }
                            }
                            let _ = s.shutdown(Shutdown::Write);
                            got.lock().unwrap().push((n, same));
                        }));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            for c in conns {
                let _ = c.join();
            }
        });
        Echo {
            addr,
            accepted,
            received,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ---- the client side ----

fn proxy(o: &Origin, m: &str, mode: &str) -> Option<Proxy> {
    proxy_with(o.addr, m, mode, |_| {})
}

fn send(s: &mut TcpStream, bytes: &[u8]) {
    s.write_all(bytes).unwrap();
}

fn exchange(p: &Proxy, bytes: &[u8]) -> Response {
    let mut s = connect(p);
    send(&mut s, bytes);
    read_response(&mut s, &mut Vec::new(), false)
}

fn with_body(method: &str, path: &str, extra: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\n{extra}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// `body` in chunks of varied sizes, with an extension and a trailer.
fn chunked(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut k = 0;
    while i < body.len() {
        let n = [1, 7, 4096, 65_536, 100_003, 333][k % 6].min(body.len() - i);
        if k % 3 == 0 {
            out.extend_from_slice(format!("{n:x};k={k}\r\n").as_bytes());
        } else {
            out.extend_from_slice(format!("{n:X}\r\n").as_bytes());
        }
        out.extend_from_slice(&body[i..i + n]);
        out.extend_from_slice(b"\r\n");
        i += n;
        k += 1;
    }
    out.extend_from_slice(b"0\r\nX-Sum: 1\r\n\r\n");
    out
}

/// Whether the proxy closed the connection (after an error that ends it).
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 64];
    matches!(read_some(s, &mut b), Ok(0))
        || matches!(read_some(s, &mut b), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
}

const MIB: usize = 1 << 20;

// ---- the cases ----

mod cases {
    use super::*;

    /// A 1 MiB POST with Content-Length reaches the origin byte for byte, and so do PUT and
    /// PATCH; a request pipelined behind a body is answered as itself (the body ended where
    /// its length said); the origin connection is reused after a whole body.
    pub fn content_length_bodies(m: &str, mode: &str) {
        let o = Origin::start();
        let Some(p) = proxy(&o, m, mode) else {
            return;
        };
        let big = pattern(MIB, 0x5a);
        let r = exchange(&p, &with_body("POST", "/post", "", &big));
        assert_eq!(
            (r.status, r.text()),
            (200, answer("POST", &big)),
            "{m} {mode}"
        );
        let seen = o.seen("/post");
        assert!(seen.len() == 1 && seen[0].complete && seen[0].body == big);
        assert_eq!(r.cache(), Some("MISS"));
        // PUT and PATCH, then a GET, pipelined on one connection.
        let mut s = connect(&p);
        let mut req = with_body("PUT", "/put", "", b"put body");
        req.extend(with_body("PATCH", "/patch", "", &pattern(70_000, 1)));
        req.extend_from_slice(b"GET /after HTTP/1.1\r\nHost: t\r\n\r\n");
        send(&mut s, &req);
        let mut buf = Vec::new();
        for (method, body) in [
            ("PUT", b"put body".to_vec()),
            ("PATCH", pattern(70_000, 1)),
            ("GET", Vec::new()),
        ] {
            let r = read_response(&mut s, &mut buf, false);
            assert_eq!(r.text(), answer(method, &body), "{m} {mode} {method}");
        }
        // Connections are pooled after a whole body: the POST's carried the PUT (idempotent),
        // and the GET went on one of those the PUT and the PATCH used. The PATCH (not
        // idempotent) went on a fresh one.
        let conn = |path| o.seen(path)[0].conn;
        assert_eq!(
            conn("/put"),
            conn("/post"),
            "{m} {mode}: pooled after a whole body"
        );
        assert_ne!(
            conn("/patch"),
            conn("/put"),
            "{m} {mode}: PATCH on a pooled connection"
        );
        assert!(
            [conn("/put"), conn("/patch")].contains(&conn("/after")),
            "{m} {mode}: not pooled after a whole body"
        );
        p.shutdown().unwrap();
    }

    /// A chunked body goes to the origin as it came, chunk framing, extensions and trailer
    /// included; a request pipelined behind it is answered as itself.
    pub fn chunked_bodies(m: &str, mode: &str) {
        let o = Origin::start();
        let Some(p) = proxy(&o, m, mode) else {
            return;
        };
        let body = chunked(&pattern(MIB, 0x33));
        let mut req =
            b"POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        req.extend_from_slice(&body);
        req.extend_from_slice(b"GET /behind HTTP/1.1\r\nHost: t\r\n\r\n");
        let mut s = connect(&p);
        send(&mut s, &req);
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf, false);
        assert_eq!(
            (r.status, r.text()),
            (200, answer("POST", &body)),
            "{m} {mode}"
        );
        let seen = o.seen("/chunked");
        assert!(seen[0].body == body, "{m} {mode}: not byte-exact");
        assert_eq!(field(&seen[0].head, "transfer-encoding"), Some("chunked"));
        let r = read_response(&mut s, &mut buf, false);
        assert_eq!(r.text(), answer("GET", b""), "{m} {mode}");
        p.shutdown().unwrap();
    }

    /// Malformed chunked bodies and ambiguous framing are refused with 400 and the close,
    /// and the origin never sees any of the request.
    pub fn malformed_bodies(m: &str, mode: &str) {
        let o = Origin::start();
        let Some(p) = proxy(&o, m, mode) else {
            return;
        };
        let te = "Transfer-Encoding: chunked\r\n";
        let cases: &[(&str, &str, &[u8])] = &[
            ("/bad-hex", te, b"zz\r\nhello\r\n0\r\n\r\n"),
            ("/bare-lf", te, b"5\nhello\r\n0\r\n\r\n"),
            ("/bare-lf-data", te, b"5\r\nhello\n0\r\n\r\n"),
            ("/overflow", te, b"10000000000000000\r\nx\r\n0\r\n\r\n"),
            ("/negative", te, b"-5\r\nhello\r\n0\r\n\r\n"),
            ("/prefix", te, b"0x5\r\nhello\r\n0\r\n\r\n"),
            ("/junk-after-size", te, b"5 x\r\nhello\r\n0\r\n\r\n"),
            ("/data-too-long", te, b"5\r\nhelloXX\r\n0\r\n\r\n"),
            ("/bare-cr", te, b"5\rhello\r\n0\r\n\r\n"),
            ("/ctl-in-ext", te, b"5;a=\x01\r\nhello\r\n0\r\n\r\n"),
            (
                "/cl-and-te",
                "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
                b"0\r\n\r\n",
            ),
            (
                "/cl-twice",
                "Content-Length: 5\r\nContent-Length: 6\r\n",
                b"hello!",
            ),
            ("/cl-invalid", "Content-Length: 5x\r\n", b"hello"),
            ("/te-not-chunked", "Transfer-Encoding: gzip\r\n", b"hello"),
        ];
        for (path, fields, body) in cases {
            let mut s = connect(&p);
            let mut req = format!("POST {path} HTTP/1.1\r\nHost: t\r\n{fields}\r\n").into_bytes();
            req.extend_from_slice(body);
            send(&mut s, &req);
            let r = read_response(&mut s, &mut Vec::new(), false);
            assert_eq!(r.status, 400, "{m} {mode} {path}");
            assert!(closed(&mut s), "{m} {mode} {path}: still open");
            assert!(
                o.seen(path).is_empty(),
                "{m} {mode} {path} reached the origin"
            );
        }
        // Chunked in HTTP/1.0 is faulty framing (RFC 9112 §6.1).
        let r = exchange(
            &p,
            b"POST /http10 HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        );
        assert_eq!(r.status, 400);
        assert!(o.seen("/http10").is_empty());
        p.shutdown().unwrap();
    }

    /// A malformed chunk after part of the body went to the origin: 400, and the origin
    /// connection that carried part of it is never reused. A client that leaves inside its
    /// body leaves no connection in the pool either.
    pub fn bodies_cut_short(m: &str, mode: &str) {
        let o = Origin::start();
        // What a body streamed to the origin meets (`--request-buffering off`).
        let Some(p) = proxy_with(o.addr, m, mode, |c| c.request_buffering = false) else {
            return;
        };
        let mut s = connect(&p);
        send(
            &mut s,
            b"POST /late-bad HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        );
        // Only once the head and first chunk have gone to the origin: the malformed chunk
        // then comes after part of the body was forwarded.
        o.wait_for("/late-bad");
        send(&mut s, b"5\nworld\r\n0\r\n\r\n");
        let r = read_response(&mut s, &mut Vec::new(), false);
        assert_eq!(r.status, 400, "{m} {mode}");
        assert!(closed(&mut s));
        // The origin's thread records the request when it sees its connection end, which a
        // loaded machine may schedule after the checks below.
        o.wait_seen("/late-bad");
        let mut s = connect(&p);
        send(
            &mut s,
            &with_body("POST", "/half", "", &pattern(1000, 2))[..600],
        );
        o.wait_for("/half");
        drop(s);
        // The origin records an unfinished body when its connection ends: the proxy closed
        // it (a pooled one would wait for the rest of the body forever).
        o.wait_seen("/half");
        let r = exchange(&p, b"GET /next HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.text(), answer("GET", b""));
        for path in ["/late-bad", "/half"] {
            let seen = o.seen(path);
            assert!(!seen.is_empty() && !seen[0].complete, "{m} {mode} {path}");
            assert_ne!(
                seen[0].conn,
                o.seen("/next")[0].conn,
                "{m} {mode}: reused after an unfinished body ({path})"
            );
        }
        p.shutdown().unwrap();
    }

    /// An origin that answers before it has read the body (an early 413) and stops reading:
    /// the client gets that answer and the close (its body cannot be sent on), not a 502 or a
    /// hang.
    pub fn early_answer(m: &str, mode: &str) {
        let o = Origin::start();
        // What a body streamed to the origin meets (`--request-buffering off`).
        let Some(p) = proxy_with(o.addr, m, mode, |c| c.request_buffering = false) else {
            return;
        };
        let mut s = connect(&p);
        send(
            &mut s,
            format!(
                "POST /early HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
                64 * MIB
            )
            .as_bytes(),
        );
        send(&mut s, &pattern(256 * 1024, 4));
        let r = read_response(&mut s, &mut Vec::new(), false);
        assert_eq!((r.status, r.text()), (413, "too much".into()), "{m} {mode}");
        assert_eq!(r.header("connection"), Some("close"), "{m} {mode}");
        assert!(closed(&mut s), "{m} {mode}: still open");
        let r = exchange(&p, b"GET /after-early HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.text(), answer("GET", b""), "{m} {mode}");
        // The origin records a request when its connection ends, which the proxy's close of
        // the early one may reach after the client has seen its own.
        o.wait_seen("/early");
        assert_ne!(o.seen("/after-early")[0].conn, o.seen("/early")[0].conn);
        p.shutdown().unwrap();
    }

    /// `--timeout` (here 300 ms): a body that stops coming is 408 and the close, and its
    /// origin connection is closed; an idle tunnel is closed both ways.
    pub fn stalls_time_out(m: &str, mode: &str) {
        let o = Origin::start();
        let e = Echo::start();
        let target = format!("127.0.0.1:{}", e.addr.port());
        let Some(p) = proxy_with(o.addr, m, mode, |c| {
            c.timeout = Some(Duration::from_millis(300));
            c.allow_connect = vec![ConnectTarget::resolve(&target).unwrap()];
            c.request_buffering = false;
        }) else {
            return;
        };
        let mut s = connect(&p);
        send(&mut s, &with_body("POST", "/stalled", "", &[7; 100])[..80]);
        let r = read_response(&mut s, &mut Vec::new(), false);
        assert_eq!(r.status, 408, "{m} {mode}");
        assert!(closed(&mut s), "{m} {mode}");
        o.wait_seen("/stalled");
        assert!(!o.seen("/stalled")[0].complete);
        let mut t = open_tunnel(&p, &target);
        let mut b = [0u8; 16];
        assert_eq!(
            read_some(&mut t, &mut b).unwrap(),
            0,
            "{m} {mode}: tunnel open"
        );
        assert_eq!(echoed(&e), vec![(0, true)], "{m} {mode}");
        p.shutdown().unwrap();
    }

    /// `--request-buffering on` (the default): a body is read whole before the origin is
    /// contacted, so a client trickling it holds no origin connection; a stalled one is 408
    /// and the origin never hears of it; a body past `--request-buffer` is 413, declared or
    /// grown; bytes after a chunked body are the next request.
    pub fn buffered_bodies(m: &str, mode: &str) {
        let o = Origin::start();
        let Some(p) = proxy_with(o.addr, m, mode, |c| {
            c.timeout = Some(Duration::from_millis(400));
            c.request_buffer = 100_000;
        }) else {
            return;
        };
        let body = pattern(30_000, 3);
        let req = with_body("POST", "/slow", "", &body);
        let mut s = connect(&p);
        for piece in req.chunks(7_000) {
            send(&mut s, piece);
            std::thread::sleep(Duration::from_millis(40));
            if o.heads
                .lock()
                .unwrap()
                .iter()
                .any(|h| h.contains(" /slow "))
            {
                break;
            }
        }
        let r = read_response(&mut s, &mut Vec::new(), false);
        assert_eq!(r.text(), answer("POST", &body), "{m} {mode}");
        let first = o.heads.lock().unwrap().len();
        assert_eq!(
            first, 1,
            "{m} {mode}: the origin heard only of the whole request"
        );
        // Stalled: 408, the origin never contacted.
        let mut s = connect(&p);
        send(&mut s, &with_body("POST", "/stalled", "", &[7; 100])[..80]);
        assert_eq!(read_response(&mut s, &mut Vec::new(), false).status, 408);
        assert!(closed(&mut s), "{m} {mode}");
        // Too large: declared, and chunked past the bound.
        let r = exchange(&p, &with_body("POST", "/big", "", &pattern(100_001, 4)));
        assert_eq!(r.status, 413, "{m} {mode}");
        let mut s = connect(&p);
        send(
            &mut s,
            b"POST /big-chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        let chunk = format!("{:x}\r\n{}\r\n", 60_000, "x".repeat(60_000));
        send(&mut s, chunk.as_bytes());
        let _ = s.write_all(chunk.as_bytes());
        assert_eq!(read_response(&mut s, &mut Vec::new(), false).status, 413);
        // A chunked body, then the next request in the same write.
        let mut s = connect(&p);
        send(
            &mut s,
            b"POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        std::thread::sleep(Duration::from_millis(20));
        send(
            &mut s,
            b"3\r\nabc\r\n0\r\n\r\nGET /next HTTP/1.1\r\nHost: t\r\n\r\n",
        );
        let mut buf = Vec::new();
        assert_eq!(read_response(&mut s, &mut buf, false).status, 200);
        assert_eq!(
            read_response(&mut s, &mut buf, false).text(),
            answer("GET", b"")
        );
        for path in ["/stalled", "/big", "/big-chunked"] {
            assert!(
                o.seen(path).is_empty(),
                "{m} {mode}: {path} reached the origin"
            );
        }
        p.shutdown().unwrap();
    }

    /// `Expect: 100-continue`: the proxy answers 100 Continue itself before the body comes,
    /// does not pass the expectation on, and forwards the body when it comes.
    pub fn expect_continue(m: &str, mode: &str) {
        let o = Origin::start();
        let Some(p) = proxy(&o, m, mode) else {
            return;
        };
        let body = pattern(200_000, 9);
        let mut s = connect(&p);
        send(
            &mut s,
            format!(
                "PUT /expect HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        );
        let mut buf = Vec::new();
        let interim = read_response(&mut s, &mut buf, true);
        assert_eq!(interim.status, 100, "{m} {mode}: {}", interim.head);
        assert!(buf.is_empty());
        send(&mut s, &body);
        let r = read_response(&mut s, &mut buf, false);
        assert_eq!(
            (r.status, r.text()),
            (200, answer("PUT", &body)),
            "{m} {mode}"
        );
        let head = &o.seen("/expect")[0].head;
        assert_eq!(field(head, "expect"), None, "{head}");
        // Chunked, with the body sent at once: no 100 needed, none sent.
        let mut req = b"POST /expect-chunked HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        let body = chunked(b"abcdefghij");
        req.extend_from_slice(&body);
        let r = exchange(&p, &req);
        assert_eq!(
            (r.status, r.text()),
            (200, answer("POST", &body)),
            "{m} {mode}"
        );
        p.shutdown().unwrap();
    }

    /// Only GET and HEAD are answered from the cache and stored: a POST to a cached target
    /// goes to the origin, is not stored, and what was stored for the target is dropped.
    pub fn bodies_and_the_cache(m: &str, mode: &str) {
        let o = Origin::start();
        let Some(p) = proxy(&o, m, mode) else {
            return;
        };
        let get = || exchange(&p, b"GET /c HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(get().cache(), Some("MISS"));
        assert_eq!(get().cache(), Some("HIT"));
        for _ in 0..2 {
            let r = exchange(&p, &with_body("POST", "/c", "", b"form=1"));
            assert_eq!(
                (r.text(), r.cache()),
                (answer("POST", b"form=1"), Some("MISS")),
                "{m} {mode}: a POST answered from the cache"
            );
        }
        let r = get();
        assert_eq!(
            (r.text(), r.cache()),
            (answer("GET", b""), Some("MISS")),
            "{m} {mode}: the POST's answer was stored, or the GET's kept"
        );
        assert_eq!(o.seen("/c").len(), 4);
        p.shutdown().unwrap();
    }

    /// X-Forwarded-For: the client's address appended to what the client sent, or added.
    pub fn forwarded_for(m: &str, mode: &str) {
        let o = Origin::start();
        let Some(p) = proxy(&o, m, mode) else {
            return;
        };
        exchange(&p, b"GET /xff-new HTTP/1.1\r\nHost: t\r\n\r\n");
        exchange(
            &p,
            b"GET /xff-add HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 203.0.113.7\r\nX-Forwarded-For: 198.51.100.1, 10.1.1.1\r\n\r\n",
        );
        let xff = |path| {
            let head = o.seen(path)[0].head.clone();
            assert_eq!(
                head.to_ascii_lowercase().matches("x-forwarded-for").count(),
                1
            );
            field(&head, "x-forwarded-for").map(str::to_string)
        };
        assert_eq!(xff("/xff-new").as_deref(), Some("127.0.0.1"), "{m} {mode}");
        assert_eq!(
            xff("/xff-add").as_deref(),
            Some("203.0.113.7, 198.51.100.1, 10.1.1.1, 127.0.0.1"),
            "{m} {mode}"
        );
        // The address costs a readiness engine no syscall (accept4 gives it); the completion
        // engine's multishot accept does not, so it asks once per connection.
        let stats: ProxyStats = serde_json::from_str(&p.stats_json()).unwrap();
        let asked = stats.syscalls.get("getpeername").map_or(0, |c| c.calls);
        assert_eq!(asked, if m == "uring" { 2 } else { 0 }, "{m} {mode}");
        p.shutdown().unwrap();
    }

    /// Opens a tunnel to `target` on a new connection; the 200 has been read.
    fn open_tunnel(p: &Proxy, target: &str) -> TcpStream {
        let mut s = connect(p);
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        send(
            &mut s,
            format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes(),
        );
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf, true);
        assert_eq!(r.status, 200, "{}", r.head);
        assert!(buf.is_empty());
        s
    }

    /// Sends `len` bytes through a tunnel to the echo listener while reading them back,
    /// then shuts the sending side: the echo's EOF comes back as the tunnel's.
    fn through_tunnel(s: TcpStream, len: usize, what: &str) {
        let mut w = s.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let block = pattern(BLOCK, 0x77);
            let mut sent = 0;
            while sent < len {
                let n = block.len().min(len - sent);
                w.write_all(&block[..n]).unwrap();
                sent += n;
            }
            // Half-close: the echo sees EOF, echoes the rest and closes its side.
            w.shutdown(Shutdown::Write).unwrap();
        });
        let mut r = s;
        let block = pattern(BLOCK, 0x77);
        let mut got = 0usize;
        let mut b = vec![0u8; 1 << 18];
        loop {
            let n = read_some(&mut r, &mut b).unwrap_or_else(|e| panic!("{what}: {e}"));
            if n == 0 {
                break;
            }
            assert!(
                is_stream(&block, got, &b[..n]),
                "{what}: bytes from {got} differ"
            );
            got += n;
        }
        writer.join().unwrap();
        assert_eq!(got, len, "{what}: the tunnel ended early");
    }

    /// What the echo received on each connection, once every connection has ended (the
    /// echo records it just after shutting its side, which the client may see first).
    fn echoed(e: &Echo) -> Vec<(usize, bool)> {
        for _ in 0..500 {
            let got = e.received.lock().unwrap().clone();
            if got.len() == e.accepted.load(Ordering::SeqCst) {
                return got;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("an echo connection never ended");
    }

    fn tunnel_proxy(m: &str, mode: &str, e: &Echo) -> Option<Proxy> {
        let target = format!("127.0.0.1:{}", e.addr.port());
        proxy_with("127.0.0.1:9".parse().unwrap(), m, mode, |c| {
            c.allow_connect = vec![ConnectTarget::resolve(&target).unwrap()];
        })
    }

    /// A CONNECT tunnel to the loopback echo listener carries 100 MiB both ways byte for
    /// byte (spliced both ways in the splice modes, copied in copy mode), and each side's EOF
    /// reaches the other. On every engine and mode: each takes well under a second in a
    /// debug build, so the whole matrix costs a few seconds.
    pub fn connect_tunnel(m: &str, mode: &str) {
        let e = Echo::start();
        let Some(p) = tunnel_proxy(m, mode, &e) else {
            return;
        };
        let target = format!("127.0.0.1:{}", e.addr.port());
        let len = 100 * MIB;
        through_tunnel(open_tunnel(&p, &target), len, &format!("{m} {mode}"));
        assert_eq!(echoed(&e), vec![(len, true)], "{m} {mode}");
        let stats: ProxyStats = serde_json::from_str(&p.stats_json()).unwrap();
        let (copied, spliced) = (stats.bytes.copy, stats.bytes.splice);
        assert!(
            copied + spliced >= 2 * len as u64,
            "{m} {mode}: {copied} + {spliced}"
        );
        if mode == "copy" {
            assert_eq!(spliced, 0, "{m} {mode}");
        } else if m != "uring" {
            // (io_uring may lack splice on some kernels, and then copies.)
            assert!(
                spliced >= 2 * len as u64,
                "{m} {mode}: {copied} + {spliced}"
            );
        }
        // Bytes sent right behind the CONNECT head are the tunnel's first.
        let mut s = connect(&p);
        send(
            &mut s,
            format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\nearly").as_bytes(),
        );
        s.shutdown(Shutdown::Write).unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        assert_eq!(
            all, b"HTTP/1.1 200 Connection Established\r\n\r\nearly",
            "{m} {mode}"
        );
        p.shutdown().unwrap();
        drop(e);
    }

    /// CONNECT to anything not allowed is 403 and connects nowhere; with no target
    /// allowed at all, likewise.
    pub fn connect_refused(m: &str, mode: &str) {
        let e = Echo::start();
        let allowed = Echo::start();
        let Some(p) = tunnel_proxy(m, mode, &allowed) else {
            return;
        };
        for target in [
            format!("127.0.0.1:{}", e.addr.port()),
            format!("localhost:{}", allowed.addr.port()),
            format!("127.0.0.2:{}", allowed.addr.port()),
        ] {
            let mut s = connect(&p);
            send(
                &mut s,
                format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes(),
            );
            let r = read_response(&mut s, &mut Vec::new(), false);
            assert_eq!(r.status, 403, "{m} {mode} {target}");
        }
        p.shutdown().unwrap();
        let Some(p) = proxy_with(e.addr, m, mode, |_| {}) else {
            return;
        };
        let target = format!("127.0.0.1:{}", e.addr.port());
        let r = exchange(
            &p,
            format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes(),
        );
        assert_eq!(r.status, 403, "{m} {mode}: no target allowed");
        p.shutdown().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            e.accepted.load(Ordering::SeqCst),
            0,
            "{m} {mode}: connected"
        );
        assert_eq!(allowed.accepted.load(Ordering::SeqCst), 0, "{m} {mode}");
    }
}

/// Every case in every forwarding mode on every mechanism of the registry, so that a new
/// mechanism inherits the suite.
macro_rules! body_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {$(
        #[allow(non_snake_case)]
        mod $v {
            modes!($name;
                content_length_bodies,
                chunked_bodies,
                malformed_bodies,
                bodies_cut_short,
                early_answer,
                stalls_time_out,
                expect_continue,
                buffered_bodies,
                bodies_and_the_cache,
                forwarded_for,
                connect_tunnel,
                connect_refused);
        }
    )*};
}

evlab_poll::for_each_mechanism!(body_tests);
