//! `evlab serve`: the μserver from the command line.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use evlab_poll::{Mechanism, Support};
use evlab_runtime::signals;
use evlab_runtime::ServiceState;
use evlab_server::prefork::Prefork;
use evlab_server::{AcceptMode, Config, FileIo, Server};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address to listen on, or a bare port for 127.0.0.1; port 0 picks a free port (printed as
    /// `listening on ADDR:PORT`).
    /// `evlab load` and `evlab idle` connect to the same port by default
    #[arg(
        long,
        value_name = "ADDR:PORT",
        default_value_t = SocketAddr::from(([127, 0, 0, 1], crate::DEFAULT_PORT)),
        value_parser = crate::args::listen_addr
    )]
    pub listen: SocketAddr,
    /// The directory to serve (the document root); default: the current directory, as
    /// `python -m http.server` and miniserve take it
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The document root, as DIR gives it (give one or the other)
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Event mechanism (see --list-mechanisms)
    #[arg(long, short = 'm', default_value = "epoll-et", value_parser = parse_mechanism)]
    pub mechanism: Mechanism,
    /// List the mechanisms, whether this kernel supports each, and exit
    #[arg(long)]
    pub list_mechanisms: bool,
    /// Workers, each with its own event loop: threads of this process, or processes (--as)
    #[arg(long, default_value_t = 1, value_parser = crate::args::count)]
    pub workers: usize,
    /// What a worker is: threads (one process, a thread per worker) or processes (pre-forked
    /// like Apache's prefork: the parent binds, forks --workers children and supervises; each
    /// child runs one event loop; /.evlab/stats sums every process; SIGINT or SIGTERM stops
    /// them all)
    #[arg(long = "as", value_name = "MODEL", default_value = "threads", value_parser = ["threads", "processes"])]
    pub model: String,
    /// How workers share the port: shared (one listener, every worker woken), exclusive (one
    /// listener registered with EPOLLEXCLUSIVE, so a connection wakes one worker; epoll-lt,
    /// epoll-et and epoll2 only, refused on the others) or reuseport (a listener per worker with
    /// SO_REUSEPORT; then another process of the same user can bind the same port and share its
    /// traffic, so it is only used when asked). With --as processes the parent binds: shared and
    /// exclusive give every child the one listener, reuseport a socket each
    #[arg(long, default_value = "shared", value_parser = AcceptMode::from_name)]
    pub accept_mode: AcceptMode,
    /// Connections accepted per listener notification: a number or `inf` (paper §5.2)
    #[arg(long, default_value = "inf", value_parser = parse_accept_limit)]
    pub accept_limit: AcceptLimit,
    /// How file bodies reach the socket: cache (from the content cache's memory; files over
    /// --max-in-memory by sendfile), read (pread and write, every response), mmap (a mapping
    /// per response, written from it) or sendfile (the paper's configuration, with --cork)
    #[arg(long, value_name = "MODE", default_value = "cache", value_parser = parse_file_io)]
    pub file_io: FileIo,
    /// The same as --file-io sendfile
    #[arg(long, conflicts_with = "file_io")]
    pub sendfile: bool,
    /// Set TCP_CORK around each response whose body comes from its file
    #[arg(long)]
    pub cork: bool,
    /// Write each response as soon as it is ready instead of waiting for a writable event
    /// (level-triggered mechanisms; edge-triggered epoll always does)
    #[arg(long)]
    pub eager_write: bool,
    /// Edge-triggered mechanisms: write the replies of one sweep of events together after it,
    /// instead of each as soon as its request is read
    #[arg(long)]
    pub batch_writes: bool,
    /// Largest request head accepted (bytes, or with K/M); larger gets 431
    #[arg(long, value_name = "SIZE", default_value = "8192", value_parser = crate::args::size)]
    pub max_header_bytes: usize,
    /// Longest request line accepted (bytes, or with K/M); longer gets 414
    #[arg(long, value_name = "SIZE", default_value = "8192", value_parser = crate::args::size)]
    pub max_request_line: usize,
    /// How long a connection may take to send a complete request head: seconds, or 500ms, 30s…
    /// (0 = no limit)
    #[arg(long, value_name = "DURATION", default_value = "60", value_parser = crate::args::seconds_or_zero)]
    pub header_timeout: f64,
    /// Seconds a reply may wait with the peer taking none of it before the connection is
    /// closed, restarted by every write that makes progress (nginx's send_timeout; 0 = no limit)
    #[arg(long, value_name = "DURATION", default_value = "60", value_parser = crate::args::seconds_or_zero)]
    pub send_timeout: f64,
    /// Think time per object, as a Web Polygraph origin has: each reply is held this long
    /// before it is sent, without blocking the loop; pipelined requests are answered one at a
    /// time, each delayed. Milliseconds, or with a unit (2s, 500ms); 0 = none
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = crate::args::millis)]
    pub origin_delay: f64,
    /// With --origin-delay: draw each reply's delay from a normal distribution with this
    /// standard deviation around it, clamped at 0 (milliseconds, or with a unit; Web
    /// Polygraph's servers, as the proxy paper ran them: --origin-delay 2500 --origin-delay-sd 1000)
    #[arg(long, value_name = "DURATION", value_parser = crate::args::millis)]
    pub origin_delay_sd: Option<f64>,
    /// Answer paths starting with this prefix with `Cache-Control: no-store` (the uncacheable
    /// objects of `evlab load --polymix`, under /polymix/u/ of its file set)
    #[arg(long, value_name = "PATH")]
    pub no_store_prefix: Option<String>,
    /// Files larger than this are not cached in memory (always sendfile): bytes, or with a unit
    /// (64K, 64M)
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = crate::args::bytes)]
    pub max_in_memory: u64,
    /// Bytes of file bodies each worker's content cache holds in memory; beyond it the least
    /// recently used are dropped and read again when next asked for. A number with an optional
    /// K, M or G suffix (powers of 1,024), e.g. 64M. HEAD and 304 answers read no body
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = crate::args::bytes)]
    pub cache_bytes: u64,
    /// Files each worker's content cache keeps open (those whose body it holds, or sends by
    /// sendfile)
    #[arg(long, default_value_t = 1024, value_parser = parse_cache_files)]
    pub cache_files: usize,
    #[command(flatten)]
    pub looping: crate::args::LoopFlags,
}

