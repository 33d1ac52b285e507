//! Validators, conditional requests and byte ranges of the static server (RFC 9110 §8.8.3,
//! §13, §14).
//!
//! - [`push_etag`]: a file's strong entity tag, `"<size hex>-<mtime ns hex>"`, from its size and
//!   its modification time to the nanosecond (as nginx's, from mtime and size; no inode, which
//!   differs between replicas of the same files). The content cache formats it once, when it
//!   builds a file's header lines.
//! - [`parse_range`]: a `Range` field. One range (`bytes=0-9`, `bytes=9500-`, `bytes=-500`) is
//!   served as a part; several are answered with the whole file (RFC 9110 §14.2 lets a server
//!   ignore Range, and one part needs no multipart body); another unit, or any syntax error
//!   (`bytes=5-1`, `bytes=`, `bytes=-`, a sign, a space), makes the field invalid and it is
//!   ignored. A number too large for 64 bits saturates: a first-byte-pos past any file is
//!   unsatisfiable (416), a last-byte-pos or suffix-length is clamped to the file.
//! - [`evaluate`]: the preconditions in the order of RFC 9110 §13.2.2 — `If-Match` (strong
//!   comparison; else `If-Unmodified-Since`) → 412; `If-None-Match` (weak comparison; else
//!   `If-Modified-Since`) → 304; then `If-Range` (an entity tag by strong comparison, or a date
//!   equal to Last-Modified) decides whether `Range` applies → 206 or 416.
//!
//! A file of length 0 has no range to serve: Range is ignored for it (200, empty).

use std::time::SystemTime;

/// The fields of a request that may change its answer, besides `If-Modified-Since` (which the
/// request keeps on its own, as the proxy reads it too). Each is the field's value, whitespace
/// trimmed; a field given more than once is ignored (`If-Match`, `If-Unmodified-Since`,
/// `Range`) or made to never match (`If-None-Match`, which then still turns
/// `If-Modified-Since` off, and `If-Range`, which then turns Range off): a full response is
/// always a correct answer to a GET.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Conditions<'a> {
    pub if_match: Option<&'a [u8]>,
    pub if_none_match: Option<&'a [u8]>,
    pub if_unmodified_since: Option<SystemTime>,
    pub if_range: Option<&'a [u8]>,
    pub range: Option<&'a [u8]>,
}

impl Conditions<'_> {
    /// None of the fields: the answer is the whole file.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.if_match.is_none()
            && self.if_none_match.is_none()
            && self.if_unmodified_since.is_none()
            && self.range.is_none()
    }
}

/// What a file's answer is compared with.
#[derive(Copy, Clone, Debug)]
pub struct Validators<'v> {
    /// The strong entity tag, quotes included.
    pub etag: &'v [u8],
    /// Whole seconds, as Last-Modified says it.
    pub last_modified: SystemTime,
    pub len: u64,
}

/// The answer the preconditions and Range select.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// 200, the whole file.
    Full,
    /// 206, bytes `first..=last` (`last < len`).
    Part { first: u64, last: u64 },
    /// 304.
    NotModified,
    /// 412.
    PreconditionFailed,
    /// 416, with `Content-Range: bytes */len`.
    Unsatisfiable,
}

impl Outcome {
    /// Whether a GET answered so sends bytes of the file.
    #[inline]
    pub fn has_body(self) -> bool {
        matches!(self, Outcome::Full | Outcome::Part { .. })
    }
}

/// The preconditions of RFC 9110 §13.2.2, in its order, then Range (see the module doc).
#[inline]
pub fn evaluate(c: &Conditions<'_>, ims: Option<SystemTime>, v: &Validators<'_>) -> Outcome {
    if c.is_empty() && ims.is_none() {
        return Outcome::Full;
    }
    evaluate_slow(c, ims, v)
}

