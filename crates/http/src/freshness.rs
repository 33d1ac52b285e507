//! What a shared cache may do with a response (RFC 9111): whether it may store it, and for how
//! long it may reuse it, from the response's fields, the request's, and the cache's policy. Pure
//! functions of fields and times: nothing here knows sockets or where objects are kept.
//!
//! The policy is safe by default, as nginx's and Varnish's are:
//! - A response's freshness comes from its own fields: `s-maxage`, else `max-age`, else
//!   `Expires` less `Date` (§4.2.1). Without them, a response with `Last-Modified` and a
//!   heuristically cacheable status (RFC 9110 §15.1), or `public`, gets a tenth of the time since
//!   it was last modified, at most [`Policy::heuristic_max`] (§4.2.2). Anything else gets no
//!   freshness at all and is not stored, unless the operator gives one ([`Policy::override_ttl`],
//!   `evlab proxy --cache-ttl`).
//! - A response to a request with `Authorization` is stored only when it says `public`,
//!   `s-maxage` or `must-revalidate` (§3.5).
//! - A response to a request with a `Cookie`, or a response with `Set-Cookie`, is stored only
//!   with explicit shared freshness: `s-maxage`, or `public` with `max-age` or `Expires`
//!   (Varnish's built-in policy stores neither). Neither the heuristic nor the override applies
//!   to it: a page built from a cookie stays with its user unless its origin says otherwise.
//! - `no-store` and `private` keep a response out of the cache, and so does `Vary: *`; `no-cache`
//!   lets it be stored only to be validated before each use; any other `Vary` makes it a variant,
//!   answering only requests that match it.
//! - `Age` is read as RFC 9111 §5.1 says: a list (on one line or several) by its first member,
//!   and an invalid value (`-1`, `7200.0`, `foo`) is ignored. An `Expires` that is not a date is
//!   in the past (§5.3), and a directive given twice with different values is stale (§4.2.1
//!   allows either reading; the stale one is the safe one).

use std::time::{Duration, SystemTime};

/// The largest delta-seconds value a cache needs to tell apart: RFC 9111 §1.2.2 asks a cache
/// to read anything larger (or anything whose arithmetic would overflow) as 2^31 seconds. Every
/// freshness figure is bounded by it, so no time arithmetic on it can overflow.
pub const MAX_DELTA_SECONDS: u64 = 1 << 31;

/// The share of the time since `Last-Modified` that a heuristic gives as freshness: one tenth,
/// the fraction RFC 9111 §4.2.2 names.
const HEURISTIC_DIVISOR: u32 = 10;

/// What a shared cache needs from a response's fields (see the module's notes for what each
/// one does to storing and freshness).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheInfo {
    pub no_store: bool,
    pub private: bool,
    pub no_cache: bool,
    pub public: bool,
    pub must_revalidate: bool,
    pub proxy_revalidate: bool,
    /// `must-understand`: a cache that understands the status may store the response even
    /// with `no-store` (RFC 9111 §5.2.2.3).
    pub must_understand: bool,
    /// `max-age`, at most [`MAX_DELTA_SECONDS`]; 0 for an invalid value (RFC 9111 §4.2.1: stale
    /// at once) or for two different values.
    pub max_age: Option<u64>,
    /// `s-maxage`, read as `max-age` is.
    pub s_maxage: Option<u64>,
    /// `Expires`; an invalid date (`0`, say) is a time in the past (RFC 9111 §5.3), here the
    /// epoch; given twice, the earlier.
    pub expires: Option<SystemTime>,
    /// `Date`, if valid.
    pub date: Option<SystemTime>,
    /// `Age`: the first member of the first line, at most [`MAX_DELTA_SECONDS`]; 0 when
    /// absent or invalid.
    pub age: u64,
    /// `Vary` names request fields: the response answers only requests that send what its
    /// request sent in them (a variant, RFC 9111 §4.1).
    pub vary: bool,
    /// `Vary: *` (alone or in a list): no request matches, so it is never stored.
    pub vary_star: bool,
    pub set_cookie: bool,
    age_seen: bool,
}

