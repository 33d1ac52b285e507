//! evlab: one binary, one thin module per subcommand; all logic lives in the library crates.

use clap::{Parser, Subcommand};

mod fileset;
mod idle;
mod loadgen;
mod output;
mod run;
mod serve;

/// The port `serve` listens on and `load` and `idle` connect to unless told otherwise, so that
/// `evlab serve` in one terminal and `evlab load --rate 10 --num-conns 5` in another meet.
pub const DEFAULT_PORT: u16 = 8080;

#[derive(Parser, Debug)]
#[command(
    name = "evlab",
    version,
    about = "Event-mechanism laboratory: the μserver study (select, poll, epoll, io_uring) on today's kernel"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve static files over HTTP/1.1 with a chosen event mechanism
    Serve(serve::Args),
    /// Open-loop HTTP load generator (httperf-compatible flags)
    Load(loadgen::Args),
    /// Hold N idle connections open, re-opening any the server closes
    Idle(idle::Args),
    /// Create the SPECweb99-like file set
    Fileset(fileset::Args),
    /// Run an experiment (default: quick) and write a report
    Run(run::RunArgs),
    /// Re-render a report from saved results
    Report(run::ReportArgs),
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

fn main() {
    let cli = Cli::parse();
    // The default open-file limit is far below what 10,000 idle connections need.
    if let Err(e) = evlab_poll::raise_fd_limit() {
        eprintln!("evlab: warning: cannot raise the open-file limit: {e}");
    }
    let result = match cli.command {
        Command::Serve(a) => serve::run(a),
        Command::Load(a) => loadgen::run(a),
        Command::Idle(a) => idle::run(a),
        Command::Fileset(a) => fileset::run(a),
        Command::Run(a) => run::run(a),
        Command::Report(a) => run::report(a),
    };
    if let Err(e) = result {
        if let Some(Exit(code)) = e.downcast_ref::<Exit>() {
            std::process::exit(*code);
        }
        eprintln!("evlab: error: {e:#}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
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
