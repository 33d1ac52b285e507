//! evlab-server: the μserver.
//!
//! An event-driven HTTP/1.1 static server, identical in everything but its event-dispatch
//! mechanism, so that mechanisms can be compared fairly (paper §3–4). One event loop per worker
//! thread; the loop is generic over [`evlab_poll::Poller`] and chosen once at start-up, so the hot
//! path has no dynamic dispatch.
//!
//! [`Server::start`] binds, spawns the workers and returns at once with the bound address; the
//! caller (the `evlab serve` command, or a test) then waits with [`Server::wait`] or stops it with
//! [`Server::shutdown`]: stop accepting, finish responses in flight, exit.

#![deny(clippy::too_many_lines)]

mod completion;
mod conn;
mod core;
mod handler;
mod peers;
pub mod prefork;
mod readiness;
mod stats;

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use evlab_http::{CacheConfig, Limits};
use evlab_poll::{Mechanism, Support};
use evlab_runtime::{Ready, Service, WorkerError};
use evlab_sys as sys;

/// The document `GET /.evlab/stats` answers, defined in `evlab-wire` (its readers depend on that
/// crate, not on this one).
pub use evlab_wire::server::{
    ConnectionCounts, EventCounts, MemoryCounts, ServerStats, StatusClasses, SyscallCount,
    TimerCounts, WorkerCounts,
};
pub use stats::{Shared, WorkerStats};

/// How several workers share the listening port.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AcceptMode {
    /// One listener registered in every worker's loop: every worker is woken (the herd).
    Shared,
    /// One listener registered in every worker's loop with EPOLLEXCLUSIVE: a connection wakes
    /// one waiting worker (or a few), not all. Epoll mechanisms only (epoll-lt, epoll-et,
    /// epoll2); the others are refused with the reason, never silently run as `shared`, so that
    /// a herd measurement cannot be mislabelled.
    Exclusive,
    /// A listener per worker with SO_REUSEPORT: the kernel spreads connections.
    Reuseport,
}

impl AcceptMode {
    pub fn from_name(s: &str) -> Result<AcceptMode, String> {
        match s {
            "shared" => Ok(AcceptMode::Shared),
            "exclusive" => Ok(AcceptMode::Exclusive),
            "reuseport" => Ok(AcceptMode::Reuseport),
            other => Err(format!(
                "unknown accept mode '{other}'; valid modes: shared, exclusive, reuseport"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AcceptMode::Shared => "shared",
            AcceptMode::Exclusive => "exclusive",
            AcceptMode::Reuseport => "reuseport",
        }
    }
}

/// Everything the server can be told.
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    pub root: PathBuf,
    pub mechanism: Mechanism,
    pub workers: usize,
    pub accept_mode: AcceptMode,
    /// Connections accepted per readiness notification of the listener; `None` is the paper's Inf.
    pub accept_limit: Option<usize>,
    /// How file bodies reach the socket (`--file-io`; `--sendfile` is `FileIo::Sendfile`, the
    /// paper's configuration with `cork`).
    pub file_io: FileIo,
    /// TCP_CORK around head and body.
    pub cork: bool,
    /// Write a response as soon as it is ready instead of waiting for a writable event. Off by
    /// default for level-triggered mechanisms, as in the μserver; edge-triggered epoll always
    /// writes when it knows the socket is writable.
    pub eager_write: bool,
    /// Edge-triggered mechanisms: write the replies a sweep of events produced after the sweep,
    /// together, instead of one by one as each request is read.
    pub batch_writes: bool,
    pub max_conns: usize,
    pub limits: Limits,
    /// A connection that does not complete a request head within this time is closed (408 if it
    /// sent part of one). `None` turns it off, as experiments with idle connections need.
    pub header_timeout: Option<Duration>,
    /// A connection whose peer takes none of its reply for this long is closed (nginx's
    /// `send_timeout`): restarted by every write that makes progress. `None` turns it off.
    pub send_timeout: Option<Duration>,
    /// Serve `GET /.evlab/stats`.
    pub stats: bool,
    /// Time every syscall (slower; for the Table 1 profile).
    pub profile: bool,
    pub backlog: i32,
    /// Events asked for per wait.
    pub events_per_wait: usize,
    /// Files larger than this are not held in memory (always sendfile).
    pub max_in_memory: u64,
    /// Bytes of file bodies each worker's content cache holds in memory (least recently used
    /// bodies are dropped beyond it; a file larger than this is sent by sendfile).
    pub cache_bytes: u64,
    /// Files each worker's content cache keeps open (those whose body it holds).
    pub cache_files: usize,
    /// How long to keep reading and discarding after an error response before closing.
    pub linger: Duration,
    /// Think time per object, as a Web Polygraph origin server has: each reply is held this
    /// long before it is sent, without blocking the loop (the connection's deadline holds it).
    /// Pipelined requests are answered one at a time, each delayed in turn.
    pub origin_delay: Option<Duration>,
    /// With `origin_delay`: each reply's delay is drawn from a normal distribution with this
    /// deviation around it, clamped at zero (Polygraph's servers: 2.5 s ± 1 s).
    pub origin_delay_sd: Option<Duration>,
    /// Paths starting with this are answered with `Cache-Control: no-store` (a proxy
    /// workload's uncacheable objects).
    pub no_store_prefix: Option<String>,
}

/// How a file's body reaches the socket (`evlab serve --file-io`): the Linux Scalability
/// Project's read-ahead comparison, measured on the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FileIo {
    /// From the content cache's memory: files up to `max_in_memory` are read once and sent from
    /// memory; larger ones by sendfile.
    #[default]
    Cache,
    /// read(2) (pread, 64 KiB at a time) from the file into a buffer, then write: every
    /// response reads its file, through the page cache.
    Read,
    /// mmap(2) of the file for each response, written from the mapping (its pages fault in as
    /// the socket takes them). A file truncated while it is mapped kills the server with
    /// SIGBUS, as it would any mmap server: for static document roots.
    Mmap,
    /// sendfile(2) from the file: the paper's configuration (with `cork`).
    Sendfile,
}

