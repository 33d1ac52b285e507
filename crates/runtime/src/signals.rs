//! SIGINT/SIGTERM → graceful shutdown.
//!
//! A signal handler may only do async-signal-safe things: the one evlab-poll installs
//! (`sys::route_signals`) sets a flag and writes to each worker's waker pipe, which every worker has
//! registered in its own event mechanism. The worker then stops accepting and finishes the
//! responses in flight.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

use evlab_sys as sys;

static SIGNALLED: AtomicBool = AtomicBool::new(false);

/// Whether SIGINT or SIGTERM arrived.
pub fn signalled() -> bool {
    SIGNALLED.load(SeqCst)
}

/// Routes SIGINT and SIGTERM to these wakers (each worker's waker pipe), at most 1,024 of them.
pub fn install(wakers: &[RawFd]) -> std::io::Result<()> {
    sys::route_signals(&[libc::SIGINT, libc::SIGTERM], &SIGNALLED, wakers)
}

/// Gives SIGINT and SIGTERM their default action again: after a first signal has started a
/// graceful stop, a second one ends the process at once.
pub fn restore_default() {
    // Cannot fail for SIGINT and SIGTERM.
    let _ = sys::default_signal(libc::SIGINT);
    let _ = sys::default_signal(libc::SIGTERM);
}

/// SIGPIPE would kill the process when a peer resets mid-writev; errors come back as EPIPE instead.
pub fn ignore_sigpipe() {
    // Cannot fail for SIGPIPE.
    let _ = sys::ignore_signal(libc::SIGPIPE);
}
