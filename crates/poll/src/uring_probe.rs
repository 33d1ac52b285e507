//! What the io_uring mechanisms share: probing once what this kernel's io_uring supports (and
//! saying clearly why when it does not), and creating rings with the setup syscall counted —
//! small rings for the readiness mechanisms (`epoll-ctlv`, `uring-poll`) and the server's
//! completion engine's ring (`uring`), whose support probe also lives here.

use std::io;
use std::sync::OnceLock;

use io_uring::{opcode, IoUring, Probe};

use crate::Support;
use evlab_sys::{self as sys, Syscall};

/// What this kernel's io_uring offers, probed once per process.
#[derive(Clone, Debug)]
pub struct UringSupport {
    /// Why no ring can be had at all (disabled by sysctl, refused by seccomp, too old).
    pub unavailable: Option<String>,
    pub epoll_ctl: bool,
    pub epoll_wait: bool,
    pub poll_add: bool,
    pub accept: bool,
    pub recv: bool,
    pub send: bool,
    pub send_zc: bool,
    pub provide_buffers: bool,
}

impl UringSupport {
    pub fn missing(&self, need: &[(&str, bool)]) -> Option<String> {
        if let Some(u) = &self.unavailable {
            return Some(u.clone());
        }
        let missing: Vec<&str> = need.iter().filter(|(_, ok)| !ok).map(|(n, _)| *n).collect();
        if missing.is_empty() {
            None
        } else {
            Some(format!(
                "this kernel's io_uring lacks {}",
                missing.join(", ")
            ))
        }
    }
}

/// Whether the server's completion engine (`uring`) can run: it needs multishot accept, recv
/// and poll.
pub fn engine_support() -> Support {
    let s = support();
    Support::unless(s.missing(&[
        ("multishot IORING_OP_ACCEPT", s.accept),
        ("IORING_OP_RECV", s.recv),
        ("IORING_OP_POLL_ADD", s.poll_add),
    ]))
}

/// Probes io_uring once and remembers the answer.
pub fn support() -> &'static UringSupport {
    static S: OnceLock<UringSupport> = OnceLock::new();
    S.get_or_init(probe)
}

fn probe() -> UringSupport {
    let none = |why: String| UringSupport {
        unavailable: Some(why),
        epoll_ctl: false,
        epoll_wait: false,
        poll_add: false,
        accept: false,
        recv: false,
        send: false,
        send_zc: false,
        provide_buffers: false,
    };
    let ring = match IoUring::new(8) {
        Ok(r) => r,
        Err(e) => {
            let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
                .map(|s| s.trim().to_string())
                .unwrap_or_default();
            let why = match e.raw_os_error() {
                Some(libc::ENOSYS) => {
                    "io_uring_setup is not implemented by this kernel (ENOSYS)".to_string()
                }
                Some(libc::EPERM) if disabled != "0" && !disabled.is_empty() => format!(
                    "io_uring is disabled by sysctl kernel.io_uring_disabled={disabled} (EPERM)"
                ),
                Some(libc::EPERM) => {
                    "io_uring_setup refused (EPERM): seccomp or a security policy forbids it"
                        .to_string()
                }
                _ => format!("io_uring_setup failed: {e}"),
            };
            return none(why);
        }
    };
    let mut p = Probe::new();
    if let Err(e) = ring.submitter().register_probe(&mut p) {
        return none(format!("io_uring probe failed: {e}"));
    }
    UringSupport {
        unavailable: None,
        epoll_ctl: p.is_supported(opcode::EpollCtl::CODE),
        epoll_wait: p.is_supported(opcode::EpollWait::CODE),
        poll_add: p.is_supported(opcode::PollAdd::CODE),
        accept: p.is_supported(opcode::AcceptMulti::CODE),
        recv: p.is_supported(opcode::RecvMulti::CODE),
        send: p.is_supported(opcode::Send::CODE),
        send_zc: p.is_supported(opcode::SendZc::CODE),
        provide_buffers: p.is_supported(opcode::ProvideBuffers::CODE),
    }
}

/// Creates a ring for one thread; the setup syscall is counted.
pub fn new_ring(entries: u32, cq_entries: u32, single_issuer: bool) -> io::Result<IoUring> {
    build_ring(entries, cq_entries, |b| {
        // No IPI to interrupt us for completions: task work runs at our next kernel entry, which
        // for a busy server is the next read or write. That is what lets uring-poll find its
        // readiness in memory.
        b.setup_coop_taskrun();
        b.setup_taskrun_flag();
        if single_issuer {
            b.setup_single_issuer();
        }
    })
}

/// Builds a ring with the flags `tune` sets, falling back to a plain ring on kernels that
/// refuse a flag they do not know (EINVAL).
fn build_ring(
    entries: u32,
    cq_entries: u32,
    tune: impl FnOnce(&mut io_uring::Builder),
) -> io::Result<IoUring> {
    sys::count_io(Syscall::IoUringSetup, || {
        let mut b = IoUring::builder();
        b.setup_cqsize(cq_entries);
        tune(&mut b);
        match b.build(entries) {
            Ok(r) => Ok(r),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let mut b = IoUring::builder();
                b.setup_cqsize(cq_entries);
                b.build(entries)
            }
            Err(e) => Err(e),
        }
    })
}

/// Creates the completion engine's ring: one per thread, submitted to only by that thread
/// (SINGLE_ISSUER), completions posted only when it asks for them (DEFER_TASKRUN), which is
/// where io_uring saves the most; falls back to a plain ring on kernels without them.
pub fn new_engine_ring(entries: u32, cq_entries: u32) -> io::Result<IoUring> {
    build_ring(entries, cq_entries, |b| {
        b.setup_single_issuer();
        b.setup_defer_taskrun();
        b.setup_submit_all();
    })
}
