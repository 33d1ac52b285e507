//! `evlab load`, `evlab idle` and `evlab fileset` as a user runs them: the real binary against
//! the real `evlab serve`, and against nginx and lighttpd where Debian's packages are installed.

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{serve, sigterm_and_wait, spawn, Serve, BIN};
use evlab_load::summary::LoadReport;
use evlab_server::ServerStats;

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("evlab-loadcli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn load(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("load")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run evlab load")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The number after `label` in an httperf-style report line.
fn field(report: &str, label: &str) -> f64 {
    let at = report
        .find(label)
        .unwrap_or_else(|| panic!("no '{label}' in:\n{report}"));
    report[at + label.len()..]
        .split_whitespace()
        .next()
        .and_then(|w| w.trim_end_matches(['%', ')', ',']).parse().ok())
        .unwrap_or_else(|| panic!("no number after '{label}' in:\n{report}"))
}

/// Every line label httperf prints, so that scripts reading httperf's output keep working.
const HTTPERF_LABELS: &[&str] = &[
    "Total: connections ",
    "Connection rate: ",
    "Connection time [ms]: min ",
    "Connection time [ms]: connect ",
    "Connection length [replies/conn]: ",
    "Request rate: ",
    "Request size [B]: ",
    "Reply rate [replies/s]: min ",
    "Reply time [ms]: response ",
    "Reply size [B]: header ",
    "Reply status: 1xx=",
    "CPU time [s]: user ",
    "Net I/O: ",
    "Errors: total ",
    "Errors: fd-unavail ",
];

