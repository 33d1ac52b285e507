//! The hosts of a run across hosts (`evlab run --hosts FILE`), checked and ready: each host's
//! binary, kernel, clock and CPUs; the run's directory there; file sets, copied client files
//! (a URI list, a session log), the server host's peers and CPU budgets, `[network]`; and
//! where each process of a point or a step runs (`run::remote` starts them).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::run::fileset;
use crate::run::hosts::Ssh;
use crate::run::progress::Progress;
use crate::run::remote_budget::RemoteCgroup;
use crate::run::remote_peers;
use crate::run::remote_proxy;
use evlab_reason::model::hosts::{Host, HostCheck, Hosts, NetworkApplied, Role};
use evlab_reason::LabError;

/// The hosts of a run, checked and ready: connections, each host's check (binary, kernel,
/// clock), its workdir resolved there, its CPUs.
pub struct HostsRun {
    pub hosts: Hosts,
    pub ssh: Ssh,
    pub checks: Vec<HostCheck>,
    pub(crate) workdirs: BTreeMap<String, String>,
    pub(crate) ncpus: BTreeMap<String, usize>,
    /// The server host's clock ticks per second (its /proc's unit).
    pub(crate) ticks: f64,
    /// The run's directory on each host (`WORKDIR/run-PID-TIME`), by name; a one-byte
    /// document root is `www` inside the serving host's.
    pub(crate) dirs: BTreeMap<String, String>,
    pub(crate) server_ip: IpAddr,
    /// With `[proxy]`: the origin host and its address.
    pub(crate) origin: Option<(Host, IpAddr)>,
    /// The workload's file set on each host that reads one (the serving host and the clients),
    /// by name: its directory there (series with their own object size: siblings of it).
    pub(crate) filesets: BTreeMap<String, String>,
    /// Where the server's CPU budgets are made on its host (found and tried by `prepare` when
    /// the experiment has one).
    pub(crate) cgroup: Option<RemoteCgroup>,
    /// `[network]`'s conditions in place on the client hosts, removed by `finish`.
    pub(crate) network: Vec<crate::run::wan::Applied>,
    /// The files the clients read (a URI list, a session log), copied to each: (host, the
    /// local path) → the copy's path there.
    pub(crate) copies: BTreeMap<(String, String), String>,
    /// The peers and mechanisms the server host offers.
    pub(crate) peers: remote_peers::PeersThere,
    /// The server's CPU budget calibration chose (`server_cpu_budget = "auto"`), a share of
    /// one CPU.
    pub calibrated_budget: Option<f64>,
}

pub(crate) fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

pub(crate) fn fail(host: &Host, what: String) -> LabError {
    LabError::Io(format!("host {}: {what}", host.name))
}

