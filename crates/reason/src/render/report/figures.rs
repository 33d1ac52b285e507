//! The report's figures: one per metric against the offered rate (or the swept value), panels
//! by idle count, small multiples when there are many series, and the proxy's sizes and
//! response-time percentiles.

use std::collections::BTreeMap;

use crate::analysis::findings;
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

/// What the run's CPU figures measured, and per what: the proxy's CPU per request in a proxy
/// experiment (the origin runs outside the budget, unmeasured), else the server's per reply.
pub(super) fn cpu_words(s: &Summary) -> (&'static str, &'static str) {
    if s.experiment.proxy.is_some() {
        ("proxy CPU", "request")
    } else {
        ("server CPU", "reply")
    }
}

/// Whether every point `keep` accepts was simply answered: the offered load met, so that a
/// figure of its reply rate says nothing its offered rate does not. With a known number of
/// requests per connection: every point answered at least 95% of the requests offered; else
/// (the Polymix-like sessions): no point had errors over 1% of its connections, and each
/// series answered within 5% of one reply rate at each offered rate, whatever else changed
/// (the idle connections). A run of fixed connections
/// (`active_conns`) measures its throughput: never "met".
pub(super) fn offered_met(s: &Summary, keep: &dyn Fn(&PointResult) -> bool) -> bool {
    let e = &s.experiment;
    if e.active_conns.is_some() {
        return false;
    }
    let ps: Vec<&PointResult> = s.points.iter().filter(|p| p.ok() && keep(p)).collect();
    if ps.is_empty() {
        return false;
    }
    let Some(calls) = e.requests_per_conn() else {
        let clean = ps
            .iter()
            .all(|p| p.error_share().is_some_and(|x| x <= 0.01));
        let flat = ps.iter().all(|p| {
            let same: Vec<f64> = ps
                .iter()
                .filter(|q| q.rate == p.rate && q.series == p.series)
                .filter_map(|q| q.reply_rate())
                .collect();
            match (p.reply_rate(), svg::min_max(&same)) {
                (Some(_), Some((lo, hi))) => lo > 0.0 && hi / lo <= 1.05,
                (Some(_), None) => true,
                (None, _) => false,
            }
        });
        return clean && flat;
    };
    ps.iter()
        .all(|p| p.reply_rate().is_some_and(|r| r >= 0.95 * p.rate * calls))
}

