//! The Polymix-like workload: determinism, the realised mix against its parameters on a large
//! deterministic sample (no timing), object sizes against the paper's percentiles, and the
//! file set it reads.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use evlab_load::workload::polymix::{
    self, Polymix, PolymixConfig, SizeDist, POLYMIX4_CACHEABLE, POLYMIX4_HIT_RATIO,
};
use evlab_load::workload::{Call, Workload};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("evlab-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn uris(w: &mut Polymix, sessions: usize) -> Vec<Arc<str>> {
    let mut out = Vec::new();
    let mut s: Vec<Call> = Vec::new();
    for _ in 0..sessions {
        s.clear();
        w.next_session(&mut s);
        assert!(!s.is_empty() && s.len() <= 64);
        out.extend(s.iter().map(|c| c.uri.clone()));
    }
    out
}

#[test]
fn same_seed_same_uris_other_seed_other_uris() {
    let make = |seed| Polymix::with_objects(50_000, None, PolymixConfig::default(), seed).unwrap();
    let (mut a, mut b, mut c) = (make(7), make(7), make(8));
    let (ua, ub, uc) = (uris(&mut a, 2000), uris(&mut b, 2000), uris(&mut c, 2000));
    assert_eq!(ua, ub);
    assert_ne!(ua, uc);
    // Clones (engine threads) are reproducible too, and differ from each other.
    let (mut a1, mut b1) = (a.clone(), b.clone());
    let (mut a2, mut b2) = (a.clone(), b.clone());
    let (x1, y1) = (uris(&mut a1, 500), uris(&mut b1, 500));
    assert_eq!(x1, y1);
    assert_eq!(uris(&mut a2, 500), uris(&mut b2, 500));
    let mut a3 = a.clone();
    assert_ne!(uris(&mut a3, 500), x1);
}

/// The offered mix, measured as an infinite cache would see it: a request is a hit when its
/// cacheable URI was asked for before in the stream.
fn realised(w: &mut Polymix, requests: usize) -> (f64, f64, f64) {
    let mut seen: HashSet<Arc<str>> = HashSet::new();
    let (mut hits, mut uncacheable, mut n, mut sessions) = (0usize, 0usize, 0usize, 0usize);
    let mut s = Vec::new();
    while n < requests {
        s.clear();
        w.next_session(&mut s);
        sessions += 1;
        for c in &s {
            n += 1;
            if c.uri.starts_with("/polymix/u/") {
                uncacheable += 1;
            } else if !seen.insert(c.uri.clone()) {
                hits += 1;
            }
        }
    }
    (
        hits as f64 / n as f64,
        uncacheable as f64 / n as f64,
        n as f64 / sessions as f64,
    )
}

#[test]
fn realised_mix_matches_the_parameters() {
    const N: usize = 300_000;
    // Polymix-4's numbers, and two others (the microbenchmarks' 0 % hits, non-cacheable and
    // cacheable).
    for (hit_ratio, cacheable) in [
        (POLYMIX4_HIT_RATIO, POLYMIX4_CACHEABLE),
        (0.0, 0.0),
        (0.0, 1.0),
        (0.3, 0.9),
    ] {
        let cfg = PolymixConfig {
            hit_ratio,
            cacheable,
            ..PolymixConfig::default()
        };
        let mut w = Polymix::with_objects(400_000, None, cfg.clone(), 3).unwrap();
        let (h, u, calls) = realised(&mut w, N);
        assert!((h - hit_ratio).abs() < 0.01, "hits {h} for {hit_ratio}");
        assert!(
            (u - (1.0 - cacheable)).abs() < 0.01,
            "uncacheable {u} for {cacheable}"
        );
        // Zipf(64) requests per connection: mean 64 / H(64) = 13.5 (within 3 %).
        let mean = cfg.mean_calls();
        assert!((mean - 13.5).abs() < 0.05, "{mean}");
        assert!(
            (calls - mean).abs() < 0.03 * mean,
            "{calls} per connection, want {mean}"
        );
    }
}

#[test]
fn hits_follow_zipf_popularity() {
    // With Zipf(1) over the objects asked for so far, the first object asked for takes about
    // 1 / H(n) of the hits, far more than the uniform 1 / n; with Zipf 0 it takes about 1 / n.
    let count_first = |zipf: f64| {
        let cfg = PolymixConfig {
            zipf,
            ..PolymixConfig::default()
        };
        let mut w = Polymix::with_objects(400_000, None, cfg, 5).unwrap();
        let mut first = 0usize;
        let mut hits = 0usize;
        for _ in 0..200_000 {
            let d = w.draw();
            if d.hit {
                hits += 1;
                first += (d.object == 0) as usize;
            }
        }
        first as f64 / hits as f64
    };
    let skewed = count_first(1.0);
    let flat = count_first(0.0);
    assert!(skewed > 0.05, "{skewed}");
    assert!(flat < 0.01, "{flat}");
}

#[test]
fn object_sizes_match_the_papers_percentiles() {
    // §5: about 4 KB at the 50th percentile, 8 KB at the 75th and 25 KB at the 95th.
    let mut s: Vec<u64> = (0..100_000).map(|i| SizeDist::POLYMIX4.size(i)).collect();
    s.sort_unstable();
    let p = |q: f64| s[(q * s.len() as f64) as usize] as f64;
    let near = |got: f64, want: f64, tol: f64| (got / want - 1.0).abs() < tol;
    assert!(near(p(0.50), 4096.0, 0.03), "p50 {}", p(0.50));
    assert!(near(p(0.75), 8192.0, 0.08), "p75 {}", p(0.75));
    assert!(near(p(0.95), 25_600.0, 0.08), "p95 {}", p(0.95));
    assert!(s[0] >= polymix::SIZE_MIN && *s.last().unwrap() <= polymix::SIZE_MAX);
    assert_eq!(SizeDist::Fixed(8192).size(12345), 8192);
}

#[test]
fn file_set_is_written_and_read_back() {
    let t = TempDir::new("polymix-set");
    let s = polymix::create(&t.0, 50, SizeDist::POLYMIX4).unwrap();
    assert_eq!(s.files, 100);
    assert_eq!(s.unchanged, 0);
    for i in [0usize, 17, 49] {
        let want = SizeDist::POLYMIX4.size(i as u64);
        for kind in [true, false] {
            let p = t.0.join(&polymix::uri(kind, i)[1..]);
            assert_eq!(
                std::fs::metadata(&p).unwrap().len(),
                want,
                "{}",
                p.display()
            );
        }
    }
    let again = polymix::create(&t.0, 50, SizeDist::POLYMIX4).unwrap();
    assert_eq!(again.unchanged, 100);
    let info = polymix::inspect(&t.0).unwrap();
    assert_eq!((info.objects, info.sizes), (50, SizeDist::POLYMIX4));
    // The workload reads the count back, and refuses more objects than the set has.
    let w = Polymix::new(&t.0, PolymixConfig::default(), 1).unwrap();
    assert_eq!(w.config().objects, 50);
    let more = PolymixConfig {
        objects: 51,
        ..PolymixConfig::default()
    };
    assert!(Polymix::new(&t.0, more, 1).is_err());
    assert!(Polymix::new(&t.0.join("nope"), PolymixConfig::default(), 1).is_err());
}