impl HostsRun {
    /// Checks every host (this evlab's binary there by sha256, copied where it differs; its
    /// kernel; its clock's offset) and makes the run's document root on the server host.
    /// With a server CPU budget in `spec`, the server host's cgroups are found and tried too.
    pub fn prepare(
        hosts: Hosts,
        spec: &evlab_reason::model::spec::Spec,
        evlab: &Path,
        progress: &Progress,
    ) -> Result<HostsRun, LabError> {
        if hosts.clients().next().is_none() {
            return Err(LabError::Io(
                "the hosts file names no client host (role = \"client\")".into(),
            ));
        }
        let server = hosts.server().clone();
        let server_ip: IpAddr = server
            .address
            .as_deref()
            .ok_or_else(|| {
                fail(
                    &server,
                    "give its `address`: the clients connect to it".into(),
                )
            })?
            .parse()
            .map_err(|e| fail(&server, format!("its address is not an IP address: {e}")))?;
        let ssh = Ssh::new(&hosts)?;
        let mut run = HostsRun {
            hosts: hosts.clone(),
            ssh,
            checks: vec![],
            workdirs: BTreeMap::new(),
            ncpus: BTreeMap::new(),
            ticks: 100.0,
            dirs: BTreeMap::new(),
            server_ip,
            origin: None,
            filesets: BTreeMap::new(),
            cgroup: None,
            network: vec![],
            calibrated_budget: None,
            peers: Default::default(),
            copies: BTreeMap::new(),
        };
        run.origin = remote_proxy::origin_of(&hosts, spec)?;
        let used = |h: &&Host| h.role != Role::Origin || spec.proxy.is_some();
        for h in hosts.hosts.iter().filter(used) {
            let c = run.ssh.check(h, evlab, true)?;
            progress.note(&format!(
                "evlab run: host {} ({:?}): {}, {}{}, clock {:+.2} ms ± {:.2} ms",
                h.name,
                h.role,
                c.kernel,
                c.evlab_version,
                if c.copied { " (copied there)" } else { "" },
                c.clock_offset_ms,
                c.clock_bound_ms
            ));
            let out = run.ssh.ok(
                h,
                &format!(
                    "cd {} && pwd && getconf _NPROCESSORS_ONLN && getconf CLK_TCK",
                    h.workdir()
                ),
                &[],
            )?;
            let v: Vec<&str> = out.lines().map(str::trim).collect();
            let (Some(dir), Some(Ok(n)), Some(Ok(t))) = (
                v.first(),
                v.get(1).map(|x| x.parse::<usize>()),
                v.get(2).map(|x| x.parse::<f64>()),
            ) else {
                return Err(fail(
                    h,
                    format!("cannot read its workdir and CPUs: {out:?}"),
                ));
            };
            run.workdirs.insert(h.name.clone(), dir.to_string());
            run.ncpus.insert(h.name.clone(), n);
            if h.role == Role::Server {
                run.ticks = t;
            }
            if h.role == Role::Client {
                warn_ports(&c, spec, hosts.clients().count(), progress);
            }
            run.checks.push(c);
        }
        let stamp = format!(
            "run-{}-{}",
            std::process::id(),
            evlab_reason::model::results::now_secs()
        );
        for h in hosts.hosts.iter().filter(used) {
            let dir = format!("{}/{stamp}", run.workdir(h));
            run.ssh.ok(
                h,
                &format!("mkdir -p {dir}/www && printf a > {dir}/www/one"),
                &[],
            )?;
            run.dirs.insert(h.name.clone(), dir);
        }
        run.peers = remote_peers::find(&run.ssh, &server, &run.evlab_path(&server), spec)?;
        run.copy_client_files(spec, progress)?;
        let serving = run.serving_host().clone();
        let on: Vec<remote_proxy::SetHost> = std::iter::once(&serving)
            .chain(hosts.clients())
            .map(|h| remote_proxy::SetHost {
                host: h,
                dir: run.dir(h),
                workdir: run.workdir(h),
            })
            .collect();
        run.filesets = remote_proxy::make_filesets(&run.ssh, &on, spec, progress)?
            .into_iter()
            .collect();
        let series = spec.series_list(&|_| true, &["poll".to_string()]);
        if spec.server_cpu_budget.is_some()
            || series
                .iter()
                .any(|s| spec.series_budget(&s.label).is_some())
        {
            run.cgroup = Some(RemoteCgroup::find(&run.ssh, &server)?);
        }
        if let Some(n) = &spec.network {
            run.apply_network(n, progress)?;
        }
        Ok(run)
    }

    pub(crate) fn workdir(&self, h: &Host) -> &str {
        self.workdirs.get(&h.name).map_or("", |s| s.as_str())
    }

