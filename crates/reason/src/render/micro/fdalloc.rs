//! fdalloc's figure and table.

use evlab_wire::micro::fdalloc::{Point, Report};

use crate::model::text::num;
use crate::render::plot::{Plot, Xy};
use crate::render::table::{render_findings, Table};

/// The LSP's figure: the time of the two opens after closing the first descriptor and n,
/// against n (medians): the first open, the second (the one that must find n), and both.
pub fn plots(report: &Report) -> Vec<Plot> {
    let mut p = Plot::new(
        "fdalloc",
        format!(
            "descriptor allocation: {} descriptors held, {} timed",
            num(report.total as f64, 0),
            report.op.name()
        ),
        "n, the descriptor closed beside the first",
        "time of the call (ns, median)",
    );
    let line = |f: fn(&Point) -> f64| {
        report
            .points
            .iter()
            .map(move |q| Xy::new(q.n as f64, f(q)))
            .collect::<Vec<_>>()
    };
    let op = report.op.name();
    p.line(format!("1st {op}"), line(|q| q.first_open_ns));
    p.line(format!("2nd {op} (finds n)"), line(|q| q.second_open_ns));
    p.line("both", line(|q| q.both_ns));
    if let Some(c) = &report.negative_control {
        p.line(
            "control: 2nd allocation, linear scan (user space)",
            c.points
                .iter()
                .map(|q| Xy::new(q.n as f64, q.second_open_ns))
                .collect::<Vec<_>>(),
        );
    }
    vec![p]
}

/// The seed's figure as a table: the time of the two opens against n.
pub fn render(r: &Report) -> String {
    let mut out = format!(
        "fdalloc: {} descriptors held ({}..={}), close {} and n, time two {}s; median of {}\n{}\n\n",
        r.total,
        r.first,
        r.highest,
        r.first,
        r.op.name(),
        r.repeat,
        r.machine.line()
    );
    let mut t = Table::new([
        "n",
        "1st returns",
        "2nd returns",
        "1st ns",
        "2nd ns",
        "both ns",
    ]);
    for p in &r.points {
        t.row([
            p.n.to_string(),
            p.first_fd.to_string(),
            p.second_fd.to_string(),
            num(p.first_open_ns, 0),
            num(p.second_open_ns, 0),
            num(p.both_ns, 0),
        ]);
    }
    out.push_str(&t.render());
    if let Some(c) = &r.negative_control {
        out.push_str(&format!(
            "\nnegative control: {}, {} slots, timed the same way\n",
            c.allocator, c.slots
        ));
        let mut t = Table::new(["n", "1st ns", "2nd ns", "both ns"]);
        for p in &c.points {
            t.row([
                p.n.to_string(),
                num(p.first_open_ns, 0),
                num(p.second_open_ns, 0),
                num(p.both_ns, 0),
            ]);
        }
        out.push_str(&t.render());
    }
    out.push_str(&render_findings(&r.findings));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use evlab_wire::micro::fdalloc::Op;

    #[test]
    fn the_figure_has_both_opens_against_n() {
        let pt = |n: u64, a: f64, b: f64| Point {
            n,
            first_fd: 3,
            second_fd: n,
            first_open_ns: a,
            second_open_ns: b,
            both_ns: a + b,
            second_runs_ns: vec![],
        };
        let r = Report {
            benchmark: "fdalloc".into(),
            machine: crate::analysis::micro::machine(),
            op: Op::Dup,
            repeat: 11,
            total: 1000,
            first: 3,
            highest: 1002,
            points: vec![
                pt(500, 200.0, 250.0),
                pt(10, 210.0, 230.0),
                pt(1000, 190.0, 260.0),
            ],
            findings: vec![],
            negative_control: None,
        };
        let plots = plots(&r);
        assert_eq!(plots.len(), 1);
        let p = &plots[0];
        assert_eq!(p.name, "fdalloc");
        assert!(!p.x_log && !p.y_log);
        assert!(p.y_label.contains("(ns"), "{}", p.y_label);
        let labels: Vec<&str> = p.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["1st dup", "2nd dup (finds n)", "both"]);
        for l in &p.lines {
            assert_eq!(l.xs(), [10.0, 500.0, 1000.0], "{}: in n order", l.label);
        }
        assert_eq!(p.lines[1].y_at(1000.0), Some(260.0));
        assert_eq!(p.lines[2].y_at(10.0), Some(440.0));
    }
}
