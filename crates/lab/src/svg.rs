//! Line charts drawn by hand as SVG, in the paper's manner: x the offered rate, y what the
//! clients saw, one line with its own marker per mechanism, a legend. No dependency and
//! deterministic output, so a re-rendered report is byte-for-byte the original.

use std::fmt::Write as _;

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

pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub lines: Vec<Line>,
    /// Draw y = x (replies = requests), the ideal a server tracks until it saturates.
    pub diagonal: bool,
}

const W: f64 = 640.0;
const H: f64 = 400.0;
const L: f64 = 70.0;
const R: f64 = 170.0;
const T: f64 = 36.0;
const B: f64 = 50.0;

const COLOURS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];

/// A "nice" tick step (1, 2 or 5 × 10^k) giving about `n` ticks over `span`.
pub fn nice_step(span: f64, n: f64) -> f64 {
    if span.is_nan() || span <= 0.0 {
        return 1.0;
    }
    let raw = span / n;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f < 1.5 {
        1.0
    } else if f < 3.5 {
        2.0
    } else if f < 7.5 {
        5.0
    } else {
        10.0
    };
    m * mag
}

fn fmt_tick(v: f64) -> String {
    if v.abs() >= 1000.0 && (v / 1000.0).fract() == 0.0 {
        let k = (v / 1000.0) as i64;
        // Thousands separators like the paper's axes (20,000).
        if k >= 1000 {
            format!("{},{:03},000", k / 1000, k % 1000)
        } else {
            format!("{k},000")
        }
    } else if v.fract() == 0.0 {
        format!("{}", v as i64)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

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
    let (fill, width) = if hollow {
        ("white", 1.6)
    } else {
        (colour, 1.0)
    };
    let class = if hollow { r#" class="invalid""# } else { "" };
    let pts = shape_points(i);
    if pts.is_empty() {
        let _ = write!(
            out,
            r#"<circle{class} cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{fill}" stroke="{colour}" stroke-width="{width}"/>"#
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
                x + dx,
                y + dy
            )
        })
        .collect();
    let _ = write!(
        out,
        r#"<path{class} d="{} Z" fill="{fill}" stroke="{colour}" stroke-width="{width}"/>"#,
        d.join(" ")
    );
}

/// A vertical min–max bar with caps.
fn error_bar(out: &mut String, x: f64, y_lo: f64, y_hi: f64, colour: &str) {
    let _ = write!(
        out,
        r#"<path class="range" d="M{x:.1},{y_lo:.1} L{x:.1},{y_hi:.1} M{:.1},{y_lo:.1} L{:.1},{y_lo:.1} M{:.1},{y_hi:.1} L{:.1},{y_hi:.1}" stroke="{colour}" stroke-width="1"/>"#,
        x - 3.0,
        x + 3.0,
        x - 3.0,
        x + 3.0
    );
}

/// The chart as a standalone `<svg>` element. Each line is one `<polyline class="series">`.
pub fn line_chart(c: &Chart) -> String {
    // The axes hold every point and every error bar's top.
    let all: Vec<(f64, f64)> = c
        .lines
        .iter()
        .flat_map(|l| {
            l.points.iter().copied().chain(
                l.points
                    .iter()
                    .zip(&l.ranges)
                    .filter_map(|(p, r)| r.map(|r| (p.0, r.1))),
            )
        })
        .collect();
    let (mut x0, mut x1) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.0), b.max(p.0))
        });
    let mut y1 = all.iter().fold(0.0f64, |a, p| a.max(p.1));
    for l in &c.lines {
        for &(x, y) in &l.stray {
            y1 = y1.max(y);
            x0 = x0.min(x);
            x1 = x1.max(x);
        }
    }
    if c.diagonal {
        y1 = y1.max(x1);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    // The paper's axes start at zero; a single rate still needs a span.
    x0 = 0.0f64.min(x0);
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= 0.0 {
        y1 = 1.0;
    }
    let xs = nice_step(x1 - x0, 6.0);
    let ys = nice_step(y1, 6.0);
    let x1 = (x1 / xs).ceil() * xs;
    let y1 = (y1 / ys).ceil() * ys;
    let pw = W - L - R;
    let ph = H - T - B;
    let px = |x: f64| L + (x - x0) / (x1 - x0) * pw;
    let py = |y: f64| T + ph - y / y1 * ph;

    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="Helvetica, Arial, sans-serif" font-size="12" role="img" aria-label="{}">"#,
        esc(&c.title)
    );
    let _ = write!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
        L + pw / 2.0,
        esc(&c.title)
    );
    // Grid and ticks.
    let mut v = x0;
    while v <= x1 + xs / 2.0 {
        let x = px(v);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{T}" x2="{x:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            T + ph,
            T + ph + 16.0,
            fmt_tick(v)
        );
        v += xs;
    }
    let mut v = 0.0;
    while v <= y1 + ys / 2.0 {
        let y = py(v);
        let _ = write!(
            s,
            r##"<line x1="{L}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            L + pw,
            L - 6.0,
            y + 4.0,
            fmt_tick(v)
        );
        v += ys;
    }
    let _ = write!(
        s,
        r#"<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
    );
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        L + pw / 2.0,
        H - 10.0,
        esc(&c.x_label)
    );
    let _ = write!(
        s,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
        T + ph / 2.0,
        T + ph / 2.0,
        esc(&c.y_label)
    );
    if c.diagonal {
        let top = x1.min(y1);
        let _ = write!(
            s,
            r##"<line class="ideal" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#aaaaaa" stroke-dasharray="4 4"/>"##,
            px(x0.max(0.0)),
            py(x0.max(0.0)),
            px(top),
            py(top)
        );
    }
    for (i, line) in c.lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let pts: Vec<String> = line
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline class="series" data-series="{}" points="{}" fill="none" stroke="{colour}" stroke-width="1.8"/>"#,
            esc(&line.label),
            pts.join(" ")
        );
        for (k, &(x, y)) in line.points.iter().enumerate() {
            if let Some(&Some((lo, hi))) = line.ranges.get(k) {
                if hi > lo {
                    error_bar(&mut s, px(x), py(lo), py(hi), colour);
                }
            }
            let hollow = line.flagged.get(k).copied().unwrap_or(false);
            marker(&mut s, i, px(x), py(y), colour, hollow);
        }
        for &(x, y) in &line.stray {
            marker(&mut s, i, px(x), py(y), colour, true);
        }
        // Legend.
        let ly = T + 8.0 + i as f64 * 20.0;
        let lx = L + pw + 14.0;
        let _ = write!(
            s,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="1.8"/>"#,
            lx + 24.0
        );
        marker(&mut s, i, lx + 12.0, ly, colour, false);
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 30.0,
            ly + 4.0,
            esc(&line.label)
        );
    }
    let mut ly = T + 8.0 + c.lines.len() as f64 * 20.0 + 6.0;
    if c.lines
        .iter()
        .any(|l| l.flagged.iter().any(|&f| f) || !l.stray.is_empty())
    {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{ly:.1}" font-size="10">hollow: invalid point</text><text x="{:.1}" y="{:.1}" font-size="10">(no verdict uses it)</text>"#,
            L + pw + 14.0,
            L + pw + 14.0,
            ly + 12.0
        );
        ly += 28.0;
    }
    if c.lines
        .iter()
        .any(|l| l.ranges.iter().any(|b| b.is_some_and(|(lo, hi)| hi > lo)))
    {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{ly:.1}" font-size="10">bars: min–max over trials</text>"#,
            L + pw + 14.0
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_and_ticks() {
        assert_eq!(nice_step(30000.0, 6.0), 5000.0);
        assert_eq!(nice_step(7.0, 6.0), 1.0);
        assert_eq!(fmt_tick(20000.0), "20,000");
        assert_eq!(fmt_tick(1_500_000.0), "1,500,000");
        assert_eq!(fmt_tick(2_000_000.0), "2,000,000");
        assert_eq!(fmt_tick(0.25), "0.25");
    }

    #[test]
    fn one_polyline_per_line_and_escaped_labels() {
        let c = Chart {
            title: "t <1>".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            diagonal: true,
            lines: vec![
                Line {
                    label: "select".into(),
                    points: vec![(1000.0, 990.0), (2000.0, 1500.0)],
                    flagged: vec![false, true],
                    ranges: vec![None, Some((1400.0, 1600.0))],
                    stray: vec![],
                },
                Line {
                    label: "a&b".into(),
                    points: vec![(1000.0, 1000.0)],
                    flagged: vec![],
                    ranges: vec![],
                    stray: vec![],
                },
            ],
        };
        let s = line_chart(&c);
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("data-series=\"a&amp;b\""));
        assert!(s.contains("t &lt;1&gt;"));
        assert!(s.contains("hollow"));
        // One error bar, for the point with more than one trial.
        assert_eq!(s.matches("class=\"range\"").count(), 1);
        assert_eq!(line_chart(&c), s);
    }

    #[test]
    fn every_marker_shape_can_be_hollow() {
        for i in 0..SHAPES * 2 {
            let (mut solid, mut hollow) = (String::new(), String::new());
            marker(&mut solid, i, 50.0, 50.0, "#123456", false);
            marker(&mut hollow, i, 50.0, 50.0, "#123456", true);
            assert!(solid.contains("fill=\"#123456\""), "shape {i}: {solid}");
            assert!(hollow.contains("fill=\"white\""), "shape {i}: {hollow}");
            assert!(hollow.contains("stroke=\"#123456\""), "shape {i}: {hollow}");
            assert!(hollow.contains("class=\"invalid\""), "shape {i}");
        }
        // The eight shapes differ (epoll2, the fifth series, used to be an unfillable cross).
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..SHAPES {
            let mut m = String::new();
            marker(&mut m, i, 0.0, 0.0, "red", false);
            seen.insert(m);
        }
        assert_eq!(seen.len(), SHAPES);
    }

    #[test]
    fn error_bars_and_stray_invalid_trials() {
        let c = Chart {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            diagonal: false,
            lines: vec![Line {
                label: "epoll2".into(),
                points: vec![(1000.0, 900.0), (2000.0, 1500.0)],
                flagged: vec![false, false],
                ranges: vec![Some((850.0, 950.0)), None],
                stray: vec![(2000.0, 2600.0)],
            }],
        };
        let s = line_chart(&c);
        assert_eq!(s.matches("class=\"range\"").count(), 1);
        assert_eq!(s.matches("class=\"invalid\"").count(), 1);
        assert!(s.contains("bars: min–max over trials"));
        assert!(s.contains("hollow: invalid point"));
        // The stray point (2,600) is inside the plot: the y axis reaches 3,000.
        assert!(s.contains(">3,000<"), "{s}");
        assert_eq!(s.matches("<polyline").count(), 1);
    }
}
