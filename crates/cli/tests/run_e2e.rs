//! `evlab run` end to end on 127.0.0.1: a tiny real experiment, the failure path, `evlab report`
//! re-rendering, and Ctrl-C. Each run is bounded (points of ~1 s at low rates).

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;

use common::Scratch;
use evlab_lab::model::results::{PointResult, Status, Summary};
use evlab_lab::run::procs::{tree_snapshot, ProcessGroup};
use evlab_wire::load::LoadReport;

fn evlab() -> &'static str {
    env!("CARGO_BIN_EXE_evlab")
}

fn scratch(tag: &str) -> Scratch {
    common::scratch(&format!("evlab-run-e2e-{tag}"))
}

fn run(spec: &str, dir: &Path, extra: &[&str]) -> Output {
    let f = dir.join("spec.toml");
    std::fs::write(&f, spec).unwrap();
    let t = Instant::now();
    let out = Command::new(evlab())
        .arg("run")
        .arg(&f)
        .arg("--out")
        .arg(dir.join("out"))
        .args(extra)
        .output()
        .unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "a test run must stay short"
    );
    out
}

const FILES: &[&str] = &[
    "samples.csv",
    "points.csv",
    "summary.json",
    "report.md",
    "report.html",
    "fig-cpu-idle0.svg",
];

fn read(dir: &Path, f: &str) -> String {
    std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"))
}

/// A run's summary.json, read as the lab's own type.
fn summary(out: &Path) -> Summary {
    serde_json::from_str(&read(out, "summary.json")).unwrap()
}

/// Re-renders in a copy and checks every report file is byte-identical.
fn check_rerender(out: &Path) {
    let copy = out.with_file_name("rerendered");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::copy(out.join("summary.json"), copy.join("summary.json")).unwrap();
    let r = Command::new(evlab())
        .arg("report")
        .arg(&copy)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    for e in std::fs::read_dir(out).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        if name.starts_with("report.") || name.ends_with(".svg") {
            assert_eq!(
                read(out, &name),
                read(&copy, &name),
                "{name} differs when re-rendered"
            );
        }
    }
}

#[test]
fn tiny_experiment_end_to_end() {
    let d = scratch("tiny");
    let spec = "name = \"tiny\"\nmechanisms = [\"select\", \"epoll-et\"]\nrates = [100, 200]\n\
                idle = [0]\nduration_s = 1\ntimeout_s = 2\n";
    let o = run(spec, &d, &[]);
    let out = d.join("out");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in FILES {
        assert!(out.join(f).is_file(), "missing {f}");
    }
    // 100 and 200/s are answered in full: no reply-rate figure (it would be y = x), and the
    // report says why.
    assert!(!out.join("fig-replies-idle0.svg").exists());
    assert!(read(&out, "report.md").contains("Every point answered what it was offered"));
    let svg = read(&out, "fig-cpu-idle0.svg");
    assert_eq!(
        svg.matches("<polyline").count(),
        2,
        "one line per mechanism"
    );
    for m in ["select", "epoll-et"] {
        assert!(
            svg.contains(&format!("data-series=\"{m}\"")),
            "no line for {m}"
        );
    }
    let html = read(&out, "report.html");
    assert!(
        html.contains("<svg") && !html.contains("src=\"fig-"),
        "self-contained"
    );
    let points = read(&out, "points.csv");
    assert_eq!(points.lines().count(), 5, "{points}");
    let pts = summary(&out).points;
    assert_eq!(pts.len(), 4);
    for p in &pts {
        assert_eq!(p.status, Status::Ok, "{p:?}");
        let r = p.reply_rate().unwrap_or(0.0);
        let rate = p.rate;
        assert!(r > 0.5 * rate, "reply rate {r} at {rate}/s: {p:?}");
        assert!(p.server.as_ref().is_some_and(|s| s.requests > 0), "{p:?}");
        assert!(p.commands.len() >= 2, "{p:?}");
    }
    assert!(read(&out, "samples.csv").lines().count() > 1, "no samples");
    let md = read(&out, "report.md");
    for s in [
        "kernel",
        "evlab run",
        "Server CPU time per reply",
        "evlab serve",
    ] {
        assert!(md.contains(s), "report.md lacks {s}");
    }
    check_rerender(&out);
    d.finish();
}

