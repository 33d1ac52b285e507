//! A CPU budget for a process tree: a cgroup with a CPU quota (cgroup v2 `cpu.max`, or v1
//! `cpu.cfs_quota_us` where only the v1 controller is mounted).
//!
//! Why: on a 2-core machine one client CPU saturates near what an unconstrained epoll server
//! can serve, so without a budget every mechanism tracks the offered rate up to the client's
//! limit and the figures show nothing. A quota gives the server a fraction of its CPU — the
//! paper's setting, where eight client machines drove one server — so that the server, not the
//! client, reaches its limit first. The quota's period is short (10 ms) so that a throttled
//! server stalls for milliseconds, not for a tenth of a second.
//!
//! The child joins the group between fork and exec (it writes `0`, "myself", to `cgroup.procs`
//! through a descriptor opened before the fork), so everything it starts — nginx's workers —
//! is inside from the first instruction. Dropping the budget removes the group; the processes
//! must have been stopped first.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The quota period: short, so that throttling stalls are short. The kernel's smallest quota is
/// 1 ms, so budgets under 10% get a longer period (`period_for`).
pub const PERIOD_US: u64 = 10_000;

/// The period for a share: `PERIOD_US`, or long enough that the quota is at least 1 ms.
pub fn period_for(share: f64) -> u64 {
    if share * PERIOD_US as f64 >= 1000.0 {
        PERIOD_US
    } else {
        ((1000.0 / share).ceil() as u64).min(1_000_000)
    }
}

#[derive(Debug)]
pub struct CpuBudget {
    dir: PathBuf,
    /// Share of one CPU.
    pub share: f64,
    /// The quota's period, µs.
    pub period: u64,
    procs: File,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

enum Flavour {
    V2(PathBuf),
    V1(PathBuf),
}

fn controller_root() -> Result<Flavour, String> {
    for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let ctl = Path::new(root).join("cgroup.controllers");
        if let Ok(c) = std::fs::read_to_string(&ctl) {
            if c.split_whitespace().any(|x| x == "cpu") {
                return Ok(Flavour::V2(PathBuf::from(root)));
            }
        }
    }
    for root in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
        if Path::new(root).join("cpu.cfs_quota_us").exists() {
            return Ok(Flavour::V1(PathBuf::from(root)));
        }
    }
    Err("no cgroup CPU controller is mounted (neither cgroup v2 with `cpu` nor v1 `cpu`)".into())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

impl CpuBudget {
    /// A new group limited to `share` of one CPU (0 < share ≤ number of CPUs).
    pub fn new(share: f64) -> Result<CpuBudget, String> {
        if !(share.is_finite() && share > 0.0) {
            return Err(format!(
                "{share}: a CPU budget is a positive share of one CPU"
            ));
        }
        let name = format!(
            "evlab-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let period = period_for(share);
        let quota = ((share * period as f64).round() as u64).max(1000);
        let dir = match controller_root()? {
            Flavour::V2(root) => {
                // The parent must hand the cpu controller down to its children.
                let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
                let dir = root.join(&name);
                std::fs::create_dir(&dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                if let Err(e) = write(&dir.join("cpu.max"), &format!("{quota} {period}")) {
                    let _ = std::fs::remove_dir(&dir);
                    return Err(e);
                }
                dir
            }
            Flavour::V1(root) => {
                let dir = root.join(&name);
                std::fs::create_dir(&dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                let r = write(&dir.join("cpu.cfs_period_us"), &period.to_string())
                    .and_then(|_| write(&dir.join("cpu.cfs_quota_us"), &quota.to_string()));
                if let Err(e) = r {
                    let _ = std::fs::remove_dir(&dir);
                    return Err(e);
                }
                dir
            }
        };
        let procs = match OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
        {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(format!(
                    "cannot open {}: {e}",
                    dir.join("cgroup.procs").display()
                ));
            }
        };
        Ok(CpuBudget {
            dir,
            share: quota as f64 / period as f64,
            period,
            procs,
        })
    }

    /// The descriptor a child writes `0` to (between fork and exec) to join the group.
    pub fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The shell command that makes the group again, for the report's reproduction section
    /// (as root; `mkdir -p`, so it may be run twice).
    pub fn setup_shell(&self) -> String {
        let period = self.period;
        let quota = (self.share * period as f64).round() as u64;
        let d = crate::model::text::shell_line(&[self.dir.display().to_string()]);
        if self.dir.join("cpu.max").exists() {
            format!("mkdir -p {d} && echo '{quota} {period}' > {d}/cpu.max")
        } else {
            format!(
                "mkdir -p {d} && echo {period} > {d}/cpu.cfs_period_us && echo {quota} > {d}/cpu.cfs_quota_us"
            )
        }
    }

    /// `script` (shell commands ending in an `exec`) run inside the group: a shell that joins
    /// it first, so the command it execs and all that starts are in the group, nothing else.
    pub fn join_shell(&self, script: &str) -> String {
        crate::model::text::shell_line(&[
            "sh".into(),
            "-c".into(),
            format!(
                "echo $$ > {}/cgroup.procs && {script}",
                crate::model::text::shell_line(&[self.dir.display().to_string()])
            ),
        ])
    }
}

impl Drop for CpuBudget {
    fn drop(&mut self) {
        // Empty by now (the processes were stopped); a group still holding one stays behind
        // rather than failing the run.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_limits_its_process_or_says_why_not() {
        match CpuBudget::new(0.25) {
            Err(why) => {
                println!("skipped: no CPU budget on this machine: {why}");
                assert!(!why.is_empty());
            }
            Ok(b) => {
                assert!((b.share - 0.25).abs() < 1e-9);
                assert!(b.path().exists());
                let dir = b.path().to_path_buf();
                assert!(b.setup_shell().starts_with("mkdir -p "));
                assert!(b
                    .join_shell("exec true")
                    .contains("/cgroup.procs && exec true"));
                drop(b);
                assert!(!dir.exists(), "the group is removed when dropped");
            }
        }
        assert_eq!(period_for(0.25), PERIOD_US);
        assert_eq!(period_for(0.02), 50_000);
        assert!(CpuBudget::new(0.0).is_err());
        assert!(CpuBudget::new(f64::NAN).is_err());
    }
}
