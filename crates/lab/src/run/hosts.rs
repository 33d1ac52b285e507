//! Hosts over OpenSSH: the system's `ssh`, one multiplexed master connection per host
//! (ControlMaster), its control sockets in a directory of evlab's own (removed at the end),
//! never ~/.ssh. Every command is a plain `ssh DEST -- COMMAND`, so the user's ssh config
//! (keys, jump hosts, ports) applies as it is: no daemon, no protocol of evlab's own.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::run::procs::Child;
use evlab_reason::model::hosts::{Host, HostCheck, Hosts};
use evlab_reason::LabError;

/// The clock exchanges a check makes; the one with the shortest round trip is kept.
const CLOCK_SAMPLES: usize = 7;

/// ssh's own exit status when it fails (connecting, authenticating, or the connection lost);
/// a remote command's status otherwise.
pub const SSH_FAILED: i32 = 255;

/// The pause before a command whose ssh failed is tried again.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// Multiplexed ssh connections to the hosts of a hosts file.
pub struct Ssh {
    config: Option<String>,
    /// Control sockets: short (a socket path is at most 107 bytes), private, removed on drop.
    control: PathBuf,
    opened: Mutex<Vec<(String, Option<u16>)>>,
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Ssh {
    pub fn new(hosts: &Hosts) -> Result<Ssh, LabError> {
        let control = std::env::temp_dir().join(format!("evlab-ssh-{}", std::process::id()));
        std::fs::create_dir_all(&control)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&control, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(Ssh {
            config: hosts.ssh_config.clone(),
            control,
            opened: Mutex::new(Vec::new()),
        })
    }

    fn base(&self, host: &Host) -> Command {
        let argv = self.argv(host);
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]);
        c
    }

    /// The `ssh … DEST` argv every command to `host` starts with (the master connection is
    /// remembered, to be closed at the end).
    fn argv(&self, host: &Host) -> Vec<String> {
        {
            let mut o = self.opened.lock().unwrap_or_else(|e| e.into_inner());
            let key = (host.destination.clone(), host.port);
            if !o.contains(&key) {
                o.push(key);
            }
        }
        let mut c = vec!["ssh".to_string()];
        if let Some(f) = &self.config {
            c.extend(["-F".to_string(), f.clone()]);
        }
        if let Some(p) = host.port {
            c.extend(["-p".to_string(), p.to_string()]);
        }
        c.extend(
            [
                "-o",
                "BatchMode=yes",
                "-o",
                "ControlMaster=auto",
                "-o",
                &format!("ControlPath={}/%C", self.control.display()),
                "-o",
                "ControlPersist=120",
                "-o",
                "ConnectTimeout=10",
                "-o",
                "ServerAliveInterval=5",
                "-o",
                "ServerAliveCountMax=3",
            ]
            .map(String::from),
        );
        c.push(host.destination.clone());
        c
    }

    /// Runs `command` on `host` (by its login shell), with `stdin` as its input. A command
    /// whose ssh failed (exit status 255: the connection could not be made or was lost, e.g.
    /// its master connection killed) is tried once more, on a new connection; the second
    /// failure is returned. (Every command evlab sends may run twice: each makes, checks, reads
    /// or stops something and is the same done again.)
    pub fn run(&self, host: &Host, command: &str, stdin: &[u8]) -> Result<Output, LabError> {
        let first = self.run_once(host, command, stdin)?;
        if first.status.code() != Some(SSH_FAILED) {
            return Ok(first);
        }
        std::thread::sleep(RETRY_PAUSE);
        self.run_once(host, command, stdin)
    }

    fn run_once(&self, host: &Host, command: &str, stdin: &[u8]) -> Result<Output, LabError> {
        let mut c = self.base(host);
        c.arg("--").arg(command);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c
            .spawn()
            .map_err(|e| LabError::Io(format!("cannot run ssh (is OpenSSH installed?): {e}")))?;
        if let Some(mut i) = child.stdin.take() {
            // A host that closes its input early is told by the exit status, not here.
            let _ = i.write_all(stdin);
        }
        child
            .wait_with_output()
            .map_err(|e| LabError::Io(format!("ssh {}: {e}", host.destination)))
    }

    /// Runs each `(host, command)` as `ok` does, every ssh session started before any is
    /// waited for: a read of every host takes about one round trip. In the order given.
    pub fn ok_all(&self, what: &[(&Host, &str)]) -> Vec<Result<String, LabError>> {
        let started: Vec<_> = what
            .iter()
            .map(|(host, command)| {
                let mut c = self.base(host);
                c.arg("--").arg(command);
                c.stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                c.spawn()
            })
            .collect();
        started
            .into_iter()
            .zip(what)
            .map(|(child, (host, command))| {
                let done = child.and_then(|c| c.wait_with_output());
                match done {
                    Ok(o) if o.status.success() => {
                        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
                    }
                    // A failure (or a lost connection) is asked again, on its own.
                    _ => self.ok(host, command, &[]),
                }
            })
            .collect()
    }

    /// As `run`, requiring success: the command's stdout, or an error naming the host and
    /// what ssh or the command said.
    pub fn ok(&self, host: &Host, command: &str, stdin: &[u8]) -> Result<String, LabError> {
        let o = self.run(host, command, stdin)?;
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            let why = match o.status.code() {
                // ssh's own failure: connecting, authenticating.
                Some(SSH_FAILED) => format!("ssh could not reach it (tried twice): {}", err.trim()),
                _ => format!("`{command}` failed ({}): {}", o.status, err.trim()),
            };
            return Err(LabError::Io(format!("host {}: {why}", host.name)));
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// The host's clock minus this one's, and the bound on its error, in seconds: over one
    /// ssh session, several exchanges of a line for the remote clock's reading, the one with
    /// the shortest round trip kept, its midpoint against the reading (Cristian's method).
    /// `evlab`, this build's binary there, answers with the clock evlab itself reads there
    /// (`evlab clock`): a library that changes the time for evlab (libfaketime) is seen.
    pub fn clock_offset(&self, host: &Host, evlab: &str) -> Result<(f64, f64), LabError> {
        use std::io::{BufRead, BufReader};
        let responder = format!("exec {evlab} clock");
        let mut c = self.base(host);
        c.arg("--").arg(responder);
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| LabError::Io(format!("cannot run ssh: {e}")))?;
        let mut input = child.stdin.take().expect("piped");
        let mut output = BufReader::new(child.stdout.take().expect("piped"));
        let mut best: Option<(f64, f64)> = None;
        let mut line = String::new();
        let mut failure = None;
        // The first exchange also pays for the session's start: it is one more sample.
        for _ in 0..=CLOCK_SAMPLES {
            line.clear();
            let t0 = now_s();
            if input.write_all(b"\n").and_then(|_| input.flush()).is_err()
                || output.read_line(&mut line).unwrap_or(0) == 0
            {
                failure = Some("the clock responder ended".to_string());
                break;
            }
            let t1 = now_s();
            match line.trim().parse::<f64>() {
                Ok(remote) => {
                    let (offset, bound) = (remote - (t0 + t1) / 2.0, (t1 - t0) / 2.0);
                    if best.is_none_or(|b| bound < b.1) {
                        best = Some((offset, bound));
                    }
                }
                Err(_) => {
                    failure = Some(format!("its clock read {:?}, not seconds", line.trim()));
                    break;
                }
            }
        }
        drop(input);
        let _ = child.kill();
        let _ = child.wait();
        match (best, failure) {
            (Some(b), None) => Ok(b),
            (_, why) => Err(LabError::Io(format!(
                "host {}: cannot read its clock: {}",
                host.name,
                why.unwrap_or_default()
            ))),
        }
    }

    /// Checks a host: reachable, its kernel, the evlab binary in its workdir (copied there
    /// when its sha256 differs from `local`'s, unless `copy` is false), and its clock.
    pub fn check(&self, host: &Host, local: &Path, copy: bool) -> Result<HostCheck, LabError> {
        let wd = host.workdir();
        self.ok(host, &format!("mkdir -p {wd}"), &[])?;
        let target = format!("{wd}/evlab");
        let (found, want) = self.sha256_there(host, local, &target)?;
        let mut check = HostCheck {
            name: host.name.clone(),
            destination: host.destination.clone(),
            role: Some(host.role),
            address: host.address.clone(),
            sha256_found: found.clone(),
            ..Default::default()
        };
        if found != want {
            if !copy {
                return Err(LabError::Io(format!(
                    "host {}: {wd}/evlab is {} and this evlab is {want}; copying was not allowed",
                    host.name,
                    if found.is_empty() { "missing" } else { &found }
                )));
            }
            self.copy(host, local, &target, "755", &want)?;
            check.copied = true;
        }
        check.kernel = self.ok(host, "uname -sr", &[])?.trim().to_string();
        if let Ok(t) = self.ok(
            host,
            "cat /proc/sys/net/ipv4/tcp_tw_reuse /proc/sys/net/ipv4/ip_local_port_range",
            &[],
        ) {
            let mut lines = t.lines();
            check.tcp_tw_reuse = lines.next().and_then(|l| l.trim().parse().ok());
            check.ephemeral_ports = lines
                .next()
                .and_then(evlab_reason::model::hosts::port_range_size);
        }
        check.evlab_version = self
            .ok(host, &format!("{wd}/evlab --version"), &[])?
            .trim()
            .to_string();
        // The clock that matters is the one evlab reads there (a library may change it: a
        // test host's libfaketime does), so this build's binary answers for it.
        let (offset, bound) = self.clock_offset(host, &format!("{wd}/evlab"))?;
        check.clock_offset_ms = offset * 1e3;
        check.clock_bound_ms = bound * 1e3;
        Ok(check)
    }
}

