//! The epoll family: epoll-lt, epoll2 and epoll-et.
//!
//! Costs and traps, frankly:
//! - epoll-lt pays one `epoll_ctl(MOD)` for every change of interest. The μserver switches a
//!   connection from read to write interest and back for every request, so that is two calls per
//!   request on top of ADD and DEL: the 16% of Table 1.
//! - epoll2 registers IN|OUT once and never modifies. An idle-but-writable socket then reports
//!   EPOLLOUT on every wait, so waits return early with events the server does not want; this
//!   mechanism drops them in user space and counts them (`PollerStats::discarded`). With many
//!   connections waiting to be read, that is a lot of waits for nothing (paper §5, Fig. 5).
//! - epoll-et registers IN|OUT|ET once. The kernel reports only transitions, so the caller must
//!   keep its own readable/writable state and read or write until EAGAIN (or a short transfer); a
//!   caller that stops early will never hear of that descriptor again.
//! - EPOLLERR and EPOLLHUP are reported whatever the interest: a descriptor left registered after
//!   its peer hung up makes a level-triggered wait return at once, forever. Callers close it.
//! - The kernel keys registrations by (file, fd): deregister before close, or a dup'd file keeps
//!   reporting a closed fd's events.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::{Event, Events, Interest, Mechanism, Poller, PollerStats, Token};
use evlab_sys::{self as sys, OwnedFd};

const NO_TOKEN: usize = usize::MAX;

pub(crate) fn to_epoll(interest: Interest) -> u32 {
    let mut e = 0;
    if interest.readable() {
        e |= libc::EPOLLIN as u32;
    }
    if interest.writable() {
        e |= libc::EPOLLOUT as u32;
    }
    e
}

#[inline]
pub(crate) fn from_epoll(e: u32) -> u8 {
    let mut f = 0;
    if e & (libc::EPOLLIN | libc::EPOLLPRI) as u32 != 0 {
        f |= Event::READABLE;
    }
    if e & libc::EPOLLRDHUP as u32 != 0 {
        f |= Event::RDHUP;
    }
    if e & libc::EPOLLOUT as u32 != 0 {
        f |= Event::WRITABLE;
    }
    if e & libc::EPOLLERR as u32 != 0 {
        f |= Event::ERROR;
    }
    if e & libc::EPOLLHUP as u32 != 0 {
        f |= Event::HUP;
    }
    f
}

/// The epoll instance and the kernel-facing event buffer every variant shares.
#[derive(Debug)]
struct EpollCore {
    epfd: OwnedFd,
    buf: Vec<libc::epoll_event>,
    stats: PollerStats,
}

impl EpollCore {
    fn new() -> io::Result<EpollCore> {
        let epfd = sys::epoll_create1(libc::EPOLL_CLOEXEC)?;
        Ok(EpollCore {
            epfd: OwnedFd(epfd),
            buf: Vec::new(),
            stats: PollerStats::default(),
        })
    }

    fn ctl(&mut self, op: i32, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
        self.stats.interest_changes += 1;
        sys::epoll_ctl(self.epfd.0, op, fd, events, data)
    }

    /// A wait whose `data` field is the caller's token: events are passed on as they come.
    fn wait_tokens(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        events.clear();
        let n = self.wait_raw(events.capacity(), timeout)?;
        for raw in &self.buf[..n] {
            events.push(Event::new(Token(raw.u64 as usize), from_epoll(raw.events)));
        }
        self.stats.events += n as u64;
        Ok(n)
    }

    /// epoll_wait into the raw buffer; returns how many entries the kernel filled.
    fn wait_raw(&mut self, capacity: usize, timeout: Option<Duration>) -> io::Result<usize> {
        if self.buf.len() < capacity {
            self.buf
                .resize(capacity, libc::epoll_event { events: 0, u64: 0 });
        }
        self.stats.waits += 1;
        match sys::epoll_wait_precise(self.epfd.0, &mut self.buf[..capacity], timeout) {
            Ok(n) => Ok(n),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(0),
            Err(e) => Err(e),
        }
    }
}

