//! evlab-proxy: the reverse caching proxy of the uselect/splice paper (Rosu & Rosu, USENIX
//! 2003) on today's kernel.
//!
//! An event-driven HTTP/1.1 reverse proxy in front of one origin, with persistent and
//! pipelined client connections, a small pool of persistent origin connections per worker, an
//! in-memory object cache bounded in bytes, and three ways to move a response body from the
//! origin to the client (`--forward`):
//!
//! - `copy`: `read` from the origin into user space, `write` to the client.
//! - `splice`: the head is read and parsed in user space; a body whose length is known and at
//!   least `--splice-min` is moved origin socket → pipe → client socket with `splice(2)`, never
//!   entering user space. Spliced bodies are not cached.
//! - `splice-keep`: as `splice`, and a cacheable body is also `tee(2)`d into a second pipe and
//!   read from there into the cache: the paper's KeepCopy.
//! - `splice-release`: as `splice`, with the paper's AutoRelease approximated: the body's pipe
//!   is sized once for the whole declared length (up to 1 MiB), so each splice moves all the
//!   socket holds and the proxy is not woken per 64 KiB pipe-full; the head is written into
//!   the pipe ahead of the body when both fit, so one splice gives both to the client; and the
//!   body ends at its declared length with no look at the origin's socket after it (the
//!   connection is looked at before its next request). See docs/proxy.md.
//!
//! Request bodies (Content-Length or chunked, any method) are forwarded through user space in
//! every mode; `Expect: 100-continue` is answered by the proxy; CONNECT opens a tunnel to the
//! targets of `--allow-connect` only, spliced both ways in the splice modes.
//!
//! Like the server, the loop is generic over its engine, chosen once at start-up from the
//! mechanism registry, so every mechanism runs the proxy with no dynamic dispatch. The loop
//! waits and makes every transfer through one trait (`engine.rs`): a readiness mechanism
//! ([`evlab_poll::Poller`]) waits for readiness and makes the non-blocking syscalls; the
//! io_uring completion engine (`uring`, `completion/`, on the runtime's ring as the server's
//! is) makes them io_uring requests — recv, send, splice behind a linked poll, tee, multishot
//! accept — whose completions it hands back to the loop as events. Both engines therefore share every
//! decision (what to read, when to splice, when a pipe must drain, when to close).
//!
//! See `docs/proxy.md` for what the cache stores and `docs/proxy-internals.md` for the rules the
//! forwarding follows.

#![deny(clippy::too_many_lines)]

mod access_log;
mod cache;
mod completion;
mod engine;
mod pipes;
mod stats;
mod worker;

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

use evlab_http::Limits;
use evlab_poll::{Mechanism, Support};
use evlab_runtime::{Ready, Service, WorkerError};
use evlab_sys as sys;

pub use access_log::AccessLog;
pub use cache::{CacheCounts, Object, ObjectCache};
/// The document `GET /.evlab/stats` answers, defined in `evlab-wire` (its readers depend on that
/// crate, not on this one).
pub use evlab_wire::proxy::{
    ByteCounts, CacheStats, ClientCounts, EventCounts, OriginCounts, PipeStats, ProxyStats,
    StatusClasses, SyscallCount, TransferCounts,
};
pub use pipes::{Pipe, PipeCounts, PipePool};
pub use stats::{Shared, WorkerStats};

/// How response bodies travel from the origin to the client.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ForwardMode {
    /// read(2) and write(2) through user space.
    Copy,
    /// splice(2) through a pipe, for bodies of known length ≥ `splice_min`.
    Splice,
    /// As `Splice`, with a tee(2)'d copy of cacheable bodies read into the cache (KeepCopy).
    SpliceKeep,
    /// As `Splice`, through a pipe sized for the body's declared length (up to
    /// [`RELEASE_PIPE_MAX`]), with the head ahead of the body in it when both fit, and no look
    /// at the origin's socket once the declared length has passed: the paper's AutoRelease,
    /// as near as today's Linux allows.
    SpliceRelease,
}

/// The largest pipe `splice-release` grows a body's pipe to (the kernel's default
/// `/proc/sys/fs/pipe-max-size`, which binds unprivileged processes).
pub const RELEASE_PIPE_MAX: usize = 1 << 20;

