//! httperf `--wsesslog` session files.
//!
//! The format, as httperf(1) defines it:
//!
//! ```text
//! # a comment                          (a line whose first non-blank character is '#')
//! /foo.html think=2.0                  (a request that starts a burst)
//!     /pict1.gif                       (indented: an embedded request of that burst)
//!     /pict2.gif
//! /foo2.html method=GET
//!     /pict3.gif
//!                                      (a blank line ends the session)
//! /foo3.html
//! ```
//!
//! Each line is a URI followed by optional `name=value` attributes: `method=`, `think=` (the
//! user think time in seconds that *follows* the burst, default the `X` of `--wsesslog N,X,F`)
//! and `contents=` (a request body, quoted with `'` or `"` when it has spaces).
//!
//! How it maps to evlab's model: one session is one persistent connection; its calls are made in
//! file order (an engine with `--pipeline K` may pipeline them, as httperf pipelines a burst with
//! `--max-piped-calls`); the think time of burst *k* becomes the [`Call::think`] of burst *k+1*'s
//! first call, so the first burst starts at once and the last burst's think time is unused (the
//! session ends, as in httperf). Sessions are replayed in file order, cycling.
//!
//! `method=` takes GET or HEAD (lines without one use the default given to the parser: GET, or
//! `evlab load --method`). Not supported, each refused with a message naming the file and line:
//! other methods and `contents=` (evlab load sends no request bodies).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{Call, Method, Workload, WorkloadError};

#[derive(Clone, Debug)]
pub struct SessLog {
    sessions: Arc<[Arc<[Call]>]>,
    next: usize,
    /// For `describe`.
    name: Arc<str>,
    default_think: Duration,
}

/// One parsed line: the URI and the attributes that matter to us.
struct Line<'a> {
    uri: &'a str,
    think: Option<Duration>,
    method: Option<Method>,
}

/// Splits `name=value` attributes, honouring `'…'` and `"…"` quotes with backslash escapes (as
/// httperf does for `contents=`), so that a quoted body is one token and gets its own message.
fn tokens(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_token = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_token = true;
                let quote = c;
                loop {
                    match chars.next() {
                        None => return Err(format!("unterminated {quote} quote")),
                        Some('\\') => match chars.next() {
                            None => return Err(format!("unterminated {quote} quote")),
                            Some(e) => cur.push(e),
                        },
                        Some(q) if q == quote => break,
                        Some(o) => cur.push(o),
                    }
                }
            }
            c if c.is_whitespace() => {
                if in_token {
                    out.push(std::mem::take(&mut cur));
                    in_token = false;
                }
            }
            c => {
                in_token = true;
                cur.push(c);
            }
        }
    }
    if in_token {
        out.push(cur);
    }
    Ok(out)
}

fn parse_line(text: &str) -> Result<Line<'_>, String> {
    let text = text.trim();
    let (uri, rest) = match text.find(char::is_whitespace) {
        Some(i) => (&text[..i], &text[i..]),
        None => (text, ""),
    };
    super::urilist::check_uri(uri)?;
    let mut think = None;
    let mut method = None;
    for tok in tokens(rest)? {
        let Some((name, value)) = tok.split_once('=') else {
            return Err(format!(
                "unexpected '{tok}' after the URI (attributes are name=value: method=, think=, contents=)"
            ));
        };
        match name {
            "think" => {
                let secs: f64 = value
                    .parse()
                    .map_err(|_| format!("think={value}: not a number of seconds"))?;
                if !secs.is_finite() || secs < 0.0 {
                    return Err(format!(
                        "think={value}: must be a finite, non-negative number of seconds"
                    ));
                }
                think = Some(Duration::from_secs_f64(secs));
            }
            "method" => {
                method = Some(Method::parse(value).map_err(|_| {
                    format!(
                        "method={value} is not supported: evlab load sends GET or HEAD \
                         (requests without a body)"
                    )
                })?);
            }
            "contents" => {
                return Err(
                    "contents= (a request body) is not supported: evlab load sends requests \
                     without a body"
                        .to_string(),
                );
            }
            other => {
                return Err(format!(
                    "unknown attribute '{other}=' (httperf's session files know method=, think=, contents=)"
                ));
            }
        }
    }
    Ok(Line { uri, think, method })
}

