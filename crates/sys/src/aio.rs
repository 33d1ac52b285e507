//! Linux AIO (the aio-poll mechanism): the `iocb` and `io_event` layouts of
//! `<linux/aio_abi.h>`, io_setup, io_destroy, io_submit, io_getevents and io_cancel.

use std::io;

use crate::counters::{counted, Syscall};

/// `IOCB_CMD_POLL` of `<linux/aio_abi.h>` (Linux 4.18).
pub const IOCB_CMD_POLL: u16 = 5;

/// `struct iocb` of `<linux/aio_abi.h>`, little-endian field order (`aio_key` before
/// `aio_rw_flags`). 64 bytes.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Iocb {
    /// Returned in `IoEvent::data`.
    pub aio_data: u64,
    /// Written by the kernel at submission (KIOCB_KEY, 0); io_cancel checks it.
    pub aio_key: u32,
    pub aio_rw_flags: i32,
    pub aio_lio_opcode: u16,
    pub aio_reqprio: i16,
    pub aio_fildes: u32,
    /// For IOCB_CMD_POLL: the poll events asked for.
    pub aio_buf: u64,
    pub aio_nbytes: u64,
    pub aio_offset: i64,
    pub aio_reserved2: u64,
    pub aio_flags: u32,
    pub aio_resfd: u32,
}

/// `struct io_event` of `<linux/aio_abi.h>`. 32 bytes.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct IoEvent {
    /// The iocb's `aio_data`.
    pub data: u64,
    /// The address of the iocb submitted.
    pub obj: u64,
    /// For IOCB_CMD_POLL: the poll bits that were ready, or `-errno`.
    pub res: i64,
    pub res2: i64,
}

#[cfg(target_endian = "little")]
const _: () = assert!(std::mem::size_of::<Iocb>() == 64 && std::mem::size_of::<IoEvent>() == 32);

/// An AIO context (`aio_context_t`).
pub type AioContext = u64;

/// io_setup(2): a context for up to `nr_events` requests in flight. The kernel counts
/// `nr_events` against the system-wide `fs.aio-max-nr` until io_destroy.
pub fn io_setup(nr_events: u32) -> io::Result<AioContext> {
    let mut ctx: AioContext = 0;
    // SAFETY: `ctx` is a valid, writable aio_context_t, zero as io_setup requires.
    counted(Syscall::IoSetup, || unsafe {
        libc::syscall(libc::SYS_io_setup, nr_events, &mut ctx as *mut AioContext)
    })?;
    Ok(ctx)
}

/// io_destroy(2): cancels every request of `ctx`, waits for them, and frees it.
pub fn io_destroy(ctx: AioContext) -> io::Result<()> {
    // SAFETY: io_destroy takes the context by value.
    counted(Syscall::IoDestroy, || unsafe {
        libc::syscall(libc::SYS_io_destroy, ctx)
    })
    .map(drop)
}

/// io_submit(2): submits `iocbs` in order; returns how many were taken (fewer when one fails:
/// its error is the call's only if it is the first).
///
/// # Safety
/// Each pointer must be valid for reads and writes of an [`Iocb`] for the duration of the call
/// (the kernel copies each and writes its `aio_key`), and, to be cancelled later with
/// [`io_cancel`], stay valid at the same address until its completion is reaped.
pub unsafe fn io_submit(ctx: AioContext, iocbs: &[*mut Iocb]) -> io::Result<usize> {
    // SAFETY: the caller guarantees the pointers; the array itself is valid for its length.
    counted(Syscall::IoSubmit, || unsafe {
        libc::syscall(
            libc::SYS_io_submit,
            ctx,
            iocbs.len() as libc::c_long,
            iocbs.as_ptr(),
        )
    })
    .map(|n| n as usize)
}

/// io_getevents(2): waits until at least `min_nr` completions are there (or `timeout` passes)
/// and takes up to `events.len()` of them.
pub fn io_getevents(
    ctx: AioContext,
    min_nr: usize,
    events: &mut [IoEvent],
    timeout: Option<std::time::Duration>,
) -> io::Result<usize> {
    let mut ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_mut()
        .map_or(std::ptr::null_mut(), |t| t as *mut libc::timespec);
    let max = events.len().min(i32::MAX as usize) as libc::c_long;
    // SAFETY: `events` is valid for writing `max` entries; `tsp` is null or a valid timespec.
    counted(Syscall::IoGetevents, || unsafe {
        libc::syscall(
            libc::SYS_io_getevents,
            ctx,
            min_nr.min(max as usize) as libc::c_long,
            max,
            events.as_mut_ptr(),
            tsp,
        )
    })
    .map(|n| n as usize)
}

/// io_cancel(2) of the request submitted from `iocb`. A poll being cancelled answers
/// EINPROGRESS and still posts a completion; a request already completed answers EINVAL.
///
/// # Safety
/// `iocb` must be valid for reads of an [`Iocb`] (the kernel reads its `aio_key`).
pub unsafe fn io_cancel(ctx: AioContext, iocb: *mut Iocb) -> io::Result<()> {
    let mut result = IoEvent::default();
    // SAFETY: the caller guarantees `iocb`; `result` is a valid, writable io_event.
    counted(Syscall::IoCancel, || unsafe {
        libc::syscall(libc::SYS_io_cancel, ctx, iocb, &mut result as *mut IoEvent)
    })
    .map(drop)
}
