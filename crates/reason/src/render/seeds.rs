//! The numbers the sources themselves give, where a report can set its measurements against
//! them: each as a ratio A/B of the rule that reads it (the findings chart draws it beside the
//! measured ratio) and, for the paper's figures, where it falls on them (the capacity figure,
//! and the reply rate against the offered rate: [`OnFigure`]). Each quotes where the source
//! says it; a rule whose source gives no number (or only one in other units, such as points of
//! CPU utilization) has none.

use crate::model::results::Summary;
use crate::render::svg::{Line, Ref};

/// A source's number for a rule's A/B: from `lo` to `hi` (equal for one number), and the words
/// a reader sees on hover; and where the source puts it on a figure of replies/s against the
/// offered rate, if it says (`figure`).
pub struct SeedRatio {
    pub rule: &'static str,
    pub lo: f64,
    pub hi: f64,
    pub words: &'static str,
    pub figure: &'static [OnFigure],
}

/// Where on the reply-rate figure (replies/s against the offered rate) a source's number falls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The peaks: A's highest reply rate is the ratio × B's highest, drawn at the offered rate
    /// where A's line peaks in this run.
    Peak,
    /// Past the peak, at one offered rate: A's reply rate there is the ratio × B's, drawn at the
    /// highest offered rate both were measured at (the source's rate was past its peak; our
    /// machine's rates are not the source's).
    Highest,
}

/// A source's number as the paper states it for one of its reply-rate figures: on a run of its
/// `workload` with A's arm at `idle` connections and on a series of `mechanism` (where the
/// rule judges several, the one the source gives the number for), a grey diamond at `ratio` ×
/// B's reply rate from this run's own data, placed as `place` says, labelled `label` on the
/// figure, with `words` (where the source says it) on hover.
pub struct OnFigure {
    pub workload: &'static str,
    pub idle: usize,
    pub mechanism: &'static str,
    pub ratio: f64,
    pub place: Place,
    pub label: &'static str,
    pub words: &'static str,
}

const fn one(rule: &'static str, x: f64, words: &'static str) -> SeedRatio {
    SeedRatio {
        rule,
        lo: x,
        hi: x,
        words,
        figure: &[],
    }
}

const fn range(rule: &'static str, lo: f64, hi: f64, words: &'static str) -> SeedRatio {
    SeedRatio {
        rule,
        lo,
        hi,
        words,
        figure: &[],
    }
}

impl SeedRatio {
    /// The same number, and where the source puts it on its reply-rate figure.
    const fn drawn(self, figure: &'static [OnFigure]) -> SeedRatio {
        SeedRatio { figure, ..self }
    }
}

/// Fig. 5's "up to 79%" (§5.1, comparing Fig. 5 with Fig. 3) for one of select and poll: the
/// paper gives it for the one-byte workload only (for Fig. 6 it says the mechanisms are
/// impacted "similarly", with no number).
const fn fig5_drop(mechanism: &'static str, words: &'static str) -> OnFigure {
    OnFigure {
        workload: "one-byte",
        idle: 10_000,
        mechanism,
        ratio: 0.21,
        place: Place::Peak,
        label: "paper: −79%",
        words,
    }
}