fn evaluate_slow(c: &Conditions<'_>, ims: Option<SystemTime>, v: &Validators<'_>) -> Outcome {
    if let Some(im) = c.if_match {
        if !matches_strong(im, v.etag) {
            return Outcome::PreconditionFailed;
        }
    } else if let Some(ius) = c.if_unmodified_since {
        if v.last_modified > ius {
            return Outcome::PreconditionFailed;
        }
    }
    if let Some(inm) = c.if_none_match {
        if matches_weak(inm, v.etag) {
            return Outcome::NotModified;
        }
    } else if let Some(ims) = ims {
        if v.last_modified <= ims {
            return Outcome::NotModified;
        }
    }
    let Some(range) = c.range else {
        return Outcome::Full;
    };
    if v.len == 0 {
        return Outcome::Full;
    }
    let Ranges::One(spec) = parse_range(range) else {
        return Outcome::Full;
    };
    if c.if_range.is_some_and(|ir| !if_range_holds(ir, v)) {
        return Outcome::Full;
    }
    match spec.resolve(v.len) {
        Some((first, last)) => Outcome::Part { first, last },
        None => Outcome::Unsatisfiable,
    }
}

/// Longest entity tag [`push_etag`] writes: two quotes, a dash, two 64-bit numbers in hex.
pub const ETAG_MAX: usize = 2 + 16 + 1 + 16;

/// Appends the strong entity tag of a file of `size` bytes last modified `mtime_ns`
/// nanoseconds after the epoch: `"<size hex>-<mtime ns hex>"`.
pub fn push_etag(out: &mut Vec<u8>, size: u64, mtime_ns: u64) {
    out.push(b'"');
    push_hex(out, size);
    out.push(b'-');
    push_hex(out, mtime_ns);
    out.push(b'"');
}

/// A modification time in nanoseconds since the epoch, from `stat`'s seconds and nanoseconds
/// (before 1970: 0).
pub fn mtime_ns(sec: i64, nsec: i64) -> u64 {
    let ns = i128::from(sec) * 1_000_000_000 + i128::from(nsec);
    u64::try_from(ns.max(0)).unwrap_or(u64::MAX)
}

fn push_hex(out: &mut Vec<u8>, n: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = HEX[(n & 15) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// An entity tag as a field carries it: weak or not, and its opaque tag with its quotes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Tag<'a> {
    weak: bool,
    opaque: &'a [u8],
}

/// The entity tag at the start of `s` and what follows it; None if `s` does not start with one
/// (`entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE`, etagc = %x21 / %x23-7E / obs-text).
fn tag(s: &[u8]) -> Option<(Tag<'_>, &[u8])> {
    let (weak, s) = match s.strip_prefix(b"W/") {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let rest = s.strip_prefix(b"\"")?;
    let close = rest.iter().position(|&b| b == b'"')?;
    if !rest[..close]
        .iter()
        .all(|&b| b == 0x21 || b >= 0x23 && b != 0x7f)
    {
        return None;
    }
    let opaque = &s[..close + 2];
    Some((Tag { weak, opaque }, &rest[close + 1..]))
}

/// Whether some entity tag of the list `v` (`#entity-tag`, empty elements allowed) satisfies
/// `f`. A syntax error ends the list: the tags before it count, nothing after.
fn any_tag(v: &[u8], mut f: impl FnMut(Tag<'_>) -> bool) -> bool {
    let mut s = v;
    loop {
        while let [b' ' | b'\t' | b',', rest @ ..] = s {
            s = rest;
        }
        if s.is_empty() {
            return false;
        }
        let Some((t, rest)) = tag(s) else {
            return false;
        };
        if f(t) {
            return true;
        }
        let rest = rest.trim_ascii_start();
        if !(rest.is_empty() || rest.starts_with(b",")) {
            return false;
        }
        s = rest;
    }
}

/// `If-Match`: `*`, or a listed tag equal to `etag` by strong comparison (neither weak).
pub fn matches_strong(v: &[u8], etag: &[u8]) -> bool {
    let v = v.trim_ascii();
    v == b"*" || any_tag(v, |t| !t.weak && t.opaque == etag)
}

/// `If-None-Match`: `*`, or a listed tag equal to `etag` by weak comparison (`W/` ignored).
pub fn matches_weak(v: &[u8], etag: &[u8]) -> bool {
    let v = v.trim_ascii();
    v == b"*" || any_tag(v, |t| t.opaque == etag)
}

/// `If-Range`: an entity tag equal to the file's by strong comparison, or an HTTP-date equal
/// to its Last-Modified; anything else (a weak tag, a list, an invalid date) does not hold.
pub fn if_range_holds(v: &[u8], val: &Validators<'_>) -> bool {
    let v = v.trim_ascii();
    if v.starts_with(b"\"") || v.starts_with(b"W/") {
        return match tag(v) {
            Some((t, rest)) => rest.is_empty() && !t.weak && t.opaque == val.etag,
            None => false,
        };
    }
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| httpdate::parse_http_date(s).ok())
        .is_some_and(|d| d == val.last_modified)
}

/// One byte range as the request wrote it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RangeSpec {
    /// `first-` or `first-last`.
    From { first: u64, last: Option<u64> },
    /// `-suffix`: the last `suffix` bytes.
    Suffix(u64),
}

impl RangeSpec {
    /// The bytes `(first, last)` it selects of a representation of `len` bytes (`len > 0`),
    /// last clamped to the end; None if it is unsatisfiable (a first byte at or past the end,
    /// a suffix of 0).
    pub fn resolve(self, len: u64) -> Option<(u64, u64)> {
        let end = len.checked_sub(1)?;
        match self {
            RangeSpec::From { first, .. } if first >= len => None,
            RangeSpec::From { first, last } => Some((first, last.map_or(end, |l| l.min(end)))),
            RangeSpec::Suffix(0) => None,
            RangeSpec::Suffix(n) => Some((len.saturating_sub(n), end)),
        }
    }
}

/// What a `Range` field asks for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Ranges {
    /// Another unit, or not the grammar: the field is ignored.
    Invalid,
    One(RangeSpec),
    /// More than one range: answered with the whole file.
    Several,
}

