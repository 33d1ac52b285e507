//! The `Date` header value, formatted at most once per second. SPEC: `DateCache::new()` formats
//! now; `refresh(now)` reformats only when the whole second changed (compare unix seconds);
//! `get()` returns the 29-byte IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`). Use httpdate.

use std::time::SystemTime;

#[derive(Debug, Clone)]
pub struct DateCache {
    secs: u64,
    text: [u8; 29],
}

impl DateCache {
    pub fn new() -> DateCache {
        let _ = (0u64, [0u8; 29]);
        todo!()
    }
    /// Reformats if `now` is in a different second; cheap otherwise.
    pub fn refresh(&mut self, now: SystemTime) {
        let _ = (now, self.secs, self.text);
        todo!()
    }
    pub fn get(&self) -> &[u8] {
        &self.text
    }
}

impl Default for DateCache {
    fn default() -> Self {
        DateCache::new()
    }
}
