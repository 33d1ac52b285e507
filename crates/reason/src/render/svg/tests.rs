use super::axis::*;
use super::marks::SHAPES;
use super::*;

/// Whether `svg` is well-formed XML as far as a chart uses it: every element closed in
/// order, attributes quoted, `&` only in entities (a browser renders nothing of an SVG that
/// is not).
fn well_formed(svg: &str) -> Result<(), String> {
    let mut open: Vec<&str> = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find('<') {
        let text = &rest[..i];
        for (k, _) in text.match_indices('&') {
            let ent = &text[k..];
            if !["&amp;", "&lt;", "&gt;", "&quot;"]
                .iter()
                .any(|e| ent.starts_with(e))
            {
                return Err(format!("bare & in {text:?}"));
            }
        }
        let end = rest[i..].find('>').ok_or("unclosed tag")? + i;
        let tag = &rest[i + 1..end];
        if tag.matches('"').count() % 2 == 1 {
            return Err(format!("unbalanced quotes in <{tag}>"));
        }
        if let Some(name) = tag.strip_prefix('/') {
            if open.pop() != Some(name) {
                return Err(format!("</{name}> closes nothing open"));
            }
        } else if !tag.ends_with('/') {
            open.push(tag.split_whitespace().next().unwrap_or(""));
        }
        rest = &rest[end + 1..];
    }
    if open.is_empty() {
        Ok(())
    } else {
        Err(format!("left open: {open:?}"))
    }
}

#[test]
fn charts_are_well_formed() {
    let mut a = line(
        "a&b <c>",
        vec![(1000.0, 0.5), (2000.0, 40.0), (3000.0, 0.0)],
    );
    a.flagged = vec![false, true, false];
    a.ranges = vec![None, Some((30.0, 50.0)), None];
    a.stray = vec![(2000.0, 70.0)];
    for scale in [Scale::Linear, Scale::Log] {
        let s = line_chart(&chart(vec![a.clone_line(), line("\"q\"", vec![])], scale));
        well_formed(&s).unwrap_or_else(|e| panic!("{scale:?}: {e}: {s}"));
    }
    assert!(well_formed("<svg><g></svg>").is_err());
    assert!(well_formed("<svg>a & b</svg>").is_err());
}

impl Line {
    fn clone_line(&self) -> Line {
        Line {
            label: self.label.clone(),
            points: self.points.clone(),
            flagged: self.flagged.clone(),
            ranges: self.ranges.clone(),
            stray: self.stray.clone(),
        }
    }
}

#[test]
fn steps_and_ticks() {
    assert_eq!(nice_step(30000.0, 6.0), 5000.0);
    assert_eq!(nice_step(7.0, 6.0), 1.0);
    assert_eq!(fmt_tick(20000.0, 0), "20,000");
    assert_eq!(fmt_tick(1_500_000.0, 0), "1,500,000");
    assert_eq!(fmt_tick(1600.0, 0), "1,600");
    assert_eq!(fmt_tick(999.0, 0), "999");
    assert_eq!(fmt_tick(0.25, 2), "0.25");
    assert_eq!(fmt_tick(0.5, 2), "0.50");
    assert_eq!(fmt_tick(1200.5, 1), "1,200.5");
    assert_eq!(fmt_tick(-2000.0, 0), "-2,000");
    assert_eq!(decimals(0.25), 2);
    assert_eq!(decimals(0.2), 1);
    assert_eq!(decimals(500.0), 0);
    let t: Vec<String> = log_ticks(0.1, 1000.0).into_iter().map(|t| t.1).collect();
    assert_eq!(t, ["0.1", "1", "10", "100", "1,000"]);
    let t: Vec<String> = log_ticks(1.0, 100.0).into_iter().map(|t| t.1).collect();
    assert_eq!(t, ["1", "2", "5", "10", "20", "50", "100"]);
    let t: Vec<String> = log_ticks(0.2, 2000.0).into_iter().map(|t| t.1).collect();
    assert_eq!(t, ["0.2", "1", "10", "100", "1,000"]);
    let t: Vec<String> = log_ticks(5.0, 5000.0).into_iter().map(|t| t.1).collect();
    assert_eq!(t, ["10", "100", "1,000", "5,000"]);
    assert_eq!(one_two_five(1003.0, true), 2000.0);
    assert_eq!(one_two_five(0.27, false), 0.2);
    assert_eq!(one_two_five(1000.0, true), 1000.0);
    assert_eq!(one_two_five(4.0, false), 2.0);
}

