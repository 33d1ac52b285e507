//! `evlab load`: the generator from the command line, in httperf's model (its flag names) or
//! wrk's and wrk2's (`-c`, `-d`, `-t`, `-H`, `-R`).

use std::io::{IsTerminal, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use anyhow::{bail, Context};
use evlab_load::gen::{self, Live, LoadConfig, Outcome, Watch};
use evlab_load::summary::{self, LoadReport};
use evlab_load::workload::polymix::PolymixConfig;
use evlab_load::workload::specweb::{CallsPerConn, SpecWebConfig};
use evlab_load::workload::{Choice, Method};

use crate::args::usage;
use crate::output::Sink;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The target as one URL, as wrk and oha take it (http://HOST[:PORT]/PATH): sets --server,
    /// --port and --uri
    #[arg(value_name = "URL", conflicts_with_all = ["server", "port", "uri"])]
    pub url: Option<String>,
    /// Server host name or address
    #[arg(long, default_value = "127.0.0.1")]
    pub server: String,
    /// Server port (`evlab serve` listens on the same one by default)
    #[arg(long, default_value_t = crate::DEFAULT_PORT)]
    pub port: u16,
    /// URI requested by every call (the one-byte workload is /one)
    #[arg(long, default_value = "/")]
    pub uri: String,
    /// Request method, GET or HEAD (session files may give their own per line with method=)
    #[arg(long, default_value = "GET", value_parser = ["GET", "HEAD"], ignore_case = true)]
    pub method: String,
    /// httperf's model: connections (sessions) started per second, on a fixed schedule (or
    /// Poisson), each making --num-calls requests; at least one per hour. Without it, wrk's
    /// model (-c)
    #[arg(long, value_parser = crate::args::rate, allow_hyphen_values = true)]
    pub rate: Option<f64>,
    /// wrk's model: keep N connections open, each sending its next request as soon as the last
    /// is answered, for the -d window (default 10, as wrk's -c; a closed connection is replaced)
    #[arg(short = 'c', long, value_name = "N", value_parser = crate::args::count, conflicts_with_all = ["rate", "num_conns", "duration", "wsesslog", "poisson"])]
    pub connections: Option<usize>,
    /// wrk2's model: hold this many requests per second over the -c connections, each request
    /// due at its slot whatever the server does; latency is measured from when it was due
    /// (corrected), and from when it was sent (uncorrected) as well
    #[arg(short = 'R', long, value_name = "RATE", value_parser = crate::args::rate, allow_hyphen_values = true, conflicts_with_all = ["rate", "num_conns", "duration", "wsesslog", "poisson", "pipeline"])]
    pub request_rate: Option<f64>,
    /// A header added to every request, as wrk's -H (repeatable): 'Name: value'. A Host or
    /// User-Agent given so replaces the generator's own
    #[arg(short = 'H', long = "header", value_name = "HEADER", value_parser = header_line)]
    pub headers: Vec<String>,
    /// Exponentially distributed gaps between starts instead of fixed ones
    #[arg(long)]
    pub poisson: bool,
    /// Connections to start in all (the run ends when they are done)
    #[arg(long)]
    pub num_conns: Option<u64>,
    /// How long to keep starting connections (alternative to --num-conns): seconds, or with a
    /// unit (500ms, 30s, 2m)
    #[arg(long, value_name = "DURATION", value_parser = crate::args::seconds)]
    pub duration: Option<f64>,
    /// End the whole run this long after its start, whatever is in flight (as wrk's -d and k6's
    /// duration do): connections still open are closed and counted neither as completed nor as
    /// errors. Measures a fixed set of busy connections (--num-conns N with many --num-calls)
    /// over a fixed window
    /// (-d: wrk's window; in wrk's model 10 s unless given)
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = crate::args::seconds)]
    pub stop_after: Option<f64>,
    /// Calls (requests) per connection
    #[arg(long, default_value_t = 1)]
    pub num_calls: usize,
    /// How long each stage (connect, reply) may take before the connection counts as
    /// client-timo (seconds, or 500ms, 2s…)
    #[arg(long, value_name = "DURATION", default_value = "5", value_parser = crate::args::seconds)]
    pub timeout: f64,
    /// How long the server may take to start a reply, added to --timeout while replies are
    /// awaited (httperf's)
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = crate::args::seconds_or_zero)]
    pub think_timeout: f64,
    /// Accepted for httperf compatibility (evlab load always uses many ports and addresses)
    #[arg(long)]
    pub hog: bool,
    /// Requests kept in flight per connection (1: one at a time)
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,
    /// Generator threads, each with its own share of the schedule (or of the -c connections)
    #[arg(short = 't', long, default_value_t = 1)]
    pub threads: usize,
    /// Source addresses in 127.2.0.0/16 to spread connections over (loopback targets; 0: none)
    #[arg(long, default_value_t = 64)]
    pub source_addrs: usize,
    /// One URI per line, taken round-robin, --num-calls per connection
    #[arg(long, value_name = "FILE", conflicts_with_all = ["wsesslog", "specweb"])]
    pub uri_list: Option<PathBuf>,
    /// httperf session log: N,X,FILE (N sessions, X default think seconds, FILE)
    #[arg(long, conflicts_with = "specweb")]
    pub wsesslog: Option<String>,
    /// SPECweb99-like workload over the file set in DIR (made by `evlab fileset`)
    #[arg(long, value_name = "DIR")]
    pub specweb: Option<PathBuf>,
    /// SPECweb99 requests per connection: specweb99, N, uniform:A-B or mixed:P,A-B
    #[arg(long, default_value = "specweb99")]
    pub specweb_calls: String,
    /// URI prefix of the file set below the server's root (SPECweb99 workload)
    #[arg(long, default_value = "")]
    pub specweb_prefix: String,
    /// Polymix-like proxy workload over the set in DIR (made by `evlab fileset DIR --polymix N`;
    /// the origin serves DIR with --no-store-prefix /polymix/u/); see docs/workloads.md
    #[arg(long, value_name = "DIR", conflicts_with_all = ["specweb", "wsesslog", "uri_list"])]
    pub polymix: Option<PathBuf>,
    /// Polymix: offered hits, as a share of requests (Polymix-4: 0.58)
    #[arg(long, default_value_t = 0.58)]
    pub hit_ratio: f64,
    /// Polymix: requests for cacheable objects, as a share (Polymix-4: about 0.70)
    #[arg(long, default_value_t = 0.70)]
    pub cacheable: f64,
    /// Polymix: Zipf exponent of the hits' popularity (chosen: 1.0)
    #[arg(long, default_value_t = 1.0)]
    pub zipf: f64,
    /// Polymix: requests per connection drawn from Zipf over 1..=N (Polymix-4: 64; 1 = one)
    #[arg(long, default_value_t = 64)]
    pub polymix_calls: usize,
    /// Write the results as JSON to this file, or to stdout with `-` (the text report then goes
    /// to stderr). The file is checked before the run, and written on Ctrl-C too
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write one CSV row per sample interval to this file (`-`: stdout, as for --json)
    #[arg(long, value_name = "FILE")]
    pub samples: Option<PathBuf>,
    /// Write every reply as one CSV row to this file (`due_us,latency_us,status`: when its
    /// request was due, in µs from the schedule's start, and its latency as the histogram
    /// records it), sorted by due time; `-`: stdout, as for --json. Costs one row of memory
    /// (24 bytes) per reply during the run
    #[arg(long, value_name = "FILE")]
    pub latencies: Option<PathBuf>,
    /// How long each reply-rate sample is (httperf uses 5 s): seconds, or with a unit (500ms, 1s)
    #[arg(long, value_name = "DURATION", default_value = "5", value_parser = crate::args::seconds)]
    pub sample_interval: f64,
    /// Random seed (Poisson gaps, SPECweb99 and Polymix draws)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Time every syscall the generator makes and report microseconds per connection in each
    #[arg(long)]
    pub profile: bool,
    /// No text report and no progress line: only --json and --samples are written (one of them
    /// is required)
    #[arg(long, short)]
    pub quiet: bool,
    /// The same as `--threshold 'errors<=SHARE'`: at most this share of the connections
    /// started may end in an error (a fraction such as 0.01 or a percentage such as 1%)
    #[arg(long, value_name = "SHARE", value_parser = crate::args::share)]
    pub max_error_rate: Option<f64>,
    /// A pass/fail criterion on the whole run, as k6 has (repeatable): `p99<20ms` (any
    /// percentile pN, or max; plain numbers are ms), `errors<0.1%` (connections ended in an
    /// error), `failed<1%` (replies other than 2xx/3xx), `rate>0.99` (requests answered 2xx/3xx),
    /// `rps>1000`; <= and >= too. Defaults: `errors<=1%` and `failed<=1%`, each replaced by a
    /// threshold on its metric; `none` drops them. Past a threshold the run exits 99
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,
    /// Start the schedule at this wall-clock instant, Unix seconds (`date +%s.%N`), once
    /// everything is ready: so that clients on several hosts start together. If it has
    /// passed by then, the run starts at once and reports how late (`clock.late_ms` in the
    /// JSON, and a warning). At most an hour ahead, and 10 s behind
    #[arg(long, value_name = "UNIX_SECONDS")]
    pub start_at: Option<f64>,
    /// Print httperf's report alone, without the summary (requests/s, success, errors,
    /// latency percentiles) that leads it
    #[arg(long)]
    pub httperf: bool,
    /// Add the latency distribution (50, 75, 90, 99, 99.9, 99.99 and 100th percentiles), as
    /// wrk's --latency does
    #[arg(long)]
    pub latency: bool,
    /// Exit with status 0 even when no reply arrived (by default that is a failure, status 1);
    /// for callers that judge the report themselves, such as `evlab run`
    #[arg(long)]
    pub allow_no_replies: bool,
}

