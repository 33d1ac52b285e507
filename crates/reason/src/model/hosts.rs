//! A hosts file (`evlab hosts FILE`, `evlab run --hosts FILE`): the machines a run uses and
//! their roles. A host is an OpenSSH destination, so the user's ~/.ssh/config (keys, jump
//! hosts, ports) applies as it is; `ssh_config` names another config file instead (the test
//! hosts of scripts/netns-hosts.sh have one of their own).
//!
//! ```toml
//! ssh_config = "/tmp/evlab-netns/ssh_config"   # optional: ssh -F FILE
//!
//! [[host]]
//! name = "h0"                 # how reports name it
//! destination = "h0"          # what ssh is given: an alias, user@host or host
//! role = "server"             # server, client or origin
//! workdir = "/tmp/w"          # optional: where evlab keeps its binary there (~/.cache/evlab)
//! address = "10.213.100.10"   # optional: the address the other hosts reach it at
//! port = 2222                 # optional: ssh -p
//! ```
//!
//! An Ansible-style INI inventory is read as the same (`model::inventory`).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::model::spec::Spec;
use crate::LabError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Server,
    Client,
    Origin,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    pub name: String,
    pub destination: String,
    pub role: Role,
    #[serde(default)]
    pub workdir: Option<String>,
    #[serde(default)]
    pub address: Option<String>,
    /// The ssh port (`ssh -p`), where not the destination's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

impl Host {
    /// Where evlab keeps its binary on the host (a path the remote shell expands).
    pub fn workdir(&self) -> &str {
        self.workdir.as_deref().unwrap_or("~/.cache/evlab")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hosts {
    #[serde(default)]
    pub ssh_config: Option<String>,
    #[serde(rename = "host", default)]
    pub hosts: Vec<Host>,
}

/// A name or destination that a shell or ssh could read as something else.
fn plain(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@:[]".contains(c))
}

/// A TOML error as a compiler gives one: `FILE:LINE:COLUMN: what`, then the offending line
/// with a caret under the column (1-based, in characters); `FILE: what` where toml gives no
/// place.
fn toml_error(text: &str, origin: &str, e: &toml::de::Error) -> String {
    let what = e
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let Some(span) = e.span() else {
        return format!("{origin}: {what}");
    };
    let at = (0..=span.start.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[..at].matches('\n').count() + 1;
    let column = text[line_start..at].chars().count() + 1;
    let source = text[line_start..].lines().next().unwrap_or("");
    let gutter = line.to_string().len();
    format!(
        "{origin}:{line}:{column}: {what}\n{line} | {source}\n{} | {}^",
        " ".repeat(gutter),
        " ".repeat(column - 1)
    )
}

impl Hosts {
    pub fn parse(text: &str, origin: &str) -> Result<Hosts, LabError> {
        let bad = |msg: String| LabError::Io(format!("{origin}: {msg}"));
        let h: Hosts = if crate::model::inventory::looks_like_inventory(text) {
            let inv = crate::model::inventory::parse(text, origin)?;
            let role = |g: &str| match g {
                "server" => Role::Server,
                "origin" => Role::Origin,
                _ => Role::Client,
            };
            Hosts {
                ssh_config: inv.ssh_config,
                hosts: inv
                    .hosts
                    .into_iter()
                    .map(|e| Host {
                        role: role(e.group),
                        name: e.name,
                        destination: e.destination,
                        workdir: e.workdir,
                        address: e.address,
                        port: e.port,
                    })
                    .collect(),
            }
        } else {
            toml::from_str(text).map_err(|e| LabError::Io(toml_error(text, origin, &e)))?
        };
        if h.hosts.is_empty() {
            return Err(bad("no [[host]]: name at least a server".into()));
        }
        for x in &h.hosts {
            if !plain(&x.name) || !plain(&x.destination) {
                return Err(bad(format!(
                    "host `{}` (destination `{}`): names and destinations are letters, digits \
                     and -_.@:[] only, and do not start with '-'",
                    x.name, x.destination
                )));
            }
            if h.hosts.iter().filter(|y| y.name == x.name).count() > 1 {
                return Err(bad(format!("host name `{}` is given twice", x.name)));
            }
            if let Some(w) = &x.workdir {
                if w.is_empty() || w.contains(['\'', '"', '`', '$', ';', '\n', ' ']) {
                    return Err(bad(format!(
                        "host `{}`: workdir `{w}` must be a plain path",
                        x.name
                    )));
                }
            }
        }
        if h.hosts.iter().filter(|x| x.role == Role::Server).count() != 1 {
            return Err(bad("name exactly one host with role = \"server\"".into()));
        }
        Ok(h)
    }

    pub fn load(path: &Path) -> Result<Hosts, LabError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| LabError::Io(format!("cannot read {}: {e}", path.display())))?;
        Hosts::parse(&text, &path.display().to_string())
    }

    pub fn server(&self) -> &Host {
        self.hosts
            .iter()
            .find(|x| x.role == Role::Server)
            .expect("parse checked there is one server")
    }

    pub fn clients(&self) -> impl Iterator<Item = &Host> {
        self.hosts.iter().filter(|x| x.role == Role::Client)
    }

    pub fn origins(&self) -> impl Iterator<Item = &Host> {
        self.hosts.iter().filter(|x| x.role == Role::Origin)
    }
}

/// What `evlab hosts` (and a run, before its first point) found on a host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostCheck {
    pub name: String,
    pub destination: String,
    /// Its role in the hosts file (absent in checks written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// The address the other hosts reach it at, when the hosts file gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// `uname -sr` there.
    pub kernel: String,
    /// The sha256 of the evlab binary found in the workdir before the check (empty: none).
    pub sha256_found: String,
    /// Whether this evlab was copied there (the one found differed, or there was none).
    pub copied: bool,
    /// `evlab --version` there, after any copy.
    pub evlab_version: String,
    /// The host's clock minus this one's, estimated over ssh (milliseconds), and the bound
    /// on its error (half the round trip of the best of several exchanges).
    pub clock_offset_ms: f64,
    pub clock_bound_ms: f64,
    /// Its `net.ipv4.tcp_tw_reuse` and how many ephemeral ports its `ip_local_port_range`
    /// gives (absent where they could not be read, or in checks written before they were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_tw_reuse: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_ports: Option<u64>,
}