    /// The files the clients read, copied into the run's directory on every client host
    /// (unless a file with its sha256 is there) and checked there by its sha256: a URI-list
    /// workload's list, and the session log of a `--wsesslog N,X,FILE` in `load_flags`.
    fn copy_client_files(
        &mut self,
        spec: &evlab_reason::model::spec::Spec,
        progress: &Progress,
    ) -> Result<(), LabError> {
        let mut files: Vec<(&str, PathBuf)> = vec![];
        if let evlab_reason::model::spec::Workload::UriList(f) = &spec.workload {
            files.push(("the URI list", f.clone()));
        }
        if let Some(f) = wsesslog_file(&spec.load_flags) {
            files.push(("the session log", PathBuf::from(f)));
        }
        let clients: Vec<Host> = self.hosts.clients().cloned().collect();
        for (what, f) in &files {
            for h in &clients {
                let name = f
                    .file_name()
                    .map_or("file".into(), |n| n.to_string_lossy().into_owned());
                let there = format!(
                    "{}/{}",
                    self.dir(h),
                    name.replace(
                        |c: char| !c.is_ascii_alphanumeric() && c != '.' && c != '-',
                        "_"
                    )
                );
                let (sum, copied) = self
                    .ssh
                    .put(h, f, &there)
                    .map_err(|e| fail(h, format!("{what} {}: {e}", f.display())))?;
                progress.note(&format!(
                    "evlab run: host {}: {what} {} {} {there} (sha256 {sum})",
                    h.name,
                    f.display(),
                    if copied { "copied to" } else { "already at" }
                ));
                self.copies
                    .insert((h.name.clone(), f.display().to_string()), there);
            }
        }
        Ok(())
    }

    /// Where host `h` reads its copy of the local file `f` (None: not copied).
    pub(crate) fn copy_of(&self, h: &Host, f: &std::path::Path) -> Option<&String> {
        self.copies.get(&(h.name.clone(), f.display().to_string()))
    }

    /// The series `spec` measures on the server host (its evlab's mechanisms, its peers), and
    /// those it skips with the reason.
    pub fn plan(&self, spec: &evlab_reason::model::spec::Spec) -> crate::run::plan::Plan {
        let p = &self.peers;
        let mut plan =
            crate::run::plan::plan_on(spec, &p.support, &p.handlers, &|prog| p.installed(prog));
        for s in &mut plan.skipped {
            s.reason = format!("on the server host: {}", s.reason);
        }
        plan
    }

    /// The origin host and its address (a `[proxy]` run).
    pub(crate) fn origin_host(&self) -> (&Host, IpAddr) {
        let (h, ip) = self
            .origin
            .as_ref()
            .expect("a [proxy] run has an origin host");
        (h, *ip)
    }

    /// The run's directory on `h`.
    pub(crate) fn dir(&self, h: &Host) -> &str {
        self.dirs.get(&h.name).map_or("", |s| s.as_str())
    }

    /// The host whose `evlab serve` serves the documents: the origin with `[proxy]`, else the
    /// server host.
    pub(crate) fn serving_host(&self) -> &Host {
        self.origin.as_ref().map_or(self.hosts.server(), |(h, _)| h)
    }

    /// The document root `evlab serve` serves on the serving host for series `label`: the
    /// file set, else the run's one-byte root.
    pub(crate) fn docroot(&self, spec: &evlab_reason::model::spec::Spec, label: &str) -> String {
        let h = self.serving_host();
        self.fileset_for(h, spec, label)
            .unwrap_or_else(|| format!("{}/www", self.dir(h)))
    }

    /// The workload's file set on `h` for series `label` (a series with its own Polymix
    /// object size reads its own), if the workload reads one.
    pub(crate) fn fileset_for(
        &self,
        h: &Host,
        spec: &evlab_reason::model::spec::Spec,
        label: &str,
    ) -> Option<String> {
        let base = self.filesets.get(&h.name)?;
        let own = spec
            .series
            .iter()
            .find(|x| x.label == label)
            .and_then(|x| x.object_size.as_ref());
        Some(match own {
            Some(size) => fileset::polymix_dir(Path::new(base), size)
                .display()
                .to_string(),
            None => base.clone(),
        })
    }

    /// `taskset -c CPUS` when the host has all of `cpus`, then `WORKDIR/evlab`.
    pub(crate) fn evlab_argv(&self, h: &Host, cpus: &[usize]) -> Vec<String> {
        let mut v = self.taskset_argv(h, cpus);
        v.push(self.evlab_path(h));
        v
    }

    /// This evlab on `h`: `WORKDIR/evlab`.
    pub(crate) fn evlab_path(&self, h: &Host) -> String {
        format!("{}/evlab", self.workdir(h))
    }

