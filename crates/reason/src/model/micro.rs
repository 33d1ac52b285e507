//! The record of a micro-benchmark run (`micro.json`): what `evlab report DIR` needs, with the
//! benchmark's own JSON, to write the report again.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::model::machine::{Machine, Quiet};
use crate::model::spec::MICRO_BENCHMARKS;

/// The lab's record of a micro-benchmark run (`micro.json`), beside the benchmark's own JSON:
/// what `evlab report DIR` needs, with that JSON, to write the report again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MicroRun {
    pub format: u32,
    /// The experiment's name and description.
    pub name: String,
    pub description: String,
    pub spec_path: String,
    /// `pipetest`, `herd`, `fdalloc`, `malloc` or `readahead`.
    pub benchmark: String,
    /// The benchmark's JSON report, a file name in the same directory.
    pub json: String,
    /// The benchmark's command line.
    pub bench_command: String,
    /// The `evlab run` command line.
    pub command: String,
    pub started: String,
    pub finished: Option<String>,
    pub wall_s: f64,
    pub interrupted: bool,
    /// Why the benchmark produced no report, if it did not.
    pub failure: Option<String>,
    pub machine: Machine,
    /// What the machine was doing just before the benchmark started (`run::machine::
    /// quiet_check`, as a sweep records it in summary.json); absent in records written before
    /// micro runs checked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet: Option<Quiet>,
}

/// The file a micro-benchmark run's record is kept in.
pub const RECORD: &str = "micro.json";

/// Whether `dir` holds a micro-benchmark run (its `micro.json`).
pub fn is_micro_dir(dir: &Path) -> bool {
    dir.join(RECORD).is_file()
}

/// A benchmark's JSON in `dir` with no `micro.json` beside it (a directory written before
/// micro-benchmark reports could be re-rendered), to name in an error.
pub fn orphan_json(dir: &Path) -> Option<String> {
    MICRO_BENCHMARKS
        .iter()
        .map(|b| format!("{b}.json"))
        .find(|f| dir.join(f).is_file() && !is_micro_dir(dir))
}
