//! What a run across hosts needs beyond an `evlab serve` on the server host: with `[proxy]`,
//! the origin (`evlab serve`) on the origin host and `evlab proxy` on the server host in front
//! of it; and for the SPECweb99 and Polymix workloads, the file set made by `evlab fileset` on
//! every host that reads it (the serving host and each client host: `evlab fileset` makes the
//! same set from the same arguments, so nothing is copied).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use crate::run::argv;
use crate::run::fileset;
use crate::run::hosts::{Remote, Ssh};
use crate::run::progress::Progress;
use evlab_reason::model::hosts::{Host, Hosts};
use evlab_reason::model::results::PointResult;
use evlab_reason::model::spec::{Spec, Workload};
use evlab_reason::model::text::shell_line;
use evlab_reason::LabError;

/// The origin host of a `[proxy]` run and its address (None without `[proxy]`); refused
/// without one, with two, or with no address.
pub(crate) fn origin_of(hosts: &Hosts, spec: &Spec) -> Result<Option<(Host, IpAddr)>, LabError> {
    if spec.proxy.is_none() {
        return Ok(None);
    }
    let origins: Vec<&Host> = hosts.origins().collect();
    let [h] = origins.as_slice() else {
        return Err(LabError::Io(format!(
            "`{}` measures a proxy ([proxy]): the hosts file must name one host with role = \
             \"origin\" for its origin server ({} named)",
            spec.name,
            origins.len()
        )));
    };
    let ip = h
        .address
        .as_deref()
        .ok_or_else(|| {
            LabError::Io(format!(
                "host {}: give its `address`: the proxy connects to it",
                h.name
            ))
        })?
        .parse()
        .map_err(|e| {
            LabError::Io(format!(
                "host {}: its address is not an IP address: {e}",
                h.name
            ))
        })?;
    Ok(Some(((*h).clone(), ip)))
}

/// A host a run's file set is made on: the host, the run's directory there and its workdir
/// (where evlab is).
pub(crate) struct SetHost<'a> {
    pub host: &'a Host,
    pub dir: &'a str,
    pub workdir: &'a str,
}

/// `evlab fileset` on each of `hosts` (the serving host and every client host), in the run's
/// directory there, for the workloads that read a file set (the spec's object size, and each
/// series' own); `GET /one` answers from it too, as on this machine. Returns each host's
/// file set directory, by name (none for the other workloads).
pub(crate) fn make_filesets(
    ssh: &Ssh,
    hosts: &[SetHost],
    spec: &Spec,
    progress: &Progress,
) -> Result<Vec<(String, String)>, LabError> {
    let name = match spec.workload {
        Workload::Specweb => "fileset",
        Workload::Polymix => "polymix",
        _ => return Ok(vec![]),
    };
    let mut made = vec![];
    for h in hosts {
        let base = format!("{}/{name}", h.dir);
        let evlab = Path::new(h.workdir).join("evlab");
        let mut sets = vec![(base.clone(), spec.object_size.clone())];
        for size in spec.series.iter().filter_map(|x| x.object_size.as_ref()) {
            let d = fileset::polymix_dir(Path::new(&base), size);
            sets.push((d.display().to_string(), size.clone()));
        }
        sets.dedup_by(|a, b| a.0 == b.0);
        for (dir, size) in sets {
            let argv = match spec.workload {
                Workload::Specweb => fileset::specweb_fileset_argv(&evlab, spec, Path::new(&dir)),
                _ => fileset::polymix_fileset_argv(&evlab, spec, &size, Path::new(&dir)),
            };
            let line = shell_line(&argv);
            progress.note(&format!("evlab run: on host {}: {line}", h.host.name));
            ssh.ok(
                h.host,
                &format!("test -d {dir} || {{ {line} > /dev/null && printf a > {dir}/one; }}"),
                &[],
            )?;
        }
        made.push((h.host.name.clone(), base));
    }
    Ok(made)
}

/// Where and how the origin runs: its host and address, `evlab` there (after `taskset` where
/// it is pinned), and the document root it serves.
pub(crate) struct OriginAt<'a> {
    pub host: &'a Host,
    pub ip: IpAddr,
    pub evlab: Vec<String>,
    pub docroot: String,
}

/// `evlab serve` as the origin on the origin host (epoll-et, no header timeout, the spec's
/// origin flags), on its address and a port it chooses; waits until it answers; returns its
/// address.
pub(crate) fn start_origin(
    ssh: &Ssh,
    at: OriginAt,
    spec: &Spec,
    p: &mut PointResult,
    slot: &mut Option<Remote>,
) -> Result<SocketAddr, LabError> {
    let px = spec.proxy.as_ref().expect("a [proxy] run");
    let mut argv = at.evlab;
    let listen = SocketAddr::new(at.ip, 0).to_string();
    argv.extend(argv::origin_args(spec, px, &listen, &at.docroot));
    let r = slot.insert(ssh.spawn(at.host, "evlab serve (origin)", &argv)?);
    let addr = listening(r, "evlab serve (origin)")?;
    p.commands.push(format!(
        "ssh {} -- {} & origin=$!   # on host {}",
        at.host.destination,
        shell_line(std::slice::from_ref(&r.command)),
        at.host.name
    ));
    crate::run::procs::wait_answers(addr, "/one", Duration::from_secs(10))?;
    Ok(addr)
}

/// The address a remote server or proxy printed on its `listening on` line.
pub(crate) fn listening(r: &mut Remote, what: &str) -> Result<SocketAddr, LabError> {
    let line = r.ssh.wait_line(
        |l| l.starts_with("listening on "),
        Duration::from_secs(15),
        "`listening on` line",
    )?;
    line["listening on ".len()..]
        .trim()
        .parse()
        .map_err(|_| LabError::Point(format!("{what} printed a bad address: {line}")))
}
