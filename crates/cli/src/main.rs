//! evlab: one binary, one thin module per subcommand; all logic lives in the library crates.

#![deny(clippy::too_many_lines)]

use clap::{CommandFactory, Parser, Subcommand};

mod args;
mod capacity;
mod compare;
mod docs;
mod fileset;
mod herd;
mod hosts;
mod idle;
mod loadgen;
mod loadmerge;
mod micro;
mod output;
mod pipetest;
mod pool;
mod proxy;
mod run;
mod serve;
mod threshold;

/// The port `serve` listens on and `load` and `idle` connect to unless told otherwise, so that
/// `evlab serve` in one terminal and `evlab load --rate 10 --num-conns 5` in another meet.
pub const DEFAULT_PORT: u16 = 8080;

#[derive(Parser, Debug)]
#[command(
    name = "evlab",
    version = env!("EVLAB_BUILD"),
    about = "Event-mechanism laboratory: the μserver study (select, poll, epoll, io_uring) on today's kernel",
    after_help = EXAMPLES,
    // Help wraps to the terminal (or $COLUMNS where stdout is not one, else 100 columns), and
    // never wider than 100: longer lines of prose are hard to read.
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

const EXAMPLES: &str = "\
Examples:
  evlab serve /tmp/www
      serve /tmp/www on 127.0.0.1:8080
  evlab load --uri /one --rate 100 --num-conns 500
      load it: 100 connections per second
  evlab run
      the default experiment (quick) and its report
  evlab completions bash > ~/.local/share/bash-completion/completions/evlab
      completions for bash (experiment names for `evlab run` included)
  evlab man | man -l -
      read the manual page

Exit status: 0 on success, 1 on an error or a failed check, 2 on a usage error, 99 when a \
`load` run is past a threshold (`evlab load --help`). SIGINT or SIGTERM: `serve`, `proxy` and \
`idle` stop gracefully and exit 0; `load` and `run` write what they measured and exit 130.";

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve static files over HTTP/1.1 with a chosen event mechanism
    #[command(after_help = serve::EXAMPLES)]
    Serve(serve::Args),
    /// Load generator: httperf's open loop (--rate) or wrk's connections (-c, -R)
    #[command(after_help = loadgen::EXAMPLES)]
    Load(Box<loadgen::Args>),
    /// The highest rate a server sustains under a latency objective
    #[command(after_help = capacity::EXAMPLES)]
    Capacity(capacity::Args),
    /// Merge clients' `load --json` reports exactly (by histograms)
    #[command(after_help = loadmerge::EXAMPLES)]
    LoadMerge(loadmerge::Args),
    /// Hold N idle connections open, re-opening any the server closes
    #[command(after_help = idle::EXAMPLES)]
    Idle(idle::Args),
    /// Reverse caching HTTP/1.1 proxy, forwarding by copy or splice
    #[command(after_help = proxy::EXAMPLES)]
    Proxy(proxy::Args),
    /// Create the SPECweb99-like file set
    #[command(after_help = fileset::EXAMPLES)]
    Fileset(fileset::Args),
    /// Run an experiment (default: quick) and write a report
    #[command(after_help = run::RUN_EXAMPLES)]
    Run(run::RunArgs),
    /// Re-render a report from saved results
    #[command(after_help = run::REPORT_EXAMPLES)]
    Report(run::ReportArgs),
    /// Compare two runs: verdicts, and changes with their intervals
    #[command(after_help = compare::EXAMPLES)]
    Compare(compare::Args),
    /// Pool runs of one experiment, the run as a random effect
    #[command(after_help = pool::EXAMPLES)]
    Pool(pool::Args),
    /// Print a shell's completion script (bash, zsh, fish, …)
    #[command(after_help = docs::COMPLETIONS_EXAMPLES)]
    Completions(docs::CompletionsArgs),
    /// Print a manual page (roff) for evlab or one of its subcommands
    #[command(after_help = docs::MAN_EXAMPLES)]
    Man(docs::ManArgs),
    /// Ben LaHaise's pipetest: passes/s against pipes, per mechanism
    #[command(after_help = pipetest::EXAMPLES)]
    Pipetest(pipetest::Args),
    /// The accept herd: wake-ups and time per accept against workers
    #[command(after_help = herd::EXAMPLES)]
    Herd(herd::Args),
    /// The Linux Scalability Project's fdalloc, malloc and readahead
    #[command(after_help = micro::EXAMPLES)]
    Micro(micro::Args),
    /// Check a hosts file's hosts over ssh: evlab, kernel, clock
    #[command(after_help = hosts::EXAMPLES)]
    Hosts(hosts::Args),
    /// Answer each line on stdin with this machine's wall clock: what `evlab hosts` runs on a
    /// host to read its clock
    #[command(hide = true)]
    Clock,
}

