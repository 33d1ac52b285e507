//! HTTP dates: the `Date` header value, formatted at most once per second, and the
//! `Last-Modified` / If-Modified-Since conversions.
//!
//! [`DateCache`] holds the 29-byte IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) of the current
//! second; `refresh(now)` reformats it only when the whole second changed, so a busy worker
//! formats once per second, not once per response. Formatting goes through `httpdate` into a
//! fixed buffer, without allocating.
//!
//! httpdate panics on times before 1970 or after 9999 (its `From<SystemTime>` expects them in
//! range); a file's mtime can be anything, so every conversion here clamps first.

use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// 9999-12-31T23:59:59Z, the last second an IMF-fixdate (4-digit year) can express.
const MAX_SECS: u64 = 253_402_300_799;

/// Whole seconds since the epoch, clamped to what an IMF-fixdate can express.
pub fn unix_secs(t: SystemTime) -> u64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs().min(MAX_SECS),
        Err(_) => 0,
    }
}

/// `t` truncated to whole seconds and clamped to the IMF-fixdate range: the precision of
/// `Last-Modified` and `If-Modified-Since`, so comparisons between them are exact.
pub fn truncate_secs(t: SystemTime) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(unix_secs(t))
}

/// Formats `t` (clamped) as a 29-byte IMF-fixdate, without allocating.
pub fn format_http_date(t: SystemTime) -> [u8; 29] {
    format_secs(unix_secs(t))
}

fn format_secs(secs: u64) -> [u8; 29] {
    let mut text = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    let date = httpdate::HttpDate::from(UNIX_EPOCH + Duration::from_secs(secs));
    // The clamp keeps the year at four digits, so the text is exactly 29 bytes and the write
    // cannot run out of room; if it ever did, the epoch text above is a safe fallback.
    let mut cursor: &mut [u8] = &mut text;
    if write!(cursor, "{date}").is_err() {
        return *b"Thu, 01 Jan 1970 00:00:00 GMT";
    }
    text
}

#[derive(Debug, Clone)]
pub struct DateCache {
    secs: u64,
    text: [u8; 29],
    /// When [`DateCache::tick`] next reads the wall clock: the next second boundary, as
    /// measured on the monotonic clock when the wall clock was last read.
    next_read: Option<Instant>,
    /// How many times the text was formatted, so tests can see the once-per-second rule.
    #[cfg(test)]
    formats: u32,
}

impl DateCache {
    pub fn new() -> DateCache {
        let secs = unix_secs(SystemTime::now());
        DateCache {
            secs,
            text: format_secs(secs),
            next_read: None,
            #[cfg(test)]
            formats: 1,
        }
    }
    /// Reformats if `now` is in a different second; cheap otherwise.
    pub fn refresh(&mut self, now: SystemTime) {
        let secs = unix_secs(now);
        if secs != self.secs {
            self.secs = secs;
            self.text = format_secs(secs);
            #[cfg(test)]
            {
                self.formats += 1;
            }
        }
    }
    /// The event loop's refresh, given the monotonic time of its turn: reads the wall clock
    /// only once the second it last saw has ended, so most turns compare two instants and do
    /// nothing else. A step of the wall clock shows at the next boundary, within a second.
    pub fn tick(&mut self, now: Instant) {
        if self.next_read.is_some_and(|at| now < at) {
            return;
        }
        let wall = SystemTime::now();
        self.refresh(wall);
        let into_second = wall
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        self.next_read = Some(now + Duration::from_nanos(u64::from(1_000_000_000 - into_second)));
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

#[cfg(test)]
mod tests {
    use super::*;

    const RFC_EXAMPLE: u64 = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT

    #[test]
    fn tick_reads_the_wall_clock_once_per_second() {
        let mut d = DateCache::new();
        let t0 = Instant::now();
        d.tick(t0);
        let at = d.next_read.expect("a boundary after the first tick");
        assert!(
            at > t0 && at <= t0 + Duration::from_secs(1),
            "{:?}",
            at - t0
        );
        // Before the boundary nothing is read again, whatever the wall clock says.
        d.secs = 0;
        d.tick(at - Duration::from_nanos(1));
        assert_eq!(d.secs, 0);
        // At the boundary the wall clock is read and the text follows it.
        d.tick(at);
        assert_ne!(d.secs, 0);
        assert!(d.next_read.unwrap() > at);
    }

    #[test]
    fn formats_imf_fixdate() {
        let t = UNIX_EPOCH + Duration::from_secs(RFC_EXAMPLE);
        assert_eq!(&format_http_date(t), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(
            &format_http_date(UNIX_EPOCH),
            b"Thu, 01 Jan 1970 00:00:00 GMT"
        );
    }

    #[test]
    fn clamps_instead_of_panicking() {
        let before = UNIX_EPOCH - Duration::from_secs(1000);
        assert_eq!(&format_http_date(before), b"Thu, 01 Jan 1970 00:00:00 GMT");
        let after = UNIX_EPOCH + Duration::from_secs(MAX_SECS + 1_000_000);
        assert_eq!(&format_http_date(after), b"Fri, 31 Dec 9999 23:59:59 GMT");
        let mut d = DateCache::new();
        d.refresh(before);
        d.refresh(after);
        assert_eq!(d.get(), b"Fri, 31 Dec 9999 23:59:59 GMT");
    }

    #[test]
    fn truncates_to_seconds() {
        let t = UNIX_EPOCH + Duration::new(RFC_EXAMPLE, 999_999_999);
        assert_eq!(
            truncate_secs(t),
            UNIX_EPOCH + Duration::from_secs(RFC_EXAMPLE)
        );
        assert_eq!(
            truncate_secs(UNIX_EPOCH - Duration::from_secs(5)),
            UNIX_EPOCH
        );
    }

    #[test]
    fn new_is_now() {
        let d = DateCache::new();
        let text = d.get();
        assert_eq!(text.len(), 29);
        assert!(text.ends_with(b" GMT"));
        let parsed = httpdate::parse_http_date(std::str::from_utf8(text).unwrap()).unwrap();
        let now = SystemTime::now();
        let age = now.duration_since(parsed).unwrap();
        assert!(age < Duration::from_secs(5), "{age:?}");
    }

    #[test]
    fn refreshes_once_per_second() {
        let base = UNIX_EPOCH + Duration::from_secs(RFC_EXAMPLE);
        let mut d = DateCache::new();
        d.refresh(base);
        let n = d.formats;
        assert_eq!(d.get(), b"Sun, 06 Nov 1994 08:49:37 GMT");
        // Same whole second: no reformatting however often it is asked.
        for ms in [0, 1, 500, 999] {
            d.refresh(base + Duration::from_millis(ms));
        }
        assert_eq!(d.formats, n);
        assert_eq!(d.get(), b"Sun, 06 Nov 1994 08:49:37 GMT");
        d.refresh(base + Duration::from_millis(1000));
        assert_eq!(d.formats, n + 1);
        assert_eq!(d.get(), b"Sun, 06 Nov 1994 08:49:38 GMT");
        // Going back (clock step) is a different second too.
        d.refresh(base);
        assert_eq!(d.formats, n + 2);
        assert_eq!(d.get(), b"Sun, 06 Nov 1994 08:49:37 GMT");
    }
}
