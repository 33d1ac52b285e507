//! What both event loops do with a connection's bytes: parse the requests buffered so far
//! (pipelining), answer each from the content cache, and queue the responses in order. The
//! readiness loop (`worker.rs`) and the io_uring engine (`uring.rs`) differ only in how bytes
//! come in and go out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use std::rc::Rc;

use evlab_http::cache::Headers;
use evlab_http::conditional::{self, evaluate};
use evlab_http::response::push_decimal;
use evlab_http::{
    parse_request, start_head, write_error, write_error_with, write_head, ContentCache, DateCache,
    Entry, Lookup, Method, Outcome, Parse, Request, Status,
};

use evlab_sys as sys;

use evlab_runtime::{BufPool, Deadlines, Timeouts};

use crate::conn::{Conn, Out, State, COPY_BODY_MAX, OUT_HIGH_WATER};
use crate::stats::{Shared, WorkerStats};
use crate::{Config, FileIo};

pub const STATS_PATH: &str = "/.evlab/stats";

/// Everything a connection's handling needs besides the connection and the engine.
pub struct Ctx {
    pub cfg: Arc<Config>,
    pub shared: Arc<Shared>,
    pub stats: Arc<WorkerStats>,
    pub cache: ContentCache,
    pub date: DateCache,
    /// The time of this turn of the loop.
    pub now: Instant,
    pub timers: Deadlines,
    /// The header and send timeouts (`cfg`'s, measured as the proxy measures them).
    pub timeouts: Timeouts,
    pub pool: BufPool,
    /// Read and discarded here: lingering input.
    pub scratch: Vec<u8>,
    /// Draws each reply's origin delay.
    pub think: Think,
}

/// The origin delay of each reply (`Config::origin_delay`): fixed, or, with a deviation, drawn
/// from a normal distribution clamped at zero, as Web Polygraph's servers draw their think
/// times (the proxy paper's: mean 2.5 s, deviation 1 s). Each worker has its own stream.
#[derive(Debug)]
pub struct Think {
    mean: Duration,
    sd: Option<Duration>,
    state: u64,
}

impl Think {
    pub fn new(mean: Option<Duration>, sd: Option<Duration>, seed: u64) -> Think {
        Think {
            mean: mean.unwrap_or_default(),
            sd,
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        }
    }

    /// Uniform in (0, 1) (xorshift64*).
    fn uniform(&mut self) -> f64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let x = self.state.wrapping_mul(0x2545_F491_4F6C_DD1D);
        ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// The next reply's delay.
    pub fn draw(&mut self) -> Duration {
        let Some(sd) = self.sd else {
            return self.mean;
        };
        // Box–Muller: one standard normal from two uniforms.
        let (u1, u2) = (self.uniform(), self.uniform());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        Duration::from_secs_f64((self.mean.as_secs_f64() + z * sd.as_secs_f64()).max(0.0))
    }
}

/// What a connection does once its output has drained.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Drained {
    /// Close it now.
    Close,
    /// It was told to close gently: our side is shut, its input is read and discarded.
    Lingering,
    /// Requests already buffered produced more output.
    Busy,
    /// Requests already buffered produced a reply held for the origin delay.
    Delayed,
    /// It waits for the next request.
    Idle,
}

impl Ctx {
    /// How long the loop may sleep: until the first of its deadlines and `gate` (the accept
    /// gate's retry and shutdown times).
    pub fn wait_timeout(&self, gate: Option<Instant>) -> Option<Duration> {
        // From the turn's time: a turn lasts microseconds, and waking that much late for a
        // timeout of seconds saves a clock read on every turn.
        evlab_runtime::earliest(self.timers.next(), gate)
            .map(|n| n.saturating_duration_since(self.now))
    }

    /// The connection waits for a request head: the header timeout runs.
    #[inline]
    pub fn await_request(&mut self, c: &mut Conn) {
        let at = self.timeouts.header_due(self.now);
        self.timers.set(c, at);
    }

