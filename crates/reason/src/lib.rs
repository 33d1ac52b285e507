//! evlab-reason: the lab's reasoning — what an experiment asks for, what a run measured, what
//! it shows and how it reads — apart from its running (`evlab-lab`), which starts the
//! processes. Nothing here spawns a process, opens a socket or holds an engine: it reads and
//! writes files, and the documents the engines wrote (`evlab-wire`).
//!
//! Three layers, each using only those before it (`crates/lab/tests/layers.rs` checks this, and
//! that this crate's Cargo.toml names no crate that runs anything):
//!
//! - [`model`]: the experiment file ([`model::spec::Spec`]), what a run measured
//!   ([`model::results::Summary`]) and its calibration, as written to and read from disk;
//! - [`analysis`]: curves over trials, syscall shares, and the findings' rules, one module per
//!   family (the experiment's `findings` key);
//! - [`render`]: the Markdown and HTML reports and their SVG figures.

#![deny(clippy::too_many_lines)]

pub mod analysis;
pub mod model;
pub mod render;

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
