//! The io_uring runtime both completion engines stand on: the server's (`evlab-server`'s
//! `completion.rs`) and the proxy's (`evlab-proxy`'s `completion/`).
//!
//! An engine owns one [`Ring`] per worker thread and does three things with it each turn:
//! queue requests ([`Ring::push`], which submits what the queue holds when it is full),
//! enter the kernel once ([`Ring::enter`]: everything queued is submitted and the thread
//! sleeps until a completion or the timeout), and take the completions that enter brought
//! ([`Ring::harvest`], then [`Ring::done`]). What a completion means (which request, which
//! connection) is the engine's business: the ring knows only `user_data`.
//!
//! [`ProvidedBuffers`] is a ring of buffers the kernel picks from for multishot recvs
//! (IORING_REGISTER_PBUF_RING): the server's engine uses it; the proxy's recvs name their own
//! buffers.
//!
//! The ring is made with SINGLE_ISSUER and DEFER_TASKRUN where the kernel has them
//! (`evlab_poll::uring_probe::new_engine_ring`): completions are posted only when the thread
//! asks for them, in its one enter of a turn.

use std::io;
use std::time::Duration;

use evlab_poll::PollerStats;
use evlab_sys as sys;
use io_uring::{squeue, types, IoUring, Probe};

/// One completion: its request's `user_data`, its result (bytes, or `-errno`) and its flags.
pub type Done = (u64, i32, u32);

/// A worker's ring: its submission queue, its enter and the completions harvested.
pub struct Ring {
    ring: IoUring,
    done: Vec<Done>,
    /// Waits and completions, as the readiness mechanisms count theirs.
    pub stats: PollerStats,
}

impl Ring {
    /// A ring of `entries` submissions and `cq_entries` completions for this thread only.
    pub fn new(entries: u32, cq_entries: u32) -> io::Result<Ring> {
        Ok(Ring {
            ring: evlab_poll::uring_probe::new_engine_ring(entries, cq_entries)?,
            done: Vec::with_capacity(1024),
            stats: PollerStats::default(),
        })
    }

    /// Queues entries that must be submitted together (a linked pair, say): all or none.
    /// When the queue is full, what it holds is submitted first.
    ///
    /// # Safety
    ///
    /// Every pointer an entry carries (buffers, iovecs, a message) must stay valid and in
    /// place until its request completes, or at least until it is submitted when the kernel
    /// copies it then (IORING_FEAT_SUBMIT_STABLE).
    #[inline]
    pub unsafe fn push(&mut self, sqes: &[squeue::Entry]) -> io::Result<()> {
        // SAFETY: the caller's promise.
        if unsafe { self.ring.submission().push_multiple(sqes) }.is_ok() {
            return Ok(());
        }
        // SAFETY: the caller's promise.
        unsafe { self.push_when_full(sqes) }
    }

    /// The queue is full: submit what it holds, then queue.
    #[cold]
    #[inline(never)]
    unsafe fn push_when_full(&mut self, sqes: &[squeue::Entry]) -> io::Result<()> {
        self.submit()?;
        // SAFETY: as in `push`.
        unsafe { self.ring.submission().push_multiple(sqes) }
            .map_err(|_| io::Error::other("submission queue full"))
    }

    /// The turn's one kernel entry: submits what is queued and waits for a completion, at
    /// most `timeout` (`None`: as long as it takes; zero: not at all). An interrupted or timed
    /// out wait is not an error.
    #[inline]
    pub fn enter(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stats.waits_from_kernel += 1;
        evlab_poll::uring_poll::enter(&self.ring, 1, timeout)
    }

    /// Submits what is queued without waiting (at shutdown, say).
    pub fn submit(&mut self) -> io::Result<usize> {
        sys::count_io(sys::Syscall::IoUringEnter, || self.ring.submit())
    }

    /// Whether the last enter submitted everything that was queued.
    pub fn all_submitted(&mut self) -> bool {
        self.ring.submission().is_empty()
    }

    /// Takes the completions posted so far; [`Ring::done`] holds them until the next harvest.
    #[inline]
    pub fn harvest(&mut self) -> usize {
        self.done.clear();
        for cqe in self.ring.completion() {
            self.done.push((cqe.user_data(), cqe.result(), cqe.flags()));
        }
        self.stats.events += self.done.len() as u64;
        self.done.len()
    }

    /// How many completions the last harvest took.
    #[inline]
    pub fn harvested(&self) -> usize {
        self.done.len()
    }

    /// Whether completions were held back by a full completion queue (the kernel posts them
    /// at a later enter).
    pub fn cq_overflow(&mut self) -> bool {
        self.ring.submission().cq_overflow()
    }

    /// The `k`th completion of the last harvest.
    #[inline]
    pub fn done(&self, k: usize) -> Done {
        self.done[k]
    }

    /// Whether the kernel skips the completions of requests that succeeded when asked to
    /// (IOSQE_CQE_SKIP_SUCCESS).
    pub fn skips_success(&self) -> bool {
        self.ring.params().is_feature_skip_cqe_on_success()
    }

    /// Whether this kernel's io_uring has every one of these opcodes.
    pub fn supports(&self, codes: &[u8]) -> bool {
        let mut p = Probe::new();
        self.ring.submitter().register_probe(&mut p).is_ok()
            && codes.iter().all(|&c| p.is_supported(c))
    }
}

