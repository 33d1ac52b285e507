//! The counters of worker processes (`--as processes`), in one anonymous shared mapping made
//! before the fork: a slot per process, which only that process writes (after every turn of
//! its loop, and once more as it ends) and any process reads. Whichever process answers
//! `GET /.evlab/stats` sums every slot, so the document covers the whole server whichever
//! worker took the request; the parent reads them for its exit summary.
//!
//! A slot is a state, the process's pid, how it ended, then [`WorkerView`]'s numbers in a fixed
//! order. A slot read while its process is writing may mix two turns' values (each cell is
//! atomic, the slot is not); every counter only grows, so a reading is never more than one
//! turn old, and the slots of processes that are waiting are exact.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use evlab_sys::{self as sys, ChildExit, SharedCells, Snapshot};
use evlab_wire::server::{DeadWorker, ProcessCounts};
use evlab_wire::StatusClasses;

/// A slot's state (0, before any: forked, not yet serving).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum State {
    Serving = 1,
    /// Ended when asked to (after a stop request).
    Stopped = 2,
    /// Ended on its own: a worker lost.
    Died = 3,
}

macro_rules! view_fields {
    ($($f:ident),* $(,)?) => {
        /// One worker's counters as plain numbers: read from a live [`WorkerStats`], or from a
        /// worker process's slot.
        #[derive(Clone, Debug, Default)]
        pub(crate) struct WorkerView {
            pub worker: usize,
            pub pid: Option<u32>,
            $(pub $f: u64,)*
            pub status: [u64; StatusClasses::SLOTS],
            pub syscalls: Snapshot,
        }

        const NFIELDS: usize = [$(stringify!($f)),*].len();

        impl WorkerView {
            fn to_cells(&self, out: &[AtomicU64]) {
                let vals = [$(self.$f),*];
                for (c, v) in out.iter().zip(vals) {
                    c.store(v, Relaxed);
                }
            }

            fn from_cells(c: &[AtomicU64]) -> WorkerView {
                let mut it = c.iter().map(|x| x.load(Relaxed));
                let mut v = WorkerView::default();
                $(v.$f = it.next().unwrap_or(0);)*
                v
            }
        }
    };
}

view_fields!(
    accepted,
    closed,
    active,
    max_active,
    accept_errors,
    io_errors,
    requests,
    bytes_sent,
    accept_pauses,
    header_timeouts,
    send_timeouts,
    timer_entries,
    max_timer_entries,
    delayed,
    pool_bytes,
    pool_buffers,
    spare_shells,
    table_slots,
    cancels,
    waits,
    events,
    discarded,
    interest_changes,
    interest_changes_free,
    batches,
    waits_from_memory,
    waits_from_kernel,
    overflows,
    accept_wakeups,
    accept_empty,
    accept_eagain,
    waits_with_events,
);

/// Cells of a slot before the view: state, pid, how it ended.
const HEAD: usize = 3;
const STATUS: usize = HEAD + NFIELDS;
const CALLS: usize = STATUS + StatusClasses::SLOTS;
const ERRORS: usize = CALLS + sys::NSYSCALLS;
const NANOS: usize = ERRORS + sys::NSYSCALLS;
const WOULD_BLOCK: usize = NANOS + sys::NSYSCALLS;
const SLOT: usize = WOULD_BLOCK + sys::NSYSCALLS;

/// The worker processes' slots, and which one is this process's.
#[derive(Debug, Clone)]
pub(crate) struct Peers {
    cells: Arc<SharedCells>,
    n: usize,
    /// This process's slot (`None` in the parent, which serves nothing).
    me: Option<usize>,
    profile: bool,
}

impl Peers {
    /// Slots for `n` processes, made before forking them.
    pub fn new(n: usize, profile: bool) -> std::io::Result<Peers> {
        Ok(Peers {
            cells: Arc::new(SharedCells::new(n * SLOT)?),
            n,
            me: None,
            profile,
        })
    }

    /// The same slots as seen by worker process `k`.
    pub fn for_worker(&self, k: usize) -> Peers {
        Peers {
            me: Some(k),
            ..self.clone()
        }
    }

    fn slot(&self, k: usize) -> &[AtomicU64] {
        &self.cells.cells()[k * SLOT..(k + 1) * SLOT]
    }

    /// The parent records the pid of the process it forked for slot `k` (the process itself
    /// writes its state).
    pub fn set_pid(&self, k: usize, pid: u32) {
        self.slot(k)[1].store(pid as u64, Relaxed);
    }

    pub fn set_state(&self, k: usize, s: State, pid: u32) {
        let slot = self.slot(k);
        slot[1].store(pid as u64, Relaxed);
        slot[0].store(s as u64, Relaxed);
    }