pub const EXAMPLES: &str = "\
Two models: httperf's (--rate: connections per second, each making --num-calls requests) \
and wrk's (-c N -d D: N connections kept busy for D; with -R, wrk2's held request rate). \
Without --rate, wrk's, with its defaults -c 10 -d 10s.

Examples:
  evlab load http://127.0.0.1:8080/one -c 50 -d 10s --latency
      wrk's model: 50 busy connections for 10 s, with the latency distribution
  evlab load http://127.0.0.1:8080/one -c 50 -R 20000 -d 30s
      wrk2's: 20,000 requests/s over 50 connections, latency from each
      request's due time
  evlab load --uri /one --rate 100 --num-conns 500
      500 connections, 100 per second, one GET /one each, to 127.0.0.1:8080
  evlab load http://127.0.0.1:8080/one --rate 100 --duration 10s
      the same target as a URL (as wrk and oha take it), for ten seconds
  evlab load --uri /one --rate 1000 --duration 60 --num-calls 10 --json r.json
      a minute of 1,000 connections/s with 10 requests each; the report also
      as JSON
  evlab load --uri /one --rate 200 --duration 30 --json - --quiet | jq .replies
      JSON only, on stdout
  evlab load --specweb /srv/fileset --rate 300 --num-conns 9000 \\
    --threshold 'errors<0.1%'
      the SPECweb99 workload; exit status 99 if 0.1% or more of connections fail
  evlab load http://127.0.0.1:8080/one --rate 500 -d 10s --threshold 'p99<20ms'
      exit status 99 if the 99th percentile latency reaches 20 ms (or the
      defaults fail)
  evlab load --polymix /tmp/polymix --port 3128 --rate 50 --duration 10
      the Polymix-like workload through a proxy on port 3128 (58% offered hits,
      70% cacheable); the origin:
      evlab serve /tmp/polymix --no-store-prefix /polymix/u/
  evlab load --uri /one --rate 500 --duration 30 --json c1.json \\
    --start-at $(date -d '+5 sec' +%s.%N)
      start at an agreed instant, 5 s from now (run the same on other clients),
      then merge their reports exactly: evlab load-merge c1.json c2.json