impl ForwardMode {
    pub const ALL: [ForwardMode; 4] = [
        ForwardMode::Copy,
        ForwardMode::Splice,
        ForwardMode::SpliceKeep,
        ForwardMode::SpliceRelease,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ForwardMode::Copy => "copy",
            ForwardMode::Splice => "splice",
            ForwardMode::SpliceKeep => "splice-keep",
            ForwardMode::SpliceRelease => "splice-release",
        }
    }

    pub fn from_name(s: &str) -> Result<ForwardMode, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "copy" => Ok(ForwardMode::Copy),
            "splice" => Ok(ForwardMode::Splice),
            "splice-keep" | "splice_keep" | "keepcopy" => Ok(ForwardMode::SpliceKeep),
            "splice-release" | "splice_release" | "autorelease" => Ok(ForwardMode::SpliceRelease),
            _ => Err(format!(
                "unknown forwarding mode '{s}'; valid modes: copy, splice, splice-keep, splice-release"
            )),
        }
    }

    /// Whether bodies may be spliced.
    pub fn splices(self) -> bool {
        self != ForwardMode::Copy
    }
}

impl std::fmt::Display for ForwardMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything the proxy can be told.
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    /// The origin server every request goes to.
    pub origin: SocketAddr,
    /// Sent to the origin as every request's `Host` instead of the client's (the cache key
    /// still names the client's host).
    pub origin_host: Option<String>,
    /// The proxy's name in the `Via` field added to requests (RFC 9110 §7.6.3); `None`: none.
    pub via: Option<String>,
    pub mechanism: Mechanism,
    pub workers: usize,
    pub forward: ForwardMode,
    /// Bodies with fewer bytes left to receive than this after the head's read are copied even
    /// when the mode splices (a splice costs two syscalls and a pipe).
    pub splice_min: u64,
    /// Pipes each worker may have open at once (idle and in use); beyond, bodies are copied.
    pub pipes: usize,
    /// Pipe capacity asked for with F_SETPIPE_SZ (0: the kernel's default, 64 KiB).
    pub pipe_size: usize,
    /// User-space buffer per copied body, and the most a copy reads at once.
    pub buffer_size: usize,
    /// Bytes of objects each worker's cache holds (0: no cache).
    pub cache_bytes: u64,
    /// Largest body the cache stores.
    pub cache_max_object: u64,
    /// Bytes of objects each worker may be receiving for the cache at once (each counted at
    /// its full length from its head on): a cacheable miss that would pass it is forwarded
    /// without being kept, so a crowd of slow readers of large objects holds at most this
    /// besides their copy buffers.
    pub keep_bytes: u64,
    /// The freshness of a response that states none of its own, in place of the
    /// `Last-Modified` heuristic (`--cache-ttl`; never for a private answer: see
    /// [`evlab_http::freshness`]). `None`: only what responses say.
    pub cache_ttl: Option<Duration>,
    /// The most freshness the `Last-Modified` heuristic gives (zero: none).
    pub cache_heuristic_max: Duration,
    /// A request body is read whole before the origin is contacted (nginx's
    /// `proxy_request_buffering on`), so a slow client costs a buffer, not an origin
    /// connection; false: streamed to the origin as it comes.
    pub request_buffering: bool,
    /// The largest request body buffered; a larger one is refused with 413 (nginx's
    /// `client_max_body_size`, 1 MiB too). Unbounded when not buffering.
    pub request_buffer: u64,
    /// Idle origin connections each worker keeps for reuse.
    pub origin_idle: usize,
    /// A client connection with no progress for this long is closed (408 if it had sent part
    /// of a request head, 504 if it waits for the origin's response head). `None`: never.
    pub timeout: Option<Duration>,
    /// A request head must be complete within this total time from when the client began to
    /// wait for it (at accept, or once the previous response was out), however it trickles
    /// in: else 408 (or a close, if not a byte of it came). `None`: off.
    pub header_timeout: Option<Duration>,
    /// A client that takes none of its output for this long is closed; restarted by every
    /// write that makes progress (as `evlab serve --send-timeout`). `None`: off.
    pub send_timeout: Option<Duration>,
    /// A connection to the origin (or a CONNECT target) that is not up within this time
    /// is given up: 504, where a refused one is 502. `None`: only `timeout` bounds it.
    pub connect_timeout: Option<Duration>,
    pub max_conns: usize,
    pub limits: Limits,
    /// Answer `GET /.evlab/stats` (the proxy's counters) instead of forwarding it.
    pub stats: bool,
    pub profile: bool,
    pub backlog: i32,
    pub events_per_wait: usize,
    /// How long to read and discard a client's input after closing our side.
    pub linger: Duration,
    /// The only targets a CONNECT may open a tunnel to (`--allow-connect`); empty: none.
    pub allow_connect: Vec<ConnectTarget>,
    /// One line per request, written in batches (`--access-log`); `None`: no log, and no cost.
    pub access_log: Option<Arc<AccessLog>>,
}