/// A process started on a host in a session (so a process group) of its own, through one ssh
/// session that carries its stdout; stopped and checked gone by [`Ssh::stop`].
pub struct Remote {
    pub host: Host,
    /// Its process group there (the process leads it: its pid).
    pub pgid: u32,
    /// The command as the host ran it (after `setsid`).
    pub command: String,
    /// The local ssh carrying it: its stdout lines are the process's.
    pub ssh: Child,
    stopped: bool,
}

impl Remote {
    /// Marks a process that ended by itself and was waited for (its session's exit status
    /// read: `evlab load`, which starts no process of its own): nothing of it is left to stop.
    pub fn ended(&mut self) {
        self.stopped = true;
    }

    /// Whether it still runs (its ssh session ends when it does).
    pub fn alive(&mut self) -> bool {
        self.ssh.alive()
    }

    /// Whether its ssh session ended by ssh's own failure (exit status 255): the connection
    /// to its host was lost, so what the process did is unknown (it may still run there).
    pub fn lost(&mut self) -> bool {
        matches!(
            self.ssh.wait_exit(Duration::ZERO),
            Ok(Some(s)) if s.code() == Some(SSH_FAILED)
        )
    }
}

/// Why a remote process did not start: its ssh connection was lost (tried again), or not.
enum SpawnError {
    Lost(LabError),
    Failed(LabError),
}
use SpawnError::{Failed, Lost};

