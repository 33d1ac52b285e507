//! Every mechanism against real sockets: readiness reported for the interest asked, changes of
//! interest honoured, deregistration silencing a descriptor, descriptors past FD_SETSIZE, and
//! each mechanism's own accounting (discarded events, batches, waits from memory).

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use evlab_poll::*;
use evlab_sys::{self as sys, Syscall};

const SHORT: Option<Duration> = Some(Duration::from_millis(200));

fn pair() -> (UnixStream, UnixStream) {
    let (a, b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    (a, b)
}

fn available<P: Poller>() -> Option<P> {
    evlab_poll::testing::mechanism(P::MECHANISM)
        .then(|| P::new().expect("supported mechanism starts"))
}

fn wait_for<P: Poller>(p: &mut P, ev: &mut Events, token: usize) -> Option<Event> {
    for _ in 0..5 {
        p.wait(ev, SHORT).unwrap();
        if let Some(e) = ev.iter().find(|e| e.token.0 == token) {
            return Some(*e);
        }
    }
    None
}

fn readable_when_data<P: Poller>() {
    let Some(mut p) = available::<P>() else {
        return;
    };
    let (mut a, b) = pair();
    let mut ev = Events::with_capacity(64);
    p.register(b.as_raw_fd(), Token(7), Interest::READABLE)
        .unwrap();
    p.wait(&mut ev, Some(Duration::from_millis(50))).unwrap();
    assert!(
        !ev.iter()
            .any(|e| e.token.0 == 7 && e.flags() & Event::READABLE != 0),
        "readable before any data"
    );
    a.write_all(b"hello").unwrap();
    let e = wait_for(&mut p, &mut ev, 7).expect("readable event");
    assert!(e.readable());
    let mut buf = [0u8; 16];
    assert_eq!((&b).read(&mut buf).unwrap(), 5);
    p.deregister(b.as_raw_fd()).unwrap();
    a.write_all(b"more").unwrap();
    p.wait(&mut ev, Some(Duration::from_millis(50))).unwrap();
    assert!(!ev.iter().any(|e| e.token.0 == 7), "event after deregister");
}

fn writable_interest<P: Poller>() {
    let Some(mut p) = available::<P>() else {
        return;
    };
    let (_a, b) = pair();
    let mut ev = Events::with_capacity(64);
    p.register(b.as_raw_fd(), Token(3), Interest::READABLE)
        .unwrap();
    p.reregister(b.as_raw_fd(), Token(3), Interest::WRITABLE)
        .unwrap();
    let e = wait_for(&mut p, &mut ev, 3).expect("writable event");
    assert!(e.writable());
    if !p.edge_triggered() {
        // Level-triggered: reported again while it stays writable.
        assert!(wait_for(&mut p, &mut ev, 3).is_some());
        // Back to reading: a writable socket with nothing to read is quiet.
        p.reregister(b.as_raw_fd(), Token(3), Interest::READABLE)
            .unwrap();
        p.wait(&mut ev, Some(Duration::from_millis(50))).unwrap();
        p.wait(&mut ev, Some(Duration::from_millis(50))).unwrap();
        assert!(!ev.iter().any(|e| e.token.0 == 3), "{:?}", ev.as_slice());
    }
    p.deregister(b.as_raw_fd()).unwrap();
}

fn edge_reports_once<P: Poller>() {
    let Some(mut p) = available::<P>() else {
        return;
    };
    if !p.edge_triggered() {
        return;
    }
    let (mut a, b) = pair();
    let mut ev = Events::with_capacity(64);
    p.register(b.as_raw_fd(), Token(9), Interest::READABLE)
        .unwrap();
    wait_for(&mut p, &mut ev, 9); // the initial (writable) edge
    a.write_all(b"x").unwrap();
    assert!(wait_for(&mut p, &mut ev, 9).unwrap().readable());
    // Not drained, no new data: no new edge.
    p.wait(&mut ev, Some(Duration::from_millis(50))).unwrap();
    assert!(!ev.iter().any(|e| e.token.0 == 9 && e.readable()));
    a.write_all(b"y").unwrap();
    assert!(wait_for(&mut p, &mut ev, 9).unwrap().readable());
}

fn many_descriptors<P: Poller>() {
    let Some(mut p) = available::<P>() else {
        return;
    };
    let _ = sys::raise_fd_limit();
    // 1,500 pairs: 3,000 descriptors, well past FD_SETSIZE (1,024).
    let pairs: Vec<_> = (0..1500).map(|_| pair()).collect();
    for (i, (_, b)) in pairs.iter().enumerate() {
        p.register(b.as_raw_fd(), Token(i), Interest::READABLE)
            .unwrap();
    }
    let last = pairs.len() - 1;
    (&pairs[last].0).write_all(b"z").unwrap();
    (&pairs[10].0).write_all(b"z").unwrap();
    let mut ev = Events::with_capacity(4096);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..5 {
        p.wait(&mut ev, SHORT).unwrap();
        seen.extend(ev.iter().filter(|e| e.readable()).map(|e| e.token.0));
        if seen.contains(&last) && seen.contains(&10) {
            break;
        }
    }
    assert!(seen.contains(&last) && seen.contains(&10), "{seen:?}");
    assert_eq!(seen.len(), 2, "only the two with data are readable");
    for (_, b) in &pairs {
        p.deregister(b.as_raw_fd()).unwrap();
    }
}

fn timeout_is_honoured<P: Poller>() {
    let Some(mut p) = available::<P>() else {
        return;
    };
    let mut ev = Events::with_capacity(8);
    let t0 = std::time::Instant::now();
    p.wait(&mut ev, Some(Duration::from_millis(100))).unwrap();
    let dt = t0.elapsed();
    assert!(ev.is_empty());
    assert!(dt >= Duration::from_millis(90), "returned after {dt:?}");
    assert!(dt < Duration::from_secs(5), "returned after {dt:?}");
}

/// One test module per readiness mechanism of the registry (`each::EpollLt::…`), so a new
/// mechanism inherits them all; the completion engine is not a `Poller` and is tested with the
/// server.
macro_rules! poller_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {
        mod each {
            $(poller_tests!(@module $v $kind $args);)*
        }
    };
    (@module $v:ident readiness ($ty:ty)) => {
        #[allow(non_snake_case)]
        mod $v {
            #[test] fn readable_when_data() { crate::readable_when_data::<$ty>() }
            #[test] fn writable_interest() { crate::writable_interest::<$ty>() }
            #[test] fn edge_reports_once() { crate::edge_reports_once::<$ty>() }
            #[test] fn many_descriptors() { crate::many_descriptors::<$ty>() }
            #[test] fn timeout_is_honoured() { crate::timeout_is_honoured::<$ty>() }
        }
    };
    (@module $v:ident completion $args:tt) => {};
}

