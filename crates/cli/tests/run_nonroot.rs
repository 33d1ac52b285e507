//! `evlab run` as an ordinary user: a new system user is made for each test (removed afterwards,
//! also when the test fails), given a cgroup the way the README says root gives one, and runs a
//! tiny budgeted experiment; without a group the run must stop before measuring anything and
//! say exactly what root runs, and an experiment without a budget must still run.
//!
//! Needs root (to make the user and the group). Not root: the tests print why they skip, and
//! fail instead when EVLAB_REQUIRE is `all` or names `root` (CI sets `all`).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use evlab_lab::model::results::Status;
use evlab_lab::run::cgroup;

mod common;

use evlab_poll::testing::require;

/// Root, or a printed reason to skip (a failure where root is required).
fn root_or_skip(test: &str) -> bool {
    require(
        "root",
        evlab_poll::testing::root(),
        &format!(
            "{test}: not root — making a system user and a cgroup for it needs root (run the \
             tests as root, e.g. in CI)"
        ),
    )
}

/// Runs a root-side tool, retrying while another process holds /etc/passwd's lock.
fn admin(argv: &[&str]) -> Output {
    let mut last = None;
    for _ in 0..40 {
        let out = Command::new(argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {argv:?}: {e}"));
        if out.status.success() {
            return out;
        }
        let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
        let busy = err.contains("lock") || err.contains("try again");
        last = Some(out);
        if !busy {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let out = last.unwrap();
    panic!(
        "{argv:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn getent(db: &str, name: &str) -> bool {
    Command::new("getent")
        .args([db, name])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The processes whose real user is `uid`.
fn processes_of(uid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let real = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|u| u.parse::<u32>().ok());
        if real == Some(uid) {
            out.push(pid);
        }
    }
    out
}

/// A system user made for one test, with a scratch directory it owns (holding a copy of the
/// binary, mode 0755, its experiment and its results). Dropped: its processes killed (by
/// pid), the user and its group deleted, the directory removed — and all of that checked.
struct TestUser {
    name: String,
    uid: u32,
    dir: PathBuf,
    evlab: PathBuf,
}

impl TestUser {
    fn new(tag: &str) -> TestUser {
        let name = format!("evlabnr{tag}{}", std::process::id());
        assert!(!getent("passwd", &name), "user {name} exists already");
        admin(&[
            "useradd",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            &name,
        ]);
        let id = admin(&["id", "-u", &name]);
        let uid = String::from_utf8_lossy(&id.stdout).trim().parse().unwrap();
        // The scratch directory: under the temp dir if the user can reach it, else /tmp.
        let base = std::env::temp_dir();
        let reachable = base
            .ancestors()
            .all(|a| std::fs::metadata(a).is_ok_and(|m| m.mode() & 0o001 != 0));
        let base = if reachable {
            base
        } else {
            PathBuf::from("/tmp")
        };
        let mut user = TestUser {
            name,
            uid,
            dir: base.join(format!("evlab-nonroot-{tag}-{}", std::process::id())),
            evlab: PathBuf::new(),
        };
        // From here on the guard cleans up, whatever fails.
        let _ = std::fs::remove_dir_all(&user.dir);
        std::fs::create_dir_all(&user.dir).unwrap();
        // The built binary may sit where the new user cannot read it: a copy, 0755.
        user.evlab = user.dir.join("evlab");
        std::fs::copy(common::BIN, &user.evlab).unwrap();
        std::fs::set_permissions(&user.evlab, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&user.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        admin(&["chown", &user.name, &user.dir.display().to_string()]);
        user
    }

    /// `evlab run SPEC --out DIR/out extra…` as this user (from `root_shell_into`, a cgroup v2
    /// group root moves the shell into first, as the README says), with no EVLAB_CGROUP; at
    /// most 60 s. Afterwards none of the user's processes may be left.
    fn run(&self, spec: &str, extra: &[&str], root_shell_into: Option<&Path>) -> Output {
        let f = self.dir.join("spec.toml");
        std::fs::write(&f, spec).unwrap();
        let out_dir = self.dir.join("out");
        let _ = std::fs::remove_dir_all(&out_dir);
        let mut argv: Vec<String> = vec![
            "runuser".into(),
            "-u".into(),
            self.name.clone(),
            "--".into(),
            self.evlab.display().to_string(),
            "run".into(),
            f.display().to_string(),
            "--out".into(),
            out_dir.display().to_string(),
        ];
        argv.extend(extra.iter().map(|s| s.to_string()));
        let mut cmd = match root_shell_into {
            Some(g) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!(
                        "echo $$ > {}/cgroup.procs && exec \"$@\"",
                        g.display()
                    ))
                    .arg("sh")
                    .args(&argv);
                c
            }
            None => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]);
                c
            }
        };
        let child = cmd
            .current_dir(&self.dir)
            .env_remove(cgroup::ENV)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let uid = self.uid;
        // Past 60 s the run is stopped (runuser and every process of the user, by pid).
        let watchdog = std::thread::spawn(move || {
            let t = Instant::now();
            while Path::new(&format!("/proc/{pid}/stat")).exists() {
                if t.elapsed() > Duration::from_secs(60) {
                    for p in processes_of(uid).into_iter().chain([pid]) {
                        // The test's own child and user.
                        let _ = evlab_sys::kill(p, libc::SIGKILL);
                    }
                    return true;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            false
        });
        let out = child.wait_with_output().unwrap();
        let timed_out = watchdog.join().unwrap();
        assert!(!timed_out, "the run took over 60 s: {}", text(&out));
        let left = self.wait_no_processes(Duration::from_secs(5));
        assert!(
            left.is_empty(),
            "the run left processes of {}: {left:?}",
            self.name
        );
        out
    }

    /// Waits until the user has no process; returns those still there.
    fn wait_no_processes(&self, within: Duration) -> Vec<u32> {
        let t = Instant::now();
        loop {
            let left = processes_of(self.uid);
            if left.is_empty() || t.elapsed() > within {
                return left;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        for pid in processes_of(self.uid) {
            // This test user's processes only.
            let _ = evlab_sys::kill(pid, libc::SIGKILL);
        }
        let left = self.wait_no_processes(Duration::from_secs(5));
        let _ = std::fs::remove_dir_all(&self.dir);
        let mut deleted = false;
        for _ in 0..40 {
            let ok = Command::new("userdel")
                .arg(&self.name)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok || !getent("passwd", &self.name) {
                deleted = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        if !std::thread::panicking() {
            assert!(
                left.is_empty(),
                "{} still has processes {left:?}",
                self.name
            );
            assert!(deleted, "cannot delete user {}", self.name);
            assert!(!getent("passwd", &self.name), "user {} is left", self.name);
            assert!(!getent("group", &self.name), "group {} is left", self.name);
            assert!(!self.dir.exists(), "{} is left", self.dir.display());
        }
    }
}

/// A cgroup root made and gave to the user, as the README says: on v1 `mkdir` and `chown -R`;
/// on v2 also the cpu controller handed down and a `shell` group the run is started in.
/// Dropped: every group under it removed (the run removes its own; anything left is a failure).
struct UserGroup {
    dir: PathBuf,
    v2: bool,
}

impl UserGroup {
    fn new(root: &Path, v2: bool, user: &TestUser) -> UserGroup {
        let g = UserGroup {
            dir: root.join(format!("evlab-nonroot-{}", std::process::id())),
            v2,
        };
        if v2 {
            std::fs::create_dir_all(g.dir.join("shell")).unwrap();
            std::fs::write(root.join("cgroup.subtree_control"), "+cpu").unwrap();
            std::fs::write(g.dir.join("cgroup.subtree_control"), "+cpu").unwrap();
        } else {
            std::fs::create_dir_all(&g.dir).unwrap();
        }
        admin(&["chown", "-R", &user.name, &g.dir.display().to_string()]);
        g
    }

    /// The groups under it other than v2's `shell`.
    fn children(&self) -> Vec<PathBuf> {
        std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().is_dir() && e.file_name() != "shell")
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for UserGroup {
    fn drop(&mut self) {
        let left = self.children();
        for c in &left {
            let _ = std::fs::remove_dir(c);
        }
        if self.v2 {
            let _ = std::fs::remove_dir(self.dir.join("shell"));
        }
        let _ = std::fs::remove_dir(&self.dir);
        if !std::thread::panicking() {
            assert!(left.is_empty(), "the run left groups {left:?}");
            assert!(!self.dir.exists(), "{} is left", self.dir.display());
        }
    }
}

/// The one point of an experiment, from its summary.json.
fn the_point(out: &Path) -> evlab_lab::model::results::PointResult {
    let text = std::fs::read_to_string(out.join("summary.json"))
        .unwrap_or_else(|e| panic!("{}: {e}", out.join("summary.json").display()));
    let summary: evlab_lab::model::results::Summary = serde_json::from_str(&text).unwrap();
    let mut points = summary.points;
    assert_eq!(points.len(), 1, "{text}");
    points.remove(0)
}

const TINY: &str = "name = \"nonroot\"\nmechanisms = [\"epoll-et\"]\nrates = [100]\nidle = [0]\n\
                    duration_s = 0.5\ntrials = 1\n";

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn an_ordinary_user_runs_a_budgeted_experiment_in_a_group_root_gave_it() {
    if !root_or_skip("an_ordinary_user_runs_a_budgeted_experiment_in_a_group_root_gave_it") {
        return;
    }
    let (root, version) = match cgroup::cpu_controller() {
        Ok(c) => c,
        Err(why) => {
            require(
                "cgroup",
                false,
                &format!("no CPU budget on this machine: {why}"),
            );
            return;
        }
    };
    let user = TestUser::new("a");
    let group = UserGroup::new(&root, version == 2, &user);
    let spec = format!("{TINY}server_cpu_budget = 0.25\n");
    let g = group.dir.display().to_string();
    let shell = group.v2.then(|| group.dir.join("shell"));
    let o = user.run(&spec, &["--cgroup", &g], shell.as_deref());
    println!("cgroup v{version}, group {g}\n{}", text(&o));
    assert!(o.status.success(), "{}", text(&o));
    let out = user.dir.join("out");
    for f in ["summary.json", "report.md", "report.html", "points.csv"] {
        assert!(out.join(f).is_file(), "no {f}: {}", text(&o));
        let owner = std::fs::metadata(out.join(f)).unwrap().uid();
        assert_eq!(owner, user.uid, "{f} was written by uid {owner}");
    }
    let p = the_point(&out);
    assert_eq!(p.status, Status::Ok, "{p:?}");
    assert_eq!(p.server_cpu_budget, Some(0.25), "{p:?}");
    let commands = p.commands.join("\n");
    assert!(
        commands.contains(&g),
        "the commands name the group: {commands}"
    );
    if !p.flags.is_empty() {
        println!("the point is ok but flagged: {:?}", p.flags);
    }
    assert!(group.children().is_empty(), "{:?}", group.children());
}

#[test]
fn an_ordinary_user_without_a_group_is_told_what_root_runs_and_runs_without_a_budget() {
    if !root_or_skip(
        "an_ordinary_user_without_a_group_is_told_what_root_runs_and_runs_without_a_budget",
    ) {
        return;
    }
    let user = TestUser::new("b");
    let spec = format!("{TINY}server_cpu_budget = 0.25\n");
    match cgroup::cpu_controller() {
        Err(why) => {
            require(
                "cgroup",
                false,
                &format!(
                    "no CPU controller here ({why}): the default group's refusal is not checked"
                ),
            );
        }
        Ok((root, version)) => {
            // The default group, looked for by itself: none that this user may write.
            let o = user.run(&spec, &[], None);
            println!("cgroup v{version}, default group\n{}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success(), "{}", text(&o));
            let v1 = root.join("evlab").display().to_string();
            let hint = if version == 1 {
                format!("mkdir -p {v1} && chown -R {} {v1}", user.name)
            } else {
                format!("chown -R {} {}", user.name, root.join("evlab").display())
            };
            assert!(err.contains(&hint), "no `{hint}` in: {}", text(&o));
            assert!(err.contains("server_cpu_budget: no cgroup to put the server in"));
            assert!(err.contains("evlab run --cgroup DIR") && err.contains("EVLAB_CGROUP=DIR"));
            assert!(
                err.contains("cgroup v1") && err.contains("cgroup v2"),
                "{err}"
            );
            // Before anything was measured: no calibration, no point, no summary.
            assert!(
                !err.contains("point 1/1") && !err.contains("calibrat"),
                "{err}"
            );
            assert!(!user.dir.join("out/summary.json").exists());
        }
    }
    // A group named that does not exist: refused the same way, naming it.
    let missing = format!("/sys/fs/cgroup/cpu/evlab-missing-{}", std::process::id());
    let o = user.run(&spec, &["--cgroup", &missing], None);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        err.contains(&format!("there is no group {missing}")),
        "{}",
        text(&o)
    );
    assert!(err.contains(&format!("chown -R {} ", user.name)), "{err}");
    assert!(!user.dir.join("out/summary.json").exists());
    // Without a budget the same user measures as before.
    let o = user.run(TINY, &[], None);
    println!("no budget\n{}", text(&o));
    assert!(o.status.success(), "{}", text(&o));
    let p = the_point(&user.dir.join("out"));
    assert_eq!(p.status, Status::Ok, "{p:?}");
    assert!(p.server_cpu_budget.is_none(), "{p:?}");
    // Idle connections past what this user's descriptor limit allows (2,000,000: past any
    // fs.nr_open a user could be given) are left out, the report saying the limit and how to
    // raise it; the rest is measured.
    let o = user.run(
        &TINY.replace("idle = [0]", "idle = [0, 2000000]"),
        &[],
        None,
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = user.dir.join("out");
    let s: evlab_lab::model::results::Summary =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s.points.len(), 1);
    assert_eq!(s.points[0].idle, 0);
    assert_eq!(s.skipped.len(), 1, "{:?}", s.skipped);
    assert_eq!(s.skipped[0].series, "2,000,000 idle connections");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("2,000,000 idle connections: need 2,001,200 descriptors")
            && md.contains("the limit evlab run's children get here is")
            && md.contains("/etc/security/limits.conf"),
        "{md}"
    );
}
