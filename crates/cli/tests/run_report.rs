//! `evlab run` as issue 12 asks, with the real binary: `-q` keeps one line per point, a rate
//! search's ETA is an estimate at its knee (not every possible rate), `--list` gives points and
//! times, and the report's figures, validity table and reproduction commands — those replayed
//! after the run, when its scratch directory is gone.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;

use common::Scratch;
use evlab_lab::model::results::Summary;
use evlab_wire::load::LoadReport;

fn evlab() -> &'static str {
    env!("CARGO_BIN_EXE_evlab")
}

/// A run's summary.json, read as the lab's own type.
fn summary(out: &Path) -> Summary {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

fn scratch(tag: &str) -> Scratch {
    common::scratch(&format!("evlab-run-report-{tag}"))
}

fn run(spec: &str, dir: &Path, extra: &[&str]) -> Output {
    let f = dir.join("spec.toml");
    std::fs::write(&f, spec).unwrap();
    let t = Instant::now();
    let out = Command::new(evlab())
        .arg("run")
        .arg(&f)
        .arg("--out")
        .arg(dir.join("out"))
        .args(extra)
        .output()
        .unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "a test run must stay short"
    );
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn read(dir: &Path, f: &str) -> String {
    std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"))
}

/// Tick labels (`text-anchor="end"`: y; `"middle"` numbers: x) of an SVG figure.
fn tick_labels(svg: &str) -> Vec<String> {
    let mut out = Vec::new();
    for anchor in [r#"text-anchor="end">"#, r#"text-anchor="middle">"#] {
        out.extend(
            svg.split(anchor)
                .skip(1)
                .map(|t| t.split('<').next().unwrap().to_string())
                .filter(|t| {
                    !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || ",.-".contains(c))
                }),
        );
    }
    out
}

