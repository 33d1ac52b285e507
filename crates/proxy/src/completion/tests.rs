use super::*;
use crate::engine::pending;
use evlab_poll::Mechanism;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::IntoRawFd;

fn engine() -> Option<Uring> {
    evlab_poll::testing::mechanism(Mechanism::Uring).then(|| Uring::new().expect("a ring"))
}

/// A connected pair: the engine's side (non-blocking, adopted, registered) and the peer.
fn pair(u: &mut Uring) -> (RawFd, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (ours, _) = l.accept().unwrap();
    ours.set_nonblocking(true).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let fd = ours.into_raw_fd();
    u.adopt(fd, Role::Conn);
    u.watch(fd, Interest::READABLE.with(Interest::WRITABLE))
        .unwrap();
    (fd, peer)
}

/// Makes the call until it is no longer in flight, turning the ring meanwhile.
fn until<T>(u: &mut Uring, mut f: impl FnMut(&mut Uring) -> io::Result<T>) -> io::Result<T> {
    let mut ev = Events::with_capacity(64);
    let t0 = Instant::now();
    loop {
        match f(u) {
            Err(e) if pending(&e) => {
                assert!(t0.elapsed() < Duration::from_secs(5), "still in flight");
                u.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
            }
            r => return r,
        }
    }
}

#[test]
fn a_read_is_in_flight_then_brings_the_bytes_then_eof() {
    let Some(mut u) = engine() else { return };
    let (fd, mut peer) = pair(&mut u);
    let mut ev = Events::with_capacity(8);
    u.wait(&mut ev, Some(Duration::ZERO)).unwrap();
    assert!(ev
        .iter()
        .any(|e| e.token == Token(fd as usize) && e.readable()));
    let mut buf = Vec::with_capacity(4096);
    assert!(pending(&u.read_max(fd, &mut buf, 4096).unwrap_err()));
    peer.write_all(b"hello").unwrap();
    assert_eq!(
        until(&mut u, |u| u.read_max(fd, &mut buf, 4096)).unwrap(),
        5
    );
    assert_eq!(buf, b"hello");
    peer.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(
        until(&mut u, |u| u.read_max(fd, &mut buf, 4096)).unwrap(),
        0
    );
    u.unwatch(fd).unwrap();
    Engine::close(&mut u, fd);
}

/// A write is taken whole and sent afterwards: closing the descriptor at once (the
/// worker's way after its last response) must not lose it, though the send is not even
/// submitted yet.
#[test]
fn a_send_taken_before_the_close_still_arrives() {
    let Some(mut u) = engine() else { return };
    let (fd, mut peer) = pair(&mut u);
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut sent = 0;
    while sent < data.len() {
        sent += until(&mut u, |u| u.writev(fd, &[IoSlice::new(&data[sent..])])).unwrap();
    }
    u.shutdown_write(fd);
    u.unwatch(fd).unwrap();
    Engine::close(&mut u, fd);
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        peer.read_to_end(&mut got).map(|_| got)
    });
    let mut ev = Events::with_capacity(8);
    let t0 = Instant::now();
    while u.live > 0 && t0.elapsed() < Duration::from_secs(5) {
        u.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
    }
    assert_eq!(u.live, 0, "the send completed");
    assert!(
        reader.join().unwrap().unwrap() == data,
        "every byte, then EOF"
    );
}

