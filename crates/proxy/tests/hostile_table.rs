//! The hostile cases that bench/hostile_compare.py also sends through nginx and HAProxy
//! (`tests/hostile/cases.json`, the table in docs/proxy.md): evlab proxy must give, on every
//! case, the observation the file records for it. The origin and the observation here are the
//! script's, line for line: the origin answers /case with the case's bytes and every other path
//! with 200 `real:PATH`; the client sends the case's bytes at once and reads until the proxy
//! closes or falls silent for 2 s. The deeper checks of each defence are in `hostile.rs`.

#[allow(unused_macros)] // `modes!` is for the suites that run every forwarding mode
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CASES: &str = include_str!("hostile/cases.json");
/// Seconds without a byte after which the client counts its connection as left open.
const SILENCE: Duration = Duration::from_secs(2);

struct Case {
    name: String,
    client: String,
    origin: String,
    evlab: String,
}

fn cases() -> Vec<Case> {
    let v: serde_json::Value = serde_json::from_str(CASES).expect("tests/hostile/cases.json");
    let text = |c: &serde_json::Value, k: &str| {
        c[k].as_str()
            .unwrap_or_else(|| panic!("a case without `{k}`: {c}"))
            .to_string()
    };
    v["cases"]
        .as_array()
        .expect("`cases`")
        .iter()
        .map(|c| Case {
            name: text(c, "name"),
            client: text(c, "client"),
            origin: text(c, "origin"),
            evlab: text(c, "evlab"),
        })
        .collect()
}

/// The script's strings are Latin-1: one char per byte.
fn bytes(s: &str) -> Vec<u8> {
    s.chars().map(|c| c as u32 as u8).collect()
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

// ---- the origin ----

type Log = Arc<Mutex<Vec<String>>>;

fn origin(case: Vec<u8>) -> (SocketAddr, Log) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let log: Log = Arc::default();
    let lg = log.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { return };
            let (case, lg) = (case.clone(), lg.clone());
            std::thread::spawn(move || serve(c, &case, &lg));
        }
    });
    (addr, log)
}

fn read_more(c: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 65536];
    match c.read(&mut chunk) {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

fn serve(mut c: TcpStream, case: &[u8], log: &Log) {
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = Vec::new();
    loop {
        let end = loop {
            if let Some(p) = find(&buf, b"\r\n\r\n", 0) {
                break p;
            }
            if !read_more(&mut c, &mut buf) {
                return;
            }
        };
        let head: String = buf[..end].iter().map(|&b| b as char).collect();
        buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let parts: Vec<&str> = lines.next().unwrap_or("").split(' ').collect();
        let (method, target) = (parts[0], parts.get(1).copied().unwrap_or(""));
        log.lock().unwrap().push(format!("{method} {target}"));
        let mut fields = std::collections::HashMap::new();
        for l in lines {
            let (k, v) = l.split_once(':').unwrap_or((l, ""));
            fields.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
        // The body, dropped: chunked up to its last chunk, or Content-Length bytes.
        let te = fields.get("transfer-encoding").cloned().unwrap_or_default();
        if te.to_ascii_lowercase().contains("chunked") {
            loop {
                if let Some(p) = find(&buf, b"0\r\n\r\n", 0) {
                    buf.drain(..p + 5);
                    break;
                }
                if !read_more(&mut c, &mut buf) {
                    return;
                }
            }
        } else {
            let cl = fields.get("content-length").cloned().unwrap_or_default();
            let n: usize = if !cl.is_empty() && cl.bytes().all(|b| b.is_ascii_digit()) {
                cl.parse().unwrap_or(0)
            } else {
                0
            };
            while buf.len() < n {
                if !read_more(&mut c, &mut buf) {
                    return;
                }
            }
            buf.drain(..n);
        }
        let path = match target.strip_prefix("http://") {
            Some(rest) => rest.find('/').map_or("", |i| &rest[i..]),
            None => target,
        };
        let out = if path == "/case" && !case.is_empty() {
            case.to_vec()
        } else {
            let body = format!("real:{path}");
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        };
        if c.write_all(&out).is_err() {
            return;
        }
    }
}

// ---- what a case shows ----

fn shown(status: u32, body: &[u8]) -> String {
    if body.len() <= 16 && body.iter().all(|b| (0x20..0x7f).contains(b)) {
        format!("{status} \"{}\"", String::from_utf8_lossy(body))
    } else {
        format!("{status} ({} bytes)", body.len())
    }
}

/// The responses in `data`, as the script's `parse_responses` writes them.
fn responses(mut data: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let Some(end) = find(data, b"\r\n\r\n", 0) else {
            out.push(format!("{} bytes of no response", data.len()));
            break;
        };
        let head: String = data[..end].iter().map(|&b| b as char).collect();
        let mut rest = &data[end + 4..];
        let mut lines = head.split("\r\n");
        let first = lines.next().unwrap_or("");
        let parts: Vec<&str> = first.split(' ').collect();
        let status = parts
            .get(1)
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u32>().ok());
        let Some(status) = status.filter(|_| first.starts_with("HTTP/")) else {
            out.push(format!("{} bytes of no response", data.len()));
            break;
        };
        let mut fields: Vec<(String, String)> = Vec::new();
        for l in lines {
            let (k, v) = l.split_once(':').unwrap_or((l, ""));
            let k = k.trim().to_ascii_lowercase();
            if !fields.iter().any(|(x, _)| *x == k) {
                fields.push((k, v.trim().to_string()));
            }
        }
        let field = |k: &str| {
            fields
                .iter()
                .find(|(x, _)| x == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let cl = field("content-length");
        let body: Vec<u8>;
        if field("transfer-encoding")
            .to_ascii_lowercase()
            .contains("chunked")
        {
            let mut b = Vec::new();
            let mut ok = false;
            while let Some(nl) = find(rest, b"\r\n", 0) {
                let line = &rest[..nl];
                let size_txt = line.split(|&x| x == b';').next().unwrap_or(b"");
                let size_txt = String::from_utf8_lossy(size_txt).trim().to_string();
                let Ok(size) = usize::from_str_radix(&size_txt, 16) else {
                    break;
                };
                if size == 0 {
                    rest = match find(rest, b"\r\n\r\n", nl) {
                        Some(t) => &rest[t + 4..],
                        None => b"",
                    };
                    ok = true;
                    break;
                }
                let from = (nl + 2).min(rest.len());
                let to = (nl + 2 + size).min(rest.len());
                b.extend_from_slice(&rest[from..to]);
                rest = &rest[(nl + 2 + size + 2).min(rest.len())..];
            }
            if !ok {
                out.push(format!("{status} (chunked body cut short)"));
                break;
            }
            body = b;
        } else if !cl.is_empty() && cl.bytes().all(|b| b.is_ascii_digit()) {
            let n: usize = cl.parse().unwrap_or(usize::MAX);
            if rest.len() < n {
                out.push(format!("{status} ({} of {n} bytes)", rest.len()));
                break;
            }
            body = rest[..n].to_vec();
            rest = &rest[n..];
        } else if status == 204 || status == 304 || (100..200).contains(&status) {
            body = Vec::new();
        } else {
            body = rest.to_vec();
            rest = b"";
        }
        out.push(shown(status, &body));
        data = rest;
    }
    out
}

fn observe(port: SocketAddr, client: &[u8], log: &Log) -> String {
    let mut s = TcpStream::connect(port).unwrap();
    s.write_all(client).unwrap();
    s.set_read_timeout(Some(SILENCE)).unwrap();
    let (mut data, mut closed) = (Vec::new(), false);
    let t0 = Instant::now();
    let mut chunk = [0u8; 65536];
    while t0.elapsed() < 3 * SILENCE {
        match s.read(&mut chunk) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => data.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                closed = true;
                break;
            }
            Err(_) => break,
        }
    }
    drop(s);
    std::thread::sleep(Duration::from_millis(50));
    let got = responses(&data);
    let reqs = log.lock().unwrap().clone();
    format!(
        "client: {}{}; origin: {}",
        if got.is_empty() {
            "nothing".to_string()
        } else {
            got.join(" | ")
        },
        if closed { ", closed" } else { ", left open" },
        if reqs.is_empty() {
            "nothing".to_string()
        } else {
            reqs.join(", ")
        }
    )
}

