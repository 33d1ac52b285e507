use super::*;
use crate::run::estimate;
use crate::run::sweep::{leg_label, sweep_order};
use evlab_reason::model::load::Schedule;

fn spec() -> Spec {
    Spec::parse(
        "name = \"t\"\nmechanisms = [\"poll\"]\nrates = [1000]\n",
        "t",
    )
    .unwrap()
}

fn point(sched: Schedule, late: u64, busy: f64) -> PointResult {
    let s = Series {
        label: "poll".into(),
        kind: ServerKind::Evlab,
        mechanism: "poll".into(),
        flags: vec![],
    };
    let mut p = PointResult::new(1, &s, 0, 1000.0, 1, 3.0);
    p.load = Some(LoadSummary {
        connections: Some(3000),
        replies: Some(3000),
        status_2xx: Some(3000),
        late_starts: Some(late),
        schedule: sched,
        ..Default::default()
    });
    p.client_cpu_busy = Some(busy);
    p
}

#[test]
fn jitter_alone_is_a_note_not_a_flag() {
    // 5% of starts late, up to 60 ms, but the schedule was kept: a VM's scheduling jitter.
    let mut p = point(
        Schedule {
            offered_rate: Some(1000.0),
            achieved_start_rate: Some(999.8),
            late_p99_ms: Some(40.0),
            late_max_ms: Some(60.0),
            end_lag_ms: Some(0.1),
            lag_ms: vec![60.0, 40.0, 20.0],
            ..Default::default()
        },
        150,
        0.3,
    );
    judge(&spec(), &mut p);
    assert!(p.valid(), "{:?}", p.flags);
    assert_eq!(p.notes.len(), 1);
    assert!(
        p.notes[0].starts_with("jitter: 150 starts (5.0%)"),
        "{:?}",
        p.notes
    );
}

#[test]
fn falling_behind_growing_lag_busy_cpu_and_resources_are_flags() {
    let behind = Schedule {
        offered_rate: Some(1000.0),
        achieved_start_rate: Some(900.0),
        end_lag_ms: Some(300.0),
        ..Default::default()
    };
    let mut p = point(behind, 2000, 0.5);
    judge(&spec(), &mut p);
    assert!(
        p.flags[0].starts_with("client fell behind: started 900"),
        "{:?}",
        p.flags
    );

    let growing = Schedule {
        offered_rate: Some(1000.0),
        achieved_start_rate: Some(995.0),
        lag_ms: vec![1.0, 10.0, 30.0, 60.0],
        ..Default::default()
    };
    let mut p = point(growing, 100, 0.5);
    judge(&spec(), &mut p);
    assert_eq!(
        p.flags,
        vec!["client fell behind: its lag grew to 60 ms".to_string()]
    );

    let kept = Schedule {
        offered_rate: Some(1000.0),
        achieved_start_rate: Some(1000.0),
        ..Default::default()
    };
    let mut p = point(kept.clone(), 0, 0.97);
    judge(&spec(), &mut p);
    assert!(
        p.flags[0].starts_with("client saturated: its CPU busy 97%"),
        "{:?}",
        p.flags
    );

    let mut p = point(kept, 0, 0.2);
    p.load.as_mut().unwrap().errors.fd_unavail = Some(3);
    judge(&spec(), &mut p);
    assert_eq!(
        p.flags,
        vec!["client out of resources: 3 fd-unavail errors".to_string()]
    );
}

#[test]
fn lag_that_rises_and_falls_is_not_growth() {
    assert!(!lag_grows(&[60.0, 40.0, 20.0]));
    assert!(!lag_grows(&[10.0, 80.0]));
    assert!(!lag_grows(&[50.0, 50.0, 50.0]));
    assert!(lag_grows(&[0.0, 5.0, 20.0, 55.0]));
}

/// Stats as `evlab serve --profile` answers them before any worker started.
const NO_WORKERS: &str = r#"{"server":"evlab","version":"0.1.0","mechanism":"poll","workers":0,
        "uptime_s":0.000011297,"profile":true,"connections":{"accepted":0,"closed":0,"active":0,
        "max_active":0,"accept_pauses":0,"accept_errors":0,"header_timeouts":0,"send_timeouts":0,
        "io_errors":0},"timers":{"entries":0,"max_entries":0,"delayed":0},"memory":{
        "pool_bytes":0,"pool_buffers":0,"spare_shells":0,"table_slots":0},"requests":0,
        "responses":{"1xx":0,"2xx":0,"3xx":0,"4xx":0,"5xx":0},"bytes_sent":0,"events":{
        "waits":0,"events":0,"per_wait":0.0,"discarded":0,"interest_changes":0,
        "interest_changes_free":0,"batches":0,"changes_per_batch":0.0,"waits_from_memory":0,
        "waits_from_kernel":0,"cancels":0,"overflows":0},"syscalls":{},"syscalls_total":0,
        "syscalls_per_request":0.0,"per_worker":[]}"#;

