//! Properties of what a shared cache reads from a request (the proxy's cache path):
//! `evlab_http::write_forward_request`'s cache facts (`Cache-Control`, `Pragma`, the
//! preconditions), `freshness::vary_names` and `freshness::variant_key` (a `Vary`'s fields and a
//! request's variant), `same_origin_key` (a `Location` resolved for invalidation),
//! `freshness::none_match` and `freshness::reuse`.
//!
//! The input is a request head, used three ways: as the request forwarded, as a response head
//! whose `Vary` names the fields, and, line by line, as `Location` values resolved against the
//! request's key.
//!
//! - nothing panics, whatever the bytes;
//! - a head with no `Cache-Control` or `Pragma` field asks nothing of a cache (the directives
//!   are the default), and one with no `If-` field is not conditional;
//! - `vary_names` gives lower-case names, each once; `variant_key` is a function of the head
//!   (the same head, the same key) that tells an absent field from an empty one;
//! - `same_origin_key` keys only the request's own origin: a key it gives starts with the
//!   scheme and authority of the request's;
//! - `none_match` matches `*` always, and an entity tag matches itself;
//! - `reuse` answers for any age and lifetime, and never lets a `no-cache` request use a stored
//!   response as it is.
#![allow(dead_code)]

use std::time::Duration;

use evlab_http::freshness::{none_match, reuse, variant_key, vary_names, RequestDirectives};
use evlab_http::{same_origin_key, write_forward_request, ForwardOptions, Reuse};

/// Tokens for seeded mutations (the replay tests) and `fuzz/dict/cache_request.dict`.
pub const TOKENS: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\n",
    b"GET http://h/x HTTP/1.1\r\n",
    b"Host: h\r\n",
    b"\r\n",
    b"Cache-Control: ",
    b"max-age=",
    b"max-stale",
    b"min-fresh=",
    b"no-cache",
    b"no-store",
    b"only-if-cached",
    b"Pragma: no-cache\r\n",
    b"If-None-Match: ",
    b"If-Modified-Since: ",
    b"W/\"a\"",
    b"\"a\"",
    b"*",
    b"Vary: ",
    b"Accept-Language",
    b"Location: ",
    b"../",
    b"//h/",
    b"?q",
    b"#f",
    b", ",
    b"=",
    b";",
    b"\"",
    b"2147483648",
    b"99999999999999999999",
];

fn has_field(head: &[u8], name: &[u8]) -> bool {
    head.split(|&b| b == b'\n').skip(1).any(|l| {
        l.iter()
            .position(|&b| b == b':')
            .is_some_and(|c| l[..c].trim_ascii().eq_ignore_ascii_case(name))
    })
}

pub fn check(data: &[u8], _exhaustive: bool) {
    let mut out = Vec::new();
    if let Ok(f) = write_forward_request(data, &ForwardOptions::default(), &mut out) {
        if !has_field(data, b"cache-control") && !has_field(data, b"pragma") {
            assert_eq!(f.directives, RequestDirectives::default(), "{f:?}");
        }
        let any_if = data
            .split(|&b| b == b'\n')
            .skip(1)
            .any(|l| l.len() > 3 && l[..3].eq_ignore_ascii_case(b"if-") && l.contains(&b':'));
        if !any_if {
            assert!(!f.conditional, "{f:?}");
        }
        // Locations, one per line, resolved against the request's key.
        let origin_end = f.key.find("://").map_or(0, |i| {
            let rest = &f.key[i + 3..];
            i + 3 + rest.find('/').unwrap_or(rest.len())
        });
        for line in data.split(|&b| b == b'\n') {
            if let Some(k) = same_origin_key(&f.key, line) {
                assert!(
                    k.starts_with(&f.key[..origin_end]),
                    "{k} from {:?} against {}",
                    String::from_utf8_lossy(line),
                    f.key
                );
            }
        }
        for age in [0u64, 1, 59, 60, 61, u64::MAX / 4] {
            for life in [0u64, 60, 1 << 31] {
                let r = reuse(
                    Duration::from_secs(age),
                    Duration::from_secs(life),
                    age % 2 == 0,
                    &f.directives,
                );
                if f.directives.no_cache {
                    assert_eq!(r, Reuse::Validate);
                }
            }
        }
    }
    if let Some(names) = vary_names(data) {
        for (i, n) in names.iter().enumerate() {
            assert_eq!(*n, n.to_ascii_lowercase());
            assert!(!names[..i].contains(n), "{n} named twice");
        }
        let key = variant_key(&names, data);
        assert_eq!(key, variant_key(&names, data));
    }
    for tag in data.split(|&b| b == b'\n') {
        assert!(none_match(b"*", tag));
        let t = tag.trim_ascii();
        if t.starts_with(b"\"") && t.ends_with(b"\"") && t.len() > 1 && !t.contains(&b',') {
            assert!(none_match(t, t), "{:?}", String::from_utf8_lossy(t));
        }
    }
}
