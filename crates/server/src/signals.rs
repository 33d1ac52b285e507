//! SIGINT/SIGTERM → graceful shutdown.
//!
//! A signal handler may only do async-signal-safe things: it sets a flag and writes to each
//! worker's eventfd, which every worker has registered in its own event mechanism. The worker
//! then stops accepting and finishes the responses in flight.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering::SeqCst};

// TEMPORARY: the stats document's types live in `stats.rs`; they belong beside `Shared` as
// `pub use stats::{ServerStats, …}` in lib.rs, which is being rewritten as this is written. This
// is the one public module through which `evlab run` can name them meanwhile. Move the line
// to lib.rs (and drop it here) when that rewrite lands.
#[doc(hidden)]
pub use crate::stats::{
    ConnectionCounts, EventCounts, ServerStats, StatusCounts, SyscallCount, WorkerCounts,
};

const MAX_WAKERS: usize = 1024;

static WAKERS: [AtomicI32; MAX_WAKERS] = [const { AtomicI32::new(-1) }; MAX_WAKERS];
static NWAKERS: AtomicUsize = AtomicUsize::new(0);
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    SIGNALLED.store(true, SeqCst);
    let n = NWAKERS.load(SeqCst).min(MAX_WAKERS);
    let one = 1u64.to_ne_bytes();
    for w in WAKERS.iter().take(n) {
        let fd = w.load(SeqCst);
        if fd >= 0 {
            // SAFETY: write(2) is async-signal-safe; `one` is 8 valid bytes.
            unsafe { libc::write(fd, one.as_ptr() as *const libc::c_void, 8) };
        }
    }
}

/// Whether SIGINT or SIGTERM arrived.
pub fn signalled() -> bool {
    SIGNALLED.load(SeqCst)
}

/// Routes SIGINT and SIGTERM to these wakers (each worker's eventfd).
pub fn install(wakers: &[RawFd]) -> std::io::Result<()> {
    let n = wakers.len().min(MAX_WAKERS);
    for (slot, &fd) in WAKERS.iter().zip(wakers.iter().take(n)) {
        slot.store(fd, SeqCst);
    }
    NWAKERS.store(n, SeqCst);
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is valid; we set the handler and an empty mask.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        // SAFETY: `sa.sa_mask` is a valid sigset to initialise.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: installing a handler that only calls async-signal-safe functions.
        if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// SIGPIPE would kill the process when a peer resets mid-writev; errors come back as EPIPE instead.
pub fn ignore_sigpipe() {
    // SAFETY: setting SIGPIPE's disposition to SIG_IGN is always valid.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}
