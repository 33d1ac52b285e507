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
//! that they returned the first descriptor and n, and repeats; the figures are medians.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Instant;

use evlab_poll::sys;

use crate::plot::{Plot, Xy};
use crate::stats::median;
use crate::table::{num, Table};
use crate::{render_findings, this_machine, Finding, MicroError};

/// The report's data, defined in `evlab-wire` (the lab reads it from there).
pub use evlab_wire::micro::fdalloc::{Op, Point, Report};

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
    /// Measurements per n; the figures are their medians.
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
    let room = machine.nofile.saturating_sub(FD_SLOP) as usize;
    let total = cfg.total.unwrap_or(100_000.min(room));
    if total < 2 {
        return Err(MicroError::Config(format!(
            "{total} descriptors: at least 2 are needed"
        )));
    }
    if total > room {
        return Err(MicroError::Config(format!(
            "{total} descriptors do not fit under the limit of {} (less {FD_SLOP} kept free); \
             raise the hard RLIMIT_NOFILE",
            machine.nofile
        )));
    }

    let dev = File::open("/dev").map_err(MicroError::io("opening /dev"))?;
    let open = || -> std::io::Result<OwnedFd> {
        sys::openat(dev.as_fd(), c"null", libc::O_RDONLY | libc::O_CLOEXEC)
    };
    let model = open().map_err(MicroError::io("opening /dev/null"))?;
    let timed = |op: Op| -> std::io::Result<OwnedFd> {
        match op {
            Op::Open => open(),
            Op::Dup => model.try_clone(),
        }
    };

    // Fill: each new descriptor is the lowest free one, so what is held ends up contiguous
    // from `first` upward, except for numbers the process held before.
    let mut held = Held(Vec::new());
    let mut numbers = Vec::with_capacity(total);
    for _ in 0..total {
        let fd = model
            .try_clone()
            .map_err(MicroError::io(format!("holding {total} descriptors")))?;
        numbers.push(fd.as_raw_fd() as u64);
        held.put(fd);
    }
    let first = numbers[0];
    let highest = *numbers.iter().max().unwrap_or(&first);
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

    let mut points = Vec::with_capacity(at.len());
    for &n in &at {
        let (mut t1s, mut t2s, mut both) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..cfg.repeat {
            drop(held.take(first));
            drop(held.take(n));
            let t0 = Instant::now();
            let a = timed(cfg.op);
            let t1 = Instant::now();
            let b = timed(cfg.op);
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
            let ns = |d: std::time::Duration| d.as_nanos() as f64;
            t1s.push(ns(t1 - t0));
            t2s.push(ns(t2 - t1));
            both.push(ns(t2 - t0));
        }
        points.push(Point {
            n,
            first_fd: first,
            second_fd: n,
            first_open_ns: median(&t1s).unwrap_or(0.0),
            second_open_ns: median(&t2s).unwrap_or(0.0),
            both_ns: median(&both).unwrap_or(0.0),
        });
    }
    drop(held);
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
    };
    r.findings = findings(&r);
    Ok(r)
}

/// The LSP's finding: with a two-level bitmap the search for n does not grow with n (with one
/// bitmap it grew linearly).
pub fn findings(r: &Report) -> Vec<Finding> {
    let lo = r.points.iter().min_by_key(|p| p.n);
    let hi = r.points.iter().max_by_key(|p| p.n);
    let pair = lo
        .zip(hi)
        .filter(|(a, b)| b.n > a.n && a.second_open_ns > 0.0);
    vec![Finding::new(
        "the second open does not grow with n (a two-level bitmap, as the seed proposed)",
        pair.map(|(a, b)| b.second_open_ns <= 1.5 * a.second_open_ns),
        match pair {
            Some((a, b)) => format!(
                "{} ns at n = {}, {} ns at n = {} (x{:.2})",
                num(a.second_open_ns, 0),
                a.n,
                num(b.second_open_ns, 0),
                b.n,
                b.second_open_ns / a.second_open_ns
            ),
            None => "fewer than two values of n were measured".into(),
        },
    )]
}

/// The LSP's figure: the time of the two opens after closing the first descriptor and n,
/// against n (medians): the first open, the second (the one that must find n), and both.
pub fn plots(report: &Report) -> Vec<Plot> {
    let mut p = Plot::new(
        "fdalloc",
        format!(
            "descriptor allocation: {} descriptors held, {} timed",
            num(report.total as f64, 0),
            report.op.name()
        ),
        "n, the descriptor closed beside the first",
        "time of the call (ns, median)",
    );
    let line = |f: fn(&Point) -> f64| {
        report
            .points
            .iter()
            .map(move |q| Xy::new(q.n as f64, f(q)))
            .collect::<Vec<_>>()
    };
    let op = report.op.name();
    p.line(format!("1st {op}"), line(|q| q.first_open_ns));
    p.line(format!("2nd {op} (finds n)"), line(|q| q.second_open_ns));
    p.line("both", line(|q| q.both_ns));
    vec![p]
}

/// The seed's figure as a table: the time of the two opens against n.
pub fn render(r: &Report) -> String {
    let mut out = format!(
        "fdalloc: {} descriptors held ({}..={}), close {} and n, time two {}s; median of {}\n{}\n\n",
        r.total,
        r.first,
        r.highest,
        r.first,
        r.op.name(),
        r.repeat,
        r.machine.line()
    );
    let mut t = Table::new([
        "n",
        "1st returns",
        "2nd returns",
        "1st ns",
        "2nd ns",
        "both ns",
    ]);
    for p in &r.points {
        t.row([
            p.n.to_string(),
            p.first_fd.to_string(),
            p.second_fd.to_string(),
            num(p.first_open_ns, 0),
            num(p.second_open_ns, 0),
            num(p.both_ns, 0),
        ]);
    }
    out.push_str(&t.render());
    out.push_str(&render_findings(&r.findings));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_figure_has_both_opens_against_n() {
        let pt = |n: u64, a: f64, b: f64| Point {
            n,
            first_fd: 3,
            second_fd: n,
            first_open_ns: a,
            second_open_ns: b,
            both_ns: a + b,
        };
        let r = Report {
            benchmark: "fdalloc".into(),
            machine: this_machine(),
            op: Op::Dup,
            repeat: 11,
            total: 1000,
            first: 3,
            highest: 1002,
            points: vec![
                pt(500, 200.0, 250.0),
                pt(10, 210.0, 230.0),
                pt(1000, 190.0, 260.0),
            ],
            findings: vec![],
        };
        let plots = plots(&r);
        assert_eq!(plots.len(), 1);
        let p = &plots[0];
        assert_eq!(p.name, "fdalloc");
        assert!(!p.x_log && !p.y_log);
        assert!(p.y_label.contains("(ns"), "{}", p.y_label);
        let labels: Vec<&str> = p.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["1st dup", "2nd dup (finds n)", "both"]);
        for l in &p.lines {
            assert_eq!(l.xs(), [10.0, 500.0, 1000.0], "{}: in n order", l.label);
        }
        assert_eq!(p.lines[1].y_at(1000.0), Some(260.0));
        assert_eq!(p.lines[2].y_at(10.0), Some(440.0));
    }
}
