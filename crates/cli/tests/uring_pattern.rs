//! `bench/uring_pattern.c` builds and measures what it says: built with the system's cc and
//! liburing, run for a few bursts with its own peers, then against a real `evlab serve` as the
//! HTTP origin (the request leg forwarded too, on one client connection or a new one every few
//! bursts); an origin without the 1 MiB file is refused. Its proxy form, each pattern as an
//! HTTP proxy for an outside client, answers keep-alive requests with the origin's bytes, takes
//! the next connection when a client goes away mid-response, and reports its CPU on SIGTERM.

mod common;

use std::io::{BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::http::{connect, get};

use evlab_poll::Mechanism;

/// One pattern's line: (bursts, calls per burst).
fn pattern_line(out: &str, name: &str) -> (u32, f64) {
    let line = out
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no {name} line in {out:?}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let bursts = words
        .iter()
        .position(|w| *w == "bursts),")
        .and_then(|i| words[i - 1].trim_start_matches('(').parse().ok())
        .unwrap_or_else(|| panic!("no burst count in {line:?}"));
    let calls = words
        .iter()
        .position(|w| *w == "calls")
        .and_then(|i| words[i - 1].parse().ok())
        .unwrap_or_else(|| panic!("no calls per burst in {line:?}"));
    (bursts, calls)
}

fn ratio(out: &str) -> f64 {
    out.lines()
        .find_map(|l| l.strip_prefix("uring / epoll-et: "))
        .and_then(|r| r.trim().parse().ok())
        .unwrap_or_else(|| panic!("no ratio in {out:?}"))
}

/// Both patterns ran, `bursts` bursts between them, each moving 1 MiB in pieces of at most
/// 64 KiB (so at least 16 transfer calls or ring enters per burst).
fn assert_measured(out: &Output, bursts: u32) {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "uring_pattern failed: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (e, ecalls) = pattern_line(&text, "epoll-et");
    let (u, ucalls) = pattern_line(&text, "uring");
    assert_eq!(e + u, bursts, "{text}");
    assert!(e > 0 && u > 0, "both patterns ran: {text}");
    assert!(ecalls >= 16.0 && ucalls >= 16.0, "{text}");
    let r = ratio(&text);
    assert!(r.is_finite() && r > 0.0, "{text}");
}

#[test]
fn builds_and_measures_both_patterns_with_its_own_peers_and_against_evlab_serve() {
    let cc = Command::new("cc").arg("--version").output().is_ok();
    let liburing = Path::new("/usr/include/liburing.h").exists();
    if !evlab_poll::testing::require(
        "liburing-dev",
        cc && liburing,
        "bench/uring_pattern.c needs cc and liburing's header (scripts/setup.sh installs them)",
    ) || !evlab_poll::testing::mechanism(Mechanism::Uring)
    {
        return;
    }
    let dir = common::scratch("evlab-uring-pattern");
    let exe = dir.join("uring_pattern");
    let src = common::workspace().join("bench/uring_pattern.c");
    let built = Command::new("cc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(["-luring", "-lpthread"])
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&built.stderr)
    );

    let run = |args: &[&str]| Command::new(&exe).args(args).output().unwrap();
    assert_measured(&run(&["12", "500"]), 12);

    // An origin without /o1048576 answers 404, and the program says what it needs.
    let mut bare = common::serve("uring-pattern-bare", &["--header-timeout", "0"], |_| {});
    let refused = run(&["4", "500", "1", "0", &bare.addr.port().to_string()]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("is not a 200 of 1048576 bytes"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    common::stop_serve(&mut bare);
    drop(bare);

    let mut origin = common::serve("uring-pattern", &["--header-timeout", "0"], |_| {});
    std::fs::write(origin.dir.join("o1048576"), vec![b'x'; 1 << 20]).unwrap();
    let port = origin.addr.port().to_string();
    assert_measured(&run(&["12", "500", "1", "1", &port]), 12);
    // A new client connection every 5 bursts: both patterns close and accept in turn.
    assert_measured(&run(&["12", "500", "1", "1", &port, "5"]), 12);
    let bad = run(&["4", "500", "1", "0", "0", "5"]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "CONN_CALLS without an origin port"
    );
    for mode in ["epoll-et", "uring"] {
        proxy_form(&exe, mode, &port);
    }
    let usage = run(&["proxy", "kqueue", "0", &port, "1048576"]);
    assert_eq!(usage.status.code(), Some(2), "an unknown pattern");
    common::stop_serve(&mut origin);
    drop(origin);
    dir.finish();
}

/// The proxy form of `mode` in front of the origin on `port` (which holds a 1 MiB /o1048576).
fn proxy_form(exe: &Path, mode: &str, port: &str) {
    let mut px = common::spawn(
        Command::new(exe)
            .args(["proxy", mode, "0", port, "1048576"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let mut err = BufReader::new(px.stderr.take().unwrap());
    let addr = common::listening_addr(&mut err)
        .unwrap_or_else(|line| panic!("{mode}: no address in {line:?}"));
    let mut buf = Vec::new();
    // Two requests on one keep-alive connection.
    let mut c = connect(addr);
    for _ in 0..2 {
        let r = get(&mut c, &mut buf, "/o1048576");
        assert_eq!(r.status, 200, "{mode}");
        assert!(
            r.body.len() == 1 << 20 && r.body.iter().all(|&b| b == b'x'),
            "{mode}"
        );
    }
    drop(c);
    // A client that goes away after a few bytes of its response: the next one is answered.
    let mut c = connect(addr);
    c.write_all(b"GET /o1048576 HTTP/1.1\r\nHost: test\r\n\r\n")
        .unwrap();
    let mut some = [0u8; 1000];
    c.read_exact(&mut some).unwrap();
    drop(c);
    let mut c = connect(addr);
    let r = get(&mut c, &mut buf, "/o1048576");
    assert_eq!((r.status, r.body.len()), (200, 1 << 20), "{mode}");
    drop(c);
    let st = common::sigterm_and_wait(&mut px);
    assert!(st.success(), "{mode}: exited with {st:?}");
    let mut report = String::new();
    err.read_to_string(&mut report).unwrap();
    let responses: u32 = report
        .strip_prefix(&format!("{mode}: "))
        .and_then(|r| r.split(" (").nth(1))
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{mode}: no count of responses in {report:?}"));
    // Three whole responses and the one drained; the last may still be finishing its turn.
    assert!((3..=4).contains(&responses), "{mode}: {report}");
    common::assert_gone(px.id());
}
