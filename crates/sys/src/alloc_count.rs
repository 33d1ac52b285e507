//! A global allocator that counts, for the tests that show a hot path allocates nothing.
//!
//! A test binary installs it with
//! `#[global_allocator] static A: evlab_sys::alloc_count::Counting = evlab_sys::alloc_count::Counting;`
//! and reads [`allocations`] before and after the work it measures (every allocation and
//! reallocation of the whole process, from every thread; frees do not count), or wraps the work
//! in [`count`] (only the calling thread's, so tests running beside it do not disturb it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The system allocator, counting allocations and reallocations.
pub struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static THREAD: Cell<u64> = const { Cell::new(0) };
}

#[inline]
fn counted() {
    ALLOCS.fetch_add(1, Relaxed);
    // A const-initialised Cell: touching it never allocates; `try_with` is quiet while the
    // thread's locals are torn down.
    let _ = THREAD.try_with(|c| c.set(c.get() + 1));
}

/// Allocations and reallocations made so far through [`Counting`] (0 if it is not installed).
pub fn allocations() -> u64 {
    ALLOCS.load(Relaxed)
}

/// Allocations and reallocations made through [`Counting`] on this thread while `f` runs, and
/// `f`'s result (0 if it is not installed).
pub fn count<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = THREAD.with(Cell::get);
    let out = f();
    (THREAD.with(Cell::get) - before, out)
}

// SAFETY: every method forwards to the system allocator with the caller's arguments unchanged,
// so the GlobalAlloc contract holds exactly as it does for `System`; counting touches an atomic
// and a const-initialised thread-local Cell, neither of which allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        counted();
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        counted();
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from System through the methods above.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        counted();
        // SAFETY: `p` came from System; the other arguments are the caller's.
        unsafe { System.realloc(p, l, n) }
    }
}
