//! `evlab hosts FILE`: checks the hosts of a hosts file over OpenSSH — reachable, their kernel,
//! this evlab's binary there (copied when its sha256 differs), and their clocks.

use std::path::PathBuf;

use anyhow::Context;
use evlab_lab::model::hosts::Hosts;
use evlab_lab::run::hosts::{sha256, Ssh};

pub const EXAMPLES: &str = "\
Examples:
  evlab hosts hosts.toml
      check every host; copy this evlab where it differs
  evlab hosts hosts.toml --no-copy
      only check: a host with another evlab is an error
  evlab hosts hosts.toml --json
      one JSON object per host

A hosts file names OpenSSH destinations and their roles (docs/hosts.md):
  [[host]]
  name = \"s\"
  destination = \"alice@server.lan\"
  role = \"server\"

An Ansible-style INI inventory with groups [server], [client] and [origin] (ansible_host, \
ansible_user, ansible_port, ansible_ssh_common_args='-F FILE') is read as the same.

Exit status: 0 when every host answered and has this evlab, 1 otherwise.";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The hosts file (TOML: [[host]] name, destination, role, workdir), or an Ansible-style
    /// INI inventory (groups server, client, origin)
    pub file: PathBuf,
    /// Do not copy this evlab to a host whose binary differs: report it as an error
    #[arg(long)]
    pub no_copy: bool,
    /// Print one JSON object per host instead of a table
    #[arg(long)]
    pub json: bool,
}

/// Prints a line; a reader that went away (`| head`) ends the output quietly.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write;
        match writeln!(std::io::stdout().lock(), $($arg)*) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            r => r?,
        }
    }};
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let hosts = Hosts::load(&a.file)?;
    let me = std::env::current_exe().context("cannot find the evlab binary")?;
    let mine = sha256(&me)?;
    let ssh = Ssh::new(&hosts)?;
    let mut failed = 0;
    if !a.json {
        out!("this evlab: {} (sha256 {})", me.display(), &mine[..12]);
        out!(
            "{:<10} {:<7} {:<24} {:<28} {:<22} clock offset",
            "host",
            "role",
            "kernel",
            "evlab",
            "binary"
        );
    }
    for h in &hosts.hosts {
        let role = format!("{:?}", h.role).to_lowercase();
        match ssh.check(h, &me, !a.no_copy) {
            Ok(c) if a.json => out!("{}", serde_json::to_string(&c)?),
            Ok(c) => out!(
                "{:<10} {:<7} {:<24} {:<28} {:<22} {:+.2} ms ± {:.2} ms",
                c.name,
                role,
                c.kernel,
                c.evlab_version,
                if !c.copied {
                    "same sha256".to_string()
                } else if c.sha256_found.is_empty() {
                    "copied (none there)".to_string()
                } else {
                    format!(
                        "copied (was {})",
                        &c.sha256_found[..12.min(c.sha256_found.len())]
                    )
                },
                c.clock_offset_ms,
                c.clock_bound_ms
            ),
            Err(e) => {
                failed += 1;
                if a.json {
                    out!(
                        "{}",
                        serde_json::json!({"name": h.name, "destination": h.destination, "error": e.to_string()})
                    );
                } else {
                    out!("{:<10} {:<7} error: {e}", h.name, role);
                }
            }
        }
    }
    drop(ssh);
    if failed > 0 {
        anyhow::bail!("{failed} of {} host(s) failed the check", hosts.hosts.len());
    }
    Ok(())
}

/// `evlab clock`: each line read on stdin is answered with the wall clock (CLOCK_REALTIME, Unix
/// seconds with nanoseconds) until stdin ends. The responder `evlab hosts` and `evlab run
/// --hosts` measure a host's clock offset with: the clock read is the one evlab reads there.
pub fn clock() -> anyhow::Result<()> {
    use std::io::{BufRead, Write};
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        line?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .context("the clock is before 1970")?;
        writeln!(out, "{}.{:09}", now.as_secs(), now.subsec_nanos())?;
        out.flush()?;
    }
    Ok(())
}
