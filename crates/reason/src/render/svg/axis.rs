//! The axes of a chart: the image's margins and plot area, and each axis's ends, ticks and
//! labels, linear (from zero, as the paper's) or logarithmic (1-2-5 values, or a log x axis's
//! own points), from numbers alone.

pub(super) const W: f64 = 640.0;
pub(super) const H: f64 = 400.0;
pub(super) const L: f64 = 70.0;
pub(super) const R: f64 = 170.0;
pub(super) const T: f64 = 36.0;
pub(super) const B: f64 = 50.0;

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

/// Decimals that show every multiple of `step` exactly (0.25 → 2, 500 → 0).
pub fn decimals(step: f64) -> usize {
    (0..6)
        .find(|&d| {
            let x = step * 10f64.powi(d as i32);
            (x - x.round()).abs() < 1e-6 * x.abs().max(1.0)
        })
        .unwrap_or(6)
}

/// A tick label: `decimals` places, thousands separated by commas as in the report's tables
/// (1,600 and 20,000, never 1600 beside 1,000). One axis uses one number of decimals.
pub fn fmt_tick(v: f64, decimals: usize) -> String {
    let s = format!("{:.*}", decimals, v.abs());
    let (int, frac) = s.split_once('.').unwrap_or((&s, ""));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    if v < 0.0 && out.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.insert(0, '-');
    }
    out
}

/// The 1-2-5 value at or below (`up` false) or at or above `v` (> 0): a log axis's ends.
pub fn one_two_five(v: f64, up: bool) -> f64 {
    let d = 10f64.powf(v.log10().floor());
    let m = v / d;
    let pick = if up {
        [1.0, 2.0, 5.0, 10.0]
            .into_iter()
            .find(|&k| k >= m * (1.0 - 1e-9))
            .unwrap_or(10.0)
    } else {
        [5.0, 2.0, 1.0]
            .into_iter()
            .find(|&k| k <= m * (1.0 + 1e-9))
            .unwrap_or(1.0)
    };
    pick * d
}

/// The ticks of a log axis from `lo` to `hi` (1-2-5 values): every decade and both ends, and 2
/// and 5 × each decade when the axis spans at most two decades. Each is labelled with the
/// decimals it needs (0.5, 1, 20, 1,000): one rule, the shortest exact form with thousands
/// separators, for every label.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<(f64, String)> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let all = b - a <= 2 || hi / lo <= 100.0 * (1.0 + 1e-9);
    let mults: &[f64] = if all { &[1.0, 2.0, 5.0] } else { &[1.0] };
    let mut vs = vec![];
    for e in a..=b {
        for &m in mults {
            let v = m * 10f64.powi(e);
            if v > lo * (1.0 + 1e-9) && v < hi * (1.0 - 1e-9) {
                vs.push(v);
            }
        }
    }
    // The ends, unless a label sits within a third of a decade of them (5 under 10, 2,000
    // over 1,000: crowded).
    let far = |v: f64, from: Option<&f64>| from.is_none_or(|&w| (v / w).log10().abs() > 0.35);
    if all || far(lo, vs.first()) {
        vs.insert(0, lo);
    }
    if all || far(hi, vs.last()) {
        vs.push(hi);
    }
    vs.into_iter()
        .map(|v| (v, fmt_tick(v, decimals(v))))
        .collect()
}

/// Least distance, in pixels, between the labels of a log x axis.
pub(super) const X_LABEL_GAP: f64 = 40.0;

/// The plot area's size: the chart less its margins.
pub(super) const PW: f64 = W - L - R;
pub(super) const PH: f64 = H - T - B;

/// Decimals for one category's label: none for whole numbers.
pub(super) fn x_decimals(x: f64) -> usize {
    if x.fract() == 0.0 {
        0
    } else {
        2
    }
}