/// A ring of provided buffers shared with the kernel (IORING_REGISTER_PBUF_RING): `count`
/// buffers of `size` bytes in one block, group `bgid`. A recv that names the group takes one;
/// its completion says which (`IORING_CQE_BUFFER_SHIFT`), and the engine gives it back with
/// [`ProvidedBuffers::give`] and then [`ProvidedBuffers::publish`], or the ring runs dry.
///
/// It must be dropped after the [`Ring`] it is registered with (declare it after the ring).
pub struct ProvidedBuffers {
    entries: *mut types::BufRingEntry,
    layout: std::alloc::Layout,
    mem: Vec<u8>,
    size: usize,
    tail: u16,
    mask: u16,
}

impl ProvidedBuffers {
    /// Registers `count` buffers (a power of two) of `size` bytes as group `bgid`, all given.
    pub fn new(ring: &Ring, count: u16, size: usize, bgid: u16) -> io::Result<ProvidedBuffers> {
        if !count.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a buffer ring's size must be a power of two",
            ));
        }
        let n = count as usize;
        let layout = std::alloc::Layout::from_size_align(
            n * std::mem::size_of::<types::BufRingEntry>(),
            4096,
        )
        .map_err(|e| io::Error::other(e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let entries = unsafe { std::alloc::alloc_zeroed(layout) } as *mut types::BufRingEntry;
        if entries.is_null() {
            return Err(io::Error::from_raw_os_error(libc::ENOMEM));
        }
        let mut br = ProvidedBuffers {
            entries,
            layout,
            mem: vec![0u8; n * size],
            size,
            tail: 0,
            mask: count - 1,
        };
        // SAFETY: `entries` is page-aligned, zeroed, sized for `count` entries, and lives until
        // after the ring is dropped (the caller's field order).
        sys::count_io(sys::Syscall::IoUringRegister, || unsafe {
            ring.ring
                .submitter()
                .register_buf_ring_with_flags(entries as u64, count, bgid, 0)
        })?;
        for bid in 0..count {
            br.give(bid);
        }
        br.publish();
        Ok(br)
    }

    /// Gives buffer `bid` back (seen by the kernel once published).
    #[inline]
    pub fn give(&mut self, bid: u16) {
        let i = (self.tail & self.mask) as usize;
        // SAFETY: `i` < count; the entry is ours to write until the tail is published.
        let e = unsafe { &mut *self.entries.add(i) };
        e.set_addr(self.mem.as_ptr() as u64 + bid as u64 * self.size as u64);
        e.set_len(self.size as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Publishes the buffers given back since the last publish.
    #[inline]
    pub fn publish(&self) {
        // SAFETY: the tail lives in the first entry's reserved field; the kernel reads it with
        // acquire semantics, so a release store publishes the entries written before it.
        unsafe {
            let tail =
                types::BufRingEntry::tail(self.entries) as *const std::sync::atomic::AtomicU16;
            (*tail).store(self.tail, std::sync::atomic::Ordering::Release);
        }
    }

    /// The first `len` bytes of buffer `bid` (what a recv put there).
    #[inline]
    pub fn data(&self, bid: u16, len: usize) -> &[u8] {
        let start = bid as usize * self.size;
        &self.mem[start..start + len.min(self.size)]
    }
}

impl Drop for ProvidedBuffers {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the ring that used it is gone.
        unsafe { std::alloc::dealloc(self.entries as *mut u8, self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use io_uring::opcode;

    fn ring() -> Option<Ring> {
        evlab_poll::testing::mechanism(evlab_poll::Mechanism::Uring)
            .then(|| Ring::new(8, 16).expect("a ring"))
    }

    #[test]
    fn a_nop_completes_with_its_user_data_in_one_enter() {
        let Some(mut r) = ring() else { return };
        let nop = opcode::Nop::new().build().user_data(42);
        // SAFETY: a nop carries no pointer.
        unsafe { r.push(&[nop]) }.unwrap();
        r.enter(Some(Duration::from_secs(5))).unwrap();
        assert!(r.all_submitted());
        assert_eq!(r.harvest(), 1);
        assert_eq!(r.done(0), (42, 0, 0));
        assert_eq!(r.stats.events, 1);
        assert_eq!(r.stats.waits_from_kernel, 1);
    }

    #[test]
    fn a_full_queue_is_submitted_before_more_is_queued() {
        let Some(mut r) = ring() else { return };
        // The queue holds 8: the ninth push submits the first eight.
        for k in 0..20u64 {
            let nop = opcode::Nop::new().build().user_data(k);
            // SAFETY: a nop carries no pointer.
            unsafe { r.push(&[nop]) }.unwrap();
        }
        r.enter(Some(Duration::ZERO)).unwrap();
        let mut seen = Vec::new();
        for _ in 0..100 {
            for k in 0..r.harvest() {
                seen.push(r.done(k).0);
            }
            if seen.len() == 20 {
                break;
            }
            r.enter(Some(Duration::from_millis(10))).unwrap();
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..20).collect::<Vec<u64>>());
    }

    #[test]
    fn an_enter_with_nothing_to_wait_for_times_out_quietly() {
        let Some(mut r) = ring() else { return };
        r.enter(Some(Duration::from_millis(5))).unwrap();
        assert_eq!(r.harvest(), 0);
    }

    #[test]
    fn provided_buffers_must_be_a_power_of_two() {
        let Some(r) = ring() else { return };
        let e = ProvidedBuffers::new(&r, 3, 64, 0)
            .err()
            .expect("3 is refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
