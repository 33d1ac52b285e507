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
    // The same hosts as an Ansible-style INI inventory (with ssh's port given), checked alike.
    let parsed = evlab_lab::model::hosts::Hosts::load(&file).unwrap();
    let mut ini = String::new();
    for (group, role) in [
        ("server", evlab_lab::model::hosts::Role::Server),
        ("client", evlab_lab::model::hosts::Role::Client),
    ] {
        ini.push_str(&format!("[{group}]\n"));
        for h in parsed.hosts.iter().filter(|h| h.role == role) {
            ini.push_str(&format!(
                "{} ansible_host={} ansible_port=22 evlab_workdir={}{}\n",
                h.name,
                h.destination,
                h.workdir(),
                h.address
                    .as_ref()
                    .map_or(String::new(), |a| format!(" evlab_address={a}"))
            ));
        }
    }
    if let Some(c) = &parsed.ssh_config {
        ini.push_str(&format!("[all:vars]\nansible_ssh_common_args='-F {c}'\n"));
    }
    let inventory = hosts.dir.join("inventory.ini");
    std::fs::write(&inventory, &ini).unwrap();
    let o = evlab(&["hosts", inventory.to_str().unwrap(), "--json"]);
    assert!(
        o.status.success(),
        "{ini}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json_lines(&o);
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(
        v.iter().all(|h| !h.copied),
        "the same hosts, the same evlab: {v:?}"
    );
    // And the inventory scripts/netns-hosts.sh wrote beside its hosts file.
    let theirs = file.with_file_name("inventory.ini");
    let v = json_lines(&evlab(&["hosts", theirs.to_str().unwrap(), "--json"]));
    assert_eq!(v.len(), 2, "{v:?}");
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
    // A syntax error names its line and column and shows the line.
    std::fs::write(
        &f,
        "[[host]]\nname = \"a\"\ndestination = a.lan\nrole = \"server\"\n",
    )
    .unwrap();
    let o = evlab(&["hosts", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{}:3:15: ", f.display())) && err.contains("3 | destination = a.lan"),
        "{err}"
    );
    let o = evlab(&["hosts", dir.join("none.toml").to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The /24 scripts/netns-hosts.sh tries first for `tag`: 10.213.T.0/24, T from its checksum.
fn first_octet(tag: &str) -> u32 {
    use std::io::Write;
    let mut c = Command::new("cksum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(tag.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    let sum: u64 = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    10 + (sum % 240) as u32
}

#[test]
fn two_sets_whose_tags_share_a_checksum_get_their_own_addresses_and_both_answer() {
    if !usable() {
        return;
    }
    // Two tags of this process that the checksum sends to the same /24 (among 36 * 36 of
    // them two must: there are 240 /24s).
    let base = format!("x{:03}", std::process::id() % 1000);
    let chars: Vec<char> = ('a'..='z').chain('0'..='9').collect();
    let mut by_octet = std::collections::HashMap::new();
    let pair = chars
        .iter()
        .flat_map(|a| {
            let base = &base;
            chars.iter().map(move |b| format!("{base}{a}{b}"))
        })
        .find_map(|t| {
            by_octet
                .insert(first_octet(&t), t.clone())
                .map(|other| (other, t))
        })
        .unwrap();
    let (first, _) = NetnsHosts::up_tagged(&pair.0, 1);
    // Made while the first set holds that /24: before, its sshd "did not answer" (the
    // second bridge's route to it lost to the first's, whose h0 has another host key).
    let (second, _) = NetnsHosts::up_tagged(&pair.1, 1);
    let net = |h: &NetnsHosts| {
        let a = h.address(0);
        a[..a.rfind('.').unwrap()].to_string()
    };
    assert_ne!(net(&first), net(&second), "{pair:?}");
    for h in [&first, &second] {
        let o = Command::new("ssh")
            .arg("-F")
            .arg(h.dir.join("ssh_config"))
            .args(["h0", "hostname", "-I"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            h.address(0),
            "{pair:?}"
        );
    }
}