    /// `taskset -c CPUS` when the host has all of `cpus` (else nothing: not pinned).
    pub(crate) fn taskset_argv(&self, h: &Host, cpus: &[usize]) -> Vec<String> {
        let n = self.ncpus.get(&h.name).copied().unwrap_or(0);
        if cpus.is_empty() || !cpus.iter().all(|&c| c < n) {
            return vec![];
        }
        let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
        vec!["taskset".into(), "-c".into(), list.join(",")]
    }

    /// Where a client host's `evlab load --latencies` writes a point's replies (its workdir).
    pub(crate) fn latencies_path(&self, h: &Host, index: usize) -> String {
        format!(
            "{}/latencies-{}-p{index:03}.csv",
            self.workdir(h),
            std::process::id()
        )
    }

    /// A point's replies from a client host, brought over its ssh connection and removed there.
    pub(crate) fn fetch_latencies(&self, h: &Host, index: usize) -> Result<String, LabError> {
        let path = self.latencies_path(h, index);
        self.ssh
            .ok(h, &format!("cat {path} && rm -f {path}"), &[])
            .map_err(|e| LabError::Point(format!("host {}'s latencies: {e}", h.name)))
    }

    pub(crate) fn offset(&self, h: &Host) -> (f64, f64) {
        self.checks
            .iter()
            .find(|c| c.name == h.name)
            .map_or((0.0, 0.0), |c| (c.clock_offset_ms, c.clock_bound_ms))
    }

