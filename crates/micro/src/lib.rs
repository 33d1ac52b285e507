//! evlab-micro: the seeds' micro-benchmarks, as library code behind thin `evlab` subcommands.
//!
//! - [`pipetest`]: Ben LaHaise's pipetest from the LSE epoll page — tokens passed between
//!   pipes, the passes per second against the number of pipes, for every readiness mechanism
//!   of the registry.
//! - [`herd`]: the Linux Scalability Project's thundering herd in `accept`, for blocking accept,
//!   poll, epoll on a shared listener, EPOLLEXCLUSIVE, SO_REUSEPORT and io_uring accept.
//! - [`fdalloc`]: the LSP's descriptor-allocation micro-benchmark (close the first and the n-th
//!   descriptor, time the next two opens).
//! - [`malloc`]: the LSP's malloc-test, balanced `malloc`/`free` across threads and processes.
//!
//! Each benchmark returns a serde report (the `--json` of its subcommand; its data types are
//! defined in `evlab-wire`, `evlab_wire::micro`, and re-exported here). What is read from the
//! report alone — the seed's findings judged on it (`findings`), its text table (`render`) and
//! the seed's figure(s) as `Plot`s (`plots`) — is `evlab-reason`'s (`analysis::micro`,
//! `render::micro`), where the lab reads the same reports, and is re-exported by each module
//! here. No benchmark asserts anything about speed; the invariants that do not depend on it
//! (pass counts, accept counts, descriptor numbers) are checked by the tests.
//!
//! Process-level calls go through the safe wrappers of `evlab-sys` (getrusage, limits, `uname`,
//! and the worker processes: fork, wait, blocking pipes), or, for those only a benchmark makes
//! (a connect from a chosen source, one io_uring accept, the page cache's calls), through
//! [`os`], this crate's only `unsafe`.

#![deny(clippy::too_many_lines)]

use std::io;

use serde::Serialize;

pub mod fdalloc;
pub mod herd;
pub mod malloc;
pub mod os;
pub mod pipetest;
pub mod readahead;

/// The data of the reports, defined in `evlab-wire` (the lab reads them from there).
pub use evlab_wire::micro::{Finding, Machine, Verdict};

/// What a benchmark could not do.
#[derive(Debug, thiserror::Error)]
pub enum MicroError {
    /// A configuration that cannot run; the message says which value and why.
    #[error("{0}")]
    Config(String),
    /// A system call failed; `what` says what was being done. The cause is in the message and
    /// not also a `source()`, which a `{:#}` chain would print a second time.
    #[error("{what}: {cause}")]
    Io { what: String, cause: io::Error },
}

impl MicroError {
    pub fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> MicroError {
        let what = what.into();
        move |cause| MicroError::Io { what, cause }
    }
}

/// Describes this machine (for a report's `machine`); raises the soft descriptor limit to the hard one first.
pub fn this_machine() -> Machine {
    let _ = evlab_sys::raise_fd_limit();
    Machine {
        kernel: evlab_sys::uname().map(|u| u.release).unwrap_or_default(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        glibc: os::glibc_version(),
        nofile: evlab_sys::nofile_limit().map(|(soft, _)| soft).unwrap_or(0),
    }
}

/// Parses a comma-separated list of counts (`10,100,1000`); `_` may group digits.
pub fn parse_counts(s: &str) -> Result<Vec<usize>, String> {
    let v: Result<Vec<usize>, String> = s
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| match p.replace('_', "").parse::<usize>() {
            Ok(0) => Err(format!("'{p}': each count must be at least 1")),
            Ok(n) => Ok(n),
            Err(_) => Err(format!("'{p}' is not a count")),
        })
        .collect();
    match v {
        Ok(v) if v.is_empty() => Err(format!("'{s}': no count given")),
        v => v,
    }
}

/// Parses `all` (every readiness mechanism) or a comma-separated list of mechanism names.
pub fn parse_mechanisms(s: &str) -> Result<Vec<evlab_poll::Mechanism>, String> {
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(pipetest::readiness_mechanisms());
    }
    let v: Result<Vec<_>, String> = s
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| evlab_poll::Mechanism::from_name(p).map_err(|e| e.to_string()))
        .collect();
    match v {
        Ok(v) if v.is_empty() => Err(format!("'{s}': no mechanism given")),
        v => v,
    }
}

