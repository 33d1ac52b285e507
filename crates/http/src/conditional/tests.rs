use super::*;
use std::time::{Duration, UNIX_EPOCH};

use RangeSpec::{From, Suffix};

fn from(first: u64, last: Option<u64>) -> Ranges {
    Ranges::One(From { first, last })
}

/// One row per case of RFC 9110 §14.1.1 (and the inputs a hostile client sends).
#[test]
fn range_field_table() {
    let rows: &[(&str, Ranges)] = &[
        ("bytes=0-9", from(0, Some(9))),
        ("bytes=0-0", from(0, Some(0))),
        ("bytes=9500-", from(9500, None)),
        ("bytes=-500", Ranges::One(Suffix(500))),
        ("bytes=-0", Ranges::One(Suffix(0))),
        ("BYTES=0-9", from(0, Some(9))),
        ("  bytes=0-9  ", from(0, Some(9))),
        ("bytes= 0-9 ", from(0, Some(9))),
        ("bytes=0-9,", from(0, Some(9))),
        ("bytes=,0-9", from(0, Some(9))),
        ("bytes=0-9,10-19", Ranges::Several),
        ("bytes=0-0,-1", Ranges::Several),
        ("bytes=0-1, 5-", Ranges::Several),
        ("bytes=0-1,x", Ranges::Invalid),
        ("bytes=5-1", Ranges::Invalid),
        ("bytes=", Ranges::Invalid),
        ("bytes=,", Ranges::Invalid),
        ("bytes=-", Ranges::Invalid),
        ("bytes=--5", Ranges::Invalid),
        ("bytes=1-2-3", Ranges::Invalid),
        ("bytes=+1-2", Ranges::Invalid),
        ("bytes=1 -2", Ranges::Invalid),
        ("bytes=0x10-", Ranges::Invalid),
        ("bytes 0-9", Ranges::Invalid),
        ("bytes =0-9", Ranges::Invalid),
        ("items=0-9", Ranges::Invalid),
        ("=0-9", Ranges::Invalid),
        ("", Ranges::Invalid),
        ("bytes=99999999999999999999-", from(u64::MAX, None)),
        ("bytes=0-99999999999999999999", from(0, Some(u64::MAX))),
        ("bytes=-99999999999999999999", Ranges::One(Suffix(u64::MAX))),
        // A saturated first-byte-pos above a last-byte-pos is `last < first`.
        ("bytes=99999999999999999999-1", Ranges::Invalid),
    ];
    for (input, want) in rows {
        assert_eq!(parse_range(input.as_bytes()), *want, "{input:?}");
    }
}

#[test]
fn resolve_table() {
    let len = 10_000;
    let rows: &[(RangeSpec, Option<(u64, u64)>)] = &[
        (
            From {
                first: 0,
                last: Some(9),
            },
            Some((0, 9)),
        ),
        (
            From {
                first: 9500,
                last: None,
            },
            Some((9500, 9999)),
        ),
        (
            From {
                first: 9999,
                last: None,
            },
            Some((9999, 9999)),
        ),
        // A last-byte-pos past the end is clamped.
        (
            From {
                first: 9000,
                last: Some(20_000),
            },
            Some((9000, 9999)),
        ),
        (
            From {
                first: 0,
                last: Some(u64::MAX),
            },
            Some((0, 9999)),
        ),
        // A first-byte-pos at or past the end is unsatisfiable.
        (
            From {
                first: 10_000,
                last: None,
            },
            None,
        ),
        (
            From {
                first: u64::MAX,
                last: None,
            },
            None,
        ),
        (Suffix(500), Some((9500, 9999))),
        // A suffix longer than the file is the whole file.
        (Suffix(20_000), Some((0, 9999))),
        (Suffix(u64::MAX), Some((0, 9999))),
        (Suffix(0), None),
    ];
    for (spec, want) in rows {
        assert_eq!(spec.resolve(len), *want, "{spec:?}");
    }
    assert_eq!(
        From {
            first: 0,
            last: None
        }
        .resolve(0),
        None
    );
}

