//! The generator against tiny real servers on loopback: exact counts, the schedule, and every
//! failure filed under the cause httperf would give it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use evlab_load::gen::{self, Live, LoadConfig};
use evlab_load::summary::{self, RunInfo, Stats};
use evlab_load::workload::{Fixed, Workload};

/// Serves each connection on its own thread with `handle`.
fn server(handle: fn(TcpStream)) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || handle(s));
        }
    });
    addr
}

/// Reads requests (up to each blank line) and answers each with `reply`.
fn answer_each(s: TcpStream, reply: &[u8]) {
    answer_each_after(s, reply, Duration::ZERO);
}

/// As `answer_each`, waiting `delay` before each answer.
fn answer_each_after(mut s: TcpStream, reply: &[u8], delay: Duration) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..p + 4);
            std::thread::sleep(delay);
            if s.write_all(reply).is_err() {
                return;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn fixed_ok(s: TcpStream) {
    answer_each(s, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na");
}

fn chunked(s: TcpStream) {
    answer_each(
        s,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    );
}

fn silent(mut s: TcpStream) {
    let mut b = [0u8; 1024];
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    while matches!(s.read(&mut b), Ok(n) if n > 0) {}
}

fn reset(mut s: TcpStream) {
    let mut b = [0u8; 1024];
    let _ = s.read(&mut b);
    evlab_sys::set_linger(s.as_raw_fd(), Some(0)).unwrap();
}

fn garbage(mut s: TcpStream) {
    let mut b = [0u8; 1024];
    let _ = s.read(&mut b);
    let _ = s.write_all(b"this is not http\r\n\r\n");
    std::thread::sleep(Duration::from_millis(200));
}

fn close_delimited(mut s: TcpStream) {
    let mut b = [0u8; 1024];
    let _ = s.read(&mut b);
    let _ = s.write_all(b"HTTP/1.0 200 OK\r\n\r\nuntil the end");
}

/// Answers GET with a 5-byte body and HEAD with the same head and no body, as HTTP says.
fn method_aware(mut s: TcpStream) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = buf.starts_with(b"HEAD ");
            let ok = head || buf.starts_with(b"GET ");
            buf.drain(..p + 4);
            let reply: &[u8] = match (ok, head) {
                (false, _) => b"HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\n\r\n",
                (true, true) => b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
                (true, false) => b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            };
            if s.write_all(reply).is_err() {
                return;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn cfg(addr: SocketAddr, rate: f64, conns: u64) -> LoadConfig {
    LoadConfig {
        sample_interval: Duration::from_secs(1),
        ..LoadConfig::new(addr, rate, conns)
    }
}

fn go(c: &LoadConfig, calls: usize) -> (Stats, RunInfo) {
    let stop = AtomicBool::new(false);
    let factory = move |_| Box::new(Fixed::new("/one", calls)) as Box<dyn Workload>;
    gen::run(c, &factory, &stop, &Live::default()).unwrap()
}

#[test]
fn exact_counts_and_schedule() {
    let addr = server(fixed_ok);
    let t0 = Instant::now();
    let (s, info) = go(&cfg(addr, 200.0, 400), 1);
    let took = t0.elapsed();
    assert_eq!(
        (s.initiated, s.completed, s.requests, s.replies),
        (400, 400, 400, 400)
    );
    assert_eq!(s.status[2], 400);
    assert_eq!(s.errors.total(), 0);
    assert_eq!(s.body_bytes, 400);
    // 400 starts at 200/s: the last at ~2 s. A schedule check, not a speed claim.
    assert!(
        took > Duration::from_millis(1800) && took < Duration::from_secs(4),
        "{took:?}"
    );
    let text = summary::to_text(&s, &info);
    for label in [
        "Total: connections 400 requests 400 replies 400",
        "Connection rate:",
        "Connection time [ms]:",
        "Request rate:",
        "Reply rate [replies/s]:",
        "Reply time [ms]:",
        "Reply size [B]:",
        "Reply status: 1xx=0 2xx=400",
        "CPU time [s]:",
        "Net I/O:",
        "Errors: total 0 client-timo 0 socket-timo 0 connrefused 0 connreset 0",
        "Errors: fd-unavail 0 addrunavail 0 ftab-full 0 other 0",
        "Latency [ms]: p50",
        "Late starts:",
        "Schedule: lateness p50",
    ] {
        assert!(text.contains(label), "missing {label:?} in:\n{text}");
    }
    let r = summary::report(&s, &info);
    assert_eq!(r.replies.total, 400);
    assert!(r.replies.rate.avg > 100.0);
    // Every start is in the lateness distribution; the schedule's own figures are reported.
    assert_eq!(s.lateness.len(), 400);
    assert_eq!(r.schedule.offered_rate, 200.0);
    assert!(r.schedule.achieved_start_rate.unwrap() > 0.0);
    assert!(r.schedule.lag_ms.len() >= 2);
    // One sample per second of the run, the replies of all of them adding up.
    assert!(r.samples.len() >= 2, "{:?}", r.samples);
    assert_eq!(r.samples.iter().map(|x| x.replies).sum::<u64>(), 400);
    // The last start is at 1.995 s: the run ends inside the second interval, which ends with
    // it, marked partial (or, had the run gone past 2 s, whole).
    let last = &r.samples[1];
    assert_eq!(last.start_s, 1.0);
    if r.duration_s < 2.0 {
        assert!(last.partial && last.end_s == r.duration_s, "{last:?}");
    } else {
        assert!(!last.partial && last.end_s == 2.0, "{last:?}");
    }
    assert!(!r.samples[0].partial);

    // The report survives the trip through its JSON, and keeps the field names scripts read.
    let text = serde_json::to_string_pretty(&r).unwrap();
    let back: summary::LoadReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back, r);
    // Raw on purpose: the key names scripts read are the contract the round trip cannot see.
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["replies"]["total"], 400);
    assert_eq!(v["replies"]["status"]["2xx"], 400);
    assert_eq!(v["errors"]["client_timo"], 0);
    assert_eq!(v["late_starts"]["count"], s.late_starts);
    assert!(v["schedule"]["lateness_ms"]["p99"].is_number());
    assert!(v["syscalls"]["connect"]["calls"].as_u64().unwrap() >= 400);
    assert!(v["syscalls"]["connect"].get("us_per_conn").is_none());
}

#[test]
fn poisson_and_threads_keep_counts() {
    let addr = server(fixed_ok);
    let mut c = cfg(addr, 500.0, 301);
    c.poisson = true;
    c.threads = 3;
    let (s, _) = go(&c, 2);
    assert_eq!((s.initiated, s.replies, s.completed), (301, 602, 301));
    assert_eq!(s.errors.total(), 0);
}

#[test]
fn pipelining_and_chunked() {
    let addr = server(chunked);
    let mut c = cfg(addr, 100.0, 20);
    c.pipeline = 4;
    let (s, _) = go(&c, 10);
    assert_eq!((s.replies, s.completed, s.errors.total()), (200, 20, 0));
    assert_eq!(s.body_bytes, 200 * 5);
}

#[test]
fn head_replies_have_no_body_even_pipelined_among_gets() {
    use evlab_load::workload::sesslog::SessLog;
    use evlab_load::workload::Method;
    let addr = server(method_aware);
    // HEAD alone, one per connection.
    let stop = AtomicBool::new(false);
    let heads = |_| Box::new(Fixed::new("/one", 3).with_method(Method::Head)) as Box<dyn Workload>;
    let (s, _) = gen::run(&cfg(addr, 100.0, 10), &heads, &stop, &Live::default()).unwrap();
    assert_eq!((s.replies, s.completed, s.errors.total()), (30, 10, 0));
    assert_eq!((s.body_bytes, s.status[2]), (0, 30));
    // HEAD and GET interleaved in one session, four in flight: the parser must know, reply by
    // reply, which ones carry a body, or the GET bodies would be read as the next heads.
    let log = SessLog::parse(
        "/a method=HEAD\n /b\n /c method=HEAD\n /d method=HEAD\n /e\n",
        Duration::ZERO,
        Method::Get,
        std::path::Path::new("mixed"),
    )
    .unwrap();
    let mixed = move |_| Box::new(log.clone()) as Box<dyn Workload>;
    let mut c = cfg(addr, 100.0, 10);
    c.pipeline = 4;
    let (s, _) = gen::run(&c, &mixed, &stop, &Live::default()).unwrap();
    assert_eq!((s.replies, s.completed, s.errors.total()), (50, 10, 0));
    assert_eq!((s.body_bytes, s.status[2]), (10 * 2 * 5, 50));
}

#[test]
fn close_delimited_bodies() {
    let addr = server(close_delimited);
    let (s, _) = go(&cfg(addr, 100.0, 10), 1);
    assert_eq!((s.replies, s.completed, s.errors.total()), (10, 10, 0));
    assert_eq!(s.body_bytes, 10 * "until the end".len() as u64);
}

#[test]
fn silent_server_is_client_timo() {
    let addr = server(silent);
    let mut c = cfg(addr, 100.0, 10);
    c.timeout = Duration::from_millis(300);
    let t0 = Instant::now();
    let (s, _) = go(&c, 1);
    assert_eq!(s.errors.client_timo, 10);
    assert_eq!(s.replies, 0);
    assert!(t0.elapsed() < Duration::from_secs(5));
}

/// Takes 500 ms to start each reply.
fn slow(s: TcpStream) {
    std::thread::sleep(Duration::from_millis(500));
    fixed_ok(s);
}

/// Answers each request 200 ms after reading it, one at a time.
fn slow_each(s: TcpStream) {
    answer_each_after(
        s,
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na",
        Duration::from_millis(200),
    );
}

#[test]
fn the_timeout_bounds_each_reply_not_the_session_when_pipelining() {
    // 8 calls, 2 in flight, each answered 200 ms after the last: the session takes 1.6 s, no
    // reply waits more than 400 ms. A 1 s timeout must bound each reply (httperf's --timeout),
    // not the whole session. (The margins are wide so that a loaded machine cannot blur them.)
    let addr = server(slow_each);
    let mut c = cfg(addr, 10.0, 3);
    c.pipeline = 2;
    c.timeout = Duration::from_millis(1000);
    let (s, _) = go(&c, 8);
    assert_eq!((s.replies, s.errors.total()), (24, 0), "{:?}", s.errors);
}

#[test]
fn think_timeout_extends_the_wait_for_a_reply_not_the_connect() {
    let addr = server(slow);
    let mut c = cfg(addr, 100.0, 5);
    c.timeout = Duration::from_millis(300);
    let (s, _) = go(&c, 1);
    assert_eq!((s.errors.client_timo, s.replies), (5, 0), "300 ms < 500 ms");
    c.think_timeout = Duration::from_millis(1500);
    let (s, _) = go(&c, 1);
    assert_eq!(
        (s.errors.total(), s.replies),
        (0, 5),
        "300 + 1500 ms > 500 ms: {:?}",
        s.errors
    );
}

#[test]
fn think_times_outlast_the_timeout_after_the_last_start() {
    use evlab_load::workload::sesslog::SessLog;
    use evlab_load::workload::Method;
    // Three bursts 1.2 s apart: the sessions end 2.4 s after they start, well past the 1 s
    // timeout (which each immediate reply meets with a wide margin), and must not be cut off as
    // the run drains.
    let log = SessLog::parse(
        "/a think=1.2\n/b think=1.2\n/c\n",
        Duration::ZERO,
        Method::Get,
        std::path::Path::new("think"),
    )
    .unwrap();
    let addr = server(fixed_ok);
    let mut c = cfg(addr, 100.0, 3);
    c.timeout = Duration::from_millis(1000);
    let stop = AtomicBool::new(false);
    let w = move |_| Box::new(log.clone()) as Box<dyn Workload>;
    let t0 = Instant::now();
    let (s, _) = gen::run(&c, &w, &stop, &Live::default()).unwrap();
    assert_eq!(
        (s.errors.total(), s.replies, s.completed),
        (0, 9, 3),
        "{:?}",
        s.errors
    );
    assert!(t0.elapsed() >= Duration::from_millis(2400));
}

#[test]
fn reset_is_connreset() {
    let addr = server(reset);
    let (s, _) = go(&cfg(addr, 100.0, 10), 1);
    assert_eq!(s.errors.connreset, 10, "{:?}", s.errors);
    assert_eq!(s.replies, 0);
}

#[test]
fn refused_is_connrefused() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let (s, _) = go(&cfg(addr, 100.0, 5), 1);
    assert_eq!(s.errors.connrefused, 5, "{:?}", s.errors);
}