impl FileIo {
    pub const NAMES: &'static [&'static str] = &["cache", "read", "mmap", "sendfile"];

    pub fn from_name(s: &str) -> Option<FileIo> {
        match s {
            "cache" => Some(FileIo::Cache),
            "read" => Some(FileIo::Read),
            "mmap" => Some(FileIo::Mmap),
            "sendfile" => Some(FileIo::Sendfile),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FileIo::Cache => "cache",
            FileIo::Read => "read",
            FileIo::Mmap => "mmap",
            FileIo::Sendfile => "sendfile",
        }
    }

    /// Whether the content cache holds bodies in memory under this mode (read and mmap read
    /// the file for every response; the cache keeps only its descriptor and head).
    pub fn bodies_in_memory(self) -> bool {
        matches!(self, FileIo::Cache | FileIo::Sendfile)
    }
}

impl Config {
    pub fn new(listen: SocketAddr, root: impl Into<PathBuf>, mechanism: Mechanism) -> Config {
        Config {
            listen,
            root: root.into(),
            mechanism,
            workers: 1,
            accept_mode: AcceptMode::Shared,
            accept_limit: None,
            file_io: FileIo::Cache,
            cork: false,
            eager_write: false,
            batch_writes: false,
            max_conns: 100_000,
            limits: Limits::default(),
            header_timeout: Some(Duration::from_secs(60)),
            send_timeout: Some(Duration::from_secs(60)),
            stats: false,
            profile: false,
            backlog: 4096,
            events_per_wait: 512,
            max_in_memory: 64 << 20,
            cache_bytes: CacheConfig::DEFAULT_MAX_BYTES,
            cache_files: CacheConfig::DEFAULT_MAX_FILES,
            linger: Duration::from_secs(2),
            origin_delay: None,
            origin_delay_sd: None,
            no_store_prefix: None,
        }
    }

    pub(crate) fn cache_config(&self) -> CacheConfig {
        let mut c = CacheConfig::new(self.root.clone());
        // `--file-io read` and `mmap` read the file for every response: no body is held.
        c.max_in_memory = if self.file_io.bodies_in_memory() {
            self.max_in_memory
        } else {
            0
        };
        c.max_bytes = self.cache_bytes;
        // Only files whose body is held keep a descriptor open; with 10,000 idle connections
        // the descriptor limit matters more than a larger cache would.
        c.max_files = self.cache_files;
        c.max_entries = 16_384;
        c.no_store_prefix = self.no_store_prefix.clone();
        c
    }
}

/// Why the server could not start or stopped. An io error is part of its variant's message and
/// not also its `source()`, so that a `{:#}` chain (anyhow) prints it once.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("mechanism {mechanism} is not available: {reason}")]
    Unsupported {
        mechanism: Mechanism,
        reason: String,
    },
    #[error("cannot listen on {addr}: {error}")]
    Listen { addr: SocketAddr, error: io::Error },
    #[error(transparent)]
    Cache(#[from] evlab_http::cache::CacheError),
    #[error("{0}")]
    Config(String),
    #[error("worker {worker}: {error}")]
    Worker { worker: usize, error: io::Error },
    #[error("worker {0} panicked")]
    Panicked(usize),
}

impl From<WorkerError> for ServerError {
    fn from(e: WorkerError) -> ServerError {
        match e {
            WorkerError::Failed { worker, error } => ServerError::Worker { worker, error },
            WorkerError::Panicked(w) => ServerError::Panicked(w),
        }
    }
}

evlab_runtime::service_handle!(
    /// A running server: the service handle (address, shared state, stats, shutdown), which it
    /// dereferences to.
    Server,
    Shared
);

