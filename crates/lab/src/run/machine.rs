//! Reads the machine a run is made on (kernel, CPUs, limits, tools) and its CPUs' busy and steal time.

use std::collections::BTreeMap;

pub use evlab_reason::model::machine::Machine;
use evlab_reason::model::machine::{Quiet, BUSY_PROCESS, NOT_QUIET};

use crate::run::procs::command_line_output;

fn read_trim(p: &str) -> String {
    std::fs::read_to_string(p)
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn uname() -> (String, String) {
    match evlab_sys::uname() {
        Ok(u) => (
            u.nodename,
            format!("{} {} {} {}", u.sysname, u.release, u.version, u.machine),
        ),
        Err(_) => ("?".into(), "?".into()),
    }
}

fn fd_limits() -> (u64, u64) {
    evlab_sys::nofile_limit().unwrap_or((0, 0))
}

/// First line of `prog -v`-style output mentioning a version, or "not installed".
pub fn tool_version(argv: &[&str]) -> String {
    match command_line_output(argv) {
        Some(out) => out
            .lines()
            .find(|l| l.to_lowercase().contains("version") || l.contains('/'))
            .unwrap_or("")
            .trim()
            .to_string(),
        None => "not installed".into(),
    }
}

pub fn collect(evlab_version: &str) -> Machine {
    let (hostname, kernel) = uname();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| {
            l.starts_with("model name") || l.starts_with("Model") || l.starts_with("cpu model")
        })
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "?".into());
    let memory_mib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024);
    let (fd_limit_soft, fd_limit_hard) = fd_limits();
    let mut tools = BTreeMap::new();
    tools.insert("nginx".into(), tool_version(&["nginx", "-v"]));
    tools.insert("lighttpd".into(), tool_version(&["lighttpd", "-v"]));
    tools.insert("haproxy".into(), tool_version(&["haproxy", "-v"]));
    Machine {
        hostname,
        kernel,
        cpu_model,
        cpus: crate::run::procs::online_cpus(),
        memory_mib,
        fd_limit_soft,
        fd_limit_hard,
        fs_nr_open: read_trim("/proc/sys/fs/nr_open"),
        ip_local_port_range: read_trim("/proc/sys/net/ipv4/ip_local_port_range"),
        tcp_tw_reuse: read_trim("/proc/sys/net/ipv4/tcp_tw_reuse"),
        somaxconn: read_trim("/proc/sys/net/core/somaxconn"),
        evlab_version: evlab_version.to_string(),
        tools,
    }
}

/// The shell script whose output [`parse_remote`] reads: what [`collect`] reads here, read on
/// another host over ssh, one `key=value` line each.
pub const REMOTE_SCRIPT: &str = "echo hostname=$(uname -n); echo kernel=$(uname -srvm); \
    echo cpu_model=$(grep -m1 -E '^(model name|Model|cpu model)' /proc/cpuinfo | cut -d: -f2-); \
    echo cpus=$(getconf _NPROCESSORS_ONLN); \
    echo memory_kb=$(grep MemTotal: /proc/meminfo | tr -s ' ' | cut -d' ' -f2); \
    echo fd_soft=$(ulimit -Sn); echo fd_hard=$(ulimit -Hn); \
    echo nr_open=$(cat /proc/sys/fs/nr_open); \
    echo ports=$(cat /proc/sys/net/ipv4/ip_local_port_range); \
    echo tw_reuse=$(cat /proc/sys/net/ipv4/tcp_tw_reuse); \
    echo somaxconn=$(cat /proc/sys/net/core/somaxconn); \
    for t in nginx lighttpd haproxy; do echo \"tool_$t=$($t -v 2>&1 | grep -m1 -iE 'version|/' \
    || echo not installed)\"; done";