/// Per-descriptor record kept in user space by the variants that register once.
#[derive(Copy, Clone, Debug)]
struct Slot {
    token: usize,
    interest: Interest,
}

fn slot_mut(slots: &mut Vec<Slot>, fd: RawFd) -> io::Result<&mut Slot> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    let i = fd as usize;
    if i >= slots.len() {
        slots.resize(
            (i + 1).next_power_of_two(),
            Slot {
                token: NO_TOKEN,
                interest: Interest::NONE,
            },
        );
    }
    Ok(&mut slots[i])
}

/// Level-triggered epoll, `epoll_ctl(MOD)` on every change of interest (the paper's epoll-LT).
#[derive(Debug)]
pub struct EpollLt {
    core: EpollCore,
}

impl Poller for EpollLt {
    const MECHANISM: Mechanism = Mechanism::EpollLt;

    fn new() -> io::Result<Self> {
        Ok(EpollLt {
            core: EpollCore::new()?,
        })
    }

    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        self.core
            .ctl(libc::EPOLL_CTL_ADD, fd, to_epoll(interest), token.0 as u64)
    }

    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        self.core
            .ctl(libc::EPOLL_CTL_MOD, fd, to_epoll(interest), token.0 as u64)
    }

    fn register_exclusive(&mut self, fd: RawFd, token: Token) -> io::Result<()> {
        let ev = (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32;
        self.core.ctl(libc::EPOLL_CTL_ADD, fd, ev, token.0 as u64)
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        self.core.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        self.core.wait_tokens(events, timeout)
    }

    fn edge_triggered(&self) -> bool {
        false
    }

    fn stats(&self) -> PollerStats {
        self.core.stats
    }
}

/// Level-triggered epoll with IN|OUT registered once and never modified (the paper's epoll2).
#[derive(Debug)]
pub struct Epoll2 {
    core: EpollCore,
    slots: Vec<Slot>,
}

impl Poller for Epoll2 {
    const MECHANISM: Mechanism = Mechanism::Epoll2;

    fn new() -> io::Result<Self> {
        Ok(Epoll2 {
            core: EpollCore::new()?,
            slots: Vec::new(),
        })
    }

    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        *slot_mut(&mut self.slots, fd)? = Slot {
            token: token.0,
            interest,
        };
        let both = (libc::EPOLLIN | libc::EPOLLOUT) as u32;
        self.core.ctl(libc::EPOLL_CTL_ADD, fd, both, fd as u64)
    }

    fn register_exclusive(&mut self, fd: RawFd, token: Token) -> io::Result<()> {
        *slot_mut(&mut self.slots, fd)? = Slot {
            token: token.0,
            interest: Interest::READABLE,
        };
        let ev = (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32;
        self.core.ctl(libc::EPOLL_CTL_ADD, fd, ev, fd as u64)
    }

    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        let slot = slot_mut(&mut self.slots, fd)?;
        slot.token = token.0;
        slot.interest = interest;
        self.core.stats.interest_changes_free += 1;
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        slot_mut(&mut self.slots, fd)?.token = NO_TOKEN;
        self.core.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        events.clear();
        let n = self.core.wait_raw(events.capacity(), timeout)?;
        let mut discarded = 0;
        for raw in &self.core.buf[..n] {
            let fd = raw.u64 as usize;
            let Some(slot) = self.slots.get(fd) else {
                discarded += 1;
                continue;
            };
            let flags = from_epoll(raw.events);
            let mut wanted = flags & (Event::ERROR | Event::HUP);
            if slot.interest.readable() {
                wanted |= flags & Event::READABLE;
            }
            if slot.interest.writable() {
                wanted |= flags & Event::WRITABLE;
            }
            if wanted == 0 || slot.token == NO_TOKEN {
                discarded += 1;
                continue;
            }
            events.push(Event::new(Token(slot.token), wanted));
        }
        self.core.stats.discarded += discarded;
        self.core.stats.events += events.len() as u64;
        Ok(events.len())
    }

    fn edge_triggered(&self) -> bool {
        false
    }

    fn stats(&self) -> PollerStats {
        self.core.stats
    }
}