impl HostCheck {
    /// New connections a second this host can make to one server address, sustained, when it
    /// cannot take a port another connection holds in TIME_WAIT (60 s): its ephemeral ports
    /// over 60 s. None where it can (`tcp_tw_reuse` = 1) or where that is not known.
    pub fn sustained_connect_rate(&self) -> Option<f64> {
        match (self.tcp_tw_reuse, self.ephemeral_ports) {
            (Some(r), Some(p)) if r != 1 => Some(p as f64 / 60.0),
            _ => None,
        }
    }
}

/// The ephemeral ports of an `ip_local_port_range` ("32768\t60999").
pub fn port_range_size(text: &str) -> Option<u64> {
    let mut f = text.split_whitespace().map(str::parse::<u64>);
    let (lo, hi) = (f.next()?.ok()?, f.next()?.ok()?);
    (hi >= lo).then(|| hi - lo + 1)
}

/// One client host's part of a point run across hosts, from its own report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PointHost {
    pub host: String,
    /// The rate it was asked for (connections/s): the point's rate over the client hosts.
    pub offered_rate: f64,
    pub replies: u64,
    /// Its replies over its own duration.
    pub reply_rate: f64,
    /// From its own histogram.
    pub p99_ms: f64,
    /// How late it started after the agreed instant, by this machine's clock (its report's
    /// start corrected by the host's clock offset), ms.
    pub late_ms: f64,
    /// The host's clock offset used, and its bound, ms.
    pub clock_offset_ms: f64,
    pub clock_bound_ms: f64,
}

/// A `[network]` condition as applied on one host for a run across hosts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NetworkApplied {
    pub host: String,
    /// The interface it applies on (the host's route to the server).
    pub interface: String,
    /// The conditions, in words ("1% loss").
    pub condition: String,
    /// How: `netem` (egress), `tbf` (egress rate), `iptables statistic` (loss of what arrives
    /// from the server).
    pub how: Vec<String>,
    /// The commands that applied it (as root).
    pub commands: Vec<String>,
    /// Whether it was removed, checked gone, after the run.
    pub removed: bool,
}