#[test]
fn quiet_run_then_its_report_and_its_commands_replayed_after_the_run() {
    if !evlab_poll::testing::program("curl") {
        return;
    }
    let d = scratch("replay");
    let spec = "name = \"replay\"\nmechanisms = [\"epoll-et\"]\nrates = [100]\nidle = [0, 20]\n\
                duration_s = 1\ntimeout_s = 1\n";
    let o = run(spec, &d, &["-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = d.join("out");

    // 1. -q: one line per point, nothing else on stderr (no bar, no ETA, no notes).
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    // The trial visits its two arms (idle 0 and 20) in a drawn order.
    let (a, b) = if lines[0].contains(" idle=0 ") {
        (0, 20)
    } else {
        (20, 0)
    };
    assert!(
        lines[0].starts_with(&format!("  1/2 epoll-et idle={a} rate=100: ")),
        "{err}"
    );
    assert!(
        lines[1].starts_with(&format!("  2/2 epoll-et idle={b} rate=100: ")),
        "{err}"
    );
    assert!(!err.contains("ETA") && !err.contains("evlab run:"), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("report:"));

    // 2. The report: ticks with one rule (thousands separated), errors as a share, p99 on a
    // log scale, validity with a column per check.
    for f in std::fs::read_dir(&out).unwrap() {
        let name = f.unwrap().file_name().to_string_lossy().to_string();
        if !name.ends_with(".svg") {
            continue;
        }
        let svg = read(&out, &name);
        for t in tick_labels(&svg) {
            let digits = t.split('.').next().unwrap().replace([',', '-'], "");
            assert!(
                digits.len() < 4 || t.contains(','),
                "{name}: tick {t} without its thousands separator"
            );
        }
    }
    // One rate and two idle counts: the figures put the idle connections on x (no figure of
    // one point per idle count); 100/s answered in full draws no reply-rate figure (its table
    // says it).
    assert!(read(&out, "fig-cpu-vs-idle.svg").contains(">idle connections<"));
    assert!(read(&out, "fig-p99-vs-idle.svg").contains("(log scale)"));
    assert!(!out.join("fig-replies-idle0.svg").exists());
    assert!(!out.join("fig-replies-vs-idle.svg").exists());
    let md = read(&out, "report.md");
    assert!(
        md.contains(
            "| series | idle | valid / points | client fell behind | client CPU saturated |"
        ),
        "{md}"
    );

    // 3. Every point's commands, run after the run (its scratch directory removed), measure
    // the point again.
    for p in summary(&out).points {
        let cmds: Vec<&str> = p.commands.iter().map(String::as_str).collect();
        assert!(cmds[0].starts_with("mkdir -p "), "{cmds:?}");
        let root = cmds[0]
            .trim_start_matches("mkdir -p ")
            .split(' ')
            .next()
            .unwrap();
        assert!(
            !Path::new(root).exists(),
            "{root} should be gone after the run"
        );
        let json = cmds
            .iter()
            .find(|c| c.contains(" load "))
            .and_then(|c| c.split("--json ").nth(1))
            .and_then(|c| c.split(' ').next())
            .unwrap()
            .to_string();
        let script = format!("set -e\n{}\n", cmds.join("\n"));
        let t = Instant::now();
        let r = Command::new("sh").arg("-c").arg(&script).output().unwrap();
        assert!(t.elapsed() < Duration::from_secs(30));
        assert!(
            r.status.success(),
            "replaying point {}: {}\n{script}",
            p.index,
            String::from_utf8_lossy(&r.stderr)
        );
        let report: LoadReport =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let replies = report.replies.total;
        assert!(
            replies >= 50,
            "point {} replayed: {replies} replies",
            p.index
        );
        // The replay made the run's scratch directory again: remove it, as the run did.
        let _ = std::fs::remove_dir_all(Path::new(&json).parent().unwrap().parent().unwrap());
    }
    d.finish();
}

#[test]
fn a_rate_search_eta_is_an_estimate_at_the_knee_refined_as_series_finish() {
    let d = scratch("search");
    // The issue's search: 348 possible rates. Every point fails (a flag evlab serve refuses),
    // so each series' search ends after `past` = 2 points below the offered rate.
    let spec = "name = \"search\"\nmechanisms = [\"poll\", \"epoll-et\"]\n\
                rate_search = { start = 100, step = 100, max = 34800 }\n\
                server_flags = [\"--no-such-flag\"]\nduration_s = 1\n";
    let o = run(spec, &d, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(!err.contains("/348") && !err.contains("/696"), "{err}");
    // Before anything is measured: the knee expected under a log-uniform prior, ~61 points
    // per series, said to be an estimate.
    assert!(err.contains("~122 points expected"), "{err}");
    // The trial visits its two arms in a drawn order: whichever comes first.
    let (first, second) = if err.contains("point 1/~122: poll idle=0") {
        ("poll", "epoll-et")
    } else {
        ("epoll-et", "poll")
    };
    assert!(
        err.contains(&format!(
            "point 1/~122: {first} idle=0 rate=100/s trial 1 (ETA ~"
        )),
        "{err}"
    );
    assert!(err.contains("an estimate"), "{err}");
    // The first series' search stops at its second point: that point's line counts the points
    // as they now stand, and the other's search is expected to be as long.
    assert!(
        err.contains(&format!("  2/~4 {first} idle=0 rate=200: FAILED")),
        "{err}"
    );
    assert!(
        err.contains(&format!("point 3/~4: {second} idle=0 rate=100/s")),
        "{err}"
    );
    assert_eq!(summary(&d.join("out")).points.len(), 4);
    d.finish();
}

#[test]
fn list_gives_points_times_needs_and_what_each_shows() {
    let o = Command::new(evlab())
        .args(["run", "--list"])
        .env("COLUMNS", "120")
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let row = |name: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name}: {text}"))
            .split_whitespace()
            .map(|s| s.to_string())
            .collect()
    };
    assert_eq!(row("experiment")[1..3], ["points", "time"]);
    // quick: 5 mechanisms × 2 idle counts and the control at one, × 1 calibrated rate × 3
    // trials (at most; fewer where this kernel lacks a mechanism, 6 fewer a series), each
    // point followed by a capacity search.
    let quick = row("quick");
    let n: usize = quick[1].trim_start_matches('≤').parse().unwrap();
    assert!(
        quick[1].starts_with('≤') && n <= 33 && n.is_multiple_of(3) && n > 0,
        "{quick:?}"
    );
    assert!(
        quick[2].starts_with('~') && quick[2].ends_with('s'),
        "{quick:?}"
    );
    // peers: fixed rates, an exact count; fig1: 120 s points, hours.
    assert!(row("peers")[1].parse::<usize>().is_ok(), "{text}");
    assert!(row("fig1-one-byte")[2].contains('h'), "{text}");
    assert!(text.contains("time: an estimate"), "{text}");
    // It fits 120 columns; what each needs is a column, marked where this machine lacks it.
    for l in text.lines() {
        assert!(
            l.chars().count() <= 120,
            "{} characters: {l}",
            l.chars().count()
        );
    }
    assert_eq!(row("experiment")[3..], ["needs", "what", "it", "shows"]);
    let needs = |name: &str| row(name)[3..].join(" ");
    assert!(needs("quick").starts_with("root/cgroup"), "{text}");
    assert!(needs("quick").contains("12k fds"), "{text}");
    assert!(needs("fig-proxy-cpu").contains("nginx"), "{text}");
    assert!(needs("testbed").contains("--hosts"), "{text}");
    // A micro-benchmark's time is the reference machine's, or a dash: never its name.
    for micro in ["pipetest", "herd", "fdalloc", "malloc", "readahead"] {
        let r = row(micro);
        assert_eq!(r[1], "—", "{r:?}");
        assert!(r[2] == "—" || r[2].starts_with('~'), "{r:?}");
        assert!(!text.contains(&format!("({micro})")), "{text}");
    }
    // At 80 columns, what each shows goes on lines of its own below its row.
    let o = Command::new(evlab())
        .args(["run", "--list"])
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    let narrow = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(narrow.lines().all(|l| l.chars().count() <= 80), "{narrow}");
    assert!(narrow.contains("\n    The paper's headline"), "{narrow}");
    // --duration changes the estimates.
    let o = Command::new(evlab())
        .args(["run", "--list", "--duration", "1"])
        .output()
        .unwrap();
    let short = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(short.contains("--duration 1 s per point"), "{short}");
    let fig1 = short
        .lines()
        .find(|l| l.starts_with("fig1-one-byte"))
        .unwrap();
    assert!(
        !fig1.split_whitespace().nth(2).unwrap().contains('h'),
        "{fig1}"
    );
}

#[test]
fn quiet_is_documented_as_it_behaves() {
    let o = Command::new(evlab())
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(help.contains("One line per finished point"), "{help}");
}
