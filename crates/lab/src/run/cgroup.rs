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
//!
//! Where the groups are made ([`Parent`]): `evlab run --cgroup DIR`, else `$EVLAB_CGROUP`,
//! else, as root, the controller's root; as an ordinary user, a group root made and gave to
//! that user — `<cpu root>/evlab` on cgroup v1, `/sys/fs/cgroup/evlab` on v2 — or on v2 the
//! user's own group when the user owns it (a systemd user scope with `Delegate=yes`). The
//! parent is found and tried (a group made, its quota set, a process moved in, all undone)
//! before anything is measured; where none can be used, the error says what root runs to make
//! one ([`hint`]).

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
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

/// The environment variable naming the group budgets are made in, as `evlab run --cgroup DIR`.
pub const ENV: &str = "EVLAB_CGROUP";

/// The group an ordinary user's budgets go in when none is named: under the controller's root.
pub const USER_GROUP: &str = "evlab";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// The mounted CPU controller: its root and version.
fn controller_root() -> Result<(PathBuf, Version), String> {
    for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let ctl = Path::new(root).join("cgroup.controllers");
        if let Ok(c) = std::fs::read_to_string(&ctl) {
            if c.split_whitespace().any(|x| x == "cpu") {
                return Ok((PathBuf::from(root), Version::V2));
            }
        }
    }
    for root in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
        if Path::new(root).join("cpu.cfs_quota_us").exists() {
            return Ok((PathBuf::from(root), Version::V1));
        }
    }
    Err("no cgroup CPU controller is mounted (neither cgroup v2 with `cpu` nor v1 `cpu`)".into())
}

/// The mounted CPU controller's root and cgroup version (1 or 2), or why there is none.
pub fn cpu_controller() -> Result<(PathBuf, u32), String> {
    controller_root().map(|(root, v)| (root, if v == Version::V2 { 2 } else { 1 }))
}