/// Why `spec` cannot run on this machine alone (None: it can): it is made for hosts
/// (`hosts_only`), or its `[network]` conditions are for hosts' interfaces.
pub fn needs_hosts(spec: &Spec) -> Option<String> {
    if spec.hosts_only {
        return Some(format!(
            "`{}` is made for a server host and client hosts (hosts_only): its rates are for \
             several client machines, which one machine's client cannot offer, so here it \
             would measure this machine's client, not the server; run it with --hosts FILE \
             (docs/hosts.md)",
            spec.name
        ));
    }
    if spec.network.is_some() {
        return Some(format!(
            "`{}` has [network]: its conditions are applied on client hosts' interfaces, so it \
             runs only across hosts (--hosts FILE)",
            spec.name
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "ssh_config = \"/tmp/c\"\n\
        [[host]]\nname = \"s\"\ndestination = \"alice@server.lan\"\nrole = \"server\"\n\
        [[host]]\nname = \"c1\"\ndestination = \"c1\"\nrole = \"client\"\nworkdir = \"/tmp/w\"\n";

    #[test]
    fn a_hosts_file_names_one_server_and_its_clients() {
        let h = Hosts::parse(GOOD, "h.toml").unwrap();
        assert_eq!(h.server().name, "s");
        assert_eq!(h.server().workdir(), "~/.cache/evlab");
        assert_eq!(
            h.clients().map(|c| c.workdir()).collect::<Vec<_>>(),
            ["/tmp/w"]
        );
        assert_eq!(h.ssh_config.as_deref(), Some("/tmp/c"));
    }

    #[test]
    fn bad_hosts_files_say_what_is_wrong() {
        for (text, says) in [
            ("", "no [[host]]"),
            (
                &GOOD.replace("role = \"server\"", "role = \"client\"")[..],
                "exactly one host with role = \"server\"",
            ),
            (
                &GOOD.replace("\"c1\"\nrole", "\"-oProxyCommand=x\"\nrole"),
                "do not start with '-'",
            ),
            (
                &GOOD.replace("name = \"c1\"", "name = \"s\""),
                "given twice",
            ),
            (
                &GOOD.replace("/tmp/w", "/tmp/$(reboot)"),
                "must be a plain path",
            ),
            (
                &GOOD.replace("role = \"client\"", "role = \"judge\""),
                "unknown variant",
            ),
            (&format!("{GOOD}colour = 1\n"), "unknown field"),
        ] {
            let e = Hosts::parse(text, "h.toml").unwrap_err().to_string();
            assert!(e.contains(says), "{text:?}: {e}");
            assert!(e.starts_with("h.toml:"), "{e}");
        }
    }

    #[test]
    fn a_toml_error_names_its_line_and_column_and_shows_the_text() {
        // A value without its quotes, on line 4.
        let text = GOOD.replace("destination = \"alice@server.lan\"", "destination = alice");
        let e = Hosts::parse(&text, "h.toml").unwrap_err().to_string();
        let mut lines = e.lines();
        let first = lines.next().unwrap();
        assert!(first.starts_with("h.toml:4:15: "), "{e}");
        assert_eq!(lines.next(), Some("4 | destination = alice"), "{e}");
        assert_eq!(lines.next(), Some("  |               ^"), "{e}");
        // A wrong type names where the value is.
        let text = GOOD
            .replace("role = \"judge\"", "")
            .replace("workdir = \"/tmp/w\"", "port = \"x\"");
        let e = Hosts::parse(&text, "h.toml").unwrap_err().to_string();
        assert!(
            e.starts_with("h.toml:10:8: invalid type: string \"x\", expected u16\n"),
            "{e}"
        );
        // Columns count characters, not bytes.
        let text = GOOD.replace("\"alice@server.lan\"", "\"ü\" x");
        let e = Hosts::parse(&text, "h.toml").unwrap_err().to_string();
        assert!(e.starts_with("h.toml:4:19: "), "{e}");
        assert!(e.ends_with("\n  |                   ^"), "{e}");
        // The unknown key's line (characters beyond ASCII above it do not shift it).
        let e = Hosts::parse(&format!("# ünïcode\n{GOOD}colour = 1\n"), "h.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("h.toml:12:1: unknown field `colour`"), "{e}");
    }
}

#[cfg(test)]
mod ports_tests {
    use super::*;

    #[test]
    fn a_host_without_tw_reuse_sustains_its_ports_over_time_wait() {
        assert_eq!(port_range_size("32768\t60999\n"), Some(28_232));
        assert_eq!(port_range_size("1024 65535"), Some(64_512));
        assert_eq!(port_range_size("9 1"), None);
        assert_eq!(port_range_size("x"), None);
        let mut h = HostCheck {
            tcp_tw_reuse: Some(2),
            ephemeral_ports: Some(28_232),
            ..Default::default()
        };
        let r = h.sustained_connect_rate().unwrap();
        assert!((r - 470.5).abs() < 0.1, "{r}");
        h.tcp_tw_reuse = Some(1);
        assert_eq!(h.sustained_connect_rate(), None);
        h.tcp_tw_reuse = None;
        assert_eq!(h.sustained_connect_rate(), None);
    }
}
