//! This process's CPU quota, read from its own cgroup: the share of CPU time it may use, and how
//! long it has been throttled for using it up.
//!
//! Why: a load generator that may use a tenth of a CPU is saturated when it uses a tenth, not a
//! whole one; judged against one CPU it would look idle while it falls behind. The quota is the
//! smallest of its group's and its ancestors' (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` over
//! `cpu.cfs_period_us`); the throttled time is that group's (`cpu.stat`: v2 `throttled_usec`, v1
//! `throttled_time` in ns). Only plain reads of `/proc/self` and the cgroup file system.

use std::path::{Path, PathBuf};

/// The CPU quota that binds this process, and the group that sets it.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuQuota {
    /// CPUs' worth of time per period (0.1: a tenth of one CPU).
    pub cpus: f64,
    /// The group whose quota it is (it or an ancestor of this process's group).
    pub group: PathBuf,
    v2: bool,
}

impl CpuQuota {
    /// The group's throttled time so far, µs (None when `cpu.stat` cannot be read).
    pub fn throttled_us(&self) -> Option<u64> {
        let stat = std::fs::read_to_string(self.group.join("cpu.stat")).ok()?;
        throttled_us(&stat, self.v2)
    }
}

/// The quota binding this process, or None when there is none (no controller, no limit).
pub fn own_cpu_quota() -> Option<CpuQuota> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (dir, v2) = cpu_group(&cgroup, &mountinfo)?;
    quota_along(&dir, v2)
}

/// The directory of this process's group in the hierarchy that has the `cpu` controller, and
/// whether it is cgroup v2. A v1 `cpu` hierarchy wins: a controller is bound to one hierarchy.
fn cpu_group(cgroup: &str, mountinfo: &str) -> Option<(PathBuf, bool)> {
    let v1 = cgroup.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctls, path) = (f.next()?, f.next()?, f.next()?);
        ctls.split(',').any(|c| c == "cpu").then_some(path)
    });
    let (path, v2) = match v1 {
        Some(p) => (p, false),
        None => (cgroup.lines().find_map(|l| l.strip_prefix("0::"))?, true),
    };
    let (root, mount) = mountinfo.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let pre: Vec<&str> = pre.split(' ').collect();
        let post: Vec<&str> = post.split(' ').collect();
        let (fstype, opts) = (*post.first()?, *post.get(2)?);
        let ok = if v2 {
            fstype == "cgroup2"
        } else {
            fstype == "cgroup" && opts.split(',').any(|o| o == "cpu")
        };
        ok.then(|| (pre.get(3).copied(), pre.get(4).copied()))
            .and_then(|(r, m)| Some((r?, m?)))
    })?;
    // The mount may show a sub-tree (`root`); the group's path is relative to it.
    let rel = Path::new(path)
        .strip_prefix(root)
        .unwrap_or(Path::new(path));
    let rel = rel.strip_prefix("/").unwrap_or(rel);
    Some((Path::new(mount).join(rel), v2))
}

/// The smallest quota from `dir` up to the mount's root.
fn quota_along(dir: &Path, v2: bool) -> Option<CpuQuota> {
    let mut best: Option<CpuQuota> = None;
    let mut at = Some(dir);
    while let Some(d) = at {
        let q = if v2 {
            std::fs::read_to_string(d.join("cpu.max"))
                .ok()
                .and_then(|s| quota_v2(&s))
        } else {
            let quota = std::fs::read_to_string(d.join("cpu.cfs_quota_us")).ok();
            let period = std::fs::read_to_string(d.join("cpu.cfs_period_us")).ok();
            quota.zip(period).and_then(|(q, p)| quota_v1(&q, &p))
        };
        let Some(cpus) = q else {
            if !d
                .join(if v2 { "cpu.max" } else { "cpu.cfs_quota_us" })
                .exists()
            {
                break; // above the hierarchy's root
            }
            at = d.parent();
            continue;
        };
        if best.as_ref().is_none_or(|b| cpus < b.cpus) {
            best = Some(CpuQuota {
                cpus,
                group: d.to_path_buf(),
                v2,
            });
        }
        at = d.parent();
    }
    best
}

/// `cpu.max`: "QUOTA PERIOD" or "max PERIOD" (no limit).
fn quota_v2(text: &str) -> Option<f64> {
    let mut f = text.split_whitespace();
    let q: f64 = f.next()?.parse().ok()?;
    let p: f64 = f.next()?.parse().ok()?;
    (q > 0.0 && p > 0.0).then_some(q / p)
}

/// `cpu.cfs_quota_us` (-1: no limit) over `cpu.cfs_period_us`.
fn quota_v1(quota: &str, period: &str) -> Option<f64> {
    let q: f64 = quota.trim().parse().ok()?;
    let p: f64 = period.trim().parse().ok()?;
    (q > 0.0 && p > 0.0).then_some(q / p)
}

fn throttled_us(stat: &str, v2: bool) -> Option<u64> {
    let key = if v2 {
        "throttled_usec"
    } else {
        "throttled_time"
    };
    let v: u64 = stat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })?;
    Some(if v2 { v } else { v / 1000 })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn the_v1_cpu_hierarchy_wins_over_v2_and_its_group_is_found_under_its_mount() {
        let cg = "2:cpuacct:/\n1:cpu:/evlab-t/c1\n0::/user.slice\n";
        assert_eq!(
            cpu_group(cg, MOUNTS),
            Some((PathBuf::from("/sys/fs/cgroup/cpu/evlab-t/c1"), false))
        );
        let joint = "3:cpu,cpuacct:/a\n";
        let m = "40 1 0:9 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        assert_eq!(
            cpu_group(joint, m),
            Some((PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/a"), false))
        );
    }

    #[test]
    fn on_v2_alone_the_unified_group_is_used_relative_to_the_mounts_root() {
        let m = "30 1 0:26 /user.slice /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cpu_group("0::/user.slice/app.scope\n", m),
            Some((PathBuf::from("/sys/fs/cgroup/app.scope"), true))
        );
        assert_eq!(cpu_group("1:cpu:/x\n", "nothing\n"), None);
    }

    #[test]
    fn quotas_and_throttled_time_are_read_in_either_version() {
        assert_eq!(quota_v2("10000 100000\n"), Some(0.1));
        assert_eq!(quota_v2("max 100000\n"), None);
        assert_eq!(quota_v1("25000\n", "100000\n"), Some(0.25));
        assert_eq!(quota_v1("-1\n", "100000\n"), None);
        assert_eq!(quota_v2("garbage"), None);
        let v1 = "nr_periods 10\nnr_throttled 4\nthrottled_time 3000000\n";
        assert_eq!(throttled_us(v1, false), Some(3000));
        let v2 = "usage_usec 5\nnr_throttled 2\nthrottled_usec 700\n";
        assert_eq!(throttled_us(v2, true), Some(700));
        assert_eq!(throttled_us("usage_usec 5\n", true), None);
    }
}