impl Server {
    /// Binds, starts the workers, and returns once they are ready to serve.
    pub fn start(cfg: Config) -> Result<Server, ServerError> {
        validate(&cfg)?;
        let (addr, listeners) = bind(&cfg, cfg.workers)?;
        let shared = Arc::new(Shared::new(cfg.mechanism, cfg.workers, cfg.profile));
        Server::launch(cfg, addr, listeners, 0, shared)
    }

    /// Starts `cfg.workers` worker threads on listeners already bound (one shared, or one per
    /// worker), numbered from `first`; closes the listeners if they cannot start.
    fn launch(
        cfg: Config,
        addr: SocketAddr,
        listeners: Vec<RawFd>,
        first: usize,
        shared: Arc<Shared>,
    ) -> Result<Server, ServerError> {
        let cfg = Arc::new(cfg);
        let work = {
            let (cfg, shared, fds) = (cfg.clone(), shared.clone(), listeners.clone());
            move |w: usize, ready: Ready| {
                let lfd = fds[w.min(fds.len() - 1)];
                run_worker(first + w, lfd, cfg.clone(), shared.clone(), ready)
            }
        };
        let n = cfg.workers;
        let svc = Service::start(n, "evlab-worker", (addr, listeners), shared, work)?;
        Ok(Server { svc })
    }

    /// Waits for the workers to exit (after a shutdown request or a fatal error).
    pub fn wait(self) -> Result<(), ServerError> {
        Ok(self.svc.wait()?)
    }

    /// Requests shutdown and waits.
    pub fn shutdown(self) -> Result<(), ServerError> {
        Ok(self.svc.shutdown()?)
    }
}

/// Refuses what cannot run, before anything is bound or forked; turns profiling on.
pub(crate) fn validate(cfg: &Config) -> Result<(), ServerError> {
    if let Support::No(reason) = cfg.mechanism.support() {
        return Err(ServerError::Unsupported {
            mechanism: cfg.mechanism,
            reason,
        });
    }
    if cfg.workers == 0 {
        return Err(ServerError::Config("--workers must be at least 1".into()));
    }
    if cfg.origin_delay_sd.is_some() && cfg.origin_delay.is_none() {
        return Err(ServerError::Config(
            "--origin-delay-sd needs --origin-delay (the mean)".into(),
        ));
    }
    if cfg.accept_mode == AcceptMode::Exclusive
        && cfg.mechanism.kind() == evlab_poll::Kind::Completion
    {
        return Err(ServerError::Config(format!(
            "--accept-mode exclusive: {} is a completion engine (multishot accept on each \
             worker's ring) with no EPOLLEXCLUSIVE; give shared or reuseport, or an epoll \
             mechanism (epoll-lt, epoll-et, epoll2)",
            cfg.mechanism.name()
        )));
    }
    if cfg.accept_limit == Some(0) {
        return Err(ServerError::Config(
            "--accept-limit must be at least 1 (or inf)".into(),
        ));
    }
    sys::set_profiling(cfg.profile);
    // Fail early, in the caller's thread, on a bad document root.
    evlab_http::ContentCache::new(cfg.cache_config())?;
    Ok(())
}

/// Binds the listener: one, or with `reuseport` one per worker (`n`), all on the port the first
/// got. Returns the bound address and the listeners.
pub(crate) fn bind(cfg: &Config, n: usize) -> Result<(SocketAddr, Vec<RawFd>), ServerError> {
    let listen_err = |error| ServerError::Listen {
        addr: cfg.listen,
        error,
    };
    let reuseport = cfg.accept_mode == AcceptMode::Reuseport;
    let first = sys::tcp_listener(&cfg.listen, cfg.backlog, reuseport).map_err(listen_err)?;
    let mut listeners = vec![first];
    let addr = match sys::getsockname(first) {
        Ok(a) => a,
        Err(e) => {
            let _ = sys::close(first);
            return Err(listen_err(e));
        }
    };
    if reuseport {
        for _ in 1..n {
            match sys::tcp_listener(&addr, cfg.backlog, true) {
                Ok(fd) => listeners.push(fd),
                Err(e) => {
                    for fd in listeners {
                        let _ = sys::close(fd);
                    }
                    return Err(listen_err(e));
                }
            }
        }
    }
    Ok((addr, listeners))
}

/// A worker thread: the mechanism's engine on the shared core. The one place where a mechanism
/// becomes a type.
fn run_worker(
    worker: usize,
    listen_fd: RawFd,
    cfg: Arc<Config>,
    shared: Arc<Shared>,
    ready: Ready,
) -> io::Result<()> {
    use core::run_worker as run;
    use readiness::Readiness;
    macro_rules! dispatch {
        ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {
            match cfg.mechanism {
                $(Mechanism::$v => dispatch!(@run $kind $args),)*
            }
        };
        (@run readiness ($ty:ty)) => {
            run(worker, listen_fd, cfg, shared, ready, Readiness::<$ty>::new)
        };
        (@run completion $args:tt) => {
            run(worker, listen_fd, cfg, shared, ready, completion::Completion::new)
        };
    }
    evlab_poll::for_each_mechanism!(dispatch)
}