    /// The connection has output for the peer: the send timeout runs, restarted by progress.
    #[inline]
    pub fn await_send(&mut self, c: &mut Conn) {
        let at = self.timeouts.send_due(self.now);
        self.timers.set(c, at);
    }

    /// Starts a lingering close: shut our side, discard input until the peer closes or the
    /// linger time passes.
    pub fn start_linger(&mut self, c: &mut Conn) {
        let _ = sys::shutdown(c.fd, libc::SHUT_WR);
        c.state = State::Lingering;
        c.close_after = true;
        c.rbuf.clear();
        self.pool.reclaim(&mut c.rbuf);
        let at = self.now + self.cfg.linger;
        self.timers.set(c, Some(at));
    }

    /// Answers what the input buffer holds; if that queued output, the connection is writing
    /// (true), or, with an origin delay, holds the reply until its deadline (`State::Delayed`,
    /// false: nothing to send yet).
    #[inline]
    pub fn answer(&mut self, c: &mut Conn) -> bool {
        let delay = process_input(self, c);
        if c.out.is_empty() {
            // Only part of a head so far (a slow client): the output buffer lent for the
            // answer goes back, so a crowd of slow clients holds input buffers only.
            self.pool.reclaim(c.out.buf_slot());
            return false;
        }
        if let Some(d) = delay {
            c.state = State::Delayed;
            self.stats.delayed.inc();
            let at = self.now + d;
            self.timers.set(c, Some(at));
            return false;
        }
        if c.state != State::Writing {
            c.state = State::Writing;
            self.await_send(c);
        }
        true
    }

    /// The origin delay of a connection has passed: its reply may be sent.
    pub fn delay_over(&mut self, c: &mut Conn) {
        c.state = State::Writing;
        self.await_send(c);
    }

    /// Every queued byte has left: the one place that decides what a connection does next,
    /// for every engine.
    pub fn drained(&mut self, c: &mut Conn) -> Drained {
        self.pool.reclaim(c.out.buf_slot());
        if c.close_after {
            if c.linger && !c.peer_eof {
                self.start_linger(c);
                return Drained::Lingering;
            }
            return Drained::Close;
        }
        c.state = State::Reading;
        // Requests already buffered are answered without waiting for more input.
        if !c.rbuf.is_empty() {
            if self.answer(c) {
                return Drained::Busy;
            }
            if c.state == State::Delayed {
                return Drained::Delayed;
            }
        }
        if c.peer_eof {
            // Every complete request has been answered and nothing more can come.
            return Drained::Close;
        }
        self.await_request(c);
        Drained::Idle
    }
}

