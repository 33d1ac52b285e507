//! The server's CPU budget on the server host (`evlab run --hosts` with `server_cpu_budget` or
//! a series' `cpu_budget`): a cgroup there with a CPU quota, as [`crate::run::cgroup`] makes one
//! here (the same period and quota, `cpu.max` on cgroup v2 or `cpu.cfs_quota_us` on v1), made
//! by shell commands over ssh as root or through `sudo -n`. Found and tried (a group made and
//! removed) before anything is measured; where it cannot be, the run is refused with the reason.
//!
//! Each point's server gets a group of its own: made before the server starts, the server moved
//! into it as soon as it has said its process group (before it listens: `cgroup.procs` moves
//! every thread it has), and removed after it is stopped, checked gone.

use crate::run::cgroup::period_for;
use crate::run::hosts::Ssh;
use evlab_reason::model::hosts::Host;
use evlab_reason::model::text::shell_line;
use evlab_reason::LabError;

/// Where budgets are made on the server host, and how.
#[derive(Debug, Clone)]
pub struct RemoteCgroup {
    /// The CPU controller's root there.
    root: String,
    v2: bool,
    /// "" as root, else "sudo -n ".
    sudo: &'static str,
}

/// Finds the controller and whether we are root (or may `sudo -n`); prints `v1|v2 ROOT PRIV`.
const PROBE: &str = "c=none; for r in /sys/fs/cgroup /sys/fs/cgroup/unified; do \
    if grep -qw cpu $r/cgroup.controllers 2>/dev/null; then c=\"v2 $r\"; break; fi; done; \
    if [ \"$c\" = none ]; then for r in /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct; do \
    if [ -e $r/cpu.cfs_quota_us ]; then c=\"v1 $r\"; break; fi; done; fi; \
    if [ \"$(id -u)\" = 0 ]; then p=root; elif sudo -n true 2>/dev/null; then p=sudo; \
    else p=none; fi; echo \"$c $p\"";

impl RemoteCgroup {
    /// Finds the CPU controller on `host` and the right to make groups there, and tries it (a
    /// group made with a quota, then removed); the reason when it cannot.
    pub fn find(ssh: &Ssh, host: &Host) -> Result<RemoteCgroup, LabError> {
        let refuse = |why: String| {
            LabError::Io(format!(
                "host {}: the server's CPU budget is a cgroup there, and {why}; remove the \
                 budget (server_cpu_budget, cpu_budget) to run without one",
                host.name
            ))
        };
        let said = ssh.ok(host, PROBE, &[])?;
        let f: Vec<&str> = said.split_whitespace().collect();
        let (v2, root, sudo) = match f.as_slice() {
            [_, _, "none"] | ["none", "none"] => {
                return Err(refuse(
                    "its user is not root and may not `sudo -n` (no password)".into(),
                ))
            }
            ["none", _] => return Err(refuse("it has no cgroup CPU controller mounted".into())),
            [v, r, p] => (
                *v == "v2",
                r.to_string(),
                if *p == "root" { "" } else { "sudo -n " },
            ),
            _ => return Err(refuse(format!("its cgroups could not be read: {said:?}"))),
        };
        let cg = RemoteCgroup { root, v2, sudo };
        let probe = cg
            .make(ssh, host, 0.5, "probe")
            .map_err(|e| refuse(e.to_string()))?;
        cg.remove(ssh, host, &probe)
            .map_err(|e| refuse(e.to_string()))?;
        Ok(cg)
    }

    /// `script` run as root there (as is, or by `sudo -n sh -c`).
    fn as_root(&self, script: &str) -> String {
        if self.sudo.is_empty() {
            script.to_string()
        } else {
            format!("{}sh -c {}", self.sudo, shell_line(&[script.to_string()]))
        }
    }

    /// The shell commands making `dir` limited to `share` of one CPU; the share it got.
    fn setup(&self, dir: &str, share: f64) -> (String, f64) {
        let period = period_for(share);
        let quota = ((share * period as f64).round() as u64).max(1000);
        let script = if self.v2 {
            format!(
                "{{ grep -qw cpu {r}/cgroup.subtree_control || echo +cpu > {r}/cgroup.subtree_control; }} \
                 && mkdir {dir} && echo '{quota} {period}' > {dir}/cpu.max",
                r = self.root
            )
        } else {
            format!(
                "mkdir {dir} && echo {period} > {dir}/cpu.cfs_period_us && echo {quota} > \
                 {dir}/cpu.cfs_quota_us"
            )
        };
        (script, quota as f64 / period as f64)
    }

    /// Makes a group for `share` of one CPU on `host`, named by `tag`.
    pub fn make(
        &self,
        ssh: &Ssh,
        host: &Host,
        share: f64,
        tag: &str,
    ) -> Result<RemoteGroup, LabError> {
        let dir = format!(
            "{}/evlab-{}-{}-{tag}",
            self.root,
            std::process::id(),
            evlab_reason::model::results::now_secs()
        );
        let (script, got) = self.setup(&dir, share);
        ssh.ok(host, &self.as_root(&script), &[])
            .map_err(|e| LabError::Io(format!("cannot make the CPU budget's group: {e}")))?;
        Ok(RemoteGroup {
            setup: if self.sudo.is_empty() {
                script
            } else {
                self.as_root(&script)
            },
            dir,
            share: got,
        })
    }

    /// Moves process `pid` (every thread of it) into `g`, checked by its /proc.
    pub fn join(&self, ssh: &Ssh, host: &Host, g: &RemoteGroup, pid: u32) -> Result<(), LabError> {
        let name = g.dir.rsplit('/').next().unwrap_or("");
        let script = format!(
            "echo {pid} > {}/cgroup.procs && grep -q '/{name}$' /proc/{pid}/cgroup",
            g.dir
        );
        ssh.ok(host, &self.as_root(&script), &[])
            .map(|_| ())
            .map_err(|e| {
                LabError::Point(format!(
                    "cannot move the server into its CPU budget's group on host {}: {e}",
                    host.name
                ))
            })
    }

    /// Removes `g` (its processes stopped first), checked gone.
    pub fn remove(&self, ssh: &Ssh, host: &Host, g: &RemoteGroup) -> Result<(), LabError> {
        let d = &g.dir;
        let script = format!("rmdir {d} 2>/dev/null; if [ -e {d} ]; then echo left; fi");
        let said = ssh.ok(host, &self.as_root(&script), &[])?;
        if said.trim().is_empty() {
            Ok(())
        } else {
            Err(LabError::Io(format!(
                "the CPU budget's group {d} on host {} is still there",
                host.name
            )))
        }
    }
}

/// One group on the server host.
#[derive(Debug)]
pub struct RemoteGroup {
    pub dir: String,
    /// The share of one CPU its quota gives.
    pub share: f64,
    /// What made it, for the report.
    pub setup: String,
}