/// Ends the process with this exit status, printing nothing more: for an outcome that is not a
/// malfunction and that the subcommand has already reported (a run stopped by Ctrl-C).
#[derive(Debug)]
pub struct Exit(pub i32);

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}", self.0)
    }
}

impl std::error::Error for Exit {}

impl Command {
    /// The command as a user typed it (`evlab serve`, `evlab micro fdalloc`): the one prefix
    /// of its errors and warnings.
    fn name(&self) -> String {
        let sub = match self {
            Command::Serve(_) => "serve",
            Command::Load(_) => "load",
            Command::Capacity(_) => "capacity",
            Command::LoadMerge(_) => "load-merge",
            Command::Idle(_) => "idle",
            Command::Proxy(_) => "proxy",
            Command::Fileset(_) => "fileset",
            Command::Run(_) => "run",
            Command::Report(_) => "report",
            Command::Compare(_) => "compare",
            Command::Pool(_) => "pool",
            Command::Completions(_) => "completions",
            Command::Man(_) => "man",
            Command::Pipetest(_) => "pipetest",
            Command::Herd(_) => "herd",
            Command::Micro(m) => {
                return format!("evlab micro {}", m.bench.name());
            }
            Command::Hosts(_) => "hosts",
            Command::Clock => "clock",
        };
        format!("evlab {sub}")
    }
}

