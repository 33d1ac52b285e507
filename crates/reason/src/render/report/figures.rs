//! The report's figures: one per metric against the offered rate (or the swept value), panels
//! by idle count, small multiples when there are many series, and the proxy's sizes and
//! response-time percentiles.

use std::collections::BTreeMap;

use crate::analysis::findings;
use crate::analysis::stats::Arm;
use crate::model::results::{PointResult, Summary};
use crate::model::spec::{SweepSpec, Workload};
use crate::model::text::thousands;
use crate::render::block::Block;
use crate::render::svg::{self, Chart, Line, Scale};

use super::tables::*;

pub(super) type Metric = Box<dyn Fn(&PointResult) -> Option<f64>>;

pub(super) fn x_label(s: &Summary) -> String {
    match (&s.experiment.workload, s.experiment.calls_per_conn) {
        (Workload::OneByte, 1) => "requests/s offered".into(),
        (Workload::Specweb, _) => "sessions/s offered (SPECweb99-like)".into(),
        (Workload::Polymix, _) => "connections/s offered (Polymix-like, through the proxy)".into(),
        (_, n) => format!("connections/s offered ({n} requests each)"),
    }
}

/// One line per series: at each rate the mean over its valid trials, with their min–max as an
/// error bar when there was more than one. Invalid trials (flagged) are drawn hollow: as the
/// line's point (mean and bar over them) where no trial was valid, else as stray markers beside
/// the valid mean, which no verdict uses either way.
pub(super) fn lines(
    s: &Summary,
    idle: usize,
    f: &dyn Fn(&PointResult) -> Option<f64>,
) -> Vec<Line> {
    lines_by(s, &|p| p.idle == idle, &|p| Some(p.rate), f)
}

/// As `lines`, over the points `keep` accepts, with `x` the quantity on the x axis (≥ 0).
pub(super) fn lines_by(
    s: &Summary,
    keep: &dyn Fn(&PointResult) -> bool,
    x: &dyn Fn(&PointResult) -> Option<f64>,
    f: &dyn Fn(&PointResult) -> Option<f64>,
) -> Vec<Line> {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let mut out = Vec::new();
    for series in &s.series {
        // x → (valid trials, invalid trials)
        let mut by_rate: BTreeMap<u64, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for p in s
            .points
            .iter()
            .filter(|p| p.ok() && p.series == series.label && keep(p))
        {
            let Some(at) = x(p).filter(|x| x.is_finite() && *x >= 0.0) else {
                continue;
            };
            if let Some(v) = f(p).filter(|v| v.is_finite()) {
                let e = by_rate.entry(at.to_bits()).or_default();
                if p.valid() {
                    e.0.push(v);
                } else {
                    e.1.push(v);
                }
            }
        }
        let mut line = svg::empty_line(&series.label);
        // Rates, counts, swept values: zero or more, so their bits order as the numbers.
        for (r, (valid, invalid)) in by_rate {
            let rate = f64::from_bits(r);
            let shown = if valid.is_empty() { &invalid } else { &valid };
            line.points.push((rate, mean(shown)));
            line.flagged.push(valid.is_empty());
            line.ranges.push(svg::min_max(shown));
            if !valid.is_empty() {
                line.stray.extend(invalid.iter().map(|&v| (rate, v)));
            }
        }
        out.push(line);
    }
    out
}

/// The figures of one idle count: reply rate (with y = x), p99 reply time on a log scale (from
/// under a millisecond below saturation to the timeout above it: a linear axis shows only the
/// blow-up and flattens every difference below the knee into zero), errors as a share of the
/// connections started (comparable across rates, as counts are not), server CPU per reply.
pub(super) fn figures(s: &Summary, idle: usize) -> Vec<Block> {
    let xl = x_label(s);
    let wl = s.experiment.workload.label();
    let mut v = Vec::new();
    let specs: [(&str, String, &str, bool, Scale, Metric); 4] = [
        (
            "replies",
            format!("evlab, {wl} workload, {}", idle_words(idle)),
            "replies/s",
            true,
            Scale::Linear,
            Box::new(|p: &PointResult| p.reply_rate()),
        ),
        (
            "p99",
            format!("99th percentile reply time, {}", idle_words(idle)),
            "p99 reply time (ms)",
            false,
            Scale::Log,
            Box::new(|p: &PointResult| p.p99_ms()),
        ),
        (
            "errors",
            format!("client errors, {}", idle_words(idle)),
            "errors (% of connections)",
            false,
            Scale::Linear,
            Box::new(|p: &PointResult| p.error_share().map(|e| e * 100.0)),
        ),
        (
            "cpu",
            format!("server CPU per reply, {}", idle_words(idle)),
            "server CPU µs per reply",
            false,
            Scale::Linear,
            Box::new(|p: &PointResult| p.server_cpu_us_per_reply),
        ),
    ];
    for (tag, title, yl, diagonal, y_scale, f) in specs {
        let ls = lines(s, idle, f.as_ref());
        if ls.iter().all(|l| l.points.is_empty()) {
            continue;
        }
        let chart = Chart {
            title: title.clone(),
            x_label: xl.clone(),
            y_label: yl.into(),
            lines: ls,
            diagonal,
            y_scale,
        };
        v.push(Block::Figure {
            file: format!("fig-{tag}-idle{idle}.svg"),
            svg: svg::line_chart(&chart),
            alt: title,
        });
    }
    v
}

