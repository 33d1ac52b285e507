//! The register, generated from [`RULES`](super::RULES): docs/findings.md (how a rule decides,
//! and the paper's family), docs/findings-proxy.md and docs/findings-scalability.md (the other
//! families), each family's rules with their claims and histories and the seed findings it does
//! not judge ([`UNJUDGED`](super::UNJUDGED)); and docs/findings-history.md, the history entries
//! several rules share, stated once. The register is split by family so that no file passes
//! the docs' size limit (crates/cli/tests/docs_maps.rs).

use super::*;

pub(super) fn family_name(f: Family) -> &'static str {
    match f {
        Family::Paper => "paper",
        Family::Proxy => "proxy",
        Family::Deadconn => "deadconn",
        Family::Herd => "herd",
        Family::None => "none",
        Family::Micro => "micro",
    }
}

/// The file of docs/ that states the rules of family `f`.
pub fn doc_file(f: Family) -> &'static str {
    match f {
        Family::Paper | Family::None => "findings.md",
        Family::Proxy => "findings-proxy.md",
        Family::Deadconn | Family::Herd | Family::Micro => "findings-scalability.md",
    }
}

/// The register's files, each with the families it states, in order.
pub(super) const FILES: &[(&str, &[Family])] = &[
    ("findings.md", &[Family::Paper]),
    ("findings-proxy.md", &[Family::Proxy]),
    (
        "findings-scalability.md",
        &[Family::Deadconn, Family::Herd, Family::Micro],
    ),
];

/// History entries that several rules share, each stated once in docs/findings.md under its
/// name (the anchor a rule's history links to). Every entry longer than [`SHORT_ENTRY`] used by
/// more than one rule must be named here: `markdown` panics, naming the entry, if one is not.
pub(super) const SHARED_HISTORY: &[(&str, &str)] = &[
    ("fig5-degrade-loosened", FIG5_LOOSENED),
    ("fig5-threshold-restored", FIG5_RESTORED),
    ("past-knee", PAST_KNEE),
    ("capacity-search", KNEE),
    ("past-knee-in-sessions", PAST_KNEE_SESSIONS),
    ("across-mechanisms-at-idle", ACROSS_AT_IDLE),
    ("table1-wall-time", TABLE1_WALL),
    ("proxy-figures-written", PROXY_FIGS_WRITTEN),
    ("herd-threads-only", THREADS_ONLY),
    ("herd-processes-written", PROCS_WRITTEN),
    ("herd-rounds", HERD_ROUNDS),
    ("malloc-rounds", MALLOC_ROUNDS),
    ("readahead-written", READAHEAD_WRITTEN),
    ("uselect-with-hits", USELECT_WITH_HITS),
    ("paper-rules-of-2026-12-06", super::additions::PAPER_WRITTEN),
    ("proxy-rules-of-2026-12-06", super::additions::PROXY_WRITTEN),
    (
        "herd-capacity-written",
        super::additions::HERD_CAPACITY_WRITTEN,
    ),
];

/// The rules whose history holds `entry`, in the order of [`RULES`].
pub(super) fn rules_with(entry: &str) -> Vec<&'static str> {
    RULES
        .iter()
        .filter(|r| r.history.contains(&entry))
        .map(|r| r.id)
        .collect()
}

/// Entries this short are stated in place, whoever shares them: a reference would be as long.
pub(super) const SHORT_ENTRY: usize = 100;

/// The name an entry is stated under, if several rules share it and it is not short.
pub(super) fn shared_name(entry: &str) -> Option<&'static str> {
    if entry.chars().count() <= SHORT_ENTRY || rules_with(entry).len() < 2 {
        return None;
    }
    let named = SHARED_HISTORY.iter().find(|(_, text)| *text == entry);
    Some(
        named
            .unwrap_or_else(|| {
                panic!("a history entry shared by several rules has no name in SHARED_HISTORY: {entry}")
            })
            .0,
    )
}