/// The first line a remote process writes: its process group, read by [`Ssh::spawn`].
const PGID_LINE: &str = "evlab-pgid ";

impl Ssh {
    /// Starts `argv` on `host` in a session of its own (`setsid`, so that its whole group is
    /// stopped together), with the descriptor limit raised where the host allows; returns once
    /// it said its process group. Its stdout comes back through the ssh session.
    pub fn spawn(&self, host: &Host, name: &str, argv: &[String]) -> Result<Remote, LabError> {
        self.spawn_all(&[(host, name, argv)])
            .pop()
            .expect("one started")
    }

    /// Starts each `(host, name, argv)` as [`Ssh::spawn`] does, every ssh session launched
    /// before any is waited for (so that starting n processes takes about one round trip, not
    /// n); one whose connection was lost is tried once more. In the order given.
    pub fn spawn_all(&self, what: &[(&Host, &str, &[String])]) -> Vec<Result<Remote, LabError>> {
        let launched: Vec<_> = what
            .iter()
            .map(|(host, name, argv)| self.launch(host, name, argv))
            .collect();
        launched
            .into_iter()
            .zip(what)
            .map(|(l, (host, name, argv))| {
                match l.and_then(|(ssh, line)| self.started(host, ssh, line)) {
                    Err(Lost(_)) => {
                        std::thread::sleep(RETRY_PAUSE);
                        self.launch(host, name, argv)
                            .and_then(|(ssh, line)| self.started(host, ssh, line))
                            .map_err(|e| match e {
                                Lost(e) => LabError::Point(format!(
                                    "host {}: ssh connection lost twice starting {name} (tried \
                                     twice): {e}",
                                    host.name
                                )),
                                Failed(e) => e,
                            })
                    }
                    Err(Failed(e)) => Err(e),
                    Ok(r) => Ok(r),
                }
            })
            .collect()
    }

    /// The ssh session that runs `argv` on `host`, launched; and the command line it runs.
    fn launch(
        &self,
        host: &Host,
        name: &str,
        argv: &[String],
    ) -> Result<(Child, String), SpawnError> {
        let line = evlab_reason::model::text::shell_line(argv);
        let inner = format!("echo {PGID_LINE}$$; ulimit -n 65536 2>/dev/null; exec {line}");
        let mut full = self.argv(host);
        full.push("--".into());
        full.push(format!(
            "exec setsid -w sh -c {}",
            evlab_reason::model::text::shell_line(&[inner])
        ));
        let ssh = Child::spawn(&format!("{name} on host {}", host.name), &full, &[], None)
            .map_err(Failed)?;
        Ok((ssh, line))
    }

