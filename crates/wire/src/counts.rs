//! Counts that more than one document carries.

use serde::{Deserialize, Serialize};

/// The exit summary's two traffic lines, alike for the server and the proxy: connections
/// accepted, closed and at most open at once; requests, and responses by class.
pub fn traffic_lines(
    accepted: u64,
    closed: u64,
    max_active: u64,
    requests: u64,
    r: &StatusClasses,
) -> String {
    format!(
        "  connections: accepted {accepted} closed {closed} max active {max_active}\n  \
         requests: {requests}  responses: 2xx {} 3xx {} 4xx {} 5xx {}\n",
        r.s2xx, r.s3xx, r.s4xx, r.s5xx
    )
}

/// Replies (the load generator) or responses (the server, the proxy) per status class.
///
/// Producers count into an array of [`StatusClasses::SLOTS`] counters indexed by
/// [`StatusClasses::slot`] and turn it into this type with [`StatusClasses::from_slots`], so
/// every producer files a code in the same class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusClasses {
    #[serde(rename = "1xx")]
    pub s1xx: u64,
    #[serde(rename = "2xx")]
    pub s2xx: u64,
    #[serde(rename = "3xx")]
    pub s3xx: u64,
    #[serde(rename = "4xx")]
    pub s4xx: u64,
    #[serde(rename = "5xx")]
    pub s5xx: u64,
    /// Codes outside 100–599. Written only when there were some, so that documents keep the
    /// five classes they always had (and those written before the field read as 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub other: u64,
}

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl StatusClasses {
    /// Counters a producer keeps: one per class, `other` in slot 0.
    pub const SLOTS: usize = 6;

    /// The counter a status code is filed in: 1–5 for 1xx–5xx, 0 for any other code.
    #[inline]
    pub const fn slot(code: u16) -> usize {
        match code {
            100..=599 => (code / 100) as usize,
            _ => 0,
        }
    }

    /// The classes from counters indexed by [`StatusClasses::slot`].
    pub fn from_slots(c: [u64; Self::SLOTS]) -> StatusClasses {
        StatusClasses {
            s1xx: c[1],
            s2xx: c[2],
            s3xx: c[3],
            s4xx: c[4],
            s5xx: c[5],
            other: c[0],
        }
    }

    /// The counters indexed by [`StatusClasses::slot`], as [`StatusClasses::from_slots`] takes
    /// them.
    pub fn slots(&self) -> [u64; Self::SLOTS] {
        [
            self.other, self.s1xx, self.s2xx, self.s3xx, self.s4xx, self.s5xx,
        ]
    }

    /// Adds `o`'s counts, class by class.
    pub fn add(&mut self, o: &StatusClasses) {
        let mut c = self.slots();
        for (sum, n) in c.iter_mut().zip(o.slots()) {
            *sum += n;
        }
        *self = StatusClasses::from_slots(c);
    }

    /// Every reply or response counted.
    pub fn total(&self) -> u64 {
        self.s1xx + self.s2xx + self.s3xx + self.s4xx + self.s5xx + self.other
    }
}

/// One syscall's use by a server's or a proxy's workers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyscallCount {
    /// Calls, including those that failed or would have blocked.
    pub calls: u64,
    pub errors: u64,
    /// Calls that would have blocked (EAGAIN, EINPROGRESS): a nonblocking descriptor's "not
    /// yet", not an error. Written only when some did (and 0 in documents from before).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub would_block: u64,
    /// Nanoseconds inside the call (with `--profile` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns: Option<u64>,
    /// Share of all syscall time (with `--profile` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_filed_by_class_and_other_is_written_only_when_counted() {
        assert_eq!(StatusClasses::slot(100), 1);
        assert_eq!(StatusClasses::slot(204), 2);
        assert_eq!(StatusClasses::slot(599), 5);
        assert_eq!(StatusClasses::slot(99), 0);
        assert_eq!(StatusClasses::slot(600), 0);
        assert_eq!(StatusClasses::slot(0), 0);
        let s = StatusClasses::from_slots([1, 0, 7, 0, 2, 3]);
        assert_eq!(
            (s.s2xx, s.s4xx, s.s5xx, s.other, s.total()),
            (7, 2, 3, 1, 13)
        );
        let five = r#"{"1xx":0,"2xx":7,"3xx":0,"4xx":2,"5xx":3}"#;
        let old: StatusClasses = serde_json::from_str(five).unwrap();
        assert_eq!(old.other, 0);
        assert_eq!(serde_json::to_string(&old).unwrap(), five);
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"1xx":0,"2xx":7,"3xx":0,"4xx":2,"5xx":3,"other":1}"#
        );
    }
}
