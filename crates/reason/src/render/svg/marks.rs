//! The markers of a line chart: one closed shape per series (so each can be drawn hollow, an
//! invalid point), error bars, the nesting of markers that would hide one another; and the
//! colours and the escaping every figure uses.

use std::fmt::Write as _;

pub(super) const COLOURS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];

/// The colour of series (or category) `i`.
pub fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Marker outlines, centred on the origin: a polygon's vertices (the circle is drawn as such).
/// Every shape is closed, so every one can be drawn hollow.
pub(super) const SHAPES: usize = 8;

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
pub(super) fn marker(out: &mut String, i: usize, x: f64, y: f64, colour: &str, hollow: bool) {
    marker_with(out, i, (x, y, 1.0), colour, hollow, None);
}

/// A marker; with `tip`, a point of the chart: its series' name as `data-series` (the legend
/// toggles it) and its values as the `<title>` a browser shows on hover.
pub(super) fn marker_with(
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
pub(super) fn error_bar(
    out: &mut String,
    x: f64,
    y_lo: f64,
    y_hi: f64,
    colour: &str,
    series: &str,
) {
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
pub(super) struct Mark {
    pub(super) series: usize,
    pub(super) x: f64,
    pub(super) y: f64,
    pub(super) hollow: bool,
    pub(super) bar: Option<(f64, f64)>,
    /// What hovering shows: the series and the point's values.
    pub(super) tip: String,
    /// Its size, 1 unless it coincides with others (see [`nest`]).
    pub(super) size: f64,
}

/// Nests markers that would hide one another, never moving one off its value: at one x, markers
/// whose y lie within `OVERLAP` of the next form a group; in series order the first is drawn
/// largest and each later one smaller on top of it (different shapes, so each ring shows).
/// Without this the last series drawn hides the others where they coincide (below saturation
/// every mechanism answers what it is offered), and with them their hollow (invalid) markers.
pub(super) fn nest(marks: &mut [Mark]) -> bool {
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
