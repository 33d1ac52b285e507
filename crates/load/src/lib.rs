//! evlab-load: an httperf-class open-loop load generator, the idle-connection holder, and the
//! paper's workloads.
//!
//! - [`gen`]: the open-loop generator (schedule, connections, timeouts, errors by cause, the
//!   pool of 127.0.0.0/8 source addresses that keeps TIME_WAIT from exhausting ports).
//! - [`parse`]: incremental HTTP/1.1 response parsing (Content-Length, chunked, close-delimited).
//! - [`summary`]: httperf's report (same line labels), JSON and per-sample CSV.
//! - [`workload`]: what each connection asks for (single URI, URI list, wsesslog, SPECweb99-like).
//! - [`fileset`]: the SPECweb99 file set.
//! - [`idle`]: the idle-connection holder (httperf's idleconn without its 1,024-descriptor limit).
//! - [`rng`]: a small, fast, seedable generator and the distributions the workloads need.

pub mod fileset;
pub mod gen;
pub mod idle;
pub mod parse;
pub mod rng;
pub mod summary;
pub mod workload;
