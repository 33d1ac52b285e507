//! `evlab run` of micro-benchmark experiments writes the seed's figures, and `evlab report DIR`
//! writes the same files again from the saved JSON; a directory that is not a results
//! directory, or holds a truncated JSON, is refused with the file named. The runs are tiny
//! (a few pipes and generations, a few hundred descriptors): nothing here depends on speed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn evlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evlab"))
        .args(args)
        .output()
        .expect("run evlab")
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("evlab-micro-report-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every file of `dir` by name, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            (
                e.file_name().to_string_lossy().to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Runs the experiment `benchmark` with `args` into `dir/out`; returns the results directory.
fn run(dir: &Path, benchmark: &str, args: &str) -> PathBuf {
    let spec = dir.join(format!("tiny-{benchmark}.toml"));
    std::fs::write(
        &spec,
        format!(
            "name = \"tiny-{benchmark}\"\ndescription = \"a test\"\n[micro]\n\
             benchmark = \"{benchmark}\"\nargs = [{args}]\n"
        ),
    )
    .unwrap();
    let out = dir.join(format!("out-{benchmark}"));
    let o = evlab(&[
        "run",
        spec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("evlab run: {benchmark} in ")),
        "{}",
        text(&o)
    );
    out
}

/// Deletes the report and figures of `out`, runs `evlab report` on it, and checks that it
/// wrote back exactly the files the run had written.
fn rerendered_identically(out: &Path) {
    let before = files(out);
    for f in before.keys() {
        if f.starts_with("report.") || f.starts_with("fig-") || f == "findings.json" {
            std::fs::remove_file(out.join(f)).unwrap();
        }
    }
    let o = evlab(&["report", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let after = files(out);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (f, bytes) in &before {
        assert!(after[f] == *bytes, "{f} differs after evlab report");
    }
}

#[test]
fn micro_runs_write_figures_that_evlab_report_writes_again() {
    let dir = scratch("runs");
    let p = run(
        &dir,
        "pipetest",
        "\"--mechanism\", \"poll,epoll-lt\", \"--pipes\", \"2,6,20\", \"--generations\", \"4\", \
         \"--repeat\", \"2\"",
    );
    let svg = std::fs::read_to_string(p.join("fig-pipetest.svg")).unwrap();
    for m in ["poll", "epoll-lt"] {
        let pts = svg
            .split(&format!("data-series=\"{m}\" points=\""))
            .nth(1)
            .unwrap_or_else(|| panic!("no line for {m}: {svg}"));
        assert_eq!(pts.split('"').next().unwrap().split(' ').count(), 3, "{m}");
    }
    assert!(svg.contains("pipes (log scale)"));
    let md = std::fs::read_to_string(p.join("report.md")).unwrap();
    assert!(md.contains("](fig-pipetest.svg)"), "{md}");
    let html = std::fs::read_to_string(p.join("report.html")).unwrap();
    assert!(
        html.contains("<figure id=\"fig-pipetest.svg\"><svg"),
        "{html}"
    );
    assert!(p.join("micro.json").is_file() && p.join("pipetest.json").is_file());
    // It opens with the findings chart, a row per finding of the findings.json beside it.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("findings.json")).unwrap()).unwrap();
    let ids: Vec<&str> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "pipetest-poll-falls",
            "pipetest-epoll-flat",
            "pipetest-epoll-beats-poll-aio"
        ]
    );
    let chart = &html[html
        .find("<figure id=\"fig-findings\"><svg")
        .expect("a chart")..];
    // The benchmark's own figure comes after the chart.
    assert!(chart.contains("<figure id=\"fig-pipetest.svg\">"));
    for id in ids {
        assert!(chart.contains(&format!("data-finding=\"{id}\"")), "{id}");
    }
    // The machine was checked before the benchmark, as before a sweep, and the report says so.
    let record: evlab_lab::model::micro::MicroRun =
        serde_json::from_str(&std::fs::read_to_string(p.join("micro.json")).unwrap()).unwrap();
    assert!(
        record
            .quiet
            .as_ref()
            .is_some_and(|q| !q.cpu_busy.is_empty()),
        "{record:?}"
    );
    assert!(md.contains("Before the run the machine was "), "{md}");
    rerendered_identically(&p);

    let f = run(
        &dir,
        "fdalloc",
        "\"--total\", \"300\", \"--points\", \"3\", \"--repeat\", \"1\"",
    );
    let svg = std::fs::read_to_string(f.join("fig-fdalloc.svg")).unwrap();
    // The two opens, both, and the negative control's second allocation.
    assert_eq!(svg.matches("<polyline class=\"series\"").count(), 4);
    rerendered_identically(&f);

    let m = run(
        &dir,
        "malloc",
        "\"--workers\", \"1,2\", \"--iterations\", \"1000\"",
    );
    let svg = std::fs::read_to_string(m.join("fig-malloc.svg")).unwrap();
    assert!(svg.contains("data-series=\"threads\"") && svg.contains("data-series=\"processes\""));
    rerendered_identically(&m);

    let h = run(
        &dir,
        "herd",
        "\"--workers\", \"1,2\", \"--conns\", \"4\", \"--mode\", \"accept,epoll\", \
         \"--as\", \"threads\"",
    );
    for f in ["wakeups", "cpu", "balance"] {
        let svg = std::fs::read_to_string(h.join(format!("fig-herd-{f}-threads.svg"))).unwrap();
        assert_eq!(svg.matches("<polyline class=\"series\"").count(), 2, "{f}");
        assert!(svg.contains("data-series=\"blocking accept\""), "{f}");
    }
    assert!(!h.join("fig-herd-wakeups-processes.svg").exists());
    rerendered_identically(&h);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_refuses_what_is_not_a_results_directory() {
    let dir = scratch("bad");
    let o = evlab(&["report", dir.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("neither summary.json") && text(&o).contains("micro.json"),
        "{}",
        text(&o)
    );
    let o = evlab(&["report", dir.join("nope").to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(text(&o).contains("is not a directory"), "{}", text(&o));
    // A benchmark's JSON alone (written by the subcommand, not by `evlab run`).
    let o = evlab(&[
        "micro",
        "fdalloc",
        "--total",
        "200",
        "--points",
        "2",
        "--repeat",
        "1",
        "--json",
        dir.join("fdalloc.json").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = evlab(&["report", dir.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("holds fdalloc.json but no micro.json"),
        "{}",
        text(&o)
    );
    // A truncated record is named; the report is not touched.
    std::fs::write(dir.join("micro.json"), "{\"format\": 1, \"name\": \"x").unwrap();
    let o = evlab(&["report", dir.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("micro.json: not a micro-benchmark run's record"),
        "{}",
        text(&o)
    );
    assert!(!text(&o).contains("panicked"), "{}", text(&o));
    assert!(!dir.join("report.md").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
