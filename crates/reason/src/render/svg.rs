//! Line charts drawn by hand as SVG, in the paper's manner: x the offered rate, y what the
//! clients saw, one line with its own marker per mechanism, a legend. No dependency and
//! deterministic output, so a re-rendered report is byte-for-byte the original.

mod axis;
mod marks;
mod rows;

pub use self::rows::{row_chart, Row, RowChart, RowMark};

use std::fmt::Write as _;

use self::axis::{
    fmt_tick, linear_x_axis, linear_y_axis, log_x_axis, log_y_axis, x_decimals, H, L, PH, PW, T, W,
};
pub use self::marks::{colour, esc};
use self::marks::{error_bar, marker, marker_with, nest, Mark, COLOURS};

pub struct Line {
    pub label: String,
    /// (x, y) in x order; a gap (missing y) is simply left out.
    pub points: Vec<(f64, f64)>,
    /// Points to draw hollow (flagged as invalid measurements).
    pub flagged: Vec<bool>,
    /// Per point, the min–max of its trials, drawn as an error bar (`None`: one trial).
    pub ranges: Vec<Option<(f64, f64)>>,
    /// Invalid trials at an x where other trials were valid: drawn hollow, off the line.
    pub stray: Vec<(f64, f64)>,
}

/// The min–max of `v` as an error bar: None for fewer than two values.
pub fn min_max(v: &[f64]) -> Option<(f64, f64)> {
    (v.len() > 1).then(|| {
        (
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        )
    })
}

/// A series' line with nothing on it yet.
pub fn empty_line(label: &str) -> Line {
    Line {
        label: label.to_string(),
        points: vec![],
        flagged: vec![],
        ranges: vec![],
        stray: vec![],
    }
}

pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub lines: Vec<Line>,
    /// Draw y = x (replies = requests), the ideal a server tracks until it saturates.
    pub diagonal: bool,
    pub y_scale: Scale,
}

/// How the y axis maps values. The x axis (the offered rate) is always linear from zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// From zero, ticks 1, 2 or 5 × 10^k apart.
    Linear,
    /// Decades; for values spanning orders of magnitude (reply times from under a millisecond
    /// to the timeout). Values ≤ 0 cannot be drawn and are left out.
    Log,
}

/// The chart as a standalone `<svg>` element. Each line is one `<polyline class="series">`.
pub fn line_chart(c: &Chart) -> String {
    line_chart_x(c, Scale::Linear)
}

/// As [`line_chart`], with the x axis on `x_scale`. On a log x axis (counts of pipes or workers
/// from 1 to thousands) the ticks are the points' own x values, as many as fit without their
/// labels touching (the largest always), and the diagonal is not drawn.
pub fn line_chart_x(c: &Chart, x_scale: Scale) -> String {
    line_chart_on(c, &[], &shared_axes(&[(c, &[])], x_scale))
}

/// A number a source gives, drawn over a chart where it can be set against what was measured:
/// a grey hollow diamond at (x, `lo`) when `lo` = `hi`, else a grey band from `lo` to `hi` at x.
#[derive(Clone, Debug, PartialEq)]
pub struct Ref {
    pub x: f64,
    pub lo: f64,
    pub hi: f64,
    /// The series it is set against: the legend hides it with that series.
    pub series: Option<String>,
    /// What hovering shows: "paper: select loses up to 79% of its capacity (0.21×)".
    pub tip: String,
    /// The rule whose number it is (`data-seed`, for whoever reads the figure).
    pub seed: Option<String>,
    /// Words drawn beside it ("paper: −79%"), in its series' colour.
    pub label: Option<String>,
}

/// Axes that several charts share (one question's panels: the figure of each idle count, or
/// the small multiples of many series), so that their values can be set side by side.
#[derive(Clone)]
pub struct Axes {
    plot: Plot,
    x_ticks: Vec<(f64, String)>,
    y_ticks: Vec<(f64, String)>,
}

