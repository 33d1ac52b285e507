//! `evlab pipetest`: Ben LaHaise's pipetest over every readiness mechanism (see
//! `docs/micro.md` and `evlab_micro::pipetest`).

use std::path::PathBuf;

use evlab_micro::pipetest::{self, Config, Route, Status};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Mechanisms: `all` (every readiness mechanism of the registry) or a comma-separated list
    #[arg(long, default_value = "all", value_parser = evlab_micro::parse_mechanisms)]
    pub mechanism: std::vec::Vec<evlab_poll::Mechanism>,
    /// Numbers of pipes, comma-separated (points beyond the descriptor limit are skipped)
    #[arg(long, default_value = "10,100,1000,10000,16000", value_parser = evlab_micro::parse_counts)]
    pub pipes: std::vec::Vec<usize>,
    /// Tokens in flight (the C program's message_threads)
    #[arg(long, default_value_t = 1)]
    pub message_threads: usize,
    /// Passes per token (the C program's max_generation)
    #[arg(long, alias = "max-generation", default_value_t = 300)]
    pub generations: u64,
    /// How a token's next pipe is chosen: stride17 (round the pipes) or last (the same pipe)
    #[arg(long, default_value = "stride17", value_parser = parse_route)]
    pub route: Route,
    /// Sweeps: the whole sweep is run this many times, interleaved (every point once per
    /// sweep); the table shows each point's median, and the findings are decided on the 90%
    /// interval of the sweeps' fits, which needs at least 3
    #[arg(long, alias = "repeats", default_value_t = 3)]
    pub repeat: usize,
    /// Write the report as JSON to this file (`-`: stdout, instead of the table)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

fn parse_route(s: &str) -> Result<Route, String> {
    Route::from_name(s).ok_or_else(|| {
        format!(
            "unknown route '{s}'; valid routes: {}",
            Route::NAMES.join(", ")
        )
    })
}

pub const EXAMPLES: &str = "\
Examples:
  evlab pipetest
      every readiness mechanism, 10 to 16,000 pipes (as the descriptor limit
      allows), 3 sweeps
  evlab pipetest --mechanism poll,epoll-et --pipes 100,1000 --generations 1000
      two mechanisms, two sizes, longer runs

Exit status: 0 when every point ran; 1 on an error; 2 on a usage error.";

pub fn run(a: Args) -> anyhow::Result<()> {
    let cfg = Config {
        mechanisms: a.mechanism,
        pipes: a.pipes,
        message_threads: a.message_threads,
        max_generation: a.generations,
        route: a.route,
        repeat: a.repeat,
        ..Config::default()
    };
    let sweeps = cfg.repeat;
    let report = pipetest::run(&cfg, |p| {
        let what = match (p.status, p.runs.last()) {
            (Status::Ok, Some(r)) => format!(
                "{:.0} passes/s (sweep {}/{sweeps})",
                r.passes_per_sec,
                p.runs.len()
            ),
            _ => format!("{:?}: {}", p.status, p.reason.as_deref().unwrap_or("")),
        };
        eprintln!("pipetest: {} {} pipes: {what}", p.mechanism, p.pipes);
    })?;
    Ok(evlab_micro::emit(&report, a.json.as_deref(), || {
        pipetest::render(&report)
    })?)
}