/// Every rule with a number in its source.
pub const SEED_RATIOS: &[SeedRatio] = &[
    one(
        "fig5-select-replies",
        0.21,
        "Gammo et al. 2004, §5.1: select degrades by up to 79% with 10,000 idle connections (0.21×)",
    )
    .drawn(&[fig5_drop(
        "select",
        "Gammo et al. 2004, §5.1 (Fig. 5 against Fig. 3, one-byte): with 10,000 idle connections select's performance degrades by up to 79%",
    )]),
    one(
        "fig5-poll-replies",
        0.21,
        "Gammo et al. 2004, §5.1: poll degrades by up to 79% with 10,000 idle connections (0.21×)",
    )
    .drawn(&[fig5_drop(
        "poll",
        "Gammo et al. 2004, §5.1 (Fig. 5 against Fig. 3, one-byte): with 10,000 idle connections poll's performance degrades by up to 79%",
    )]),
    range(
        "fig7-accept-limit",
        1.07,
        1.32,
        "Gammo et al. 2004, §5.2: an accept-limit of 10 gains 7% at the peak, 32% at 21,000 requests/s (epoll-ctlv)",
    )
    .drawn(&[
        OnFigure {
            workload: "one-byte",
            idle: 0,
            mechanism: "epoll-ctlv",
            ratio: 1.07,
            place: Place::Peak,
            label: "paper: +7%",
            words: "Gammo et al. 2004, §5.2 (Fig. 7, one-byte, no idle connections): the accept-limit of 10 improves epoll-ctlv's peak throughput by 7%",
        },
        OnFigure {
            workload: "one-byte",
            idle: 0,
            mechanism: "epoll-ctlv",
            ratio: 1.32,
            place: Place::Highest,
            label: "paper: +32%",
            words: "Gammo et al. 2004, §5.2 (Fig. 7, one-byte, no idle connections): the gap widens to 32% at 21,000 requests/s, a rate past the paper's saturation (its slides: epoll-ctlv answered 13,343 replies/s at 22,000)",
        },
    ]),
    one(
        "table1-epoll-et-epoll-ctl",
        11.06 / 16.34,
        "Gammo et al. 2004, Table 1: 11.06% against 16.34% of the run in epoll_ctl (0.68×)",
    ),
    one(
        "table1-epoll2-epoll-ctl",
        10.27 / 16.34,
        "Gammo et al. 2004, Table 1: 10.27% against 16.34% of the run in epoll_ctl (0.63×)",
    ),
    one(
        "table1-epoll-ctlv-calls",
        1_949_404.0 / 3_947_769.0,
        "Gammo et al. 2004, §5: 1,949,404 calls against 3,947,769 (0.49×)",
    ),
    one(
        "table1-epoll2-waits",
        12.56 / 7.15,
        "Gammo et al. 2004, Table 1: 12.56% against 7.15% of the run in epoll_wait (1.76×)",
    ),
    range(
        "proxy-uselect-vs-select",
        0.28,
        0.48,
        "Rosu & Rosu 2003, abstract: uselect lowers the CPU overhead by 52-72% against select (0.28-0.48×)",
    ),
    one(
        "proxy-uselect-vs-epoll",
        0.5,
        "Rosu & Rosu 2003, abstract: uselect halves the overhead against /dev/epoll (0.50×)",
    ),
    one(
        "proxy-splice-vs-copy",
        0.88,
        "Rosu & Rosu 2003, abstract: splice lowers the overhead by up to 12% with Polymix-4 (0.88×)",
    ),
    one(
        "proxy-splice-size-small",
        0.85,
        "Rosu & Rosu 2003, Fig. 7: 15% less CPU at 4 KB, non-cacheable (0.85×)",
    ),
    one(
        "proxy-splice-size-large",
        0.32,
        "Rosu & Rosu 2003, Fig. 7: 68% less CPU at 64 and 128 KB, non-cacheable (0.32×)",
    ),
    one(
        "proxy-keepcopy-small",
        0.9,
        "Rosu & Rosu 2003, Fig. 7: KeepCopy 10% less CPU at the small objects (0.90×)",
    ),
    one(
        "proxy-keepcopy-large",
        0.4,
        "Rosu & Rosu 2003, Fig. 7: KeepCopy 60% less CPU at the large objects (0.40×)",
    ),
    range(
        "proxy-combined-vs-select",
        0.22,
        0.42,
        "Rosu & Rosu 2003, abstract: uselect and splice together 58-78% less CPU than select and copy (0.22-0.42×)",
    ),
    one(
        "proxy-conns-uselect-flat",
        1.0,
        "Rosu & Rosu 2003, §5.1: 0% more load for uselect from 1,000 to 2,500 connections (1.00×)",
    ),
    one(
        "proxy-conns-select-grows",
        1.55,
        "Rosu & Rosu 2003, §5.1: 55% more load for select from 1,000 to 2,500 connections (1.55×)",
    ),
    one(
        "proxy-conns-epoll-grows",
        1.14,
        "Rosu & Rosu 2003, §5.1: 14% more load for /dev/epoll from 1,000 to 2,500 connections (1.14×)",
    ),
    range(
        "proxy-rt-uselect-vs-select",
        0.15,
        0.38,
        "Rosu & Rosu 2003, Fig. 6: mean response time 62-85% lower than select's (0.15-0.38×)",
    ),
    range(
        "proxy-rt-uselect-vs-epoll",
        0.42,
        0.71,
        "Rosu & Rosu 2003, Fig. 6: mean response time 29-58% lower than /dev/epoll's (0.42-0.71×)",
    ),
];

