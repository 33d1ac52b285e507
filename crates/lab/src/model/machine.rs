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
    pub evlab_version: String,
    /// Tool name → version line (nginx, lighttpd), or "not installed".
    pub tools: BTreeMap<String, String>,
}
