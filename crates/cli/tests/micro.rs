//! The micro-benchmark subcommands (`pipetest`, `herd`, `micro fdalloc`, `micro malloc`), each
//! run by the real binary in a tiny configuration. Only what does not depend on speed is
//! checked: the structure of the JSON (each report read as its `evlab_wire::micro` type, and
//! written back to the same document) and the benchmark's invariants (pass counts, accept
//! counts, descriptor numbers). Every run is in a process group of its own, which is killed and
//! checked gone afterwards, forked workers included.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use evlab_poll::{Kind, Mechanism};
use evlab_wire::micro::{fdalloc, herd, malloc, pipetest, readahead, Finding};
use serde::de::DeserializeOwned;
use serde::Serialize;

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

/// A report read as the wire type `T` it is written as. It must write back to the very same
/// JSON: a field the type lacks (or one it would add, or a verdict in an old spelling) fails.
fn typed<T: DeserializeOwned + Serialize>(text: &str, what: &str) -> T {
    let raw: serde_json::Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}):\n{text}"));
    let t: T = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("{what}: not its wire type ({e}):\n{text}"));
    assert_eq!(
        serde_json::to_value(&t).unwrap(),
        raw,
        "{what}: the report and its wire type differ"
    );
    t
}

/// `evlab ARGS`'s report on stdout (`--json -`), as the wire type `T`.
fn report<T: DeserializeOwned + Serialize>(args: &[&str]) -> T {
    let out = evlab(args, Duration::from_secs(120));
    assert!(out.ok, "evlab {args:?} failed:\n{}", out.stderr);
    typed(&out.stdout, &format!("evlab {args:?}"))
}