/// The axes that hold every value of `charts` and of the numbers drawn over them, the x axis on
/// `x_scale`. The y axis is logarithmic when a chart asks for it, or when the values, all above
/// zero, span ten times or more (pipetest's poll falls 400-fold; select's CPU per request is 20
/// times epoll's): on a linear axis the smaller ones would lie flat. A reply rate drawn against
/// the offered rate (the diagonal) keeps the paper's linear axes.
pub fn shared_axes(charts: &[(&Chart, &[Ref])], x_scale: Scale) -> Axes {
    let diagonal = charts.iter().any(|(c, _)| c.diagonal);
    let asked = charts.iter().any(|(c, _)| c.y_scale == Scale::Log);
    let mut logs = Logs {
        x: x_scale == Scale::Log,
        y: asked,
    };
    if !asked && !diagonal {
        let all: Vec<f64> = charts
            .iter()
            .flat_map(|(c, r)| shown_values(c, r, logs).1)
            .collect();
        logs.y = spans_decades(&all);
    }
    let (mut xs_all, mut ys_all) = (Vec::new(), Vec::new());
    for (c, r) in charts {
        let (xs, ys) = shown_values(c, r, logs);
        xs_all.extend(xs);
        ys_all.extend(ys);
    }
    let (x0, x1) = xs_all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let mut y_max = ys_all.iter().fold(0.0f64, |a, &y| a.max(y));
    if diagonal {
        y_max = y_max.max(x1);
    }
    // Three x values or fewer (0 and 10,000 idle connections): a dot plot, its values evenly
    // spaced as categories, rather than a line over a mostly empty axis.
    let cats = categories(diagonal, logs, &xs_all);
    let (x0, x1, x_ticks) = if let Some(v) = &cats {
        let ticks = v.iter().map(|&x| (x, fmt_tick(x, x_decimals(x)))).collect();
        (v[0], v[v.len() - 1], ticks)
    } else if logs.x {
        log_x_axis(x0, x1, &xs_all)
    } else {
        linear_x_axis(x0, x1)
    };
    let (y0, y1, y_ticks) = if logs.y {
        log_y_axis(&ys_all, y_max)
    } else {
        linear_y_axis(y_max)
    };
    Axes {
        plot: Plot {
            logs,
            x0,
            x1,
            y0,
            y1,
            cats,
        },
        x_ticks,
        y_ticks,
    }
}

