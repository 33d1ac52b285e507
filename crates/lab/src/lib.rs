//! evlab-lab: experiments that reproduce the papers' figures and tables.
//!
//! Four layers, each using only those before it (a test checks there is no cycle):
//!
//! - [`model`]: the experiment file ([`model::spec::Spec`]), what a run measured
//!   ([`model::results::Summary`]) and its calibration, as written to and read from disk;
//! - [`analysis`]: curves over trials, syscall shares, and the findings' rules, one module per
//!   family (the experiment's `findings` key);
//! - [`render`]: the Markdown and HTML reports and their SVG figures;
//! - [`run`]: the plan, the sweep, each point's processes (a fresh server pinned to its CPU, idle
//!   holders, one measured `evlab load`), calibration and CPU budgets.

#![deny(clippy::too_many_lines)]

pub mod analysis;
pub mod model;
pub mod render;
pub mod run;

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
