//! The report's first screen, its answer: one sentence on what the run asked and found, the
//! findings chart (each finding's ratio with its interval on a log axis, the rule's region
//! shaded, the verdict by colour and by word, the source's own number beside it) and the
//! controls' status beside the chart; in report.md a table says what the chart draws. The
//! controls in words, for the findings in full, are here too.

use std::fmt::Write as _;

use crate::analysis::findings::{self, ControlStatus, Finding, Verdict};
use crate::analysis::rules::{Registration, RULES};
use crate::analysis::stats::Claim;
use crate::model::results::Summary;
use crate::model::sequential::level_words;
use crate::model::spec::Family;
use crate::render::block::Block;
use crate::render::page::{html_inline, markdown};
use crate::render::seeds::seed_ratio;
use crate::render::svg::{self, esc, Row, RowChart, RowMark};
use crate::render::verdicts::Entry;

/// A verdict's colour in the chart and the report (green, red, grey, amber).
pub(crate) fn verdict_colour(v: Verdict) -> &'static str {
    match v {
        Verdict::Reproduced => "#176b1d",
        Verdict::NotReproduced => "#b2182b",
        Verdict::Partly => "#b35806",
        Verdict::Inconclusive => "#666666",
        Verdict::NotJudged => "#8a5a00",
    }
}

/// Where a claim's ratio must lie, the whole interval, for "reproduced": (0, x], [x, ∞) or the
/// equivalence margin.
fn region(c: Claim) -> (f64, f64) {
    match c {
        Claim::AtMost(x) => (0.0, x),
        Claim::AtLeast(x) => (x, f64::INFINITY),
        Claim::Within(m) => (1.0 / (1.0 + m), 1.0 + m),
    }
}

/// "A = select, 10,000 idle; B = select, no idle".
fn arms_words(f: &Finding) -> String {
    f.arms
        .as_ref()
        .map_or(String::new(), |[a, b]| format!("A = {a}; B = {b}"))
}

/// Why a finding has no interval, in short (the last clause of its evidence).
pub(crate) fn why_none(evidence: &str) -> String {
    let e = evidence.trim_start_matches("not judged: ");
    let last = e.rsplit("; ").next().unwrap_or(e);
    format!("no interval: {}", last.trim_end_matches('.'))
}

/// The authors of the sources the findings come from: "Gammo et al. 2004 and Rosu & Rosu 2003".
fn sources(fs: &[Finding]) -> String {
    let mut v: Vec<String> = Vec::new();
    for f in fs.iter().filter(|f| !f.rule.starts_with("control-")) {
        let who = f
            .source
            .split([',', '('])
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        if !who.is_empty() && !v.contains(&who) {
            v.push(who);
        }
    }
    match v.len() {
        0 => "its sources".into(),
        1 => v.remove(0),
        _ => {
            let last = v.pop().unwrap_or_default();
            format!("{} and {last}", v.join(", "))
        }
    }
}

/// The one sentence the report opens with: what the run asked, and what it found.
pub(super) fn answer_sentence(s: &Summary, fs: &[Finding]) -> String {
    let name = &s.experiment.name;
    if fs.is_empty() {
        return format!(
            "**In short:** this run of {name} measured what its figures and tables show; no finding \
             of the sources is judged on it."
        );
    }
    let n = |v: Verdict| fs.iter().filter(|f| f.verdict == v).count();
    if s.experiment.placebo {
        let diff: Vec<&Finding> = fs
            .iter()
            .filter(|f| findings::claims_a_difference(&f.rule))
            .collect();
        let wrong = diff
            .iter()
            .filter(|f| f.verdict == Verdict::Reproduced)
            .count();
        return format!(
            "**In short:** this placebo run of {name} asked whether the rules find a difference \
             where there is none (both arms of every comparison the same), and {} of its {} rules \
             that claim a difference came out reproduced: the placebo control {}.",
            if wrong == 0 {
                "none".to_string()
            } else {
                wrong.to_string()
            },
            diff.len(),
            if wrong == 0 { "passed" } else { "failed" }
        );
    }
    let mut found = format!(
        "{} reproduced, {} not reproduced",
        n(Verdict::Reproduced),
        n(Verdict::NotReproduced)
    );
    if n(Verdict::Partly) > 0 {
        let _ = write!(found, ", {} partly", n(Verdict::Partly));
    }
    let _ = write!(found, ", {} inconclusive", n(Verdict::Inconclusive));
    if n(Verdict::NotJudged) > 0 {
        let why = match findings::negative_control_status(fs) {
            ControlStatus::Failed => "the negative control failed",
            ControlStatus::Underpowered => "the negative control was not decided",
            _ => "no negative control showed they could see a difference",
        };
        let _ = write!(found, " and {} not judged ({why})", n(Verdict::NotJudged));
    }
    let caveat = match findings::positive_control_status(false, fs) {
        ControlStatus::Failed => {
            "; the positive control failed, so the other verdicts say little".to_string()
        }
        ControlStatus::Underpowered => {
            "; the positive control was not decided, so its inconclusive verdicts say little"
                .to_string()
        }
        _ => String::new(),
    };
    format!(
        "**In short:** this run of {name} asked whether {} finding{} of {} hold on this machine, \
         and found {found}{caveat}.",
        fs.len(),
        if fs.len() == 1 { "" } else { "s" },
        sources(fs)
    )
}

