//! The micro-benchmark subcommands (`pipetest`, `herd`, `micro fdalloc`, `micro malloc`), each
//! run by the real binary in a tiny configuration. Only what does not depend on speed is
//! checked: the structure of the JSON and the benchmark's invariants (pass counts, accept
//! counts, descriptor numbers). Every run is in a process group of its own, which is killed and
//! checked gone afterwards, forked workers included.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use evlab_poll::{Kind, Mechanism};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_evlab");

struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `evlab ARGS` in a new process group; kills the group after `limit`, and in any case
/// once the command has ended, then waits until no process of the group is left.
fn evlab(args: &[&str], limit: Duration) -> Out {
    let mut child = Command::new(BIN)
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn evlab");
    let pgid = child.id();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(limit).is_err() {
            let _ = evlab_sys::kill_process_group(pgid, libc::SIGKILL);
            return true;
        }
        false
    });
    let mut stdout = String::new();
    let mut stderr = String::new();
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let errs = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let _ = so.read_to_string(&mut stdout);
    stderr.push_str(&errs.join().unwrap());
    let status = child.wait().expect("wait evlab");
    let _ = done_tx.send(());
    let timed_out = watchdog.join().unwrap();
    stop_group(pgid);
    assert!(!timed_out, "evlab {args:?} ran over {limit:?}\n{stderr}");
    Out {
        ok: status.success(),
        stdout,
        stderr,
    }
}