The JSON report carries the latency histogram (HdrHistogram V2, compressed, base64: \
latency_histogram) and the run's wall-clock start and end (clock), for evlab load-merge.

Ctrl-C (SIGINT) or SIGTERM stops the run early: the report and --json cover what was done \
until then, and the exit status is 130; a second Ctrl-C ends the process at once.

Exit status: 0 when replies arrived and every threshold held (by default: at most 1% of \
connections ended in an error, at most 1% of replies other than 2xx/3xx); 99 past a \
threshold; 1 when no reply arrived (unless --allow-no-replies) or on an error; 2 on a usage \
error; 130 when interrupted.";

/// A request header as wrk's -H takes it, `Name: value`: a token, a colon, a value without
/// line breaks.
fn header_line(s: &str) -> Result<String, String> {
    let bad = |why: &str| format!("'{s}' is not a header: {why} (give 'Name: value')");
    let (name, value) = s.split_once(':').ok_or_else(|| bad("no colon"))?;
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(bad("the name is not a token"));
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(bad("the value has a line break"));
    }
    Ok(format!("{name}: {}", value.trim()))
}

fn positive(name: &str, v: f64) -> anyhow::Result<Duration> {
    if !(v.is_finite() && v > 0.0) {
        return Err(usage(format!(
            "{name} must be a positive number of seconds, not {v}"
        )));
    }
    Ok(Duration::from_secs_f64(v))
}

