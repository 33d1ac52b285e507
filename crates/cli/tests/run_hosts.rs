//! `evlab run --hosts` against real hosts: three network namespaces made by
//! scripts/netns-hosts.sh (a server and two clients, each with its own sshd), reached over the
//! system's OpenSSH. Needs root (namespaces) and sshd; skips with the reason otherwise, and
//! fails where EVLAB_REQUIRE asks for `netns`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::{workspace, NetnsHosts};
use evlab_lab::model::results::{PointResult, Status, Summary};
use evlab_wire::load::LoadReport;

/// Debian's libfaketime (package libfaketime), preloaded on a test host to move its clock.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

fn usable() -> bool {
    NetnsHosts::usable("run --hosts")
}

/// A run's summary.json, read as the lab's own type.
fn summary(out: &Path) -> Summary {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// A client's own report (`load/point-NNN-HOST.json`), as the wire type it was written as.
fn client_report(out: &Path, p: &PointResult, host: &str) -> LoadReport {
    let f = out.join(format!("load/point-{:03}-{host}.json", p.index));
    serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap()
}

#[test]
fn a_run_across_one_server_and_two_client_hosts_merges_their_reports_exactly() {
    if !usable() {
        return;
    }
    let faked = std::path::Path::new(LIBFAKETIME).exists();
    if !evlab_poll::testing::require(
        "faketime",
        faked,
        "run --hosts: no libfaketime (scripts/setup.sh installs it): h2's clock is not moved",
    ) {
        return;
    }
    let t0 = Instant::now();
    let (hosts, file) = NetnsHosts::up('r', 3);
    // Host h2's clock runs 200 ms ahead: the namespaces share this machine's clock, so
    // libfaketime moves it for every process its sshd starts (evlab among them).
    hosts.sshd_config_add(
        2,
        &format!("SetEnv LD_PRELOAD={LIBFAKETIME} FAKETIME=+0.2 FAKETIME_DONT_FAKE_MONOTONIC=1"),
    );
    let spec = hosts.dir.join("tiny.toml");
    std::fs::write(
        &spec,
        "name = \"hosts-tiny\"\ndescription = \"epoll-et across hosts\"\n\
         mechanisms = [\"epoll-et\"]\nrates = [200, 300]\nidle = [0, 50]\n\
         duration_s = 1\ntrials = 1\nkeep_latencies = true\n",
    )
    .unwrap();
    let out = hosts.dir.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_evlab"))
        .args(["run", spec.to_str().unwrap(), "--quiet", "--hosts"])
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "{}\n{err}",
        String::from_utf8_lossy(&o.stdout)
    );
    let s = summary(&out);
    // The three hosts, each with its kernel, evlab and clock offset: zero within its bound on
    // h0 and h1 (the namespaces share this machine's clock), +200 ms on h2, found.
    let names: Vec<&str> = s.hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["h0", "h1", "h2"]);
    assert_eq!(s.hosts[0].role, Some(evlab_lab::model::hosts::Role::Server));
    for (i, h) in s.hosts.iter().enumerate() {
        assert!(h.kernel.starts_with("Linux"), "{h:?}");
        assert!(h.evlab_version.starts_with("evlab "), "{h:?}");
        // scripts/netns-hosts.sh tunes its hosts as a testbed's clients: TIME_WAIT reusable.
        assert_eq!(h.tcp_tw_reuse, Some(1), "{h:?}");
        assert!(h.ephemeral_ports.unwrap() > 1000, "{h:?}");
        let (off, bound) = (h.clock_offset_ms, h.clock_bound_ms);
        let injected = if i == 2 { 200.0 } else { 0.0 };
        assert!(
            (off - injected).abs() <= bound + 0.1 && bound < 50.0,
            "{h:?}"
        );
    }
    assert_eq!(s.points.len(), 4);
    for p in &s.points {
        assert_eq!(p.status, Status::Ok, "{p:?}");
        // No client started late: h2 was told the instant in its own clock, 200 ms ahead.
        assert!(p.flags.is_empty(), "{p:?}");
        for h in &p.hosts {
            assert!(h.late_ms.abs() < 10.0, "{h:?}");
        }
        let load = p.load.as_ref().unwrap();
        // The common window is the clients' run, in this machine's clock: without h2's
        // correction it would be 200 ms short.
        let window = load.duration_s.unwrap();
        assert!((0.9..1.1).contains(&window), "{window}");
        let raw: Vec<LoadReport> = ["h1", "h2"]
            .iter()
            .map(|h| client_report(&out, p, h))
            .collect();
        // Each client got half the rate, and the point's replies are theirs added.
        for r in &raw {
            assert_eq!(r.config.rate * 2.0, p.rate);
        }
        let sum: u64 = raw.iter().map(|r| r.replies.total).sum();
        assert_eq!(load.replies, Some(sum), "{p:?}");
        assert!(sum > 0);
        // The merged p99 comes from the added histograms: it lies between the clients' own.
        let p99s: Vec<f64> = raw.iter().map(|r| r.latency_ms.p99).collect();
        let merged = load.latency_ms.p99.unwrap();
        let (lo, hi) = (p99s[0].min(p99s[1]), p99s[0].max(p99s[1]));
        assert!(lo <= merged && merged <= hi, "{merged} not in [{lo}, {hi}]");
        // And the merged percentiles are those of every reply of both clients pooled (each
        // client's replies brought over its ssh connection), within the histogram's precision.
        let mut pooled: Vec<u64> = ["h1", "h2"]
            .iter()
            .flat_map(|h| {
                let f = out.join(format!("load/point-{:03}-{h}.latencies.csv", p.index));
                common::latencies_csv(&std::fs::read_to_string(f).unwrap())
            })
            .collect();
        assert_eq!(pooled.len() as u64, sum);
        let l = &load.latency_ms;
        let pct = [l.p50, l.p90, l.p99, l.p999, l.max].map(Option::unwrap);
        common::assert_percentiles_match(pct, &mut pooled);
        // The server's CPU and counters were read on its host and over the bridge.
        assert!(p.server_cpu_s.is_some(), "{p:?}");
        assert!(p.server.as_ref().unwrap().requests >= sum, "{p:?}");
        assert_eq!(p.hosts.len(), 2);
        // The clients' offered rates, as each scheduled its own, add up to the point's.
        let offered: f64 = p.hosts.iter().map(|h| h.offered_rate).sum();
        assert!(
            (offered - p.rate).abs() <= 0.01 * p.rate,
            "{offered} of {}",
            p.rate
        );
    }
    // The report says where it ran, and h2's clock.
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("across hosts"), "{md}");
    let h2 = md
        .split("h2 (client")
        .nth(1)
        .and_then(|t| t.split("clock offset ").nth(1))
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no clock offset of h2 in:\n{md}"));
    assert!((h2 - 200.0).abs() < 10.0, "{h2}");
    // Nothing left running on any host.
    let left = hosts.evlab_left();
    assert!(left.is_empty(), "{left:?}");
    drop(hosts);
    eprintln!("run --hosts test: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn an_experiment_made_for_hosts_is_refused_without_them() {
    let dir = std::env::temp_dir().join(format!("evlab-runhosts-refuse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Made for hosts: refused on this machine alone, before anything is made.
    let o = Command::new(env!("CARGO_BIN_EXE_evlab"))
        .args(["run", "testbed", "--out"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("made for a server host and client hosts") && err.contains("--hosts FILE"),
        "{err}"
    );
    assert!(!dir.join("out").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `evlab run SPEC --hosts FILE --out DIR/out` started in the background, the spec written to
/// DIR first.
fn start_run(hosts: &NetnsHosts, file: &Path, spec: &str) -> (std::process::Child, PathBuf) {
    let path = hosts.dir.join("spec.toml");
    std::fs::write(&path, spec).unwrap();
    let out = hosts.dir.join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_evlab"))
        .args(["run", path.to_str().unwrap(), "--quiet", "--hosts"])
        .arg(file)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (child, out)
}

/// The `evlab load` processes on host `i` (pids), by their command line.
fn loads_on(hosts: &NetnsHosts, i: usize) -> Vec<u32> {
    hosts
        .evlab_on(i)
        .into_iter()
        .filter(|(_, args)| args.contains(" load "))
        .map(|(pid, _)| pid)
        .collect()
}

/// Waits for the run to end; its stdout, having checked it succeeded.
fn finished(child: std::process::Child) -> String {
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

fn kill(pid: u32, signal: &str) {
    let s = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(s.success(), "kill {signal} {pid}");
}

#[test]
fn a_client_killed_mid_run_fails_the_point_naming_its_host_and_nothing_is_merged() {
    if !usable() {
        return;
    }
    let t0 = Instant::now();
    let (hosts, file) = NetnsHosts::up('k', 3);
    let (run, out) = start_run(
        &hosts,
        &file,
        "name = \"hosts-kill\"\ndescription = \"a client killed\"\nmechanisms = [\"epoll-et\"]\n\
         rates = [200]\nidle = [0]\nduration_s = 3\nwarmup_s = 0\ntrials = 1\n",
    );
    // h2's evlab load, killed once it has run a while (it waits ~1.2 s for the agreed
    // instant, then runs 3 s).
    let end = Instant::now() + std::time::Duration::from_secs(60);
    let pid = loop {
        if let Some(&p) = loads_on(&hosts, 2).first() {
            break p;
        }
        assert!(Instant::now() < end, "no evlab load appeared on h2");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    std::thread::sleep(std::time::Duration::from_millis(2000));
    kill(pid, "-KILL");
    let said = finished(run);
    assert!(said.contains("1 points (1 failed)"), "{said}");
    let s = summary(&out);
    let p = &s.points[0];
    assert_eq!(p.status, Status::Failed, "{p:?}");
    let reason = p.reason.as_deref().unwrap();
    assert!(reason.contains("evlab load on host h2 failed"), "{reason}");
    // Nothing merged: h1 finished its run, but its report is not the point's.
    assert!(p.load.is_none(), "{p:?}");
    assert!(p.hosts.is_empty(), "{p:?}");
    assert!(!out.join("load/point-000-h1.json").exists());
    let left = hosts.evlab_left();
    assert!(left.is_empty(), "{left:?}");
    drop(hosts);
    eprintln!("killed client test: {:.1} s", t0.elapsed().as_secs_f64());
}

/// The pids of this machine's ssh processes connected to `addr`'s sshd: the master
/// connection (its multiplexed sessions use its socket, not their own).
fn ssh_masters_to(addr: &str) -> Vec<u32> {
    let o = Command::new("ss")
        .args(["-Htnp", "dst", addr, "dport", "=", ":22"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let mut pids: Vec<u32> = text
        .split("pid=")
        .skip(1)
        .filter_map(|x| x.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

#[test]
fn a_lost_ssh_connection_is_retried_once_then_fails_the_point_naming_the_host() {
    if !usable() {
        return;
    }
    let t0 = Instant::now();
    let (hosts, file) = NetnsHosts::up('l', 3);
    let h1 = hosts.address(1);
    let (mut run, out) = start_run(
        &hosts,
        &file,
        "name = \"hosts-lost\"\ndescription = \"ssh lost\"\nmechanisms = [\"epoll-et\"]\n\
         rates = [200, 300]\nidle = [0]\nduration_s = 2\nwarmup_s = 0\ntrials = 1\n",
    );
    // Every evlab load h1 runs, in order: the 1st (point 0) loses its connection and is run
    // again (the 2nd, left alone); the 3rd and 4th (point 1, and its second attempt) both lose
    // theirs. A connection is lost by killing h1's ssh master connection while the load runs.
    let mut seen: Vec<u32> = vec![];
    let mut kills = 0;
    let end = Instant::now() + std::time::Duration::from_secs(110);
    while run.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "the run did not end");
        for pid in loads_on(&hosts, 1) {
            if seen.contains(&pid) {
                continue;
            }
            seen.push(pid);
            if [1, 3, 4].contains(&seen.len()) {
                // Inside its run (it waits ~1.1 s for the agreed instant, then runs 2 s).
                std::thread::sleep(std::time::Duration::from_millis(1000));
                let masters = ssh_masters_to(&h1);
                assert!(!masters.is_empty(), "no ssh connection to h1");
                for m in masters {
                    kill(m, "-KILL");
                }
                kills += 1;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(kills, 3, "h1's loads: {seen:?}");
    let said = finished(run);
    assert!(said.contains("2 points (1 failed)"), "{said}");
    let s = summary(&out);
    let (p0, p1) = (&s.points[0], &s.points[1]);
    assert_eq!(p0.status, Status::Ok, "{p0:?}");
    assert!(
        p0.notes
            .iter()
            .any(|n| n.contains("measured again: the ssh connection to host h1 was lost")),
        "{:?}",
        p0.notes
    );
    assert!(p0.load.as_ref().unwrap().replies.unwrap() > 0, "{p0:?}");
    assert_eq!(p1.status, Status::Failed, "{p1:?}");
    let reason = p1.reason.as_deref().unwrap();
    assert!(
        reason.contains("the ssh connection to host h1 was lost, and again"),
        "{reason}"
    );
    assert!(p1.load.is_none(), "{p1:?}");
    let left = hosts.evlab_left();
    assert!(left.is_empty(), "{left:?}");
    drop(hosts);
    eprintln!("lost ssh test: {:.1} s", t0.elapsed().as_secs_f64());
}

/// The groups in the CPU controller's root (cgroup v1's `cpu`, else v2's) named `evlab-…`
/// that hold `pid`: their directory.
fn budget_groups_of(pid: u32) -> Vec<PathBuf> {
    let root = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup"]
        .iter()
        .map(Path::new)
        .find(|r| r.join("cgroup.procs").exists())
        .unwrap();
    std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|d| {
            d.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("evlab-"))
                && std::fs::read_to_string(d.join("cgroup.procs"))
                    .is_ok_and(|t| t.lines().any(|l| l.trim() == pid.to_string()))
        })
        .collect()
}

#[test]
fn the_server_cpu_budget_is_a_cgroup_on_the_server_host_removed_after() {
    if !usable() {
        return;
    }
    let t0 = Instant::now();
    let (hosts, file) = NetnsHosts::up('b', 2);
    let (mut run, out) = start_run(
        &hosts,
        &file,
        "name = \"hosts-budget\"\ndescription = \"a budget on the server host\"\n\
         mechanisms = [\"epoll-et\"]\nrates = [2000]\nidle = [0]\nduration_s = 3\n\
         warmup_s = 0\ntrials = 1\nserver_cpu_budget = 0.25\n",
    );
    // While the point runs: its server (on h0) is in a group of its own with the quota.
    let mut group: Option<(PathBuf, String)> = None;
    let end = Instant::now() + std::time::Duration::from_secs(90);
    while run.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "the run did not end");
        if group.is_none() {
            for (pid, args) in hosts.evlab_on(0) {
                if !args.contains(" serve ") {
                    continue;
                }
                if let Some(d) = budget_groups_of(pid).into_iter().next() {
                    let quota = ["cpu.max", "cpu.cfs_quota_us"]
                        .iter()
                        .find_map(|f| std::fs::read_to_string(d.join(f)).ok())
                        .unwrap();
                    let period =
                        std::fs::read_to_string(d.join("cpu.cfs_period_us")).unwrap_or_default();
                    group = Some((d, format!("{} {}", quota.trim(), period.trim())));
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let said = finished(run);
    let (dir, quota) = group.expect("the server was never seen in a budget group on h0");
    // 25% of one CPU: 2.5 ms each 10 ms (v1: quota then period; v2: `cpu.max`).
    assert!(quota == "2500 10000" || quota == "2500 10000 ", "{quota}");
    assert!(!dir.exists(), "{} left", dir.display());
    assert!(said.contains("1 points (0 failed)"), "{said}");
    let s = summary(&out);
    let p = &s.points[0];
    assert_eq!(p.status, Status::Ok, "{p:?}");
    assert_eq!(p.server_cpu_budget, Some(0.25), "{p:?}");
    // The quota bounds the server's CPU by construction (its time over a window a little
    // longer than the load's, read on its host).
    let util = p.server_cpu_util.unwrap();
    assert!(util <= 0.3, "server CPU {util} over a 0.25 budget: {p:?}");
    let left = hosts.evlab_left();
    assert!(left.is_empty(), "{left:?}");
    drop(hosts);
    eprintln!(
        "budget test: {:.1} s (server CPU {util:.3} of a 0.25 budget)",
        t0.elapsed().as_secs_f64()
    );
}

/// Runs `argv` in host `i`'s namespace: its stdout, and whether it succeeded.
fn in_host(hosts: &NetnsHosts, i: usize, argv: &[&str]) -> (String, bool) {
    let o = Command::new("ip")
        .args(["netns", "exec", &format!("{}-h{i}", hosts.tag)])
        .args(argv)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        o.status.success(),
    )
}

/// TCP segments retransmitted in host `i`'s namespace so far (its /proc/net/snmp).
fn retransmits(hosts: &NetnsHosts, i: usize) -> u64 {
    let (snmp, ok) = in_host(hosts, i, &["cat", "/proc/net/snmp"]);
    assert!(ok);
    let tcp: Vec<Vec<&str>> = snmp
        .lines()
        .filter(|l| l.starts_with("Tcp:"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let at = tcp[0].iter().position(|k| *k == "RetransSegs").unwrap();
    tcp[1][at].parse().unwrap()
}

/// What `[network]` may have left on host `i`: a netem or tbf qdisc, an iptables statistic rule.
fn network_left(hosts: &NetnsHosts, i: usize) -> String {
    let (q, _) = in_host(hosts, i, &["tc", "qdisc", "show"]);
    let (r, _) = in_host(hosts, i, &["iptables", "-S"]);
    q.lines()
        .chain(r.lines())
        .filter(|l| l.contains("netem") || l.contains("tbf") || l.contains("statistic"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn network_loss_and_rate_are_applied_on_a_client_host_recorded_and_removed_after() {
    if !usable() {
        return;
    }
    let t0 = Instant::now();
    let (hosts, file) = NetnsHosts::up('w', 2);
    let spec = "name = \"hosts-wan\"\ndescription = \"1% loss\"\nmechanisms = [\"epoll-et\"]\n\
                rates = [300]\nidle = [0]\nduration_s = 3\nwarmup_s = 0\ntrials = 1\n\
                [network]\nloss_pct = 1\nrate_mbit = 100\n";
    // On this machine alone it is refused: its conditions are for hosts' interfaces.
    std::fs::write(hosts.dir.join("local.toml"), spec).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_evlab"))
        .args(["run", hosts.dir.join("local.toml").to_str().unwrap()])
        .arg("--out")
        .arg(hosts.dir.join("local-out"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("runs only across hosts"),
        "{err}"
    );
    let before = retransmits(&hosts, 0) + retransmits(&hosts, 1);
    let (mut run, out) = start_run(&hosts, &file, spec);
    // While it runs, the conditions are on h1 (the client), not on h0.
    let mut seen = String::new();
    while run.try_wait().unwrap().is_none() {
        if seen.is_empty() {
            seen = network_left(&hosts, 1);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let said = finished(run);
    assert!(said.contains("1 points (0 failed)"), "{said}");
    assert!(!seen.is_empty(), "no condition seen on h1");
    let after = retransmits(&hosts, 0) + retransmits(&hosts, 1);
    assert!(
        after > before,
        "no retransmits with 1% loss: {before} → {after}"
    );
    let s = summary(&out);
    let asked = s.experiment.network.as_ref().unwrap();
    assert_eq!(asked.loss_pct, Some(1.0));
    // The point recorded each host's retransmits over its run: the loss made some.
    let rt = &s.points[0].tcp_retransmits;
    assert!(rt["h0"] + rt["h1"] > 0, "{rt:?}");
    let n = &s.network;
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!(n[0].host, "h1");
    assert_eq!(n[0].interface, "eth0");
    assert_eq!(n[0].condition, "1% loss, 100 Mbit/s");
    assert!(n[0].removed);
    let how = n[0].how.join(",");
    assert!(how == "netem" || how == "tbf,iptables statistic", "{how}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("1% loss, 100 Mbit/s on host h1's eth0"), "{md}");
    for i in 0..2 {
        assert_eq!(network_left(&hosts, i), "", "left on h{i}");
    }
    // A delay needs netem: where this kernel has none, it is refused with the reason, before
    // anything is measured, and nothing is left.
    let (_, ok) = in_host(
        &hosts,
        1,
        &["tc", "qdisc", "add", "dev", "lo", "root", "netem"],
    );
    if ok {
        in_host(&hosts, 1, &["tc", "qdisc", "del", "dev", "lo", "root"]);
    } else {
        std::fs::remove_dir_all(&out).unwrap();
        let (run, _) = start_run(
            &hosts,
            &file,
            &spec.replace("loss_pct = 1", "delay_ms = 10"),
        );
        let o = run.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("host h1: [network] (10 ms delay, 100 Mbit/s) cannot be applied there")
                && err.contains("a delay needs the netem qdisc"),
            "{err}"
        );
        assert_eq!(network_left(&hosts, 1), "");
    }
    let left = hosts.evlab_left();
    assert!(left.is_empty(), "{left:?}");
    drop(hosts);
    eprintln!("network test: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn the_testbed_experiment_runs_on_one_server_and_four_client_hosts_shortened() {
    if !usable() {
        return;
    }
    let t0 = Instant::now();
    let (hosts, file) = NetnsHosts::up('t', 5);
    // The built-in testbed, shortened: its series and idle counts (10,000 idle connections
    // down to 100), one low rate, one trial, 1 s points. What one box can check is that its
    // shape runs across 1 + 4 hosts and writes its report, not what it would measure.
    let text = std::fs::read_to_string(workspace().join("experiments/testbed.toml")).unwrap();
    let short: String = text
        .lines()
        .map(|l| match l.split(" = ").next() {
            Some("rates") => "rates = [400]".to_string(),
            Some("idle") => "idle = [0, 100]".to_string(),
            Some("trials") => "trials = 1".to_string(),
            Some("duration_s") => "duration_s = 1".to_string(),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(short.contains("hosts_only = true") && short.contains("rates = [400]"));
    let (run, out) = start_run(&hosts, &file, &short);
    let said = finished(run);
    let s = summary(&out);
    assert_eq!(s.hosts.len(), 5);
    let series: std::collections::BTreeSet<&str> =
        s.points.iter().map(|p| p.series.as_str()).collect();
    // uring runs where this kernel has io_uring (else the plan skips it, saying so).
    for m in ["select", "poll", "epoll-lt", "epoll-et"] {
        assert!(series.contains(m), "{series:?}");
    }
    assert_eq!(s.points.len(), series.len() * 2, "{said}");
    for p in &s.points {
        assert_eq!(p.status, Status::Ok, "{p:?}");
        assert_eq!(p.hosts.len(), 4, "{p:?}");
    }
    assert!(out.join("report.html").exists() && out.join("report.md").exists());
    let left = hosts.evlab_left();
    assert!(left.is_empty(), "{left:?}");
    drop(hosts);
    eprintln!("testbed test: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn a_client_host_held_to_a_tenth_of_a_cpu_is_flagged_saturated_naming_it() {
    if !usable() {
        return;
    }
    let t0 = Instant::now();
    let (hosts, file) = NetnsHosts::up('q', 3);
    // Everything h2's sshd starts from now on (the run's evlab load there) may use 0.1 CPU.
    let quota = hosts.cpu_quota(2, 0.1);
    // 1,500 connections/s per client: this build's generator needs more than a tenth of a CPU
    // for that (about a seventh in a debug build, a twentieth in a release build would not:
    // the test binary is the debug build).
    let (run, out) = start_run(
        &hosts,
        &file,
        "name = \"hosts-quota\"\ndescription = \"a client held to 0.1 CPU\"\n\
         mechanisms = [\"epoll-et\"]\nrates = [3000]\nduration_s = 2\ntrials = 1\n",
    );
    let said = finished(run);
    let s = summary(&out);
    let p = &s.points[0];
    let flags = &p.flags;
    assert!(
        flags
            .iter()
            .any(|f| f.starts_with("client on host h2 saturated")
                && f.contains("CPU quota (0.10 CPU)")),
        "{flags:?}\n{said}"
    );
    assert!(
        !flags.iter().any(|f| f.contains("host h1 saturated")),
        "{flags:?}"
    );
    // Measured, but not valid: a flagged point is left out of every verdict.
    assert_eq!(p.status, Status::Ok, "{p:?}");
    assert!(!p.valid());
    // h2's own report says its quota and that it was throttled; h1's has none.
    let cpu2 = client_report(&out, p, "h2").cpu;
    assert_eq!(cpu2.quota_cpus, Some(0.1), "{cpu2:?}");
    assert!(cpu2.throttled_s.unwrap() > 0.0, "{cpu2:?}");
    let cpu1 = client_report(&out, p, "h1").cpu;
    assert_eq!(cpu1.quota_cpus, None, "{cpu1:?}");
    let left = hosts.evlab_left();
    assert!(left.is_empty(), "{left:?}");
    drop(quota);
    drop(hosts);
    eprintln!("quota test: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn a_proxy_runs_across_hosts_with_its_origin_on_the_origin_host_behind_a_lossy_link() {
    if !usable() {
        return;
    }
    let t0 = Instant::now();
    let (hosts, file) = NetnsHosts::up('p', 3);
    // h2 becomes the origin host: the proxy on h0 (the server host) fetches from it.
    let text = std::fs::read_to_string(&file).unwrap();
    let at = text.rfind("role = \"client\"").unwrap();
    let text = format!("{}role = \"origin\"{}", &text[..at], &text[at + 15..]);
    std::fs::write(&file, &text).unwrap();
    // The Polymix workload (its file set made on h2 and h1), 5% of the packets between the
    // proxy and h2 lost: the proxy paper's WAN between proxy and origin (no delay: netem is
    // not on every kernel).
    let (run, out) = start_run(
        &hosts,
        &file,
        "name = \"hosts-proxy\"\ndescription = \"a proxy across hosts\"\nfindings = \"none\"\n\
         mechanisms = [\"epoll-et\"]\nworkload = \"polymix\"\npolymix_objects = 200\n\
         rates = [40]\nduration_s = 2\ntrials = 1\ntimeout_s = 10\n\
         [proxy]\norigin_flags = []\n[network]\nloss_pct = 5\nhosts = [\"h2\"]\n",
    );
    let said = finished(run);
    let s = summary(&out);
    let p = &s.points[0];
    assert_eq!(p.status, Status::Ok, "{p:?}\n{said}");
    let load = p.load.as_ref().unwrap();
    let replies = load.replies.unwrap();
    assert!(replies > 0 && load.status_2xx == Some(replies), "{p:?}");
    // The origin ran on h2, the proxy on h0 in front of it.
    let cmds = p.commands.join("\n");
    assert!(cmds.contains("& origin=$!   # on host h2"), "{cmds}");
    assert!(cmds.contains(" proxy --listen 10."), "{cmds}");
    assert!(cmds.contains("--polymix "), "{cmds}");
    // The loss was on h2's link, recorded, and removed.
    let n = &s.network;
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!(n[0].host, "h2");
    assert!(n[0].removed);
    assert_eq!(network_left(&hosts, 2), "");
    // The link lost packets: their senders retransmitted (the proxy, h0, when the loss is
    // made on h2's input; h2 where netem makes it on its output): 5% of the several hundred
    // segments the proxy sends its origin is tens lost, so none at all would be a broken rule.
    let rt = &p.tcp_retransmits;
    assert!(rt["h0"] + rt["h2"] > 0, "{rt:?}");
    // Each host's run directory (file sets, document roots) is gone.
    for i in 0..3 {
        let work = hosts.dir.join(format!("h{i}/work"));
        let runs: Vec<_> = std::fs::read_dir(&work)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("run-"))
            .collect();
        assert!(runs.is_empty(), "h{i}: {runs:?}");
    }
    let left = hosts.evlab_left();
    assert!(left.is_empty(), "{left:?}");
    drop(hosts);
    eprintln!(
        "proxy across hosts test: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
