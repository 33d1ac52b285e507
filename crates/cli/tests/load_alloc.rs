//! The generator's hot path allocates nothing per connection or per request once a run has
//! reached its concurrency: counted with a counting global allocator, against the real
//! `evlab serve` in its own process (so only the generator's allocations are counted).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use evlab_load::gen::{self, Live, LoadConfig};
use evlab_load::workload::{Fixed, Workload};

mod common;
use common::serve;

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

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

#[global_allocator]
static A: Counting = Counting;

#[test]
fn no_allocation_per_connection_or_request() {
    let s = serve("alloc", &[], |_| {});
    let run = |conns: u64, calls: usize| {
        let cfg = LoadConfig::new(s.addr, 4000.0, conns);
        let factory = move |_| Box::new(Fixed::new("/one", calls)) as Box<dyn Workload>;
        let stop = AtomicBool::new(false);
        let before = ALLOCS.load(Relaxed);
        let (st, _) = gen::run(&cfg, &factory, &stop, &Live::default()).unwrap();
        let n = ALLOCS.load(Relaxed) - before;
        assert_eq!(
            (st.replies, st.errors.total()),
            (conns * calls as u64, 0),
            "{:?}",
            st.errors
        );
        n
    };
    let small = run(200, 2);
    let large = run(4000, 2);
    // 3,800 more connections and 7,600 more requests: one allocation per connection would add
    // 3,800. What may grow is amortised (the timer queues, the connection table, the samples),
    // a few dozen at most.
    println!("{small} allocations for 200 connections, {large} for 4,000");
    assert!(
        large.saturating_sub(small) < 200,
        "{small} allocations for 200 connections, {large} for 4,000"
    );
}
