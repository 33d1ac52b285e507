//! One generator thread: its share of the schedule, its connections (each a state machine
//! driven by edge-triggered readiness), their deadline lists, and the shells of closed
//! connections that the next ones reuse.

use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use evlab_poll::{EpollEt, Events, Interest, Poller, Token};
use evlab_sys as sys;

use super::{Live, LoadConfig, Pools};
use crate::reply::{Progress, ReplyReader};
use crate::rng::Rng;
use crate::summary::{ErrorTally, Stats, StatusClasses};
use crate::workload::{Call, Method, Workload};
/// Whether `headers` (lines of `Name: value\r\n`) has one named `name` (lower case).
fn names_header(headers: &[u8], name: &str) -> bool {
    headers.split(|&b| b == b'\n').any(|line| {
        line.iter()
            .position(|&b| b == b':')
            .is_some_and(|i| line[..i].trim_ascii().eq_ignore_ascii_case(name.as_bytes()))
    })
}

/// Late by more than this counts as a late start.
const LATE: Duration = Duration::from_millis(1);
/// Connections started per loop iteration at most, so a thread that fell behind still serves
/// the connections it has.
const MAX_STARTS_PER_ROUND: usize = 256;
/// A shell's output buffer, per request of the pipeline depth (up to 16): requests are a line
/// and two short headers, so this is made once and does not grow.
const OUT_CAPACITY: usize = 512;
/// A shell's buffer for a response head split across reads (a head read whole is read where
/// it lies): a head larger than this grows it (once per shell, kept).
const HEAD_CAPACITY: usize = 1024;
/// No connection (an end of a deadline list).
const NIL: RawFd = -1;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Stage {
    Connecting,
    /// Connected; requests being sent or replies awaited.
    Active,
    /// Waiting out think time before the next call.
    Thinking,
}

struct Conn {
    stage: Stage,
    /// Tells this connection's think-time entry from a stale one for the same descriptor.
    gen: u64,
    /// When the current stage times out, while in a deadline list.
    deadline: Instant,
    /// The deadline list it is in (none while thinking), and its neighbours there.
    list: Option<usize>,
    prev: RawFd,
    next_fd: RawFd,
    calls: Vec<Call>,
    /// Next call to send.
    next: usize,
    /// Calls sent and not yet answered, oldest first.
    inflight: VecDeque<Sent>,
    /// When the next call is due (for latency when it is sent late).
    due: Instant,
    out: Vec<u8>,
    out_pos: usize,
    parser: ReplyReader,
    first_byte: Option<Instant>,
    started: Instant,
    replies: u64,
    readable: bool,
    writable: bool,
    /// The server shut down its side: read on to EOF, a short read proves nothing.
    peer_closed: bool,
    /// An error or hang-up was reported.
    errored: bool,
}

/// A closed connection's buffers, cleared: a shell.
struct Spare {
    calls: Vec<Call>,
    out: Vec<u8>,
    inflight: VecDeque<Sent>,
    parser: ReplyReader,
}

impl Spare {
    /// A new shell: its buffers made at their working size (the calls' by the workload's first
    /// session), so that its first connections do not grow them piece by piece.
    fn new(pipeline: usize) -> Spare {
        let depth = pipeline.max(1);
        Spare {
            calls: Vec::new(),
            out: Vec::with_capacity(OUT_CAPACITY * depth.min(16)),
            inflight: VecDeque::with_capacity(depth),
            parser: ReplyReader::with_head_capacity(HEAD_CAPACITY),
        }
    }
}

/// A deadline list: the connections whose current stage has the same length of deadline, in
/// the order they were armed, hence by deadline; linked through the connection table, so that
/// arming, re-arming and cancelling allocate nothing and a closed connection leaves nothing
/// behind.
#[derive(Clone, Copy, Debug)]
struct TimerList {
    head: RawFd,
    tail: RawFd,
}

/// A call on the wire.
#[derive(Copy, Clone, Debug)]
struct Sent {
    /// When it was due: latency is measured from here.
    due: Instant,
    sent: Instant,
    /// Its reply has no body.
    head: bool,
}

