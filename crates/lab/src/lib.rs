//! evlab-lab: experiments that reproduce the papers' figures and tables.
//!
//! An experiment ([`spec::Spec`]) is a TOML file; [`runner`] turns it into points (one server,
//! one offered rate, one idle count, one trial), each measured by child processes of the `evlab`
//! binary (`serve`, `idle`, `load`) or a peer server; [`results`] holds what was measured and
//! writes the CSV and JSON; [`report`] renders Markdown and a self-contained HTML page with SVG
//! figures drawn like the paper's.

pub mod calibrate;
pub mod cgroup;
pub mod estimate;
pub mod findings;
pub mod loadjson;
pub mod machine;
pub mod micro;
pub mod peers;
pub mod procs;
pub mod progress;
pub mod report;
pub mod results;
pub mod runner;
pub mod spec;
pub mod svg;

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("{origin}:{line}: key `{key}`: {msg}")]
    Spec {
        origin: String,
        line: usize,
        key: String,
        msg: String,
    },
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Point(String),
}

impl From<std::io::Error> for LabError {
    fn from(e: std::io::Error) -> Self {
        LabError::Io(e.to_string())
    }
}
