//! The SPECweb99-like workload: class mix, Zipf skew, the within-class table, requests per
//! connection, clones, and how it reads the file set.

use std::collections::HashMap;
use std::path::PathBuf;

use evlab_load::fileset;
use evlab_load::workload::specweb::{file_pdf, CallsPerConn, SpecWeb, SpecWebConfig};
use evlab_load::workload::Workload;

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

/// A workload over `dirs` directories that need not exist on disk.
fn workload(dirs: usize, calls: CallsPerConn, seed: u64) -> SpecWeb {
    let cfg = SpecWebConfig {
        dirs,
        calls,
        ..SpecWebConfig::default()
    };
    SpecWeb::new(&PathBuf::from("/nonexistent/evlab-fileset"), cfg, seed).unwrap()
}

const DRAWS: usize = 100_000;

#[test]
fn class_mix_within_one_percent() {
    let mut w = workload(20, CallsPerConn::Fixed(1), 7);
    let mut classes = [0usize; 4];
    for _ in 0..DRAWS {
        classes[w.draw().1] += 1;
    }
    for (c, want) in [0.35, 0.50, 0.14, 0.01].iter().enumerate() {
        let got = classes[c] as f64 / DRAWS as f64;
        assert!((got - want).abs() <= 0.01, "class {c}: {got} vs {want}");
    }
}

#[test]
fn files_follow_the_specweb99_table() {
    let mut w = workload(5, CallsPerConn::Fixed(1), 11);
    let mut files = [0usize; 9];
    for _ in 0..DRAWS {
        files[w.draw().2] += 1;
    }
    let table = [
        0.039, 0.059, 0.088, 0.177, 0.353, 0.118, 0.071, 0.050, 0.044,
    ];
    for i in 0..9 {
        let got = files[i] as f64 / DRAWS as f64;
        assert!((got - table[i]).abs() <= 0.01, "file {i}: {got}");
        assert!((file_pdf()[i] - table[i]).abs() < 0.001);
    }
    // The middle file is the most popular.
    assert_eq!(files.iter().enumerate().max_by_key(|x| x.1).unwrap().0, 4);
}

#[test]
fn directories_are_zipf_skewed() {
    let dirs = 50;
    let mut w = workload(dirs, CallsPerConn::Fixed(1), 3);
    let mut counts = vec![0usize; dirs];
    for _ in 0..DRAWS {
        counts[w.draw().0] += 1;
    }
    assert!(counts.iter().all(|&c| c > 0), "every directory drawn");
    let max = counts.iter().enumerate().max_by_key(|x| x.1).unwrap().0;
    assert_eq!(max, 0, "dir 0 is the most popular: {counts:?}");
    // Zipf(1): P(0) = 1/H(50) ≈ 0.2222, P(1) = half of it.
    let h: f64 = (1..=dirs).map(|k| 1.0 / k as f64).sum();
    let p0 = counts[0] as f64 / DRAWS as f64;
    assert!((p0 - 1.0 / h).abs() <= 0.01, "p0 {p0}");
    let ratio = counts[0] as f64 / counts[1] as f64;
    assert!((1.8..2.2).contains(&ratio), "dir0/dir1 {ratio}");
    // The first ten directories take well over half the requests.
    let top10: usize = counts[..10].iter().sum();
    assert!(top10 as f64 / DRAWS as f64 > 0.55);
}

#[test]
fn requests_per_connection_default_is_specweb99() {
    let mut w = workload(10, CallsPerConn::SPECWEB99, 5);
    let mut out = Vec::new();
    let mut lens: HashMap<usize, usize> = HashMap::new();
    let sessions = 20_000;
    let mut total = 0;
    for _ in 0..sessions {
        out.clear();
        w.next_session(&mut out);
        *lens.entry(out.len()).or_default() += 1;
        total += out.len();
        assert!(out.iter().all(|c| c.think.is_zero()));
    }
    for &len in lens.keys() {
        assert!(len == 1 || (5..=15).contains(&len), "length {len}");
    }
    let single = lens[&1] as f64 / sessions as f64;
    assert!((single - 0.3).abs() < 0.02, "single {single}");
    let mean = total as f64 / sessions as f64;
    assert!((mean - 7.3).abs() < 0.2, "mean {mean}");
}

#[test]
fn uris_name_real_files_and_clones_draw_their_own_streams() {
    let t = TempDir::new("specweb-fs");
    fileset::create(&t.0, 2, false).unwrap();
    // dirs = 0: read back from the file set.
    let mut w = SpecWeb::new(&t.0, SpecWebConfig::default(), 1).unwrap();
    assert_eq!(w.config().dirs, 2);
    let mut out = Vec::new();
    for _ in 0..200 {
        out.clear();
        w.next_session(&mut out);
        for c in &out {
            let p = t.0.join(c.uri.trim_start_matches('/'));
            assert!(p.is_file(), "{} does not exist", p.display());
        }
    }
    let (mut a, mut b) = (w.clone(), w.clone());
    let da: Vec<_> = (0..50).map(|_| a.draw()).collect();
    let db: Vec<_> = (0..50).map(|_| b.draw()).collect();
    assert_ne!(da, db, "clones draw different streams");
    // Same seed, same clone order: the same streams (reproducible runs).
    let w2 = SpecWeb::new(&t.0, SpecWebConfig::default(), 1).unwrap();
    let mut a2 = w2.clone();
    let da2: Vec<_> = (0..50).map(|_| a2.draw()).collect();
    assert_eq!(da, da2);

    // Asking for more directories than the set has is refused (it would measure 404s).
    let cfg = SpecWebConfig {
        dirs: 3,
        ..SpecWebConfig::default()
    };
    let e = SpecWeb::new(&t.0, cfg, 1).unwrap_err().to_string();
    assert!(
        e.contains("asked for 3 directories but the file set has 2"),
        "{e}"
    );
    // With a prefix the URIs sit below the document root.
    let cfg = SpecWebConfig {
        uri_prefix: "/specweb/".into(),
        ..SpecWebConfig::default()
    };
    let mut w = SpecWeb::new(&t.0, cfg, 1).unwrap();
    out.clear();
    w.next_session(&mut out);
    assert!(out[0].uri.starts_with("/specweb/dir0000"), "{}", out[0].uri);
    assert!(w.describe().contains("2 directories"), "{}", w.describe());
}

#[test]
fn missing_file_set_without_count_is_an_error() {
    let e = SpecWeb::new(
        &PathBuf::from("/nonexistent/evlab-fs"),
        SpecWebConfig::default(),
        1,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("/nonexistent/evlab-fs") && e.contains("evlab fileset"),
        "{e}"
    );
    let bad = SpecWebConfig {
        dirs: 1,
        dir_alpha: -1.0,
        ..SpecWebConfig::default()
    };
    assert!(SpecWeb::new(&PathBuf::from("/nonexistent"), bad, 1).is_err());
}