/// Writes a report as pretty JSON to `path`, or to stdout when `path` is `-`.
pub fn write_json<T: Serialize>(report: &T, path: &std::path::Path) -> io::Result<()> {
    let text = serde_json::to_string_pretty(report).map_err(io::Error::other)? + "\n";
    if path.as_os_str() == "-" {
        use std::io::Write;
        let mut out = io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()
    } else {
        std::fs::write(path, text)
    }
}

/// A subcommand's output: the report as JSON to `json` if given (`-`: stdout), and the table
/// on stdout unless the JSON went there.
pub fn emit<T: Serialize>(
    report: &T,
    json: Option<&std::path::Path>,
    table: impl FnOnce() -> String,
) -> io::Result<()> {
    if let Some(p) = json {
        write_json(report, p).map_err(|e| {
            io::Error::new(e.kind(), format!("writing --json {}: {e}", p.display()))
        })?;
    }
    if json.is_none_or(|p| p.as_os_str() != "-") {
        use std::io::Write;
        let mut out = io::stdout().lock();
        out.write_all(table().as_bytes())?;
        out.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_errors_name_the_culprit() {
        assert_eq!(parse_counts("10, 100,1_000").unwrap(), vec![10, 100, 1000]);
        assert!(parse_counts("10,x").unwrap_err().contains("'x'"));
        assert!(parse_counts(" , ").is_err());
        assert_eq!(
            parse_mechanisms("all").unwrap(),
            pipetest::readiness_mechanisms()
        );
        assert_eq!(
            parse_mechanisms("poll,epoll").unwrap(),
            vec![evlab_poll::Mechanism::Poll, evlab_poll::Mechanism::EpollLt]
        );
        assert!(parse_mechanisms("kqueue").unwrap_err().contains("kqueue"));
    }

    /// Reports written before the rules (verdicts `holds`/`does-not-hold`, no rule, no
    /// slopes, no control, no per-round times) still read, in today's words.
    #[test]
    fn old_reports_still_read() {
        let f: Vec<Finding> = serde_json::from_str(
            r#"[{"claim": "a", "verdict": "holds", "evidence": "x"},
                {"claim": "b", "verdict": "does-not-hold", "evidence": "y"},
                {"claim": "c", "verdict": "not-measured", "evidence": "z"}]"#,
        )
        .unwrap();
        let v: Vec<Verdict> = f.iter().map(|f| f.verdict).collect();
        assert_eq!(
            v,
            [
                Verdict::Reproduced,
                Verdict::NotReproduced,
                Verdict::NotMeasured
            ]
        );
        assert!(f.iter().all(|f| f.rule.is_empty()));
        let text = serde_json::to_string(&f[0]).unwrap();
        assert!(
            !text.contains("rule") && text.contains("\"reproduced\""),
            "{text}"
        );

        let machine = r#"{"kernel": "6.18", "cpus": 2, "glibc": "2.36", "nofile": 20000}"#;
        let p: pipetest::Report = serde_json::from_str(&format!(
            r#"{{"benchmark": "pipetest", "machine": {machine}, "message_threads": 1,
                "max_generation": 300, "route": "stride17", "repeat": 1,
                "mechanisms": ["poll"], "pipes": [10], "points": []}}"#
        ))
        .unwrap();
        assert!(p.slopes.is_empty() && p.findings.is_empty());
        let d: fdalloc::Report = serde_json::from_str(&format!(
            r#"{{"benchmark": "fdalloc", "machine": {machine}, "op": "open", "repeat": 11,
                "total": 300, "first": 3, "highest": 302, "findings": [],
                "points": [{{"n": 100, "first_fd": 3, "second_fd": 100, "first_open_ns": 1.0,
                             "second_open_ns": 2.0, "both_ns": 3.0}}]}}"#
        ))
        .unwrap();
        assert!(d.negative_control.is_none() && d.points[0].second_runs_ns.is_empty());
        assert!(fdalloc::render(&d).contains("100"));
        assert!(pipetest::render(&p).contains("passes per second"));
    }
}
