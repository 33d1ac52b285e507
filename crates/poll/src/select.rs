//! select(2), the way the μserver used it, without the 1,024-descriptor ceiling.
//!
//! Costs and traps: the interest set lives in user space and is copied into the kernel on every
//! call, and the kernel walks every descriptor below `nfds`; the result comes back in the same
//! bitmaps, which the caller scans again. Work is proportional to the highest descriptor number,
//! not to the number of ready descriptors, which is why 10,000 idle connections hurt it (Fig. 5).
//! glibc's `fd_set` is fixed at 1,024 bits (FD_SETSIZE) and `FD_SET` past it corrupts memory; the
//! syscall itself accepts any `nfds` up to the descriptor limit, so this mechanism keeps its own
//! growable bitmaps and calls the syscall directly.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::{Event, Events, Interest, Mechanism, Poller, PollerStats, Token};
use evlab_sys as sys;

const NO_TOKEN: usize = usize::MAX;

#[derive(Debug, Default)]
pub struct Select {
    read: Vec<u64>,
    write: Vec<u64>,
    read_out: Vec<u64>,
    write_out: Vec<u64>,
    tokens: Vec<usize>,
    /// One past the highest registered descriptor.
    nfds: usize,
    stats: PollerStats,
}

#[inline]
fn set(bits: &mut [u64], fd: usize, on: bool) {
    let (w, b) = (fd / 64, fd % 64);
    if on {
        bits[w] |= 1 << b;
    } else {
        bits[w] &= !(1 << b);
    }
}

impl Select {
    fn ensure(&mut self, fd: RawFd) -> io::Result<usize> {
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        let fd = fd as usize;
        if fd >= self.tokens.len() {
            let n = (fd + 1).next_power_of_two().max(1024);
            self.tokens.resize(n, NO_TOKEN);
            let words = n.div_ceil(64);
            self.read.resize(words, 0);
            self.write.resize(words, 0);
            self.read_out.resize(words, 0);
            self.write_out.resize(words, 0);
        }
        Ok(fd)
    }

    fn apply(&mut self, fd: usize, token: Token, interest: Interest) {
        self.tokens[fd] = token.0;
        set(&mut self.read, fd, interest.readable());
        set(&mut self.write, fd, interest.writable());
    }
}

impl Poller for Select {
    const MECHANISM: Mechanism = Mechanism::Select;

    fn new() -> io::Result<Self> {
        Ok(Select::default())
    }

    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        let fd = self.ensure(fd)?;
        if self.tokens[fd] != NO_TOKEN {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        self.apply(fd, token, interest);
        self.nfds = self.nfds.max(fd + 1);
        self.stats.interest_changes_free += 1;
        Ok(())
    }

    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        let fd = self.ensure(fd)?;
        if self.tokens[fd] == NO_TOKEN {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        self.apply(fd, token, interest);
        self.stats.interest_changes_free += 1;
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        let fd = self.ensure(fd)?;
        if self.tokens[fd] == NO_TOKEN {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        self.tokens[fd] = NO_TOKEN;
        set(&mut self.read, fd, false);
        set(&mut self.write, fd, false);
        while self.nfds > 0 && self.tokens[self.nfds - 1] == NO_TOKEN {
            self.nfds -= 1;
        }
        self.stats.interest_changes_free += 1;
        Ok(())
    }

    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        events.clear();
        self.stats.waits += 1;
        let words = self.nfds.div_ceil(64);
        // The copy the kernel cannot remember for us: select overwrites its arguments.
        self.read_out[..words].copy_from_slice(&self.read[..words]);
        self.write_out[..words].copy_from_slice(&self.write[..words]);
        let (rp, wp) = if words == 0 {
            (std::ptr::null_mut(), std::ptr::null_mut())
        } else {
            (self.read_out.as_mut_ptr(), self.write_out.as_mut_ptr())
        };
        // SAFETY: both result bitmaps hold at least `words` words, covering `nfds` bits.
        let r = unsafe { sys::select_raw(self.nfds as i32, rp, wp, std::ptr::null_mut(), timeout) };
        let n = match r {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => return Ok(0),
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(0);
        }
        for w in 0..words {
            let mut bits = self.read_out[w] | self.write_out[w];
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let fd = w * 64 + b;
                let mut flags = 0;
                if self.read_out[w] & (1 << b) != 0 {
                    flags |= Event::READABLE;
                }
                if self.write_out[w] & (1 << b) != 0 {
                    flags |= Event::WRITABLE;
                }
                if !events.push(Event::new(Token(self.tokens[fd]), flags)) {
                    // Full: level-triggered, so the rest are reported again next call.
                    self.stats.events += events.len() as u64;
                    return Ok(events.len());
                }
            }
        }
        self.stats.events += events.len() as u64;
        Ok(events.len())
    }

    fn edge_triggered(&self) -> bool {
        false
    }

    fn stats(&self) -> PollerStats {
        self.stats
    }
}
