//! What the CLI tests share: the real `evlab` binary, a docroot, `evlab serve` started on port 0
//! with its address read back from the first line, and whether a Debian tool is installed.
//!
//! Every long-running child is a [`ProcessGroup`] (see `evlab_lab::run::procs`): a process group of
//! its own, stopped as a group and checked gone, also when a test fails or panics (the guard's
//! drop) or its process is killed past the timeout (the parent-death signal).
#![allow(dead_code)] // each test binary uses its own part

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub use evlab_lab::run::procs::ProcessGroup;

pub mod http;

pub const BIN: &str = env!("CARGO_BIN_EXE_evlab");

pub struct Serve {
    pub child: ProcessGroup,
    pub addr: SocketAddr,
    pub dir: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let left = self.child.stop(Duration::from_secs(5));
        let _ = std::fs::remove_dir_all(&self.dir);
        // Not while unwinding from a failed assertion: that would abort and hide it.
        if !std::thread::panicking() {
            assert!(left.is_empty(), "evlab serve left {left:?} running");
        }
    }
}

/// Spawns `cmd` in a process group of its own; stopped as a group when dropped.
pub fn spawn(cmd: &mut Command) -> ProcessGroup {
    ProcessGroup::spawn(cmd).unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
}

pub fn docroot(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("evlab-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("one"), b"a").unwrap();
    std::fs::write(dir.join("index.html"), b"<h1>hi</h1>\n").unwrap();
    dir
}

pub fn serve(tag: &str, extra: &[&str], setup: impl FnOnce(&mut Command)) -> Serve {
    let dir = docroot(tag);
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(&dir)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    setup(&mut cmd);
    let mut child = spawn(&mut cmd);
    let addr = listening_addr(&mut BufReader::new(child.stdout.take().unwrap()))
        .unwrap_or_else(|line| panic!("first line was {line:?}"));
    Serve { child, addr, dir }
}

/// The address a process says it listens on in its first line, "listening on ADDR" (`evlab
/// serve`, `evlab proxy`, `uring_pattern proxy`); else that line as it was.
pub fn listening_addr(from: &mut impl BufRead) -> Result<SocketAddr, String> {
    let mut line = String::new();
    let _ = from.read_line(&mut line);
    line.trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok())
        .ok_or(line)
}