pub(super) struct Worker<'a> {
    cfg: &'a LoadConfig,
    threads: usize,
    t0: Instant,
    workload: Box<dyn Workload>,
    poller: EpollEt,
    events: Events,
    /// Indexed by descriptor.
    conns: Vec<Option<Conn>>,
    /// The shells of closed connections, for the next ones: no allocation per connection (nor
    /// per request) once the run has reached its concurrency. Reserved to the table's length.
    spare: Vec<Spare>,
    pools: Pools,
    stats: Stats,
    rng: Rng,
    /// Offset from t0 of this thread's next start.
    next_start: Duration,
    starts_done: u64,
    starts_total: Option<u64>,
    /// Stage deadlines, one list per length so each stays sorted: [connect, reply].
    timers: [TimerList; 2],
    /// Sessions thinking, by when they resume; one entry per thinking connection, so bounded by
    /// (and reserved to) the table's length.
    thinkers: BinaryHeap<std::cmp::Reverse<(Instant, RawFd, u64)>>,
    next_gen: u64,
    active: u64,
    src_next: usize,
    scratch: Vec<u8>,
    /// Connections of endless sessions closed and not yet replaced.
    restarts: u64,
    /// The configured headers name a `Host`, a `User-Agent`: the generator sends none of its own.
    own_host: bool,
    own_agent: bool,
}

