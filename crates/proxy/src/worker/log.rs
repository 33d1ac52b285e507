//! The access log: a request's line opened when its head is read, its answer noted, and written
//! when its response is done.

use super::*;

impl<P: Io> Worker<P> {
    /// A request was taken from `c.rbuf` (whose start is its head, `head`): its line waits
    /// for its response.
    pub(super) fn log_open(&mut self, c: &mut Client, head: &[u8]) {
        if self.log.is_none() {
            return;
        }
        c.log.push_back(Entry {
            first: c.written + c.out_pending() as u64,
            end: None,
            start: self.now,
            request: request_words(head),
            status: 0,
            cache: CacheMark::None,
            mode: "-",
        });
    }

    /// The open request's response is `status`; with `cache`, it is all queued now.
    pub(super) fn log_answered(&mut self, c: &mut Client, status: u16, cache: Option<CacheMark>) {
        let end = c.written + c.out_pending() as u64;
        if let Some(e) = c.log.back_mut().filter(|e| e.end.is_none()) {
            e.status = status;
            e.end = Some(end);
            if let Some(m) = cache {
                e.cache = m;
            }
        }
    }

    /// Writes the lines of the requests whose responses are all out (every one when the
    /// client is `closing`, with what it was sent).
    pub(super) fn log_done(&mut self, c: &mut Client, closing: bool) {
        let Some(log) = self.log.as_mut() else {
            c.log.clear();
            return;
        };
        let mut done = None;
        while let Some(e) = c.log.front() {
            let complete = e.end.is_some_and(|end| end <= c.written);
            if !complete && !closing {
                break;
            }
            let e = c.log.pop_front().expect("an entry");
            let now = *done.get_or_insert_with(Instant::now);
            if c.peer.is_none() {
                c.peer = sys::getpeername(c.fd).ok();
            }
            let end = e.end.unwrap_or(c.written).min(c.written);
            log.line(c.peer, &e, end.saturating_sub(e.first), now);
        }
    }
}