impl SessLog {
    /// Parses an httperf session file; `default_think` is the think time of bursts that give
    /// none (the `X` of httperf's `--wsesslog N,X,F`), `default_method` the method of lines
    /// that give none.
    pub fn from_file(
        path: &Path,
        default_think: Duration,
        default_method: Method,
    ) -> Result<SessLog, WorkloadError> {
        let text = std::fs::read_to_string(path).map_err(|error| WorkloadError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        SessLog::parse(&text, default_think, default_method, path)
    }

    /// Parses session-file text; `path` only names the source in errors and `describe`.
    pub fn parse(
        text: &str,
        default_think: Duration,
        default_method: Method,
        path: &Path,
    ) -> Result<SessLog, WorkloadError> {
        let err = |line: usize, msg: String| WorkloadError::Parse {
            path: path.to_path_buf(),
            line,
            msg,
        };
        let mut sessions: Vec<Arc<[Call]>> = Vec::new();
        let mut calls: Vec<Call> = Vec::new();
        // Think time owed before the next burst's first call (that of the burst just read).
        let mut pending_think = Duration::ZERO;
        let mut flush = |calls: &mut Vec<Call>, pending: &mut Duration| {
            if !calls.is_empty() {
                sessions.push(Arc::from(std::mem::take(calls)));
            }
            *pending = Duration::ZERO;
        };
        for (i, raw) in text.lines().enumerate() {
            let lineno = i + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() {
                flush(&mut calls, &mut pending_think);
                continue;
            }
            if trimmed.starts_with('#') {
                continue;
            }
            let embedded = raw.starts_with(|c: char| c.is_whitespace());
            let line = parse_line(trimmed).map_err(|m| err(lineno, m))?;
            if embedded {
                if calls.is_empty() {
                    return Err(err(
                        lineno,
                        "indented line (an embedded request of a burst) with no request before it \
                         in this session; a session's first line must not be indented"
                            .to_string(),
                    ));
                }
                calls.push(Call {
                    uri: Arc::from(line.uri),
                    think: Duration::ZERO,
                    method: line.method.unwrap_or(default_method),
                });
                // httperf lets think= appear on any line of a burst; it sets the burst's.
                if let Some(t) = line.think {
                    pending_think = t;
                }
            } else {
                let think = if calls.is_empty() {
                    Duration::ZERO
                } else {
                    pending_think
                };
                calls.push(Call {
                    uri: Arc::from(line.uri),
                    think,
                    method: line.method.unwrap_or(default_method),
                });
                pending_think = line.think.unwrap_or(default_think);
            }
        }
        flush(&mut calls, &mut pending_think);
        if sessions.is_empty() {
            return Err(WorkloadError::Invalid {
                path: path.to_path_buf(),
                msg: "no sessions (only blank lines and comments)".into(),
            });
        }
        Ok(SessLog {
            sessions: sessions.into(),
            next: 0,
            name: Arc::from(path.display().to_string()),
            default_think,
        })
    }

    /// The number of sessions in the file.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// The calls of session `i` (file order).
    pub fn session(&self, i: usize) -> &[Call] {
        &self.sessions[i]
    }
}

impl Workload for SessLog {
    fn next_session(&mut self, out: &mut Vec<Call>) {
        out.extend_from_slice(&self.sessions[self.next]);
        self.next += 1;
        if self.next == self.sessions.len() {
            self.next = 0;
        }
    }

    fn describe(&self) -> String {
        let calls: usize = self.sessions.iter().map(|s| s.len()).sum();
        format!(
            "wsesslog {}: {} sessions, {} calls ({:.2} per session), default think {:.3} s",
            self.name,
            self.sessions.len(),
            calls,
            calls as f64 / self.sessions.len() as f64,
            self.default_think.as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_handle_quotes_and_escapes() {
        assert_eq!(
            tokens(r#" a=1  b='x y' c="q\"z" "#).unwrap(),
            ["a=1", "b=x y", "c=q\"z"]
        );
        assert!(tokens("contents='abc").is_err());
        assert!(tokens("").unwrap().is_empty());
    }
}
