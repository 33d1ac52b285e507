//! Every committed reference run re-renders, with today's code, to exactly the report that is
//! committed beside it: the reports under results/reference never go stale. When a change to
//! the rules or the rendering changes them, re-render them in the same commit
//! (`evlab report DIR` for each directory this test names).

use evlab_lab::render::svg::seed_values;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The results directories under results/reference/<machine>/ (an experiment's summary.json,
/// or a micro-benchmark's micro.json).
fn committed() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let root = workspace().join("results/reference");
    for machine in std::fs::read_dir(&root).unwrap().flatten() {
        if !machine.path().is_dir() {
            continue;
        }
        for run in std::fs::read_dir(machine.path()).unwrap().flatten() {
            let p = run.path();
            if p.join("summary.json").is_file() || p.join("micro.json").is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// The files `evlab report` writes: the reports and the figures.
fn rendered(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| {
            n == "report.md" || n == "report.html" || n == "findings.json" || n.ends_with(".svg")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn every_committed_report_rerenders_unchanged() {
    let dirs = committed();
    assert!(
        dirs.len() >= 5,
        "only {} committed runs under results/reference",
        dirs.len()
    );
    let scratch = std::env::temp_dir().join(format!("evlab-committed-{}", std::process::id()));
    let mut stale = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let copy = scratch.join(i.to_string());
        copy_dir(dir, &copy);
        let o = Command::new(env!("CARGO_BIN_EXE_evlab"))
            .arg("report")
            .arg(&copy)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "evlab report {}: {}",
            dir.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        let (before, after) = (rendered(dir), rendered(&copy));
        let rel = dir.strip_prefix(workspace()).unwrap_or(dir).display();
        if before != after {
            stale.push(format!("{rel}: files {before:?} became {after:?}"));
            continue;
        }
        for f in &before {
            if std::fs::read(dir.join(f)).unwrap() != std::fs::read(copy.join(f)).unwrap() {
                stale.push(format!("{rel}/{f}"));
            }
        }
    }
    std::fs::remove_dir_all(&scratch).unwrap();
    assert!(
        stale.is_empty(),
        "committed reports that today's code renders differently (re-render each with \
         `evlab report DIR`):\n{}",
        stale.join("\n")
    );
}

/// A negative control passes only when it is decided its own way ("not reproduced"): the
/// reference run whose control was inconclusive (0.82 [0.72–0.94]) no longer says it passed,
/// and its "no difference" verdicts are withheld.
#[test]
fn an_undecided_negative_control_does_not_pass() {
    let md = std::fs::read_to_string(
        workspace().join("results/reference/amd-epyc-2vcpu-linux-6.18/quick-knee-run8/report.md"),
    )
    .unwrap();
    assert!(!md.contains("Negative control: passed"), "{md}");
    assert!(md.contains("Negative control: underpowered"), "{md}");
    assert!(md.contains("4 not judged"), "{md}");
    // Said on the first screen: before the first figure.
    let control = md.find("Negative control:").unwrap();
    let figure = md.find(".svg").unwrap_or(md.len());
    assert!(control < figure, "{md}");
    // findings.json beside it says the same, with each rule's registration.
    let json = std::fs::read_to_string(
        workspace()
            .join("results/reference/amd-epyc-2vcpu-linux-6.18/quick-knee-run8/findings.json"),
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["controls"]["negative"], "underpowered");
    assert_eq!(v["controls"]["positive"], "passed");
    let of = |id: &str| {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(of("fig3-epoll-et-no-gain")["verdict"], "not judged");
    assert_eq!(of("fig5-select-cpu")["registration"], "extension");
    assert_eq!(of("fig5-select-below-epoll-lt")["registration"], "post-hoc");
}

/// The attributes of each `<g class="row" …>` in `svg`, in order.
fn rows(svg: &str) -> Vec<Vec<(String, String)>> {
    svg.split("<g class=\"row\"")
        .skip(1)
        .map(|r| {
            let head = &r[..r.find('>').unwrap_or(r.len())];
            head.split("\" ")
                .filter_map(|a| {
                    let (k, v) = a.trim().split_once("=\"")?;
                    Some((k.to_string(), v.trim_end_matches('"').to_string()))
                })
                .collect()
        })
        .collect()
}

/// Every committed report opens with its answer: the first figure of report.html is the
/// findings chart, one row per finding of the findings.json beside it and in its order, each
/// with that file's id, verdict, ratio, interval, n and registration; the controls' status
/// (`id="controls"`, each control named with passed, failed or not decided) comes before the
/// first table; and report.md gives the chart's rows as a table, before its first figure.
/// A micro-benchmark's report (micro.json) does the same, its rows on the quantity each rule
/// decides on; its controls' status is there when it has a control (fdalloc's negative one).
/// Only a micro report whose findings predate the rules has no findings.json.
#[test]
fn every_findings_chart_carries_its_findings_json() {
    let mut charts = 0;
    let mut micro = 0;
    for dir in committed() {
        let is_micro = dir.join("micro.json").is_file();
        if is_micro && !dir.join("findings.json").is_file() {
            // Only findings from before the rules (no rule named) may go without.
            let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
            assert!(
                md.contains("predates the registered micro rules"),
                "{}: a micro report with rules and no findings.json",
                dir.display()
            );
        }
        let Ok(json) = std::fs::read_to_string(dir.join("findings.json")) else {
            continue;
        };
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        // Raw: findings.json is written for other programs; this test reads it as they do.
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let fs = v["findings"].as_array().unwrap();
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        let table = html.find("<table").unwrap_or(html.len());
        let controls = html.find("id=\"controls\"");
        if fs.is_empty() {
            continue;
        }
        let any_control = ["positive", "negative", "placebo"]
            .iter()
            .any(|k| v["controls"][k] != "absent");
        if is_micro && !any_control {
            assert!(controls.is_none(), "{name}: controls it has not");
        }
        let controls = match controls {
            Some(c) => c,
            None if is_micro && !any_control => html.len(),
            None => panic!("{name}: no id=\"controls\""),
        };
        assert!(
            controls < table || controls == html.len(),
            "{name}: the controls come after a table"
        );
        let aside = &html[controls..html[controls..].find("</aside>").unwrap_or(0) + controls];
        for (key, words) in [
            ("positive", "Positive control"),
            ("negative", "Negative control"),
            ("placebo", "Placebo control"),
        ] {
            let status = match v["controls"][key].as_str().unwrap() {
                "passed" => "passed",
                "failed" => "failed",
                "underpowered" => "not decided",
                _ => continue,
            };
            assert!(
                aside.contains(&format!(
                    "<strong>{words}</strong>: <span class=\"control-{}\">{status}</span>",
                    status.replace(' ', "-")
                )),
                "{name}: {key} control is {status}: {aside}"
            );
        }
        let start = html.find("<svg").unwrap();
        let svg = &html[start..start + html[start..].find("</svg>").unwrap()];
        let rows = rows(svg);
        assert_eq!(rows.len(), fs.len(), "{name}: rows of the findings chart");
        for (i, (row, f)) in rows.iter().zip(fs).enumerate() {
            let attr = |k: &str| row.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str());
            let at = format!("{name}, finding {i} ({})", f["id"]);
            assert_eq!(attr("data-finding"), f["id"].as_str(), "{at}");
            assert_eq!(attr("data-verdict"), f["verdict"].as_str(), "{at}");
            assert_eq!(
                attr("data-registration"),
                f["registration"].as_str(),
                "{at}"
            );
            for k in ["ratio", "lo", "hi", "n"] {
                let drawn = attr(&format!("data-{k}")).map(|x| x.parse::<f64>().unwrap());
                assert_eq!(drawn, f[k].as_f64(), "{at}: {k}");
            }
        }
        // report.md: the chart's table, a row per finding, before the first figure.
        let first_figure = md.find("](fig-").unwrap_or(md.len());
        let head_words = if is_micro {
            "| finding | quantity | value [90%] |"
        } else {
            "| finding | A / B |"
        };
        let head = md
            .find(head_words)
            .unwrap_or_else(|| panic!("{name}: {md:.400}"));
        assert!(head < first_figure, "{name}");
        for f in fs {
            assert!(
                md[head..].contains(&format!("| `{}`", f["id"].as_str().unwrap())),
                "{name}"
            );
        }
        if is_micro {
            // The chart comes before the benchmark's own figures and tables, and every row
            // the rule decided on an interval draws it.
            let chart = html.find("<figure id=\"fig-findings\">");
            assert!(chart.is_some(), "{name}: no findings chart");
            assert_eq!(
                html.find("<figure"),
                chart,
                "{name}: a figure before the chart"
            );
            assert!(
                chart < html.find("<table"),
                "{name}: a table before the chart"
            );
            for f in fs.iter().filter(|f| f["ratio"].is_number()) {
                assert!(
                    f["n"].as_u64().unwrap() >= 2,
                    "{name}: {} drawn over fewer than 2 rounds",
                    f["id"]
                );
            }
            micro += 1;
        }
        charts += 1;
    }
    assert!(charts >= 30, "only {charts} findings charts checked");
    // herd, malloc, readahead, and the fdalloc and pipetest runs of 2026-11-27.
    assert!(micro >= 5, "only {micro} micro findings charts checked");
}

/// The mean reply rate of `series` at `idle` idle connections at each offered rate, over the
/// valid trials (ok, no flag), from a committed run's summary.json as written.
fn mean_replies(summary: &serde_json::Value, series: &str, idle: u64) -> Vec<(f64, f64)> {
    let mut by_rate: Vec<(f64, Vec<f64>)> = Vec::new();
    for p in summary["points"].as_array().unwrap() {
        let valid = p["status"] == "ok" && p["flags"].as_array().is_none_or(|f| f.is_empty());
        if !valid || p["series"] != series || p["idle"].as_u64() != Some(idle) {
            continue;
        }
        let (rate, r) = (p["rate"].as_f64().unwrap(), &p["load"]["reply_rate_avg"]);
        let Some(r) = r.as_f64() else { continue };
        match by_rate.iter_mut().find(|(x, _)| *x == rate) {
            Some((_, v)) => v.push(r),
            None => by_rate.push((rate, vec![r])),
        }
    }
    by_rate.sort_by(|a, b| a.0.total_cmp(&b.0));
    by_rate
        .into_iter()
        .map(|(x, v)| (x, v.iter().sum::<f64>() / v.len() as f64))
        .collect()
}

/// The paper's own numbers over the committed reports' reply-rate figures, each from the run's
/// own data: Fig. 5's "up to 79%" at 0.21 × the peak of select (and of poll) without idle
/// connections, on the figure of 10,000; Fig. 7's 7% at 1.07 × epoll-ctlv's peak without an
/// accept-limit and 32% at 1.32 × its reply rate at the highest offered rate. The paper states
/// no number for Fig. 6, nor for no idle connections in Fig. 5: those figures have none.
#[test]
fn the_papers_numbers_sit_on_the_committed_reply_rate_figures() {
    let root = workspace().join("results/reference/amd-epyc-2vcpu-linux-6.18");
    let read = |run: &str, file: &str| {
        std::fs::read_to_string(root.join(run).join(file))
            .unwrap_or_else(|e| panic!("{run}/{file}: {e}"))
    };
    let summary = |run: &str| -> serde_json::Value {
        serde_json::from_str(&read(run, "summary.json")).unwrap()
    };
    let peak = |v: &[(f64, f64)]| v.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    let close = |drawn: &[f64], want: &[f64], at: &str| {
        assert_eq!(drawn.len(), want.len(), "{at}: {drawn:?} against {want:?}");
        for (d, w) in drawn.iter().zip(want) {
            assert!(
                (d - w).abs() <= 0.051,
                "{at}: drawn {d}, the run's data give {w}"
            );
        }
    };

    let fig5 = summary("fig5-one-byte-idle");
    let svg = read("fig5-one-byte-idle", "fig-replies-idle10000.svg");
    for m in ["select", "poll"] {
        let want = 0.21 * peak(&mean_replies(&fig5, m, 0));
        let rule = format!("fig5-{m}-replies");
        close(&seed_values(&svg, &rule), &[want], &rule);
        assert!(
            svg.contains(&format!("data-series=\"{m}\" data-seed=\"{rule}\"")),
            "{rule}: not on {m}'s line"
        );
    }
    assert_eq!(svg.matches("<path class=\"ref\"").count(), 2, "fig5");
    assert!(svg.contains(">paper: −79%</text>"), "fig5: no label");
    assert!(svg.contains("degrades by up to 79%"), "fig5: no quote");
    let md = read("fig5-one-byte-idle", "report.md");
    assert!(
        md.contains("- paper: −79%: Gammo et al. 2004, §5.1"),
        "fig5 report.md"
    );
    let idle0 = read("fig5-one-byte-idle", "fig-replies-idle0.svg");
    assert!(
        !idle0.contains("data-seed"),
        "fig5 without idle connections"
    );

    let fig7 = summary("fig7-accept-limit");
    let svg = read("fig7-accept-limit", "fig-replies-idle0.svg");
    let inf = mean_replies(&fig7, "epoll-ctlv accept-limit=inf", 0);
    let highest = inf.last().unwrap().1;
    close(
        &seed_values(&svg, "fig7-accept-limit"),
        &[1.07 * peak(&inf), 1.32 * highest],
        "fig7-accept-limit",
    );
    assert!(svg.contains(">paper: +7%</text>") && svg.contains(">paper: +32%</text>"));
    assert!(!svg.contains("data-series=\"epoll-lt accept-limit=10\" data-seed="));

    for file in ["fig-replies-idle0.svg", "fig-replies-idle10000.svg"] {
        let svg = read("fig6-specweb-idle", file);
        assert!(svg.contains("<polyline"), "fig6 {file}: no lines");
        assert!(
            !svg.contains("data-seed"),
            "fig6 {file}: a number the paper does not give"
        );
    }
}
