//! The response-reader fuzz target's short run on a stable toolchain (what CI runs;
//! docs/fuzzing.md): every committed file of `fuzz/corpus/response` through the target's
//! property checks, then seeded mutations of the corpus. Deterministic: a fixed seed; a time
//! budget only cuts the sequence short on a slow machine, and nothing is asserted about time.

#[path = "../../../fuzz/src/mutate.rs"]
mod mutate;
#[path = "../../../fuzz/src/response.rs"]
mod response;

use std::path::PathBuf;
use std::time::Duration;

#[test]
fn response_corpus_and_mutations() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/response");
    let r = mutate::replay(
        &dir,
        response::TOKENS,
        0x5eed_0003,
        8_000,
        Duration::from_secs(6),
        4096,
        &response::check,
    );
    eprintln!("response: {r:?}");
}
