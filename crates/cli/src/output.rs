//! Output files checked before the work that fills them: a run of minutes must not end by finding
//! that its `--json` cannot be written. `-` means standard output.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, Write};
use std::path::{Path, PathBuf};

/// Where one output goes, opened (and so checked) up front.
pub enum Sink {
    Stdout,
    File {
        flag: &'static str,
        path: PathBuf,
        file: File,
        /// The file did not exist before: removed again if nothing is written to it.
        created: bool,
        written: bool,
    },
}

/// Why `path` cannot be written, in words: the io error names no path, so say which and why.
fn why(path: &Path, e: &io::Error) -> String {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match e.kind() {
        io::ErrorKind::NotFound if !parent.exists() => {
            format!("the directory {} does not exist", parent.display())
        }
        io::ErrorKind::NotADirectory => format!("{} is not a directory", parent.display()),
        _ => format!("cannot write there: {e}"),
    }
}

impl Sink {
    /// Opens `path` for `flag` (named in errors), `-` meaning standard output. An existing file
    /// keeps its contents until [`Sink::write`] replaces them.
    pub fn open(flag: &'static str, path: &Path) -> anyhow::Result<Sink> {
        if path.as_os_str() == "-" {
            return Ok(Sink::Stdout);
        }
        if path.is_dir() {
            anyhow::bail!("{flag} {}: is a directory, not a file", path.display());
        }
        let existed = path.symlink_metadata().is_ok();
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| anyhow::anyhow!("{flag} {}: {}", path.display(), why(path, &e)))?;
        Ok(Sink::File {
            flag,
            path: path.to_path_buf(),
            file,
            created: !existed,
            written: false,
        })
    }

    /// Replaces what the output holds with `bytes`.
    pub fn write(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        match self {
            Sink::Stdout => {
                let mut o = io::stdout().lock();
                o.write_all(bytes)
                    .and_then(|()| o.flush())
                    .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))
            }
            Sink::File {
                flag,
                path,
                file,
                written,
                ..
            } => {
                *written = true;
                file.set_len(0)
                    .and_then(|()| file.rewind())
                    .and_then(|()| file.write_all(bytes))
                    .and_then(|()| file.flush())
                    .map_err(|e| anyhow::anyhow!("{flag} {}: cannot write: {e}", path.display()))
            }
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        if let Sink::File {
            path,
            created: true,
            written: false,
            ..
        } = self
        {
            // Opened for the check and never filled: leave no empty file behind.
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Checks that `dir` (for `flag`) is, or can be made, a directory this process can write in:
/// creates it and a probe file in it, and removes the probe.
pub fn writable_dir(flag: &str, dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!("{flag} {}: not a directory", dir.display());
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        anyhow::anyhow!("{flag} {}: cannot create the directory: {e}", dir.display())
    })?;
    let probe = dir.join(format!(".evlab-write-check-{}", std::process::id()));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| anyhow::anyhow!("{flag} {}: cannot write in it: {e}", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("evlab-output-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_missing_directory_is_named() {
        let e = Sink::open("--json", Path::new("/nonexistent/x.json"))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            "--json /nonexistent/x.json: the directory /nonexistent does not exist"
        );
    }

    #[test]
    fn an_unwritten_new_file_is_removed_and_an_old_one_kept_until_written() {
        let d = scratch("sink");
        let new = d.join("new.json");
        drop(Sink::open("--json", &new).unwrap());
        assert!(!new.exists(), "the check left an empty file behind");
        let old = d.join("old.json");
        std::fs::write(&old, "a longer old content").unwrap();
        drop(Sink::open("--json", &old).unwrap());
        assert_eq!(
            std::fs::read_to_string(&old).unwrap(),
            "a longer old content"
        );
        let mut s = Sink::open("--json", &old).unwrap();
        s.write(b"new").unwrap();
        drop(s);
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "new");
        assert!(
            Sink::open("--json", &d).is_err(),
            "a directory is not a file"
        );
        assert!(matches!(
            Sink::open("--json", Path::new("-")).unwrap(),
            Sink::Stdout
        ));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn writable_dir_creates_and_refuses() {
        let d = scratch("dir");
        writable_dir("--out", &d.join("a/b")).unwrap();
        assert!(d.join("a/b").is_dir());
        assert_eq!(std::fs::read_dir(d.join("a/b")).unwrap().count(), 0);
        std::fs::write(d.join("f"), "x").unwrap();
        let e = writable_dir("--out", &d.join("f")).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        let e = writable_dir("--out", &d.join("f/sub"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot create the directory"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