/// Those stats with the counters the test sets, read back as the lab reads them.
fn stats(requests: u64, waits: u64, events: u64, rows: &[(&str, u64, u64, u64)]) -> ServerStats {
    let mut s = load::parse_server_stats(NO_WORKERS).unwrap();
    s.requests = requests;
    s.events.waits = waits;
    s.events.events = events;
    s.connections.max_active = 7;
    s.syscalls = rows
        .iter()
        .map(|&(name, calls, errors, ns)| {
            let row = evlab_wire::SyscallCount {
                calls,
                errors,
                ns: Some(ns),
                share: Some(0.5),
            };
            (name.to_string(), row)
        })
        .collect();
    load::parse_server_stats(&serde_json::to_string(&s).unwrap()).unwrap()
}

#[test]
fn counter_deltas() {
    let a = stats(10, 5, 9, &[("read", 10, 0, 100), ("open", 3, 0, 30)]);
    let b = stats(
        110,
        55,
        109,
        &[
            ("read", 110, 1, 1100),
            ("open", 3, 0, 30),
            ("close", 100, 0, 50),
        ],
    );
    let c = counters_delta(&a, &b);
    assert_eq!(c.requests, 100);
    assert_eq!(c.waits, 50);
    assert_eq!(c.events, 100);
    assert_eq!(c.max_active, 7);
    assert_eq!(c.syscalls["read"].calls, 100);
    assert_eq!(c.syscalls["read"].errors, 1);
    assert_eq!(c.syscalls["read"].ns, Some(1000));
    assert_eq!(c.syscalls["close"].ns, Some(50));
    assert!(!c.syscalls.contains_key("open"));
    assert_eq!(c.syscalls_total(), 200);
}

#[test]
fn per_worker_accepts_are_deltas_by_worker() {
    let worker = |worker: usize, accepted: u64| evlab_wire::server::WorkerCounts {
        worker,
        accepted,
        requests: accepted,
        active: 0,
        waits: 0,
        pid: None,
        // Woken once per connection, and once in ten for nothing.
        accept_wakeups: accepted + accepted / 10,
        accept_empty: accepted / 10,
        accept_eagain: accepted,
    };
    let mut a = stats(0, 0, 0, &[]);
    a.per_worker = vec![worker(0, 10), worker(1, 3)];
    let mut b = stats(0, 0, 0, &[]);
    b.per_worker = vec![worker(0, 110), worker(1, 3), worker(2, 50)];
    b.connections.accepted = 150;
    let c = counters_delta(&a, &b);
    assert_eq!(c.per_worker_accepted, [100, 0, 50]);
    // The busiest worker took 100 of 150 over 3 workers: 2× the mean.
    assert_eq!(c.accept_imbalance(), Some(2.0));
    assert_eq!(c.per_worker_accept_wakeups, [110, 0, 55]);
    assert_eq!(c.per_worker_accept_empty, [10, 0, 5]);
    assert_eq!(c.accept_wakeups_per_conn(), Some(1.1));
    assert_eq!(c.empty_wakeups_per_conn(), Some(0.1));
}

#[test]
fn context_switches_are_read_from_every_thread() {
    let status = "Name:\tevlab\nThreads:\t3\nvoluntary_ctxt_switches:\t120\n\
                      nonvoluntary_ctxt_switches:\t7\n";
    assert_eq!(status_ctx_switches(status), Some(127));
    assert_eq!(status_ctx_switches("Name:\tx\n"), None);
    // This test process: its threads have switched at least once, and the count only grows.
    let me = std::process::id();
    let a = ctx_switches(me).expect("readable");
    std::thread::sleep(Duration::from_millis(5));
    let b = ctx_switches(me).expect("readable");
    assert!(a > 0 && b > a, "{a} then {b}");
}

#[test]
fn a_sweep_runs_every_series_at_each_value_before_the_next() {
    let spec = Spec::parse(
        "name = \"t\"\nmechanisms = [\"poll\", \"epoll-lt\"]\nrates = [1]\nidle = [0, 5]\n\
             trials = 2\n[sweep]\nflag = \"--workers\"\nvalues = [1, 4]\n",
        "t",
    )
    .unwrap();
    let series = spec.series_list(&|_| true, &[]);
    let legs: Vec<String> = sweep_order(&spec, &series)
        .iter()
        .map(|(t, i, s, v)| format!("{t}/{i}/{}", leg_label(&spec, s, *v)))
        .collect();
    assert_eq!(
        legs[..4],
        [
            "1/0/poll workers=1",
            "1/0/epoll-lt workers=1",
            "1/0/poll workers=4",
            "1/0/epoll-lt workers=4"
        ]
    );
    // 2 trials × 2 idle counts × 2 values × 2 series; trial 2 starts with the other series.
    assert_eq!(legs.len(), 16);
    assert_eq!(legs[8], "2/0/epoll-lt workers=1");
    // And the estimate counts those points.
    let e = estimate::estimate(&spec, series.len(), 1.0);
    assert_eq!(e.points, estimate::Count::Exact(16));
}

#[test]
fn stats_missing_a_field_are_an_error_that_names_it() {
    let s = stats(1, 1, 1, &[]);
    // Raw on purpose: a document the type cannot write, one field short.
    let mut v = serde_json::to_value(&s).unwrap();
    v["events"].as_object_mut().unwrap().remove("waits");
    let e = load::parse_server_stats(&v.to_string()).unwrap_err();
    assert!(e.to_string().contains("missing field `waits`"), "{e}");
}
