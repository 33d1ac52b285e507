//! (owned by the workloads work; being built)
