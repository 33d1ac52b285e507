//! The docs are maps, and their file lists cannot go stale:
//!
//! - docs/architecture.md's crate table names every source file of the crates (`src/`, tests
//!   aside), each at the path it has, and every other file path it names exists;
//! - each docs/*.md is at most 500 lines and 60 KB, the README at most 250 lines, and the two
//!   together name at most 3 commits (dated notebooks live beside their runs, in
//!   `results/<kind>/<machine>/NOTES.md`).
//!
//! When a file is added, moved or split, the failure names each path to add to or remove from
//! architecture.md's table.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every `.rs` file under `dir`, as a path from the repository's root.
fn rs_files(dir: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let root = repo().canonicalize().unwrap();
            let rel = p.canonicalize().unwrap();
            out.insert(rel.strip_prefix(&root).unwrap().display().to_string());
        }
    }
}

/// The crates' source files, tests aside (`tests.rs`, `*_tests.rs` and `tests/` directories).
fn source_files() -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    for e in std::fs::read_dir(repo().join("crates")).unwrap() {
        let src = e.unwrap().path().join("src");
        if src.is_dir() {
            rs_files(&src, &mut all);
        }
    }
    all.retain(|f| {
        let name = f.rsplit('/').next().unwrap();
        !(name == "tests.rs" || name.ends_with("_tests.rs") || f.contains("/tests/"))
    });
    all
}

/// The text outside fenced code blocks.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The `code spans` of a piece of Markdown.
fn spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// A span that names a file or a directory: no spaces, no placeholder (`<name>`) or pattern,
/// and ending in `.rs` or `/`.
fn is_path(span: &str) -> bool {
    !span.contains(|c: char| c.is_whitespace() || "<>*{}".contains(c))
        && !span.contains("::")
        && (span.ends_with(".rs") || (span.ends_with('/') && span.len() > 1))
}

/// The files architecture.md's crate table names: each row's third cell, its paths relative to
/// the crate's `src/` (or to the crate, for `tests/…` and `examples/…`), as paths from the root.
fn table_files(doc: &str) -> (BTreeSet<String>, Vec<String>) {
    let start = doc
        .find("## Crates")
        .expect("architecture.md has its Crates section");
    let mut named = BTreeSet::new();
    let mut odd = Vec::new();
    for row in doc[start..].lines().skip_while(|l| !l.starts_with('|')) {
        if !row.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = row.split('|').collect();
        let Some(krate) = cells.get(1).and_then(|c| spans(c).first().copied()) else {
            continue;
        };
        if !krate.starts_with("crates/") {
            continue;
        }
        for f in spans(cells.get(3).copied().unwrap_or(""))
            .into_iter()
            .filter(|s| is_path(s))
        {
            let base = if f.starts_with("tests/") || f.starts_with("examples/") {
                krate.to_string()
            } else {
                format!("{krate}/src")
            };
            let path = format!("{base}/{f}");
            if f.ends_with('/') {
                odd.push(format!("{path} (a directory: name its files)"));
            } else {
                named.insert(path);
            }
        }
    }
    (named, odd)
}

#[test]
fn architecture_md_names_every_source_file_where_it_is() {
    let doc = prose(&read("docs/architecture.md"));
    let (named, mut wrong) = table_files(&doc);
    let files = source_files();
    wrong.extend(
        named
            .iter()
            .filter(|f| !repo().join(f).is_file())
            .map(|f| format!("{f} (named, but no such file)")),
    );
    let missing: Vec<&String> = files.difference(&named).collect();
    assert!(
        missing.is_empty() && wrong.is_empty(),
        "docs/architecture.md's crate table (the third column; paths relative to the crate's \
         src/) is not the source tree.\nAdd to the table:\n  {}\nRemove or correct:\n  {}",
        missing
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  "),
        wrong.join("\n  ")
    );
}

/// Outside the table, a path may be written from the root (`crates/x/src/y.rs`) or from a
/// crate's `src/` (`run/knee.rs`); either way it must lead to a file or directory there is.
#[test]
fn architecture_md_names_no_path_that_is_not_there() {
    let doc = prose(&read("docs/architecture.md"));
    let mut dirs = BTreeSet::new();
    let files = {
        let mut all = BTreeSet::new();
        rs_files(&repo().join("crates"), &mut all);
        all
    };
    for f in &files {
        let mut p = Path::new(f).parent();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            dirs.insert(format!("{}/", d.display()));
            p = d.parent();
        }
    }
    let there = |span: &str| {
        let under = |all: &BTreeSet<String>| {
            all.iter().any(|f| {
                f == span || (f.ends_with(&format!("/{span}")) && f.starts_with("crates/"))
            })
        };
        repo().join(span).exists() || under(&files) || under(&dirs)
    };
    let gone: BTreeSet<&str> = spans(&doc)
        .into_iter()
        .filter(|s| is_path(s) && !there(s))
        .collect();
    assert!(
        gone.is_empty(),
        "docs/architecture.md names paths that are not in the tree:\n  {}",
        gone.into_iter().collect::<Vec<_>>().join("\n  ")
    );
}

/// Tokens of 7 to 40 hexadecimal digits with a letter and a digit among them: commit hashes
/// (and the odd digest), not counted inside paths or longer words.
fn hashes(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'/' || b == b'.';
    let mut i = 0;
    while i < bytes.len() {
        if word(bytes[i]) {
            let start = i;
            while i < bytes.len() && word(bytes[i]) {
                i += 1;
            }
            let w = text[start..i].trim_end_matches('.');
            let hex = w
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if hex
                && (7..=40).contains(&w.len())
                && w.bytes().any(|b| b.is_ascii_digit())
                && w.bytes().any(|b| b.is_ascii_lowercase())
            {
                out.insert(w.to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn docs_are_maps_within_their_sizes() {
    let mut over = Vec::new();
    let mut named = BTreeSet::new();
    let mut docs: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    for (file, lines_at_most) in docs
        .iter()
        .map(|d| (d.as_str(), 500))
        .chain([("README.md", 250)])
    {
        let text = read(file);
        let lines = text.lines().count();
        if lines > lines_at_most || text.len() > 60 * 1024 {
            over.push(format!(
                "{file}: {lines} lines (at most {lines_at_most}), {} bytes (at most {})",
                text.len(),
                60 * 1024
            ));
        }
        named.extend(hashes(&text));
    }
    assert!(
        over.is_empty(),
        "docs are maps: move dated measurements and notebooks to \
         results/<kind>/<machine>/NOTES.md, beside their runs\n  {}",
        over.join("\n  ")
    );
    assert!(
        named.len() <= 3,
        "README.md and docs/ name {} commits (at most 3; the others belong in a NOTES.md): \
         {named:?}",
        named.len()
    );
}

#[test]
fn hashes_are_told_from_numbers_and_paths() {
    let h = hashes("at commit `facd52c`, 1048576 bytes, /b1048583 and c6d1e78's run; deadbeef.");
    assert_eq!(
        h.into_iter().collect::<Vec<_>>(),
        ["c6d1e78", "facd52c"],
        "'deadbeef' has no digit, '/b1048583' is a path"
    );
}
