//! evlab-sys: counted syscalls, and the safe wrappers of the process-level calls evlab makes.
//!
//! Every syscall the server and the load generator make goes through these wrappers. Each thread
//! owns a block of counters that only it writes (a relaxed load and store, no locked instruction on
//! the hot path); any thread may read every block through [`ThreadCounters`] handles or
//! [`snapshot_all`]. With profiling on ([`set_profiling`]) each call is also timed with the vDSO
//! clock, which is how evlab prints the paper's Table 1 (share of time per syscall) without gprof.
//!
//! It also has the uncounted, safe wrappers for process-level calls (limits, usage, signals,
//! `uname`, users, capabilities, fork-to-exec setup) that the other crates need, and the
//! counting allocator of the allocation tests ([`alloc_count`]). `unsafe` stays in this crate,
//! each block with its SAFETY line; the only other places that have any are the readiness
//! mechanisms of `evlab-poll`, the io_uring submissions of the completion engines and the
//! micro-benchmarks' own io_uring and page-cache helpers (`crates/micro/src/os.rs`).
//!
//! One module a subject, each re-exported here so that every wrapper is `evlab_sys::NAME`:
//! `counters` (the [`Syscall`] list and the per-thread counts), `net` (sockets), `io` (data on
//! descriptors), `pipe` (pipes, splice, tee), `epoll`, `poll` (poll and select), `signals`
//! (fcntl owners and signal bits, signal sets, sigtimedwait, tgkill), `aio` (Linux AIO),
//! `process` (limits, usage, users, `uname`, signal routing, fork-to-exec set-up), `prefork`
//! (worker processes), [`Mapping`], [`cgroup`] and [`alloc_count`].

#![deny(clippy::too_many_lines)]

pub mod alloc_count;
pub mod cgroup;

mod aio;
mod counters;
mod epoll;
mod io;
mod mapping;
mod net;
mod pipe;
mod poll;
mod prefork;
mod process;
mod signals;

pub use aio::*;
pub use counters::{
    count, count_io, is_would_block, profiling, set_profiling, snapshot_all, thread_counters,
    Snapshot, Syscall, SyscallRow, ThreadCounters, NSYSCALLS,
};
pub use epoll::*;
pub use io::*;
pub use mapping::{Advice, Mapping};
pub use net::*;
pub use pipe::*;
pub use poll::*;
pub use prefork::{
    fork_run, pipe_blocking, reap_any, threads_in_process, wait_child, ChildExit, SharedCells,
};
pub use process::*;
pub use signals::*;
