//! evlab-load: an httperf-class open-loop load generator, the idle-connection holder, and the
//! paper's workloads.

pub mod workload;
