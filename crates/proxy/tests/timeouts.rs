//! The proxy's timeouts (issue 21): `--header-timeout` (a request head's total time, however
//! it trickles in), `--send-timeout` (a client that takes none of its response) and
//! `--connect-timeout` (an origin that never takes the connection: 504, where a refused one is
//! 502), each on the runtime's one deadline per connection. The proxy runs in this process on
//! every mechanism of the registry (`evlab_poll::for_each_mechanism!`) and forwarding mode
//! (port 0); the origins are loopback listeners on port 0. Every limit is asserted with
//! generous slack, never a speed.

#[macro_use]
mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use common::{connect, find, proxy_with, read_response, ThreadOrigin};
use evlab_proxy::ConnectTarget;
use evlab_sys as sys;

/// What every timing bound allows beyond the timeout itself (a loaded 2-CPU machine).
const SLACK: Duration = Duration::from_secs(4);

/// An origin answering every request head on every connection with `body` (keep-alive).
fn body_origin(body: Vec<u8>) -> ThreadOrigin {
    ThreadOrigin::start(move |mut s| {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let (mut buf, mut chunk) = (Vec::new(), vec![0u8; 4096]);
        while common::next_head(&mut s, &mut buf, &mut chunk).is_some() {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\
                 Cache-Control: no-store\r\n\r\n",
                body.len()
            );
            if s.write_all(head.as_bytes()).is_err() || s.write_all(&body).is_err() {
                return;
            }
        }
    })
}

/// A loopback listener that never accepts, its queue full: a connection to it neither
/// completes nor is refused (its SYNs are dropped), as an origin that hangs.
struct Hanging {
    addr: SocketAddr,
    fd: RawFd,
    _fill: Vec<TcpStream>,
}

impl Hanging {
    fn start() -> Hanging {
        let fd = sys::tcp_listener(&"127.0.0.1:0".parse().unwrap(), 0, false).unwrap();
        let addr = sys::getsockname(fd).unwrap();
        let mut fill = Vec::new();
        let mut full = false;
        for _ in 0..8 {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
                Ok(s) => fill.push(s),
                Err(_) => {
                    full = true;
                    break;
                }
            }
        }
        assert!(
            full,
            "the listener's queue never filled ({} in)",
            fill.len()
        );
        Hanging {
            addr,
            fd,
            _fill: fill,
        }
    }
}

impl Drop for Hanging {
    fn drop(&mut self) {
        let _ = sys::close(self.fd);
    }
}

/// A loopback port where nothing listens (bound, then closed): connections are refused.
fn refusing() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

mod cases {
    use super::*;

