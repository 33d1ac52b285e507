//! `evlab serve --as processes`: pre-forked worker processes, as a user runs them. Each test
//! checks the bytes served, that `/.evlab/stats` and the exit summary add up every process,
//! and that no worker process outlives the server, however it is stopped. Nothing here
//! depends on speed: waits are bounded by generous limits, never measured.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

mod common;
use common::{assert_gone, serve, sigterm_and_wait, Serve, BIN};
use evlab_wire::server::ServerStats;

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

fn stats(addr: SocketAddr) -> ServerStats {
    let r = http_get(addr, "/.evlab/stats");
    let body = r.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {r}"))
}

fn stderr_of(s: &mut Serve) -> String {
    let mut err = String::new();
    s.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    err
}

/// Gone, or a zombie no one has reaped yet (a child whose parent was killed is reaped by
/// whoever adopts it): either way it runs no more.
fn not_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')),
    }
}

/// The worker processes' pids from the stats, each distinct.
fn worker_pids(st: &ServerStats, n: usize) -> Vec<u32> {
    let mut pids: Vec<u32> = st.per_worker.iter().filter_map(|w| w.pid).collect();
    assert_eq!(pids.len(), n, "{:?}", st.per_worker);
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), n, "distinct pids: {pids:?}");
    pids
}

const CONNS: u64 = 12;

/// One server per (mechanism, accept mode): every reply byte-exact, the stats a sum over the
/// processes, SIGTERM ends every process and the parent's summary (it serves nothing itself)
/// counts every connection.
#[test]
fn processes_serve_exact_bytes_and_stats_add_up_in_every_accept_mode() {
    for (mech, mode) in [
        ("epoll-lt", "shared"),
        ("epoll-lt", "exclusive"),
        ("epoll-et", "reuseport"),
        ("poll", "shared"),
        ("poll", "reuseport"),
    ] {
        let what = format!("{mech} {mode}");
        let mut s = serve(
            &format!("procs-{mech}-{mode}"),
            &[
                "--mechanism",
                mech,
                "--accept-mode",
                mode,
                "--workers",
                "3",
                "--as",
                "processes",
                "--stats",
            ],
            |_| {},
        );
        for i in 0..CONNS {
            let (path, body) = if i % 2 == 0 {
                ("/one", "a")
            } else {
                ("/index.html", "<h1>hi</h1>\n")
            };
            let r = http_get(s.addr, path);
            assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{what}: {r}");
            assert!(r.ends_with(&format!("\r\n\r\n{body}")), "{what}: {r}");
            assert!(
                r.contains(&format!("Content-Length: {}\r\n", body.len())),
                "{what}: {r}"
            );
        }
        // A process publishes its counters at the end of each turn of its loop: one that has
        // just written a reply may not have yet when another answers the stats. Ask until every
        // earlier reply is counted (each asking is a connection and a reply of its own, and
        // this one's is counted live by the process that answers).
        let t0 = Instant::now();
        let mut asked = 0;
        let st = loop {
            let st = stats(s.addr);
            asked += 1;
            if st.responses.s2xx >= CONNS + asked - 1 {
                break st;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "{what}: {st:?}");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(st.workers, 3, "{what}");
        let p = st.processes.clone().expect("a processes section");
        assert_eq!((p.forked, p.serving, p.died.len()), (3, 3, 0), "{what}");
        let pids = worker_pids(&st, 3);
        assert!(!pids.contains(&s.child.id()), "the parent serves nothing");
        // Each stats request is a connection too, accepted by whichever process answers it.
        assert_eq!(st.connections.accepted, CONNS + asked, "{what}: {st:?}");
        let per: u64 = st.per_worker.iter().map(|w| w.accepted).sum();
        assert_eq!(per, st.connections.accepted, "{what}");
        let wakeups: u64 = st.per_worker.iter().map(|w| w.accept_wakeups).sum();
        assert!(wakeups >= 1 && wakeups <= per + 3 * CONNS, "{what}: {st:?}");
        assert!(st.syscalls.contains_key("accept4"), "{what}");

        let status = sigterm_and_wait(&mut s.child);
        assert!(status.success(), "{what}: {status:?}");
        assert_gone(s.child.id());
        for pid in &pids {
            assert_gone(*pid);
        }
        let err = stderr_of(&mut s);
        assert!(err.contains(&format!("{mech} (3 process(es))")), "{err}");
        assert!(
            err.contains(&format!("accepted {}", CONNS + asked)),
            "{what}: the parent's summary counts every process's: {err}"
        );
        assert!(err.contains("accepted per worker:"), "{err}");
        assert!(err.contains("empty accept wake-ups per worker:"), "{err}");
    }
}

/// A worker process killed outright is noticed: reported on stderr and in the stats, the
/// others go on serving the shared listener, and the stop that follows fails saying so.
#[test]
fn a_killed_worker_process_is_reported_and_the_rest_serve_on() {
    let mut s = serve(
        "procs-kill",
        &[
            "--mechanism",
            "epoll-lt",
            "--workers",
            "3",
            "--as",
            "processes",
            "--stats",
        ],
        |_| {},
    );
    let pids = worker_pids(&stats(s.addr), 3);
    let victim = pids[1];
    evlab_sys::kill(victim, libc::SIGKILL).unwrap();
    let t0 = Instant::now();
    let st = loop {
        let st = stats(s.addr);
        if st.processes.as_ref().is_some_and(|p| !p.died.is_empty()) {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "not noticed: {st:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let p = st.processes.unwrap();
    assert_eq!(p.serving, 2);
    assert_eq!(p.died[0].pid, victim);
    assert_eq!(p.died[0].how, "signal 9");
    for _ in 0..6 {
        assert!(http_get(s.addr, "/one").ends_with("\r\n\r\na"));
    }
    let status = sigterm_and_wait(&mut s.child);
    assert!(!status.success(), "a lost worker is a failure: {status:?}");
    for pid in &pids {
        assert_gone(*pid);
    }
    let err = stderr_of(&mut s);
    assert!(
        err.contains(&format!("(pid {victim}) ended: signal 9; 2 still serving")),
        "{err}"
    );
    assert!(err.contains("worker processes lost"), "{err}");
}

/// A parent killed outright (no chance to stop anyone) takes its workers along: each has
/// PR_SET_PDEATHSIG.
#[test]
fn a_parent_killed_outright_leaves_no_worker_process() {
    let mut s = serve(
        "procs-orphans",
        &["--workers", "4", "--as", "processes", "--stats"],
        |_| {},
    );
    let pids = worker_pids(&stats(s.addr), 4);
    evlab_sys::kill(s.child.id(), libc::SIGKILL).unwrap();
    let _ = s.child.wait();
    let t0 = Instant::now();
    while !pids.iter().all(|&p| not_running(p)) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "worker processes left running: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn processes_refuse_what_threads_refuse_and_bad_models() {
    let out = std::process::Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--root", "/tmp"])
        .args(["--mechanism", "poll", "--accept-mode", "exclusive"])
        .args(["--workers", "2", "--as", "processes"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("EPOLLEXCLUSIVE"), "{e}");
    let out = std::process::Command::new(BIN)
        .args(["serve", "--root", "/tmp", "--as", "fibers"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("threads") && e.contains("processes"), "{e}");
}
