//! Idle pooled origin connections, on every mechanism of the registry
//! (`evlab_poll::for_each_mechanism!`). Readiness mechanisms watch an idle connection through
//! its registration; the completion engine arms its poll only once the connection has been idle
//! a while (`IDLE_WATCH_DELAY`; an idle worker wakes for it up to `IDLE_WATCH_SLACK` late, 1 s)
//! and looks at a connection taken back sooner before its request.
//! Either way:
//!
//! - an idle connection the origin closes is closed by the proxy too, with no request to find
//!   it (nothing would otherwise close it before it is taken again);
//! - bytes the origin sends on an idle connection are never taken for the answer to the next
//!   request, and the response stored before them leaves the cache. The bytes are in the
//!   proxy's socket before the next request is sent (loopback delivers in the writer's call),
//!   so the outcome does not depend on timing: whichever of the two looks finds them.

#[allow(unused_macros)] // `modes!`: this file runs copy mode only
mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{connect, next_head, proxy_with, read_response};
use evlab_proxy::Proxy;
use evlab_wire::proxy::OriginCounts;

const SMUGGLED: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nCache-Control: max-age=600\r\n\r\nevil";

fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nCache-Control: max-age=600\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// What the test tells the origin to do on the connection that answered its last request.
enum Do {
    Close,
    Smuggle,
}

/// A scripted origin: each connection answers every request with `real:<path>`; on the test's
/// word, the connection that answered last closes or sends bytes nobody asked for, and says
/// when that is done.
struct Origin {
    addr: SocketAddr,
    tell: Sender<Do>,
    done: Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl Origin {
    fn start() -> Origin {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tell, orders) = channel::<Do>();
        let (report, done) = channel::<()>();
        let thread = std::thread::spawn(move || {
            l.set_nonblocking(true).unwrap();
            // Each connection with the bytes it has read; the one that answered last is last.
            let mut conns: Vec<(TcpStream, Vec<u8>)> = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                if let Ok((s, _)) = l.accept() {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
                    conns.push((s, Vec::new()));
                }
                // One request at a time, on whichever connection has one.
                let asked = conns.iter_mut().position(|(s, buf)| {
                    let Some(head) = next_head(s, buf, &mut chunk) else {
                        return false;
                    };
                    let path = head.split(' ').nth(1).unwrap_or("").to_string();
                    let _ = s.write_all(&ok(&format!("real:{path}")));
                    true
                });
                if let Some(i) = asked {
                    let c = conns.remove(i);
                    conns.push(c);
                }
                match orders.try_recv() {
                    Ok(Do::Close) => {
                        drop(conns.pop());
                        let _ = report.send(());
                    }
                    Ok(Do::Smuggle) => {
                        if let Some((s, _)) = conns.last_mut() {
                            s.write_all(SMUGGLED).unwrap();
                        }
                        let _ = report.send(());
                    }
                    Err(std::sync::mpsc::TryRecvError::Empty) => {}
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => return,
                }
            }
        });
        Origin {
            addr,
            tell,
            done,
            thread: Some(thread),
        }
    }

    fn order(&self, what: Do) {
        self.tell.send(what).unwrap();
        self.done
            .recv_timeout(Duration::from_secs(10))
            .expect("the origin did it");
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        let (tell, _) = channel();
        drop(std::mem::replace(&mut self.tell, tell));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn get(s: &mut TcpStream, buf: &mut Vec<u8>, path: &str) -> common::Response {
    write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    read_response(s, buf, false)
}

fn start(o: &Origin, m: &str) -> Option<Proxy> {
    proxy_with(o.addr, m, "copy", |_| {})
}

/// The proxy's origin counts once `done` holds of them, or after 5 s.
fn until(p: &Proxy, done: impl Fn(&OriginCounts) -> bool) -> OriginCounts {
    let t = Instant::now();
    loop {
        let st = p.shared().stats().origin;
        if done(&st) || t.elapsed() > Duration::from_secs(5) {
            return st;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn idle_close_is_seen(m: &str) {
    let o = Origin::start();
    let Some(p) = start(&o, m) else {
        return;
    };
    let (mut s, mut buf) = (connect(&p), Vec::new());
    assert_eq!(get(&mut s, &mut buf, "/a").text(), "real:/a", "{m}");
    // The connection goes back to the pool once the response is through (the stats say so at
    // the end of the proxy's turn).
    let before = until(&p, |o| o.idle == 1);
    assert_eq!(before.idle, 1, "{m}: {before:?}");
    o.order(Do::Close);
    // No request comes: only the proxy's own watch can find the close.
    let after = until(&p, |o| o.idle == 0);
    assert_eq!(
        after.idle, 0,
        "{m}: the closed connection is still pooled ({after:?})"
    );
    assert_eq!(after.closed, before.closed + 1, "{m}: {after:?}");
    assert_eq!(get(&mut s, &mut buf, "/b").text(), "real:/b", "{m}");
    p.shutdown().unwrap();
}

fn idle_bytes_are_no_answer(m: &str) {
    let o = Origin::start();
    let Some(p) = start(&o, m) else {
        return;
    };
    let (mut s, mut buf) = (connect(&p), Vec::new());
    let r = get(&mut s, &mut buf, "/a");
    assert_eq!(
        (r.text(), r.cache()),
        ("real:/a".into(), Some("MISS")),
        "{m}"
    );
    o.order(Do::Smuggle);
    // At once: the bytes are in the proxy's socket, and its watch may not be armed yet.
    let r = get(&mut s, &mut buf, "/b");
    assert_eq!(
        r.text(),
        "real:/b",
        "{m}: the smuggled bytes were taken for the answer"
    );
    let r = get(&mut s, &mut buf, "/a");
    assert_eq!(
        (r.text(), r.cache()),
        ("real:/a".into(), Some("MISS")),
        "{m}: the response stored before the smuggled bytes stayed cached"
    );
    assert!(p.shared().stats().origin.errors >= 1, "{m}");
    p.shutdown().unwrap();
}

macro_rules! idle_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {$(
        #[allow(non_snake_case)]
        mod $v {
            #[test]
            fn an_idle_connection_the_origin_closes_is_closed() {
                crate::idle_close_is_seen($name)
            }

            #[test]
            fn bytes_sent_on_an_idle_connection_are_no_answer() {
                crate::idle_bytes_are_no_answer($name)
            }
        }
    )*};
}

evlab_poll::for_each_mechanism!(idle_tests);