/// A whole send posts no completion: it does not end the enter that submits it (one enter
/// per wait, not two), and is settled after it; a write waiting on it is answered in that
/// wait, not when the wait's timeout runs out.
#[test]
fn a_quiet_send_settles_within_the_enter_that_submits_it() {
    let Some(mut u) = engine() else { return };
    if !evlab_poll::testing::require(
        "io_uring",
        u.quiet_ok,
        "this kernel's io_uring failed the quiet-send probe (MSG_DONTWAIT and \
         IOSQE_CQE_SKIP_SUCCESS: a partial send must post its count)",
    ) {
        return;
    }
    let (fd, mut peer) = pair(&mut u);
    let mut ev = Events::with_capacity(8);
    // The registration's "may be readable, writable" event.
    u.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
    assert_eq!(u.writev(fd, &[IoSlice::new(b"hello")]).unwrap(), 5);
    assert!(u.st(fd).wr.is_some(), "in flight until its enter");
    let enters = u.ring.stats.waits_from_kernel;
    u.wait(&mut ev, Some(Duration::from_millis(50))).unwrap();
    assert_eq!(
        u.ring.stats.waits_from_kernel - enters,
        1,
        "the send's completion ended no enter"
    );
    assert!(
        ev.is_empty(),
        "nothing for the worker: {:?}",
        ev.iter().collect::<Vec<_>>()
    );
    assert!(
        u.st(fd).wr.is_none() && u.live == 0,
        "settled, its slot free"
    );
    let mut got = [0u8; 5];
    peer.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"hello");
    // A write answered "in flight" behind a quiet send: the wait that settles the send says
    // the socket is writable, without sleeping its timeout.
    assert_eq!(u.writev(fd, &[IoSlice::new(b"one")]).unwrap(), 3);
    assert!(pending(&u.writev(fd, &[IoSlice::new(b"two")]).unwrap_err()));
    let t0 = Instant::now();
    u.wait(&mut ev, Some(Duration::from_secs(30))).unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "the wait slept its timeout"
    );
    assert!(
        ev.iter()
            .any(|e| e.token == Token(fd as usize) && e.writable()),
        "the waiting write is told"
    );
    assert_eq!(u.writev(fd, &[IoSlice::new(b"two")]).unwrap(), 3);
    until(&mut u, |u| {
        if u.st(fd).wr.is_some() {
            Err(in_flight())
        } else {
            Ok(())
        }
    })
    .unwrap();
    let mut got = [0u8; 6];
    peer.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"onetwo");
    u.unwatch(fd).unwrap();
    Engine::close(&mut u, fd);
}

/// After a recv that filled all it asked for, the next read submits its recv at once and
/// takes the bytes in the same call when they are there, without a wait and without an
/// event for them; when the socket is empty, the recv is left in flight.
#[test]
fn a_read_after_a_full_recv_takes_the_next_bytes_at_once() {
    let Some(mut u) = engine() else { return };
    let (fd, mut peer) = pair(&mut u);
    let mut ev = Events::with_capacity(8);
    u.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
    let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 253) as u8).collect();
    peer.write_all(&data).unwrap();
    let piece = 16 * 1024;
    let mut got = Vec::new();
    // The first recv waits for bytes (nothing was known of the socket): in flight.
    let mut buf = Vec::with_capacity(piece);
    assert!(pending(&u.read_max(fd, &mut buf, piece).unwrap_err()));
    let n = until(&mut u, |u| u.read_max(fd, &mut buf, piece)).unwrap();
    assert_eq!(n, piece, "the first recv filled what it asked for");
    got.extend_from_slice(&buf);
    // The rest is in the socket: each next read takes its bytes in the same call.
    for _ in 0..3 {
        let mut buf = Vec::with_capacity(piece);
        let enters = u.ring.stats.waits_from_kernel;
        let n = u.read_max(fd, &mut buf, piece).unwrap();
        assert_eq!(n, piece);
        assert_eq!(
            u.ring.stats.waits_from_kernel - enters,
            1,
            "one enter, no wait"
        );
        got.extend_from_slice(&buf);
    }
    assert!(got == data, "the bytes in order");
    assert!(
        !u.ready.iter().any(|e| e.token == Token(fd as usize)),
        "no event for bytes already taken"
    );
    // The socket is empty now: the next read's recv is in flight.
    let mut buf = Vec::with_capacity(piece);
    assert!(pending(&u.read_max(fd, &mut buf, piece).unwrap_err()));
    u.unwatch(fd).unwrap();
    Engine::close(&mut u, fd);
}

