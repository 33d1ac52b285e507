//! The server allocates nothing per connection or per request once a worker has warmed up:
//! counted with a counting global allocator, for every mechanism, with the default timeouts.
//!
//! The client runs in this process too, so it is written to allocate nothing itself (std's
//! `TcpStream` connect, read, write and drop do not allocate; buffers are fixed arrays). What
//! the server may still allocate after the warm-up does not depend on how many requests or
//! connections it serves, only on how many connections were open at once — buffers lent to a
//! connection come from a per-worker pool that fills up to the number of connections holding
//! bytes at the same moment, which the warm-up reaches in the same way but not necessarily
//! to the byte — so the bound is a multiple of that number, far below the count of requests
//! and connections served: one allocation per request or per connection would exceed it many
//! times over, on any machine.
//!
//! So that the number of connections open at once is the same in every round, whatever the
//! mechanism's latency, the client waits for the server to close each connection it drops
//! before it opens the next: aio-poll learns of a peer's FIN through a kworker (a wakeup
//! without poll bits), which on a busy machine lets a round's 200 short connections pile up
//! open in the server, to a different height in each round.

use evlab_sys::alloc_count::{allocations, Counting};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use evlab_server::WorkerStats;

mod common;
use common::*;

#[global_allocator]
static A: Counting = Counting;

/// Connections held open (keep-alive) at once.
const HELD: usize = 16;
/// Requests per held connection per round, sent 4 at a time (pipelined).
const CALLS: usize = 160;
/// Connections opened, used for one request and closed, per round.
const CHURN: usize = 200;

const REQ: &[u8] = b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n";

/// Reads exactly `n` bytes (whole responses of known length), into a fixed buffer.
fn read_exact_count(s: &mut TcpStream, mut n: usize) {
    let mut b = [0u8; 8192];
    while n > 0 {
        let want = n.min(b.len());
        let got = s.read(&mut b[..want]).expect("read");
        assert!(got > 0, "the server closed early");
        n -= got;
    }
}

/// Waits until the server has at most `open` connections (it has closed those the client
/// dropped). Allocates nothing.
fn settle(workers: &[Arc<WorkerStats>], open: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while workers.iter().map(|w| w.conns.active.get()).sum::<u64>() > open {
        assert!(Instant::now() < deadline, "the server never closed them");
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// One round: HELD keep-alive connections answering CALLS requests each, then CHURN
/// connections of one request each, each closed by the server before the next opens.
fn round(addr: SocketAddr, len: usize, workers: &[Arc<WorkerStats>]) -> usize {
    let mut held: [Option<TcpStream>; HELD] = Default::default();
    for h in held.iter_mut() {
        *h = Some(connect(addr));
    }
    let mut four = [0u8; 4 * REQ.len()];
    for (i, b) in four.iter_mut().enumerate() {
        *b = REQ[i % REQ.len()];
    }
    for _ in 0..CALLS / 4 {
        for s in held.iter_mut().flatten() {
            s.write_all(&four).unwrap();
        }
        for s in held.iter_mut().flatten() {
            read_exact_count(s, 4 * len);
        }
    }
    for _ in 0..CHURN {
        let mut s = connect(addr);
        s.write_all(REQ).unwrap();
        read_exact_count(&mut s, len);
        drop(s);
        settle(workers, HELD as u64);
    }
    drop(held);
    settle(workers, 0);
    HELD * CALLS + CHURN
}

#[test]
fn no_allocation_per_connection_or_request_in_steady_state() {
    let _ = evlab_sys::raise_fd_limit();
    for m in evlab_poll::Mechanism::ALL {
        // Default flags: the header and send timeouts run, as nobody's benchmark turns them off.
        let Some(t) = start(m.name(), |c| c.stats = false) else {
            continue;
        };
        let len = one_response_len(t.addr);
        let workers = t.server.as_ref().unwrap().shared().workers();
        settle(&workers, 0);
        // Warm-up: the same pattern twice, so that every table, pool and queue has grown to
        // what the pattern needs.
        round(t.addr, len, &workers);
        round(t.addr, len, &workers);
        let before = allocations();
        let served = round(t.addr, len, &workers);
        let n = allocations() - before;
        // At most two pooled buffers per connection open at once (input and output), and a
        // few reallocations of the pool's own list.
        let bound = 2 * (HELD + 1) + 8;
        println!("{m}: {n} allocations while serving {served} requests on {} connections (bound {bound})", HELD + CHURN);
        assert!(
            n as usize <= bound,
            "{m}: {n} allocations for {served} requests on {} connections",
            HELD + CHURN
        );
    }
}
