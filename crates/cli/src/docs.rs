//! `evlab completions SHELL` and `evlab man [COMMAND]`: generated from the same clap definition
//! as the parser, so they cannot drift from it.

use std::io::Write;

use anyhow::Context;
use clap_complete::Shell;

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for
    pub shell: Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// A subcommand (serve, load, …) for its own page, evlab-COMMAND(1); none for evlab(1)
    pub command: Option<String>,
}

pub const COMPLETIONS_EXAMPLES: &str = "\
Examples:
  evlab completions bash > ~/.local/share/bash-completion/completions/evlab
  evlab completions zsh > ~/.zfunc/_evlab        (with fpath+=~/.zfunc before compinit)
  evlab completions fish > ~/.config/fish/completions/evlab.fish";

pub const MAN_EXAMPLES: &str = "\
Examples:
  evlab man | man -l -                            read evlab(1)
  evlab man load | man -l -                       read evlab-load(1)
  mkdir -p ~/.local/share/man/man1 && evlab man > ~/.local/share/man/man1/evlab.1";

pub fn completions(a: CompletionsArgs, mut cmd: clap::Command) -> anyhow::Result<()> {
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "evlab", &mut out);
    write_stdout(&out)
}

pub fn man(a: ManArgs, mut cmd: clap::Command) -> anyhow::Result<()> {
    // Building gives each subcommand its display name (evlab-load) and usage (evlab load …).
    cmd.build();
    let page = match &a.command {
        None => cmd,
        Some(name) => cmd.find_subcommand(name).cloned().with_context(|| {
            let names: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).collect();
            format!("no subcommand `{name}` (there are: {})", names.join(", "))
        })?,
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .source(format!("evlab {}", env!("CARGO_PKG_VERSION")))
        .render(&mut out)?;
    write_stdout(&out)
}

fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    let mut o = std::io::stdout().lock();
    o.write_all(bytes)
        .and_then(|()| o.flush())
        .context("cannot write to stdout")
}
