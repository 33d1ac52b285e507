//! Progress on stderr: a redrawn bar with the current point, its rate and an ETA on a terminal;
//! one plain line per event otherwise (logs, CI, tests). With `--quiet`, only one line per
//! finished point (and warnings): no bar, no ETA, no notes.

use std::io::Write;
use std::time::Instant;

use crate::run::estimate::{hms, Forecast};
use evlab_reason::model::results::{PointResult, Status};

pub struct Progress {
    tty: bool,
    quiet: bool,
    started: Instant,
}

fn is_tty() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
}

impl Progress {
    pub fn new(quiet: bool) -> Progress {
        Progress {
            tty: is_tty(),
            quiet,
            started: Instant::now(),
        }
    }

    fn line(&self, msg: &str) {
        let mut e = std::io::stderr().lock();
        if self.tty && !self.quiet {
            // Over the bar.
            let _ = write!(e, "\r\x1b[2K");
        }
        let _ = writeln!(e, "{msg}");
    }

    /// A note on what the run does (hidden by `--quiet`).
    pub fn note(&self, msg: &str) {
        if !self.quiet {
            self.line(msg);
        }
    }

    /// Something the user should know even with `--quiet`.
    pub fn warn(&self, msg: &str) {
        self.line(msg);
    }

    /// The ETA in words: exact counts of points give "ETA 4m20s"; a rate search, whose count is
    /// expected, says so.
    fn eta(f: &Forecast) -> String {
        let t = hms(f.remaining_s());
        if f.exact() {
            format!("ETA {t}")
        } else {
            format!("ETA ~{t}, an estimate: each rate search stops at its knee")
        }
    }

    pub fn start_point(&self, f: &Forecast, n: usize, what: &str) {
        if self.quiet {
            return;
        }
        let mut e = std::io::stderr().lock();
        if self.tty {
            let width = 24;
            let total = f.total().max(1.0);
            let filled = ((n.saturating_sub(1)) as f64 * width as f64 / total)
                .floor()
                .clamp(0.0, width as f64) as usize;
            let _ = write!(
                e,
                "\r\x1b[2K[{}{}] {} {what}  elapsed {} {}",
                "#".repeat(filled),
                ".".repeat(width - filled),
                f.position(n),
                hms(self.started.elapsed().as_secs_f64()),
                Progress::eta(f)
            );
        } else {
            let _ = writeln!(
                e,
                "evlab run: point {}: {what} ({})",
                f.position(n),
                Progress::eta(f)
            );
        }
        let _ = e.flush();
    }

    /// One line per finished point, shown even with `--quiet`.
    pub fn finish_point(&self, f: &Forecast, n: usize, p: &PointResult) {
        let what = match p.status {
            Status::Ok => format!(
                "{} replies/s, p99 {} ms, {} errors, server CPU {}{}",
                p.reply_rate().map_or("?".into(), |r| format!("{r:.0}")),
                p.p99_ms().map_or("?".into(), |r| format!("{r:.2}")),
                match (p.errors(), p.error_share()) {
                    (Some(e), Some(s)) if e > 0 => format!("{e} ({:.1}%)", s * 100.0),
                    (Some(e), _) => e.to_string(),
                    _ => "?".into(),
                },
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
        self.line(&format!(
            "  {} {} idle={} rate={}: {what}",
            f.position(n),
            p.label(),
            p.idle,
            p.rate
        ));
    }
}
