//! The report's capacity section (`[knee]`): each series' capacity at each idle count, as a
//! figure (capacity against idle connections, one line per series) and two tables: the means
//! with their intervals, and every search with its bracket.

use crate::analysis::findings::knee_trials;
use crate::analysis::stats::Arm;
use crate::model::knee::{KneeSpec, ANSWERED, KEPT, SAMPLE_S};
use crate::model::results::Summary;
use crate::model::text::thousands;
use crate::render::block::Block;
use crate::render::svg::{self, Chart, Line, Scale};

/// The section, or nothing for a run without capacity searches.
pub(crate) fn section(s: &Summary) -> Vec<Block> {
    if s.knees.is_empty() {
        return vec![];
    }
    let ks = s.experiment.knee.clone().unwrap_or_default();
    let per_conn = s.experiment.requests_per_conn();
    let judged_per_conn = s
        .knees
        .iter()
        .flat_map(|k| &k.steps)
        .map(|st| st.calls_per_conn)
        .next();
    let unit = match per_conn {
        Some(c) if c != 1.0 => "sessions/s",
        _ => "requests/s",
    };
    let mut d = vec![
        Block::H(2, "Capacity".into()),
        Block::P(format!(
            "The highest rate each server kept up with, found by bisection on one server per \
             series, idle count and trial, its idle connections held throughout: steps of {} s, \
             each kept when its reply rate from {} s to its end was at least {:.0}% of the \
             offered rate and {:.0}% of its connections were answered (sampled every {SAMPLE_S} \
             s), until the highest rate kept and the lowest not kept were within ×{}; the \
             capacity is their geometric middle (±{:.1}%). The rules on what a server sustains \
             read it (docs/findings.md).{}",
            ks.step_s,
            ks.settle_s,
            KEPT * 100.0,
            ANSWERED * 100.0,
            ks.resolution,
            (ks.resolution.sqrt() - 1.0) * 100.0,
            match (per_conn, judged_per_conn) {
                (Some(c), Some(j)) if c != 1.0 && j == c => format!(
                    " Rates are in connections (sessions) per second, each making {c} requests \
                     on average: a step's reply rate and answers are read against the requests \
                     its sessions make."
                ),
                (Some(c), _) if c != 1.0 => format!(
                    " Rates are in connections (sessions) per second, each making {c} requests \
                     on average; this run's steps were judged as recorded, against the \
                     connections offered (the rule until 2026-12-06), which sessions of several \
                     requests keep up with far past the server's capacity."
                ),
                _ => String::new(),
            }
        )),
    ];
    let idles = s.idle_counts();
    let lines: Vec<Line> = s
        .series
        .iter()
        .map(|series| {
            let mut line = svg::empty_line(&series.label);
            for &idle in &idles {
                let side = crate::analysis::findings::Side {
                    series: &series.label,
                    idle,
                };
                let (v, _) = knee_trials(s, &side);
                let Some(m) = Arm::of(&v) else { continue };
                line.points.push((idle as f64, m.mean));
                line.flagged.push(false);
                line.ranges.push(svg::min_max(&v));
            }
            line
        })
        .collect();
    if lines.iter().any(|l| !l.points.is_empty()) {
        let title = format!(
            "capacity against idle connections, {} workload",
            s.experiment.workload.label()
        );
        // The paper's "up to 79%" for select and poll, from this run's capacity without idle
        // connections.
        let fs = crate::analysis::findings::findings(s);
        let refs = crate::render::seeds::seed_refs(
            &fs,
            &|id| matches!(id, "fig5-select-replies" | "fig5-poll-replies"),
            &|arm| {
                let (x, series) = crate::render::seeds::arm_at_idle(arm)?;
                lines
                    .iter()
                    .any(|l| l.label == series && l.points.iter().any(|p| p.0 == x))
                    .then_some((x, series))
            },
        );
        let c = Chart {
            title: title.clone(),
            x_label: "idle connections".into(),
            y_label: format!("capacity ({unit} kept up with)"),
            lines,
            diagonal: false,
            y_scale: Scale::Linear,
        };
        let axes = svg::shared_axes(&[(&c, &refs)], Scale::Linear);
        d.push(Block::Figure {
            file: "fig-capacity.svg".into(),
            svg: svg::line_chart_on(&c, &refs, &axes),
            alt: title,
        });
    }
    d.push(Block::P(format!(
        "Capacity ({unit}): the mean of the trials whose search closed, ± the half-width of its \
         90% interval, and how many closed of how many run (the figure's bars: their min–max)."
    )));
    d.push(means_table(s, &idles));
    d.push(search_log(s, &ks));
    d
}

/// Every search under `<details>`: the table, and how many steps ran beside busy processes.
fn search_log(s: &Summary, ks: &KneeSpec) -> Block {
    let mut log = vec![searches_table(s, ks)];
    let steps = s.knees.iter().flat_map(|k| &k.steps);
    let busy = steps.clone().filter(|st| st.busy.is_some()).count();
    if busy > 0 {
        log.push(Block::P(format!(
            "{busy} of {} steps ran while other processes used 10% of a CPU or more (each \
             step's `busy` in summary.json names them); they were judged as measured.",
            steps.count()
        )));
    }
    Block::Details(
        format!(
            "Every search, in the order run ({}; its steps are in summary.json)",
            s.knees.len()
        ),
        log,
    )
}

fn means_table(s: &Summary, idles: &[usize]) -> Block {
    let mut header = vec!["series".to_string()];
    header.extend(idles.iter().map(|&i| match i {
        0 => "no idle".to_string(),
        n => format!("{} idle", thousands(n as f64)),
    }));
    let rows = s
        .series
        .iter()
        .map(|series| {
            let mut row = vec![series.label.clone()];
            for &idle in idles {
                let side = crate::analysis::findings::Side {
                    series: &series.label,
                    idle,
                };
                let (v, n) = knee_trials(s, &side);
                row.push(match Arm::of(&v) {
                    _ if n == 0 => "–".into(),
                    Some(m) if v.len() >= 2 => format!(
                        "{} ± {} ({} of {n})",
                        thousands(m.mean),
                        thousands(m.hi - m.mean),
                        v.len()
                    ),
                    Some(m) => format!("{} ({} of {n})", thousands(m.mean), v.len()),
                    None => format!("none (0 of {n})"),
                });
            }
            row
        })
        .collect();
    Block::Table(header, rows)
}

fn searches_table(s: &Summary, ks: &KneeSpec) -> Block {
    let header = [
        "series", "idle", "trial", "from", "steps", "kept", "not kept", "capacity", "s",
    ]
    .map(String::from)
    .to_vec();
    let rate = |x: Option<f64>| x.map_or("–".into(), thousands);
    let rows = s
        .knees
        .iter()
        .map(|k| {
            vec![
                k.series.clone(),
                thousands(k.idle as f64),
                k.trial.to_string(),
                thousands(k.start),
                k.steps.len().to_string(),
                rate(k.kept()),
                rate(k.failed()),
                match k.capacity(ks.resolution) {
                    Some(c) => thousands(c),
                    None => format!(
                        "none: {}",
                        k.stopped.as_deref().unwrap_or("bracket not closed")
                    ),
                },
                format!("{:.1}", k.wall_s),
            ]
        })
        .collect();
    Block::Table(header, rows)
}