/// Which controls the run passed (docs/findings.md). A control passes only when it is decided
/// its own way: a placebo run must reproduce no rule that claims a difference; the positive
/// control (select with idle connections against none) must come out reproduced; the
/// negative control (a pair of known difference) must come out not equivalent.
pub(super) fn controls(s: &Summary, fs: &[Finding]) -> String {
    let negative = match findings::negative_control_status(fs) {
        ControlStatus::Failed => " Negative control: FAILED: the pair on budgets that differ \
             by twice the margin was judged equivalent, so this run's \"no difference\" verdicts \
             are not judged."
            .to_string(),
        ControlStatus::Underpowered => " Negative control: underpowered: the pair on budgets \
             that differ by twice the margin was not decided either way, so this run could not \
             tell a known difference apart and its \"no difference\" verdicts are not judged."
            .to_string(),
        ControlStatus::Passed => " Negative control: passed: the pair on budgets that differ \
             by twice the margin was decided not equivalent."
            .to_string(),
        ControlStatus::Absent => no_negative_control(s, fs),
    };
    positive_and_placebo(s, fs) + &negative
}

/// What a paper run without the negative control says of its "no difference" verdicts: that
/// none of them has a pair of known difference beside it (empty when it judged none).
fn no_negative_control(s: &Summary, fs: &[Finding]) -> String {
    let mut equivalence: Vec<&str> = fs
        .iter()
        .filter(|f| f.verdict == Verdict::NotJudged)
        .map(|f| f.rule.as_str())
        .collect();
    equivalence.dedup();
    if s.experiment.family() != Family::Paper || equivalence.is_empty() {
        return String::new();
    }
    format!(
        " Negative control: no negative control in this run (no series on a budget that differs \
         by twice the margin, as quick, fig1-one-byte, fig3- and fig4-…-variants, fig7-accept-limit \
         and table1-syscalls carry), so nothing \
         shows that its \"no difference\" verdicts ({}) could have seen a difference of twice \
         their margin: they are not judged.",
        equivalence.join(", ")
    )
}