/// A target CONNECT may tunnel to: the `host:port` a client must name (compared without
/// regard to case) and the address it was resolved to when the proxy started (the event loop
/// never resolves names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectTarget {
    pub name: String,
    pub addr: SocketAddr,
}

impl ConnectTarget {
    /// `HOST:PORT`, resolved now (the first address).
    pub fn resolve(s: &str) -> Result<ConnectTarget, String> {
        use std::net::ToSocketAddrs;
        let s = s.trim();
        let port_ok = s
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !port_ok {
            return Err(format!("{s:?}: not a HOST:PORT"));
        }
        let addr = s
            .to_socket_addrs()
            .map_err(|e| format!("{s:?}: {e}"))?
            .next()
            .ok_or_else(|| format!("{s:?}: no address"))?;
        Ok(ConnectTarget {
            name: s.to_ascii_lowercase(),
            addr,
        })
    }
}

impl Config {
    pub fn new(listen: SocketAddr, origin: SocketAddr, mechanism: Mechanism) -> Config {
        Config {
            listen,
            origin,
            origin_host: None,
            via: Some("evlab".into()),
            mechanism,
            workers: 1,
            forward: ForwardMode::Copy,
            splice_min: 4096,
            pipes: 256,
            pipe_size: 0,
            buffer_size: 64 * 1024,
            cache_bytes: 64 << 20,
            cache_max_object: 16 << 20,
            keep_bytes: 16 << 20,
            cache_ttl: None,
            cache_heuristic_max: evlab_http::Policy::DEFAULT_HEURISTIC_MAX,
            request_buffering: true,
            request_buffer: 1 << 20,
            origin_idle: 64,
            timeout: Some(Duration::from_secs(60)),
            header_timeout: Some(Duration::from_secs(60)),
            send_timeout: Some(Duration::from_secs(60)),
            connect_timeout: Some(Duration::from_secs(60)),
            max_conns: 100_000,
            limits: Limits::default(),
            stats: false,
            profile: false,
            backlog: 4096,
            events_per_wait: 512,
            linger: Duration::from_secs(2),
            allow_connect: Vec::new(),
            access_log: None,
        }
    }

