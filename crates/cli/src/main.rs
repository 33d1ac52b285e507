//! evlab: one binary, one thin module per subcommand; all logic lives in the library crates.

use clap::{Parser, Subcommand};

mod fileset;
mod idle;
mod loadgen;
mod proxy;
mod run;
mod serve;

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
    /// Reverse caching HTTP/1.1 proxy: copy, splice or splice-keep forwarding
    Proxy(proxy::Args),
    /// Create the SPECweb99-like file set
    Fileset(fileset::Args),
    /// Run an experiment (default: quick) and write a report
    Run(run::RunArgs),
    /// Re-render a report from saved results
    Report(run::ReportArgs),
}

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
        Command::Proxy(a) => proxy::run(a),
        Command::Fileset(a) => fileset::run(a),
        Command::Run(a) => run::run(a),
        Command::Report(a) => run::report(a),
    };
    if let Err(e) = result {
        eprintln!("evlab: error: {e:#}");
        std::process::exit(1);
    }
}
