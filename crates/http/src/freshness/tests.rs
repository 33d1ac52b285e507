use std::time::{Duration, SystemTime};

use super::*;
use crate::proxy::{parse_response_head, ResponseParse};

/// The response's cache facts and `Last-Modified`, through the proxy's own response parser.
fn head(status: u16, fields: &str) -> (CacheInfo, Option<SystemTime>) {
    let text = format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\n{fields}\r\n");
    match parse_response_head(text.as_bytes(), false, false, &mut Vec::new()) {
        ResponseParse::Complete(h) => (h.cache, h.last_modified),
        other => panic!("{text:?}: {other:?}"),
    }
}

fn info(fields: &str) -> CacheInfo {
    head(200, fields).0
}

const NOBODY: RequestFacts = RequestFacts {
    authorization: false,
    cookie: false,
};
const COOKIE: RequestFacts = RequestFacts {
    authorization: false,
    cookie: true,
};
const AUTH: RequestFacts = RequestFacts {
    authorization: true,
    cookie: false,
};

fn at(date: &str) -> SystemTime {
    httpdate::parse_http_date(date).unwrap()
}

/// A fixed "now" a day after the `Date` the rows below use, so nothing depends on the clock.
fn now() -> SystemTime {
    at("Mon, 07 Nov 1994 08:49:37 GMT")
}

const DATE: &str = "Date: Mon, 07 Nov 1994 08:49:37 GMT\r\n";
/// Ten days before `DATE`: a tenth of it is a day.
const LM_10D: &str = "Last-Modified: Fri, 28 Oct 1994 08:49:37 GMT\r\n";

/// Freshness of a 200 with these fields to a request with `req`, under `policy`.
fn fresh_with(fields: &str, req: RequestFacts, policy: &Policy) -> Duration {
    fresh_status(200, fields, req, policy)
}

fn fresh_status(status: u16, fields: &str, req: RequestFacts, policy: &Policy) -> Duration {
    let (c, lm) = head(status, fields);
    c.shared_fresh_for(status, lm, req, now(), policy)
}

fn fresh(fields: &str) -> Duration {
    fresh_with(fields, NOBODY, &Policy::default())
}

const OVERRIDE_60: Policy = Policy {
    override_ttl: Some(Duration::from_secs(60)),
    heuristic_max: Policy::DEFAULT_HEURISTIC_MAX,
};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The safe default, one row per case: (fields, request, seconds fresh; 0 = not stored).
#[test]
fn the_default_policy_stores_only_what_the_response_allows() {
    let hour = 3600;
    let day = 24 * hour;
    let rows: &[(&str, RequestFacts, u64)] = &[
        // No freshness information: nothing invented.
        ("", NOBODY, 0),
        (DATE, NOBODY, 0),
        // Heuristic: a tenth of the time since Last-Modified, capped at a day.
        (&format!("{DATE}{LM_10D}"), NOBODY, day),
        (
            &format!("{DATE}Last-Modified: Mon, 07 Nov 1994 07:49:37 GMT\r\n"),
            NOBODY,
            360,
        ),
        (
            &format!("{DATE}Last-Modified: Sat, 01 Jan 1994 00:00:00 GMT\r\n"),
            NOBODY,
            day,
        ),
        // Last-Modified after Date: no freshness.
        (
            &format!("{DATE}Last-Modified: Tue, 08 Nov 1994 08:49:37 GMT\r\n"),
            NOBODY,
            0,
        ),
        // Explicit freshness wins over the heuristic, even when shorter.
        (
            &format!("{DATE}{LM_10D}Cache-Control: max-age=5\r\n"),
            NOBODY,
            5,
        ),
        ("Cache-Control: max-age=60\r\n", NOBODY, 60),
        ("Cache-Control: max-age=60, s-maxage=\"5\"\r\n", NOBODY, 5),
        (
            &format!("{DATE}Expires: Mon, 07 Nov 1994 09:49:37 GMT\r\n"),
            NOBODY,
            hour,
        ),
        // What forbids storing.
        ("Cache-Control: max-age=60, no-store\r\n", NOBODY, 0),
        ("Cache-Control: max-age=60, private\r\n", NOBODY, 0),
        ("Cache-Control: max-age=60, no-cache\r\n", NOBODY, 0),
        (
            "Cache-Control: max-age=60\r\nPragma: no-cache\r\n",
            NOBODY,
            0,
        ),
        // Vary makes it a variant; Vary: * is never stored.
        ("Cache-Control: max-age=60\r\nVary: Accept\r\n", NOBODY, 60),
        ("Cache-Control: max-age=60\r\nVary: *\r\n", NOBODY, 0),
        (
            "Cache-Control: max-age=60\r\nVary: Accept, *\r\n",
            NOBODY,
            0,
        ),
        ("Cache-Control: max-age=0\r\n", NOBODY, 0),
        ("Cache-Control: max-age=soon\r\n", NOBODY, 0),
        // Authorization: only public, s-maxage or must-revalidate (RFC 9111 §3.5).
        ("Cache-Control: max-age=60\r\n", AUTH, 0),
        (&format!("{DATE}{LM_10D}"), AUTH, 0),
        ("Cache-Control: public, max-age=60\r\n", AUTH, 60),
        ("Cache-Control: s-maxage=60\r\n", AUTH, 60),
        ("Cache-Control: must-revalidate, max-age=60\r\n", AUTH, 60),
    ];
    for (fields, req, want) in rows {
        assert_eq!(
            fresh_with(fields, *req, &Policy::default()),
            secs(*want),
            "{fields:?} {req:?}"
        );
    }
}

