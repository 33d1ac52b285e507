//! What the CLI tests share: the real `evlab` binary, a docroot, `evlab serve` started on port 0
//! with its address read back from the first line, and whether a Debian tool is installed.
//!
//! Every long-running child is a [`ProcessGroup`] (see `evlab_lab::run::procs`): a process group of
//! its own, stopped as a group and checked gone, also when a test fails or panics (the guard's
//! drop) or its process is killed past the timeout (the parent-death signal).
#![allow(dead_code)] // each test binary uses its own part

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub use evlab_lab::run::procs::ProcessGroup;

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
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("first line was {line:?}"))
        .parse()
        .unwrap();
    Serve { child, addr, dir }
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
