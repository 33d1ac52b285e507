use super::*;
use std::sync::atomic::AtomicBool;

#[test]
fn pool_addresses_are_distinct_and_in_127_1() {
    let mut seen = std::collections::HashSet::new();
    for k in 0..MAX_SOURCE_ADDRS {
        let a = idle_source_addr(k);
        let o = a.octets();
        assert_eq!((o[0], o[1]), (127, 1));
        assert!(o[3] != 0 && o[3] != 255, "{a}");
        assert!(seen.insert(a), "{a} repeated");
    }
}

#[test]
fn auto_pool_size_and_non_loopback() {
    let mut c = IdleConfig::new("127.0.0.1:80".parse().unwrap(), 20_000);
    assert_eq!(c.source_pool().len(), 2);
    c.conns = 5;
    assert_eq!(c.source_pool(), vec![Ipv4Addr::new(127, 1, 0, 1)]);
    c.source_addrs = 3;
    assert_eq!(c.source_pool().len(), 3);
    c.server = "[::1]:80".parse().unwrap();
    assert!(c.source_pool().is_empty());
    c.server = "10.0.0.1:80".parse().unwrap();
    assert!(c.source_pool().is_empty());
}

#[test]
fn failures_by_errno() {
    let mut f = IdleFailures::default();
    for e in [
        libc::ECONNREFUSED,
        libc::ECONNRESET,
        libc::ETIMEDOUT,
        libc::EADDRNOTAVAIL,
        libc::EMFILE,
        libc::EHOSTUNREACH,
        libc::EINVAL,
    ] {
        f.count(&io::Error::from_raw_os_error(e));
    }
    assert_eq!(
        f,
        IdleFailures {
            refused: 1,
            reset: 1,
            timeout: 1,
            addr_unavail: 1,
            fd_unavail: 1,
            unreachable: 1,
            other: 1
        }
    );
    assert_eq!(f.total(), 7);
}

#[test]
fn rejects_bad_config() {
    let ok = IdleConfig::new("127.0.0.1:80".parse().unwrap(), 1);
    let stop = AtomicBool::new(true);
    let cases: [fn(&mut IdleConfig); 8] = [
        |c: &mut IdleConfig| c.request_uri = Some("one".into()),
        |c: &mut IdleConfig| c.request_uri = Some("/a b".into()),
        |c: &mut IdleConfig| c.conns = 0,
        |c: &mut IdleConfig| c.rate = Some(0.0),
        |c: &mut IdleConfig| c.rate = Some(f64::NAN),
        |c: &mut IdleConfig| c.max_per_loop = 0,
        |c: &mut IdleConfig| c.source_addrs = MAX_SOURCE_ADDRS + 1,
        |c: &mut IdleConfig| c.server.set_port(0),
    ];
    for f in cases {
        let mut c = ok.clone();
        f(&mut c);
        assert!(matches!(
            run_idle(&c, &stop, |_| {}),
            Err(IdleError::Config(_))
        ));
    }
}