#[test]
fn etag_format() {
    let rows: &[(u64, u64, &str)] = &[
        (0, 0, "\"0-0\""),
        (5, 784_111_777_123_456_789, "\"5-ae1b981c3a4d715\""),
        (u64::MAX, u64::MAX, "\"ffffffffffffffff-ffffffffffffffff\""),
    ];
    for (size, ns, want) in rows {
        let mut out = Vec::new();
        push_etag(&mut out, *size, *ns);
        assert_eq!(std::str::from_utf8(&out).unwrap(), *want);
        assert!(out.len() <= ETAG_MAX);
    }
    assert_eq!(mtime_ns(784_111_777, 123_456_789), 784_111_777_123_456_789);
    assert_eq!(mtime_ns(-5, 10), 0);
    assert_eq!(mtime_ns(i64::MAX, 999_999_999), u64::MAX);
}

const TAG: &[u8] = b"\"5-a\"";

/// `If-Match` (strong) and `If-None-Match` (weak) against `"5-a"`: (field, strong, weak).
#[test]
fn entity_tag_comparison_table() {
    let rows: &[(&str, bool, bool)] = &[
        ("\"5-a\"", true, true),
        ("*", true, true),
        (" * ", true, true),
        ("W/\"5-a\"", false, true),
        ("\"x\", \"5-a\"", true, true),
        ("\"x\",W/\"5-a\"", false, true),
        (",, \"5-a\" ,", true, true),
        ("\"x\"", false, false),
        ("\"5-A\"", false, false),
        ("5-a", false, false),
        ("\"5-a", false, false),
        ("w/\"5-a\"", false, false),
        // A comma inside a tag is part of it.
        ("\"a,\"5-a\"\"", false, false),
        ("\"a,b\", \"5-a\"", true, true),
        // A syntax error ends the list.
        ("junk, \"5-a\"", false, false),
        ("\"x\" junk, \"5-a\"", false, false),
        ("", false, false),
        // `*` stands alone (`"*" / #entity-tag`): in a list it is a syntax error.
        ("*, \"5-a\"", false, false),
    ];
    for (field, strong, weak) in rows {
        assert_eq!(
            matches_strong(field.as_bytes(), TAG),
            *strong,
            "If-Match {field:?}"
        );
        assert_eq!(
            matches_weak(field.as_bytes(), TAG),
            *weak,
            "If-None-Match {field:?}"
        );
    }
}

fn secs(s: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(s)
}

fn validators() -> Validators<'static> {
    Validators {
        etag: TAG,
        // Sun, 06 Nov 1994 08:49:37 GMT
        last_modified: secs(784_111_777),
        len: 10_000,
    }
}

#[test]
fn if_range_table() {
    let rows: &[(&str, bool)] = &[
        ("\"5-a\"", true),
        (" \"5-a\" ", true),
        ("W/\"5-a\"", false),
        ("\"x\"", false),
        ("\"5-a\", \"x\"", false),
        ("*", false),
        ("Sun, 06 Nov 1994 08:49:37 GMT", true),
        ("Sunday, 06-Nov-94 08:49:37 GMT", true),
        ("Sun Nov  6 08:49:37 1994", true),
        ("Sun, 06 Nov 1994 08:49:38 GMT", false),
        ("Sun, 06 Nov 1994 08:49:36 GMT", false),
        ("not a date", false),
        ("", false),
    ];
    for (field, want) in rows {
        assert_eq!(
            if_range_holds(field.as_bytes(), &validators()),
            *want,
            "{field:?}"
        );
    }
}

