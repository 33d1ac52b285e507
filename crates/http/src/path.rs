//! Request paths. SPEC: `normalize(raw)` takes the raw target path (starts with '/', no query),
//! percent-decodes it (`%xx` hex, either case; `+` stays `+`), rejects invalid escapes and encoded
//! NUL (and a raw NUL) with `PathError::Invalid`, rejects decoded bytes that are not valid UTF-8
//! with Invalid, then resolves `.` and `..` segments and collapses repeated slashes; a `..` that
//! would climb above `/` → `PathError::Escapes`. A trailing slash is kept (directories). Returns
//! `Cow::Borrowed(raw)` when nothing changed (the common case: no '%', no "//", no dot segment).

use std::borrow::Cow;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PathError {
    Invalid,
    Escapes,
}

pub fn normalize(raw: &str) -> Result<Cow<'_, str>, PathError> {
    let _ = raw;
    todo!()
}
