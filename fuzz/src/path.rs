//! Properties of the path normaliser, `evlab_http::path::normalize`.
//!
//! - It agrees exactly (value and error kind) with [`reference`], a deliberately naive model:
//!   decode every escape into a byte vector, then resolve segments with a stack.
//! - A result starts with '/', has no NUL, no `.` or `..` segment and no empty segment but a
//!   trailing one.
//! - A borrowed result is the input itself (the fast path only skips work that changes nothing).
//! - Idempotence: the result, with '%' written `%25`, normalises to itself; with no '%' in it,
//!   it comes back borrowed. The result with every byte after the leading '/' percent-encoded
//!   also normalises to itself (decoding happens before resolution).
//!
//! The input is the fuzz data as UTF-8 (invalid sequences replaced), checked as is and, when it
//! does not start with '/', with a '/' in front.
#![allow(dead_code)]

use std::borrow::Cow;

use evlab_http::path::{normalize, PathError};

/// Tokens for seeded mutations (the replay tests) and `fuzz/dict/path.dict`.
pub const TOKENS: &[&[u8]] = &[
    b"/", b"//", b".", b"..", b"/./", b"/../", b"%", b"%2e", b"%2E", b"%2f", b"%2F", b"%25",
    b"%00", b"%c3%a9", b"%ff", b"\0", b"?", b"#", b"+",
];

pub fn check(data: &[u8], _exhaustive: bool) {
    let s = String::from_utf8_lossy(data);
    check_str(&s);
    if !s.starts_with('/') {
        check_str(&format!("/{s}"));
    }
}

pub fn check_str(raw: &str) {
    let got = normalize(raw);
    let want = reference(raw);
    assert_eq!(
        got.as_ref().map(|p| p.as_ref()),
        want.as_ref().map(String::as_str),
        "normalize({raw:?}) differs from the reference"
    );
    let Ok(p) = got else { return };
    assert_normal(&p);
    if let Cow::Borrowed(b) = p {
        assert!(
            std::ptr::eq(b, raw),
            "borrowed result is not the input: {raw:?}"
        );
    }
    let escaped = p.replace('%', "%25");
    assert_eq!(
        normalize(&escaped).as_deref(),
        Ok(p.as_ref()),
        "not idempotent: {raw:?} -> {p:?}"
    );
    if !p.contains('%') {
        assert!(
            matches!(normalize(&p), Ok(Cow::Borrowed(q)) if q == p),
            "a normal path is not returned as is: {p:?}"
        );
    }
    let encoded = encode_all(&p);
    assert_eq!(
        normalize(&encoded).as_deref(),
        Ok(p.as_ref()),
        "fully encoded {encoded:?} does not decode to {p:?}"
    );
}

/// `p` is a normal path: '/', then segments that are neither empty (but the last) nor dots.
pub fn assert_normal(p: &str) {
    assert!(p.starts_with('/'), "{p:?} does not start with '/'");
    assert!(!p.contains('\0'), "{p:?} contains NUL");
    let segs: Vec<&str> = p[1..].split('/').collect();
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        assert!(
            *seg != "." && *seg != ".." && (last || !seg.is_empty()),
            "{p:?} has segment {seg:?}"
        );
    }
}

/// Every byte but the leading '/' as `%XX`, alternating upper and lower case hex digits.
fn encode_all(p: &str) -> String {
    let mut out = String::from("/");
    for (i, b) in p.bytes().skip(1).enumerate() {
        if i % 2 == 0 {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push_str(&format!("%{b:02x}"));
        }
    }
    out
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// The model: what `normalize` is documented to do, written the slow, obvious way.
pub fn reference(raw: &str) -> Result<String, PathError> {
    let b = raw.as_bytes();
    if b.first() != Some(&b'/') {
        return Err(PathError::Invalid);
    }
    let mut decoded = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hi = b.get(i + 1).copied().and_then(hex_digit);
            let lo = b.get(i + 2).copied().and_then(hex_digit);
            let (Some(hi), Some(lo)) = (hi, lo) else {
                return Err(PathError::Invalid);
            };
            decoded.push(hi * 16 + lo);
            i += 3;
        } else {
            decoded.push(b[i]);
            i += 1;
        }
    }
    if decoded.contains(&0) {
        return Err(PathError::Invalid);
    }
    let s = String::from_utf8(decoded).map_err(|_| PathError::Invalid)?;
    let segs: Vec<&str> = s[1..].split('/').collect();
    let mut stack: Vec<&str> = Vec::new();
    for seg in &segs {
        match *seg {
            "" | "." => {}
            ".." => {
                if stack.pop().is_none() {
                    return Err(PathError::Escapes);
                }
            }
            other => stack.push(other),
        }
    }
    let mut out = format!("/{}", stack.join("/"));
    let ends_as_dir = matches!(segs.last(), Some(&("" | "." | "..")));
    if !stack.is_empty() && ends_as_dir {
        out.push('/');
    }
    Ok(out)
}
