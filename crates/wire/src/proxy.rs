//! The proxy's `GET /.evlab/stats` (`evlab proxy --stats`): one [`ProxyStats`], pretty JSON,
//! built by `evlab_proxy::Shared::stats`.
//!
//! Body bytes are counted by the way they went: `copy` through user space (read and write),
//! `splice` origin → pipe → client in the kernel, `tee` duplicated from the pipe for the cache
//! (splice-keep), `hit` sent from the cache. Response heads are in `to_clients` only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::{StatusClasses, SyscallCount};

/// The document `GET /.evlab/stats` answers on the proxy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProxyStats {
    /// "evlab-proxy".
    pub proxy: String,
    pub version: String,
    pub mechanism: String,
    /// copy, splice or splice-keep.
    pub forward: String,
    pub workers: usize,
    pub uptime_s: f64,
    pub profile: bool,
    pub connections: ClientCounts,
    pub origin: OriginCounts,
    pub requests: u64,
    pub responses: StatusClasses,
    pub cache: CacheStats,
    pub bytes: ByteCounts,
    pub transfers: TransferCounts,
    pub pipes: PipeStats,
    pub events: EventCounts,
    pub syscalls: BTreeMap<String, SyscallCount>,
    pub syscalls_total: u64,
    pub syscalls_per_request: f64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientCounts {
    pub accepted: u64,
    pub closed: u64,
    pub active: u64,
    pub max_active: u64,
    pub accept_errors: u64,
    /// Closed after `--timeout` without progress.
    pub timeouts: u64,
    /// Request heads not complete within `--header-timeout` (answered 408, or closed if not a
    /// byte of one came). Written only when not zero (documents from before read as 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub header_timeouts: u64,
    /// Clients closed because they took none of their response for `--send-timeout`.
    /// Written only when not zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub send_timeouts: u64,
    pub io_errors: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginCounts {
    /// Connections opened to the origin.
    pub connects: u64,
    /// Requests sent on a connection taken from the idle pool.
    pub reused: u64,
    /// Requests sent again on a fresh connection after a pooled one failed before answering.
    pub retries: u64,
    pub closed: u64,
    /// Idle connections in the pools now.
    pub idle: u64,
    /// Origin failures: refused, reset or closed early, or an unreadable response.
    pub errors: u64,
    /// Requests answered 502 (the origin failed before a response head arrived).
    pub bad_gateway: u64,
    /// Requests answered 504 (no response head within `--timeout`, or no connection within
    /// `--connect-timeout`).
    pub gateway_timeout: u64,
    /// Origin connections that did not complete within `--connect-timeout` (each one also a
    /// 504). Written only when not zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub connect_timeouts: u64,
    /// Responses cut short because the origin failed in the body: the client's connection is
    /// closed once what arrived has been sent.
    pub truncated: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStats {
    pub hits: u64,
    /// Hits answered 304 (If-Modified-Since).
    pub not_modified: u64,
    pub misses: u64,
    /// Requests that could not be answered from the cache (HEAD of an uncached object,
    /// Authorization, the client's no-cache) and went to the origin.
    pub bypassed: u64,
    pub stored: u64,
    pub evicted: u64,
    pub expired: u64,
    pub rejected: u64,
    pub objects: u64,
    pub bytes: u64,
    /// Cacheable misses forwarded without being kept for the cache, because the objects being
    /// received for it already held `--keep-bytes` (a crowd of slow readers of large
    /// objects). Written only when not zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_kept: u64,
    /// Bytes reserved now by the objects being received for the cache (at most
    /// `--keep-bytes` per worker). Written only when not zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub keeping: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteCounts {
    /// Everything written to clients (heads and bodies).
    pub to_clients: u64,
    /// Body bytes moved through user space.
    pub copy: u64,
    /// Body bytes spliced from the origin into a pipe.
    pub splice: u64,
    /// Body bytes duplicated by tee for the cache (splice-keep).
    pub tee: u64,
    /// Body bytes sent from the cache.
    pub hit: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferCounts {
    /// Bodies moved through user space.
    pub copied: u64,
    /// Bodies spliced.
    pub spliced: u64,
    /// Bodies spliced with a tee'd copy for the cache.
    pub spliced_keep: u64,
    /// Bodies spliced through a pipe sized for their declared length (`splice-release`).
    /// Written only when not zero (documents from before read as 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spliced_release: u64,
    /// Bodies copied although their mode splices, because no pipe was free.
    pub no_pipe: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipeStats {
    pub created: u64,
    pub open: u64,
    pub idle: u64,
    pub max_open: u64,
    pub closed_with_data: u64,
    /// Splice-release: pipes the kernel would not grow to a body's length (F_SETPIPE_SZ
    /// refused, as past the per-user limit on pipe pages); the body went through the pipe as
    /// it was. Written only when not zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_grown: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventCounts {
    pub waits: u64,
    pub events: u64,
    pub per_wait: f64,
    pub discarded: u64,
    pub interest_changes: u64,
    pub interest_changes_free: u64,
    pub batches: u64,
    pub waits_from_memory: u64,
    pub waits_from_kernel: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