/// The figures of one idle count: reply rate (with y = x; left out where every offered load was
/// met), p99 reply time on a log scale (from under a millisecond below saturation to the
/// timeout above it: a linear axis shows only the blow-up and flattens every difference below
/// the knee into zero), errors as a share of the connections started (comparable across rates,
/// as counts are not; left out when there were none), CPU per reply. Each metric's figures
/// share their axes across the idle counts, so that the idle connections' cost shows.
pub(super) fn figures(s: &Summary, idle: usize) -> Vec<Block> {
    let xl = x_label(s);
    let wl = s.experiment.workload.label();
    let (cpu, per) = cpu_words(s);
    let mut v = Vec::new();
    let specs: [(&str, String, String, bool, Scale, Metric); 4] = [
        (
            "replies",
            format!("evlab, {wl} workload"),
            "replies/s".into(),
            true,
            Scale::Linear,
            Box::new(|p: &PointResult| p.reply_rate()),
        ),
        (
            "p99",
            "99th percentile reply time".into(),
            "p99 reply time (ms)".into(),
            false,
            Scale::Log,
            Box::new(|p: &PointResult| p.p99_ms()),
        ),
        (
            "errors",
            "client errors".into(),
            "errors (% of connections)".into(),
            false,
            Scale::Linear,
            Box::new(|p: &PointResult| p.error_share().map(|e| e * 100.0)),
        ),
        (
            "cpu",
            format!("{cpu} per {per}"),
            format!("{cpu} µs per {per}"),
            false,
            Scale::Linear,
            Box::new(|p: &PointResult| p.server_cpu_us_per_reply),
        ),
    ];
    let idles = s.idle_counts();
    for (tag, what, yl, diagonal, y_scale, f) in specs {
        if tag == "replies" && offered_met(s, &|_| true) {
            continue;
        }
        let charts: Vec<(usize, Chart)> = idles
            .iter()
            .map(|&i| {
                let title = format!("{what}, {}", idle_words(i));
                let lines = lines(s, i, f.as_ref());
                (i, chart(title, &xl, &yl, lines, (diagonal, y_scale)))
            })
            .collect();
        let values = charts
            .iter()
            .flat_map(|(_, c)| c.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
        if tag == "errors" && !values.into_iter().any(|y| y > 0.0) {
            continue;
        }
        // The paper's own numbers over its reply-rate figures, each panel's (so that the
        // panels share axes that hold them all).
        let refs: Vec<Vec<svg::Ref>> = if tag == "replies" {
            let fs = findings::findings(s);
            let panels: Vec<(usize, &[Line])> =
                charts.iter().map(|(i, c)| (*i, &c.lines[..])).collect();
            idles
                .iter()
                .map(|&i| crate::render::seeds::rate_refs(s, &fs, i, &panels))
                .collect()
        } else {
            idles.iter().map(|_| vec![]).collect()
        };
        let group: Vec<(&Chart, &[svg::Ref])> = charts
            .iter()
            .zip(&refs)
            .map(|((_, c), r)| (c, r.as_slice()))
            .collect();
        let axes = svg::shared_axes(&group, Scale::Linear);
        drop(group);
        let Some(((_, c), refs)) = charts.into_iter().zip(refs).find(|((i, _), _)| *i == idle)
        else {
            continue;
        };
        if c.lines.iter().all(|l| l.points.is_empty()) {
            continue;
        }
        for (slug, c, refs) in by_mechanism(s, c, refs) {
            v.push(Block::Figure {
                file: format!("fig-{tag}-idle{idle}{slug}.svg"),
                svg: svg::line_chart_on(&c, &refs, &axes),
                alt: c.title.clone(),
            });
            if !refs.is_empty() {
                v.extend(seeds_said(&refs));
            }
        }
    }
    v
}

/// A chart of more than [`MOST_SERIES`] lines as one panel per mechanism (fig7's accept-limits
/// beside each mechanism without one), on the axes they already share; each panel keeps the
/// sources' numbers set against its own series, and its file a suffix ("-epoll-ctlv"). Where
/// the mechanisms do not make such panels (one series each, or too many of one),
/// [`small_multiples`] in order ("-1", "-2", …). A chart of few lines stays whole.
fn by_mechanism(s: &Summary, c: Chart, refs: Vec<svg::Ref>) -> Vec<(String, Chart, Vec<svg::Ref>)> {
    if c.lines.len() <= MOST_SERIES {
        return vec![(String::new(), c, refs)];
    }
    let mechanism = |label: &str| {
        s.series
            .iter()
            .find(|x| x.label == label)
            .map_or_else(|| label.to_string(), |x| x.mechanism.clone())
    };
    let mut groups: Vec<(String, Vec<Line>)> = Vec::new();
    for l in c.lines {
        let m = mechanism(&l.label);
        match groups.iter_mut().find(|g| g.0 == m) {
            Some(g) => g.1.push(l),
            None => groups.push((m, vec![l])),
        }
    }
    // Panels of one line each compare nothing: per mechanism only where each panel holds two
    // lines on average.
    let lines_n: usize = groups.iter().map(|g| g.1.len()).sum();
    if groups.len() < 2
        || 2 * groups.len() > lines_n
        || groups.iter().any(|g| g.1.len() > MOST_SERIES)
    {
        let lines = groups.into_iter().flat_map(|g| g.1).collect();
        groups = small_multiples(lines)
            .into_iter()
            .enumerate()
            .map(|(k, ls)| ((k + 1).to_string(), ls))
            .collect();
    }
    let first = groups.first().map(|g| g.0.clone());
    groups
        .into_iter()
        .map(|(name, lines)| {
            let mine: Vec<svg::Ref> = refs
                .iter()
                .filter(|r| match &r.series {
                    Some(series) => lines.iter().any(|l| &l.label == series),
                    None => first.as_ref() == Some(&name),
                })
                .cloned()
                .collect();
            let panel = Chart {
                title: format!("{}: {name}", c.title),
                lines,
                x_label: c.x_label.clone(),
                y_label: c.y_label.clone(),
                diagonal: c.diagonal,
                y_scale: c.y_scale,
            };
            (format!("-{name}"), panel, mine)
        })
        .collect()
}

/// Under a figure with the paper's own numbers drawn over it, what each is and where the paper
/// says it (a figure's hover text is not seen where report.md shows it as an image).
fn seeds_said(refs: &[svg::Ref]) -> [Block; 2] {
    [
        Block::P(
            "The grey diamonds labelled \"paper\" are the paper's own numbers, ratios its text \
             states, set on this run's data (our machine's rates are not the paper's):"
                .into(),
        ),
        Block::List(refs.iter().map(|r| r.tip.clone()).collect()),
    ]
}

/// A chart of `lines`: its title, axes' names, whether it draws y = x, and its y scale.
pub(super) fn chart(
    title: String,
    x_label: &str,
    y_label: &str,
    lines: Vec<Line>,
    (diagonal, y_scale): (bool, Scale),
) -> Chart {
    Chart {
        title,
        x_label: x_label.into(),
        y_label: y_label.into(),
        lines,
        diagonal,
        y_scale,
    }
}

/// With one offered rate and several idle counts against the offered rate (quick: a low rate
/// for the CPU rules, a capacity search for the rest), the rate sections draw no line; CPU per
/// reply at that rate against the idle connections is the run's clearest effect, drawn as the
/// capacity is.
pub(super) fn one_rate_section(s: &Summary) -> Vec<Block> {
    let rates = s.offered_rates(|_| true);
    if axis(s) != Axis::Rate || rates.len() != 1 || s.idle_counts().len() < 2 {
        return vec![];
    }
    let (cpu, per) = cpu_words(s);
    let lines = lines_by(s, &|_| true, &|p| Some(p.idle as f64), &|p| {
        p.server_cpu_us_per_reply
    });
    if lines.iter().all(|l| l.points.is_empty()) {
        return vec![];
    }
    let title = format!(
        "{cpu} per {per} at {}/s offered, against idle connections",
        thousands(rates[0])
    );
    let c = chart(
        title.clone(),
        "idle connections",
        &format!("{cpu} µs per {per}"),
        lines,
        (false, Scale::Linear),
    );
    vec![
        Block::H(2, format!("{} per {per}", capitalise(cpu))),
        Block::P(format!(
            "The {cpu} time of the measured run over its {per}s, at the run's one offered rate              ({}/s, below every knee: each {per} costs what it costs with no queue), against              the idle connections held: the mean of the valid trials, their min–max as bars.              The rules on CPU read it; the tables below give it with its interval.",
            thousands(rates[0])
        )),
        Block::Figure {
            file: "fig-cpu-vs-idle.svg".into(),
            svg: svg::line_chart(&c),
            alt: title,
        },
    ]
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
            offered_words(s, r)
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
    let (cpu, per) = cpu_words(s);
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
        let mut met = false;
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
            let (what, yl) = match tag {
                "cpu" => (format!("{cpu} per {per}"), format!("{cpu} µs per {per}")),
                _ => (what.to_string(), yl.to_string()),
            };
            if tag == "replies" && offered_met(s, &keep) {
                met = true;
            } else {
                let file = format!("fig-{tag}-vs-{x_tag}{}", panel.suffix);
                let title = format!("{}: {what}", panel.words);
                let refs = idle_refs(s, tag, &ls);
                d.extend(series_figures(
                    &file,
                    &title,
                    (&x_label, &yl, y_scale),
                    ls,
                    refs,
                    &|x| category_words(ax, x),
                ));
            }
            tables.push(Block::P(format!(
                "{} ({yl}), by {head}:",
                capitalise(&what)
            )));
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
        if met {
            d.push(Block::P(
                "Every point answered what it was offered: the reply rate is only in its table."
                    .into(),
            ));
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

/// A category of a swept axis in words: "no idle", "10,000 idle", "64 workers".
fn category_words(ax: &Axis, x: f64) -> String {
    match ax {
        Axis::Idle if x == 0.0 => "no idle".into(),
        Axis::Idle => format!("{} idle", thousands(x)),
        Axis::Swept(name) => format!("{} {name}", number(x)),
        Axis::Rate => format!("{}/s offered", thousands(x)),
    }
}

/// One question's figures: the series as lines on one chart, or as small multiples of at most
/// [`MOST_SERIES`] on shared axes; or, with more series than that at three x values or fewer
/// (the proxy's 18 series at 0 and 10,000 idle connections), one dot plot of a row per series
/// and a marker per x value, every series on one scale.
pub(super) fn series_figures(
    file: &str,
    title: &str,
    (x_label, y_label, y_scale): (&str, &str, Scale),
    lines: Vec<Line>,
    refs: Vec<svg::Ref>,
    category: &dyn Fn(f64) -> String,
) -> Vec<Block> {
    let mut xs: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    if lines.len() > MOST_SERIES && xs.len() <= 3 {
        let cats: Vec<(f64, String)> = xs.iter().map(|&x| (x, category(x))).collect();
        return vec![Block::Figure {
            file: format!("{file}.svg"),
            svg: dot_plot(title, y_label, y_scale, &cats, &lines, (None, &refs)),
            alt: title.to_string(),
        }];
    }
    let groups = small_multiples(lines);
    let n = groups.len();
    let figs: Vec<(String, Chart, Vec<svg::Ref>)> = groups
        .into_iter()
        .enumerate()
        .map(|(k, lines)| {
            let (t, part) = if n == 1 {
                (title.to_string(), String::new())
            } else {
                (format!("{title} ({} of {n})", k + 1), format!("-{}", k + 1))
            };
            let mine: Vec<svg::Ref> = refs
                .iter()
                .filter(|r| {
                    r.series
                        .as_ref()
                        .is_none_or(|x| lines.iter().any(|l| &l.label == x))
                })
                .cloned()
                .collect();
            let c = chart(t, x_label, y_label, lines, (false, y_scale));
            (format!("{file}{part}.svg"), c, mine)
        })
        .collect();
    drawn_together(figs, Scale::Linear)
}

/// Figures drawn on one set of axes, so that their values can be set side by side; one whose
/// every line is empty is left out.
pub(super) fn drawn_together(
    figs: Vec<(String, Chart, Vec<svg::Ref>)>,
    x_scale: Scale,
) -> Vec<Block> {
    let group: Vec<(&Chart, &[svg::Ref])> =
        figs.iter().map(|(_, c, r)| (c, r.as_slice())).collect();
    let axes = svg::shared_axes(&group, x_scale);
    figs.iter()
        .filter(|(_, c, _)| c.lines.iter().any(|l| !l.points.is_empty()))
        .map(|(file, c, refs)| Block::Figure {
            file: file.clone(),
            svg: svg::line_chart_on(c, refs, &axes),
            alt: c.title.clone(),
        })
        .collect()
}

/// A dot plot of `lines`: a row per series, a marker per category (its x value, named), the
/// trials' min–max as bars and invalid points hollow; the value axis logarithmic as a line
/// chart's would be (asked, or spanning ten times or more), on `range` when given (shared).
pub(super) fn dot_plot(
    title: &str,
    value_label: &str,
    scale: Scale,
    cats: &[(f64, String)],
    lines: &[Line],
    (range, refs): (Option<(f64, f64)>, &[svg::Ref]),
) -> String {
    let mut rows = Vec::new();
    let mut all = Vec::new();
    for l in lines {
        let mut marks = Vec::new();
        for (k, &(x, y)) in l.points.iter().enumerate() {
            let Some(i) = cats.iter().position(|c| c.0 == x) else {
                continue;
            };
            let range = l.ranges.get(k).copied().flatten();
            all.push(y);
            all.extend(range.iter().flat_map(|r| [r.0, r.1]));
            marks.push(svg::RowMark {
                category: Some(i),
                value: y,
                interval: range,
                colour: svg::colour(i),
                hollow: l.flagged.get(k).copied().unwrap_or(false),
                tip: format!(
                    "{}: {} → {} {value_label}",
                    cats[i].1,
                    l.label,
                    svg::value_text(y)
                ),
            });
        }
        let refs: Vec<(f64, f64, String)> = refs
            .iter()
            .filter(|r| r.series.as_ref() == Some(&l.label))
            .map(|r| (r.lo, r.hi, r.tip.clone()))
            .collect();
        all.extend(refs.iter().flat_map(|r| [r.0, r.1]));
        rows.push(svg::Row {
            label: l.label.clone(),
            marks,
            refs,
            ..Default::default()
        });
    }
    let log = scale == Scale::Log
        || svg::min_max(&all).is_some_and(|(lo, hi)| lo > 0.0 && hi / lo >= 10.0);
    svg::row_chart(&svg::RowChart {
        title: title.to_string(),
        x_label: value_label.to_string(),
        log,
        categories: cats.iter().map(|c| c.1.clone()).collect(),
        rows,
        guide: None,
        notes: vec![
            "Bars: min–max over trials; hollow: an invalid point (no verdict uses it).".into(),
        ],
        stacked: false,
        range,
    })
}

/// The sources' numbers over a figure against the idle connections: on the proxy's CPU per
/// request, each proxy rule's (uselect against select, splice against copy, …; not the
/// response time's, nor the rate's or the object size's), at arm A's idle count and series.
pub(super) fn idle_refs(s: &Summary, tag: &str, lines: &[Line]) -> Vec<svg::Ref> {
    if tag != "cpu" || s.experiment.proxy.is_none() {
        return vec![];
    }
    let fs = findings::findings(s);
    let reads = |id: &str| {
        id.starts_with("proxy-")
            && ![
                "proxy-rt-",
                "proxy-rate-",
                "proxy-splice-size",
                "proxy-keepcopy",
            ]
            .iter()
            .any(|p| id.starts_with(p))
    };
    let on_figure = |arm: &str| {
        let (x, series) = crate::render::seeds::arm_at_idle(arm)?;
        lines
            .iter()
            .any(|l| l.label == series && l.points.iter().any(|p| p.0 == x))
            .then_some((x, series))
    };
    crate::render::seeds::seed_refs(&fs, &reads, &on_figure)
}

/// An offered rate in words. One request per connection: "1,500/s offered"; else the
/// connections (or sessions) and the requests they made: "100 connections/s offered (about
/// 1,300 requests/s)", from the median reply rate of the points at that rate.
pub(super) fn offered_words(s: &Summary, rate: f64) -> String {
    if s.experiment.requests_per_conn() == Some(1.0) {
        return format!("{}/s offered", thousands(rate));
    }
    let mut r: Vec<f64> = s
        .points
        .iter()
        .filter(|p| p.ok() && p.rate == rate)
        .filter_map(|p| p.reply_rate())
        .collect();
    r.sort_by(f64::total_cmp);
    let unit = match s.experiment.workload {
        Workload::Specweb => "sessions",
        _ => "connections",
    };
    match r.get(r.len() / 2) {
        Some(&m) if m > 0.0 => {
            let digits = 10f64.powf((m.log10().floor() - 1.0).max(0.0));
            format!(
                "{} {unit}/s offered (about {} requests/s)",
                thousands(rate),
                thousands((m / digits).round() * digits)
            )
        }
        _ => format!("{} {unit}/s offered", thousands(rate)),
    }
}
