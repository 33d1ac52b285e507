//! `evlab serve --cache-bytes / --cache-files`: accepted spellings, and a clear error otherwise.

use std::process::Command;

mod common;
use common::{serve, BIN};

#[test]
fn a_bad_cache_bytes_is_refused_with_the_value_and_the_form() {
    for bad in ["", "12x", "-5", "1.5M", "M", "99999999999G"] {
        let out = Command::new(BIN)
            .args(["serve", "--root", "/tmp", &format!("--cache-bytes={bad}")])
            .output()
            .unwrap();
        assert!(!out.status.success(), "--cache-bytes {bad:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--cache-bytes"), "{err}");
        assert!(
            err.contains(&format!("'{bad}' is not a valid byte count")),
            "{err}"
        );
    }
    let out = Command::new(BIN)
        .args(["serve", "--root", "/tmp", "--cache-files", "many"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a valid number of files"));
}

#[test]
fn small_cache_bounds_still_serve() {
    for bytes in ["0", "1K", "64M", "1g"] {
        let s = serve(
            &format!("cachebytes-{bytes}"),
            &["--cache-bytes", bytes, "--cache-files", "1"],
            |_| {},
        );
        for _ in 0..2 {
            for (path, body) in [("/one", "a"), ("/index.html", "<h1>hi</h1>\n")] {
                use std::io::{Read, Write};
                let mut c = std::net::TcpStream::connect(s.addr).unwrap();
                write!(
                    c,
                    "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
                )
                .unwrap();
                let mut out = String::new();
                c.read_to_string(&mut out).unwrap();
                assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{bytes}: {out}");
                assert!(out.ends_with(&format!("\r\n\r\n{body}")), "{bytes}: {out}");
            }
        }
    }
}