/// What a request tells a shared cache about reusing its response for others.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestFacts {
    pub authorization: bool,
    pub cookie: bool,
}

/// How a cache gives freshness to responses that state none of their own.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The freshness of every response that states none, in place of the heuristic
    /// (`--cache-ttl`); `None`: only the response's own fields and the heuristic. Never given
    /// to a response that a `Cookie`, `Set-Cookie` or `Authorization` keeps private.
    pub override_ttl: Option<Duration>,
    /// The most freshness the `Last-Modified` heuristic gives (`--cache-heuristic-max`); zero:
    /// no heuristic freshness at all, as nginx.
    pub heuristic_max: Duration,
}

impl Policy {
    /// A day: past it, RFC 7234 asked a cache to warn that the freshness was a guess.
    pub const DEFAULT_HEURISTIC_MAX: Duration = Duration::from_secs(24 * 3600);
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            override_ttl: None,
            heuristic_max: Policy::DEFAULT_HEURISTIC_MAX,
        }
    }
}

/// The final statuses RFC 9110 defines, whose meaning a cache knows (`must-understand`).
pub fn understood(status: u16) -> bool {
    matches!(status, 200..=206 | 300..=305 | 307 | 308 | 400..=417 | 421 | 422 | 426 | 500..=505)
}

/// Statuses a cache may give heuristic freshness (RFC 9110 §15.1).
pub fn heuristically_cacheable(status: u16) -> bool {
    matches!(
        status,
        200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

impl CacheInfo {
    /// Takes one response field into account; false when the field means nothing to a cache
    /// (the caller goes on with it).
    pub fn field(&mut self, name: &str, value: &[u8]) -> bool {
        if name.eq_ignore_ascii_case("cache-control") {
            self.cache_control(value);
        } else if name.eq_ignore_ascii_case("pragma") {
            if tokens(value).any(|t| t.eq_ignore_ascii_case(b"no-cache")) {
                self.no_cache = true;
            }
        } else if name.eq_ignore_ascii_case("vary") {
            for t in tokens(value) {
                if t == b"*" {
                    self.vary_star = true;
                } else {
                    self.vary = true;
                }
            }
        } else if name.eq_ignore_ascii_case("set-cookie") {
            self.set_cookie = true;
        } else if name.eq_ignore_ascii_case("expires") {
            let at = parse_date(value).unwrap_or(SystemTime::UNIX_EPOCH);
            self.expires = Some(self.expires.map_or(at, |e| e.min(at)));
        } else if name.eq_ignore_ascii_case("date") {
            self.date = parse_date(value);
        } else if name.eq_ignore_ascii_case("age") {
            // RFC 9111 §5.1: a list (on one line or several) counts by its first member, and
            // an invalid one (a sign, a fraction, a parameter, letters) is ignored.
            if !self.age_seen {
                self.age = tokens(value)
                    .next()
                    .and_then(parse_delta_seconds)
                    .unwrap_or(0);
            }
            self.age_seen = true;
        } else {
            return false;
        }
        true
    }

    fn cache_control(&mut self, value: &[u8]) {
        for t in tokens(value) {
            let (k, v) = directive(t);
            // An invalid value makes the response stale at once (RFC 9111 §4.2.1).
            let seconds = || v.and_then(parse_delta_seconds).unwrap_or(0);
            let once = |old: Option<u64>, new: u64| match old {
                Some(o) if o != new => Some(0),
                _ => Some(new),
            };
            if k.eq_ignore_ascii_case(b"no-store") {
                self.no_store = true;
            } else if k.eq_ignore_ascii_case(b"private") {
                self.private = true;
            } else if k.eq_ignore_ascii_case(b"no-cache") {
                self.no_cache = true;
            } else if k.eq_ignore_ascii_case(b"public") {
                self.public = true;
            } else if k.eq_ignore_ascii_case(b"must-revalidate") {
                self.must_revalidate = true;
            } else if k.eq_ignore_ascii_case(b"proxy-revalidate") {
                self.proxy_revalidate = true;
            } else if k.eq_ignore_ascii_case(b"must-understand") {
                self.must_understand = true;
            } else if k.eq_ignore_ascii_case(b"max-age") {
                self.max_age = once(self.max_age, seconds());
            } else if k.eq_ignore_ascii_case(b"s-maxage") {
                self.s_maxage = once(self.s_maxage, seconds());
            }
        }
    }

    /// Nothing in the response forbids a shared cache to store it (whether it may, and for how
    /// long, is [`CacheInfo::shared_fresh_for`]'s question).
    pub fn storable(&self) -> bool {
        // A cache that stores only statuses it understands (the caller checks it) may ignore
        // no-store under must-understand.
        let no_store = self.no_store && !self.must_understand;
        !(no_store || self.private || self.no_cache || self.vary_star)
    }

    /// The lifetime the response gives itself for a shared cache, if any.
    fn explicit_lifetime(&self, now: SystemTime) -> Option<Duration> {
        match (self.s_maxage.or(self.max_age), self.expires) {
            (Some(s), _) => Some(Duration::from_secs(s.min(MAX_DELTA_SECONDS))),
            (None, Some(exp)) => Some(
                exp.duration_since(self.date.unwrap_or(now))
                    .unwrap_or(Duration::ZERO),
            ),
            (None, None) => None,
        }
    }

    /// The response says it may be shared with a lifetime of its own: `s-maxage`, or `public`
    /// with `max-age` or `Expires`.
    pub fn explicitly_shared(&self) -> bool {
        self.s_maxage.is_some()
            || (self.public && (self.max_age.is_some() || self.expires.is_some()))
    }

    /// A tenth of the time from `Last-Modified` to `Date` (or `now`), at most `max`; only for
    /// a heuristically cacheable status or a `public` response.
    fn heuristic(
        &self,
        status: u16,
        last_modified: Option<SystemTime>,
        now: SystemTime,
        max: Duration,
    ) -> Duration {
        match last_modified {
            Some(lm) if heuristically_cacheable(status) || self.public => {
                let since = self.date.unwrap_or(now).duration_since(lm);
                (since.unwrap_or(Duration::ZERO) / HEURISTIC_DIVISOR).min(max)
            }
            _ => Duration::ZERO,
        }
    }

    /// How long, from `now`, a shared cache may reuse this response (of `status`, with
    /// `last_modified`) for requests other than the one it answers (`req`), under `policy`: its
    /// lifetime less its `Age`. Zero: not to be stored (see [`CacheInfo::shared_storage`] for a
    /// response that may be stored to be validated). Never panics, whatever the fields: every
    /// figure is bounded by [`MAX_DELTA_SECONDS`] and differences saturate at zero.
    pub fn shared_fresh_for(
        &self,
        status: u16,
        last_modified: Option<SystemTime>,
        req: RequestFacts,
        now: SystemTime,
        policy: &Policy,
    ) -> Duration {
        self.shared_storage(status, last_modified, req, now, policy)
            .unwrap_or(Duration::ZERO)
    }

    /// Whether a shared cache may store this response for other requests than `req`'s, and if
    /// so for how long from `now` it is fresh: `None`, not to be stored (`no-store`, `private`,
    /// `Vary: *`, or kept private by the request's `Authorization` or `Cookie` or its own
    /// `Set-Cookie`); `Some(ZERO)`, stored stale, to be validated before each use (`no-cache`,
    /// no lifetime left); else its lifetime less its `Age`.
    pub fn shared_storage(
        &self,
        status: u16,
        last_modified: Option<SystemTime>,
        req: RequestFacts,
        now: SystemTime,
        policy: &Policy,
    ) -> Option<Duration> {
        let no_store = self.no_store && !self.must_understand;
        if no_store || self.private || self.vary_star {
            return None;
        }
        if req.authorization && !(self.public || self.s_maxage.is_some() || self.must_revalidate) {
            return None;
        }
        let personal = req.cookie || self.set_cookie;
        if personal && !self.explicitly_shared() {
            return None;
        }
        if self.no_cache {
            return Some(Duration::ZERO);
        }
        let lifetime = match (self.explicit_lifetime(now), policy.override_ttl) {
            (Some(l), _) => l,
            (None, Some(ttl)) => ttl,
            (None, None) => self.heuristic(status, last_modified, now, policy.heuristic_max),
        };
        Some(
            lifetime
                .min(Duration::from_secs(MAX_DELTA_SECONDS))
                .saturating_sub(Duration::from_secs(self.age.min(MAX_DELTA_SECONDS))),
        )
    }

    /// A stale copy must not be served without validation, whatever the request accepts
    /// (`must-revalidate`, `proxy-revalidate`, `s-maxage` for a shared cache, `no-cache`:
    /// RFC 9111 §4.2.4, §5.2.2).
    pub fn never_stale(&self) -> bool {
        self.must_revalidate || self.proxy_revalidate || self.s_maxage.is_some() || self.no_cache
    }
}

/// A request's `Cache-Control` (RFC 9111 §5.2.1), and `Pragma: no-cache` (§5.4).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestDirectives {
    /// `max-age`: no stored response older than this.
    pub max_age: Option<u64>,
    /// `max-stale`: a stale response this much past its lifetime will do (`Some(None)`: any).
    pub max_stale: Option<Option<u64>>,
    /// `min-fresh`: only a response fresh for at least this long yet.
    pub min_fresh: Option<u64>,
    /// `no-cache` (or `Pragma: no-cache`): validate before using a stored response.
    pub no_cache: bool,
    /// `no-store`: store nothing of the request or its response.
    pub no_store: bool,
    /// `only-if-cached`: answer from the cache or with 504, never from the origin.
    pub only_if_cached: bool,
}

impl RequestDirectives {
    /// Takes one request field into account (false: not one of a cache's).
    pub fn field(&mut self, name: &str, value: &[u8]) -> bool {
        if name.eq_ignore_ascii_case("pragma") {
            self.no_cache |= tokens(value).any(|t| t.eq_ignore_ascii_case(b"no-cache"));
            return true;
        }
        if !name.eq_ignore_ascii_case("cache-control") {
            return false;
        }
        for t in tokens(value) {
            let (k, v) = directive(t);
            let secs = v.and_then(parse_delta_seconds);
            if k.eq_ignore_ascii_case(b"max-age") {
                // An invalid value asks for nothing older than now: validate.
                self.max_age = Some(secs.unwrap_or(0));
            } else if k.eq_ignore_ascii_case(b"max-stale") {
                self.max_stale = Some(secs);
            } else if k.eq_ignore_ascii_case(b"min-fresh") {
                self.min_fresh = Some(secs.unwrap_or(0));
            } else if k.eq_ignore_ascii_case(b"no-cache") {
                self.no_cache = true;
            } else if k.eq_ignore_ascii_case(b"no-store") {
                self.no_store = true;
            } else if k.eq_ignore_ascii_case(b"only-if-cached") {
                self.only_if_cached = true;
            }
        }
        true
    }
}

/// What a stored response may do for a request.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Reuse {
    /// Answer with it.
    Use,
    /// Validate it with the origin first (or, without validators, fetch anew).
    Validate,
}

