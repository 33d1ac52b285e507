//! `evlab run` with a `[sweep]` (the herd macro-benchmark's shape, `experiments/herd-serve.toml`),
//! with the real binary, tiny: two worker counts × two accept modes, 1 s points at a low rate.
//! The report draws against the workers; each point records its worker count, the server's
//! accepts per worker and its context switches.

use std::path::{Path, PathBuf};
use std::process::Command;

use evlab_lab::model::results::{PointResult, ServerCounters, Status, Summary};

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("evlab-run-sweep-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn read(dir: &Path, f: &str) -> String {
    std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"))
}

/// A run's summary.json, read as the lab's own type.
fn summary(out: &Path) -> Summary {
    serde_json::from_str(&read(out, "summary.json")).unwrap()
}

/// A point measured with the swept worker count, and the server's counters over it.
fn swept_workers(p: &PointResult) -> (usize, &ServerCounters) {
    assert_eq!(p.status, Status::Ok, "{p:?}");
    let w = p
        .swept
        .as_ref()
        .unwrap_or_else(|| panic!("not swept: {p:?}"));
    assert_eq!(w.name, "workers", "{p:?}");
    let server = p
        .server
        .as_ref()
        .unwrap_or_else(|| panic!("no server counters: {p:?}"));
    (w.value as usize, server)
}

#[test]
fn a_workers_sweep_runs_each_mode_at_each_count_and_draws_against_workers() {
    let d = scratch("herd");
    let spec = "name = \"herd-tiny\"\nrates = [200]\nduration_s = 1\ntimeout_s = 1\n\
                [sweep]\nflag = \"--workers\"\nvalues = [1, 2]\n\
                [[series]]\nlabel = \"shared\"\nmechanism = \"epoll-lt\"\n\
                flags = [\"--accept-mode\", \"shared\"]\n\
                [[series]]\nlabel = \"exclusive\"\nmechanism = \"epoll-lt\"\n\
                flags = [\"--accept-mode\", \"exclusive\"]\n";
    let f = d.join("herd-tiny.toml");
    std::fs::write(&f, spec).unwrap();
    let out = d.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_evlab"))
        .arg("run")
        .arg(&f)
        .arg("--out")
        .arg(&out)
        .arg("-q")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    // One line per point, named with its worker count, every series at 1 before 2 (in a
    // drawn order at each count).
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    for (pair, n) in lines.chunks(2).zip([1, 2]) {
        for mode in ["shared", "exclusive"] {
            let what = format!(" {mode} workers={n} idle=0 rate=200: ");
            assert!(pair.iter().any(|l| l.contains(&what)), "{err}");
        }
    }

    let points = summary(&out).points;
    assert_eq!(points.len(), 4);
    for p in &points {
        let (n, server) = swept_workers(p);
        // The server ran with that many workers: one accept count per worker, summing to
        // what it accepted (the lab's own stats request after the run adds one).
        let per = &server.per_worker_accepted;
        assert_eq!(per.len(), n, "{p:?}");
        let accepted = server.accepted;
        assert!(accepted >= 100, "{p:?}");
        assert_eq!(per.iter().sum::<u64>(), accepted, "{p:?}");
        // At least one context switch per connection: each worker sleeps between them.
        let ctx = p.server_ctx_switches.expect("server_ctx_switches");
        assert!(
            ctx >= accepted,
            "{ctx} context switches for {accepted} connections"
        );
        assert!(
            p.commands
                .iter()
                .any(|c| c.contains(&format!("--workers {n}"))),
            "{p:?}"
        );
    }

    // The figures against workers, one line per mode; none against the offered rate.
    let mut figs: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".svg"))
        .collect();
    figs.sort();
    for f in [
        "fig-balance-vs-workers.svg",
        "fig-cpu-vs-workers.svg",
        "fig-ctxsw-vs-workers.svg",
        "fig-p99-vs-workers.svg",
    ] {
        assert!(figs.iter().any(|x| x == f), "{f} missing: {figs:?}");
    }
    assert!(!figs.iter().any(|x| x.contains("idle0")), "{figs:?}");
    // Its offered load answered in full at every count: the reply rate only in its table.
    assert!(
        !figs.iter().any(|x| x.starts_with("fig-replies")),
        "{figs:?}"
    );
    let svg = read(&out, "fig-cpu-vs-workers.svg");
    assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
    assert!(svg.contains(">workers (--workers N)<"), "{svg}");
    let md = read(&out, "report.md");
    assert!(md.contains("| workers | shared | exclusive |"), "{md}");
    assert!(md.contains("LSP accept scalability"), "{md}");
    let csv = read(&out, "points.csv");
    assert!(csv.lines().next().unwrap().ends_with(
        ",sweep,sweep_value,server_ctx_switches,accepted_per_worker,\
             accept_wakeups_per_worker,accept_empty_per_worker"
    ));
    let _ = std::fs::remove_dir_all(&d);
}

