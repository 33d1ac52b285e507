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
