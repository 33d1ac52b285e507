//! `evlab serve` as a user runs it: the real binary, real clients (curl, ab, wrk from Debian).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{serve, sigterm_and_wait, spawn, BIN};
use evlab_poll::testing::program;

fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn prints_listening_line_and_serves() {
    let s = serve("basic", &["--mechanism", "poll"], |_| {});
    assert_eq!(s.addr.ip().to_string(), "127.0.0.1");
    assert_ne!(s.addr.port(), 0);
    let r = http_get(s.addr, "/one");
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    assert!(r.ends_with("\r\n\r\na"), "{r}");
}

#[test]
fn a_second_server_on_a_busy_port_fails_with_eaddrinuse() {
    let s = serve("busy", &["--mechanism", "epoll-et"], |_| {});
    // If it did start, the guard stops it (and checks its group is gone) when the test fails.
    let mut second = spawn(
        Command::new(BIN)
            .args(["serve", "--listen", &s.addr.to_string(), "--root"])
            .arg(&s.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = second.try_wait().unwrap() {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "a second server started on {} and kept running",
            s.addr
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    second
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success(), "a second server started on {}", s.addr);
    assert!(err.contains(&s.addr.to_string()), "{err}");
    assert_eq!(
        err.matches("Address already in use").count(),
        1,
        "the cause once, not repeated: {err}"
    );
    // The first still serves.
    assert!(http_get(s.addr, "/one").starts_with("HTTP/1.1 200 OK\r\n"));
}

/// A hard descriptor limit of 32 for the server (so it cannot raise it).
fn limit_descriptors_to_32(cmd: &mut Command) {
    evlab_sys::ChildSetup {
        nofile_cap: Some(32),
        ..Default::default()
    }
    .apply_to(cmd);
}

#[test]
fn no_descriptors_left_is_503_not_404() {
    // A hard limit of 32 descriptors, then connections until the server has none left: an
    // uncached file cannot be opened, which is the server's trouble (503), not a missing file.
    let s = serve(
        "nofd503",
        &["--mechanism", "epoll-et", "--header-timeout", "0"],
        limit_descriptors_to_32,
    );
    let mut conns = Vec::new();
    for _ in 0..40 {
        conns.push(TcpStream::connect(s.addr).unwrap());
    }
    std::thread::sleep(Duration::from_millis(300));
    // The first connection was accepted before the table filled.
    let c = &mut conns[0];
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = c.read(&mut buf).unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(
        head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{head}"
    );
    // With descriptors back, the same file is served (the 503 was not cached).
    conns.drain(1..);
    std::thread::sleep(Duration::from_millis(200));
    let c = &mut conns[0];
    c.write_all(b"GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
}

#[test]
fn unknown_mechanism_lists_valid_ones() {
    let out = Command::new(BIN)
        .args(["serve", "--root", "/tmp", "--mechanism", "kqueue"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("kqueue"), "{err}");
    for m in evlab_poll::Mechanism::NAMES {
        assert!(err.contains(m), "missing {m} in: {err}");
    }
}

/// `--file-io` names its modes when given another, cannot be given with `--sendfile` (its
/// other name), and `read` and `mmap` serve.
#[test]
fn file_io_modes_serve_and_a_bad_one_names_the_modes() {
    let out = Command::new(BIN)
        .args(["serve", "--root", "/tmp", "--file-io", "splice"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cache, read, mmap, sendfile"), "{err}");
    let out = Command::new(BIN)
        .args(["serve", "--root", "/tmp", "--sendfile", "--file-io", "read"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    for mode in ["read", "mmap"] {
        let s = serve(mode, &["--file-io", mode], |_| {});
        let r = http_get(s.addr, "/one");
        assert!(
            r.starts_with("HTTP/1.1 200 OK\r\n") && r.ends_with("\r\n\r\na"),
            "{r}"
        );
    }
}

#[test]
fn list_mechanisms() {
    let out = Command::new(BIN)
        .args(["serve", "--list-mechanisms"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), evlab_poll::Mechanism::COUNT, "{text}");
    for (line, name) in text.lines().zip(evlab_poll::Mechanism::NAMES) {
        assert_eq!(line.split_whitespace().next(), Some(name), "{text}");
    }
    assert!(text
        .lines()
        .any(|l| l.starts_with("epoll-et") && l.contains("supported: yes")));
    // Columns: each starts at the same place on every line, two spaces after the widest entry
    // of the column before it.
    let col = |l: &str, i: usize| l[..i].chars().count();
    let desc: Vec<usize> = text
        .lines()
        .map(|l| {
            let after_name = l.find(char::is_whitespace).unwrap();
            let gap = l[after_name..].find(|c: char| !c.is_whitespace()).unwrap();
            col(l, after_name + gap)
        })
        .collect();
    let support: Vec<usize> = text
        .lines()
        .map(|l| col(l, l.find("supported: ").expect(l)))
        .collect();
    assert!(desc.iter().all(|&c| c == desc[0]), "{text}");
    assert!(support.iter().all(|&c| c == support[0]), "{text}");
    let widest = |f: &dyn Fn(&str) -> usize| text.lines().map(f).max().unwrap();
    assert_eq!(
        desc[0],
        widest(&|l| l.split_whitespace().next().unwrap().chars().count()) + 2,
        "{text}"
    );
    assert_eq!(
        support[0],
        widest(&|l| l[..l.find("supported: ").unwrap()]
            .trim_end()
            .chars()
            .count())
            + 2,
        "{text}"
    );
}

/// An error names each thing once: the path below the file set directory is not repeated.
#[test]
fn fileset_errors_name_the_path_once() {
    let file = std::env::temp_dir().join(format!("evlab-cli-notadir-{}", std::process::id()));
    std::fs::write(&file, "x").unwrap();
    let target = file.join("set");
    let out = Command::new(BIN)
        .arg("fileset")
        .arg(&target)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches(&*file.to_string_lossy()).count(), 1, "{err}");
    assert_eq!(err.matches("Not a directory").count(), 1, "{err}");
    let _ = std::fs::remove_file(&file);
}

#[test]
fn bad_root_and_bad_flags_name_the_problem() {
    let out = Command::new(BIN)
        .args([
            "serve",
            "--root",
            "/definitely/not/here",
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // The path and the cause, each once (an io error that is both a variant's message and its
    // source() would print twice in a `{:#}` chain).
    assert_eq!(
        err.trim_end(),
        "evlab serve: error: document root /definitely/not/here: No such file or \
         directory (os error 2)"
    );
    let out = Command::new(BIN)
        .args(["serve", "--root", "/tmp", "--accept-limit", "zero"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("accept limit"));
    let out = Command::new(BIN)
        .args(["serve", "--root", "/tmp", "--listen", "not-an-address"])
        .output()
        .unwrap();
    // A usage error (2) that says what to give instead.
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--listen") && err.contains("give ADDR:PORT"),
        "{err}"
    );
}

/// `--listen` takes a bare port, for 127.0.0.1; SIGINT stops the server gracefully, exit 0.
#[test]
fn a_bare_port_listens_on_loopback_and_sigint_exits_0() {
    let dir = common::docroot("bare-port");
    let mut child = spawn(
        Command::new(BIN)
            .args(["serve", "--listen", "0", "--root"])
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let addr = common::listening_addr(&mut std::io::BufReader::new(child.stdout.take().unwrap()))
        .unwrap_or_else(|line| panic!("{line:?}"));
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    assert!(http_get(addr, "/one").contains("200 OK"));
    // The child this test started and still owns.
    evlab_sys::kill(child.id(), libc::SIGINT).unwrap();
    let st = common::wait_within(&mut child, Duration::from_secs(10), "evlab serve");
    assert_eq!(st.code(), Some(0), "{st:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--accept-mode exclusive` (EPOLLEXCLUSIVE) with two workers serves every connection, and the
/// summary's per-worker accept counts add up to them; a mechanism without it is refused.
#[test]
fn exclusive_accept_mode_spreads_and_counts_per_worker() {
    const N: u64 = 30;
    let mut s = serve(
        "exclusive",
        &[
            "--mechanism",
            "epoll-et",
            "--workers",
            "2",
            "--accept-mode",
            "exclusive",
        ],
        |_| {},
    );
    for _ in 0..N {
        assert!(http_get(s.addr, "/one").contains("200 OK"));
    }
    let status = sigterm_and_wait(&mut s.child);
    assert!(status.success(), "{status:?}");
    let mut err = String::new();
    s.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let line = err
        .lines()
        .find_map(|l| l.trim().strip_prefix("accepted per worker:"))
        .unwrap_or_else(|| panic!("no per-worker line: {err}"));
    let per: Vec<u64> = line
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(per.len(), 2, "{line}");
    assert_eq!(per.iter().sum::<u64>(), N, "{err}");

    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--root", "/tmp"])
        .args(["--mechanism", "poll", "--accept-mode", "exclusive"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("poll has no exclusive wake-up") && e.contains("EPOLLEXCLUSIVE"),
        "{e}"
    );
}

#[test]
fn sigterm_exits_cleanly_with_summary() {
    let mut s = serve("sigterm", &["--mechanism", "epoll-lt", "--stats"], |_| {});
    for _ in 0..5 {
        assert!(http_get(s.addr, "/one").contains("200 OK"));
    }
    let status = sigterm_and_wait(&mut s.child);
    assert!(status.success(), "{status:?}");
    let mut err = String::new();
    s.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("epoll-lt"), "{err}");
    assert!(err.contains("epoll_ctl"), "{err}");
    assert!(err.contains("requests: 5"), "{err}");
}

#[test]
fn curl_gets_files() {
    if !program("curl") {
        return;
    }
    let s = serve("curl", &["--mechanism", "select"], |_| {});
    let url = format!("http://{}/", s.addr);
    let out = Command::new("curl")
        .args(["-sS", "-i", "--max-time", "10", &url, &format!("{url}one")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert!(text.contains("<h1>hi</h1>"));
    let out = Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .arg(format!("{url}missing"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "404");
}

#[test]
fn ab_completes_without_failures() {
    if !program("ab") {
        return;
    }
    for mech in ["epoll-et", "select"] {
        let s = serve(&format!("ab-{mech}"), &["--mechanism", mech], |_| {});
        let out = Command::new("ab")
            .args(["-q", "-k", "-n", "2000", "-c", "20", "-s", "10"])
            .arg(format!("http://{}/one", s.addr))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("Complete requests:      2000"), "{text}");
        assert!(text.contains("Failed requests:        0"), "{text}");
        assert!(!text.contains("Non-2xx responses"), "{text}");
    }
}

#[test]
fn wrk_runs_without_errors() {
    if !program("wrk") {
        return;
    }
    let s = serve("wrk", &["--mechanism", "epoll2"], |_| {});
    let out = Command::new("wrk")
        .args(["-t1", "-c10", "-d1s"])
        .arg(format!("http://{}/one", s.addr))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("requests in"), "{text}");
    assert!(!text.contains("Non-2xx"), "{text}");
    assert!(!text.contains("Socket errors"), "{text}");
}

/// CPU seconds (user + system) a process has used, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / evlab_sys::clock_ticks_per_second().unwrap() as f64
}

#[test]
fn emfile_pauses_accept_without_spinning() {
    // A descriptor limit of 32 (hard, so the server cannot raise it): the listener, the epoll
    // instance, an eventfd, the std streams and a cached file leave room for ~20 connections.
    let s = serve(
        "emfile",
        &["--mechanism", "epoll-lt", "--header-timeout", "0"],
        limit_descriptors_to_32,
    );
    let mut conns = Vec::new();
    for _ in 0..40 {
        conns.push(TcpStream::connect(s.addr).unwrap());
    }
    std::thread::sleep(Duration::from_millis(300));
    let pid = s.child.id();
    let before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_seconds(pid) - before;
    assert!(
        used < 0.3,
        "server used {used} s of CPU in 1 s while out of descriptors: spinning"
    );
    // Free descriptors: close the first 20 (accepted) connections; the rest get served.
    conns.drain(..20);
    let t0 = Instant::now();
    let mut served = 0;
    for c in conns.iter_mut() {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        if out.starts_with("HTTP/1.1 200 OK") {
            served += 1;
        }
    }
    assert_eq!(
        served, 20,
        "pending connections were not served after descriptors freed"
    );
    assert!(t0.elapsed() < Duration::from_secs(15));
    // And new ones too.
    assert!(http_get(s.addr, "/one").contains("200 OK"));
}

/// `evlab serve DIR` serves DIR, and `evlab serve` the current directory, as `python -m
/// http.server` does; DIR and --root together are a usage error that says so.
#[test]
fn the_root_is_an_argument_defaulting_to_the_current_directory() {
    let dir = common::docroot("positional");
    let mut with_dir = spawn(
        Command::new(BIN)
            .args(["serve", "--listen", "0"])
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let mut here = spawn(
        Command::new(BIN)
            .args(["serve", "--listen", "0", "--mechanism", "poll"])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    for child in [&mut with_dir, &mut here] {
        let addr =
            common::listening_addr(&mut std::io::BufReader::new(child.stdout.take().unwrap()))
                .unwrap_or_else(|line| panic!("{line:?}"));
        let r = http_get(addr, "/one");
        assert!(
            r.starts_with("HTTP/1.1 200 OK\r\n") && r.ends_with("\r\n\r\na"),
            "{r}"
        );
        assert!(sigterm_and_wait(child).success());
    }
    let out = Command::new(BIN)
        .args(["serve", "/tmp", "--root", "/srv", "--listen", "0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("given twice, as DIR (/tmp) and as --root (/srv): give one"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