/// A response's parts are taken, not copied: the vectors go with the send (the state
/// machine keeps empty ones), a cached object is held, and the peer gets them in order.
#[test]
fn write_parts_takes_the_buffers_and_sends_them_in_order() {
    let Some(mut u) = engine() else { return };
    // The worker sizes the pool it hands the engine; this one keeps a 300 KB buffer.
    u.bufs = BufPool::new(64 * 1024, 1 << 20, 16 << 20);
    let (fd, mut peer) = pair(&mut u);
    let head = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
    let obj = Rc::new(Object {
        status: 200,
        head: Box::from(&b""[..]),
        body: (0..100_000u32).map(|i| (i % 241) as u8).collect(),
        last_modified: None,
        expires: Instant::now(),
        stored: Instant::now(),
        age: 0,
        shared: false,
        validators: false,
        never_stale: false,
    });
    let tail: Vec<u8> = (0..300_000u32).map(|i| (i % 239) as u8).collect();
    let mut expect = head[2..].to_vec();
    expect.extend_from_slice(&obj.body[5..]);
    expect.extend_from_slice(&tail);
    let (mut out, mut out_pos) = (head, 2);
    let mut hit_pos = 5;
    let (mut body, mut sent) = (tail, 0);
    let body_ptr = body.as_ptr();
    let n = until(&mut u, |u| {
        u.write_parts(
            fd,
            &mut [
                Part::Owned(&mut out, &mut out_pos),
                Part::Shared(&obj, &mut hit_pos),
                Part::Owned(&mut body, &mut sent),
            ],
        )
    })
    .unwrap();
    assert_eq!(n, expect.len());
    assert!(out.is_empty() && out_pos == 0 && body.is_empty() && sent == 0);
    assert_eq!(hit_pos, obj.body.len());
    assert_eq!(Rc::strong_count(&obj), 2, "the send holds the object");
    let reader = std::thread::spawn(move || {
        let mut got = vec![0u8; expect.len()];
        peer.read_exact(&mut got).map(|_| got == expect)
    });
    let mut ev = Events::with_capacity(8);
    let t0 = Instant::now();
    while u.st(fd).wr.is_some() && t0.elapsed() < Duration::from_secs(5) {
        u.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
    }
    assert!(reader.join().unwrap().unwrap(), "every byte, in order");
    assert_eq!(Rc::strong_count(&obj), 1, "given back once sent");
    assert!(
        u.bufs.holds(body_ptr),
        "the body's own buffer came back to the pool: never copied"
    );
    u.unwatch(fd).unwrap();
    Engine::close(&mut u, fd);
}

#[test]
fn splice_moves_socket_to_pipe_to_socket() {
    let Some(mut u) = engine() else { return };
    if !evlab_poll::testing::require(
        "io_uring",
        u.can_splice(),
        "this kernel's io_uring cannot splice (IORING_OP_SPLICE)",
    ) {
        return;
    }
    let (origin, mut origin_peer) = pair(&mut u);
    let (client, mut client_peer) = pair(&mut u);
    let (rd, wr) = sys::pipe2_counted().unwrap();
    let body: Vec<u8> = (0..30_000u32).map(|i| (i % 253) as u8).collect();
    origin_peer.write_all(&body).unwrap();
    let mut moved = 0;
    while moved < body.len() {
        let n = until(&mut u, |u| u.splice(origin, wr, body.len() - moved, origin)).unwrap();
        assert!(n > 0);
        let mut left = n;
        while left > 0 {
            left -= until(&mut u, |u| u.splice(rd, client, left, client)).unwrap();
        }
        moved += n;
    }
    let mut got = vec![0u8; body.len()];
    client_peer.read_exact(&mut got).unwrap();
    assert!(got == body);
    assert!(!u.pipe_busy(rd, wr), "nothing in flight on the pipe");
    for fd in [origin, client] {
        u.unwatch(fd).unwrap();
        Engine::close(&mut u, fd);
    }
    let _ = sys::close(rd);
    let _ = sys::close(wr);
}