/// The placebo control (a placebo run) or the positive control (any other run).
fn positive_and_placebo(s: &Summary, fs: &[Finding]) -> String {
    let name = &s.experiment.name;
    if s.experiment.placebo {
        let diff = fs
            .iter()
            .filter(|f| findings::claims_a_difference(&f.rule))
            .count();
        let positive = match findings::positive_control_status(true, fs) {
            ControlStatus::Passed => " Its positive control (select with idle connections \
                 really held) was reproduced: the run could still see a real effect."
                .to_string(),
            ControlStatus::Absent => {
                " It had no positive control (no idle connections, or no select).".into()
            }
            st => format!(
                " Its positive control (select with idle connections really held) {}: the run \
                 could not show it sees a real effect, so its null results say little.",
                if st == ControlStatus::Failed {
                    "FAILED (not reproduced)"
                } else {
                    "was underpowered (inconclusive)"
                }
            ),
        };
        return if findings::placebo_status(true, fs) == ControlStatus::Passed {
            format!(
                "Placebo control: passed. This run gave both arms of every comparison the same \
                 condition, and none of its {diff} rules that claim a difference came out \
                 reproduced.{positive}"
            )
        } else {
            let wrong: Vec<&str> = fs
                .iter()
                .filter(|f| {
                    findings::claims_a_difference(&f.rule) && f.verdict == Verdict::Reproduced
                })
                .map(|f| f.rule.as_str())
                .collect();
            format!(
                "Placebo control: FAILED. This run gave both arms of every comparison the same \
                 condition, yet {} came out reproduced: those rules can find a difference where \
                 there is none.{positive}",
                wrong.join(", ")
            )
        };
    }
    match findings::positive_control_status(false, fs) {
        ControlStatus::Passed => format!(
            "Positive control: passed (fig5-select-cpu, select's CPU per reply with idle \
             connections against none, was reproduced). The placebo control is `evlab run {name} --placebo`."
        ),
        ControlStatus::Failed => "Positive control: FAILED. The run decided fig5-select-cpu \
             (select's CPU per reply with idle connections against none), the steadiest measure \
             of the paper's largest effect, the other way: not reproduced. A run that cannot see \
             that effect says little with its other verdicts."
            .into(),
        ControlStatus::Underpowered => "Positive control: underpowered. The run could not decide \
             fig5-select-cpu (select's CPU per reply with idle connections against none), the \
             steadiest measure of the paper's largest effect, so its other inconclusive verdicts \
             say little."
            .into(),
        // The positive control is the paper family's; other families have none yet.
        ControlStatus::Absent if s.experiment.family() != Family::Paper => {
            format!("Controls: the placebo control is `evlab run {name} --placebo`.")
        }
        ControlStatus::Absent => format!(
            "Controls: this run has no positive control (select with and without idle \
             connections); the placebo control is `evlab run {name} --placebo`."
        ),
    }
}

/// One row of the findings chart and of its table: a finding's findings.json entry, and how
/// the row says it. A sweep's findings and a micro-benchmark's are drawn by the same
/// [`findings_chart`] from these.
pub(crate) struct ChartRow {
    pub entry: Entry,
    pub colour: &'static str,
    /// Under the label: the arms ("A = …; B = …"), or what the quantity is.
    pub sub: String,
    /// The table's second column: "A / B", or what the quantity is.
    pub pair: String,
    /// The quantity's name in the row's words: "A/B", "10^k per tenfold of pipes".
    pub symbol: String,
    pub claim: Option<Claim>,
    /// The claim in the table's words ("A/B ≤ 0.80").
    pub claim_words: String,
    /// The source's own number or range, with its words.
    pub refs: Vec<(f64, f64, String)>,
    /// Why the row has no interval.
    pub empty: String,
}

/// What the chart and its table say around their rows.
pub(crate) struct ChartFrame {
    pub title: String,
    pub x_label: String,
    /// "90%", or a sequential run's level.
    pub level: String,
    pub guide: Option<(f64, String)>,
    pub notes: Vec<String>,
    /// The table's second and third columns' heads.
    pub heads: [String; 2],
    /// What each row's number is, in the words before the table ("A/B").
    pub value: String,
}

/// A verdict word as findings.json gives it, to its colour: a micro-benchmark's "not measured"
/// is grey, as inconclusive.
pub(crate) fn word_colour(word: &str) -> &'static str {
    [
        Verdict::Reproduced,
        Verdict::NotReproduced,
        Verdict::Partly,
        Verdict::Inconclusive,
        Verdict::NotJudged,
    ]
    .into_iter()
    .find(|v| v.word() == word)
    .map_or(verdict_colour(Verdict::Inconclusive), verdict_colour)
}

/// A row's registration as the chart and the table mark it: nothing for a pre-registered
/// rule.
fn row_tag(e: &Entry) -> &'static str {
    match e.registration {
        Registration::PreRegistered => "",
        r => r.word(),
    }
}

