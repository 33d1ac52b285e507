//! `evlab hosts` against real hosts: network namespaces made by scripts/netns-hosts.sh, each
//! with its own sshd, reached over the system's OpenSSH. Needs root (namespaces) and sshd;
//! skips with the reason otherwise, and fails where EVLAB_REQUIRE asks for `netns`.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::NetnsHosts;
use evlab_lab::model::hosts::HostCheck;

fn evlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evlab"))
        .args(args)
        .output()
        .unwrap()
}

fn usable() -> bool {
    NetnsHosts::usable("hosts")
}

/// `evlab hosts --json`: one host's check a line, each read as the lab's type it is written as.
fn json_lines(o: &Output) -> Vec<HostCheck> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn hosts_get_this_evlab_by_sha256_and_their_clocks_are_read() {
    if !usable() {
        return;
    }
    let (hosts, file) = NetnsHosts::up('t', 2);
    let f = file.to_str().unwrap();
    // First contact: no evlab there, so it is copied to each host.
    let o = evlab(&["hosts", f, "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json_lines(&o);
    assert_eq!(v.len(), 2);
    for h in &v {
        assert!(h.copied, "{h:?}");
        assert_eq!(h.sha256_found, "", "{h:?}");
        assert!(h.evlab_version.starts_with("evlab "), "{h:?}");
        assert!(h.kernel.starts_with("Linux"), "{h:?}");
        // The namespaces share this machine's clock: the estimate must hold 0 within its
        // bound (and the bound of a local exchange is well under a second).
        let (off, bound) = (h.clock_offset_ms, h.clock_bound_ms);
        assert!(off.abs() <= bound + 0.01 && bound < 1000.0, "{h:?}");
    }
    // Again: the same sha256, nothing copied.
    let v = json_lines(&evlab(&["hosts", f, "--json"]));
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v.iter().all(|h| !h.copied), "{v:?}");
    // Another build on h1: found by its sha256, refused with --no-copy, replaced without.
    let other = hosts.dir.join("h1/work/evlab");
    std::fs::write(&other, b"#!/bin/sh\necho evlab 0.0.0-other\n").unwrap();
    let o = evlab(&["hosts", f, "--no-copy"]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("copying was not allowed"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("h0 ") && l.contains("same sha256")),
        "{out}"
    );
    let v = json_lines(&evlab(&["hosts", f, "--json"]));
    assert!(!v[0].copied, "{v:?}");
    assert!(v[1].copied, "{v:?}");
    assert_eq!(v[1].evlab_version, v[0].evlab_version);
    // A host ssh cannot reach is an error naming it, and the others are still checked.
    let text = std::fs::read_to_string(&file).unwrap()
        + "\n[[host]]\nname = \"gone\"\ndestination = \"h9\"\nrole = \"client\"\n";
    let bad = hosts.dir.join("bad.toml");
    std::fs::write(&bad, text).unwrap();
    let o = evlab(&["hosts", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("gone") && out.contains("ssh could not reach it"),
        "{out}"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 of 3 host(s) failed"));
    // No control socket directory is left behind: none of a process that has ended (other
    // tests' evlab runs, still running, have theirs).
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .strip_prefix("evlab-ssh-")
                .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
    drop(hosts);
}

#[test]
fn a_bad_hosts_file_is_refused_with_the_reason() {
    let dir = std::env::temp_dir().join(format!("evlab-hostsfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("h.toml");
    std::fs::write(
        &f,
        "[[host]]\nname = \"a\"\ndestination = \"-oProxyCommand=sh\"\nrole = \"server\"\n",
    )
    .unwrap();
    let o = evlab(&["hosts", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("do not start with '-'"), "{err}");
    let o = evlab(&["hosts", dir.join("none.toml").to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read"));
    std::fs::remove_dir_all(&dir).unwrap();
}
