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

fn marker(out: &mut String, i: usize, x: f64, y: f64, colour: &str, hollow: bool) {
    let fill = if hollow { "white" } else { colour };
    let _ = match i % 5 {
        0 => write!(
            out,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{fill}" stroke="{colour}"/>"#
        ),
        1 => write!(
            out,
            r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{fill}" stroke="{colour}"/>"#,
            x - 3.5,
            y - 3.5
        ),
        2 => write!(
            out,
            r#"<path d="M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z" fill="{fill}" stroke="{colour}"/>"#,
            y - 4.5,
            x + 4.0,
            y + 3.5,
            x - 4.0,
            y + 3.5
        ),
        3 => write!(
            out,
            r#"<path d="M{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} Z" fill="{fill}" stroke="{colour}"/>"#,
            y - 4.5,
            x + 4.5,
            y + 4.5,
            x - 4.5
        ),
        _ => write!(
            out,
            r#"<path d="M{:.1},{:.1} L{:.1},{:.1} M{:.1},{:.1} L{:.1},{:.1}" stroke="{colour}" stroke-width="2"/>"#,
            x - 4.0,
            y - 4.0,
            x + 4.0,
            y + 4.0,
            x - 4.0,
            y + 4.0,
            x + 4.0,
            y - 4.0
        ),
    };
}

/// The chart as a standalone `<svg>` element. Each line is one `<polyline class="series">`.
pub fn line_chart(c: &Chart) -> String {
    let all: Vec<(f64, f64)> = c
        .lines
        .iter()
        .flat_map(|l| l.points.iter().copied())
        .collect();
    let (mut x0, mut x1) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.0), b.max(p.0))
        });
    let mut y1 = all.iter().fold(0.0f64, |a, p| a.max(p.1));
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
            let hollow = line.flagged.get(k).copied().unwrap_or(false);
            marker(&mut s, i, px(x), py(y), colour, hollow);
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
    if c.lines.iter().any(|l| l.flagged.iter().any(|&f| f)) {
        let ly = T + 8.0 + c.lines.len() as f64 * 20.0 + 6.0;
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{ly:.1}" font-size="10">hollow: flagged point</text>"#,
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
                },
                Line {
                    label: "a&b".into(),
                    points: vec![(1000.0, 1000.0)],
                    flagged: vec![],
                },
            ],
        };
        let s = line_chart(&c);
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("data-series=\"a&amp;b\""));
        assert!(s.contains("t &lt;1&gt;"));
        assert!(s.contains("hollow"));
        assert_eq!(line_chart(&c), s);
    }
}