    /// The parent records how process `k` ended, and whether it was asked to.
    pub fn ended(&self, k: usize, how: ChildExit, asked: bool) {
        let code = match how {
            ChildExit::Code(c) => (1u64 << 32) | c as u32 as u64,
            ChildExit::Signal(s) => (2u64 << 32) | s as u32 as u64,
        };
        let slot = self.slot(k);
        slot[2].store(code, Relaxed);
        let s = if asked { State::Stopped } else { State::Died };
        slot[0].store(s as u64, Relaxed);
    }

    /// Writes this process's counters to its slot.
    pub fn publish(&self, v: &WorkerView) {
        let Some(k) = self.me else { return };
        let slot = self.slot(k);
        v.to_cells(&slot[HEAD..STATUS]);
        for (c, x) in slot[STATUS..CALLS].iter().zip(v.status) {
            c.store(x, Relaxed);
        }
        let s = &v.syscalls;
        for i in 0..sys::NSYSCALLS {
            slot[CALLS + i].store(s.calls[i], Relaxed);
            slot[ERRORS + i].store(s.errors[i], Relaxed);
            slot[WOULD_BLOCK + i].store(s.would_block[i], Relaxed);
            if self.profile {
                slot[NANOS + i].store(s.nanos[i], Relaxed);
            }
        }
    }

    /// Every process's counters: its slot, or, for this process, `own` (read live).
    pub fn views(&self, own: Option<WorkerView>) -> Vec<WorkerView> {
        (0..self.n)
            .map(|k| {
                let slot = self.slot(k);
                let pid = Some(slot[1].load(Relaxed) as u32).filter(|&p| p > 0);
                let mut v = match (self.me == Some(k), &own) {
                    (true, Some(w)) => w.clone(),
                    _ => {
                        let mut v = WorkerView::from_cells(&slot[HEAD..STATUS]);
                        for (i, c) in slot[STATUS..CALLS].iter().enumerate() {
                            v.status[i] = c.load(Relaxed);
                        }
                        for i in 0..sys::NSYSCALLS {
                            v.syscalls.calls[i] = slot[CALLS + i].load(Relaxed);
                            v.syscalls.errors[i] = slot[ERRORS + i].load(Relaxed);
                            v.syscalls.would_block[i] = slot[WOULD_BLOCK + i].load(Relaxed);
                            v.syscalls.nanos[i] = slot[NANOS + i].load(Relaxed);
                        }
                        v
                    }
                };
                v.worker = k;
                v.pid = pid;
                v
            })
            .collect()
    }

    pub fn process_counts(&self) -> ProcessCounts {
        let mut c = ProcessCounts {
            forked: self.n,
            ..ProcessCounts::default()
        };
        for k in 0..self.n {
            let slot = self.slot(k);
            match slot[0].load(Relaxed) {
                s if s == State::Serving as u64 => c.serving += 1,
                s if s == State::Died as u64 => {
                    let code = slot[2].load(Relaxed);
                    let v = code as u32 as i32;
                    let how = match code >> 32 {
                        2 => ChildExit::Signal(v),
                        _ => ChildExit::Code(v),
                    };
                    c.died.push(DeadWorker {
                        worker: k,
                        pid: slot[1].load(Relaxed) as u32,
                        how: how.to_string(),
                    });
                }
                _ => {}
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_slot_reads_back_and_sums() {
        let peers = Peers::new(2, false).unwrap();
        let mut w = WorkerView {
            accepted: 1,
            requests: 5,
            accept_empty: 3,
            ..WorkerView::default()
        };
        w.status[2] = 1;
        w.syscalls.calls[0] = 9;
        let child = peers.for_worker(1);
        child.set_state(1, State::Serving, 4242);
        child.publish(&w);
        // Another process (here the parent's view) reads slot 1 from memory.
        let views = peers.views(None);
        assert_eq!(views[1].syscalls.calls[0], 9);
        assert_eq!(views.len(), 2);
        let v = &views[1];
        assert_eq!((v.worker, v.pid), (1, Some(4242)));
        assert_eq!((v.accepted, v.requests, v.accept_empty), (1, 5, 3));
        assert_eq!(v.status.iter().sum::<u64>(), 1);
        assert_eq!(views[0].pid, None);
        peers.ended(0, ChildExit::Signal(9), false);
        peers.set_state(0, State::Died, 17);
        let c = peers.process_counts();
        assert_eq!((c.forked, c.serving), (2, 1));
        assert_eq!(c.died[0].how, "signal 9");
    }
}
