//! An Ansible-style INI inventory read as a hosts file (`evlab hosts INVENTORY`, `evlab run
//! --hosts INVENTORY`): the hosts of the groups `server`, `client` and `origin` become hosts of
//! those roles, with the variables people who run a lab keep already.
//!
//! ```ini
//! [server]
//! srv ansible_host=192.0.2.10 ansible_user=evlab ansible_port=2222 evlab_address=10.0.0.10
//!
//! [client]
//! c1 ansible_host=192.0.2.11
//! c2 ansible_host=192.0.2.12
//!
//! [all:vars]
//! ansible_user=evlab
//! ansible_ssh_common_args='-F ssh_config'
//! ```
//!
//! Read: `ansible_host` (the ssh destination's host; default the inventory name),
//! `ansible_user` (its user), `ansible_port` (ssh -p), `ansible_ssh_common_args` (only
//! `-F FILE`, relative to the inventory's directory), and evlab's own `evlab_address` and
//! `evlab_workdir` (a hosts file's `address` and `workdir`). A host's variables override its
//! group's, which override `[all:vars]`. Other groups, other variables and comments are
//! ignored; host ranges (`web[01:10]`) and `:children` of the three groups are refused, saying
//! so.

use std::collections::BTreeMap;
use std::path::Path;

use crate::LabError;

/// The groups read: each host's role is its group's name.
const GROUPS: [&str; 3] = ["server", "client", "origin"];

/// An inventory's hosts, as `model::hosts` takes them.
#[derive(Debug)]
pub struct Inventory {
    /// `-F FILE` of `ansible_ssh_common_args`.
    pub ssh_config: Option<String>,
    pub hosts: Vec<Entry>,
}

/// One host of `[server]`, `[client]` or `[origin]`.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    /// `server`, `client` or `origin`.
    pub group: &'static str,
    /// `[user@]host`.
    pub destination: String,
    pub port: Option<u16>,
    pub workdir: Option<String>,
    pub address: Option<String>,
}

/// Whether `text` is an INI inventory rather than a TOML hosts file: it has a `[server]` group
/// and no `[[host]]` table.
pub fn looks_like_inventory(text: &str) -> bool {
    let lines = || text.lines().map(str::trim);
    lines().any(|l| l == "[server]") && !lines().any(|l| l == "[[host]]")
}

/// The inventory's hosts (not yet checked as a hosts file is: `Hosts::parse` does that).
/// `origin` names the file in errors, and its directory anchors a relative `-F FILE`.
pub fn parse(text: &str, origin: &str) -> Result<Inventory, LabError> {
    let bad = |line: usize, msg: String| LabError::Io(format!("{origin}:{line}: {msg}"));
    // (role, name, line, host vars), group vars by group ("all" too).
    let mut hosts: Vec<(&'static str, String, usize, BTreeMap<String, String>)> = Vec::new();
    let mut group_vars: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut section: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if let Some(g) = name.strip_suffix(":children") {
                if GROUPS.contains(&g) {
                    return Err(bad(
                        n,
                        format!("[{name}]: child groups of `{g}` are not read; list its hosts under [{g}]"),
                    ));
                }
            }
            section = Some(name.to_string());
            continue;
        }
        let Some(sec) = section.as_deref() else {
            return Err(bad(n, format!("`{line}` is outside any [group]")));
        };
        if let Some(g) = sec.strip_suffix(":vars") {
            let (k, v) =
                key_value(line).ok_or_else(|| bad(n, format!("`{line}`: not key=value")))?;
            group_vars.entry(g.to_string()).or_default().insert(k, v);
            continue;
        }
        let Some(&group) = GROUPS.iter().find(|g| **g == sec) else {
            continue; // another group: not evlab's
        };
        let words = split_words(line).map_err(|e| bad(n, e))?;
        let Some((name, vars)) = words.split_first() else {
            continue;
        };
        if name.contains('[') {
            return Err(bad(
                n,
                format!("`{name}`: host ranges are not read; list each host"),
            ));
        }
        let mut hv = BTreeMap::new();
        for w in vars {
            let (k, v) = key_value(w).ok_or_else(|| bad(n, format!("`{w}`: not key=value")))?;
            hv.insert(k, v);
        }
        if let Some((_, _, first, _)) = hosts.iter().find(|h| h.1 == *name) {
            return Err(bad(
                n,
                format!("host `{name}` is in two of [server], [client], [origin] (first at line {first})"),
            ));
        }
        hosts.push((group, name.clone(), n, hv));
    }
    if hosts.is_empty() {
        return Err(LabError::Io(format!(
            "{origin}: no host under [server], [client] or [origin]"
        )));
    }
    let mut ssh_config: Option<(String, usize)> = None;
    let mut out = Vec::new();
    for (group, name, n, hv) in hosts {
        // A host's own variables, then its group's, then [all:vars].
        let var = |k: &str| {
            hv.get(k)
                .or_else(|| group_vars.get(group).and_then(|g| g.get(k)))
                .or_else(|| group_vars.get("all").and_then(|g| g.get(k)))
                .cloned()
        };
        let host = var("ansible_host").unwrap_or_else(|| name.clone());
        let destination = match var("ansible_user") {
            Some(u) => format!("{u}@{host}"),
            None => host,
        };
        let port = match var("ansible_port") {
            Some(p) => Some(p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                bad(
                    n,
                    format!("host `{name}`: ansible_port `{p}` is not a port"),
                )
            })?),
            None => None,
        };
        if let Some(args) = var("ansible_ssh_common_args") {
            if let Some(path) =
                config_file(&args, origin).map_err(|e| bad(n, format!("host `{name}`: {e}")))?
            {
                match &ssh_config {
                    Some((f, at)) if *f != path => {
                        return Err(bad(
                            n,
                            format!("host `{name}` reads ssh config {path}, the host at line {at} {f}: one config for all"),
                        ))
                    }
                    _ => ssh_config = Some((path, n)),
                }
            }
        }
        out.push(Entry {
            name,
            group,
            destination,
            workdir: var("evlab_workdir"),
            address: var("evlab_address"),
            port,
        });
    }
    Ok(Inventory {
        ssh_config: ssh_config.map(|(f, _)| f),
        hosts: out,
    })
}

