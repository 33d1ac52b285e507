use super::*;

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
