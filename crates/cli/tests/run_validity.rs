//! The lab's validity rule on real runs of `evlab load` against `evlab serve`: a client starved
//! of CPU (a small cgroup CPU quota) is flagged; a client that only suffers scheduling jitter
//! (stopped for tens of milliseconds, three times) is noted, not flagged.
//!
//! Neither depends on this machine's speed: the starved client gets 2% of a CPU for a schedule
//! that needs many times that on any machine; the stalled client is offered 1,000/s, which any
//! machine keeps up with between stalls.

mod common;

use std::path::Path;
use std::time::Duration;

use evlab_lab::model::load as loadjson;
use evlab_lab::model::results::PointResult;
use evlab_lab::model::spec::{Series, ServerKind, Spec};
use evlab_lab::run::cgroup::CpuBudget;
use evlab_lab::run::point::judge;
use evlab_lab::run::procs::Child;

fn spec() -> Spec {
    Spec::parse(
        "name = \"validity\"\nmechanisms = [\"epoll-et\"]\nrates = [1000]\n",
        "test",
    )
    .unwrap()
}

fn load_argv(port: u16, rate: u32, conns: u32, json: &Path) -> Vec<String> {
    [
        common::BIN,
        "load",
        "--server",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--uri",
        "/one",
        "--rate",
        &rate.to_string(),
        "--num-conns",
        &conns.to_string(),
        "--timeout",
        "2",
        "--sample-interval",
        "1",
        "--quiet",
        "--allow-no-replies",
        "--json",
        &json.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Judges a finished run as the lab does. The client's CPU is its own share (the test cannot
/// own a CPU while other tests run beside it, so /proc/stat's per-CPU figure would be theirs).
fn judged(json: &Path, rate: f64, duration: f64) -> PointResult {
    let (report, _) = loadjson::read_report(json).expect("evlab load wrote its report");
    let load = loadjson::LoadSummary::from(&report);
    let series = Series {
        label: "epoll-et".into(),
        kind: ServerKind::Evlab,
        mechanism: "epoll-et".into(),
        flags: vec![],
    };
    let mut p = PointResult::new(1, &series, 0, rate, 1, duration);
    p.client_cpu_util = load.client_cpu;
    p.load = Some(load);
    judge(&spec(), &mut p);
    p
}

#[test]
fn a_client_starved_of_cpu_is_flagged() {
    let budget = match CpuBudget::new(0.02) {
        Ok(b) => b,
        Err(why) => {
            evlab_poll::testing::require(
                "cgroup",
                false,
                &format!("cannot make a cgroup CPU budget here: {why}"),
            );
            return;
        }
    };
    let srv = common::serve("validity-starved", &["--header-timeout", "0"], |_| {});
    let json = srv.dir.join("starved.json");
    // 4,000 connections at 20,000/s: a fifth of a second's schedule, on 2% of one CPU.
    let argv = load_argv(srv.addr.port(), 20_000, 4_000, &json);
    let mut c = Child::spawn_in("evlab load", &argv, &[], None, Some(&budget)).unwrap();
    let st = c
        .wait_exit(Duration::from_secs(120))
        .unwrap()
        .expect("evlab load finished");
    assert!(st.success(), "{}", c.stderr_tail(5));
    assert!(c.stop(Duration::from_secs(2)).is_empty());
    let p = judged(&json, 20_000.0, 0.2);
    assert!(
        !p.valid(),
        "a starved client must be flagged: {:?}",
        p.notes
    );
    assert!(
        p.flags.iter().any(|f| f.starts_with("client fell behind")),
        "{:?}",
        p.flags
    );
}

#[test]
fn a_client_with_jitter_only_is_not_flagged() {
    let srv = common::serve("validity-jitter", &["--header-timeout", "0"], |_| {});
    let json = srv.dir.join("jitter.json");
    // 3,000 connections at 1,000/s: three seconds, stopped for 60, 40 and 20 ms on the way.
    let argv = load_argv(srv.addr.port(), 1000, 3000, &json);
    let mut c = Child::spawn("evlab load", &argv, &[], None).unwrap();
    for (at_ms, stall_ms) in [(500, 60), (1000, 40), (1000, 20)] {
        std::thread::sleep(Duration::from_millis(at_ms));
        // Our own child, alive until we reap it below.
        evlab_sys::kill(c.pid, libc::SIGSTOP).unwrap();
        std::thread::sleep(Duration::from_millis(stall_ms));
        evlab_sys::kill(c.pid, libc::SIGCONT).unwrap();
    }
    let st = c
        .wait_exit(Duration::from_secs(60))
        .unwrap()
        .expect("evlab load finished");
    assert!(st.success(), "{}", c.stderr_tail(5));
    assert!(c.stop(Duration::from_secs(2)).is_empty());
    let p = judged(&json, 1000.0, 3.0);
    let l = p.load.as_ref().unwrap();
    // The stalls happened: starts were tens of milliseconds late...
    assert!(l.schedule.late_max_ms.unwrap() >= 15.0, "{:?}", l.schedule);
    // ...and the point stays valid, with the jitter noted.
    assert!(p.valid(), "jitter alone must not invalidate: {:?}", p.flags);
    assert!(
        p.notes.iter().any(|n| n.starts_with("jitter:")),
        "{:?}",
        p.notes
    );
}
