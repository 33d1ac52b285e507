//! The micro-benchmarks' findings, one module per benchmark: each one's thresholds, its rule ids
//! (the registry's, [`crate::analysis::rules`]) and the function that judges its report (an
//! `evlab-wire` document, which `evlab-micro` measures and writes). Their tables and figures are
//! [`crate::render::micro`]'s.

pub mod fdalloc;
pub mod herd;
pub mod malloc;
pub mod pipetest;
pub mod readahead;

/// A machine for the tests' reports.
#[cfg(test)]
pub(crate) fn machine() -> evlab_wire::micro::Machine {
    evlab_wire::micro::Machine {
        kernel: "6.18.0".into(),
        cpus: 2,
        glibc: "2.36".into(),
        nofile: 20_000,
    }
}
