use super::*;

#[test]
fn names_round_trip_and_sources_spread() {
    for m in Mode::ALL {
        assert_eq!(Mode::from_name(m.name()), Some(m));
    }
    assert_eq!(source(0).to_string(), "127.3.0.1:0");
    assert_eq!(source(253).to_string(), "127.3.0.254:0");
    assert_eq!(source(254).to_string(), "127.3.1.1:0");
    assert_eq!(source(256 * 254), source(0));
    assert_eq!(cv(&[5, 5, 5]), 0.0);
    assert!(cv(&[0, 10]) > 0.9);
}

#[test]
fn every_connection_is_accepted_once_by_threads() {
    let cfg = Config {
        conns: 20,
        settle: Duration::from_millis(5),
        ..Config::default()
    };
    for mode in Mode::ALL {
        if mode == Mode::Uring
            && !evlab_poll::testing::supported(
                "io_uring",
                os::UringAcceptor::support(),
                "io_uring accept unavailable",
            )
        {
            continue;
        }
        let p = point(&cfg, mode, As::Threads, 3);
        assert_eq!(p.status, Status::Ok, "{mode:?}: {:?}", p.reason);
        assert_eq!(p.connections, 20, "{mode:?}");
        assert_eq!(p.accepted, 20, "{mode:?}");
        assert_eq!(p.per_worker.iter().sum::<u64>(), 20, "{mode:?}");
        assert_eq!(p.latency.count, 20, "{mode:?}");
    }
}

fn pt(mode: Mode, as_: As, n: usize, wakeups: f64, status: Status) -> Point {
    Point {
        mode,
        round: 0,
        as_,
        workers: n,
        status,
        reason: None,
        connections: 10,
        client_errors: 0,
        accepted: if status == Status::Ok { 10 } else { 0 },
        per_worker: vec![],
        wakeups_per_accept: wakeups,
        empty_wakeups: 0,
        involuntary_switches: 0,
        cpu_us_per_accept: 10.0 * wakeups,
        wall_us_per_connection: 50.0,
        balance_cv: 0.5,
        latency: Percentiles::default(),
        worker_stats: vec![],
    }
}

fn report(points: Vec<Point>, repeat: usize) -> Report {
    Report {
        benchmark: "herd".into(),
        machine: this_machine(),
        conns: 10,
        clients: 1,
        repeat,
        points,
        findings: vec![],
    }
}

/// `values[mode][round]` wake-ups per accept at 4 and 64 threads in every round.
fn rounds(values: &[(Mode, &[f64])]) -> Report {
    let mut points = Vec::new();
    let repeat = values.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    for (mode, v) in values {
        for (round, &w) in v.iter().enumerate() {
            for n in [4, 64] {
                let mut p = pt(*mode, As::Threads, n, w, Status::Ok);
                p.round = round;
                points.push(p);
            }
        }
    }
    report(points, repeat)
}

fn verdicts(r: &Report) -> Vec<Verdict> {
    findings(r).iter().map(|f| f.verdict).collect()
}

#[test]
fn findings_are_decided_on_the_interval_over_rounds() {
    use Verdict::*;
    let r = rounds(&[
        (Mode::Accept, &[1.0, 1.01, 1.0]),
        (Mode::Poll, &[3.1, 2.9, 3.0]),
        (Mode::Epoll, &[2.5, 2.6, 2.4]),
        (Mode::Exclusive, &[1.02, 1.0, 1.01]),
    ]);
    assert_eq!(
        verdicts(&r),
        [Reproduced, Reproduced, Reproduced, Reproduced]
    );
    let f = &findings(&r)[1];
    assert_eq!(f.rule, RULE_IDS[1]);
    assert!(
        f.evidence
            .starts_with("poll with 64 threads: wake-ups per accept 3.00 [")
            && f.evidence.contains("over 3 rounds"),
        "{}",
        f.evidence
    );
    // The opposite shape: the herd gone for poll, back for accept.
    let r = rounds(&[
        (Mode::Accept, &[3.0, 3.1, 2.9]),
        (Mode::Poll, &[1.0, 1.0, 1.01]),
        (Mode::Epoll, &[1.0, 1.01, 1.0]),
        (Mode::Exclusive, &[2.0, 2.1, 2.2]),
    ]);
    assert_eq!(
        verdicts(&r),
        [NotReproduced, NotReproduced, NotReproduced, NotReproduced]
    );
    // Rounds that straddle the threshold, and too few rounds, decide nothing.
    let r = rounds(&[
        (Mode::Accept, &[1.0, 2.0, 1.2]),
        (Mode::Poll, &[3.0, 3.1]),
        (Mode::Epoll, &[1.0, 4.0, 2.5]),
        (Mode::Exclusive, &[1.0]),
    ]);
    assert_eq!(
        verdicts(&r),
        [Inconclusive, Inconclusive, Inconclusive, Inconclusive]
    );
}

#[test]
fn a_point_missing_from_a_round_moves_the_judged_point_down() {
    let mut r = rounds(&[(Mode::Poll, &[3.0, 3.1, 2.9])]);
    // 64 threads failed in round 2: the rule reads 4 threads, measured in every round.
    for p in r.points.iter_mut() {
        if p.workers == 64 && p.round == 1 {
            p.status = Status::Failed;
        }
    }
    let f = &findings(&r)[1];
    assert_eq!(f.verdict, Verdict::Reproduced);
    assert!(
        f.evidence.starts_with("poll with 4 threads"),
        "{}",
        f.evidence
    );
    assert_eq!(findings(&r)[0].verdict, Verdict::NotMeasured);
}

#[test]
fn figures_per_way_of_running_with_a_line_per_mode() {
    let mut points = Vec::new();
    for n in [1, 4, 64] {
        points.push(pt(Mode::Accept, As::Threads, n, 1.0, Status::Ok));
        points.push(pt(Mode::Poll, As::Threads, n, n as f64, Status::Ok));
        points.push(pt(Mode::Uring, As::Threads, n, 0.0, Status::Skipped));
    }
    points.push(pt(Mode::Epoll, As::Processes, 8, 6.0, Status::Ok));
    // A second round of poll at 64: the figure draws the mean of the rounds.
    let mut again = pt(Mode::Poll, As::Threads, 64, 32.0, Status::Ok);
    again.round = 1;
    points.push(again);
    let r = report(points, 2);
    let plots = plots(&r);
    let names: Vec<&str> = plots.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "herd-wakeups-threads",
            "herd-cpu-threads",
            "herd-balance-threads",
            "herd-wakeups-processes",
            "herd-cpu-processes",
            "herd-balance-processes"
        ]
    );
    let w = &plots[0];
    assert!(w.x_log && !w.y_log);
    assert_eq!(w.x_label, "waiting workers");
    let labels: Vec<&str> = w.lines.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(
        labels,
        ["blocking accept", "poll"],
        "uring was skipped: no line"
    );
    assert_eq!(w.series("poll").unwrap().xs(), [1.0, 4.0, 64.0]);
    assert_eq!(w.series("poll").unwrap().y_at(64.0), Some(48.0));
    assert!(plots[1].y_label.contains("(µs)"));
    assert_eq!(plots[1].series("poll").unwrap().y_at(4.0), Some(40.0));
    assert_eq!(
        plots[3].series("shared epoll").unwrap().y_at(8.0),
        Some(6.0)
    );
    assert!(plots[3].title.contains("processes"));
}
