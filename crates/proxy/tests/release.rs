//! `splice-release` against `splice`: the syscalls (and, under `uring`, the ring enters) the
//! proxy makes per response for 64 KiB and 1 MiB bodies, counted by the proxy's own stats, on
//! every mechanism of the registry (`evlab_poll::for_each_mechanism!`). A count, not a timing.
//!
//! What is deterministic and what is not: in `splice` mode a body's pipe holds 64 KiB (the
//! kernel's default), so each splice moves at most that much and a 1 MiB body costs at least
//! 16 splices in and 16 out, whatever the timing. In `splice-release` the pipe holds the whole
//! body, so the number of splices is the number of times the proxy finds bytes in the origin's
//! socket: it depends on how the origin's bytes arrive, and is not fixed. The 1 MiB test
//! therefore asserts the bound that holds for splice against what splice-release does on
//! average over several responses: fewer splices than splice's floor of 32 (readiness
//! mechanisms), and fewer syscalls in all (every mechanism; under `uring`, fewer ring enters).
//!
//! At 64 KiB one default pipe holds the body too, so both modes move it with one splice in and
//! one out when it has all arrived, and an arrival in two parts costs either mode a wait and
//! two splices more. What differs is fixed: splice looks at the origin's socket after each
//! body (a `recv(MSG_PEEK)`), splice-release does not. Under `uring`, splice-release writes the
//! head into the body's pipe (a `write(2)`, one syscall against splice's look), and splice's
//! head goes by a quiet send (its completion posts nothing and ends no ring enter), so there
//! the two floors are equal and the test asserts that splice-release's is not above
//! splice's. So each
//! response's count is taken alone, and the test compares each mode's fewest over the
//! responses (its floor, reached by any response whose bytes came in one piece): splice's is
//! fixed by the calls listed above, and splice-release's is below it only if the calls it
//! leaves out are really left out. One undisturbed response of eight is enough; none would
//! fail the test, as would a call added back. The floor compared is of the transfer syscalls
//! (reads, writes, splices) on every readiness mechanism, since a mechanism's own calls need
//! not be fixed per response (uring-poll's waits are free while its ring holds completions),
//! and of all syscalls on epoll-et; under `uring`, of all syscalls and of ring enters.

#[allow(unused_macros)] // `modes!`: this file runs two modes of its own
mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::{connect, next_head, proxy_with, read_response, ThreadOrigin};
use evlab_proxy::{Proxy, ProxyStats};

const MIB: usize = 1 << 20;
/// Responses measured per mode, after one that sets up the origin connection and the pipe.
const ROUNDS: usize = 8;

