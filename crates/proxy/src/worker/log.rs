//! The access log: a request's line opened when its head is read, its answer noted, and written
//! when its response is done.

use super::*;

impl<E: Engine> Worker<E> {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::rig::{ok, Rig};

    /// One line per request, with its status and cache mark, written when the worker flushes.
    #[test]
    fn each_request_gets_a_line() {
        let path = std::env::temp_dir().join(format!("evlab-log-{}.log", std::process::id()));
        let p = path.clone();
        let mut r = Rig::new(
            move |c| {
                let log = crate::AccessLog::open(&p.display().to_string()).unwrap();
                c.access_log = Some(Arc::new(log));
            },
            |_| ok("x", "Cache-Control: max-age=60\r\n"),
        );
        r.get("/a", "");
        r.get("/a", "");
        r.w.teardown();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains("GET /a 200") && lines[0].contains("MISS"),
            "{text}"
        );
        assert!(
            lines[1].contains("GET /a 200") && lines[1].contains("HIT"),
            "{text}"
        );
    }
}