impl<'a> Worker<'a> {
    /// A thread's worker, ready to run once given its schedule's origin (`t0`).
    pub(super) fn new(
        cfg: &'a LoadConfig,
        tid: usize,
        threads: usize,
        workload: Box<dyn Workload>,
    ) -> io::Result<Worker<'a>> {
        let starts_total = cfg.num_conns.map(|n| {
            let t = threads as u64;
            n / t + u64::from((tid as u64) < n % t)
        });
        let mut rng = Rng::new(cfg.seed ^ (tid as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let gap = threads as f64 / cfg.rate;
        let first = if cfg.poisson {
            Duration::from_secs_f64(rng.exp(gap))
        } else {
            Duration::from_secs_f64(tid as f64 / cfg.rate)
        };
        // Room for the samples of the whole schedule and its last deadline, so that recording
        // them does not grow the vectors during the run.
        let span = match (starts_total, cfg.duration) {
            (Some(n), _) => n as f64 * gap,
            (None, Some(d)) => d.as_secs_f64(),
            (None, None) => 0.0,
        } + (cfg.timeout + cfg.think_timeout).as_secs_f64();
        let intervals = (span / cfg.sample_interval.as_secs_f64())
            .ceil()
            .min(65_536.0) as usize;
        let mut stats = Stats::default();
        stats.samples.reserve_exact(intervals + 2);
        stats.lag_samples.reserve_exact(intervals + 2);
        if cfg.each_reply {
            // The schedule's replies (one call each): pushes past that grow it, amortized.
            let expect = starts_total.unwrap_or((span * cfg.rate / threads as f64) as u64);
            stats.each.reserve(expect.min(1 << 24) as usize);
        }
        Ok(Worker {
            cfg,
            threads,
            t0: Instant::now(),
            workload,
            poller: EpollEt::new()?,
            events: Events::with_capacity(1024),
            conns: Vec::new(),
            spare: Vec::new(),
            pools: Pools::default(),
            stats,
            rng,
            next_start: first,
            starts_done: 0,
            starts_total,
            timers: [TimerList {
                head: NIL,
                tail: NIL,
            }; 2],
            thinkers: BinaryHeap::new(),
            next_gen: 0,
            active: 0,
            src_next: tid,
            scratch: vec![0; 64 * 1024],
            restarts: 0,
            own_host: names_header(&cfg.headers, "host"),
            own_agent: names_header(&cfg.headers, "user-agent"),
        })
    }

    fn starts_left(&self) -> bool {
        match (self.starts_total, self.cfg.duration) {
            (Some(n), _) => self.starts_done < n,
            (None, Some(d)) => self.next_start < d,
            (None, None) => false,
        }
    }

    /// Runs this thread's share of the schedule from its origin `t0` until every connection it
    /// started is done, the stop window closes, or `stop` is raised.
    pub(super) fn run(
        mut self,
        t0: Instant,
        stop: &AtomicBool,
        live: &Live,
    ) -> io::Result<(Stats, Pools)> {
        self.t0 = t0;
        // Every stage of every connection has its own deadline, so the run ends by itself; this
        // is the backstop should one be missed: nothing at all happening for a whole timeout
        // while no session is thinking.
        let mut last_progress = Instant::now();
        let mut last_active = 0;
        let mut progressed = false;
        loop {
            let now = Instant::now();
            if progressed {
                last_progress = now;
                progressed = false;
            }
            let window_over = self.cfg.stop_after.is_some_and(|d| now >= self.t0 + d);
            if stop.load(Relaxed) || window_over {
                break;
            }
            // Start what the schedule says is due.
            let mut n = 0;
            while self.starts_left() && n < MAX_STARTS_PER_ROUND {
                let at = self.t0 + self.next_start;
                if at > now {
                    break;
                }
                let late = now.saturating_duration_since(at);
                if late > LATE {
                    self.stats.late_starts += 1;
                }
                self.stats.max_late_us = self.stats.max_late_us.max(late.as_micros() as u64);
                let sample = self.sample_index(at);
                self.stats.record_start(
                    self.next_start.as_micros() as u64,
                    now.saturating_duration_since(self.t0).as_micros() as u64,
                    sample,
                );
                self.start_conn(at, now);
                live.started.fetch_add(1, Relaxed);
                self.starts_done += 1;
                let gap = self.threads as f64 / self.cfg.rate;
                self.next_start += Duration::from_secs_f64(if self.cfg.poisson {
                    self.rng.exp(gap)
                } else {
                    gap
                });
                n += 1;
            }
            // Endless sessions' closed connections, replaced (while the window is open).
            while self.restarts > 0 && n < MAX_STARTS_PER_ROUND {
                self.restarts -= 1;
                self.start_conn(now, now);
                live.started.fetch_add(1, Relaxed);
                n += 1;
            }
            self.expire(now);
            if !self.starts_left() {
                if self.active == 0 {
                    break;
                }
                let quiet = self.cfg.timeout + self.cfg.think_timeout;
                if !self.cfg.endless && self.thinkers.is_empty() && now >= last_progress + quiet {
                    for fd in 0..self.conns.len() {
                        if self.conns[fd].is_some() {
                            self.stats.errors.client_timo += 1;
                            self.close(fd as RawFd, false);
                        }
                    }
                    break;
                }
            }
            let timeout = self.next_wakeup(now);
            self.poller.wait(&mut self.events, Some(timeout))?;
            if !self.events.is_empty() || self.active != last_active {
                progressed = true; // stamped with the next pass's clock reading
                last_active = self.active;
            }
            let replies_before = self.stats.replies;
            let errors_before = self.stats.errors.total();
            for i in 0..self.events.len() {
                let ev = self.events.as_slice()[i];
                let fd = ev.token.0 as RawFd;
                if let Some(Some(c)) = self.conns.get_mut(fd as usize) {
                    c.readable |= ev.readable();
                    c.writable |= ev.writable();
                    c.peer_closed |= ev.peer_closed();
                    c.errored |= ev.error() || ev.hup();
                    self.advance(fd);
                }
            }
            live.replies
                .fetch_add(self.stats.replies - replies_before, Relaxed);
            live.errors
                .fetch_add(self.stats.errors.total() - errors_before, Relaxed);
        }
        for fd in 0..self.conns.len() {
            if self.conns[fd].is_some() {
                self.close(fd as RawFd, false);
            }
        }
        Ok((self.stats, self.pools))
    }

    fn next_wakeup(&self, now: Instant) -> Duration {
        let mut next = now + Duration::from_millis(100);
        if let Some(d) = self.cfg.stop_after {
            next = next.min(self.t0 + d);
        }
        if self.starts_left() {
            next = next.min(self.t0 + self.next_start);
        }
        for q in &self.timers {
            if let Some(Some(c)) = self.conn(q.head) {
                next = next.min(c.deadline);
            }
        }
        if let Some(std::cmp::Reverse((d, _, _))) = self.thinkers.peek() {
            next = next.min(*d);
        }
        next.saturating_duration_since(now)
    }

    fn sample_index(&self, at: Instant) -> usize {
        (at.saturating_duration_since(self.t0).as_secs_f64()
            / self.cfg.sample_interval.as_secs_f64()) as usize
    }

    /// The table's slot for `fd` (none for [`NIL`] or past the end).
    fn conn(&self, fd: RawFd) -> Option<&Option<Conn>> {
        usize::try_from(fd).ok().and_then(|i| self.conns.get(i))
    }

    fn conn_mut(&mut self, fd: RawFd) -> Option<&mut Conn> {
        usize::try_from(fd)
            .ok()
            .and_then(|i| self.conns.get_mut(i))
            .and_then(Option::as_mut)
    }

    /// Bounds the connection's current stage: connecting gets `timeout`; waiting for replies
    /// `timeout + think_timeout` (httperf's `--think-timeout`: time the server may take to start
    /// a reply, added to the timeout). Replaces the deadline it had.
    fn arm_timer(&mut self, fd: RawFd, stage: Stage) {
        self.unlink(fd);
        let (q, len) = match stage {
            Stage::Connecting => (0, self.cfg.timeout),
            _ => (1, self.cfg.timeout + self.cfg.think_timeout),
        };
        let tail = self.timers[q].tail;
        let Some(c) = self.conn_mut(fd) else {
            return;
        };
        c.deadline = Instant::now() + len;
        c.list = Some(q);
        c.prev = tail;
        c.next_fd = NIL;
        match self.conn_mut(tail) {
            Some(t) => t.next_fd = fd,
            None => self.timers[q].head = fd,
        }
        self.timers[q].tail = fd;
    }

    /// Takes the connection out of its deadline list, if it is in one.
    fn unlink(&mut self, fd: RawFd) {
        let Some(c) = self.conn_mut(fd) else {
            return;
        };
        let Some(q) = c.list.take() else {
            return;
        };
        let (prev, next) = (c.prev, c.next_fd);
        c.prev = NIL;
        c.next_fd = NIL;
        match self.conn_mut(prev) {
            Some(p) => p.next_fd = next,
            None => self.timers[q].head = next,
        }
        match self.conn_mut(next) {
            Some(n) => n.prev = prev,
            None => self.timers[q].tail = prev,
        }
    }

    fn expire(&mut self, now: Instant) {
        for q in 0..self.timers.len() {
            self.expire_queue(q, now);
        }
        self.expire_thinkers(now);
    }

    fn expire_queue(&mut self, q: usize, now: Instant) {
        loop {
            let fd = self.timers[q].head;
            match self.conn(fd) {
                Some(Some(c)) if c.deadline <= now => {}
                _ => break,
            }
            self.stats.errors.client_timo += 1;
            self.close(fd, false); // which unlinks it
        }
    }

    fn expire_thinkers(&mut self, now: Instant) {
        while let Some(&std::cmp::Reverse((d, fd, g))) = self.thinkers.peek() {
            if d > now {
                break;
            }
            self.thinkers.pop();
            let due = matches!(self.conns.get(fd as usize), Some(Some(c)) if c.gen == g && c.stage == Stage::Thinking);
            if due {
                if let Some(Some(c)) = self.conns.get_mut(fd as usize) {
                    c.stage = Stage::Active;
                }
                self.arm_timer(fd, Stage::Active);
                self.queue_requests(fd, now);
                self.advance(fd);
            }
        }
    }

    fn start_conn(&mut self, scheduled: Instant, now: Instant) {
        self.stats.initiated += 1;
        let fd = match sys::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        ) {
            Ok(fd) => fd,
            Err(e) => {
                self.stats.errors.count_errno(e.raw_os_error().unwrap_or(0));
                return;
            }
        };
        let setup = (|| -> io::Result<()> {
            if self.cfg.pipeline > 1 {
                // Sequential calls go out when the previous reply has arrived, so Nagle never
                // holds them; pipelined ones may follow unacknowledged data.
                sys::setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
            }
            if !self.cfg.source_addrs.is_empty() {
                // Let connect pick the port knowing the whole 4-tuple.
                let _ = sys::setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1);
                let ip = self.cfg.source_addrs[self.src_next % self.cfg.source_addrs.len()];
                self.src_next += self.threads;
                sys::bind(fd, &SocketAddr::new(IpAddr::V4(ip), 0))?;
            }
            match sys::connect(fd, &self.cfg.server) {
                Ok(()) => Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(()),
                Err(e) => Err(e),
            }
        })();
        if let Err(e) = setup {
            self.stats.errors.count_errno(e.raw_os_error().unwrap_or(0));
            let _ = sys::close(fd);
            return;
        }
        if let Err(e) = self.poller.register(fd, Token(fd as usize), Interest::BOTH) {
            self.stats.errors.count_errno(e.raw_os_error().unwrap_or(0));
            let _ = sys::close(fd);
            return;
        }
        let i = fd as usize;
        if i >= self.conns.len() {
            self.grow_table(i);
        }
        let Spare {
            mut calls,
            out,
            inflight,
            parser,
        } = match self.spare.pop() {
            Some(shell) => shell,
            None => {
                self.pools.shells += 1;
                Spare::new(self.cfg.pipeline)
            }
        };
        self.workload.next_session(&mut calls);
        self.next_gen += 1;
        self.conns[i] = Some(Conn {
            stage: Stage::Connecting,
            gen: self.next_gen,
            deadline: now,
            list: None,
            prev: NIL,
            next_fd: NIL,
            calls,
            next: 0,
            inflight,
            due: scheduled,
            out,
            out_pos: 0,
            parser,
            first_byte: None,
            started: now,
            replies: 0,
            readable: false,
            writable: false,
            peer_closed: false,
            errored: false,
        });
        self.arm_timer(fd, Stage::Connecting);
        self.active += 1;
        self.stats.max_concurrent = self.stats.max_concurrent.max(self.active);
    }

    /// Makes room for descriptor `i`: the table doubles to the next power of two above it (as
    /// the poller's own table does, for the same descriptor), and the free list of shells and
    /// the heap of thinking sessions, which never hold more than the table's length, are
    /// reserved to it: one reallocation of each per doubling, counted.
    fn grow_table(&mut self, i: usize) {
        let len = (i + 1).next_power_of_two();
        self.conns.reserve_exact(len - self.conns.len());
        self.conns.resize_with(len, || None);
        self.spare.reserve_exact(len - self.spare.len());
        self.thinkers.reserve_exact(len - self.thinkers.len());
        self.pools.table_grows += 1;
    }

    /// Appends the requests that may be sent now (one, or up to the pipeline depth).
    fn queue_requests(&mut self, fd: RawFd, now: Instant) {
        let depth = self.cfg.pipeline.max(1);
        let host = &self.cfg.host;
        let Some(Some(c)) = self.conns.get_mut(fd as usize) else {
            return;
        };
        while c.inflight.len() < depth {
            if c.next >= c.calls.len() {
                // An endless session (wrk's model) starts its calls over.
                if !self.cfg.endless || c.calls.is_empty() {
                    break;
                }
                c.next = 0;
            }
            if c.next > 0 && !c.calls[c.next].think.is_zero() && !c.inflight.is_empty() {
                break; // a think time waits for the previous reply
            }
            let call = &c.calls[c.next];
            c.out.extend_from_slice(call.method.token());
            c.out.extend_from_slice(call.uri.as_bytes());
            c.out.extend_from_slice(b" HTTP/1.1\r\n");
            if !self.own_host {
                c.out.extend_from_slice(b"Host: ");
                c.out.extend_from_slice(host.as_bytes());
                c.out.extend_from_slice(b"\r\n");
            }
            if !self.own_agent {
                c.out.extend_from_slice(b"User-Agent: evlab-load\r\n");
            }
            c.out.extend_from_slice(&self.cfg.headers);
            c.out.extend_from_slice(b"\r\n");
            let due = if c.inflight.is_empty() { c.due } else { now };
            let head = call.method == Method::Head;
            c.inflight.push_back(Sent {
                due: due.min(now),
                sent: now,
                head,
            });
            c.next += 1;
            self.stats.requests += 1;
        }
    }

    /// Moves connection `fd` on as far as its readiness allows: finishes its connect, sends
    /// what is queued, reads and parses what arrived; until the socket would block, the session
    /// thinks, or the connection is closed. The once-per-connection steps (the connect, the
    /// server's close, a failure) are functions of their own; the sending, reading and parsing
    /// that every request takes stay here, in one body, as they were.
    fn advance(&mut self, fd: RawFd) {
        let now = Instant::now();
        loop {
            let Some(Some(c)) = self.conns.get_mut(fd as usize) else {
                return;
            };
            match c.stage {
                Stage::Connecting => {
                    if !c.writable && !c.readable {
                        return;
                    }
                    if !self.finish_connect(fd, now) {
                        return;
                    }
                }
                Stage::Thinking => return,
                Stage::Active => {
                    // Send what is queued.
                    if c.out_pos < c.out.len() && c.writable {
                        match sys::send(fd, &c.out[c.out_pos..], 0) {
                            Ok(n) => {
                                c.out_pos += n;
                                self.stats.bytes_out += n as u64;
                                if c.out_pos == c.out.len() {
                                    c.out.clear();
                                    c.out_pos = 0;
                                } else {
                                    c.writable = false;
                                }
                            }
                            Err(e) if sys::would_block(&e) => c.writable = false,
                            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                            Err(e) => return self.fail(fd, &e),
                        }
                        continue;
                    }
                    if !c.readable {
                        return;
                    }
                    let r = sys::read(fd, &mut self.scratch);
                    match r {
                        Ok(0) => return self.on_eof(fd, now),
                        Ok(n) => {
                            self.stats.bytes_in += n as u64;
                            if n < self.scratch.len() && !c.peer_closed {
                                c.readable = false;
                            }
                            if c.first_byte.is_none() {
                                c.first_byte = Some(now);
                            }
                            let mut data_off = 0;
                            while data_off < n {
                                let Some(Some(c)) = self.conns.get_mut(fd as usize) else {
                                    return;
                                };
                                let Some(front) = c.inflight.front() else {
                                    // Bytes nobody asked for.
                                    self.stats.errors.parse += 1;
                                    self.close(fd, false);
                                    return;
                                };
                                c.parser.head_request = front.head;
                                match c.parser.feed(&self.scratch[data_off..n]) {
                                    Ok(Progress::More) => break,
                                    Ok(Progress::Done { reply, consumed }) => {
                                        data_off += consumed;
                                        self.on_reply(fd, reply, now);
                                    }
                                    Err(_) => {
                                        self.stats.errors.parse += 1;
                                        self.close(fd, false);
                                        return;
                                    }
                                }
                            }
                        }
                        Err(e) if sys::would_block(&e) => c.readable = false,
                        Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                        Err(e) => return self.fail(fd, &e),
                    }
                }
            }
        }
    }

    /// The connecting socket `fd` became ready: connected (its deadline becomes the reply's
    /// and its first requests are queued), or failed (counted, closed: false). Once per
    /// connection: kept out of [`Worker::advance`]'s loop.
    #[inline(never)]
    fn finish_connect(&mut self, fd: RawFd, now: Instant) -> bool {
        let Some(Some(c)) = self.conns.get_mut(fd as usize) else {
            return false;
        };
        // Writable with no error reported: connected, no need to ask SO_ERROR.
        let check = c.errored || !c.writable;
        let err = if check {
            sys::take_socket_error(fd)
        } else {
            Ok(None)
        };
        match err {
            Ok(None) => {}
            Ok(Some(e)) | Err(e) => {
                self.fail(fd, &e);
                return false;
            }
        }
        let connect_us = now.saturating_duration_since(c.started).as_micros() as u64;
        let _ = self.stats.connect_time.record(connect_us.max(1));
        c.stage = Stage::Active;
        self.arm_timer(fd, Stage::Active);
        self.queue_requests(fd, now);
        true
    }

    /// The server closed `fd`: that ends a close-delimited reply, then the connection, which
    /// succeeded only if every call was answered. Once per connection: kept out of
    /// [`Worker::advance`]'s loop.
    #[inline(never)]
    fn on_eof(&mut self, fd: RawFd, now: Instant) {
        let Some(Some(c)) = self.conns.get_mut(fd as usize) else {
            return;
        };
        if let Some(reply) = c.parser.eof() {
            self.on_reply(fd, reply, now);
            if !matches!(self.conns.get(fd as usize), Some(Some(_))) {
                return; // that reply finished the connection
            }
        }
        let ok = matches!(self.conns.get(fd as usize), Some(Some(c)) if c.inflight.is_empty() && c.next >= c.calls.len());
        if !ok {
            // Closed before every reply came: the server reset us.
            self.stats.errors.connreset += 1;
        }
        self.close(fd, ok);
    }

    /// A socket call on `fd` failed with `e`: counted by its errno, and the connection closed.
    fn fail(&mut self, fd: RawFd, e: &io::Error) {
        self.stats.errors.count_errno(e.raw_os_error().unwrap_or(0));
        self.close(fd, false);
    }

    fn on_reply(&mut self, fd: RawFd, reply: crate::reply::Reply, now: Instant) {
        let idx = self.sample_index(now);
        self.stats.sample(idx);
        self.stats.replies += 1;
        self.stats.status[StatusClasses::slot(reply.status)] += 1;
        self.stats.header_bytes += reply.header_bytes as u64;
        self.stats.body_bytes += reply.body_bytes;
        self.stats.footer_bytes += reply.footer_bytes;
        let Some(Some(c)) = self.conns.get_mut(fd as usize) else {
            return;
        };
        c.replies += 1;
        if let Some(Sent { due, sent, .. }) = c.inflight.pop_front() {
            let lat = now.saturating_duration_since(due).as_micros() as u64;
            let _ = self.stats.latency.record(lat.max(1));
            let on_wire = now.saturating_duration_since(sent).as_micros() as u64;
            let _ = self.stats.latency_uncorrected.record(on_wire.max(1));
            if self.cfg.each_reply {
                self.stats.each.push(crate::summary::EachReply {
                    due_us: due.saturating_duration_since(self.t0).as_micros() as u64,
                    latency_us: lat.max(1),
                    status: reply.status,
                });
            }
            let fb = c.first_byte.unwrap_or(now);
            self.stats.response_time_sum_us +=
                fb.saturating_duration_since(sent).as_micros() as u64;
            self.stats.transfer_time_sum_us += now.saturating_duration_since(fb).as_micros() as u64;
        }
        c.first_byte = None;
        let finished = !self.cfg.endless && c.next >= c.calls.len() && c.inflight.is_empty();
        if finished || reply.close {
            // Done, or the server will close: no further calls on this connection. In wrk's
            // model a server that closes once it has answered all it was asked ends the
            // connection cleanly (it is replaced), as one that answers HTTP/1.0 does.
            let ok = finished || (self.cfg.endless && c.inflight.is_empty());
            if !ok {
                self.stats.errors.connreset += 1;
            }
            self.close(fd, ok);
            return;
        }
        // When the next call is due: wrk2's model paces it from the last one's due time,
        // whenever that one was sent and answered; a session's think time waits from now.
        if c.inflight.is_empty() {
            let next = match self.cfg.pace {
                Some(pace) => Some(c.due + pace),
                None if c.next < c.calls.len() || self.cfg.endless => {
                    // An endless session's first call again once it has made its last.
                    let upcoming = if c.next < c.calls.len() { c.next } else { 0 };
                    let think = c.calls.get(upcoming).map_or(Duration::ZERO, |x| x.think);
                    Some(now + think)
                }
                None => None,
            };
            if let Some(due) = next {
                c.due = due;
                if due > now {
                    c.stage = Stage::Thinking;
                    self.next_gen += 1;
                    c.gen = self.next_gen;
                    self.thinkers
                        .push(std::cmp::Reverse((due, fd, self.next_gen)));
                    self.unlink(fd); // no deadline while thinking
                    return;
                }
            }
        }
        // Every reply re-arms the deadline: `timeout` bounds the wait for each reply (httperf's
        // --timeout), also while others are still in flight behind it.
        self.arm_timer(fd, Stage::Active);
        self.queue_requests(fd, now);
    }

    fn close(&mut self, fd: RawFd, success: bool) {
        self.unlink(fd);
        let Some(slot) = self.conns.get_mut(fd as usize) else {
            return;
        };
        let Some(c) = slot.take() else {
            return;
        };
        // No EPOLL_CTL_DEL: closing the only descriptor of the socket removes it from the epoll
        // set, one syscall fewer per connection.
        let _ = sys::close(fd);
        self.active -= 1;
        if self.cfg.endless {
            // wrk's model keeps its connections: a closed one is replaced at once.
            self.restarts += 1;
        }
        if success {
            self.stats.completed += 1;
            self.stats.replies_per_conn_sum += c.replies;
            let us = Instant::now()
                .saturating_duration_since(c.started)
                .as_micros() as u64;
            let _ = self.stats.conn_time.record(us.max(1));
        }
        let Conn {
            mut calls,
            mut out,
            mut inflight,
            mut parser,
            ..
        } = c;
        calls.clear();
        out.clear();
        inflight.clear();
        parser.clear();
        self.spare.push(Spare {
            calls,
            out,
            inflight,
            parser,
        });
    }
}