pub const EXAMPLES: &str = "\
Examples:
  evlab serve
      serve the current directory on 127.0.0.1:8080 with edge-triggered epoll
  evlab serve /tmp/www --mechanism select --listen 127.0.0.1:0 --stats
      select(2) on a free port (printed); counters at GET /.evlab/stats
  evlab serve /tmp/www -m epoll-lt --sendfile --cork --accept-limit 10
      the paper's configuration, with a limit on accepts per notification
  evlab serve /tmp/www --origin-delay 2500
      an origin for a proxy: every reply waits 2.5 s (the Polymix-4 servers'
      mean think time; add --origin-delay-sd 1000 for their normal distribution)
  evlab serve /tmp/www -m epoll-lt --workers 64 --as processes --stats
      64 pre-forked processes on one shared listener (the accept herd,
      Apache-style); /.evlab/stats gives each process's accept wake-ups
  evlab serve --list-mechanisms
      the mechanisms and whether this kernel supports each

Ctrl-C (SIGINT) or SIGTERM stops accepting, finishes the replies in flight and prints a \
summary on stderr; the exit status is then 0 (a graceful stop is not a failure).";

#[derive(Copy, Clone, Debug)]
pub struct AcceptLimit(pub Option<usize>);

fn parse_file_io(s: &str) -> Result<FileIo, String> {
    FileIo::from_name(s).ok_or_else(|| {
        format!(
            "'{s}' is not a file I/O mode: one of {}",
            FileIo::NAMES.join(", ")
        )
    })
}

fn parse_accept_limit(s: &str) -> Result<AcceptLimit, String> {
    if s.eq_ignore_ascii_case("inf") || s.eq_ignore_ascii_case("infinity") {
        return Ok(AcceptLimit(None));
    }
    match s.parse::<usize>() {
        Ok(0) | Err(_) => Err(format!(
            "'{s}' is not a valid accept limit: give a whole number of at least 1, or inf"
        )),
        Ok(n) => Ok(AcceptLimit(Some(n))),
    }
}

fn parse_cache_files(s: &str) -> Result<usize, String> {
    s.trim().parse::<usize>().map_err(|_| {
        format!("'{s}' is not a valid number of files: give a whole number (0 keeps none open)")
    })
}

