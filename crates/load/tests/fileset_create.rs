//! `evlab fileset`: exact sizes and names, the marker, refusal of foreign directories, re-runs.

use std::path::{Path, PathBuf};

use evlab_load::fileset::{self, FilesetError, BYTES_PER_DIR, CLASSES, FILES_PER_CLASS};

/// A directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("evlab-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn size(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().len()
}

#[test]
fn creates_exact_specweb99_sizes() {
    let t = TempDir::new("fileset-sizes");
    let s = fileset::create(&t.0, 2, false).unwrap();
    assert_eq!(s.dirs, 2);
    assert_eq!(s.files, 2 * 36 + 2);
    assert_eq!(s.unchanged, 0);

    let expected: [[u64; 9]; 4] = [
        [102, 204, 307, 409, 512, 614, 716, 819, 921],
        [1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 9216],
        [
            10240, 20480, 30720, 40960, 51200, 61440, 71680, 81920, 92160,
        ],
        [
            102400, 204800, 307200, 409600, 512000, 614400, 716800, 819200, 921600,
        ],
    ];
    for d in 0..2 {
        let dir = t.0.join(format!("dir{d:05}"));
        let mut total = 0;
        for (c, sizes) in expected.iter().enumerate() {
            for (i, &want) in sizes.iter().enumerate() {
                let p = dir.join(format!("class{c}_{i}"));
                assert_eq!(size(&p), want, "{}", p.display());
                total += want;
            }
        }
        assert_eq!(total, BYTES_PER_DIR);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            CLASSES * FILES_PER_CLASS
        );
    }
    assert!(!t.0.join("dir00002").exists());
    assert_eq!(std::fs::read(t.0.join("one")).unwrap().len(), 1);
    let index = std::fs::read_to_string(t.0.join("index.html")).unwrap();
    assert!(index.contains("2 directories"));
    assert_eq!(s.total_bytes, 2 * BYTES_PER_DIR + 1 + index.len() as u64);
    // Deterministic content: the same bytes in every directory.
    assert_eq!(
        std::fs::read(t.0.join("dir00000/class2_3")).unwrap(),
        std::fs::read(t.0.join("dir00001/class2_3")).unwrap()
    );
    assert_eq!(fileset::inspect(&t.0).unwrap().dirs, 2);
}

#[test]
fn reruns_leave_files_alone_and_grow_the_set() {
    let t = TempDir::new("fileset-rerun");
    fileset::create(&t.0, 1, false).unwrap();
    let again = fileset::create(&t.0, 1, false).unwrap();
    assert_eq!(again.unchanged, again.files);
    // A damaged file is rewritten.
    std::fs::write(t.0.join("dir00000/class0_0"), b"x").unwrap();
    let fixed = fileset::create(&t.0, 1, false).unwrap();
    assert_eq!(fixed.unchanged, fixed.files - 1);
    assert_eq!(size(&t.0.join("dir00000/class0_0")), 102);
    let grown = fileset::create(&t.0, 2, false).unwrap();
    assert_eq!(grown.dirs, 2);
    assert_eq!(fileset::inspect(&t.0).unwrap().dirs, 2);
    // The marker is authoritative: a smaller set made over a larger one reads back as asked.
    fileset::create(&t.0, 1, false).unwrap();
    assert_eq!(fileset::inspect(&t.0).unwrap().dirs, 1);
}

#[test]
fn refuses_foreign_directories_unless_forced() {
    let t = TempDir::new("fileset-foreign");
    std::fs::create_dir_all(&t.0).unwrap();
    std::fs::write(t.0.join("notes.txt"), b"mine").unwrap();
    let e = fileset::create(&t.0, 1, false).unwrap_err();
    assert!(matches!(e, FilesetError::Foreign { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("notes.txt") && msg.contains("--force"),
        "{msg}"
    );
    fileset::create(&t.0, 1, true).unwrap();
    assert_eq!(std::fs::read(t.0.join("notes.txt")).unwrap(), b"mine");
    assert_eq!(size(&t.0.join("dir00000/class3_8")), 921_600);
}

#[test]
fn bad_arguments_and_non_filesets() {
    let t = TempDir::new("fileset-bad");
    assert!(matches!(
        fileset::create(&t.0, 0, false),
        Err(FilesetError::BadDirs(0))
    ));
    assert!(matches!(
        fileset::create(&t.0, fileset::MAX_DIRS + 1, false),
        Err(FilesetError::BadDirs(_))
    ));
    std::fs::create_dir_all(&t.0).unwrap();
    let file = t.0.join("plain");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(
        fileset::create(&file, 1, true),
        Err(FilesetError::NotADirectory(_))
    ));
    let e = fileset::inspect(&t.0).unwrap_err().to_string();
    assert!(e.contains("not an evlab file set"), "{e}");
    // A set made by another tool (no marker) is counted by its directories.
    std::fs::create_dir_all(t.0.join("dir00000")).unwrap();
    std::fs::create_dir_all(t.0.join("dir00001")).unwrap();
    std::fs::create_dir_all(t.0.join("dir00003")).unwrap();
    assert_eq!(fileset::inspect(&t.0).unwrap().dirs, 2);
}
