//! Micro-benchmark experiments (`[micro]` in a spec): `evlab run pipetest` and the like.
//!
//! The lab runs the benchmark's subcommand once as a child process of the `evlab` binary, in a
//! process group of its own (forked workers included), with `--json` into the results directory,
//! and writes `report.md` and `report.html`: the seed's findings judged on the run, with the
//! numbers that decided each, the seed's figure(s) as `fig-*.svg` (each report's
//! [`Plot`]s, from its module here, drawn by [`crate::render::svg`]), and the benchmark's table
//! (from the same module). The
//! benchmark's JSON is the raw result; `micro.json` records the run (no `summary.json`: there
//! is no sweep), and [`write_report`] renders the report from those two alone, which is what
//! `evlab report DIR` does for such a directory.

use std::path::Path;

use std::fmt::Write as _;

use evlab_wire::micro::{Finding, Verdict};

use crate::model::micro::{MicroRun, RECORD};
use crate::model::results::{self};
use crate::model::spec::MICRO_BENCHMARKS;
use crate::render::page::html_inline;
use crate::render::plot::Plot;
use crate::render::report::quiet_words;
use crate::render::svg::{self, esc, Chart, Line, Scale};
use crate::LabError;

pub mod fdalloc;
pub mod herd;
pub mod malloc;
pub mod pipetest;
pub mod readahead;

/// What was run and what it found.
struct Outcome {
    table: String,
    findings: Vec<Finding>,
    plots: Vec<Plot>,
}

fn read<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T, LabError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| LabError::Io(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| LabError::Io(format!("{}: not {what}: {e}", path.display())))
}

/// Reads the benchmark's report (an `evlab-wire` type) and renders its table and figures.
fn outcome(benchmark: &str, json: &Path) -> Result<Outcome, LabError> {
    use evlab_wire::micro as wire;
    const WHAT: &str = "the benchmark's report";
    Ok(match benchmark {
        "pipetest" => {
            let r: wire::pipetest::Report = read(json, WHAT)?;
            Outcome {
                table: pipetest::render(&r),
                plots: pipetest::plots(&r),
                findings: r.findings,
            }
        }
        "herd" => {
            let r: wire::herd::Report = read(json, WHAT)?;
            Outcome {
                table: herd::render(&r),
                plots: herd::plots(&r),
                findings: r.findings,
            }
        }
        "fdalloc" => {
            let r: wire::fdalloc::Report = read(json, WHAT)?;
            Outcome {
                table: fdalloc::render(&r),
                plots: fdalloc::plots(&r),
                findings: r.findings,
            }
        }
        "malloc" => {
            let r: wire::malloc::Report = read(json, WHAT)?;
            Outcome {
                table: malloc::render(&r),
                plots: malloc::plots(&r),
                findings: r.findings,
            }
        }
        "readahead" => {
            let r: wire::readahead::Report = read(json, WHAT)?;
            Outcome {
                table: readahead::render(&r),
                plots: readahead::plots(&r),
                findings: r.findings,
            }
        }
        other => {
            return Err(LabError::Io(format!(
                "unknown micro-benchmark `{other}`; valid: {}",
                MICRO_BENCHMARKS.join(", ")
            )))
        }
    })
}

/// Writes `report.md`, `report.html` and the figures (`fig-*.svg`) of the micro-benchmark run
/// in `dir` from its `micro.json` and the benchmark's JSON alone, so that `evlab report DIR`
/// writes the same files as the run did.
pub fn write_report(dir: &Path) -> Result<(), LabError> {
    let run: MicroRun = read(&dir.join(RECORD), "a micro-benchmark run's record")?;
    let doc = document(dir, &run)?;
    for b in &doc {
        if let Block::Figure { file, svg, .. } = b {
            results::write_atomic(&dir.join(file), svg)?;
        }
    }
    results::write_atomic(&dir.join("report.md"), &render_md(&doc))?;
    results::write_atomic(&dir.join("report.html"), &render_html(&run.name, &doc))
}

/// The report's parts, rendered alike as Markdown and HTML.
enum Block {
    H(u8, String),
    P(String),
    List(Vec<String>),
    Table(Vec<String>, Vec<Vec<String>>),
    /// Preformatted text (the benchmark's own table).
    Pre(String),
    Figure {
        file: String,
        svg: String,
        alt: String,
    },
}

/// The figure of a plot, drawn as the experiments' figures are.
pub fn figure(p: &Plot) -> (String, String) {
    let scale = |log: bool| if log { Scale::Log } else { Scale::Linear };
    let chart = Chart {
        title: p.title.clone(),
        x_label: p.x_label.clone(),
        y_label: p.y_label.clone(),
        lines: p
            .lines
            .iter()
            .map(|l| Line {
                label: l.label.clone(),
                points: l.points.iter().map(|q| (q.x, q.y)).collect(),
                flagged: vec![false; l.points.len()],
                ranges: l.points.iter().map(|q| q.range).collect(),
                stray: vec![],
            })
            .collect(),
        diagonal: false,
        y_scale: scale(p.y_log),
    };
    (
        format!("fig-{}.svg", p.name),
        svg::line_chart_x(&chart, scale(p.x_log)),
    )
}

