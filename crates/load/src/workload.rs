//! Workloads: what each connection (an httperf "session") asks for.
//!
//! The engine asks a [`Workload`] for one session per connection it starts; a session is the
//! ordered list of calls made on that one persistent connection. Implementations (single URI,
//! URI list, httperf `--wsesslog` files, the SPECweb99-like generator) live in this module's
//! children; the engine knows only this trait.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use polymix::{Polymix, PolymixConfig};
use sesslog::SessLog;
use specweb::{SpecWeb, SpecWebConfig};
use urilist::UriList;

/// The request method of a call. Only methods without a request body: evlab load measures
/// servers of static content.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Method {
    #[default]
    Get,
    /// The reply has a head only, whatever its Content-Length says.
    Head,
}

impl Method {
    /// Parses a method name as httperf's `--method` and session files give it (any case).
    pub fn parse(name: &str) -> Result<Method, String> {
        if name.eq_ignore_ascii_case("GET") {
            Ok(Method::Get)
        } else if name.eq_ignore_ascii_case("HEAD") {
            Ok(Method::Head)
        } else {
            Err(format!(
                "method {name} is not supported: evlab load sends GET or HEAD (requests without a body)"
            ))
        }
    }

    /// The request line's first token, with its trailing space.
    pub fn token(self) -> &'static [u8] {
        match self {
            Method::Get => b"GET ",
            Method::Head => b"HEAD ",
        }
    }
}

/// One request of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// Request target, e.g. `/one` or `/dir00001/class1_3`.
    pub uri: Arc<str>,
    /// Think time before this call is sent (after the previous reply completed); zero for none.
    pub think: Duration,
    pub method: Method,
}

/// Makes each thread's workload (its argument is the thread's number).
pub type WorkloadFactory<'a> = dyn Fn(usize) -> Box<dyn Workload> + Sync + 'a;

/// A source of sessions. `Send` so that each engine thread can own one (made by a factory).
pub trait Workload: Send {
    /// Fills `out` (already cleared by the caller, capacity reused: no allocation per session in
    /// the steady state) with the next session's calls. Never leaves `out` empty.
    fn next_session(&mut self, out: &mut Vec<Call>);
    /// One line for reports: what this workload is.
    fn describe(&self) -> String;
}

/// The simplest workload: every session is `calls` requests for one URI (the one-byte workload
/// is `Fixed::new("/one", 1)`), GET unless [`Fixed::with_method`] says otherwise.
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
                method: Method::Get,
            },
            calls: calls.max(1),
        }
    }

    pub fn with_method(mut self, method: Method) -> Fixed {
        self.call.method = method;
        self
    }
}

impl Workload for Fixed {
    fn next_session(&mut self, out: &mut Vec<Call>) {
        out.extend(std::iter::repeat_n(self.call.clone(), self.calls));
    }
    fn describe(&self) -> String {
        match self.call.method {
            Method::Get => format!("{} x {}", self.call.uri, self.calls),
            Method::Head => format!("HEAD {} x {}", self.call.uri, self.calls),
        }
    }
}

/// Which workload a run draws its sessions from, as `evlab load`'s flags choose it: what
/// [`Choice::factory`] needs to make it, and what [`Choice::label`] calls it in the report.
#[derive(Clone, Debug)]
pub enum Choice {
    /// Every session `calls` requests for one URI.
    Fixed {
        uri: String,
        calls: usize,
        method: Method,
    },
    /// The URIs of a file, one a line, taken round-robin, `calls` per session.
    UriList {
        path: PathBuf,
        calls: usize,
        method: Method,
    },
    /// An httperf session log; `spec` is `--wsesslog` as given (N,X,FILE), `think` its X.
    SessLog {
        spec: String,
        file: PathBuf,
        think: Duration,
        method: Method,
    },
    /// The Polymix-like proxy workload over the set in `dir`.
    Polymix {
        dir: PathBuf,
        config: PolymixConfig,
        seed: u64,
    },
    /// The SPECweb99-like workload over the file set in `dir`.
    SpecWeb {
        dir: PathBuf,
        config: SpecWebConfig,
        seed: u64,
    },
}

impl Choice {
    /// The workload as the report names it (`config.workload`).
    pub fn label(&self) -> String {
        match self {
            Choice::Fixed { uri, calls, .. } => format!("{uri} x {calls}"),
            Choice::UriList { path, .. } => format!("uri-list:{}", path.display()),
            Choice::SessLog { spec, .. } => format!("wsesslog:{spec}"),
            Choice::Polymix { dir, config, .. } => format!(
                "polymix:{}:hits={},cacheable={},zipf={},calls={}",
                dir.display(),
                config.hit_ratio,
                config.cacheable,
                config.zipf,
                config.calls_max
            ),
            Choice::SpecWeb { dir, .. } => format!("specweb:{}", dir.display()),
        }
    }

    /// Makes the workload once (reading its files) and a factory that gives each generator
    /// thread a copy of it.
    pub fn factory(&self) -> Result<Box<WorkloadFactory<'static>>, WorkloadError> {
        Ok(match self {
            Choice::Fixed { uri, calls, method } => {
                copies(Fixed::new(uri, *calls).with_method(*method))
            }
            Choice::UriList {
                path,
                calls,
                method,
            } => copies(UriList::from_file(path, *calls)?.with_method(*method)),
            Choice::SessLog {
                file,
                think,
                method,
                ..
            } => copies(SessLog::from_file(file, *think, *method)?),
            Choice::Polymix { dir, config, seed } => {
                copies(Polymix::new(dir, config.clone(), *seed)?)
            }
            Choice::SpecWeb { dir, config, seed } => {
                copies(SpecWeb::new(dir, config.clone(), *seed)?)
            }
        })
    }
}

/// A factory that gives each thread its own copy of `w`.
fn copies<W: Workload + Clone + Sync + 'static>(w: W) -> Box<WorkloadFactory<'static>> {
    Box::new(move |_| Box::new(w.clone()))
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

pub mod polymix;
pub mod sesslog;
pub mod specweb;
pub mod urilist;