#[test]
fn evlab_gives_what_the_comparison_table_records() {
    let cases = cases();
    assert!(cases.len() >= 18);
    let mut wrong = Vec::new();
    for c in &cases {
        let (addr, log) = origin(bytes(&c.origin));
        // As the script runs evlab proxy: epoll-et, copy, no cache.
        let Some(p) = common::proxy_with(addr, "epoll-et", "copy", |cfg| cfg.cache_bytes = 0)
        else {
            panic!("epoll-et is a readiness mechanism every Linux has");
        };
        let got = observe(p.local_addr(), &bytes(&c.client), &log);
        p.shutdown().unwrap();
        if got != c.evlab {
            wrong.push(format!("{}:\n  want {}\n  got  {got}", c.name, c.evlab));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_parser_reads_responses_as_the_script_does() {
    let two = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 502 Bad\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    assert_eq!(responses(two), ["200 \"hello\"", "502 \"abc\""]);
    assert_eq!(
        responses(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhi"),
        ["200 (2 of 9 bytes)"]
    );
    assert_eq!(responses(b"garbage\r\n\r\n"), ["11 bytes of no response"]);
    assert_eq!(
        responses(b"HTTP/1.1 200 OK\r\n\r\n0123456789abcdefXYZ"),
        ["200 (19 bytes)"]
    );
}

/// A proxy sends `Via` toward the client too (RFC 9110 §7.6.3), with the version the origin
/// answered in; a cache hit keeps it, and says its own `Age`: the one the response came with
/// plus its time in the cache (RFC 9111 §5.1), in one field.
#[test]
fn responses_carry_via_and_hits_their_age() {
    let (addr, _log) = origin(
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nAge: 100\r\nCache-Control: max-age=600\r\n\r\nhi"
            .to_vec(),
    );
    let p = common::proxy(addr, "epoll-et", "copy").expect("epoll-et");
    let head = |path: &str| {
        let mut s = TcpStream::connect(p.local_addr()).unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let mut out = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        text[..text.find("\r\n\r\n").unwrap_or(text.len())].to_string()
    };
    let vias = |h: &str| -> Vec<String> {
        h.lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("via:"))
            .map(String::from)
            .collect()
    };
    let ages = |h: &str| -> Vec<u64> {
        h.lines()
            .filter_map(|l| l.strip_prefix("Age: "))
            .map(|v| v.parse().unwrap())
            .collect()
    };
    let miss = head("/case");
    assert_eq!(vias(&miss), ["Via: 1.0 evlab"]);
    assert_eq!(ages(&miss), [100], "{miss}");
    assert_eq!(vias(&head("/other")), ["Via: 1.1 evlab"]);
    // From the cache: the same Via, and one Age of at least what it came with.
    std::thread::sleep(Duration::from_millis(1100));
    let hit = head("/case");
    assert!(hit.contains("X-Cache: HIT"), "{hit}");
    assert_eq!(vias(&hit), ["Via: 1.0 evlab"]);
    let a = ages(&hit);
    assert!(a.len() == 1 && (100..=130).contains(&a[0]), "{hit}");
    p.shutdown().unwrap();
}