#[test]
fn garbage_is_counted_not_fatal() {
    let addr = server(garbage);
    let (s, _) = go(&cfg(addr, 100.0, 5), 1);
    assert_eq!(s.errors.parse, 5, "{:?}", s.errors);
    assert_eq!(s.replies, 0);
}

#[test]
fn duration_ends_the_run() {
    let addr = server(fixed_ok);
    let mut c = cfg(addr, 100.0, 0);
    c.num_conns = None;
    c.duration = Some(Duration::from_millis(500));
    let (s, _) = go(&c, 1);
    assert!((45..=55).contains(&s.initiated), "{}", s.initiated);
    assert_eq!(s.replies, s.initiated);
}

#[test]
fn nonsense_config_is_an_error() {
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let stop = AtomicBool::new(false);
    let factory = |_| Box::new(Fixed::new("/", 1)) as Box<dyn Workload>;
    let mut c = cfg(addr, 0.0, 1);
    assert!(gen::run(&c, &factory, &stop, &Live::default()).is_err());
    c.rate = 10.0;
    c.num_conns = None;
    assert!(gen::run(&c, &factory, &stop, &Live::default()).is_err());
}

/// `start_at` a little behind is run late; far behind (an instant of 1970, or more than
/// `MAX_START_LATE`) or more than an hour ahead is refused, saying by how much.
#[test]
fn start_at_is_refused_far_behind_and_far_ahead() {
    let now = 1_800_000_000.0;
    assert!(gen::check_start_at(now - 9.0, now).is_ok());
    assert!(gen::check_start_at(now + 3000.0, now).is_ok());
    let e = gen::check_start_at(now - 11.0, now)
        .unwrap_err()
        .to_string();
    assert!(e.contains("passed 11.0 s ago") && e.contains("10 s"), "{e}");
    let e = gen::check_start_at(5.0, now).unwrap_err().to_string();
    assert!(e.contains("passed 20833 days ago"), "{e}");
    let e = gen::check_start_at(now * 1000.0, now)
        .unwrap_err()
        .to_string();
    assert!(e.contains("ahead of this host's clock"), "{e}");
    for bad in [f64::NAN, f64::INFINITY, 0.0, -1.0] {
        assert!(gen::check_start_at(bad, now).is_err(), "{bad}");
    }
}

