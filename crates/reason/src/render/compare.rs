//! `evlab compare`'s output: the terminal's text and Markdown (the JSON is the comparison
//! itself, `analysis::compare::Comparison`).

use crate::render::table::Table;

use crate::analysis::compare::{Change, Comparison, FindingChange};
use crate::analysis::findings::Verdict;
use crate::model::text::thousands;

fn verdict(v: Option<Verdict>) -> &'static str {
    v.map_or("not in the run", Verdict::word)
}

fn interval(i: Option<[f64; 3]>) -> String {
    i.map_or(String::new(), |[r, lo, hi]| {
        format!(" (A/B {r:.2} [{lo:.2}–{hi:.2}])")
    })
}

fn value(x: f64) -> String {
    if x.abs() >= 100.0 {
        thousands(x)
    } else {
        format!("{x:.2}")
    }
}

/// "0.87 [0.70–1.08] ~" (benchstat's "~": no significant change), or "n = 1" without one.
fn change(c: &Change) -> String {
    match c.ratio {
        Some([r, lo, hi]) => format!(
            "{r:.2} [{lo:.2}–{hi:.2}]{}",
            if c.significant { " *" } else { " ~" }
        ),
        None if c.a_n < 2 || c.b_n < 2 => {
            if c.a_mean > 0.0 {
                format!("{:.2} (no interval)", c.b_mean / c.a_mean)
            } else {
                "– (no interval)".into()
            }
        }
        None => "–".into(),
    }
}

fn finding_line(f: &FindingChange) -> String {
    let arms = f
        .arms
        .as_ref()
        .map_or(String::new(), |[a, b]| format!(" ({a} against {b})"));
    let mark = if f.opposite() {
        "OPPOSITE"
    } else if f.changed() {
        "CHANGED"
    } else {
        "same"
    };
    if f.changed() {
        format!(
            "{mark:<8} {}{arms}: {}{} → {}{}",
            f.rule,
            verdict(f.a),
            interval(f.a_interval),
            verdict(f.b),
            interval(f.b_interval)
        )
    } else {
        let both = match (f.a_interval, f.b_interval) {
            (Some([a, alo, ahi]), Some([b, blo, bhi])) => {
                format!(" (A/B {a:.2} [{alo:.2}–{ahi:.2}] → {b:.2} [{blo:.2}–{bhi:.2}])")
            }
            _ => interval(f.a_interval.or(f.b_interval)),
        };
        format!("{mark:<8} {}{arms}: {} in both{both}", f.rule, verdict(f.a))
    }
}

fn changes_table(rows: &[Change]) -> Table {
    let mut t = Table::new(["where", "quantity", "A (n)", "B (n)", "B/A [90%]"]);
    for c in rows {
        t.row([
            c.what.clone(),
            c.quantity.clone(),
            format!("{} ({})", value(c.a_mean), c.a_n),
            format!("{} ({})", value(c.b_mean), c.b_n),
            change(c),
        ]);
    }
    t
}

fn heading(c: &Comparison) -> Vec<String> {
    let side = |name: &str, r: &crate::analysis::compare::Run| {
        format!(
            "{name} = {} ({}{}, {} trial(s); evlab {})",
            r.path,
            r.experiment,
            if r.started.is_empty() {
                String::new()
            } else {
                format!(", started {}", r.started)
            },
            r.trials,
            r.build
        )
    };
    let mut out = vec![side("A", &c.a), side("B", &c.b)];
    out.extend(c.warnings.iter().map(|w| format!("warning: {w}")));
    out
}

fn summary_line(c: &Comparison) -> String {
    let changed = c.verdicts_changed();
    let opposite = c.findings.iter().filter(|f| f.opposite()).count();
    let sig = c
        .capacities
        .iter()
        .chain(&c.points)
        .filter(|x| x.significant)
        .count();
    format!(
        "{} of {} findings changed verdict ({} to the opposite); {} of {} quantities changed \
         significantly (90% interval of B/A excludes 1: *)",
        changed,
        c.findings.len(),
        opposite,
        sig,
        c.capacities.len() + c.points.len()
    )
}

/// The terminal's text: the builds and warnings, the findings (changed first), capacities and
/// points, and one line of counts at the end.
pub fn text(c: &Comparison) -> String {
    let mut out = heading(c).join("\n");
    out.push_str("\n\n");
    if !c.findings.is_empty() {
        out.push_str("Findings, each run judged by today's rules:\n");
        for f in &c.findings {
            out.push_str("  ");
            out.push_str(&finding_line(f));
            out.push('\n');
        }
        out.push('\n');
    }
    if !c.capacities.is_empty() {
        out.push_str("Capacities (the capacity search's, per trial):\n");
        out.push_str(&changes_table(&c.capacities).render());
        out.push('\n');
    }
    if !c.points.is_empty() {
        out.push_str("Points (valid trials):\n");
        out.push_str(&changes_table(&c.points).render());
        out.push('\n');
    }
    out.push_str(&summary_line(c));
    out.push('\n');
    out
}

fn md_table(rows: &[Change]) -> String {
    let mut out =
        String::from("| where | quantity | A (n) | B (n) | B/A [90%] |\n|---|---|---|---|---|\n");
    for c in rows {
        out.push_str(&format!(
            "| {} | {} | {} ({}) | {} ({}) | {} |\n",
            c.what,
            c.quantity,
            value(c.a_mean),
            c.a_n,
            value(c.b_mean),
            c.b_n,
            change(c)
        ));
    }
    out
}

/// The same as Markdown.
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::from("# evlab compare\n\n");
    out.push_str(&format!("{}\n\n", summary_line(c)));
    for l in heading(c) {
        out.push_str(&format!("- {l}\n"));
    }
    out.push('\n');
    if !c.findings.is_empty() {
        out.push_str(
            "## Findings\n\nEach run judged by today's rules; changed verdicts first.\n\n",
        );
        for f in &c.findings {
            out.push_str(&format!("- {}\n", finding_line(f)));
        }
        out.push('\n');
    }
    if !c.capacities.is_empty() {
        out.push_str("## Capacities\n\n");
        out.push_str(&md_table(&c.capacities));
        out.push('\n');
    }
    if !c.points.is_empty() {
        out.push_str("## Points\n\n");
        out.push_str(&md_table(&c.points));
    }
    out
}
