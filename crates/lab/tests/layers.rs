//! The workspace's module structure: no crate has an import cycle between its files; the lab's
//! reasoning (`crates/reason`) uses its layers only downwards (model ← analysis ← render) and
//! depends on no crate that runs anything, so that its running (`crates/lab`: run) sits above
//! it by the crate graph alone.
//!
//! Reads the sources as text: every `crate::…`, `super::…` and `self::…` path outside comments
//! and test modules is resolved to the file of the longest module it names. Test code may reach
//! across (a test builds fixtures from anywhere); the library may not.

#![deny(clippy::too_many_lines)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module a file defines: `lib.rs` → [], `a/mod.rs` → [a], `a/b.rs` → [a, b].
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The file's library code: comments dropped, and everything from a `#[cfg(test)]` module on.
fn library_code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        if t == "#[cfg(test)]"
            && lines
                .get(i + 1)
                .is_some_and(|n| n.contains("mod ") && n.trim_end().ends_with('{'))
        {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

fn ident(s: &str) -> usize {
    s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len())
}

/// Every path that starts at `crate`, `super` or `self`, as written after its root: the
/// segments of `crate::a::{b, c::d}` come back as [a, b] and [a, c, d].
fn paths(code: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(root) {
            let at = from + i;
            from = at + root.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut prefix = Vec::new();
            let mut rest = &code[at + root.len()..];
            loop {
                // `super::super::x`
                if let Some(r) = rest.strip_prefix("super::") {
                    prefix.push("super".to_string());
                    rest = r;
                    continue;
                }
                let n = ident(rest);
                if n == 0 {
                    break;
                }
                prefix.push(rest[..n].to_string());
                rest = &rest[n..];
                match rest.strip_prefix("::") {
                    Some(r) => rest = r,
                    None => break,
                }
            }
            let root = root.trim_end_matches("::").to_string();
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let mut p = prefix.clone();
                    p.extend(
                        item.trim()
                            .split("::")
                            .map(|s| s[..ident(s)].to_string())
                            .filter(|s| !s.is_empty()),
                    );
                    out.push((root.clone(), p));
                }
            } else {
                out.push((root, prefix));
            }
        }
    }
    out
}

/// Each file of a crate → the files of the same crate its library code uses.
fn graph(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut files = Vec::new();
    rs_files(src, &mut files);
    let modules: BTreeMap<Module, PathBuf> = files
        .iter()
        .map(|f| (module_of(src, f), f.clone()))
        .collect();
    let mut g = BTreeMap::new();
    for f in &files {
        let me = module_of(src, f);
        let mut deps = BTreeSet::new();
        if f.file_name().is_some_and(|n| n == "tests.rs") {
            g.insert(f.clone(), deps);
            continue;
        }
        let code = library_code(&std::fs::read_to_string(f).unwrap());
        for (root, segs) in paths(&code) {
            let mut base: Module = match root.as_str() {
                "crate" => vec![],
                // `self` in a.rs or a/mod.rs is module a; `super` is its parent.
                "self" => me.clone(),
                _ => me[..me.len().saturating_sub(1)].to_vec(),
            };
            for s in segs {
                if s == "super" {
                    base.pop();
                } else {
                    base.push(s);
                }
            }
            // The longest prefix that is a file of its own.
            while !base.is_empty() && !modules.contains_key(&base) {
                base.pop();
            }
            if let Some(target) = modules.get(&base) {
                if target != f && !base.is_empty() {
                    deps.insert(target.clone());
                }
            }
        }
        g.insert(f.clone(), deps);
    }
    g
}