fn body_of(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// The origin (one thread per connection): answers `GET /b<len>` with `len` bytes, the head
/// and body in one write, on kept connections.
fn serve(mut s: TcpStream) {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let (mut buf, mut chunk) = (Vec::new(), [0u8; 4096]);
    while let Some(head) = next_head(&mut s, &mut buf, &mut chunk) {
        let path = head.split(' ').nth(1).unwrap_or("");
        let len: usize = path
            .strip_prefix("/b")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let mut out =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nCache-Control: no-store\r\n\r\n")
                .into_bytes();
        out.extend_from_slice(&body_of(len));
        if s.write_all(&out).is_err() {
            return;
        }
    }
}

/// What the proxy made per response, over `ROUNDS` responses.
#[derive(Debug)]
struct Counts {
    /// Every syscall (for `epoll2`, without its waits: see below), on average.
    total: f64,
    splice: f64,
    enter: f64,
    /// The fewest syscalls (and ring enters) one response took.
    min_total: u64,
    min_enter: u64,
    /// The fewest transfer syscalls (reads, writes, splices: not the mechanism's own) one
    /// response took.
    min_xfer: u64,
}

/// The syscalls that move bytes or look at a socket, whatever the mechanism.
const TRANSFERS: [&str; 7] = ["read", "recv", "send", "writev", "write", "splice", "tee"];

/// Per response, over `ROUNDS` responses of `len` bytes on one kept client connection (and one
/// kept origin connection). None when the mechanism does not run here.
fn per_response(m: &str, mode: &str, len: usize) -> Option<Counts> {
    let o = ThreadOrigin::start(serve);
    let p: Proxy = proxy_with(o.addr, m, mode, |c| c.cache_bytes = 0)?;
    let want = body_of(len);
    let mut s = connect(&p);
    let mut buf = Vec::new();
    let mut get = |what: &str| {
        s.write_all(format!("GET /b{len} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
            .unwrap();
        let r = read_response(&mut s, &mut buf, false);
        assert_eq!(r.status, 200, "{m} {mode} {what}: {}", r.head);
        assert!(r.body == want, "{m} {mode} {what}: the body differs");
    };
    // The first response connects to the origin and makes (and grows) the pipe.
    get("first");
    let snapshot = || -> ProxyStats {
        // The worker's last calls of a response (the check of the origin connection, the
        // wait) come just after the client has its last byte: let them be counted.
        std::thread::sleep(Duration::from_millis(50));
        p.shared().stats()
    };
    let calls = |st: &ProxyStats, name: &str| st.syscalls.get(name).map_or(0, |c| c.calls);
    // An idle pooled origin connection is always writable to epoll2, which registers IN|OUT
    // once, so its waits return at once while one is pooled (docs/proxy.md): thousands a
    // response, whatever the mode. They are left out of its count.
    let counted = |st: &ProxyStats| {
        let waits = if m == "epoll2" {
            calls(st, "epoll_wait")
        } else {
            0
        };
        st.syscalls_total - waits
    };
    let before = snapshot();
    let xfers = |st: &ProxyStats| TRANSFERS.iter().map(|k| calls(st, k)).sum::<u64>();
    let (mut min_total, mut min_enter, mut min_xfer) = (u64::MAX, u64::MAX, u64::MAX);
    let mut last = snapshot();
    for i in 0..ROUNDS {
        get(&format!("round {i}"));
        let now = snapshot();
        min_total = min_total.min(counted(&now) - counted(&last));
        min_enter = min_enter.min(calls(&now, "io_uring_enter") - calls(&last, "io_uring_enter"));
        min_xfer = min_xfer.min(xfers(&now) - xfers(&last));
        last = now;
    }
    let after = last;
    let n = ROUNDS as f64;
    let per = |name: &str| (calls(&after, name) - calls(&before, name)) as f64 / n;
    // Every kind of syscall made, per response: what the counts are made of.
    let kinds: Vec<String> = after
        .syscalls
        .keys()
        .map(|k| (k, per(k)))
        .filter(|(_, v)| *v > 0.0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let r = Counts {
        total: (counted(&after) - counted(&before)) as f64 / n,
        splice: per("splice"),
        enter: per("io_uring_enter"),
        min_total,
        min_enter,
        min_xfer,
    };
    // Spliced in the mode asked for (io_uring may lack splice on some kernels: it then copies).
    let spliced = match mode {
        "splice" => after.transfers.spliced,
        _ => after.transfers.spliced_release,
    };
    if m != "uring" {
        assert_eq!(spliced, ROUNDS as u64 + 1, "{m} {mode}: {after:?}");
    }
    drop(s);
    p.shutdown().unwrap();
    eprintln!(
        "{m} {mode} {len}: {r:?} (per response: {})",
        kinds.join(", ")
    );
    Some(r)
}

fn fewer_than_splice(m: &str) {
    let Some(splice) = per_response(m, "splice", MIB) else {
        return;
    };
    let Some(release) = per_response(m, "splice-release", MIB) else {
        return;
    };
    let (s_total, s_splice, s_enter) = (splice.total, splice.splice, splice.enter);
    let (r_total, r_splice, r_enter) = (release.total, release.splice, release.enter);
    if m == "uring" {
        // Every transfer is a request: the ring enters are the cost that counts.
        assert!(
            r_enter < s_enter,
            "{m}: ring enters per response, splice-release {r_enter} against splice {s_enter}"
        );
    } else {
        // A 64 KiB pipe moves at most 64 KiB per splice: at least 16 in and 16 out.
        assert!(s_splice >= 32.0, "{m}: splice made {s_splice} splices");
        assert!(
            r_splice < 32.0,
            "{m}: splice-release made {r_splice} splices per response"
        );
    }
    assert!(
        r_total < s_total,
        "{m}: syscalls per response, splice-release {r_total} against splice {s_total}"
    );
    assert!(
        release.min_total < splice.min_total,
        "{m}: fewest syscalls a response, splice-release {} against splice {}",
        release.min_total,
        splice.min_total
    );
}

/// 64 KiB: each mode's floor (see the module's note), for syscalls and, under `uring`, ring
/// enters.
fn fewer_than_splice_at_64_kib(m: &str) {
    let Some(splice) = per_response(m, "splice", 64 << 10) else {
        return;
    };
    let Some(release) = per_response(m, "splice-release", 64 << 10) else {
        return;
    };
    // A readiness mechanism's own calls per response need not be fixed (uring-poll harvests
    // from memory when it can, and enters only when its ring is empty): its transfers are.
    // (Under `uring` transfers are requests; its direct syscalls are counted below.)
    if m != "uring" {
        assert!(
            release.min_xfer < splice.min_xfer,
            "{m}: fewest transfer syscalls a response, splice-release {release:?} against \
             splice {splice:?}"
        );
    }
    if m == "epoll-et" {
        assert!(
            release.min_total < splice.min_total,
            "{m}: fewest syscalls a response, splice-release {release:?} against splice \
             {splice:?}"
        );
    }
    if m == "uring" {
        assert!(
            release.min_total <= splice.min_total,
            "{m}: fewest syscalls a response, splice-release {release:?} against splice \
             {splice:?}"
        );
    }
    if m == "uring" && release.enter > 0.0 {
        assert!(
            release.min_enter <= splice.min_enter,
            "{m}: fewest ring enters a response, splice-release {release:?} against splice \
             {splice:?}"
        );
    }
}

macro_rules! release_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {$(
        #[allow(non_snake_case)]
        mod $v {
            #[test]
            fn release_makes_fewer_syscalls_than_splice_at_1_mib() {
                crate::fewer_than_splice($name)
            }

            #[test]
            fn release_makes_fewer_syscalls_than_splice_at_64_kib() {
                crate::fewer_than_splice_at_64_kib($name)
            }
        }
    )*};
}

evlab_poll::for_each_mechanism!(release_tests);