/// Sends SIGTERM to `child` and waits at most 10 s for it to exit.
pub fn sigterm_and_wait(child: &mut Child) -> ExitStatus {
    // It may have exited already.
    let _ = evlab_sys::kill(child.id(), libc::SIGTERM);
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "did not exit on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits at most `limit` for `child` to exit; kills it and fails if it does not.
pub fn wait_within(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if t0.elapsed() >= limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Checks that the process `pid`, already reaped, is gone: signal 0 finds no such process.
pub fn assert_gone(pid: u32) {
    let e = evlab_sys::kill(pid, 0).expect_err("the process is still there");
    assert_eq!(e.raw_os_error(), Some(libc::ESRCH), "pid {pid}: {e}");
}

/// Stops `evlab serve` with SIGTERM, checks it exited cleanly and is gone.
pub fn stop_serve(s: &mut Serve) {
    let st = sigterm_and_wait(&mut s.child);
    assert!(st.success(), "evlab serve exited with {st:?}");
    assert_gone(s.child.id());
}

/// Test hosts on this machine: network namespaces on a bridge of their own, each with its own
/// sshd (scripts/netns-hosts.sh), taken down and checked gone however the test ends.
pub struct NetnsHosts {
    pub dir: PathBuf,
    pub tag: String,
    n: usize,
}

impl NetnsHosts {
    /// Whether this machine can make them (root, sshd); else `what`'s test prints why and
    /// skips, or fails where EVLAB_REQUIRE asks for `netns`.
    pub fn usable(what: &str) -> bool {
        use evlab_poll::testing::{require, root};
        require(
            "netns",
            root(),
            &format!("{what}: not root — network namespaces need root (CI runs as root)"),
        ) && require(
            "netns",
            std::path::Path::new("/usr/sbin/sshd").exists(),
            &format!("{what}: no /usr/sbin/sshd (scripts/setup.sh installs openssh-server)"),
        )
    }

    /// `n` hosts, named by `letter` and this process (so that sets of several tests and
    /// binaries coexist); returns them and their hosts file.
    pub fn up(letter: char, n: usize) -> (NetnsHosts, PathBuf) {
        Self::up_tagged(&format!("{letter}{}", std::process::id() % 100_000), n)
    }

    /// `n` hosts under the names' prefix `tag` (1-6 lower-case letters or digits).
    pub fn up_tagged(tag: &str, n: usize) -> (NetnsHosts, PathBuf) {
        Self::up_with(tag, n, None)
    }

    /// Hosts with these roles in order (`server`, `origin`, `client`), named by `letter` and
    /// this process.
    pub fn up_roles(letter: char, roles: &[&str]) -> (NetnsHosts, PathBuf) {
        let tag = format!("{letter}{}", std::process::id() % 100_000);
        Self::up_with(&tag, roles.len(), Some(&roles.join(",")))
    }

    fn up_with(tag: &str, n: usize, roles: Option<&str>) -> (NetnsHosts, PathBuf) {
        let tag = tag.to_string();
        let dir = std::env::temp_dir().join(format!("evlab-netns-{tag}"));
        let h = NetnsHosts {
            dir: dir.clone(),
            tag: tag.clone(),
            n,
        };
        let mut args = vec!["up".to_string(), n.to_string()];
        if let Some(r) = roles {
            args.extend(["--roles".to_string(), r.to_string()]);
        }
        args.push(dir.to_str().unwrap().to_string());
        let o = Command::new(workspace().join("scripts/netns-hosts.sh"))
            .args(&args)
            .env("EVLAB_NETNS_TAG", &tag)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout);
        let file = PathBuf::from(out.lines().last().unwrap().trim());
        assert!(file.is_file(), "{out}");
        (h, file)
    }

    /// The evlab processes running in host `i`'s namespace: pid and command line.
    pub fn evlab_on(&self, i: usize) -> Vec<(u32, String)> {
        self.procs_on(i, &["evlab"])
    }

    /// The processes named one of `comms` running in host `i`'s namespace: pid and command
    /// line.
    pub fn procs_on(&self, i: usize, comms: &[&str]) -> Vec<(u32, String)> {
        let ns = format!("{}-h{i}", self.tag);
        let o = Command::new("ip")
            .args(["netns", "pids", &ns])
            .output()
            .unwrap();
        let mut found = vec![];
        for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comms.contains(&comm.trim()) {
                let args =
                    std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                found.push((pid.parse().unwrap(), args.replace('\0', " ")));
            }
        }
        found
    }

    /// The evlab processes still running in any of the namespaces.
    pub fn evlab_left(&self) -> Vec<String> {
        (0..self.n)
            .flat_map(|i| {
                self.evlab_on(i)
                    .into_iter()
                    .map(move |(pid, args)| format!("h{i}: {pid} {args}"))
            })
            .collect()
    }

    /// Host `i`'s address (from the hosts file).
    pub fn address(&self, i: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("hosts.toml")).unwrap();
        let a = text
            .lines()
            .filter_map(|l| l.strip_prefix("address = "))
            .nth(i)
            .unwrap();
        a.trim_matches('"').to_string()
    }
}