pub(super) const INTRO: &str = "# Findings: the pre-registered rules\n\n\
     <!-- Generated from crates/reason/src/analysis/rules.rs; a test keeps this file equal to \
     it. Edit the code, then: EVLAB_BLESS=1 cargo test -p evlab-reason docs_findings_md -->\n\n\
     Each finding a report prints is decided by one rule below, written from the source's own \
     claim and numbers before the run that judges it. A rule compares two arms, A and B, \
     trial by trial, as the ratio A/B of their means with a 90% Welch interval on the \
     logarithms (the uselect paper's level), over at least 3 valid trials per arm:\n\n\
     - **reproduced** when the whole interval satisfies the claim;\n\
     - **not reproduced** when the whole interval lies on the other side;\n\
     - **inconclusive** otherwise, or with fewer trials than the rule needs. A difference \
     inside the run-to-run spread is never a win.\n\n\
     A \"no difference\" claim (A/B within a margin) is the two one-sided tests: the whole \
     interval inside the margin. Each verdict's evidence states n, the means, the ratio, its \
     interval and the smallest difference the run could resolve (the interval's \
     half-width). A rule changed after data was seen keeps the old rule and the data that \
     prompted the change in its history; an entry that several rules share is stated once, \
     in [findings-history.md](findings-history.md), and each of those rules names it.\n\n\
     The controls: `evlab run NAME --placebo` gives both arms of every comparison the same \
     condition (no idle connections in the idle arm, one mechanism, one set of flags and one CPU budget for every series); every \
     rule that claims a difference must then come out \"not reproduced\" or \
     \"inconclusive\". A control passes only when decided its own way: the positive one \
     (fig5-select-cpu; control-positive in a placebo run) \"reproduced\", the negative one \
     (control-budget-not-equivalent) \"not reproduced\"; else it failed or was underpowered. \
     A paper run whose negative control did not pass reads its \"no difference\" verdicts \
     \"not judged\". Unit tests run each rule on synthetic data with no effect, and with the \
     effect exactly at its threshold (at most 5% \"reproduced\", within 1 point of Monte \
     Carlo error there), and each \"no difference\" rule on a gap of twice its margin. \
     [power.md](power.md) says what each can decide at its n.\n\n\
     The register is in three files, by source: this one (family `paper`, the μserver paper), \
     [findings-proxy.md](findings-proxy.md) (family `proxy`, the uselect and splice paper) and \
     [findings-scalability.md](findings-scalability.md) (families `deadconn`, `herd` and \
     `micro`: the LSE epoll page and the Linux Scalability Project). Each family ends with the \
     sources' findings it does not judge on this machine, and why.\n\n\
     **Registration**: **pre-registered** (claim, threshold and quantity fixed before any run \
     that judged them), **post hoc** (set after this lab's runs had shown the same \
     comparison) or **extension** (no seed claims it); reports mark the last two, which test no \
     seed. A test ties each definition's hash to its history's length \
     (`rules/definitions.tsv`, append-only).\n\n\
     Where a rule reads its quantity, in its Claim:\n\n\
     - **the capacity**: each trial's capacity from the run's capacity search (`[knee]`: the \
     highest rate the server keeps up with, bisected); in a run without one, replies/s at the \
     highest offered rate, with B past its knee there;\n\
     - **the highest rate**, **the lowest rate**: the highest or lowest offered rate both arms \
     were measured at; **past the knee**: at the highest rate, with B past its knee there.\n\n\
     Every claim is decided on a 90% interval over at least 3 valid trials per arm (repeats, \
     for the micro-benchmarks) unless it says otherwise.\n\n";

pub(super) const MICRO_INTRO: &str =
    "The micro-benchmarks (`evlab pipetest`, `evlab herd`, `evlab micro fdalloc`, \
     `evlab micro malloc`) judge their own reports (`evlab-micro`); each finding \
     names its rule. Their interval rules fit an exponent k to each repeat of the \
     whole sweep (the repeats interleaved: every point once per sweep) and decide \
     on the 90% t interval of the mean of k (or of a difference of two k, paired \
     by sweep) over at least 3 repeats, with the same three outcomes. The claim is \
     written as the ratio A/B = 10^k, the factor by which the quantity changes \
     over a tenfold of the swept count, so that it reads like the others. The herd, \
     malloc and read-ahead rules decide alike on a quantity taken once per round \
     (each rule's Quantity says which).\n\n";

/// A rule's claim and threshold, on one line. The interval and the trials are said once, above,
/// unless a rule needs more.
pub(super) fn claim_line(r: &Rule) -> String {
    let trials = if r.trials == MIN_TRIALS {
        String::new()
    } else {
        format!(", ≥ {} valid trials per arm", r.trials)
    };
    let claim = match r.claim {
        Some(c) if r.family == Family::Micro => format!("{}{trials}", c.words()),
        Some(c) => format!(
            "{} at {}{trials}",
            c.words(),
            match r.at {
                At::Highest => "the highest rate",
                At::PastKnee => "the highest rate, past the knee",
                At::Lowest => "the lowest rate",
                At::Knee => "the capacity",
            },
        ),
        None => "none: withdrawn, no finding is printed (see its history)".to_string(),
    };
    format!("- **Claim:** {claim}. **Threshold:** {}\n", r.derivation)
}

