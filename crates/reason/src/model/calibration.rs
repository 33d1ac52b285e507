//! What calibration measured of the machine before a sweep (see `run::calibrate`).
use serde::{Deserialize, Serialize};

/// The share of the client's ceiling the sweep may offer.
pub const CLEAN_SHARE: f64 = 0.55;

/// What was measured of this machine before the sweep.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Calibration {
    /// Connections/s the load generator started flat out (one request each) against an
    /// unconstrained evlab epoll-et server: the client's ceiling on this machine.
    pub client_ceiling: f64,
    /// The highest rate the sweep offers: a share of the ceiling at which the client still
    /// keeps its schedule.
    pub client_clean: f64,
    /// The server's CPU budget (share of one CPU, cgroup CPU quota), if one was set.
    pub server_cpu_budget: Option<f64>,
    /// How the budget was chosen, in words.
    pub budget_reason: String,
    /// Each series' capacity (replies/s at the budget, idle 0), from a short saturation probe.
    pub capacities: Vec<Capacity>,
    /// The rates the sweep offers (requests/s), when the experiment said `rates = "auto"`.
    pub rates: Vec<f64>,
    /// Every probe run, in order, for the report.
    pub probes: Vec<Probe>,
    pub wall_s: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Capacity {
    pub series: String,
    /// The highest probed rate kept up with (≥ 95% answered, p99 ≤ 100 ms), replies/s.
    pub replies_per_s: f64,
    /// Whether the probe reached a rate the series could not keep up with (else the capacity
    /// is a lower bound: the probe stopped at the client's clean ceiling).
    pub saturated: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Probe {
    pub what: String,
    pub series: String,
    pub budget: Option<f64>,
    pub offered: f64,
    pub replies_per_s: Option<f64>,
    pub achieved_start_rate: Option<f64>,
    pub client_cpu_busy: Option<f64>,
}