#[test]
fn report_json_and_samples_against_evlab_serve() {
    let s = serve("load-report", &[], |_| {});
    let dir = scratch("report");
    let json = dir.join("out.json");
    let samples = dir.join("samples.csv");
    let port = s.addr.port().to_string();
    let o = load(&[
        "--port",
        &port,
        "--uri",
        "/one",
        "--rate",
        "400",
        "--num-conns",
        "200",
        "--num-calls",
        "3",
        "--sample-interval",
        "0.1",
        "--json",
        json.to_str().unwrap(),
        "--samples",
        samples.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    for l in HTTPERF_LABELS {
        assert!(out.contains(l), "report lacks '{l}':\n{out}");
    }
    assert!(
        out.contains("Total: connections 200 requests 600 replies 600 "),
        "{out}"
    );
    assert_eq!(field(&out, "Errors: total "), 0.0, "{out}");
    assert_eq!(field(&out, "Reply status: 1xx=0 2xx="), 600.0, "{out}");
    // The file is one byte: 600 bytes of content in all, 1 per reply.
    assert_eq!(field(&out, "content "), 1.0, "{out}");
    let r: LoadReport = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r.replies.total, 600, "{r:?}");
    assert_eq!(r.connections.completed, 200, "{r:?}");
    assert_eq!(
        r.syscalls.get("connect").map(|c| c.calls),
        Some(200),
        "{r:?}"
    );
    let csv = std::fs::read_to_string(&samples).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert!(rows.len() >= 3, "a 0.5 s run in 0.1 s samples: {csv}");
    assert!(rows[0].contains("replies"), "header row: {csv}");
    // Its sample intervals are the CSV's rows.
    assert_eq!(r.samples.len(), rows.len() - 1, "{csv}");
    assert_eq!(r.samples.iter().map(|x| x.replies).sum::<u64>(), 600);
    assert_eq!(r.config.workload.as_deref(), Some("/one x 3"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_reply_is_kept_with_latencies_and_its_percentiles_are_the_histograms() {
    let s = serve("load-latencies", &[], |_| {});
    let dir = scratch("latencies");
    let (json, csv) = (dir.join("out.json"), dir.join("lat.csv"));
    let port = s.addr.port().to_string();
    let o = load(&[
        "--port",
        &port,
        "--uri",
        "/one",
        "--rate",
        "500",
        "--num-conns",
        "400",
        "--num-calls",
        "2",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
        "--latencies",
        csv.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let r: LoadReport = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut raw = common::latencies_csv(&text);
    // One row per reply, sorted by when each was due.
    assert_eq!(raw.len() as u64, r.replies.total);
    assert_eq!(raw.len(), 800);
    let due: Vec<u64> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert!(due.windows(2).all(|w| w[0] <= w[1]));
    let l = &r.latency_ms;
    common::assert_percentiles_match([l.p50, l.p90, l.p99, l.p999, l.max], &mut raw);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stop_after_ends_busy_connections_at_a_fixed_window() {
    let s = serve("load-stop-after", &[], |_| {});
    let dir = scratch("stop-after");
    let json = dir.join("out.json");
    let port = s.addr.port().to_string();
    // Ten connections of 20,000 calls each (the LSE page's httperf command): some 200,000
    // calls, ended after one second.
    let o = load(&[
        "--port",
        &port,
        "--uri",
        "/one",
        "--rate",
        "100",
        "--num-conns",
        "10",
        "--num-calls",
        "20000",
        "--stop-after",
        "1s",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let r: LoadReport = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r.config.stop_after_s, Some(1.0));
    // The window, not the calls, ended it: nothing completed, nothing counted as an error.
    assert!(
        r.duration_s >= 1.0 && r.duration_s < 5.0,
        "{}",
        r.duration_s
    );
    assert_eq!(r.connections.initiated, 10);
    assert_eq!(r.connections.completed, 0);
    assert_eq!(r.errors.total, 0, "{:?}", r.errors);
    assert!(r.replies.total > 10, "{:?}", r.replies);
    assert!(!r.interrupted);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn head_method_counts_no_body_bytes() {
    let s = serve("load-head", &[], |_| {});
    std::fs::write(s.dir.join("five"), b"12345").unwrap();
    let port = s.addr.port().to_string();
    let args = |m: &'static str| {
        vec![
            "--port".to_string(),
            port.clone(),
            "--uri".into(),
            "/five".into(),
            "--rate".into(),
            "200".into(),
            "--num-conns".into(),
            "20".into(),
            "--num-calls".into(),
            "5".into(),
            "--method".into(),
            m.into(),
        ]
    };
    for (m, content) in [("HEAD", 0.0), ("get", 5.0)] {
        let a = args(m);
        let o = load(&a.iter().map(String::as_str).collect::<Vec<_>>());
        let (out, err) = text(&o);
        assert!(o.status.success(), "{m}: {out}\n{err}");
        assert!(out.contains("replies 100 "), "{m}: {out}");
        assert_eq!(field(&out, "Errors: total "), 0.0, "{m}: {out}");
        assert_eq!(field(&out, "content "), content, "{m}: {out}");
    }
}

/// Starts a peer server on a port chosen by binding port 0 (peers cannot report the port they
/// picked), in a process group of its own (nginx forks its workers), and waits until it
/// accepts.
fn start_peer(argv: &[String], port: u16) -> evlab_lab::run::procs::Child {
    let mut child = evlab_lab::run::procs::Child::spawn(&argv[0], argv, &[], None).unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return child;
        }
        if !child.alive() {
            panic!("{} exited at start: {}", argv[0], child.stderr_tail(5));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.stop(Duration::from_secs(2));
    panic!("{} did not accept on port {port} within 10 s", argv[0]);
}

#[test]
fn counts_exactly_against_nginx_and_lighttpd() {
    let dir = scratch("peers");
    let root = dir.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("one"), b"a").unwrap();
    // The peers' workers may run as another user: let them read the docroot.
    for p in [&dir, &root] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut ran = 0;
    for peer in ["nginx", "lighttpd"] {
        if !evlab_poll::testing::program(peer) {
            continue;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let argv = match peer {
            "nginx" => evlab_lab::run::peers::nginx_argv(&dir, &root, port),
            _ => evlab_lab::run::peers::lighttpd_argv(&dir, &root, port, "linux-sysepoll"),
        }
        .unwrap();
        let mut child = start_peer(&argv, port);
        let p = port.to_string();
        let o = load(&[
            "--port",
            &p,
            "--uri",
            "/one",
            "--rate",
            "500",
            "--num-conns",
            "300",
            "--num-calls",
            "2",
            "--pipeline",
            "2",
        ]);
        // The whole group (nginx's master and its worker) stops, and nothing of it is left.
        let left = child.stop(Duration::from_secs(5));
        assert!(left.is_empty(), "{peer} left processes {left:?}");
        assert!(evlab_lab::run::procs::group_members(child.pid).is_empty());
        let (out, err) = text(&o);
        assert!(o.status.success(), "{peer}: {out}\n{err}");
        assert!(
            out.contains("Total: connections 300 requests 600 replies 600 "),
            "{peer}: {out}"
        );
        assert_eq!(
            field(&out, "Reply status: 1xx=0 2xx="),
            600.0,
            "{peer}: {out}"
        );
        assert_eq!(field(&out, "Errors: total "), 0.0, "{peer}: {out}");
        ran += 1;
    }
    println!("{ran} peer(s) measured");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_names_what_is_wrong() {
    let dir = scratch("bad");
    let bad_log = dir.join("bad.log");
    std::fs::write(&bad_log, "/a\n/b think=soon\n").unwrap();
    let wsesslog = format!("3,0,{}", bad_log.display());
    let cases: &[(&[&str], &str)] = &[
        (&["--rate", "10", "--num-conns", "1", "--bogus"], "--bogus"),
        (&["--rate", "0", "--num-conns", "1"], "--rate"),
        (&["--rate", "10"], "--num-conns or --duration"),
        (
            &["--rate", "10", "--num-conns", "1", "--method", "POST"],
            "--method",
        ),
        (
            &["--rate", "10", "--num-conns", "1", "--uri", "one"],
            "--uri",
        ),
        (
            &["--rate", "10", "--wsesslog", "3,0,/nonexistent/x.log"],
            "/nonexistent/x.log",
        ),
        (
            &["--rate", "10", "--wsesslog", &wsesslog],
            "bad.log:2: think=soon",
        ),
        (
            &["--rate", "10", "--num-conns", "1", "--timeout", "0"],
            "--timeout",
        ),
        (&["--rate", "-5", "--num-conns", "1"], "more than zero"),
        (&["--rate", "10", "--duration", "10x"], "500ms, 30s, 2m, 1h"),
    ];
    // What the file says is an error of the run (1); everything else is the command line's
    // (2, as clap's own errors).
    let of_the_run = ["/nonexistent/x.log", "bad.log:2: think=soon"];
    for (args, want) in cases {
        let o = load(args);
        let (out, err) = text(&o);
        assert!(!o.status.success(), "{args:?} succeeded: {out}");
        assert!(err.contains(want), "{args:?}: stderr lacks '{want}': {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        let code = if of_the_run.contains(want) { 1 } else { 2 };
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn refused_connections_are_counted_and_the_run_ends() {
    // A port that nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let t0 = Instant::now();
    let o = load(&["--port", &port, "--rate", "100", "--num-conns", "20"]);
    let (out, err) = text(&o);
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(field(&out, "connrefused "), 20.0, "{out}");
    assert_eq!(field(&out, "Errors: total "), 20.0, "{out}");
    assert!(out.contains("replies 0 "), "{out}");
    // No reply is a failure, and every connection refused is said to be the likely cause.
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains("warning: every connection (20) was refused")
            && err.contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(err.contains("error: no reply arrived"), "{err}");
    // Distributions of nothing are not printed as zeros.
    assert!(
        out.contains("Connection time [ms]: no connection completed"),
        "{out}"
    );
    assert!(out.contains("Latency [ms]: no replies"), "{out}");
    // --allow-no-replies: the same warning, exit status 0.
    let o = load(&[
        "--port",
        &port,
        "--rate",
        "100",
        "--num-conns",
        "3",
        "--allow-no-replies",
        "--threshold",
        "none",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(err.contains("every connection (3) was refused"), "{err}");
}

/// The reply-rate line gives sample statistics only when there were samples, and counts them
/// in the right number.
#[test]
fn reply_rate_statistics_only_with_samples() {
    let mut s = serve("load-samples", &[], |_| {});
    let port = s.addr.port().to_string();
    let run = |interval: &str| {
        let o = load(&[
            "--port",
            &port,
            "--uri",
            "/one",
            "--rate",
            "100",
            "--num-conns",
            "10",
            "--sample-interval",
            interval,
        ]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{out}\n{err}");
        out
    };
    // 10 starts at 100/s: about 0.1 s, far shorter than a 1000 s interval.
    let out = run("1000");
    let line = out
        .lines()
        .find(|l| l.starts_with("Reply rate [replies/s]:"))
        .unwrap();
    assert!(
        line.contains("shorter than one") && !line.contains("min ") && !line.contains("max "),
        "{line}"
    );
    // 0.05 s intervals: at least one whole one, and the count agrees in number.
    let out = run("0.05");
    let line = out
        .lines()
        .find(|l| l.starts_with("Reply rate [replies/s]:"))
        .unwrap();
    assert!(
        line.contains(" min ") && line.contains(" stddev "),
        "{line}"
    );
    let n = field(line, "(") as u64;
    assert!(n >= 1, "{line}");
    assert!(
        line.ends_with(if n == 1 { "(1 sample)" } else { "samples)" }),
        "{line}"
    );
    common::stop_serve(&mut s);
}

/// The target as a URL, as wrk and oha take it; the report's first line is the command as given
/// (it runs again exactly); a URL beside --port is a usage error.
#[test]
fn a_url_names_the_target_and_the_header_reruns_the_command() {
    let mut s = serve("load-url", &[], |_| {});
    let url = format!("http://127.0.0.1:{}/one", s.addr.port());
    let args = [url.as_str(), "--rate", "100", "--num-conns", "5"];
    let o = load(&args);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let first = out.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "evlab load {} (to 127.0.0.1:{})",
            args.join(" "),
            s.addr.port()
        )
    );
    assert!(out.contains("replies 5 "), "{out}");
    let o = load(&[
        url.as_str(),
        "--port",
        "1",
        "--rate",
        "1",
        "--num-conns",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let o = load(&["https://127.0.0.1/", "--rate", "1", "--num-conns", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("not TLS"));
    common::stop_serve(&mut s);
}

/// The text report leads with what wrk2 and oha show first (requests/s, success, errors,
/// latency percentiles); `--latency` adds the distribution, `--httperf` leaves httperf's block
/// alone.
#[test]
fn the_report_leads_with_rate_success_errors_and_latency() {
    let mut s = serve("load-lead", &[], |_| {});
    let url = format!("http://127.0.0.1:{}/one", s.addr.port());
    let base = [url.as_str(), "--rate", "200", "--num-conns", "20"];
    let o = load(&base);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[1].starts_with("Summary: "), "{out}");
    assert!(
        lines[1].contains("requests/s answered 2xx/3xx")
            && lines[1].contains("success 100.00% of 20 requests")
            && lines[1].contains("errors 0.00% of 20 connections"),
        "{}",
        lines[1]
    );
    assert!(lines[2].starts_with("Summary latency [ms]: p50 "), "{out}");
    assert!(
        out.contains("\nTotal: connections 20 "),
        "httperf's block follows: {out}"
    );
    assert!(!out.contains("Latency distribution"), "{out}");

    let mut with = base.to_vec();
    with.push("--latency");
    let (out, _) = text(&load(&with));
    let at = out.find("Latency distribution [ms]").expect("--latency");
    let rows: Vec<&str> = out[at..]
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(rows.len(), 7, "{rows:?}");
    assert!(rows[6].trim_start().starts_with("100%"), "{rows:?}");

    let mut only = base.to_vec();
    only.push("--httperf");
    let (out, _) = text(&load(&only));
    assert!(!out.contains("Summary"), "{out}");
    assert!(out.lines().nth(1).unwrap().starts_with("Total: "), "{out}");
    common::stop_serve(&mut s);
}

/// A run that ends inside a sample interval: that interval is marked partial, ends with the
/// run, and its rate is over what it covered (50/s, not a false drop to 25/s), in the JSON and
/// the CSV alike. The duration is given with a unit.
#[test]
fn the_last_sample_interval_is_marked_partial() {
    let dir = scratch("partial");
    let (json, csv) = (dir.join("r.json"), dir.join("s.csv"));
    let mut s = serve("load-partial", &[], |_| {});
    let port = s.addr.port().to_string();
    let o = load(&[
        "--port",
        &port,
        "--uri",
        "/one",
        "--rate",
        "50",
        "--duration",
        "1480ms",
        "--sample-interval",
        "1",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
        "--samples",
        csv.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    common::stop_serve(&mut s);
    let r: LoadReport = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r.samples.len(), 2, "{:?}", r.samples);
    let (first, last) = (&r.samples[0], &r.samples[1]);
    assert!(!first.partial && first.end_s == 1.0, "{first:?}");
    assert!(last.partial, "{last:?}");
    assert!(
        (last.end_s - r.duration_s).abs() < 1e-9,
        "{last:?} {}",
        r.duration_s
    );
    assert!(last.end_s > 1.4 && last.end_s < 2.0, "{last:?}");
    // 24 or 25 starts in 0.48 s at 50/s: about 50 per second over the part covered.
    assert!(last.reply_rate > 35.0 && last.reply_rate < 70.0, "{last:?}");
    let rows: Vec<String> = std::fs::read_to_string(&csv)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(rows[0], "sample,start_s,end_s,replies,reply_rate,partial");
    assert!(
        rows[1].ends_with(",0") && rows[2].ends_with(",1"),
        "{rows:?}"
    );
    // Only the whole interval counts in the reply-rate statistics, as httperf.
    assert_eq!(r.replies.rate.samples, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ctrl-C on a long run: the report of what was done so far on stdout, the JSON written and
/// marked interrupted, exit status 130.
#[test]
fn sigint_prints_the_summary_and_writes_the_json() {
    let mut s = serve("load-sigint", &["--stats"], |_| {});
    let dir = scratch("sigint");
    let json = dir.join("run.json");
    let mut child = Command::new(BIN)
        .args(["load", "--port", &s.addr.port().to_string()])
        .args(["--uri", "/one", "--rate", "100", "--duration", "3600"])
        // 20 replies take 0.2 s of schedule at least: whole sample intervals, so every line.
        .args(["--sample-interval", "0.05"])
        .arg("--json")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Progress: the server has answered 20 of its requests (our own stats requests aside).
    let t0 = Instant::now();
    let mut polls = 0;
    loop {
        polls += 1;
        let served = stats(&s).requests;
        if served >= 20 + polls {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "evlab load made no progress: {served} requests served"
        );
        assert!(child.try_wait().unwrap().is_none(), "evlab load exited");
        std::thread::sleep(Duration::from_millis(20));
    }
    evlab_sys::kill(child.id(), libc::SIGINT).unwrap();
    let st = common::wait_within(&mut child, Duration::from_secs(30), "evlab load");
    common::assert_gone(child.id());
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(st.code(), Some(130), "{out}\n{err}");
    assert!(err.contains("interrupted after"), "{err}");
    for l in HTTPERF_LABELS {
        assert!(out.contains(l), "the summary lacks '{l}':\n{out}");
    }
    let replies = field(&out, " replies ") as u64;
    assert!(replies >= 1, "{out}");
    let r: LoadReport =
        serde_json::from_slice(&std::fs::read(&json).expect("the JSON was written")).unwrap();
    assert!(r.interrupted);
    assert_eq!(r.replies.total, replies, "the JSON and the text agree");
    assert_eq!(r.config.duration_s, Some(3600.0));
    assert!(r.duration_s < 3600.0, "{}", r.duration_s);
    common::stop_serve(&mut s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The server's stats page.
fn stats(s: &Serve) -> ServerStats {
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    std::io::Write::write_all(&mut c, b"GET /.evlab/stats HTTP/1.0\r\nHost: t\r\n\r\n").unwrap();
    let mut body = String::new();
    c.read_to_string(&mut body).unwrap();
    serde_json::from_str(&body[body.find("\r\n\r\n").unwrap() + 4..]).unwrap()
}

/// `--json -`: the JSON alone on stdout, the text report on stderr; with --quiet, no report.
#[test]
fn json_to_stdout_moves_the_report_to_stderr() {
    let mut s = serve("load-stdout", &[], |_| {});
    let port = s.addr.port().to_string();
    let args = ["--port", &port, "--uri", "/one", "--rate", "200"];
    let o = load(&[&args[..], &["--num-conns", "10", "--json", "-"]].concat());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let r: LoadReport = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{out}"));
    assert_eq!(r.replies.total, 10);
    assert!(
        err.contains("Total: connections 10 requests 10 replies 10 "),
        "{err}"
    );
    assert!(!std::path::Path::new("-").exists(), "no file named -");
    let o = load(&[&args[..], &["--num-conns", "5", "--json", "-", "--quiet"]].concat());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(serde_json::from_str::<LoadReport>(&out).is_ok(), "{out}");
    assert!(!err.contains("Total:"), "--quiet prints no report: {err}");
    common::stop_serve(&mut s);
}

/// Outputs are checked before the run: a long run against a server that is there still fails
/// at once when its --json or --samples cannot be written, naming the path and why; --quiet
/// with nothing to write is refused.
#[test]
fn outputs_are_checked_before_the_run() {
    let mut s = serve("load-outputs", &["--stats"], |_| {});
    let dir = scratch("outputs");
    std::fs::write(dir.join("file"), "x").unwrap();
    let port = s.addr.port().to_string();
    let long = [
        "--port",
        &port,
        "--uri",
        "/one",
        "--rate",
        "1",
        "--num-conns",
        "3600",
    ];
    let missing = dir.join("missing").join("x.json");
    let under_file = dir.join("file").join("s.csv");
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["--json", missing.to_str().unwrap()],
            format!(
                "--json {}: the directory {} does not exist",
                missing.display(),
                dir.join("missing").display()
            ),
        ),
        (
            vec!["--samples", under_file.to_str().unwrap()],
            format!("--samples {}: ", under_file.display()),
        ),
        (
            vec!["--json", dir.to_str().unwrap()],
            format!("--json {}: is a directory", dir.display()),
        ),
        (
            vec!["--quiet"],
            "--quiet without --json, --samples or --latencies would write nothing".into(),
        ),
        (
            vec!["--json", "-", "--samples", "-"],
            "--json and --samples cannot all go to stdout".into(),
        ),
        (
            vec!["--latencies", "-", "--samples", "-"],
            "--samples and --latencies cannot all go to stdout".into(),
        ),
        (
            vec!["--latencies", under_file.to_str().unwrap()],
            format!("--latencies {}: ", under_file.display()),
        ),
    ];
    for (extra, want) in cases {
        let mut child = Command::new(BIN)
            .arg("load")
            .args(long)
            .args(&extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The run would take an hour; the check takes no time at all.
        let st = common::wait_within(&mut child, Duration::from_secs(30), "evlab load");
        common::assert_gone(child.id());
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        // Flags that cannot go together are the command line's error (2); a path that cannot
        // be written is the run's (1).
        let usage = want.contains("--quiet without") || want.contains("cannot all go");
        assert_eq!(
            st.code(),
            Some(if usage { 2 } else { 1 }),
            "{extra:?}: {err}"
        );
        assert!(
            err.contains(&want),
            "{extra:?}: stderr lacks '{want}': {err}"
        );
    }
    assert!(!missing.exists() && !dir.join("missing").exists());
    // No run started: the only connection the server ever accepted is this stats request's.
    assert_eq!(stats(&s).connections.accepted, 1);
    common::stop_serve(&mut s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The server's open-connection count from its stats page.
fn open_conns(s: &Serve) -> u64 {
    stats(s).connections.active - 1 // this one
}

#[test]
fn idle_holds_connections_until_sigterm() {
    let s = serve("idle", &["--stats", "--header-timeout", "0"], |_| {});
    let mut idle = spawn(
        Command::new(BIN)
            .args(["idle", "--port", &s.addr.port().to_string(), "300"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) && open_conns(&s) < 300 {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    let held = open_conns(&s);
    assert_eq!(held, 300, "connections the server sees open");
    let status = sigterm_and_wait(&mut idle);
    assert!(status.success(), "{status:?}");
    let mut out = String::new();
    idle.stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    idle.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        format!("{out}{err}").contains("300"),
        "no count of 300 in the output: {out}\n{err}"
    );
    let left = idle.stop(Duration::from_secs(2));
    assert!(left.is_empty(), "evlab idle left {left:?}");
}

/// `evlab idle --request-first` (deadconn_last): every connection comes up, sends one GET and
/// gets exactly one reply, and the server counts those requests; the connections then stay open.
#[test]
fn idle_request_first_sends_one_request_per_connection() {
    const N: u64 = 200;
    let s = serve("idle-rf", &["--stats", "--header-timeout", "0"], |_| {});
    let before = stats(&s).requests;
    let mut idle = spawn(
        Command::new(BIN)
            .args(["idle", "--port", &s.addr.port().to_string()])
            .args(["--request-first", "--uri", "/one", &N.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    // The `all up` line comes only once every reply is in.
    let mut out = std::io::BufReader::new(idle.stdout.take().unwrap());
    let want = format!("idle: all {N} connections up");
    let mut line = String::new();
    loop {
        line.clear();
        let n = std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert!(n > 0, "evlab idle ended before {want:?}");
        if line.starts_with(&want) {
            break;
        }
    }
    let v = stats(&s);
    // This stats request and the one before count too.
    assert_eq!(
        v.requests - before,
        N + 1,
        "requests the server counted: {v:?}"
    );
    assert_eq!(open_conns(&s), N, "connections the server sees open");
    let status = sigterm_and_wait(&mut idle);
    assert!(status.success(), "{status:?}");
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(
        rest.contains(&format!(
            "request-first: requests {N} replies {N} (2xx {N}) awaiting 0"
        )),
        "summary: {rest}"
    );
    let left = idle.stop(Duration::from_secs(2));
    assert!(left.is_empty(), "evlab idle left {left:?}");
}

#[test]
fn fileset_makes_the_specweb_set() {
    let dir = scratch("fileset");
    let set = dir.join("set");
    let o = Command::new(BIN)
        .args(["fileset", set.to_str().unwrap(), "--dirs", "2"])
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let mut files = 0;
    let mut bytes = 0;
    for d in std::fs::read_dir(&set).unwrap().flatten() {
        if d.path().is_dir() {
            walk(&d.path(), &mut |p| {
                files += 1;
                bytes += std::fs::metadata(p).unwrap().len();
            });
        }
    }
    assert_eq!(files, 72, "2 directories x 36 files");
    assert!(set.join("one").is_file() && set.join(".evlab-fileset").is_file());
    assert_eq!(bytes, 2 * 5_119_484, "the SPECweb99 bytes per directory");
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk(d: &Path, f: &mut dyn FnMut(&Path)) {
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, f);
        } else {
            f(&p);
        }
    }
}

/// A server of the test's own on a real socket that answers every other connection and closes
/// the others unanswered: exactly half the connections end in an error.
fn half_failing_server(conns: usize) -> (u16, std::thread::JoinHandle<()>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        for i in 0..conns {
            let (mut c, _) = l.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            if i % 2 == 0 {
                let _ = std::io::Write::write_all(
                    &mut c,
                    b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\na",
                );
            }
            // Dropped: closed, answered or not.
        }
    });
    (port, t)
}

/// Thresholds decide the exit status: by default at most 1% of connections in error, so half
/// of them failing exits 99 saying so; `--max-error-rate` is `errors<=SHARE`, a threshold on a
/// metric replaces its default, and `none` drops the defaults.
#[test]
fn thresholds_decide_the_exit_status() {
    for (extra, want) in [
        (vec![], Some("errors 50.00% (threshold errors<=1%)")),
        (vec!["--max-error-rate", "60%"], None),
        (
            vec!["--max-error-rate", "0.1"],
            Some("errors 50.00% (threshold errors<=10% (--max-error-rate))"),
        ),
        (vec!["--threshold", "errors<60%"], None),
        (vec!["--threshold", "none"], None),
        (
            vec!["--threshold", "none", "--threshold", "rate>0.9"],
            Some("rate 50.00% (threshold rate>0.9)"),
        ),
    ] {
        let (port, server) = half_failing_server(10);
        let port = port.to_string();
        let mut args = vec!["--port", &port, "--uri", "/one", "--rate", "100"];
        args.extend(["--num-conns", "10"]);
        args.extend(extra.iter().copied());
        let o = load(&args);
        server.join().unwrap();
        let (out, err) = text(&o);
        assert!(out.contains("replies 5 "), "{extra:?}: {out}");
        assert_eq!(field(&out, "Errors: total "), 5.0, "{extra:?}: {out}");
        match want {
            None => assert!(o.status.success(), "{extra:?}: {err}"),
            Some(why) => {
                assert_eq!(o.status.code(), Some(99), "{extra:?}: {err}");
                assert!(err.contains(why), "{extra:?}: {err}");
                assert_eq!(err.lines().count(), 1, "one line of reason: {err}");
            }
        }
    }
    let o = load(&["--rate", "1", "--num-conns", "1", "--max-error-rate", "2"]);
    assert_eq!(o.status.code(), Some(2), "a share above 1 is a usage error");
    assert!(text(&o).1.contains("not a share of connections"));
    let o = load(&["--rate", "1", "--num-conns", "1", "--threshold", "p99<fast"]);
    assert_eq!(o.status.code(), Some(2), "a bad threshold is a usage error");
    assert!(text(&o).1.contains("not a duration"), "{}", text(&o).1);
}

/// A run of nothing but 404s, and a run whose server goes away part-way, are failures by
/// default (exit 99), not clean runs.
#[test]
fn only_404s_or_a_server_gone_mid_run_exit_non_zero() {
    let mut s = serve("load-404", &[], |_| {});
    let port = s.addr.port().to_string();
    let o = load(&["--port", &port, "--uri", "/nothing-here", "--rate", "200"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "no --num-conns or --duration: usage"
    );
    let o = load(&[
        "--port",
        &port,
        "--uri",
        "/nothing-here",
        "--rate",
        "200",
        "--num-conns",
        "40",
    ]);
    let (out, err) = text(&o);
    assert!(out.contains("4xx=40"), "{out}");
    assert_eq!(o.status.code(), Some(99), "{err}");
    assert!(
        err.contains("failed 100.00% (threshold failed<=1%)"),
        "{err}"
    );

    // The server stops 1 s into a 3 s run: its later connections are refused.
    let mut child = Command::new(BIN)
        .args(["load", "--port", &port, "--uri", "/one", "--rate", "100"])
        .args(["--duration", "3s", "--timeout", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    common::stop_serve(&mut s);
    let st = common::wait_within(&mut child, Duration::from_secs(30), "evlab load");
    common::assert_gone(child.id());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(st.code(), Some(99), "{err}");
    assert!(
        err.contains("errors ") && err.contains("(threshold errors<=1%)"),
        "{err}"
    );
}

/// `evlab idle` whose connections never all come up exits with status 1 and says how many did.
#[test]
fn idle_fails_when_not_all_connections_come_up() {
    // A port that nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut child = Command::new(BIN)
        .args(["idle", "--port", &port, "--duration", "0.5", "5"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let st = common::wait_within(&mut child, Duration::from_secs(30), "evlab idle");
    common::assert_gone(child.id());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(
        err.contains("not all connections came up: at most 0 of 5 were up at once"),
        "{err}"
    );
}

/// `evlab fileset --polymix` writes the origin's set, `evlab serve --no-store-prefix
/// --origin-delay` serves it, and `evlab load --polymix` asks for it: every reply a 2xx, each
/// delayed, the uncacheable ones marked.
#[test]
fn polymix_workload_against_a_delaying_origin() {
    let s = serve(
        "load-polymix",
        &[
            "--stats",
            "--no-store-prefix",
            "/polymix/u/",
            "--origin-delay",
            "5",
            "--origin-delay-sd",
            "2",
        ],
        |_| {},
    );
    // A deviation needs its mean.
    let o = Command::new(BIN)
        .args([
            "serve",
            "--root",
            "/tmp",
            "--listen",
            "127.0.0.1:0",
            "--origin-delay-sd",
            "2",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(text(&o).1.contains("--origin-delay"), "{}", text(&o).1);
    let dir = s.dir.to_str().unwrap();
    let o = Command::new(BIN)
        .args(["fileset", dir, "--polymix", "300", "--force"])
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("600 files"), "{out}");
    let port = s.addr.port().to_string();
    let o = load(&[
        "--port",
        &port,
        "--polymix",
        dir,
        "--rate",
        "200",
        "--num-conns",
        "20",
        "--json",
        "-",
        "--quiet",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let v: LoadReport = serde_json::from_str(&out).unwrap();
    let replies = v.replies.total;
    assert!(replies >= 20, "{v:?}");
    assert_eq!(v.replies.status.s2xx, replies, "{v:?}");
    let workload = v.config.workload.as_deref().unwrap_or_default();
    assert!(workload.starts_with("polymix:"), "{workload}");
    let st = stats(&s);
    assert_eq!(st.timers.delayed, replies, "{st:?}");
    // The uncacheable objects say so; the cacheable ones do not.
    for (path, no_store) in [("/polymix/u/000007", true), ("/polymix/c/000007", false)] {
        let mut c = TcpStream::connect(s.addr).unwrap();
        let req = format!("HEAD {path} HTTP/1.0\r\nHost: t\r\n\r\n");
        std::io::Write::write_all(&mut c, req.as_bytes()).unwrap();
        let mut head = String::new();
        c.read_to_string(&mut head).unwrap();
        assert!(head.starts_with("HTTP/1.0 200"), "{head}");
        assert_eq!(head.contains("Cache-Control: no-store"), no_store, "{head}");
    }
}