/// With `start_at` ahead, no connection reaches the server before that wall-clock instant
/// (seen from the server's side, at accept), with several threads; the report says it
/// started at T, on time, and ended after.
#[test]
fn start_at_holds_every_connection_until_the_instant() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let _ = tx.send(gen::unix_now());
            std::thread::spawn(move || fixed_ok(s));
        }
    });
    let mut c = cfg(addr, 200.0, 6);
    c.threads = 3;
    let at = gen::unix_now() + 0.4;
    c.start_at = Some(at);
    let (s, info) = go(&c, 1);
    assert_eq!(s.replies, 6);
    let accepted: Vec<f64> = rx.try_iter().collect();
    assert_eq!(accepted.len(), 6);
    // The monotonic clock the schedule runs on maps onto the wall clock to within the
    // microseconds between two clock reads; a generator that did not wait would be ~400 ms
    // early.
    let first = accepted.iter().cloned().fold(f64::INFINITY, f64::min);
    assert!(first >= at - 1e-3, "a connection at {first}, before {at}");
    let clock = &info.clock;
    assert_eq!(
        (clock.start_at, clock.started_at, clock.late_ms),
        (Some(at), at, Some(0.0))
    );
    assert!(clock.ended_at >= first, "{clock:?}");
    // Already past: it starts at once, and says how late.
    c.start_at = Some(gen::unix_now() - 2.0);
    let (s, info) = go(&c, 1);
    assert_eq!(s.replies, 6);
    assert!(info.clock.late_ms.unwrap() >= 2_000.0, "{:?}", info.clock);
    // Without it: a clock all the same.
    c.start_at = None;
    let (_, info) = go(&c, 1);
    assert_eq!((info.clock.start_at, info.clock.late_ms), (None, None));
    assert!(info.clock.ended_at > info.clock.started_at);
}

