//! URI lists: comments and blank lines skipped, round-robin, errors with line numbers.

use std::path::{Path, PathBuf};

use evlab_load::workload::urilist::UriList;
use evlab_load::workload::{Workload, WorkloadError};

fn write(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("evlab-urilist-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn reads_uris_and_takes_them_round_robin() {
    let path = write("good", "# the list\n/one\n\n  /a/b.html  \n# more\n/c\n");
    let list = UriList::from_file(&path, 2);
    std::fs::remove_file(&path).unwrap();
    let mut list = list.unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(list.uris().collect::<Vec<_>>(), ["/one", "/a/b.html", "/c"]);
    let mut out = Vec::new();
    let mut got = Vec::new();
    for _ in 0..3 {
        out.clear();
        list.next_session(&mut out);
        assert_eq!(out.len(), 2);
        got.extend(out.iter().map(|c| c.uri.to_string()));
    }
    assert_eq!(got, ["/one", "/a/b.html", "/c", "/one", "/a/b.html", "/c"]);
    assert!(list.describe().contains("3 URIs"));
}

#[test]
fn bad_lines_and_files_are_named() {
    let path = write("bad", "/ok\n\nnot-a-path\n");
    let e = UriList::from_file(&path, 1).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    match &e {
        WorkloadError::Parse { line, .. } => assert_eq!(*line, 3),
        other => panic!("{other:?}"),
    }
    assert!(
        e.to_string()
            .contains(":3: URI 'not-a-path' must start with '/'"),
        "{e}"
    );

    let path = write("empty", "# nothing\n\n");
    let e = UriList::from_file(&path, 1).unwrap_err().to_string();
    std::fs::remove_file(&path).unwrap();
    assert!(e.contains("no URIs"), "{e}");

    let e = UriList::from_file(Path::new("/nonexistent/uris"), 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot read /nonexistent/uris"), "{e}");
}
