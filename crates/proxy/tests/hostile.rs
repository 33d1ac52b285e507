//! The proxy against a hostile origin (issue 21): response smuggling by a short
//! Content-Length, ambiguous framing, a cache keyed without the host, freshness fields that
//! overflow time arithmetic, hop-by-hop fields that name framing fields, chunked bodies to an
//! HTTP/1.0 client. The proxy runs in this process (`Proxy::start`, port 0) on every mechanism
//! of the registry (`evlab_poll::for_each_mechanism!`) and forwarding mode; the origin is
//! scripted here, a `TcpListener` on port 0 with a thread per connection. Every case is one
//! test per mechanism and mode (`hostile_tests!`); a mechanism the kernel lacks prints its
//! reason.

#[macro_use]
mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use common::{connect, field, next_head, proxy, proxy_with, read_response, read_some, Response};
use evlab_proxy::Proxy;

/// What the smuggling origin slips behind a response: a whole response of its own, cacheable,
/// which a proxy that reads it as the answer to the next request would serve and store.
const SMUGGLED: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nCache-Control: max-age=600\r\n\r\nevil";
/// Larger than the first read of every mode (64 KiB copy, 4 KiB splice), so that the bytes
/// after it stay in the socket while the body is moved.
const BIG: usize = 100_000;

fn body_of(len: usize) -> Vec<u8> {
    (0..len).map(|i| b'a' + (i % 26) as u8).collect()
}

// ---- the scripted origin ----

/// An origin scripted per path; each connection in its own thread. It records every request
/// head it receives.
struct Origin {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Every request head received, with the number of the connection it came on.
    heads: Log,
    thread: Option<JoinHandle<()>>,
}

type Log = Arc<Mutex<Vec<(usize, String)>>>;

impl Origin {
    fn start() -> Origin {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (flag, log) = (stop.clone(), heads.clone());
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !flag.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        let log = log.clone();
                        let id = conns.len();
                        conns.push(std::thread::spawn(move || serve(s, id, log)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            // The proxy has stopped (and closed its connections) before the origin is dropped:
            // every connection thread ends with its EOF.
            for c in conns {
                let _ = c.join();
            }
        });
        Origin {
            addr,
            stop,
            heads,
            thread: Some(thread),
        }
    }