/// Whether a stored response `age` old with freshness `lifetime` may answer a request with
/// directives `req` (RFC 9111 §4.2, §5.2.1): fresh enough for the request's `max-age` and
/// `min-fresh`, or stale within its `max-stale` when the response allows serving it stale
/// (`never_stale` false).
pub fn reuse(
    age: Duration,
    lifetime: Duration,
    never_stale: bool,
    req: &RequestDirectives,
) -> Reuse {
    let secs = |s: u64| Duration::from_secs(s.min(MAX_DELTA_SECONDS));
    if req.no_cache || req.max_age.is_some_and(|m| age > secs(m)) {
        return Reuse::Validate;
    }
    if age < lifetime {
        let left = lifetime - age;
        return match req.min_fresh {
            Some(m) if left < secs(m) => Reuse::Validate,
            _ => Reuse::Use,
        };
    }
    let stale = age - lifetime;
    match req.max_stale {
        Some(m) if !never_stale && m.is_none_or(|m| stale <= secs(m)) => Reuse::Use,
        _ => Reuse::Validate,
    }
}

/// Whether an `If-None-Match` value matches entity tag `etag` by weak comparison (RFC 9110
/// §13.1.2, §8.8.3.2): `*`, or any listed tag equal to it but for a `W/` prefix on either.
pub fn none_match(if_none_match: &[u8], etag: &[u8]) -> bool {
    fn opaque(t: &[u8]) -> &[u8] {
        let t = t.trim_ascii();
        t.strip_prefix(b"W/").unwrap_or(t)
    }
    let ours = opaque(etag);
    let v = if_none_match.trim_ascii();
    v == b"*" || tokens(v).any(|t| opaque(t) == ours)
}

