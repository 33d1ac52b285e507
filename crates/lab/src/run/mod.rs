//! Running: the plan, the sweep, each point's processes, calibration, CPU budgets, peers and
//! progress. The only layer that starts processes.

pub(crate) mod argv;
pub mod calibrate;
pub mod cgroup;
pub(crate) mod counters;
pub mod dryrun;
pub mod estimate;
pub(crate) mod fileset;
pub mod hosts;
pub mod knee;
pub mod listing;
pub(crate) mod looks;
pub mod machine;
pub mod micro;
pub mod peers;
pub mod plan;
pub mod point;
pub mod procs;
pub mod progress;
pub mod remote;
pub mod remote_budget;
pub(crate) mod remote_hosts;
pub(crate) mod remote_peers;
pub(crate) mod remote_proxy;
pub(crate) mod remote_steps;
pub(crate) mod stepper;
pub mod sweep;
pub mod wan;
