//! The floor: the fastest thing that can answer the one-byte workload over keep-alive HTTP on
//! this machine. Edge-triggered epoll, one thread; every read is answered with one canned
//! response per request terminator seen, nothing is parsed, nothing is looked up. No real server
//! can beat it, so it is the yardstick the benchmark (bench/serve_bench.py) measures servers by.
//!
//! Usage: floor [ADDR:PORT]   (prints `listening on ADDR:PORT`)

use std::io::Write;
use std::net::SocketAddr;

use evlab_poll::{EpollEt, Events, Interest, Poller, Token};
use evlab_sys as sys;

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nServer: floor\r\nContent-Length: 1\r\n\r\na";

fn main() -> std::io::Result<()> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into())
        .parse()
        .expect("floor [ADDR:PORT]");
    evlab_sys::raise_fd_limit()?;
    let lfd = sys::socket(
        libc::AF_INET,
        libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        0,
    )?;
    sys::setsockopt_int(lfd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    sys::setsockopt_int(lfd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
    sys::bind(lfd, &addr)?;
    sys::listen(lfd, 4096)?;
    let mut p = EpollEt::new()?;
    p.register(lfd, Token(usize::MAX), Interest::READABLE)?;
    println!("listening on {}", sys::getsockname(lfd)?);
    std::io::stdout().flush()?;
    let mut events = Events::with_capacity(512);
    let mut buf = vec![0u8; 16384];
    let mut out = Vec::with_capacity(64 * RESPONSE.len());
    loop {
        p.wait(&mut events, None)?;
        for ev in events.iter() {
            if ev.token.0 == usize::MAX {
                while let Ok(fd) = sys::accept4(lfd, libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) {
                    p.register(fd, Token(fd as usize), Interest::BOTH)?;
                }
                continue;
            }
            let fd = ev.token.0 as i32;
            if !ev.readable() {
                continue;
            }
            loop {
                match sys::read(fd, &mut buf) {
                    Err(e) if sys::would_block(&e) => break,
                    Ok(0) | Err(_) => {
                        let _ = p.deregister(fd);
                        let _ = sys::close(fd);
                        break;
                    }
                    Ok(n) => {
                        // One response per blank line seen: enough for pipelined GETs.
                        let k = buf[..n].windows(4).filter(|w| w == b"\r\n\r\n").count();
                        out.clear();
                        for _ in 0..k {
                            out.extend_from_slice(RESPONSE);
                        }
                        if !out.is_empty() {
                            let _ = sys::write(fd, &out);
                        }
                        if n < buf.len() {
                            break;
                        }
                    }
                }
            }
        }
    }
}