evlab_poll::for_each_mechanism!(poller_tests);

#[test]
fn epoll2_discards_unwanted_writable_events() {
    let mut p = Epoll2::new().unwrap();
    let (_a, b) = pair();
    let mut ev = Events::with_capacity(8);
    p.register(b.as_raw_fd(), Token(1), Interest::READABLE)
        .unwrap();
    for _ in 0..3 {
        p.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
        assert!(ev.is_empty(), "writable is not of interest");
    }
    assert!(p.stats().discarded >= 3, "{:?}", p.stats());
    let before = sys::thread_counters().snapshot();
    p.reregister(b.as_raw_fd(), Token(1), Interest::WRITABLE)
        .unwrap();
    let d = sys::thread_counters().snapshot().since(&before);
    assert_eq!(d.calls(Syscall::EpollCtl), 0, "epoll2 never modifies");
    p.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
    assert_eq!(ev.len(), 1);
}

#[test]
fn epoll_lt_modifies_with_a_syscall() {
    let mut p = EpollLt::new().unwrap();
    let (_a, b) = pair();
    let before = sys::thread_counters().snapshot();
    p.register(b.as_raw_fd(), Token(1), Interest::READABLE)
        .unwrap();
    p.reregister(b.as_raw_fd(), Token(1), Interest::WRITABLE)
        .unwrap();
    p.reregister(b.as_raw_fd(), Token(1), Interest::READABLE)
        .unwrap();
    p.deregister(b.as_raw_fd()).unwrap();
    let d = sys::thread_counters().snapshot().since(&before);
    assert_eq!(d.calls(Syscall::EpollCtl), 4);
}