/// A rule's history: its own entries in full, the shared ones by name; on one line when it
/// has one entry of its own at most.
pub(super) fn history_lines(r: &Rule) -> String {
    if r.history.is_empty() {
        return "- **History:** unchanged since it was written.\n".to_string();
    }
    // Consecutive shared entries are named together, in order.
    let mut items: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut own = 0;
    for h in r.history {
        match shared_name(h) {
            Some(n) => names.push(format!("[`{n}`](findings-history.md#{n})")),
            None => {
                if !names.is_empty() {
                    items.push(shared_item(&names));
                    names.clear();
                }
                items.push(h.to_string());
                own += 1;
            }
        }
    }
    if !names.is_empty() {
        items.push(shared_item(&names));
    }
    if own <= 1 {
        return format!("- **History:** {}\n", items.join(" Then: "));
    }
    let mut out = String::from("- **History:**\n");
    for i in items {
        out.push_str(&format!("  - {i}\n"));
    }
    out
}

pub(super) fn shared_item(names: &[String]) -> String {
    format!("shared {}.", names.join(", "))
}

/// docs/findings-history.md: the entries several rules share, each once, with the rules that
/// share it (docs/findings.md names them where each rule's history has them).
pub fn shared_history_markdown() -> String {
    let mut out = String::from(
        "# Findings: history shared by several rules\n\n\
         <!-- Generated from crates/reason/src/analysis/rules.rs with docs/findings.md; a test \
         keeps this file equal to it. Edit the code, then: EVLAB_BLESS=1 cargo test -p \
         evlab-reason docs_findings_md -->\n\n\
         A rule of the register ([findings.md](findings.md) and the files it names) changed \
         after data was seen keeps the old rule \
         and the data that prompted the change in its history. An entry that several rules \
         share is stated once, here, and belongs to the history of every rule it lists, where \
         that rule's history names it.\n",
    );
    for (name, text) in SHARED_HISTORY {
        let rules: Vec<String> = rules_with(text)
            .iter()
            .map(|id| format!("[`{id}`]({}#{id})", doc_file(rule(id).family)))
            .collect();
        out.push_str(&format!("\n## `{name}`\n\n"));
        out.push_str(&format!("- **Rules:** {}\n", rules.join(", ")));
        out.push_str(&format!("- **Entry:** {text}\n"));
    }
    out
}

/// One family's section of the register: its rules, then the seed findings it does not judge.
fn family_markdown(fam: Family) -> String {
    let mut out = format!("## Family `{}`\n\n", family_name(fam));
    if fam == Family::Micro {
        out.push_str(MICRO_INTRO);
    }
    for r in RULES.iter().filter(|r| r.family == fam) {
        out.push_str(&format!("### `{}`\n", r.id));
        out.push_str(&format!("- **What it says** ({}): {}\n", r.source, r.seed));
        out.push_str(&format!("- **Quantity:** {}\n", r.quantity));
        out.push_str(&claim_line(r));
        out.push_str(&super::registration::registration_line(r));
        out.push_str(&history_lines(r));
        out.push('\n');
    }
    let unjudged: Vec<&super::Unjudged> =
        super::UNJUDGED.iter().filter(|u| u.family == fam).collect();
    if !unjudged.is_empty() {
        out.push_str(&format!(
            "### Not judged here (family `{}`)\n\n",
            family_name(fam)
        ));
        for u in unjudged {
            out.push_str(&format!(
                "- **{}:** {} **Why not:** {}\n",
                u.source, u.seed, u.why
            ));
        }
        out.push('\n');
    }
    out
}

/// The head of a register file other than docs/findings.md.
fn file_intro(fams: &[Family]) -> String {
    let names: Vec<String> = fams
        .iter()
        .map(|f| format!("`{}`", family_name(*f)))
        .collect();
    let names = match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    };
    format!(
        "# Findings: the pre-registered rules of {} {names}\n\n\
         <!-- Generated, as findings.md, from crates/reason/src/analysis/rules.rs ({}); a test \
         keeps this file equal to it. Edit the code, then: EVLAB_BLESS=1 cargo test -p \
         evlab-reason docs_findings_md -->\n\n\
         Part of the register of [findings.md](findings.md), which says how a rule decides, what \
         the controls are and what each registration means; the history entries several rules \
         share are in [findings-history.md](findings-history.md), and what each rule can decide \
         at its n in [power.md](power.md).\n\n",
        if fams.len() > 1 { "families" } else { "family" },
        fams.iter()
            .map(|f| family_name(*f))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// The register's files (docs/findings.md and those it names), from [`RULES`] and
/// [`UNJUDGED`](super::UNJUDGED).
pub fn register() -> Vec<(&'static str, String)> {
    FILES
        .iter()
        .map(|(file, fams)| {
            let mut out = if *file == "findings.md" {
                String::from(INTRO)
            } else {
                file_intro(fams)
            };
            for fam in fams.iter() {
                out.push_str(&family_markdown(*fam));
            }
            out.truncate(out.trim_end().len());
            out.push('\n');
            (*file, out)
        })
        .collect()
}

/// The whole register as one text (its files in order), for the tests that read it.
pub fn markdown() -> String {
    register().into_iter().map(|(_, text)| text).collect()
}
