//! `evlab completions SHELL` and `evlab man [COMMAND…] [--dir DIR]`: generated from the same
//! clap definition as the parser, so they cannot drift from it.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::builder::PossibleValuesParser;
use clap_complete::Shell;

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for
    pub shell: Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// A subcommand for its own page (`load` for evlab-load(1), `micro fdalloc` for
    /// evlab-micro-fdalloc(1)); none for evlab(1)
    pub command: Vec<String>,
    /// Write every page (evlab.1 and one per subcommand) into this directory instead
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    pub dir: Option<PathBuf>,
}

pub const COMPLETIONS_EXAMPLES: &str = "\
Examples:
  evlab completions bash > ~/.local/share/bash-completion/completions/evlab
  evlab completions zsh > ~/.zfunc/_evlab
      with fpath+=~/.zfunc before compinit in ~/.zshrc
  evlab completions fish > ~/.config/fish/completions/evlab.fish

Each completes the subcommands, the flags, the values of the flags that take a choice \
(--mechanism, --forward, …) and the names of `evlab run`'s built-in experiments.";

pub const MAN_EXAMPLES: &str = "\
Examples:
  evlab man | man -l -                        read evlab(1)
  evlab man load | man -l -                   read evlab-load(1)
  evlab man micro fdalloc | man -l -          read evlab-micro-fdalloc(1)
  evlab man --dir ~/.local/share/man/man1     every page; then: man evlab-load";

/// The values each choice flag takes, for the completion scripts: those flags are parsed by
/// functions (a registry lookup, a comma list), so clap cannot list their values itself, and
/// a shell would offer file names instead.
fn choices() -> Vec<(&'static [&'static str], &'static str, Vec<&'static str>)> {
    let mechanisms: Vec<&'static str> = evlab_poll::Mechanism::ALL
        .iter()
        .map(|m| m.name())
        .collect();
    let with_all = |v: &[&'static str]| {
        let mut out = vec!["all"];
        out.extend_from_slice(v);
        out
    };
    let herd_modes: Vec<&'static str> = evlab_micro::herd::Mode::ALL
        .iter()
        .map(|m| m.name())
        .collect();
    let forward: Vec<&'static str> = evlab_proxy::ForwardMode::ALL
        .iter()
        .map(|m| m.name())
        .collect();
    vec![
        // A name of the built-in experiments; a TOML file of one's own is still completed as
        // a file name where none matches (bash's `-o default`).
        (&["run"], "experiment", crate::run::builtin_names()),
        (&["serve"], "mechanism", mechanisms.clone()),
        (&["proxy"], "mechanism", mechanisms.clone()),
        (&["pipetest"], "mechanism", with_all(&mechanisms)),
        (
            &["serve"],
            "accept_mode",
            vec!["shared", "exclusive", "reuseport"],
        ),
        (&["serve"], "file_io", evlab_server::FileIo::NAMES.to_vec()),
        (&["proxy"], "forward", forward),
        (
            &["pipetest"],
            "route",
            evlab_micro::pipetest::Route::NAMES.to_vec(),
        ),
        (&["herd"], "mode", with_all(&herd_modes)),
        (&["micro", "fdalloc"], "op", vec!["open", "dup"]),
        (
            &["micro", "readahead"],
            "ways",
            with_all(
                &evlab_micro::readahead::Way::ALL
                    .iter()
                    .map(|w| w.name())
                    .collect::<Vec<_>>(),
            ),
        ),
    ]
}

/// `cmd` with the choice flags' values made known to the completion generators.
fn with_choices(mut cmd: clap::Command) -> clap::Command {
    for (path, arg, values) in choices() {
        let set = |c: clap::Command| {
            c.mut_arg(arg, |a| {
                a.value_parser(PossibleValuesParser::new(values.clone()))
            })
        };
        cmd = match path {
            [one] => cmd.mut_subcommand(one, set),
            [one, two] => cmd.mut_subcommand(one, |c| c.mut_subcommand(two, set)),
            _ => cmd,
        };
    }
    cmd
}

