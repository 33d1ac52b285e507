//! Request paths: [`normalize`] turns a request target's path (from '/', query removed) into
//! the path the content cache looks up.
//!
//! It percent-decodes (`%xx`, hex digits of either case; `+` stays `+`), then resolves `.` and
//! `..` segments and collapses repeated slashes, keeping a trailing slash (a directory). A path
//! that does not start with '/', has an invalid escape, contains NUL (raw or encoded) or decodes
//! to bytes that are not UTF-8 is [`PathError::Invalid`]; a `..` that would climb above `/` is
//! [`PathError::Escapes`]. The common path — no '%', no "//", no dot segment — comes back
//! borrowed, unchanged and unallocated.
//!
//! Decoding happens before dot-segment resolution on purpose: the file system sees the decoded
//! bytes, so `%2e%2e` and `%2F` must act as `..` and `/` here, or they would slip past.
//! A `raw` that does not start with '/' is Invalid.

use std::borrow::Cow;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PathError {
    Invalid,
    Escapes,
}

pub fn normalize(raw: &str) -> Result<Cow<'_, str>, PathError> {
    let bytes = raw.as_bytes();
    if bytes.first() != Some(&b'/') {
        return Err(PathError::Invalid);
    }
    if is_clean(bytes)? {
        return Ok(Cow::Borrowed(raw));
    }
    let decoded = decode(bytes)?;
    resolve(&decoded).map(Cow::Owned)
}

/// One pass over the path: true when it is already normal (nothing to decode, no empty segment
/// but a trailing one, no dot segment). Err on a raw NUL.
fn is_clean(bytes: &[u8]) -> Result<bool, PathError> {
    let mut clean = true;
    let mut seg_start = 1;
    for i in 1..=bytes.len() {
        let b = bytes.get(i).copied();
        match b {
            None | Some(b'/') => {
                let seg = &bytes[seg_start..i];
                let last = b.is_none();
                if (seg.is_empty() && !last) || seg == b"." || seg == b".." {
                    clean = false;
                }
                seg_start = i + 1;
            }
            Some(b'%') => clean = false,
            Some(0) => return Err(PathError::Invalid),
            Some(_) => {}
        }
    }
    Ok(clean)
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn decode(bytes: &[u8]) -> Result<String, PathError> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'%' => {
                let hi = bytes.get(i + 1).copied().and_then(hex);
                let lo = bytes.get(i + 2).copied().and_then(hex);
                match (hi, lo) {
                    (Some(hi), Some(lo)) => {
                        let v = hi << 4 | lo;
                        if v == 0 {
                            return Err(PathError::Invalid);
                        }
                        out.push(v);
                        i += 3;
                    }
                    _ => return Err(PathError::Invalid),
                }
            }
            0 => return Err(PathError::Invalid),
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| PathError::Invalid)
}

/// Resolves dot segments and empty segments of a decoded path starting with '/'.
fn resolve(path: &str) -> Result<String, PathError> {
    // `out` holds "/seg/seg" (empty for the root), so `..` is a truncation at the last '/'.
    let mut out = String::with_capacity(path.len());
    let mut trailing = false;
    for seg in path.get(1..).unwrap_or("").split('/') {
        trailing = false;
        match seg {
            "" | "." => trailing = true,
            ".." => {
                let cut = out.rfind('/').ok_or(PathError::Escapes)?;
                out.truncate(cut);
                trailing = true;
            }
            _ => {
                out.push('/');
                out.push_str(seg);
            }
        }
    }
    if out.is_empty() || trailing {
        out.push('/');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    enum Want {
        Same,
        Owned(&'static str),
        Err(PathError),
    }
    use Want::*;

    #[test]
    fn table() {
        let rows: &[(&str, Want)] = &[
            ("/", Same),
            ("/one", Same),
            ("/a/b/c.html", Same),
            ("/dir/", Same),
            ("/a+b", Same),
            ("/...", Same),
            ("/a/.hidden", Same),
            ("/a..b/c", Same),
            ("/ünïcode", Same),
            ("/a%20b", Owned("/a b")),
            ("/a%2fb", Owned("/a/b")),
            ("/%41%62", Owned("/Ab")),
            ("/%e2%82%AC", Owned("/€")),
            ("/100%25", Owned("/100%")),
            ("/a/./b", Owned("/a/b")),
            ("/a/../b", Owned("/b")),
            ("/a/b/..", Owned("/a/")),
            ("/a/b/../", Owned("/a/")),
            ("/a/.", Owned("/a/")),
            ("/a/..", Owned("/")),
            ("/.", Owned("/")),
            ("//", Owned("/")),
            ("//a///b", Owned("/a/b")),
            ("/a//", Owned("/a/")),
            ("/a/b/../../c", Owned("/c")),
            ("/%2e/a", Owned("/a")),
            ("/a/%2e%2e/b", Owned("/b")),
            ("/a/%2E%2E", Owned("/")),
            ("/..", Err(PathError::Escapes)),
            ("/../", Err(PathError::Escapes)),
            ("/../etc/passwd", Err(PathError::Escapes)),
            ("/a/../..", Err(PathError::Escapes)),
            ("/a/../../b", Err(PathError::Escapes)),
            ("/%2e%2e/x", Err(PathError::Escapes)),
            ("/%2E%2e%2Fetc", Err(PathError::Escapes)),
            ("/a%2f..%2f..%2fb", Err(PathError::Escapes)),
            ("/a%00b", Err(PathError::Invalid)),
            ("/a\0b", Err(PathError::Invalid)),
            ("/a%", Err(PathError::Invalid)),
            ("/a%4", Err(PathError::Invalid)),
            ("/a%zz", Err(PathError::Invalid)),
            ("/a%g0", Err(PathError::Invalid)),
            ("/%ff", Err(PathError::Invalid)),
            ("/%c0%af", Err(PathError::Invalid)),
            ("", Err(PathError::Invalid)),
            ("a/b", Err(PathError::Invalid)),
            ("*", Err(PathError::Invalid)),
        ];
        for (raw, want) in rows {
            let got = normalize(raw);
            match want {
                Same => assert!(
                    matches!(got, Ok(Cow::Borrowed(p)) if p == *raw),
                    "{raw:?}: {got:?}"
                ),
                Owned(p) => assert!(
                    matches!(&got, Ok(Cow::Owned(o)) if o == p),
                    "{raw:?}: {got:?}, want {p:?}"
                ),
                Err(e) => assert_eq!(got, Result::Err(*e), "{raw:?}"),
            }
        }
    }
}
