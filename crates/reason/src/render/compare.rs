//! `evlab compare`'s output: the terminal's text and Markdown (the JSON is the comparison
//! itself, `analysis::compare::Comparison`). The summary comes first — how many verdicts and
//! quantities moved, then a plain sentence for each change beyond the runs' spread, as
//! hyperfine gives one — and no line of the text is wider than [`WIDTH`] columns.

use crate::render::table::Table;

use crate::analysis::compare::{Change, Comparison, FindingChange};
use crate::analysis::findings::Verdict;
use crate::model::text::thousands;

/// The widest line of the text.
pub const WIDTH: usize = 100;

/// Most changes the summary names one by one (the rest are marked `*` in the tables).
const MOST_SENTENCES: usize = 6;

fn verdict(v: Option<Verdict>) -> &'static str {
    v.map_or("not in the run", Verdict::word)
}

fn value(x: f64) -> String {
    if x.abs() >= 100.0 {
        thousands(x)
    } else {
        format!("{x:.2}")
    }
}

/// `text` cut into lines of at most `width` columns at spaces, every line after the first
/// indented by `indent` spaces (a word longer than a line stands alone).
pub fn wrap(text: &str, width: usize, indent: usize) -> String {
    let lead = text.chars().take_while(|c| *c == ' ').count();
    let mut out = String::new();
    let mut line = " ".repeat(lead);
    let mut empty = true;
    for word in text.trim_start().split(' ') {
        if word.is_empty() {
            // Runs of spaces (aligned columns) are kept within a line.
            if !empty {
                line.push(' ');
            }
            continue;
        }
        if !empty && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = " ".repeat(indent);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

/// "0.87 [0.70–1.08] ~" (benchstat's "~": no change beyond the spread), or, one run a side,
/// the ratio with no interval.
fn change(c: &Change) -> String {
    match c.ratio {
        Some([r, lo, hi]) => format!(
            "{r:.2} [{lo:.2}–{hi:.2}]{}",
            if c.significant { " *" } else { " ~" }
        ),
        None if c.run1_mean > 0.0 => format!("{:.2} (no interval)", c.run2_mean / c.run1_mean),
        None => "– (no interval)".into(),
    }
}

/// The subject of a sentence: "select's capacity with 10,000 idle connections",
/// "select's server CPU µs/reply with no idle connections at rate 1 of 2".
fn subject(c: &Change) -> String {
    if c.series == "the run" {
        return format!("the {}", c.quantity);
    }
    let idle = match c.idle {
        0 => "no idle connections".to_string(),
        n => format!("{} idle connections", thousands(n as f64)),
    };
    let what = c.quantity.split(" (").next().unwrap_or(&c.quantity);
    let at = if c.at.is_empty() {
        String::new()
    } else {
        format!(" at {}", c.at)
    };
    format!("{}'s {what} with {idle}{at}", c.series)
}

/// The plain sentence of one change, as hyperfine says it: "epoll-et's capacity with no idle
/// connections in run 2 was 1.08 [0.97–1.20] × run 1's: no change beyond the runs' spread."
pub fn sentence(c: &Change) -> String {
    match c.ratio {
        Some([r, lo, hi]) => format!(
            "{} in run 2 was {r:.2} [{lo:.2}–{hi:.2}] × run 1's: {}.",
            subject(c),
            match (c.significant, r > 1.0) {
                (false, _) => "no change beyond the runs' spread",
                (true, true) => "higher, beyond the runs' spread",
                (true, false) => "lower, beyond the runs' spread",
            }
        ),
        None => format!(
            "{} in run 2 was {} against run 1's {}{} (one run each: no interval, so no change \
             can be told from the runs' spread).",
            subject(c),
            value(c.run2_mean),
            value(c.run1_mean),
            if c.run1_mean > 0.0 {
                format!(", {:.2}×", c.run2_mean / c.run1_mean)
            } else {
                String::new()
            }
        ),
    }
}

/// The summary: the counts, then a sentence for each quantity that moved beyond its interval
/// (the largest first), or for the largest change when none did; for two load reports, their
/// reply rate and p99.
pub fn summary(c: &Comparison) -> Vec<String> {
    let all: Vec<&Change> = c.capacities.iter().chain(&c.points).collect();
    if c.single {
        let of = |q: &str| all.iter().find(|x| x.quantity == q);
        let times = |x: &Change| {
            if x.run1_mean > 0.0 {
                format!(" ({:.2}×)", x.run2_mean / x.run1_mean)
            } else {
                String::new()
            }
        };
        let mut s = String::from("Run 2");
        if let Some(r) = of("replies/s") {
            s.push_str(&format!(
                " answered {} replies/s against run 1's {}{}",
                value(r.run2_mean),
                value(r.run1_mean),
                times(r)
            ));
        }
        if let Some(p) = of("latency p99 (ms)") {
            s.push_str(&format!(
                ", with a p99 of {} ms against {} ms{}",
                value(p.run2_mean),
                value(p.run1_mean),
                times(p)
            ));
        }
        s.push_str(": one run each, so no change can be told from the runs' spread.");
        return vec![s];
    }
    let changed = c.verdicts_changed();
    let opposite = c.findings.iter().filter(|f| f.opposite()).count();
    let (moved, n) = c.moved();
    let mut out = vec![format!(
        "Run 2 changed {changed} of {} verdicts{}; {moved} of {n} quantities moved beyond their \
         intervals.",
        c.findings.len(),
        match opposite {
            0 if changed > 0 => " (none to the opposite)".to_string(),
            0 => String::new(),
            k => format!(" ({k} to the opposite)"),
        }
    )];
    let size = |x: &&Change| x.ratio.map_or(0.0, |r| r[0].ln().abs());
    let mut sig: Vec<&Change> = all.iter().copied().filter(|x| x.significant).collect();
    sig.sort_by(|a, b| size(b).total_cmp(&size(a)));
    for x in sig.iter().take(MOST_SENTENCES) {
        out.push(sentence(x));
    }
    if sig.len() > MOST_SENTENCES {
        out.push(format!(
            "{} more changes beyond the spread are marked * below.",
            sig.len() - MOST_SENTENCES
        ));
    }
    if sig.is_empty() {
        // The capacities first: what the paper's figures show.
        if let Some(x) = c
            .capacities
            .iter()
            .chain(&c.points)
            .filter(|x| x.ratio.is_some())
            .max_by(|a, b| size(a).total_cmp(&size(b)))
        {
            out.push(format!("The largest change: {}", sentence(x)));
        }
    }
    out
}

/// The two runs, each on its own lines.
fn heading(c: &Comparison) -> Vec<String> {
    let side = |name: &str, r: &crate::analysis::compare::Run| {
        let started = if r.started.is_empty() {
            String::new()
        } else {
            format!(", started {}", r.started)
        };
        vec![
            format!("{name}: {}", r.path),
            format!(
                "       {}{started}, {} trial(s); evlab {}",
                r.experiment, r.trials, r.build
            ),
        ]
    };
    let mut out = side("run 1", &c.run1);
    out.extend(side("run 2", &c.run2));
    out
}

/// A finding's lines: the mark and rule with its arms, then each run's verdict and A/B.
fn finding_lines(f: &FindingChange) -> Vec<String> {
    let arms = f
        .arms
        .as_ref()
        .map_or(String::new(), |[a, b]| format!(": A = {a}; B = {b}"));
    let ab = |i: Option<[f64; 3]>| {
        i.map_or(String::new(), |[r, lo, hi]| {
            format!(", A/B {r:.2} [{lo:.2}–{hi:.2}]")
        })
    };
    let mark = if f.opposite() {
        "OPPOSITE"
    } else if f.changed() {
        "CHANGED"
    } else {
        "same"
    };
    if f.changed() {
        vec![
            format!("{mark:<8} {}{arms}", f.rule),
            format!("         run 1: {}{}", verdict(f.run1), ab(f.run1_interval)),
            format!("         run 2: {}{}", verdict(f.run2), ab(f.run2_interval)),
        ]
    } else {
        let both = match (f.run1_interval, f.run2_interval) {
            (Some([a, alo, ahi]), Some([b, blo, bhi])) => format!(
                "; A/B {a:.2} [{alo:.2}–{ahi:.2}] in run 1, {b:.2} [{blo:.2}–{bhi:.2}] in run 2"
            ),
            (x, y) => ab(x.or(y)),
        };
        vec![format!(
            "{mark:<8} {}{arms}; {} in both{both}",
            f.rule,
            verdict(f.run1)
        )]
    }
}

/// The compared quantities, one table per quantity, each row named by where it was measured.
fn tables(rows: &[Change]) -> Vec<(String, Table)> {
    let mut out: Vec<(String, Table)> = Vec::new();
    for c in rows {
        let i = match out.iter().position(|(q, _)| *q == c.quantity) {
            Some(i) => i,
            None => {
                let t = Table::new(["where", "run 1 (n)", "run 2 (n)", "run 2 / run 1 [90%]"]);
                out.push((c.quantity.clone(), t));
                out.len() - 1
            }
        };
        out[i].1.row([
            c.what.clone(),
            format!("{} ({})", value(c.run1_mean), c.run1_n),
            format!("{} ({})", value(c.run2_mean), c.run2_n),
            change(c),
        ]);
    }
    out
}

/// The terminal's text: the summary first, the runs and warnings, the findings (changed
/// first), then the capacities and points, one table per quantity.
pub fn text(c: &Comparison) -> String {
    let mut out = String::from("evlab compare\n");
    for l in heading(c) {
        out.push_str(&wrap(&l, WIDTH, 7));
    }
    out.push('\n');
    for (i, l) in summary(c).iter().enumerate() {
        let l = if i == 0 || c.single {
            l.clone()
        } else {
            format!("  - {l}")
        };
        out.push_str(&wrap(&l, WIDTH, if i == 0 || c.single { 2 } else { 4 }));
    }
    for w in &c.warnings {
        out.push_str(&wrap(&format!("warning: {w}"), WIDTH, 2));
    }
    out.push('\n');
    if !c.findings.is_empty() {
        out.push_str(&wrap(
            "Findings, each run judged by today's rules (A/B: each rule's ratio of its arms A \
             and B):",
            WIDTH,
            0,
        ));
        for f in &c.findings {
            for (i, l) in finding_lines(f).iter().enumerate() {
                out.push_str(&wrap(
                    &format!("  {l}"),
                    WIDTH,
                    if i == 0 { 11 } else { 17 },
                ));
            }
        }
        out.push('\n');
    }
    if !c.capacities.is_empty() {
        out.push_str("Capacities, each trial's capacity search:\n");
        for (q, t) in tables(&c.capacities) {
            out.push_str(&format!("{q}:\n"));
            out.push_str(&indent(&t.render()));
        }
        out.push('\n');
    }
    if c.single {
        let mut t = Table::new(["", "run 1", "run 2", "run 2 / run 1"]);
        for x in &c.points {
            t.row([
                x.quantity.clone(),
                value(x.run1_mean),
                value(x.run2_mean),
                change(x),
            ]);
        }
        out.push_str(&indent(&t.render()));
    } else if !c.points.is_empty() {
        out.push_str("Points, valid trials:\n");
        for m in &c.matching {
            out.push_str(&wrap(&format!("  {m}"), WIDTH, 4));
        }
        for (q, t) in tables(&c.points) {
            out.push_str(&format!("{q}:\n"));
            out.push_str(&indent(&t.render()));
        }
    }
    out
}

fn indent(t: &str) -> String {
    t.lines().map(|l| format!("  {l}\n")).collect()
}

fn md_table(rows: &[Change]) -> String {
    let mut out = String::new();
    for (q, _) in tables(rows) {
        out.push_str(&format!(
            "{q}:\n\n| where | run 1 (n) | run 2 (n) | run 2 / run 1 [90%] |\n|---|---:|---:|---|\n"
        ));
        for c in rows.iter().filter(|c| c.quantity == q) {
            out.push_str(&format!(
                "| {} | {} ({}) | {} ({}) | {} |\n",
                c.what,
                value(c.run1_mean),
                c.run1_n,
                value(c.run2_mean),
                c.run2_n,
                change(c)
            ));
        }
        out.push('\n');
    }
    out
}

/// The same as Markdown.
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::from("# evlab compare\n\n");
    let s = summary(c);
    for (i, l) in s.iter().enumerate() {
        if i == 0 || c.single {
            out.push_str(&format!("{l}\n\n"));
        } else {
            out.push_str(&format!("- {l}\n"));
        }
    }
    if s.len() > 1 && !c.single {
        out.push('\n');
    }
    for r in [&c.run1, &c.run2].iter().zip(["run 1", "run 2"]) {
        out.push_str(&format!(
            "- {}: `{}` ({}, {} trial(s); evlab {})\n",
            r.1, r.0.path, r.0.experiment, r.0.trials, r.0.build
        ));
    }
    for w in &c.warnings {
        out.push_str(&format!("- warning: {w}\n"));
    }
    out.push('\n');
    if !c.findings.is_empty() {
        out.push_str(
            "## Findings\n\nEach run judged by today's rules; changed verdicts first. A/B is each \
             rule's ratio of its arms A and B.\n\n",
        );
        for f in &c.findings {
            let lines = finding_lines(f);
            let lines: Vec<&str> = lines.iter().map(|l| l.trim()).collect();
            out.push_str(&format!("- {}\n", lines.join("; ")));
        }
        out.push('\n');
    }
    if !c.capacities.is_empty() {
        out.push_str("## Capacities\n\n");
        out.push_str(&md_table(&c.capacities));
    }
    if !c.points.is_empty() {
        out.push_str("## Points\n\n");
        for m in &c.matching {
            out.push_str(&format!("- {m}\n"));
        }
        if !c.matching.is_empty() {
            out.push('\n');
        }
        out.push_str(&md_table(&c.points));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_line_within_its_width() {
        let t = wrap(&"word ".repeat(60), 30, 4);
        assert!(t.lines().all(|l| l.chars().count() <= 30), "{t}");
        assert!(t.lines().skip(1).all(|l| l.starts_with("    word")), "{t}");
        assert_eq!(wrap("short", 30, 4), "short\n");
        assert_eq!(wrap("  same     x", 30, 4), "  same     x\n");
    }
}
