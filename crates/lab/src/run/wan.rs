//! `[network]` across hosts: WAN conditions (delay, loss, rate) between each client host and the
//! server, applied on the client hosts for the whole run, as root there (or `sudo -n`), and
//! removed afterwards, checked gone.
//!
//! Where the host's kernel has netem, one netem qdisc on the interface of its route to the
//! server does all three, on what the host sends. Where it has not: a rate is a tbf qdisc there
//! (what it sends), and a loss an iptables `statistic` rule dropping that share of what arrives
//! on it from the server (a drop on output is no loss: the sender's stack is told at once and
//! sends again, so the rule drops on input, where the sender learns of it only as over a real
//! link); a delay cannot be applied without netem, and is refused with the reason. So is any
//! condition where tc or iptables fails (an interface that already has a root qdisc of its own,
//! say: evlab does not replace it).

use std::net::IpAddr;

use crate::run::hosts::Ssh;
use evlab_reason::model::hosts::{Host, NetworkApplied};
use evlab_reason::model::spec::NetworkSpec;
use evlab_reason::model::text::shell_line;
use evlab_reason::LabError;

/// A condition in place on one host, and how to remove it.
#[derive(Debug, Clone)]
pub struct Applied {
    pub host: Host,
    pub record: NetworkApplied,
    /// The script removing it and printing what is left (nothing when all is gone).
    remove: String,
}

/// "" as root on `host`, else "sudo -n " where it may; else the reason it may not.
fn privilege(ssh: &Ssh, host: &Host) -> Result<&'static str, LabError> {
    let said = ssh.ok(
        host,
        "if [ \"$(id -u)\" = 0 ]; then echo root; elif sudo -n true 2>/dev/null; then echo sudo; \
         else echo none; fi",
        &[],
    )?;
    match said.trim() {
        "root" => Ok(""),
        "sudo" => Ok("sudo -n "),
        _ => Err(LabError::Io(format!(
            "host {}: [network] needs root there (tc, iptables), and its user is not root and \
             may not `sudo -n` (no password)",
            host.name
        ))),
    }
}

/// `script` as root (as is, or by `sudo -n sh -c`), with the system directories on its PATH.
fn as_root(sudo: &str, script: &str) -> String {
    let script = format!("PATH=$PATH:/usr/sbin:/sbin; {script}");
    format!("{sudo}sh -c {}", shell_line(&[script]))
}

/// The netem arguments for `n`'s conditions.
fn netem_args(n: &NetworkSpec) -> String {
    let mut a = String::from("netem");
    if let Some(d) = n.delay_ms {
        a += &format!(" delay {d}ms");
    }
    if let Some(l) = n.loss_pct {
        a += &format!(" loss {l}%");
    }
    if let Some(r) = n.rate_mbit {
        a += &format!(" rate {r}mbit");
    }
    a
}

/// The tbf arguments for `mbit`: a bucket of 10 ms at the rate (at least ten 1,500-byte
/// packets), packets queued at most 100 ms.
fn tbf_args(mbit: f64) -> String {
    let burst = ((mbit * 1e6 / 8.0 / 100.0) as u64).max(15_000);
    format!("tbf rate {mbit}mbit burst {burst} latency 100ms")
}

/// Applies `n` on `host` (a client host), on the interface of its route to `server`.
pub fn apply(ssh: &Ssh, host: &Host, server: IpAddr, n: &NetworkSpec) -> Result<Applied, LabError> {
    let refuse = |why: String| {
        LabError::Io(format!(
            "host {}: [network] ({}) cannot be applied there: {why}",
            host.name,
            n.words()
        ))
    };
    let sudo = privilege(ssh, host)?;
    let route = ssh.ok(
        host,
        &format!("PATH=$PATH:/usr/sbin:/sbin; ip -o route get {server}"),
        &[],
    )?;
    let dev = route
        .split_whitespace()
        .skip_while(|w| *w != "dev")
        .nth(1)
        .filter(|d| {
            !d.is_empty()
                && d.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-@".contains(c))
        })
        .ok_or_else(|| {
            refuse(format!(
                "no interface in its route to the server: {route:?}"
            ))
        })?
        .split('@')
        .next()
        .unwrap_or_default()
        .to_string();
    let netem = format!("tc qdisc add dev {dev} root {}", netem_args(n));
    let o = ssh.run(host, &as_root(sudo, &netem), &[])?;
    let mut record = NetworkApplied {
        host: host.name.clone(),
        interface: dev.clone(),
        condition: n.words(),
        ..Default::default()
    };
    let qdisc_gone = format!(
        "tc qdisc del dev {dev} root 2>/dev/null; tc qdisc show dev {dev} | grep -E 'netem|tbf' || true"
    );
    if o.status.success() {
        record.how.push("netem".into());
        record.commands.push(netem);
        return Ok(Applied {
            host: host.clone(),
            record,
            remove: as_root(sudo, &qdisc_gone),
        });
    }
    let said = String::from_utf8_lossy(&o.stderr).trim().to_string();
    if !said.contains("unknown") {
        return Err(refuse(format!("`{netem}` failed: {said}")));
    }
    if n.delay_ms.is_some() {
        return Err(refuse(format!(
            "a delay needs the netem qdisc, which its kernel does not have (`{netem}`: {said})"
        )));
    }
    let mut script = vec![];
    let mut remove = vec![];
    if let Some(r) = n.rate_mbit {
        script.push(format!("tc qdisc add dev {dev} root {}", tbf_args(r)));
        remove.push(qdisc_gone);
        record.how.push("tbf".into());
    }
    if let Some(l) = n.loss_pct {
        let rule = format!(
            "INPUT -i {dev} -s {server} -m statistic --mode random --probability {} -j DROP",
            l / 100.0
        );
        script.push(format!("iptables -w -I {rule}"));
        remove.push(format!(
            "iptables -w -D {rule} 2>/dev/null; if iptables -w -C {rule} 2>/dev/null; then echo 'rule left'; fi"
        ));
        record.how.push("iptables statistic".into());
    }
    let applied = Applied {
        host: host.clone(),
        record: NetworkApplied {
            commands: script.clone(),
            ..record
        },
        remove: as_root(sudo, &remove.join("; ")),
    };
    let o = ssh.run(host, &as_root(sudo, &script.join(" && ")), &[])?;
    if !o.status.success() {
        // Whatever part of it was applied goes.
        let _ = applied.remove(ssh);
        return Err(refuse(format!(
            "`{}` failed: {}",
            script.join(" && "),
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    Ok(applied)
}

impl Applied {
    /// Removes the condition; an error says what is left.
    pub fn remove(&self, ssh: &Ssh) -> Result<(), LabError> {
        let left = ssh.ok(&self.host, &self.remove, &[])?;
        if left.trim().is_empty() {
            Ok(())
        } else {
            Err(LabError::Io(format!(
                "host {}: [network] on {} is still there after its removal: {}",
                self.host.name,
                self.record.interface,
                left.trim()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_become_netem_and_tbf_arguments() {
        let n = NetworkSpec {
            delay_ms: Some(20.0),
            loss_pct: Some(1.0),
            rate_mbit: Some(100.0),
            hosts: None,
        };
        assert_eq!(netem_args(&n), "netem delay 20ms loss 1% rate 100mbit");
        assert_eq!(
            tbf_args(100.0),
            "tbf rate 100mbit burst 125000 latency 100ms"
        );
        assert_eq!(tbf_args(1.0), "tbf rate 1mbit burst 15000 latency 100ms");
        assert_eq!(n.words(), "20 ms delay, 1% loss, 100 Mbit/s");
    }
}
