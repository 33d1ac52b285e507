//! Counters a worker keeps and any thread reads: the source of the stats documents
//! (`GET /.evlab/stats`) and of the summaries printed at exit.
//!
//! Each worker is the only writer of its own counters, so a counter is bumped with a relaxed
//! load and store, not a locked read-modify-write: counting must not perturb what it measures.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use evlab_poll::PollerStats;
use evlab_sys::Snapshot;
use evlab_wire::{StatusClasses, SyscallCount};

/// One counter, written by one thread (its worker), read by any.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }
    #[inline]
    pub fn set(&self, n: u64) {
        self.0.store(n, Relaxed);
    }
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Responses per status class, filed by [`StatusClasses::slot`] so that every producer puts a
/// code in the same class.
#[derive(Debug, Default)]
pub struct StatusCounters([Counter; StatusClasses::SLOTS]);

impl StatusCounters {
    #[inline]
    pub fn record(&self, code: u16) {
        self.0[StatusClasses::slot(code)].inc();
    }

    /// Each class's count, in [`StatusClasses::slot`] order.
    pub fn slots(&self) -> [u64; StatusClasses::SLOTS] {
        std::array::from_fn(|i| self.0[i].get())
    }

    /// The classes summed over several workers' counters.
    pub fn sum<'a>(all: impl Iterator<Item = &'a StatusCounters> + Clone) -> StatusClasses {
        StatusClasses::from_slots(std::array::from_fn(|i| {
            all.clone().map(|s| s.0[i].get()).sum()
        }))
    }
}

/// A copy of the mechanism's own counters ([`PollerStats`]), refreshed every turn of the loop.
#[derive(Debug, Default)]
pub struct PollerCounters {
    pub waits: Counter,
    pub events: Counter,
    pub discarded: Counter,
    pub interest_changes: Counter,
    pub interest_changes_free: Counter,
    pub batches: Counter,
    pub waits_from_memory: Counter,
    pub waits_from_kernel: Counter,
    pub overflows: Counter,
}

impl PollerCounters {
    pub fn set(&self, p: &PollerStats) {
        self.waits.set(p.waits);
        self.events.set(p.events);
        self.discarded.set(p.discarded);
        self.interest_changes.set(p.interest_changes);
        self.interest_changes_free.set(p.interest_changes_free);
        self.batches.set(p.batches);
        self.waits_from_memory.set(p.waits_from_memory);
        self.waits_from_kernel.set(p.waits_from_kernel);
        self.overflows.set(p.overflows);
    }
}

/// The connection counters every server-like loop keeps.
#[derive(Debug, Default)]
pub struct ConnCounters {
    pub accepted: Counter,
    pub closed: Counter,
    pub active: Counter,
    pub max_active: Counter,
    pub accept_errors: Counter,
    pub io_errors: Counter,
}

impl ConnCounters {
    /// A connection was taken; `active` now open.
    #[inline]
    pub fn opened(&self, active: usize) {
        self.accepted.inc();
        self.active.set(active as u64);
        if active as u64 > self.max_active.get() {
            self.max_active.set(active as u64);
        }
    }

    /// A connection was closed; `active` still open.
    #[inline]
    pub fn closed(&self, active: usize) {
        self.closed.inc();
        self.active.set(active as u64);
    }
}

/// The syscall table of a stats document: calls, errors and calls that would have blocked per
/// syscall, and with `profile` the time spent and its share.
pub fn syscall_rows(sys: &Snapshot, profile: bool) -> BTreeMap<String, SyscallCount> {
    let total_ns = sys.total_nanos();
    let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
    sys.rows()
        .into_iter()
        .map(|r| {
            let row = SyscallCount {
                calls: r.calls,
                errors: r.errors,
                would_block: r.would_block,
                ns: profile.then_some(r.nanos),
                share: profile.then(|| ratio(r.nanos, total_ns)),
            };
            (r.name.to_string(), row)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_are_summed_by_class_over_workers() {
        let (a, b) = (StatusCounters::default(), StatusCounters::default());
        for code in [200, 204, 404, 502, 99] {
            a.record(code);
        }
        b.record(200);
        b.record(304);
        let s = StatusCounters::sum([&a, &b].into_iter());
        assert_eq!((s.s2xx, s.s3xx, s.s4xx, s.s5xx, s.other), (3, 1, 1, 1, 1));
        assert_eq!(s.total(), 7);
    }

    #[test]
    fn max_active_follows_the_peak() {
        let c = ConnCounters::default();
        c.opened(1);
        c.opened(2);
        c.closed(1);
        c.opened(2);
        assert_eq!(
            (c.accepted.get(), c.closed.get(), c.active.get()),
            (3, 1, 2)
        );
        assert_eq!(c.max_active.get(), 2);
    }
}
