//! Hosts over OpenSSH: the system's `ssh`, one multiplexed master connection per host
//! (ControlMaster), its control sockets in a directory of evlab's own (removed at the end),
//! never ~/.ssh. Every command is a plain `ssh DEST -- COMMAND`, so the user's ssh config
//! (keys, jump hosts, ports) applies as it is: no daemon, no protocol of evlab's own.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::model::hosts::{Host, HostCheck, Hosts};
use crate::LabError;

/// The clock exchanges a check makes; the one with the shortest round trip is kept.
const CLOCK_SAMPLES: usize = 7;

/// Multiplexed ssh connections to the hosts of a hosts file.
pub struct Ssh {
    config: Option<String>,
    /// Control sockets: short (a socket path is at most 107 bytes), private, removed on drop.
    control: PathBuf,
    opened: Vec<String>,
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
            opened: Vec::new(),
        })
    }

    fn base(&self, host: &Host) -> Command {
        let mut c = Command::new("ssh");
        if let Some(f) = &self.config {
            c.args(["-F", f]);
        }
        c.args([
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
        ]);
        c.arg(&host.destination);
        c
    }

    /// Runs `command` on `host` (by its login shell), with `stdin` as its input.
    pub fn run(&mut self, host: &Host, command: &str, stdin: &[u8]) -> Result<Output, LabError> {
        if !self.opened.contains(&host.destination) {
            self.opened.push(host.destination.clone());
        }
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

    /// As `run`, requiring success: the command's stdout, or an error naming the host and
    /// what ssh or the command said.
    pub fn ok(&mut self, host: &Host, command: &str, stdin: &[u8]) -> Result<String, LabError> {
        let o = self.run(host, command, stdin)?;
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            let why = match o.status.code() {
                // ssh's own failure: connecting, authenticating.
                Some(255) => format!("ssh could not reach it: {}", err.trim()),
                _ => format!("`{command}` failed ({}): {}", o.status, err.trim()),
            };
            return Err(LabError::Io(format!("host {}: {why}", host.name)));
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// The host's clock minus this one's, and the bound on its error, in seconds: over one
    /// ssh session, several exchanges of a line for the remote clock's reading, the one with
    /// the shortest round trip kept, its midpoint against the reading (Cristian's method). The
    /// remote side reads its clock without a fork where bash has $EPOCHREALTIME.
    pub fn clock_offset(&mut self, host: &Host) -> Result<(f64, f64), LabError> {
        use std::io::{BufRead, BufReader};
        let responder = "command -v bash >/dev/null 2>&1 && exec bash -c 'while read -r _; do \
                         echo \"${EPOCHREALTIME/,/.}\"; done'; while read -r _; do date +%s.%N; done";
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
    pub fn check(&mut self, host: &Host, local: &Path, copy: bool) -> Result<HostCheck, LabError> {
        let want = sha256(local)?;
        let wd = host.workdir();
        let found = self.ok(
            host,
            &format!("mkdir -p {wd} && {{ sha256sum {wd}/evlab 2>/dev/null || true; }}"),
            &[],
        )?;
        let found = found.split_whitespace().next().unwrap_or("").to_string();
        let mut check = HostCheck {
            name: host.name.clone(),
            destination: host.destination.clone(),
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
            let bytes = std::fs::read(local)
                .map_err(|e| LabError::Io(format!("cannot read {}: {e}", local.display())))?;
            self.ok(
                host,
                &format!(
                    "cat > {wd}/evlab.tmp && chmod 755 {wd}/evlab.tmp && mv -f {wd}/evlab.tmp {wd}/evlab"
                ),
                &bytes,
            )?;
            let now = self.ok(host, &format!("sha256sum {wd}/evlab"), &[])?;
            if now.split_whitespace().next() != Some(want.as_str()) {
                return Err(LabError::Io(format!(
                    "host {}: after the copy {wd}/evlab is {}, not {want}",
                    host.name,
                    now.trim()
                )));
            }
            check.copied = true;
        }
        check.kernel = self.ok(host, "uname -sr", &[])?.trim().to_string();
        check.evlab_version = self
            .ok(host, &format!("{wd}/evlab --version"), &[])?
            .trim()
            .to_string();
        let (offset, bound) = self.clock_offset(host)?;
        check.clock_offset_ms = offset * 1e3;
        check.clock_bound_ms = bound * 1e3;
        Ok(check)
    }
}

impl Drop for Ssh {
    fn drop(&mut self) {
        // Close every master connection, then the sockets' directory.
        for dest in std::mem::take(&mut self.opened) {
            let mut c = Command::new("ssh");
            if let Some(f) = &self.config {
                c.args(["-F", f]);
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
