//! `evlab run NAME --plan [--json]`: the plan is what runs. A short run's points and searches
//! come in the plan's order, and every process each started (recorded in summary.json) is the
//! plan's argv but for its placeholders; and the placebo plans of the experiments that compare
//! run the same commands for every series at each (trial, x).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use evlab_lab::model::results::Summary;
use evlab_lab::model::spec::POSITIVE_CONTROL;
use evlab_lab::run::dryrun::fits;
use serde_json::Value;

/// Two series (one with flags of its own), with and without idle connections, two trials, a
/// fixed rate and a two-step capacity search per leg; no CPU budget, so an ordinary user runs it
/// too.
const SPEC: &str = r#"
name = "plan-check"
findings = "none"
workload = "one-byte"
server_flags = ["--header-timeout", "0"]
rates = [150]
idle = [0, 20]
trials = 2
duration_s = 0.4
timeout_s = 1
order_seed = 11

[[series]]
label = "poll"
mechanism = "poll"

[[series]]
label = "epoll-et limited"
mechanism = "epoll-et"
flags = ["--accept-limit", "4"]

[knee]
steps = 2
step_s = 0.4
settle_s = 0.1
timeout_s = 0.3
"#;

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("evlab-plan-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn evlab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_evlab"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .output()
        .unwrap()
}