/// Edge-triggered epoll, IN|OUT|ET registered once (the paper's epoll-ET).
#[derive(Debug)]
pub struct EpollEt {
    core: EpollCore,
    slots: Vec<Slot>,
}

impl Poller for EpollEt {
    const MECHANISM: Mechanism = Mechanism::EpollEt;

    fn new() -> io::Result<Self> {
        Ok(EpollEt {
            core: EpollCore::new()?,
            slots: Vec::new(),
        })
    }

    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        *slot_mut(&mut self.slots, fd)? = Slot {
            token: token.0,
            interest,
        };
        let ev = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
        self.core.ctl(libc::EPOLL_CTL_ADD, fd, ev, token.0 as u64)
    }

    fn register_exclusive(&mut self, fd: RawFd, token: Token) -> io::Result<()> {
        *slot_mut(&mut self.slots, fd)? = Slot {
            token: token.0,
            interest: Interest::READABLE,
        };
        // EPOLLRDHUP is not allowed with EPOLLEXCLUSIVE (EINVAL); a listener needs only IN.
        let ev = (libc::EPOLLIN | libc::EPOLLET | libc::EPOLLEXCLUSIVE) as u32;
        self.core.ctl(libc::EPOLL_CTL_ADD, fd, ev, token.0 as u64)
    }

    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        let slot = slot_mut(&mut self.slots, fd)?;
        let token_changed = slot.token != token.0;
        slot.token = token.0;
        slot.interest = interest;
        if token_changed {
            let ev = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
            self.core.ctl(libc::EPOLL_CTL_MOD, fd, ev, token.0 as u64)
        } else {
            self.core.stats.interest_changes_free += 1;
            Ok(())
        }
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        slot_mut(&mut self.slots, fd)?.token = NO_TOKEN;
        self.core.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        self.core.wait_tokens(events, timeout)
    }

    fn edge_triggered(&self) -> bool {
        true
    }

    fn stats(&self) -> PollerStats {
        self.core.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `events` mask the kernel holds for `fd` in any epoll instance of this process, from
    /// `/proc/self/fdinfo` (lines `tfd: FD events: HEX data: …`).
    fn kernel_masks(fd: RawFd) -> Vec<u32> {
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc/self/fdinfo").unwrap().flatten() {
            let Ok(text) = std::fs::read_to_string(e.path()) else {
                continue;
            };
            for line in text.lines() {
                let mut w = line.split_whitespace();
                if w.next() == Some("tfd:") && w.next() == Some(&fd.to_string()) {
                    if let (Some("events:"), Some(hex)) = (w.next(), w.next()) {
                        out.push(u32::from_str_radix(hex, 16).unwrap());
                    }
                }
            }
        }
        out
    }

    fn check<P: Poller>() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&l);
        let mut p = P::new().unwrap();
        p.register_exclusive(fd, Token(7)).unwrap();
        let masks = kernel_masks(fd);
        assert_eq!(masks.len(), 1, "{masks:x?}");
        assert_ne!(masks[0] & libc::EPOLLEXCLUSIVE as u32, 0, "{:x}", masks[0]);
        assert_ne!(masks[0] & libc::EPOLLIN as u32, 0, "{:x}", masks[0]);
        // Paused and resumed, as the accept gate does: DEL, then ADD again.
        p.deregister(fd).unwrap();
        assert!(kernel_masks(fd).is_empty());
        p.register_exclusive(fd, Token(7)).unwrap();
        assert_eq!(kernel_masks(fd).len(), 1);
        // A connection is reported with the listener's token.
        let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut ev = Events::with_capacity(8);
        p.wait(&mut ev, Some(Duration::from_secs(5))).unwrap();
        assert!(ev.iter().any(|e| e.token == Token(7) && e.readable()));
    }

    #[test]
    fn exclusive_listener_registration() {
        check::<EpollLt>();
        check::<Epoll2>();
        check::<EpollEt>();
    }
}
