//! Two real `evlab load` clients told to start at one instant (`--start-at`) against one real
//! `evlab serve`, their reports merged by `evlab load-merge`: both start at or after the
//! instant and say how late, counts add, the merged percentiles are those of their histograms
//! added, and the window is the latest start to the earliest end.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

mod common;
use common::{serve, spawn, wait_within, BIN};
use evlab_wire::load::{Latency, LoadReport};
use evlab_wire::merge::MergedLoad;

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("evlab-loadmerge-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn evlab(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run evlab")
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn read_report(p: &Path) -> LoadReport {
    serde_json::from_slice(&std::fs::read(p).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn two_clients_started_together_merge_exactly() {
    let s = serve("load-merge", &[], |_| {});
    let dir = scratch("two");
    let port = s.addr.port().to_string();
    // Far enough ahead for both processes to be ready on a busy machine; if one is not, it
    // starts at once and says how late, which is checked below either way.
    let at = format!("{:.6}", now() + 2.0);
    let t: f64 = at.parse().unwrap();
    let files: Vec<PathBuf> = (1..=2).map(|i| dir.join(format!("c{i}.json"))).collect();
    let mut clients: Vec<_> = files
        .iter()
        .zip(["150", "250"])
        .map(|(f, rate)| {
            spawn(
                Command::new(BIN)
                    .args([
                        "load",
                        "--port",
                        port.as_str(),
                        "--uri",
                        "/one",
                        "--rate",
                        rate,
                    ])
                    .args(["--num-conns", "200", "--sample-interval", "0.2"])
                    .args(["--start-at", at.as_str(), "--quiet", "--json"])
                    .arg(f)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped()),
            )
        })
        .collect();
    for c in &mut clients {
        let st = wait_within(c, Duration::from_secs(60), "evlab load");
        let mut err = String::new();
        c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(st.success(), "evlab load: {st:?}\n{err}");
    }
    let r: Vec<LoadReport> = files.iter().map(|f| read_report(f)).collect();
    for (i, x) in r.iter().enumerate() {
        let c = x.clock.as_ref().expect("a clock");
        assert_eq!(c.start_at, Some(t), "client {i}");
        assert!(
            c.started_at >= t,
            "client {i} started at {} before {t}",
            c.started_at
        );
        let late = c.late_ms.expect("late_ms with --start-at");
        assert!(late >= 0.0, "client {i}: {late}");
        assert!(
            (c.started_at - t - late / 1e3).abs() < 1e-6,
            "client {i}: {c:?}"
        );
        assert!(c.ended_at > c.started_at, "client {i}: {c:?}");
        let h = x.latency_histogram.as_ref().expect("a histogram");
        assert_eq!(
            (h.format.as_str(), h.unit.as_str(), h.significant_figures),
            ("hdrhistogram-v2-deflate-base64", "us", 3)
        );
        assert!(h.data.starts_with("HISTF"), "{}", h.data);
        assert_eq!(h.count, x.replies.total, "client {i}");
        assert_eq!(x.replies.total, 200, "client {i}");
    }

    let paths: Vec<&str> = files.iter().map(|f| f.to_str().unwrap()).collect();
    let o = evlab(&[&["load-merge"][..], &paths[..]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m: MergedLoad = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    let (a, b) = (&r[0], &r[1]);
    // Counts add.
    assert_eq!(m.replies.total, a.replies.total + b.replies.total);
    assert_eq!(
        m.connections.initiated,
        a.connections.initiated + b.connections.initiated
    );
    assert_eq!(
        m.connections.completed,
        a.connections.completed + b.connections.completed
    );
    assert_eq!(m.requests.sent, a.requests.sent + b.requests.sent);
    assert_eq!(
        m.replies.status.s2xx,
        a.replies.status.s2xx + b.replies.status.s2xx
    );
    assert_eq!(m.errors.total, a.errors.total + b.errors.total);
    assert_eq!(m.net.bytes_in, a.net.bytes_in + b.net.bytes_in);
    assert_eq!(m.net.bytes_out, a.net.bytes_out + b.net.bytes_out);
    assert_eq!(m.rates.offered_rate_sum, 400.0);
    // Percentiles from the histograms added: the merged p99 lies between the clients' (the
    // same buckets, so exactly), and is that of the two histograms added here.
    let (lo, hi) = if a.latency_ms.p99 <= b.latency_ms.p99 {
        (a.latency_ms.p99, b.latency_ms.p99)
    } else {
        (b.latency_ms.p99, a.latency_ms.p99)
    };
    assert!(
        lo <= m.latency_ms.p99 && m.latency_ms.p99 <= hi,
        "merged p99 {} outside the clients' {lo} and {hi}",
        m.latency_ms.p99
    );
    let mut both = a.latency_histogram.as_ref().unwrap().decode().unwrap();
    both.add(b.latency_histogram.as_ref().unwrap().decode().unwrap())
        .unwrap();
    assert_eq!(m.latency_ms, Latency::from_histogram(&both, 1e3));
    assert_eq!(m.latency_histogram.decode().unwrap(), both);
    assert_eq!(m.latency_histogram.count, 400);
    // The window: the latest start to the earliest end.
    let (ca, cb) = (a.clock.as_ref().unwrap(), b.clock.as_ref().unwrap());
    assert_eq!(m.window.start, ca.started_at.max(cb.started_at));
    assert_eq!(m.window.end, ca.ended_at.min(cb.ended_at));
    assert!(m.window.duration_s > 0.0);
    for (part, c) in m.clients.iter().zip([ca, cb]) {
        assert_eq!((part.started_at, part.late_ms), (c.started_at, c.late_ms));
    }
    assert_eq!(m.clients[1].name, paths[1]);

    // A damaged histogram is refused, naming its file; so is a file that is not a report.
    let mut bad = read_report(&files[1]);
    bad.latency_histogram.as_mut().expect("a histogram").data = "HISTFAAAAXXXX".into();
    let damaged = dir.join("damaged.json");
    std::fs::write(&damaged, serde_json::to_string(&bad).unwrap()).unwrap();
    let o = evlab(&["load-merge", paths[0], damaged.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("damaged.json: "), "{err}");
    let o = evlab(&["load-merge", paths[0], dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn start_at_past_runs_at_once_and_says_how_late_and_far_ahead_is_refused() {
    let s = serve("load-late", &[], |_| {});
    let port = s.addr.port().to_string();
    let base = [
        "load",
        "--port",
        port.as_str(),
        "--uri",
        "/one",
        "--rate",
        "100",
    ];
    let at = format!("{:.3}", now() - 5.0);
    let o = evlab(
        &[
            &base[..],
            &["--num-conns", "3", "--json", "-", "--start-at", at.as_str()],
        ]
        .concat(),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let r: LoadReport = serde_json::from_slice(&o.stdout).unwrap();
    let c = r.clock.unwrap();
    // Later than five seconds by however long the process took to get ready.
    assert!(c.late_ms.unwrap() >= 5_000.0, "{c:?}");
    assert!(
        err.contains("warning: started") && err.contains("--start-at"),
        "{err}"
    );
    assert!(err.contains("Clock [Unix s]: started"), "{err}");
    assert_eq!(r.replies.total, 3);
    // Without --start-at: a clock, no late_ms.
    let o = evlab(&[&base[..], &["--num-conns", "2", "--json", "-", "--quiet"]].concat());
    let r: LoadReport = serde_json::from_slice(&o.stdout).unwrap();
    let c = r.clock.unwrap();
    assert_eq!((c.start_at, c.late_ms), (None, None));
    assert!(c.ended_at > c.started_at);
    // An hour and more ahead (milliseconds given for seconds), more than 10 s behind (`5`, an
    // instant of 1970), or not a number: a usage error before the run, saying which.
    for (bad, says) in [
        (
            format!("{:.3}", now() * 1000.0),
            "ahead of this host's clock",
        ),
        (format!("{:.3}", now() - 60.0), "passed 60"),
        ("5".to_string(), "days ago"),
        ("NaN".to_string(), "Unix seconds"),
    ] {
        let o = evlab(&[&base[..], &["--num-conns", "2", "--start-at", bad.as_str()]].concat());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert!(
            err.starts_with("evlab load: error: --start-at") && err.contains(says),
            "{bad}: {err}"
        );
        assert!(!err.contains("warning"), "{bad}: {err}");
    }
}