/// The y tick labels of a chart, in order.
fn y_labels(svg: &str) -> Vec<String> {
    svg.split(r#"text-anchor="end">"#)
        .skip(1)
        .map(|t| t.split('<').next().unwrap().to_string())
        .collect()
}

fn x_labels(svg: &str) -> Vec<String> {
    svg.split(r#"text-anchor="middle">"#)
        .skip(1)
        .map(|t| t.split('<').next().unwrap().to_string())
        .filter(|t| t.starts_with(|c: char| c.is_ascii_digit()))
        .collect()
}

fn line(label: &str, points: Vec<(f64, f64)>) -> Line {
    let n = points.len();
    Line {
        label: label.into(),
        points,
        flagged: vec![false; n],
        ranges: vec![None; n],
        stray: vec![],
    }
}

fn chart(lines: Vec<Line>, y_scale: Scale) -> Chart {
    Chart {
        title: "t".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        diagonal: false,
        lines,
        y_scale,
    }
}

#[test]
fn a_series_over_ten_times_is_drawn_on_a_log_axis() {
    let wide = chart(
        vec![line("a", vec![(1.0, 10.0), (2.0, 5000.0)])],
        Scale::Linear,
    );
    assert!(line_chart(&wide).contains("y (log scale)"));
    let ten = chart(
        vec![line("a", vec![(1.0, 500.0), (2.0, 5000.0)])],
        Scale::Linear,
    );
    assert!(line_chart(&ten).contains("y (log scale)"));
    // Under ten times, or with a zero (a log axis cannot show it): linear.
    let narrow = chart(
        vec![line("a", vec![(1.0, 600.0), (2.0, 5000.0)])],
        Scale::Linear,
    );
    assert!(!line_chart(&narrow).contains("log scale"));
    let zero = chart(
        vec![line("a", vec![(1.0, 0.0), (2.0, 10.0), (3.0, 5000.0)])],
        Scale::Linear,
    );
    assert!(!line_chart(&zero).contains("log scale"));
}

#[test]
fn tick_labels_follow_one_rule_per_axis() {
    // p99 up to 1,150 ms: ticks 0, 200, …, 1,200 — never "1200" beside "1,000". (From
    // 200: a series over ten times or more would be drawn on a log axis.)
    let c = chart(
        vec![line(
            "a",
            vec![
                (2200.0, 200.0),
                (5000.0, 300.0),
                (9000.0, 700.0),
                (13000.0, 1150.0),
            ],
        )],
        Scale::Linear,
    );
    let s = line_chart(&c);
    let y = y_labels(&s);
    assert_eq!(
        y,
        ["0", "200", "400", "600", "800", "1,000", "1,200"],
        "{s}"
    );
    let x = x_labels(&s);
    assert!(x.contains(&"12,000".to_string()), "{x:?}");
    for l in y.iter().chain(&x) {
        let digits: String = l.chars().filter(|c| c.is_ascii_digit()).collect();
        if digits.len() >= 4 {
            assert!(l.contains(','), "{l} lacks its separator");
        }
    }
    // A fractional step: every label with the same decimals (and a step of room above the
    // highest point, which would sit on the frame).
    let c = chart(vec![line("a", vec![(1.0, 0.2), (2.0, 1.2)])], Scale::Linear);
    assert_eq!(
        y_labels(&line_chart(&c)),
        ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0", "1.2", "1.4"]
    );
}

#[test]
fn three_x_values_or_fewer_make_a_dot_plot_of_evenly_spaced_categories() {
    let two = || {
        chart(
            vec![
                line("a", vec![(0.0, 40.0), (10000.0, 30.0)]),
                line("b", vec![(0.0, 38.0), (10000.0, 800.0)]),
            ],
            Scale::Linear,
        )
    };
    let s = line_chart(&two());
    // The categories are labelled with their own values, nothing between them.
    assert_eq!(x_labels(&s), ["0", "10,000"], "{s}");
    // The first series' dots (circles, drawn at their centres) sit each at the middle of
    // its half of the plot, whatever the values' distance.
    let circles: Vec<f64> = s
        .split("<circle")
        .skip(1)
        .filter_map(|e| e.split("cx=\"").nth(1)?.split('"').next()?.parse().ok())
        .filter(|x: &f64| *x < L + PW) // not the legend's
        .collect();
    let (left, right) = (L + PW / 4.0, L + 3.0 * PW / 4.0);
    assert!(circles.len() >= 2, "{s}");
    for x in &circles {
        assert!(
            (x - left).abs() < 0.6 || (x - right).abs() < 0.6,
            "{x} not at {left} or {right}"
        );
    }
    assert_eq!(markers(&s).iter().filter(|m| m.0 < L + PW).count(), 4);
    // The series' guides are faint and dashed: the dots carry the values.
    assert_eq!(s.matches("<polyline").count(), 2);
    assert_eq!(s.matches(r#"stroke-dasharray="3 4""#).count(), 2);
    // Four values keep the linear axis, and solid lines.
    let four = chart(
        vec![line(
            "a",
            vec![(1.0, 1.0), (2.0, 2.0), (3.0, 3.0), (4.0, 4.0)],
        )],
        Scale::Linear,
    );
    let s = line_chart(&four);
    assert!(!s.contains("stroke-dasharray"), "{s}");
    // (the rate axis from zero, ticks between the values)
    let x = x_labels(&s);
    assert!(x.len() > 4 && x[0] == "0.0", "{x:?}");
    // A chart with the diagonal (replies against the offered rate) keeps its rate axis.
    let mut diag = two();
    diag.diagonal = true;
    assert!(!line_chart(&diag).contains(r#"stroke-dasharray="3 4""#));
}

#[test]
fn log_scale_spans_decades_and_leaves_out_what_it_cannot_draw() {
    let c = chart(
        vec![
            line("a", vec![(1000.0, 0.4), (2000.0, 3.0), (3000.0, 950.0)]),
            line("b", vec![(1000.0, 0.0), (2000.0, 2.0)]),
        ],
        Scale::Log,
    );
    let s = line_chart(&c);
    // 0.4 to 950: room beyond both, to 0.2 and 2,000 (unlabelled: 1,000 is near).
    assert_eq!(y_labels(&s), ["0.2", "1", "10", "100", "1,000"], "{s}");
    assert!(s.contains("y (log scale)"));
    assert!(s.contains("class=\"minor\""));
    assert!(s.contains("values ≤ 0 not shown"));
    // b's zero is left out of its line.
    let b = s.split("data-series=\"b\" points=\"").nth(1).unwrap();
    assert_eq!(b.split('"').next().unwrap().split(' ').count(), 1);
}

/// The markers of a chart in drawing order: (x of the first vertex or centre, y, hollow).
fn markers(svg: &str) -> Vec<(f64, f64, bool)> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find(['<']) {
        rest = &rest[i + 1..];
        let el = &rest[..rest.find('>').unwrap()];
        let num = |key: &str| -> Option<f64> {
            el.split(key)
                .nth(1)?
                .split(['"', ',', ' '])
                .next()?
                .parse()
                .ok()
        };
        let hollow = el.contains("invalid\"");
        if el.starts_with("circle") {
            out.push((num("cx=\"").unwrap(), num("cy=\"").unwrap(), hollow));
        } else if el.starts_with("path") && !el.contains("class=\"range\"") {
            let d = el.split("d=\"M").nth(1).unwrap();
            let mut xy = d.split([',', ' ']);
            let x: f64 = xy.next().unwrap().parse().unwrap();
            let y: f64 = xy.next().unwrap().parse().unwrap();
            out.push((x, y, hollow));
        }
    }
    out
}

#[test]
fn coinciding_markers_are_nested_at_their_values_and_hollow_ones_drawn_last() {
    // Eight series answering exactly what they are offered, three of them flagged at
    // 2,000/s: every marker must stay visible and at its value, the hollow ones above.
    let mut lines = Vec::new();
    for i in 0..8 {
        let mut l = line(&format!("s{i}"), vec![(2000.0, 2000.0), (4000.0, 4000.0)]);
        l.flagged = vec![[2, 3, 4].contains(&i), false];
        lines.push(l);
    }
    let s = line_chart(&chart(lines, Scale::Linear));
    let all = markers(&s);
    // 16 in the plot, then 8 in the legend.
    assert_eq!(all.len(), 24, "{s}");
    let plot = &all[..16];
    assert_eq!(plot.iter().filter(|m| m.2).count(), 3);
    // Hollow markers come after every solid one.
    let first_hollow = plot.iter().position(|m| m.2).unwrap();
    assert!(plot[first_hollow..].iter().all(|m| m.2), "{plot:?}");
    // Every marker centred on its point's x (shapes are symmetric left to right), and at
    // one point no two of one size: nested, not moved.
    let marks: Vec<(f64, f64)> = s
        .split("class=\"mark")
        .skip(1)
        .map(|el| {
            let el = &el[..el.find('>').unwrap()];
            if let Some(cx) = el.split("cx=\"").nth(1) {
                let cx: f64 = cx.split('"').next().unwrap().parse().unwrap();
                let r: f64 = el
                    .split(" r=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                return (cx, r);
            }
            let d = el.split("d=\"").nth(1).unwrap().split('"').next().unwrap();
            let xs: Vec<f64> = d
                .split(['M', 'L', 'Z', ' '])
                .filter(|t| !t.is_empty())
                .map(|t| t.split(',').next().unwrap().parse().unwrap())
                .collect();
            let mean = xs.iter().sum::<f64>() / xs.len() as f64;
            let half = xs.iter().map(|x| (x - mean).abs()).fold(0.0, f64::max);
            (mean, half)
        })
        .collect();
    assert_eq!(marks.len(), 16);
    let poly_x = |label: &str| -> f64 {
        s.split(&format!("data-series=\"{label}\" points=\""))
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let x0 = poly_x("s0");
    let at_first: Vec<&(f64, f64)> = marks.iter().filter(|m| (m.0 - x0).abs() < 0.2).collect();
    assert_eq!(at_first.len(), 8, "{marks:?}");
    let mut sizes: Vec<f64> = at_first.iter().map(|m| m.1).collect();
    sizes.sort_by(f64::total_cmp);
    assert!(sizes[7] > 2.0 * sizes[0], "{sizes:?}");
    assert!(s.contains("nested, the first largest"));
    // Apart, markers stay where their points are.
    let apart = line_chart(&chart(
        vec![
            line("a", vec![(1000.0, 1000.0)]),
            line("b", vec![(1000.0, 5000.0)]),
        ],
        Scale::Linear,
    ));
    let m = markers(&apart);
    let poly = |label: &str| -> f64 {
        apart
            .split(&format!("data-series=\"{label}\" points=\""))
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!((m[0].0 - poly("a")).abs() < 0.1, "{m:?}");
    assert!((m[1].0 - poly("b")).abs() < 6.0, "{m:?}");
}

#[test]
fn one_polyline_per_line_and_escaped_labels() {
    let c = Chart {
        title: "t <1>".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        diagonal: true,
        y_scale: Scale::Linear,
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
        assert!(hollow.contains("invalid\""), "shape {i}");
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
        y_scale: Scale::Linear,
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
    assert_eq!(s.matches("invalid\"").count(), 1);
    assert!(s.contains("bars: min–max over trials"));
    assert!(s.contains("hollow: invalid point"));
    // The stray point (2,600) is inside the plot: the y axis reaches 3,000.
    assert!(s.contains(">3,000<"), "{s}");
    assert_eq!(s.matches("<polyline").count(), 1);
}

#[test]
fn log_x_axis_labels_the_points_own_values_spaced_by_decades() {
    let workers = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
    let c = chart(
        vec![
            line("a", workers.iter().map(|&n| (n, n)).collect()),
            line("b", vec![(0.0, 3.0), (1.0, 1.0), (64.0, 1.0)]),
        ],
        Scale::Linear,
    );
    let s = line_chart_x(&c, Scale::Log);
    well_formed(&s).unwrap();
    // Every worker count fits (each doubling is 50 px or more apart).
    assert_eq!(x_labels(&s), ["1", "2", "4", "8", "16", "32", "64"], "{s}");
    assert!(s.contains("x (log scale)"));
    assert!(s.contains("class=\"minor\""));
    // b's x = 0 cannot be drawn and is left out, with the note.
    let b = s.split("data-series=\"b\" points=\"").nth(1).unwrap();
    assert_eq!(b.split('"').next().unwrap().split(' ').count(), 2);
    assert!(s.contains("values ≤ 0 not shown"));
    // Equal ratios, equal distances: 1→2, 2→4 and 32→64 are the same width.
    let a: Vec<f64> = s
        .split("data-series=\"a\" points=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .split(' ')
        .map(|p| p.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(a.len(), 7);
    for w in a.windows(2) {
        assert!(((w[1] - w[0]) - (a[1] - a[0])).abs() < 0.2, "{a:?}");
    }
    // Crowded values are thinned, but the largest is always labelled.
    let pipes = [10.0, 100.0, 500.0, 1000.0, 2000.0, 4000.0, 8000.0, 16000.0];
    let c = chart(
        vec![line("p", pipes.iter().map(|&n| (n, 5.0)).collect())],
        Scale::Linear,
    );
    let x = x_labels(&line_chart_x(&c, Scale::Log));
    assert_eq!(x.first().map(String::as_str), Some("10"));
    assert_eq!(x.last().map(String::as_str), Some("16,000"));
    assert!(x.len() < pipes.len() && x.len() >= 4, "{x:?}");
    // A linear x axis is what line_chart draws.
    assert_eq!(line_chart_x(&c, Scale::Linear), line_chart(&c));
    assert!(!line_chart(&c).contains("log scale"));
}
