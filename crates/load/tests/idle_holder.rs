//! The idle holder against a tiny test server on loopback: holds connections, re-opens the ones
//! the server closes, counts failures without spinning, stops when told. Every wait is bounded.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use evlab_load::idle::{run_idle, IdleConfig, IdleError, IdleEvent, IdleStatus, StopReason};

/// Accepts everything and keeps it (or, with `close_at_once`, closes it at once).
struct TestServer {
    addr: SocketAddr,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    peers: Arc<Mutex<Vec<SocketAddr>>>,
    accepted: Arc<Mutex<usize>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TestServer {
    fn start(close_at_once: bool) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let conns = Arc::new(Mutex::new(Vec::new()));
        let peers = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(Mutex::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, p, a, s) = (conns.clone(), peers.clone(), accepted.clone(), stop.clone());
        let thread = thread::spawn(move || {
            // Bounded: the test's own deadlines are far shorter.
            let deadline = Instant::now() + Duration::from_secs(90);
            while !s.load(Ordering::Relaxed) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((stream, peer)) => {
                        *a.lock().unwrap() += 1;
                        p.lock().unwrap().push(peer);
                        if !close_at_once {
                            c.lock().unwrap().push(stream);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        thread::sleep(Duration::from_millis(1));
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            }
        });
        TestServer {
            addr,
            conns,
            peers,
            accepted,
            stop,
            thread: Some(thread),
        }
    }

    fn open(&self) -> usize {
        self.conns.lock().unwrap().len()
    }

    /// Closes `n` of the connections it holds (FIN: the client reads EOF).
    fn close(&self, n: usize) {
        let mut c = self.conns.lock().unwrap();
        let keep = c.len() - n;
        c.truncate(keep);
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Runs the holder on a thread, publishing its latest status.
struct Running {
    stop: Arc<AtomicBool>,
    status: Arc<Mutex<Option<IdleStatus>>>,
    all_up_events: Arc<Mutex<usize>>,
    thread: JoinHandle<Result<evlab_load::idle::IdleSummary, IdleError>>,
}

fn spawn(cfg: IdleConfig) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let status = Arc::new(Mutex::new(None));
    let all_up_events = Arc::new(Mutex::new(0));
    let (s, st, au) = (stop.clone(), status.clone(), all_up_events.clone());
    let thread = thread::spawn(move || {
        run_idle(&cfg, &*s, |x: &IdleStatus| {
            if x.event == IdleEvent::AllUp {
                *au.lock().unwrap() += 1;
            }
            *st.lock().unwrap() = Some(x.clone());
        })
    });
    Running {
        stop,
        status,
        all_up_events,
        thread,
    }
}

impl Running {
    fn get(&self) -> Option<IdleStatus> {
        self.status.lock().unwrap().clone()
    }

    fn stop_and_join(self) -> evlab_load::idle::IdleSummary {
        self.stop.store(true, Ordering::Relaxed);
        // The holder checks the flag at least every 100 ms; allow far more, but never hang.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.thread.is_finished() {
            assert!(Instant::now() < deadline, "the holder did not stop");
            thread::sleep(Duration::from_millis(5));
        }
        self.thread.join().unwrap().unwrap()
    }
}

#[test]
fn holds_reopens_and_stops() {
    const N: usize = 200;
    let server = TestServer::start(false);
    let mut cfg = IdleConfig::new(server.addr, N);
    cfg.progress_interval = Duration::from_millis(20);
    cfg.max_connecting = 64;
    let run = spawn(cfg);

    wait_until("all connections up", Duration::from_secs(30), || {
        run.get().is_some_and(|s| s.up == N) && server.open() == N
    });
    assert_eq!(
        server.open(),
        N,
        "the server saw {N} concurrent connections"
    );
    assert!(*run.all_up_events.lock().unwrap() >= 1);
    // Every connection came from the idle holder's own pool, 127.1.0.0/16.
    for p in server.peers.lock().unwrap().iter() {
        match p.ip() {
            IpAddr::V4(ip) => assert_eq!(&ip.octets()[..2], &[127, 1], "{p}"),
            IpAddr::V6(_) => panic!("{p}"),
        }
    }
    let s = run.get().unwrap();
    assert_eq!((s.opened, s.reopened, s.failed.total()), (N as u64, 0, 0));

    // Let the connections age past the holder's "short-lived" mark, so re-opening is immediate.
    thread::sleep(Duration::from_millis(200));
    server.close(50);
    wait_until(
        "the closed connections re-opened",
        Duration::from_secs(30),
        || run.get().is_some_and(|s| s.reopened == 50 && s.up == N) && server.open() == N,
    );
    assert_eq!(*server.accepted.lock().unwrap(), N + 50);
    wait_until("the second all-up report", Duration::from_secs(10), || {
        *run.all_up_events.lock().unwrap() >= 2
    });

    let summary = run.stop_and_join();
    assert_eq!(summary.reason, StopReason::Stopped);
    assert_eq!(summary.last.event, IdleEvent::Stopping);
    assert_eq!(summary.last.up, N);
    assert_eq!(summary.peak_up, N);
    assert_eq!(summary.last.reopened, 50);
    assert_eq!(
        summary.last.closed_by_server + summary.last.reset_by_server,
        50
    );
    assert_eq!(summary.last.opened, N as u64 + 50);
    assert_eq!(summary.last.failed.total(), 0);
    assert!(summary.all_up_after.is_some());
    assert_eq!(summary.source_addrs, 1);
    let text = summary.to_string();
    assert!(text.contains("reopened 50"), "{text}");
}

#[test]
fn refused_connections_are_counted_with_backoff_not_a_spin() {
    // A port with nothing listening on it.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cfg = IdleConfig::new(SocketAddr::from(([127, 0, 0, 1], port)), 5);
    cfg.duration = Some(Duration::from_secs(1));
    let stop = AtomicBool::new(false);
    let summary = run_idle(&cfg, &stop, |_| {}).unwrap();
    assert_eq!(summary.reason, StopReason::Duration);
    assert_eq!(summary.last.up, 0);
    assert_eq!(summary.last.opened, 0);
    let f = summary.last.failed;
    assert!(f.refused > 0, "{f}");
    assert_eq!(f.total(), f.refused, "{f}");
    // Exponential backoff from 10 ms: each slot tries about log2(1 s / 10 ms) + a few times in a
    // second; a spinning holder would make thousands of attempts.
    assert!(f.refused <= 5 * 20, "{f}");
    assert!(summary.all_up_after.is_none());
}

#[test]
fn a_server_that_closes_at_once_meets_backoff() {
    let server = TestServer::start(true);
    let mut cfg = IdleConfig::new(server.addr, 5);
    cfg.duration = Some(Duration::from_secs(1));
    let stop = AtomicBool::new(false);
    let summary = run_idle(&cfg, &stop, |_| {}).unwrap();
    let lost = summary.last.closed_by_server + summary.last.reset_by_server;
    assert!(lost > 0);
    assert!(lost <= 5 * 20, "re-opened {lost} times in a second: a spin");
}

#[test]
fn stops_promptly_on_the_flag_and_asks_for_what_it_cannot_have() {
    let server = TestServer::start(false);
    let mut cfg = IdleConfig::new(server.addr, 3);
    cfg.duration = Some(Duration::from_secs(60));
    // Already stopped: returns at once, with everything closed.
    let stop = AtomicBool::new(true);
    let summary = run_idle(&cfg, &stop, |_| {}).unwrap();
    assert_eq!(summary.reason, StopReason::Stopped);

    cfg.conns = usize::MAX / 4;
    match run_idle(&cfg, &stop, |_| {}) {
        Err(e @ IdleError::FdLimit { .. }) => {
            assert!(e.to_string().contains("open-file limit"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}
