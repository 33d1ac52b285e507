//! Rows on one shared axis, a dot plot: the findings chart (each finding's ratio with its
//! interval on a log axis, the rule's region shaded, the verdict by colour and by word) and the
//! figures of many series at a few categories (the proxy's 18 series at 0 and 10,000 idle
//! connections), which small multiples drew on scales of their own.

use std::fmt::Write as _;

use super::axis::{linear_y_axis, log_ticks, one_two_five};
use super::marks::{esc, marker_with, COLOURS};

/// The chart: its rows, and the categories its markers stand for (a legend entry each, which
/// the report's script toggles as it does a line chart's series).
pub struct RowChart {
    pub title: String,
    /// The axis' name; "(log scale)" is added on a log axis.
    pub x_label: String,
    pub log: bool,
    /// Marker categories in legend order (idle counts, percentiles); none: no legend.
    pub categories: Vec<String>,
    pub rows: Vec<Row>,
    /// A dashed vertical line at this value, named on the axis (1: no difference).
    pub guide: Option<(f64, String)>,
    /// Lines of notes under the axis (what the shading and colours mean).
    pub notes: Vec<String>,
    /// Each row's label and word on a line of their own above its strip of the axis, which
    /// then spans the whole width: a narrow chart, legible at a phone's width.
    pub stacked: bool,
    /// The axis' ends, when several charts share them; else from the values.
    pub range: Option<(f64, f64)>,
}

