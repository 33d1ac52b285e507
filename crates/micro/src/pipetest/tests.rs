use std::collections::BTreeMap;

use super::*;
use crate::Verdict;

#[test]
fn routes_follow_the_c_program() {
    // 2006: every token of thread t stays on pipe n - t - 1.
    assert_eq!(next_pipe(Route::Last, 0, 0, 10, 1), 9);
    assert_eq!(next_pipe(Route::Last, 99, 2, 10, 3), 7);
    // The older rule: generation × 17 + thread + thread × (n / threads), mod n.
    assert_eq!(next_pipe(Route::Stride17, 0, 0, 10, 1), 0);
    assert_eq!(next_pipe(Route::Stride17, 1, 0, 10, 1), 7);
    assert_eq!(
        next_pipe(Route::Stride17, 5, 1, 100, 2),
        (85 + 1 + 50) % 100
    );
    // It goes round every pipe when 17 and the count are coprime.
    let seen: std::collections::HashSet<usize> = (0..10)
        .map(|g| next_pipe(Route::Stride17, g, 0, 10, 1))
        .collect();
    assert_eq!(seen.len(), 10);
    for n in Route::NAMES {
        assert_eq!(Route::from_name(n).unwrap().name(), n);
    }
}

#[test]
fn token_bytes_round_trip() {
    let t = Toke {
        generation: 299,
        tofd: 17,
        thread: 3,
    };
    let u = Toke::from_bytes(&t.bytes());
    assert_eq!((u.generation, u.tofd, u.thread), (299, 17, 3));
}

#[test]
fn every_pass_is_counted_for_poll_and_epoll() {
    let cfg = Config {
        message_threads: 3,
        max_generation: 20,
        ..Config::default()
    };
    for route in [Route::Stride17, Route::Last] {
        let cfg = Config {
            route,
            ..cfg.clone()
        };
        let r = run_once::<evlab_poll::Poll>(&cfg, 5).unwrap();
        assert_eq!(r.passes, 60);
        assert!(r.syscalls["poll"] >= 1, "{:?}", r.syscalls);
        let r = run_once::<evlab_poll::EpollEt>(&cfg, 7).unwrap();
        assert_eq!(r.passes, 60);
    }
}

fn run_at(v: f64) -> Run {
    Run {
        passes: 300,
        seconds: 300.0 / v,
        passes_per_sec: v,
        setup_seconds: 0.0,
        waits: 0,
        events: 0,
        empty_reads: 0,
        syscalls: BTreeMap::new(),
    }
}

/// A report whose mechanism m, in sweep i, has rate 100,000 × (pipes / 10)^k[i] at 10, 100
/// and 1,000 pipes.
fn synthetic(lines: &[(&str, &[f64])]) -> Report {
    let repeat = lines.first().map_or(0, |l| l.1.len());
    let pipes = vec![10, 100, 1000];
    let mut points = Vec::new();
    for &n in &pipes {
        for (m, ks) in lines {
            let runs: Vec<Run> = ks
                .iter()
                .map(|k| run_at(1e5 * (n as f64 / 10.0).powf(*k)))
                .collect();
            points.push(Point {
                mechanism: m.to_string(),
                pipes: n,
                status: Status::Ok,
                reason: None,
                passes_per_sec: median(&runs.iter().map(|r| r.passes_per_sec).collect::<Vec<_>>()),
                runs,
            });
        }
    }
    let mut r = Report {
        benchmark: "pipetest".into(),
        machine: this_machine(),
        message_threads: 1,
        max_generation: 300,
        route: Route::Stride17,
        repeat,
        mechanisms: lines.iter().map(|l| l.0.to_string()).collect(),
        pipes,
        points,
        findings: vec![],
        slopes: vec![],
    };
    r.slopes = slopes(&r);
    r
}

fn verdicts(r: &Report) -> Vec<Verdict> {
    findings(r).iter().map(|f| f.verdict).collect()
}

