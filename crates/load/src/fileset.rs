//! The SPECweb99 static file set, as `evlab fileset DIR --dirs N` makes it.
//!
//! Per directory `dirNNNNN/` (five digits, from `dir00000`), 4 classes × 9 files named
//! `class{c}_{i}`: class 0 holds 102..921 bytes (`(i+1) × 102.4`, truncated), class 1
//! 1..9 KiB, class 2 10..90 KiB, class 3 100..900 KiB: 5,119,484 bytes per directory. At the top,
//! `one` (the paper's one-byte file), `index.html`, and `.evlab-fileset` (a marker recording the
//! directory count, which the SPECweb99-like workload reads back). Sizes, names and the access
//! distributions are documented with their sources in `docs/workloads.md`.
//!
//! Content is a deterministic repeating pattern: servers cache files and send them by
//! `sendfile`, so the bytes do not matter, only that two runs serve the same ones.

use std::io;
use std::path::{Path, PathBuf};

/// Classes per directory.
pub const CLASSES: usize = 4;
/// Files per class.
pub const FILES_PER_CLASS: usize = 9;
/// Bytes in one directory (the 36 files).
pub const BYTES_PER_DIR: u64 = 5_119_484;
/// The largest directory count `create` accepts (about 95 GiB); beyond it a typo is likelier
/// than intent.
pub const MAX_DIRS: usize = 20_000;
/// The marker file at the top of a file set.
pub const MARKER: &str = ".evlab-fileset";

/// The size in bytes of file `i` (0..9) of class `c` (0..4): `(i+1) × 1024 × 10^c / 10`.
pub fn file_size(class: usize, i: usize) -> u64 {
    assert!(class < CLASSES && i < FILES_PER_CLASS);
    (i as u64 + 1) * 1024 * 10u64.pow(class as u32) / 10
}

/// `dir00042`.
pub fn dir_name(d: usize) -> String {
    format!("dir{d:05}")
}

/// `class1_3`.
pub fn file_name(class: usize, i: usize) -> String {
    format!("class{class}_{i}")
}

/// The request target of a file, relative to the file set's root: `/dir00042/class1_3`.
pub fn uri(d: usize, class: usize, i: usize) -> String {
    format!("/{}/{}", dir_name(d), file_name(class, i))
}

#[derive(Debug, thiserror::Error)]
pub enum FilesetError {
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: io::Error },
    #[error("{} exists and is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error(
        "{} is not empty and does not look like an evlab file set (it holds '{entry}'); \
         use --force to write the file set into it anyway",
        path.display()
    )]
    Foreign { path: PathBuf, entry: String },
    #[error("{} is not an evlab file set ({why}); make one with `evlab fileset {} --dirs N`", path.display(), path.display())]
    NotAFileset { path: PathBuf, why: String },
    #[error("--dirs {0}: must be between 1 and {MAX_DIRS}")]
    BadDirs(usize),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> FilesetError + '_ {
    move |error| FilesetError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// What `create` made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilesetSummary {
    pub dirs: usize,
    /// Files in the set (36 per directory, plus `one` and `index.html`).
    pub files: usize,
    /// Their total size in bytes.
    pub total_bytes: u64,
    /// Files left as they were because they already had the right size and content.
    pub unchanged: usize,
}

/// What `inspect` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilesetInfo {
    pub dirs: usize,
}

/// Total bytes of a file set of `dirs` directories (with `one` but without `index.html`).
pub fn total_bytes(dirs: usize) -> u64 {
    dirs as u64 * BYTES_PER_DIR + 1
}