fn plan_json(args: &[&str]) -> Value {
    let mut all = vec!["run"];
    all.extend(args);
    all.extend(["--plan", "--json"]);
    let o = evlab(&all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn argvs(v: &Value) -> Vec<Vec<String>> {
    serde_json::from_value(v.clone()).unwrap()
}

#[test]
fn a_short_run_starts_exactly_the_processes_its_plan_lists() {
    let dir = scratch("run");
    let spec = dir.join("plan-check.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let spec = spec.to_str().unwrap();
    let plan = plan_json(&[spec]);
    assert_eq!(plan["order_seed"], 11);
    let planned = plan["points"].as_array().unwrap();
    let (points, searches): (Vec<&Value>, Vec<&Value>) =
        planned.iter().partition(|p| p["kind"] == "point");
    assert_eq!((points.len(), searches.len()), (8, 8), "2 × 2 × 2 legs");

    let out = dir.join("out");
    let o = evlab(&["run", spec, "--quiet", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = Summary::read_json(&out).unwrap();
    assert_eq!(s.experiment.order_seed, Some(11));

    let mut ran = s.points.clone();
    ran.sort_by_key(|p| p.index);
    assert_eq!(ran.len(), points.len());
    for (p, want) in ran.iter().zip(&points) {
        let at = format!(
            "point {} ({} idle={} trial {})",
            p.index, p.series, p.idle, p.trial
        );
        assert_eq!(
            (p.series.as_str(), p.idle as u64, u64::from(p.trial), p.rate),
            (
                want["series"].as_str().unwrap(),
                want["idle"].as_u64().unwrap(),
                want["trial"].as_u64().unwrap(),
                want["x"].as_f64().unwrap()
            ),
            "{at}: not in the plan's order"
        );
        let cmds = argvs(&want["commands"]);
        assert_eq!(
            p.argv.len(),
            cmds.len(),
            "{at}: {:?} against {cmds:?}",
            p.argv
        );
        for (got, t) in p.argv.iter().zip(&cmds) {
            assert!(fits(t, got), "{at}: ran {got:?}, planned {t:?}");
        }
        // With idle connections the holder is started, and without it is not.
        let holders = p
            .argv
            .iter()
            .filter(|a| a.contains(&"idle".to_string()))
            .count();
        assert_eq!(holders, usize::from(p.idle > 0), "{at}");
    }

    assert_eq!(s.knees.len(), searches.len());
    for (k, want) in s.knees.iter().zip(&searches) {
        let at = format!("search of {} idle={} trial {}", k.series, k.idle, k.trial);
        assert_eq!(
            (k.series.as_str(), k.idle as u64, u64::from(k.trial)),
            (
                want["series"].as_str().unwrap(),
                want["idle"].as_u64().unwrap(),
                want["trial"].as_u64().unwrap()
            ),
            "{at}: not in the plan's order"
        );
        let cmds = argvs(&want["commands"]);
        let (servers, load) = cmds.split_at(cmds.len() - 1);
        assert!(!k.steps.is_empty(), "{at}: no step");
        assert_eq!(k.argv.len(), servers.len() + k.steps.len(), "{at}");
        for (got, t) in k.argv.iter().zip(servers) {
            assert!(fits(t, got), "{at}: ran {got:?}, planned {t:?}");
        }
        for got in &k.argv[servers.len()..] {
            assert!(
                fits(&load[0], got),
                "{at}: ran {got:?}, planned {:?}",
                load[0]
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The commands of a plan's entry with its own directory's number taken out (each point and
/// search has its own), and its budget.
fn condition(p: &Value) -> String {
    let mut text = format!("{} {}", p["server_cpu_budget"], p["commands"]);
    for dir in ["point-", "knee-"] {
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(i) = rest.find(dir) {
            out.push_str(&rest[..i + dir.len()]);
            rest = rest[i + dir.len()..].trim_start_matches(|c: char| c.is_ascii_digit());
            out.push('N');
        }
        out.push_str(rest);
        text = out;
    }
    text
}

/// (trial, x, kind) → the conditions of the series there, the positive control left out.
fn conditions(plan: &Value) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut at: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for p in plan["points"].as_array().unwrap() {
        if p["series"] == POSITIVE_CONTROL {
            continue;
        }
        let key = format!("trial {} x {} {}", p["trial"], p["x"], p["kind"]);
        let series = format!("{} idle={}", p["series"], p["idle"]);
        at.entry(key).or_default().insert(series, condition(p));
    }
    at
}

#[test]
fn placebo_plans_run_one_set_of_commands_for_every_series_at_each_trial_and_x() {
    for name in [
        "quick",
        "fig7-accept-limit",
        "herd-serve",
        "fig-proxy-sizes",
        "fig3-epoll-variants",
    ] {
        // As the experiment is, its series differ somewhere: the check below can fail.
        let real = conditions(&plan_json(&[name, "--order-seed", "5"]));
        assert!(
            real.values().any(|by| {
                let mut c = by.values();
                let first = c.next();
                c.any(|x| Some(x) != first)
            }),
            "{name}: its plan compares nothing"
        );
        let plan = plan_json(&[name, "--placebo", "--order-seed", "5"]);
        assert_eq!(plan["placebo"], true);
        let placebo = conditions(&plan);
        assert!(!placebo.is_empty(), "{name}");
        for (at, by) in &placebo {
            let mut c = by.iter();
            let (first_series, first) = c.next().unwrap();
            for (series, cond) in c {
                assert_eq!(
                    cond, first,
                    "{name}, {at}: {series} runs other commands than {first_series}"
                );
            }
        }
        // The positive control is the exception, and holds its idle connections.
        let pc: Vec<&Value> = plan["points"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["series"] == POSITIVE_CONTROL)
            .collect();
        for p in &pc {
            let idle = p["idle"].as_u64().unwrap();
            let holds = argvs(&p["commands"])
                .iter()
                .any(|a| a.contains(&"idle".to_string()));
            assert_eq!(holds, idle > 0, "{name}: {p}");
        }
    }
}

/// A sequential experiment's plan is its first block, and says that later blocks are
/// conditional on the looks; `--trials N` plans exactly N trials, with no rule, each trial as
/// the rule's plan has it.
#[test]
fn a_sequential_plan_lists_its_first_block_and_says_later_ones_are_conditional() {
    let trials = |v: &Value| -> Vec<u64> {
        let mut t: Vec<u64> = v["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["trial"].as_u64().unwrap())
            .collect();
        t.dedup();
        t
    };
    let legs = |v: &Value, upto: u64| -> Vec<String> {
        v["points"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["trial"].as_u64().unwrap() <= upto)
            .map(|p| format!("{} {} {} {}", p["trial"], p["series"], p["idle"], p["kind"]))
            .collect()
    };
    let plan = plan_json(&["quick", "--order-seed", "5"]);
    assert_eq!(trials(&plan), [1, 2, 3]);
    let q = &plan["sequential"];
    assert_eq!(
        (q["first"].as_u64(), q["most"].as_u64()),
        (Some(3), Some(6))
    );
    assert_eq!(q["budget_s"].as_f64(), Some(270.0));
    let o = evlab(&["run", "quick", "--plan", "--order-seed", "5"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(
            "trials 1–3, the sequential rule's first block. Later blocks are conditional"
        ),
        "{text}"
    );
    let fixed = plan_json(&["quick", "--trials", "2", "--order-seed", "5"]);
    assert_eq!(trials(&fixed), [1, 2]);
    assert!(fixed["sequential"].is_null());
    assert_eq!(legs(&fixed, 2), legs(&plan, 2));
    let zero = evlab(&["run", "quick", "--trials", "0", "--plan"]);
    assert_eq!(zero.status.code(), Some(2), "{zero:?}");
}

/// A sequential run makes its plan's first block, then the blocks its looks add, and records
/// each look. Here the only finding cannot be decided (no capacity search, and B is never
/// past its knee at 150/s), whatever the machine's speed, and there is no time budget: a look
/// after 2 trials (interim, 99.8%) adds the third, and the look after it is final at `most`
/// (90.2%: one interim look spent 0.2%).
#[test]
fn a_sequential_run_adds_the_blocks_its_looks_decide_and_records_them() {
    let dir = scratch("seq");
    let spec = dir.join("seq-check.toml");
    std::fs::write(
        &spec,
        "name = \"seq-check\"\nfindings = \"paper\"\nmechanisms = [\"select\", \"epoll-lt\"]\n\
         server_flags = [\"--header-timeout\", \"0\"]\nrates = [150]\nduration_s = 0.3\n\
         timeout_s = 1\norder_seed = 7\n[sequential]\nfirst = 2\nmost = 3\n",
    )
    .unwrap();
    let spec = spec.to_str().unwrap();
    let plan = plan_json(&[spec]);
    let planned: Vec<(String, u64)> = plan["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["series"].as_str().unwrap().into(),
                p["trial"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(planned.len(), 4, "the first block: 2 series × 2 trials");
    let out = dir.join("out");
    let o = evlab(&["run", spec, "--quiet", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = Summary::read_json(&out).unwrap();
    let mut ran = s.points.clone();
    ran.sort_by_key(|p| p.index);
    let ran: Vec<(String, u64)> = ran
        .iter()
        .map(|p| (p.series.clone(), u64::from(p.trial)))
        .collect();
    assert_eq!(ran.len(), 6, "{ran:?}");
    assert_eq!(ran[..4], planned[..], "the first block is the plan's");
    assert!(ran[4..].iter().all(|(_, t)| *t == 3), "{ran:?}");
    let q = s.sequential.as_ref().expect("the looks recorded");
    assert_eq!(q.trials, 3);
    let looks: Vec<(u32, f64, Option<&str>)> = q
        .looks
        .iter()
        .map(|l| (l.trials, l.level, l.stopped.as_deref()))
        .collect();
    assert_eq!(
        looks,
        [(2, 0.998, None), (3, 0.902, Some("most trials"))],
        "{q:?}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains(
            "Looks: after 2 trials (interim, 99.8%: 0 of 1 decided), after 3 (final, 90.2%: \
             0 of 1 decided); stopped: most trials. The verdicts below are decided at 90.2%."
        ),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