/// The findings chart: a row per finding, in the report's order, on one log axis. Each row
/// carries its finding's id, verdict, ratio, interval, n and registration as `data-*`
/// attributes, from the same entry findings.json writes.
pub(crate) fn findings_chart(frame: &ChartFrame, rows: &[ChartRow]) -> String {
    let level = &frame.level;
    let mut out = Vec::new();
    for row in rows {
        let e = &row.entry;
        let mut attrs = vec![
            ("data-finding".to_string(), e.id.clone()),
            ("data-verdict".to_string(), e.verdict.to_string()),
        ];
        let interval = match (e.ratio, e.lo, e.hi) {
            (Some(r), Some(lo), Some(hi)) => Some([r, lo, hi]),
            _ => None,
        };
        if let Some([r, lo, hi]) = interval {
            attrs.push(("data-ratio".into(), r.to_string()));
            attrs.push(("data-lo".into(), lo.to_string()));
            attrs.push(("data-hi".into(), hi.to_string()));
        }
        if let Some(n) = e.n {
            attrs.push(("data-n".into(), n.to_string()));
        }
        attrs.push((
            "data-registration".into(),
            e.registration.word().replace(' ', "-"),
        ));
        let sym = &row.symbol;
        let numbers = interval.map_or(String::new(), |[r, lo, hi]| {
            format!(" {sym} = {r:.2} [{level}: {lo:.2}–{hi:.2}].")
        });
        out.push(Row {
            label: e.id.clone(),
            sub: row.sub.clone(),
            tag: row_tag(e).into(),
            attrs,
            region: row.claim.map(region),
            marks: interval
                .map(|[r, lo, hi]| RowMark {
                    category: None,
                    value: r,
                    interval: Some((lo, hi)),
                    colour: row.colour,
                    hollow: false,
                    tip: format!("{}: {sym} = {r:.2} [{level}: {lo:.2}–{hi:.2}]", e.id),
                })
                .into_iter()
                .collect(),
            refs: row.refs.clone(),
            word: Some((e.verdict.to_string(), row.colour)),
            empty: row.empty.clone(),
            tip: format!(
                "{}: {}{} {}{numbers}",
                e.id,
                e.verdict,
                match row_tag(e) {
                    "" => String::new(),
                    t => format!(" ({t})"),
                },
                e.claim
            ),
        });
    }
    svg::row_chart(&RowChart {
        title: frame.title.clone(),
        x_label: frame.x_label.clone(),
        log: true,
        categories: vec![],
        rows: out,
        guide: frame.guide.clone(),
        notes: frame.notes.clone(),
        stacked: true,
        range: None,
    })
}

/// A sweep's findings as the chart's rows: A/B of each, with the source's own number.
fn paper_rows(fs: &[Finding]) -> Vec<ChartRow> {
    fs.iter()
        .map(|f| ChartRow {
            entry: Entry::of(f),
            colour: verdict_colour(f.verdict),
            sub: arms_words(f),
            pair: f
                .arms
                .as_ref()
                .map_or(String::new(), |[a, b]| format!("{a} / {b}")),
            symbol: "A/B".into(),
            claim: RULES.iter().find(|r| r.id == f.rule).and_then(|r| r.claim),
            claim_words: RULES
                .iter()
                .find(|r| r.id == f.rule)
                .and_then(|r| r.claim)
                .map_or(String::new(), Claim::words),
            refs: seed_ratio(&f.rule)
                .map(|x| (x.lo, x.hi, x.words.to_string()))
                .into_iter()
                .collect(),
            empty: why_none(&f.evidence),
        })
        .collect()
}

/// A sweep's chart frame: one log axis of A/B.
fn paper_frame(s: &Summary) -> ChartFrame {
    let level = level_words(findings::verdict_level(s));
    ChartFrame {
        title: format!("The findings: A/B, {level} interval"),
        x_label: "A/B (A's mean ÷ B's)".into(),
        guide: Some((1.0, "dashed: 1 = no difference".into())),
        notes: vec![
            format!("Green: where the whole {level} interval must lie for the claim."),
            format!("Colour and word: the verdict; bars: the {level} interval."),
            "Grey ◇ or band: the source's own number.".into(),
            "Post hoc, extension: not a test of a seed's claim.".into(),
        ],
        heads: ["A / B".into(), format!("A/B [{level}]")],
        value: "A/B".into(),
        level,
    }
}

/// A control's status in one word, as the controls' list says it.
pub(crate) fn status_word(c: ControlStatus) -> &'static str {
    match c {
        ControlStatus::Passed => "passed",
        ControlStatus::Failed => "failed",
        ControlStatus::Underpowered => "not decided",
        ControlStatus::Absent => "not in this run",
    }
}