/// The source's number for `rule`, if it gives one.
pub fn seed_ratio(rule: &str) -> Option<&'static SeedRatio> {
    SEED_RATIOS.iter().find(|s| s.rule == rule)
}

/// The sources' numbers over a figure: for each finding in `fs` whose rule gives one and whose
/// quantity the figure draws (`reads` its id), the value arm A would have had if the source's
/// ratio held, from this run's arm B (the mean of B's trials, as the figure draws it), where
/// `place` puts A's arm on the figure (its x and its line); a grey diamond, or a band for a
/// range, with the source's words.
pub(crate) fn seed_refs(
    fs: &[crate::analysis::findings::Finding],
    reads: &dyn Fn(&str) -> bool,
    place: &dyn Fn(&str) -> Option<(f64, String)>,
) -> Vec<Ref> {
    let mut out = Vec::new();
    for f in fs.iter().filter(|f| reads(&f.rule)) {
        let (Some(seed), Some([a, _]), Some(([_, b], _))) =
            (seed_ratio(&f.rule), f.arms.as_ref(), f.trials.as_ref())
        else {
            continue;
        };
        let Some((x, series)) = place(a) else {
            continue;
        };
        if b.is_empty() {
            continue;
        }
        let mean = b.iter().sum::<f64>() / b.len() as f64;
        out.push(crate::render::svg::Ref {
            x,
            lo: mean * seed.lo,
            hi: mean * seed.hi,
            tip: format!("{a}, as the source would have it: {}", seed.words),
            series: Some(series),
            seed: Some(f.rule.clone()),
            label: None,
        });
    }
    out
}

/// The paper's numbers over its reply-rate figure of `idle` connections (replies/s against the
/// offered rate), where it states them for the run's workload ([`OnFigure`]): for each finding
/// of `fs` whose rule has one and whose arm A is drawn on this figure, a grey diamond on A's
/// series at the source's ratio × arm B's reply rate as `panels` draw B's series at B's idle
/// count (the mean of its valid trials at each rate; B may be on another panel, as "select, no
/// idle" is for "select, 10,000 idle"), labelled with the source's number.
pub(crate) fn rate_refs(
    s: &Summary,
    fs: &[crate::analysis::findings::Finding],
    idle: usize,
    panels: &[(usize, &[Line])],
) -> Vec<Ref> {
    let line = |series: &str, idle: usize| {
        let (_, ls) = panels.iter().find(|(i, _)| *i == idle)?;
        ls.iter().find(|l| l.label == series)
    };
    let workload = s.experiment.workload.label();
    let mechanism = |series: &str| {
        let x = s.series.iter().find(|x| x.label == series)?;
        Some(s.experiment.labelled(x).mechanism)
    };
    let mut out = Vec::new();
    for f in fs {
        let (Some(seed), Some([a, b])) = (seed_ratio(&f.rule), f.arms.as_ref()) else {
            continue;
        };
        let (Some((xa, sa)), Some((xb, sb))) = (arm_at_idle(a), arm_at_idle(b)) else {
            continue;
        };
        for o in seed.figure {
            let fits = o.workload == workload
                && xa == idle as f64
                && o.idle == idle
                && mechanism(&sa).as_deref() == Some(o.mechanism);
            if !fits {
                continue;
            }
            let (Some(la), Some(lb)) = (line(&sa, idle), line(&sb, xb as usize)) else {
                continue;
            };
            let Some((x, base)) = placed(la, lb, o.place) else {
                continue;
            };
            let y = o.ratio * base;
            let v = crate::render::svg::value_text;
            let (of, drawn) = match o.place {
                Place::Peak => (format!("the peak of {b}"), format!("where {a} peaks")),
                Place::Highest => (
                    format!(
                        "{b} at the highest offered rate, {}/s",
                        crate::model::text::thousands(x)
                    ),
                    format!("there on {a}'s line"),
                ),
            };
            out.push(Ref {
                x,
                lo: y,
                hi: y,
                series: Some(sa.clone()),
                tip: format!(
                    "{}: {}. On this run: {:.2} × {of} ({} replies/s) = {} replies/s, drawn {drawn}.",
                    o.label,
                    o.words,
                    o.ratio,
                    v(base),
                    v(y)
                ),
                seed: Some(f.rule.clone()),
                label: Some(o.label.to_string()),
            });
        }
    }
    out
}

