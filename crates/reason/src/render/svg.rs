//! Line charts drawn by hand as SVG, in the paper's manner: x the offered rate, y what the
//! clients saw, one line with its own marker per mechanism, a legend. No dependency and
//! deterministic output, so a re-rendered report is byte-for-byte the original.

mod axis;

use std::fmt::Write as _;

use self::axis::{
    fmt_tick, linear_x_axis, linear_y_axis, log_x_axis, log_y_axis, x_decimals, H, L, PH, PW, T, W,
};

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

const COLOURS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Marker outlines, centred on the origin: a polygon's vertices (the circle is drawn as such).
/// Every shape is closed, so every one can be drawn hollow.
const SHAPES: usize = 8;

fn shape_points(i: usize) -> &'static [(f64, f64)] {
    match i % SHAPES {
        // square
        1 => &[(-3.5, -3.5), (3.5, -3.5), (3.5, 3.5), (-3.5, 3.5)],
        // triangle up
        2 => &[(0.0, -4.5), (4.0, 3.5), (-4.0, 3.5)],
        // diamond
        3 => &[(0.0, -4.5), (4.5, 0.0), (0.0, 4.5), (-4.5, 0.0)],
        // triangle down
        4 => &[(0.0, 4.5), (4.0, -3.5), (-4.0, -3.5)],
        // plus
        5 => &[
            (-1.5, -4.5),
            (1.5, -4.5),
            (1.5, -1.5),
            (4.5, -1.5),
            (4.5, 1.5),
            (1.5, 1.5),
            (1.5, 4.5),
            (-1.5, 4.5),
            (-1.5, 1.5),
            (-4.5, 1.5),
            (-4.5, -1.5),
            (-1.5, -1.5),
        ],
        // cross (a plus turned 45°)
        6 => &[
            (-3.2, -5.3),
            (0.0, -2.1),
            (3.2, -5.3),
            (5.3, -3.2),
            (2.1, 0.0),
            (5.3, 3.2),
            (3.2, 5.3),
            (0.0, 2.1),
            (-3.2, 5.3),
            (-5.3, 3.2),
            (-2.1, 0.0),
            (-5.3, -3.2),
        ],
        // hexagon
        7 => &[
            (-2.3, -4.0),
            (2.3, -4.0),
            (4.6, 0.0),
            (2.3, 4.0),
            (-2.3, 4.0),
            (-4.6, 0.0),
        ],
        _ => &[],
    }
}

/// Marker `i` at (x, y): filled with the line's colour, or white inside a thicker outline when
/// `hollow` (an invalid point).
fn marker(out: &mut String, i: usize, x: f64, y: f64, colour: &str, hollow: bool) {
    marker_with(out, i, (x, y, 1.0), colour, hollow, None);
}