fn main() {
    let cli = Cli::parse();
    let name = cli.command.name();
    // The default open-file limit is far below what 10,000 idle connections need.
    if let Err(e) = evlab_sys::raise_fd_limit() {
        eprintln!("{name}: warning: cannot raise the open-file limit: {e}");
    }
    let result = match cli.command {
        Command::Serve(a) => serve::run(a),
        Command::Load(a) => loadgen::run(*a),
        Command::Capacity(a) => capacity::run(a),
        Command::LoadMerge(a) => loadmerge::run(a),
        Command::Idle(a) => idle::run(a),
        Command::Proxy(a) => proxy::run(a),
        Command::Fileset(a) => fileset::run(a),
        Command::Run(a) => run::run(a),
        Command::Report(a) => run::report(a),
        Command::Compare(a) => compare::run(a),
        Command::Pool(a) => pool::run(a),
        Command::Completions(a) => docs::completions(a, Cli::command()),
        Command::Man(a) => docs::man(a, Cli::command()),
        Command::Pipetest(a) => pipetest::run(a),
        Command::Herd(a) => herd::run(a),
        Command::Micro(a) => micro::run(a),
        Command::Hosts(a) => hosts::run(a),
        Command::Clock => hosts::clock(),
    };
    if let Err(e) = result {
        if let Some(Exit(code)) = e.downcast_ref::<Exit>() {
            std::process::exit(*code);
        }
        // One prefix, the command's; what the error says comes after it, never another
        // "evlab …:" (a subcommand adds none of its own).
        eprintln!("{name}: error: {e:#}");
        // A wrong command line exits 2 wherever it is found, as clap's own errors do.
        let code = if e.downcast_ref::<args::Usage>().is_some() {
            2
        } else {
            1
        };
        std::process::exit(code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// Every flag of every subcommand, with the path of subcommands it belongs to.
    fn every_flag() -> Vec<(String, clap::Arg, clap::Command)> {
        fn walk(c: &clap::Command, path: &str, out: &mut Vec<(String, clap::Arg, clap::Command)>) {
            for a in c.get_arguments() {
                out.push((path.to_string(), a.clone(), c.clone()));
            }
            for sub in c.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), out);
            }
        }
        let mut out = Vec::new();
        walk(&Cli::command(), "evlab", &mut out);
        out
    }

    /// Units everywhere: a flag that takes a time takes `500ms`, `2s` and `1m` (a plain number
    /// keeps its documented unit), and a flag that takes a size takes K, M and G; none is named
    /// after its unit.
    #[test]
    fn every_duration_flag_takes_units_and_every_size_flag_k_m_g() {
        let mut durations = 0;
        for (path, arg, cmd) in every_flag() {
            let Some(long) = arg.get_long() else { continue };
            let names: Vec<String> = arg
                .get_value_names()
                .unwrap_or_default()
                .iter()
                .map(|n| n.to_string())
                .collect();
            let _ = &cmd;
            // The value parsed as clap parses it: a refused value is a value error, whatever
            // else the command line lacks.
            let takes = |v: &str| {
                let mut argv: Vec<String> = path.split(' ').map(String::from).collect();
                argv.extend([format!("--{long}"), v.to_string()]);
                !matches!(
                    Cli::try_parse_from(&argv).map_err(|e| e.kind()),
                    Err(clap::error::ErrorKind::ValueValidation
                        | clap::error::ErrorKind::InvalidValue)
                )
            };
            let timely = [
                "timeout",
                "interval",
                "delay",
                "settle",
                "duration",
                "stop-after",
                "ttl",
            ]
            .iter()
            .any(|w| long.contains(w))
                && !matches!(arg.get_action(), clap::ArgAction::SetTrue);
            assert!(
                !long.ends_with("-ms") && !names.iter().any(|n| n == "MS" || n == "SECONDS"),
                "{path} --{long}: named after its unit"
            );
            if timely || names.iter().any(|n| n == "DURATION") {
                durations += 1;
                for v in ["500ms", "2s", "1m"] {
                    assert!(takes(v), "{path} --{long} refuses {v}");
                }
            }
            let sized = [
                "bytes",
                "size",
                "buffer",
                "request-line",
                "splice-min",
                "max-object",
            ]
            .iter()
            .any(|w| long.contains(w))
                && long != "object-size";
            if sized || names.iter().any(|n| n.starts_with("SIZE")) {
                for v in ["4K", "1M"] {
                    assert!(takes(v), "{path} --{long} refuses {v}");
                }
            }
        }
        assert!(durations >= 20, "only {durations} duration flags found");
    }

    #[test]
    fn every_command_is_named_as_typed() {
        let name = |argv: &[&str]| Cli::try_parse_from(argv).unwrap().command.name();
        assert_eq!(name(&["evlab", "serve"]), "evlab serve");
        assert_eq!(name(&["evlab", "load-merge", "a.json"]), "evlab load-merge");
        assert_eq!(name(&["evlab", "micro", "fdalloc"]), "evlab micro fdalloc");
        for sub in Cli::command().get_subcommands() {
            let n = sub.get_name();
            if let Ok(cli) = Cli::try_parse_from(["evlab", n]) {
                assert_eq!(cli.command.name(), format!("evlab {n}"));
            }
        }
    }

    #[test]
    fn serve_load_and_idle_default_to_one_port() {
        let parse = |argv: &[&str]| Cli::try_parse_from(argv).unwrap().command;
        let Command::Serve(s) = parse(&["evlab", "serve", "--root", "/tmp"]) else {
            panic!()
        };
        let Command::Load(l) = parse(&["evlab", "load", "--rate", "1"]) else {
            panic!()
        };
        let Command::Idle(i) = parse(&["evlab", "idle", "1"]) else {
            panic!()
        };
        assert_eq!(s.listen.port(), DEFAULT_PORT);
        assert_eq!(l.port, DEFAULT_PORT);
        assert_eq!(i.port, DEFAULT_PORT);
    }
}