/// Whether a top-level name is one `create` writes.
fn is_ours(name: &str) -> bool {
    if name == "one" || name == "index.html" || name == MARKER {
        return true;
    }
    // A Polymix-like set may share the root (`evlab fileset DIR --polymix N`).
    if name == "polymix" || name == crate::workload::polymix::MARKER {
        return true;
    }
    name.strip_prefix("dir")
        .is_some_and(|n| n.len() == 5 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The repeating pattern every file is cut from: 64-byte lines of printable text.
fn pattern(len: usize) -> Vec<u8> {
    const LINE: &[u8; 64] = b"evlab SPECweb99-like file set: deterministic filler content....\n";
    LINE.iter().copied().cycle().take(len).collect()
}

/// Writes `data` to `path` unless the file already holds exactly it; returns whether it wrote.
fn write_if_changed(path: &Path, data: &[u8]) -> Result<bool, FilesetError> {
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.is_file() && meta.len() == data.len() as u64 {
            if let Ok(old) = std::fs::read(path) {
                if old == data {
                    return Ok(false);
                }
            }
        }
    }
    std::fs::write(path, data).map_err(io_err(path))?;
    Ok(true)
}

/// Creates (or completes) the file set under `root`. Refuses a non-empty directory holding
/// anything `create` would not have written, unless `force`. Files already present with the
/// right content are left alone, so re-running is cheap.
pub fn create(root: &Path, dirs: usize, force: bool) -> Result<FilesetSummary, FilesetError> {
    if dirs == 0 || dirs > MAX_DIRS {
        return Err(FilesetError::BadDirs(dirs));
    }
    match std::fs::metadata(root) {
        Ok(m) if !m.is_dir() => return Err(FilesetError::NotADirectory(root.to_path_buf())),
        Ok(_) => {
            if !force {
                for entry in std::fs::read_dir(root).map_err(io_err(root))? {
                    let entry = entry.map_err(io_err(root))?;
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if !is_ours(&name) {
                        return Err(FilesetError::Foreign {
                            path: root.to_path_buf(),
                            entry: name,
                        });
                    }
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(root).map_err(io_err(root))?;
        }
        Err(e) => return Err(io_err(root)(e)),
    }

    let biggest = file_size(CLASSES - 1, FILES_PER_CLASS - 1) as usize;
    let buf = pattern(biggest);
    let mut summary = FilesetSummary {
        dirs,
        files: 0,
        total_bytes: 0,
        unchanged: 0,
    };
    let note = |wrote: bool, len: u64, s: &mut FilesetSummary| {
        s.files += 1;
        s.total_bytes += len;
        if !wrote {
            s.unchanged += 1;
        }
    };
    for d in 0..dirs {
        let dir = root.join(dir_name(d));
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        for c in 0..CLASSES {
            for i in 0..FILES_PER_CLASS {
                let len = file_size(c, i);
                let path = dir.join(file_name(c, i));
                let wrote = write_if_changed(&path, &buf[..len as usize])?;
                note(wrote, len, &mut summary);
            }
        }
    }
    let wrote = write_if_changed(&root.join("one"), b"1")?;
    note(wrote, 1, &mut summary);
    let index = format!(
        "<!DOCTYPE html>\n<html><head><title>evlab file set</title></head>\n<body><p>evlab \
         SPECweb99-like file set: {dirs} directories of {} files, {} bytes each; /one is the \
         one-byte file.</p></body></html>\n",
        CLASSES * FILES_PER_CLASS,
        BYTES_PER_DIR
    );
    let wrote = write_if_changed(&root.join("index.html"), index.as_bytes())?;
    note(wrote, index.len() as u64, &mut summary);
    // Written last: a marker present means the set it describes is complete.
    let marker = root.join(MARKER);
    std::fs::write(&marker, format!("evlab-fileset 1\ndirs={dirs}\n")).map_err(io_err(&marker))?;
    Ok(summary)
}

/// Reads a file set's directory count: from the marker when there is one, else by counting
/// `dir00000`, `dir00001`, … until one is missing (a set made by another tool).
pub fn inspect(root: &Path) -> Result<FilesetInfo, FilesetError> {
    let not = |why: String| FilesetError::NotAFileset {
        path: root.to_path_buf(),
        why,
    };
    match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(FilesetError::NotADirectory(root.to_path_buf())),
        Err(e) => return Err(io_err(root)(e)),
    }
    let marker = root.join(MARKER);
    match std::fs::read_to_string(&marker) {
        Ok(text) => {
            let dirs = text
                .lines()
                .find_map(|l| l.strip_prefix("dirs="))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|&d| d > 0)
                .ok_or_else(|| not(format!("{MARKER} has no valid dirs= line")))?;
            Ok(FilesetInfo { dirs })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let mut dirs = 0;
            while dirs <= MAX_DIRS && root.join(dir_name(dirs)).is_dir() {
                dirs += 1;
            }
            if dirs == 0 {
                return Err(not(format!("no {} directory", dir_name(0))));
            }
            Ok(FilesetInfo { dirs })
        }
        Err(e) => Err(io_err(&marker)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_specweb99() {
        let c0: Vec<u64> = (0..9).map(|i| file_size(0, i)).collect();
        assert_eq!(c0, [102, 204, 307, 409, 512, 614, 716, 819, 921]);
        assert_eq!(file_size(1, 0), 1024);
        assert_eq!(file_size(2, 8), 92_160);
        assert_eq!(file_size(3, 8), 921_600);
        let per_dir: u64 = (0..CLASSES)
            .flat_map(|c| (0..FILES_PER_CLASS).map(move |i| file_size(c, i)))
            .sum();
        assert_eq!(per_dir, BYTES_PER_DIR);
    }

    #[test]
    fn names() {
        assert_eq!(uri(42, 1, 3), "/dir00042/class1_3");
        assert!(is_ours("dir00000") && is_ours("one") && is_ours(MARKER));
        assert!(!is_ours("dir0") && !is_ours("etc"));
    }
}
