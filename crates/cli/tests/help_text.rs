//! Help that a person reads at a terminal: every command's and nested subcommand's `-h` and
//! `--help` wrap to the terminal's width (80 columns here, never over 100 however wide) and
//! keep their examples.

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
