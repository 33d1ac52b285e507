//! A real capacity search (`[knee]`, docs/methodology.md "The knee"): epoll-et on a tenth of a
//! CPU, one point and one search. What it finds depends on the machine; what is checked does
//! not: every step is judged by the rule on its own numbers, no rate is offered twice, a closed
//! bracket is within the resolution, the steps were sampled as the rule reads them, and the
//! report shows the search, with a capacity or the reason it has none.

use std::path::PathBuf;
use std::process::Command;

use evlab_lab::model::knee::{ANSWERED, KEPT};
use evlab_lab::model::results::Summary;
use evlab_lab::run::cgroup::CpuBudget;

const SPEC: &str = r#"
name = "knee"
findings = "paper"
mechanisms = ["epoll-et"]
workload = "one-byte"
rates = [1500]
server_cpu_budget = 0.1
idle = [0]
trials = 1
duration_s = 1
timeout_s = 1

[knee]
steps = 10
"#;

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("evlab-knee-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_capacity_search_judges_each_step_by_its_rule_and_reports_it() {
    match CpuBudget::new(0.1) {
        Ok(_) => {}
        Err(why) => {
            if !evlab_poll::testing::require(
                "cgroup",
                false,
                &format!("cannot make a cgroup CPU budget here: {why}"),
            ) {
                return;
            }
        }
    }
    let dir = scratch();
    let spec = dir.join("knee.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let out = dir.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_evlab"))
        .args(["run", spec.to_str().unwrap(), "--quiet", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = Summary::read_json(&out).unwrap();
    assert_eq!(s.knees.len(), 1, "one series, one idle count, one trial");
    let k = &s.knees[0];
    assert_eq!((k.series.as_str(), k.idle, k.trial), ("epoll-et", 0, 1));
    assert_eq!(
        k.start, 1500.0,
        "no calibration: from the highest fixed rate"
    );
    assert!(!k.steps.is_empty());
    let mut offered: Vec<f64> = Vec::new();
    for st in &k.steps {
        assert_eq!(st.offered, st.offered.round(), "{st:?}");
        // Only a step that measured the client is offered again.
        if st.invalid.is_none() {
            assert!(!offered.contains(&st.offered), "offered twice: {st:?}");
            offered.push(st.offered);
        }
        let rule = st.replies as f64 >= ANSWERED * st.connections.max(1) as f64
            && st.settled_rate >= KEPT * st.offered;
        assert_eq!(st.kept, rule, "{st:?}");
        assert!(st.connections > 0, "{st:?}");
    }
    // Every step but an invalid last one was valid; the search says why it stopped unless its
    // bracket closed.
    let res = s.experiment.knee.as_ref().unwrap().resolution;
    match k.capacity(res) {
        Some(c) => {
            let (lo, hi) = (k.kept().unwrap(), k.failed().unwrap());
            assert!(lo < c && c < hi && hi / lo <= res * (1.0 + 1e-9), "{k:?}");
            assert!(k.stopped.is_none(), "{k:?}");
        }
        None => assert!(k.stopped.as_deref().is_some_and(|w| !w.is_empty()), "{k:?}"),
    }
    // The steps were sampled every tenth of a second, with the search's own timeout.
    let loads: Vec<&String> = k.commands.iter().filter(|c| c.contains(" load ")).collect();
    assert_eq!(loads.len(), k.steps.len(), "{:?}", k.commands);
    assert!(
        loads
            .iter()
            .all(|c| c.contains("--sample-interval 0.1") && c.contains("--timeout 0.3")),
        "{loads:?}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("\n## Capacity\n"), "{md}");
    let row = md
        .lines()
        .find(|l| l.starts_with("| epoll-et | 0 | 1 | 1,500 |"))
        .unwrap_or_else(|| panic!("no row for the search:\n{md}"));
    assert!(
        row.contains(&format!("| {} |", k.steps.len())),
        "{row} vs {k:?}"
    );
    assert_eq!(
        out.join("fig-capacity.svg").exists(),
        k.capacity(res).is_some()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
