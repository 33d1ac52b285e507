//! The micro-benchmarks' reports: figures, findings chart, findings.json.

use crate::render::svg::esc;
use std::path::PathBuf;

use serde::Serialize;

use super::*;
use crate::model::machine;
use crate::model::micro::orphan_json;
use evlab_wire::micro::{fdalloc, herd, malloc, pipetest};

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("evlab-micro-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A results directory as a run of `benchmark` leaves it, with `report` as its JSON.
fn dir_with<T: Serialize>(tag: &str, benchmark: &str, report: &T) -> PathBuf {
    let d = scratch(tag);
    let run = MicroRun {
        format: results::FORMAT,
        name: format!("test-{benchmark}"),
        description: "a <test> & more".into(),
        spec_path: "t.toml".into(),
        benchmark: benchmark.into(),
        json: format!("{benchmark}.json"),
        bench_command: format!("evlab {benchmark}"),
        command: "evlab run t.toml".into(),
        started: "2026-11-23T20:00:00Z".into(),
        finished: Some("2026-11-23T20:00:01Z".into()),
        wall_s: 1.0,
        interrupted: false,
        failure: None,
        machine: machine::Machine::default(),
        quiet: None,
    };
    std::fs::write(d.join(RECORD), serde_json::to_string(&run).unwrap()).unwrap();
    std::fs::write(d.join(&run.json), serde_json::to_string(report).unwrap()).unwrap();
    d
}

fn read_file(d: &Path, f: &str) -> String {
    std::fs::read_to_string(d.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"))
}

/// The number of points of the polyline labelled `label` in `svg` (None: no such line).
fn line_points(svg: &str, label: &str) -> Option<usize> {
    let pts = svg
        .split(&format!("data-series=\"{}\" points=\"", esc(label)))
        .nth(1)?;
    Some(pts.split('"').next()?.split(' ').count())
}

/// Writes the report, checks that md and html embed every figure, that each figure file is
/// an SVG, and that writing again gives the same bytes; returns the figures by name.
fn written(d: &Path) -> Vec<(String, String)> {
    write_report(d).unwrap();
    let md = read_file(d, "report.md");
    let html = read_file(d, "report.html");
    let mut figs: Vec<(String, String)> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|f| f.starts_with("fig-") && f.ends_with(".svg"))
        .map(|f| {
            let svg = read_file(d, &f);
            (f, svg)
        })
        .collect();
    figs.sort();
    for (f, svg) in &figs {
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"), "{f}");
        assert!(md.contains(&format!("]({f})")), "{f} not in report.md");
        assert!(
            html.contains(&format!("<figure id=\"{f}\">{svg}</figure>")),
            "{f}"
        );
    }
    assert!(md.contains("Findings on this run"));
    assert!(html.contains("a &lt;test&gt; &amp; more"));
    write_report(d).unwrap();
    assert_eq!(read_file(d, "report.md"), md);
    assert_eq!(read_file(d, "report.html"), html);
    figs
}

fn machine() -> evlab_wire::micro::Machine {
    evlab_wire::micro::Machine {
        kernel: "6.18".into(),
        cpus: 2,
        glibc: "2.36".into(),
        nofile: 20000,
    }
}

#[test]
fn the_quiet_check_is_recorded_and_reported_and_old_records_read_without_it() {
    let r = pipetest::Report {
        benchmark: "pipetest".into(),
        machine: machine(),
        message_threads: 1,
        max_generation: 300,
        route: pipetest::Route::Stride17,
        repeat: 3,
        mechanisms: vec!["poll".into()],
        pipes: vec![10],
        points: vec![],
        findings: vec![],
        slopes: vec![],
    };
    // A record written before micro runs checked the machine has no `quiet` key: it reads,
    // and its report says nothing of it.
    let d = dir_with("quiet-old", "pipetest", &r);
    let text = read_file(&d, RECORD);
    assert!(!text.contains("quiet"), "{text}");
    let mut run: MicroRun = serde_json::from_str(&text).unwrap();
    assert_eq!(run.quiet, None);
    write_report(&d).unwrap();
    let old = read_file(&d, "report.md");
    assert!(!old.contains("Before the run the machine"), "{old}");
    // A run that checked: recorded, read back, and its report says what it saw.
    for (cpu, says) in [
        (
            0.02,
            "Before the run the machine was quiet: CPUs busy 2%, 3% over 1.0 s",
        ),
        (
            0.60,
            "**Before the run the machine was not quiet** (CPU 0 60% busy",
        ),
    ] {
        run.quiet = Some(crate::model::machine::Quiet {
            seconds: 1.0,
            cpu_busy: vec![cpu, 0.03],
            steal: 0.0,
            busy_processes: vec![],
        });
        let text = serde_json::to_string(&run).unwrap();
        std::fs::write(d.join(RECORD), &text).unwrap();
        let back: MicroRun = serde_json::from_str(&text).unwrap();
        assert_eq!(back, run);
        write_report(&d).unwrap();
        let md = read_file(&d, "report.md");
        assert!(md.contains(says), "{md}");
        assert!(read_file(&d, "report.html").contains("Before the run the machine"));
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn pipetest_figure_has_a_line_per_mechanism_on_a_log_x_axis() {
    let pt = |m: &str, pipes: usize, v: Option<f64>| pipetest::Point {
        mechanism: m.into(),
        pipes,
        status: if v.is_some() {
            pipetest::Status::Ok
        } else {
            pipetest::Status::Skipped
        },
        reason: v.is_none().then(|| "too many descriptors".into()),
        passes_per_sec: v,
        // Three sweeps, each the same line a little higher or lower: k is the same in each.
        runs: v
            .map(|v| {
                [0.98, 1.0, 1.02]
                    .iter()
                    .map(|f| pipetest::Run {
                        passes: 300,
                        seconds: 300.0 / (v * f),
                        passes_per_sec: v * f,
                        setup_seconds: 0.0,
                        waits: 300,
                        events: 300,
                        empty_reads: 0,
                        syscalls: Default::default(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    };
    let mut r = pipetest::Report {
        benchmark: "pipetest".into(),
        machine: machine(),
        message_threads: 1,
        max_generation: 300,
        route: pipetest::Route::Stride17,
        repeat: 3,
        mechanisms: vec!["poll".into(), "epoll-lt".into()],
        pipes: vec![10, 100, 1000, 16000],
        points: vec![],
        findings: vec![],
        slopes: vec![],
    };
    for (i, &pipes) in r.pipes.clone().iter().enumerate() {
        let top = pipes == 16000;
        r.points.push(pt(
            "poll",
            pipes,
            (!top).then(|| 1e5 / 10f64.powi(i as i32)),
        ));
        r.points.push(pt("epoll-lt", pipes, (!top).then_some(3e5)));
    }
    r.slopes = crate::analysis::micro::pipetest::slopes(&r);
    r.findings = crate::analysis::micro::pipetest::findings(&r);
    let d = dir_with("pipetest", "pipetest", &r);
    let figs = written(&d);
    assert_eq!(figs.len(), 1);
    let (f, svg) = &figs[0];
    assert_eq!(f, "fig-pipetest.svg");
    assert_eq!(
        line_points(svg, "poll"),
        Some(3),
        "16,000 was skipped: a gap"
    );
    assert_eq!(line_points(svg, "epoll-lt"), Some(3));
    assert!(svg.contains("pipes (log scale)"));
    // poll falls a hundredfold: the y axis is logarithmic, or its fall would lie flat.
    assert!(svg.contains(">passes per second (log scale)<"));
    for tick in [">10<", ">100<", ">1,000<"] {
        assert!(svg.contains(tick), "{tick}");
    }
    let md = read_file(&d, "report.md");
    assert!(
        md.contains(
            "| `pipetest-poll-falls` | poll falls as the pipes grow: rate ∝ pipes^k with k < -0.5"
        ),
        "{md}"
    );
    assert!(
        md.contains("| reproduced | poll: k = -1.00 [-1.00, -1.00] over 3 sweeps"),
        "{md}"
    );
    assert!(md.contains("aio-poll was not measured"), "{md}");
    assert!(md.contains("docs/findings.md"), "{md}");
    let html = read_file(&d, "report.html");
    assert!(
        html.contains("<td class=\"verdict-reproduced\">reproduced</td>"),
        "{html}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn fdalloc_figure_has_both_opens_against_n() {
    let r = fdalloc::Report {
        benchmark: "fdalloc".into(),
        machine: machine(),
        op: fdalloc::Op::Open,
        repeat: 1,
        total: 1000,
        first: 3,
        highest: 1002,
        points: [10u64, 500, 1000]
            .iter()
            .map(|&n| fdalloc::Point {
                n,
                first_fd: 3,
                second_fd: n,
                first_open_ns: 1000.0,
                second_open_ns: 1200.0,
                both_ns: 2200.0,
                second_runs_ns: vec![],
            })
            .collect(),
        findings: vec![],
        negative_control: None,
    };
    let d = dir_with("fdalloc", "fdalloc", &r);
    let figs = written(&d);
    assert_eq!(figs.len(), 1);
    let svg = &figs[0].1;
    for l in ["1st open", "2nd open (finds n)", "both"] {
        assert_eq!(line_points(svg, l), Some(3), "{l}");
    }
    assert!(!svg.contains("log scale"));
    assert!(svg.contains("(ns, median)"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn malloc_figure_has_threads_and_processes_on_log_axes() {
    let pt = |mode, workers: usize| malloc::Point {
        mode,
        workers,
        pairs: 1000 * workers as u64,
        wall_seconds: 0.01 * workers as f64,
        worker_seconds_mean: 0.01,
        worker_seconds_max: 0.01,
        ns_per_pair: 10.0,
        null_ns_per_iteration: 1.0,
        pairs_per_sec: 1e8,
        wall_runs_seconds: vec![],
    };
    let r = malloc::Report {
        benchmark: "malloc".into(),
        machine: machine(),
        allocator: "glibc 2.36 malloc/free, through Rust's System allocator".into(),
        iterations: 1000,
        size: 512,
        repeat: 1,
        points: [1, 2, 4, 8, 16, 32, 64]
            .iter()
            .flat_map(|&n| [pt(malloc::Mode::Threads, n), pt(malloc::Mode::Processes, n)])
            .collect(),
        findings: vec![],
    };
    let d = dir_with("malloc", "malloc", &r);
    let figs = written(&d);
    let svg = &figs[0].1;
    assert_eq!(line_points(svg, "threads"), Some(7));
    assert_eq!(line_points(svg, "processes"), Some(7));
    assert!(svg.contains("workers (log scale)"));
    assert!(svg.contains("elapsed time (s) (log scale)"));
    for tick in [">1<", ">2<", ">4<", ">8<", ">16<", ">32<", ">64<"] {
        assert!(svg.contains(tick), "{tick}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn herd_figures_per_way_of_running_with_a_line_per_mode() {
    let pt = |mode: herd::Mode, n: usize| herd::Point {
        mode,
        round: 0,
        as_: herd::As::Threads,
        workers: n,
        status: herd::Status::Ok,
        reason: None,
        connections: 10,
        client_errors: 0,
        accepted: 10,
        per_worker: vec![10 / n as u64; n],
        wakeups_per_accept: if mode == herd::Mode::Poll {
            n as f64
        } else {
            1.0
        },
        empty_wakeups: 0,
        involuntary_switches: 0,
        cpu_us_per_accept: 20.0,
        wall_us_per_connection: 100.0,
        balance_cv: 0.0,
        latency: Default::default(),
        worker_stats: vec![],
    };
    let r = herd::Report {
        benchmark: "herd".into(),
        machine: machine(),
        conns: 10,
        clients: 1,
        repeat: 1,
        points: herd::Mode::ALL
            .iter()
            .flat_map(|&m| [1, 2, 4, 8].map(|n| pt(m, n)))
            .collect(),
        findings: vec![],
    };
    let d = dir_with("herd", "herd", &r);
    let figs = written(&d);
    let names: Vec<&str> = figs.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "fig-herd-balance-threads.svg",
            "fig-herd-cpu-threads.svg",
            "fig-herd-wakeups-threads.svg"
        ],
        "no processes were run: no figures for them"
    );
    let w = &figs[2].1;
    for m in herd::Mode::ALL {
        assert_eq!(line_points(w, m.legend()), Some(4), "{m:?}");
    }
    assert!(w.contains("waiting workers (log scale)"));
    assert!(figs[1].1.contains("CPU time per accept (µs)"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_directories_are_named_and_leave_the_report_alone() {
    let d = scratch("bad");
    let e = write_report(&d).unwrap_err().to_string();
    assert!(e.contains("micro.json") && e.contains("cannot read"), "{e}");
    assert!(orphan_json(&d).is_none());
    std::fs::write(d.join("herd.json"), "{}").unwrap();
    assert_eq!(orphan_json(&d).as_deref(), Some("herd.json"));
    // A truncated record, then a truncated benchmark JSON: each named, nothing written.
    std::fs::write(d.join(RECORD), "{\"format\": 1, \"na").unwrap();
    let e = write_report(&d).unwrap_err().to_string();
    assert!(
        e.contains("micro.json: not a micro-benchmark run's record"),
        "{e}"
    );
    let good = dir_with("bad2", "herd", &serde_json::json!({}));
    std::fs::write(good.join("herd.json"), "{\"benchmark\": \"he").unwrap();
    let e = write_report(&good).unwrap_err().to_string();
    assert!(e.contains("herd.json: not the benchmark's report"), "{e}");
    assert!(!good.join("report.md").exists());
    // A run that failed has a report that says so, and no figure.
    let mut run: MicroRun = read(&good.join(RECORD), "").unwrap();
    run.failure = Some("exit status: 1; stderr: boom".into());
    std::fs::write(good.join(RECORD), serde_json::to_string(&run).unwrap()).unwrap();
    write_report(&good).unwrap();
    assert!(read_file(&good, "report.md").contains("The benchmark failed: exit status: 1"));
    // An unknown benchmark is an error, not a panic.
    run.failure = None;
    run.benchmark = "nope".into();
    std::fs::write(good.join(RECORD), serde_json::to_string(&run).unwrap()).unwrap();
    let e = write_report(&good).unwrap_err().to_string();
    assert!(e.contains("unknown micro-benchmark `nope`"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&good);
}

/// fdalloc's report at n = 1,000 to 8,000 whose second open takes 300 × (n/1000)^k ns in
/// every round (k per round from `kernel`), with a negative control of exponents `control`.
fn fdalloc_with_control(kernel: &[f64], control: &[f64]) -> fdalloc::Report {
    let points = crate::analysis::micro::fdalloc::synthetic;
    let repeat = kernel.len();
    let c = points(control);
    let finding = crate::analysis::micro::fdalloc::flat(
        &c,
        repeat,
        "allocation",
        crate::analysis::micro::fdalloc::FLAT_RULE,
        crate::analysis::micro::fdalloc::FLAT_CLAIM,
    );
    let mut r = fdalloc::Report {
        benchmark: "fdalloc".into(),
        machine: machine(),
        op: fdalloc::Op::Open,
        repeat,
        total: 8000,
        first: 3,
        highest: 8002,
        points: points(kernel),
        findings: vec![],
        negative_control: Some(fdalloc::Control {
            allocator: "a linear scan".into(),
            slots: 8003,
            points: c,
            finding,
        }),
    };
    r.findings = crate::analysis::micro::fdalloc::findings(&r);
    r
}

/// The attributes of each findings-chart row in the first `<svg>` of `html`.
fn chart_rows_of(html: &str) -> Vec<Vec<(String, String)>> {
    let start = html.find("<svg").expect("an svg");
    let svg = &html[start..start + html[start..].find("</svg>").unwrap()];
    svg.split("<g class=\"row\"")
        .skip(1)
        .map(|r| {
            r[..r.find('>').unwrap()]
                .split("\" ")
                .filter_map(|a| {
                    let (k, v) = a.trim().split_once("=\"")?;
                    Some((k.to_string(), v.trim_end_matches('"').to_string()))
                })
                .collect()
        })
        .collect()
}

fn attr<'a>(row: &'a [(String, String)], k: &str) -> Option<&'a str> {
    row.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
}

/// A micro report opens with the findings chart, drawn by the sweep's own chart function: one
/// row per finding, each with the factor its rule decided on (10^k per tenfold for fdalloc's
/// exponent), its interval and rounds, equal to the findings.json written beside it; and the
/// negative control's status beside the chart.
#[test]
fn a_micro_report_opens_with_its_findings_chart_and_writes_findings_json() {
    let r = fdalloc_with_control(&[0.0, 0.01, -0.01, 0.0], &[1.0, 0.98, 1.02, 1.0]);
    let d = dir_with("chart", "fdalloc", &r);
    written(&d);
    let html = read_file(&d, "report.html");
    let json: serde_json::Value = serde_json::from_str(&read_file(&d, "findings.json")).unwrap();
    let fs = json["findings"].as_array().unwrap();
    assert_eq!(fs.len(), 2);
    assert_eq!(json["controls"]["negative"], "passed");
    assert_eq!(json["controls"]["positive"], "absent");
    let rows = chart_rows_of(&html);
    assert_eq!(rows.len(), fs.len(), "{html:.2000}");
    for (row, f) in rows.iter().zip(fs) {
        assert_eq!(attr(row, "data-finding"), f["id"].as_str());
        assert_eq!(attr(row, "data-verdict"), f["verdict"].as_str());
        for k in ["ratio", "lo", "hi", "n"] {
            let drawn = attr(row, &format!("data-{k}")).map(|x| x.parse::<f64>().unwrap());
            assert_eq!(drawn, f[k].as_f64(), "{k}");
            assert!(drawn.is_some(), "{k}");
        }
    }
    // The kernel's k is 0: a factor of 1 per tenfold, inside the rule's region (≤ 3.16); the
    // linear scan's k is 1: 10 per tenfold, outside it.
    let ratio = |i: usize| fs[i]["ratio"].as_f64().unwrap();
    assert!((ratio(0) - 1.0).abs() < 0.01, "{}", ratio(0));
    assert!((ratio(1) - 10.0).abs() < 0.2, "{}", ratio(1));
    assert!(fs[1]["lo"].as_f64().unwrap() > crate::analysis::rules::FD_HALFWAY);
    assert_eq!(fs[0]["verdict"], "reproduced");
    assert_eq!(fs[1]["verdict"], "not reproduced");
    assert_eq!(fs[0]["n"], 4);
    // The chart comes first, with the rule's region and the quantity named under each row.
    let chart = html.find("id=\"fig-findings\"").unwrap();
    assert!(chart < html.find("<table").unwrap());
    assert!(chart < html.find("id=\"fig-fdalloc.svg\"").unwrap());
    assert!(html.contains("10^k per tenfold of n, the second open"));
    assert!(html[chart..].contains("class=\"region\""));
    let controls = html.find("id=\"controls\"").expect("the controls");
    assert!(html[controls..].contains(
        "<strong>Negative control</strong>: <span class=\"control-passed\">passed</span>"
    ));
    assert!(!html[controls..].contains("Placebo control"));
    // report.md gives the chart's rows as a table, before the first figure.
    let md = read_file(&d, "report.md");
    let head = md.find("| finding | quantity | value [90%] |").expect(&md);
    assert!(head < md.find("](fig-").unwrap());
    assert!(md.contains("| `fdalloc-flat` | 10^k per tenfold of n, the second open | 1.00 ["));
    assert!(md.contains("| value ≤ 3.16 |"), "{md}");
    assert!(md.contains("- Negative control: passed"), "{md}");
    assert!(md.contains("found 1 reproduced, 1 not reproduced, 0 inconclusive"));
    let _ = std::fs::remove_dir_all(&d);
}

/// A control that the rule called flat fails, and is said so; a verdict today's rule would not
/// give draws no interval beside it; a benchmark without controls has no controls' list.
#[test]
fn a_failed_control_and_a_verdict_of_another_day_are_shown_as_they_are() {
    let r = fdalloc_with_control(&[0.0, 0.01, -0.01, 0.0], &[0.0, 0.01, -0.01, 0.0]);
    let d = dir_with("failed", "fdalloc", &r);
    write_report(&d).unwrap();
    let json: serde_json::Value = serde_json::from_str(&read_file(&d, "findings.json")).unwrap();
    assert_eq!(json["controls"]["negative"], "failed");
    assert!(read_file(&d, "report.html").contains(
        "<strong>Negative control</strong>: <span class=\"control-failed\">failed</span>"
    ));
    // The stored verdict says "not reproduced" where today's rule reproduces it.
    let mut r = fdalloc_with_control(&[0.0, 0.01, -0.01, 0.0], &[1.0, 1.0, 1.0, 1.0]);
    r.negative_control = None;
    r.findings.truncate(1);
    r.findings[0].verdict = Verdict::NotReproduced;
    let d2 = dir_with("other-day", "fdalloc", &r);
    write_report(&d2).unwrap();
    let html = read_file(&d2, "report.html");
    let rows = chart_rows_of(&html);
    assert_eq!(rows.len(), 1);
    assert_eq!(attr(&rows[0], "data-verdict"), Some("not reproduced"));
    assert_eq!(attr(&rows[0], "data-ratio"), None);
    assert!(
        html.contains("today&#39;s rule decides this report otherwise")
            || html.contains("today's rule decides this report otherwise")
    );
    assert!(!html.contains("id=\"controls\""), "no controls: no list");
    let json: serde_json::Value = serde_json::from_str(&read_file(&d2, "findings.json")).unwrap();
    assert_eq!(json["findings"][0]["ratio"], serde_json::Value::Null);
    assert_eq!(json["controls"]["negative"], "absent");
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&d2);
}

/// A report whose findings predate the rules (no rule named) has no chart and no
/// findings.json: its findings were decided on medians, with no interval to draw.
#[test]
fn findings_from_before_the_rules_draw_no_chart() {
    let mut r = fdalloc_with_control(&[0.0, 0.01, -0.01], &[1.0, 1.0, 1.0]);
    for f in r.findings.iter_mut() {
        f.rule.clear();
    }
    let d = dir_with("before-rules", "fdalloc", &r);
    write_report(&d).unwrap();
    assert!(!d.join("findings.json").exists());
    let html = read_file(&d, "report.html");
    assert!(!html.contains("fig-findings"));
    assert!(read_file(&d, "report.md").contains("predates the registered micro rules"));
    let _ = std::fs::remove_dir_all(&d);
}
