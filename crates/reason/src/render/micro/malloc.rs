//! malloc's figure and table.

use evlab_wire::micro::malloc::{Mode, Report};

use crate::model::text::num;
use crate::render::plot::{Plot, Xy};
use crate::render::table::{render_findings, Table};

/// The LSP's figure: elapsed (wall) time against the number of workers, threads and
/// processes as lines (medians of the runs). Both axes are logarithmic: past the CPUs, time
/// growing linearly with the workers is a straight line of slope one.
pub fn plots(report: &Report) -> Vec<Plot> {
    let mut p = Plot::new(
        "malloc",
        format!(
            "malloc-test: {} malloc/free pairs of {} B per worker, {}",
            num(report.iterations as f64, 0),
            report.size,
            report.allocator.split(',').next().unwrap_or_default()
        ),
        "workers",
        "elapsed time (s)",
    )
    .log_x()
    .log_y();
    for mode in [Mode::Threads, Mode::Processes] {
        p.line(
            mode.name(),
            report
                .points
                .iter()
                .filter(|q| q.mode == mode)
                .map(|q| Xy::new(q.workers as f64, q.wall_seconds)),
        );
    }
    vec![p]
}

/// The seed's figure as a table: elapsed times against workers, per mode.
pub fn render(r: &Report) -> String {
    let mut out = format!(
        "malloc: {} malloc/free pairs of {} bytes per worker; median of {} run(s)\nallocator: {}\n{}\n\n",
        num(r.iterations as f64, 0),
        r.size,
        r.repeat,
        r.allocator,
        r.machine.line()
    );
    let mut t = Table::new([
        "mode",
        "workers",
        "wall s",
        "worker s (mean)",
        "worker s (max)",
        "ns/pair",
        "M pairs/s",
    ]);
    for p in &r.points {
        t.row([
            p.mode.name().to_string(),
            p.workers.to_string(),
            num(p.wall_seconds, 3),
            num(p.worker_seconds_mean, 3),
            num(p.worker_seconds_max, 3),
            num(p.ns_per_pair, 1),
            num(p.pairs_per_sec / 1e6, 1),
        ]);
    }
    out.push_str(&t.render());
    out.push_str(&render_findings(&r.findings));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use evlab_wire::micro::malloc::Point;

    #[test]
    fn the_figure_has_threads_and_processes_against_workers() {
        let pt = |mode: Mode, workers: usize, wall: f64| Point {
            mode,
            workers,
            pairs: 0,
            wall_seconds: wall,
            worker_seconds_mean: 0.0,
            worker_seconds_max: 0.0,
            ns_per_pair: 0.0,
            null_ns_per_iteration: 0.0,
            pairs_per_sec: 0.0,
            wall_runs_seconds: vec![],
        };
        let r = Report {
            benchmark: "malloc".into(),
            machine: crate::analysis::micro::machine(),
            allocator: crate::analysis::micro::malloc::tests::ALLOCATOR.into(),
            iterations: 1000,
            size: 512,
            repeat: 1,
            points: vec![
                pt(Mode::Threads, 1, 0.01),
                pt(Mode::Threads, 64, 0.6),
                pt(Mode::Processes, 1, 0.012),
                pt(Mode::Processes, 2, 0.0),
                pt(Mode::Processes, 64, 0.5),
            ],
            findings: vec![],
        };
        let plots = plots(&r);
        assert_eq!(plots.len(), 1);
        let p = &plots[0];
        assert!(p.x_log && p.y_log);
        assert_eq!(p.y_label, "elapsed time (s)");
        assert!(
            p.title.contains("glibc") && !p.title.contains("System"),
            "{}",
            p.title
        );
        assert_eq!(p.series("threads").unwrap().xs(), [1.0, 64.0]);
        assert_eq!(p.series("threads").unwrap().y_at(64.0), Some(0.6));
        // A zero cannot sit on a log axis: left out.
        assert_eq!(p.series("processes").unwrap().xs(), [1.0, 64.0]);
        // Threads only: one line.
        let only = Report {
            points: r.points[..2].to_vec(),
            ..r.clone()
        };
        assert_eq!(super::plots(&only)[0].lines.len(), 1);
    }
}