/// A Cookie in the request, or Set-Cookie in the response: only explicit shared freshness,
/// never the heuristic; `private` stays private whatever else is said.
#[test]
fn personal_answers_need_explicit_shared_freshness() {
    let hour = 3600;
    let rows: &[(&str, RequestFacts, u64)] = &[
        // Cookie in the request: only explicit shared freshness, never the heuristic.
        (&format!("{DATE}{LM_10D}"), COOKIE, 0),
        ("Cache-Control: max-age=60\r\n", COOKIE, 0),
        (
            &format!("{DATE}Expires: Mon, 07 Nov 1994 09:49:37 GMT\r\n"),
            COOKIE,
            0,
        ),
        ("Cache-Control: s-maxage=60\r\n", COOKIE, 60),
        ("Cache-Control: public, max-age=60\r\n", COOKIE, 60),
        (
            &format!("{DATE}Cache-Control: public\r\nExpires: Mon, 07 Nov 1994 09:49:37 GMT\r\n"),
            COOKIE,
            hour,
        ),
        ("Cache-Control: public\r\n", COOKIE, 0),
        (
            &format!("{DATE}{LM_10D}Cache-Control: public\r\n"),
            COOKIE,
            0,
        ),
        // Set-Cookie in the response: the same.
        (&format!("{DATE}{LM_10D}Set-Cookie: s=1\r\n"), NOBODY, 0),
        (
            "Cache-Control: max-age=60\r\nSet-Cookie: s=1\r\n",
            NOBODY,
            0,
        ),
        (
            "Cache-Control: s-maxage=60\r\nSet-Cookie: s=1\r\n",
            NOBODY,
            60,
        ),
        (
            "Cache-Control: public, max-age=60\r\nSet-Cookie: s=1\r\n",
            NOBODY,
            60,
        ),
        // private stays private whatever else is said.
        ("Cache-Control: private, s-maxage=60\r\n", COOKIE, 0),
        ("Cache-Control: public, private, max-age=60\r\n", AUTH, 0),
    ];
    for (fields, req, want) in rows {
        assert_eq!(
            fresh_with(fields, *req, &Policy::default()),
            secs(*want),
            "{fields:?} {req:?}"
        );
    }
}

/// `--cache-ttl` stands in for the heuristic, but never for a private answer.
#[test]
fn the_override_gives_freshness_only_where_nothing_is_private() {
    assert_eq!(fresh_with("", NOBODY, &OVERRIDE_60), secs(60));
    assert_eq!(
        fresh_with(&format!("{DATE}{LM_10D}"), NOBODY, &OVERRIDE_60),
        secs(60),
        "in place of the heuristic"
    );
    assert_eq!(
        fresh_with("Cache-Control: max-age=5\r\n", NOBODY, &OVERRIDE_60),
        secs(5),
        "explicit freshness wins"
    );
    assert_eq!(fresh_with("Age: 10\r\n", NOBODY, &OVERRIDE_60), secs(50));
    for (fields, req) in [
        ("", COOKIE),
        ("", AUTH),
        ("Set-Cookie: s=1\r\n", NOBODY),
        ("Cache-Control: private\r\n", NOBODY),
        ("Cache-Control: no-store\r\n", NOBODY),
        ("Vary: *\r\n", NOBODY),
    ] {
        assert_eq!(
            fresh_with(fields, req, &OVERRIDE_60),
            Duration::ZERO,
            "{fields:?} {req:?}"
        );
    }
}

