//! A proxy experiment's own figures: the proxy's CPU per request against the object size (the
//! source's Fig. 7), and the response time's percentiles per series (its Figs. 6, 10, 12, 13).

use crate::analysis::findings;
use crate::analysis::stats::Arm;
use crate::model::results::{PointResult, Summary};
use crate::model::text::thousands;
use crate::render::block::Block;
use crate::render::svg::{self, Chart, Line, Scale};

use super::figures::*;
use super::tables::*;

/// An object size of the spec ("4K", "128K", "1M", "512") in KB, or `None` for a distribution
/// ("polymix4").
pub(super) fn size_kb(size: &str) -> Option<f64> {
    let t = size.trim();
    let (num, mult) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1.0),
        'm' | 'M' => (&t[..t.len() - 1], 1024.0),
        'g' | 'G' => (&t[..t.len() - 1], 1024.0 * 1024.0),
        _ => (t, 1.0 / 1024.0),
    };
    num.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(|v| v * mult)
}

/// For a proxy experiment whose series differ in object size (fig-proxy-sizes, the paper's
/// Fig. 7): the proxy's CPU per request against the object size, one line per forwarding mode
/// (per mechanism and mode when there are several mechanisms), and a table of it.
pub(super) fn size_section(s: &Summary) -> Vec<Block> {
    if s.experiment.proxy.is_none() {
        return vec![];
    }
    let series = findings::proxy_series(s);
    let sized: Vec<(&findings::ProxySeries, f64)> = series
        .iter()
        .filter_map(|x| Some((x, size_kb(&x.size)?)))
        .collect();
    let mut kbs: Vec<u64> = sized.iter().map(|(_, k)| k.to_bits()).collect();
    kbs.sort_unstable();
    kbs.dedup();
    if kbs.len() < 2 {
        return vec![];
    }
    let mut mechs: Vec<&str> = sized.iter().map(|(x, _)| x.mechanism.as_str()).collect();
    mechs.sort_unstable();
    mechs.dedup();
    let key = |x: &findings::ProxySeries| {
        if mechs.len() > 1 {
            format!("{} {}", x.mechanism, x.mode)
        } else {
            x.mode.clone()
        }
    };
    let cpu = |p: &PointResult| p.server_cpu_us_per_reply;
    let mut lines: Vec<Line> = Vec::new();
    for (x, kb) in &sized {
        let label = key(x);
        let kb = *kb;
        let one = lines_by(s, &|p| p.series == x.label, &|_| Some(kb), &cpu)
            .into_iter()
            .find(|l| l.label == x.label);
        let Some(one) = one else { continue };
        let i = match lines.iter().position(|l| l.label == label) {
            Some(i) => i,
            None => {
                lines.push(Line {
                    label: label.clone(),
                    points: vec![],
                    flagged: vec![],
                    ranges: vec![],
                    stray: vec![],
                });
                lines.len() - 1
            }
        };
        let l = &mut lines[i];
        l.points.extend(one.points);
        l.flagged.extend(one.flagged);
        l.ranges.extend(one.ranges);
        l.stray.extend(one.stray);
    }
    for l in &mut lines {
        let mut order: Vec<usize> = (0..l.points.len()).collect();
        order.sort_by(|&a, &b| l.points[a].0.total_cmp(&l.points[b].0));
        l.points = order.iter().map(|&i| l.points[i]).collect();
        l.flagged = order.iter().map(|&i| l.flagged[i]).collect();
        l.ranges = order.iter().map(|&i| l.ranges[i]).collect();
    }
    if lines.iter().all(|l| l.points.is_empty()) {
        return vec![];
    }
    let mut header = vec!["size (KB)".to_string()];
    header.extend(lines.iter().map(|l| format!("{} (µs)", l.label)));
    let rows: Vec<Vec<String>> = kbs
        .iter()
        .map(|&b| {
            let kb = f64::from_bits(b);
            let mut row = vec![number(kb)];
            for l in &lines {
                row.push(
                    l.points
                        .iter()
                        .zip(&l.flagged)
                        .find(|((x, _), _)| *x == kb)
                        .map_or("–".into(), |((_, y), f)| {
                            format!("{y:.2}{}", if *f { "†" } else { "" })
                        }),
                );
            }
            row
        })
        .collect();
    let title = "proxy CPU per request against object size".to_string();
    // The source's Fig. 7: splice's saving at the small and the large objects, from this run's
    // copy at the same size.
    let fs = findings::findings(s);
    let refs = crate::render::seeds::seed_refs(
        &fs,
        &|id| id.starts_with("proxy-splice-size") || id.starts_with("proxy-keepcopy"),
        &|arm| {
            let (_, label) = crate::render::seeds::arm_at_idle(arm)?;
            let (x, kb) = sized.iter().find(|(x, _)| x.label == label)?;
            Some((*kb, key(x)))
        },
    );
    let c = Chart {
        title: title.clone(),
        x_label: "object size (KB)".into(),
        y_label: "proxy CPU µs per request".into(),
        lines,
        diagonal: false,
        y_scale: Scale::Linear,
    };
    let axes = svg::shared_axes(&[(&c, &refs)], Scale::Log);
    let mut d = vec![
        Block::H(2, "Against object size".into()),
        Block::Figure {
            file: "fig-cpu-vs-size.svg".into(),
            svg: svg::line_chart_on(&c, &refs, &axes),
            alt: title,
        },
    ];
    d.push(Block::P(
        "The proxy's CPU µs per request, the mean over valid trials ± the half-width of its 90% \
         interval (bars: their min–max; † from \
         invalid points only):"
            .into(),
    ));
    d.push(Block::Table(header, rows));
    d
}