/// Parses and answers every complete request in the buffer (pipelining), up to the output
/// high-water mark. With an origin delay, answers one request only and returns the delay its
/// reply must wait (none for the stats page and for errors).
pub fn process_input(ctx: &mut Ctx, c: &mut Conn) -> Option<Duration> {
    ctx.pool.lend(c.out.buf_slot());
    let mut consumed = 0;
    let mut delay = None;
    while !c.close_after && c.out.pending() < OUT_HIGH_WATER && consumed < c.rbuf.len() {
        match parse_request(&c.rbuf[consumed..], &ctx.cfg.limits) {
            Parse::Partial => break,
            Parse::Complete(req) => {
                let len = req.head_len;
                let keep = req.keep_alive;
                let delayable = respond(ctx, &mut c.out, &req);
                consumed += len;
                if !keep {
                    c.close_after = true;
                }
                if ctx.cfg.origin_delay.is_some() {
                    // One object at a time: the next pipelined request waits for this reply.
                    delay = delayable.then(|| ctx.think.draw());
                    break;
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
        ctx.pool.reclaim(&mut c.rbuf);
    } else if consumed > 0 {
        c.rbuf.drain(..consumed);
    }
    if c.close_after && !c.rbuf.is_empty() {
        // Unread input behind the last response: close gently or the peer may see a reset
        // before it reads our answer.
        c.linger = true;
    }
    delay
}

pub fn respond_error(
    ctx: &mut Ctx,
    c: &mut Conn,
    status: Status,
    minor: u8,
    keep_alive: bool,
    head_only: bool,
) {
    ctx.pool.lend(c.out.buf_slot());
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
    ctx.await_send(c);
}

/// Queues the answer to one request; returns whether an origin delay applies to it (not to
/// the stats page).
fn respond(ctx: &mut Ctx, out: &mut Out, req: &Request<'_>) -> bool {
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
        return false;
    }
    // HEAD, 304, 412 and 416 answers need no body: the cache then reads none and keeps no
    // descriptor. A plain request (no precondition, no Range) is always answered in full.
    let mut outcome = Outcome::Full;
    let found = ctx.cache.lookup_with(&req.path, ctx.now, |meta| {
        outcome = evaluate(&req.cond, req.if_modified_since, &meta.validators());
        !head_only && outcome.has_body()
    });
    let how = Reply {
        date: ctx.date.get(),
        minor,
        ka,
        head_only,
    };
    match found {
        Lookup::Head(meta) => {
            let status = write_file_head(out.buf(), &how, outcome, &meta.headers, meta.len);
            out.commit_buf();
            ctx.stats.record_status(status.code());
        }
        Lookup::Found(entry) => {
            // The body loaded may be a newer file than the one the lookup judged (`evaluate`
            // answers a request without conditions at once).
            outcome = evaluate(&req.cond, req.if_modified_since, &entry.validators());
            let status = send_file(&ctx.cfg, out, entry, outcome, &how);
            ctx.stats.record_status(status.code());
        }
        Lookup::Redirect => {
            redirect(out.buf(), req, &how);
            out.commit_buf();
            ctx.stats.record_status(301);
        }
        Lookup::NotFound | Lookup::Forbidden | Lookup::Unavailable => {
            let status = match found {
                Lookup::NotFound => Status::NotFound,
                Lookup::Forbidden => Status::Forbidden,
                _ => Status::ServiceUnavailable,
            };
            write_error(out.buf(), status, minor, how.date, ka, head_only);
            out.commit_buf();
            ctx.stats.record_status(status.code());
        }
    }
    true
}

/// How a reply is written: its `Date`, the request's version, keep-alive, HEAD.
struct Reply<'d> {
    date: &'d [u8],
    minor: u8,
    ka: bool,
    head_only: bool,
}

/// Queues a file's answer, its head and (for a GET answered 200 or 206) its body or the
/// range's part of it, from the cache's memory or the file as `--file-io` says, without
/// copying it but for a small body behind its head. Returns the status sent.
fn send_file(
    cfg: &Config,
    out: &mut Out,
    entry: Rc<Entry>,
    outcome: Outcome,
    how: &Reply,
) -> Status {
    let part = match outcome {
        Outcome::Full => 0..entry.len,
        Outcome::Part { first, last } => first..last + 1,
        _ => {
            // The file changed between the lookup's judgement and its load.
            let status = write_file_head(out.buf(), how, outcome, &entry.headers, entry.len);
            out.commit_buf();
            return status;
        }
    };
    let len = part.end - part.start;
    // From the file (not the cache's memory): every mode but the cache, and the cache for a
    // file too large to hold.
    let from_file = !how.head_only && len > 0 && (cfg.file_io != FileIo::Cache || !entry.in_memory);
    if from_file && cfg.cork {
        out.push_cork(true);
    }
    let status = write_file_head(out.buf(), how, outcome, &entry.headers, entry.len);
    if how.head_only || len == 0 {
        out.commit_buf();
    } else if from_file {
        match cfg.file_io {
            FileIo::Read => out.push_read(entry, part),
            // A file that cannot be mapped (no memory for the mapping) goes by sendfile.
            FileIo::Mmap => {
                if let Err(entry) = out.push_map(entry, part.clone()) {
                    out.push_file(entry, part);
                }
            }
            FileIo::Cache | FileIo::Sendfile => out.push_file(entry, part),
        }
        if cfg.cork {
            out.push_cork(false);
        }
    } else if len as usize <= COPY_BODY_MAX {
        out.buf()
            .extend_from_slice(&entry.body[part.start as usize..part.end as usize]);
        out.commit_buf();
    } else {
        out.push_mem(entry, part);
    }
    status
}

/// Appends the head of a file's answer as `outcome` selects it (`len`: the file's), or the
/// whole error response of a 412 or 416; returns its status.
fn write_file_head(
    buf: &mut Vec<u8>,
    how: &Reply,
    outcome: Outcome,
    headers: &Headers,
    len: u64,
) -> Status {
    let (date, minor, ka) = (how.date, how.minor, how.ka);
    match outcome {
        Outcome::Full => {
            write_head(buf, Status::Ok, minor, date, ka, headers);
            Status::Ok
        }
        Outcome::Part { first, last } => {
            // Content-Type, Content-Range and the part's Content-Length, then the lines after
            // the file's Content-Length (Accept-Ranges, the validators).
            start_head(
                buf,
                Status::PartialContent,
                minor,
                date,
                ka,
                headers.len() + 96,
            );
            buf.extend_from_slice(headers.content_type());
            conditional::push_content_range(buf, Some((first, last)), len);
            buf.extend_from_slice(b"Content-Length: ");
            push_decimal(buf, last - first + 1);
            buf.extend_from_slice(b"\r\n");
            buf.extend_from_slice(headers.after_length());
            buf.extend_from_slice(b"\r\n");
            Status::PartialContent
        }
        Outcome::NotModified => {
            write_head(
                buf,
                Status::NotModified,
                minor,
                date,
                ka,
                headers.validators(),
            );
            Status::NotModified
        }
        Outcome::PreconditionFailed => {
            let status = Status::PreconditionFailed;
            write_error(buf, status, minor, date, ka, how.head_only);
            status
        }
        Outcome::Unsatisfiable => {
            let status = Status::RangeNotSatisfiable;
            let mut range = Vec::with_capacity(48);
            conditional::push_content_range(&mut range, None, len);
            write_error_with(buf, status, minor, date, ka, how.head_only, &range);
            status
        }
    }
}

/// A directory asked for without its slash: 301 to the same target with it, query kept.
fn redirect(buf: &mut Vec<u8>, req: &Request<'_>, how: &Reply) {
    let (path, query) = req.target_parts();
    let mut location = Vec::with_capacity(16 + path.len() + query.len());
    location.extend_from_slice(b"Location: ");
    location.extend_from_slice(path.as_bytes());
    location.push(b'/');
    location.extend_from_slice(query.as_bytes());
    location.extend_from_slice(b"\r\n");
    let status = Status::MovedPermanently;
    write_error_with(
        buf,
        status,
        how.minor,
        how.date,
        how.ka,
        how.head_only,
        &location,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_times_are_fixed_or_normal_clamped_at_zero() {
        let ms = Duration::from_millis;
        let mut fixed = Think::new(Some(ms(250)), None, 1);
        assert!((0..10).all(|_| fixed.draw() == ms(250)));
        // Polygraph's: mean 2.5 s, deviation 1 s.
        let mut t = Think::new(Some(ms(2500)), Some(ms(1000)), 3);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| t.draw().as_secs_f64()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        // Draws below zero (z < -2.5: 0.62 % of them, about 1,240 here) are clamped to exactly
        // zero, not redrawn or reflected.
        let zeros = xs.iter().filter(|&&x| x == 0.0).count();
        assert!(
            (n * 4 / 1000..=n * 9 / 1000).contains(&zeros),
            "{zeros} of {n} draws were zero"
        );
        // Clamping at zero moves the mean up and the deviation down a little.
        assert!((mean - 2.5).abs() < 0.02, "mean {mean}");
        assert!((sd - 1.0).abs() < 0.03, "deviation {sd}");
        // Workers draw different streams.
        let mut a = Think::new(Some(ms(2500)), Some(ms(1000)), 1);
        let mut b = Think::new(Some(ms(2500)), Some(ms(1000)), 2);
        assert_ne!(a.draw(), b.draw());
    }
}
