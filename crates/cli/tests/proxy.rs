//! `evlab proxy` end to end: the real binary as proxy, a real `evlab serve` as origin (or a
//! scripted origin in this process for the failure cases), real sockets on port 0. Every case
//! runs for every mechanism of the registry (`proxy_tests!`), and the body cases for every
//! forwarding mode. Each process a test starts runs in its own process group, is stopped with
//! SIGTERM to the group, and is checked gone.

use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use evlab_poll::{Mechanism, Support};
use evlab_proxy::{ByteCounts, ProxyStats};

mod common;
use common::http::{connect, find, get, read_response, read_some, try_read, Response};

const BIN: &str = env!("CARGO_BIN_EXE_evlab");

/// Body sizes served: the edges of a page, of the splice threshold (4,096) and of the first
/// read in the splice modes, a pipe's default capacity, and large bodies up to 64 MiB.
const SIZES: [usize; 11] = [
    0,
    1,
    100,
    4095,
    4096,
    4097,
    65536,
    70_000,
    (1 << 20) + 7,
    16 << 20,
    64 << 20,
];

// ---- fixtures ----

fn content(len: usize) -> Vec<u8> {
    let seed = len as u32;
    (0..len as u32)
        .map(|i| {
            (i.wrapping_mul(2_654_435_761) ^ seed)
                .rotate_left(i % 13)
                .to_le_bytes()[1]
        })
        .collect()
}

/// [`content`] of `len`, computed once per length in a test process: checking many bodies of
/// 16 MiB would otherwise spend most of its time building the same expected bytes (debug build).
fn expected(len: usize) -> Arc<Vec<u8>> {
    static MADE: Mutex<Vec<(usize, Arc<Vec<u8>>)>> = Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, c)) = made.iter().find(|(l, _)| *l == len) {
        return c.clone();
    }
    let c = Arc::new(content(len));
    made.push((len, c.clone()));
    c
}

/// A name no other writer uses at once: the tests of one process run in threads, and the
/// same file may be written by two of them (the process id alone raced: a rename found its
/// temporary file already renamed by another thread).
fn unique() -> String {
    let t = format!("{:?}", std::thread::current().id());
    let t: String = t.chars().filter(char::is_ascii_digit).collect();
    format!("{}-{t}", std::process::id())
}

/// Writes `bytes` to `path` under a temporary name and renames it, last modified a day ago: the
/// proxy's cache gives such a file, which `evlab serve` sends with `Last-Modified` and no
/// freshness of its own, a tenth of that (RFC 9111's heuristic), as it would a real site's.
fn write_old(dir: &Path, name: &str, bytes: &[u8]) {
    let tmp = dir.join(format!(".{name}.{}", unique()));
    std::fs::write(&tmp, bytes).unwrap();
    let day_ago = std::time::SystemTime::now() - Duration::from_secs(86_400);
    std::fs::File::options()
        .write(true)
        .open(&tmp)
        .and_then(|f| f.set_modified(day_ago))
        .unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// The origin's document root, made once and kept in cargo's test scratch directory (each
/// file written under a temporary name and renamed, so concurrent test processes agree).
fn docroot() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("proxy-docroot-v2");
    std::fs::create_dir_all(&dir).unwrap();
    for len in SIZES {
        let path = dir.join(format!("b{len}"));
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == len as u64) {
            continue;
        }
        write_old(&dir, &format!("b{len}"), &content(len));
    }
    if !dir.join("hello.txt").exists() {
        write_old(&dir, "hello.txt", b"hello, world\n");
    }
    dir
}

/// A child process in its own process group.
struct Proc {
    child: Option<Child>,
    addr: SocketAddr,
    what: String,
}

impl Proc {
    fn spawn(what: &str, args: &[String]) -> Proc {
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn evlab");
        let addr = common::listening_addr(&mut BufReader::new(child.stdout.take().unwrap()));
        let Ok(addr) = addr else {
            let line = addr.unwrap_err();
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: first line {line:?}, stderr {err}");
        };
        Proc {
            addr,
            child: Some(child),
            what: what.to_string(),
        }
    }

    /// SIGTERM to the group, waits for a clean exit, and checks that no process is left.
    /// Returns what the process wrote on stderr.
    fn stop(mut self) -> String {
        let mut child = self.child.take().unwrap();
        let pgid = child.id();
        let _ = evlab_sys::kill_process_group(pgid, libc::SIGTERM);
        let t0 = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if t0.elapsed() > Duration::from_secs(15) {
                let _ = evlab_sys::kill_process_group(pgid, libc::SIGKILL);
                let _ = child.wait();
                panic!("{}: did not exit within 15 s of SIGTERM", self.what);
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut err = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut err);
        assert!(status.success(), "{}: exit {status}: {err}", self.what);
        assert_gone(pgid, &self.what);
        err
    }
}

fn assert_gone(pgid: u32, what: &str) {
    let e = evlab_sys::kill_process_group(pgid, 0).expect_err("the group is gone");
    assert_eq!(e.raw_os_error(), Some(libc::ESRCH), "{what}: {e}");
}

impl Drop for Proc {
    fn drop(&mut self) {
        // A test that failed before `stop`: leave nothing behind.
        if let Some(mut c) = self.child.take() {
            let _ = evlab_sys::kill_process_group(c.id(), libc::SIGKILL);
            let _ = c.wait();
        }
    }
}

fn origin() -> Proc {
    let root = docroot();
    Proc::spawn(
        "evlab serve",
        &[
            "serve".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--root".into(),
            root.display().to_string(),
        ],
    )
}