/// `c` drawn on `axes` (from [`shared_axes`]), with the sources' numbers `refs` over it.
pub fn line_chart_on(c: &Chart, refs: &[Ref], axes: &Axes) -> String {
    let plot = &axes.plot;
    let logs = plot.logs;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="Helvetica, Arial, sans-serif" font-size="12" role="img" aria-label="{}">"#,
        esc(&c.title)
    );
    let _ = write!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    title(&mut s, &c.title);
    x_grid(&mut s, plot, &axes.x_ticks);
    y_grid(&mut s, plot, &axes.y_ticks);
    self::axes(&mut s, c, plot);
    // Lines first, then the sources' numbers, then every marker above them all: solid ones,
    // then hollow ones, so that an invalid point is never hidden under a valid one.
    let mut marks = lines_and_marks(&mut s, c, plot);
    let (drawn, labels) = references(&mut s, refs, plot);
    let nested = nest(&mut marks);
    let label = |m: &Mark| c.lines[m.series].label.as_str();
    for m in &marks {
        if let Some((lo, hi)) = m.bar {
            error_bar(
                &mut s,
                m.x,
                lo,
                hi,
                COLOURS[m.series % COLOURS.len()],
                label(m),
            );
        }
    }
    // The larger (underneath) first, the hollow ones above the solid ones.
    let mut order: Vec<&Mark> = marks.iter().collect();
    order.sort_by(|a, b| {
        (a.hollow, -a.size)
            .partial_cmp(&(b.hollow, -b.size))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    for hollow in [false, true] {
        for m in order.iter().filter(|m| m.hollow == hollow) {
            marker_with(
                &mut s,
                m.series,
                (m.x, m.y, m.size),
                COLOURS[m.series % COLOURS.len()],
                hollow,
                Some((label(m), &m.tip)),
            );
        }
    }
    ref_labels(&mut s, &labels, c);
    let bottom = legend(&mut s, c, logs, &marks, (nested, drawn));
    s.push_str("</svg>");
    fit(s, c, bottom)
}

/// The sources' numbers, in grey: a hollow diamond for one number, a band for a range (each
/// with its words on hover, its rule as `data-seed` and its value as `data-value`, or
/// `data-lo` and `data-hi`). Returns whether any was drawn, and the labels to write over the
/// markers: (x, y) in pixels, the words, the series.
fn references<'a>(s: &mut String, refs: &'a [Ref], plot: &Plot) -> (bool, Vec<RefLabel<'a>>) {
    let mut any = false;
    let mut labels = Vec::new();
    for r in refs {
        if !plot.logs.shown_x(r.x) || !plot.logs.shown_y(r.lo) || !plot.logs.shown_y(r.hi) {
            continue;
        }
        any = true;
        let mut attrs = r
            .series
            .as_ref()
            .map_or(String::new(), |x| format!(r#" data-series="{}""#, esc(x)));
        if let Some(rule) = &r.seed {
            let _ = write!(attrs, r#" data-seed="{}""#, esc(rule));
            if r.lo == r.hi {
                let _ = write!(attrs, r#" data-value="{:.1}""#, r.lo);
            } else {
                let _ = write!(attrs, r#" data-lo="{:.1}" data-hi="{:.1}""#, r.lo, r.hi);
            }
        }
        let (x, lo, hi) = (plot.px(r.x), plot.py(r.lo), plot.py(r.hi));
        if (hi - lo).abs() < 1.0 {
            let _ = write!(
                s,
                r##"<path class="ref"{attrs} d="M{:.1},{lo:.1} L{x:.1},{:.1} L{:.1},{lo:.1} L{x:.1},{:.1} Z" fill="none" stroke="#555555" stroke-width="1.4"><title>{}</title></path>"##,
                x - 6.0,
                lo - 6.0,
                x + 6.0,
                lo + 6.0,
                esc(&r.tip)
            );
        } else {
            let _ = write!(
                s,
                r##"<rect class="ref"{attrs} x="{:.1}" y="{:.1}" width="14" height="{:.1}" fill="#888888" fill-opacity="0.3" stroke="#555555" stroke-width="0.8" stroke-dasharray="2 2"><title>{}</title></rect>"##,
                x - 7.0,
                hi.min(lo),
                (lo - hi).abs(),
                esc(&r.tip)
            );
        }
        if let Some(words) = &r.label {
            labels.push(RefLabel {
                x,
                y: (lo + hi) / 2.0,
                words,
                series: r.series.as_deref(),
                seed: r.seed.as_deref(),
                tip: &r.tip,
            });
        }
    }
    (any, labels)
}

/// A source's number in words beside its diamond ("paper: −79%").
struct RefLabel<'a> {
    x: f64,
    y: f64,
    words: &'a str,
    series: Option<&'a str>,
    seed: Option<&'a str>,
    tip: &'a str,
}

/// The labels of the sources' numbers, over everything else in the plot: 10 px, in their
/// series' colour on a white ground, right of the diamond (left where they would leave the
/// plot), each moved up or down a line until it overlaps no label written before it.
fn ref_labels(s: &mut String, labels: &[RefLabel], c: &Chart) {
    const LINE: f64 = 11.0;
    let mut taken: Vec<(f64, f64, f64)> = Vec::new();
    for l in labels {
        let width = l.words.chars().count() as f64 * 10.0 * 0.56;
        let right = l.x + 9.0 + width <= L + PW - 2.0;
        let (x0, x1) = if right {
            (l.x + 9.0, l.x + 9.0 + width)
        } else {
            (l.x - 9.0 - width, l.x - 9.0)
        };
        let free = |y: f64| {
            y - 8.0 >= T
                && y + 2.0 <= T + PH
                && taken
                    .iter()
                    .all(|&(a, b, ty)| b <= x0 || a >= x1 || (ty - y).abs() >= LINE)
        };
        let base = l.y + 3.5;
        let y = (0..12)
            .map(|k| base + LINE * (((k + 1) / 2) as f64) * if k % 2 == 1 { 1.0 } else { -1.0 })
            .find(|&y| free(y))
            .unwrap_or(base);
        taken.push((x0, x1, y));
        let colour = l
            .series
            .and_then(|name| c.lines.iter().position(|x| x.label == name))
            .map_or("#555555", |i| COLOURS[i % COLOURS.len()]);
        let series = l
            .series
            .map_or(String::new(), |x| format!(r#" data-series="{}""#, esc(x)));
        let seed = l
            .seed
            .map_or(String::new(), |x| format!(r#" data-seed="{}""#, esc(x)));
        let _ = write!(
            s,
            r#"<g class="ref-label"{series}{seed}><title>{}</title><rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="11" fill="white" fill-opacity="0.85"/><text x="{:.1}" y="{y:.1}" text-anchor="{}" font-size="10" fill="{colour}">{}</text></g>"#,
            esc(l.tip),
            y - 8.5,
            x1 - x0,
            if right { x0 } else { x1 },
            if right { "start" } else { "end" },
            esc(l.words)
        );
    }
}

/// Widest a bold character is, as a share of the font size (Helvetica's widest common letters,
/// so that an estimate never falls short).
const BOLD_EM: f64 = 0.62;

/// The title over the plot: one line of 14 px where it fits in the image, else two lines split
/// at the ", " or ": " nearest its middle, at the size that fits (never under 9 px).
fn title(s: &mut String, text: &str) {
    let room = W - 16.0;
    let width = |t: &str, px: f64| t.chars().count() as f64 * px * BOLD_EM;
    if width(text, 14.0) <= room {
        let x = (L + PW / 2.0).max(8.0 + width(text, 14.0) / 2.0);
        let _ = write!(
            s,
            r#"<text x="{x:.1}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
            esc(text)
        );
        return;
    }
    let mid = text.chars().count() / 2;
    let split = text
        .match_indices(", ")
        .chain(text.match_indices(": "))
        .map(|(i, _)| i)
        .min_by_key(|&i| (text[..i].chars().count() as i64 - mid as i64).abs());
    let lines: Vec<&str> = match split {
        Some(i) => vec![&text[..i + 1], text[i + 2..].trim_start()],
        None => vec![text],
    };
    let longest = lines.iter().map(|l| l.chars().count()).max().unwrap_or(1) as f64;
    let px = (room / (longest * BOLD_EM)).clamp(9.0, 12.0);
    for (k, l) in lines.iter().enumerate() {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="{px:.1}" font-weight="bold">{}</text>"#,
            W / 2.0,
            13.0 + k as f64 * (px + 2.0),
            esc(l)
        );
    }
}

/// Rough width of `text` at the chart's 12 px font: enough to keep a label inside the image.
fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * 7.0
}

/// `svg` made as wide and as tall as its legend needs (a long label, many series): no text is
/// drawn outside the image.
fn fit(svg: String, c: &Chart, legend_bottom: f64) -> String {
    let widest = c
        .lines
        .iter()
        .map(|l| L + PW + 14.0 + 30.0 + text_width(&l.label))
        .fold(W, f64::max);
    let w = widest.max(W).ceil();
    let h = (legend_bottom + 8.0).max(H).ceil();
    if w == W && h == H {
        return svg;
    }
    svg.replacen(
        &format!(r#"viewBox="0 0 {W} {H}" width="{W}" height="{H}""#),
        &format!(r#"viewBox="0 0 {w} {h}" width="{w}" height="{h}""#),
        1,
    )
    .replacen(
        &format!(r#"<rect width="{W}" height="{H}" fill="white"/>"#),
        &format!(r#"<rect width="{w}" height="{h}" fill="white"/>"#),
        1,
    )
}

/// The script every HTML report carries (inline: a report opens from a file, with no network):
/// a click on a legend entry, or Enter or Space on it, hides that series' line, markers and bars
/// in its figure, and shows them again on the next; hovering a marker shows its values (each
/// marker's `<title>`, no script needed).
pub const SCRIPT: &str = r#"<script>
(function () {
  document.querySelectorAll('svg').forEach(function (svg) {
    svg.querySelectorAll('g.legend[data-series]').forEach(function (entry) {
      var name = entry.getAttribute('data-series');
      entry.setAttribute('tabindex', '0');
      entry.setAttribute('role', 'button');
      entry.setAttribute('aria-pressed', 'true');
      entry.style.cursor = 'pointer';
      function toggle() {
        var hide = entry.getAttribute('aria-pressed') === 'true';
        entry.setAttribute('aria-pressed', hide ? 'false' : 'true');
        entry.style.opacity = hide ? '0.35' : '';
        svg.querySelectorAll('[data-series]').forEach(function (el) {
          if (!el.classList.contains('legend') && el.getAttribute('data-series') === name) {
            el.style.display = hide ? 'none' : '';
          }
        });
      }
      entry.addEventListener('click', toggle);
      entry.addEventListener('keydown', function (e) {
        if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); toggle(); }
      });
    });
  });
})();
</script>
"#;

/// Whether values, all above zero, span ten times or more (a chart with a zero or less stays
/// linear: a log axis could not show it).
fn spans_decades(ys: &[f64]) -> bool {
    match min_max(ys) {
        Some((lo, hi)) => lo > 0.0 && hi / lo >= 10.0,
        None => false,
    }
}

/// Which axes are logarithmic. A log axis cannot show zero or less: such values are left out.
#[derive(Clone, Copy)]
struct Logs {
    x: bool,
    y: bool,
}

impl Logs {
    fn shown_x(self, x: f64) -> bool {
        !self.x || x > 0.0
    }

    fn shown_y(self, y: f64) -> bool {
        !self.y || y > 0.0
    }

    fn shown(self, p: &(f64, f64)) -> bool {
        self.shown_x(p.0) && self.shown_y(p.1)
    }
}

/// The axes' ends, and where a value falls on them, in pixels.
#[derive(Clone)]
struct Plot {
    logs: Logs,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    /// A dot plot's x values, in order, each at the middle of its own equal share of the width.
    cats: Option<Vec<f64>>,
}

/// Most distinct x values a chart draws as categories (a dot plot).
const MOST_CATEGORIES: usize = 3;

/// The chart's x values as categories when there are at most `MOST_CATEGORIES` of them, on a
/// linear x axis without the diagonal (which needs a true rate axis); else None.
fn categories(diagonal: bool, logs: Logs, xs: &[f64]) -> Option<Vec<f64>> {
    if logs.x || diagonal {
        return None;
    }
    let mut v: Vec<f64> = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v.dedup();
    (!v.is_empty() && v.len() <= MOST_CATEGORIES).then_some(v)
}

impl Plot {
    fn px(&self, x: f64) -> f64 {
        if let Some(v) = &self.cats {
            let i = v
                .iter()
                .enumerate()
                .min_by(|a, b| (a.1 - x).abs().total_cmp(&(b.1 - x).abs()))
                .map_or(0, |(i, _)| i);
            return L + (i as f64 + 0.5) / v.len() as f64 * PW;
        }
        let (x0, x1) = (self.x0, self.x1);
        let f = if self.logs.x {
            (x.max(x0).log10() - x0.log10()) / (x1.log10() - x0.log10())
        } else {
            (x - x0) / (x1 - x0)
        };
        L + f * PW
    }

    fn py(&self, y: f64) -> f64 {
        let (y0, y1) = (self.y0, self.y1);
        let f = if self.logs.y {
            (y.max(y0).log10() - y0.log10()) / (y1.log10() - y0.log10())
        } else {
            y / y1
        };
        T + PH - f * PH
    }
}

/// Every x and every y the axes must hold: each shown point, its error bar's ends, and the
/// stray (invalid) trials, and the sources' numbers drawn over them.
fn shown_values(c: &Chart, refs: &[Ref], logs: Logs) -> (Vec<f64>, Vec<f64>) {
    let mut xs_all = Vec::new();
    let mut ys_all = Vec::new();
    for l in &c.lines {
        for (k, &(x, y)) in l.points.iter().enumerate() {
            if !logs.shown(&(x, y)) {
                continue;
            }
            xs_all.push(x);
            ys_all.push(y);
            if let Some(&Some((lo, hi))) = l.ranges.get(k) {
                ys_all.extend([lo, hi].into_iter().filter(|&v| logs.shown_y(v)));
            }
        }
        for &(x, y) in l.stray.iter().filter(|p| logs.shown(p)) {
            xs_all.push(x);
            ys_all.push(y);
        }
    }
    for r in refs {
        if logs.shown_x(r.x) && logs.shown_y(r.lo) && logs.shown_y(r.hi) {
            xs_all.push(r.x);
            ys_all.extend([r.lo, r.hi]);
        }
    }
    (xs_all, ys_all)
}

/// The x axis's grid lines and tick labels.
fn x_grid(s: &mut String, plot: &Plot, ticks: &[(f64, String)]) {
    let (x0, x1) = (plot.x0, plot.x1);
    if plot.logs.x {
        // Faint lines at each decade and 2…9 × it, so a log axis reads as one.
        let mut d = 10f64.powf(x0.log10().floor());
        while d < x1 * 0.999 {
            for m in 1..10 {
                let v = d * m as f64;
                if v <= x0 || v >= x1 {
                    continue;
                }
                let x = plot.px(v);
                let _ = write!(
                    s,
                    r##"<line class="minor" x1="{x:.1}" y1="{T}" x2="{x:.1}" y2="{:.1}" stroke="#f2f2f2"/>"##,
                    T + PH
                );
            }
            d *= 10.0;
        }
    }
    for (v, label) in ticks {
        let x = plot.px(*v);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{T}" x2="{x:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            T + PH,
            T + PH + 16.0,
        );
    }
}

/// The y axis's grid lines and tick labels.
fn y_grid(s: &mut String, plot: &Plot, ticks: &[(f64, String)]) {
    let (y0, y1) = (plot.y0, plot.y1);
    if plot.logs.y {
        // Faint lines at 2…9 × each decade, so a log axis reads as one.
        let mut d = 10f64.powf(y0.log10().floor());
        while d < y1 * 0.999 {
            for m in 2..10 {
                let v = d * m as f64;
                if v <= y0 || v >= y1 {
                    continue;
                }
                let y = plot.py(v);
                let _ = write!(
                    s,
                    r##"<line class="minor" x1="{L}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#f2f2f2"/>"##,
                    L + PW
                );
            }
            d *= 10.0;
        }
    }
    for (v, label) in ticks {
        let y = plot.py(*v);
        let _ = write!(
            s,
            r##"<line x1="{L}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"##,
            L + PW,
            L - 6.0,
            y + 4.0,
        );
    }
}

/// The frame, the axes' labels, and (on linear axes) the diagonal.
fn axes(s: &mut String, c: &Chart, plot: &Plot) {
    let logs = plot.logs;
    let _ = write!(
        s,
        r#"<rect x="{L}" y="{T}" width="{PW}" height="{PH}" fill="none" stroke="black"/>"#
    );
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        L + PW / 2.0,
        H - 10.0,
        esc(&if logs.x {
            format!("{} (log scale)", c.x_label)
        } else {
            c.x_label.clone()
        })
    );
    let y_label = if logs.y {
        format!("{} (log scale)", c.y_label)
    } else {
        c.y_label.clone()
    };
    let _ = write!(
        s,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
        T + PH / 2.0,
        T + PH / 2.0,
        esc(&y_label)
    );
    if c.diagonal && !logs.y && !logs.x {
        let top = plot.x1.min(plot.y1);
        let x0 = plot.x0;
        let _ = write!(
            s,
            r##"<line class="ideal" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#aaaaaa" stroke-dasharray="4 4"/>"##,
            plot.px(x0.max(0.0)),
            plot.py(x0.max(0.0)),
            plot.px(top),
            plot.py(top)
        );
    }
}

/// Draws each series' line and returns its markers (and its stray trials'), to be drawn
/// above every line.
fn lines_and_marks(s: &mut String, c: &Chart, plot: &Plot) -> Vec<Mark> {
    let logs = plot.logs;
    let mut marks = Vec::new();
    for (i, line) in c.lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let pts: Vec<String> = line
            .points
            .iter()
            .filter(|p| logs.shown(p))
            .map(|&(x, y)| format!("{:.1},{:.1}", plot.px(x), plot.py(y)))
            .collect();
        // In a dot plot the values are the dots; a faint dashed guide only joins a series'.
        let style = if plot.cats.is_some() {
            r#"stroke-width="1" stroke-dasharray="3 4" stroke-opacity="0.5""#
        } else {
            r#"stroke-width="1.8""#
        };
        let _ = write!(
            s,
            r#"<polyline class="series" data-series="{}" points="{}" fill="none" stroke="{colour}" {style}/>"#,
            esc(&line.label),
            pts.join(" ")
        );
        for (k, &(x, y)) in line.points.iter().enumerate() {
            if !logs.shown(&(x, y)) {
                continue;
            }
            let bar = match line.ranges.get(k) {
                Some(&Some((lo, hi))) if hi > lo => Some((plot.py(lo), plot.py(hi))),
                _ => None,
            };
            let hollow = line.flagged.get(k).copied().unwrap_or(false);
            marks.push(Mark {
                series: i,
                x: plot.px(x),
                y: plot.py(y),
                hollow,
                bar,
                tip: tip(c, &line.label, (x, y), hollow),
                size: 1.0,
            });
        }
        for &(x, y) in line.stray.iter().filter(|p| logs.shown(p)) {
            marks.push(Mark {
                series: i,
                x: plot.px(x),
                y: plot.py(y),
                hollow: true,
                bar: None,
                tip: tip(c, &line.label, (x, y), true),
                size: 1.0,
            });
        }
    }
    marks
}

/// A value as hovering shows it: whole numbers with separators from 100 up, three significant
/// digits below.
/// The sources' numbers drawn over a figure, read back from its SVG: the `data-value` of each
/// `<path class="ref">` whose `data-seed` is `rule`, in the order drawn (what a reader, a test or
/// a tool checks a figure's overlay by).
pub fn seed_values(svg: &str, rule: &str) -> Vec<f64> {
    let tag = format!("data-seed=\"{rule}\"");
    svg.split("<path class=\"ref\"")
        .skip(1)
        .filter_map(|r| r.get(..r.find('>')?))
        .filter(|r| r.contains(&tag))
        .filter_map(|r| {
            let v = r.split("data-value=\"").nth(1)?;
            v.get(..v.find('"')?)?.parse().ok()
        })
        .collect()
}

pub fn value_text(v: f64) -> String {
    if v.abs() >= 100.0 {
        crate::model::text::thousands(v)
    } else if v == 0.0 {
        "0".into()
    } else {
        let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
        format!("{v:.digits$}")
    }
}

/// The hover text of a point: "select: 1,500 requests/s offered → 85.8 server CPU µs per reply".
fn tip(c: &Chart, series: &str, (x, y): (f64, f64), hollow: bool) -> String {
    format!(
        "{series}: {} {} → {} {}{}",
        value_text(x),
        c.x_label,
        value_text(y),
        c.y_label,
        if hollow { " (invalid)" } else { "" }
    )
}

/// The legend, and under it notes on what the markers drawn mean; returns the y of its last
/// line. Each entry is a group with its series' name (`data-series`): the report's script
/// toggles the series when it is clicked.
fn legend(
    s: &mut String,
    c: &Chart,
    logs: Logs,
    marks: &[Mark],
    (nested, refs): (bool, bool),
) -> f64 {
    for (i, line) in c.lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let ly = T + 8.0 + i as f64 * 20.0;
        let lx = L + PW + 14.0;
        let _ = write!(
            s,
            r#"<g class="legend" data-series="{}"><line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="1.8"/>"#,
            esc(&line.label),
            lx + 24.0
        );
        marker(s, i, lx + 12.0, ly, colour, false);
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}">{}</text></g>"#,
            lx + 30.0,
            ly + 4.0,
            esc(&line.label)
        );
    }
    // Notes under the legend, in groups.
    let mut notes: Vec<Vec<&str>> = Vec::new();
    if marks.iter().any(|m| m.hollow) {
        notes.push(vec!["hollow: invalid point", "(no verdict uses it)"]);
    }
    if marks.iter().any(|m| m.bar.is_some()) {
        notes.push(vec!["bars: min–max over trials"]);
    }
    if nested {
        notes.push(vec!["markers that coincide:", "nested, the first largest"]);
    }
    if refs {
        notes.push(vec![
            "grey ◇ or band: the source's",
            "number (hover for its words)",
        ]);
    }
    if c.lines
        .iter()
        .any(|l| l.points.iter().any(|p| !logs.shown(p)) || l.stray.iter().any(|p| !logs.shown(p)))
    {
        notes.push(vec!["values ≤ 0 not shown"]);
    }
    let lx = L + PW + 14.0;
    let mut ly = T + 8.0 + c.lines.len() as f64 * 20.0 + 6.0;
    let mut bottom = T + 8.0 + c.lines.len() as f64 * 20.0;
    for group in notes {
        for text in group {
            let _ = write!(
                s,
                r#"<text x="{lx:.1}" y="{ly:.1}" font-size="10">{}</text>"#,
                esc(text)
            );
            bottom = ly + 4.0;
            ly += 12.0;
        }
        ly += 4.0;
    }
    bottom
}

#[cfg(test)]
mod tests;