#[test]
fn failed_points_are_recorded_and_the_sweep_goes_on() {
    let d = scratch("fail");
    // A flag evlab serve refuses: every point fails at start-up, with the reason kept.
    let spec = "name = \"failing\"\nmechanisms = [\"poll\", \"epoll-lt\"]\nrates = [100, 200]\n\
                server_flags = [\"--no-such-flag\"]\nduration_s = 1\n";
    let o = run(spec, &d, &["--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = d.join("out");
    for f in [
        "samples.csv",
        "points.csv",
        "summary.json",
        "report.md",
        "report.html",
    ] {
        assert!(out.join(f).is_file(), "missing {f}");
    }
    let pts = summary(&out).points;
    assert_eq!(pts.len(), 4, "every point is attempted");
    for p in &pts {
        assert_eq!(p.status, Status::Failed, "{p:?}");
        let why = p.reason.as_deref().expect("a failed point's reason");
        assert!(
            why.contains("no-such-flag") || why.contains("exited"),
            "{why}"
        );
    }
    assert!(read(&out, "report.md").contains("Failed points"));
    check_rerender(&out);
    d.finish();
}

#[test]
fn unsupported_or_missing_series_are_skipped_with_a_reason() {
    let d = scratch("skip");
    let spec = "name = \"skip\"\nmechanisms = [\"poll\", \"lighttpd:select\"]\nrates = [100]\n\
                server_flags = [\"--no-such-flag\"]\nduration_s = 1\n";
    let o = run(spec, &d, &["--quiet"]);
    assert!(o.status.success());
    let skipped = summary(&d.join("out")).skipped;
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0].series, "lighttpd:select");
    assert!(!skipped[0].reason.is_empty(), "{skipped:?}");
    d.finish();
}