    /// The heads received for `path` so far.
    fn heads_for(&self, path: &str) -> Vec<String> {
        let want = format!(" {path} ");
        self.heads
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, h)| h.contains(&want))
            .map(|(_, h)| h.clone())
            .collect()
    }

    /// Asserts that the request for `path` was the last its connection carried: the proxy
    /// did not reuse a connection whose framing it could not trust.
    fn assert_last_on_its_connection(&self, path: &str, what: &str) {
        let want = format!(" {path} ");
        let heads = self.heads.lock().unwrap();
        let at = heads
            .iter()
            .position(|(_, h)| h.contains(&want))
            .unwrap_or_else(|| panic!("{what}: {path} never reached the origin"));
        let conn = heads[at].0;
        let later: Vec<&String> = heads[at + 1..]
            .iter()
            .filter(|(c, _)| *c == conn)
            .map(|(_, h)| h)
            .collect();
        assert!(
            later.is_empty(),
            "{what}: reused after {path} for {later:?}"
        );
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

fn ok(body: &[u8], extra: &str) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{extra}\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

fn serve(mut s: TcpStream, id: usize, log: Log) {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Some(head) = next_head(&mut s, &mut buf, &mut chunk) else {
            return;
        };
        log.lock().unwrap().push((id, head.clone()));
        let path = head.split(' ').nth(1).unwrap_or("").to_string();
        let cacheable = "Cache-Control: max-age=600\r\n";
        let mut out = match path.as_str() {
            // Content-Length shorter than what follows: a response smuggled behind the body.
            "/smuggle-big" => ok(&body_of(BIG), cacheable),
            "/smuggle-small" => ok(b"hello", cacheable),
            "/head-then-body" => ok(b"hello", cacheable),
            "/smuggle-late" => {
                if s.write_all(&ok(b"hello", cacheable)).is_err() {
                    return;
                }
                // The second response comes once the first is through: it lands on an idle
                // pooled connection.
                std::thread::sleep(Duration::from_millis(50));
                SMUGGLED.to_vec()
            }
            "/te-and-cl" => b"HTTP/1.1 200 OK\r\nContent-Length: 82\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\nCache-Control: max-age=600\r\n\r\nevil".to_vec(),
            "/cl-and-te" => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n".to_vec(),
            "/cl-twice" => b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello".to_vec(),
            "/cl-conflict" => b"HTTP/1.1 200 OK\r\nContent-Length: 5, 9\r\n\r\nhello".to_vec(),
            "/cl-invalid" => b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello".to_vec(),
            "/status-0" => b"HTTP/1.1 000 Zero\r\nContent-Length: 0\r\n\r\n".to_vec(),
            "/status-99" => b"HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n".to_vec(),
            "/connection-cl" => ok(b"hello", "Connection: Content-Length, X-Drop\r\nX-Drop: 1\r\nCache-Control: max-age=600\r\n"),
            "/connection-te" => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: Transfer-Encoding\r\n\r\n5\r\nhello\r\n0\r\n\r\n".to_vec(),
            "/chunked" => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nCache-Control: max-age=600\r\n\r\n5;x=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n".to_vec(),
            "/max-age-i64" => ok(b"fresh", "Cache-Control: max-age=9223372036854775807\r\n"),
            "/max-age-u64" => ok(b"fresh", "Cache-Control: public, max-age=18446744073709551615\r\n"),
            "/s-maxage-huge" => ok(b"fresh", &format!("Cache-Control: s-maxage={}\r\n", "9".repeat(100))),
            "/age-huge" => ok(b"fresh", "Cache-Control: max-age=9223372036854775807\r\nAge: 9223372036854775807\r\n"),
            "/expires-far" => ok(b"fresh", "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nExpires: Fri, 31 Dec 9999 23:59:59 GMT\r\n"),
            "/expires-past" => ok(b"stale", "Expires: Sun, 06 Nov 1994 08:49:37 GMT\r\n"),
            "/expires-invalid" => ok(b"stale", "Expires: 0\r\n"),
            "/expires-past-date" => ok(b"stale", "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nExpires: Sun, 06 Nov 1994 08:49:36 GMT\r\n"),
            p if p.starts_with("/host") => {
                let host = field(&head, "host").unwrap_or("(none)");
                ok(format!("host:{host}").as_bytes(), cacheable)
            }
            p => ok(format!("real:{p}").as_bytes(), cacheable),
        };
        if matches!(
            path.as_str(),
            "/smuggle-big" | "/smuggle-small" | "/head-then-body"
        ) {
            out.extend_from_slice(SMUGGLED);
        }
        if s.write_all(&out).is_err() {
            return;
        }
    }
}

// ---- a small client ----

fn request(p: &Proxy, req: &str) -> Response {
    let mut s = connect(p);
    s.write_all(req.as_bytes()).unwrap();
    read_response(&mut s, &mut Vec::new(), req.starts_with("HEAD"))
}

fn get(p: &Proxy, path: &str) -> Response {
    request(p, &format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"))
}

fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 16];
    match read_some(s, &mut b) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

// ---- the cases ----

mod cases {
    use super::*;

