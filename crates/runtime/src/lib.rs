//! evlab-runtime: what every evlab event loop shares, whatever it serves.
//!
//! The μserver (`evlab-server`) and the proxy (`evlab-proxy`) are both one event loop per
//! worker thread, accepting on one listener. What that takes besides the protocol is here,
//! once:
//!
//! - [`gate`]: the accept gate (closed at `--max-conns` or when out of descriptors, reopened
//!   when a connection closes or [`gate::ACCEPT_RETRY`] later) with the errno policy of every
//!   accept loop ([`AcceptFailure`]), and the graceful shutdown's grace.
//! - [`deadlines`]: one deadline per connection, re-armed lazily ([`Deadlines`], [`Timer`]), and
//!   the header and send timeouts both programs take ([`Timeouts`]).
//! - [`bufpool`]: buffers lent while a connection has bytes to hold ([`BufPool`]).
//! - [`spares`]: closed connections' shells kept for the next ([`Spares`]); [`trim`]: what sat
//!   unused in those and in the deadline queue given back every 10 s ([`Trim`]).
//! - [`counter`]: the counters a worker writes and any thread reads ([`Counter`],
//!   [`StatusCounters`] into `evlab_wire::StatusClasses`, the mechanism's and the connections'
//!   counters) and the stats documents' syscall table.
//! - [`workers`]: the worker threads, started together (each reporting whether it came up) and
//!   joined together; [`registry`]: their counters, wakers and the shutdown request;
//!   [`signals`]: SIGINT and SIGTERM routed to those wakers, SIGPIPE ignored; [`service`]: the
//!   handle a started server or proxy is ([`Service`]: address, shared state, stats, shutdown,
//!   join).
//! - [`ring`]: the io_uring runtime of both completion engines ([`Ring`]: requests queued, the
//!   turn's one enter, the completions harvested; [`ProvidedBuffers`] for multishot recvs).
//!
//! It knows nothing of HTTP.

#![deny(clippy::too_many_lines)]

pub mod bufpool;
pub mod counter;
pub mod deadlines;
pub mod gate;
pub mod registry;
pub mod ring;
pub mod service;
pub mod shutdown;
pub mod signals;
pub mod spares;
pub mod trim;
pub mod workers;

pub use bufpool::BufPool;
pub use counter::{syscall_rows, ConnCounters, Counter, PollerCounters, StatusCounters};
pub use deadlines::{earliest, Deadlines, Due, Timed, Timeouts, Timer};
pub use gate::{AcceptFailure, Gate, ACCEPT_RETRY, SHUTDOWN_GRACE};
pub use registry::{Registry, Waker, WorkerCounters};
pub use ring::{ProvidedBuffers, Ring};
pub use service::{Service, ServiceState};
pub use spares::Spares;
pub use trim::Trim;
pub use workers::{Ready, Threads, WorkerError};