/// What the figures put on the x axis.
#[derive(Debug, Clone, PartialEq)]
pub enum Axis {
    /// The offered rate, one set of figures per idle count (the paper's figures).
    Rate,
    /// Idle (or dead) connections: one fixed rate, several idle counts (the LSE page's dphttpd
    /// figure: reply rate against dead connections).
    Idle,
    /// The `[sweep]` flag's values (`workers`), one set of figures per idle count and rate.
    Swept(String),
}

/// The x axis of `s`'s figures: the swept flag if the experiment has `[sweep]`, the idle
/// count if it has one fixed rate and several idle counts, else the offered rate.
pub fn axis(s: &Summary) -> Axis {
    let e = &s.experiment;
    if let Some(sw) = &e.sweep {
        return Axis::Swept(sw.name());
    }
    let one_rate = e.rate_search.is_none() && !e.rates.is_auto() && e.rates.fixed().len() == 1;
    if one_rate && s.idle_counts().len() > 1 {
        Axis::Idle
    } else {
        Axis::Rate
    }
}

/// One set of figures and tables against the swept quantity: the points it draws, the words
/// for its titles, and the suffix of its files.
pub(super) struct Panel {
    keep: Box<dyn Fn(&PointResult) -> bool>,
    words: String,
    suffix: String,
}

/// The panels of a swept axis: for idle connections one (the single rate); for a swept flag one
/// per idle count and offered rate measured (one, usually).
pub(super) fn panels(s: &Summary, ax: &Axis) -> Vec<Panel> {
    let e = &s.experiment;
    let wl = e.workload.label();
    let rate_words = |r: f64| {
        if e.active_conns.is_some() {
            format!(
                "{} active connections",
                thousands(e.active_conns.unwrap_or(0) as f64)
            )
        } else {
            format!("{}/s offered", thousands(r))
        }
    };
    match ax {
        Axis::Rate => vec![],
        Axis::Idle => {
            let r = e.rates.fixed().first().copied().unwrap_or(0.0);
            vec![Panel {
                keep: Box::new(|_| true),
                words: format!("evlab, {wl} workload, {}", rate_words(r)),
                suffix: String::new(),
            }]
        }
        Axis::Swept(_) => {
            let mut pairs: Vec<(usize, f64)> = s.points.iter().map(|p| (p.idle, p.rate)).collect();
            pairs.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
            pairs.dedup();
            let many = pairs.len() > 1;
            pairs
                .into_iter()
                .map(|(idle, rate)| Panel {
                    keep: Box::new(move |p: &PointResult| p.idle == idle && p.rate == rate),
                    words: format!(
                        "evlab, {wl} workload, {}, {}",
                        rate_words(rate),
                        idle_words(idle)
                    ),
                    suffix: if many {
                        format!("-idle{idle}-rate{}", SweepSpec::arg(rate))
                    } else {
                        String::new()
                    },
                })
                .collect()
        }
    }
}

/// The x axis' label and file tag, and how to read a point's x.
pub(super) fn axis_x(s: &Summary, ax: &Axis) -> (String, String, Metric) {
    match ax {
        Axis::Idle if s.experiment.idle_request_first => (
            "dead connections (each made one request, then stayed idle)".into(),
            "idle".into(),
            Box::new(|p: &PointResult| Some(p.idle as f64)),
        ),
        Axis::Idle => (
            "idle connections".into(),
            "idle".into(),
            Box::new(|p: &PointResult| Some(p.idle as f64)),
        ),
        Axis::Swept(name) => (
            match &s.experiment.sweep {
                Some(sw) => format!("{name} ({} N)", sw.flag),
                None => name.clone(),
            },
            name.replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
            Box::new(|p: &PointResult| p.swept_value()),
        ),
        Axis::Rate => (
            x_label(s),
            "rate".into(),
            Box::new(|p: &PointResult| Some(p.rate)),
        ),
    }
}

