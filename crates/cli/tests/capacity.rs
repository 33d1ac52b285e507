//! `evlab capacity URL`: the lab's capacity search against any HTTP/1.1 server, over trials,
//! with a latency objective. Against evlab serve it gives a capacity inside its own interval;
//! Python's http.server (one thread, a connection per request) ranks below it; a server that
//! answers every request 15 ms late misses a 10 ms objective at every rate and exits 99.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{serve, BIN};

fn capacity(url: &str, extra: &[&str]) -> (std::process::Output, serde_json::Value) {
    let o = Command::new(BIN)
        .args(["capacity", url, "--step", "300ms", "-c", "8", "--json", "-"])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let v = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (o, v)
}

#[test]
fn a_capacity_inside_its_interval_and_a_slow_server_below_it() {
    let s = serve("capacity", &[], |_| {});
    let url = format!("http://127.0.0.1:{}/one", s.addr.port());
    let (o, v) = capacity(&url, &["--slo", "p99=20ms", "--trials", "3"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let c = &v["capacity"];
    let (value, lo, hi) = (
        c["value"].as_f64().unwrap(),
        c["lo"].as_f64().unwrap(),
        c["hi"].as_f64().unwrap(),
    );
    assert!(lo <= value && value <= hi, "{c}");
    assert_eq!(c["trials"].as_array().unwrap().len(), 3);
    assert!(!c["steps"][0].as_array().unwrap().is_empty());
    assert!(
        err.lines().last().unwrap().starts_with("capacity: "),
        "{err}"
    );

    // Python's http.server: HTTP/1.0, a connection per request, one thread.
    let dir = s.dir.clone();
    let mut py = common::spawn(
        Command::new("python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let mut first = String::new();
    BufReader::new(py.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let port: u16 = first
        .split("port ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{first}"));
    let (o, slow) = capacity(
        &format!("http://127.0.0.1:{port}/one"),
        &["--slo", "p99=20ms", "--trials", "2"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let slow_value = slow["capacity"]["value"].as_f64().unwrap();
    assert!(
        slow_value < lo,
        "http.server {slow_value}/s, evlab serve [{lo}, {hi}]"
    );
    py.stop(std::time::Duration::from_secs(5));
}

#[test]
fn an_objective_missed_at_every_rate_exits_99() {
    let s = serve("capacity-late", &["--origin-delay", "15ms"], |_| {});
    let url = format!("http://127.0.0.1:{}/one", s.addr.port());
    let (o, v) = capacity(
        &url,
        &["--slo", "p99=10ms", "--trials", "1", "--steps", "5"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(99), "{err}");
    assert!(err.contains("missed at every rate tried"), "{err}");
    assert!(v["capacity"]["value"].is_null(), "{v}");
    let steps = v["capacity"]["steps"][0].as_array().unwrap();
    assert!(steps.iter().all(|s| s["kept"] == false), "{steps:?}");
    assert!(
        steps
            .iter()
            .all(|s| s["latency_ms"].as_f64().unwrap() >= 15.0),
        "{steps:?}"
    );
}