pub(crate) fn parse_mechanism(s: &str) -> Result<Mechanism, String> {
    Mechanism::from_name(s).map_err(|e| e.to_string())
}

/// One line per mechanism: name, description and `supported: yes` or `supported: no: WHY`, in
/// columns as wide as their widest entry. The support column comes last so that its reason may
/// run on (`evlab run` and the benchmarks read the line's first word and what follows
/// `supported: `).
pub fn list_mechanisms() -> String {
    let rows: Vec<(&str, &str, String)> = Mechanism::ALL
        .iter()
        .map(|m| {
            let status = match m.support() {
                Support::Yes => "yes".to_string(),
                Support::No(why) => format!("no: {why}"),
            };
            (m.name(), m.describe(), status)
        })
        .collect();
    let w_name = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let w_desc = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, desc, status) in &rows {
        out.push_str(&format!(
            "{name:<w_name$}  {desc:<w_desc$}  supported: {status}\n"
        ));
    }
    out
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.list_mechanisms {
        print!("{}", list_mechanisms());
        return Ok(());
    }
    let root = match (a.dir, a.root) {
        (Some(dir), Some(root)) => {
            return Err(crate::args::usage(format!(
                "the document root is given twice, as DIR ({}) and as --root ({}): give one",
                dir.display(),
                root.display()
            )))
        }
        (Some(d), None) | (None, Some(d)) => d,
        (None, None) => PathBuf::from("."),
    };
    let seconds = |flag: &str, v: f64| -> anyhow::Result<Option<Duration>> {
        if !v.is_finite() || v < 0.0 {
            anyhow::bail!("--{flag} must be a number of seconds >= 0, not {v}");
        }
        Ok((v > 0.0).then(|| Duration::from_secs_f64(v)))
    };
    let header_timeout = seconds("header-timeout", a.header_timeout)?;
    let send_timeout = seconds("send-timeout", a.send_timeout)?;
    let origin_delay = seconds("origin-delay", a.origin_delay / 1000.0).map_err(|_| {
        anyhow::anyhow!(
            "--origin-delay must be milliseconds >= 0, not {}",
            a.origin_delay
        )
    })?;
    let mut cfg = Config::new(a.listen, root, a.mechanism);
    cfg.workers = a.workers;
    cfg.accept_mode = a.accept_mode;
    cfg.accept_limit = a.accept_limit.0;
    cfg.file_io = if a.sendfile {
        FileIo::Sendfile
    } else {
        a.file_io
    };
    cfg.cork = a.cork;
    cfg.eager_write = a.eager_write;
    cfg.batch_writes = a.batch_writes;
    cfg.limits.max_head = a.max_header_bytes;
    cfg.limits.max_request_line = a.max_request_line;
    cfg.header_timeout = header_timeout;
    cfg.send_timeout = send_timeout;
    cfg.origin_delay = origin_delay;
    if let Some(sd) = a.origin_delay_sd {
        cfg.origin_delay_sd = seconds("origin-delay-sd", sd / 1000.0).map_err(|_| {
            anyhow::anyhow!("--origin-delay-sd must be milliseconds >= 0, not {sd}")
        })?;
    }
    cfg.no_store_prefix = a.no_store_prefix.clone();
    crate::args::apply_loop_flags!(cfg, a.looping);
    cfg.max_in_memory = a.max_in_memory;
    cfg.cache_bytes = a.cache_bytes;
    cfg.cache_files = a.cache_files;
    signals::ignore_sigpipe();
    if a.model == "processes" {
        return run_processes(cfg);
    }
    let server = Server::start(cfg)?;
    signals::install(&server.shared().wakers()).context("installing signal handlers")?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {}", server.local_addr())?;
        out.flush()?;
    }
    let shared = server.shared().clone();
    let result = server.wait();
    eprint!("{}", shared.summary());
    Ok(result?)
}

/// `--as processes`: forks the workers first thing (no thread has started in this process),
/// then supervises them until SIGINT or SIGTERM.
fn run_processes(cfg: Config) -> anyhow::Result<()> {
    let server = Prefork::start(cfg)?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {}", server.local_addr())?;
        out.flush()?;
    }
    let shared = server.shared().clone();
    let result = server.run(&mut |line| eprintln!("{line}"));
    eprint!("{}", shared.summary());
    Ok(result?)
}