/// What a swept axis draws: (file tag, title, y label, y scale, value, shown only for a swept
/// flag, shown only when some value is above zero, table digits).
pub(super) type SweptMetric = (
    &'static str,
    &'static str,
    &'static str,
    Scale,
    Metric,
    bool,
    bool,
    usize,
);

pub(super) fn swept_metrics() -> Vec<SweptMetric> {
    vec![
        (
            "replies",
            "reply rate",
            "replies/s",
            Scale::Linear,
            Box::new(|p: &PointResult| p.reply_rate()),
            false,
            false,
            0,
        ),
        (
            "cpu",
            "server CPU per reply",
            "server CPU µs per reply",
            Scale::Linear,
            Box::new(|p: &PointResult| p.server_cpu_us_per_reply),
            false,
            false,
            2,
        ),
        (
            "p99",
            "99th percentile reply time",
            "p99 reply time (ms)",
            Scale::Log,
            Box::new(|p: &PointResult| p.p99_ms()),
            false,
            false,
            2,
        ),
        (
            "errors",
            "client errors",
            "errors (% of connections)",
            Scale::Linear,
            Box::new(|p: &PointResult| p.error_share().map(|e| e * 100.0)),
            false,
            true,
            1,
        ),
        (
            "ctxsw",
            "server context switches per connection",
            "context switches per connection",
            Scale::Linear,
            Box::new(|p: &PointResult| p.ctx_switches_per_conn()),
            true,
            false,
            2,
        ),
        (
            "wakeups",
            "accept wake-ups per connection (every worker's, summed)",
            "accept wake-ups per connection",
            Scale::Linear,
            Box::new(|p: &PointResult| p.accept_wakeups_per_conn()),
            true,
            false,
            2,
        ),
        (
            "empty",
            "empty accept wake-ups per connection (woken, found nothing to accept)",
            "empty wake-ups per connection",
            Scale::Linear,
            Box::new(|p: &PointResult| p.empty_wakeups_per_conn()),
            true,
            false,
            3,
        ),
        (
            "balance",
            "accept balance: the busiest worker's accepts over the mean",
            "busiest worker ÷ mean (1 = even)",
            Scale::Linear,
            Box::new(|p: &PointResult| p.accept_imbalance()),
            true,
            false,
            2,
        ),
    ]
}

/// Figures and tables against the swept quantity (idle connections or a `[sweep]` flag): per
/// panel, reply rate, server CPU per reply and p99 (errors when any; for a swept flag, context
/// switches per connection and accept balance when measured), one line per series with the
/// trials' min–max bars, and a table of each.
pub(super) fn swept_sections(s: &Summary, ax: &Axis) -> Vec<Block> {
    let (x_label, x_tag, x) = axis_x(s, ax);
    let head = match ax {
        Axis::Idle if s.experiment.idle_request_first => "dead connections".to_string(),
        Axis::Idle => "idle connections".to_string(),
        Axis::Swept(name) => name.clone(),
        Axis::Rate => "offered".into(),
    };
    let mut d = Vec::new();
    for panel in panels(s, ax) {
        d.push(Block::H(
            2,
            format!(
                "Against {head}: {}",
                panel.words.trim_start_matches("evlab, ")
            ),
        ));
        let mut tables = Vec::new();
        for (tag, what, yl, y_scale, f, flag_only, nonzero_only, digits) in swept_metrics() {
            if flag_only && !matches!(ax, Axis::Swept(_)) {
                continue;
            }
            let keep = |p: &PointResult| (panel.keep)(p);
            let ls = lines_by(s, &keep, x.as_ref(), f.as_ref());
            let values = ls.iter().flat_map(|l| l.points.iter().map(|p| p.1));
            let (mut any, mut above) = (false, false);
            for v in values {
                any = true;
                above |= v > 0.0;
            }
            if !any || (nonzero_only && !above) {
                continue;
            }
            let groups = small_multiples(ls);
            let n = groups.len();
            for (k, lines) in groups.into_iter().enumerate() {
                let (title, part) = if n == 1 {
                    (format!("{}: {what}", panel.words), String::new())
                } else {
                    (
                        format!("{}: {what} ({} of {n})", panel.words, k + 1),
                        format!("-{}", k + 1),
                    )
                };
                d.push(Block::Figure {
                    file: format!("fig-{tag}-vs-{x_tag}{}{part}.svg", panel.suffix),
                    svg: svg::line_chart(&Chart {
                        title: title.clone(),
                        x_label: x_label.clone(),
                        y_label: yl.into(),
                        lines,
                        diagonal: false,
                        y_scale,
                    }),
                    alt: title,
                });
            }
            tables.push(Block::P(format!("{} ({yl}), by {head}:", capitalise(what))));
            tables.push(table_by(
                s,
                &keep,
                x.as_ref(),
                &head,
                f.as_ref(),
                digits,
                Trials::Valid,
            ));
        }
        if tables.is_empty() {
            continue;
        }
        d.push(Block::P(
            "Means over valid trials, ± the half-width of the mean's 90% interval where two or \
             more (the figures' bars: their min–max). † marks a value from \
             invalid points only (hollow in the figures; see Validity), (+n†) n invalid trials \
             left out of a valid mean, ✗ a failed point."
                .into(),
        ));
        d.extend(tables);
        let keep = |p: &PointResult| (panel.keep)(p);
        d.push(Block::P(
            "Client CPU busy (%, loopback softirq included), mean over every trial; † where a \
             trial was invalid:"
                .into(),
        ));
        d.push(table_by(
            s,
            &keep,
            x.as_ref(),
            &head,
            &|p| p.client_cpu_busy.map(|b| b * 100.0),
            0,
            Trials::AllOk,
        ));
    }
    d
}

