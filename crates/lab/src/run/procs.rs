//! Child processes: started pinned to CPUs in a process group of their own, watched through
//! their output, measured through /proc, and stopped with SIGTERM then SIGKILL.
//!
//! Every child gets its own process group so that (a) a terminal's Ctrl-C reaches only the
//! runner, which then stops the children in order and still writes its results, and (b) a
//! peer's worker processes are stopped and accounted with it. [`ProcessGroup`] is the one way
//! a long-lived child is run, here and in the tests: started as a group, stopped as a group,
//! checked gone, on every path (a guard stops it when dropped).

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use evlab_sys as sys;

use evlab_reason::model::text::shell_line;
use evlab_reason::LabError;

/// Set by SIGINT/SIGTERM once [`install_interrupt_handler`] ran.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Ctrl-C sets a flag; the runner stops the current point's children and writes what is done.
pub fn install_interrupt_handler() {
    if let Err(e) = sys::route_signals(&[libc::SIGINT, libc::SIGTERM], &INTERRUPTED, &[]) {
        eprintln!("evlab: cannot catch SIGINT/SIGTERM ({e}); Ctrl-C will stop the run at once");
    }
}

pub fn online_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

pub struct Child {
    pub name: String,
    pub pid: u32,
    pub command: String,
    /// What was started: the argv after `taskset -c CPUS` when pinned ([`pinned_argv`]).
    pub argv: Vec<String>,
    inner: ProcessGroup,
    lines: Receiver<String>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

/// The descriptor limit children are given where the runner may raise it.
const CHILD_NOFILE: u64 = 65536;

/// `CHILD_NOFILE` if this process may raise its hard limit that far (then children get it), else 0.
pub fn child_nofile_if_raisable() -> usize {
    let Ok((soft, hard)) = sys::nofile_limit() else {
        return 0;
    };
    if hard >= CHILD_NOFILE {
        return CHILD_NOFILE as usize;
    }
    // Try on ourselves, then put the old limit back (lowering a hard limit is always allowed).
    if sys::set_nofile_limit(soft, CHILD_NOFILE).is_ok() {
        let _ = sys::set_nofile_limit(soft, hard);
        return CHILD_NOFILE as usize;
    }
    0
}

/// `argv` as a child pinned to `cpus` is shown: after `taskset -c CPUS` (none: as it is).
pub fn pinned_argv(cpus: &[usize], argv: &[String]) -> Vec<String> {
    let mut shown = Vec::new();
    if !cpus.is_empty() {
        let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
        shown.extend(["taskset".to_string(), "-c".to_string(), list.join(",")]);
    }
    shown.extend(argv.iter().cloned());
    shown
}

impl Child {
    /// Starts `argv` pinned to `cpus` (none: not pinned). The shell form of the command, with a
    /// `taskset` prefix when pinned, is kept for the report.
    pub fn spawn(
        name: &str,
        argv: &[String],
        cpus: &[usize],
        cwd: Option<&Path>,
    ) -> Result<Child, LabError> {
        Child::spawn_in(name, argv, cpus, cwd, None)
    }

