//! fdalloc: the Linux Scalability Project's descriptor-allocation micro-benchmark.
//!
//! The seed opened 100,000 descriptors, closed the first and the n-th, and timed the two
//! `open`s that followed. A new descriptor is the lowest free number, so the first open gets
//! the first descriptor back at once (the kernel remembers the lowest free slot), and the second
//! must search upward from there to find n. With one bitmap that search reads every word
//! between them, so its time grows with n; with the two-level bitmap Banga, Druschel and Mogul
//! proposed — one bit per full word — it skips 64 descriptors at a bit. Linux has had the second
//! level (`full_fds_bits`) since 4.4, so today's figure should be flat.
//!
//! evlab does the same: it fills the table with duplicates of one `/dev/null` descriptor up to
//! `total` (100,000 where the descriptor limit allows, else the limit less a margin), then for
//! each n closes the first descriptor it holds and the n-th, times each of the next two opens
//! (`openat` of `/dev/null`, or `dup` with `--op dup`, which leaves out the path walk), checks
//! that they returned the first descriptor and n, and repeats; the figures are medians. The
//! repeats are rounds: every n is measured once per round (interleaved), so a disturbance of
//! the machine falls on one round rather than on one n.
//!
//! The finding is decided on the exponent k of time ∝ n^k of the second open, fitted to each
//! round, with the 90% t interval of its mean over the rounds ([`K_LINEAR_HALF`]). Its
//! negative control ([`LinearScan`]) is a lowest-free allocator in user space that scans its
//! table from slot 0, as the seed's single bitmap did; it is measured in the same rounds, at
//! the same n, by the same clock calls, and judged by the same function, which must then
//! find it growing.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Instant;

use evlab_sys as sys;

use evlab_reason::analysis::sample::median;

use crate::{this_machine, MicroError};

/// The findings, figure and table, from the report alone (`evlab-reason`, which the lab reads
/// them with too); the control is judged by the same `flat`.
pub use evlab_reason::analysis::micro::fdalloc::{
    findings, flat, FLAT_CLAIM, FLAT_RULE, K_LINEAR_HALF, RULE_IDS,
};
pub use evlab_reason::render::micro::fdalloc::{plots, render};

/// The report's data, defined in `evlab-wire` (the lab reads it from there).
pub use evlab_wire::micro::fdalloc::{Control, Op, Point, Report};

/// Descriptors left free below the limit for everything else the process holds.
pub const FD_SLOP: u64 = 64;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Descriptors to hold; `None`: 100,000 or the limit less [`FD_SLOP`], whichever is lower.
    pub total: Option<usize>,
    /// The descriptors n to close; `None`: `points` spread evenly over the table.
    pub at: Option<Vec<u64>>,
    pub points: usize,
    /// Rounds: measurements per n, interleaved over the n; the figures are their medians.
    pub repeat: usize,
    pub op: Op,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            total: None,
            at: None,
            points: 20,
            repeat: 11,
            op: Op::Open,
        }
    }
}

/// The held descriptors, indexed by number.
struct Held(Vec<Option<OwnedFd>>);

impl Held {
    fn put(&mut self, fd: OwnedFd) {
        let n = fd.as_raw_fd() as usize;
        if self.0.len() <= n {
            self.0.resize_with(n + 1, || None);
        }
        self.0[n] = Some(fd);
    }
    fn take(&mut self, n: u64) -> Option<OwnedFd> {
        self.0.get_mut(n as usize).and_then(Option::take)
    }
}

