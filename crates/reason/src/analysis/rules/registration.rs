//! Whether each rule was written before the data that judges it: its registration, stated in
//! docs/findings.md and beside every verdict.
//!
//! - **pre-registered**: the claim, threshold and quantity in force were fixed before any run
//!   that judged them. Changes of method recorded in the rule's history count when they were
//!   not steered by the comparison's outcome (a broken measurement, a spread too wide to
//!   decide, the threshold unchanged).
//! - **post hoc**: the rule was written, or its claim set, after this lab's runs had shown the
//!   same comparison's result, which could have steered it.
//! - **extension**: no seed makes the claim on the quantity judged; the lab derived it (its
//!   controls among them).
//!
//! Only pre-registered verdicts count as tests of a seed's claim.

use super::Rule;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Registration {
    PreRegistered,
    PostHoc,
    Extension,
}

impl Registration {
    pub fn word(self) -> &'static str {
        match self {
            Registration::PreRegistered => "pre-registered",
            Registration::PostHoc => "post hoc",
            Registration::Extension => "extension",
        }
    }
}

/// The rules that are not pre-registered, and why.
const NOT_PRE_REGISTERED: &[(&str, Registration, &str)] = &[
    (
        "fig5-select-below-epoll-lt",
        Registration::PostHoc,
        "written after quick-knee-run1 to run4 had shown select at 0.37–0.54 of epoll-lt's capacity at 10,000 idle",
    ),
    (
        "fig5-poll-below-epoll-lt",
        Registration::PostHoc,
        "written after quick-knee-run1 to run4 had shown poll at 0.33–0.54 of epoll-lt's capacity at 10,000 idle",
    ),
    (
        "proxy-combined-vs-select",
        Registration::PostHoc,
        "written after the committed fig-proxy-cpu runs, which it judges, had been seen",
    ),
    (
        "proxy-hits-uselect-vs-select",
        Registration::PostHoc,
        "written after the README's table had shown uselect at 0.05-0.10× select's CPU per request with 10,000 idle connections, fig-proxy-conns among its runs",
    ),
    (
        "fig5-select-cpu",
        Registration::Extension,
        "the paper reports reply rates, not CPU per reply; the claim is derived from how select works and from the proxy paper's CPU figures",
    ),
    (
        "fig5-poll-cpu",
        Registration::Extension,
        "the paper reports reply rates, not CPU per reply; the claim is derived from how poll works",
    ),
    (
        "control-budget-not-equivalent",
        Registration::Extension,
        "the lab's negative control",
    ),
    (
        "control-positive",
        Registration::Extension,
        "the lab's positive control of a placebo run (its quantity was also changed after the first placebo run, see its history)",
    ),
    (
        "fdalloc-negative-control",
        Registration::Extension,
        "the lab's negative control of fdalloc-flat",
    ),
];

/// Rule `id`'s registration, and why when it is not pre-registered.
pub fn registration(id: &str) -> (Registration, Option<&'static str>) {
    NOT_PRE_REGISTERED
        .iter()
        .find(|(i, _, _)| *i == id)
        .map_or((Registration::PreRegistered, None), |&(_, r, why)| {
            (r, Some(why))
        })
}

/// The line docs/findings.md gives each rule.
pub(super) fn registration_line(r: &Rule) -> String {
    match registration(r.id) {
        (reg, Some(why)) => format!("- **Registration:** {}: {why}.\n", reg.word()),
        (reg, None) => format!("- **Registration:** {}\n", reg.word()),
    }
}

/// A rule's definition, hashed (FNV-1a, 64 bits): what a change to it must be recorded for.
/// Its history is left out; the record ties each hash to the history's length.
pub fn definition_hash(r: &Rule) -> u64 {
    let text = format!(
        "{}\u{1}{:?}\u{1}{}\u{1}{}\u{1}{}\u{1}{:?}\u{1}{:?}\u{1}{}\u{1}{}",
        r.id, r.family, r.source, r.seed, r.quantity, r.claim, r.at, r.derivation, r.trials
    );
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
