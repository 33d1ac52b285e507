//! The cache never serves one user's page to another unless the origin says the page may be
//! shared (issue 39, "Safe by default"). The proxy runs with its default configuration (no
//! `--cache-ttl`) on every mechanism of the registry and forwarding mode. The origin builds
//! every page from the request's `Cookie` or `Authorization` ("page of alice") and sends, per
//! path, one row's caching fields. Six users ask for each path in turn: alice (a cookie), an
//! anonymous user, carol (a cookie of her own), dave (credentials), the anonymous user again and
//! alice again. Each row says whose page each of them gets and whether it was a hit: a private
//! row is only ever answered with the asker's own page; a row whose origin says the page may be
//! shared (`s-maxage`, `public` with `max-age`) is answered from the cache, which shows the
//! cache does store when it may.

#[macro_use]
mod common;

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use common::{connect, field, next_head, proxy_with, read_response, ThreadOrigin};

/// Who asks, in order, and what each one sends.
const USERS: [(&str, &str); 6] = [
    ("alice", "Cookie: session=alice\r\n"),
    ("anon", ""),
    ("carol", "Cookie: session=carol\r\n"),
    ("dave", "Authorization: Basic dave\r\n"),
    ("anon", ""),
    ("alice", "Cookie: session=alice\r\n"),
];

/// A row: the path, the origin's caching fields for it, and for each of `USERS` in turn whose
/// page comes back and whether it was a hit.
type Row = (&'static str, String, [(&'static str, bool); 6]);

/// The rows; `overridden`: for a proxy with `--cache-ttl`, which gives the pages that state no
/// freshness a lifetime, for the anonymous user only.
fn rows(overridden: bool) -> Vec<Row> {
    let old = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(30 * 86_400));
    // Each user gets a fresh page of their own, nothing from the cache.
    let own = [
        ("alice", false),
        ("anon", false),
        ("carol", false),
        ("dave", false),
        ("anon", false),
        ("alice", false),
    ];
    // Stored for the anonymous user only: the second anonymous request is a hit, no one with a
    // cookie or credentials is answered from it.
    let anon_stored = [
        ("alice", false),
        ("anon", false),
        ("carol", false),
        ("dave", false),
        ("anon", true),
        ("alice", false),
    ];
    // Shared by the origin's word: alice's page is stored and served to everyone who looks the
    // cache up; dave's request is not looked up (credentials), and his answer, shared too,
    // replaces it.
    let shared = [
        ("alice", false),
        ("alice", true),
        ("alice", true),
        ("dave", false),
        ("dave", true),
        ("dave", true),
    ];
    let unstated = if overridden { anon_stored } else { own };
    vec![
        // No freshness information at all: nothing is stored (none invented).
        ("/plain", String::new(), unstated),
        ("/dated", "Date: now\r\n".into(), unstated),
        // Last-Modified a month ago: a heuristic freshness, but only for the anonymous page.
        (
            "/modified",
            format!("Last-Modified: {old}\r\n"),
            anon_stored,
        ),
        // Explicit but not explicitly shared freshness: the same.
        (
            "/max-age",
            "Cache-Control: max-age=600\r\n".into(),
            anon_stored,
        ),
        (
            "/expires",
            format!(
                "Expires: {}\r\n",
                httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(600))
            ),
            anon_stored,
        ),
        // A response that sets a cookie is never shared without the origin's word.
        (
            "/set-cookie",
            "Cache-Control: max-age=600\r\nSet-Cookie: seen=1\r\n".into(),
            own,
        ),
        (
            "/set-cookie-modified",
            format!("Last-Modified: {old}\r\nSet-Cookie: seen=1\r\n"),
            own,
        ),
        (
            "/private",
            "Cache-Control: private, max-age=600\r\n".into(),
            own,
        ),
        (
            "/no-store",
            "Cache-Control: no-store, max-age=600\r\n".into(),
            own,
        ),
        // The origin says the page may be shared.
        (
            "/s-maxage",
            "Cache-Control: s-maxage=600\r\n".into(),
            shared,
        ),
        (
            "/public",
            "Cache-Control: public, max-age=600\r\n".into(),
            shared,
        ),
    ]
}

/// The origin: every page names whoever asked (cookie, credentials, or "anon"), with the row's
/// caching fields. Counts the requests each path brought.
fn origin(rows: &[Row]) -> (ThreadOrigin, Arc<Mutex<HashMap<String, usize>>>) {
    let fields: HashMap<String, String> = rows
        .iter()
        .map(|(p, f, _)| (p.to_string(), f.clone()))
        .collect();
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let counts = seen.clone();
    let o = ThreadOrigin::start(move |mut s: TcpStream| {
        let (mut buf, mut chunk) = (Vec::new(), vec![0u8; 4096]);
        while let Some(head) = next_head(&mut s, &mut buf, &mut chunk) {
            let path = head.split(' ').nth(1).unwrap_or("").to_string();
            let who = field(&head, "cookie")
                .and_then(|c| c.strip_prefix("session="))
                .or_else(|| field(&head, "authorization").and_then(|a| a.strip_prefix("Basic ")))
                .unwrap_or("anon")
                .to_string();
            *counts.lock().unwrap().entry(path.clone()).or_insert(0) += 1;
            let extra = fields
                .get(&path)
                .map(|f| {
                    let now = httpdate::fmt_http_date(SystemTime::now());
                    f.replace("Date: now", &format!("Date: {now}"))
                })
                .unwrap_or_default();
            let body = format!("page of {who}");
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{extra}\r\n{body}",
                body.len()
            );
            if s.write_all(resp.as_bytes()).is_err() {
                return;
            }
        }
    });
    (o, seen)
}

mod cases {
    use super::*;

    pub fn no_page_reaches_another_user(m: &str, mode: &str) {
        check(m, mode, false);
    }

    /// `--cache-ttl 60` stores the pages that state no freshness, but only the anonymous one.
    pub fn the_override_keeps_private_pages_private(m: &str, mode: &str) {
        check(m, mode, true);
    }

    fn check(m: &str, mode: &str, overridden: bool) {
        let rows = rows(overridden);
        let (o, seen) = origin(&rows);
        let ttl = overridden.then_some(Duration::from_secs(60));
        let Some(p) = proxy_with(o.addr, m, mode, |c| c.cache_ttl = ttl) else {
            return;
        };
        for (path, fields, want) in &rows {
            for (i, (user, creds)) in USERS.iter().enumerate() {
                let mut s = connect(&p);
                let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n{creds}\r\n");
                s.write_all(req.as_bytes()).unwrap();
                let r = read_response(&mut s, &mut Vec::new(), false);
                assert_eq!(r.status, 200, "{m} {mode} {path} {user}");
                let (owner, hit) = want[i];
                assert_eq!(
                    (r.text(), r.cache() == Some("HIT")),
                    (format!("page of {owner}"), hit),
                    "{m} {mode} {path} ({fields:?}): request {i} by {user}"
                );
            }
            let misses = want.iter().filter(|(_, hit)| !hit).count();
            assert_eq!(
                seen.lock().unwrap().get(*path).copied(),
                Some(misses),
                "{m} {mode} {path}: requests that reached the origin"
            );
        }
        p.shutdown().unwrap();
    }
}

macro_rules! privacy_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {$(
        #[allow(non_snake_case)]
        mod $v {
            modes!($name; no_page_reaches_another_user, the_override_keeps_private_pages_private);
        }
    )*};
}

evlab_poll::for_each_mechanism!(privacy_tests);
