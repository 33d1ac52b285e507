//! A crowd of slow uploads (issue 39, "Request bodies buffered before the origin is
//! contacted"): 200 clients, a new one every 5 ms, each trickling a 10,000-byte body in ten
//! pieces 100 ms apart. With the default `--request-buffering on` the proxy holds their bodies,
//! not origin connections: the origin (which counts the connections it holds at once) holds at
//! most 10, and every body arrives whole. With `off`, as a control that can fail, it holds one
//! per client sending.
//! One test per mechanism of the registry, copy mode.

#[allow(unused_macros)] // `modes!`: this file runs copy mode only
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{connect, field, next_head, proxy_with, read_response, ThreadOrigin};

const CLIENTS: usize = 200;
const BODY: usize = 10_000;
const PIECES: usize = 10;

/// Connections open at the origin now, and the most at once.
#[derive(Default)]
struct Held {
    now: AtomicUsize,
    most: AtomicUsize,
}

/// The origin: reads each request's body by its length and answers with the byte count; counts
/// the connections it holds open at once.
fn origin() -> (ThreadOrigin, Arc<Held>) {
    let held = Arc::new(Held::default());
    let counted = held.clone();
    let o = ThreadOrigin::start(move |s: TcpStream| {
        let now = counted.now.fetch_add(1, Ordering::SeqCst) + 1;
        counted.most.fetch_max(now, Ordering::SeqCst);
        serve(s);
        counted.now.fetch_sub(1, Ordering::SeqCst);
    });
    (o, held)
}

fn serve(mut s: TcpStream) {
    {
        let (mut buf, mut chunk) = (Vec::new(), vec![0u8; 16384]);
        while let Some(head) = next_head(&mut s, &mut buf, &mut chunk) {
            let len: usize = field(&head, "content-length").map_or(0, |v| v.parse().unwrap());
            while buf.len() < len {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let got = buf.drain(..len).filter(|&b| b == b'u').count();
            let answer = got.to_string();
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{answer}",
                answer.len()
            );
            if s.write_all(resp.as_bytes()).is_err() {
                return;
            }
        }
    }
}

/// Runs the crowd through a proxy on `m` (buffering as `buffering` says); returns the most
/// connections the origin held at once and how many clients got their whole body counted back.
fn crowd(m: &str, buffering: bool) -> Option<(usize, usize)> {
    let (o, held) = origin();
    let p = proxy_with(o.addr, m, "copy", |c| {
        c.request_buffering = buffering;
        c.timeout = Some(Duration::from_secs(20));
    })?;
    // PUT, an upload: idempotent, so it may go on a pooled origin connection (a POST always
    // takes a fresh one, which could not be retried).
    let head = format!("PUT /up HTTP/1.1\r\nHost: t\r\nContent-Length: {BODY}\r\n\r\n");
    let piece = vec![b'u'; BODY / PIECES];
    let start = Instant::now();
    let mut clients: Vec<(TcpStream, usize)> = Vec::new();
    // Client i starts at i × 5 ms (200 a second) and sends piece k at k × 100 ms after that.
    let step = Duration::from_millis(5);
    for tick in 0..(CLIENTS + PIECES * 20) {
        let due = start + step * tick as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if clients.len() < CLIENTS {
            let mut s = connect(&p);
            s.write_all(head.as_bytes()).unwrap();
            clients.push((s, 0));
        }
        for (i, (s, sent)) in clients.iter_mut().enumerate() {
            if *sent < PIECES && tick >= i + 20 * (*sent + 1) {
                s.write_all(&piece).unwrap();
                *sent += 1;
            }
        }
    }
    let mut whole = 0;
    for (mut s, _) in clients {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let r = read_response(&mut s, &mut Vec::new(), false);
        whole += usize::from(r.status == 200 && r.text() == BODY.to_string());
    }
    p.shutdown().unwrap();
    Some((held.most.load(Ordering::SeqCst), whole))
}

mod cases {
    use super::*;

    pub fn slow_bodies_hold_no_origin_connections(m: &str) {
        let Some((conns, whole)) = crowd(m, true) else {
            return;
        };
        assert_eq!(whole, CLIENTS, "{m}: bodies that reached the origin whole");
        assert!(
            conns <= 10,
            "{m}: {conns} origin connections for {CLIENTS} slow bodies"
        );
    }

    /// The control: streamed, the same crowd holds an origin connection per client sending.
    pub fn streamed_they_do(m: &str) {
        let Some((conns, whole)) = crowd(m, false) else {
            return;
        };
        assert_eq!(whole, CLIENTS, "{m}");
        assert!(
            conns > 10,
            "{m}: only {conns} origin connections at once, streamed"
        );
    }
}

macro_rules! crowd_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {$(
        #[allow(non_snake_case)]
        mod $v {
            #[test]
            fn slow_bodies_hold_no_origin_connections() {
                crate::cases::slow_bodies_hold_no_origin_connections($name)
            }
            #[test]
            fn streamed_they_do() {
                crate::cases::streamed_they_do($name)
            }
        }
    )*};
}

evlab_poll::for_each_mechanism!(crowd_tests);