/// One row: a label (and a smaller second line), its markers, and what stands beside them.
#[derive(Default)]
pub struct Row {
    pub label: String,
    /// Grey, under the label, shortened to fit (whole in the row's hover text).
    pub sub: String,
    /// A grey word after the label ("post hoc").
    pub tag: String,
    /// Attributes of the row's `<g>` (`data-finding`, …), for programs and tests.
    pub attrs: Vec<(String, String)>,
    /// Shaded: a region of the axis (0 and infinity: open ends), the claim's.
    pub region: Option<(f64, f64)>,
    pub marks: Vec<RowMark>,
    /// A source's number (lo = hi) or range, drawn in grey behind the markers, with its words.
    pub refs: Vec<(f64, f64, String)>,
    /// A word right of the plot, and its colour (the verdict).
    pub word: Option<(String, &'static str)>,
    /// Said in the plot area when the row has no marker.
    pub empty: String,
    /// The row's hover text.
    pub tip: String,
}

/// One marker of a row: a value with its interval.
pub struct RowMark {
    /// Its category (legend entry, shape and colour), or none (a finding: colour of its own).
    pub category: Option<usize>,
    pub value: f64,
    pub interval: Option<(f64, f64)>,
    pub colour: &'static str,
    pub hollow: bool,
    pub tip: String,
}

const WIDE: f64 = 640.0;
const NARROW: f64 = 440.0;
const ROW: f64 = 22.0;
const ROW_TWO: f64 = 32.0;
const ROW_STACKED: f64 = 46.0;
const LABEL_PX: f64 = 6.3;
const SUB_PX: f64 = 5.4;

/// Rough width of `n` characters at `px` per character.
fn width(t: &str, px: f64) -> f64 {
    t.chars().count() as f64 * px
}

/// `t` cut to at most `w` pixels at `px` per character, with an ellipsis when cut.
fn clip(t: &str, w: f64, px: f64) -> String {
    let most = (w / px).floor().max(1.0) as usize;
    if t.chars().count() <= most {
        return t.to_string();
    }
    let mut out: String = t.chars().take(most.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The title in lines of at most `room` pixels at 14 px bold: split at the ", " or ": " nearest
/// the middle of what is left, each line cut if it still does not fit.
fn title_lines(title: &str, room: f64) -> Vec<String> {
    const BOLD: f64 = 8.7;
    let mut out = Vec::new();
    let mut rest = title.to_string();
    while width(&rest, BOLD) > room && out.len() < 2 {
        let mid = rest.chars().count() / 2;
        let split = rest
            .match_indices(", ")
            .chain(rest.match_indices(": "))
            .map(|(i, _)| i)
            .filter(|&i| width(&rest[..i + 1], BOLD) <= room)
            .min_by_key(|&i| (rest[..i].chars().count() as i64 - mid as i64).abs());
        let Some(i) = split else { break };
        out.push(rest[..i + 1].to_string());
        rest = rest[i + 2..].trim_start().to_string();
    }
    out.push(rest);
    out.into_iter().map(|l| clip(&l, room, BOLD)).collect()
}

/// The axis: its ends and ticks, from every value, interval end, finite region end, source's
/// number and the guide.
fn axis(c: &RowChart) -> (f64, f64, Vec<(f64, String)>) {
    let mut v: Vec<f64> = c.range.map_or(vec![], |(a, b)| vec![a, b]);
    for r in &c.rows {
        for m in &r.marks {
            v.push(m.value);
            if let Some((lo, hi)) = m.interval {
                v.extend([lo, hi]);
            }
        }
        for &(lo, hi, _) in &r.refs {
            v.extend([lo, hi]);
        }
        if let Some((lo, hi)) = r.region {
            v.extend([lo, hi].into_iter().filter(|x| x.is_finite() && *x > 0.0));
        }
    }
    if let Some((g, _)) = &c.guide {
        v.push(*g);
    }
    v.retain(|x| x.is_finite() && (!c.log || *x > 0.0));
    if c.log {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.5, 2.0) };
        let a = one_two_five(lo / 1.25, false);
        let mut b = one_two_five(hi * 1.25, true);
        if b <= a {
            b = one_two_five(a * 2.0, true);
        }
        (a, b, log_ticks(a, b))
    } else {
        let hi = v.iter().copied().fold(0.0, f64::max);
        linear_y_axis(hi)
    }
}

/// The chart as a standalone `<svg>`.
pub fn row_chart(c: &RowChart) -> String {
    let (a, b, ticks) = axis(c);
    let w = if c.stacked { NARROW } else { WIDE };
    let label_w = if c.stacked {
        w - 24.0
    } else {
        c.rows
            .iter()
            .map(|r| width(&r.label, LABEL_PX) + width(&r.tag, SUB_PX) + 6.0)
            .fold(60.0, f64::max)
            .min(250.0)
    };
    let word_w = c
        .rows
        .iter()
        .filter_map(|r| r.word.as_ref())
        .map(|(w, _)| width(w, LABEL_PX) + 8.0)
        .fold(0.0, f64::max);
    let (x0, x1) = if c.stacked {
        (16.0, w - 16.0)
    } else {
        // Room for the last tick's label to the right of the axis.
        (12.0 + label_w, w - 28.0 - word_w)
    };
    let px = |v: f64| {
        let v = v.clamp(a, b);
        let f = if c.log {
            (v.log10() - a.log10()) / (b.log10() - a.log10())
        } else {
            (v - a) / (b - a)
        };
        x0 + f * (x1 - x0)
    };
    let mut s = String::new();
    let mut y = 22.0;
    for line in title_lines(&c.title, w - 16.0) {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{y:.1}" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
            w / 2.0,
            esc(&line)
        );
        y += 17.0;
    }
    y -= 9.0;
    if !c.categories.is_empty() {
        y = legend(&mut s, &c.categories, y + 12.0, w) + 4.0;
    }
    let top = y + 4.0;
    y = top;
    let two = c.rows.iter().any(|r| !r.sub.is_empty());
    let h = match (c.stacked, two) {
        (true, _) => ROW_STACKED,
        (false, true) => ROW_TWO,
        (false, false) => ROW,
    };
    for (i, r) in c.rows.iter().enumerate() {
        row(&mut s, c, r, (i, y, h, w), (x0, x1, label_w), &px);
        y += h;
    }
    let bottom = y;
    frame(&mut s, c, (top, bottom, w), (x0, x1), &ticks, &px);
    // Below the axis title (its baseline at bottom + 31), a line apart.
    let mut ny = bottom + 48.0;
    for n in &c.notes {
        let _ = write!(
            s,
            r#"<text x="12" y="{ny:.1}" font-size="10">{}</text>"#,
            esc(&clip(n, w - 20.0, 5.6))
        );
        ny += 13.0;
    }
    let height = (ny + 2.0).ceil();
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {height}" width="{w}" height="{height}" font-family="Helvetica, Arial, sans-serif" font-size="11" role="img" aria-label="{}"><rect width="{w}" height="{height}" fill="white"/>{s}</svg>"#,
        esc(&c.title)
    )
}