/// Every benchmark judges its findings; which way depends on the machine, so only the
/// shape is checked (the verdict is one of the four by its type).
fn check_findings(f: &[Finding], count: usize) {
    assert_eq!(f.len(), count, "{f:?}");
    for x in f {
        assert!(!x.claim.is_empty(), "{x:?}");
        assert!(!x.evidence.is_empty(), "{x:?}");
        assert!(!x.rule.is_empty(), "{x:?}");
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
        let v: pipetest::Report = report(&[
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
        assert_eq!(v.benchmark, "pipetest");
        assert_eq!(v.route.name(), route);
        check_findings(&v.findings, 3);
        let names: Vec<&str> = v.mechanisms.iter().map(String::as_str).collect();
        assert_eq!(
            names,
            readiness_names(),
            "all = the registry's readiness mechanisms"
        );
        assert_eq!(v.points.len(), 2 * names.len());
        for p in &v.points {
            let what = format!("{} {}", p.mechanism, p.pipes);
            match p.status {
                pipetest::Status::Ok => {
                    assert_eq!(p.runs.len(), 2, "{what}");
                    for r in &p.runs {
                        assert_eq!(r.passes, 3 * 7, "{what}: message_threads × generations");
                        assert!(r.waits >= 1, "{what}");
                        // Each pass but none other wrote its token to the next pipe, counted.
                        assert_eq!(
                            r.syscalls.get("write"),
                            Some(&r.passes),
                            "{what}: {:?}",
                            r.syscalls
                        );
                    }
                    assert!(p.passes_per_sec.is_some_and(|x| x > 0.0), "{what}");
                }
                pipetest::Status::Skipped => {
                    let why = p.reason.as_deref().unwrap_or_default();
                    assert!(why.contains("unavailable"), "{what}: {why}");
                    let m = Mechanism::from_name(&p.mechanism).unwrap();
                    evlab_poll::testing::require(
                        evlab_poll::testing::needs(m),
                        false,
                        &format!("pipetest {what}: {why}"),
                    );
                }
                s => panic!("{what}: {s:?}: {:?}", p.reason),
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
        let v: fdalloc::Report = report(&[
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
        assert_eq!(v.benchmark, "fdalloc");
        check_findings(&v.findings, 2);
        assert_eq!(v.op.name(), op);
        assert_eq!(v.total, 300);
        let first = v.first;
        assert!(first >= 3, "0, 1 and 2 are stdio");
        assert!(v.highest >= first + 299);
        let ns: Vec<u64> = v.points.iter().map(|p| p.n).collect();
        assert_eq!(ns, [100, 200, 250]);
        for p in &v.points {
            // The lowest free descriptor: first the first one closed, then n.
            assert_eq!(p.first_fd, first, "{p:?}");
            assert_eq!(p.second_fd, p.n, "{p:?}");
            for (k, t) in [
                ("first_open_ns", p.first_open_ns),
                ("second_open_ns", p.second_open_ns),
                ("both_ns", p.both_ns),
            ] {
                assert!(t > 0.0, "{k}: {p:?}");
            }
            assert_eq!(p.second_runs_ns.len(), 3, "{p:?}");
        }
        // The negative control: the same n, the same rounds, the rule's verdict on them.
        let c = v.negative_control.as_ref().expect("negative_control");
        assert_eq!(c.slots as u64, v.highest + 1);
        let cn: Vec<u64> = c.points.iter().map(|p| p.n).collect();
        assert_eq!(cn, ns);
        assert_eq!(c.finding.rule, "fdalloc-flat");
        assert_eq!(v.findings[1].verdict, c.finding.verdict);
    }
    // Spread over the table by default, the last at the highest descriptor.
    let v: fdalloc::Report = report(&[
        "micro", "fdalloc", "--total", "500", "--points", "4", "--repeat", "1", "--json", "-",
    ]);
    assert_eq!(v.points.len(), 4);
    assert_eq!(v.points[3].n, v.highest);
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
    let v: malloc::Report = report(&[
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
    assert_eq!(v.benchmark, "malloc");
    check_findings(&v.findings, 2);
    assert!(v.allocator.contains("glibc"), "{}", v.allocator);
    assert_eq!(v.iterations, 2000);
    assert_eq!(v.size, 512);
    let seen: Vec<(malloc::Mode, usize)> = v.points.iter().map(|p| (p.mode, p.workers)).collect();
    let (threads, processes) = (malloc::Mode::Threads, malloc::Mode::Processes);
    assert_eq!(
        seen,
        [(threads, 1), (threads, 3), (processes, 1), (processes, 3)]
    );
    for p in &v.points {
        assert_eq!(p.pairs, 2000 * p.workers as u64, "{p:?}");
        assert!(p.worker_seconds_max >= p.worker_seconds_mean, "{p:?}");
        assert!(p.wall_seconds > 0.0, "{p:?}");
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
    let v: herd::Report = report(&[
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
    assert_eq!(v.benchmark, "herd");
    check_findings(&v.findings, 4);
    assert_eq!(v.conns, 12);
    assert_eq!(v.repeat, 2);
    let points = &v.points;
    let modes = herd::Mode::ALL;
    assert_eq!(
        modes.map(herd::Mode::name),
        ["accept", "poll", "epoll", "exclusive", "reuseport", "uring"]
    );
    assert_eq!(points.len(), 2 * 2 * modes.len() * 2);
    for (round, as_, mode, n) in (0..2usize).flat_map(|r| {
        [herd::As::Threads, herd::As::Processes]
            .into_iter()
            .flat_map(move |a| {
                modes
                    .into_iter()
                    .flat_map(move |m| [1usize, 3].map(move |n| (r, a, m, n)))
            })
    }) {
        let (as_name, mode_name) = (as_.name(), mode.name());
        let p = points
            .iter()
            .find(|p| p.round == round && p.as_ == as_ && p.mode == mode && p.workers == n)
            .unwrap_or_else(|| panic!("no point {as_name} {mode_name} {n} in round {round}"));
        let what = format!("{as_name} {mode_name} N={n} round {round}");
        match p.status {
            herd::Status::Ok => {}
            herd::Status::Skipped if mode == herd::Mode::Uring => {
                let why = format!("herd {what}: {:?}", p.reason);
                evlab_poll::testing::require("io_uring", false, &why);
                continue;
            }
            s => panic!("{what}: {s:?}: {:?}", p.reason),
        }
        assert_eq!(p.connections, 12, "{what}");
        assert_eq!(p.client_errors, 0, "{what}");
        let per = &p.per_worker;
        assert_eq!(per.len(), n, "{what}");
        // Every connection made was accepted by exactly one worker.
        assert_eq!(per.iter().sum::<u64>(), 12, "{what}");
        assert_eq!(p.accepted, 12, "{what}");
        assert_eq!(p.latency.count, 12, "{what}");
        assert_eq!(p.worker_stats.len(), n, "{what}");
        // The workers sleep in their wait through the 5 ms settle, so the first accept
        // woke somebody (a voluntary switch): at least 1 in 12. A connection wakes at
        // most every worker (the herd), a few times over if a woken wait sleeps again.
        let wakeups = p.wakeups_per_accept;
        assert!(
            wakeups >= 1.0 / 12.0 && wakeups <= 4.0 * n as f64 + 2.0,
            "{what}: {wakeups} wake-ups per accept"
        );
        // An accept, a write and a close (and the waits between): some microseconds of
        // CPU, never none, and not milliseconds per worker.
        let cpu = p.cpu_us_per_accept;
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
    let v: pipetest::Report = typed(
        &std::fs::read_to_string(out.join("pipetest.json")).unwrap(),
        "pipetest.json",
    );
    assert_eq!(v.points.len(), 4);
    check_findings(&v.findings, 3);
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
    let v: readahead::Report = report(&[
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
    assert_eq!(v.benchmark, "readahead");
    assert_eq!(v.repeat, 2);
    check_findings(&v.findings, 4);
    assert_eq!(v.points.len(), 2 * 2 * 2 * 5);
    for p in &v.points {
        match p.status {
            readahead::Status::Ok => {
                assert!(p.seconds > 0.0, "{p:?}");
                let resident = p.resident_before;
                if p.cache == readahead::Cache::Warm {
                    assert!(resident > 0.95, "{p:?}");
                } else {
                    assert!(resident <= 0.05, "{p:?}");
                }
            }
            readahead::Status::Skipped => {
                assert_eq!(p.cache, readahead::Cache::Cold, "{p:?}");
                assert!(
                    p.reason
                        .as_deref()
                        .is_some_and(|r| r.contains("page cache")),
                    "{p:?}"
                );
            }
            s => panic!("{s:?}: {p:?}"),
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
