//! `evlab load` in wrk's and wrk2's model: `-c N -d D [-t T] [-H 'Name: value']` keeps N
//! connections busy for the window; `-R RATE` holds a request rate over them and measures each
//! request from when it was due (corrected) as well as from when it was sent (uncorrected).

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{serve, BIN};

fn load(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("load")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn json_of(o: &std::process::Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A keep-alive server that answers every request `200` with one byte, and keeps each
/// connection's first request head.
fn recording_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let keep = heads.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            let keep = keep.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let mut first = true;
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        if first {
                            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                            keep.lock().unwrap().push(head);
                            first = false;
                        }
                        buf.drain(..end + 4);
                        if c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na")
                            .is_err()
                        {
                            return;
                        }
                    }
                    match c.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    (port, heads)
}

#[test]
fn c_connections_stay_busy_for_the_window_with_the_headers_given() {
    let (port, heads) = recording_server();
    let url = format!("http://127.0.0.1:{port}/x");
    let o = load(&[
        &url,
        "-c",
        "4",
        "-d",
        "1s",
        "-t",
        "2",
        "-H",
        "X-Trace: abc",
        "-H",
        "User-Agent: wrk",
        "--json",
        "-",
        "--quiet",
    ]);
    let v = json_of(&o);
    assert_eq!(v["config"]["closed_loop"], true, "{}", v["config"]);
    assert_eq!(v["connections"]["initiated"], 4, "kept, not replaced");
    let sent = v["requests"]["sent"].as_u64().unwrap();
    assert!(sent > 4 * 20, "each connection went on asking: {sent}");
    assert_eq!(v["replies"]["status"]["2xx"], v["replies"]["total"]);
    let d = v["duration_s"].as_f64().unwrap();
    assert!((0.9..2.0).contains(&d), "the window is -d: {d}");
    assert_eq!(v["errors"]["total"], 0);
    assert!(v["latency_uncorrected_ms"]["p50"].as_f64().unwrap() > 0.0);
    let heads = heads.lock().unwrap();
    assert_eq!(heads.len(), 4);
    for h in heads.iter() {
        assert!(h.starts_with("GET /x HTTP/1.1\r\n"), "{h}");
        assert!(h.contains("\r\nX-Trace: abc"), "{h}");
        assert!(h.contains("\r\nUser-Agent: wrk"), "{h}");
        assert!(
            !h.contains("evlab-load"),
            "the given User-Agent replaces ours: {h}"
        );
        assert!(h.contains(&format!("\r\nHost: 127.0.0.1:{port}")), "{h}");
    }
}

#[test]
fn wrong_model_flags_and_headers_are_usage_errors() {
    for (args, says) in [
        (vec!["-c", "4", "--rate", "10"], "cannot be used with"),
        (vec!["-H", "no colon here", "-c", "1"], "not a header"),
        (vec!["-H", "Bad Name: x", "-c", "1"], "not a token"),
        (vec!["-c", "0"], "at least 1"),
        (vec!["-R", "0"], "more than zero"),
        (vec!["-R", "100", "--pipeline", "2"], "cannot be used with"),
    ] {
        let o = load(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// wrk2's point: a server that stalls for a second is seen by the corrected latency (every
/// request due during the stall waited for it) and hidden from the uncorrected one (only the
/// requests on the wire then did). The requests keep their rate over the run.
#[test]
fn a_held_rate_sees_a_stall_that_uncorrected_latency_hides() {
    let s = serve("load-wrk2", &[], |_| {});
    let url = format!("http://127.0.0.1:{}/one", s.addr.port());
    let child = Command::new(BIN)
        .args(["load", &url, "-c", "10", "-R", "2000", "-d", "4s"])
        .args(["--json", "-", "--quiet"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let pid = s.child.pid();
    evlab_sys::kill(pid, libc::SIGSTOP).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    evlab_sys::kill(pid, libc::SIGCONT).unwrap();
    let o = child.wait_with_output().unwrap();
    let v = json_of(&o);
    let sent = v["requests"]["sent"].as_f64().unwrap();
    assert!(
        (sent - 8000.0).abs() <= 0.05 * 8000.0,
        "2,000/s for 4 s: {sent} sent"
    );
    assert_eq!(v["config"]["request_rate"], 2000.0);
    let corrected = v["latency_ms"]["p99"].as_f64().unwrap();
    let uncorrected = v["latency_uncorrected_ms"]["p99"].as_f64().unwrap();
    assert!(corrected >= 500.0, "corrected p99 {corrected} ms");
    assert!(uncorrected < 50.0, "uncorrected p99 {uncorrected} ms");
}
