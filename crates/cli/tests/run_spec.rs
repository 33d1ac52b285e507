//! `evlab run` spec handling: every shipped experiment parses; bad files are refused with the
//! key and the line named, before anything is started.

use std::path::{Path, PathBuf};
use std::process::Command;

use evlab_lab::model::spec::Spec;

fn experiments_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments")
}

#[test]
fn every_shipped_experiment_parses() {
    let mut names = Vec::new();
    for e in std::fs::read_dir(experiments_dir()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let s = Spec::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert_eq!(
                Some(s.name.as_str()),
                p.file_stem().and_then(|s| s.to_str()),
                "name must match the file name"
            );
            names.push(s.name);
        }
    }
    names.sort();
    for want in [
        "fig1-one-byte",
        "fig2-specweb",
        "fig3-epoll-variants",
        "fig4-specweb-epoll-variants",
        "fig5-one-byte-idle",
        "fig6-specweb-idle",
        "fig7-accept-limit",
        "herd-capacity",
        "lse-deadconn",
        "peers",
        "quick",
        "table1-syscalls",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "missing experiments/{want}.toml"
        );
    }
}

/// Every shipped experiment says what it shows in one line of plain words for `--list`: no
/// paper's private names (KeepCopy, uselect, AutoRelease, deadconn_last) unexplained there.
#[test]
fn every_experiment_has_a_plain_summary() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let spec = Spec::parse(&std::fs::read_to_string(&p).unwrap(), "t").unwrap();
        let s = &spec.summary;
        assert!(
            !s.is_empty() && s.chars().count() <= 100 && !s.contains('\n'),
            "{}: summary {s:?}",
            p.display()
        );
        for jargon in [
            "KeepCopy",
            "uselect",
            "AutoRelease",
            "deadconn",
            "LSE",
            "LSP",
        ] {
            assert!(!s.contains(jargon), "{}: {jargon} in {s:?}", p.display());
        }
    }
}

#[test]
fn list_shows_builtin_experiments() {
    let out = Command::new(env!("CARGO_BIN_EXE_evlab"))
        .args(["run", "--list"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    for n in [
        "quick",
        "fig7-accept-limit",
        "table1-syscalls",
        "peers",
        "lse-deadconn",
    ] {
        assert!(s.contains(n), "{s}");
    }
}

/// Runs `evlab run` on a spec that must be refused, in a directory of its own (tests run in
/// parallel), which it removes and checks gone; returns what was said on stderr.
fn run_bad(body: &str) -> String {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("evlab-run-spec-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.toml");
    std::fs::write(&f, body).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_evlab"))
        .arg("run")
        .arg(&f)
        .arg("--out")
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(!out.status.success(), "a bad spec must be refused");
    assert!(
        !dir.join("out").exists(),
        "nothing may be started or written for a bad spec"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!dir.exists(), "the scratch directory is left behind");
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn unknown_key_is_named_with_its_line() {
    let e = run_bad("name = \"x\"\nmechanisms = [\"poll\"]\nrates = [100]\nidel = [0]\n");
    assert!(e.contains(":4:") && e.contains("`idel`"), "{e}");
}

#[test]
fn bad_value_is_named_with_its_line() {
    let e = run_bad("name = \"x\"\nmechanisms = [\"poll\", \"kqueue\"]\nrates = [100]\n");
    assert!(
        e.contains(":2:") && e.contains("`mechanisms`") && e.contains("kqueue"),
        "{e}"
    );
    let e =
        run_bad("name = \"x\"\nmechanisms = [\"poll\"]\nrates = [100]\nduration_s = \"long\"\n");
    assert!(e.contains(":4:") && e.contains("`duration_s`"), "{e}");
    let e =
        run_bad("name = \"x\"\nmechanisms = [\"poll\"]\nrates = [100]\nworkload = \"two-byte\"\n");
    assert!(e.contains(":4:") && e.contains("`workload`"), "{e}");
}

#[test]
fn unknown_experiment_lists_known_ones() {
    let out = Command::new(env!("CARGO_BIN_EXE_evlab"))
        .args(["run", "no-such-experiment"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("no-such-experiment") && e.contains("quick"),
        "{e}"
    );
}

/// The capacity search reads a SPECweb99-like session as the requests it makes on average: the
/// lab's figure is the generator's own mean.
#[test]
fn the_labs_specweb99_session_mean_is_the_generators() {
    assert_eq!(
        evlab_lab::model::spec::SPECWEB99_CALLS,
        evlab_load::workload::specweb::CallsPerConn::SPECWEB99.mean()
    );
}
