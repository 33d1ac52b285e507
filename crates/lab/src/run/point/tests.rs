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
    // Trial 1 runs every arm (series × idle count) at workers=1, in a drawn order, before any
    // at workers=4.
    let mut first: Vec<&str> = legs[..4].iter().map(String::as_str).collect();
    first.sort_unstable();
    assert_eq!(
        first,
        [
            "1/0/epoll-lt workers=1",
            "1/0/poll workers=1",
            "1/5/epoll-lt workers=1",
            "1/5/poll workers=1"
        ]
    );
    assert!(legs[4..8]
        .iter()
        .all(|l| l.starts_with("1/") && l.ends_with("workers=4")));
    // 2 trials × 2 idle counts × 2 values × 2 series; trial 2 starts with the other series.
    assert_eq!(legs.len(), 16);
    assert_eq!(legs[8], "2/0/epoll-lt workers=1");
    // And the estimate counts those points.
    let e = estimate::estimate(&spec, series.len(), 1.0);
    assert_eq!(e.points, estimate::Count::Exact(16));
}