/// herd-serve's process sweep, shortened: worker processes (`--as processes`) at 2 and 4, a
/// shared listener against SO_REUSEPORT, 1 s points at a low rate. Each point records every
/// process's accepts and accept wake-ups, the report draws the wake-ups against the workers
/// and judges the herd-procs rules (inconclusive here: one trial).
#[test]
fn a_process_sweep_records_each_process_and_judges_the_process_rules() {
    let d = scratch("herd-procs");
    let spec = "name = \"herd-procs-tiny\"\nrates = [200]\nduration_s = 1\ntimeout_s = 1\n\
                findings = \"herd\"\n\
                [sweep]\nflag = \"--workers\"\nvalues = [1, 2, 4]\n\
                [[series]]\nlabel = \"shared\"\nmechanism = \"epoll-lt\"\n\
                flags = [\"--accept-mode\", \"shared\"]\nsweep_values = [1]\n\
                [[series]]\nlabel = \"shared processes\"\nmechanism = \"epoll-lt\"\n\
                flags = [\"--accept-mode\", \"shared\", \"--as\", \"processes\"]\n\
                sweep_values = [2, 4]\n\
                [[series]]\nlabel = \"reuseport processes\"\nmechanism = \"epoll-lt\"\n\
                flags = [\"--accept-mode\", \"reuseport\", \"--as\", \"processes\"]\n\
                sweep_values = [2, 4]\n";
    let f = d.join("herd-procs-tiny.toml");
    std::fs::write(&f, spec).unwrap();
    let out = d.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_evlab"))
        .arg("run")
        .arg(&f)
        .arg("--out")
        .arg(&out)
        .arg("-q")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    let points = summary(&out).points;
    assert_eq!(
        points.len(),
        5,
        "threads at 1, each process series at 2 and 4: {err}"
    );
    for p in points.iter().filter(|p| p.series != "shared") {
        // (Valid or not: a busy machine may flag the client; the records are what is tested.)
        let (n, server) = swept_workers(p);
        let (acc, wake) = (
            &server.per_worker_accepted,
            &server.per_worker_accept_wakeups,
        );
        assert_eq!(
            (acc.len(), wake.len()),
            (n, n),
            "one count per process: {p:?}"
        );
        let accepted = server.accepted;
        assert!(accepted >= 100, "{p:?}");
        assert_eq!(acc.iter().sum::<u64>(), accepted, "{p:?}");
        // A process that accepted was woken to; none is woken more than it tried.
        assert!(wake.iter().sum::<u64>() >= 1, "{p:?}");
        // The context switches are the whole tree's: at least one per connection.
        assert!(
            p.server_ctx_switches.is_some_and(|c| c >= accepted),
            "{p:?}"
        );
    }
    for f in ["fig-wakeups-vs-workers.svg", "fig-empty-vs-workers.svg"] {
        let svg = read(&out, f);
        assert_eq!(svg.matches("<polyline").count(), 3, "{f}: {svg}");
    }
    // The two process rules against reuseport, at the most processes (no thread finding:
    // the threads ran one mode).
    let md = read(&out, "report.md");
    assert!(md.contains("Of 2 findings checked"), "{md}");
    assert!(
        md.contains(
            "the series at 1, 2, 4 workers (`--workers N`), but shared at 1, shared processes \
             at 2, 4, reuseport processes at 2, 4"
        ),
        "{md}"
    );
    assert!(md.contains("shared processes, no idle, 4 workers"), "{md}");
    for rule in [
        "processes that do not share the wait (here each has its own SO_REUSEPORT",
        "pre-forked processes that do not share the wait are not",
    ] {
        assert!(md.contains(rule), "{rule}: {md}");
    }
    let csv = read(&out, "points.csv");
    assert!(csv.lines().count() == 6, "{csv}");
    let _ = std::fs::remove_dir_all(&d);
}
