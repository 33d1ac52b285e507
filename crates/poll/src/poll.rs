//! poll(2), the way the μserver used it.
//!
//! Costs and traps: the whole `pollfd` array is copied into the kernel and every entry is checked
//! on each call, then the caller scans the array again for non-zero `revents`: work proportional
//! to the number of registered descriptors, ready or not. Unlike select there is no bitmap
//! ceiling, but the array must stay dense: deregistering moves the last entry into the hole, so
//! an fd→slot index is kept beside it. POLLHUP/POLLERR/POLLNVAL are reported whatever `events`
//! says.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::{timeout_ms, Event, Events, Interest, Mechanism, Poller, PollerStats, Token};
use evlab_sys as sys;

const NO_SLOT: u32 = u32::MAX;

#[derive(Debug, Default)]
pub struct Poll {
    fds: Vec<libc::pollfd>,
    tokens: Vec<usize>,
    slot_of: Vec<u32>,
    /// Where the next scan starts, so that a full `Events` does not starve the array's tail.
    cursor: usize,
    stats: PollerStats,
}

fn to_poll(interest: Interest) -> i16 {
    let mut e = 0;
    if interest.readable() {
        e |= libc::POLLIN;
    }
    if interest.writable() {
        e |= libc::POLLOUT;
    }
    e
}

impl Poll {
    fn slot(&self, fd: RawFd) -> Option<usize> {
        if fd < 0 {
            return None;
        }
        match self.slot_of.get(fd as usize) {
            Some(&s) if s != NO_SLOT => Some(s as usize),
            _ => None,
        }
    }
}

impl Poller for Poll {
    const MECHANISM: Mechanism = Mechanism::Poll;

    fn new() -> io::Result<Self> {
        Ok(Poll::default())
    }

    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        if self.slot(fd).is_some() {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        let i = fd as usize;
        if i >= self.slot_of.len() {
            self.slot_of.resize((i + 1).next_power_of_two(), NO_SLOT);
        }
        self.slot_of[i] = self.fds.len() as u32;
        self.fds.push(libc::pollfd {
            fd,
            events: to_poll(interest),
            revents: 0,
        });
        self.tokens.push(token.0);
        self.stats.interest_changes_free += 1;
        Ok(())
    }

    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        let s = self
            .slot(fd)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        self.fds[s].events = to_poll(interest);
        self.tokens[s] = token.0;
        self.stats.interest_changes_free += 1;
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        let s = self
            .slot(fd)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        self.fds.swap_remove(s);
        self.tokens.swap_remove(s);
        self.slot_of[fd as usize] = NO_SLOT;
        if s < self.fds.len() {
            self.slot_of[self.fds[s].fd as usize] = s as u32;
        }
        self.stats.interest_changes_free += 1;
        Ok(())
    }

    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        events.clear();
        self.stats.waits += 1;
        let mut n = match sys::poll(&mut self.fds, timeout_ms(timeout)) {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => return Ok(0),
            Err(e) => return Err(e),
        };
        let len = self.fds.len();
        if len == 0 {
            return Ok(0);
        }
        let start = self.cursor % len;
        let mut i = start;
        while n > 0 {
            let re = self.fds[i].revents;
            if re != 0 {
                n -= 1;
                let mut flags = 0;
                if re & (libc::POLLIN | libc::POLLPRI) != 0 {
                    flags |= Event::READABLE;
                }
                if re & libc::POLLRDHUP != 0 {
                    flags |= Event::RDHUP;
                }
                if re & libc::POLLOUT != 0 {
                    flags |= Event::WRITABLE;
                }
                if re & (libc::POLLERR | libc::POLLNVAL) != 0 {
                    flags |= Event::ERROR;
                }
                if re & libc::POLLHUP != 0 {
                    flags |= Event::HUP;
                }
                if !events.push(Event::new(Token(self.tokens[i]), flags)) {
                    self.cursor = i;
                    break;
                }
            }
            i += 1;
            if i == len {
                i = 0;
            }
            if i == start {
                break;
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