#[test]
fn a_watched_run_ticks_then_stops_once_and_reports_it() {
    use evlab_load::gen::Watch;
    use std::sync::atomic::Ordering::Relaxed;
    let addr = server(fixed_ok);
    let c = LoadConfig {
        num_conns: None,
        duration: Some(Duration::from_secs(30)),
        ..cfg(addr, 100.0, 1)
    };
    let factory = move |_| Box::new(Fixed::new("/one", 1)) as Box<dyn Workload>;
    // Stop once a few replies are in: the watcher sees the counters move.
    let stop = AtomicBool::new(false);
    let (mut ticks, mut stops) = (0, 0);
    let t0 = Instant::now();
    let outcome = gen::run_watched(&c, &factory, &stop, |w| match w {
        Watch::Tick { live, .. } => {
            assert_eq!(stops, 0, "a tick after the stop");
            ticks += 1;
            if live.replies.load(Relaxed) >= 5 {
                stop.store(true, Relaxed);
            }
        }
        Watch::Stopping { elapsed } => {
            stops += 1;
            assert!(elapsed <= t0.elapsed());
        }
    })
    .unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "the stop was not heeded"
    );
    assert!(outcome.interrupted);
    assert_eq!(stops, 1);
    assert!(ticks >= 1);
    assert!(outcome.stats.replies >= 5, "{}", outcome.stats.replies);
    let r = outcome.report("v-test", "/one x 1".into());
    assert_eq!(
        (
            r.version.as_str(),
            r.interrupted,
            r.config.workload.as_deref()
        ),
        ("v-test", true, Some("/one x 1"))
    );
    // Left alone, a run ends by itself and says it was not interrupted.
    let outcome = gen::run_watched(&cfg(addr, 200.0, 4), &factory, &|| false, |_| {}).unwrap();
    assert!(!outcome.interrupted);
    assert_eq!(outcome.stats.replies, 4);
}