#[test]
fn epoll_ctlv_batches_changes_into_one_enter() {
    let Some(mut p) = available::<EpollCtlv>() else {
        return;
    };
    let pairs: Vec<_> = (0..50).map(|_| pair()).collect();
    let before = sys::thread_counters().snapshot();
    for (i, (_, b)) in pairs.iter().enumerate() {
        p.register(b.as_raw_fd(), Token(i), Interest::READABLE)
            .unwrap();
        p.reregister(b.as_raw_fd(), Token(i), Interest::WRITABLE)
            .unwrap();
    }
    let mut ev = Events::with_capacity(128);
    p.wait(&mut ev, SHORT).unwrap();
    let d = sys::thread_counters().snapshot().since(&before);
    assert_eq!(
        d.calls(Syscall::EpollCtl),
        0,
        "no epoll_ctl syscalls for ADD/MOD"
    );
    assert!(d.calls(Syscall::IoUringEnter) <= 2, "{:?}", d.rows());
    assert_eq!(ev.len(), 50, "all writable after the batch");
    assert_eq!(p.ctl_errors(), 0);
    let s = p.stats();
    assert_eq!((s.batches, s.interest_changes), (1, 100));
    // A queued ADD dropped by deregister never reaches the kernel.
    let (_c, d2) = pair();
    p.register(d2.as_raw_fd(), Token(999), Interest::WRITABLE)
        .unwrap();
    p.deregister(d2.as_raw_fd()).unwrap();
    p.wait(&mut ev, SHORT).unwrap();
    assert!(!ev.iter().any(|e| e.token.0 == 999));
    assert_eq!(p.ctl_errors(), 0);
}

#[test]
fn uring_poll_answers_from_memory() {
    let Some(mut p) = available::<UringPoll>() else {
        return;
    };
    let pairs: Vec<_> = (0..20).map(|_| pair()).collect();
    for (i, (_, b)) in pairs.iter().enumerate() {
        p.register(b.as_raw_fd(), Token(i), Interest::READABLE)
            .unwrap();
    }
    let mut ev = Events::with_capacity(8);
    // 20 initial (writable) edges, 8 per wait: the first wait enters the kernel, later ones
    // find the rest already in the ring.
    let mut total = 0;
    for _ in 0..5 {
        p.wait(&mut ev, SHORT).unwrap();
        total += ev.len();
    }
    assert_eq!(total, 20);
    let s = p.stats();
    assert!(s.waits_from_memory >= 2, "{s:?}");
}

/// docs/mechanisms.md says what each mechanism costs, syscall by syscall: every mechanism of the
/// registry must appear there by its name, as a word of its own ("uring" inside "uring-poll"
/// does not count).
#[test]
fn docs_name_every_mechanism() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/mechanisms.md");
    let doc = std::fs::read_to_string(path).expect("docs/mechanisms.md");
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let names_word = |name: &str| {
        doc.match_indices(name).any(|(at, _)| {
            let before = doc[..at].chars().next_back();
            let after = doc[at + name.len()..].chars().next();
            !before.is_some_and(is_word) && !after.is_some_and(is_word)
        })
    };
    let missing: Vec<&str> = Mechanism::NAMES
        .into_iter()
        .filter(|n| !names_word(n))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/mechanisms.md never names {missing:?}"
    );
}
