//! evlab-wire: the documents that cross a process or host boundary, as serde types, and the
//! little code that their writers and readers must share so that both do it the same way (a
//! status code's class, a latency histogram's encoding, the merge of several load reports).
//!
//! Each process that produces one of these builds it and writes it as JSON (`evlab load
//! --json`, `GET /.evlab/stats` on the server and the proxy, the micro-benchmarks' `--json`);
//! `evlab run` reads it back into the same type, on the same host or another, so a field renamed
//! or missing is an error that names it. The lab depends on this crate, not on the engines that
//! produce the documents.
//!
//! The JSON field names are the format: existing `results/` directories and scripts that read
//! `/.evlab/stats` depend on them (`tests/formats.rs` reads committed documents back and checks
//! they write out the same). Add a field with `#[serde(default)]` so older documents still read.
//!
//! - [`load`]: `evlab load`'s report ([`load::LoadReport`]).
//! - [`histogram`]: a latency histogram as HdrHistogram's compressed V2, base64
//!   ([`histogram::EncodedHistogram`]), checked when read.
//! - [`merge`]: several clients' load reports merged exactly ([`merge::merge`]).
//! - [`server`]: the μserver's `GET /.evlab/stats` ([`server::ServerStats`]).
//! - [`proxy`]: the proxy's `GET /.evlab/stats` ([`proxy::ProxyStats`]).
//! - [`micro`]: the micro-benchmarks' reports (pipetest, herd, fdalloc, malloc).
//! - [`mechanisms`]: the event mechanisms' names, as specs and stats spell them.
//! - [`StatusClasses`] (replies or responses per status class, for all three) and
//!   [`SyscallCount`] (one syscall's counts, for the server and the proxy).

#![deny(clippy::too_many_lines)]

mod counts;
pub mod histogram;
pub mod load;
pub mod mechanisms;
pub mod merge;
pub mod micro;
pub mod proxy;
pub mod server;

pub use counts::{traffic_lines, StatusClasses, SyscallCount};
