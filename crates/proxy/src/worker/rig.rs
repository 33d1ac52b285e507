//! A worker under test, driven turn by turn in the test's own thread: an edge-triggered epoll
//! worker on a real listener (port 0), a scripted origin in a thread of its own, and clients
//! that are plain non-blocking sockets. The rooms' unit tests use it to reach one room's code
//! through the worker's real loop, without a proxy's threads.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use evlab_poll::{EpollEt, Mechanism};

use super::*;
use crate::engine::Readiness;

/// The origin's answer to a request head (its body, if any, already read).
pub(super) type Script = dyn Fn(&str) -> Vec<u8> + Send + Sync;

/// A scripted origin: one thread per connection, each request head answered by the script.
pub(super) struct ScriptedOrigin {
    pub addr: SocketAddr,
    /// Connections accepted, and requests answered.
    pub conns: Arc<AtomicUsize>,
    pub requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ScriptedOrigin {
    pub fn start(script: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static) -> ScriptedOrigin {
        let script: Arc<Script> = Arc::new(script);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let (conns, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, r, st) = (conns.clone(), requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((s, _)) => {
                        c.fetch_add(1, Ordering::SeqCst);
                        let (script, r) = (script.clone(), r.clone());
                        std::thread::spawn(move || serve(s, &*script, &r));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        ScriptedOrigin {
            addr,
            conns,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    pub fn conns(&self) -> usize {
        self.conns.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for ScriptedOrigin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers each request on `s` (a Content-Length body is read first) until the peer closes.
fn serve(mut s: TcpStream, script: &Script, requests: &AtomicUsize) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Some(end) = find(&buf, b"\r\n\r\n").map(|p| p + 4) else {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        let body = field(&head, "content-length").map_or(0, |v| v.parse().unwrap_or(0));
        while buf.len() < end + body {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..end + body);
        requests.fetch_add(1, Ordering::SeqCst);
        let answer = script(&head);
        if answer.is_empty() || s.write_all(&answer).is_err() {
            return;
        }
    }
}

pub(super) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A field's value in a head (case-insensitive name).
pub(super) fn field<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.split("\r\n").skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A 200 with `body`, and `fields` (each ending in CRLF) in its head.
pub(super) fn ok(body: &str, fields: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{fields}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A response the rig read: its head and body.
#[derive(Debug)]
pub(super) struct Answer {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        field(&self.head, name)
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }
}

/// The worker, its listener and the origin behind it.
pub(super) struct Rig {
    pub w: Worker<Readiness<EpollEt>>,
    pub origin: ScriptedOrigin,
    pub addr: SocketAddr,
    listen_fd: RawFd,
    /// Bytes a client read past the response asked for, by the client's descriptor.
    leftover: std::collections::HashMap<RawFd, Vec<u8>>,
}

impl Rig {
    /// A worker in front of an origin answering with `script`, its configuration changed by
    /// `tune` (timeouts of 10 s unless tuned).
    pub fn new(
        tune: impl FnOnce(&mut Config),
        script: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static,
    ) -> Rig {
        let origin = ScriptedOrigin::start(script);
        let mut cfg = Config::new(
            "127.0.0.1:0".parse().unwrap(),
            origin.addr,
            Mechanism::EpollEt,
        );
        cfg.timeout = Some(Duration::from_secs(10));
        cfg.linger = Duration::from_millis(50);
        tune(&mut cfg);
        let listen_fd = sys::tcp_listener(&cfg.listen, 64, false).unwrap();
        let addr = sys::getsockname(listen_fd).unwrap();
        let shared = Arc::new(Shared::new(cfg.mechanism, cfg.forward, false));
        let w = Worker::new(listen_fd, Arc::new(cfg), shared).unwrap();
        Rig {
            w,
            origin,
            addr,
            listen_fd,
            leftover: Default::default(),
        }
    }

    /// One turn that waits at most a few milliseconds.
    pub fn turn(&mut self) {
        self.w.turn(Some(Duration::from_millis(5))).unwrap();
    }

    /// A client connected and accepted by the worker.
    pub fn client(&mut self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_nonblocking(true).unwrap();
        s.set_nodelay(true).unwrap();
        let before = self.w.stats.conns.accepted.get();
        for _ in 0..400 {
            self.turn();
            if self.w.stats.conns.accepted.get() > before {
                return s;
            }
        }
        panic!("the worker did not accept");
    }

    /// Turns until `s` has a whole response (by Content-Length; no body for `head_only` or
    /// 304), and returns it; panics after 5 s.
    pub fn read(&mut self, s: &mut TcpStream, head_only: bool) -> Answer {
        use std::os::fd::AsRawFd;
        let mut buf = self.leftover.remove(&s.as_raw_fd()).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            self.turn();
            let mut chunk = [0u8; 65536];
            match s.read(&mut chunk) {
                Ok(0) if buf.is_empty() => break,
                Ok(0) => {}
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("client read: {e}"),
            }
            if let Some(end) = find(&buf, b"\r\n\r\n").map(|p| p + 4) {
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                let status: u16 = head[9..12].parse().unwrap();
                let len = if head_only || status == 304 || status < 200 {
                    0
                } else {
                    field(&head, "content-length").map_or(0, |v| v.parse().unwrap())
                };
                if buf.len() >= end + len {
                    let body = buf[end..end + len].to_vec();
                    self.leftover
                        .insert(s.as_raw_fd(), buf.split_off(end + len));
                    return Answer { status, head, body };
                }
            }
        }
        panic!(
            "no whole response in 5 s: {:?}",
            String::from_utf8_lossy(&buf)
        );
    }

    /// Sends `req` on `s` and reads the response.
    pub fn ask(&mut self, s: &mut TcpStream, req: &str) -> Answer {
        s.write_all(req.as_bytes()).unwrap();
        self.read(s, req.starts_with("HEAD "))
    }

    /// A GET of `path` on a new connection.
    pub fn get(&mut self, path: &str, fields: &str) -> Answer {
        let mut s = self.client();
        self.ask(
            &mut s,
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\n{fields}\r\n"),
        )
    }

    /// Turns until `s` is closed by the worker (true), or 5 s pass (false).
    pub fn closed(&mut self, s: &mut TcpStream) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            self.turn();
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => return true,
            }
        }
        false
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.w.teardown();
        let _ = sys::close(self.listen_fd);
    }
}