/// The heuristic only for the statuses RFC 9110 §15.1 names (or `public`), and not at all with
/// a zero cap.
#[test]
fn heuristic_freshness_by_status_and_cap() {
    let lm = format!("{DATE}{LM_10D}");
    for status in [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501] {
        assert!(heuristically_cacheable(status), "{status}");
        assert_eq!(
            fresh_status(status, &lm, NOBODY, &Policy::default()),
            Policy::DEFAULT_HEURISTIC_MAX,
            "{status}"
        );
    }
    for status in [201, 202, 302, 303, 307, 400, 403, 500, 502, 503] {
        assert!(!heuristically_cacheable(status), "{status}");
        assert_eq!(
            fresh_status(status, &lm, NOBODY, &Policy::default()),
            Duration::ZERO,
            "{status}"
        );
        assert_eq!(
            fresh_status(
                status,
                &format!("{lm}Cache-Control: public\r\n"),
                NOBODY,
                &Policy::default()
            ),
            Policy::DEFAULT_HEURISTIC_MAX,
            "{status} public"
        );
    }
    let capped = Policy {
        override_ttl: None,
        heuristic_max: secs(100),
    };
    assert_eq!(fresh_with(&lm, NOBODY, &capped), secs(100));
    let none = Policy {
        override_ttl: None,
        heuristic_max: Duration::ZERO,
    };
    assert_eq!(fresh_with(&lm, NOBODY, &none), Duration::ZERO);
}

/// `Age` as RFC 9111 §5.1 reads it: the first member of a list (one line or several), an
/// invalid value ignored; a valid one is taken off the lifetime.
#[test]
fn age_by_its_first_member() {
    let ok = "Cache-Control: max-age=3600\r\n";
    for (age, fresh_s) in [
        ("Age: abc\r\n", 3600),
        ("Age: -7200\r\n", 3600),
        ("Age: 7200.0\r\n", 3600),
        ("Age: 7200;a=b\r\n", 3600),
        ("Age: \r\n", 3600),
        ("Age: +5\r\n", 3600),
        ("Age: 0, 7200\r\n", 3600),
        ("Age: 7200, 0\r\n", 0),
        ("Age: 0\r\nAge: 7200\r\n", 3600),
        ("Age: 7200\r\nAge: 0\r\n", 0),
        ("Age: 600\r\nAge: 600\r\n", 3000),
        ("Age: 600\r\n", 3000),
        ("Age:  600 \r\n", 3000),
        ("Age: 2147483648\r\n", 0),
    ] {
        assert_eq!(fresh(&format!("{ok}{age}")), secs(fresh_s), "{age:?}");
    }
}

/// A directive given twice with different values is stale; given twice alike, it stands.
#[test]
fn conflicting_directives_are_stale() {
    assert_eq!(fresh("Cache-Control: max-age=60, max-age=60\r\n"), secs(60));
    assert_eq!(
        fresh("Cache-Control: max-age=60\r\nCache-Control: max-age=3600\r\n"),
        Duration::ZERO
    );
    assert_eq!(
        fresh("Cache-Control: s-maxage=60, s-maxage=5\r\n"),
        Duration::ZERO
    );
    let c = info("Cache-Control: public, must-revalidate, proxy-revalidate\r\n");
    assert!(c.public && c.must_revalidate && c.proxy_revalidate);
}

