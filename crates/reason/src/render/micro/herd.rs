//! herd's figures and table.

use evlab_wire::micro::herd::{As, Mode, Point, Report, Status};

use crate::model::text::num;
use crate::render::plot::{Plot, Xy};
use crate::render::table::{render_findings, Table};

/// The LSP's micro-benchmark figures, per way of running the workers (threads, processes):
/// wake-ups per accepted connection and the workers' CPU time per accept against the
/// number of workers (log x), one line per mode; and the balance, the coefficient of
/// variation of the connections per worker. Points that were not measured are gaps.
pub fn plots(report: &Report) -> Vec<Plot> {
    type Metric = fn(&Point) -> f64;
    let metrics: [(&str, &str, &str, Metric); 3] = [
        (
            "wakeups",
            "wake-ups per accepted connection",
            "wake-ups per accept (voluntary context switches)",
            |p| p.wakeups_per_accept,
        ),
        (
            "cpu",
            "workers' CPU time per accepted connection",
            "CPU time per accept (µs)",
            |p| p.cpu_us_per_accept,
        ),
        (
            "balance",
            "balance: spread of the connections over the workers",
            "connections per worker, coefficient of variation",
            |p| p.balance_cv,
        ),
    ];
    let mut out = Vec::new();
    for as_ in [As::Threads, As::Processes] {
        let ok: Vec<&Point> = report
            .points
            .iter()
            .filter(|p| p.as_ == as_ && p.status == Status::Ok && p.accepted > 0)
            .collect();
        if ok.is_empty() {
            continue;
        }
        for (tag, title, y_label, f) in metrics {
            let mut plot = Plot::new(
                &format!("herd-{tag}-{}", as_.name()),
                format!("{title}, workers as {}", as_.name()),
                "waiting workers",
                y_label,
            )
            .log_x();
            for mode in Mode::ALL {
                plot.line(mode.legend(), mean_over_rounds(&ok, mode, f));
            }
            out.push(plot);
        }
    }
    out
}

/// One mode's points as (workers, the mean of `f` over the rounds measured), in order of
/// workers.
fn mean_over_rounds(ok: &[&Point], mode: Mode, f: fn(&Point) -> f64) -> Vec<Xy> {
    let mut ns: Vec<usize> = ok
        .iter()
        .filter(|p| p.mode == mode)
        .map(|p| p.workers)
        .collect();
    ns.sort_unstable();
    ns.dedup();
    ns.into_iter()
        .map(|n| {
            let v: Vec<f64> = ok
                .iter()
                .filter(|p| p.mode == mode && p.workers == n)
                .map(|p| f(p))
                .collect();
            Xy::new(n as f64, v.iter().sum::<f64>() / v.len() as f64)
        })
        .collect()
}

/// The seed's figures as a table: per mode and N, wake-ups and time per accept, balance and
/// latency.
pub fn render(r: &Report) -> String {
    let rounds = if r.repeat > 1 {
        format!(", {} rounds (figures: the mean over them)", r.repeat)
    } else {
        String::new()
    };
    let mut out = format!(
        "herd: {} connections per point, {} client(s) one connection at a time{rounds}\n{}\n\n",
        r.conns,
        r.clients,
        r.machine.line()
    );
    let mut t = Table::new([
        "as",
        "mode",
        "N",
        "accepted",
        "wakeups/acc",
        "empty",
        "cpu us/acc",
        "us/conn",
        "per worker min..max",
        "cv",
        "p50 us",
        "p99 us",
    ]);
    let mut notes = Vec::new();
    // Rounds side by side: each point's rounds one under the other.
    let mut points: Vec<&Point> = r.points.iter().collect();
    points.sort_by_key(|p| {
        let mode = Mode::ALL.iter().position(|&m| m == p.mode);
        (p.as_ != As::Threads, mode, p.workers, p.round)
    });
    let n = |p: &Point| {
        if r.repeat > 1 {
            format!("{} r{}", p.workers, p.round + 1)
        } else {
            p.workers.to_string()
        }
    };
    for p in points {
        if p.status != Status::Ok {
            t.row([
                p.as_.name().to_string(),
                p.mode.name().to_string(),
                n(p),
                format!("{:?}", p.status).to_lowercase(),
            ]);
            if let Some(why) = &p.reason {
                notes.push(format!(
                    "  {} {} N={}: {why}",
                    p.as_.name(),
                    p.mode.name(),
                    n(p)
                ));
            }
            continue;
        }
        let min = p.per_worker.iter().min().copied().unwrap_or(0);
        let max = p.per_worker.iter().max().copied().unwrap_or(0);
        t.row([
            p.as_.name().to_string(),
            p.mode.name().to_string(),
            n(p),
            p.accepted.to_string(),
            num(p.wakeups_per_accept, 2),
            p.empty_wakeups.to_string(),
            num(p.cpu_us_per_accept, 1),
            num(p.wall_us_per_connection, 1),
            format!("{min}..{max}"),
            num(p.balance_cv, 2),
            num(p.latency.p50_us, 1),
            num(p.latency.p99_us, 1),
        ]);
    }
    out.push_str(&t.render());
    if !notes.is_empty() {
        out.push_str("\nnot measured:\n");
        for n in notes {
            out.push_str(&n);
            out.push('\n');
        }
    }
    out.push_str(&render_findings(&r.findings));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::micro::herd::tests::{pt, report};

    #[test]
    fn figures_per_way_of_running_with_a_line_per_mode() {
        let mut points = Vec::new();
        for n in [1, 4, 64] {
            points.push(pt(Mode::Accept, As::Threads, n, 1.0, Status::Ok));
            points.push(pt(Mode::Poll, As::Threads, n, n as f64, Status::Ok));
            points.push(pt(Mode::Uring, As::Threads, n, 0.0, Status::Skipped));
        }
        points.push(pt(Mode::Epoll, As::Processes, 8, 6.0, Status::Ok));
        // A second round of poll at 64: the figure draws the mean of the rounds.
        let mut again = pt(Mode::Poll, As::Threads, 64, 32.0, Status::Ok);
        again.round = 1;
        points.push(again);
        let r = report(points, 2);
        let plots = plots(&r);
        let names: Vec<&str> = plots.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "herd-wakeups-threads",
                "herd-cpu-threads",
                "herd-balance-threads",
                "herd-wakeups-processes",
                "herd-cpu-processes",
                "herd-balance-processes"
            ]
        );
        let w = &plots[0];
        assert!(w.x_log && !w.y_log);
        assert_eq!(w.x_label, "waiting workers");
        let labels: Vec<&str> = w.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(
            labels,
            ["blocking accept", "poll"],
            "uring was skipped: no line"
        );
        assert_eq!(w.series("poll").unwrap().xs(), [1.0, 4.0, 64.0]);
        assert_eq!(w.series("poll").unwrap().y_at(64.0), Some(48.0));
        assert!(plots[1].y_label.contains("(µs)"));
        assert_eq!(plots[1].series("poll").unwrap().y_at(4.0), Some(40.0));
        assert_eq!(
            plots[3].series("shared epoll").unwrap().y_at(8.0),
            Some(6.0)
        );
        assert!(plots[3].title.contains("processes"));
    }
}