/// Another host's machine, from [`REMOTE_SCRIPT`]'s output there and its evlab's version.
pub fn parse_remote(text: &str, evlab_version: &str) -> Machine {
    let kv: BTreeMap<&str, String> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.split_whitespace().collect::<Vec<_>>().join(" ")))
        .collect();
    let get = |k: &str| {
        kv.get(k)
            .cloned()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "?".into())
    };
    let num = |k: &str| kv.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let tools = ["nginx", "lighttpd", "haproxy"]
        .iter()
        .map(|t| (t.to_string(), get(&format!("tool_{t}"))))
        .collect();
    Machine {
        hostname: get("hostname"),
        kernel: get("kernel"),
        cpu_model: get("cpu_model"),
        cpus: num("cpus") as usize,
        memory_mib: num("memory_kb") / 1024,
        fd_limit_soft: num("fd_soft"),
        fd_limit_hard: num("fd_hard"),
        fs_nr_open: get("nr_open"),
        ip_local_port_range: get("ports"),
        tcp_tw_reuse: get("tw_reuse"),
        somaxconn: get("somaxconn"),
        evlab_version: evlab_version.to_string(),
        tools,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn another_hosts_machine_is_read_from_the_scripts_lines() {
        let text = "hostname=h0\nkernel=Linux 6.18.4 #1 SMP x86_64\ncpu_model= AMD EPYC 7B13\n\
                    cpus=2\nmemory_kb=24000000\nfd_soft=1024\nfd_hard=20000\n\
                    nr_open=1048576\nports=32768\t60999\ntw_reuse=2\nsomaxconn=4096\n\
                    tool_nginx=nginx version: nginx/1.22.1\ntool_lighttpd=not installed\n";
        let m = super::parse_remote(text, "0.1.0");
        assert_eq!(m.hostname, "h0");
        assert_eq!(m.cpu_model, "AMD EPYC 7B13");
        assert_eq!((m.cpus, m.memory_mib, m.fd_limit_hard), (2, 23437, 20000));
        assert_eq!(m.ip_local_port_range, "32768 60999");
        assert_eq!(m.tools["nginx"], "nginx version: nginx/1.22.1");
        assert_eq!(m.tools["haproxy"], "?");
        // The script this machine can run gives what `collect` reads here.
        let out = std::process::Command::new("sh")
            .args(["-c", super::REMOTE_SCRIPT])
            .output()
            .unwrap();
        let there = super::parse_remote(&String::from_utf8_lossy(&out.stdout), "x");
        let here = super::collect("x");
        assert_eq!(
            (
                &there.kernel,
                there.cpus,
                &there.fs_nr_open,
                &there.somaxconn
            ),
            (&here.kernel, here.cpus, &here.fs_nr_open, &here.somaxconn)
        );
    }

    #[test]
    fn collects_this_machine() {
        let m = super::collect("0.0.0");
        assert!(m.kernel.starts_with("Linux"), "{}", m.kernel);
        assert!(m.cpus >= 1);
        assert!(m.fd_limit_soft > 0);
        assert!(m.tools.contains_key("nginx"));
    }
}

/// A reading of the given CPUs' idle and steal time (/proc/stat, in clock ticks) and the
/// clock. The kernel keeps idle time exactly (from its tickless idle entry and exit), but the
/// busy columns only by sampling at each tick, which misses much of a loopback benchmark's work
/// (softirq runs between ticks); so busy is measured as wall time minus idle.
#[derive(Debug, Clone)]
pub struct CpuReading {
    pub at: std::time::Instant,
    /// (idle + iowait, steal) per CPU, ticks.
    pub cpus: Vec<(u64, u64)>,
}

pub fn cpu_ticks(cpus: &[usize]) -> CpuReading {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpus = cpus
        .iter()
        .map(|c| {
            let tag = format!("cpu{c} ");
            text.lines()
                .find(|l| l.starts_with(&tag))
                .map(|l| {
                    let v: Vec<u64> = l
                        .split_whitespace()
                        .skip(1)
                        .take(8)
                        .map(|x| x.parse().unwrap_or(0))
                        .collect();
                    let g = |i: usize| v.get(i).copied().unwrap_or(0);
                    (g(3) + g(4), g(7))
                })
                .unwrap_or((0, 0))
        })
        .collect();
    CpuReading {
        at: std::time::Instant::now(),
        cpus,
    }
}

fn ticks_per_second() -> f64 {
    evlab_sys::clock_ticks_per_second().map_or(100.0, |t| t as f64)
}