pub fn completions(a: CompletionsArgs, cmd: clap::Command) -> anyhow::Result<()> {
    let mut cmd = with_choices(cmd);
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "evlab", &mut out);
    write_stdout(&out)
}

/// Text for roff as it is: backslashes and hyphens escaped, a line that starts with a dot or a
/// quote protected.
fn roff_text(line: &str) -> String {
    let t = line.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

/// One page: clap_mangen's sections, with a synopsis of our own that names each option's
/// value (clap_mangen's lists the flags alone); then the help's text after the options in
/// sections of their own: the examples verbatim (not reflowed), the other paragraphs as NOTES
/// (filled, their indented lines verbatim) and the exit status.
fn page(cmd: clap::Command) -> anyhow::Result<Vec<u8>> {
    let after = cmd
        .get_after_help()
        .map(|s| s.to_string())
        .unwrap_or_default();
    let cmd = cmd.after_help(None::<&str>).after_long_help(None::<&str>);
    let has_args = cmd.get_arguments().any(|a| !a.is_hide_set());
    let has_subcommands = cmd.get_subcommands().any(|s| !s.is_hide_set());
    let has_version = cmd.get_version().or(cmd.get_long_version()).is_some();
    let synopsis = synopsis(&cmd);
    let man = clap_mangen::Man::new(cmd).source(format!("evlab {}", env!("CARGO_PKG_VERSION")));
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    out.extend_from_slice(synopsis.as_bytes());
    man.render_description_section(&mut out)?;
    if has_args {
        man.render_options_section(&mut out)?;
    }
    if has_subcommands {
        man.render_subcommands_section(&mut out)?;
    }
    out.extend_from_slice(after_sections(&after).as_bytes());
    if has_version {
        man.render_version_section(&mut out)?;
    }
    Ok(ascii_roff(&String::from_utf8_lossy(&out)).into_bytes())
}

/// The SYNOPSIS section: the command, each visible option with its value's name
/// (`[--listen ADDR:PORT]`), the positionals and the subcommand, as `--help`'s usage has them.
fn synopsis(cmd: &clap::Command) -> String {
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name());
    let mut words = vec![format!("\\fB{}\\fR", roff_text(name))];
    let value = |a: &clap::Arg| -> String {
        let names: Vec<String> = a
            .get_value_names()
            .map(|v| v.iter().map(|n| n.to_string()).collect())
            .unwrap_or_else(|| vec![a.get_id().as_str().to_uppercase()]);
        let many = a
            .get_num_args()
            .is_some_and(|r| r.max_values() > names.len())
            || matches!(a.get_action(), clap::ArgAction::Append);
        let mut v = names
            .iter()
            .map(|n| format!("\\fI{}\\fR", roff_text(n)))
            .collect::<Vec<_>>()
            .join(" ");
        if many {
            v.push_str("...");
        }
        v
    };
    let marks = |required: bool| if required { ("", "") } else { ("[", "]") };
    for a in cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
    {
        let (l, r) = marks(a.is_required_set());
        let mut flag = match (a.get_short(), a.get_long()) {
            (Some(s), Some(long)) => {
                format!("\\fB\\-{s}\\fR|\\fB{}\\fR", roff_text(&format!("--{long}")))
            }
            (Some(s), None) => format!("\\fB\\-{s}\\fR"),
            (None, Some(long)) => format!("\\fB{}\\fR", roff_text(&format!("--{long}"))),
            (None, None) => continue,
        };
        if a.get_action().takes_values() {
            flag = format!("{flag} {}", value(a));
        }
        words.push(format!("{l}{flag}{r}"));
    }
    for a in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let (l, r) = marks(a.is_required_set());
        words.push(format!("{l}{}{r}", value(a)));
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        words.push("\\fIcommand\\fR".to_string());
    }
    format!(".SH SYNOPSIS\n{}\n", words.join(" "))
}

