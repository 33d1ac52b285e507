//! A small exact HTTP/1.1 client for the CLI tests: one request written, one response read
//! by its framing (Content-Length, chunked, or to EOF), the bytes kept exactly as they came.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn cache(&self) -> Option<&str> {
        self.header("x-cache")
    }
}

/// read(2), retried on EINTR: a blocking socket read with a timeout fails with EINTR when
/// the thread is interrupted (io_uring task work counts, and the support probes of the
/// io_uring mechanisms run in the test's thread).
pub fn read_some(s: &mut TcpStream, chunk: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match s.read(chunk) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads one response: by Content-Length, none for HEAD and 304, chunked up to its last
/// chunk (the framing kept in `body`), else to EOF. `Ok(None)` on EOF before any byte;
/// `Err(got)` on EOF inside a body (a response cut short), with what arrived.
pub fn try_read(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    head_only: bool,
) -> Result<Option<Response>, usize> {
    let mut chunk = vec![0u8; 1 << 20];
    let head_end = loop {
        if let Some(p) = find(buf, b"\r\n\r\n") {
            break p + 4;
        }
        match read_some(s, &mut chunk) {
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) => panic!("EOF inside a head: {:?}", String::from_utf8_lossy(buf)),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => panic!(
                "reading a head: {e} (have {:?})",
                String::from_utf8_lossy(buf)
            ),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    assert!(
        head.starts_with("HTTP/1."),
        "not a response head: {:.200}",
        head
    );
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once(':').expect("a colon");
            (k.trim().to_string(), v.trim().to_string())
        })
        .collect();
    let mut r = Response {
        status,
        headers,
        body: Vec::new(),
    };
    buf.drain(..head_end);
    let chunked = r
        .header("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"));
    let length: Option<usize> = r.header("content-length").map(|v| v.parse().unwrap());
    let want = if head_only || status == 304 || status == 204 {
        Some(0)
    } else if chunked {
        None
    } else {
        length
    };
    loop {
        let done = match want {
            Some(n) => buf.len() >= n,
            None if chunked => find(buf, b"0\r\n\r\n").is_some(),
            None => false,
        };
        if done {
            break;
        }
        match read_some(s, &mut chunk) {
            Ok(0) if want.is_none() && !chunked => break,
            Ok(0) => return Err(buf.len()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Err(buf.len()),
            Err(e) => panic!("reading a body: {e} (have {})", buf.len()),
        }
    }
    let n = match want {
        Some(n) => n,
        None if chunked => find(buf, b"0\r\n\r\n").unwrap() + 5,
        None => buf.len(),
    };
    r.body = buf.drain(..n).collect();
    Ok(Some(r))
}

pub fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>, head_only: bool) -> Response {
    try_read(s, buf, head_only)
        .expect("a whole response")
        .expect("a response, not EOF")
}

pub fn get(s: &mut TcpStream, buf: &mut Vec<u8>, path: &str) -> Response {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .unwrap();
    read_response(s, buf, false)
}