/// Runs the benchmark.
pub fn run(cfg: &Config) -> Result<Report, MicroError> {
    if cfg.repeat == 0 {
        return Err(MicroError::Config("repeat must be at least 1".into()));
    }
    let machine = this_machine();
    let total = table_size(cfg, machine.nofile)?;

    let dev = File::open("/dev").map_err(MicroError::io("opening /dev"))?;
    let open = || -> std::io::Result<OwnedFd> {
        sys::openat(dev.as_fd(), c"null", libc::O_RDONLY | libc::O_CLOEXEC)
    };
    let model = open().map_err(MicroError::io("opening /dev/null"))?;
    let timed = || -> std::io::Result<OwnedFd> {
        match cfg.op {
            Op::Open => open(),
            Op::Dup => model.try_clone(),
        }
    };

    let (mut held, numbers) = fill(&model, total)?;
    let first = numbers[0];
    let highest = *numbers.iter().max().unwrap_or(&first);
    let at = descriptors_at(cfg, &numbers, &held, first, highest)?;

    let mut control = LinearScan::new(highest as usize + 1);
    let mut kernel = vec![Times::default(); at.len()];
    let mut user = vec![Times::default(); at.len()];
    for _ in 0..cfg.repeat {
        for (i, &n) in at.iter().enumerate() {
            kernel[i].push(time_kernel(&mut held, first, n, timed)?);
            // The control, the same way: free the two slots, time the two allocations.
            user[i].push(time_control(&mut control, first, n)?);
        }
    }
    drop(held);
    let points: Vec<Point> = at
        .iter()
        .zip(&kernel)
        .map(|(&n, t)| t.point(n, first))
        .collect();
    let control_points: Vec<Point> = at
        .iter()
        .zip(&user)
        .map(|(&n, t)| t.point(n, first))
        .collect();
    let mut r = Report {
        benchmark: "fdalloc".into(),
        machine,
        op: cfg.op,
        repeat: cfg.repeat,
        total,
        first,
        highest,
        points,
        findings: Vec::new(),
        negative_control: Some(Control {
            allocator: LinearScan::DESCRIPTION.into(),
            slots: control.slots(),
            finding: flat(
                &control_points,
                cfg.repeat,
                "allocation",
                FLAT_RULE,
                FLAT_CLAIM,
            ),
            points: control_points,
        }),
    };
    r.findings = findings(&r);
    Ok(r)
}

/// The descriptors to hold: `cfg.total`, or 100,000 or the limit `nofile` less [`FD_SLOP`],
/// whichever is lower; an error if they do not fit.
fn table_size(cfg: &Config, nofile: u64) -> Result<usize, MicroError> {
    let room = nofile.saturating_sub(FD_SLOP) as usize;
    let total = cfg.total.unwrap_or(100_000.min(room));
    if total < 2 {
        return Err(MicroError::Config(format!(
            "{total} descriptors: at least 2 are needed"
        )));
    }
    if total > room {
        return Err(MicroError::Config(format!(
            "{total} descriptors do not fit under the limit of {nofile} (less {FD_SLOP} kept \
             free); raise the hard RLIMIT_NOFILE"
        )));
    }
    Ok(total)
}

/// Fills the table with `total` duplicates of `model`: each new descriptor is the lowest free
/// one, so what is held ends up contiguous from the first upward, except for numbers the
/// process held before. The held descriptors, and their numbers in the order they came.
fn fill(model: &OwnedFd, total: usize) -> Result<(Held, Vec<u64>), MicroError> {
    let mut held = Held(Vec::new());
    let mut numbers = Vec::with_capacity(total);
    for _ in 0..total {
        let fd = model
            .try_clone()
            .map_err(MicroError::io(format!("holding {total} descriptors")))?;
        numbers.push(fd.as_raw_fd() as u64);
        held.put(fd);
    }
    Ok((held, numbers))
}

/// The descriptors n to close: `cfg.at`, or `cfg.points` spread evenly over those held; each
/// must be held, and not the first.
fn descriptors_at(
    cfg: &Config,
    numbers: &[u64],
    held: &Held,
    first: u64,
    highest: u64,
) -> Result<Vec<u64>, MicroError> {
    let total = numbers.len();
    let at: Vec<u64> = match &cfg.at {
        Some(at) => at.clone(),
        None => {
            let k = cfg.points.max(1).min(total - 1);
            (1..=k)
                .map(|i| numbers[(i * (total - 1)) / k])
                .collect::<Vec<_>>()
        }
    };
    for &n in &at {
        if n == first || held.0.get(n as usize).is_none_or(Option::is_none) {
            return Err(MicroError::Config(format!(
                "descriptor {n} is not one the benchmark holds after the first ({first}..={highest})"
            )));
        }
    }
    Ok(at)
}

