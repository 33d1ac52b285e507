//! Timeouts: every client's one deadline, re-armed as it makes progress, and what each kind of
//! expiry answers (408, 504, a close).

use super::*;

impl<E: Engine> Worker<E> {
    /// The client made progress: its `--timeout` starts over (a store; the deadline follows
    /// when the drive ends, in `rearm`).
    #[inline]
    pub(super) fn touch(&mut self, c: &mut Client) {
        c.progress_at = self.now;
    }

    /// Sets the client's one deadline to the first of the clocks that run in its state: no
    /// progress (`--timeout`), the request head's total time (`--header-timeout`, while it
    /// waits for a head with nothing to send), the peer taking none of its output
    /// (`--send-timeout`) and the origin's or a tunnel target's connect (`--connect-timeout`).
    /// A lingering close keeps the deadline `start_linger` gave it.
    pub(super) fn rearm(&mut self, c: &mut Client) {
        if c.phase == Phase::Lingering {
            return;
        }
        let now = self.now;
        let output = c.has_output();
        if c.phase == Phase::Idle && !output && !c.close_after {
            c.head_since.get_or_insert(now);
        } else {
            c.head_since = None;
        }
        if output {
            c.send_since.get_or_insert(now);
        } else {
            c.send_since = None;
        }
        let mut at = self.cfg.timeout.and_then(|t| c.progress_at.checked_add(t));
        at = earliest(at, c.head_since.and_then(|t| self.timeouts.header_due(t)));
        at = earliest(at, c.send_since.and_then(|t| self.timeouts.send_due(t)));
        at = earliest(at, self.connect_due(c));
        self.timers.set(c, at);
    }

    /// When the connect of the client's origin connection (or its tunnel's) must be done by.
    pub(super) fn connect_due(&self, c: &Client) -> Option<Instant> {
        let t = self.cfg.connect_timeout?;
        let origin = c.x.as_ref().and_then(|x| x.origin.as_ref());
        let target = c.tunnel.as_ref().map(|t| &t.target);
        let since = origin.or(target)?.connecting_since?;
        since.checked_add(t)
    }

    pub(super) fn expire(&mut self) {
        if self.gate.retry_due(self.now) {
            self.resume_accept();
        }
        self.watch_idle_due();
        while let Some(due) = self.timers.pop_due(self.now) {
            let live =
                matches!(self.slots.get(due.fd as usize), Some(Slot::Client(c)) if c.id == due.id);
            if !live {
                continue;
            }
            let mut c = self.take_client(due.fd).expect("a client");
            if self.timers.expired(&mut *c, due, self.now) {
                self.timed_out(c);
            } else {
                *self.slot(due.fd) = Slot::Client(c);
            }
        }
        let slots = &self.slots;
        self.timers.compact(self.gate.active, |d| {
            matches!(slots.get(d.fd as usize), Some(Slot::Client(c))
                if c.id == d.id && c.timer.stands_for(d))
        });
    }

    /// The client's deadline passed: which of its clocks ran out decides what it is told.
    pub(super) fn timed_out(&mut self, mut c: Box<Client>) {
        let fd = c.fd;
        let now = self.now;
        let overdue = |t: Option<Instant>| t.is_some_and(|t| t <= now);
        if c.phase == Phase::Lingering {
            self.close_client(c);
            return;
        }
        if overdue(self.connect_due(&c)) {
            // The origin (or the tunnel's target) did not take the connection in time: 504,
            // told apart from a refused connection's 502.
            self.stats.connect_timeouts.inc();
            self.stats.gateway_timeout.inc();
            let (minor, head) = match (c.x.take(), c.tunnel.take()) {
                (Some(x), _) => {
                    let r = (x.client_minor, x.head_request);
                    self.drop_exchange(*x, false);
                    r
                }
                (None, Some(t)) => {
                    self.drop_tunnel(*t);
                    (1, false)
                }
                (None, None) => (1, false),
            };
            self.error_response(&mut c, Status::GatewayTimeout, minor, false, head);
        } else if overdue(c.head_since.and_then(|t| self.timeouts.header_due(t))) {
            // A request head not complete in its total time, however it trickled in.
            self.stats.header_timeouts.inc();
            if c.rbuf.is_empty() {
                self.close_client(c);
                return;
            }
            c.rbuf.clear();
            self.error_response(&mut c, Status::RequestTimeout, 1, false, false);
        } else if overdue(c.send_since.and_then(|t| self.timeouts.send_due(t))) {
            // It took none of what waits for it: nothing more can be said to it.
            self.stats.send_timeouts.inc();
            self.close_client_as(c, true);
            return;
        } else {
            self.stats.timeouts.inc();
            if !self.progress_timed_out(&mut c) {
                self.close_client(c);
                return;
            }
        }
        c.phase = Phase::Idle;
        c.close_after = true;
        self.touch(&mut c);
        *self.slot(fd) = Slot::Client(c);
        self.drive_client(fd);
    }

    /// No progress for `--timeout`: a 504 if it waits for the origin's answer, a 408 if it
    /// stopped sending its request (head or body); false if it is simply to be closed.
    pub(super) fn progress_timed_out(&mut self, c: &mut Client) -> bool {
        let pulling =
            c.x.as_ref()
                .is_some_and(|x| x.req_body.as_ref().is_some_and(|b| !b.done));
        let waiting_head = c.phase == Phase::Fetch && !pulling;
        let partial_request = c.phase == Phase::Idle && !c.rbuf.is_empty() && !c.has_output();
        if waiting_head {
            let x = c.x.take().expect("fetching");
            let (minor, head) = (x.client_minor, x.head_request);
            self.drop_exchange(*x, false);
            self.stats.gateway_timeout.inc();
            self.error_response(c, Status::GatewayTimeout, minor, false, head);
            true
        } else if partial_request
            || c.phase == Phase::Buffer
            || (c.phase == Phase::Fetch && pulling)
        {
            // The client stopped sending its request (head, or body).
            if let Some(x) = c.x.take() {
                self.drop_exchange(*x, false);
            }
            c.rbuf.clear();
            self.error_response(c, Status::RequestTimeout, 1, false, false);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::super::rig::{ok, Rig};
    use super::*;

    /// Half a request head, then nothing: 408 after `--header-timeout`, and a close.
    #[test]
    fn a_trickled_head_times_out() {
        let mut r = Rig::new(
            |c| c.header_timeout = Some(Duration::from_millis(200)),
            |_| ok("x", ""),
        );
        let mut s = r.client();
        s.write_all(b"GET / HTTP/1.1\r\nHo").unwrap();
        let a = r.read(&mut s, false);
        assert_eq!(a.status, 408);
        assert!(r.closed(&mut s));
        assert_eq!(r.w.stats.header_timeouts.get(), 1);
    }

    /// An origin that never answers: 504 after `--timeout`.
    #[test]
    fn a_silent_origin_is_504() {
        let mut r = Rig::new(
            |c| c.timeout = Some(Duration::from_millis(200)),
            |_| {
                std::thread::sleep(Duration::from_secs(2));
                Vec::new()
            },
        );
        assert_eq!(r.get("/p", "").status, 504);
    }
}
