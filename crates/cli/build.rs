//! Records the build in the binary: the git commit it was built from, whether the tree had
//! changes the commit does not hold, and the compiler. `evlab --version` prints it, and every
//! result records that line, so that `evlab compare` can tell runs of different builds apart.

use std::path::Path;
use std::process::Command;

fn output(cmd: &mut Command) -> Option<String> {
    let o = cmd.output().ok().filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let git = |args: &[&str]| output(Command::new("git").arg("-C").arg(&root).args(args));
    let commit = git(&["rev-parse", "--short=12", "HEAD"]);
    // Tracked files only: a build directory or a results directory does not make a tree dirty.
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc =
        output(Command::new(rustc).arg("--version")).unwrap_or_else(|| "rustc unknown".into());
    let tree = match (commit, dirty) {
        (Some(c), Some(true)) => format!("commit {c}, dirty"),
        (Some(c), _) => format!("commit {c}, clean"),
        (None, _) => "commit unknown (not built from a git checkout)".into(),
    };
    println!(
        "cargo:rustc-env=EVLAB_BUILD={} ({tree}; {rustc})",
        env!("CARGO_PKG_VERSION")
    );
    // Again when the commit moves, the index changes, or any source does (the dirty flag). The
    // git files are asked of git, so that a worktree's own are watched; a path that does not
    // exist would make cargo run this again on every build.
    let mut watch: Vec<std::path::PathBuf> = ["crates", "Cargo.toml", "Cargo.lock"]
        .iter()
        .map(|p| root.join(p))
        .collect();
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for name in ["HEAD", "index", "packed-refs"]
        .into_iter()
        .chain(branch.as_deref())
    {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", name]) {
            watch.push(p.into());
        }
    }
    for p in watch.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}
