//! Sockets: creating, binding, listening, connecting and accepting, socket addresses, socket
//! options, the TCP listener both servers open and the slow-reading client of the tests.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use crate::close;
use crate::counters::{counted, Syscall};

pub fn socket(domain: i32, ty: i32, proto: i32) -> io::Result<RawFd> {
    // SAFETY: socket(2) takes plain integers.
    counted(Syscall::Socket, || unsafe {
        libc::socket(domain, ty, proto) as libc::c_long
    })
    .map(|r| r as RawFd)
}

/// A `sockaddr_storage` and its length for an IPv4 or IPv6 address.
pub fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage, which is suitably aligned.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage, which is suitably aligned.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

fn from_sockaddr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            let ip = std::net::Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::new(ip.into(), u16::from_be(sin.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::new(ip.into(), u16::from_be(sin6.sin6_port)))
        }
        _ => None,
    }
}

pub fn bind(fd: RawFd, addr: &SocketAddr) -> io::Result<()> {
    let (ss, len) = sockaddr(addr);
    // SAFETY: `ss` holds a valid address of length `len`.
    counted(Syscall::Bind, || unsafe {
        libc::bind(fd, &ss as *const _ as *const libc::sockaddr, len) as libc::c_long
    })
    .map(drop)
}

pub fn listen(fd: RawFd, backlog: i32) -> io::Result<()> {
    // SAFETY: listen(2) takes plain integers.
    counted(Syscall::Listen, || unsafe {
        libc::listen(fd, backlog) as libc::c_long
    })
    .map(drop)
}

/// connect(2); a non-blocking socket answers `Err(EINPROGRESS)`, which callers expect.
pub fn connect(fd: RawFd, addr: &SocketAddr) -> io::Result<()> {
    let (ss, len) = sockaddr(addr);
    // SAFETY: `ss` holds a valid address of length `len`.
    counted(Syscall::Connect, || unsafe {
        libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len) as libc::c_long
    })
    .map(drop)
}

pub fn getsockname(fd: RawFd) -> io::Result<SocketAddr> {
    // SAFETY: zeroed sockaddr_storage is valid; the kernel writes at most `len` bytes.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `ss` and `len` are valid for writing.
    counted(Syscall::Getsockname, || unsafe {
        libc::getsockname(fd, &mut ss as *mut _ as *mut libc::sockaddr, &mut len) as libc::c_long
    })?;
    from_sockaddr(&ss).ok_or_else(|| io::Error::other("not an inet socket"))
}

/// accept4(2) that also says who connected (the address costs no syscall of its own).
#[inline]
pub fn accept4_peer(fd: RawFd, flags: i32) -> io::Result<(RawFd, Option<SocketAddr>)> {
    // SAFETY: zeroed sockaddr_storage is valid; the kernel writes at most `len` bytes.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `ss` and `len` are valid for writing.
    let r = counted(Syscall::Accept4, || unsafe {
        libc::accept4(
            fd,
            &mut ss as *mut _ as *mut libc::sockaddr,
            &mut len,
            flags,
        ) as libc::c_long
    })?;
    Ok((r as RawFd, from_sockaddr(&ss)))
}

/// getpeername(2).
pub fn getpeername(fd: RawFd) -> io::Result<SocketAddr> {
    // SAFETY: zeroed sockaddr_storage is valid; the kernel writes at most `len` bytes.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `ss` and `len` are valid for writing.
    counted(Syscall::Getpeername, || unsafe {
        libc::getpeername(fd, &mut ss as *mut _ as *mut libc::sockaddr, &mut len) as libc::c_long
    })?;
    from_sockaddr(&ss).ok_or_else(|| io::Error::other("not an inet socket"))
}

/// accept4(2) with the given flags (SOCK_NONBLOCK | SOCK_CLOEXEC, typically).
pub fn accept4(fd: RawFd, flags: i32) -> io::Result<RawFd> {
    // SAFETY: null address pointers are allowed by accept4(2).
    counted(Syscall::Accept4, || unsafe {
        libc::accept4(fd, std::ptr::null_mut(), std::ptr::null_mut(), flags) as libc::c_long
    })
    .map(|r| r as RawFd)
}

pub fn setsockopt_int(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the option value is a valid c_int of the given size.
    counted(Syscall::Setsockopt, || unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &value as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        ) as libc::c_long
    })
    .map(drop)
}

/// SO_LINGER: `Some(0)` makes close(2) send RST and skip TIME_WAIT.
pub fn set_linger(fd: RawFd, secs: Option<i32>) -> io::Result<()> {
    let l = libc::linger {
        l_onoff: secs.is_some() as i32,
        l_linger: secs.unwrap_or(0),
    };
    // SAFETY: `l` is a valid linger struct of the given size.
    counted(Syscall::Setsockopt, || unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        ) as libc::c_long
    })
    .map(drop)
}

pub fn getsockopt_int(fd: RawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut v: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writing.
    counted(Syscall::Getsockopt, || unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut v as *mut i32 as *mut libc::c_void,
            &mut len,
        ) as libc::c_long
    })?;
    Ok(v)
}

/// The pending error of a socket (SO_ERROR), as an `io::Error` if there is one.
pub fn take_socket_error(fd: RawFd) -> io::Result<Option<io::Error>> {
    let e = getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_ERROR)?;
    Ok(if e == 0 {
        None
    } else {
        Some(io::Error::from_raw_os_error(e))
    })
}

/// A non-blocking TCP listening socket (SO_REUSEADDR; SO_REUSEPORT when asked). TCP_NODELAY is
/// set here once: accepted sockets inherit it, so a response that leaves in two writes (head,
/// then sendfile without cork) is never held back by Nagle, at no per-connection cost.
pub fn tcp_listener(
    addr: &std::net::SocketAddr,
    backlog: i32,
    reuseport: bool,
) -> io::Result<RawFd> {
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let fd = socket(
        domain,
        libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        0,
    )?;
    let setup = || -> io::Result<()> {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        if reuseport {
            setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
        }
        setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
        bind(fd, addr)?;
        listen(fd, backlog)?;
        Ok(())
    };
    match setup() {
        Ok(()) => Ok(fd),
        Err(e) => {
            let _ = close(fd);
            Err(e)
        }
    }
}

/// A blocking TCP connection whose receive buffer is set before it connects, so that the
/// window it advertises stays that small (a slow reader, for tests and the lab).
pub fn connect_with_rcvbuf(addr: &SocketAddr, rcvbuf: i32) -> io::Result<std::net::TcpStream> {
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let fd = socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)?;
    // SAFETY: `fd` is a socket just created here and owned by nobody else.
    let owned = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, rcvbuf)?;
    connect(fd, addr)?;
    Ok(std::net::TcpStream::from(owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockaddr_round_trips() {
        for a in ["127.0.0.1:8080", "[::1]:443"] {
            let addr: SocketAddr = a.parse().unwrap();
            let (ss, _) = sockaddr(&addr);
            assert_eq!(from_sockaddr(&ss), Some(addr));
        }
    }
}
