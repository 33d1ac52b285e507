//! evlab-lab: experiments that reproduce the papers' figures and tables — the running half.
//!
//! [`run`]: the plan, the sweep, each point's processes (a fresh server pinned to its CPU, idle
//! holders, one measured `evlab load`), hosts over ssh, calibration and CPU budgets (cgroups),
//! the machine. What a run asks for and measured, its findings and its reports are
//! `evlab-reason`'s ([`model`], [`analysis`], [`render`]), which starts nothing; they are
//! re-exported here so that the binary has one lab to name.

#![deny(clippy::too_many_lines)]

pub use evlab_reason::{analysis, model, render, LabError};

pub mod run;