/// Whether the proxy can run `m` here; prints why not.
fn runs(m: &str) -> bool {
    evlab_poll::testing::mechanism(Mechanism::from_name(m).unwrap())
}

fn proxy(origin: SocketAddr, m: &str, mode: &str, extra: &[&str]) -> Proc {
    let mut args: Vec<String> = [
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--origin",
        &origin.to_string(),
        "--mechanism",
        m,
        "--forward",
        mode,
        "--stats",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    Proc::spawn(&format!("evlab proxy {m} {mode}"), &args)
}

fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 16];
    match read_some(s, &mut b) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

fn stats(addr: SocketAddr) -> ProxyStats {
    let mut s = connect(addr);
    let mut buf = Vec::new();
    let r = get(&mut s, &mut buf, "/.evlab/stats");
    assert_eq!(r.status, 200);
    serde_json::from_slice(&r.body).expect("ProxyStats")
}

fn check_body(r: &Response, len: usize, what: &str) {
    assert_eq!(r.status, 200, "{what}");
    assert_eq!(
        r.header("content-length"),
        Some(len.to_string().as_str()),
        "{what}"
    );
    assert_eq!(r.body.len(), len, "{what}");
    let want = expected(len);
    // Compared whole first (memcmp, fast in a debug build too); the byte-wise search for
    // where they differ runs only on a mismatch.
    if r.body != *want {
        let at = r.body.iter().zip(want.iter()).position(|(a, b)| a != b);
        let at = at.expect("equal lengths differ somewhere");
        panic!(
            "{what}: the body differs from byte {at} on (of {len}): {:?} where {:?}",
            String::from_utf8_lossy(&r.body[at..(at + 32).min(len)]),
            String::from_utf8_lossy(&want[at..(at + 32).min(len)])
        );
    }
}

// ---- the cases ----

mod cases {
    use super::*;

    /// Every size, byte for byte, twice on one keep-alive connection: the second time from the
    /// cache where the mode keeps a copy (copy, splice-keep, and bodies too small to splice).
    /// The body bytes counted by way of travel add up to what was served.
    pub fn bodies(m: &str, mode: &str) {
        if !runs(m) {
            return;
        }
        let o = origin();
        let p = proxy(o.addr, m, mode, &[]);
        let mut s = connect(p.addr);
        let mut buf = Vec::new();
        let mut served = 0u64;
        for round in 0..2 {
            for len in SIZES {
                if round == 1 && len > 16 << 20 {
                    continue;
                }
                let what = format!("{m} {mode} round {round} b{len}");
                let r = get(&mut s, &mut buf, &format!("/b{len}"));
                check_body(&r, len, &what);
                served += len as u64;
                let spliced = mode != "copy" && len > HEAD_READ;
                // splice and splice-release do not cache what they splice.
                let keeps = !matches!(mode, "splice" | "splice-release");
                let cached_before = round == 1 && (keeps || !spliced) && len <= 16 << 20;
                let want = if cached_before { "HIT" } else { "MISS" };
                assert_eq!(r.cache(), Some(want), "{what}");
            }
        }
        let st = stats(p.addr);
        let b = &st.bytes;
        assert_eq!(b.copy + b.splice + b.hit, served, "{st:?}");
        if mode == "copy" {
            assert_eq!((b.splice, b.tee, st.pipes.created), (0, 0, 0), "{st:?}");
        } else {
            assert!(b.splice > served / 2, "most bytes spliced: {st:?}");
            assert_eq!(st.pipes.closed_with_data, 0, "{st:?}");
        }
        if mode == "splice-release" {
            // Every spliced body went through a pipe grown for it.
            assert!(st.transfers.spliced_release > 0, "{st:?}");
            assert_eq!(st.transfers.spliced, 0, "{st:?}");
        }
        if mode == "splice-keep" {
            assert!(b.tee > 0 && b.tee <= b.splice, "{st:?}");
            assert!(st.transfers.spliced_keep > 0, "{st:?}");
        } else {
            assert_eq!(b.tee, 0, "{st:?}");
        }
        assert_eq!(st.origin.connects, 1, "one origin connection, kept: {st:?}");
        assert_eq!(st.transfers.no_pipe, 0, "{st:?}");
        drop(s);
        p.stop();
        o.stop();
    }

    /// Bytes a splice-mode proxy reads with the head (bodies longer than this, less the head,
    /// are spliced when at least --splice-min remain).
    const HEAD_READ: usize = 8192;

