//! The proxy paper's figure experiments (fig-proxy-combined, -rt, -rate, -conns) run for real,
//! shortened: the shipped file with points of 1 s, one trial, two series, low rates and fewer
//! idle connections. Each writes its report with its figures and names its rules' findings
//! (inconclusive on one trial: the rules need three). Each run is a handful of points.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn evlab() -> &'static str {
    env!("CARGO_BIN_EXE_evlab")
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("evlab-proxy-figs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The shipped experiment `name` with `key = …` lines replaced by `set` and only the series
/// labelled in `keep`.
fn shortened(name: &str, set: &[(&str, &str)], keep: &[&str]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments")
        .join(format!("{name}.toml"));
    let text = std::fs::read_to_string(path).unwrap();
    let mut blocks = text.split("\n[[series]]\n");
    let head = blocks.next().unwrap();
    let mut out: Vec<String> = head
        .lines()
        .map(|l| {
            let key = l.split(" = ").next().unwrap_or("");
            match set.iter().find(|(k, _)| *k == key) {
                Some((k, v)) => format!("{k} = {v}"),
                None => l.to_string(),
            }
        })
        .collect();
    let mut kept = 0;
    for b in blocks {
        if keep
            .iter()
            .any(|l| b.contains(&format!("label = \"{l}\"\n")))
        {
            out.push(format!("\n[[series]]\n{}", b.trim_end()));
            kept += 1;
        }
    }
    assert_eq!(kept, keep.len(), "{name}: series {keep:?}");
    out.join("\n") + "\n"
}

/// Runs `spec`, and returns the report's directory and its report.md.
fn run(tag: &str, spec: &str) -> (PathBuf, String) {
    let d = scratch(tag);
    let f = d.join("spec.toml");
    std::fs::write(&f, spec).unwrap();
    let t = Instant::now();
    let o = Command::new(evlab())
        .arg("run")
        .arg(&f)
        .arg("--out")
        .arg(d.join("out"))
        .arg("--quiet")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(t.elapsed() < Duration::from_secs(90), "{:?}", t.elapsed());
    let out = d.join("out");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    (out, md)
}

/// Every figure of `files` is written and drawn in report.md.
fn has_figures(out: &Path, md: &str, files: &[&str]) {
    for f in files {
        assert!(out.join(f).is_file(), "missing {f}");
        assert!(md.contains(&format!("]({f})")), "report.md lacks {f}");
    }
}

/// Removes a passing run's scratch directory (a failing one is kept to look at).
fn clean(out: &Path) {
    let _ = std::fs::remove_dir_all(out.parent().unwrap());
}

/// Whether `series` ran (not skipped: io_uring may be refused here, and the lab says why).
fn ran(out: &Path, series: &str) -> bool {
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let v: evlab_lab::model::results::Summary = serde_json::from_str(&summary).unwrap();
    v.series.iter().any(|s| s.label == series)
}

const SHORT: &[(&str, &str)] = &[
    ("duration_s", "1"),
    ("trials", "1"),
    ("timeout_s", "5"),
    ("polymix_objects", "200"),
];

fn with<'a>(more: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    SHORT.iter().chain(more).copied().collect()
}

#[test]
fn fig_proxy_combined_shortened_writes_its_report() {
    let spec = shortened(
        "fig-proxy-combined",
        &with(&[("rates", "[20]"), ("idle", "[0, 50]")]),
        &["select copy", "uring-poll splice-keep"],
    );
    let (out, md) = run("combined", &spec);
    has_figures(
        &out,
        &md,
        &[
            "fig-cpu-vs-idle.svg",
            "fig-rt-idle0.svg",
            "fig-rt-idle50.svg",
        ],
    );
    assert!(md.contains("## Response time"), "{md}");
    if ran(&out, "uring-poll splice-keep") {
        assert!(md.contains("Rule: A/B ≤ 0.71."), "{md}");
        assert!(
            md.contains("the rule needs ≥ 3 valid trials per arm"),
            "{md}"
        );
    }
    clean(&out);
}

#[test]
fn fig_proxy_rt_shortened_writes_its_report() {
    let spec = shortened(
        "fig-proxy-rt",
        &with(&[("rates", "[20]"), ("idle", "[0]")]),
        &["select copy", "select splice-release"],
    );
    let (out, md) = run("rt", &spec);
    has_figures(&out, &md, &["fig-rt-idle0.svg"]);
    for col in [
        "| p50 (ms) | p90 (ms) | p99 (ms) | mean (ms) |",
        "| select splice-release |",
    ] {
        assert!(md.contains(col), "{col}: {md}");
    }
    clean(&out);
}

#[test]
fn fig_proxy_rate_shortened_writes_its_report() {
    let spec = shortened(
        "fig-proxy-rate",
        &with(&[("rates", "[20, 40]")]),
        &["select copy", "select splice-release"],
    );
    let (out, md) = run("rate", &spec);
    has_figures(
        &out,
        &md,
        &[
            "fig-cpu-idle0.svg",
            "fig-p99-idle0.svg",
            "fig-rt-p50-idle0.svg",
            "fig-rt-mean-idle0.svg",
        ],
    );
    // Both rules, at the lowest and the highest rate, inconclusive on one trial.
    for rate in ["at 20/s offered", "at 40/s offered"] {
        assert!(
            md.contains(&format!("{rate}: A select splice-release, no idle: n = ")),
            "{rate}: {md}"
        );
    }
    clean(&out);
}

#[test]
fn fig_proxy_conns_shortened_writes_its_report() {
    let spec = shortened(
        "fig-proxy-conns",
        &with(&[("rates", "[10]"), ("idle", "[1000, 5000]")]),
        &["select copy", "uring-poll copy"],
    );
    let (out, md) = run("conns", &spec);
    has_figures(
        &out,
        &md,
        &[
            "fig-cpu-vs-idle.svg",
            "fig-rt-idle1000.svg",
            "fig-rt-idle5000.svg",
        ],
    );
    if ran(&out, "uring-poll copy") {
        // Fig. 4's flat uselect, from 1,000 to 5,000, and Fig. 6's response time at 5,000.
        assert!(
            md.contains("A = uring-poll copy, 5,000 idle; B = uring-poll copy, 1,000 idle"),
            "{md}"
        );
        assert!(md.contains("Rule: A/B ≤ 0.69."), "{md}");
    }
    clean(&out);
}