/// Most series one figure shows: beyond it lines and markers cannot be told apart.
pub(super) const MOST_SERIES: usize = 8;

/// `lines` as figures of at most [`MOST_SERIES`] each, in order and as even as can be (17
/// series: 6, 6 and 5), each series in one figure: small multiples, not one unreadable figure.
pub(super) fn small_multiples(lines: Vec<svg::Line>) -> Vec<Vec<svg::Line>> {
    let n = lines.len();
    let figures = n.div_ceil(MOST_SERIES).max(1);
    let mut out: Vec<Vec<svg::Line>> = Vec::with_capacity(figures);
    let mut it = lines.into_iter();
    for k in 0..figures {
        let take = n / figures + usize::from(k < n % figures);
        out.push(it.by_ref().take(take).collect());
    }
    out
}

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
    let mut d = vec![
        Block::H(2, "Against object size".into()),
        Block::Figure {
            file: "fig-cpu-vs-size.svg".into(),
            svg: svg::line_chart_x(
                &Chart {
                    title: title.clone(),
                    x_label: "object size (KB)".into(),
                    y_label: "proxy CPU µs per request".into(),
                    lines,
                    diagonal: false,
                    y_scale: Scale::Linear,
                },
                Scale::Log,
            ),
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
    for idle in s.idle_counts() {
        let mut rates: Vec<f64> = s
            .points
            .iter()
            .filter(|p| p.idle == idle)
            .map(|p| p.rate)
            .collect();
        rates.sort_by(f64::total_cmp);
        rates.dedup();
        if let [rate] = rates.as_slice() {
            let rate = *rate;
            let keep = move |p: &PointResult| p.idle == idle && p.rate == rate;
            let groups = small_multiples(percentile_lines(s, &keep));
            let n = groups.len();
            for (k, lines) in groups.into_iter().enumerate() {
                let (of, part) = match n {
                    1 => (String::new(), String::new()),
                    _ => (format!(" ({} of {n})", k + 1), format!("-{}", k + 1)),
                };
                let title = format!("response-time percentiles, {}{of}", idle_words(idle));
                d.push(Block::Figure {
                    file: format!("fig-rt-idle{idle}{part}.svg"),
                    svg: svg::line_chart(&Chart {
                        title: title.clone(),
                        x_label: "percentile".into(),
                        y_label: "response time (ms)".into(),
                        lines,
                        diagonal: false,
                        y_scale: Scale::Log,
                    }),
                    alt: title,
                });
            }
            d.push(Block::P(format!(
                "Response time (ms), {}:",
                idle_words(idle)
            )));
            d.push(rt_table(s, &keep));
            continue;
        }
        for (tag, what, _, f) in rt_quantities().into_iter().filter(|q| q.0 != "p99") {
            let ls = lines(s, idle, f.as_ref());
            let title = format!("{what} response time, {}", idle_words(idle));
            if ls.iter().all(|l| l.points.is_empty()) {
                continue;
            }
            d.push(Block::Figure {
                file: format!("fig-rt-{tag}-idle{idle}.svg"),
                svg: svg::line_chart(&Chart {
                    title: title.clone(),
                    x_label: x_label(s),
                    y_label: format!("{what} response time (ms)"),
                    lines: ls,
                    diagonal: false,
                    y_scale: Scale::Log,
                }),
                alt: title,
            });
        }
        for rate in rates {
            let keep = move |p: &PointResult| p.idle == idle && p.rate == rate;
            d.push(Block::P(format!(
                "Response time (ms), {}, {}/s offered:",
                idle_words(idle),
                thousands(rate)
            )));
            d.push(rt_table(s, &keep));
        }
    }
    d
}
