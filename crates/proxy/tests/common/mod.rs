//! What the proxy's integration tests share: the proxy started in the test process on an
//! engine and forwarding mode (port 0), and a small HTTP/1.1 client that reads one response
//! at a time.

#![allow(dead_code)] // each test file uses its own part

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use evlab_poll::Mechanism;
use evlab_proxy::{Config, ForwardMode, Proxy};

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The next request head an origin reads from `s`, taken off the front of `buf` (None when
/// the peer closed or the read failed first); `chunk` is the read buffer.
pub fn next_head(s: &mut TcpStream, buf: &mut Vec<u8>, chunk: &mut [u8]) -> Option<String> {
    let end = loop {
        if let Some(p) = find(buf, b"\r\n\r\n") {
            break p + 4;
        }
        match std::io::Read::read(s, chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    buf.drain(..end);
    Some(head)
}

pub fn field<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.split("\r\n").skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// One test per forwarding mode of each case in the test file's `cases` module, for the
/// engine `$m`.
macro_rules! modes {
    ($m:expr; $($case:ident),*) => {$(
        mod $case {
            #[test] fn copy() { crate::cases::$case($m, "copy") }
            #[test] fn splice() { crate::cases::$case($m, "splice") }
            #[test] fn splice_keep() { crate::cases::$case($m, "splice-keep") }
            #[test] fn splice_release() { crate::cases::$case($m, "splice-release") }
        }
    )*};
}

// ---- the proxy and a small client ----

pub fn proxy_with(
    origin: SocketAddr,
    m: &str,
    mode: &str,
    tune: impl FnOnce(&mut Config),
) -> Option<Proxy> {
    let mech = Mechanism::from_name(m).unwrap();
    if !evlab_poll::testing::mechanism(mech) {
        return None;
    }
    let mut cfg = Config::new("127.0.0.1:0".parse().unwrap(), origin, mech);
    cfg.forward = ForwardMode::from_name(mode).unwrap();
    cfg.timeout = Some(Duration::from_secs(10));
    cfg.linger = Duration::from_millis(200);
    tune(&mut cfg);
    Some(Proxy::start(cfg).expect("the proxy starts"))
}

pub fn proxy(origin: SocketAddr, m: &str, mode: &str) -> Option<Proxy> {
    proxy_with(origin, m, mode, |_| {})
}

pub fn connect(p: &Proxy) -> TcpStream {
    let s = TcpStream::connect(p.local_addr()).unwrap();
    // Short: a proxy whose worker died answers nothing, and the test must say so soon.
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        field(&self.head, name)
    }
    pub fn cache(&self) -> Option<&str> {
        self.header("x-cache")
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }
}

pub fn read_some(s: &mut TcpStream, chunk: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match s.read(chunk) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// One response: by Content-Length, else chunked to its last chunk, else to EOF.
pub fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>, head_only: bool) -> Response {
    let mut chunk = vec![0u8; 64 * 1024];
    let end = loop {
        if let Some(p) = find(buf, b"\r\n\r\n") {
            break p + 4;
        }
        match read_some(s, &mut chunk) {
            Ok(0) => panic!("EOF before a response head ({buf:?})"),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("no response head: {e} (the proxy died?)"),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    buf.drain(..end);
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let length = field(&head, "content-length").map(|v| v.parse::<usize>().unwrap());
    let chunked = field(&head, "transfer-encoding").is_some_and(|v| v.contains("chunked"));
    let done = |buf: &[u8]| match (head_only || status == 304 || status == 204, length) {
        (true, _) => Some(0),
        (false, Some(n)) => (buf.len() >= n).then_some(n),
        // The last chunk, then trailers up to the blank line.
        (false, None) if chunked => last_chunk_end(buf),
        (false, None) => None,
    };
    let n = loop {
        if let Some(n) = done(buf) {
            break n;
        }
        match read_some(s, &mut chunk) {
            Ok(0) if length.is_none() && !chunked => break buf.len(),
            Ok(0) => panic!("EOF inside a body"),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => panic!(
                "reading a body: {e} ({head:?}, {:?})",
                String::from_utf8_lossy(buf)
            ),
        }
    };
    let body = buf.drain(..n).collect();
    Response { status, head, body }
}

/// Where a chunked body ends: after its last chunk (`0`, at the start or after a CRLF) and
/// the trailers up to the blank line.
pub fn last_chunk_end(buf: &[u8]) -> Option<usize> {
    let zero = if buf.starts_with(b"0\r\n") {
        0
    } else {
        find(buf, b"\r\n0\r\n")? + 2
    };
    // "0" CRLF, then either CRLF at once or trailer lines ending in CRLF CRLF.
    let rest = &buf[zero + 1..];
    if rest.starts_with(b"\r\n\r\n") {
        return Some(zero + 5);
    }
    Some(zero + 1 + find(rest, b"\r\n\r\n")? + 4)
}

// ---- an origin with a thread per connection ----

/// An origin on 127.0.0.1 (port 0) that runs `serve` in a thread of its own for each
/// connection; it stops accepting when dropped.
pub struct ThreadOrigin {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ThreadOrigin {
    pub fn start(serve: impl Fn(TcpStream) + Send + Sync + 'static) -> ThreadOrigin {
        let serve = Arc::new(serve);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        let serve = serve.clone();
                        std::thread::spawn(move || serve(s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        ThreadOrigin {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for ThreadOrigin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
