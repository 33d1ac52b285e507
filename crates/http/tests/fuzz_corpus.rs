//! The fuzz targets' short run on a stable toolchain (what CI runs; docs/fuzzing.md): every
//! committed corpus file of `fuzz/corpus/{request,path,origin,cache_request}` through the
//! targets' property checks (every prefix of a request checked for incremental consistency),
//! then seeded mutations of the corpus. Deterministic: a fixed seed; a time budget only cuts the
//! sequence short on a slow machine, and nothing is asserted about time.

#[path = "../../../fuzz/src/cache_request.rs"]
mod cache_request;
#[path = "../../../fuzz/src/mutate.rs"]
mod mutate;
#[path = "../../../fuzz/src/origin.rs"]
mod origin;
#[path = "../../../fuzz/src/path.rs"]
mod path;
#[path = "../../../fuzz/src/request.rs"]
mod request;

use std::path::PathBuf;
use std::time::Duration;

fn corpus(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

#[test]
fn request_corpus_and_mutations() {
    let r = mutate::replay(
        &corpus("request"),
        request::TOKENS,
        0x5eed_0001,
        200_000,
        Duration::from_secs(6),
        4096,
        &request::check,
    );
    eprintln!("request: {r:?}");
}

#[test]
fn path_corpus_and_mutations() {
    let r = mutate::replay(
        &corpus("path"),
        path::TOKENS,
        0x5eed_0002,
        300_000,
        Duration::from_secs(6),
        4096,
        &path::check,
    );
    eprintln!("path: {r:?}");
}

#[test]
fn origin_corpus_and_mutations() {
    let r = mutate::replay(
        &corpus("origin"),
        origin::TOKENS,
        0x5eed_0004,
        100_000,
        Duration::from_secs(6),
        4096,
        &origin::check,
    );
    eprintln!("origin: {r:?}");
}

#[test]
fn cache_request_corpus_and_mutations() {
    let r = mutate::replay(
        &corpus("cache_request"),
        cache_request::TOKENS,
        0x5eed_0005,
        100_000,
        Duration::from_secs(6),
        4096,
        &cache_request::check,
    );
    eprintln!("cache_request: {r:?}");
}