    /// Pipelined requests answered in order: GET, HEAD (no body), a conditional GET answered 304
    /// by the origin, a 404, then the same through the cache (HEAD and 304 from the cache);
    /// 100 pipelined requests with the last asking to close.
    pub fn pipelined_head_304(m: &str, mode: &str) {
        if !runs(m) {
            return;
        }
        let o = origin();
        let p = proxy(o.addr, m, mode, &[]);
        let future = "Thu, 01 Jan 2099 00:00:00 GMT";
        let mut s = connect(p.addr);
        let mut buf = Vec::new();
        let batch = format!(
            "GET /b100 HTTP/1.1\r\nHost: t\r\n\r\n\
             HEAD /b1048583 HTTP/1.1\r\nHost: t\r\n\r\n\
             GET /b4097 HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: {future}\r\n\r\n\
             GET /nope HTTP/1.1\r\nHost: t\r\n\r\n\
             GET /b70000 HTTP/1.1\r\nHost: t\r\n\r\n\
             GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n"
        );
        s.write_all(batch.as_bytes()).unwrap();
        check_body(&read_response(&mut s, &mut buf, false), 100, "GET b100");
        let h = read_response(&mut s, &mut buf, true);
        assert_eq!(
            (h.status, h.header("content-length")),
            (200, Some("1048583"))
        );
        let nm = read_response(&mut s, &mut buf, false);
        assert_eq!((nm.status, nm.body.len()), (304, 0));
        assert_eq!(read_response(&mut s, &mut buf, false).status, 404);
        check_body(
            &read_response(&mut s, &mut buf, false),
            70_000,
            "GET b70000",
        );
        let hello = read_response(&mut s, &mut buf, false);
        assert_eq!(hello.body, b"hello, world\n");
        // Through the cache now (b100 and hello.txt were copied, so every mode stored them).
        let batch = format!(
            "HEAD /b100 HTTP/1.1\r\nHost: t\r\n\r\n\
             GET /b100 HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: {future}\r\n\r\n\
             GET /b100 HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: Thu, 01 Jan 1970 00:00:01 GMT\r\n\r\n\
             GET /hello.txt HTTP/1.0\r\n\r\n"
        );
        s.write_all(batch.as_bytes()).unwrap();
        let h = read_response(&mut s, &mut buf, true);
        assert_eq!(
            (h.status, h.header("content-length"), h.cache()),
            (200, Some("100"), Some("HIT"))
        );
        let nm = read_response(&mut s, &mut buf, false);
        assert_eq!((nm.status, nm.cache()), (304, Some("HIT")));
        let full = read_response(&mut s, &mut buf, false);
        check_body(&full, 100, "GET b100 modified since 1970");
        assert_eq!(full.cache(), Some("HIT"));
        let old = read_response(&mut s, &mut buf, false);
        assert_eq!(
            (old.status, old.body.as_slice()),
            (200, &b"hello, world\n"[..])
        );
        assert_eq!(
            old.header("connection"),
            Some("close"),
            "HTTP/1.0 without keep-alive"
        );
        assert!(closed(&mut s));
        assert!(buf.is_empty());

        let mut s = connect(p.addr);
        let mut req = Vec::new();
        for i in 0..99 {
            let path = if i % 3 == 0 { "/b4097" } else { "/b100" };
            req.extend_from_slice(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        }
        req.extend_from_slice(b"GET /b65536 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        s.write_all(&req).unwrap();
        for i in 0..99 {
            let len = if i % 3 == 0 { 4097 } else { 100 };
            check_body(
                &read_response(&mut s, &mut buf, false),
                len,
                &format!("pipelined {i}"),
            );
        }
        let last = read_response(&mut s, &mut buf, false);
        check_body(&last, 65536, "last pipelined");
        assert_eq!(last.header("connection"), Some("close"));
        assert!(closed(&mut s));
        p.stop();
        o.stop();
    }

    /// A client that sends its requests and shuts down its side still gets every answer, the
    /// large one spliced or copied in full, then the proxy closes.
    pub fn half_close(m: &str, mode: &str) {
        if !runs(m) {
            return;
        }
        let o = origin();
        let p = proxy(o.addr, m, mode, &[]);
        for round in 0..2 {
            let mut s = connect(p.addr);
            s.write_all(
                b"GET /b1048583 HTTP/1.1\r\nHost: t\r\n\r\nGET /b100 HTTP/1.1\r\nHost: t\r\n\r\n",
            )
            .unwrap();
            s.shutdown(Shutdown::Write).unwrap();
            let mut buf = Vec::new();
            check_body(
                &read_response(&mut s, &mut buf, false),
                (1 << 20) + 7,
                "big",
            );
            check_body(&read_response(&mut s, &mut buf, false), 100, "small");
            assert!(
                closed(&mut s),
                "round {round}: closed after the last answer"
            );
        }
        // A client that goes away mid-body does not take the proxy with it.
        let mut s = connect(p.addr);
        s.write_all(b"GET /b16777216 HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut b = [0u8; 4096];
        s.read_exact(&mut b).unwrap();
        drop(s);
        let mut s = connect(p.addr);
        let mut buf = Vec::new();
        check_body(&get(&mut s, &mut buf, "/b70000"), 70_000, "after an abort");
        let st = stats(p.addr);
        assert_eq!(
            st.pipes.closed_with_data + st.pipes.open,
            st.pipes.created,
            "{st:?}"
        );
        p.stop();
        o.stop();
    }

    /// The origin misbehaves (a scripted origin in this process): it closes early inside a
    /// body, resets, answers garbage, closes an idle kept connection, answers chunked or
    /// until-close. Each answer through the proxy is the right one; the proxy stays up.
    pub fn origin_failures(m: &str, mode: &str) {
        if !runs(m) {
            return;
        }
        let fake = FakeOrigin::start();
        let p = proxy(fake.addr, m, mode, &["--splice-min", "1024"]);
        let mut buf = Vec::new();

        // Cut short in the body: what arrived, then the connection closes.
        for (path, total) in [("/early-small", 100_000usize), ("/early-big", 1 << 20)] {
            let mut s = connect(p.addr);
            s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
                .unwrap();
            buf.clear();
            match try_read(&mut s, &mut buf, false) {
                Err(got) => {
                    assert!(got < total, "{path}: {got}");
                    assert!(
                        buf == content(total)[..got],
                        "{path}: the bytes that came differ"
                    );
                }
                Ok(r) => panic!("{path}: a short body must end in a close: {r:?}"),
            }
        }
        // Reset, or garbage, before any head: 502, and the connection carries on.
        buf.clear();
        let mut s = connect(p.addr);
        for path in ["/reset", "/garbage", "/reset-after-part"] {
            let r = get(&mut s, &mut buf, path);
            assert_eq!(r.status, 502, "{path}");
        }
        // Chunked and until-close bodies are copied with their framing.
        let r = get(&mut s, &mut buf, "/chunked");
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\n\r\n");
        let r = get(&mut s, &mut buf, "/ok");
        assert_eq!(r.body, b"fine\n");
        s.write_all(b"HEAD /head-with-body HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let h = read_response(&mut s, &mut buf, true);
        assert_eq!((h.status, h.header("content-length")), (200, Some("5")));
        let r = get(&mut s, &mut buf, "/ok");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"fine\n"[..]));
        assert!(buf.is_empty(), "nothing but the answers reached the client");
        let r = get(&mut s, &mut buf, "/until-close");
        assert_eq!(r.header("connection"), Some("close"));
        assert_eq!(r.body, content(50_000));
        assert!(closed(&mut s));
        // An idle kept connection that the origin closed: the request goes again on a fresh
        // one, and the client never sees the failure.
        let mut s = connect(p.addr);
        for i in 0..4 {
            let r = get(&mut s, &mut buf, &format!("/ok-then-close?{i}"));
            assert_eq!((r.status, r.body.as_slice()), (200, &b"fine\n"[..]), "{i}");
        }
        let st = stats(p.addr);
        assert_eq!(st.origin.retries, 3, "{st:?}");
        assert_eq!(st.origin.bad_gateway, 3, "{st:?}");
        assert_eq!(st.origin.truncated, 2, "{st:?}");
        // The origin gone: the kept connection fails, the fresh one is refused: 502.
        drop(fake);
        let r = get(&mut s, &mut buf, "/ok-after-origin-gone");
        assert_eq!(r.status, 502);
        let st = stats(p.addr);
        assert_eq!((st.origin.retries, st.origin.bad_gateway), (4, 4), "{st:?}");
        p.stop();
    }

    /// With one pipe per worker, concurrent large bodies cannot all be spliced: the others are
    /// copied, every byte still arrives, and no pipe holding bytes is ever reused.
    pub fn pipe_exhaustion(m: &str, mode: &str) {
        if !runs(m) {
            return;
        }
        let o = origin();
        // splice-keep wants two pipes for a cacheable body, so with one it always copies;
        // without a cache it splices like splice. All three objects may be kept at once.
        let p = proxy(o.addr, m, mode, &["--pipes", "1", "--keep-bytes", "64M"]);
        let len = 16 << 20;
        let mut conns: Vec<TcpStream> = (0..3).map(|_| connect(p.addr)).collect();
        for s in conns.iter_mut() {
            s.write_all(b"GET /b16777216 HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap();
        }
        // Nobody reads until everyone has asked: 16 MiB cannot fit in the socket buffers, so the
        // transfers overlap in the proxy.
        let readers: Vec<_> = conns
            .into_iter()
            .map(|mut s| {
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let r = read_response(&mut s, &mut buf, false);
                    check_body(&r, len, "concurrent");
                })
            })
            .collect();
        for r in readers {
            r.join().unwrap();
        }
        let st = stats(p.addr);
        assert!(st.pipes.max_open <= 1, "{st:?}");
        assert!(
            st.transfers.no_pipe >= 1,
            "someone copied for want of a pipe: {st:?}"
        );
        assert!(st.bytes.copy >= len as u64, "{st:?}");
        if mode == "splice" {
            assert!(st.transfers.spliced >= 1, "{st:?}");
        } else if mode == "splice-release" {
            assert!(st.transfers.spliced_release >= 1, "{st:?}");
        } else {
            assert_eq!(st.transfers.copied, 3, "{st:?}");
        }
        p.stop();
        o.stop();
    }

    /// One request and its response, framed by Content-Length: (status, X-Cache, the bytes
    /// the client received for it, head included).
    fn counted(s: &mut TcpStream, req: &str) -> (u16, Option<String>, u64) {
        s.write_all(req.as_bytes()).unwrap();
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        let head_end = loop {
            if let Some(p) = find(&buf, b"\r\n\r\n") {
                break p + 4;
            }
            let n = read_some(s, &mut chunk).unwrap();
            assert!(n > 0, "EOF inside a head");
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
        let field = |name: &str| {
            head.split("\r\n").find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        let len: usize = field("content-length")
            .expect("a Content-Length")
            .parse()
            .unwrap();
        while buf.len() < head_end + len {
            let n = read_some(s, &mut chunk).unwrap();
            assert!(n > 0, "EOF inside a body");
            buf.extend_from_slice(&chunk[..n]);
        }
        assert_eq!(buf.len(), head_end + len, "nothing follows the response");
        (status, field("x-cache"), buf.len() as u64)
    }

    /// `--access-log FILE`: one line per request, in order, each with the client's address,
    /// method and target, status, the bytes the client got, HIT/MISS/-, the forwarding mode
    /// and a time to the last byte: a miss, a hit, a spliced body, a 404, a 400, a 502 and the
    /// proxy's own stats.
    pub fn access_log(m: &str) {
        if !runs(m) {
            return;
        }
        let o = origin();
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("access-log-{m}-{}", unique()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("access.log");
        let p = proxy(
            o.addr,
            m,
            "splice",
            &["--access-log", file.to_str().unwrap()],
        );
        let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
        // (client, target, status, bytes, cache, mode) of each request, in order.
        let mut want: Vec<(String, String, u16, u64, &str, &str)> = Vec::new();
        let mut ask = |s: &mut TcpStream,
                       req: String,
                       x_cache: Option<&str>,
                       cache: &'static str,
                       mode: &'static str| {
            let (status, got_cache, bytes) = counted(s, &req);
            assert_eq!(got_cache.as_deref(), x_cache, "{req}");
            let target = req.split(' ').nth(1).unwrap().to_string();
            let me = s.local_addr().unwrap().to_string();
            want.push((me, target, status, bytes, cache, mode));
            status
        };
        let mut s = connect(p.addr);
        let hit = Some("HIT");
        let miss = Some("MISS");
        assert_eq!(ask(&mut s, get("/hello.txt"), miss, "MISS", "copy"), 200);
        assert_eq!(ask(&mut s, get("/hello.txt"), hit, "HIT", "-"), 200);
        // Spliced, or copied where this engine cannot splice (checked below).
        assert_eq!(ask(&mut s, get("/b1048583"), miss, "MISS", "splice"), 200);
        assert_eq!(ask(&mut s, get("/nope"), miss, "MISS", "copy"), 404);
        let mut bad = connect(p.addr);
        let req = "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".to_string();
        assert_eq!(ask(&mut bad, req, None, "-", "-"), 400);
        drop(bad);
        // The origin gone: looked up, missed, and answered 502 by the proxy.
        o.stop();
        let mut late = connect(p.addr);
        assert_eq!(ask(&mut late, get("/b4097"), None, "MISS", "-"), 502);
        let st = stats(p.addr);
        drop((s, late));
        p.stop();
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // The stats request is logged too, last.
        assert_eq!(lines.len(), want.len() + 1, "{text}");
        for ((addr, target, status, bytes, cache, mode), line) in want.iter().zip(&lines) {
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(f.len(), 8, "{line}");
            assert_eq!(f[0], addr, "{line}");
            assert_eq!((f[1], f[2]), ("GET", target.as_str()), "{line}");
            assert_eq!(f[3], status.to_string(), "{line}");
            assert_eq!(f[4], bytes.to_string(), "{line}: the bytes the client got");
            let mode = match *mode {
                "splice" if st.transfers.spliced == 0 => "copy",
                m => m,
            };
            assert_eq!((f[5], f[6]), (*cache, mode), "{line}");
            f[7].parse::<u64>()
                .unwrap_or_else(|e| panic!("{line}: {e}"));
        }
        let last: Vec<&str> = lines[want.len()].split(' ').collect();
        assert_eq!(
            (last[1], last[2], last[3], last[5], last[6]),
            ("GET", "/.evlab/stats", "200", "-", "-"),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// An origin scripted per path, in this process: each connection in its own thread.
struct FakeOrigin {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeOrigin {
    fn start() -> FakeOrigin {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        std::thread::spawn(move || Self::serve(s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        FakeOrigin {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn serve(mut s: TcpStream) {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let end = loop {
                if let Some(p) = find(&buf, b"\r\n\r\n") {
                    break p + 4;
                }
                match read_some(&mut s, &mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            };
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            buf.drain(..end);
            let path = head.split(' ').nth(1).unwrap_or("").to_string();
            let path = path.split('?').next().unwrap_or("").to_string();
            let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfine\n";
            let r = match path.as_str() {
                "/ok" => s.write_all(ok),
                "/ok-then-close" => {
                    // Keep-alive as far as the head says; the next request on this
                    // connection finds it closed (read, then FIN, no answer).
                    let _ = s.write_all(ok);
                    while find(&buf, b"\r\n\r\n").is_none() {
                        match read_some(&mut s, &mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    return;
                }
                "/early-small" | "/early-big" => {
                    let total = if path == "/early-small" { 100_000 } else { 1 << 20 };
                    let body = content(total);
                    let _ = s.write_all(
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {total}\r\n\r\n").as_bytes(),
                    );
                    let _ = s.write_all(&body[..total / 3]);
                    return;
                }
                "/reset" => {
                    let _ = evlab_sys::set_linger(std::os::fd::AsRawFd::as_raw_fd(&s), Some(0));
                    return;
                }
                "/reset-after-part" => {
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-");
                    std::thread::sleep(Duration::from_millis(20));
                    let _ = evlab_sys::set_linger(std::os::fd::AsRawFd::as_raw_fd(&s), Some(0));
                    return;
                }
                "/silent" => {
                    // Never answers; returns when the proxy gives up and closes.
                    while !matches!(read_some(&mut s, &mut chunk), Ok(0) | Err(_)) {}
                    return;
                }
                "/head-with-body" => {
                    // A body after a HEAD's head: not the client's, and the connection is
                    // unusable afterwards.
                    s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
                }
                "/garbage" => {
                    let _ = s.write_all(b"NOT HTTP AT ALL\r\n\r\n");
                    return;
                }
                "/chunked" => s.write_all(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\n\r\n",
                ),
                "/until-close" => {
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\n\r\n");
                    let _ = s.write_all(&content(50_000));
                    return;
                }
                _ => s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
            };
            if r.is_err() {
                return;
            }
        }
    }
}

impl Drop for FakeOrigin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

macro_rules! proxy_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {
        mod each {$(
        #[allow(non_snake_case)]
        mod $v {
            const M: &str = $name;
            #[test] fn copy_bodies() { crate::cases::bodies(M, "copy") }
            #[test] fn splice_bodies() { crate::cases::bodies(M, "splice") }
            #[test] fn splice_keep_bodies() { crate::cases::bodies(M, "splice-keep") }
            #[test] fn splice_release_bodies() { crate::cases::bodies(M, "splice-release") }
            #[test] fn copy_pipelined_head_304() { crate::cases::pipelined_head_304(M, "copy") }
            #[test] fn splice_pipelined_head_304() { crate::cases::pipelined_head_304(M, "splice") }
            #[test] fn splice_keep_pipelined_head_304() { crate::cases::pipelined_head_304(M, "splice-keep") }
            #[test] fn splice_release_pipelined_head_304() { crate::cases::pipelined_head_304(M, "splice-release") }
            #[test] fn copy_half_close() { crate::cases::half_close(M, "copy") }
            #[test] fn splice_half_close() { crate::cases::half_close(M, "splice") }
            #[test] fn splice_keep_half_close() { crate::cases::half_close(M, "splice-keep") }
            #[test] fn splice_release_half_close() { crate::cases::half_close(M, "splice-release") }
            #[test] fn copy_origin_failures() { crate::cases::origin_failures(M, "copy") }
            #[test] fn splice_origin_failures() { crate::cases::origin_failures(M, "splice") }
            #[test] fn splice_release_origin_failures() { crate::cases::origin_failures(M, "splice-release") }
            #[test] fn splice_pipe_exhaustion() { crate::cases::pipe_exhaustion(M, "splice") }
            #[test] fn splice_keep_pipe_exhaustion() { crate::cases::pipe_exhaustion(M, "splice-keep") }
            #[test] fn splice_release_pipe_exhaustion() { crate::cases::pipe_exhaustion(M, "splice-release") }
            #[test] fn access_log() { crate::cases::access_log(M) }
        }
        )*}
    };
}

evlab_poll::for_each_mechanism!(proxy_tests);

/// What the command line refuses, with a reason.
#[test]
fn refuses_bad_flags_with_reasons() {
    let run = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let e = run(&["proxy", "--origin", "127.0.0.1:1", "--forward", "zerocopy"]);
    assert!(
        e.contains("copy, splice, splice-keep, splice-release"),
        "{e}"
    );
    // The completion engine is refused only where the kernel has no io_uring for it, and
    // then with the reason.
    if let Support::No(why) = Mechanism::Uring.support() {
        let e = run(&[
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--origin",
            "127.0.0.1:1",
            "--mechanism",
            "uring",
        ]);
        assert!(e.contains("not available") && e.contains(&why), "{e}");
    }
    let e = run(&["proxy", "--origin", "no-such-host.invalid:80"]);
    assert!(e.contains("--origin"), "{e}");
    for bad in [
        "127.0.0.1",
        "127.0.0.1:1,no-port",
        "no-such-host.invalid:443",
    ] {
        let e = run(&[
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--origin",
            "127.0.0.1:1",
            "--allow-connect",
            bad,
        ]);
        assert!(e.contains("--allow-connect"), "{bad}: {e}");
    }
    // What goes into every request head as it is must be a host, nothing more.
    let e = run(&[
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--origin",
        "127.0.0.1:1",
        "--origin-host",
        "a.example\r\nX-Injected: 1",
    ]);
    assert!(
        e.contains("--origin-host") && e.contains("not a host"),
        "{e}"
    );
    // Seconds beyond what a Duration holds: a reason, not a panic.
    let timeouts = [
        "--cache-ttl",
        "--cache-heuristic-max",
        "--timeout",
        "--header-timeout",
        "--send-timeout",
        "--connect-timeout",
    ];
    for flag in timeouts {
        let e = run(&["proxy", "--origin", "127.0.0.1:1", flag, "1e300"]);
        assert!(e.contains(flag) && e.contains("too large"), "{e}");
        let e = run(&["proxy", "--origin", "127.0.0.1:1", &format!("{flag}=-1")]);
        assert!(e.contains(flag) && e.contains(">= 0"), "{e}");
    }
    let e = run(&["proxy", "--origin", "127.0.0.1:1", "--keep-bytes", "lots"]);
    assert!(e.contains("--keep-bytes"), "{e}");
}

/// `--origin` takes the origin's URL, as curl and wrk users write it: the proxy starts and
/// forwards; a URL with a path, or https, is a usage error that says why.
#[test]
fn the_origin_may_be_given_as_a_url() {
    let o = origin();
    for url in [format!("http://{}", o.addr), format!("http://{}/", o.addr)] {
        let p = Proc::spawn(
            "evlab proxy --origin URL",
            &[
                "proxy".into(),
                "--listen".into(),
                "127.0.0.1:0".into(),
                "--origin".into(),
                url.clone(),
            ],
        );
        let mut s = connect(p.addr);
        let mut buf = Vec::new();
        let r = get(&mut s, &mut buf, "/hello.txt");
        assert_eq!(
            (r.status, &r.body[..]),
            (200, &b"hello, world\n"[..]),
            "{url}"
        );
        drop(s);
        p.stop();
    }
    o.stop();
    for (url, says) in [
        ("https://127.0.0.1:8443", "not TLS"),
        ("http://127.0.0.1:8080/one", "not a URL with a path"),
    ] {
        let out = Command::new(BIN)
            .args(["proxy", "--listen", "127.0.0.1:0", "--origin", url])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {e}");
        assert!(e.contains("--origin") && e.contains(says), "{url}: {e}");
    }
}

/// nginx as a reverse proxy (`proxy_pass` with kept upstream connections) in front of the same
/// origin: every size, HEAD, 304 and 404 come out of both proxies with the same status, the
/// same Content-Length and the same body bytes. Skipped with a reason without nginx.
#[test]
fn same_bytes_as_nginx_proxy_pass() {
    let nginx_bin = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| Path::new(p).is_file());
    let Some(nginx_bin) = nginx_bin else {
        evlab_poll::testing::require(
            "nginx",
            false,
            "nginx is not installed (scripts/setup.sh installs nginx-light)",
        );
        return;
    };
    let o = origin();
    // A readiness mechanism splicing, and the completion engine in every mode.
    let mut proxies = vec![proxy(o.addr, "epoll-et", "splice", &[])];
    if runs("uring") {
        for mode in ["copy", "splice", "splice-keep"] {
            proxies.push(proxy(o.addr, "uring", mode, &[]));
        }
    }
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("nginx-proxy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let t = dir.display();
    // Workers run as nobody when the master is root: no temporary files, buffers only.
    let conf = format!(
        "worker_processes 1;\ndaemon off;\npid {t}/nginx.pid;\nerror_log {t}/error.log error;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {t}/nb; proxy_temp_path {t}/np;\n\
           fastcgi_temp_path {t}/nf; uwsgi_temp_path {t}/nu; scgi_temp_path {t}/ns;\n\
           upstream origin {{ server {origin}; keepalive 8; }}\n\
           server {{\n    listen 127.0.0.1:{port};\n    location / {{\n\
               proxy_pass http://origin;\n      proxy_http_version 1.1;\n\
               proxy_set_header Connection \"\";\n      proxy_max_temp_file_size 0;\n    }}\n  }}\n}}\n",
        origin = o.addr
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let mut nginx = Command::new(nginx_bin)
        .args(["-p", &t.to_string(), "-e", &format!("{t}/error.log"), "-c"])
        .arg(dir.join("nginx.conf"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn nginx");
    let pgid = nginx.id();
    // A failing assertion below must not leave nginx running.
    struct KillGroup(u32);
    impl Drop for KillGroup {
        fn drop(&mut self) {
            let _ = evlab_sys::kill_process_group(self.0, libc::SIGKILL);
        }
    }
    let guard = KillGroup(pgid);
    let nginx_addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let t0 = Instant::now();
    while TcpStream::connect(nginx_addr).is_err() {
        if let Some(st) = nginx.try_wait().unwrap() {
            let mut err = String::new();
            let _ = nginx.stderr.take().unwrap().read_to_string(&mut err);
            panic!("nginx exited at start: {st}: {err}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nginx did not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let fetch = |addr: SocketAddr, req: &str, head: bool| {
        let mut s = connect(addr);
        let mut buf = Vec::new();
        s.write_all(req.as_bytes()).unwrap();
        read_response(&mut s, &mut buf, head)
    };
    let mut reqs: Vec<(String, bool)> = SIZES
        .iter()
        .map(|l| (format!("GET /b{l} HTTP/1.1\r\nHost: t\r\n\r\n"), false))
        .collect();
    reqs.push(("HEAD /b1048583 HTTP/1.1\r\nHost: t\r\n\r\n".into(), true));
    reqs.push((
        "GET /b4097 HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: Thu, 01 Jan 2099 00:00:00 GMT\r\n\r\n"
            .into(),
        false,
    ));
    reqs.push(("GET /nope HTTP/1.1\r\nHost: t\r\n\r\n".into(), false));
    reqs.push(("GET /hello.txt HTTP/1.0\r\n\r\n".into(), false));
    for (req, head) in &reqs {
        let a = fetch(nginx_addr, req, *head);
        for p in &proxies {
            let b = fetch(p.addr, req, *head);
            let line = format!("{}: {}", p.what, req.lines().next().unwrap());
            assert_eq!(a.status, b.status, "{line}");
            assert_eq!(
                a.header("content-length"),
                b.header("content-length"),
                "{line}"
            );
            assert_eq!(
                a.header("last-modified"),
                b.header("last-modified"),
                "{line}"
            );
            assert!(a.body == b.body, "{line}: the bodies differ");
        }
    }
    // Stop nginx with its process group and check nothing is left.
    evlab_sys::kill_process_group(pgid, libc::SIGTERM).unwrap();
    let t0 = Instant::now();
    loop {
        if let Some(st) = nginx.try_wait().unwrap() {
            assert!(st.success(), "nginx: {st}");
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "nginx did not stop");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The master waits for its workers, but give a straggler a moment to be reaped by init.
    let t0 = Instant::now();
    while evlab_sys::kill_process_group(pgid, 0).is_ok() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "nginx processes left"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_gone(pgid, "nginx");
    std::mem::forget(guard);
    let _ = std::fs::remove_dir_all(&dir);
    for p in proxies {
        p.stop();
    }
    o.stop();
}

/// `--timeout`: an origin that never answers gets the client a 504, a client that stops in
/// the middle of a request head gets a 408, and both connections close. (The deadlines are
/// the same code for every mechanism; a readiness one and the completion engine, whose
/// waits the deadlines bound, are enough.)
#[test]
fn timeouts_answer_504_and_408() {
    for m in ["poll", "uring"] {
        if runs(m) {
            timeouts(m);
        }
    }
}

fn timeouts(m: &str) {
    let fake = FakeOrigin::start();
    let p = proxy(fake.addr, m, "copy", &["--timeout", "0.5"]);
    let mut s = connect(p.addr);
    let mut buf = Vec::new();
    let r = get(&mut s, &mut buf, "/silent");
    assert_eq!((r.status, r.header("connection")), (504, Some("close")));
    assert!(closed(&mut s));
    let mut s = connect(p.addr);
    s.write_all(b"GET /ok HTTP/1.1\r\nHost:").unwrap();
    let r = read_response(&mut s, &mut buf, false);
    assert_eq!((r.status, r.header("connection")), (408, Some("close")));
    assert!(closed(&mut s));
    let st = stats(p.addr);
    assert_eq!(
        (st.origin.gateway_timeout, st.connections.timeouts),
        (1, 2),
        "{st:?}"
    );
    p.stop();
}

/// `--access-log -`: the lines go to the standard output, after `listening on`.
#[test]
fn access_log_to_stdout() {
    let o = origin();
    let mut child = Command::new(BIN)
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--origin",
            &o.addr.to_string(),
        ])
        .args(["--access-log", "-"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn evlab proxy");
    struct KillGroup(u32);
    impl Drop for KillGroup {
        fn drop(&mut self) {
            let _ = evlab_sys::kill_process_group(self.0, libc::SIGKILL);
        }
    }
    let pgid = child.id();
    let guard = KillGroup(pgid);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let addr = common::listening_addr(&mut out).unwrap();
    let mut s = connect(addr);
    let mut buf = Vec::new();
    assert_eq!(get(&mut s, &mut buf, "/hello.txt").status, 200);
    let me = s.local_addr().unwrap();
    drop(s);
    evlab_sys::kill_process_group(pgid, libc::SIGTERM).unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    let lines: Vec<&str> = rest.lines().collect();
    assert_eq!(lines.len(), 1, "{rest}");
    let f: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(
        (f[0], f[1], f[2], f[3], f[5], f[6]),
        (
            me.to_string().as_str(),
            "GET",
            "/hello.txt",
            "200",
            "MISS",
            "copy"
        ),
        "{rest}"
    );
    let t0 = Instant::now();
    while evlab_sys::kill_process_group(pgid, 0).is_ok() {
        assert!(t0.elapsed() < Duration::from_secs(5), "processes left");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::mem::forget(guard);
    o.stop();
}

/// The resident memory of a process, in bytes (`VmRSS` of /proc/PID/status).
fn rss(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib * 1024
}

/// Slow readers of large cacheable misses (issue 21): 12 clients each ask for a different
/// 16 MiB object and read nothing after sending. The proxy keeps at most `--keep-bytes` of
/// objects being received for the cache (default 16 MiB: one of them); the others are only
/// forwarded, each through its copy buffer, so the proxy's RSS grows by a small part of what it
/// read from the origin meanwhile (which the kept copies all held before). Then every reader
/// gets its body whole and exact, and the kept one is a hit next time.
#[test]
fn slow_readers_of_large_misses_hold_bounded_memory() {
    slow_readers_of_large_misses("copy");
}

/// The same in splice-keep mode, where a kept body is teed from the pipe into memory and the
/// others are spliced through pipes (in the kernel, outside the proxy's RSS).
#[test]
fn slow_readers_of_large_misses_hold_bounded_memory_splice_keep() {
    slow_readers_of_large_misses("splice-keep");
}

fn slow_readers_of_large_misses(mode: &str) {
    if !runs("epoll-et") {
        return;
    }
    const N: usize = 12;
    const LEN: usize = 16 << 20;
    let o = origin();
    let p = proxy(o.addr, "epoll-et", mode, &[]);
    let pid = p.child.as_ref().unwrap().id();
    let before = rss(pid);
    let mut clients: Vec<TcpStream> = (0..N)
        .map(|i| {
            let mut s = connect(p.addr);
            write!(s, "GET /b{LEN}?slow={i} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            s
        })
        .collect();
    // Until the proxy has read all the stalled sockets take (its reads stop growing).
    let read_from_origin = |b: &ByteCounts| b.copy + b.splice;
    let (mut last, mut still) = (0, 0);
    let t0 = Instant::now();
    while still < 5 && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
        let read = read_from_origin(&stats(p.addr).bytes);
        still = if read == last { still + 1 } else { 0 };
        last = read;
    }
    let grown = rss(pid).saturating_sub(before);
    let st = stats(p.addr);
    let read = read_from_origin(&st.bytes);
    eprintln!(
        "{N} stalled readers ({mode}): RSS grew by {grown} bytes, {read} read from the origin"
    );
    assert_eq!(st.cache.not_kept, (N - 1) as u64, "{mode}: {:?}", st.cache);
    assert_eq!(st.cache.keeping, LEN as u64, "{mode}: {:?}", st.cache);
    assert!(
        grown < (LEN as u64) + (16 << 20),
        "{mode}: RSS grew by {grown} bytes with {N} stalled readers ({read} read from the origin)"
    );
    for (i, s) in clients.iter_mut().enumerate() {
        let r = read_response(s, &mut Vec::new(), false);
        check_body(&r, LEN, &format!("{mode}: reader {i}"));
    }
    let kept: Vec<usize> = (0..N)
        .filter(|i| {
            let mut s = connect(p.addr);
            get(&mut s, &mut Vec::new(), &format!("/b{LEN}?slow={i}")).cache() == Some("HIT")
        })
        .collect();
    assert_eq!(kept.len(), 1, "{mode}: {kept:?}");
    assert_eq!(stats(p.addr).cache.keeping, 0, "{mode}");
    p.stop();
    o.stop();
}