/// A marker; with `tip`, a point of the chart: its series' name as `data-series` (the legend
/// toggles it) and its values as the `<title>` a browser shows on hover.
fn marker_with(
    out: &mut String,
    i: usize,
    (x, y, size): (f64, f64, f64),
    colour: &str,
    hollow: bool,
    tip: Option<(&str, &str)>,
) {
    let (fill, width) = if hollow {
        ("white", 1.6)
    } else {
        (colour, 1.0)
    };
    let mut attrs = String::new();
    match (hollow, tip.is_some()) {
        (true, true) => attrs.push_str(r#" class="mark invalid""#),
        (true, false) => attrs.push_str(r#" class="invalid""#),
        (false, true) => attrs.push_str(r#" class="mark""#),
        (false, false) => {}
    }
    if let Some((series, _)) = tip {
        let _ = write!(attrs, r#" data-series="{}""#, esc(series));
    }
    let close = match tip {
        Some((_, text)) => format!("><title>{}</title>", esc(text)),
        None => "/>".into(),
    };
    let end = |el: &str| {
        if tip.is_some() {
            format!("</{el}>")
        } else {
            String::new()
        }
    };
    let pts = shape_points(i);
    if pts.is_empty() {
        let _ = write!(
            out,
            r#"<circle{attrs} cx="{x:.1}" cy="{y:.1}" r="{:.1}" fill="{fill}" stroke="{colour}" stroke-width="{width}"{close}{}"#,
            3.5 * size,
            end("circle")
        );
        return;
    }
    let d: Vec<String> = pts
        .iter()
        .enumerate()
        .map(|(k, (dx, dy))| {
            format!(
                "{}{:.1},{:.1}",
                if k == 0 { "M" } else { "L" },
                x + dx * size,
                y + dy * size
            )
        })
        .collect();
    let _ = write!(
        out,
        r#"<path{attrs} d="{} Z" fill="{fill}" stroke="{colour}" stroke-width="{width}"{close}{}"#,
        d.join(" "),
        end("path")
    );
}

/// A vertical min–max bar with caps.
fn error_bar(out: &mut String, x: f64, y_lo: f64, y_hi: f64, colour: &str, series: &str) {
    let _ = write!(
        out,
        r#"<path class="range" data-series="{}" d="M{x:.1},{y_lo:.1} L{x:.1},{y_hi:.1} M{:.1},{y_lo:.1} L{:.1},{y_lo:.1} M{:.1},{y_hi:.1} L{:.1},{y_hi:.1}" stroke="{colour}" stroke-width="1"/>"#,
        esc(series),
        x - 3.0,
        x + 3.0,
        x - 3.0,
        x + 3.0
    );
}

/// How much larger each marker under another is drawn, where markers coincide.
const NEST: f64 = 0.55;
/// Markers closer than this (pixels, both ways) would hide one another.
const OVERLAP: f64 = 7.0;

/// One marker to draw: its series (shape and colour), where, and whether hollow.
struct Mark {
    series: usize,
    x: f64,
    y: f64,
    hollow: bool,
    bar: Option<(f64, f64)>,
    /// What hovering shows: the series and the point's values.
    tip: String,
    /// Its size, 1 unless it coincides with others (see [`nest`]).
    size: f64,
}

/// Nests markers that would hide one another, never moving one off its value: at one x, markers
/// whose y lie within `OVERLAP` of the next form a group; in series order the first is drawn
/// largest and each later one smaller on top of it (different shapes, so each ring shows).
/// Without this the last series drawn hides the others where they coincide (below saturation
/// every mechanism answers what it is offered), and with them their hollow (invalid) markers.
fn nest(marks: &mut [Mark]) -> bool {
    let mut nested = false;
    let mut order: Vec<usize> = (0..marks.len()).collect();
    order.sort_by(|&a, &b| {
        (marks[a].x, marks[a].y, marks[a].series)
            .partial_cmp(&(marks[b].x, marks[b].y, marks[b].series))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut i = 0;
    while i < order.len() {
        let mut j = i + 1;
        while j < order.len()
            && (marks[order[j]].x - marks[order[i]].x).abs() < 0.5
            && marks[order[j]].y - marks[order[j - 1]].y < OVERLAP
        {
            j += 1;
        }
        if j - i > 1 {
            let mut group: Vec<usize> = order[i..j].to_vec();
            group.sort_by_key(|&k| (marks[k].series, marks[k].hollow));
            let n = group.len();
            for (rank, &k) in group.iter().enumerate() {
                marks[k].size = 1.0 + NEST * (n - 1 - rank) as f64;
            }
            nested = true;
        }
        i = j;
    }
    nested
}

/// The chart as a standalone `<svg>` element. Each line is one `<polyline class="series">`.
pub fn line_chart(c: &Chart) -> String {
    line_chart_x(c, Scale::Linear)
}

/// As [`line_chart`], with the x axis on `x_scale`. On a log x axis (counts of pipes or workers
/// from 1 to thousands) the ticks are the points' own x values, as many as fit without their
/// labels touching (the largest always), and the diagonal is not drawn.
pub fn line_chart_x(c: &Chart, x_scale: Scale) -> String {
    let logs = Logs {
        x: x_scale == Scale::Log,
        y: c.y_scale == Scale::Log || spans_decades(c),
    };
    let (xs_all, ys_all) = shown_values(c, logs);
    let (x0, x1) = xs_all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let mut y_max = ys_all.iter().fold(0.0f64, |a, &y| a.max(y));
    if c.diagonal {
        y_max = y_max.max(x1);
    }
    // Three x values or fewer (0 and 10,000 idle connections): a dot plot, its values evenly
    // spaced as categories, rather than a line over a mostly empty axis.
    let cats = categories(c, logs, &xs_all);
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
    let plot = Plot {
        logs,
        x0,
        x1,
        y0,
        y1,
        cats,
    };
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="Helvetica, Arial, sans-serif" font-size="12" role="img" aria-label="{}">"#,
        esc(&c.title)
    );
    let _ = write!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    title(&mut s, &c.title);
    x_grid(&mut s, &plot, &x_ticks);
    y_grid(&mut s, &plot, &y_ticks);
    axes(&mut s, c, &plot);
    // Lines first, then every marker above every line: solid ones, then hollow ones, so that an
    // invalid point is never hidden under a valid one.
    let mut marks = lines_and_marks(&mut s, c, &plot);
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
    let bottom = legend(&mut s, c, logs, &marks, nested);
    s.push_str("</svg>");
    fit(s, c, bottom)
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

/// Whether a linear chart's values span two decades or more, all of them above zero: then its
/// y axis is logarithmic, or the smaller values would lie flat on the axis (pipetest's select
/// falling 400-fold). A chart with a zero or less stays linear: a log axis could not show it.
fn spans_decades(c: &Chart) -> bool {
    let ys: Vec<f64> = c
        .lines
        .iter()
        .flat_map(|l| {
            l.points
                .iter()
                .chain(&l.stray)
                .map(|p| p.1)
                .chain(l.ranges.iter().flatten().flat_map(|r| [r.0, r.1]))
        })
        .collect();
    match min_max(&ys) {
        Some((lo, hi)) => lo > 0.0 && hi / lo >= 100.0,
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
fn categories(c: &Chart, logs: Logs, xs: &[f64]) -> Option<Vec<f64>> {
    if logs.x || c.diagonal {
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
/// stray (invalid) trials.
fn shown_values(c: &Chart, logs: Logs) -> (Vec<f64>, Vec<f64>) {
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
fn value_text(v: f64) -> String {
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
fn legend(s: &mut String, c: &Chart, logs: Logs, marks: &[Mark], nested: bool) -> f64 {
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
