//! The machine and tools a run was made on, recorded with its results: a figure means nothing
//! without the kernel, the CPUs and the limits behind it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub memory_mib: u64,
    /// Soft and hard RLIMIT_NOFILE the runner (and so its children) had.
    pub fd_limit_soft: u64,
    pub fd_limit_hard: u64,
    pub fs_nr_open: String,
    pub ip_local_port_range: String,
    pub tcp_tw_reuse: String,
    pub somaxconn: String,
    /// The build of the evlab that ran the points: its `--version` line without the name
    /// (version, git commit, clean or dirty, rustc); the version alone in older summaries.
    pub evlab_version: String,
    /// Tool name → version line (nginx, lighttpd), or "not installed".
    pub tools: BTreeMap<String, String>,
}

/// What the machine was doing in the second before a run (issue: findings decided by
/// statistics): a busy CPU or stolen time moves every figure, so it is measured and recorded,
/// and the run is warned about, not refused (a noisy VM is where many users are).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Quiet {
    /// Seconds the reading lasted.
    pub seconds: f64,
    /// Busy share (1 − idle ÷ wall) of each CPU, in CPU order.
    pub cpu_busy: Vec<f64>,
    /// The largest share of any CPU's time stolen by the hypervisor.
    pub steal: f64,
    /// Other processes that used at least `BUSY_PROCESS` of a CPU meanwhile: (pid, command,
    /// share of one CPU).
    pub busy_processes: Vec<(u32, String, f64)>,
}

/// A process using this share of a CPU or more before a run is named in the record.
pub const BUSY_PROCESS: f64 = 0.05;
/// A CPU busier than this, or steal above it, before a run makes the machine "not quiet".
pub const NOT_QUIET: f64 = 0.10;

impl Quiet {
    /// None when quiet; else why not, in words.
    pub fn problem(&self) -> Option<String> {
        let mut why = Vec::new();
        for (i, b) in self.cpu_busy.iter().enumerate() {
            if *b > NOT_QUIET {
                why.push(format!("CPU {i} {:.0}% busy", b * 100.0));
            }
        }
        if self.steal > NOT_QUIET {
            why.push(format!("{:.0}% of a CPU stolen", self.steal * 100.0));
        }
        if !self.busy_processes.is_empty() {
            why.push(format!(
                "busy: {}",
                self.busy_processes
                    .iter()
                    .map(|(pid, c, s)| format!("{c} (pid {pid}, {:.0}%)", s * 100.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}