fn check_share(share: f64) -> Result<(), String> {
    if share.is_finite() && share > 0.0 {
        Ok(())
    } else {
        Err(format!(
            "{share}: a CPU budget is a positive share of one CPU"
        ))
    }
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn euid() -> u32 {
    evlab_sys::geteuid()
}

/// This user's name (its number where it has none), for the hint's `chown`.
pub fn user_name() -> String {
    let uid = euid();
    evlab_sys::user_name(uid).unwrap_or_else(|| uid.to_string())
}

/// This process's own cgroup v2 group, under `root` (from `/proc/self/cgroup`'s `0::` line).
fn own_group_v2(root: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(root.join(rel.trim_start_matches('/')))
}

/// Whether `dir` holds the `cpu` controller's files: the version, or why not.
fn version_of(dir: &Path) -> Result<Version, String> {
    if !dir.is_dir() {
        return Err(format!("there is no group {}", dir.display()));
    }
    if let Ok(c) = std::fs::read_to_string(dir.join("cgroup.controllers")) {
        if c.split_whitespace().any(|x| x == "cpu") {
            return Ok(Version::V2);
        }
        return Err(format!(
            "{} has no cpu controller (its cgroup.controllers is `{}`: the parent's \
             cgroup.subtree_control lacks +cpu)",
            dir.display(),
            c.trim()
        ));
    }
    if dir.join("cpu.cfs_quota_us").exists() {
        return Ok(Version::V1);
    }
    Err(format!(
        "{} is not a group of a cgroup CPU controller (no cgroup.controllers, no cpu.cfs_quota_us)",
        dir.display()
    ))
}

/// The directory budgets' groups are made in: one this process may make groups in, with the
/// `cpu` controller (see the module's notes).
#[derive(Debug, Clone)]
pub struct Parent {
    dir: PathBuf,
    version: Version,
}

impl Parent {
    /// The parent for a run: `explicit` (`--cgroup`), else `$EVLAB_CGROUP`, else the default
    /// (the controller's root as root; [`USER_GROUP`] under it, or on v2 the user's own group
    /// when the user owns it, otherwise). Found, not yet tried: see [`Parent::prepare`].
    pub fn find(explicit: Option<&Path>) -> Result<Parent, String> {
        let named = explicit.map(Path::to_path_buf).or_else(|| {
            std::env::var_os(ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        });
        if let Some(dir) = named {
            let version = version_of(&dir)?;
            return Ok(Parent { dir, version });
        }
        let (root, version) = controller_root()?;
        if euid() == 0 {
            return Ok(Parent { dir: root, version });
        }
        let dir = root.join(USER_GROUP);
        if version == Version::V2 && !dir.exists() {
            // A group delegated to this user (a systemd user scope with Delegate=yes).
            if let Some(own) = own_group_v2(&root) {
                let owned = std::fs::metadata(&own).map(|m| m.uid() == euid());
                if owned.unwrap_or(false) && version_of(&own).is_ok() {
                    return Ok(Parent { dir: own, version });
                }
            }
        }
        version_of(&dir)?;
        Ok(Parent { dir, version })
    }

    /// The found parent, tried (see `prepare`): what a run calls before measuring anything.
    /// The error, where there is one, says what to do ([`hint`]).
    pub fn for_run(explicit: Option<&Path>) -> Result<Parent, String> {
        let tried = Parent::find(explicit).and_then(|p| p.prepare().map(|()| p));
        tried.map_err(|why| {
            if controller_root().is_err() && explicit.is_none() && std::env::var_os(ENV).is_none() {
                format!("server_cpu_budget: {why}; run the experiment without server_cpu_budget")
            } else {
                format!(
                    "server_cpu_budget: no cgroup to put the server in: {why}.\n{}",
                    hint()
                )
            }
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Makes the parent ready and tries it: on v2 the `cpu` controller handed down to its
    /// groups (if this process is in the parent itself, which v2 forbids then, it first moves
    /// into a group of its own under it, `evlab-runner-<pid>`, which stays); then a budget made,
    /// a short-lived process moved into it, and the budget removed.
    pub fn prepare(&self) -> Result<(), String> {
        if self.version == Version::V2 {
            self.hand_down_cpu()?;
        }
        let trial = CpuBudget::new_in(self, 1.0)?;
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", "exit 0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        evlab_sys::ChildSetup {
            nofile: None,
            nofile_cap: None,
            cgroup_procs: Some(trial.procs_fd()),
            cpus: vec![],
            parent_death_signal: None,
        }
        .apply_to(&mut cmd);
        let joined = cmd.status();
        drop(trial);
        match joined {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!(
                "a process moved into a group under {} exited with {s}",
                self.dir.display()
            )),
            Err(e) => Err(format!(
                "a process cannot be moved into a group under {} ({e}){}",
                self.dir.display(),
                if self.version == Version::V2 {
                    ": on cgroup v2 the run itself must be started inside that group"
                } else {
                    ""
                }
            )),
        }
    }

    /// v2: `+cpu` in the parent's `cgroup.subtree_control`, moving this process out of the
    /// parent first where it is in it (no group with processes may hand controllers down).
    fn hand_down_cpu(&self) -> Result<(), String> {
        let sc = self.dir.join("cgroup.subtree_control");
        let has = |p: &Path| {
            std::fs::read_to_string(p)
                .map(|t| t.split_whitespace().any(|c| c == "cpu"))
                .unwrap_or(false)
        };
        if has(&sc) {
            return Ok(());
        }
        match std::fs::write(&sc, "+cpu") {
            Ok(()) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                let root = controller_root()?.0;
                if own_group_v2(&root).as_deref() != Some(self.dir.as_path()) {
                    return Err(format!(
                        "cannot write +cpu to {}: {e} (other processes are in {})",
                        sc.display(),
                        self.dir.display()
                    ));
                }
            }
            Err(e) => return Err(format!("cannot write +cpu to {}: {e}", sc.display())),
        }
        let own = self
            .dir
            .join(format!("evlab-runner-{}", std::process::id()));
        if let Err(e) = std::fs::create_dir(&own) {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(format!("cannot create {}: {e}", own.display()));
            }
        }
        write(&own.join("cgroup.procs"), &std::process::id().to_string())?;
        write(&sc, "+cpu")
    }
}

/// What root runs so that this user may give the server a budget, on either cgroup version,
/// and the other ways out. Every line is a command to copy.
pub fn hint() -> String {
    let user = user_name();
    let here = controller_root().ok();
    let v1_root = match &here {
        Some((r, Version::V1)) => r.clone(),
        _ => PathBuf::from("/sys/fs/cgroup/cpu"),
    };
    let v2_root = match &here {
        Some((r, Version::V2)) => r.clone(),
        _ => PathBuf::from("/sys/fs/cgroup"),
    };
    let v1 = v1_root.join(USER_GROUP).display().to_string();
    let v2r = v2_root.display().to_string();
    let v2 = v2_root.join(USER_GROUP).display().to_string();
    let this = |v: Version| match &here {
        Some((_, h)) if *h == v => " (this machine)",
        _ => "",
    };
    format!(
        "To measure with a CPU budget as `{user}`, have root make a group for it once, then run again:\n\
         - cgroup v1{}:\n\
         \x20   mkdir -p {v1} && chown -R {user} {v1}\n\
         - cgroup v2{}: the group, the cpu controller handed down, and this shell moved in (v2 lets a\n\
         \x20 process move only between groups under one its user may write):\n\
         \x20   mkdir -p {v2}/shell && echo +cpu > {v2r}/cgroup.subtree_control && echo +cpu > {v2}/cgroup.subtree_control && chown -R {user} {v2}\n\
         \x20   echo <PID of {user}'s shell> > {v2}/shell/cgroup.procs\n\
         \x20 or, with a systemd user session, start the run in a delegated scope:\n\
         \x20   systemd-run --user --scope -p Delegate=yes evlab run …\n\
         evlab finds {v1} (v1) or {v2} (v2) by itself; name another group with `evlab run --cgroup DIR` \
         or {ENV}=DIR. Or run as root, or without a budget (remove server_cpu_budget from the experiment).",
        this(Version::V1),
        this(Version::V2),
    )
}

impl CpuBudget {
    /// A new group limited to `share` of one CPU (0 < share ≤ number of CPUs), in the run's
    /// default parent (see [`Parent::for_run`]).
    pub fn new(share: f64) -> Result<CpuBudget, String> {
        check_share(share)?;
        CpuBudget::new_in(&Parent::for_run(None)?, share)
    }

    /// A new group in `parent` limited to `share` of one CPU.
    pub fn new_in(parent: &Parent, share: f64) -> Result<CpuBudget, String> {
        check_share(share)?;
        let name = format!(
            "evlab-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let period = period_for(share);
        let quota = ((share * period as f64).round() as u64).max(1000);
        let dir = parent.dir.join(&name);
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let set = match parent.version {
            Version::V2 => write(&dir.join("cpu.max"), &format!("{quota} {period}")),
            Version::V1 => write(&dir.join("cpu.cfs_period_us"), &period.to_string())
                .and_then(|_| write(&dir.join("cpu.cfs_quota_us"), &quota.to_string())),
        };
        if let Err(e) = set {
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
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
        let d = evlab_reason::model::text::shell_line(&[self.dir.display().to_string()]);
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
        evlab_reason::model::text::shell_line(&[
            "sh".into(),
            "-c".into(),
            format!(
                "echo $$ > {}/cgroup.procs && {script}",
                evlab_reason::model::text::shell_line(&[self.dir.display().to_string()])
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
                assert!(!why.is_empty());
                evlab_poll::testing::require(
                    "cgroup",
                    false,
                    &format!("no CPU budget on this machine: {why}"),
                );
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

    #[test]
    fn a_named_parent_that_is_not_a_cpu_group_is_refused_with_the_reason() {
        let e = Parent::find(Some(Path::new("/nonexistent/evlab-x"))).unwrap_err();
        assert!(e.contains("there is no group /nonexistent/evlab-x"), "{e}");
        let tmp = std::env::temp_dir();
        let e = Parent::find(Some(&tmp)).unwrap_err();
        assert!(e.contains("not a group of a cgroup CPU controller"), "{e}");
        let h = hint();
        let user = user_name();
        assert!(h.contains(&format!("chown -R {user} ")), "{h}");
        assert!(
            h.contains("evlab run --cgroup DIR") && h.contains(ENV),
            "{h}"
        );
        assert!(h.contains("cgroup v1") && h.contains("cgroup v2"), "{h}");
    }
}