/// Where `place` puts a number set against line `b` on line `a`'s figure: its x, and B's reply
/// rate it multiplies. Only the points with a valid trial count (a hollow point's mean is of
/// invalid trials).
fn placed(a: &Line, b: &Line, place: Place) -> Option<(f64, f64)> {
    let valid = |l: &Line| -> Vec<(f64, f64)> {
        l.points
            .iter()
            .enumerate()
            .filter(|(k, _)| !l.flagged.get(*k).copied().unwrap_or(false))
            .map(|(_, &p)| p)
            .collect()
    };
    let (pa, pb) = (valid(a), valid(b));
    // The first of equal values, in x order: the same point on every rendering.
    let peak = |v: &[(f64, f64)]| {
        v.iter()
            .copied()
            .reduce(|m, p| if p.1 > m.1 { p } else { m })
    };
    match place {
        Place::Peak => {
            let (xa, _) = peak(&pa)?;
            let (_, yb) = peak(&pb)?;
            Some((xa, yb))
        }
        Place::Highest => pb
            .iter()
            .copied()
            .rfind(|(x, _)| pa.iter().any(|p| p.0 == *x)),
    }
}

/// An arm's words, "select, 10,000 idle" or "select copy, no idle", as its series and idle
/// count.
pub(crate) fn arm_at_idle(arm: &str) -> Option<(f64, String)> {
    let (series, idle) = arm.rsplit_once(", ")?;
    let n = match idle.strip_suffix(" idle")? {
        "no" => 0.0,
        k => k.replace(',', "").parse().ok()?,
    };
    Some((n, series.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every number belongs to a rule of the registry, once, and lies on the side of the
    /// rule's threshold the source claims (a number the rule would not call reproduced would
    /// mean the rule or the number is wrong).
    #[test]
    fn every_number_belongs_to_a_rule_and_satisfies_its_claim() {
        use crate::analysis::stats::{Claim, Decision};
        for (i, s) in SEED_RATIOS.iter().enumerate() {
            let rule = crate::analysis::rules::rule(s.rule);
            assert!(
                SEED_RATIOS[..i].iter().all(|t| t.rule != s.rule),
                "{} twice",
                s.rule
            );
            assert!(s.lo <= s.hi && s.lo > 0.0, "{}", s.rule);
            let claim: Claim = rule.claim.unwrap();
            assert_eq!(claim.decide(s.lo, s.hi), Decision::Reproduced, "{}", s.rule);
        }
    }

    /// Each number drawn on a figure is one end of its rule's (the same source's number), and
    /// its label says that number as the source does: "−79%" for 0.21×, "+7%" for 1.07×.
    #[test]
    fn every_figure_number_is_its_rules_and_its_label_says_it() {
        let drawn: Vec<_> = SEED_RATIOS
            .iter()
            .filter(|s| !s.figure.is_empty())
            .collect();
        assert!(drawn.len() >= 3);
        for s in drawn {
            for o in s.figure {
                assert!(
                    o.ratio == s.lo || o.ratio == s.hi,
                    "{}: {}",
                    s.rule,
                    o.ratio
                );
                let pct = ((o.ratio - 1.0) * 100.0).round() as i64;
                let said = if pct < 0 {
                    format!("paper: −{}%", -pct)
                } else {
                    format!("paper: +{pct}%")
                };
                assert_eq!(o.label, said, "{}", s.rule);
                assert!(o.words.starts_with("Gammo et al. 2004, §5."), "{}", s.rule);
                assert!(o.words.contains(&format!("{}%", pct.abs())), "{}", s.rule);
            }
        }
    }
}