    /// The process a launched session started, once it said its process group.
    fn started(&self, host: &Host, mut ssh: Child, line: String) -> Result<Remote, SpawnError> {
        let first = match ssh.wait_line(
            |l| l.starts_with(PGID_LINE),
            Duration::from_secs(20),
            "process group",
        ) {
            Ok(l) => l,
            Err(e) => {
                let lost = matches!(
                    ssh.wait_exit(Duration::from_millis(200)),
                    Ok(Some(s)) if s.code() == Some(SSH_FAILED)
                );
                return Err(if lost { Lost(e) } else { Failed(e) });
            }
        };
        let pgid = first[PGID_LINE.len()..].trim().parse().map_err(|_| {
            Failed(LabError::Point(format!(
                "host {}: bad line {first:?}",
                host.name
            )))
        })?;
        Ok(Remote {
            host: host.clone(),
            pgid,
            command: line,
            ssh,
            stopped: false,
        })
    }

    /// Stops a remote process group (SIGTERM, SIGKILL after `grace`) and checks on its host that
    /// no process of it is left. None when it is gone (or had ended); else what happened.
    pub fn stop(&self, r: &mut Remote, grace: Duration) -> Option<String> {
        if r.stopped {
            return None;
        }
        r.stopped = true;
        let g = r.pgid;
        let tries = (grace.as_secs_f64() / 0.05).ceil().max(1.0) as u64;
        let script = format!(
            "kill -TERM -{g} 2>/dev/null; i=0; while kill -0 -{g} 2>/dev/null; do i=$((i+1)); \
             if [ $i -gt {tries} ]; then kill -KILL -{g} 2>/dev/null; sleep 0.2; \
             if kill -0 -{g} 2>/dev/null; then echo left; else echo killed; fi; exit 0; fi; \
             sleep 0.05; done; echo gone"
        );
        let said = self.ok(&r.host, &script, &[]);
        // Its ssh session ends with it; one that does not is stopped here.
        let _ = r.ssh.wait_exit(Duration::from_secs(2));
        r.ssh.stop(Duration::from_secs(1));
        match said.as_deref().map(str::trim) {
            Ok("gone") => None,
            Ok("killed") => Some(format!(
                "{} on host {} outlived SIGTERM by {:.0} s (killed)",
                r.ssh.name,
                r.host.name,
                grace.as_secs_f64()
            )),
            Ok(other) => Some(format!(
                "{} on host {}: process group {g} is still there after SIGKILL ({other})",
                r.ssh.name, r.host.name
            )),
            Err(e) => Some(format!(
                "{} on host {}: cannot check that process group {g} is gone: {e}",
                r.ssh.name, r.host.name
            )),
        }
    }

    /// The sha256 of the file `remote` on `host` (empty: none) and of `local`.
    fn sha256_there(
        &self,
        host: &Host,
        local: &Path,
        remote: &str,
    ) -> Result<(String, String), LabError> {
        let want = sha256(local)?;
        let found = self.ok(
            host,
            &format!("{{ sha256sum {remote} 2>/dev/null || true; }}"),
            &[],
        )?;
        Ok((
            found.split_whitespace().next().unwrap_or("").to_string(),
            want,
        ))
    }

    /// Copies `local` to `remote` on `host` (through a temporary file, then renamed, with
    /// `mode`) and checks that its sha256 there is `want`.
    fn copy(
        &self,
        host: &Host,
        local: &Path,
        remote: &str,
        mode: &str,
        want: &str,
    ) -> Result<(), LabError> {
        let bytes = std::fs::read(local)
            .map_err(|e| LabError::Io(format!("cannot read {}: {e}", local.display())))?;
        self.ok(
            host,
            &format!(
                "cat > {remote}.tmp && chmod {mode} {remote}.tmp && mv -f {remote}.tmp {remote}"
            ),
            &bytes,
        )?;
        let now = self.ok(host, &format!("sha256sum {remote}"), &[])?;
        if now.split_whitespace().next() != Some(want) {
            return Err(LabError::Io(format!(
                "host {}: after the copy {remote} is {}, not {want}",
                host.name,
                now.trim()
            )));
        }
        Ok(())
    }

