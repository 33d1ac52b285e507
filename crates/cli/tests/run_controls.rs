//! The controls of docs/findings.md on real runs: the positive control (select's CPU per reply
//! with 10,000 idle connections against none, fig5-select-cpu) must be decided "reproduced";
//! and a placebo run of the same experiment must not reproduce it, while its own exempt
//! positive control does. A tiny experiment: select on a tenth of a CPU at 400/s, well below
//! its knee, 1 s points, 3 trials.

use std::path::{Path, PathBuf};
use std::process::Command;

use evlab_lab::run::cgroup::CpuBudget;

const SPEC: &str = r#"
name = "controls"
findings = "paper"
mechanisms = ["select"]
workload = "one-byte"
rates = [400]
server_cpu_budget = 0.1
idle = [0, 10000]
trials = 3
duration_s = 1
timeout_s = 1
"#;

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("evlab-controls-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the experiment; its report.md.
fn run(dir: &Path, extra: &[&str]) -> String {
    let spec = dir.join("controls.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_evlab"))
        .arg("run")
        .arg(&spec)
        .arg("--quiet")
        .arg("--out")
        .arg(dir.join("out"))
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read_to_string(dir.join("out/report.md")).unwrap()
}

/// The verdict in the findings table's row whose claim contains `claim`.
fn verdict<'a>(md: &'a str, claim: &str) -> &'a str {
    let row = md
        .lines()
        .find(|l| l.starts_with('|') && l.contains(claim))
        .unwrap_or_else(|| panic!("no finding about {claim:?}:\n{md}"));
    row.split('|').nth(3).unwrap().trim()
}

fn budget_or_skip() -> bool {
    match CpuBudget::new(0.1) {
        Ok(_) => true,
        Err(why) => evlab_poll::testing::require(
            "cgroup",
            false,
            &format!("cannot make a cgroup CPU budget here: {why}"),
        ),
    }
}

#[test]
fn the_positive_control_is_decided_and_a_placebo_does_not_reproduce_it() {
    if !budget_or_skip() {
        return;
    }
    let dir = scratch("real");
    let md = run(&dir, &[]);
    assert_eq!(
        verdict(&md, "select pays for every idle descriptor"),
        "reproduced",
        "{md}"
    );
    assert!(md.contains("Positive control: passed"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();

    let dir = scratch("placebo");
    let md = run(&dir, &["--placebo"]);
    // "select" ran with no idle connections held: no difference to find.
    let v = verdict(&md, "select pays for every idle descriptor");
    assert!(v == "not reproduced" || v == "inconclusive", "{v}\n{md}");
    // Its exempt control, select with the idle connections really held, still finds it.
    assert_eq!(
        verdict(&md, "A placebo run must still find"),
        "reproduced",
        "{md}"
    );
    assert!(md.contains("Placebo control: passed"), "{md}");
    assert!(
        md.contains("positive control (select with idle connections really held) was reproduced"),
        "{md}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