#[test]
fn each_finding_is_decided_on_the_interval_of_k() {
    use Verdict::*;
    let poll: &[f64] = &[-0.90, -0.92, -0.88];
    let flat: &[f64] = &[-0.05, -0.07, -0.06];
    let aio: &[f64] = &[-0.80, -0.85, -0.90];
    let r = synthetic(&[("poll", poll), ("epoll-lt", flat), ("aio-poll", aio)]);
    let s = &r.slopes[0];
    assert_eq!(s.mechanism, "poll");
    assert_eq!(s.pipes, [10, 100, 1000]);
    assert!(
        (s.k[1] + 0.92).abs() < 1e-9 && (s.mean + 0.90).abs() < 1e-9,
        "{s:?}"
    );
    assert!(s.lo.unwrap() < -0.9 && s.hi.unwrap() > -0.9);
    let f = findings(&r);
    assert_eq!(verdicts(&r), [Reproduced; 3]);
    let ids: Vec<&str> = f.iter().map(|f| f.rule.as_str()).collect();
    assert_eq!(ids, RULE_IDS);
    assert!(f[1].evidence.contains("k = -0.06 ["), "{}", f[1].evidence);
    assert!(
        f[2].evidence.contains("k(epoll-lt) − k(aio-poll) = 0.79"),
        "{}",
        f[2].evidence
    );

    // epoll falling as poll does: not flat, not better.
    let r = synthetic(&[("poll", poll), ("epoll-lt", aio), ("aio-poll", aio)]);
    assert_eq!(verdicts(&r), [Reproduced, NotReproduced, NotReproduced]);
    // poll flat: does not fall; epoll not better than it.
    let r = synthetic(&[("poll", flat), ("epoll-lt", flat), ("aio-poll", aio)]);
    assert_eq!(verdicts(&r), [NotReproduced, Reproduced, NotReproduced]);
    // Sweeps that straddle the threshold: inconclusive.
    let wide: &[f64] = &[-0.2, -0.8, -0.5];
    let r = synthetic(&[("poll", poll), ("epoll-lt", wide), ("aio-poll", aio)]);
    assert_eq!(verdicts(&r), [Reproduced, Inconclusive, Inconclusive]);
    let r = synthetic(&[("poll", wide), ("epoll-lt", flat), ("aio-poll", aio)]);
    assert_eq!(verdicts(&r), [Inconclusive, Reproduced, Inconclusive]);
    // Two sweeps decide nothing, however clear.
    let r = synthetic(&[
        ("poll", &poll[..2]),
        ("epoll-lt", &flat[..2]),
        ("aio-poll", &aio[..2]),
    ]);
    assert_eq!(verdicts(&r), [Inconclusive; 3]);
    assert!(findings(&r)[0].evidence.contains("3 needed"));
    // A mechanism missing: not measured.
    let r = synthetic(&[("poll", poll), ("epoll-lt", flat)]);
    assert_eq!(verdicts(&r), [Reproduced, Reproduced, NotMeasured]);
    assert!(findings(&r)[2]
        .evidence
        .contains("aio-poll was not measured"));
    let mut r = synthetic(&[("poll", poll)]);
    r.points.retain(|p| p.pipes == 10);
    r.slopes = slopes(&r);
    assert_eq!(verdicts(&r), [NotMeasured; 3]);
}

#[test]
fn the_interleaved_sweep_runs_every_point_repeat_times() {
    let cfg = Config {
        mechanisms: vec![Mechanism::Poll, Mechanism::EpollLt],
        pipes: vec![2, 8],
        max_generation: 5,
        repeat: 3,
        ..Config::default()
    };
    let mut seen = Vec::new();
    let r = run(&cfg, |p| {
        seen.push((p.mechanism.clone(), p.pipes, p.runs.len()))
    })
    .unwrap();
    // Sweep by sweep: every point's first run before any point's second.
    assert_eq!(seen.len(), 12);
    assert_eq!(seen[3], ("epoll-lt".to_string(), 8, 1));
    assert_eq!(seen[4], ("poll".to_string(), 2, 2));
    assert!(r.points.iter().all(|p| p.runs.len() == 3));
    assert_eq!(r.slopes.len(), 2);
    assert!(r.slopes.iter().all(|s| s.k.len() == 3 && s.lo.is_some()));
    assert_eq!(r.findings.len(), 3);
}

#[test]
fn bad_configurations_say_what_is_wrong() {
    let e = |c: Config| validate(&c).unwrap_err().to_string();
    let d = Config::default();
    assert!(e(Config {
        pipes: vec![1],
        ..d.clone()
    })
    .contains("at least 2"));
    assert!(e(Config {
        mechanisms: vec![Mechanism::Uring],
        ..d.clone()
    })
    .contains("not a readiness mechanism"));
    assert!(e(Config {
        message_threads: 0,
        ..d.clone()
    })
    .contains("message threads"));
}

#[test]
fn the_figure_has_a_line_per_measured_mechanism_with_bars_over_runs() {
    let run = run_at;
    let pt = |m: &str, pipes: usize, runs: Vec<f64>| Point {
        mechanism: m.into(),
        pipes,
        status: if runs.is_empty() {
            Status::Skipped
        } else {
            Status::Ok
        },
        reason: None,
        passes_per_sec: median(&runs),
        runs: runs.into_iter().map(run).collect(),
    };
    let r = Report {
        benchmark: "pipetest".into(),
        machine: this_machine(),
        message_threads: 1,
        max_generation: 300,
        route: Route::Stride17,
        repeat: 3,
        mechanisms: vec!["poll".into(), "epoll-lt".into(), "aio-poll".into()],
        pipes: vec![10, 1000, 16000],
        points: vec![
            pt("poll", 10, vec![90.0, 100.0, 130.0]),
            pt("poll", 1000, vec![5.0, 5.0, 5.0]),
            pt("poll", 16000, vec![]),
            pt("epoll-lt", 10, vec![100.0]),
            pt("epoll-lt", 16000, vec![95.0]),
            pt("aio-poll", 10, vec![]),
        ],
        findings: vec![],
        slopes: vec![],
    };
    let plots = plots(&r);
    assert_eq!(plots.len(), 1);
    let p = &plots[0];
    assert_eq!(p.name, "pipetest");
    assert!(p.x_log && !p.y_log);
    assert_eq!(
        (p.x_label.as_str(), p.y_label.as_str()),
        ("pipes", "passes per second")
    );
    let labels: Vec<&str> = p.lines.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(labels, ["poll", "epoll-lt"], "aio-poll was never measured");
    let poll = p.series("poll").unwrap();
    assert_eq!(poll.xs(), [10.0, 1000.0], "the skipped point is a gap");
    assert_eq!(poll.y_at(10.0), Some(100.0));
    assert_eq!(poll.points[0].range, Some((90.0, 130.0)));
    let ep = p.series("epoll-lt").unwrap();
    assert_eq!(ep.xs(), [10.0, 16000.0]);
    assert_eq!(ep.points[1].range, None, "one run: no bar");
}