    /// 30 clients each trickle a request head a byte at a time, faster than `--timeout` but
    /// never complete: every one is answered 408 and closed once `--header-timeout` (total)
    /// has passed, not before; a client that completes its head in time is answered.
    pub fn trickling_heads(m: &str, mode: &str) {
        let origin = body_origin(b"ok".to_vec());
        let header = Duration::from_secs(1);
        let Some(p) = proxy_with(origin.addr, m, mode, |c| {
            c.timeout = Some(Duration::from_secs(30));
            c.header_timeout = Some(header);
        }) else {
            return;
        };
        let start = Instant::now();
        let mut clients: Vec<(TcpStream, Vec<u8>, Option<Duration>)> = (0..30)
            .map(|_| {
                let s = connect(&p);
                s.set_nonblocking(true).unwrap();
                (s, Vec::new(), None)
            })
            .collect();
        // In time: a head sent whole after half the header timeout.
        let mut prompt = Some(connect(&p));
        let head = b"GET /x HTTP/1.1\r\nHost: t\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let mut i = 0;
        let mut chunk = [0u8; 4096];
        while clients.iter().any(|c| c.2.is_none()) && start.elapsed() < header + SLACK {
            for (s, got, done) in clients.iter_mut().filter(|c| c.2.is_none()) {
                let _ = s.write(&head[i % head.len()..][..1]);
                loop {
                    match s.read(&mut chunk) {
                        Ok(0) => {
                            *done = Some(start.elapsed());
                            break;
                        }
                        Ok(n) => got.extend_from_slice(&chunk[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        // Reset: the proxy closed while bytes of ours were still coming.
                        Err(_) => {
                            *done = Some(start.elapsed());
                            break;
                        }
                    }
                }
            }
            i += 1;
            if let Some(mut s) = prompt.take_if(|_| i == 5) {
                s.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
                let r = read_response(&mut s, &mut Vec::new(), false);
                assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
                // Closed here, before its own wait for a next head could run out.
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for (n, (_, got, done)) in clients.iter().enumerate() {
            let t = done.unwrap_or_else(|| {
                panic!(
                    "{m} {mode}: client {n} still open after {:?}",
                    header + SLACK
                )
            });
            assert!(
                got.starts_with(b"HTTP/1.1 408 "),
                "{m} {mode}: client {n}: {:?}",
                String::from_utf8_lossy(got)
            );
            assert!(
                t + Duration::from_millis(100) >= header,
                "{m} {mode}: closed after {t:?}"
            );
            assert!(t <= header + SLACK, "{m} {mode}: closed after {t:?}");
        }
        let st = p.shared().stats();
        assert_eq!(st.connections.header_timeouts, 30, "{m} {mode}");
        assert_eq!(
            st.connections.timeouts, 0,
            "{m} {mode}: the progress timeout never ran out"
        );
        assert_eq!(st.responses.s4xx, 30, "{m} {mode}");
        p.shutdown().unwrap();
    }

    /// A client that asks for a large body and reads none of it is closed once
    /// `--send-timeout` has passed without a write making progress, though `--timeout` is
    /// far off.
    pub fn client_reads_nothing(m: &str, mode: &str) {
        const LEN: usize = 32 << 20;
        let origin = body_origin(vec![b'a'; LEN]);
        // Short: nothing has to happen before it runs out (its clock starts only once output
        // waits for the client), so a loaded machine can only make the close later.
        let send = Duration::from_millis(500);
        let Some(p) = proxy_with(origin.addr, m, mode, |c| {
            c.timeout = Some(Duration::from_secs(60));
            c.send_timeout = Some(send);
            c.cache_bytes = 0;
        }) else {
            return;
        };
        let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let before = fds();
        let mut s = connect(&p);
        s.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let start = Instant::now();
        while p.shared().stats().connections.send_timeouts == 0 {
            assert!(
                start.elapsed() < send + 2 * SLACK,
                "{m} {mode}: the client is still open after {:?}",
                start.elapsed()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // The proxy's side of the connection is closed at once, its send in flight dropped
        // (the completion engine once kept it open for its orphaned sends' grace, 10 s): only
        // the test's own end is left (copy mode: the splice modes keep pipes pooled).
        if mode == "copy" {
            let closing = Instant::now();
            while fds() > before + 1 {
                assert!(
                    closing.elapsed() < 2 * SLACK,
                    "{m} {mode}: {} descriptors still open after the send timeout",
                    fds() - before
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // What the kernel held is readable; then the close (an EOF or a reset), short of the body,
        // and at once: a send still in flight to it is dropped, not waited for (the completion
        // engine once kept the socket open for its orphaned sends' grace, 10 s).
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut total = 0;
        let mut chunk = vec![0u8; 1 << 20];
        loop {
            match s.read(&mut chunk) {
                Ok(0) => break,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    panic!("{m} {mode}: still open 5 s after its send timeout ({total} bytes)")
                }
                Err(_) => break,
                Ok(n) => total += n,
            }
        }
        assert!(
            total < LEN,
            "{m} {mode}: {total} bytes: the whole body came"
        );
        let st = p.shared().stats();
        assert_eq!(st.connections.send_timeouts, 1, "{m} {mode}");
        assert_eq!(st.connections.timeouts, 0, "{m} {mode}");
        // Stalled, the proxy waits for an event rather than spinning: tens to hundreds of
        // waits here; a loop that woke for an event it does not want would make 10^5 or more
        // a second. Not epoll2: the kernel reports the origin's unwanted readability on every
        // wait (IN|OUT stay registered; the events are dropped in user space), the cost that
        // mechanism is measured for (docs/mechanisms.md).
        if m != "epoll2" {
            assert!(
                st.events.waits < 20_000,
                "{m} {mode}: spinning: {:?}",
                st.events
            );
        }
        p.shutdown().unwrap();
    }

    /// An origin that never takes the connection: 504 once `--connect-timeout` has passed
    /// (with `--timeout` far off); a refused connection: 502 at once. CONNECT to a target
    /// that hangs: 504 too.
    pub fn connect_timeout(m: &str, mode: &str) {
        let hang = Hanging::start();
        // Short: its clock starts with the proxy's connect, so a loaded machine can only make
        // the 504 later, never earlier than asserted.
        let connect_t = Duration::from_millis(500);
        let target = format!("127.0.0.1:{}", hang.addr.port());
        let Some(p) = proxy_with(hang.addr, m, mode, |c| {
            c.timeout = Some(Duration::from_secs(30));
            c.connect_timeout = Some(connect_t);
            c.allow_connect = vec![ConnectTarget::resolve(&target).unwrap()];
        }) else {
            return;
        };
        // The GET and the CONNECT wait for their connects at once (one timeout's time, not two).
        let mut get = connect(&p);
        let mut tunnel = connect(&p);
        for s in [&get, &tunnel] {
            s.set_read_timeout(Some(connect_t + 2 * SLACK)).unwrap();
        }
        let start = Instant::now();
        get.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        // In splice modes the tunnel takes its two pipes before its connect completes.
        write!(
            tunnel,
            "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"
        )
        .unwrap();
        let r = read_response(&mut get, &mut Vec::new(), false);
        let t = start.elapsed();
        assert_eq!(r.status, 504, "{m} {mode}: {}", r.head);
        assert!(
            t + Duration::from_millis(100) >= connect_t,
            "{m} {mode}: after {t:?}"
        );
        assert!(t <= connect_t + SLACK, "{m} {mode}: after {t:?}");

        let mut got = Vec::new();
        let mut chunk = [0u8; 1024];
        while find(&got, b"\r\n\r\n").is_none() {
            match tunnel.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
        let t = start.elapsed();
        assert!(
            got.starts_with(b"HTTP/1.1 504 "),
            "{m} {mode}: {:?}",
            String::from_utf8_lossy(&got)
        );
        assert!(
            t + Duration::from_millis(100) >= connect_t,
            "{m} {mode}: CONNECT after {t:?}"
        );
        assert!(t <= connect_t + SLACK, "{m} {mode}: CONNECT after {t:?}");
        // The timed-out tunnel's pipes (splice modes) are back in the pool, none left open in
        // a dead exchange (the counts are published at the end of the worker's turn).
        let deadline = Instant::now() + SLACK;
        let pipes = loop {
            let pipes = p.shared().stats().pipes;
            if pipes.open == pipes.idle || Instant::now() > deadline {
                break pipes;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(pipes.open, pipes.idle, "{m} {mode}: {pipes:?}");
        let want = if mode == "copy" { 0 } else { 2 };
        assert_eq!(
            pipes.created, want,
            "{m} {mode}: the tunnel's pipes: {pipes:?}"
        );
        let st = p.shared().stats();
        assert_eq!(st.origin.connect_timeouts, 2, "{m} {mode}");
        assert_eq!(st.origin.gateway_timeout, 2, "{m} {mode}");
        assert_eq!(st.connections.timeouts, 0, "{m} {mode}");
        p.shutdown().unwrap();

        let Some(p) = proxy_with(refusing(), m, mode, |c| {
            c.connect_timeout = Some(connect_t);
        }) else {
            return;
        };
        let mut s = connect(&p);
        s.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let r = read_response(&mut s, &mut Vec::new(), false);
        assert_eq!(r.status, 502, "{m} {mode}: {}", r.head);
        let st = p.shared().stats();
        assert_eq!(
            (st.origin.bad_gateway, st.origin.connect_timeouts),
            (1, 0),
            "{m} {mode}"
        );
        p.shutdown().unwrap();
    }
}

/// Every case in every forwarding mode on every mechanism of the registry, so that a new
/// mechanism inherits the suite.
macro_rules! timeout_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {$(
        #[allow(non_snake_case)]
        mod $v {
            modes!($name; client_reads_nothing, connect_timeout);
            // In copy mode only: the forwarding mode plays no part in it. The header timeout
            // runs before any exchange (no pipe, no body), the 408 is the proxy's own, and
            // the one response forwarded has a two-byte body, which every mode copies (a
            // body under `splice_min` is never spliced); the splice modes would run the same
            // code again.
            mod trickling_heads {
                #[test] fn copy() { crate::cases::trickling_heads($name, "copy") }
            }
        }
    )*};
}

evlab_poll::for_each_mechanism!(timeout_tests);
