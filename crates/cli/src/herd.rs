//! `evlab herd`: the thundering herd in accept, per way of waiting and number of workers (see
//! `docs/micro.md` and `evlab_micro::herd`).

use std::path::PathBuf;
use std::time::Duration;

use evlab_micro::herd::{self, As, Config, Mode, Status};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Ways of waiting: all, or a comma-separated list of accept, poll, epoll, exclusive,
    /// reuseport, uring
    #[arg(long, default_value = "all", value_parser = parse_modes)]
    pub mode: std::vec::Vec<Mode>,
    /// Numbers of workers, comma-separated
    #[arg(long, default_value = "1,2,4,8,16,32,64", value_parser = evlab_micro::parse_counts)]
    pub workers: std::vec::Vec<usize>,
    /// Workers as threads, processes (forked), or both
    #[arg(long = "as", default_value = "both", value_parser = ["threads", "processes", "both"])]
    pub as_: String,
    /// Connections per point
    #[arg(long, default_value_t = 1000)]
    pub conns: usize,
    /// Client threads, each making one connection at a time
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    /// Time between the workers' readiness and the first connection: milliseconds, or with a
    /// unit (50ms, 1s); `--settle-ms` is the same flag
    #[arg(long = "settle", alias = "settle-ms", value_name = "DURATION", default_value = "50", value_parser = crate::args::whole_millis)]
    pub settle_ms: u64,
    /// Rounds: every point once per round, the rounds one after the other; the findings are
    /// decided on the interval over the rounds (at least 3 needed)
    #[arg(long, default_value_t = herd::REPEAT)]
    pub repeat: usize,
    /// Write the report as JSON to this file (`-`: stdout, instead of the table)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

fn parse_modes(s: &str) -> Result<std::vec::Vec<Mode>, String> {
    if s.trim() == "all" {
        return Ok(Mode::ALL.to_vec());
    }
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            Mode::from_name(p).ok_or_else(|| {
                format!(
                    "unknown mode '{p}'; valid modes: all, {}",
                    Mode::ALL.map(|m| m.name()).join(", ")
                )
            })
        })
        .collect()
}

pub const EXAMPLES: &str = "\
Examples:
  evlab herd --workers 1,8,64 --as threads
      every way of waiting, 1, 8 and 64 worker threads on one listener
  evlab herd --mode epoll,exclusive --conns 2000 --json herd.json
      the shared epoll listener against EPOLLEXCLUSIVE, threads and processes

Exit status: 0 when every point ran; 1 on an error; 2 on a usage error.";

pub fn run(a: Args) -> anyhow::Result<()> {
    let as_ = match a.as_.as_str() {
        "threads" => vec![As::Threads],
        "processes" => vec![As::Processes],
        _ => vec![As::Threads, As::Processes],
    };
    let cfg = Config {
        modes: a.mode,
        workers: a.workers,
        as_,
        conns: a.conns,
        clients: a.clients,
        settle: Duration::from_millis(a.settle_ms),
        repeat: a.repeat,
        ..Config::default()
    };
    let report = herd::run(&cfg, |p| {
        let what = match p.status {
            Status::Ok => format!(
                "{:.2} wake-ups and {:.1} us CPU per accept",
                p.wakeups_per_accept, p.cpu_us_per_accept
            ),
            s => format!("{s:?}: {}", p.reason.as_deref().unwrap_or("")),
        };
        eprintln!(
            "herd: {} {} N={}: {what}",
            p.as_.name(),
            p.mode.name(),
            p.workers
        );
    })?;
    Ok(evlab_micro::emit(&report, a.json.as_deref(), || {
        herd::render(&report)
    })?)
}