/// Freshness from extreme and hostile fields: nothing panics, every figure stays within 2^31
/// seconds, and what is stale or invalid is not fresh.
#[test]
fn freshness_with_extreme_values() {
    let cap = Duration::from_secs(MAX_DELTA_SECONDS);
    let huge = "9".repeat(400);
    for v in [
        u64::MAX.to_string(),
        i64::MAX.to_string(),
        (u64::MAX as u128 + 1).to_string(),
        huge.clone(),
        MAX_DELTA_SECONDS.to_string(),
    ] {
        let f = format!("Cache-Control: max-age={v}\r\n");
        assert_eq!(info(&f).max_age, Some(MAX_DELTA_SECONDS), "{f}");
        assert_eq!(fresh(&f), cap, "{f}");
        let f = format!("Cache-Control: s-maxage={v}\r\n");
        assert_eq!(info(&f).s_maxage, Some(MAX_DELTA_SECONDS), "{f}");
        assert_eq!(fresh(&f), cap, "{f}");
        // Huge Age on top: stale, not negative.
        assert_eq!(fresh(&format!("{f}Age: {v}\r\n")), Duration::ZERO, "{f}");
    }
    for bad in ["-1", "-9223372036854775808", "", "1e9", "0x10", "12 34"] {
        let f = format!("Cache-Control: max-age={bad}\r\n");
        assert_eq!(info(&f).max_age, Some(0), "{f}");
        assert_eq!(fresh(&f), Duration::ZERO, "{f}");
    }
    assert_eq!(
        fresh(&format!("Cache-Control: max-age=100\r\nAge: {huge}\r\n")),
        Duration::ZERO
    );
    // Expires: past, invalid, far future, against Date or now; max-age wins over it.
    for past in [
        "Expires: Sun, 06 Nov 1994 08:49:36 GMT\r\n",
        "Expires: Thu, 01 Jan 1970 00:00:00 GMT\r\n",
        "Expires: 0\r\n",
        "Expires: -1\r\n",
        "Expires: tomorrow\r\n",
        "Expires: \r\n",
    ] {
        assert_eq!(fresh(past), Duration::ZERO, "{past}");
        assert_eq!(fresh(&format!("{DATE}{past}")), Duration::ZERO, "{past}");
        assert_eq!(
            fresh_with(past, NOBODY, &OVERRIDE_60),
            Duration::ZERO,
            "an unreadable Expires is not overridden: {past}"
        );
    }
    let far = "Expires: Fri, 31 Dec 9999 23:59:59 GMT\r\n";
    assert_eq!(fresh(far), cap);
    assert_eq!(fresh(&format!("{DATE}{far}")), cap);
    assert_eq!(
        fresh(&format!(
            "Date: Fri, 31 Dec 9999 23:59:59 GMT\r\n{far}Age: {}\r\n",
            u64::MAX
        )),
        Duration::ZERO
    );
    assert_eq!(
        fresh("Expires: 0\r\nCache-Control: max-age=30\r\n"),
        secs(30)
    );
    // Hand-made extremes the parser cannot produce.
    let p = Policy {
        override_ttl: Some(Duration::MAX),
        heuristic_max: Duration::MAX,
    };
    let f = |c: &CacheInfo, now: SystemTime| c.shared_fresh_for(200, None, NOBODY, now, &p);
    let mut c = CacheInfo {
        max_age: Some(u64::MAX),
        age: u64::MAX,
        ..CacheInfo::default()
    };
    assert_eq!(f(&c, now()), Duration::ZERO);
    c.age = 0;
    assert_eq!(f(&c, now()), cap);
    let c = CacheInfo {
        expires: Some(SystemTime::UNIX_EPOCH),
        date: Some(now()),
        ..CacheInfo::default()
    };
    assert_eq!(f(&c, now()), Duration::ZERO);
    assert_eq!(f(&CacheInfo::default(), SystemTime::UNIX_EPOCH), cap);
    let c = CacheInfo::default();
    assert_eq!(
        c.shared_fresh_for(
            200,
            Some(SystemTime::UNIX_EPOCH),
            NOBODY,
            now(),
            &p.with_no_override()
        ),
        now().duration_since(SystemTime::UNIX_EPOCH).unwrap() / 10
    );
}

impl Policy {
    fn with_no_override(self) -> Policy {
        Policy {
            override_ttl: None,
            ..self
        }
    }
}

