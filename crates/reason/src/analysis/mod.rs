//! Analysis: curves over trials, syscall shares and the findings' rules and verdicts (a sweep's
//! in `findings`, a micro-benchmark's in `micro`), computed from the model alone (never from a
//! running process).

pub mod compare;
pub mod curves;
pub mod findings;
pub mod micro;
pub mod pool;
pub mod rules;
pub mod sample;
pub mod sequential;
pub mod stats;
pub mod syscalls;