    /// `[network]` on the client hosts it names (all when it names none); what one host
    /// cannot apply is refused, and what the others applied is removed first.
    fn apply_network(
        &mut self,
        n: &evlab_reason::model::spec::NetworkSpec,
        progress: &Progress,
    ) -> Result<(), LabError> {
        // Client hosts, and with `[proxy]` the origin host (its link to the proxy: the
        // proxy paper's WAN); every client host when none is named.
        let clients: Vec<Host> = self
            .hosts
            .clients()
            .chain(self.origin.as_ref().map(|(h, _)| h))
            .cloned()
            .collect();
        if let Some(unknown) = n
            .hosts
            .iter()
            .flatten()
            .find(|h| !clients.iter().any(|c| &c.name == *h))
        {
            return Err(LabError::Io(format!(
                "[network] names host {unknown}, which is not a client host of the hosts file{}",
                if self.origin.is_some() {
                    " nor its origin host"
                } else {
                    ""
                }
            )));
        }
        let named = |c: &&Host| match &n.hosts {
            Some(v) => v.contains(&c.name),
            None => c.role == Role::Client,
        };
        for h in clients.iter().filter(named) {
            match crate::run::wan::apply(&self.ssh, h, self.server_ip, n) {
                Ok(a) => {
                    progress.note(&format!(
                        "evlab run: host {}: {} on {} ({})",
                        h.name,
                        a.record.condition,
                        a.record.interface,
                        a.record.how.join(", ")
                    ));
                    self.network.push(a);
                }
                Err(e) => {
                    self.remove_network(progress);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Removes `[network]`'s conditions, each checked gone: their records, `removed` set.
    fn remove_network(&self, progress: &Progress) -> Vec<NetworkApplied> {
        self.network
            .iter()
            .map(|a| {
                let mut r = a.record.clone();
                match a.remove(&self.ssh) {
                    Ok(()) => r.removed = true,
                    Err(e) => progress.warn(&format!("evlab run: {e}")),
                }
                r
            })
            .collect()
    }

    /// `[network]`'s conditions as applied (before `finish`: in place).
    pub fn network_applied(&self) -> Vec<NetworkApplied> {
        self.network.iter().map(|a| a.record.clone()).collect()
    }

    /// Removes `[network]`'s conditions (checked gone) and the run's directory on every host;
    /// returns the conditions' records.
    pub fn finish(&self, progress: &Progress) -> Vec<NetworkApplied> {
        let network = self.remove_network(progress);
        for h in &self.hosts.hosts {
            if let Some(dir) = self.dirs.get(&h.name) {
                let _ = self.ssh.ok(h, &format!("rm -rf {dir}"), &[]);
            }
        }
        network
    }
}

/// Warns when a client host's ephemeral ports, each held 60 s in TIME_WAIT and not reusable
/// there, cannot last the highest rate it will be given (of `clients`).
fn warn_ports(
    c: &HostCheck,
    spec: &evlab_reason::model::spec::Spec,
    clients: usize,
    progress: &Progress,
) {
    let top = spec.rates.fixed().iter().copied().fold(0.0, f64::max) / clients.max(1) as f64;
    if let Some(r) = c.sustained_connect_rate().filter(|&r| top > r) {
        progress.warn(&format!(
            "evlab run: host {}: net.ipv4.tcp_tw_reuse is not 1 and its ephemeral ports last \
             about {r:.0} new connections/s to one server address, against {top:.0}: its \
             client will fall behind (set net.ipv4.tcp_tw_reuse = 1 there)",
            c.name
        ));
    }
}

impl HostsRun {
    /// The share of one CPU the series labelled `label` runs its server in: its own
    /// `cpu_budget`, else the experiment's `server_cpu_budget` (fixed, or as calibrated).
    pub(crate) fn share_for(
        &self,
        spec: &evlab_reason::model::spec::Spec,
        label: &str,
    ) -> Option<f64> {
        spec.series_budget(label).or(match spec.server_cpu_budget {
            Some(evlab_reason::model::spec::Budget::Share(b)) => Some(b),
            Some(evlab_reason::model::spec::Budget::Auto) => self.calibrated_budget,
            None => None,
        })
    }
}

/// The FILE of a `--wsesslog N,X,FILE` (or `--wsesslog=N,X,FILE`) among load flags.
pub(crate) fn wsesslog_file(flags: &[String]) -> Option<&str> {
    let at = flags
        .iter()
        .position(|a| a == "--wsesslog" || a.starts_with("--wsesslog="))?;
    let value = match flags[at].split_once('=') {
        Some((_, v)) => v,
        None => flags.get(at + 1)?,
    };
    value.splitn(3, ',').nth(2)
}

/// `flags` with a `--wsesslog`'s FILE replaced by its copy (`copy_of` FILE), where it has one.
pub(crate) fn with_copies<'a>(
    flags: &[String],
    copy_of: impl Fn(&str) -> Option<&'a String>,
) -> Vec<String> {
    let mut out = flags.to_vec();
    let Some(file) = wsesslog_file(flags) else {
        return out;
    };
    let Some(there) = copy_of(file) else {
        return out;
    };
    for a in &mut out {
        let (head, value) = match a.split_once('=') {
            Some((h, v)) if h == "--wsesslog" => (format!("{h}="), v.to_string()),
            _ => (String::new(), a.clone()),
        };
        let mut parts: Vec<&str> = value.splitn(3, ',').collect();
        if parts.len() == 3 && parts[2] == file {
            parts[2] = there;
            *a = format!("{head}{}", parts.join(","));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_session_logs_file_is_found_and_replaced_by_its_copy() {
        let flags: Vec<String> = ["--think-timeout", "1", "--wsesslog", "10,0.5,/tmp/s.log"]
            .map(String::from)
            .to_vec();
        assert_eq!(super::wsesslog_file(&flags), Some("/tmp/s.log"));
        let copy = "/w/run/s.log".to_string();
        let out = super::with_copies(&flags, |f| (f == "/tmp/s.log").then_some(&copy));
        assert_eq!(out[3], "10,0.5,/w/run/s.log");
        assert_eq!(out[..3], flags[..3]);
        let eq = vec!["--wsesslog=5,1,/tmp/s.log".to_string()];
        assert_eq!(
            super::with_copies(&eq, |_| Some(&copy)),
            ["--wsesslog=5,1,/w/run/s.log"]
        );
        assert_eq!(super::wsesslog_file(&["--rate".into(), "5".into()]), None);
    }
}