    /// How the cache gives freshness to responses that state none.
    pub fn freshness_policy(&self) -> evlab_http::Policy {
        evlab_http::Policy {
            override_ttl: self.cache_ttl,
            heuristic_max: self.cache_heuristic_max,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("mechanism {mechanism} is not available: {reason}")]
    Unsupported {
        mechanism: Mechanism,
        reason: String,
    },
    // The io errors are in the messages and not also `source()`s, which a `{:#}` chain would
    // print a second time.
    #[error("cannot listen on {addr}: {error}")]
    Listen { addr: SocketAddr, error: io::Error },
    #[error("{0}")]
    Config(String),
    #[error("worker {worker}: {error}")]
    Worker { worker: usize, error: io::Error },
    #[error("worker {0} panicked")]
    Panicked(usize),
}

impl From<WorkerError> for ProxyError {
    fn from(e: WorkerError) -> ProxyError {
        match e {
            WorkerError::Failed { worker, error } => ProxyError::Worker { worker, error },
            WorkerError::Panicked(w) => ProxyError::Panicked(w),
        }
    }
}

evlab_runtime::service_handle!(
    /// A running proxy: the service handle (address, shared state, stats, shutdown), which it
    /// dereferences to.
    Proxy,
    Shared
);

impl Proxy {
    /// Binds, starts the workers, and returns once they are ready.
    pub fn start(cfg: Config) -> Result<Proxy, ProxyError> {
        if let Support::No(reason) = cfg.mechanism.support() {
            return Err(ProxyError::Unsupported {
                mechanism: cfg.mechanism,
                reason,
            });
        }
        if cfg.workers == 0 {
            return Err(ProxyError::Config("--workers must be at least 1".into()));
        }
        if let Some(h) = &cfg.origin_host {
            // It goes into every request head as it is: no room for a line break or a space.
            if h.is_empty() || !h.bytes().all(|b| b.is_ascii_graphic() && b != b',') {
                return Err(ProxyError::Config(format!(
                    "--origin-host {h:?}: not a host[:port]"
                )));
            }
        }
        if let Some(v) = &cfg.via {
            if v.is_empty() || !v.bytes().all(|b| b.is_ascii_graphic() && b != b',') {
                return Err(ProxyError::Config(format!("via {v:?}: not a pseudonym")));
            }
        }
        if cfg.buffer_size < 1024 {
            return Err(ProxyError::Config(
                "--buffer-size must be at least 1024 bytes".into(),
            ));
        }
        sys::set_profiling(cfg.profile);
        let listen_err = |error| ProxyError::Listen {
            addr: cfg.listen,
            error,
        };
        let fd = sys::tcp_listener(&cfg.listen, cfg.backlog, false).map_err(listen_err)?;
        let addr = match sys::getsockname(fd) {
            Ok(a) => a,
            Err(e) => {
                let _ = sys::close(fd);
                return Err(listen_err(e));
            }
        };
        let shared = Arc::new(Shared::new(cfg.mechanism, cfg.forward, cfg.profile));
        let cfg = Arc::new(cfg);
        let work = {
            let (cfg, shared) = (cfg.clone(), shared.clone());
            move |_: usize, ready: Ready| run_worker(fd, cfg.clone(), shared.clone(), ready)
        };
        let svc = Service::start(cfg.workers, "evlab-proxy", (addr, vec![fd]), shared, work)?;
        Ok(Proxy { svc })
    }

    /// Waits for the workers to exit (after a shutdown request or a fatal error).
    pub fn wait(self) -> Result<(), ProxyError> {
        Ok(self.svc.wait()?)
    }

    /// Requests shutdown and waits.
    pub fn shutdown(self) -> Result<(), ProxyError> {
        Ok(self.svc.shutdown()?)
    }
}

/// A worker thread: the mechanism becomes a type here, once.
fn run_worker(
    listen_fd: RawFd,
    cfg: Arc<Config>,
    shared: Arc<Shared>,
    ready: Ready,
) -> io::Result<()> {
    macro_rules! dispatch {
        ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {
            match cfg.mechanism {
                $(Mechanism::$v => dispatch!(@run $kind $args),)*
            }
        };
        (@run readiness ($ty:ty)) => {
            worker::run::<engine::Readiness<$ty>>(listen_fd, cfg, shared, ready)
        };
        (@run completion $args:tt) => {
            worker::run::<completion::Uring>(listen_fd, cfg, shared, ready)
        };
    }
    evlab_poll::for_each_mechanism!(dispatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names_round_trip() {
        for m in ForwardMode::ALL {
            assert_eq!(ForwardMode::from_name(m.name()).unwrap(), m);
        }
        let e = ForwardMode::from_name("zerocopy").unwrap_err();
        assert!(
            e.contains("copy, splice, splice-keep, splice-release"),
            "{e}"
        );
    }

    #[test]
    fn the_completion_engine_runs_or_says_why_not() {
        let a = "127.0.0.1:0".parse().unwrap();
        let cfg = Config::new(a, a, Mechanism::Uring);
        match (Mechanism::Uring.support(), Proxy::start(cfg)) {
            (Support::Yes, Ok(p)) => {
                assert_ne!(p.local_addr().port(), 0);
                p.shutdown().unwrap();
            }
            (Support::Yes, Err(e)) => panic!("uring is supported here, yet: {e}"),
            (Support::No(why), Err(ProxyError::Unsupported { reason, .. })) => {
                // Refused with the reason; the engine itself did not run.
                assert_eq!(reason, why);
                evlab_poll::testing::require("io_uring", false, &why);
            }
            (Support::No(why), r) => panic!("{why}, yet: {:?}", r.map(|_| ()).err()),
        }
    }
}
