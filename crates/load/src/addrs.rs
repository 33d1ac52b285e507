//! (owned by the load-engine work; being built)