fn document(dir: &Path, run: &MicroRun) -> Result<Vec<Block>, LabError> {
    let mut d = vec![
        Block::H(1, run.name.clone()),
        Block::P(run.description.trim().to_string()),
    ];
    match &run.failure {
        Some(why) => d.push(Block::P(format!("The benchmark failed: {why}"))),
        None => {
            let o = outcome(&run.benchmark, &dir.join(&run.json))?;
            d.push(Block::H(2, "Findings on this run".into()));
            // Reports written before the rules were registered name none: no rule column.
            let ruled = o.findings.iter().any(|f| !f.rule.is_empty());
            let mut head: Vec<String> = vec!["finding".into(), "verdict".into(), "numbers".into()];
            if ruled {
                head.insert(0, "rule".into());
            }
            d.push(Block::Table(
                head,
                o.findings
                    .iter()
                    .map(|f| {
                        let v = match f.verdict {
                            Verdict::NotReproduced => "**not reproduced**",
                            v => v.word(),
                        };
                        let mut row = vec![f.claim.clone(), v.into(), f.evidence.clone()];
                        if ruled {
                            row.insert(0, format!("`{}`", f.rule));
                        }
                        row
                    })
                    .collect(),
            ));
            if !ruled && !o.findings.is_empty() {
                d.push(Block::P(
                    "This report predates the registered micro rules: its findings were judged \
                     on the medians by the rules of its day (\"holds\" read as reproduced), \
                     which `docs/findings.md` keeps in each rule's history."
                        .into(),
                ));
            }
            if ruled {
                d.push(Block::P(
                    "Each rule, its threshold and how it follows from the source's numbers are \
                     in `docs/findings.md` (family `micro`)."
                        .into(),
                ));
            }
            if !o.plots.is_empty() {
                d.push(Block::H(2, "Figures".into()));
                for p in &o.plots {
                    let (file, svg) = figure(p);
                    d.push(Block::Figure {
                        file,
                        svg,
                        alt: p.title.clone(),
                    });
                }
            }
            d.push(Block::H(2, "Results".into()));
            d.push(Block::Pre(o.table));
        }
    }
    d.push(Block::H(2, "How it was run".into()));
    d.push(Block::List(vec![
        format!("`{}`", run.bench_command),
        format!("by `{}` (experiment: {})", run.command, run.spec_path),
        format!(
            "{} to {} ({:.0} s){}; machine: {}, {}, {} CPUs",
            run.started,
            run.finished.as_deref().unwrap_or("?"),
            run.wall_s,
            if run.interrupted { ", interrupted" } else { "" },
            run.machine.hostname,
            run.machine.kernel,
            run.machine.cpus,
        ),
    ]));
    if let Some(q) = &run.quiet {
        d.push(Block::P(quiet_words(
            q,
            "disturbed timings and wide intervals",
        )));
    }
    d.push(Block::P(format!(
        "`{}` beside this file is the raw result and `{RECORD}` the run's record; \
         `evlab report DIR` writes this report again from them. `docs/micro.md` says what the \
         benchmark measures.",
        run.json
    )));
    Ok(d)
}

fn render_md(doc: &[Block]) -> String {
    let cell = |c: &str| c.replace('|', "\\|");
    let mut o = String::new();
    for b in doc {
        match b {
            Block::H(l, t) => {
                let _ = writeln!(o, "{} {t}\n", "#".repeat(*l as usize));
            }
            Block::P(t) => {
                let _ = writeln!(o, "{t}\n");
            }
            Block::List(items) => {
                for i in items {
                    let _ = writeln!(o, "- {i}");
                }
                o.push('\n');
            }
            Block::Table(h, rows) => {
                let row = |r: &[String]| {
                    format!(
                        "| {} |",
                        r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
                    )
                };
                let _ = writeln!(o, "{}", row(h));
                let _ = writeln!(o, "|{}", "---|".repeat(h.len()));
                for r in rows {
                    let _ = writeln!(o, "{}", row(r));
                }
                o.push('\n');
            }
            Block::Pre(t) => {
                let _ = writeln!(o, "```text\n{}```\n", t);
            }
            Block::Figure { file, alt, .. } => {
                let _ = writeln!(o, "![{alt}]({file})\n");
            }
        }
    }
    o
}

fn render_html(title: &str, doc: &[Block]) -> String {
    // The experiments' reports' page: legible at a phone's width.
    let mut o = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{}</style></head><body>\n",
        esc(title),
        crate::render::page::CSS
    );
    for b in doc {
        match b {
            Block::H(l, t) => {
                let _ = writeln!(o, "<h{l}>{}</h{l}>", html_inline(t));
            }
            Block::P(t) => {
                let _ = writeln!(o, "<p>{}</p>", html_inline(t));
            }
            Block::List(items) => {
                o.push_str("<ul>\n");
                for i in items {
                    let _ = writeln!(o, "<li>{}</li>", html_inline(i));
                }
                o.push_str("</ul>\n");
            }
            Block::Table(h, rows) => {
                o.push_str("<div class=\"scroll\"><table class=\"words\"><thead><tr>");
                for c in h {
                    let _ = write!(o, "<th>{}</th>", html_inline(c));
                }
                o.push_str("</tr></thead><tbody>\n");
                for r in rows {
                    o.push_str("<tr>");
                    for c in r {
                        let class = match c.as_str() {
                            "**not reproduced**" => " class=\"verdict-not\"",
                            "reproduced" => " class=\"verdict-reproduced\"",
                            "inconclusive" => " class=\"verdict-inconclusive\"",
                            _ => "",
                        };
                        let _ = write!(o, "<td{class}>{}</td>", html_inline(c));
                    }
                    o.push_str("</tr>\n");
                }
                o.push_str("</tbody></table></div>\n");
            }
            Block::Pre(t) => {
                let _ = writeln!(o, "<pre>{}</pre>", esc(t));
            }
            Block::Figure { file, svg, .. } => {
                let _ = writeln!(o, "<figure id=\"{}\">{svg}</figure>", esc(file));
            }
        }
    }
    o.push_str(crate::render::svg::SCRIPT);
    o.push_str("</body></html>\n");
    o
}

#[cfg(test)]
mod tests {
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
            md.contains("| `pipetest-poll-falls` | poll falls as the pipes grow: rate ∝ pipes^k with k < -0.5"),
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
}