/// Closes descriptors `first` and `n`, and times the next two calls of `timed`, which must
/// return them in that order: the clock readings before, between and after.
#[inline]
fn time_kernel(
    held: &mut Held,
    first: u64,
    n: u64,
    timed: impl Fn() -> std::io::Result<OwnedFd>,
) -> Result<[Instant; 3], MicroError> {
    drop(held.take(first));
    drop(held.take(n));
    let t0 = Instant::now();
    let a = timed();
    let t1 = Instant::now();
    let b = timed();
    let t2 = Instant::now();
    let (a, b) = (
        a.map_err(MicroError::io("the first open"))?,
        b.map_err(MicroError::io("the second open"))?,
    );
    let (fa, fb) = (a.as_raw_fd() as u64, b.as_raw_fd() as u64);
    held.put(a);
    held.put(b);
    if (fa, fb) != (first, n) {
        return Err(MicroError::Config(format!(
            "after closing {first} and {n} the opens returned {fa} and {fb}: another \
             thread is opening or closing descriptors"
        )));
    }
    Ok([t0, t1, t2])
}

/// [`time_kernel`] for the control: frees slots `first` and `n`, times the two allocations.
#[inline]
fn time_control(control: &mut LinearScan, first: u64, n: u64) -> Result<[Instant; 3], MicroError> {
    control.free(first as usize);
    control.free(n as usize);
    let t0 = Instant::now();
    let a = control.alloc();
    let t1 = Instant::now();
    let b = control.alloc();
    let t2 = Instant::now();
    if (a as u64, b as u64) != (first, n) {
        return Err(MicroError::Config(format!(
            "the linear-scan control returned slots {a} and {b}, not {first} and {n}"
        )));
    }
    Ok([t0, t1, t2])
}

/// One n's measurements: the two calls' times and both, in nanoseconds, round by round.
#[derive(Clone, Default)]
struct Times {
    first: Vec<f64>,
    second: Vec<f64>,
    both: Vec<f64>,
}

impl Times {
    fn push(&mut self, [t0, t1, t2]: [Instant; 3]) {
        let ns = |d: std::time::Duration| d.as_nanos() as f64;
        self.first.push(ns(t1 - t0));
        self.second.push(ns(t2 - t1));
        self.both.push(ns(t2 - t0));
    }

    fn point(&self, n: u64, first: u64) -> Point {
        Point {
            n,
            first_fd: first,
            second_fd: n,
            first_open_ns: median(&self.first).unwrap_or(0.0),
            second_open_ns: median(&self.second).unwrap_or(0.0),
            both_ns: median(&self.both).unwrap_or(0.0),
            second_runs_ns: self.second.clone(),
        }
    }
}

/// The negative control: the lowest free slot of a table found by scanning it from slot 0,
/// one `bool` per slot. It is what the seed's single bitmap did (the 2.2 kernel scanned a
/// bitmap word by word; a byte per slot makes the same linear search slower per slot, so that
/// its growth stands out of the clock's own cost even in a small table).
pub struct LinearScan {
    used: Vec<bool>,
}

impl LinearScan {
    pub const DESCRIPTION: &'static str =
        "lowest free slot by a linear scan from slot 0 of a Vec<bool> (user space)";

    /// A table of `slots`, all in use, like the kernel's after the fill.
    pub fn new(slots: usize) -> LinearScan {
        LinearScan {
            used: vec![true; slots],
        }
    }

    pub fn slots(&self) -> usize {
        self.used.len()
    }

    pub fn free(&mut self, slot: usize) {
        self.used[slot] = false;
    }

    /// The lowest free slot, now in use (the table grows by one when none is free).
    pub fn alloc(&mut self) -> usize {
        let used = std::hint::black_box(&mut self.used);
        match used.iter().position(|u| !u) {
            Some(i) => {
                used[i] = true;
                i
            }
            None => {
                used.push(true);
                used.len() - 1
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_linear_scan_finds_the_lowest_free_slot() {
        let mut t = LinearScan::new(10);
        t.free(7);
        t.free(2);
        assert_eq!((t.alloc(), t.alloc(), t.alloc()), (2, 7, 10));
        assert_eq!(t.slots(), 11);
    }
}