    /// As `spawn`, and inside `budget`'s cgroup (joined before exec, so its whole tree is in).
    pub fn spawn_in(
        name: &str,
        argv: &[String],
        cpus: &[usize],
        cwd: Option<&Path>,
        budget: Option<&crate::run::cgroup::CpuBudget>,
    ) -> Result<Child, LabError> {
        let cgroup_fd = budget.map(|b| b.procs_fd());
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(d) = cwd {
            cmd.current_dir(d);
        }
        // Every child gets the same, higher descriptor limit where we may raise it (as root):
        // 10,000 idle connections plus the load must fit, and lighttpd accepts at most half its
        // limit as connections. Where we may not, the limit stays as it is. The cgroup's
        // descriptor stays open while the child starts: `budget` outlives this call.
        sys::ChildSetup {
            nofile: Some(CHILD_NOFILE),
            nofile_cap: None,
            cgroup_procs: cgroup_fd,
            cpus: cpus.to_vec(),
            parent_death_signal: None, // ProcessGroup::spawn sets it
        }
        .apply_to(&mut cmd);
        let mut inner = ProcessGroup::spawn(&mut cmd)
            .map_err(|e| LabError::Point(format!("cannot start {name} ({}): {e}", argv[0])))?;
        let pid = inner.pid();
        let (tx, lines) = mpsc::channel();
        let out = inner.stdout.take().expect("piped");
        std::thread::spawn(move || {
            // Keep draining after the runner stops listening, so the child never blocks on a full pipe.
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr_tail.clone();
        let err = inner.stderr.take().expect("piped");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                if t.len() == 40 {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
        let shown = pinned_argv(cpus, argv);
        Ok(Child {
            name: name.to_string(),
            pid,
            command: shell_line(&shown),
            argv: shown,
            inner,
            lines,
            stderr_tail,
        })
    }

    /// The last lines the child wrote on stderr (for a failed point's reason).
    pub fn stderr_tail(&self, n: usize) -> String {
        let t = self.stderr_tail.lock().unwrap_or_else(|e| e.into_inner());
        let skip = t.len().saturating_sub(n);
        t.iter().skip(skip).cloned().collect::<Vec<_>>().join(" | ")
    }

    /// Waits for a stdout line satisfying `pred`; fails on timeout, exit, or interrupt.
    pub fn wait_line(
        &mut self,
        pred: impl Fn(&str) -> bool,
        timeout: Duration,
        what: &str,
    ) -> Result<String, LabError> {
        let end = Instant::now() + timeout;
        loop {
            if interrupted() {
                return Err(LabError::Point("interrupted".into()));
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(LabError::Point(format!(
                    "{}: no {what} within {:.0} s; stderr: {}",
                    self.name,
                    timeout.as_secs_f64(),
                    self.stderr_tail(5)
                )));
            }
            match self
                .lines
                .recv_timeout(left.min(Duration::from_millis(100)))
            {
                Ok(l) if pred(&l) => return Ok(l),
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(50));
                    let status = self.inner.try_wait().ok().flatten();
                    return Err(LabError::Point(format!(
                        "{} exited before {what} ({}); stderr: {}",
                        self.name,
                        status
                            .map(|s| s.to_string())
                            .unwrap_or("closed stdout".into()),
                        self.stderr_tail(5)
                    )));
                }
            }
        }
    }

    /// Every stdout line not read yet, until the child closes its stdout (or `timeout`): what
    /// an exited child wrote after the lines `wait_line` took.
    pub fn rest_lines(&mut self, timeout: Duration) -> Vec<String> {
        let end = Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => out.push(l),
                Err(_) => return out,
            }
        }
    }

