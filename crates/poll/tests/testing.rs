//! `evlab_poll::testing::require`, as the tests that use it see it: a test whose requirement is
//! missing skips with the reason, or fails naming it where EVLAB_REQUIRE asks for it, and
//! either way leaves a line in EVLAB_SKIP_LOG. The test below runs this binary again, with one
//! environment or another, to run the fixture that asks for something no machine has.

use std::path::PathBuf;
use std::process::Command;

/// The fixture: does nothing unless run as the child of the test below.
#[test]
fn child_asks_for_unobtainium() {
    if std::env::var_os("EVLAB_TESTING_CHILD").is_none() {
        return;
    }
    if evlab_poll::testing::require("unobtainium", false, "no machine has it") {
        panic!("unobtainium is never present");
    }
    println!("the test went on without it");
}

fn child(require: Option<&str>, log: &PathBuf) -> (bool, String, String) {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "child_asks_for_unobtainium",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("EVLAB_TESTING_CHILD", "1")
    .env("EVLAB_SKIP_LOG", log)
    .env_remove("EVLAB_REQUIRE");
    if let Some(r) = require {
        c.env("EVLAB_REQUIRE", r);
    }
    let o = c.output().unwrap();
    let logged = std::fs::read_to_string(log).unwrap_or_default();
    let _ = std::fs::remove_file(log);
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), out, logged)
}

#[test]
fn missing_skips_with_the_reason_or_fails_where_required() {
    let log = std::env::temp_dir().join(format!("evlab-skip-log-{}", std::process::id()));
    let line = |kind: &str| {
        format!("{kind}\tunobtainium\ttesting child_asks_for_unobtainium\tno machine has it\n")
    };
    for require in [None, Some(""), Some("root"), Some("root,io_uring")] {
        let (ok, out, logged) = child(require, &log);
        assert!(ok, "EVLAB_REQUIRE={require:?}: {out}");
        assert!(
            out.contains("SKIPPED(unobtainium): no machine has it"),
            "{out}"
        );
        assert!(out.contains("the test went on without it"), "{out}");
        assert_eq!(logged, line("skipped"), "EVLAB_REQUIRE={require:?}");
    }
    for require in [
        "all",
        "unobtainium",
        "root,unobtainium",
        "io_uring unobtainium",
    ] {
        let (ok, out, logged) = child(Some(require), &log);
        assert!(!ok, "EVLAB_REQUIRE={require}: {out}");
        assert!(
            out.contains("missing unobtainium, which EVLAB_REQUIRE asks for: no machine has it"),
            "{out}"
        );
        assert!(!out.contains("SKIPPED"), "{out}");
        assert_eq!(logged, line("missing"), "EVLAB_REQUIRE={require}");
    }
}
