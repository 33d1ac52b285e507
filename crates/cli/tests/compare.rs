//! `evlab compare` on committed reference runs and on two real `evlab load` reports: the text
//! (the summary first, lines of at most 100 columns), the Markdown and JSON, the exit status
//! when a verdict changed, runs of two experiments refused, and the errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;
use common::{serve, BIN};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A committed run as a user names it: relative to the checkout, where `evlab` runs. (The
/// checkout's own path may be long: CI's fresh clone once made a line of 101 columns.)
fn reference(run: &str) -> String {
    format!("results/reference/amd-epyc-2vcpu-linux-6.18/{run}")
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("evlab-compare-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn evlab(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(workspace())
        .stdin(Stdio::null())
        .output()
        .expect("run evlab")
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn two_reference_runs_side_by_side() {
    let d = scratch("runs");
    let (md, json) = (d.join("c.md"), d.join("c.json"));
    let (a, b) = (reference("quick-knee-run1"), reference("quick-knee-run2"));
    let o = evlab(&[
        "compare",
        &a,
        &b,
        "--md",
        md.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let out = text(&o);
    // Raw: `evlab compare --json` (the lab's `Comparison`) is written, never read back.
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let changed = findings.iter().filter(|f| f["run1"] != f["run2"]).count();
    // Runs 1 and 2 differ on fig5-epoll-lt-slight (inconclusive, then reproduced): the exit
    // status says a verdict changed, and that finding is named first.
    assert!(changed >= 1, "{out}");
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert_eq!(findings[0]["rule"], "fig5-epoll-lt-slight", "{out}");
    assert!(out.contains("CHANGED  fig5-epoll-lt-slight"), "{out}");
    assert!(
        out.contains(&format!("run 1: {a}\n       quick, ")),
        "{out}"
    );
    assert!(
        out.contains(&format!("run 2: {b}\n       quick, ")),
        "{out}"
    );
    // The summary first: the counts, then a plain sentence per change beyond the spread.
    let summary = out
        .find(&format!(
            "Run 2 changed {changed} of {} verdicts",
            findings.len()
        ))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(summary < out.find("Findings, each run").unwrap(), "{out}");
    assert!(
        out.contains("  - select's capacity with 10,000 idle connections in run 2 was 0.61 ["),
        "{out}"
    );
    // The runs are run 1 and run 2; A and B are only ever a rule's arms.
    assert!(!out.contains("B/A") && !out.contains("A ("), "{out}");
    assert!(
        out.contains("A = epoll-lt, 10,000 idle; B = epoll-lt, no idle"),
        "{out}"
    );
    // Points at the rates each run calibrated are matched by rank, and it says so.
    assert!(
        out.contains("rate 1 of 1: 1,600/s in run 1, 1,400/s in run 2, each the same multiple"),
        "{out}"
    );
    narrow(&out);
    // The capacities of both runs' searches, with intervals, and the points.
    let caps = v["capacities"].as_array().unwrap();
    assert_eq!(
        caps.len(),
        11,
        "5 mechanisms × 2 idle counts and the control"
    );
    assert!(caps.iter().all(|c| c["ratio"].is_array()), "{caps:?}");
    assert!(out.contains("select, 10,000 idle"), "{out}");
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.starts_with("# evlab compare\n\n"), "{md}");
    assert!(
        md.contains("| where | run 1 (n) | run 2 (n) | run 2 / run 1 [90%] |"),
        "{md}"
    );
    assert!(md.contains("\n\nRun 2 changed "), "{md}");
    // A run against itself: nothing changed, exit 0.
    let o = evlab(&["compare", &a, &a, "--json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Raw, as above: nothing reads a comparison back.
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["run1"] == f["run2"]));
    assert!(v["points"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["significant"] == false));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn two_load_reports_and_the_errors() {
    let d = scratch("load");
    let mut s = serve("compare", &[], |_| {});
    let port = s.addr.port().to_string();
    let mut files = Vec::new();
    for (i, rate) in ["200", "100"].iter().enumerate() {
        let f = d.join(format!("{i}.json"));
        let o = evlab(&[
            "load",
            "--port",
            &port,
            "--uri",
            "/one",
            "--rate",
            rate,
            "--num-conns",
            "20",
            "--quiet",
            "--json",
            f.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        files.push(f.display().to_string());
    }
    common::stop_serve(&mut s);
    let o = evlab(&["compare", &files[0], &files[1]]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("warning: one run per side: no interval"),
        "{out}"
    );
    assert!(out.contains("warning: the offered rates differ"), "{out}");
    assert!(out.contains("replies/s"), "{out}");
    assert!(out.contains("(no interval)"), "{out}");
    // One plain sentence, as hyperfine gives.
    assert!(out.contains("\nRun 2 answered "), "{out}");
    assert!(out.contains(" replies/s against run 1's "), "{out}");
    assert!(
        out.contains("one run each, so no change can be told from the runs' spread."),
        "{out}"
    );
    narrow(&out);
    // One of each kind, a file that is neither, and a missing argument.
    let o = evlab(&["compare", &reference("quick-knee-run1"), &files[0]]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not one of each"));
    let junk = d.join("junk.json");
    std::fs::write(&junk, "{\"not\": \"a report\"}").unwrap();
    let o = evlab(&["compare", junk.to_str().unwrap(), &files[0]]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("neither a results directory"));
    let o = evlab(&["compare", &files[0]]);
    assert_eq!(o.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&d);
}

/// Every line of `out` fits 100 columns.
fn narrow(out: &str) {
    for l in out.lines() {
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}",
            l.chars().count()
        );
    }
}

/// Runs of two different experiments answer different questions: refused (a usage error,
/// exit 2) unless `--force`.
#[test]
fn different_experiments_are_refused_unless_forced() {
    let (a, b) = (reference("quick-knee-run10"), reference("fig-proxy-sizes"));
    let o = evlab(&["compare", &a, &b]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("run 1 is of experiment quick and run 2 of fig-proxy-sizes"),
        "{err}"
    );
    assert!(err.contains("--force"), "{err}");
    assert!(o.stdout.is_empty());
    let o = evlab(&["compare", &a, &b, "--force"]);
    let out = text(&o);
    assert!(
        out.contains("warning: different experiments: run 1 is of experiment quick"),
        "{out}"
    );
    // Nothing of one is in the other: every finding "changed" from "not in the run".
    assert_eq!(o.status.code(), Some(3), "{out}");
    narrow(&out);
}

/// The build every result records: the version, the commit, clean or dirty, and rustc.
#[test]
fn the_version_line_names_the_build() {
    let o = evlab(&["--version"]);
    assert!(o.status.success());
    let v = text(&o);
    let rest = v
        .trim()
        .strip_prefix(&format!("evlab {} (", env!("CARGO_PKG_VERSION")))
        .unwrap_or_else(|| panic!("{v}"));
    // A checkout (CI's fresh clone is one) names its commit; a tarball says it has none.
    let commit = rest
        .strip_prefix("commit ")
        .unwrap_or_else(|| panic!("{v}"));
    let ok = commit.starts_with("unknown (not built from a git checkout)")
        || (commit.len() > 13
            && commit[..12].chars().all(|c| c.is_ascii_hexdigit())
            && (commit[12..].starts_with(", clean; ") || commit[12..].starts_with(", dirty; ")));
    assert!(ok, "{v}");
    assert!(rest.contains("rustc "), "{v}");
}