    /// Waits for the child to exit by itself, up to `timeout`; `Ok(None)` on timeout.
    pub fn wait_exit(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<std::process::ExitStatus>, LabError> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(s) = self.inner.try_wait()? {
                return Ok(Some(s));
            }
            if Instant::now() >= end || interrupted() {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn alive(&mut self) -> bool {
        !self.inner.exited()
    }

    /// CPU time of the child and all its descendants, in seconds.
    pub fn cpu_seconds(&self) -> f64 {
        tree_cpu_seconds(self.pid)
    }

    /// Stops the child's group; see [`ProcessGroup::stop`]. (Dropping a `Child` stops it too.)
    pub fn stop(&mut self, grace: Duration) -> Vec<u32> {
        self.inner.stop(grace)
    }
}

/// A child process leading a process group of its own, stopped as a group and checked gone.
///
/// - [`ProcessGroup::spawn`] starts the command with `process_group(0)`, so that a terminal's
///   Ctrl-C reaches only the parent and the child's own children (a peer's workers) are
///   signalled with it, and with SIGKILL as its parent-death signal, so that a parent killed
///   outright (a test past its timeout) takes it along.
/// - [`ProcessGroup::stop`] sends SIGTERM to the group, SIGKILL after a bounded wait, and then
///   checks that no process of the group is alive, nor any descendant seen while it ran (one
///   that made a group or session of its own).
/// - Dropped unstopped (a failed assertion, a panic, an early return), it stops itself with a
///   short grace: no path leaves a process behind.
///
/// It dereferences to the `std::process::Child` for its pipes and exit status.
pub struct ProcessGroup {
    child: std::process::Child,
    stopped: bool,
}

impl ProcessGroup {
    /// Spawns `cmd` as the leader of a new process group. The parent-death signal is tied to
    /// the spawning thread: spawn from a thread that outlives the child (a test's own thread).
    pub fn spawn(cmd: &mut Command) -> io::Result<ProcessGroup> {
        cmd.process_group(0);
        sys::ChildSetup {
            parent_death_signal: Some(libc::SIGKILL),
            ..Default::default()
        }
        .apply_to(cmd);
        Ok(ProcessGroup {
            child: cmd.spawn()?,
            stopped: false,
        })
    }

    /// The leader's pid, which is also the group's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the leader has exited (then it is reaped).
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM to the group, SIGKILL to it if the leader has not exited after `grace`; then
    /// waits, at most `grace` again, until no process of the group and no descendant seen
    /// during the stop is alive. Returns the pids still alive after that (they are then
    /// killed): empty for a clean stop. A leader that exited by itself gets no signal, but its
    /// group is checked all the same.
    pub fn stop(&mut self, grace: Duration) -> Vec<u32> {
        self.stopped = true;
        let pgid = self.pid();
        let mut seen: HashSet<Seen> = tree_snapshot(pgid).into_iter().collect();
        if !self.exited() {
            signal_group(pgid, libc::SIGTERM);
            let end = Instant::now() + grace;
            while !self.exited() {
                if Instant::now() >= end {
                    seen.extend(tree_snapshot(pgid));
                    signal_group(pgid, libc::SIGKILL);
                    let _ = self.child.wait();
                    break;
                }
                // Children it forks while stopping are watched too.
                seen.extend(tree_snapshot(pgid));
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // The leader is reaped; the rest of its group, and any descendant that left the group,
        // must be gone too.
        let end = Instant::now() + grace;
        loop {
            let left = remaining(pgid, &seen);
            if left.is_empty() {
                return left;
            }
            if Instant::now() >= end {
                signal_group(pgid, libc::SIGKILL);
                for s in seen.iter().filter(|s| s.alive()) {
                    let _ = sys::kill(s.pid, libc::SIGKILL);
                }
                let t = Instant::now();
                while !remaining(pgid, &seen).is_empty() && t.elapsed() < Duration::from_secs(2) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                return left;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Live members of the group `pgid` and live processes of `seen`, sorted.
fn remaining(pgid: u32, seen: &HashSet<Seen>) -> Vec<u32> {
    let mut left = group_members(pgid);
    left.extend(seen.iter().filter(|s| s.alive()).map(|s| s.pid));
    left.sort_unstable();
    left.dedup();
    left
}

impl std::ops::Deref for ProcessGroup {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.child
    }
}

impl std::ops::DerefMut for ProcessGroup {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.child
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if !self.stopped {
            let left = self.stop(Duration::from_secs(2));
            if !left.is_empty() {
                eprintln!(
                    "process group {}: {left:?} outlived the stop and were killed",
                    self.pid()
                );
            }
        }
    }
}

/// A process seen at one moment: its pid and start time, so that a pid the kernel has since
/// given to another process is not mistaken for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Seen {
    pub pid: u32,
    start: u64,
}

impl Seen {
    /// `pid` as it is now, if it is alive.
    pub fn of(pid: u32) -> Option<Seen> {
        read_stat(pid).filter(|s| !s.dead()).map(|s| Seen {
            pid,
            start: s.start,
        })
    }

    /// Whether that same process is still alive (a zombie is not: it has exited, unreaped).
    pub fn alive(&self) -> bool {
        read_stat(self.pid).is_some_and(|s| s.start == self.start && !s.dead())
    }
}

/// `pid` and its descendants alive now.
pub fn tree_snapshot(pid: u32) -> Vec<Seen> {
    process_tree(pid).into_iter().filter_map(Seen::of).collect()
}

fn signal_group(pgid: u32, sig: libc::c_int) {
    // The group may be gone already (ESRCH): nothing left to stop.
    let _ = sys::kill_process_group(pgid, sig);
}

struct ProcStat {
    ppid: u32,
    pgrp: u32,
    state: char,
    ticks: u64,
    /// Clock ticks from boot to the process's start.
    start: u64,
}

impl ProcStat {
    /// A zombie (exited, not reaped yet) or dead process.
    fn dead(&self) -> bool {
        self.state == 'Z' || self.state == 'X'
    }
}

fn read_stat(pid: u32) -> Option<ProcStat> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        ticks: f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Live (non-zombie) processes whose process group is `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&p| read_stat(p).is_some_and(|s| s.pgrp == pgid && !s.dead()))
        .collect()
}

/// `pid` and its descendants.
pub fn process_tree(pid: u32) -> Vec<u32> {
    let mut kids: HashMap<u32, Vec<u32>> = HashMap::new();
    for p in all_pids() {
        if let Some(s) = read_stat(p) {
            kids.entry(s.ppid).or_default().push(p);
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        out.push(p);
        if let Some(k) = kids.get(&p) {
            todo.extend(k);
        }
    }
    out
}

fn clock_ticks() -> f64 {
    sys::clock_ticks_per_second().map_or(100.0, |t| t as f64)
}

/// Nanoseconds on CPU of every thread of `pid` from schedstat (finer than the tick counts of
/// /proc/PID/stat, which matters for points of a few seconds); falls back to ticks.
fn process_cpu_seconds(pid: u32) -> f64 {
    let mut ns = 0u64;
    let mut any = false;
    if let Ok(d) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for e in d.flatten() {
            let p = e.path().join("schedstat");
            if let Ok(s) = std::fs::read_to_string(p) {
                if let Some(v) = s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    ns += v;
                    any = true;
                }
            }
        }
    }
    if any {
        return ns as f64 / 1e9;
    }
    read_stat(pid).map_or(0.0, |s| s.ticks as f64 / clock_ticks())
}

pub fn tree_cpu_seconds(pid: u32) -> f64 {
    process_tree(pid).into_iter().map(process_cpu_seconds).sum()
}

/// A free TCP port on 127.0.0.1 (for peers, which cannot report the port they chose).
pub fn free_port() -> Result<u16, LabError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// A minimal HTTP/1.0 GET: status and body. Only for the runner's own probes and stats.
pub fn http_get(
    addr: SocketAddr,
    path: &str,
    timeout: Duration,
) -> Result<(u16, String), LabError> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| LabError::Point(format!("bad HTTP reply from {addr}{path}")))?;
    Ok((status, body.to_string()))
}

/// Polls `addr` until `path` answers 200, for up to `timeout`.
pub fn wait_answers(addr: SocketAddr, path: &str, timeout: Duration) -> Result<(), LabError> {
    let end = Instant::now() + timeout;
    let mut last = String::new();
    while Instant::now() < end {
        if interrupted() {
            return Err(LabError::Point("interrupted".into()));
        }
        match http_get(addr, path, Duration::from_secs(2)) {
            Ok((200, _)) => return Ok(()),
            Ok((code, _)) => last = format!("status {code}"),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(LabError::Point(format!(
        "server at {addr} did not answer {path} within {:.0} s ({last})",
        timeout.as_secs_f64()
    )))
}

/// Output of a short command (tool versions), stdout and stderr together, first line.
pub fn command_line_output(argv: &[&str]) -> Option<String> {
    let out = Command::new(argv[0]).args(&argv[1..]).output().ok()?;
    let mut s = String::from_utf8_lossy(&out.stdout).to_string();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting() {
        let argv: Vec<String> = ["evlab", "run", "a b", "it's", "--x=1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(shell_line(&argv), "evlab run 'a b' 'it'\\''s' --x=1");
    }

    #[test]
    fn child_is_pinned_measured_and_stopped() {
        // A sleeper and a spinner, both descendants.
        let argv: Vec<String> = [
            "sh",
            "-c",
            "sleep 30 & while :; do :; done & echo ready; wait",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let t0 = Instant::now();
        let mut c = Child::spawn("sh", &argv, &[0], None).unwrap();
        assert!(c.command.starts_with("taskset -c 0 sh -c"));
        c.wait_line(|l| l == "ready", Duration::from_secs(5), "ready")
            .unwrap();
        let status = std::fs::read_to_string(format!("/proc/{}/status", c.pid)).unwrap();
        let allowed = status
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list"))
            .unwrap();
        assert!(allowed.trim_end().ends_with('0'), "{allowed}");
        assert!(process_tree(c.pid).len() >= 3);
        // The spinner's CPU time counts: a tenth of a second comes within seconds even on a
        // busy machine; and, the whole tree pinned to one CPU, never more than the time since
        // it started (and a tick's slack).
        let cpu = loop {
            let cpu = c.cpu_seconds();
            if cpu >= 0.1 || t0.elapsed() > Duration::from_secs(10) {
                break cpu;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let wall = t0.elapsed().as_secs_f64();
        assert!(
            (0.1..=wall + 0.02).contains(&cpu),
            "{cpu} s of CPU in {wall} s on one CPU"
        );
        let pid = c.pid;
        let left = c.stop(Duration::from_secs(2));
        assert!(left.is_empty(), "left running: {left:?}");
        assert!(group_members(pid).is_empty());
    }

    #[test]
    fn wait_line_reports_early_exit() {
        let argv: Vec<String> = ["sh", "-c", "echo oops >&2; exit 3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut c = Child::spawn("sh", &argv, &[], None).unwrap();
        let e = c
            .wait_line(|_| false, Duration::from_secs(5), "listening")
            .unwrap_err()
            .to_string();
        assert!(e.contains("exited before listening"), "{e}");
    }

    /// `sh -c script` with its stdout piped, started through the helper.
    fn group(script: &str) -> ProcessGroup {
        ProcessGroup::spawn(
            Command::new("sh")
                .args(["-c", script])
                .stdin(Stdio::null())
                .stdout(Stdio::piped()),
        )
        .unwrap()
    }

    /// The pid the script printed first (`echo $!`: its background child), as now.
    fn printed_pid(g: &mut ProcessGroup) -> Seen {
        let mut line = String::new();
        BufReader::new(g.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let pid = line.trim().parse().unwrap();
        Seen::of(pid).unwrap_or_else(|| panic!("grandchild {pid} is not running"))
    }

    /// Waits up to 10 s for `s` to be gone (an orphan is reaped by whoever adopts it).
    fn gone(s: Seen) -> bool {
        let t = Instant::now();
        while s.alive() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        !s.alive()
    }

    #[test]
    fn stop_ends_the_grandchildren_too() {
        let mut g = group("sleep 300 & echo $!; wait");
        let grandchild = printed_pid(&mut g);
        let left = g.stop(Duration::from_secs(2));
        assert!(left.is_empty(), "left running: {left:?}");
        assert!(gone(grandchild), "grandchild {} survived", grandchild.pid);
        assert!(group_members(g.pid()).is_empty());
    }

    #[test]
    fn a_grandchild_orphaned_by_a_killed_leader_is_found_and_stopped() {
        // What the issue saw: nginx's master SIGKILLed, its worker living on. Killing the
        // leader alone leaves the grandchild; stopping the group does not.
        let mut g = group("sleep 300 & echo $!; wait");
        let grandchild = printed_pid(&mut g);
        g.kill().unwrap();
        g.wait().unwrap();
        assert!(grandchild.alive(), "the grandchild died with its parent");
        assert_eq!(group_members(g.pid()), vec![grandchild.pid]);
        let left = g.stop(Duration::from_millis(500));
        assert_eq!(left, vec![grandchild.pid], "it outlived the stop: reported");
        assert!(gone(grandchild), "grandchild {} survived", grandchild.pid);
    }

    #[test]
    fn a_grandchild_ignoring_sigterm_is_killed_and_reported() {
        // The grandchild prints its pid only once it ignores SIGTERM (the disposition survives
        // the exec), so the stop cannot reach it before the trap is set.
        let mut g = group("sh -c 'trap \"\" TERM; echo $$; exec sleep 300' & wait");
        let grandchild = printed_pid(&mut g);
        let t = Instant::now();
        let left = g.stop(Duration::from_millis(500));
        assert_eq!(left, vec![grandchild.pid]);
        assert!(gone(grandchild), "grandchild {} survived", grandchild.pid);
        assert!(t.elapsed() < Duration::from_secs(5), "the stop is bounded");
    }

    #[test]
    fn a_descendant_that_left_the_group_is_stopped_too() {
        let mut g = group("setsid sleep 300 & echo $!; wait");
        let escaped = printed_pid(&mut g);
        let t = Instant::now();
        while read_stat(escaped.pid).is_some_and(|s| s.pgrp == g.pid()) {
            assert!(t.elapsed() < Duration::from_secs(5), "setsid did not run");
            std::thread::sleep(Duration::from_millis(10));
        }
        let left = g.stop(Duration::from_millis(500));
        assert_eq!(left, vec![escaped.pid]);
        assert!(gone(escaped), "descendant {} survived", escaped.pid);
    }

    #[test]
    fn a_panic_stops_the_group_through_the_guard() {
        let grandchild = std::sync::Mutex::new(None);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut g = group("sleep 300 & echo $!; wait");
            *grandchild.lock().unwrap() = Some(printed_pid(&mut g));
            panic!("a failed assertion while the group runs");
        }));
        assert!(r.is_err());
        let grandchild = grandchild.into_inner().unwrap().unwrap();
        assert!(gone(grandchild), "grandchild {} survived", grandchild.pid);
    }

    #[test]
    fn a_child_dies_with_the_thread_that_spawned_it() {
        // A parent killed outright runs no destructor: the parent-death signal still ends the
        // child. (Forgotten here, which is what SIGKILL amounts to for the guard.)
        let child = std::thread::spawn(|| {
            let g = ProcessGroup::spawn(Command::new("sleep").arg("300")).unwrap();
            let s = Seen::of(g.pid()).unwrap();
            std::mem::forget(g);
            s
        })
        .join()
        .unwrap();
        assert!(
            gone(child),
            "child {} outlived its parent thread",
            child.pid
        );
    }

    #[test]
    fn a_child_that_exited_by_itself_still_has_its_group_checked() {
        let mut g = group("sleep 300 & echo $!; exit 0");
        let grandchild = printed_pid(&mut g);
        g.wait().unwrap();
        let left = g.stop(Duration::from_millis(200));
        assert_eq!(left, vec![grandchild.pid]);
        assert!(gone(grandchild), "grandchild {} survived", grandchild.pid);
    }
}
