//! A global allocator that counts, for the tests that show a hot path allocates nothing.
//!
//! A test binary installs it with
//! `#[global_allocator] static A: evlab_poll::alloc_count::Counting = evlab_poll::alloc_count::Counting;`
//! and reads [`allocations`] before and after the work it measures. Every allocation and
//! reallocation of the whole process counts (frees do not), from every thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The system allocator, counting allocations and reallocations.
pub struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

/// Allocations and reallocations made so far through [`Counting`] (0 if it is not installed).
pub fn allocations() -> u64 {
    ALLOCS.load(Relaxed)
}

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(p, l, n) }
    }
}