/// A point's response-time quantities (ms), as the load measured them: its file tag, its name
/// in titles and tables, and its percentile for the x axis of the percentile figure (None: the
/// mean, tabled but not drawn there).
pub(super) type RtQuantity = (&'static str, &'static str, Option<f64>, Metric);

pub(super) fn rt_quantities() -> Vec<RtQuantity> {
    vec![
        (
            "p50",
            "p50",
            Some(50.0),
            Box::new(|p: &PointResult| p.load.as_ref()?.latency_ms.p50),
        ),
        (
            "p90",
            "p90",
            Some(90.0),
            Box::new(|p: &PointResult| p.load.as_ref()?.latency_ms.p90),
        ),
        (
            "p99",
            "p99",
            Some(99.0),
            Box::new(|p: &PointResult| p.p99_ms()),
        ),
        (
            "mean",
            "mean",
            None,
            Box::new(|p: &PointResult| p.load.as_ref()?.latency_ms.mean),
        ),
    ]
}

/// The series' lines of the percentile figure at the points `keep` accepts: x the percentile,
/// y the mean over valid trials of that percentile of the response time (bars: min–max).
pub(super) fn percentile_lines(s: &Summary, keep: &dyn Fn(&PointResult) -> bool) -> Vec<Line> {
    let mut lines: Vec<Line> = s.series.iter().map(|x| svg::empty_line(&x.label)).collect();
    for (_, _, at, f) in rt_quantities() {
        let Some(at) = at else { continue };
        for (l, one) in lines
            .iter_mut()
            .zip(lines_by(s, keep, &|_| Some(at), f.as_ref()))
        {
            l.points.extend(one.points);
            l.flagged.extend(one.flagged);
            l.ranges.extend(one.ranges);
            l.stray.extend(one.stray);
        }
    }
    lines
}

/// Rows: series; columns: each response-time quantity at the points `keep` accepts, the mean
/// over valid trials ± the half-width of its 90% interval († from invalid points only).
pub(super) fn rt_table(s: &Summary, keep: &dyn Fn(&PointResult) -> bool) -> Block {
    let qs = rt_quantities();
    let mut header = vec!["series".to_string()];
    header.extend(qs.iter().map(|q| format!("{} (ms)", q.1)));
    let rows = s
        .series
        .iter()
        .map(|x| {
            let mut row = vec![x.label.clone()];
            for (_, _, _, f) in &qs {
                let of = |valid: bool| -> Vec<f64> {
                    s.points
                        .iter()
                        .filter(|p| p.ok() && keep(p) && p.series == x.label)
                        .filter(|p| p.valid() == valid)
                        .filter_map(f)
                        .collect()
                };
                let (valid, invalid) = (of(true), of(false));
                row.push(match (Arm::of(&valid), Arm::of(&invalid)) {
                    (Some(a), _) if valid.len() >= 2 => {
                        format!("{:.3} ± {:.3}", a.mean, a.hi - a.mean)
                    }
                    (Some(a), _) => format!("{:.3}", a.mean),
                    (None, Some(a)) => format!("{:.3}†", a.mean),
                    (None, None) => "–".into(),
                });
            }
            row
        })
        .collect();
    Block::Table(header, rows)
}