/// Parses a `Range` field value (`ranges-specifier`, RFC 9110 §14.1.1; the unit is
/// case-insensitive, empty list elements are skipped).
pub fn parse_range(v: &[u8]) -> Ranges {
    let v = v.trim_ascii();
    let Some(eq) = v.iter().position(|&b| b == b'=') else {
        return Ranges::Invalid;
    };
    if !v[..eq].eq_ignore_ascii_case(b"bytes") {
        return Ranges::Invalid;
    }
    let mut one = None;
    let mut count = 0;
    for elem in v[eq + 1..].split(|&b| b == b',') {
        let elem = elem.trim_ascii();
        if elem.is_empty() {
            continue;
        }
        let Some(spec) = range_spec(elem) else {
            return Ranges::Invalid;
        };
        one = Some(spec);
        count += 1;
    }
    match (count, one) {
        (1, Some(spec)) => Ranges::One(spec),
        (0, _) => Ranges::Invalid,
        _ => Ranges::Several,
    }
}

/// `first-[last]` or `-suffix`; None if not that grammar or `last < first`.
fn range_spec(s: &[u8]) -> Option<RangeSpec> {
    let dash = s.iter().position(|&b| b == b'-')?;
    let (a, b) = (&s[..dash], &s[dash + 1..]);
    if a.is_empty() {
        return Some(RangeSpec::Suffix(digits(b)?));
    }
    let first = digits(a)?;
    let last = if b.is_empty() { None } else { Some(digits(b)?) };
    if last.is_some_and(|l| l < first) {
        return None;
    }
    Some(RangeSpec::From { first, last })
}

/// `1*DIGIT`, saturating at `u64::MAX`.
fn digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// Appends `Content-Range: bytes first-last/len` (or `bytes */len` when `part` is None) and
/// its CRLF.
pub fn push_content_range(out: &mut Vec<u8>, part: Option<(u64, u64)>, len: u64) {
    out.extend_from_slice(b"Content-Range: bytes ");
    match part {
        Some((first, last)) => {
            crate::response::push_decimal(out, first);
            out.push(b'-');
            crate::response::push_decimal(out, last);
        }
        None => out.push(b'*'),
    }
    out.push(b'/');
    crate::response::push_decimal(out, len);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests;
