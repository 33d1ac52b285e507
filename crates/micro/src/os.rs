//! Safe wrappers that only the micro-benchmarks use: a connect from a chosen source address, a
//! single io_uring accept, the C library's version, and ([`files`]) the read-ahead benchmark's
//! page-cache calls. Each `unsafe` block has its SAFETY line; every other process-level call goes
//! through `evlab-sys`, the worker processes included (`evlab_sys::fork_run`, `wait_child`,
//! `pipe_blocking`, `threads_in_process`: the prefork code `evlab serve --as processes` uses).
//!
//! None of these is on a server's hot path, so none is counted except where a counted wrapper is
//! reused (`socket`, `bind`, `connect`, `io_uring_enter`).

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd as StdOwnedFd, RawFd};

use evlab_sys::{count_io, Syscall};

pub mod files;
pub use files::*;

// ---- sockets ----

/// A blocking TCP connection to `dst` from the address `src` (port 0: the kernel picks the
/// port at connect time, with IP_BIND_ADDRESS_NO_PORT, so that one address serves as many
/// destinations as it has ports).
pub fn connect_from(src: &SocketAddr, dst: &SocketAddr) -> io::Result<TcpStream> {
    let domain = if dst.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let fd = evlab_sys::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)?;
    // SAFETY: `fd` is a socket just created here and owned by nobody else.
    let owned = unsafe { StdOwnedFd::from_raw_fd(fd) };
    if src.port() == 0 {
        evlab_sys::setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1)?;
    }
    evlab_sys::bind(fd, src)?;
    evlab_sys::connect(fd, dst)?;
    Ok(TcpStream::from(owned))
}

// ---- io_uring accept ----

/// One `IORING_OP_ACCEPT` at a time on a listening socket, from a ring of the caller's own: the
/// io_uring way of waiting for a connection. The kernel arms an exclusive poll on the listener
/// for it, so one completion is posted per connection.
pub struct UringAcceptor {
    ring: io_uring::IoUring,
    listener: RawFd,
}

impl std::fmt::Debug for UringAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringAcceptor")
            .field("listener", &self.listener)
            .finish()
    }
}

impl UringAcceptor {
    /// Whether this kernel can do it, and if not, why.
    pub fn support() -> evlab_poll::Support {
        let s = evlab_poll::uring_probe::support();
        evlab_poll::Support::unless(s.missing(&[("IORING_OP_ACCEPT", s.accept)]))
    }

    /// A ring for accepting on `listener` (which must stay open while this lives).
    pub fn new(listener: RawFd) -> io::Result<UringAcceptor> {
        Self::support().require("io_uring accept")?;
        let ring = count_io(Syscall::IoUringSetup, || io_uring::IoUring::new(4))?;
        Ok(UringAcceptor { ring, listener })
    }

    /// Submits one accept and sleeps until it completes; the new descriptor is close-on-exec
    /// and blocking. An error the accept met (EINVAL once the listener is shut down) is returned.
    pub fn accept(&mut self) -> io::Result<RawFd> {
        let sqe = io_uring::opcode::Accept::new(
            io_uring::types::Fd(self.listener),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
        .flags(libc::SOCK_CLOEXEC)
        .build()
        .user_data(1);
        // SAFETY: the entry carries no pointer (null address and length are allowed), and the
        // listener is a plain descriptor number.
        unsafe { self.ring.submission().push(&sqe) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        loop {
            if let Some(cqe) = self.ring.completion().next() {
                let r = cqe.result();
                return if r < 0 {
                    Err(io::Error::from_raw_os_error(-r))
                } else {
                    Ok(r as RawFd)
                };
            }
            match count_io(Syscall::IoUringEnter, || self.ring.submit_and_wait(1)) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

// ---- the C library ----

/// The version of the GNU C library this process runs with (`gnu_get_libc_version`).
pub fn glibc_version() -> String {
    // SAFETY: gnu_get_libc_version returns a pointer to a static NUL-terminated string.
    let p = unsafe { libc::gnu_get_libc_version() };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: `p` is a valid, static, NUL-terminated string (checked non-null above).
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_c_library_answers() {
        assert!(glibc_version().starts_with("2."), "{}", glibc_version());
    }

    #[test]
    fn connect_from_a_chosen_source() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let src: SocketAddr = "127.3.0.7:0".parse().unwrap();
        let c = connect_from(&src, &l.local_addr().unwrap()).unwrap();
        assert_eq!(c.local_addr().unwrap().ip(), src.ip());
        let (_s, peer) = l.accept().unwrap();
        assert_eq!(peer.ip(), src.ip());
    }

    #[test]
    fn uring_accept_takes_a_connection_or_says_why_not() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&l);
        if let evlab_poll::Support::No(why) = UringAcceptor::support() {
            // Refused, with the reason; but nothing was accepted.
            let e = UringAcceptor::new(fd).expect_err("no io_uring accept, yet a ring");
            assert!(e.to_string().contains(&why), "{e}");
            let why = format!("io_uring accept unavailable: {why}");
            evlab_poll::testing::require("io_uring", false, &why);
            return;
        }
        let mut a = UringAcceptor::new(fd).expect("io_uring accepts here");
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || TcpStream::connect(addr).unwrap());
        let c = a.accept().unwrap();
        assert!(c >= 0);
        evlab_sys::close(c).unwrap();
        drop(t.join().unwrap());
    }
}
