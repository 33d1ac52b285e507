use super::*;

#[test]
fn ids_are_unique_and_interval_rules_need_three_trials() {
    let mut ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), RULES.len());
    for r in RULES.iter().filter(|r| r.claim.is_some()) {
        assert!(r.trials >= MIN_TRIALS, "{}", r.id);
    }
}

/// The micro-benchmarks' judging (`analysis::micro`) names its rules and holds its thresholds
/// apart from this registry: the two must agree.
#[test]
fn micro_rules_match_what_the_benchmarks_decide() {
    let micro: Vec<&str> = RULES
        .iter()
        .filter(|r| r.family == Family::Micro)
        .map(|r| r.id)
        .collect();
    let mut named: Vec<&str> = crate::analysis::micro::pipetest::RULE_IDS
        .iter()
        .chain(&crate::analysis::micro::fdalloc::RULE_IDS)
        .chain(&crate::analysis::micro::herd::RULE_IDS)
        .chain(&crate::analysis::micro::malloc::RULE_IDS)
        .chain(&crate::analysis::micro::readahead::RULE_IDS)
        .copied()
        .collect();
    assert_eq!(
        micro, named,
        "the registry's micro rules, in the benchmarks' order"
    );
    named.sort_unstable();
    let per_decade = |k: f64| 10f64.powf(k);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    use crate::analysis::micro::{fdalloc, pipetest};
    assert!(close(PIPES_HALFWAY, per_decade(pipetest::K_HALFWAY)));
    assert!(close(PIPES_BETTER, per_decade(pipetest::K_BETTER)));
    assert!(close(FD_HALFWAY, per_decade(fdalloc::K_LINEAR_HALF)));
    let claim = |id| rule(id).claim;
    assert_eq!(
        claim("pipetest-poll-falls"),
        Some(Claim::AtMost(PIPES_HALFWAY))
    );
    assert_eq!(
        claim("pipetest-epoll-flat"),
        Some(Claim::AtLeast(PIPES_HALFWAY))
    );
    assert_eq!(
        claim("pipetest-epoll-beats-poll-aio"),
        Some(Claim::AtLeast(PIPES_BETTER))
    );
    assert_eq!(claim("fdalloc-flat"), Some(Claim::AtMost(FD_HALFWAY)));
    assert_eq!(claim("fdalloc-negative-control"), claim("fdalloc-flat"));
    use crate::analysis::micro::{herd, malloc};
    let [accept, poll, epoll, exclusive] = herd::RULE_IDS;
    for id in [accept, exclusive] {
        assert_eq!(claim(id), Some(Claim::AtMost(herd::ONE_AT_MOST)), "{id}");
    }
    for id in [poll, epoll] {
        assert_eq!(claim(id), Some(Claim::AtLeast(herd::HERD_AT_LEAST)), "{id}");
    }
    let [threads, linear] = malloc::RULE_IDS;
    assert_eq!(claim(threads), Some(Claim::AtMost(malloc::THREADS_AT_MOST)));
    assert_eq!(claim(linear), Some(Claim::AtMost(malloc::LINEAR_AT_MOST)));
    use crate::analysis::micro::readahead as ra;
    let [sendfile, seq, willneed, near] = ra::RULE_IDS;
    assert_eq!(claim(sendfile), Some(Claim::AtMost(ra::AS_FAST_AT_MOST)));
    assert_eq!(claim(seq), Some(Claim::AtLeast(ra::SLOWER_AT_LEAST)));
    assert_eq!(claim(willneed), Some(Claim::AtLeast(ra::SLOWER_AT_LEAST)));
    assert_eq!(claim(near), Some(Claim::AtMost(ra::APPROACHES_AT_MOST)));
    assert_eq!(crate::analysis::sample::MIN_REPEATS, MIN_TRIALS);
    assert!(markdown().contains("## Family `micro`"));
}

/// A shared entry is named once, by a name no rule has, and shared by two rules at least;
/// and no long line of docs/findings.md is stated more than twice.
#[test]
fn shared_history_is_stated_once() {
    let mut names: Vec<&str> = SHARED_HISTORY.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), SHARED_HISTORY.len(), "a name given twice");
    for (name, text) in SHARED_HISTORY {
        assert!(RULES.iter().all(|r| r.id != *name), "{name} is a rule's id");
        let n = rules_with(text).len();
        assert!(n >= 2, "`{name}` is named as shared but {n} rule has it");
    }
    let md = markdown() + &shared_history_markdown();
    let mut seen: std::collections::BTreeMap<&str, usize> = Default::default();
    for line in md.lines().filter(|l| l.chars().count() > SHORT_ENTRY) {
        *seen.entry(line).or_default() += 1;
    }
    for (line, n) in seen {
        assert!(n <= 2, "docs/findings.md states this {n} times: {line}");
    }
}

