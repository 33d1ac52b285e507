//! evlab-load: an httperf-class open-loop load generator, the idle-connection holder, and the
//! paper's workloads.
//!
//! - [`gen`]: the open-loop generator (schedule, connections, timeouts, errors by cause, the
//!   pool of 127.0.0.0/8 source addresses that keeps TIME_WAIT from exhausting ports).
//! - [`reply`]: replies read from a stream of reads with the http crate's response framing.
//! - [`summary`]: httperf's report (same line labels), JSON and per-sample CSV.
//! - [`workload`]: what each connection asks for (single URI, URI list, wsesslog, SPECweb99-like).
//! - [`fileset`]: the SPECweb99 file set.
//! - [`idle`]: the idle-connection holder (httperf's idleconn without its 1,024-descriptor limit).
//! - [`rng`]: a small, fast, seedable generator and the distributions the workloads need.
//! - [`StopSignal`]: what tells the idle holder and a watched run ([`gen::run_watched`]) to stop.

#![deny(clippy::too_many_lines)]

pub mod fileset;
pub mod gen;
pub mod idle;
pub mod reply;
pub mod rng;
pub mod summary;
pub mod workload;

use std::sync::atomic::{AtomicBool, Ordering};

/// Something that says when to stop: an [`AtomicBool`] (tests, the lab) or a function such as
/// `evlab_runtime::signals::signalled` (the CLI). Checked at least every 100 ms.
pub trait StopSignal {
    fn should_stop(&self) -> bool;
}

impl StopSignal for AtomicBool {
    fn should_stop(&self) -> bool {
        self.load(Ordering::Relaxed)
    }
}

impl<F: Fn() -> bool> StopSignal for F {
    fn should_stop(&self) -> bool {
        self()
    }
}