/// Busy share (mean over the CPUs: 1 − idle ÷ wall time) and the largest steal share between
/// two readings; None when they are less than 10 ms apart.
pub fn cpu_shares(a: &CpuReading, b: &CpuReading) -> Option<(f64, f64)> {
    let wall = b.at.saturating_duration_since(a.at).as_secs_f64();
    if wall < 0.01 || a.cpus.is_empty() {
        return None;
    }
    let hz = ticks_per_second();
    let mut busy = 0.0;
    let mut steal: f64 = 0.0;
    for (x, y) in a.cpus.iter().zip(&b.cpus) {
        let idle = y.0.saturating_sub(x.0) as f64 / hz;
        busy += (1.0 - idle / wall).clamp(0.0, 1.0);
        steal = steal.max((y.1.saturating_sub(x.1) as f64 / hz / wall).min(1.0));
    }
    Some((busy / a.cpus.len() as f64, steal))
}

#[cfg(test)]
mod cpu_tests {
    use super::*;

    #[test]
    fn a_busy_process_is_seen_before_a_run_and_named() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let q = quiet_check(0.5);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(q.cpu_busy.len(), crate::run::procs::online_cpus());
        let seen = q.busy_processes.iter().find(|p| p.0 == child.id());
        // A spinning shell gets at least BUSY_PROCESS of a CPU in half a second even on a
        // loaded machine (the scheduler gives each runnable task a share).
        assert!(seen.is_some_and(|p| p.1 == "sh"), "{q:?}");
        let why = q.problem().unwrap();
        assert!(why.contains(&format!("sh (pid {}", child.id())), "{why}");
        assert!(!std::path::Path::new(&format!("/proc/{}", child.id())).exists());
    }

    #[test]
    fn other_processes_are_named_and_the_runs_own_are_not() {
        let a = process_reading();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        let b = process_reading();
        child.kill().unwrap();
        child.wait().unwrap();
        // Seen from no run of ours (a root no process descends from), the spinning shell is
        // another process, born after the first reading, and noted with its share.
        let seen = others_between(&a, &b, u32::MAX);
        let sh = seen.iter().find(|p| p.0 == child.id());
        assert!(
            sh.is_some_and(|p| p.1 == "sh" && p.2 >= BUSY_PROCESS),
            "{seen:?}"
        );
        let note = others_note(&seen).unwrap();
        assert!(note.starts_with("busy: other processes used "), "{note}");
        // Seen from this process, it is the run's own child: not another process.
        let ours = others_between(&a, &b, std::process::id());
        assert!(ours.iter().all(|p| p.0 != child.id()), "{ours:?}");
        assert!(others_note(&[]).is_none());
        assert!(others_note(&[(1, "x".into(), 0.09)]).is_none());
    }

    #[test]
    fn shares_from_idle_and_wall_time() {
        let hz = ticks_per_second();
        let t0 = std::time::Instant::now();
        let a = CpuReading {
            at: t0,
            cpus: vec![(1000, 0), (1000, 10)],
        };
        // Two seconds later: CPU 0 idle 0.2 s (busy 90%), CPU 1 idle 1.8 s (busy 10%), and
        // 0.4 s stolen from CPU 1.
        let b = CpuReading {
            at: t0 + std::time::Duration::from_secs(2),
            cpus: vec![
                (1000 + (0.2 * hz) as u64, 0),
                (1000 + (1.8 * hz) as u64, 10 + (0.4 * hz) as u64),
            ],
        };
        let (busy, steal) = cpu_shares(&a, &b).unwrap();
        assert!((busy - (0.9 + 0.1) / 2.0).abs() < 1e-9, "{busy}");
        assert!((steal - 0.2).abs() < 1e-9, "{steal}");
        assert!(cpu_shares(&a, &a).is_none());
        // This machine's CPU 0 is in /proc/stat.
        assert_eq!(cpu_ticks(&[0]).cpus.len(), 1);
    }
}

/// One process's CPU time so far (user + system, ticks), its command and its parent.
#[derive(Debug, Clone)]
pub struct ProcTicks {
    pub ticks: u64,
    pub comm: String,
    pub ppid: u32,
}

/// Every process's CPU time so far, from /proc.
fn process_ticks() -> BTreeMap<u32, ProcTicks> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The command is in parentheses and may hold spaces; the fields follow the last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // ppid, utime and stime are fields 4, 14 and 15 of stat; f[0] is field 3.
        let t = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        out.insert(
            pid,
            ProcTicks {
                ticks: t(11) + t(12),
                comm,
                ppid: t(1) as u32,
            },
        );
    }
    out
}

/// Every process's CPU time at an instant: two readings tell what else ran meanwhile.
#[derive(Debug, Clone)]
pub struct ProcReading {
    pub at: std::time::Instant,
    pub procs: BTreeMap<u32, ProcTicks>,
}

