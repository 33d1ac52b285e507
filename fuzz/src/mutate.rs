//! Seeded mutations of a corpus, for the stable replay tests: what CI runs instead of
//! libFuzzer (which needs a nightly toolchain). Deterministic: a fixed seed gives the same
//! inputs in the same order on every machine; a time budget can only cut the sequence short.
#![allow(dead_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// splitmix64: small, fast, and the same everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), near enough.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Bytes that matter to HTTP parsers, for single-byte mutations.
const INTERESTING: &[u8] = b"\0\r\n \t:;,%/.?#0159aAfFzZ\x7f\x80\xc3\xff";

/// One to four random edits of `input`: bit flips, byte sets, inserts and deletes, copies of a
/// span, a token, or a splice with another corpus entry; the result is at most `max_len` bytes.
pub fn mutate(
    rng: &mut Rng,
    input: &[u8],
    corpus: &[Vec<u8>],
    tokens: &[&[u8]],
    max_len: usize,
) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = v.len();
        match rng.below(10) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => {
                let i = rng.below(len + 1);
                v.insert(i, INTERESTING[rng.below(INTERESTING.len())]);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(8));
                v.drain(i..i + n);
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(32));
                let span = v[i..i + n].to_vec();
                let at = rng.below(len + 1);
                v.splice(at..at, span);
            }
            5 | 6 if !tokens.is_empty() => {
                let t = tokens[rng.below(tokens.len())];
                let at = rng.below(len + 1);
                if rng.below(2) == 0 || at == len {
                    v.splice(at..at, t.iter().copied());
                } else {
                    let end = (at + t.len()).min(len);
                    v.splice(at..end, t.iter().copied());
                }
            }
            7 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                let at = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                v.truncate(at);
                v.extend_from_slice(&other[from..]);
            }
            8 if len > 0 => v.truncate(rng.below(len)),
            _ => {
                // Repeat a span a few times: long lines, many headers, many chunks.
                if len > 0 {
                    let i = rng.below(len);
                    let n = 1 + rng.below((len - i).min(16));
                    let span = v[i..i + n].to_vec();
                    for _ in 0..1 + rng.below(16) {
                        v.splice(i..i, span.iter().copied());
                    }
                }
            }
        }
        v.truncate(max_len);
    }
    v
}

/// The files of a corpus directory, in name order.
pub fn load_corpus(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Runs `check` on `input`; on a failure prints the input (escaped) before passing the panic on.
pub fn run_one(what: &str, input: &[u8], check: &dyn Fn(&[u8])) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| check(input))) {
        eprintln!(
            "{what}: property failed for input {:?} (escaped: {})",
            input,
            input.escape_ascii()
        );
        std::panic::resume_unwind(panic);
    }
}

/// What a replay did.
#[derive(Debug)]
pub struct Replayed {
    pub files: usize,
    pub mutations: usize,
}

/// Every corpus file through `check` (exhaustively), then up to `mutations` seeded mutations
/// (non-exhaustively), stopping early once `budget` has passed.
pub fn replay(
    dir: &Path,
    tokens: &[&[u8]],
    seed: u64,
    mutations: usize,
    budget: Duration,
    max_len: usize,
    check: &dyn Fn(&[u8], bool),
) -> Replayed {
    let started = Instant::now();
    let files = load_corpus(dir);
    assert!(!files.is_empty(), "{}: empty corpus", dir.display());
    for (path, bytes) in &files {
        run_one(&path.display().to_string(), bytes, &|d| check(d, true));
    }
    let corpus: Vec<Vec<u8>> = files.into_iter().map(|(_, b)| b).collect();
    let mut rng = Rng::new(seed);
    let mut done = 0;
    while done < mutations && started.elapsed() < budget {
        let base = &corpus[rng.below(corpus.len())];
        let input = mutate(&mut rng, base, &corpus, tokens, max_len);
        run_one(&format!("mutation {done}"), &input, &|d| check(d, false));
        done += 1;
    }
    Replayed {
        files: corpus.len(),
        mutations: done,
    }
}