/// For a proxy experiment, the response time (the source's Figs. 6, 10, 12 and 13): per idle
/// count, with one offered rate a figure of the p50, p90 and p99 per series (log scale) and a
/// table of them and the mean; with several rates the p50, the p90 and the mean against the
/// rate (the p99 is among the rate figures) and the table at each rate.
pub(super) fn response_section(s: &Summary) -> Vec<Block> {
    if s.experiment.proxy.is_none() || s.points.iter().all(|p| p.p99_ms().is_none()) {
        return vec![];
    }
    let mut d = vec![
        Block::H(2, "Response time".into()),
        Block::P(
            "The load's response time per request (ms): from its scheduled start (a \
             connection's slot for its first request, the end of the previous reply for later \
             ones) to the end of its reply, percentiles from the load's histogram. The source's response-time figures \
             give means: Fig. 6 (uselect with many connections and only hits) is judged where a \
             run has that setting (rules proxy-rt-*); Figs. 10, 12 and 13 are drawn, not judged \
             (Figs. 12 and 13 part hits from misses, which the load does not)."
                .into(),
        ),
    ];
    // Each idle count's figures, all on one set of axes (the percentiles' own, and the
    // quantities' against the rate), then its tables.
    let mut figs: Vec<(usize, String, Chart)> = Vec::new();
    let mut dots: Vec<(usize, String, String, Vec<Line>)> = Vec::new();
    let mut tables: Vec<(usize, Block, Block)> = Vec::new();
    for idle in s.idle_counts() {
        let rates = s.offered_rates(|p| p.idle == idle);
        if let [rate] = rates.as_slice() {
            let rate = *rate;
            let keep = move |p: &PointResult| p.idle == idle && p.rate == rate;
            let lines = percentile_lines(s, &keep);
            let title = format!("response-time percentiles, {}", idle_words(idle));
            if lines.len() > MOST_SERIES {
                dots.push((idle, format!("fig-rt-idle{idle}.svg"), title, lines));
            } else {
                let groups = small_multiples(lines);
                let n = groups.len();
                for (k, lines) in groups.into_iter().enumerate() {
                    let (of, part) = match n {
                        1 => (String::new(), String::new()),
                        _ => (format!(" ({} of {n})", k + 1), format!("-{}", k + 1)),
                    };
                    let c = chart(
                        format!("{title}{of}"),
                        "percentile",
                        "response time (ms)",
                        lines,
                        (false, Scale::Log),
                    );
                    figs.push((idle, format!("fig-rt-idle{idle}{part}.svg"), c));
                }
            }
            tables.push((
                idle,
                Block::P(format!("Response time (ms), {}:", idle_words(idle))),
                rt_table(s, &keep),
            ));
            continue;
        }
        for (tag, what, _, f) in rt_quantities().into_iter().filter(|q| q.0 != "p99") {
            let ls = lines(s, idle, f.as_ref());
            if ls.iter().all(|l| l.points.is_empty()) {
                continue;
            }
            let c = chart(
                format!("{what} response time, {}", idle_words(idle)),
                &x_label(s),
                &format!("{what} response time (ms)"),
                ls,
                (false, Scale::Log),
            );
            figs.push((idle, format!("fig-rt-{tag}-idle{idle}.svg"), c));
        }
        for rate in rates {
            let keep = move |p: &PointResult| p.idle == idle && p.rate == rate;
            tables.push((
                idle,
                Block::P(format!(
                    "Response time (ms), {}, {}/s offered:",
                    idle_words(idle),
                    thousands(rate)
                )),
                rt_table(s, &keep),
            ));
        }
    }
    d.extend(arranged(s, figs, dots, tables));
    d
}

/// One idle count after another: its figures (the line charts on one set of axes, the dot
/// plots on one scale), then its tables.
fn arranged(
    s: &Summary,
    figs: Vec<(usize, String, Chart)>,
    dots: Vec<(usize, String, String, Vec<Line>)>,
    tables: Vec<(usize, Block, Block)>,
) -> Vec<Block> {
    let mut d = Vec::new();
    let of_idle: Vec<(usize, String)> = figs.iter().map(|(i, f, _)| (*i, f.clone())).collect();
    let mut drawn = drawn_together(
        figs.into_iter().map(|(_, f, c)| (f, c, vec![])).collect(),
        Scale::Linear,
    )
    .into_iter()
    .peekable();
    let values: Vec<f64> = dots
        .iter()
        .flat_map(|(_, _, _, ls)| ls.iter())
        .flat_map(|l| {
            l.points
                .iter()
                .map(|p| p.1)
                .chain(l.ranges.iter().flatten().flat_map(|r| [r.0, r.1]))
        })
        .collect();
    let range = svg::min_max(&values);
    let cats: Vec<(f64, String)> = rt_quantities()
        .iter()
        .filter_map(|q| Some((q.2?, q.1.to_string())))
        .collect();
    let mut tables = tables.into_iter().peekable();
    for idle in s.idle_counts() {
        // Figures come out in the order they went in, those with nothing drawn left out.
        while let Some(Block::Figure { file, .. }) = drawn.peek() {
            if !of_idle.iter().any(|(i, f)| *i == idle && f == file) {
                break;
            }
            d.extend(drawn.next());
        }
        for (_, file, title, lines) in dots.iter().filter(|x| x.0 == idle) {
            d.push(Block::Figure {
                file: file.clone(),
                svg: dot_plot(
                    title,
                    "response time (ms)",
                    Scale::Log,
                    &cats,
                    lines,
                    (range, &[]),
                ),
                alt: title.clone(),
            });
        }
        while let Some((_, p, t)) = tables.next_if(|t| t.0 == idle) {
            d.extend([p, t]);
        }
    }
    d
}
