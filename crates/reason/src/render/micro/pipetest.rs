//! pipetest's figure and table.

use evlab_wire::micro::pipetest::{Point, Report, Status};

use crate::model::text::num;
use crate::render::plot::{range, Plot, Xy};
use crate::render::table::{render_findings, Table};

/// The LSE page's figure: passes per second against the number of pipes (log x), one line
/// per mechanism (the median of the runs; a bar from the slowest to the fastest run when
/// there were several). Skipped and failed points are gaps.
pub fn plots(report: &Report) -> Vec<Plot> {
    let mut p = Plot::new(
        "pipetest",
        format!(
            "pipetest: {} message thread(s), {} generations, route {}",
            report.message_threads,
            report.max_generation,
            report.route.name()
        ),
        "pipes",
        "passes per second",
    )
    .log_x();
    for m in &report.mechanisms {
        p.line(
            m.clone(),
            report
                .points
                .iter()
                .filter(|q| &q.mechanism == m && q.status == Status::Ok)
                .filter_map(|q| {
                    Some(Xy {
                        x: q.pipes as f64,
                        y: q.passes_per_sec?,
                        range: range(q.runs.iter().map(|r| r.passes_per_sec)),
                    })
                }),
        );
    }
    vec![p]
}

/// The seed's figure as a table: one row per number of pipes, one column of passes per second
/// per mechanism.
pub fn render(r: &Report) -> String {
    let mut out = format!(
        "pipetest: {} message thread(s), {} generations, route {}, median of {} run(s)\n{}\n\n",
        r.message_threads,
        r.max_generation,
        r.route.name(),
        r.repeat,
        r.machine.line()
    );
    let mut t = Table::new(std::iter::once("pipes".to_string()).chain(r.mechanisms.clone()));
    for &pipes in &r.pipes {
        let cells = r.mechanisms.iter().map(|m| {
            match r
                .points
                .iter()
                .find(|p| p.pipes == pipes && &p.mechanism == m)
            {
                Some(Point {
                    passes_per_sec: Some(v),
                    ..
                }) => num(*v, 0),
                Some(p) => match p.status {
                    Status::Skipped => "skipped".into(),
                    _ => "failed".into(),
                },
                None => "-".into(),
            }
        });
        t.row(std::iter::once(pipes.to_string()).chain(cells));
    }
    out.push_str("passes per second\n");
    out.push_str(&t.render());
    if !r.slopes.is_empty() {
        out.push_str("\nrate ∝ pipes^k, k fitted to each sweep (mean and 90% interval)\n");
        let mut t = Table::new(["mechanism", "k", "90% interval", "each sweep"]);
        for s in &r.slopes {
            t.row([
                s.mechanism.clone(),
                format!("{:.2}", s.mean),
                match (s.lo, s.hi) {
                    (Some(lo), Some(hi)) => format!("[{lo:.2}, {hi:.2}]"),
                    _ => "-".into(),
                },
                s.k.iter()
                    .map(|k| format!("{k:.2}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]);
        }
        out.push_str(&t.render());
    }
    let notes: Vec<String> = r
        .points
        .iter()
        .filter_map(|p| {
            p.reason
                .as_ref()
                .map(|why| format!("  {}: {why}", p.mechanism))
        })
        .collect();
    if !notes.is_empty() {
        out.push_str("\nnot measured:\n");
        let mut seen = std::collections::HashSet::new();
        for n in notes {
            if seen.insert(n.clone()) {
                out.push_str(&n);
                out.push('\n');
            }
        }
    }
    out.push_str(&render_findings(&r.findings));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::sample::median;
    use evlab_wire::micro::pipetest::Route;

    #[test]
    fn the_figure_has_a_line_per_measured_mechanism_with_bars_over_runs() {
        let run = crate::analysis::micro::pipetest::tests::run_at;
        let pt = |m: &str, pipes: usize, runs: Vec<f64>| Point {
            mechanism: m.into(),
            pipes,
            status: if runs.is_empty() {
                Status::Skipped
            } else {
                Status::Ok
            },
            reason: None,
            passes_per_sec: median(&runs),
            runs: runs.into_iter().map(run).collect(),
        };
        let r = Report {
            benchmark: "pipetest".into(),
            machine: crate::analysis::micro::machine(),
            message_threads: 1,
            max_generation: 300,
            route: Route::Stride17,
            repeat: 3,
            mechanisms: vec!["poll".into(), "epoll-lt".into(), "aio-poll".into()],
            pipes: vec![10, 1000, 16000],
            points: vec![
                pt("poll", 10, vec![90.0, 100.0, 130.0]),
                pt("poll", 1000, vec![5.0, 5.0, 5.0]),
                pt("poll", 16000, vec![]),
                pt("epoll-lt", 10, vec![100.0]),
                pt("epoll-lt", 16000, vec![95.0]),
                pt("aio-poll", 10, vec![]),
            ],
            findings: vec![],
            slopes: vec![],
        };
        let plots = plots(&r);
        assert_eq!(plots.len(), 1);
        let p = &plots[0];
        assert_eq!(p.name, "pipetest");
        assert!(p.x_log && !p.y_log);
        assert_eq!(
            (p.x_label.as_str(), p.y_label.as_str()),
            ("pipes", "passes per second")
        );
        let labels: Vec<&str> = p.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["poll", "epoll-lt"], "aio-poll was never measured");
        let poll = p.series("poll").unwrap();
        assert_eq!(poll.xs(), [10.0, 1000.0], "the skipped point is a gap");
        assert_eq!(poll.y_at(10.0), Some(100.0));
        assert_eq!(poll.points[0].range, Some((90.0, 130.0)));
        let ep = p.series("epoll-lt").unwrap();
        assert_eq!(ep.xs(), [10.0, 16000.0]);
        assert_eq!(ep.points[1].range, None, "one run: no bar");
    }
}
