//! The numbers the sources themselves give, where a report can set its measurements against
//! them: each as a ratio A/B of the rule that reads it (the findings chart draws it beside the
//! measured ratio) and, for the paper's figures, where it falls on them. Each quotes where the
//! source says it; a rule whose source gives no number (or only one in other units, such as
//! points of CPU utilization) has none.

/// A source's number for a rule's A/B: from `lo` to `hi` (equal for one number), and the words
/// a reader sees on hover.
pub struct SeedRatio {
    pub rule: &'static str,
    pub lo: f64,
    pub hi: f64,
    pub words: &'static str,
}

const fn one(rule: &'static str, x: f64, words: &'static str) -> SeedRatio {
    SeedRatio {
        rule,
        lo: x,
        hi: x,
        words,
    }
}

const fn range(rule: &'static str, lo: f64, hi: f64, words: &'static str) -> SeedRatio {
    SeedRatio {
        rule,
        lo,
        hi,
        words,
    }
}

/// Every rule with a number in its source.
pub const SEED_RATIOS: &[SeedRatio] = &[
    one(
        "fig5-select-replies",
        0.21,
        "Gammo et al. 2004, §5.1: select degrades by up to 79% with 10,000 idle connections (0.21×)",
    ),
    one(
        "fig5-poll-replies",
        0.21,
        "Gammo et al. 2004, §5.1: poll degrades by up to 79% with 10,000 idle connections (0.21×)",
    ),
    range(
        "fig7-accept-limit",
        1.07,
        1.32,
        "Gammo et al. 2004, §5.2: an accept-limit of 10 gains 7% at the peak, 32% at 21,000 requests/s (epoll-ctlv)",
    ),
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
) -> Vec<crate::render::svg::Ref> {
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
        });
    }
    out
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
}