pub fn process_reading() -> ProcReading {
    ProcReading {
        at: std::time::Instant::now(),
        procs: process_ticks(),
    }
}

/// Whether `pid` is `root` or descends from it, by the parents in `procs`.
fn descends(procs: &BTreeMap<u32, ProcTicks>, mut pid: u32, root: u32) -> bool {
    for _ in 0..64 {
        if pid == root {
            return true;
        }
        match procs.get(&pid) {
            Some(p) if p.ppid != 0 && p.ppid != pid => pid = p.ppid,
            _ => return false,
        }
    }
    false
}

/// The processes that used CPU between two readings other than `root` and its descendants
/// (a run's own server, clients and peers) and the kernel's threads (whose softirq and
/// writeback work a run itself causes): (pid, command, share of one CPU), busiest first, those
/// of at least [`BUSY_PROCESS`]. A process born after `a` counts from zero; one that both
/// started and ended between the readings is not seen.
pub fn others_between(a: &ProcReading, b: &ProcReading, root: u32) -> Vec<(u32, String, f64)> {
    let wall = b.at.saturating_duration_since(a.at).as_secs_f64();
    if wall < 0.01 {
        return Vec::new();
    }
    let hz = ticks_per_second();
    let kernel = |pid: u32, p: &ProcTicks| pid == 2 || p.ppid == 2;
    let mut out: Vec<(u32, String, f64)> = b
        .procs
        .iter()
        .filter(|(pid, p)| !kernel(**pid, p) && !descends(&b.procs, **pid, root))
        .filter_map(|(pid, p)| {
            let before = a.procs.get(pid).map_or(0, |q| q.ticks);
            let share = p.ticks.saturating_sub(before) as f64 / hz / wall;
            (share >= BUSY_PROCESS).then(|| (*pid, p.comm.clone(), share))
        })
        .collect();
    out.sort_by(|x, y| y.2.total_cmp(&x.2));
    out
}

/// A point's note when other processes used at least [`NOT_QUIET`] of a CPU while it ran:
/// their total and the busiest three by name.
pub fn others_note(others: &[(u32, String, f64)]) -> Option<String> {
    let total: f64 = others.iter().map(|o| o.2).sum();
    (total >= NOT_QUIET).then(|| {
        let names: Vec<String> = others
            .iter()
            .take(3)
            .map(|(pid, c, s)| format!("{c} (pid {pid}) {:.0}%", s * 100.0))
            .collect();
        format!(
            "busy: other processes used {:.0}% of a CPU meanwhile: {}",
            total * 100.0,
            names.join(", ")
        )
    })
}

/// Watches the machine for `seconds`: each CPU's busy and stolen time, and the processes
/// (other than this one) that used CPU meanwhile.
pub fn quiet_check(seconds: f64) -> Quiet {
    let cpus: Vec<usize> = (0..crate::run::procs::online_cpus()).collect();
    let (a, pa) = (cpu_ticks(&cpus), process_ticks());
    std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
    let (b, pb) = (cpu_ticks(&cpus), process_ticks());
    let wall = b.at.saturating_duration_since(a.at).as_secs_f64().max(1e-3);
    let hz = ticks_per_second();
    let per = |x: u64, y: u64| (y.saturating_sub(x) as f64 / hz / wall).clamp(0.0, 1.0);
    let me = std::process::id();
    let mut busy_processes: Vec<(u32, String, f64)> = pb
        .iter()
        .filter(|(pid, _)| **pid != me)
        .filter_map(|(pid, p)| {
            let t0 = pa.get(pid)?.ticks;
            let share = p.ticks.saturating_sub(t0) as f64 / hz / wall;
            (share >= BUSY_PROCESS).then(|| (*pid, p.comm.clone(), share))
        })
        .collect();
    busy_processes.sort_by(|x, y| y.2.total_cmp(&x.2));
    Quiet {
        seconds: wall,
        cpu_busy: a
            .cpus
            .iter()
            .zip(&b.cpus)
            .map(|(x, y)| 1.0 - per(x.0, y.0))
            .collect(),
        steal: a
            .cpus
            .iter()
            .zip(&b.cpus)
            .map(|(x, y)| per(x.1, y.1))
            .fold(0.0, f64::max),
        busy_processes,
    }
}