/// Every family with a rule or a finding it does not judge is stated in one file of the
/// register, the one its links name.
#[test]
fn every_family_is_stated_in_the_file_its_links_name() {
    let families = RULES
        .iter()
        .map(|r| r.family)
        .chain(UNJUDGED.iter().map(|u| u.family));
    for fam in families {
        let holding: Vec<&str> = FILES
            .iter()
            .filter(|(_, fams)| fams.contains(&fam))
            .map(|(file, _)| *file)
            .collect();
        assert_eq!(holding, [doc_file(fam)], "{fam:?}");
    }
    let files = register();
    assert_eq!(files[0].0, "findings.md");
    for (file, _) in &files[1..] {
        assert!(
            files[0].1.contains(&format!("]({file})")),
            "findings.md names {file}"
        );
    }
}

/// docs/findings.md, the files it names and docs/findings-history.md are what the code
/// generates.
#[test]
fn docs_findings_md_is_generated_from_the_rules() {
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let files = register()
        .into_iter()
        .chain([("findings-history.md", shared_history_markdown())]);
    for (file, want) in files {
        let path = docs.join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if text == want {
            continue;
        }
        if std::env::var_os("EVLAB_BLESS").is_some() {
            std::fs::write(&path, want).unwrap();
        } else {
            panic!(
                "{} differs from what analysis::rules generates; regenerate it with \
                 EVLAB_BLESS=1 cargo test -p evlab-reason docs_findings_md",
                path.display()
            );
        }
    }
}

/// No rule's definition changes without a history entry. `definitions.tsv` records, per rule,
/// lines of `id`, the length of its history and the hash of its definition: append-only, one
/// line per version. The latest line of each rule must match the rule as it is; a new line
/// (a changed definition) needs a longer history than the line before it. There is no bless
/// step: a change is recorded by hand, with its history entry, as the failure says.
#[test]
fn no_rule_changes_without_a_history_entry() {
    use std::collections::HashMap;
    let record = include_str!("definitions.tsv");
    let mut last: HashMap<&str, (usize, u64)> = HashMap::new();
    for (n, line) in record
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#'))
    {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 3, "definitions.tsv line {}: {line:?}", n + 1);
        let (id, len) = (f[0], f[1].parse::<usize>().unwrap());
        let hash = u64::from_str_radix(f[2], 16).unwrap();
        if let Some(&(before, _)) = last.get(id) {
            assert!(
                len > before,
                "definitions.tsv line {}: {id} changed without a new history entry \
                 ({len} entries, as before)",
                n + 1
            );
        }
        last.insert(id, (len, hash));
    }
    let mut missing = Vec::new();
    for r in RULES {
        let now = (r.history.len(), definition_hash(r));
        match last.get(r.id) {
            Some(&rec) if rec == now => {}
            Some(&(len, _)) if len == now.0 => panic!(
                "rule {} changed without a history entry: add one that says the old rule, the \
                 new one and the data that prompted it, then append to definitions.tsv: \
                 {}\t{}\t{:016x}",
                r.id,
                r.id,
                now.0 + 1,
                now.1
            ),
            _ => missing.push(format!("{}\t{}\t{:016x}", r.id, now.0, now.1)),
        }
    }
    assert!(
        missing.is_empty(),
        "append to crates/reason/src/analysis/rules/definitions.tsv (with the history entry \
         already in the rule):\n{}",
        missing.join("\n")
    );
}

#[test]
fn rules_written_after_their_data_or_without_a_seed_are_labelled_so() {
    let md = markdown();
    let line = |id: &str| {
        let at = md.find(&format!("### `{id}`")).unwrap();
        md[at..]
            .lines()
            .find(|l| l.starts_with("- **Registration:**"))
            .unwrap()
            .to_string()
    };
    assert!(line("fig5-select-below-epoll-lt").starts_with("- **Registration:** post hoc: "));
    assert!(line("fig5-poll-below-epoll-lt").starts_with("- **Registration:** post hoc: "));
    assert!(line("fig5-select-cpu").starts_with("- **Registration:** extension: "));
    assert_eq!(
        line("fig5-select-replies"),
        "- **Registration:** pre-registered"
    );
    // Every rule says it.
    assert_eq!(md.matches("- **Registration:**").count(), RULES.len());
}

/// What a rule says is read by people, in reports and in docs/findings.md: no part of it names
/// a module of the source (`evlab_micro::herd::ONE_AT_MOST`); its number is in its words.
#[test]
fn no_rule_names_a_module_of_the_source() {
    let path = |t: &str| -> bool {
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        t.match_indices("::").any(|(at, _)| {
            t[..at].chars().next_back().is_some_and(ident)
                && t[at + 2..].chars().next().is_some_and(ident)
        })
    };
    assert!(path("(evlab_micro::herd::ONE_AT_MOST)"));
    assert!(!path("on [::1]:80"));
    for r in RULES {
        for text in [r.source, r.seed, r.quantity, r.derivation]
            .into_iter()
            .chain(r.history.iter().copied())
        {
            assert!(!path(text), "{}: {text}", r.id);
        }
    }
    for (name, text) in SHARED_HISTORY {
        assert!(!path(text), "{name}");
    }
}