/// `key=value; ...` (`im`, `inm`, `ius`, `ims`, `range`, `ir`; dates `before`, `at`, `after`
/// Last-Modified) as the request's conditions and If-Modified-Since.
fn conditions(spec: &'static str) -> (Conditions<'static>, Option<SystemTime>) {
    let date = |v: &str| match v {
        "before" => secs(784_111_776),
        "at" => secs(784_111_777),
        "after" => secs(784_111_778),
        _ => panic!("{v}"),
    };
    let mut c = Conditions::default();
    let mut ims = None;
    for kv in spec.split("; ").filter(|kv| !kv.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap();
        match k {
            "im" => c.if_match = Some(v.as_bytes()),
            "inm" => c.if_none_match = Some(v.as_bytes()),
            "ius" => c.if_unmodified_since = Some(date(v)),
            "ims" => ims = Some(date(v)),
            "range" => c.range = Some(v.as_bytes()),
            "ir" => c.if_range = Some(v.as_bytes()),
            _ => panic!("{k}"),
        }
    }
    (c, ims)
}

/// The order of RFC 9110 §13.2.2, one row per step and per way a step is passed or skipped.
#[test]
fn evaluation_order_table() {
    use Outcome::{Full, NotModified as N304, PreconditionFailed as P412, Unsatisfiable as U416};
    let part = |first, last| Outcome::Part { first, last };
    let rows = [
        ("", Full),
        ("im=\"5-a\"", Full),
        ("im=*", Full),
        ("im=\"x\"", P412),
        ("im=W/\"5-a\"", P412),
        ("ius=before", P412),
        ("ius=at", Full),
        ("ius=after", Full),
        // If-Unmodified-Since is ignored under If-Match.
        ("im=\"5-a\"; ius=before", Full),
        // 412 before 304.
        ("im=\"x\"; inm=\"5-a\"", P412),
        ("inm=\"5-a\"", N304),
        ("inm=W/\"5-a\"", N304),
        ("inm=*", N304),
        ("inm=\"x\"", Full),
        // If-Modified-Since is ignored under If-None-Match.
        ("inm=\"x\"; ims=after", Full),
        ("ims=at", N304),
        ("ims=after", N304),
        ("ims=before", Full),
        // 304 before Range.
        ("inm=\"5-a\"; range=bytes=0-9", N304),
        ("range=bytes=0-9", part(0, 9)),
        ("inm=\"x\"; range=bytes=-1", part(9999, 9999)),
        ("ims=before; range=bytes=9990-", part(9990, 9999)),
        ("range=bytes=10000-", U416),
        ("range=bytes=-0", U416),
        ("range=bytes=5-1", Full),
        ("range=bytes=0-1,3-4", Full),
        ("range=items=0-1", Full),
        ("range=bytes=0-9; ir=\"5-a\"", part(0, 9)),
        ("range=bytes=0-9; ir=W/\"5-a\"", Full),
        ("range=bytes=0-9; ir=\"x\"", Full),
        (
            "range=bytes=0-9; ir=Sun, 06 Nov 1994 08:49:37 GMT",
            part(0, 9),
        ),
        ("range=bytes=0-9; ir=Sun, 06 Nov 1994 08:49:36 GMT", Full),
        // If-Range decides before the range is judged satisfiable.
        ("range=bytes=20000-; ir=\"x\"", Full),
        ("ir=\"5-a\"", Full),
    ];
    for (spec, want) in rows {
        let (c, ims) = conditions(spec);
        assert_eq!(evaluate(&c, ims, &validators()), want, "{spec}");
    }
    let empty = Validators {
        len: 0,
        ..validators()
    };
    let (c, _) = conditions("range=bytes=0-");
    assert_eq!(evaluate(&c, None, &empty), Full, "an empty file");
}

#[test]
fn content_range_lines() {
    let mut out = Vec::new();
    push_content_range(&mut out, Some((0, 9)), 10_000);
    push_content_range(&mut out, None, 10_000);
    assert_eq!(
        out,
        b"Content-Range: bytes 0-9/10000\r\nContent-Range: bytes */10000\r\n"
    );
}
