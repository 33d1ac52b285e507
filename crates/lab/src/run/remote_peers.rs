//! Peer servers (nginx, lighttpd, HAProxy) on the server host of a run across hosts: found
//! there (their programs and lighttpd's event handlers, beside the mechanisms that host's
//! evlab supports), configured as on this machine (`run::peers`, listening on the server's
//! address), the config written there over ssh and recorded with the point's commands.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;

use crate::run::hosts::Ssh;
use crate::run::peers::{self, PeerConf};
use evlab_reason::model::hosts::Host;
use evlab_reason::model::spec::{Series, ServerKind, Spec};
use evlab_reason::LabError;

/// The peers' programs the server host has, by name (their paths there), its lighttpd's event
/// handlers, and the mechanisms its evlab supports.
#[derive(Default)]
pub(crate) struct PeersThere {
    programs: BTreeMap<String, String>,
    /// The user the peers run as there (the ssh login's).
    user: Option<String>,
    /// The descriptor limit a process started there gets (after `ulimit -n 65536`, where
    /// that host allows it).
    pub nofile: usize,
    pub handlers: Vec<String>,
    pub support: BTreeMap<String, Result<(), String>>,
}

impl PeersThere {
    /// Whether `prog` is installed on the server host.
    pub(crate) fn installed(&self, prog: &str) -> bool {
        self.programs.contains_key(prog)
    }
}

const PEERS: [&str; 3] = ["nginx", "lighttpd", "haproxy"];

/// What the server host offers `spec`: its evlab's mechanisms (`evlab` is its path there) and,
/// when the experiment has peer series, the peers' programs (on its PATH or in the sbin
/// directories) and lighttpd's handlers (`lighttpd -V`).
pub(crate) fn find(
    ssh: &Ssh,
    host: &Host,
    evlab: &str,
    spec: &Spec,
) -> Result<PeersThere, LabError> {
    let mut there = PeersThere {
        support: crate::run::plan::parse_mechanism_support(&ssh.ok(
            host,
            &format!("{evlab} serve --list-mechanisms"),
            &[],
        )?),
        ..PeersThere::default()
    };
    let all = spec.series_list(&|_| true, &["poll".to_string()]);
    if all.iter().all(|s| s.kind == ServerKind::Evlab) {
        return Ok(there);
    }
    let who = ssh.ok(
        host,
        "id -un; sh -c 'ulimit -n 65536 2>/dev/null; ulimit -Hn'",
        &[],
    )?;
    let mut lines = who.lines().map(str::trim);
    there.user = lines.next().filter(|u| !u.is_empty()).map(String::from);
    there.nofile = lines
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX);
    let script = PEERS
        .iter()
        .map(|p| {
            format!(
                "x=$(command -v {p} 2>/dev/null || for d in /usr/sbin /usr/local/sbin /sbin; do \
                 [ -x $d/{p} ] && echo $d/{p} && break; done); echo \"{p}=$x\""
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    for line in ssh.ok(host, &script, &[])?.lines() {
        if let Some((name, path)) = line.trim().split_once('=') {
            if !path.is_empty() {
                there.programs.insert(name.into(), path.into());
            }
        }
    }
    if let Some(l) = there
        .programs
        .get("lighttpd")
        .filter(|_| crate::run::plan::needs_lighttpd(spec))
    {
        let v = ssh.ok(host, &format!("{l} -V 2>&1"), &[])?;
        there.handlers = peers::parse_lighttpd_handlers(&v);
    }
    Ok(there)
}

/// A port on the server host to start a peer on: below its ephemeral range (so that no
/// client connection holds it), not listened on, drawn from `seed`.
pub(crate) fn free_port(ssh: &Ssh, host: &Host, seed: u64) -> Result<u16, LabError> {
    let text = ssh.ok(
        host,
        "cat /proc/sys/net/ipv4/ip_local_port_range; cat /proc/net/tcp /proc/net/tcp6 \
         2>/dev/null | awk 'NR > 1 && $4 == \"0A\" { split($2, a, \":\"); print a[2] }'",
        &[],
    )?;
    let mut lines = text.lines();
    let low: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    let taken: BTreeSet<u16> = lines
        .filter_map(|l| u16::from_str_radix(l.trim(), 16).ok())
        .collect();
    let (from, to) = (10_000u16, low.max(10_001));
    let span = u64::from(to - from);
    (0..span)
        .map(|i| from + ((seed.wrapping_mul(2_654_435_761) + i) % span) as u16)
        .find(|p| !taken.contains(p))
        .ok_or_else(|| LabError::Point(format!("host {}: no free port below {low}", host.name)))
}

/// Series `s`'s peer config in `dir` on the server host: serving `docroot` (or, as a proxy,
/// in front of `origin`) on `listen`.
pub(crate) fn conf(
    s: &Series,
    there: &PeersThere,
    dir: &Path,
    docroot: &Path,
    listen: SocketAddr,
    origin: Option<SocketAddr>,
) -> Result<PeerConf, LabError> {
    let prog =
        |name: &str| {
            there.programs.get(name).cloned().ok_or_else(|| {
                LabError::Point(format!("{name} is not installed on the server host"))
            })
        };
    Ok(match (s.kind, origin) {
        (ServerKind::Nginx, Some(o)) => peers::nginx_proxy_conf(dir, o, listen, &prog("nginx")?),
        (ServerKind::Nginx, None) => {
            peers::nginx_conf(dir, docroot, listen, &prog("nginx")?, there.user.as_deref())
        }
        (ServerKind::Lighttpd, None) => {
            peers::lighttpd_conf(dir, docroot, listen, &s.mechanism, &prog("lighttpd")?)
        }
        (ServerKind::Haproxy, Some(o)) => {
            peers::haproxy_conf(dir, o, listen, peers::HAPROXY_MAXCONN, &prog("haproxy")?)
        }
        (kind, _) => {
            return Err(LabError::Point(format!(
                "{kind:?} cannot be started as this series' server on the server host"
            )))
        }
    })
}

/// Writes `conf` on `host` (its directory made first); returns the commands that do so by
/// hand.
pub(crate) fn write(ssh: &Ssh, host: &Host, conf: &PeerConf) -> Result<String, LabError> {
    let dir = conf
        .file
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|| ".".into());
    let file = conf.file.display().to_string();
    let line = evlab_reason::model::text::shell_line(std::slice::from_ref(&dir));
    let f = evlab_reason::model::text::shell_line(&[file]);
    ssh.ok(
        host,
        &format!("mkdir -p {line} && cat > {f}"),
        conf.text.as_bytes(),
    )?;
    Ok(format!(
        "ssh {} -- \"mkdir -p {line} && cat > {f}\" <<'EOF'   # on host {}\n{}EOF",
        host.destination, host.name, conf.text
    ))
}