/// The sections made of the text `--help` shows after the options: a paragraph that opens
/// with `Examples:` is the EXAMPLES section, verbatim; one that opens with `Exit status:` the
/// EXIT STATUS; any other is a paragraph of NOTES, filled, with its indented lines (a file's
/// lines, commands) verbatim. Paragraphs are separated by blank lines.
fn after_sections(after: &str) -> String {
    let mut examples = String::new();
    let mut notes = String::new();
    let mut exit = String::new();
    for para in after.split("\n\n").map(|p| p.trim_matches('\n')) {
        if let Some(rest) = para.strip_prefix("Examples:") {
            for l in rest.trim_start_matches('\n').lines() {
                examples.push_str(&roff_text(l));
                examples.push('\n');
            }
        } else if let Some(rest) = para.strip_prefix("Exit status:") {
            exit.push_str(&roff_text(rest.trim()));
            exit.push('\n');
        } else if !para.trim().is_empty() {
            notes.push_str(".PP\n");
            let mut verbatim = false;
            for l in para.lines() {
                let indented = l.starts_with(' ');
                if indented != verbatim {
                    notes.push_str(if indented { ".nf\n" } else { ".fi\n" });
                    verbatim = indented;
                }
                notes.push_str(&roff_text(if indented { l } else { l.trim() }));
                notes.push('\n');
            }
            if verbatim {
                notes.push_str(".fi\n");
            }
        }
    }
    let mut out = String::new();
    if !examples.is_empty() {
        out.push_str(".SH EXAMPLES\n.nf\n");
        out.push_str(&examples);
        out.push_str(".fi\n");
    }
    if !notes.is_empty() {
        out.push_str(".SH NOTES\n");
        out.push_str(&notes);
    }
    if !exit.is_empty() {
        out.push_str(".SH \"EXIT STATUS\"\n");
        out.push_str(&exit);
    }
    out
}

/// roff reads bytes: every character beyond ASCII (…, –, ×, µ) as groff's escape for it, so
/// that `man` renders it on any terminal and groff warns about none.
fn ascii_roff(page: &str) -> String {
    page.chars()
        .map(|c| {
            if c.is_ascii() {
                c.to_string()
            } else {
                format!("\\[u{:04X}]", c as u32)
            }
        })
        .collect()
}

/// Every page under `cmd`, with the file name each goes to (evlab-micro-fdalloc.1).
fn all_pages(cmd: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
    out.push((format!("{name}.1"), cmd.clone()));
    for s in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        all_pages(s, out);
    }
}

pub fn man(a: ManArgs, cmd: clap::Command) -> anyhow::Result<()> {
    // No help(1) page: `evlab help` is clap's own, not a command with a manual. Building gives
    // each subcommand its display name (evlab-load) and usage (evlab load …).
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    if let Some(dir) = &a.dir {
        return write_all(&cmd, dir);
    }
    let mut page_of = cmd;
    for name in &a.command {
        let next = page_of.find_subcommand(name).cloned().with_context(|| {
            let names: Vec<&str> = page_of
                .get_subcommands()
                .filter(|c| !c.is_hide_set())
                .map(|c| c.get_name())
                .collect();
            if names.is_empty() {
                format!("`{}` has no subcommand `{name}`", page_of.get_name())
            } else {
                format!("no subcommand `{name}` (there are: {})", names.join(", "))
            }
        })?;
        page_of = next;
    }
    write_stdout(&page(page_of)?)
}

fn write_all(cmd: &clap::Command, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut pages = Vec::new();
    all_pages(cmd, &mut pages);
    for (file, c) in pages {
        let path = dir.join(&file);
        std::fs::write(&path, page(c)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}

fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    let mut o = std::io::stdout().lock();
    o.write_all(bytes)
        .and_then(|()| o.flush())
        .context("cannot write to stdout")
}
