//! The listening socket.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use evlab_poll::sys;

/// A non-blocking listening socket. TCP_NODELAY is set here once: accepted sockets inherit it,
/// so a response that leaves in two writes (head, then sendfile without cork) is never held
/// back by Nagle, at no per-connection cost.
pub fn open(addr: &SocketAddr, backlog: i32, reuseport: bool) -> io::Result<RawFd> {
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let fd = sys::socket(
        domain,
        libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        0,
    )?;
    let setup = || -> io::Result<()> {
        sys::setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        if reuseport {
            sys::setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
        }
        sys::setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
        sys::bind(fd, addr)?;
        sys::listen(fd, backlog)?;
        Ok(())
    };
    match setup() {
        Ok(()) => Ok(fd),
        Err(e) => {
            let _ = sys::close(fd);
            Err(e)
        }
    }
}
