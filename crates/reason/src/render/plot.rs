//! What a micro-benchmark's figures show, independent of how they are drawn: each benchmark's
//! `plots` (`render::micro::*`) gives the seed's figure(s) as [`Plot`]s, which
//! [`crate::render::micro`] draws as SVG ([`crate::render::svg`]) beside its report.md and
//! report.html.

/// One figure: named lines of (x, y) points.
#[derive(Clone, Debug, PartialEq)]
pub struct Plot {
    /// A short name, unique within the report; the lab writes the figure as `fig-<name>.svg`.
    pub name: String,
    pub title: String,
    /// Axis labels, units in parentheses.
    pub x_label: String,
    pub y_label: String,
    /// Logarithmic axes (counts from 1 to thousands; values spanning decades).
    pub x_log: bool,
    pub y_log: bool,
    /// In legend order. A line with no point is not listed.
    pub lines: Vec<Series>,
}

/// One line of a figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    /// In x order.
    pub points: Vec<Xy>,
}

/// One point, with the range (min, max) of its runs when there was more than one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Xy {
    pub x: f64,
    pub y: f64,
    pub range: Option<(f64, f64)>,
}

impl Xy {
    pub fn new(x: f64, y: f64) -> Xy {
        Xy { x, y, range: None }
    }
}

impl Plot {
    /// A figure with no line yet.
    pub fn new(name: &str, title: String, x_label: &str, y_label: &str) -> Plot {
        Plot {
            name: name.into(),
            title,
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_log: false,
            y_log: false,
            lines: Vec::new(),
        }
    }

    pub fn log_x(mut self) -> Plot {
        self.x_log = true;
        self
    }

    pub fn log_y(mut self) -> Plot {
        self.y_log = true;
        self
    }

    /// Adds a line of the points that are finite (and positive on a log axis), sorted by x;
    /// a line left with none is not added.
    pub fn line(&mut self, label: impl Into<String>, points: impl IntoIterator<Item = Xy>) {
        let (xl, yl) = (self.x_log, self.y_log);
        let mut pts: Vec<Xy> = points
            .into_iter()
            .filter(|p| p.x.is_finite() && p.y.is_finite())
            .filter(|p| (!xl || p.x > 0.0) && (!yl || p.y > 0.0))
            .collect();
        pts.sort_by(|a, b| a.x.total_cmp(&b.x));
        if !pts.is_empty() {
            self.lines.push(Series {
                label: label.into(),
                points: pts,
            });
        }
    }

    /// The line labelled `label`.
    pub fn series(&self, label: &str) -> Option<&Series> {
        self.lines.iter().find(|l| l.label == label)
    }
}

impl Series {
    /// The y at `x`, if the line has a point there.
    pub fn y_at(&self, x: f64) -> Option<f64> {
        self.points.iter().find(|p| p.x == x).map(|p| p.y)
    }

    pub fn xs(&self) -> Vec<f64> {
        self.points.iter().map(|p| p.x).collect()
    }
}

/// The min and max of `xs` when there are two or more, for an error bar.
pub fn range(xs: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    let v: Vec<f64> = xs.into_iter().filter(|x| x.is_finite()).collect();
    if v.len() < 2 {
        return None;
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_only_what_their_axes_can_draw() {
        let mut p = Plot::new("t", "t".into(), "x", "y").log_x();
        p.line(
            "a",
            [
                Xy::new(4.0, 1.0),
                Xy::new(0.0, 2.0),
                Xy::new(1.0, f64::NAN),
                Xy::new(2.0, 3.0),
            ],
        );
        p.line("empty", [Xy::new(0.0, 1.0)]);
        assert_eq!(p.lines.len(), 1);
        assert_eq!(p.series("a").unwrap().xs(), [2.0, 4.0]);
        assert_eq!(p.series("a").unwrap().y_at(4.0), Some(1.0));
        assert_eq!(range([3.0, 1.0, 2.0]), Some((1.0, 3.0)));
        assert_eq!(range([3.0]), None);
    }
}
