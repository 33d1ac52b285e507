//! The controls of docs/findings.md on real runs, checked for what does not depend on how
//! quiet the machine is: a real run holds the idle connections of the idle arm and says how its
//! positive control (fig5-select-cpu) came out, in its report and in findings.json alike; a
//! placebo run gives every series but the exempt positive control the same condition (one
//! mechanism, no idle connections held), while that control really holds them. Whether the
//! controls pass is a measurement; the rules that decide it are tested on synthetic data
//! (`evlab-reason`'s findings tests). A tiny experiment: select on a tenth of a CPU at 400/s,
//! well below its knee, 1 s points, 3 trials.

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

/// Runs the experiment; its report.md, summary.json and findings.json.
fn run(dir: &Path, extra: &[&str]) -> (String, serde_json::Value, serde_json::Value) {
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
    let read = |f: &str| std::fs::read_to_string(dir.join("out").join(f)).unwrap();
    (
        read("report.md"),
        serde_json::from_str(&read("summary.json")).unwrap(),
        serde_json::from_str(&read("findings.json")).unwrap(),
    )
}

/// The verdict in the findings table's row whose claim contains `claim`.
fn verdict<'a>(md: &'a str, claim: &str) -> &'a str {
    let row = md
        .lines()
        .find(|l| l.starts_with('|') && l.contains(claim))
        .unwrap_or_else(|| panic!("no finding about {claim:?}:\n{md}"));
    row.split('|').nth(3).unwrap().trim()
}

/// A finding of findings.json by rule.
fn finding<'a>(j: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {j}"))
}

/// Whether a point held idle connections: an `evlab idle` among its commands.
fn holds_idle(p: &serde_json::Value) -> bool {
    p["commands"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c.as_str().unwrap().contains(" idle "))
}

/// The word a control's status (`Positive control:`, `Placebo control:`) is said in, in the findings in full (the report's last
/// mention); the list beside the findings chart says the same first, as passed, failed or not
/// decided.
fn control_word<'a>(md: &'a str, control: &str) -> &'a str {
    let at = md
        .rfind(control)
        .unwrap_or_else(|| panic!("no {control}:\n{md}"));
    let word = md[at + control.len()..]
        .trim_start()
        .split(['.', ':', ' '])
        .next()
        .unwrap();
    let first = match word {
        "passed" => "passed",
        "FAILED" => "failed",
        _ => "not decided",
    };
    assert!(
        md.contains(&format!("\n- {control} {first} (")),
        "the controls beside the chart do not say {control} {first}:\n{md}"
    );
    word
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
fn a_run_and_its_placebo_give_the_controls_their_conditions_and_say_how_they_came_out() {
    if !budget_or_skip() {
        return;
    }
    let dir = scratch("real");
    let (md, summary, j) = run(&dir, &[]);
    for p in summary["points"].as_array().unwrap() {
        // The idle arm really holds its 10,000 connections, the other none.
        assert_eq!(holds_idle(p), p["idle"] == 10000, "{p}");
    }
    // The positive control is decided or not by the measurement; either way the report and
    // findings.json say the same, and it is never absent from a run that has its arms.
    let status = j["controls"]["positive"].as_str().unwrap();
    let word = control_word(&md, "Positive control:");
    assert_eq!(
        (status, word),
        match status {
            "passed" => ("passed", "passed"),
            "failed" => ("failed", "FAILED"),
            "underpowered" => ("underpowered", "underpowered"),
            other => panic!("positive control {other}\n{md}"),
        },
        "{md}"
    );
    let v = finding(&j, "fig5-select-cpu")["verdict"].as_str().unwrap();
    assert_eq!(v, verdict(&md, "select pays for every idle descriptor"));
    assert_eq!(status == "passed", v == "reproduced", "{md}");
    std::fs::remove_dir_all(&dir).unwrap();

    let dir = scratch("placebo");
    let (md, summary, j) = run(&dir, &["--placebo"]);
    let points = summary["points"].as_array().unwrap();
    let control =
        |p: &&serde_json::Value| p["series"].as_str().unwrap().contains("(positive control)");
    // Every series but the exempt control: one mechanism and no idle connections held, at
    // every (trial, idle count).
    let arms: Vec<&serde_json::Value> = points.iter().filter(|p| !control(p)).collect();
    assert!(arms.iter().any(|p| p["idle"] == 10000), "{summary}");
    for p in &arms {
        assert!(!holds_idle(p), "a placebo arm held idle connections: {p}");
        assert_eq!(p["mechanism"], arms[0]["mechanism"], "{p}");
    }
    // The exempt control holds them in its idle arm.
    let exempt: Vec<&serde_json::Value> = points.iter().filter(control).collect();
    assert!(!exempt.is_empty(), "no positive control series: {summary}");
    for p in exempt {
        assert_eq!(holds_idle(p), p["idle"] == 10000, "{p}");
    }
    // How the placebo and its positive control came out, the same in both documents.
    let placebo = j["controls"]["placebo"].as_str().unwrap();
    assert!(placebo == "passed" || placebo == "failed", "{j}");
    assert_eq!(
        control_word(&md, "Placebo control:"),
        if placebo == "passed" {
            "passed"
        } else {
            "FAILED"
        },
        "{md}"
    );
    let positive = j["controls"]["positive"].as_str().unwrap();
    assert_eq!(
        positive == "passed",
        finding(&j, "control-positive")["verdict"] == "reproduced",
        "{j}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
