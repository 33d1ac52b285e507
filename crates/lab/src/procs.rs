//! Child processes: started pinned to CPUs in a process group of their own, watched through
//! their output, measured through /proc, and stopped with SIGTERM then SIGKILL.
//!
//! Every child gets its own process group so that (a) a terminal's Ctrl-C reaches only the
//! runner, which then stops the children in order and still writes its results, and (b) a
//! peer's worker processes are stopped and accounted with it.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use evlab_poll::sys;

use crate::LabError;

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

/// Quotes an argv for a shell, so a report's command lines can be pasted.
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub struct Child {
    pub name: String,
    pub pid: u32,
    pub command: String,
    inner: std::process::Child,
    lines: Receiver<String>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    stopped: bool,
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
        budget: Option<&crate::cgroup::CpuBudget>,
    ) -> Result<Child, LabError> {
        let cgroup_fd = budget.map(|b| b.procs_fd());
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
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
        }
        .apply_to(&mut cmd);
        let mut inner = cmd
            .spawn()
            .map_err(|e| LabError::Point(format!("cannot start {name} ({}): {e}", argv[0])))?;
        let pid = inner.id();
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
        let mut shown = Vec::new();
        if !cpus.is_empty() {
            shown.push("taskset".to_string());
            shown.push("-c".to_string());
            shown.push(
                cpus.iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        shown.extend(argv.iter().cloned());
        Ok(Child {
            name: name.to_string(),
            pid,
            command: shell_line(&shown),
            inner,
            lines,
            stderr_tail,
            stopped: false,
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

    /// Waits for the child to exit by itself, up to `timeout`; `Ok(None)` on timeout.
    pub fn wait_exit(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<std::process::ExitStatus>, LabError> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(s) = self.inner.try_wait()? {
                self.stopped = true;
                return Ok(Some(s));
            }
            if Instant::now() >= end || interrupted() {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.inner.try_wait(), Ok(None))
    }

    /// CPU time of the child and all its descendants, in seconds.
    pub fn cpu_seconds(&self) -> f64 {
        tree_cpu_seconds(self.pid)
    }

    /// SIGTERM to the group, SIGKILL after `grace`; returns the processes of the group that were
    /// still present afterwards (should be none).
    pub fn stop(&mut self, grace: Duration) -> Vec<u32> {
        if !self.stopped {
            self.stopped = true;
            signal_group(self.pid, libc::SIGTERM);
            let end = Instant::now() + grace;
            loop {
                if let Ok(Some(_)) = self.inner.try_wait() {
                    break;
                }
                if Instant::now() >= end {
                    signal_group(self.pid, libc::SIGKILL);
                    let _ = self.inner.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // The leader is reaped; its group's other members (a peer's workers) must be gone too.
        let end = Instant::now() + grace;
        loop {
            let left = group_members(self.pid);
            if left.is_empty() {
                return left;
            }
            if Instant::now() >= end {
                signal_group(self.pid, libc::SIGKILL);
                std::thread::sleep(Duration::from_millis(50));
                return group_members(self.pid);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.stopped {
            signal_group(self.pid, libc::SIGKILL);
            let _ = self.inner.wait();
        }
    }
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
        .filter(|&p| {
            read_stat(p).is_some_and(|s| s.pgrp == pgid && s.state != 'Z' && s.state != 'X')
        })
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
        let argv: Vec<String> = ["sh", "-c", "sleep 30 & echo ready; wait"]
            .iter()
            .map(|s| s.to_string())
            .collect();
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
        assert!(process_tree(c.pid).len() >= 2);
        assert!(c.cpu_seconds() >= 0.0);
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
}
