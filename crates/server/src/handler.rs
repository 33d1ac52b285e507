//! What both event loops do with a connection's bytes: parse the requests buffered so far
//! (pipelining), answer each from the content cache, and queue the responses in order. The
//! readiness loop (`worker.rs`) and the io_uring engine (`uring.rs`) differ only in how bytes
//! come in and go out.

use std::sync::Arc;
use std::time::Instant;

use evlab_http::{
    parse_request, write_error, write_head, ContentCache, DateCache, Lookup, Method, Parse,
    Request, Status,
};

use crate::conn::{Conn, Out, State, COPY_BODY_MAX, OUT_HIGH_WATER};
use crate::stats::{Shared, WorkerStats};
use crate::timers::TimerQueue;
use crate::Config;

pub const STATS_PATH: &str = "/.evlab/stats";

/// Everything a connection's handling needs besides the connection and the mechanism.
pub struct Ctx {
    pub cfg: Arc<Config>,
    pub shared: Arc<Shared>,
    pub stats: Arc<WorkerStats>,
    pub cache: ContentCache,
    pub date: DateCache,
    pub now: Instant,
    pub header_timers: Option<TimerQueue>,
    pub linger_timers: TimerQueue,
    pub next_gen: u64,
    pub edge: bool,
    pub scratch: Vec<u8>,
    /// Connections whose replies wait for the end of this sweep (see `Config::batch_writes`).
    pub flush: Vec<i32>,
    /// Replies are being deferred to the end of the sweep.
    pub deferring: bool,
}

impl Ctx {
    /// How long the loop may sleep: until the first of its timers, `other` (accept retry) and
    /// the shutdown deadline; while shutting down, at most 100 ms, to re-check the exit.
    pub fn wait_timeout(
        &self,
        other: Option<Instant>,
        shutting_down: Option<Instant>,
    ) -> Option<std::time::Duration> {
        let candidates = [
            other,
            self.header_timers.as_ref().and_then(|t| t.next_deadline()),
            self.linger_timers.next_deadline(),
            shutting_down,
            shutting_down.map(|_| self.now + std::time::Duration::from_millis(100)),
        ];
        candidates
            .into_iter()
            .flatten()
            .min()
            .map(|n| n.saturating_duration_since(Instant::now()))
    }

    pub fn next_gen(&mut self) -> u64 {
        self.next_gen += 1;
        self.next_gen
    }
}

/// Parses and answers every complete request in the buffer (pipelining), up to the output
/// high-water mark.
pub fn process_input(ctx: &mut Ctx, c: &mut Conn) {
    let mut consumed = 0;
    while !c.close_after && c.out.pending() < OUT_HIGH_WATER && consumed < c.rbuf.len() {
        match parse_request(&c.rbuf[consumed..], &ctx.cfg.limits) {
            Parse::Partial => break,
            Parse::Complete(req) => {
                let len = req.head_len;
                let keep = req.keep_alive;
                respond(ctx, &mut c.out, &req);
                consumed += len;
                c.gen = ctx.next_gen();
                if !keep {
                    c.close_after = true;
                }
            }
            Parse::Error(e) => {
                let Conn { out, .. } = c;
                write_error(
                    out.buf(),
                    e.status,
                    e.minor_version,
                    ctx.date.get(),
                    e.keep_alive,
                    e.head_only,
                );
                out.commit_buf();
                ctx.stats.requests.inc();
                ctx.stats.record_status(e.status.code());
                c.gen = ctx.next_gen();
                if e.keep_alive {
                    consumed += e.consumed;
                } else {
                    c.close_after = true;
                    c.linger = true;
                }
            }
        }
    }
    if consumed == c.rbuf.len() {
        c.rbuf.clear();
    } else if consumed > 0 {
        c.rbuf.drain(..consumed);
    }
    if c.close_after && !c.rbuf.is_empty() {
        // Unread input behind the last response: close gently or the peer may see a reset
        // before it reads our answer.
        c.linger = true;
    }
}

pub fn respond_error(
    ctx: &mut Ctx,
    c: &mut Conn,
    status: Status,
    minor: u8,
    keep_alive: bool,
    head_only: bool,
) {
    write_error(
        c.out.buf(),
        status,
        minor,
        ctx.date.get(),
        keep_alive,
        head_only,
    );
    c.out.commit_buf();
    ctx.stats.record_status(status.code());
    if !keep_alive {
        c.close_after = true;
    }
    c.state = State::Writing;
}

fn respond(ctx: &mut Ctx, out: &mut Out, req: &Request<'_>) {
    ctx.stats.requests.inc();
    let head_only = req.method == Method::Head;
    let minor = req.minor_version;
    let ka = req.keep_alive;
    if ctx.cfg.stats && req.path == STATS_PATH {
        let body = ctx.shared.to_json();
        let extra = format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\nCache-Control: no-store\r\n",
            body.len()
        );
        write_head(
            out.buf(),
            Status::Ok,
            minor,
            ctx.date.get(),
            ka,
            extra.as_bytes(),
        );
        if !head_only {
            out.buf().extend_from_slice(body.as_bytes());
        }
        out.commit_buf();
        ctx.stats.record_status(200);
        return;
    }
    let found = ctx.cache.lookup(&req.path, ctx.now);
    match found {
        Lookup::Found(entry) => {
            if let Some(ims) = req.if_modified_since {
                if entry.mtime <= ims {
                    write_head(
                        out.buf(),
                        Status::NotModified,
                        minor,
                        ctx.date.get(),
                        ka,
                        b"",
                    );
                    out.commit_buf();
                    ctx.stats.record_status(304);
                    return;
                }
            }
            let cfg = &ctx.cfg;
            let by_sendfile = !head_only && entry.len > 0 && (cfg.sendfile || !entry.in_memory);
            if by_sendfile && cfg.cork {
                out.push_cork(true);
            }
            write_head(
                out.buf(),
                Status::Ok,
                minor,
                ctx.date.get(),
                ka,
                &entry.headers,
            );
            if head_only || entry.len == 0 {
                out.commit_buf();
            } else if by_sendfile {
                out.push_file(entry);
                if cfg.cork {
                    out.push_cork(false);
                }
            } else if entry.body.len() <= COPY_BODY_MAX {
                out.buf().extend_from_slice(&entry.body);
                out.commit_buf();
            } else {
                out.push_mem(entry);
            }
            ctx.stats.record_status(200);
        }
        Lookup::NotFound | Lookup::Forbidden | Lookup::Unavailable => {
            let status = match found {
                Lookup::NotFound => Status::NotFound,
                Lookup::Forbidden => Status::Forbidden,
                _ => Status::ServiceUnavailable,
            };
            write_error(out.buf(), status, minor, ctx.date.get(), ka, head_only);
            out.commit_buf();
            ctx.stats.record_status(status.code());
        }
    }
}