#[test]
fn ctrl_c_stops_cleanly_and_writes_what_is_done() {
    let d = scratch("int");
    let f = d.join("spec.toml");
    std::fs::write(
        &f,
        "name = \"int\"\nmechanisms = [\"epoll-et\"]\nrates = [100, 100, 100, 100, 100, 100]\n\
         idle = [50]\nduration_s = 2\n",
    )
    .unwrap();
    // A process group of its own, stopped with it if an assertion fails.
    let mut c = ProcessGroup::spawn(
        Command::new(evlab())
            .arg("run")
            .arg(&f)
            .arg("--out")
            .arg(d.join("out"))
            .arg("--quiet"),
    )
    .unwrap();
    let summary = d.join("out/summary.json");
    let t = Instant::now();
    // Wait for the first point to be written, then interrupt the second while its server
    // and clients run.
    let first_written = || {
        std::fs::read_to_string(&summary)
            .ok()
            .and_then(|s| serde_json::from_str::<Summary>(&s).ok())
            .is_some_and(|s| s.points.iter().any(|p| p.index == 1))
    };
    while !first_written() {
        assert!(t.elapsed() < Duration::from_secs(30), "no point finished");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(800));
    let tree = loop {
        let tree = tree_snapshot(c.pid());
        if tree.len() >= 3 {
            break tree; // evlab run, its server, its idle holder (and maybe its load)
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no point running");
        std::thread::sleep(Duration::from_millis(20));
    };
    evlab_sys::kill(c.pid(), libc::SIGINT).unwrap();
    let status = c.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(t.elapsed() < Duration::from_secs(40));
    // The lab stopped every process it started (each is in a group of its own, out of ours).
    let left: Vec<u32> = tree.iter().filter(|p| p.alive()).map(|p| p.pid).collect();
    assert!(left.is_empty(), "evlab run left {left:?} after Ctrl-C");
    assert!(c.stop(Duration::from_secs(1)).is_empty());
    let out = d.join("out");
    let s = self::summary(&out);
    assert!(s.interrupted);
    let s_seed = s.experiment.order_seed;
    let n = s.points.len();
    assert!((1..6).contains(&n), "{n} points");
    assert!(d.join("out/report.html").is_file());

    // `--resume` goes on with it: the valid points are kept as they were, the interrupted one
    // and the missing ones measured, into the same directory.
    let valid = |p: &PointResult| p.status == Status::Ok && p.flags.is_empty();
    let kept: Vec<PointResult> = s.points.into_iter().filter(valid).collect();
    let o = Command::new(evlab())
        .arg("run")
        .arg("--resume")
        .arg(d.join("out"))
        .arg("--quiet")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // One line per point measured now, none for those kept.
    let lines = err
        .lines()
        .filter(|l| l.contains(" idle=50 rate=100"))
        .count();
    assert_eq!(lines, 6 - kept.len(), "{err}");
    let r = self::summary(&out);
    assert!(!r.interrupted);
    // The arms' order was drawn once, recorded, and kept by the resumed run.
    assert!(r.experiment.order_seed.is_some());
    assert_eq!(r.experiment.order_seed, s_seed);
    let points = &r.points;
    assert_eq!(points.len(), 6, "{r:?}");
    // Measured to the end (a busy machine may flag one, which a later --resume measures again).
    assert!(points.iter().all(|p| p.status == Status::Ok), "{r:?}");
    for k in &kept {
        assert!(points.contains(k), "point {} not kept as it was", k.index);
    }
    // Each point's raw report is there, and no other.
    let mut raw: Vec<String> = std::fs::read_dir(d.join("out/load"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    raw.sort();
    let mut want: Vec<String> = points
        .iter()
        .map(|p| format!("point-{:03}.json", p.index))
        .collect();
    want.sort();
    assert_eq!(raw, want);
    assert_eq!(r.resumed.len(), 1, "{:?}", r.resumed);
    let res = &r.resumed[0];
    assert_eq!(res.kept_points, kept.len());
    assert_eq!(res.measured_points, 6 - kept.len());
    assert!(read(&d.join("out"), "report.md").contains(&format!(
        "{} valid point(s) and 0 capacity search(es) kept; {} point(s)",
        kept.len(),
        6 - kept.len()
    )));
    // A directory that is not a run's is refused, naming it.
    let o = Command::new(evlab())
        .args(["run", "--resume"])
        .arg(&*d)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no summary.json"));
    d.finish();
}

#[test]
fn non_2xx_replies_are_flagged() {
    let d = scratch("non2xx");
    let uris = d.join("uris.txt");
    std::fs::write(&uris, "/does-not-exist\n").unwrap();
    // Every reply is a 404: the point must not pass for a measurement of the server.
    let spec = format!(
        "name = \"non2xx\"\nmechanisms = [\"epoll-et\"]\nworkload = {{ uri_list = \"{}\" }}\n\
         rates = [200]\nduration_s = 1\n",
        uris.display()
    );
    let o = run(&spec, &d, &["--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let flags = &summary(&d.join("out")).points[0].flags;
    assert!(flags.iter().any(|f| f.contains("not serving")), "{flags:?}");
    d.finish();
}

/// A `[proxy]` experiment: three processes per point (the origin, the proxy, the load), the
/// Polymix-like workload over a file set the run makes (and one of a series' own object size),
/// CPU per reply measured on the proxy, and nothing left running after the run.
#[test]
fn proxy_experiment_end_to_end() {
    let d = scratch("proxy");
    let f = d.join("spec.toml");
    std::fs::write(
        &f,
        r#"name = "px"
workload = "polymix"
polymix_objects = 100
rates = [10]
duration_s = 1.5
timeout_s = 5

[proxy]
origin_flags = ["--origin-delay", "5"]

[[series]]
label = "epoll-et copy"
mechanism = "epoll-et"
flags = ["--forward", "copy"]

[[series]]
label = "poll splice 8K"
mechanism = "poll"
flags = ["--forward", "splice"]
object_size = "8K"
"#,
    )
    .unwrap();
    let mut c = ProcessGroup::spawn(
        Command::new(evlab())
            .arg("run")
            .arg(&f)
            .arg("--out")
            .arg(d.join("out"))
            .arg("--quiet"),
    )
    .unwrap();
    let t = Instant::now();
    // evlab run, the origin, the proxy and the load, all at once during a point.
    let tree = loop {
        let tree = tree_snapshot(c.pid());
        if tree.len() >= 4 {
            break tree;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no point with 3 processes"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let status = c.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(t.elapsed() < Duration::from_secs(60));
    let left: Vec<u32> = tree.iter().filter(|p| p.alive()).map(|p| p.pid).collect();
    assert!(left.is_empty(), "evlab run left {left:?}");
    let out = d.join("out");
    let pts = summary(&out).points;
    assert_eq!(pts.len(), 2, "{pts:?}");
    for p in &pts {
        check_proxy_point(p);
        let all = p.commands.join("\n");
        for want in [
            " proxy ",
            "--origin ",
            "origin=$!",
            "kill $origin",
            "--polymix ",
        ] {
            assert!(all.contains(want), "commands lack `{want}`:\n{all}");
        }
    }
    // The 8K series read its own file set: every reply body 8 KiB (the trial visits its arms
    // in a drawn order: find it by name).
    let p = pts
        .iter()
        .find(|p| p.series == "poll splice 8K")
        .unwrap_or_else(|| panic!("no 8K point: {pts:?}"));
    let cmds = p.commands.join("\n");
    assert!(cmds.contains("--object-size 8K"), "{cmds}");
    let raw = read(&out, &format!("load/point-{:03}.json", p.index));
    let v: LoadReport = serde_json::from_str(&raw).unwrap();
    let content = v.replies.size.content;
    assert_eq!(content, 8192.0, "{v:?}");
    assert!(c.stop(Duration::from_secs(1)).is_empty());
    d.finish();
}

/// A `[proxy]` point measured: replies, none of them errors, the proxy's CPU per reply.
fn check_proxy_point(p: &PointResult) {
    assert_eq!(p.status, Status::Ok, "{p:?}");
    let load = p.load.as_ref().expect("the point's load");
    assert!(load.replies.is_some_and(|n| n > 0), "{p:?}");
    assert_eq!(load.errors.total, Some(0), "{p:?}");
    assert!(p.server_cpu_us_per_reply.is_some_and(|x| x > 0.0), "{p:?}");
}

/// The proxy peers of a `[proxy]` experiment: HAProxy (and nginx `proxy_pass`, where
/// installed) started by the lab from its generated config on a free port, in front of the
/// run's origin, measured like `evlab proxy` (replies, no errors, its CPU per reply), the config
/// recorded with the commands, and nothing left running. Without HAProxy: skipped with the
/// reason (a failure under EVLAB_REQUIRE).
#[test]
fn proxy_peers_end_to_end() {
    if !evlab_poll::testing::program("haproxy") {
        return;
    }
    let mut peers = vec![("haproxy", "haproxy")];
    if evlab_poll::testing::program("nginx") {
        peers.push(("nginx proxy_pass", "nginx"));
    }
    let d = scratch("proxy-peers");
    let mut spec = String::from(
        "name = \"px-peers\"\nworkload = \"polymix\"\npolymix_objects = 100\nrates = [10]\n\
         duration_s = 1.5\ntimeout_s = 5\n\n[proxy]\norigin_flags = [\"--origin-delay\", \"5\"]\n",
    );
    for (label, m) in &peers {
        spec.push_str(&format!(
            "\n[[series]]\nlabel = \"{label}\"\nmechanism = \"{m}\"\n"
        ));
    }
    let f = d.join("spec.toml");
    std::fs::write(&f, spec).unwrap();
    let mut c = ProcessGroup::spawn(
        Command::new(evlab())
            .arg("run")
            .arg(&f)
            .arg("--out")
            .arg(d.join("out"))
            .arg("--quiet"),
    )
    .unwrap();
    let t = Instant::now();
    // Everything the run started while it ran (evlab run, the origin, a peer, the load).
    let mut seen = Vec::new();
    let status = loop {
        for p in tree_snapshot(c.pid()) {
            if !seen
                .iter()
                .any(|s: &evlab_lab::run::procs::Seen| s.pid == p.pid)
            {
                seen.push(p);
            }
        }
        if let Some(st) = c.try_wait().unwrap() {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the run took too long"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    let left: Vec<u32> = seen.iter().filter(|p| p.alive()).map(|p| p.pid).collect();
    assert!(left.is_empty(), "evlab run left {left:?}");
    let out = d.join("out");
    let pts = summary(&out).points;
    assert_eq!(pts.len(), peers.len(), "{pts:?}");
    // The trial visits its arms in a drawn order: each peer's point found by its label.
    for (label, m) in peers.iter() {
        let p = pts
            .iter()
            .find(|p| p.series == *label)
            .unwrap_or_else(|| panic!("no point of {label}: {pts:?}"));
        check_proxy_point(p);
        let all = p.commands.join("\n");
        let want: &[&str] = if *m == "haproxy" {
            &[
                "haproxy -db -f ",
                "option splice-auto",
                "nbthread 1",
                "origin=$!",
            ]
        } else {
            &["nginx -p ", "proxy_pass http://origin", "origin=$!"]
        };
        for w in want {
            assert!(all.contains(w), "{label}: commands lack `{w}`:\n{all}");
        }
    }
    assert!(c.stop(Duration::from_secs(1)).is_empty());
    d.finish();
}
