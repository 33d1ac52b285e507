//! Content types by file extension: [`content_type`] matches the extension of a path's last
//! segment, ignoring case, against a table of the common web types; text types carry
//! `; charset=utf-8`, and anything else (no extension, an unknown one, a dotfile's name) is
//! `application/octet-stream`.
//!
//! Only `text/*` types carry a charset: `application/json` is UTF-8 by definition (RFC 8259)
//! and defines no charset parameter. Looked up once per file load, not per request, so a
//! linear scan is plenty.

const DEFAULT: &str = "application/octet-stream";

const TYPES: &[(&str, &str)] = &[
    ("html", "text/html; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    // RFC 9239 makes text/javascript the one type for JavaScript, modules included.
    ("js", "text/javascript; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("json", "application/json"),
    ("txt", "text/plain; charset=utf-8"),
    ("xml", "application/xml"),
    ("svg", "image/svg+xml"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("ico", "image/x-icon"),
    ("pdf", "application/pdf"),
    ("wasm", "application/wasm"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("ttf", "font/ttf"),
    ("mp4", "video/mp4"),
    ("webm", "video/webm"),
    ("mp3", "audio/mpeg"),
    ("ogg", "audio/ogg"),
    ("zip", "application/zip"),
    ("gz", "application/gzip"),
    ("tar", "application/x-tar"),
    ("csv", "text/csv; charset=utf-8"),
    ("md", "text/markdown; charset=utf-8"),
];

pub fn content_type(path: &str) -> &'static str {
    // The extension belongs to the last segment only: `/a.d/file` has none, and a dotfile
    // such as `/.profile` is a name, not an extension.
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = match name.rfind('.') {
        Some(i) if i > 0 => &name[i + 1..],
        _ => return DEFAULT,
    };
    TYPES
        .iter()
        .find(|(e, _)| e.eq_ignore_ascii_case(ext))
        .map_or(DEFAULT, |&(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::content_type;

    #[test]
    fn table() {
        let rows: &[(&str, &str)] = &[
            ("/index.html", "text/html; charset=utf-8"),
            ("/INDEX.HTM", "text/html; charset=utf-8"),
            ("/a/style.Css", "text/css; charset=utf-8"),
            ("/app.js", "text/javascript; charset=utf-8"),
            ("/mod.mjs", "text/javascript; charset=utf-8"),
            ("/d.json", "application/json"),
            ("/readme.txt", "text/plain; charset=utf-8"),
            ("/feed.xml", "application/xml"),
            ("/logo.svg", "image/svg+xml"),
            ("/p.png", "image/png"),
            ("/p.jpg", "image/jpeg"),
            ("/p.JPEG", "image/jpeg"),
            ("/p.gif", "image/gif"),
            ("/p.webp", "image/webp"),
            ("/favicon.ico", "image/x-icon"),
            ("/doc.pdf", "application/pdf"),
            ("/m.wasm", "application/wasm"),
            ("/f.woff", "font/woff"),
            ("/f.woff2", "font/woff2"),
            ("/f.ttf", "font/ttf"),
            ("/v.mp4", "video/mp4"),
            ("/v.webm", "video/webm"),
            ("/a.mp3", "audio/mpeg"),
            ("/a.ogg", "audio/ogg"),
            ("/z.zip", "application/zip"),
            ("/z.tar.gz", "application/gzip"),
            ("/z.tar", "application/x-tar"),
            ("/t.csv", "text/csv; charset=utf-8"),
            ("/README.md", "text/markdown; charset=utf-8"),
            ("/file.unknownext", "application/octet-stream"),
            ("/noext", "application/octet-stream"),
            ("/dir.html/noext", "application/octet-stream"),
            ("/.html", "application/octet-stream"),
            ("/trailingdot.", "application/octet-stream"),
            ("/", "application/octet-stream"),
            ("", "application/octet-stream"),
            ("index.html", "text/html; charset=utf-8"),
        ];
        for (path, want) in rows {
            assert_eq!(content_type(path), *want, "{path}");
        }
    }
}