/// The strongly connected components with more than one file (Tarjan).
fn cycles(g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct T<'a> {
        g: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on: BTreeSet<&'a PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a PathBuf) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in &t.g[v] {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                scc.push(w.clone());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn crates() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(workspace().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

#[test]
fn no_crate_has_an_import_cycle() {
    let mut found = Vec::new();
    for src in crates() {
        for scc in cycles(&graph(&src)) {
            found.push(
                scc.iter()
                    .map(|p| {
                        p.strip_prefix(workspace())
                            .unwrap_or(p)
                            .display()
                            .to_string()
                    })
                    .collect::<Vec<_>>()
                    .join(" ↔ "),
            );
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn the_reasoning_uses_its_layers_only_downwards() {
    let src = workspace().join("crates/reason/src");
    let layer = |f: &Path| -> Option<usize> {
        let first = f.strip_prefix(&src).ok()?.iter().next()?.to_str()?;
        ["model", "analysis", "render"]
            .iter()
            .position(|l| *l == first)
    };
    let g = graph(&src);
    assert!(
        g.len() > 20,
        "the reasoning's files were not found: {}",
        src.display()
    );
    let mut wrong = Vec::new();
    for (f, deps) in &g {
        let Some(lf) = layer(f) else { continue };
        for d in deps {
            if layer(d).is_some_and(|ld| ld > lf) {
                wrong.push(format!(
                    "{} uses {}",
                    f.strip_prefix(&src).unwrap().display(),
                    d.strip_prefix(&src).unwrap().display()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "upward uses:\n{}", wrong.join("\n"));
}

#[test]
fn the_checker_sees_a_cycle_and_a_grouped_import() {
    let dir = std::env::temp_dir().join(format!("evlab-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "pub mod c;\nuse super::b::X;\n").unwrap();
    std::fs::write(
        dir.join("a/c.rs"),
        "// use crate::b; (a comment)\nfn f() {}\n",
    )
    .unwrap();
    std::fs::write(dir.join("b.rs"), "use crate::{a::c, x};\npub struct X;\n").unwrap();
    let g = graph(&dir);
    let c = cycles(&g);
    assert!(g[&dir.join("a/c.rs")].is_empty(), "{g:?}");
    assert_eq!(c.len(), 0, "{c:?}");
    std::fs::write(dir.join("a/c.rs"), "use crate::b::X;\n").unwrap();
    let c = cycles(&graph(&dir));
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].len(), 2, "{c:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The crate graph docs/architecture.md states (`a → {b, c}` and `a → b` in its "Dependency
/// direction" paragraph): crate → the evlab crates it depends on.
fn documented_graph() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(workspace().join("docs/architecture.md")).unwrap();
    let start = text
        .find("**Dependency direction.**")
        .expect("architecture.md has its Dependency direction paragraph");
    let para = &text[start..start + text[start..].find("\n\n").unwrap_or(text.len() - start)];
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for span in para.split('`').skip(1).step_by(2) {
        let Some((from, to)) = span.split_once(" → ") else {
            continue;
        };
        let to = to.trim().trim_start_matches('{').trim_end_matches('}');
        g.entry(from.trim().to_string())
            .or_default()
            .extend(to.split(',').map(|t| t.trim().to_string()));
    }
    g
}

/// The same graph from `cargo metadata`: each workspace crate's normal (not dev or build)
/// dependencies on other evlab crates, named without the `evlab-` prefix (`evlab` is `cli`).
fn cargo_graph() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let o = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Raw: `cargo metadata`'s document, which no evlab type describes.
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let short = |n: &str| match n {
        "evlab" => "cli".to_string(),
        n => n.trim_start_matches("evlab-").to_string(),
    };
    let mut g = BTreeMap::new();
    for p in v["packages"].as_array().unwrap() {
        let deps: BTreeSet<String> = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .filter_map(|d| d["name"].as_str())
            .filter(|n| n.starts_with("evlab"))
            .map(short)
            .collect();
        if !deps.is_empty() {
            g.insert(short(p["name"].as_str().unwrap()), deps);
        }
    }
    g
}

#[test]
fn architecture_md_states_the_crate_graph_cargo_builds() {
    let (doc, cargo) = (documented_graph(), cargo_graph());
    assert!(cargo.len() >= 6, "{cargo:?}");
    assert_eq!(
        doc, cargo,
        "docs/architecture.md's Dependency direction (left) is not the crate graph cargo \
         metadata gives (right)"
    );
}

/// The crates that start processes, open sockets, hold an engine or make system calls (and the
/// lab's running half), which the reasoning must not reach.
const RUNS: [&str; 11] = [
    "evlab",
    "evlab-lab",
    "evlab-server",
    "evlab-proxy",
    "evlab-load",
    "evlab-micro",
    "evlab-runtime",
    "evlab-http",
    "evlab-poll",
    "evlab-sys",
    "libc",
];

#[test]
fn the_reasoning_depends_on_nothing_that_runs() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let o = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Raw: `cargo metadata`'s document, which no evlab type describes.
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let reason = v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "evlab-reason")
        .expect("the workspace has evlab-reason");
    // Its own Cargo.toml, every kind (normal, dev, build)…
    let direct: Vec<&str> = reason["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["name"].as_str())
        .filter(|n| RUNS.contains(n))
        .collect();
    assert!(
        direct.is_empty(),
        "crates/reason/Cargo.toml names {direct:?}: the reasoning runs nothing"
    );
    // …and through the evlab crates it depends on.
    let g = cargo_graph();
    let mut seen = BTreeSet::new();
    let mut todo = vec!["reason".to_string()];
    while let Some(c) = todo.pop() {
        for d in g.get(&c).into_iter().flatten() {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    let short = |n: &str| match n {
        "evlab" => "cli".to_string(),
        n => n.trim_start_matches("evlab-").to_string(),
    };
    let reached: Vec<&String> = seen
        .iter()
        .filter(|c| RUNS.iter().any(|r| short(r) == **c))
        .collect();
    assert!(
        reached.is_empty(),
        "evlab-reason reaches {reached:?} through its dependencies"
    );
}