/// Whether a stored response may answer, one row per request directive (RFC 9111 §5.2.1).
#[test]
fn reuse_by_request_directives() {
    let req = |cc: &str| {
        let mut d = RequestDirectives::default();
        d.field("Cache-Control", cc.as_bytes());
        d
    };
    // (age, lifetime, never stale, request Cache-Control, may answer)
    let rows: &[(u64, u64, bool, &str, bool)] = &[
        (10, 60, false, "", true),
        (60, 60, false, "", false),
        (10, 60, false, "no-cache", false),
        (10, 60, false, "max-age=5", false),
        (10, 60, false, "max-age=10", true),
        (10, 60, false, "min-fresh=40", true),
        (10, 60, false, "min-fresh=51", false),
        (70, 60, false, "max-stale", true),
        (70, 60, false, "max-stale=10", true),
        (70, 60, false, "max-stale=9", false),
        (70, 60, true, "max-stale", false),
        (70, 60, false, "max-stale, max-age=65", false),
        (10, 60, false, "max-age=bogus", false),
    ];
    for &(age, life, never, cc, ok) in rows {
        let r = reuse(secs(age), secs(life), never, &req(cc));
        assert_eq!(
            r == Reuse::Use,
            ok,
            "{age}/{life} never_stale={never} {cc:?}"
        );
    }
    let mut p = RequestDirectives::default();
    p.field("Pragma", b"no-cache");
    assert!(p.no_cache);
    let d = req("only-if-cached, no-store");
    assert!(d.only_if_cached && d.no_store);
}

#[test]
fn if_none_match_compares_weakly() {
    assert!(none_match(b"\"a\"", b"\"a\""));
    assert!(none_match(b"W/\"a\"", b"\"a\""));
    assert!(none_match(b"\"a\"", b"W/\"a\""));
    assert!(none_match(b"\"x\", \"a\"", b"\"a\""));
    assert!(none_match(b"*", b"\"a\""));
    assert!(!none_match(b"\"b\"", b"\"a\""));
    assert!(!none_match(b"\"a", b"\"a\""));
}

/// A response that may be stored only to be validated, and one that may not be stored.
#[test]
fn storage_for_validation() {
    let store = |fields: &str, req| {
        let (c, lm) = head(200, fields);
        c.shared_storage(200, lm, req, now(), &Policy::default())
    };
    assert_eq!(
        store("Cache-Control: no-cache\r\n", NOBODY),
        Some(Duration::ZERO)
    );
    assert_eq!(
        store("Cache-Control: max-age=0\r\n", NOBODY),
        Some(Duration::ZERO)
    );
    assert_eq!(store("Cache-Control: no-store\r\n", NOBODY), None);
    assert_eq!(store("Cache-Control: no-cache\r\n", COOKIE), None);
    assert_eq!(
        store("Cache-Control: no-cache, s-maxage=5\r\n", COOKIE),
        Some(Duration::ZERO)
    );
    assert!(info("Cache-Control: s-maxage=5\r\n").never_stale());
    assert!(!info("Cache-Control: max-age=5\r\n").never_stale());
}

#[test]
fn variants_by_the_fields_vary_names() {
    let names = |h: &str| vary_names(format!("HTTP/1.1 200 OK\r\n{h}").as_bytes());
    assert_eq!(
        names("Vary: Foo, bar\r\nVary: BAZ, foo\r\n"),
        Some(vec!["foo".into(), "bar".into(), "baz".into()])
    );
    assert_eq!(names("Vary: , *\r\n"), None);
    assert_eq!(names("Vary: \r\nVary: *\r\n"), None);
    assert_eq!(names("X: 1\r\n"), Some(vec![]));
    let key = |h: &str| {
        variant_key(
            &["foo".into(), "bar".into()],
            format!("GET / HTTP/1.1\r\n{h}").as_bytes(),
        )
    };
    assert_eq!(key("Foo: 1, 2\r\n"), key("Foo: 1\r\nFoo: 2\r\n"));
    assert_eq!(key("Foo: 1,2\r\n"), key("foo:  1 , 2 \r\n"));
    assert_ne!(key("Foo: 1\r\n"), key("Foo: 2\r\n"));
    assert_ne!(key(""), key("Foo: \r\n"), "absent is not empty");
    assert_ne!(key("Foo: 1\r\n"), key("Bar: 1\r\n"));
}