    /// HIGH 1: an origin whose Content-Length is shorter than what it sends. The next request
    /// (pipelined behind, so that it would take the pooled connection at once) gets the real
    /// answer, never the smuggled one; nothing smuggled, nor the response it hid behind, is
    /// cached; the same for a second response sent to an idle pooled connection.
    pub fn smuggled_responses(m: &str, mode: &str) {
        let o = Origin::start();
        let Some(p) = proxy(o.addr, m, mode) else {
            return;
        };
        for (smuggle, next, len) in [
            ("/smuggle-big", "/next-big", BIG),
            ("/smuggle-small", "/next-small", 5),
        ] {
            let what = format!("{m} {mode} {smuggle}");
            let mut s = connect(&p);
            let mut buf = Vec::new();
            s.write_all(
                format!(
                    "GET {smuggle} HTTP/1.1\r\nHost: t\r\n\r\nGET {next} HTTP/1.1\r\nHost: t\r\n\r\n"
                )
                .as_bytes(),
            )
            .unwrap();
            let first = read_response(&mut s, &mut buf, false);
            assert_eq!(first.status, 200, "{what}");
            assert_eq!(first.body.len(), len, "{what}: what was declared");
            let second = read_response(&mut s, &mut buf, false);
            assert_eq!(
                (second.status, second.text()),
                (200, format!("real:{next}")),
                "{what}: the pipelined request got another response"
            );
            // From the cache now: the real answer, never the smuggled one.
            let again = get(&p, next);
            assert_eq!(
                (again.text(), again.cache()),
                (format!("real:{next}"), Some("HIT")),
                "{what}"
            );
            // The response with bytes behind it was not stored.
            let again = get(&p, smuggle);
            assert_eq!(
                again.cache(),
                Some("MISS"),
                "{what}: a suspect response was cached"
            );
            assert_eq!(again.body.len(), len, "{what}");
        }
        // A HEAD answered with a body behind its head: the body is not the client's.
        let mut s = connect(&p);
        let mut buf = Vec::new();
        s.write_all(
            b"HEAD /head-then-body HTTP/1.1\r\nHost: t\r\n\r\nGET /next-head HTTP/1.1\r\nHost: t\r\n\r\n",
        )
        .unwrap();
        let h = read_response(&mut s, &mut buf, true);
        assert_eq!((h.status, h.header("content-length")), (200, Some("5")));
        let r = read_response(&mut s, &mut buf, false);
        assert_eq!(r.text(), "real:/next-head", "{m} {mode} after a HEAD");
        // A second response sent to an idle pooled connection: the connection is dropped, the
        // response before it leaves the cache, and the next request is answered truly.
        let mut s = connect(&p);
        let mut buf = Vec::new();
        s.write_all(b"GET /smuggle-late HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(&mut s, &mut buf, false).text(), "hello");
        std::thread::sleep(Duration::from_millis(300));
        s.write_all(b"GET /next-late HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let r = read_response(&mut s, &mut buf, false);
        assert_eq!(r.text(), "real:/next-late", "{m} {mode} late");
        let r = get(&p, "/smuggle-late");
        assert_eq!(
            (r.text(), r.cache()),
            ("hello".into(), Some("MISS")),
            "{m} {mode}: the response before the unasked bytes stayed cached"
        );
        for path in ["/next-big", "/next-small", "/next-head", "/next-late"] {
            assert_eq!(get(&p, path).text(), format!("real:{path}"), "{m} {mode}");
        }
        p.shutdown().unwrap();
        for path in [
            "/smuggle-big",
            "/smuggle-small",
            "/head-then-body",
            "/smuggle-late",
        ] {
            o.assert_last_on_its_connection(path, &format!("{m} {mode}"));
        }
    }

    /// Each of `paths` is answered 502 on a client connection that carries on with the true
    /// answer to the next request, and no origin connection serves another request after it.
    fn refused_with_502(m: &str, mode: &str, paths: &[&str]) {
        let o = Origin::start();
        let Some(p) = proxy(o.addr, m, mode) else {
            return;
        };
        let mut s = connect(&p);
        let mut buf = Vec::new();
        for path in paths {
            s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
                .unwrap();
            let r = read_response(&mut s, &mut buf, false);
            assert_eq!(r.status, 502, "{m} {mode} {path}");
            s.write_all(format!("GET /after{path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
                .unwrap();
            let r = read_response(&mut s, &mut buf, false);
            assert_eq!(r.text(), format!("real:/after{path}"), "{m} {mode} {path}");
        }
        p.shutdown().unwrap();
        for path in paths {
            o.assert_last_on_its_connection(path, &format!("{m} {mode}"));
        }
    }

    /// HIGH 1: framing the proxy cannot be sure of (Transfer-Encoding with Content-Length,
    /// Content-Length twice, conflicting or invalid) is refused with 502 before anything is
    /// sent, and its connection is closed.
    pub fn ambiguous_framing(m: &str, mode: &str) {
        refused_with_502(
            m,
            mode,
            &[
                "/te-and-cl",
                "/cl-and-te",
                "/cl-twice",
                "/cl-conflict",
                "/cl-invalid",
            ],
        );
    }

    /// MEDIUM 5: status codes outside 100..=999 are 502, and the connection is closed.
    pub fn status_out_of_range(m: &str, mode: &str) {
        refused_with_502(m, mode, &["/status-0", "/status-99"]);
    }

    /// MEDIUM 4: a Connection field naming a framing field keeps the framing (as nginx and
    /// HAProxy do), drops what else it names, and the response is neither cached nor followed
    /// by another on its connection. A client's `Connection: Host` drops no Host.
    pub fn connection_names_framing_fields(m: &str, mode: &str) {
        let o = Origin::start();
        let Some(p) = proxy(o.addr, m, mode) else {
            return;
        };
        for _ in 0..2 {
            let r = get(&p, "/connection-cl");
            assert_eq!(
                (r.status, r.header("content-length"), r.text()),
                (200, Some("5"), "hello".into()),
                "{m} {mode}"
            );
            assert_eq!(r.header("x-drop"), None, "named by Connection: dropped");
            assert_eq!(
                r.cache(),
                Some("MISS"),
                "{m} {mode}: a suspect response cached"
            );
        }
        let r = get(&p, "/connection-te");
        assert_eq!(
            (r.status, r.header("transfer-encoding"), r.text()),
            (200, Some("chunked"), "5\r\nhello\r\n0\r\n\r\n".into()),
            "{m} {mode}"
        );
        let r = request(
            &p,
            "GET /host-conn HTTP/1.1\r\nHost: good.example\r\nConnection: Host\r\n\r\n",
        );
        assert_eq!(r.text(), "host:good.example", "{m} {mode}");
        p.shutdown().unwrap();
        for path in ["/connection-cl", "/connection-te"] {
            o.assert_last_on_its_connection(path, &format!("{m} {mode}"));
        }
    }

    /// HIGH 2: the cache key names the host. An answer fetched for one host is never served
    /// to a client asking another (by Host or by absolute-form target); a target that names
    /// another host than Host is 400, as is a second Host. `Via` goes to the origin.
    pub fn cache_key_has_the_host(m: &str, mode: &str) {
        let o = Origin::start();
        let Some(p) = proxy(o.addr, m, mode) else {
            return;
        };
        let ask = |host: &str, target: &str| {
            request(
                &p,
                &format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n"),
            )
        };
        let r = ask("evil.example", "/host-a");
        assert_eq!(
            (r.text(), r.cache()),
            ("host:evil.example".into(), Some("MISS"))
        );
        let r = ask("good.example", "/host-a");
        assert_eq!(
            (r.text(), r.cache()),
            ("host:good.example".into(), Some("MISS")),
            "{m} {mode}: one host's answer served to another"
        );
        let r = ask("GOOD.example:80", "/host-a");
        assert_eq!(
            (r.text(), r.cache()),
            ("host:good.example".into(), Some("HIT")),
            "the same host, spelt otherwise"
        );
        // Absolute-form: its authority is the host.
        let r = ask("evil.example", "http://evil.example/host-b");
        assert_eq!((r.status, r.cache()), (200, Some("MISS")));
        let r = ask("good.example", "/host-b");
        assert_eq!(
            (r.text(), r.cache()),
            ("host:good.example".into(), Some("MISS")),
            "{m} {mode}: absolute-form answer served to another host"
        );
        let r = ask("good.example", "http://evil.example/host-c");
        assert_eq!(r.status, 400, "absolute-form disagreeing with Host");
        let r = request(
            &p,
            "GET /host-d HTTP/1.1\r\nHost: good.example\r\nHost: evil.example\r\n\r\n",
        );
        assert_eq!(r.status, 400, "two Hosts");
        assert!(o.heads_for("/host-c").is_empty() && o.heads_for("/host-d").is_empty());
        // Via says who forwarded.
        let r = ask("good.example", "/host-e");
        assert_eq!(r.text(), "host:good.example", "{m} {mode}");
        let heads = o.heads_for("/host-e");
        assert_eq!(field(&heads[0], "via"), Some("1.1 evlab"), "{heads:?}");
        p.shutdown().unwrap();

        // --origin-host: every request's Host toward the origin; the cache still tells the
        // clients' hosts apart.
        let Some(p) = proxy_with(o.addr, m, mode, |c| {
            c.origin_host = Some("origin.internal".into())
        }) else {
            return;
        };
        let ask =
            |host: &str| request(&p, &format!("GET /host-f HTTP/1.1\r\nHost: {host}\r\n\r\n"));
        let r = ask("a.example");
        assert_eq!(
            (r.text(), r.cache()),
            ("host:origin.internal".into(), Some("MISS"))
        );
        assert_eq!(ask("b.example").cache(), Some("MISS"));
        assert_eq!(ask("a.example").cache(), Some("HIT"));
        p.shutdown().unwrap();
    }

    /// HIGH 3: freshness fields with values near or past i64::MAX, huge Age, Expires far in
    /// the future: the proxy neither panics nor stops answering, and caps the freshness.
    pub fn extreme_freshness(m: &str, mode: &str) {
        let o = Origin::start();
        let Some(p) = proxy(o.addr, m, mode) else {
            return;
        };
        for path in [
            "/max-age-i64",
            "/max-age-u64",
            "/s-maxage-huge",
            "/age-huge",
            "/expires-far",
        ] {
            let r = get(&p, path);
            assert_eq!(
                (r.status, r.text()),
                (200, "fresh".into()),
                "{m} {mode} {path}"
            );
            // The proxy is still there, and answers the next request.
            let next = format!("/after{path}");
            assert_eq!(
                get(&p, &next).text(),
                format!("real:{next}"),
                "{m} {mode} {path}"
            );
            // Fresh for (at most) 2^31 s, except with an Age as old as that.
            let want = if path == "/age-huge" { "MISS" } else { "HIT" };
            assert_eq!(get(&p, path).cache(), Some(want), "{m} {mode} {path}");
        }
        p.shutdown().unwrap();
    }

    /// MEDIUM 5: Expires in the past or invalid is not fresh: never answered from the cache.
    pub fn stale_expires(m: &str, mode: &str) {
        let o = Origin::start();
        let Some(p) = proxy(o.addr, m, mode) else {
            return;
        };
        for path in ["/expires-past", "/expires-invalid", "/expires-past-date"] {
            for _ in 0..2 {
                let r = get(&p, path);
                assert_eq!(
                    (r.text(), r.cache()),
                    ("stale".into(), Some("MISS")),
                    "{m} {mode} {path}: a stale response reused"
                );
            }
        }
        p.shutdown().unwrap();
    }

    /// MEDIUM 5: a chunked body for an HTTP/1.0 client arrives de-chunked, delimited by the
    /// close; an HTTP/1.1 client gets the chunks.
    pub fn chunked_to_http10(m: &str, mode: &str) {
        let o = Origin::start();
        let Some(p) = proxy(o.addr, m, mode) else {
            return;
        };
        let mut s = connect(&p);
        s.write_all(b"GET /chunked HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        let r = read_response(&mut s, &mut Vec::new(), false);
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), "hello, world", "{m} {mode}: {:?}", r.head);
        assert_eq!(
            (r.header("transfer-encoding"), r.header("content-length")),
            (None, None)
        );
        assert_eq!(r.header("connection"), Some("close"));
        assert!(closed(&mut s));
        let r = request(&p, "GET /chunked HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(
            r.text(),
            "5;x=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"
        );
        p.shutdown().unwrap();
    }
}

/// Every case in every forwarding mode on every mechanism of the registry, so that a new
/// mechanism inherits the suite.
macro_rules! hostile_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {$(
        #[allow(non_snake_case)]
        mod $v {
            modes!($name;
                smuggled_responses,
                ambiguous_framing,
                status_out_of_range,
                connection_names_framing_fields,
                cache_key_has_the_host,
                extreme_freshness,
                stale_expires,
                chunked_to_http10);
        }
    )*};
}

evlab_poll::for_each_mechanism!(hostile_tests);