/// A `Cache-Control` directive's name and value (its quotes taken off).
fn directive(t: &[u8]) -> (&[u8], Option<&[u8]>) {
    let (k, v) = match t.iter().position(|&b| b == b'=') {
        Some(i) => (t[..i].trim_ascii(), Some(t[i + 1..].trim_ascii())),
        None => (t, None),
    };
    let v = v.map(|v| v.strip_prefix(b"\"").unwrap_or(v));
    (k, v.map(|v| v.strip_suffix(b"\"").unwrap_or(v)))
}

/// Elements of a comma-separated field value, whitespace trimmed.
pub(crate) fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(|t| t.trim_ascii())
        .filter(|t| !t.is_empty())
}

pub(crate) fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n: u64 = 0;
    for &d in digits {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(n)
}

/// delta-seconds (RFC 9111 §1.2.2): digits only; a value too large for the cache to care about
/// (however many digits) is [`MAX_DELTA_SECONDS`].
fn parse_delta_seconds(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(parse_u64(digits).map_or(MAX_DELTA_SECONDS, |n| n.min(MAX_DELTA_SECONDS)))
}

pub(crate) fn parse_date(value: &[u8]) -> Option<SystemTime> {
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| httpdate::parse_http_date(s.trim()).ok())
}

#[cfg(test)]
mod tests;

