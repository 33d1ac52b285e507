//! `evlab proxy`: the reverse caching proxy from the command line.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::Context;
use evlab_poll::Mechanism;
use evlab_proxy::{AccessLog, Config, ConnectTarget, ForwardMode, Proxy};
use evlab_runtime::signals;

use crate::serve::parse_mechanism;
use evlab_runtime::ServiceState;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address to listen on (or a bare port for 127.0.0.1); port 0 picks a free port (printed
    /// as `listening on ADDR:PORT`)
    #[arg(
        long,
        value_name = "ADDR:PORT",
        default_value = "127.0.0.1:8081",
        value_parser = crate::args::listen_addr
    )]
    pub listen: SocketAddr,
    /// The origin server, HOST:PORT or its URL http://HOST:PORT (every request goes there,
    /// with its own path)
    #[arg(long, value_name = "HOST:PORT|URL", value_parser = crate::args::origin)]
    pub origin: String,
    /// Send this as every request's Host to the origin, instead of the client's (the cache
    /// still keys objects by the client's host)
    #[arg(long, value_name = "HOST")]
    pub origin_host: Option<String>,
    /// CONNECT may open a tunnel only to these targets, HOST:PORT,... (resolved at start; a
    /// client must name one as given, in any case). Anything else, and every CONNECT when none
    /// is given, is answered 403 without connecting anywhere
    #[arg(long, value_name = "HOST:PORT,...", value_delimiter = ',')]
    pub allow_connect: Vec<String>,
    /// Event mechanism (see `evlab serve --list-mechanisms`): every readiness mechanism, and
    /// uring, the io_uring completion engine
    #[arg(long, short = 'm', default_value = "epoll-et", value_parser = parse_mechanism)]
    pub mechanism: Mechanism,
    /// How response bodies travel: copy (read/write), splice (socket → pipe → socket),
    /// splice-keep (splice, with a tee'd copy of cacheable bodies for the cache),
    /// splice-release (splice through a pipe sized for the body's Content-Length, up to 1M,
    /// the head put in the pipe ahead of the body when both fit, and no look at the origin's
    /// socket after the body: the paper's AutoRelease, approximated). Request bodies are
    /// always copied; CONNECT
    /// tunnels are spliced both ways in the splice modes
    #[arg(long, default_value = "copy", value_parser = ForwardMode::from_name)]
    pub forward: ForwardMode,
    /// Worker threads, each with its own event loop, cache and pools
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Bodies with fewer bytes than this left after the head's read are copied, not spliced
    #[arg(long, value_name = "SIZE", default_value = "4096", value_parser = crate::args::bytes)]
    pub splice_min: u64,
    /// Pipes each worker may have open (idle and in use); beyond, bodies are copied
    #[arg(long, default_value_t = 256)]
    pub pipes: usize,
    /// Pipe capacity asked for with F_SETPIPE_SZ (0: the kernel's default, 64K)
    #[arg(long, value_name = "SIZE", default_value = "0", value_parser = crate::args::bytes)]
    pub pipe_size: u64,
    /// User-space buffer per copied body, request body batch and tunnel direction (the most
    /// one read takes)
    #[arg(long, value_name = "SIZE", default_value = "64K", value_parser = crate::args::bytes)]
    pub buffer_size: u64,
    /// Bytes of objects each worker's cache holds (0: no cache); K, M or G suffix
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = crate::args::bytes)]
    pub cache_bytes: u64,
    /// Largest body the cache stores
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = crate::args::bytes)]
    pub cache_max_object: u64,
    /// Bytes of objects each worker may be receiving for the cache at once, each counted at
    /// its full length: a cacheable miss that would pass it is forwarded without being kept,
    /// so slow readers of large objects cannot make the proxy hold more (0: only empty bodies)
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = crate::args::bytes)]
    pub keep_bytes: u64,
    /// Freshness for every response that states none of its own (no max-age, s-maxage or
    /// Expires), in place of the Last-Modified heuristic: an operator's override (seconds, or
    /// 30s, 5m…). Never given to an answer a Cookie, Set-Cookie or Authorization keeps
    /// private. Unset (the default): only what responses say, as nginx and Varnish
    #[arg(long, value_name = "DURATION", value_parser = crate::args::seconds_or_zero)]
    pub cache_ttl: Option<f64>,
    /// The most freshness a response with Last-Modified and no freshness of its own gets from
    /// the heuristic (a tenth of the time since it was last modified, RFC 9111 §4.2.2); 0: no
    /// heuristic freshness
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = crate::args::seconds_or_zero)]
    pub cache_heuristic_max: f64,
    /// Read a request body whole before contacting the origin (on), so that a slow client costs
    /// the proxy a buffer rather than an origin connection, as nginx's proxy_request_buffering;
    /// off: stream it to the origin as it comes
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = on_off)]
    pub request_buffering: bool,
    /// The largest request body buffered: a larger one is refused with 413 (nginx's
    /// client_max_body_size is 1M too); not a bound with --request-buffering off
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = crate::args::bytes)]
    pub request_buffer: u64,
    /// Idle origin connections each worker keeps for reuse
    #[arg(long, default_value_t = 64)]
    pub origin_idle: usize,
    /// Seconds a client connection may make no progress before it is closed (408 with part of
    /// a request head or body, 504 while waiting for the origin; 0 = no limit); tunnels too
    #[arg(long, value_name = "DURATION", default_value = "60", value_parser = crate::args::seconds_or_zero)]
    pub timeout: f64,
    /// Seconds a client has to send a complete request head, in total from when the proxy
    /// began to wait for it (at accept, or once the previous response was out), however it
    /// trickles in: else 408 and close (a close alone if not a byte came); 0 = no limit
    #[arg(long, value_name = "DURATION", default_value = "60", value_parser = crate::args::seconds_or_zero)]
    pub header_timeout: f64,
    /// Seconds a client may take none of its response before it is closed, restarted by
    /// every write that makes progress (as `evlab serve --send-timeout`); 0 = no limit
    #[arg(long, value_name = "DURATION", default_value = "60", value_parser = crate::args::seconds_or_zero)]
    pub send_timeout: f64,
    /// Seconds a connection to the origin (or a CONNECT target) may take to come up: else
    /// 504, where a refused connection is 502; 0 = only --timeout bounds it
    #[arg(long, value_name = "DURATION", default_value = "60", value_parser = crate::args::seconds_or_zero)]
    pub connect_timeout: f64,
    /// Append one line per request to FILE (`-`: standard output): client address, method,
    /// target, status, bytes sent to the client, cache (HIT, MISS or -), forwarding mode (copy,
    /// splice, splice-keep, splice-release or -) and microseconds to the last byte. Lines are written in
    /// batches (32 KiB, or a second after the first), never one write per request. Off by
    /// default
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<String>,
    #[command(flatten)]
    pub looping: crate::args::LoopFlags,
}

