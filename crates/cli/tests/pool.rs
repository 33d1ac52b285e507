//! `evlab pool` over the committed quick runs: pooled verdicts with their heterogeneity, as a
//! table and as JSON; runs of different experiments refused.

use std::path::{Path, PathBuf};
use std::process::Command;

fn reference(run: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../results/reference/amd-epyc-2vcpu-linux-6.18")
        .join(run)
}

fn quick_runs() -> Vec<PathBuf> {
    (1..=8)
        .map(|i| reference(&format!("quick-knee-run{i}")))
        .collect()
}

fn pool(args: &[&str], dirs: &[PathBuf]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_evlab"))
        .arg("pool")
        .args(dirs)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_committed_quick_runs_pool_with_their_heterogeneity() {
    let o = pool(&["--json"], &quick_runs());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["experiment"], "quick");
    assert_eq!(v["runs"].as_array().unwrap().len(), 8);
    let fs = v["findings"].as_array().unwrap();
    let of = |id: &str| fs.iter().find(|f| f["id"] == id).unwrap();
    for f in fs {
        for key in ["id", "k", "ratio", "lo", "hi", "tau", "i2", "verdict"] {
            assert!(!f[key].is_null(), "{key} in {f}");
        }
        let (lo, r, hi) = (
            f["lo"].as_f64().unwrap(),
            f["ratio"].as_f64().unwrap(),
            f["hi"].as_f64().unwrap(),
        );
        assert!(lo <= r && r <= hi, "{f}");
        assert!(f["k"].as_u64().unwrap() >= 2, "{f}");
    }
    // select's CPU per reply with 10,000 idle connections: every run has it, the runs differ
    // beyond their own intervals, and pooled it is reproduced far from its 1.25.
    let cpu = of("fig5-select-cpu");
    assert_eq!(cpu["k"], 8);
    assert_eq!(cpu["verdict"], "reproduced");
    assert!(cpu["lo"].as_f64().unwrap() > 1.5, "{cpu}");
    assert!(cpu["i2"].as_f64().unwrap() > 0.5, "{cpu}");
    assert!(cpu["tau"].as_f64().unwrap() > 0.05, "{cpu}");
    // The pooled negative control decides its own way, so the "no difference" findings are
    // judged rather than withheld.
    assert_eq!(v["negative_control"], "passed");
    assert_eq!(
        of("control-budget-not-equivalent")["verdict"],
        "not reproduced"
    );
    assert_ne!(of("fig1-select-as-epoll-lt")["verdict"], "not judged");
    // The negative control's difference is known: epoll-lt on 0.25 ÷ 1.2 of a CPU was built to
    // have 1/1.2 = 0.83 of epoll-lt's capacity, and pooled over the runs it has that, clear of
    // the equivalence rules' lower bound (0.91).
    let control = of("control-budget-not-equivalent");
    let (lo, hi) = (
        control["lo"].as_f64().unwrap(),
        control["hi"].as_f64().unwrap(),
    );
    assert!(lo <= 1.0 / 1.2 && 1.0 / 1.2 <= hi, "{control}");
    assert!(hi < 0.91, "{control}");

    // The table says the same.
    let o = pool(&[], &quick_runs());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.starts_with("evlab pool: 8 runs of quick"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with("fig5-select-cpu "))
        .unwrap();
    assert!(row.contains(" 8 ") && row.ends_with("reproduced"), "{row}");
    assert!(text.contains("Negative control, pooled: passed"), "{text}");
}

#[test]
fn runs_of_different_experiments_are_refused() {
    let o = pool(
        &[],
        &[reference("quick-knee-run8"), reference("fig1-one-byte")],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is a run of fig1-one-byte, not of quick"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

/// A run's log beside its directory (what `quick-knee-run*` also matches) is refused by name,
/// with the glob that matches only the directories.
#[test]
fn a_log_file_among_the_runs_is_refused_with_the_glob_that_works() {
    let log = reference("quick-knee-run8.log");
    assert!(log.is_file(), "{}", log.display());
    let o = pool(&[], &[reference("quick-knee-run8"), log]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("quick-knee-run8.log: a file, not a results directory"),
        "{err}"
    );
    assert!(err.contains("`quick-knee-run*/`"), "{err}");
    assert!(o.stdout.is_empty());
}
