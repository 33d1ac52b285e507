//! Progress on stderr: a redrawn bar with the current point, its rate and an ETA on a terminal;
//! one plain line per event otherwise (logs, CI, tests).

use std::io::Write;
use std::time::Instant;

use crate::results::{PointResult, Status};

pub struct Progress {
    tty: bool,
    quiet: bool,
    started: Instant,
    done: usize,
    /// Seconds per finished point, for the ETA.
    spent: f64,
}

fn is_tty() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
}

fn hms(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

impl Progress {
    pub fn new(quiet: bool) -> Progress {
        Progress {
            tty: is_tty(),
            quiet,
            started: Instant::now(),
            done: 0,
            spent: 0.0,
        }
    }

    /// Remaining time: the mean of finished points (or `estimate_s` before any) × points left.
    fn eta(&self, total: usize, estimate_s: f64) -> f64 {
        let per = if self.done > 0 {
            self.spent / self.done as f64
        } else {
            estimate_s
        };
        per * total.saturating_sub(self.done) as f64
    }

    pub fn note(&self, msg: &str) {
        if self.quiet {
            return;
        }
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r\x1b[2K");
        }
        let _ = writeln!(e, "{msg}");
    }

    pub fn start_point(&self, n: usize, total: usize, what: &str, estimate_s: f64) {
        if self.quiet {
            return;
        }
        let eta = hms(self.eta(total, estimate_s));
        let mut e = std::io::stderr().lock();
        if self.tty {
            let width = 24;
            let filled = (self.done * width).checked_div(total).unwrap_or(0);
            let _ = write!(
                e,
                "\r\x1b[2K[{}{}] {n}/{total} {what}  elapsed {} ETA {eta}",
                "#".repeat(filled),
                ".".repeat(width - filled),
                hms(self.started.elapsed().as_secs_f64())
            );
        } else {
            let _ = writeln!(e, "evlab run: point {n}/{total}: {what} (ETA {eta})");
        }
        let _ = e.flush();
    }

    pub fn finish_point(&mut self, n: usize, total: usize, p: &PointResult) {
        self.done += 1;
        self.spent += p.wall_s;
        let what = match p.status {
            Status::Ok => format!(
                "{} replies/s, p99 {} ms, {} errors, server CPU {}{}",
                p.reply_rate().map_or("?".into(), |r| format!("{r:.0}")),
                p.p99_ms().map_or("?".into(), |r| format!("{r:.2}")),
                p.errors().map_or("?".into(), |r| r.to_string()),
                p.server_cpu_util
                    .map_or("?".into(), |u| format!("{:.0}%", u * 100.0)),
                if p.flags.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", p.flags.join("; "))
                }
            ),
            Status::Failed => format!("FAILED: {}", p.reason.as_deref().unwrap_or("?")),
            Status::Interrupted => "interrupted".into(),
        };
        self.note(&format!(
            "  {n}/{total} {} idle={} rate={}: {what}",
            p.series, p.idle, p.rate
        ));
    }
}
