//! report.md and a self-contained report.html (inline SVG, inline CSS), both rendered from the
//! same document model so they always say the same thing; and the figures as `fig-*.svg`.
//!
//! Rendering depends only on `summary.json`, so `evlab report DIR` reproduces the files exactly.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::analysis::findings::{self, Finding, Verdict};
use crate::analysis::rules::RULES;
use crate::analysis::stats::{Arm, Claim};
use crate::analysis::syscalls::{syscall_shares, Profile, PAPER_ROWS};
use crate::model::calibration::Calibration;
use crate::model::results::{write_atomic, PointResult, ServerCounters, Status, Summary};
use crate::model::spec::{Family, Spec, SweepSpec, Workload};
use crate::model::text::thousands;
use crate::render::block::Block;
use crate::render::svg::{self, esc, Chart, Line, Scale};
use crate::LabError;

type Metric = Box<dyn Fn(&PointResult) -> Option<f64>>;

fn x_label(s: &Summary) -> String {
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
fn lines(s: &Summary, idle: usize, f: &dyn Fn(&PointResult) -> Option<f64>) -> Vec<Line> {
    lines_by(s, &|p| p.idle == idle, &|p| Some(p.rate), f)
}

/// As `lines`, over the points `keep` accepts, with `x` the quantity on the x axis (≥ 0).
fn lines_by(
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

fn idle_words(idle: usize) -> String {
    match idle {
        0 => "no idle connections".into(),
        n => format!("{} idle connections", thousands(n as f64)),
    }
}

/// A whole number with thousands separators, else as it is (a swept value of 0.5).
fn number(v: f64) -> String {
    if v.fract() == 0.0 {
        thousands(v)
    } else {
        v.to_string()
    }
}

/// The figures of one idle count: reply rate (with y = x), p99 reply time on a log scale (from
/// under a millisecond below saturation to the timeout above it: a linear axis shows only the
/// blow-up and flattens every difference below the knee into zero), errors as a share of the
/// connections started (comparable across rates, as counts are not), server CPU per reply.
fn figures(s: &Summary, idle: usize) -> Vec<Block> {
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
struct Panel {
    keep: Box<dyn Fn(&PointResult) -> bool>,
    words: String,
    suffix: String,
}

/// The panels of a swept axis: for idle connections one (the single rate); for a swept flag one
/// per idle count and offered rate measured (one, usually).
fn panels(s: &Summary, ax: &Axis) -> Vec<Panel> {
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
fn axis_x(s: &Summary, ax: &Axis) -> (String, String, Metric) {
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
type SweptMetric = (
    &'static str,
    &'static str,
    &'static str,
    Scale,
    Metric,
    bool,
    bool,
    usize,
);

fn swept_metrics() -> Vec<SweptMetric> {
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
fn swept_sections(s: &Summary, ax: &Axis) -> Vec<Block> {
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
const MOST_SERIES: usize = 8;

/// `lines` as figures of at most [`MOST_SERIES`] each, in order and as even as can be (17
/// series: 6, 6 and 5), each series in one figure: small multiples, not one unreadable figure.
fn small_multiples(lines: Vec<svg::Line>) -> Vec<Vec<svg::Line>> {
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
fn size_kb(size: &str) -> Option<f64> {
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
fn size_section(s: &Summary) -> Vec<Block> {
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
type RtQuantity = (&'static str, &'static str, Option<f64>, Metric);

fn rt_quantities() -> Vec<RtQuantity> {
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
fn percentile_lines(s: &Summary, keep: &dyn Fn(&PointResult) -> bool) -> Vec<Line> {
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
fn rt_table(s: &Summary, keep: &dyn Fn(&PointResult) -> bool) -> Block {
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
fn response_section(s: &Summary) -> Vec<Block> {
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

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Which trials a table cell averages.
#[derive(Clone, Copy, PartialEq)]
enum Trials {
    /// Valid trials (what verdicts use); invalid ones only where no trial was valid.
    Valid,
    /// Every ok trial, valid or not (a diagnosis of the points, such as the client's CPU).
    AllOk,
}

/// Rows: offered rate; columns: series; cells: `f`, the mean over trials as `which` says (of
/// valid trials: ± the half-width of the mean's 90% t interval where there are two). A †
/// marks a value that rests on invalid points; "(+n†)" after a valid mean says n more trials
/// were invalid and left out; ✗ marks a point whose every trial failed.
fn rate_table(
    s: &Summary,
    idle: usize,
    f: &dyn Fn(&PointResult) -> Option<f64>,
    digits: usize,
    which: Trials,
) -> Block {
    table_by(
        s,
        &|p| p.idle == idle,
        &|p| Some(p.rate),
        "offered",
        f,
        digits,
        which,
    )
}

/// As `rate_table`, over the points `keep` accepts, one row per value of `x` (headed
/// `x_head`).
fn table_by(
    s: &Summary,
    keep: &dyn Fn(&PointResult) -> bool,
    x: &dyn Fn(&PointResult) -> Option<f64>,
    x_head: &str,
    f: &dyn Fn(&PointResult) -> Option<f64>,
    digits: usize,
    which: Trials,
) -> Block {
    let mut rates: Vec<f64> = s.points.iter().filter(|p| keep(p)).filter_map(x).collect();
    rates.sort_by(|a, b| a.total_cmp(b));
    rates.dedup();
    let mut header = vec![x_head.to_string()];
    header.extend(s.series.iter().map(|x| x.label.clone()));
    let num = |m: f64| {
        if digits == 0 {
            thousands(m)
        } else {
            format!("{m:.digits$}")
        }
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let rows = rates
        .iter()
        .map(|&r| {
            let mut row = vec![number(r)];
            for series in &s.series {
                let ps: Vec<&PointResult> = s
                    .points
                    .iter()
                    .filter(|p| keep(p) && x(p) == Some(r) && p.series == series.label)
                    .collect();
                let of = |valid: bool| -> Vec<f64> {
                    ps.iter()
                        .filter(|p| p.ok() && p.valid() == valid)
                        .filter_map(|p| f(p))
                        .collect()
                };
                let (valid, invalid) = (of(true), of(false));
                let cell = if ps.is_empty() {
                    String::new()
                } else if valid.is_empty() && invalid.is_empty() {
                    if ps.iter().all(|p| p.status != Status::Ok) {
                        "✗".into()
                    } else {
                        "–".into()
                    }
                } else if valid.is_empty() {
                    format!("{}†", num(mean(&invalid)))
                } else if which == Trials::AllOk {
                    let all: Vec<f64> = valid.iter().chain(&invalid).copied().collect();
                    let mark = if invalid.is_empty() { "" } else { "†" };
                    format!("{}{mark}", num(mean(&all)))
                } else {
                    // The mean of the valid trials, ± the half-width of its 90% t interval
                    // where there are two or more.
                    let m = match Arm::of(&valid) {
                        Some(a) if valid.len() >= 2 => {
                            format!("{} ± {}", num(a.mean), num(a.hi - a.mean))
                        }
                        _ => num(mean(&valid)),
                    };
                    if invalid.is_empty() {
                        m
                    } else {
                        format!("{m} (+{}†)", invalid.len())
                    }
                };
                row.push(cell);
            }
            row
        })
        .collect();
    Block::Table(header, rows)
}

fn syscall_table(s: &Summary) -> Vec<Block> {
    let shares = syscall_shares(s);
    if shares.is_empty() {
        return vec![];
    }
    let names = syscall_names(&shares);
    let mut header = vec!["syscall".to_string()];
    header.extend(shares.iter().map(|(p, _)| p.series.clone()));
    let cell = |v: Option<&(f64, f64)>, which: usize| match v {
        Some(&(share, _)) if which == 0 => format!("{:.2}", share * 100.0),
        Some(&(_, per)) => format!("{per:.2}"),
        None => "-".into(),
    };
    let mut share_rows: Vec<Vec<String>> = names
        .iter()
        .map(|n| {
            let mut row = vec![n.clone()];
            row.extend(shares.iter().map(|(_, r)| cell(r.get(n), 0)));
            row
        })
        .collect();
    let mut total = vec!["all syscalls".to_string()];
    total.extend(
        shares
            .iter()
            .map(|(_, r)| format!("{:.2}", r.values().map(|v| v.0).sum::<f64>() * 100.0)),
    );
    share_rows.push(total);
    let mut rr = vec!["replies/s".to_string()];
    rr.extend(
        shares
            .iter()
            .map(|(p, _)| p.reply_rate().map(thousands).unwrap_or_default()),
    );
    share_rows.push(rr);
    let per_rows: Vec<Vec<String>> = names
        .iter()
        .map(|n| {
            let mut row = vec![n.clone()];
            row.extend(shares.iter().map(|(_, r)| cell(r.get(n), 1)));
            row
        })
        .collect();
    let at: Vec<String> = shares
        .iter()
        .map(|(p, _)| format!("{} at {} req/s", p.series, thousands(p.rate)))
        .collect();
    vec![
        Block::H(2, "Where the server's time goes (as Table 1)".into()),
        Block::P(format!(
            "Percent of the measured run's wall time the server spent inside each system call, timed \
             by evlab's counted syscalls (`evlab serve --profile`: a monotonic clock read around each \
             call) rather than gprof, at the highest offered rate of each series with the fewest idle \
             connections ({}); \"all syscalls\" is their sum, and the rest of the run is the server's \
             time outside system calls. The shares are of wall time, not of the server's CPU time: \
             the time its CPU budget throttles it inside a call, or a blocking wait spends asleep, \
             counts, so at a rate past saturation they follow the paper's shares of its run time, \
             and at rates below saturation waits read large. The paper profiled at 22,000 requests/s, \
             past saturation.",
            at.join(", ")
        )),
        Block::Table(header.clone(), share_rows),
        Block::P("Calls per request (the paper's count: 3,947,769 `epoll_ctl` calls for epoll-LT against 1,949,404 `epoll_ctl` + `epoll_ctlv` for epoll-ctlv):".into()),
        Block::Table(header.clone(), per_rows),
        Block::P("The event mechanism's own counters over the same run:".into()),
        Block::Table(
            {
                let mut h = header;
                h[0] = "counter".into();
                h
            },
            counter_rows(&shares),
        ),
    ]
}

/// The syscall table's rows: the paper's (those any series made), then the others by their
/// largest share.
fn syscall_names(shares: &[Profile]) -> Vec<String> {
    let mut names: Vec<String> = PAPER_ROWS
        .iter()
        .filter(|n| shares.iter().any(|(_, r)| r.contains_key(**n)))
        .map(|n| n.to_string())
        .collect();
    let mut rest: Vec<(String, f64)> = shares
        .iter()
        .flat_map(|(_, r)| r.iter().map(|(n, v)| (n.clone(), v.0)))
        .filter(|(n, _)| !PAPER_ROWS.contains(&n.as_str()))
        .collect();
    rest.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    for (n, _) in rest {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

/// The event mechanism's own counters at each series' profile point, per wait or per request.
fn counter_rows(shares: &[Profile]) -> Vec<Vec<String>> {
    type Counter = Box<dyn Fn(&ServerCounters) -> Option<f64>>;
    let mut ev_rows = Vec::new();
    for (label, f) in [
        (
            "events per wait",
            Box::new(|c: &ServerCounters| c.events_per_wait()) as Counter,
        ),
        (
            "waits per request",
            Box::new(|c: &ServerCounters| {
                (c.requests > 0).then(|| c.waits as f64 / c.requests as f64)
            }),
        ),
        (
            "interest changes per request",
            Box::new(|c: &ServerCounters| {
                (c.requests > 0).then(|| c.interest_changes as f64 / c.requests as f64)
            }),
        ),
        (
            "discarded events per request",
            Box::new(|c: &ServerCounters| {
                (c.requests > 0).then(|| c.discarded as f64 / c.requests as f64)
            }),
        ),
        (
            "syscalls per request",
            Box::new(|c: &ServerCounters| {
                (c.requests > 0).then(|| c.syscalls_total() as f64 / c.requests as f64)
            }),
        ),
    ] {
        let mut row = vec![label.to_string()];
        row.extend(shares.iter().map(|(p, _)| {
            p.server
                .as_ref()
                .and_then(&f)
                .map(|v| format!("{v:.2}"))
                .unwrap_or_default()
        }));
        ev_rows.push(row);
    }
    ev_rows
}

/// The checks of the validity rule as the Validity table's columns: (flag or note kind, as
/// `findings::flag_kind` names it, column heading). Every check has its column whether it fired
/// or not, so the table says what was checked.
const CHECKS: &[(&str, &str)] = &[
    ("client fell behind", "client fell behind"),
    ("client saturated", "client CPU saturated"),
    ("client out of resources", "client out of resources"),
    ("not serving", "non-2xx replies"),
    ("server exited during the run", "server exited"),
    ("left processes", "processes left"),
    ("failed", "failed"),
];
const NOTES: &[(&str, &str)] = &[("jitter", "note: jitter"), ("steal", "note: steal")];

/// The validity of every point, compactly: one row per series and idle count, one column per
/// check (how many of its points each made invalid) and per kind of note; a last row for the
/// whole run; then the largest lateness and steal. Each point's flags and notes, in words, are
/// in points.csv and summary.json.
fn validity_table(s: &Summary) -> Vec<Block> {
    #[derive(Default)]
    struct Group {
        total: usize,
        valid: usize,
        kinds: BTreeMap<String, usize>,
    }
    let order = |label: &str| {
        s.series
            .iter()
            .position(|x| x.label == label)
            .unwrap_or(usize::MAX)
    };
    // With `[sweep]`, a row per series and swept value (`shared workers=4`).
    let mut groups: BTreeMap<(usize, u64, usize, String), Group> = BTreeMap::new();
    let mut all = Group::default();
    for p in &s.points {
        let mut kinds: Vec<String> = p.flags.iter().map(|f| findings::flag_kind(f)).collect();
        match p.status {
            Status::Ok => {}
            Status::Failed => kinds.push("failed".into()),
            Status::Interrupted => kinds.push("interrupted".into()),
        }
        kinds.extend(p.notes.iter().map(|n| findings::flag_kind(n)));
        kinds.sort();
        kinds.dedup();
        for g in [
            groups
                .entry((
                    p.idle,
                    p.swept_value().unwrap_or(0.0).to_bits(),
                    order(&p.series),
                    p.label(),
                ))
                .or_default(),
            &mut all,
        ] {
            g.total += 1;
            if p.valid() {
                g.valid += 1;
            }
            for k in &kinds {
                *g.kinds.entry(k.clone()).or_default() += 1;
            }
        }
    }
    if groups.is_empty() {
        return vec![];
    }
    // Kinds no column names (a future check, an interrupted point) get columns of their own.
    let known: Vec<&str> = CHECKS.iter().chain(NOTES).map(|c| c.0).collect();
    let extra: Vec<String> = all
        .kinds
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .cloned()
        .collect();
    let mut columns: Vec<(String, String)> = CHECKS
        .iter()
        .map(|(k, h)| (k.to_string(), h.to_string()))
        .collect();
    columns.extend(extra.iter().map(|k| (k.clone(), k.clone())));
    columns.extend(NOTES.iter().map(|(k, h)| (k.to_string(), h.to_string())));
    let mut header: Vec<String> = vec!["series".into(), "idle".into(), "valid / points".into()];
    header.extend(columns.iter().map(|c| c.1.clone()));
    let row = |series: String, idle: String, g: &Group| {
        let mut r = vec![series, idle, format!("{} / {}", g.valid, g.total)];
        r.extend(columns.iter().map(|(k, _)| match g.kinds.get(k) {
            Some(n) => n.to_string(),
            None => "–".into(),
        }));
        r
    };
    let mut rows: Vec<Vec<String>> = groups
        .iter()
        .map(|((idle, _, _, series), g)| row(series.clone(), thousands(*idle as f64), g))
        .collect();
    rows.push(row("all".into(), String::new(), &all));
    let mut out = vec![
        Block::P(
            "Points per series and idle count, and how many of them each check made invalid (a \
             point may fail more than one); the notes do not invalidate:"
                .into(),
        ),
        Block::Table(header, rows),
    ];
    let noted: Vec<&PointResult> = s.points.iter().filter(|p| !p.notes.is_empty()).collect();
    let valid = s.points.iter().filter(|p| p.valid()).count();
    let mut t = format!(
        "{valid} of {} points valid; {} with notes (not invalidating).",
        s.points.len(),
        noted.len()
    );
    let worst = |f: &dyn Fn(&PointResult) -> Option<f64>| -> Option<(f64, usize)> {
        s.points
            .iter()
            .filter(|p| p.ok())
            .filter_map(|p| f(p).map(|v| (v, p.index)))
            .filter(|v| v.0.is_finite())
            .reduce(|a, b| if b.0 > a.0 { b } else { a })
    };
    let sched = |p: &PointResult| p.load.as_ref().map(|l| l.schedule.clone());
    if let Some((v, i)) = worst(&|p| sched(p)?.late_max_ms) {
        t.push_str(&format!(
            " Largest lateness of a start: {v:.1} ms (point {i})"
        ));
        if let Some((p99, j)) = worst(&|p| sched(p)?.late_p99_ms) {
            t.push_str(&format!("; largest p99 lateness {p99:.1} ms (point {j})"));
        }
        t.push('.');
    }
    if let Some((v, i)) = worst(&|p| p.steal) {
        t.push_str(&format!(
            " Largest steal: {:.1}% of a CPU (point {i}).",
            v * 100.0
        ));
    }
    out.push(Block::P(t));
    out
}

/// Which controls the run passed (docs/findings.md): a placebo run must reproduce no rule
/// that claims a difference; any other run that has the positive control's arms (select with
/// idle connections against none) must decide it.
fn controls(s: &Summary, fs: &[Finding]) -> String {
    let negative = match fs
        .iter()
        .find(|f| f.rule == "control-budget-not-equivalent")
    {
        Some(f) if f.verdict == Verdict::Reproduced => " Negative control: FAILED: the pair on \
             budgets that differ by twice the margin was judged equivalent, so this run's \
             \"no difference\" verdicts cannot be trusted."
            .to_string(),
        Some(f) => format!(
            " Negative control: passed: the pair on budgets that differ by twice the margin was \
             not judged equivalent ({}).",
            f.verdict.word()
        ),
        None => no_negative_control(s, fs),
    };
    positive_and_placebo(s, fs) + &negative
}

/// What a paper run without the negative control says of its "no difference" verdicts: that
/// none of them has a pair of known difference beside it (empty when it judged none).
fn no_negative_control(s: &Summary, fs: &[Finding]) -> String {
    let mut equivalence: Vec<&str> = fs
        .iter()
        .filter(|f| !f.rule.starts_with("control-"))
        .filter(|f| {
            RULES.iter().find(|r| r.id == f.rule).is_some_and(|r| {
                r.family == Family::Paper && matches!(r.claim, Some(Claim::Within(_)))
            })
        })
        .map(|f| f.rule.as_str())
        .collect();
    equivalence.dedup();
    if s.experiment.family() != Family::Paper || equivalence.is_empty() {
        return String::new();
    }
    format!(
        " Negative control: no negative control in this run (no series on a budget that differs \
         by twice the margin, as quick, fig1-one-byte and fig3-epoll-variants now carry), so nothing \
         shows that its \"no difference\" verdicts ({}) could have seen a difference of twice \
         their margin.",
        equivalence.join(", ")
    )
}

/// The placebo control (a placebo run) or the positive control (any other run).
fn positive_and_placebo(s: &Summary, fs: &[Finding]) -> String {
    // The controls are judged apart (the positive control must find its difference).
    let claims_difference = |f: &&Finding| {
        !f.rule.starts_with("control-")
            && RULES
                .iter()
                .find(|r| r.id == f.rule)
                .and_then(|r| r.claim)
                .is_some_and(|c| c.claims_a_difference())
    };
    if s.experiment.placebo {
        let diff: Vec<&Finding> = fs.iter().filter(claims_difference).collect();
        let wrong: Vec<&str> = diff
            .iter()
            .filter(|f| f.verdict == Verdict::Reproduced)
            .map(|f| f.rule.as_str())
            .collect();
        let positive = match fs.iter().find(|f| f.rule == "control-positive") {
            Some(f) if f.verdict == Verdict::Reproduced => {
                " Its positive control (select with idle connections really held) was \
                 reproduced: the run could still see a real effect."
                    .to_string()
            }
            Some(f) => format!(
                " Its positive control (select with idle connections really held) FAILED ({}): \
                 the run could not see a real effect, so its null results say little.",
                f.verdict.word()
            ),
            None => " It had no positive control (no idle connections, or no select).".into(),
        };
        return if wrong.is_empty() {
            format!(
                "Placebo control: passed. This run gave both arms of every comparison the same \
                 condition, and none of its {} rules that claim a difference came out \
                 reproduced.{positive}",
                diff.len()
            )
        } else {
            format!(
                "Placebo control: FAILED. This run gave both arms of every comparison the same \
                 condition, yet {} came out reproduced: those rules can find a difference where \
                 there is none.{positive}",
                wrong.join(", ")
            )
        };
    }
    match fs.iter().find(|f| f.rule == "fig5-select-cpu") {
        Some(f) if f.verdict == Verdict::Inconclusive => "Positive control: not decided. The \
             run could not decide fig5-select-cpu (select's CPU per reply with idle connections \
             against none), the steadiest measure of the paper's largest effect, so its other \
             inconclusive verdicts say little."
            .into(),
        Some(f) => format!(
            "Positive control: passed (fig5-select-cpu, select's CPU per reply with idle \
             connections against none, was decided: {}). The placebo control is `evlab run {} --placebo`.",
            f.verdict.word(),
            s.experiment.name
        ),
        // The positive control is the paper family's; other families have none yet.
        None if s.experiment.family() != Family::Paper => format!(
            "Controls: the placebo control is `evlab run {} --placebo`.",
            s.experiment.name
        ),
        None => format!(
            "Controls: this run has no positive control (select with and without idle \
             connections); the placebo control is `evlab run {} --placebo`.",
            s.experiment.name
        ),
    }
}

/// The report, answer first: what the run shows (each verdict with its ratio and interval),
/// then the figures and tables, then how it was measured (calibration, validity), the
/// evidence in full, the machine and the commands.
fn document(s: &Summary) -> Vec<Block> {
    let mut d = overview(s);
    let fs = findings::findings(s);
    if !fs.is_empty() {
        d.push(Block::H(2, "What this run shows".into()));
        d.push(Block::P(format!("{}.", verdict_counts(&fs))));
        d.push(Block::List(fs.iter().map(verdict_line).collect()));
    }
    d.extend(crate::render::knee::section(s));
    d.extend(size_section(s));
    d.extend(response_section(s));
    let ax = axis(s);
    if ax != Axis::Rate {
        d.extend(swept_sections(s, &ax));
    }
    for &idle in s.idle_counts().iter().filter(|_| ax == Axis::Rate) {
        d.extend(rate_section(s, idle));
    }
    d.extend(syscall_table(s));
    if let Some(c) = &s.calibration {
        d.extend(calibration_section(c));
    }
    d.extend(validity_section(s));
    d.extend(paper_section(s, &fs));
    d.extend(machine_section(s));
    d.extend(reproduce_section(s));
    d
}

/// "Of 10 findings: 5 reproduced, 0 not reproduced, 5 inconclusive" (and "partly" where any).
pub fn verdict_counts(fs: &[Finding]) -> String {
    let n = |v: Verdict| fs.iter().filter(|f| f.verdict == v).count();
    format!(
        "Of {} findings: {} reproduced, {}{} not reproduced, {} inconclusive",
        fs.len(),
        n(Verdict::Reproduced),
        match n(Verdict::Partly) {
            0 => String::new(),
            p => format!("{p} partly, "),
        },
        n(Verdict::NotReproduced),
        n(Verdict::Inconclusive)
    )
}

/// One verdict: its word, the claim, the ratio with its interval where the rule decided on
/// one (else why not, in short), and where the paper says it.
fn verdict_line(f: &Finding) -> String {
    let stop = if f.claim.ends_with('.') { "" } else { "." };
    let arms = f
        .arms
        .as_ref()
        .map_or(String::new(), |[a, b]| format!(" A = {a}; B = {b}:"));
    let numbers = match f.interval {
        Some([r, lo, hi]) => format!("{arms} A/B = {r:.2} [90%: {lo:.2}–{hi:.2}]."),
        None => match f.evidence.rsplit_once("; ") {
            Some((_, why)) if f.verdict == Verdict::Inconclusive => format!("{arms} {why}."),
            _ => String::new(),
        },
    };
    format!(
        "**{}**: {}{stop}{numbers} ({})",
        f.verdict.word(),
        f.claim,
        f.source
    )
}

/// The title, the experiment's description and one paragraph on what was run and how it went.
fn overview(s: &Summary) -> Vec<Block> {
    let e = &s.experiment;
    let mut d = Vec::new();
    d.push(Block::H(1, format!("evlab run: {}", e.name)));
    if !e.description.trim().is_empty() {
        d.push(Block::P(e.description.trim().to_string()));
    }
    let ok = s.points.iter().filter(|p| p.ok()).count();
    let flagged = s
        .points
        .iter()
        .filter(|p| p.ok() && !p.flags.is_empty())
        .count();
    d.push(Block::P(format!(
        "{} workload{}; {} s per point{}; {}; {} trial(s); server on CPU {}, clients on CPU(s) {}; \
         {} points ({} measured, {} invalid, {} failed) in {:.0} s, {} → {}{}.",
        e.workload.label(),
        if e.calls_per_conn > 1 {
            format!(", {} requests per connection", e.calls_per_conn)
        } else {
            String::new()
        },
        s.duration_s(),
        if e.warmup_s > 0.0 {
            format!(" after {} s of warm-up", e.warmup_s)
        } else {
            String::new()
        },
        idle_and_sweep_words(e),
        e.trials,
        e.server_cpu,
        e.client_cpus
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(","),
        s.points.len(),
        ok,
        flagged,
        s.points.len() - ok,
        s.wall_s,
        s.started,
        s.finished.as_deref().unwrap_or("(unfinished)"),
        if s.interrupted {
            " — **interrupted**: these are the points measured before Ctrl-C"
        } else {
            ""
        }
    )));
    for r in &s.resumed {
        d.push(Block::P(format!(
            "Resumed at {} by `{}` (evlab {}): {} valid point(s) and {} capacity search(es) \
             kept; {} point(s) and {} search(es) measured then (points missing, failed or \
             flagged before, searches interrupted).",
            r.at,
            r.command,
            r.evlab_version,
            r.kept_points,
            r.kept_knees,
            r.measured_points,
            r.measured_knees
        )));
    }
    if !s.hosts.is_empty() {
        d.push(Block::P(hosts_words(s)));
    }
    if let Some(q) = &s.quiet {
        d.push(Block::P(quiet_words(
            q,
            "flagged points and wide intervals",
        )));
    }
    if s.experiment.placebo {
        d.push(Block::P(
            "**A placebo run** (`--placebo`): every evlab series ran one mechanism under its own \
             label, and no idle connections were held whatever the idle count says, so its \
             findings test the rules, not the mechanisms."
                .into(),
        ));
    }
    d
}

/// What the quiet check before a run found (`run::machine::quiet_check`), in a sentence; when
/// the machine was not quiet, the run should `expect` what follows.
pub(crate) fn quiet_words(q: &crate::model::machine::Quiet, expect: &str) -> String {
    let cpus = q
        .cpu_busy
        .iter()
        .map(|b| format!("{:.0}%", b * 100.0))
        .collect::<Vec<_>>()
        .join(", ");
    match q.problem() {
        None => format!(
            "Before the run the machine was quiet: CPUs busy {cpus} over {:.1} s, {:.0}% \
             stolen at most, no other busy process.",
            q.seconds,
            q.steal * 100.0
        ),
        Some(why) => format!(
            "**Before the run the machine was not quiet** ({why}; CPUs busy {cpus} over \
             {:.1} s): expect {expect}.",
            q.seconds
        ),
    }
}

/// The idle counts, and with `[sweep]` the swept values: `no idle connections and 10,000 idle
/// connections; every series at 1, 2, 4 workers (`--workers N`)`, and a series that runs at
/// some of them (`sweep_values`) named with its own.
fn idle_and_sweep_words(e: &Spec) -> String {
    let list = |v: &[f64]| v.iter().map(|&v| number(v)).collect::<Vec<_>>().join(", ");
    e.idle
        .iter()
        .map(|&i| idle_words(i))
        .collect::<Vec<_>>()
        .join(" and ")
        + &e.sweep
            .as_ref()
            .map(|sw| {
                let own: Vec<String> = e
                    .series
                    .iter()
                    .filter_map(|x| {
                        let v = x.sweep_values.as_ref()?;
                        Some(format!("{} at {}", x.label, list(v)))
                    })
                    .collect();
                let every = if own.is_empty() {
                    "every series"
                } else {
                    "the series"
                };
                format!(
                    "; {every} at {} {} (`{} N`){}",
                    list(&sw.values),
                    sw.name(),
                    sw.flag,
                    if own.is_empty() {
                        String::new()
                    } else {
                        format!(", but {}", own.join(", "))
                    }
                )
            })
            .unwrap_or_default()
}

/// What calibration measured: the client's ceiling, the budget and the rates chosen, each
/// series' capacity, and every probe.
fn calibration_section(c: &Calibration) -> Vec<Block> {
    let mut d = vec![Block::H(2, "Calibration".into())];
    d.push(Block::P(format!(
        "Before the sweep ({:.0} s) this machine was measured. The client started {}/s \
         connections flat out; the sweep offers at most {}/s (its clean ceiling, {:.0}% of \
         that). Server CPU budget: {} — {}.{}",
        c.wall_s,
        thousands(c.client_ceiling),
        thousands(c.client_clean),
        crate::model::calibration::CLEAN_SHARE * 100.0,
        c.server_cpu_budget
            .map(|b| format!("{:.0}% of one CPU (cgroup CPU quota)", b * 100.0))
            .unwrap_or_else(|| "none".into()),
        c.budget_reason,
        if c.rates.is_empty() {
            String::new()
        } else {
            format!(
                " Rates offered: {} (the experiment's multiples of the median capacity).",
                c.rates
                    .iter()
                    .map(|r| format!("{}/s", thousands(*r)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    )));
    if !c.capacities.is_empty() {
        d.push(Block::P(
            "Capacity at the budget, no idle connections (the highest probe rate kept up with; \
             ≥ means the probe reached the clean ceiling without the series falling behind):"
                .into(),
        ));
        d.push(Block::Table(
            vec!["series".into(), "kept up with".into()],
            c.capacities
                .iter()
                .map(|x| {
                    vec![
                        x.series.clone(),
                        format!(
                            "{}{}/s",
                            if x.saturated { "" } else { "≥ " },
                            thousands(x.replies_per_s)
                        ),
                    ]
                })
                .collect(),
        ));
    }
    if !c.probes.is_empty() {
        d.push(Block::P("The probes, in order:".into()));
        d.push(Block::Table(
            vec![
                "probe".into(),
                "series".into(),
                "budget".into(),
                "offered/s".into(),
                "replies/s".into(),
                "starts/s".into(),
                "client CPU busy".into(),
            ],
            c.probes
                .iter()
                .map(|p| {
                    vec![
                        p.what.clone(),
                        p.series.clone(),
                        p.budget
                            .map(|b| format!("{:.0}%", b * 100.0))
                            .unwrap_or_else(|| "–".into()),
                        thousands(p.offered),
                        p.replies_per_s.map(thousands).unwrap_or_default(),
                        p.achieved_start_rate.map(thousands).unwrap_or_default(),
                        p.client_cpu_busy
                            .map(|b| format!("{:.0}%", b * 100.0))
                            .unwrap_or_default(),
                    ]
                })
                .collect(),
        ));
    }
    d
}

/// One idle count against the offered rate: the figures, then the reply rate's, the server's
/// and the client's tables.
fn rate_section(s: &Summary, idle: usize) -> Vec<Block> {
    let mut d = vec![Block::H(2, format!("Reply rate, {}", idle_words(idle)))];
    // A line needs two rates: with one (quick: a low rate, and a capacity search for the
    // rest), the tables say it all.
    let mut rates: Vec<f64> = s
        .points
        .iter()
        .filter(|p| p.idle == idle)
        .map(|p| p.rate)
        .collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    if rates.len() > 1 {
        d.extend(figures(s, idle));
    }
    d.push(Block::P(
        "Replies/s: the mean over valid trials, ± the half-width of the mean's 90% interval where \
         two or more (the figures' bars: their min–max). † marks a \
         value from invalid points only (hollow in the figures; see Validity), (+n†) n invalid \
         trials left out of a valid mean (hollow markers off the line), ✗ a failed point. No \
         verdict uses an invalid point."
            .into(),
    ));
    d.push(rate_table(s, idle, &|p| p.reply_rate(), 0, Trials::Valid));
    d.push(Block::P(
        "Server CPU time per reply (µs), all its processes, from /proc:".into(),
    ));
    d.push(rate_table(
        s,
        idle,
        &|p| p.server_cpu_us_per_reply,
        2,
        Trials::Valid,
    ));
    d.push(Block::P(
        "Client CPU busy (%, wall time minus the kernel's idle time on the client CPUs, so \
         loopback softirq included), mean over every trial; † where a trial was invalid:"
            .into(),
    ));
    d.push(rate_table(
        s,
        idle,
        &|p| p.client_cpu_busy.map(|b| b * 100.0),
        0,
        Trials::AllOk,
    ));
    d
}

/// The validity rule in words, the table of what it found, and the points that failed or
/// series that were skipped.
fn validity_section(s: &Summary) -> Vec<Block> {
    let e = &s.experiment;
    let mut d = vec![Block::H(2, "Validity".into())];
    d.push(Block::P(format!(
        "Verdicts use valid points only. A point is invalid when the client fell behind for good \
         (it started connections at under {:.0}% of the offered rate, or its lag grew to the end), \
         its CPU was busy ≥ {:.0}% of the time (softirq included), it ran out of resources \
         (addrunavail, fd-unavail, ftab-full), or the server did not serve; httperf's manual calls \
         such runs invalid; so is a point that failed. Isolated lateness (a VM's scheduling jitter) \
         and steal are notes, not flags. Every point's flags and notes are in points.csv and \
         summary.json.",
        e.start_rate_limit * 100.0,
        e.client_cpu_limit * 100.0,
    )));
    d.extend(validity_table(s));
    let failed: Vec<String> = s
        .points
        .iter()
        .filter(|p| !p.ok())
        .map(|p| {
            format!(
                "point {}: {} idle={} rate={}: {}",
                p.index,
                p.label(),
                p.idle,
                thousands(p.rate),
                p.reason.as_deref().unwrap_or("?")
            )
        })
        .collect();
    if !failed.is_empty() {
        d.push(Block::P("Failed points:".into()));
        d.push(Block::List(failed));
    }
    if !s.skipped.is_empty() {
        d.push(Block::P("Skipped:".into()));
        d.push(Block::List(
            s.skipped
                .iter()
                .map(|x| format!("{}: {}", x.series, x.reason))
                .collect(),
        ));
    }
    d
}

/// The findings against the papers': how many reproduced, what the paper measured on, and
/// each finding with its numbers.
fn paper_section(s: &Summary, fs: &[Finding]) -> Vec<Block> {
    let mut d = vec![Block::H(2, "The paper's findings on this machine".into())];
    if fs.is_empty() {
        d.push(Block::P(
            "This experiment does not measure any of the paper's comparisons (it needs the paper's \
             mechanisms, and idle counts 0 and > 0, to compare)."
                .into(),
        ));
        return d;
    }
    let n = |v: Verdict| fs.iter().filter(|f| f.verdict == v).count();
    let from = |src: &str| fs.iter().all(|f| f.source.starts_with(src));
    let paper = if s.experiment.proxy.is_some() {
        "The proxy paper measured Squid on a 1 GHz Pentium III running Linux 2.4, with \
         Polygraph clients and server on separate machines behind a WAN emulator"
    } else if from("LSP") {
        "The LSP measured Apache 1.3.6 (1,000 processes accepting on one port, its accept \
         lock removed) on a 4-way 450 MHz Xeon running Linux 2.2.9, with SPECweb99 clients \
         on four machines over 100 Mbps Ethernet"
    } else if from("LSE") {
        "The LSE page measured dphttpd on an 8-way 700 MHz PIII Xeon (SMP) and a 1-way \
         866 MHz PIII (UP) running Linux 2.5, with httperf and deadconn on a client machine"
    } else {
        "The paper measured a 2.4 GHz Xeon running Linux 2.6.5 uni-processor with eight \
         client machines over gigabit Ethernet"
    };
    d.push(Block::P(format!(
        "Of {} findings checked, {} reproduced, {}{} not reproduced, {} inconclusive. \
         {paper}; this run had {} on one machine over loopback ({}).",
        fs.len(),
        n(Verdict::Reproduced),
        match n(Verdict::Partly) {
            0 => String::new(),
            p => format!("{p} partly, "),
        },
        n(Verdict::NotReproduced),
        n(Verdict::Inconclusive),
        s.machine.cpu_model,
        s.machine
            .kernel
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    )));
    d.push(Block::Table(
        vec![
            "paper".into(),
            "finding".into(),
            "here".into(),
            "numbers".into(),
        ],
        fs.iter()
            .map(|f| {
                vec![
                    f.source.clone(),
                    f.claim.clone(),
                    f.verdict.word().into(),
                    f.evidence.clone(),
                ]
            })
            .collect(),
    ));
    d.push(Block::P(controls(s, fs)));
    d
}

/// The machine's kernel, CPU, memory and limits, and the tools' versions.
fn machine_section(s: &Summary) -> Vec<Block> {
    let m = &s.machine;
    let mut tools: Vec<String> = m.tools.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    tools.sort();
    vec![
        Block::H(2, "Machine and tools".into()),
        Block::List(vec![
            format!("kernel: {}", m.kernel),
            format!("CPU: {} × {}", m.cpus, m.cpu_model),
            format!("memory: {} MiB", m.memory_mib),
            format!(
                "open files: soft {}, hard {}, fs.nr_open {}",
                m.fd_limit_soft, m.fd_limit_hard, m.fs_nr_open
            ),
            format!(
                "net: ip_local_port_range {}, tcp_tw_reuse {}, somaxconn {}",
                m.ip_local_port_range, m.tcp_tw_reuse, m.somaxconn
            ),
            format!("evlab {}", m.evlab_version),
            format!("host: {}", m.hostname),
        ]),
        Block::List(tools),
    ]
}

/// How to run it all again, and each point by hand: the spec, then every point's commands.
fn reproduce_section(s: &Summary) -> Vec<Block> {
    let mut d = vec![Block::H(2, "How to reproduce".into())];
    d.push(Block::P(format!(
        "The whole run: `{}` (spec `{}`, below). Then each point by hand, in start order: its \
         commands make its document root again (the run's scratch directory is removed when \
         it ends), start the server (and the idle holder) in the background, wait until they \
         answer, run the load and stop them; pasted into a shell (sh or bash, with curl) they \
         measure the point again, on the port the run used. A CPU budget is made as the run \
         made it: a cgroup with a CPU quota (made by root, or by the owner of its parent group), which the server joins.",
        s.command, s.spec_path
    )));
    d.push(Block::Code(
        s.spec_text.lines().map(|l| l.to_string()).collect(),
    ));
    let mut cmds = Vec::new();
    for p in &s.points {
        cmds.push(format!(
            "# point {}: {} idle={} rate={} trial {}",
            p.index,
            p.label(),
            p.idle,
            p.rate,
            p.trial
        ));
        // Results from before the commands made the document root (evlab 0.1.0 until issue
        // 12) name a directory that is gone.
        if p.commands
            .first()
            .is_some_and(|c| !c.starts_with("mkdir -p "))
        {
            cmds.push(
                "# (recorded without its setup: first make the --root directory, holding a \
                 one-byte file `one`, and run the server in the background)"
                    .into(),
            );
        }
        cmds.extend(p.commands.iter().cloned());
    }
    d.push(Block::Code(cmds));
    d.push(Block::P(
        "Raw data: `points.csv` (one row per point), `samples.csv` (one row per sample interval), \
         `summary.json` (everything), `load/point-NNN.json` (the generator's own reports). \
         Re-render with `evlab report DIR`. Method: docs/methodology.md."
            .into(),
    ));
    d
}

/// Numbers are right-aligned, words left-aligned (the first column is always labels).
fn numeric_column(rows: &[Vec<String>], i: usize) -> bool {
    i > 0
        && rows.iter().all(|r| {
            r.get(i).is_none_or(|c| {
                c.is_empty()
                    || c.starts_with(|ch: char| ch.is_ascii_digit() || "-–✗+≥".contains(ch))
            })
        })
}

fn md_inline(s: &str) -> String {
    s.replace('|', "\\|")
}

pub fn render_md(s: &Summary) -> String {
    let mut o = String::new();
    for b in document(s) {
        match b {
            Block::H(l, t) => {
                let _ = writeln!(o, "{} {t}\n", "#".repeat(l as usize));
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
                let _ = writeln!(
                    o,
                    "| {} |",
                    h.iter()
                        .map(|c| md_inline(c))
                        .collect::<Vec<_>>()
                        .join(" | ")
                );
                let _ = writeln!(
                    o,
                    "|{}",
                    (0..h.len())
                        .map(|i| if numeric_column(&rows, i) {
                            "---:|"
                        } else {
                            "---|"
                        })
                        .collect::<String>()
                );
                for r in rows {
                    let _ = writeln!(
                        o,
                        "| {} |",
                        r.iter()
                            .map(|c| md_inline(c))
                            .collect::<Vec<_>>()
                            .join(" | ")
                    );
                }
                o.push('\n');
            }
            Block::Figure { file, alt, .. } => {
                let _ = writeln!(o, "![{alt}]({file})\n");
            }
            Block::Code(lines) => {
                let _ = writeln!(o, "```\n{}\n```\n", lines.join("\n"));
            }
        }
    }
    o
}

/// Escapes, then turns `code` and **bold** into HTML (the micro-benchmarks' reports too).
pub(crate) fn html_inline(s: &str) -> String {
    let e = esc(s);
    let mut out = String::new();
    for (i, part) in e.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            for (j, q) in part.split("**").enumerate() {
                if j % 2 == 1 {
                    let _ = write!(out, "<strong>{q}</strong>");
                } else {
                    out.push_str(q);
                }
            }
        }
    }
    out
}

// Wide enough for two figures side by side (640 px each); text keeps a readable measure.
const CSS: &str = "body{font-family:Helvetica,Arial,sans-serif;max-width:1320px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}\
p,ul{max-width:72em}figure svg{max-width:100%;height:auto}\
table{border-collapse:collapse;margin:0.5em 0 1.2em;font-size:0.9em}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}\
th:first-child,td:first-child{text-align:left}th{background:#f3f3f3}code{background:#f5f5f5;padding:0 3px}\
pre{background:#f7f7f7;padding:0.8em;overflow-x:auto;font-size:0.85em}figure{margin:0.8em 8px 0.8em 0;display:inline-block;vertical-align:top}\
h2{border-bottom:1px solid #ddd;padding-bottom:0.2em;margin-top:1.6em}.verdict-reproduced{color:#176b1d}\
.verdict-not{color:#a11}.verdict-inconclusive{color:#777}";

pub fn render_html(s: &Summary) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>evlab run: {}</title>\
         <style>{CSS}</style></head><body>\n",
        esc(&s.experiment.name)
    );
    for b in document(s) {
        match b {
            Block::H(l, t) => {
                let _ = writeln!(o, "<h{l}>{}</h{l}>", html_inline(&t));
            }
            Block::P(t) => {
                let _ = writeln!(o, "<p>{}</p>", html_inline(&t));
            }
            Block::List(items) => {
                o.push_str("<ul>\n");
                for i in items {
                    let class = if i.starts_with("**reproduced**") {
                        " class=\"verdict-reproduced\""
                    } else if i.starts_with("**not reproduced**") {
                        " class=\"verdict-not\""
                    } else if i.starts_with("**inconclusive**") {
                        " class=\"verdict-inconclusive\""
                    } else {
                        ""
                    };
                    let _ = writeln!(o, "<li{class}>{}</li>", html_inline(&i));
                }
                o.push_str("</ul>\n");
            }
            Block::Table(h, rows) => {
                let align: Vec<bool> = (0..rows.first().map_or(0, |r| r.len()))
                    .map(|i| numeric_column(&rows, i))
                    .collect();
                // Headings align with their column: numbers right, words left.
                o.push_str("<table><thead><tr>");
                for (i, c) in h.iter().enumerate() {
                    let style = if align.get(i) == Some(&false) && i > 0 {
                        " style=\"text-align:left\""
                    } else {
                        ""
                    };
                    let _ = write!(o, "<th{style}>{}</th>", html_inline(c));
                }
                o.push_str("</tr></thead><tbody>\n");
                for r in rows {
                    o.push_str("<tr>");
                    for (i, c) in r.iter().enumerate() {
                        let style = if align.get(i) == Some(&false) && i > 0 {
                            " style=\"text-align:left\""
                        } else {
                            ""
                        };
                        let _ = write!(o, "<td{style}>{}</td>", html_inline(c));
                    }
                    o.push_str("</tr>\n");
                }
                o.push_str("</tbody></table>\n");
            }
            Block::Figure { file, svg, .. } => {
                let _ = writeln!(o, "<figure id=\"{}\">{svg}</figure>", esc(&file));
            }
            Block::Code(lines) => {
                let _ = writeln!(o, "<pre>{}</pre>", esc(&lines.join("\n")));
            }
        }
    }
    o.push_str(crate::render::svg::SCRIPT);
    o.push_str("</body></html>\n");
    o
}

/// Writes report.md, report.html and every figure as `fig-*.svg`.
pub fn write(s: &Summary, dir: &Path) -> Result<(), LabError> {
    let mut written = Vec::new();
    for b in document(s) {
        if let Block::Figure { file, svg, .. } = b {
            write_atomic(&dir.join(&file), &svg)?;
            written.push(file);
        }
    }
    // A figure an earlier rendering drew and this one does not would be a stale file beside
    // the report: the report's figures are exactly those it names.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with("fig-") && name.ends_with(".svg") && !written.contains(&name) {
                std::fs::remove_file(e.path())?;
            }
        }
    }
    write_atomic(&dir.join("report.md"), &render_md(s))?;
    write_atomic(&dir.join("report.html"), &render_html(s))
}

/// The paragraph of a run across hosts (`--hosts`): each host's role, kernel, evlab and clock
/// offset, and how the load was split and merged.
fn hosts_words(s: &Summary) -> String {
    let each: Vec<String> = s
        .hosts
        .iter()
        .map(|h| {
            format!(
                "{} ({}{}): {}, {}{}, clock offset {:+.2} ms ± {:.2} ms",
                h.name,
                h.role
                    .map_or("host".to_string(), |r| format!("{r:?}").to_lowercase()),
                h.address
                    .as_deref()
                    .map(|a| format!(" at {a}"))
                    .unwrap_or_default(),
                h.kernel,
                h.evlab_version,
                if h.copied { " (copied there)" } else { "" },
                h.clock_offset_ms,
                h.clock_bound_ms
            )
        })
        .collect();
    let clients = s
        .hosts
        .iter()
        .filter(|h| h.role == Some(crate::model::hosts::Role::Client))
        .count();
    format!(
        "Run across hosts (`--hosts`): {}. The server ran on the server host, its CPU time and \
         context switches read there; each point's load was split evenly over the {clients} \
         client host(s), all started at one agreed instant (in each host's clock: plus its \
         offset), and their reports merged exactly (counts added, percentiles from the added \
         histograms, rates over their common window); each client's own report is beside \
         the summary (`load/point-NNN-HOST.json`).{}{}",
        each.join("; "),
        network_words(s),
        ports_words(s, clients)
    )
}

/// A warning for each client host whose ephemeral ports, each held 60 s in TIME_WAIT and not
/// reusable there (`tcp_tw_reuse` ≠ 1), cannot last the highest rate it was given: past them
/// connect() searches the port range in the kernel and the client falls behind.
fn ports_words(s: &Summary, clients: usize) -> String {
    let top = s.points.iter().map(|p| p.rate).fold(0.0, f64::max) / clients.max(1) as f64;
    s.hosts
        .iter()
        .filter(|h| h.role == Some(crate::model::hosts::Role::Client))
        .filter_map(|h| {
            let sustained = h.sustained_connect_rate()?;
            (top > sustained).then(|| {
                format!(
                    " Host {} had net.ipv4.tcp_tw_reuse = {} and {} ephemeral ports, each held                      60 s in TIME_WAIT: about {} new connections/s to one server address,                      sustained, against the {} it was given; past that connect() searches the                      port range in the kernel and the client falls behind (set                      net.ipv4.tcp_tw_reuse = 1 there, as scripts/netns-hosts.sh does).",
                    h.name,
                    h.tcp_tw_reuse.unwrap_or(0),
                    thousands(h.ephemeral_ports.unwrap_or(0) as f64),
                    thousands(sustained),
                    thousands(top)
                )
            })
        })
        .collect()
}

/// The sentence on `[network]`'s conditions of a run across hosts (empty without them).
fn network_words(s: &Summary) -> String {
    let each: Vec<String> = s
        .network
        .iter()
        .map(|n| {
            format!(
                "{} on host {}'s {} ({}{})",
                n.condition,
                n.host,
                n.interface,
                n.how.join(" and "),
                if n.removed {
                    ", removed after"
                } else {
                    ", NOT checked removed"
                }
            )
        })
        .collect();
    if each.is_empty() {
        String::new()
    } else {
        format!(
            " Network conditions (`[network]`) for the whole run: {}.",
            each.join("; ")
        )
    }
}

#[cfg(test)]
mod tests;