pub const EXAMPLES: &str = "\
Examples:
  evlab serve /tmp/www &
  evlab proxy --origin 127.0.0.1:8080
      proxy 127.0.0.1:8081 to the server on 8080, copying bodies through user
      space (--origin http://127.0.0.1:8080 says the same)
  evlab proxy --origin 127.0.0.1:8080 --forward splice -m epoll-et --workers 2
      splice bodies of known length socket -> pipe -> socket, two workers
  evlab load --port 8081 --uri /one --rate 100 --num-conns 100
      load through the proxy
  evlab proxy --origin 127.0.0.1:8080 --forward splice \\
    --allow-connect 127.0.0.1:8443
      also tunnel CONNECT 127.0.0.1:8443 (spliced both ways); any other
      CONNECT is 403
  evlab proxy --origin 127.0.0.1:8080 --access-log /var/log/evlab-access.log
      one line per request, e.g.
      127.0.0.1:41206 GET /one 200 193 HIT - 79

Any method is forwarded with its body (Content-Length or chunked); Expect: 100-continue is \
answered by the proxy; X-Forwarded-For gets the client's address appended. Only GET and \
HEAD are answered from the cache. The cache is a shared cache by RFC 9111, safe by default: \
a response is stored only with freshness of its own (s-maxage, max-age, Expires) or a tenth \
of the time since its Last-Modified (at most --cache-heuristic-max); --cache-ttl gives a \
freshness to the rest. An answer to a request with a Cookie or Authorization, or with \
Set-Cookie, is shared only when the origin says so (s-maxage, or public with a lifetime).

Exit status: 0 after a clean stop (SIGINT or SIGTERM); 1 on an error; 2 on a usage error.";

pub fn run(a: Args) -> anyhow::Result<()> {
    let origin = a
        .origin
        .to_socket_addrs()
        .with_context(|| format!("--origin {}: not a HOST:PORT that resolves", a.origin))?
        .next()
        .with_context(|| format!("--origin {}: no address", a.origin))?;
    let seconds = |flag: &str, v: f64| -> anyhow::Result<Option<Duration>> {
        if !v.is_finite() || v < 0.0 {
            anyhow::bail!("--{flag} must be a number of seconds >= 0, not {v}");
        }
        if v == 0.0 {
            return Ok(None);
        }
        // from_secs_f64 would panic past u64::MAX seconds.
        Duration::try_from_secs_f64(v)
            .map(Some)
            .with_context(|| format!("--{flag} {v}: too large"))
    };
    let mut cfg = Config::new(a.listen, origin, a.mechanism);
    cfg.forward = a.forward;
    cfg.workers = a.workers;
    cfg.splice_min = a.splice_min;
    cfg.pipes = a.pipes;
    cfg.pipe_size = usize::try_from(a.pipe_size).context("--pipe-size")?;
    cfg.buffer_size = usize::try_from(a.buffer_size).context("--buffer-size")?;
    cfg.cache_bytes = a.cache_bytes;
    cfg.cache_max_object = a.cache_max_object;
    cfg.keep_bytes = a.keep_bytes;
    cfg.cache_ttl = match a.cache_ttl {
        // An override of zero stores nothing that states no freshness of its own.
        Some(t) => Some(seconds("cache-ttl", t)?.unwrap_or(Duration::ZERO)),
        None => None,
    };
    cfg.cache_heuristic_max =
        seconds("cache-heuristic-max", a.cache_heuristic_max)?.unwrap_or(Duration::ZERO);
    cfg.request_buffering = a.request_buffering;
    cfg.request_buffer = a.request_buffer;
    cfg.origin_idle = a.origin_idle;
    cfg.origin_host = a.origin_host;
    cfg.allow_connect = a
        .allow_connect
        .iter()
        .filter(|t| !t.trim().is_empty())
        .map(|t| ConnectTarget::resolve(t))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("--allow-connect {e}"))?;
    cfg.timeout = seconds("timeout", a.timeout)?;
    cfg.header_timeout = seconds("header-timeout", a.header_timeout)?;
    cfg.send_timeout = seconds("send-timeout", a.send_timeout)?;
    cfg.connect_timeout = seconds("connect-timeout", a.connect_timeout)?;
    cfg.access_log = match a.access_log.as_deref() {
        Some(path) => Some(std::sync::Arc::new(
            AccessLog::open(path).with_context(|| format!("--access-log {path}"))?,
        )),
        None => None,
    };
    let access_log = cfg.access_log.clone();
    crate::args::apply_loop_flags!(cfg, a.looping);
    signals::ignore_sigpipe();
    let proxy = Proxy::start(cfg)?;
    signals::install(&proxy.shared().wakers()).context("installing signal handlers")?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {}", proxy.local_addr())?;
        out.flush()?;
    }
    let shared = proxy.shared().clone();
    let result = proxy.wait();
    eprint!("{}", shared.summary());
    if let Some(n) = access_log.map(|l| l.failed_batches()).filter(|&n| n > 0) {
        eprintln!("access log: {n} batches of lines could not be written and were dropped");
    }
    Ok(result?)
}

/// `on` or `off` (also true/false, yes/no, 1/0).
fn on_off(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(format!("'{s}': give on or off")),
    }
}
