//! `evlab idle`: holds N idle connections open, re-opening any the server closes.
//!
//! Prints `idle: all N connections up` on stdout, exactly, each time all connections become up,
//! so that a script (the experiment runner) can wait for it; progress lines otherwise; and a
//! summary when stopped by SIGINT/SIGTERM or `--duration`.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::{bail, Context};
use evlab_load::idle::{run_idle, IdleConfig, IdleEvent, IdleStatus};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Number of idle connections to hold
    #[arg(value_parser = crate::args::count)]
    pub conns: usize,
    /// Server host name or address
    #[arg(long, default_value = "127.0.0.1")]
    pub server: String,
    /// Server port (`evlab serve` listens on the same one by default)
    #[arg(long, default_value_t = crate::DEFAULT_PORT)]
    pub port: u16,
    /// Stop after this long: seconds, or with a unit (30s, 2m; default: until SIGINT or
    /// SIGTERM)
    #[arg(long, value_name = "DURATION", value_parser = crate::args::seconds)]
    pub duration: Option<f64>,
    /// Source addresses from the idle pool 127.1.0.0/16 (loopback servers only; 0: one per
    /// 10,000 connections)
    #[arg(long, default_value_t = 0)]
    pub source_addrs: usize,
    /// Connection attempts per second (default: unlimited, 256 per pass of the event loop)
    #[arg(long)]
    pub rate: Option<f64>,
    /// How long a connect attempt may take before it is abandoned (counted as a timeout and
    /// retried): seconds, or 500ms, 5s…
    #[arg(long, value_name = "DURATION", default_value = "5", value_parser = crate::args::seconds)]
    pub connect_timeout: f64,
    /// Time between progress lines: seconds, or with a unit (500ms, 2s)
    #[arg(long, value_name = "DURATION", default_value = "1", value_parser = crate::args::seconds)]
    pub progress_interval: f64,
    /// Close connections with FIN at exit (default: RST, which leaves no TIME_WAIT behind)
    #[arg(long)]
    pub fin_on_exit: bool,
    /// Each connection sends one GET of --uri as soon as it is up and reads its reply, then
    /// stays idle (the LSE page's "dead" connections, of its deadconn_last test); all are up
    /// once every reply is in
    #[arg(long)]
    pub request_first: bool,
    /// The URI of --request-first's one request
    #[arg(long, default_value = "/one", requires = "request_first")]
    pub uri: String,
}

pub const EXAMPLES: &str = "\
Examples:
  evlab idle 10000
      hold 10,000 idle connections to 127.0.0.1:8080 until Ctrl-C
  evlab idle 1000 --port 8081 --duration 60 --rate 500
      1,000 connections to port 8081, opened at 500 per second, held a minute
  evlab idle 20000 --request-first --uri /one
      20,000 dead connections (the LSE page's deadconn_last: each sends one
      GET /one, reads the reply, then stays idle)

It prints `idle: all N connections up` on stdout each time all are up (with \
--request-first, once every connection also has its reply).

Exit status: 0 when all the connections were up at once at some point; 1 when they never \
were (the summary and the error say how many were), or on an error; 2 on a usage error.";

fn secs(name: &str, v: f64) -> anyhow::Result<Duration> {
    if !(v.is_finite() && v > 0.0) {
        bail!("--{name} {v}: must be a positive number of seconds");
    }
    Ok(Duration::from_secs_f64(v))
}

fn resolve(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve --server {host}"))?
        .collect();
    // IPv4 first: the idle source pool is IPv4 loopback.
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .with_context(|| format!("--server {host} has no address"))
}

fn progress_line(s: &IdleStatus) -> String {
    let replies = if s.requests_sent > 0 {
        format!(
            ", {} replies, {} awaiting a reply",
            s.replies, s.awaiting_reply
        )
    } else {
        String::new()
    };
    format!(
        "idle: {} up ({} connecting, {} waiting, {} reopened, {} failed{replies})",
        s.up,
        s.connecting,
        s.waiting,
        s.reopened,
        s.failed.total()
    )
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let server = resolve(&args.server, args.port)?;
    let mut cfg = IdleConfig::new(server, args.conns);
    cfg.source_addrs = args.source_addrs;
    cfg.duration = args.duration.map(|d| secs("duration", d)).transpose()?;
    cfg.rate = args.rate;
    cfg.connect_timeout = secs("connect-timeout", args.connect_timeout)?;
    cfg.progress_interval = secs("progress-interval", args.progress_interval)?;
    cfg.reset_on_exit = !args.fin_on_exit;
    cfg.request_uri = args.request_first.then(|| args.uri.clone());
    evlab_runtime::signals::install(&[]).context("cannot install the SIGINT/SIGTERM handlers")?;

    let pool = cfg.source_pool();
    eprintln!(
        "idle: holding {} connections to {server}{}",
        cfg.conns,
        match (pool.first(), pool.last()) {
            (Some(a), Some(b)) => format!(" from {} source addresses ({a}..{b})", pool.len()),
            _ => String::new(),
        }
    );
    let mut last_printed: Option<(usize, u64, u64, u64)> = None;
    let summary = run_idle(&cfg, &evlab_runtime::signals::signalled, |s| {
        let mut out = std::io::stdout().lock();
        match s.event {
            IdleEvent::AllUp => {
                let _ = writeln!(out, "idle: all {} connections up", s.target);
                last_printed = Some((s.up, s.reopened, s.failed.total(), s.replies));
            }
            IdleEvent::Tick => {
                let key = (s.up, s.reopened, s.failed.total(), s.replies);
                if last_printed != Some(key) {
                    let _ = writeln!(out, "{}", progress_line(s));
                    last_printed = Some(key);
                }
            }
            IdleEvent::Stopping => {}
        }
        let _ = out.flush();
    })?;
    println!("{summary}");
    if summary.all_up_after.is_none() {
        let s = &summary.last;
        bail!(
            "not all connections came up: at most {} of {} were up at once ({} at the end; \
             {} connection attempts failed, by cause above)",
            summary.peak_up,
            s.target,
            s.up,
            s.failed.total()
        );
    }
    Ok(())
}