/// The controls, each named, with its status in one word (passed, failed, not decided) and
/// what it is; a control the run has not is said so, with how to run it.
fn control_items(s: &Summary, fs: &[Finding]) -> Vec<(String, &'static str, String)> {
    let name = &s.experiment.name;
    let word = status_word;
    let placebo = s.experiment.placebo;
    let mut out = Vec::new();
    let paper = s.experiment.family() == Family::Paper;
    let pos = findings::positive_control_status(placebo, fs);
    if paper || pos != ControlStatus::Absent {
        out.push((
            "Positive control".into(),
            word(pos),
            "select's CPU per reply with 10,000 idle connections against none: a known effect \
             the run must find"
                .into(),
        ));
    }
    let neg = findings::negative_control_status(fs);
    if paper || neg != ControlStatus::Absent {
        out.push((
            "Negative control".into(),
            word(neg),
            "one mechanism on two CPU budgets 1.2× apart: a known difference the \"no \
             difference\" rules must not call equivalent"
                .into(),
        ));
    }
    let pl = findings::placebo_status(placebo, fs);
    out.push((
        "Placebo control".into(),
        word(pl),
        if placebo {
            "both arms of every comparison the same: no rule that claims a difference may come \
             out reproduced"
                .into()
        } else {
            format!(
                "both arms the same, so no difference may be found: `evlab run {name} --placebo`"
            )
        },
    ));
    out
}

/// The controls' status as HTML: `id="controls"`, each named with its status.
pub(crate) fn controls_html(items: &[(String, &'static str, String)]) -> String {
    let mut o = String::from("<aside id=\"controls\"><h3>Controls</h3><ul>");
    for (name, status, what) in items {
        let class = status.replace(' ', "-");
        let _ = write!(
            o,
            "<li><strong>{}</strong>: <span class=\"control-{class}\">{}</span><br><small>{}</small></li>",
            esc(name),
            esc(status),
            html_inline(what)
        );
    }
    o.push_str("</ul></aside>");
    o
}

/// What the chart draws, as a table (report.md).
fn findings_table(frame: &ChartFrame, rows: &[ChartRow]) -> Block {
    let rows = rows
        .iter()
        .map(|row| {
            let e = &row.entry;
            vec![
                match row_tag(e) {
                    "" => format!("`{}`", e.id),
                    t => format!("`{}` ({t})", e.id),
                },
                row.pair.clone(),
                match (e.ratio, e.lo, e.hi) {
                    (Some(r), Some(lo), Some(hi)) => format!("{r:.2} [{lo:.2}–{hi:.2}]"),
                    _ => row.empty.clone(),
                },
                row.claim_words.clone(),
                match row.refs.first() {
                    None => String::new(),
                    Some((lo, hi, _)) if lo == hi => format!("{lo:.2}"),
                    Some((lo, hi, _)) => format!("{lo:.2}–{hi:.2}"),
                },
                format!("**{}**", e.verdict),
            ]
        })
        .collect();
    Block::Table(
        vec![
            "finding".into(),
            frame.heads[0].clone(),
            frame.heads[1].clone(),
            "reproduced when".into(),
            "the source".into(),
            "verdict".into(),
        ],
        rows,
    )
}

/// The chart with the controls beside it (HTML), and the chart's table and the controls'
/// list (Markdown): the first screen after the sentence, of a sweep and a micro-benchmark
/// alike. No controls: no list and no `id="controls"`.
pub(crate) fn chart_and_controls(
    frame: &ChartFrame,
    rows: &[ChartRow],
    items: &[(String, &'static str, String)],
) -> (String, String) {
    let md_controls: String = items
        .iter()
        .map(|(n, st, what)| format!("- {n}: {st} ({what})\n"))
        .collect();
    let table = markdown(&[findings_table(frame, rows)]);
    let html = format!(
        "<div class=\"answer\"><figure id=\"fig-findings\">{}</figure>{}</div>\n",
        findings_chart(frame, rows),
        if items.is_empty() {
            String::new()
        } else {
            controls_html(items)
        }
    );
    let controls = if items.is_empty() {
        String::new()
    } else {
        format!("Controls:\n\n{md_controls}\n")
    };
    let md = format!(
        "The findings, one row each ({} with its interval; the chart in report.html):\n\n\
         {table}{controls}",
        frame.value
    );
    (html, md)
}

/// The first screen: the sentence, then the chart with the controls beside it (HTML), or the
/// chart's table and the controls' list (Markdown).
pub(super) fn answer(s: &Summary, fs: &[Finding]) -> Vec<Block> {
    let mut d = vec![Block::P(answer_sentence(s, fs))];
    if fs.is_empty() {
        return d;
    }
    let (html, md) = chart_and_controls(&paper_frame(s), &paper_rows(fs), &control_items(s, fs));
    d.push(Block::Raw { html, md });
    d
}