impl NetnsHosts {
    /// Adds `lines` to host `i`'s sshd_config (`SetEnv …`: what every session there gets) and
    /// has its sshd read it again (SIGHUP: it re-executes itself); returns once it answers.
    pub fn sshd_config_add(&self, i: usize, lines: &str) {
        use std::io::Write;
        let h = self.dir.join(format!("h{i}"));
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(h.join("sshd_config"))
            .unwrap();
        writeln!(f, "{lines}").unwrap();
        let pid = std::fs::read_to_string(h.join("sshd.pid")).unwrap();
        let st = Command::new("kill")
            .args(["-HUP", pid.trim()])
            .status()
            .unwrap();
        assert!(st.success());
        let t0 = std::time::Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let ok = Command::new("ssh")
                .arg("-F")
                .arg(self.dir.join("ssh_config"))
                .args([&format!("h{i}"), "true"])
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap()
                .status
                .success();
            if ok {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "sshd of h{i} did not come back"
            );
        }
    }

    /// Puts host `i`'s sshd, and so every session it starts from now on, in a cgroup of its own
    /// with a CPU quota of `share` of one CPU; the group goes (checked gone) with the guard.
    pub fn cpu_quota(&self, i: usize, share: f64) -> CpuQuotaGroup {
        let (root, version) = evlab_lab::run::cgroup::cpu_controller().unwrap();
        let dir = root.join(format!("evlab-test-{}-h{i}", self.tag));
        std::fs::create_dir(&dir).unwrap();
        let period = 100_000u64;
        let quota = (share * period as f64) as u64;
        if version == 2 {
            std::fs::write(dir.join("cpu.max"), format!("{quota} {period}")).unwrap();
        } else {
            std::fs::write(dir.join("cpu.cfs_period_us"), period.to_string()).unwrap();
            std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string()).unwrap();
        }
        let g = CpuQuotaGroup { dir, root };
        let pid = std::fs::read_to_string(self.dir.join(format!("h{i}/sshd.pid"))).unwrap();
        std::fs::write(g.dir.join("cgroup.procs"), pid.trim()).unwrap();
        g
    }
}

/// A test's cgroup with a CPU quota: on drop, whatever is in it goes back to the root group and
/// it is removed, checked gone.
pub struct CpuQuotaGroup {
    pub dir: PathBuf,
    root: PathBuf,
}

impl Drop for CpuQuotaGroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.split_whitespace() {
                let _ = std::fs::write(self.root.join("cgroup.procs"), pid);
            }
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !std::thread::panicking() {
            panic!("cgroup {} left", self.dir.display());
        }
    }
}

impl Drop for NetnsHosts {
    fn drop(&mut self) {
        let o = Command::new(workspace().join("scripts/netns-hosts.sh"))
            .args(["down", self.dir.to_str().unwrap()])
            .env("EVLAB_NETNS_TAG", &self.tag)
            .output()
            .unwrap();
        let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
        let left = String::from_utf8_lossy(&ns.stdout);
        if !std::thread::panicking() {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert!(
                !left.contains(&format!("{}-h", self.tag)),
                "namespaces left: {left}"
            );
            assert!(!self.dir.exists());
        }
    }
}

/// The repository's root.
pub fn workspace() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The latencies (µs) of an `evlab load --latencies` CSV, checked row by row: its header, and
/// each row's three fields.
pub fn latencies_csv(text: &str) -> Vec<u64> {
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("due_us,latency_us,status"),
        "{text:.200}"
    );
    lines
        .map(|l| {
            let f: Vec<u64> = l.split(',').map(|x| x.parse().unwrap()).collect();
            assert_eq!(f.len(), 3, "{l}");
            assert_eq!(f[2], 200, "{l}");
            f[1]
        })
        .collect()
}

/// Checks a report's latency percentiles (ms, from its histogram: p50, p90, p99, p99.9 and
/// max) against the raw latencies' own (µs, nearest rank: the ⌈q·n⌉-th smallest): equal within
/// the histogram's precision (3 significant figures: a bucket is at most 1/1024 of its value
/// wide).
pub fn assert_percentiles_match(hist_ms: [f64; 5], raw_us: &mut [u64]) {
    raw_us.sort_unstable();
    let n = raw_us.len();
    assert!(n > 0);
    for (hist, q) in hist_ms.into_iter().zip([0.5, 0.9, 0.99, 0.999, 1.0]) {
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        let raw = raw_us[rank - 1] as f64;
        let hist = hist * 1000.0;
        assert!(
            (hist - raw).abs() <= raw / 1024.0 + 1.0,
            "the histogram's {q} quantile is {hist} µs, the {n} raw samples' is {raw} µs"
        );
    }
}

/// A test's scratch directory, `<temp>/<name>-<pid>`, emptied when made and removed when the
/// test ends, pass or fail; a test that passes removes it with [`Scratch::finish`], which
/// checks that nothing is left.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Scratch {
    pub fn finish(self) {
        std::fs::remove_dir_all(&self.0).unwrap();
        assert!(!self.0.exists(), "the scratch directory is left behind");
    }
}

pub fn scratch(name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Scratch(d)
}