/// The categories' legend, in one line or more; returns the y under it.
fn legend(s: &mut String, categories: &[String], mut y: f64, w: f64) -> f64 {
    let mut x = 12.0;
    for (i, cat) in categories.iter().enumerate() {
        let width = 24.0 + self::width(cat, LABEL_PX) + 14.0;
        if x + width > w - 8.0 && x > 12.0 {
            x = 12.0;
            y += 16.0;
        }
        let colour = COLOURS[i % COLOURS.len()];
        let _ = write!(s, r#"<g class="legend" data-series="{}">"#, esc(cat));
        marker_with(s, i, (x + 7.0, y - 4.0, 1.0), colour, false, None);
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{y:.1}">{}</text></g>"#,
            x + 17.0,
            esc(cat)
        );
        x += width;
    }
    y + 6.0
}

/// One row: its band, label, region, the sources' numbers, its markers and its word. Stacked,
/// the label and the word share a line above the row's strip of the axis; else the label
/// stands left of the plot and the word right of it.
fn row(
    s: &mut String,
    c: &RowChart,
    r: &Row,
    (i, y, h, w): (usize, f64, f64, f64),
    (x0, x1, label_w): (f64, f64, f64),
    px: &dyn Fn(f64) -> f64,
) {
    let (mid, strip) = if c.stacked {
        (y + 36.0, (y + 29.0, 14.0))
    } else {
        (y + h / 2.0, (y + 2.0, h - 4.0))
    };
    let attrs: String = r
        .attrs
        .iter()
        .map(|(k, v)| format!(r#" {k}="{}""#, esc(v)))
        .collect();
    let _ = write!(s, r#"<g class="row"{attrs}>"#);
    if !r.tip.is_empty() {
        let _ = write!(s, "<title>{}</title>", esc(&r.tip));
    }
    if i % 2 == 1 {
        let _ = write!(
            s,
            r##"<rect x="8" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="#f6f6f6"/>"##,
            w - 16.0
        );
    }
    if let Some((lo, hi)) = r.region {
        let (l, rr) = (px(lo.max(1e-300)), px(hi.min(f64::MAX)));
        let _ = write!(
            s,
            r##"<rect class="region" x="{l:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#cfe8cf"/>"##,
            strip.0,
            (rr - l).max(0.5),
            strip.1
        );
    }
    label(s, c, r, (y, mid, w), label_w);
    references(s, r, mid, px);
    if r.marks.is_empty() && !r.empty.is_empty() {
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="9.5" font-style="italic" fill="#555555" stroke="white" stroke-width="3" paint-order="stroke">{}</text>"##,
            x0 + 4.0,
            mid + 3.5,
            esc(&clip(&r.empty, x1 - x0 - 8.0, SUB_PX))
        );
    }
    marks(s, c, r, mid, px);
    s.push_str("</g>");
}

/// A row's label (with its tag), its second line and its word.
fn label(s: &mut String, c: &RowChart, r: &Row, (y, mid, w): (f64, f64, f64), label_w: f64) {
    let word_w = r
        .word
        .as_ref()
        .map_or(0.0, |(x, _)| width(x, LABEL_PX) + 10.0);
    let (ly, sy, room) = match (c.stacked, r.sub.is_empty()) {
        (true, _) => (y + 12.0, y + 24.0, label_w - word_w),
        (false, true) => (mid + 4.0, 0.0, label_w),
        (false, false) => (y + 13.0, y + 25.0, label_w),
    };
    let text = clip(&r.label, room - width(&r.tag, SUB_PX), LABEL_PX);
    let _ = write!(s, r#"<text x="12" y="{ly:.1}">{}"#, esc(&text));
    if !r.tag.is_empty() {
        let _ = write!(
            s,
            r##"<tspan font-size="9.5" font-style="italic" fill="#8a5a00"> {}</tspan>"##,
            esc(&r.tag)
        );
    }
    s.push_str("</text>");
    if !r.sub.is_empty() {
        let _ = write!(
            s,
            r##"<text x="12" y="{sy:.1}" font-size="9.5" fill="#666666">{}</text>"##,
            esc(&clip(&r.sub, label_w, SUB_PX))
        );
    }
    if let Some((word, colour)) = &r.word {
        let (x, y, anchor) = if c.stacked {
            (w - 12.0, ly, "end")
        } else {
            (w - 12.0 - (word_w - 10.0), mid + 4.0, "start")
        };
        let _ = write!(
            s,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" font-weight="bold" fill="{colour}">{}</text>"#,
            esc(word)
        );
    }
}

/// A row's numbers from the source, in grey: a diamond for one, a band for a range.
fn references(s: &mut String, r: &Row, mid: f64, px: &dyn Fn(f64) -> f64) {
    for (lo, hi, tip) in &r.refs {
        let (l, rr) = (px(*lo), px(*hi));
        if (rr - l).abs() < 1.0 {
            let _ = write!(
                s,
                r##"<path class="ref" d="M{l:.1},{:.1} L{:.1},{mid:.1} L{l:.1},{:.1} L{:.1},{mid:.1} Z" fill="none" stroke="#555555" stroke-width="1.3"><title>{}</title></path>"##,
                mid - 6.5,
                l + 6.5,
                mid + 6.5,
                l - 6.5,
                esc(tip)
            );
        } else {
            let _ = write!(
                s,
                r##"<rect class="ref" x="{l:.1}" y="{:.1}" width="{:.1}" height="10" fill="#888888" fill-opacity="0.35" stroke="#555555" stroke-width="0.8" stroke-dasharray="2 2"><title>{}</title></rect>"##,
                mid - 5.0,
                rr - l,
                esc(tip)
            );
        }
    }
}

/// A row's markers: each interval as a bar with caps, then each value, the categories'
/// markers nudged apart vertically so that none hides another.
fn marks(s: &mut String, c: &RowChart, r: &Row, mid: f64, px: &dyn Fn(f64) -> f64) {
    let n = r.marks.len() as f64;
    for (k, m) in r.marks.iter().enumerate() {
        let y = if m.category.is_some() && n > 1.0 {
            mid + (k as f64 - (n - 1.0) / 2.0) * 5.0
        } else {
            mid
        };
        let series = m
            .category
            .and_then(|i| c.categories.get(i))
            .map(|x| format!(r#" data-series="{}""#, esc(x)))
            .unwrap_or_default();
        if let Some((lo, hi)) = m.interval {
            let (l, rr) = (px(lo), px(hi));
            let _ = write!(
                s,
                r#"<path class="range"{series} d="M{l:.1},{y:.1} L{rr:.1},{y:.1} M{l:.1},{:.1} L{l:.1},{:.1} M{rr:.1},{:.1} L{rr:.1},{:.1}" stroke="{}" stroke-width="{}"/>"#,
                y - 3.5,
                y + 3.5,
                y - 3.5,
                y + 3.5,
                m.colour,
                if m.category.is_some() { "1" } else { "2" }
            );
        }
        let x = px(m.value);
        match (
            m.category,
            c.categories.get(m.category.unwrap_or(usize::MAX)),
        ) {
            (Some(i), Some(cat)) => {
                marker_with(s, i, (x, y, 1.0), m.colour, m.hollow, Some((cat, &m.tip)));
            }
            _ => {
                let fill = if m.hollow { "white" } else { m.colour };
                let _ = write!(
                    s,
                    r#"<circle cx="{x:.1}" cy="{y:.1}" r="4.5" fill="{fill}" stroke="{}" stroke-width="1.5"><title>{}</title></circle>"#,
                    m.colour,
                    esc(&m.tip)
                );
            }
        }
    }
}

/// The axis under the rows: its frame, the guide, ticks and name.
fn frame(
    s: &mut String,
    c: &RowChart,
    (top, bottom, w): (f64, f64, f64),
    (x0, x1): (f64, f64),
    ticks: &[(f64, String)],
    px: &dyn Fn(f64) -> f64,
) {
    let _ = write!(
        s,
        r#"<line x1="{x0:.1}" y1="{bottom:.1}" x2="{x1:.1}" y2="{bottom:.1}" stroke="black"/>"#
    );
    for (v, label) in ticks {
        let x = px(*v);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{:.1}" stroke="#dddddd" stroke-width="0.6"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            bottom + 4.0,
            bottom + 16.0
        );
    }
    if let Some((g, _)) = &c.guide {
        let x = px(*g);
        let _ = write!(
            s,
            r##"<line class="guide" x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#444444" stroke-dasharray="3 3"/>"##
        );
    }
    let name = match (&c.guide, c.log) {
        (Some((_, g)), true) => format!("{} (log scale; {g})", c.x_label),
        (Some((_, g)), false) => format!("{} ({g})", c.x_label),
        (None, true) => format!("{} (log scale)", c.x_label),
        (None, false) => c.x_label.clone(),
    };
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        (x0 + x1) / 2.0,
        bottom + 31.0,
        esc(&clip(&name, w - 24.0, LABEL_PX))
    );
}