/// The request fields a `Vary` names, lower-cased, from every `Vary` line of a head (lines
/// ending in CRLF); `None` for `Vary: *`, which no request matches.
pub fn vary_names(head: &[u8]) -> Option<Vec<String>> {
    let mut names = Vec::new();
    for (_, value) in head_fields(head).filter(|(n, _)| n.eq_ignore_ascii_case(b"vary")) {
        for t in tokens(value) {
            if t == b"*" {
                return None;
            }
            let n = String::from_utf8_lossy(t).to_ascii_lowercase();
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    Some(names)
}

/// What a request sends in the fields `names` (a `Vary`'s), normalised as RFC 9111 §4.1 allows:
/// each field's lines combined, its list members trimmed of white space; a field the request
/// does not send is told apart from an empty one. Requests with equal keys match the variant.
pub fn variant_key(names: &[String], request_head: &[u8]) -> String {
    let mut key = String::new();
    for n in names {
        key.push('\n');
        let mut sent = false;
        let lines = head_fields(request_head).filter(|(f, _)| f.eq_ignore_ascii_case(n.as_bytes()));
        for (_, value) in lines {
            for t in tokens(value) {
                key.push(if sent { ',' } else { '=' });
                key.push_str(&String::from_utf8_lossy(t));
                sent = true;
            }
            if !sent {
                key.push('=');
                sent = true;
            }
        }
    }
    key
}

/// The field lines of a head (its first line, the request or status line, left out; lines
/// ending in LF or CRLF): each field's name and value, white space trimmed; a line without a
/// colon is passed over.
pub fn head_fields(head: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    head.split(|&b| b == b'\n').skip(1).filter_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        Some((line[..colon].trim_ascii(), line[colon + 1..].trim_ascii()))
    })
}
