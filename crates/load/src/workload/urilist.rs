//! A URI list: one URI per line, taken round-robin, `calls_per_session` per session.
//!
//! Round-robin rather than random so that a list is a reproducible trace: with one engine thread,
//! request *k* is always line *k mod n*. Each clone (one per engine thread) keeps its own position
//! and starts where the original stood, so with T threads every thread walks the same order; the
//! mix over the run is still exactly the list's.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{Call, Method, Workload, WorkloadError};

#[derive(Clone, Debug)]
pub struct UriList {
    uris: Arc<[Arc<str>]>,
    calls: usize,
    next: usize,
    method: Method,
}

/// Why a URI is refused (shared with the session-log parser).
pub(crate) fn check_uri(uri: &str) -> Result<(), String> {
    if !uri.starts_with('/') {
        return Err(format!(
            "URI '{uri}' must start with '/' (an origin-form request target)"
        ));
    }
    if let Some(c) = uri.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "URI '{}' contains {:?}, which cannot appear in a request line",
            uri.escape_debug(),
            c
        ));
    }
    Ok(())
}

impl UriList {
    /// A list from memory. Fails when the list is empty or a URI cannot be sent as a request
    /// target.
    pub fn new(uris: Vec<String>, calls_per_session: usize) -> Result<UriList, WorkloadError> {
        if uris.is_empty() {
            return Err(WorkloadError::Config("the URI list is empty".into()));
        }
        for u in &uris {
            check_uri(u).map_err(WorkloadError::Config)?;
        }
        Ok(UriList {
            uris: uris.iter().map(|u| Arc::from(u.as_str())).collect(),
            calls: calls_per_session.max(1),
            next: 0,
            method: Method::Get,
        })
    }

    /// Every call with `method` (GET by default).
    pub fn with_method(mut self, method: Method) -> UriList {
        self.method = method;
        self
    }

    /// Reads one URI per line; blank lines and lines starting with `#` are skipped, surrounding
    /// whitespace is trimmed.
    pub fn from_file(path: &Path, calls_per_session: usize) -> Result<UriList, WorkloadError> {
        let text = std::fs::read_to_string(path).map_err(|error| WorkloadError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let mut uris = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            check_uri(line).map_err(|msg| WorkloadError::Parse {
                path: path.to_path_buf(),
                line: i + 1,
                msg,
            })?;
            uris.push(line.to_string());
        }
        if uris.is_empty() {
            return Err(WorkloadError::Invalid {
                path: path.to_path_buf(),
                msg: "no URIs (only blank lines and comments)".into(),
            });
        }
        UriList::new(uris, calls_per_session)
    }

    /// How many URIs the list holds.
    pub fn len(&self) -> usize {
        self.uris.len()
    }

    pub fn is_empty(&self) -> bool {
        self.uris.is_empty()
    }

    /// The URIs, in order.
    pub fn uris(&self) -> impl Iterator<Item = &str> {
        self.uris.iter().map(|u| &**u)
    }
}

impl Workload for UriList {
    fn next_session(&mut self, out: &mut Vec<Call>) {
        for _ in 0..self.calls {
            out.push(Call {
                uri: self.uris[self.next].clone(),
                think: Duration::ZERO,
                method: self.method,
            });
            self.next += 1;
            if self.next == self.uris.len() {
                self.next = 0;
            }
        }
    }

    fn describe(&self) -> String {
        format!(
            "URI list: {} URIs round-robin, {} per connection",
            self.uris.len(),
            self.calls
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_wraps_across_sessions() {
        let mut w = UriList::new(vec!["/a".into(), "/b".into(), "/c".into()], 2).unwrap();
        let mut out = Vec::new();
        let mut seen = Vec::new();
        for _ in 0..3 {
            out.clear();
            w.next_session(&mut out);
            assert_eq!(out.len(), 2);
            seen.extend(out.iter().map(|c| c.uri.to_string()));
        }
        assert_eq!(seen, ["/a", "/b", "/c", "/a", "/b", "/c"]);
    }

    #[test]
    fn refuses_empty_and_bad_uris() {
        assert!(UriList::new(vec![], 1).is_err());
        let e = UriList::new(vec!["one".into()], 1).unwrap_err().to_string();
        assert!(e.contains("must start with '/'"), "{e}");
        let e = UriList::new(vec!["/a b".into()], 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot appear"), "{e}");
    }

    #[test]
    fn zero_calls_means_one() {
        let mut w = UriList::new(vec!["/a".into()], 0).unwrap();
        let mut out = Vec::new();
        w.next_session(&mut out);
        assert_eq!(out.len(), 1);
    }
}