/// The `-F FILE` of `ansible_ssh_common_args`, relative to the inventory's directory; None
/// when it gives no option.
fn config_file(args: &str, origin: &str) -> Result<Option<String>, String> {
    let words = split_words(args)?;
    let file = match words.as_slice() {
        [f, file] if f == "-F" => file.clone(),
        [] => return Ok(None),
        _ => {
            return Err(format!(
                "ansible_ssh_common_args `{args}`: only `-F FILE` is read (put other options in that file)"
            ))
        }
    };
    Ok(Some(if Path::new(&file).is_absolute() {
        file
    } else {
        let dir = Path::new(origin).parent().unwrap_or(Path::new("."));
        dir.join(&file).display().to_string()
    }))
}

/// `key=value`, the value unquoted.
fn key_value(w: &str) -> Option<(String, String)> {
    let (k, v) = w.split_once('=')?;
    let k = k.trim();
    if k.is_empty() {
        return None;
    }
    let v = v.trim();
    let v = v
        .strip_prefix('\'')
        .and_then(|x| x.strip_suffix('\''))
        .or_else(|| v.strip_prefix('"').and_then(|x| x.strip_suffix('"')))
        .unwrap_or(v);
    Some((k.to_string(), v.to_string()))
}

/// Words separated by blanks, a quoted stretch ('…' or "…") kept whole with its quotes.
fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (None, ' ' | '\t') => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                cur.push(c);
            }
            (Some(q), c) if c == q => {
                quote = None;
                cur.push(c);
            }
            (_, c) => cur.push(c),
        }
    }
    if quote.is_some() {
        return Err(format!("`{line}`: a quote is not closed"));
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    // Quotes around a whole word (as in -F 'my file') go.
    Ok(out
        .into_iter()
        .map(|w| match key_value(&w) {
            Some(_) => w,
            None => w.trim_matches(|c| c == '\'' || c == '"').to_string(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::hosts::{Hosts, Role};

    const INVENTORY: &str = "\
# the lab
[server]
srv ansible_host=192.0.2.10 ansible_port=2222 evlab_address=10.0.0.10

[client]
c1 ansible_host=192.0.2.11 ansible_user=bob
c2

[origin]
o1 ansible_host=192.0.2.13 evlab_workdir=/tmp/w

[monitoring]
grafana ansible_host=192.0.2.99

[client:vars]
ansible_port=2200

[all:vars]
ansible_user=evlab
ansible_ssh_common_args='-F ssh_config'
";

    #[test]
    fn an_inventory_gives_the_hosts_a_hosts_file_would() {
        assert!(looks_like_inventory(INVENTORY));
        let h = Hosts::parse(INVENTORY, "/lab/inventory.ini").unwrap();
        assert_eq!(h.ssh_config.as_deref(), Some("/lab/ssh_config"));
        let by = |n: &str| h.hosts.iter().find(|x| x.name == n).unwrap().clone();
        let srv = by("srv");
        assert_eq!(
            (
                srv.role,
                srv.destination.as_str(),
                srv.port,
                srv.address.as_deref()
            ),
            (
                Role::Server,
                "evlab@192.0.2.10",
                Some(2222),
                Some("10.0.0.10")
            )
        );
        let c1 = by("c1");
        assert_eq!(
            (c1.destination.as_str(), c1.port),
            ("bob@192.0.2.11", Some(2200))
        );
        let c2 = by("c2");
        assert_eq!(
            (c2.role, c2.destination.as_str()),
            (Role::Client, "evlab@c2")
        );
        assert_eq!(by("o1").workdir(), "/tmp/w");
        assert_eq!(h.hosts.len(), 4, "grafana's group is not evlab's");
        assert_eq!(h.server().name, "srv");
    }

    #[test]
    fn what_an_inventory_cannot_say_is_refused_with_its_line() {
        for (text, says) in [
            ("[server]\nweb[01:03]\n", ":2: `web[01:03]`: host ranges"),
            ("[server]\na\n[client]\na\n", ":4: host `a` is in two"),
            (
                "[server]\na ansible_port=x\n",
                "ansible_port `x` is not a port",
            ),
            (
                "[server]\na ansible_ssh_common_args='-o ProxyJump=j'\n",
                "only `-F FILE` is read",
            ),
            (
                "[server:children]\nweb\n[server]\n",
                "child groups of `server`",
            ),
            ("a\n[server]\nb\n", ":1: `a` is outside any [group]"),
            ("[server]\na x='open\n", "a quote is not closed"),
            (
                "[client]\na\n[server]\n",
                "exactly one host with role = \"server\"",
            ),
            ("[server]\n-oProxyCommand=x\n", "do not start with '-'"),
        ] {
            let e = Hosts::parse(text, "inv")
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        // A TOML hosts file is not taken for an inventory.
        assert!(!looks_like_inventory("[[host]]\nname = \"s\"\n[server]\n"));
    }
}
