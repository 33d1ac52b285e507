//! Workloads: what each connection (an httperf "session") asks for.
//!
//! The engine asks a [`Workload`] for one session per connection it starts; a session is the
//! ordered list of calls made on that one persistent connection. Implementations (single URI,
//! URI list, httperf `--wsesslog` files, the SPECweb99-like generator) live in this module's
//! children; the engine knows only this trait.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// One request of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// Request target, e.g. `/one` or `/dir00001/class1_3`.
    pub uri: Arc<str>,
    /// Think time before this call is sent (after the previous reply completed); zero for none.
    pub think: Duration,
}

/// A source of sessions. `Send` so that each engine thread can own one (made by a factory).
pub trait Workload: Send {
    /// Fills `out` (already cleared by the caller, capacity reused: no allocation per session in
    /// the steady state) with the next session's calls. Never leaves `out` empty.
    fn next_session(&mut self, out: &mut Vec<Call>);
    /// One line for reports: what this workload is.
    fn describe(&self) -> String;
}

/// The simplest workload: every session is `calls` requests for one URI (the one-byte workload
/// is `Fixed::new("/one", 1)`).
#[derive(Clone, Debug)]
pub struct Fixed {
    call: Call,
    calls: usize,
}

impl Fixed {
    pub fn new(uri: &str, calls: usize) -> Fixed {
        Fixed {
            call: Call {
                uri: Arc::from(uri),
                think: Duration::ZERO,
            },
            calls: calls.max(1),
        }
    }
}

impl Workload for Fixed {
    fn next_session(&mut self, out: &mut Vec<Call>) {
        out.extend(std::iter::repeat_n(self.call.clone(), self.calls));
    }
    fn describe(&self) -> String {
        format!("{} x {}", self.call.uri, self.calls)
    }
}

/// Why a workload could not be built. Every variant names the file (and line) at fault, so a
/// bad `--wsesslog` or `--uri-list` points the user at what to fix.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    // The io error is part of the message, not a `source`, so that `{:#}` chains (anyhow) do
    // not print it twice.
    #[error("cannot read {}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}:{line}: {msg}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    #[error("{}: {msg}", path.display())]
    Invalid { path: PathBuf, msg: String },
    #[error("{0}")]
    Config(String),
}

pub mod sesslog;
pub mod specweb;
pub mod urilist;
