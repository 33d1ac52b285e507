//! Help that a person reads at a terminal: every command's and nested subcommand's `-h` and
//! `--help` wrap to the terminal's width (80 columns here, never over 100 however wide), keep
//! their examples, and name no module of the source (`model::knee`, `evlab_micro::herd`), nor
//! do the shipped experiments, the committed reports' "How to reproduce", the committed
//! micro-benchmark reports and the rules' register (docs/findings*.md, power.md): they name the
//! docs page and section that explains a thing instead.

use std::path::Path;
use std::process::{Command, Stdio};

mod common;
use common::BIN;

/// `evlab ARGS` with `$COLUMNS` set to `columns` (None: unset); stdout is a pipe, so the help
/// is wrapped as `$COLUMNS` says.
fn help(args: &[&str], columns: Option<&str>) -> String {
    let mut c = Command::new(BIN);
    c.args(args).stdin(Stdio::null());
    match columns {
        Some(v) => c.env("COLUMNS", v),
        None => c.env_remove("COLUMNS"),
    };
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "evlab {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// The names under `Commands:` in a help (a wrapped description's lines are indented
/// further), clap's own `help` left out.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(String::from)
        .collect()
}

/// Every command path: `[]`, `["serve"]`, …, `["micro", "fdalloc"]`, ….
fn every_command() -> Vec<Vec<String>> {
    let mut out = vec![vec![]];
    let mut i = 0;
    while i < out.len() {
        let path = out[i].clone();
        let args: Vec<&str> = path.iter().map(String::as_str).chain(["--help"]).collect();
        for sub in subcommands(&help(&args, None)) {
            let mut p = path.clone();
            p.push(sub);
            out.push(p);
        }
        i += 1;
    }
    out
}

#[test]
fn every_help_wraps_to_the_terminal_and_keeps_its_examples() {
    let commands = every_command();
    assert!(
        commands.len() >= 20 && commands.iter().any(|c| c == &["micro", "fdalloc"]),
        "{commands:?}"
    );
    for path in &commands {
        for flag in ["-h", "--help"] {
            let args: Vec<&str> = path.iter().map(String::as_str).chain([flag]).collect();
            // At 80 columns every line fits in 80 (the bar is 100); with no $COLUMNS, or
            // a wider terminal, lines stop at 100.
            for (columns, most) in [(Some("80"), 80), (None, 100), (Some("250"), 100)] {
                let text = help(&args, columns);
                for (i, line) in text.lines().enumerate() {
                    assert!(
                        line.chars().count() <= most,
                        "evlab {} at COLUMNS={columns:?}, line {}: {} characters:\n{line}",
                        args.join(" "),
                        i + 1,
                        line.chars().count()
                    );
                }
                assert!(
                    text.contains("Examples:\n  evlab "),
                    "evlab {}: no examples:\n{text}",
                    args.join(" ")
                );
            }
        }
    }
}

/// `model::knee`, `run::cgroup`, `evlab_micro::herd`: an identifier, `::`, an identifier (an
/// IPv6 address such as `[::1]` is not one).
fn module_paths(text: &str) -> Vec<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for (at, _) in text.match_indices("::") {
        let before = text[..at].chars().next_back().is_some_and(ident);
        let after = text[at + 2..].chars().next().is_some_and(ident);
        if before && after {
            let start = text[..at].rfind(|c: char| !ident(c)).map_or(0, |i| i + 1);
            let end = text[at + 2..]
                .find(|c: char| !ident(c))
                .map_or(text.len(), |i| at + 2 + i);
            out.push(text[start..end].to_string());
        }
    }
    out
}

#[test]
fn no_module_path_in_the_shipped_experiments_or_any_help() {
    assert_eq!(
        module_paths("see model::knee; on [::1]:80"),
        ["model::knee"]
    );
    assert_eq!(
        module_paths("10^k = 0.32 per tenfold (evlab_micro::pipetest::K_HALFWAY)."),
        ["evlab_micro::pipetest", "pipetest::K_HALFWAY"]
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut texts = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            texts.push((
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            ));
        }
    }
    assert!(texts.len() >= 20, "{}", dir.display());
    for path in every_command() {
        for flag in ["-h", "--help"] {
            let args: Vec<&str> = path.iter().map(String::as_str).chain([flag]).collect();
            texts.push((format!("evlab {}", args.join(" ")), help(&args, None)));
        }
    }
    texts.push(("evlab run --list".into(), help(&["run", "--list"], None)));
    // The committed reports' "How to reproduce" (its experiment's TOML and commands).
    let reference = dir.join("../results/reference");
    for machine in std::fs::read_dir(&reference).unwrap().flatten() {
        for run in std::fs::read_dir(machine.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let Ok(md) = std::fs::read_to_string(run.path().join("report.md")) else {
                continue;
            };
            if let Some(at) = md.find("## How to reproduce") {
                let section = &md[at..];
                let end = section[2..].find("\n## ").map_or(section.len(), |i| i + 2);
                texts.push((run.path().display().to_string(), section[..end].to_string()));
            }
            // A micro-benchmark's report has no spec or commands of its own to carry a path:
            // the whole of it, its findings and their evidence, is checked.
            if run.path().join("micro.json").is_file() {
                texts.push((run.path().display().to_string(), md));
            }
        }
    }
    // The register of the rules, generated from the code: their derivations and histories
    // are read by people, who cannot use a constant's module path.
    let docs = dir.join("../docs");
    let mut register = 0;
    for e in std::fs::read_dir(&docs).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if (name.starts_with("findings") || name == "power.md") && name.ends_with(".md") {
            texts.push((name, std::fs::read_to_string(e.path()).unwrap()));
            register += 1;
        }
    }
    assert!(register >= 4, "only {register} register files in docs/");
    for (what, text) in &texts {
        let found = module_paths(text);
        assert!(
            found.is_empty(),
            "{what} names the source's modules {found:?}: name the docs page and section instead"
        );
    }
}
