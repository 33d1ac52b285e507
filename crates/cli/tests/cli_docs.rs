//! The command line's own documentation and promises, checked on the real binary: one default
//! port, examples in every `--help`, shell completions that a shell accepts, manual pages that
//! render, results directories checked before a run, and a README whose links stay inside the
//! repository.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

mod common;
use common::BIN;

const SUBCOMMANDS: &[&str] = &[
    "serve",
    "load",
    "load-merge",
    "idle",
    "proxy",
    "fileset",
    "run",
    "report",
    "completions",
    "man",
    "pipetest",
    "herd",
    "micro",
    "hosts",
    "compare",
];

fn evlab(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_help_has_examples_of_its_own_subcommand() {
    let top = stdout(&evlab(&["--help"]));
    assert!(top.contains("Examples:"), "{top}");
    for sub in SUBCOMMANDS {
        assert!(top.contains(sub), "`evlab --help` lacks {sub}: {top}");
        for flag in ["--help", "-h"] {
            let help = stdout(&evlab(&[sub, flag]));
            let at = help
                .find("Examples:")
                .unwrap_or_else(|| panic!("evlab {sub} {flag} has no examples:\n{help}"));
            assert!(
                help[at..].contains(&format!("evlab {sub}")),
                "evlab {sub} {flag}: the examples do not run it:\n{help}"
            );
        }
    }
}

#[test]
fn serve_load_and_idle_show_one_default_port() {
    let serve = stdout(&evlab(&["serve", "--help"]));
    assert!(serve.contains("[default: 127.0.0.1:8080]"), "{serve}");
    for sub in ["load", "idle"] {
        let help = stdout(&evlab(&[sub, "--help"]));
        assert!(help.contains("[default: 8080]"), "evlab {sub}: {help}");
    }
}

#[test]
fn bash_accepts_the_completions_and_completes_subcommands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout(&evlab(&["completions", shell]));
        assert!(script.contains("evlab"), "{shell}: {script}");
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell} completions lack {sub}");
        }
    }
    // bash loads the script and completes `evlab lo` to `load` and `load-merge`.
    let script = stdout(&evlab(&["completions", "bash"]));
    let dir = std::env::temp_dir().join(format!("evlab-completions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("evlab.bash");
    std::fs::write(&file, script).unwrap();
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source '{}' && complete -p evlab && COMP_WORDS=(evlab lo) COMP_CWORD=1 \
             COMP_LINE='evlab lo' COMP_POINT=8 && _evlab evlab lo evlab && echo \"${{COMPREPLY[@]}}\"",
            file.display()
        ))
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(out.lines().last() == Some("load load-merge"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
    // An unknown shell is a usage error that names the valid ones.
    let o = evlab(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bash"));
}

#[test]
fn man_pages_render_for_evlab_and_each_subcommand() {
    let page = stdout(&evlab(&["man"]));
    assert!(page.contains(".TH evlab 1"), "{page}");
    for sub in SUBCOMMANDS {
        let page = stdout(&evlab(&["man", sub]));
        assert!(
            page.contains(&format!(".TH evlab-{sub} 1")),
            "{sub}: {page}"
        );
    }
    let load = stdout(&evlab(&["man", "load"]));
    assert!(load.contains("max\\-error\\-rate"), "{load}");
    // The synopsis names each option's value, as `--help`'s usage does.
    let serve = stdout(&evlab(&["man", "serve"]));
    let synopsis = serve
        .split(".SH SYNOPSIS\n")
        .nth(1)
        .and_then(|s| s.lines().next())
        .unwrap_or_default();
    for want in [
        "\\fBevlab serve\\fR ",
        "[\\fB\\-\\-listen\\fR \\fIADDR:PORT\\fR]",
        "[\\fB\\-m\\fR|\\fB\\-\\-mechanism\\fR \\fIMECHANISM\\fR]",
        "[\\fB\\-\\-stats\\fR]",
        "[\\fIDIR\\fR]",
    ] {
        assert!(synopsis.contains(want), "lacks {want}: {synopsis}");
    }
    let micro = stdout(&evlab(&["man", "micro"]));
    assert!(micro.contains("\\fIcommand\\fR\n"), "{micro}");
    // groff renders it without a warning, where installed.
    if evlab_poll::testing::program("groff") {
        let mut g = Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(g.stdin.as_mut().unwrap(), load.as_bytes()).unwrap();
        drop(g.stdin.take());
        let o = g.wait_with_output().unwrap();
        assert!(o.status.success());
        assert_eq!(String::from_utf8_lossy(&o.stderr), "", "groff warnings");
    }
    // Nested subcommands have pages of their own.
    let fd = stdout(&evlab(&["man", "micro", "fdalloc"]));
    assert!(fd.contains(".TH evlab-micro-fdalloc 1"), "{fd}");
    let o = evlab(&["man", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no subcommand `nope`") && err.contains("load"),
        "{err}"
    );
}

/// `evlab man --dir DIR`: a page per command, nested ones too, none for clap's `help`; each
/// with its examples as a section of their own, verbatim, and its exit status; groff renders
/// every page without a warning (where installed).
#[test]
fn man_dir_writes_a_page_per_command_with_examples() {
    let dir = std::env::temp_dir().join(format!("evlab-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let listed = stdout(&evlab(&["man", "--dir", dir.to_str().unwrap()]));
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(listed.lines().count(), files.len(), "{listed}");
    assert!(files.contains(&"evlab.1".to_string()));
    for sub in SUBCOMMANDS {
        assert!(files.contains(&format!("evlab-{sub}.1")), "{files:?}");
    }
    for nested in ["evlab-micro-fdalloc.1", "evlab-micro-malloc.1"] {
        assert!(files.contains(&nested.to_string()), "{files:?}");
    }
    assert!(
        !files.iter().any(|f| f.contains("help")),
        "no page for clap's help: {files:?}"
    );
    for f in &files {
        let page = std::fs::read_to_string(dir.join(f)).unwrap();
        if f != "evlab.1" || page.contains("Examples") {
            assert!(page.contains(".SH EXAMPLES\n.nf\n"), "{f}: {page}");
        }
        assert!(!page.contains(".SH EXTRA"), "{f}: examples under EXTRA");
        assert!(!page.contains("evlab\\-help"), "{f}: names evlab-help(1)");
        if evlab_poll::testing::program("groff") {
            let mut g = Command::new("groff")
                .args(["-man", "-Tutf8", "-ww", "-z"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            std::io::Write::write_all(g.stdin.as_mut().unwrap(), page.as_bytes()).unwrap();
            drop(g.stdin.take());
            let o = g.wait_with_output().unwrap();
            assert!(o.status.success(), "{f}");
            assert_eq!(
                String::from_utf8_lossy(&o.stderr),
                "",
                "{f}: groff warnings"
            );
        }
    }
    let load = std::fs::read_to_string(dir.join("evlab-load.1")).unwrap();
    assert!(load.contains(".SH \"EXIT STATUS\""), "{load}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// bash completes the choice flags with their values, not with file names.
#[test]
fn bash_completes_choice_flags_with_their_values() {
    let script = stdout(&evlab(&["completions", "bash"]));
    let dir = std::env::temp_dir().join(format!("evlab-choices-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("evlab.bash");
    std::fs::write(&file, script).unwrap();
    let complete = |line: &str| {
        let words: Vec<&str> = line.split(' ').collect();
        let o =
            Command::new("bash")
                .arg("-c")
                .arg(format!(
                "source '{}' && COMP_WORDS=({}) COMP_CWORD={} COMP_LINE='{line}' COMP_POINT={} \
                 && _evlab evlab '{}' '{}' && echo \"${{COMPREPLY[@]}}\"",
                file.display(),
                words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" "),
                words.len() - 1,
                line.len(),
                words[words.len() - 1],
                words[words.len() - 2],
            ))
                .current_dir(&dir)
                .output()
                .unwrap();
        stdout(&o).lines().last().unwrap_or("").to_string()
    };
    let m = complete("evlab serve --mechanism ");
    for want in ["select", "poll", "epoll-lt", "epoll-et", "uring"] {
        assert!(m.split(' ').any(|x| x == want), "--mechanism: {m}");
    }
    assert!(!m.contains("evlab.bash"), "file names offered: {m}");
    assert_eq!(
        complete("evlab proxy --forward "),
        "copy splice splice-keep splice-release"
    );
    assert_eq!(
        complete("evlab serve --accept-mode "),
        "shared exclusive reuseport"
    );
    assert_eq!(
        complete("evlab serve --file-io "),
        "cache read mmap sendfile"
    );
    // `evlab run`'s experiments by name.
    assert_eq!(complete("evlab run qu"), "quick");
    let figs = complete("evlab run fig5");
    assert_eq!(figs, "fig5-one-byte-idle", "{figs}");
    let all = complete("evlab run ");
    for want in ["quick", "peers", "pipetest", "fig-proxy-cpu", "fdalloc"] {
        assert!(all.split(' ').any(|x| x == want), "run: {all}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `evlab run --out` and `--results` are checked before anything runs.
#[test]
fn run_checks_its_results_directory_first() {
    let d = std::env::temp_dir().join(format!("evlab-cli-docs-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let file = d.join("a-file");
    std::fs::write(&file, "x").unwrap();
    for (flag, path, want) in [
        ("--out", file.clone(), "not a directory"),
        ("--out", file.join("sub"), "cannot create the directory"),
        ("--results", file.join("sub"), "cannot create the directory"),
    ] {
        let mut c = Command::new(BIN)
            .args(["run", "quick", flag])
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The quick experiment takes minutes; the check, none.
        let st = common::wait_within(&mut c, Duration::from_secs(30), "evlab run");
        common::assert_gone(c.id());
        let mut err = String::new();
        std::io::Read::read_to_string(&mut c.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(st.code(), Some(1), "{flag} {}: {err}", path.display());
        let want = format!("{flag} {}: {want}", path.display());
        assert!(err.contains(&want), "stderr lacks '{want}': {err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Markdown links `[text](target)` in `text`, without anchors-only links.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        let tail = &rest[i + 2..];
        let Some(j) = tail.find(')') else { break };
        let target = tail[..j].trim();
        if !target.starts_with('#') {
            out.push(target.split('#').next().unwrap().to_string());
        }
        rest = &tail[j..];
    }
    out
}

#[test]
fn readme_links_stay_in_the_repository_and_name_what_is_shipped() {
    let root = repo().canonicalize().unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut docs = vec![(root.join("README.md"), readme.clone())];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            docs.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
        }
    }
    for (file, text) in &docs {
        for l in links(text) {
            assert!(
                !l.contains("://") && !l.starts_with("mailto:"),
                "{}: a link outside the repository: {l}",
                file.display()
            );
            let target = file.parent().unwrap().join(&l);
            let resolved = target
                .canonicalize()
                .unwrap_or_else(|e| panic!("{}: link {l} does not resolve: {e}", file.display()));
            assert!(
                resolved.starts_with(&root),
                "{}: link {l} leads out of the repository",
                file.display()
            );
        }
    }
    assert!(!readme.contains("working session"), "internal jargon");
    assert!(
        !readme.contains("/work/"),
        "a path of the machine it was written on"
    );
    assert!(readme.contains("cargo install --path crates/cli"));
    // The usage block names every subcommand.
    let usage = readme.split("```").nth(1).unwrap();
    for sub in SUBCOMMANDS {
        assert!(
            usage.contains(&format!("evlab {sub}")),
            "usage lacks {sub}:\n{usage}"
        );
    }
    // The license files the license field promises.
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("license = \"MIT OR Apache-2.0\""));
    let mit = std::fs::read_to_string(root.join("LICENSE-MIT")).unwrap();
    assert!(mit.contains("Copyright (c) the evlab authors") && mit.contains("MIT License"));
    let apache = std::fs::read_to_string(root.join("LICENSE-APACHE")).unwrap();
    assert!(apache.contains("Apache License") && apache.contains("Version 2.0, January 2004"));
    assert!(apache.contains("END OF TERMS AND CONDITIONS"));
}

/// A wrong command line exits 2 in every subcommand, whether clap or the subcommand finds it,
/// and says what is wrong; a failure of the run itself (a file that is not there) exits 1.
#[test]
fn usage_errors_exit_2_everywhere() {
    let cases: &[(&[&str], &str)] = &[
        (&["load", "--rate", "0", "--num-conns", "1"], "rate"),
        (
            &["load", "--rate", "-5", "--num-conns", "1"],
            "more than zero",
        ),
        (&["load", "--rate", "5"], "--num-conns or --duration"),
        (
            &["load", "--rate", "1e-9", "--num-conns", "2"],
            "one per hour",
        ),
        (&["load", "-R", "1e-9"], "one per hour"),
        (
            &["load", "--rate", "5", "--num-conns", "1", "--start-at", "5"],
            "days ago",
        ),
        (
            &[
                "load",
                "--rate",
                "5",
                "--num-conns",
                "1",
                "--method",
                "POST",
            ],
            "POST",
        ),
        (&["load", "--rate", "5", "--duration", "10x"], "500ms"),
        (&["run", "no-such-experiment"], "no experiment"),
        (&["run", "quick", "--duration", "0"], "more than zero"),
        (&["idle", "0"], "at least 1"),
        (&["serve", "--root", "/tmp", "--workers", "0"], "at least 1"),
        (
            &["serve", "--root", "/tmp", "--listen", "nope"],
            "ADDR:PORT",
        ),
        (&["pipetest", "--pipes", "0"], "at least 1"),
        (&["herd", "--workers", "0"], "at least 1"),
        (&["micro", "malloc", "--workers", "0"], "at least 1"),
        (&["fileset", "/nonexistent/x", "--dirs", "0"], "at least 1"),
        (&["compare", "/tmp"], "required"),
    ];
    for (args, want) in cases {
        let o = evlab(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: stderr lacks '{want}': {err}");
    }
    let o = evlab(&["report", "/nonexistent"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The words users read: no tracker's issue numbers, no "seed" for the source documents, no
/// path outside the repository, in the README, the docs, the shipped experiments and every
/// subcommand's help (a random `--seed` is a seed, and stays one).
#[test]
fn user_facing_words_name_no_issue_no_seed_and_no_path_outside() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut texts: Vec<(String, String)> = Vec::new();
    let mut files = vec![root.join("README.md")];
    for dir in ["docs", "experiments"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            files.push(e.path());
        }
    }
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        texts.push((f.display().to_string(), text));
    }
    for sub in [
        "serve",
        "load",
        "load-merge",
        "idle",
        "proxy",
        "fileset",
        "run",
        "report",
        "compare",
        "pipetest",
        "herd",
        "micro",
        "hosts",
    ] {
        texts.push((
            format!("evlab {sub} --help"),
            stdout(&evlab(&[sub, "--help"])),
        ));
    }
    // A fuzzer's corpus has seeds ("the seeds plus its finds"): "the seed" alone is the word.
    let seed_words = ["seed's", "seeds'", "shared/seeds", "../shared"];
    let lone = |line: &str, w: &str| {
        line.match_indices(w).any(|(at, _)| {
            !line[at + w.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_alphabetic())
        })
    };
    for (what, text) in &texts {
        for (i, line) in text.lines().enumerate() {
            for w in seed_words {
                assert!(!line.contains(w), "{what}:{}: `{w}` in: {line}", i + 1);
            }
            for w in ["the seed", "The seed"] {
                assert!(!lone(line, w), "{what}:{}: `{w}` in: {line}", i + 1);
            }
            // "Issue 13", "issue 22": a tracker's number.
            let lower = line.to_lowercase();
            let numbered = lower.match_indices("issue ").any(|(at, _)| {
                lower[at + 6..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit())
            });
            assert!(!numbered, "{what}:{}: an issue number in: {line}", i + 1);
        }
    }
}

/// Every subcommand's error says which command it is once, `evlab SUB: error: …`, with no
/// second "evlab …:" inside and its cause once (an io error that is both a message and a
/// `source()` would print twice in the chain).
#[test]
fn errors_have_one_prefix_and_say_their_cause_once() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().to_string();
    let scratch = std::env::temp_dir().join(format!("evlab-errors-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let file = scratch.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let missing = scratch.join("missing");
    let missing = missing.to_str().unwrap();
    // Under a file: no directory can be made there.
    let under_file = file.join("sub");
    let under_file = under_file.to_str().unwrap();
    let cases: &[(&[&str], &str, &str)] = &[
        (&["serve", missing], "evlab serve", "document root"),
        (
            &["serve", "/tmp", "--listen", &port],
            "evlab serve",
            "cannot listen",
        ),
        (
            &["proxy", "--origin", "127.0.0.1:1", "--listen", &port],
            "evlab proxy",
            "cannot listen",
        ),
        (&["report", missing], "evlab report", "is not a directory"),
        (&["load-merge", missing], "evlab load-merge", "cannot read"),
        (&["hosts", missing], "evlab hosts", "cannot read"),
        (&["compare", missing, missing], "evlab compare", missing),
        (&["man", "nope"], "evlab man", "no subcommand"),
        (&["run", "nope"], "evlab run", "no experiment"),
        (
            &["micro", "readahead", "--dir", under_file, "--sizes", "4K"],
            "evlab micro readahead",
            under_file,
        ),
    ];
    for (args, who, what) in cases {
        let o = evlab(args);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        let line = err
            .lines()
            .find(|l| l.contains("error:"))
            .unwrap_or_else(|| panic!("{args:?}: no error line: {err}"));
        let rest = line
            .strip_prefix(&format!("{who}: error: "))
            .unwrap_or_else(|| panic!("{args:?}: not `{who}: error: …`: {line}"));
        assert!(rest.contains(what), "{args:?}: {line}");
        // "evlab:" or "evlab WORD:" again inside (a path or `evlab run` in quotes is fine).
        let words: Vec<&str> = rest.split_whitespace().collect();
        let stutter = words.iter().enumerate().any(|(i, w)| {
            *w == "evlab:" || (*w == "evlab" && words.get(i + 1).is_some_and(|n| n.ends_with(':')))
        });
        assert!(!stutter, "{args:?}: a second prefix: {line}");
        assert!(rest.matches("(os error").count() <= 1, "{args:?}: {line}");
    }
    drop(busy);
    std::fs::remove_dir_all(&scratch).unwrap();
}