    /// `local` at `remote` on `host`: copied unless a file with its sha256 is there, and
    /// checked by sha256 after. Returns the sha256 and whether it was copied.
    pub fn put(&self, host: &Host, local: &Path, remote: &str) -> Result<(String, bool), LabError> {
        let (found, want) = self.sha256_there(host, local, remote)?;
        if found == want {
            return Ok((want, false));
        }
        self.copy(host, local, remote, "644", &want)?;
        Ok((want, true))
    }

    /// The CPU time (s) and context switches (voluntary + involuntary, every thread) of the
    /// process `pid` on `host`, from its /proc there; `ticks` is the host's clock ticks per
    /// second.
    pub fn proc_usage(&self, host: &Host, pid: u32, ticks: f64) -> Result<(f64, u64), LabError> {
        let text = self.ok(host, &usage_command(pid), &[])?;
        parse_proc_usage(&text, ticks).ok_or_else(|| {
            LabError::Point(format!(
                "host {}: cannot read process {pid}'s CPU time from its /proc",
                host.name
            ))
        })
    }
}

/// CPU seconds (utime + stime of the `/proc/PID/stat` line) and the context switches summed over
/// the `status` texts that follow it.
pub(crate) fn parse_proc_usage(text: &str, ticks: f64) -> Option<(f64, u64)> {
    // Each process's stat line (it starts with its pid), then its threads' status lines.
    let mut t = None;
    let mut switches = 0;
    for l in text.lines() {
        if l.starts_with(|c: char| c.is_ascii_digit()) {
            let f: Vec<&str> = l.rsplit_once(')')?.1.split_whitespace().collect();
            let ticks_used = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
            t = Some(t.unwrap_or(0) + ticks_used);
        } else if let Some((k, v)) = l.split_once(':') {
            if matches!(k, "voluntary_ctxt_switches" | "nonvoluntary_ctxt_switches") {
                switches += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Some((t? as f64 / ticks, switches))
}

/// The shell command whose output [`parse_proc_usage`] reads: every process of the process
/// group `pgid` (a peer's workers too), its stat and its threads' status.
pub(crate) fn usage_command(pgid: u32) -> String {
    format!(
        "for p in $(pgrep -g {pgid} 2>/dev/null || echo {pgid}); do cat /proc/$p/stat \
         /proc/$p/task/*/status 2>/dev/null; done"
    )
}

impl Drop for Ssh {
    fn drop(&mut self) {
        // Close every master connection, then the sockets' directory.
        let opened = std::mem::take(self.opened.get_mut().unwrap_or_else(|e| e.into_inner()));
        for (dest, port) in opened {
            let mut c = Command::new("ssh");
            if let Some(f) = &self.config {
                c.args(["-F", f]);
            }
            if let Some(p) = port {
                c.args(["-p", &p.to_string()]);
            }
            let _ = c
                .args([
                    "-o",
                    &format!("ControlPath={}/%C", self.control.display()),
                    "-O",
                    "exit",
                    &dest,
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.control);
    }
}

/// The sha256 of a local file, by the system's `sha256sum` (the same tool the hosts use).
pub fn sha256(path: &Path) -> Result<String, LabError> {
    let o = Command::new("sha256sum")
        .arg(path)
        .output()
        .map_err(|e| LabError::Io(format!("cannot run sha256sum: {e}")))?;
    let text = String::from_utf8_lossy(&o.stdout);
    match text.split_whitespace().next() {
        Some(h) if o.status.success() && h.len() == 64 => Ok(h.to_string()),
        _ => Err(LabError::Io(format!(
            "sha256sum {}: {}",
            path.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        ))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_remote_process_usage_is_read_from_its_proc_texts() {
        let text = "4242 (evlab serve) S 1 4242 4242 0 -1 4194560 300 0 0 0 250 50 0 0 20 0 3\n\
                    Name:\tevlab\nvoluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t2\n\
                    Name:\tevlab\nvoluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t1\n";
        assert_eq!(super::parse_proc_usage(text, 100.0), Some((3.0, 18)));
        assert_eq!(super::parse_proc_usage("garbage", 100.0), None);
        // A peer's master and its worker, one process group: both counted.
        let worker = "4243 (nginx) S 4242 4242 4242 0 -1 4194560 300 0 0 0 100 0 0 0 20 0 1
                      Name:	nginx
voluntary_ctxt_switches:	7
nonvoluntary_ctxt_switches:	0
";
        assert_eq!(
            super::parse_proc_usage(&format!("{text}{worker}"), 100.0),
            Some((4.0, 25))
        );
    }
}