/// A log x axis over the values from `x0` to `x1`: (lowest, highest, ticks with labels), the
/// ticks at the points' own x values `xs`.
pub(super) fn log_x_axis(x0: f64, x1: f64, xs: &[f64]) -> (f64, f64, Vec<(f64, String)>) {
    let (lo, hi) = if x0.is_finite() {
        (x0, x1)
    } else {
        (1.0, 10.0)
    };
    // Room beyond the extremes (a twentieth of the span, at least a tenth of a decade)
    // so that no marker sits on the frame.
    let pad = ((hi / lo).log10() / 20.0).max(0.1);
    let (a, b) = (lo / 10f64.powf(pad), hi * 10f64.powf(pad));
    let at = |x: f64| (x / a).log10() / (b / a).log10() * PW;
    let mut vs: Vec<f64> = xs.to_vec();
    vs.sort_by(f64::total_cmp);
    vs.dedup();
    let mut ticks: Vec<f64> = Vec::new();
    for &v in &vs {
        if ticks.last().is_none_or(|&t| at(v) - at(t) >= X_LABEL_GAP) {
            ticks.push(v);
        }
    }
    // The largest always: it replaces a kept neighbour too close to it.
    if let (Some(&last), Some(&top)) = (vs.last(), ticks.last()) {
        if top != last {
            if ticks.len() > 1 {
                ticks.pop();
            }
            ticks.push(last);
        }
    }
    if ticks.is_empty() {
        ticks = log_ticks(a, b).into_iter().map(|t| t.0).collect();
    }
    let ticks: Vec<(f64, String)> = ticks
        .into_iter()
        .map(|v| (v, fmt_tick(v, decimals(v))))
        .collect();
    (a, b, ticks)
}

/// A linear x axis over the values from `x0` to `x1`: (lowest, highest, ticks with labels).
pub(super) fn linear_x_axis(mut x0: f64, mut x1: f64) -> (f64, f64, Vec<(f64, String)>) {
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    // The paper's axes start at zero; a single rate still needs a span.
    x0 = 0.0f64.min(x0);
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let xs = nice_step(x1 - x0, 6.0);
    // A point on the frame would have its marker cut in half (and markers set side by side
    // spill out): the axis goes a step further then.
    let x1 = {
        let end = (x1 / xs).ceil() * xs;
        if x1 > end - 0.04 * (end - x0) {
            end + xs
        } else {
            end
        }
    };
    let xd = decimals(xs);
    let mut ticks = Vec::new();
    let mut v = x0;
    while v <= x1 + xs / 2.0 {
        ticks.push((v, fmt_tick(v, xd)));
        v += xs;
    }
    (x0, x1, ticks)
}

/// A log y axis over `ys` (up to `y_max`): (lowest, highest, ticks with labels).
pub(super) fn log_y_axis(ys: &[f64], y_max: f64) -> (f64, f64, Vec<(f64, String)>) {
    let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let (lo, hi) = if lo.is_finite() {
        (lo, y_max)
    } else {
        (1.0, 10.0)
    };
    // A little room beyond the extremes, so that no marker sits on the frame.
    let y0 = one_two_five(lo / 1.15, false);
    let mut y1 = one_two_five(hi * 1.15, true);
    if y1 <= y0 {
        y1 = one_two_five(y0 * 1.5, true);
    }
    (y0, y1, log_ticks(y0, y1))
}

/// A linear y axis from zero to `y_max`: (lowest, highest, ticks with labels).
pub(super) fn linear_y_axis(y_max: f64) -> (f64, f64, Vec<(f64, String)>) {
    // Nothing above zero (no errors at all): an axis to 1.
    let (y_max, room) = if y_max > 0.0 {
        (y_max, true)
    } else {
        (1.0, false)
    };
    let ys = nice_step(y_max, 6.0);
    let end = (y_max / ys).ceil() * ys;
    let y1 = if room && y_max > end * 0.97 {
        end + ys
    } else {
        end
    };
    let d = decimals(ys);
    let ticks = (0..)
        .map(|k| k as f64 * ys)
        .take_while(|&v| v <= y1 + ys / 2.0)
        .map(|v| (v, fmt_tick(v, d)))
        .collect();
    (0.0, y1, ticks)
}