pub fn run(mut a: Args) -> anyhow::Result<()> {
    if let Some(url) = &a.url {
        let (host, port, uri) = crate::args::http_url(url).map_err(usage)?;
        (a.server, a.port, a.uri) = (host, port, uri);
    }
    let target: SocketAddr = (a.server.as_str(), a.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve --server {}", a.server))?
        .find(|s| s.is_ipv4())
        .with_context(|| format!("--server {} has no IPv4 address", a.server))?;
    let model = Model::of(&a);
    let (duration, method) = check_numbers(&a)?;
    let (choice, sessions) = workload(&a, method)?;
    let factory = choice.factory()?;
    let num_conns = match (&model, a.num_conns, duration) {
        (Model::Wrk { conns, .. }, ..) => Some(*conns as u64),
        (Model::Httperf { .. }, None, None) => sessions,
        (Model::Httperf { .. }, n, _) => n,
    };
    let cfg = load_config(&a, &model, target, num_conns, duration)?;
    let thresholds = crate::threshold::resolve(&a.thresholds, a.max_error_rate)
        .map_err(|e| usage(format!("--threshold {e}")))?;
    if let Some(at) = a.start_at {
        gen::check_start_at(at, gen::unix_now()).map_err(|e| usage(e.to_string()))?;
    }
    if matches!(model, Model::Httperf { .. }) && num_conns.is_none() && duration.is_none() {
        return Err(usage(
            "give --num-conns or --duration: every run must end by itself",
        ));
    }
    let mut outputs = Outputs::open(&a)?;

    // SIGINT and SIGTERM stop the run; the report covers what was done until then.
    evlab_runtime::signals::install(&[]).context("cannot install the SIGINT/SIGTERM handlers")?;
    let progress = !a.quiet && std::io::stderr().is_terminal();
    let mut shown = Duration::ZERO;
    // How long the run should take, for the progress line's ETA: its window, or its schedule.
    let expected = cfg
        .stop_after
        .or(cfg.duration)
        .or_else(|| num_conns.map(|n| Duration::from_secs_f64(n as f64 / cfg.rate)));
    let outcome = gen::run_watched(
        &cfg,
        &*factory,
        &evlab_runtime::signals::signalled,
        |w| match w {
            Watch::Stopping { elapsed } => {
                // A second Ctrl-C ends the process at once.
                evlab_runtime::signals::restore_default();
                eprintln!(
                    "{}evlab load: interrupted after {:.1} s; finishing the report of what was \
                     done (Ctrl-C again to quit at once)",
                    if progress { "\n" } else { "" },
                    elapsed.as_secs_f64()
                );
            }
            Watch::Tick { elapsed, live } => {
                if progress && elapsed.saturating_sub(shown) >= Duration::from_millis(200) {
                    shown = elapsed;
                    eprint!("{}", progress_line(elapsed, expected, num_conns, live));
                }
            }
        },
    )?;
    if progress && !outcome.interrupted {
        eprintln!();
    }
    if let Some(late) = outcome.info.clock.late_ms.filter(|&l| l > 1.0) {
        eprintln!(
            "evlab load: warning: started {late:.3} ms after --start-at {:.6}: it had passed \
             when the generator was ready",
            outcome.info.clock.start_at.unwrap_or_default()
        );
    }
    // The build, not the bare version: `evlab compare` warns on reports of different builds.
    let r = outcome.report(env!("EVLAB_BUILD"), choice.label());
    outputs.write(&r, &outcome.stats)?;
    if !a.quiet {
        let opts = summary::TextOptions {
            httperf_only: a.httperf,
            distribution: a.latency,
        };
        outputs.text(&outcome, target, opts)?;
    }
    verdict(&a, &outcome, &thresholds, target)
}

/// Which of the two models a run takes: httperf's (`--rate`: connections started on a
/// schedule, each making its calls) or wrk's (`-c`: connections kept busy for a window, with
/// `-R` at a held request rate, as wrk2). Without `--rate`, wrk's, with its defaults.
enum Model {
    Httperf {
        rate: f64,
    },
    Wrk {
        conns: usize,
        window: f64,
        request_rate: Option<f64>,
    },
}

impl Model {
    fn of(a: &Args) -> Model {
        match a.rate {
            Some(rate) => Model::Httperf { rate },
            None => Model::Wrk {
                conns: a.connections.unwrap_or(10),
                window: a.stop_after.unwrap_or(10.0),
                request_rate: a.request_rate,
            },
        }
    }
}

/// The duration and the counts are in range, and the method fits the workload: the duration
/// and the method.
fn check_numbers(a: &Args) -> anyhow::Result<(Option<Duration>, Method)> {
    let duration = a.duration.map(|d| positive("--duration", d)).transpose()?;
    if a.num_conns == Some(0) {
        return Err(usage("--num-conns must be at least 1"));
    }
    if a.num_calls == 0 || a.pipeline == 0 || a.threads == 0 {
        return Err(usage(
            "--num-calls, --pipeline and --threads must be at least 1",
        ));
    }
    let method = Method::parse(&a.method).map_err(|e| anyhow::anyhow!("--method: {e}"))?;
    if (a.specweb.is_some() || a.polymix.is_some()) && method != Method::Get {
        return Err(usage(format!(
            "--method {}: the SPECweb99 workload sends GET requests only",
            a.method
        )));
    }
    Ok((duration, method))
}

/// The workload the flags choose, and with `--wsesslog` its number of sessions (the run's
/// connections unless --num-conns or --duration says otherwise).
fn workload(a: &Args, method: Method) -> anyhow::Result<(Choice, Option<u64>)> {
    if let Some(path) = &a.uri_list {
        let choice = Choice::UriList {
            path: path.clone(),
            calls: a.num_calls,
            method,
        };
        return Ok((choice, None));
    }
    if let Some(spec) = &a.wsesslog {
        let parts: Vec<&str> = spec.splitn(3, ',').collect();
        let [n, x, file] = parts[..] else {
            bail!("--wsesslog takes N,X,FILE (sessions, default think seconds, file), not {spec}");
        };
        let n: u64 = n
            .trim()
            .parse()
            .with_context(|| format!("--wsesslog: '{n}' is not a number of sessions"))?;
        let x: f64 = x
            .trim()
            .parse()
            .with_context(|| format!("--wsesslog: '{x}' is not a think time in seconds"))?;
        let choice = Choice::SessLog {
            spec: spec.clone(),
            file: PathBuf::from(file),
            think: Duration::from_secs_f64(x.max(0.0)),
            method,
        };
        return Ok((choice, Some(n)));
    }
    let choice = if let Some(dir) = &a.polymix {
        let config = PolymixConfig {
            hit_ratio: a.hit_ratio,
            cacheable: a.cacheable,
            zipf: a.zipf,
            calls_max: a.polymix_calls,
            objects: 0,
            uri_prefix: a.specweb_prefix.clone(),
        };
        Choice::Polymix {
            dir: dir.clone(),
            config,
            seed: a.seed,
        }
    } else if let Some(dir) = &a.specweb {
        let calls: CallsPerConn = a
            .specweb_calls
            .parse()
            .map_err(|e| anyhow::anyhow!("--specweb-calls: {e}"))?;
        let config = SpecWebConfig {
            calls,
            uri_prefix: a.specweb_prefix.clone(),
            ..SpecWebConfig::default()
        };
        Choice::SpecWeb {
            dir: dir.clone(),
            config,
            seed: a.seed,
        }
    } else {
        if !a.uri.starts_with('/') {
            return Err(usage(format!("--uri must start with '/', not {}", a.uri)));
        }
        Choice::Fixed {
            uri: a.uri.clone(),
            calls: a.num_calls,
            method,
        }
    };
    Ok((choice, None))
}

/// The generator's configuration from the flags.
fn load_config(
    a: &Args,
    model: &Model,
    target: SocketAddr,
    num_conns: Option<u64>,
    duration: Option<Duration>,
) -> anyhow::Result<LoadConfig> {
    Ok(LoadConfig {
        server: target,
        host: if a.port == 80 {
            a.server.clone()
        } else {
            format!("{}:{}", a.server, a.port)
        },
        // wrk's connections start at once; with -R one request slot apart, so that their
        // requests are spread evenly over each pace.
        rate: match *model {
            Model::Httperf { rate } => rate,
            Model::Wrk {
                request_rate: Some(r),
                ..
            } => r,
            Model::Wrk { .. } => 1e6,
        },
        poisson: a.poisson,
        num_conns,
        duration,
        timeout: positive("--timeout", a.timeout)?,
        think_timeout: Duration::from_secs_f64(a.think_timeout.max(0.0)),
        threads: a.threads,
        pipeline: a.pipeline,
        source_addrs: gen::source_pool(&target, a.source_addrs),
        sample_interval: positive("--sample-interval", a.sample_interval)?,
        seed: a.seed,
        profile: a.profile,
        start_at: a.start_at,
        each_reply: a.latencies.is_some(),
        stop_after: match *model {
            Model::Wrk { window, .. } => Some(Duration::from_secs_f64(window)),
            Model::Httperf { .. } => a.stop_after.map(Duration::from_secs_f64),
        },
        endless: matches!(model, Model::Wrk { .. }),
        pace: match *model {
            Model::Wrk {
                conns,
                request_rate: Some(r),
                ..
            } => Some(Duration::from_secs_f64(conns as f64 / r)),
            _ => None,
        },
        headers: a
            .headers
            .iter()
            .flat_map(|h| [h.as_bytes(), b"\r\n"].concat())
            .collect(),
    })
}

/// The progress line, redrawn in place on a terminal: elapsed of the expected time and the
/// time left, connections started of those to start, replies and errors.
fn progress_line(
    elapsed: Duration,
    expected: Option<Duration>,
    conns: Option<u64>,
    live: &Live,
) -> String {
    let secs = elapsed.as_secs_f64();
    let replies = live.replies.load(Relaxed);
    let of = expected.map_or(String::new(), |e| {
        let left = (e.as_secs_f64() - secs).max(0.0);
        format!(" of {:.1} s (ETA {left:.0} s)", e.as_secs_f64())
    });
    format!(
        "\r{secs:6.1} s{of}  started {:>9}{}  replies {:>9} ({:>8.0}/s)  errors {:>6}   ",
        live.started.load(Relaxed),
        conns.map_or(String::new(), |n| format!(" of {n}")),
        replies,
        replies as f64 / secs.max(1e-3),
        live.errors.load(Relaxed)
    )
}

/// Where the results go: --json, --samples and --latencies, each opened (and so checked)
/// before the run; the text report on stdout, or on stderr when one of them takes stdout.
struct Outputs {
    json: Option<Sink>,
    samples: Option<Sink>,
    latencies: Option<Sink>,
    report_to_stderr: bool,
}

impl Outputs {
    /// The outputs, checked (opened) before the run, not found unwritable at its end.
    fn open(a: &Args) -> anyhow::Result<Outputs> {
        if a.quiet && a.json.is_none() && a.samples.is_none() && a.latencies.is_none() {
            return Err(usage(
                "--quiet without --json, --samples or --latencies would write nothing: drop --quiet, or add \
                 --json FILE (or --json - for stdout)",
            ));
        }
        let on_stdout: Vec<&str> = [
            ("--json", &a.json),
            ("--samples", &a.samples),
            ("--latencies", &a.latencies),
        ]
        .into_iter()
        .filter(|(_, p)| p.as_deref() == Some(Path::new("-")))
        .map(|(f, _)| f)
        .collect();
        if on_stdout.len() > 1 {
            return Err(usage(format!(
                "{} cannot all go to stdout (-): give all but one of them a file",
                on_stdout.join(" and ")
            )));
        }
        let open = |flag: &'static str, path: &Option<PathBuf>| {
            path.as_deref().map(|p| Sink::open(flag, p)).transpose()
        };
        Ok(Outputs {
            json: open("--json", &a.json)?,
            samples: open("--samples", &a.samples)?,
            latencies: open("--latencies", &a.latencies)?,
            // With an output on stdout, the text report goes to stderr.
            report_to_stderr: !on_stdout.is_empty(),
        })
    }

    /// Writes the report `r` to --json, its samples to --samples, every reply to --latencies.
    fn write(&mut self, r: &LoadReport, stats: &summary::Stats) -> anyhow::Result<()> {
        if let Some(out) = &mut self.json {
            out.write((serde_json::to_string_pretty(r)? + "\n").as_bytes())?;
        }
        if let Some(out) = &mut self.samples {
            out.write(summary::samples_csv(&r.samples).as_bytes())?;
        }
        if let Some(out) = &mut self.latencies {
            out.write(summary::each_reply_csv(&stats.each).as_bytes())?;
        }
        Ok(())
    }

    /// The text report, after the command as given (so that it can be run again exactly) and
    /// where it went.
    fn text(
        &self,
        outcome: &Outcome,
        target: SocketAddr,
        opts: summary::TextOptions,
    ) -> anyhow::Result<()> {
        let mut argv: Vec<String> = std::env::args().skip(1).collect();
        argv.insert(0, "evlab".into());
        let mut text = format!(
            "{} (to {target})\n",
            evlab_lab::model::text::shell_line(&argv)
        );
        text.push_str(&summary::to_text_with(&outcome.stats, &outcome.info, opts));
        if self.report_to_stderr {
            eprint!("{text}");
        } else {
            let mut o = std::io::stdout().lock();
            o.write_all(text.as_bytes())?;
            o.flush()?;
        }
        Ok(())
    }
}

