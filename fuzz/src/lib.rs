//! The properties evlab's fuzz targets check, one module per target.
//!
//! Each module's `check` panics when a property fails. The libFuzzer targets in `fuzz_targets/`
//! call them; so do the stable replay tests of the main workspace
//! (`crates/http/tests/fuzz_corpus.rs`, `crates/load/tests/fuzz_corpus.rs`), which include
//! these files with `#[path]` and add [`mutate`]'s seeded mutations of the committed corpora.

pub mod cache_request;
pub mod mutate;
pub mod origin;
pub mod path;
pub mod request;
pub mod response;