/// Kills every process left in the group `pgid` and waits until none is.
fn stop_group(pgid: u32) {
    let _ = evlab_sys::kill_process_group(pgid, libc::SIGKILL);
    let t0 = Instant::now();
    loop {
        match evlab_sys::kill_process_group(pgid, 0) {
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return,
            _ => {}
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "processes of group {pgid} are still alive"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn json(args: &[&str]) -> Value {
    let out = evlab(args, Duration::from_secs(120));
    assert!(out.ok, "evlab {args:?} failed:\n{}", out.stderr);
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("evlab {args:?}: not JSON ({e}):\n{}", out.stdout))
}

/// Every benchmark judges its findings; which way depends on the machine, so only the
/// shape is checked.
fn check_findings(v: &Value, count: usize) {
    let f = v["findings"].as_array().expect("findings");
    assert_eq!(f.len(), count, "{f:?}");
    for x in f {
        assert!(!x["claim"].as_str().unwrap().is_empty());
        assert!(!x["evidence"].as_str().unwrap().is_empty());
        let verdict = x["verdict"].as_str().unwrap();
        assert!(
            [
                "reproduced",
                "not-reproduced",
                "inconclusive",
                "not-measured"
            ]
            .contains(&verdict),
            "{verdict}"
        );
        assert!(!x["rule"].as_str().unwrap().is_empty(), "{x}");
    }
}

fn readiness_names() -> Vec<&'static str> {
    Mechanism::ALL
        .into_iter()
        .filter(|m| m.kind() == Kind::Readiness)
        .map(|m| m.name())
        .collect()
}

// ---- pipetest ----

#[test]
fn pipetest_passes_every_token_on_every_readiness_mechanism() {
    for route in ["stride17", "last"] {
        let v = json(&[
            "pipetest",
            "--pipes",
            "2,5",
            "--message-threads",
            "3",
            "--generations",
            "7",
            "--repeat",
            "2",
            "--route",
            route,
            "--json",
            "-",
        ]);
        assert_eq!(v["benchmark"], "pipetest");
        assert_eq!(v["route"], route);
        check_findings(&v, 3);
        let names: Vec<&str> = v["mechanisms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            readiness_names(),
            "all = the registry's readiness mechanisms"
        );
        let points = v["points"].as_array().unwrap();
        assert_eq!(points.len(), 2 * names.len());
        for p in points {
            let what = format!("{} {}", p["mechanism"], p["pipes"]);
            match p["status"].as_str().unwrap() {
                "ok" => {
                    let runs = p["runs"].as_array().unwrap();
                    assert_eq!(runs.len(), 2, "{what}");
                    for r in runs {
                        assert_eq!(r["passes"], 3 * 7, "{what}: message_threads × generations");
                        assert!(r["waits"].as_u64().unwrap() >= 1, "{what}");
                        assert!(r["syscalls"].is_object(), "{what}");
                    }
                    assert!(p["passes_per_sec"].as_f64().unwrap() > 0.0, "{what}");
                }
                "skipped" => {
                    let why = p["reason"].as_str().unwrap();
                    assert!(why.contains("unavailable"), "{what}: {why}");
                    let m = Mechanism::from_name(p["mechanism"].as_str().unwrap()).unwrap();
                    evlab_poll::testing::require(
                        evlab_poll::testing::needs(m),
                        false,
                        &format!("pipetest {what}: {why}"),
                    );
                }
                s => panic!("{what}: {s}: {}", p["reason"]),
            }
        }
    }
}

#[test]
fn pipetest_table_and_limits() {
    let out = evlab(
        &[
            "pipetest",
            "--mechanism",
            "poll,epoll",
            "--pipes",
            "3,600000",
            "--generations",
            "5",
            "--repeat",
            "1",
        ],
        Duration::from_secs(60),
    );
    assert!(out.ok, "{}", out.stderr);
    assert!(out.stdout.contains("passes per second"), "{}", out.stdout);
    assert!(
        out.stdout.contains("findings on this run:"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("epoll-lt"), "{}", out.stdout);
    // 600,000 pipes need 1.2 million descriptors: more than any limit allows.
    assert!(out.stdout.contains("skipped"), "{}", out.stdout);
    assert!(out.stdout.contains("descriptors"), "{}", out.stdout);

    let bad = evlab(&["pipetest", "--pipes", "1"], Duration::from_secs(30));
    assert!(!bad.ok);
    assert!(bad.stderr.contains("at least 2"), "{}", bad.stderr);
    let bad = evlab(
        &["pipetest", "--mechanism", "uring"],
        Duration::from_secs(30),
    );
    assert!(!bad.ok);
    assert!(
        bad.stderr.contains("not a readiness mechanism"),
        "{}",
        bad.stderr
    );
}

// ---- micro fdalloc ----

#[test]
fn fdalloc_gets_the_first_descriptor_then_n() {
    for op in ["open", "dup"] {
        let v = json(&[
            "micro",
            "fdalloc",
            "--total",
            "300",
            "--at",
            "100,200,250",
            "--repeat",
            "3",
            "--op",
            op,
            "--json",
            "-",
        ]);
        assert_eq!(v["benchmark"], "fdalloc");
        check_findings(&v, 2);
        assert_eq!(v["op"], op);
        assert_eq!(v["total"], 300);
        let first = v["first"].as_u64().unwrap();
        assert!(first >= 3, "0, 1 and 2 are stdio");
        assert!(v["highest"].as_u64().unwrap() >= first + 299);
        let points = v["points"].as_array().unwrap();
        let ns: Vec<u64> = points.iter().map(|p| p["n"].as_u64().unwrap()).collect();
        assert_eq!(ns, [100, 200, 250]);
        for p in points {
            // The lowest free descriptor: first the first one closed, then n.
            assert_eq!(p["first_fd"].as_u64().unwrap(), first, "{p}");
            assert_eq!(p["second_fd"], p["n"], "{p}");
            for k in ["first_open_ns", "second_open_ns", "both_ns"] {
                assert!(p[k].as_f64().unwrap() > 0.0, "{k}: {p}");
            }
            assert_eq!(p["second_runs_ns"].as_array().unwrap().len(), 3, "{p}");
        }
        // The negative control: the same n, the same rounds, the rule's verdict on them.
        let c = &v["negative_control"];
        assert_eq!(
            c["slots"].as_u64().unwrap(),
            v["highest"].as_u64().unwrap() + 1
        );
        let cn: Vec<u64> = c["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["n"].as_u64().unwrap())
            .collect();
        assert_eq!(cn, ns);
        assert_eq!(c["finding"]["rule"], "fdalloc-flat");
        assert_eq!(v["findings"][1]["verdict"], c["finding"]["verdict"]);
    }
    // Spread over the table by default, the last at the highest descriptor.
    let v = json(&[
        "micro", "fdalloc", "--total", "500", "--points", "4", "--repeat", "1", "--json", "-",
    ]);
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    assert_eq!(points[3]["n"], v["highest"]);
}

#[test]
fn fdalloc_refuses_what_it_cannot_do() {
    let out = evlab(
        &["micro", "fdalloc", "--total", "100000000"],
        Duration::from_secs(30),
    );
    assert!(!out.ok);
    assert!(out.stderr.contains("limit"), "{}", out.stderr);
    let out = evlab(
        &["micro", "fdalloc", "--total", "50", "--at", "2"],
        Duration::from_secs(30),
    );
    assert!(!out.ok);
    assert!(out.stderr.contains("descriptor 2"), "{}", out.stderr);
}

// ---- micro malloc ----

#[test]
fn malloc_makes_every_pair_in_threads_and_processes() {
    let v = json(&[
        "micro",
        "malloc",
        "--workers",
        "1,3",
        "--iterations",
        "2000",
        "--repeat",
        "2",
        "--json",
        "-",
    ]);
    assert_eq!(v["benchmark"], "malloc");
    check_findings(&v, 2);
    assert!(v["allocator"].as_str().unwrap().contains("glibc"));
    assert_eq!(v["iterations"], 2000);
    assert_eq!(v["size"], 512);
    let points = v["points"].as_array().unwrap();
    let seen: Vec<(String, u64)> = points
        .iter()
        .map(|p| {
            (
                p["mode"].as_str().unwrap().to_string(),
                p["workers"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("threads".into(), 1),
            ("threads".into(), 3),
            ("processes".into(), 1),
            ("processes".into(), 3)
        ]
    );
    for p in points {
        assert_eq!(
            p["pairs"].as_u64().unwrap(),
            2000 * p["workers"].as_u64().unwrap(),
            "{p}"
        );
        assert!(
            p["worker_seconds_max"].as_f64().unwrap() >= p["worker_seconds_mean"].as_f64().unwrap(),
            "{p}"
        );
        assert!(p["wall_seconds"].as_f64().unwrap() > 0.0, "{p}");
    }
    let out = evlab(
        &["micro", "malloc", "--workers", "0"],
        Duration::from_secs(30),
    );
    assert!(!out.ok);
    assert!(out.stderr.contains("at least 1"), "{}", out.stderr);
}

// ---- herd ----

#[test]
fn herd_accepts_every_connection_once_in_every_mode() {
    let v = json(&[
        "herd",
        "--workers",
        "1,3",
        "--conns",
        "12",
        "--as",
        "both",
        "--settle-ms",
        "5",
        "--repeat",
        "2",
        "--json",
        "-",
    ]);
    assert_eq!(v["benchmark"], "herd");
    check_findings(&v, 4);
    assert_eq!(v["conns"], 12);
    assert_eq!(v["repeat"], 2);
    let points = v["points"].as_array().unwrap();
    let modes = ["accept", "poll", "epoll", "exclusive", "reuseport", "uring"];
    assert_eq!(points.len(), 2 * 2 * modes.len() * 2);
    for (round, as_, mode, n) in (0..2u64).flat_map(|r| {
        ["threads", "processes"].into_iter().flat_map(move |a| {
            modes
                .into_iter()
                .flat_map(move |m| [1u64, 3].map(move |n| (r, a, m, n)))
        })
    }) {
        let p = points
            .iter()
            .find(|p| {
                p["round"] == round && p["as"] == as_ && p["mode"] == mode && p["workers"] == n
            })
            .unwrap_or_else(|| panic!("no point {as_} {mode} {n} in round {round}"));
        let what = format!("{as_} {mode} N={n} round {round}");
        match p["status"].as_str().unwrap() {
            "ok" => {}
            "skipped" if mode == "uring" => {
                let why = format!("herd {what}: {}", p["reason"]);
                evlab_poll::testing::require("io_uring", false, &why);
                continue;
            }
            s => panic!("{what}: {s}: {}", p["reason"]),
        }
        assert_eq!(p["connections"], 12, "{what}");
        assert_eq!(p["client_errors"], 0, "{what}");
        let per: Vec<u64> = p["per_worker"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(per.len() as u64, n, "{what}");
        // Every connection made was accepted by exactly one worker.
        assert_eq!(per.iter().sum::<u64>(), 12, "{what}");
        assert_eq!(p["accepted"], 12, "{what}");
        assert_eq!(p["latency"]["count"], 12, "{what}");
        assert_eq!(
            p["worker_stats"].as_array().unwrap().len() as u64,
            n,
            "{what}"
        );
        // The workers sleep in their wait through the 5 ms settle, so the first accept
        // woke somebody (a voluntary switch): at least 1 in 12. A connection wakes at
        // most every worker (the herd), a few times over if a woken wait sleeps again.
        let wakeups = p["wakeups_per_accept"].as_f64().unwrap();
        assert!(
            wakeups >= 1.0 / 12.0 && wakeups <= 4.0 * n as f64 + 2.0,
            "{what}: {wakeups} wake-ups per accept"
        );
        // An accept, a write and a close (and the waits between): some microseconds of
        // CPU, never none, and not milliseconds per worker.
        let cpu = p["cpu_us_per_accept"].as_f64().unwrap();
        assert!(
            cpu > 0.0 && cpu < 5_000.0 * n as f64,
            "{what}: {cpu} µs of CPU per accept"
        );
    }
}

#[test]
fn herd_table_and_bad_modes() {
    let out = evlab(
        &[
            "herd",
            "--mode",
            "accept,exclusive",
            "--workers",
            "2",
            "--conns",
            "4",
            "--as",
            "threads",
            "--settle-ms",
            "1",
        ],
        Duration::from_secs(60),
    );
    assert!(out.ok, "{}", out.stderr);
    assert!(out.stdout.contains("wakeups/acc"), "{}", out.stdout);
    assert!(out.stdout.contains("exclusive"), "{}", out.stdout);
    let bad = evlab(&["herd", "--mode", "kqueue"], Duration::from_secs(30));
    assert!(!bad.ok);
    assert!(
        bad.stderr.contains("unknown mode 'kqueue'"),
        "{}",
        bad.stderr
    );
}

// ---- evlab run with a [micro] experiment ----

#[test]
fn run_a_micro_experiment_writes_the_table_and_the_findings() {
    let dir = std::env::temp_dir().join(format!("evlab-micro-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("tiny-pipetest.toml");
    std::fs::write(
        &spec,
        "name = \"tiny-pipetest\"\ndescription = \"a test\"\n[micro]\nbenchmark = \"pipetest\"\n\
         args = [\"--mechanism\", \"poll,epoll-lt\", \"--pipes\", \"2,6\", \"--generations\", \
         \"4\", \"--repeat\", \"1\"]\n",
    )
    .unwrap();
    let out = dir.join("out");
    let r = evlab(
        &[
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        Duration::from_secs(60),
    );
    assert!(r.ok, "{}", r.stderr);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("pipetest.json")).unwrap()).unwrap();
    assert_eq!(v["points"].as_array().unwrap().len(), 4);
    check_findings(&v, 3);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Findings on this run"), "{md}");
    assert!(md.contains("passes per second"), "{md}");
    assert!(out.join("report.html").is_file());

    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "name = \"bad\"\n[micro]\nbenchmark = \"nope\"\n").unwrap();
    let r = evlab(&["run", bad.to_str().unwrap()], Duration::from_secs(30));
    assert!(!r.ok);
    assert!(r.stderr.contains("key `benchmark`"), "{}", r.stderr);
    assert!(r.stderr.contains("unknown micro-benchmark"), "{}", r.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- readahead ----

/// Two sizes, cold and warm, every way, two rounds: every point measured (a cold one skipped
/// only where the directory's file system keeps every page in memory, with that reason), the
/// files and their directory removed, the four findings judged; bad sizes and ways are usage
/// errors.
#[test]
fn readahead_sends_every_way_cold_and_warm() {
    let dir = std::env::temp_dir().join(format!("evlab-ra-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let v = json(&[
        "micro",
        "readahead",
        "--sizes",
        "64K,1M",
        "--repeat",
        "2",
        "--dir",
        dir.to_str().unwrap(),
        "--json",
        "-",
    ]);
    assert_eq!(v["benchmark"], "readahead");
    assert_eq!(v["repeat"], 2);
    check_findings(&v, 4);
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2 * 2 * 2 * 5);
    for p in points {
        match p["status"].as_str().unwrap() {
            "ok" => {
                assert!(p["seconds"].as_f64().unwrap() > 0.0, "{p}");
                let resident = p["resident_before"].as_f64().unwrap();
                if p["cache"] == "warm" {
                    assert!(resident > 0.95, "{p}");
                } else {
                    assert!(resident <= 0.05, "{p}");
                }
            }
            "skipped" => {
                assert_eq!(p["cache"], "cold", "{p}");
                assert!(p["reason"].as_str().unwrap().contains("page cache"), "{p}");
            }
            s => panic!("{s}: {p}"),
        }
    }
    // The files were made in the given directory and removed; the directory is the caller's.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::remove_dir(&dir).unwrap();
    for (args, want) in [
        (
            &["micro", "readahead", "--sizes", "0"][..],
            "at least 1 byte",
        ),
        (
            &["micro", "readahead", "--ways", "splice"][..],
            "unknown way",
        ),
    ] {
        let out = evlab(args, Duration::from_secs(30));
        assert!(!out.ok);
        assert!(out.stderr.contains(want), "{args:?}: {}", out.stderr);
    }
}