/// The exit status the run earns, once its report is out: a warning when every connection was
/// refused (most likely nothing listens there), 130 when interrupted, 1 when no reply arrived,
/// 99 past a threshold (one line saying which).
fn verdict(
    a: &Args,
    outcome: &Outcome,
    thresholds: &[crate::threshold::Threshold],
    target: SocketAddr,
) -> anyhow::Result<()> {
    let stats = &outcome.stats;
    let e = &stats.errors;
    if stats.initiated > 0 && e.connrefused == stats.initiated {
        eprintln!(
            "evlab load: warning: every connection ({}) was refused: is a server listening on \
             {target}? (`evlab serve` listens on port {} unless given --listen)",
            stats.initiated,
            crate::DEFAULT_PORT
        );
    }
    if outcome.interrupted {
        return Err(Exit(130).into());
    }
    if stats.replies == 0 && !a.allow_no_replies {
        bail!(
            "no reply arrived: {} connections started, {} errors (--allow-no-replies accepts \
             this)",
            stats.initiated,
            e.total()
        );
    }
    let crossed = crate::threshold::crossed(thresholds, stats, outcome.info.duration_s);
    if !crossed.is_empty() {
        eprintln!(
            "evlab load: past its thresholds: {} (exit status {}; --threshold none drops the \
             defaults)",
            crossed.join("; "),
            crate::threshold::EXIT_CROSSED
        );
        return Err(Exit(crate::threshold::EXIT_CROSSED).into());
    }
    Ok(())
}
