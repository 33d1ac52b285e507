//! `evlab run --hosts` with what runs its own servers or needs more than an evlab binary on
//! the hosts: calibration ("auto" rates and budget) and capacity searches (`[knee]`) whose
//! steps are split over the client hosts and merged; peers (nginx, lighttpd) on the server
//! host; a URI list copied to the client hosts and checked by sha256; a micro-benchmark on a
//! named host, its JSON brought back; an Ansible-style inventory in place of the hosts file.
//! On four namespace hosts (server, origin, client, client) from scripts/netns-hosts.sh; needs
//! root and sshd (skips saying why, fails where EVLAB_REQUIRE asks for `netns`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::NetnsHosts;
use evlab_lab::model::results::{Status, Summary};

const ROLES: [&str; 4] = ["server", "origin", "client", "client"];

fn summary(out: &Path) -> Summary {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// `evlab run SPEC --hosts FILE --out DIR/NAME EXTRA…` with the spec written to DIR first;
/// its output (stdout and stderr), having checked it succeeded, and the results directory.
fn run(
    hosts: &NetnsHosts,
    file: &Path,
    name: &str,
    spec: &str,
    extra: &[&str],
) -> (String, PathBuf) {
    let path = hosts.dir.join(format!("{name}.toml"));
    std::fs::write(&path, spec).unwrap();
    let out = hosts.dir.join(name);
    let o = Command::new(env!("CARGO_BIN_EXE_evlab"))
        .args(["run", path.to_str().unwrap(), "--hosts"])
        .arg(file)
        .arg("--out")
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{said}");
    (said, out)
}

/// Nothing of a run is left on any host: no evlab, no peer.
fn nothing_left(hosts: &NetnsHosts) {
    let left: Vec<_> = (0..ROLES.len())
        .flat_map(|i| hosts.procs_on(i, &["evlab", "nginx", "lighttpd"]))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn calibration_and_capacity_searches_run_across_hosts_merged_step_by_step() {
    if !NetnsHosts::usable("run --hosts with [knee]") {
        return;
    }
    let t0 = Instant::now();
    let (hosts, file) = NetnsHosts::up_roles('k', &ROLES);
    // quick's shape, small: calibrated rates and budget, two series, 0 and 50 idle
    // connections, one trial, a search of at most 5 steps after each leg.
    let spec = "name = \"hosts-knee\"\ndescription = \"searches across hosts\"\n\
        findings = \"paper\"\nmechanisms = [\"poll\", \"epoll-et\"]\nrates = \"auto\"\n\
        auto_rates = [0.25]\nserver_cpu_budget = \"auto\"\ntrials = 1\nidle = [0, 50]\n\
        duration_s = 1\ntimeout_s = 1\n\
        [knee]\nsteps = 5\nstep_s = 0.5\nresolution = 1.2\nsettle_s = 0.1\ntimeout_s = 0.3\n";
    let (said, out) = run(&hosts, &file, "knee", spec, &[]);
    let s = summary(&out);
    let cal = s.calibration.as_ref().expect("calibrated");
    // The client ceiling is both client hosts' together; the budget was chosen by probing the
    // server host, and each series' capacity measured there.
    assert!(cal.client_ceiling > 100.0, "{cal:?}");
    let budget = cal.server_cpu_budget.expect("a budget was chosen");
    assert!((0.02..=1.0).contains(&budget), "{budget}");
    assert_eq!(cal.capacities.len(), 2, "{cal:?}");
    assert_eq!(cal.rates.len(), 1, "{cal:?}");
    // A search for every series, idle count and trial, each step split over both clients.
    let legs: std::collections::BTreeSet<(String, usize)> =
        s.knees.iter().map(|k| (k.series.clone(), k.idle)).collect();
    assert_eq!(legs.len(), 4, "{:?}", s.knees);
    assert_eq!(s.knees.len(), 4);
    for k in &s.knees {
        assert!(!k.steps.is_empty(), "{k:?}");
        let step = k.commands.last().unwrap();
        assert!(
            step.contains("ssh h2 ") && step.contains("ssh h3 "),
            "{step}"
        );
        assert!(
            k.commands
                .iter()
                .any(|c| c.contains("the server's CPU budget")),
            "{:?}",
            k.commands
        );
        for st in &k.steps {
            assert!(st.connections > 0 && st.replies <= st.connections, "{st:?}");
        }
    }
    // The points run in the chosen budget, at the calibrated rate.
    for p in &s.points {
        assert_eq!(p.status, Status::Ok, "{p:?}");
        // As applied: the quota in whole microseconds of a 10 ms period.
        let applied = p.server_cpu_budget.unwrap();
        assert!(
            (applied - budget).abs() < 1e-3,
            "{applied} against {budget}"
        );
        assert_eq!(p.rate, cal.rates[0]);
    }
    assert!(
        said.contains("of 4 findings") || said.contains("findings"),
        "{said}"
    );
    assert!(out.join("report.html").exists());
    nothing_left(&hosts);
    drop(hosts);
    eprintln!("knee across hosts: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn peers_a_uri_list_and_a_micro_benchmark_run_on_the_hosts_of_an_inventory() {
    if !NetnsHosts::usable("run --hosts with peers") {
        return;
    }
    let peers = ["nginx", "lighttpd"]
        .iter()
        .all(|p| Path::new("/usr/sbin").join(p).exists());
    if !evlab_poll::testing::require(
        "peers",
        peers,
        "run --hosts with peers: nginx or lighttpd is missing (scripts/setup.sh installs them)",
    ) {
        return;
    }
    let t0 = Instant::now();
    let (hosts, _) = NetnsHosts::up_roles('p', &ROLES);
    // The same hosts as an Ansible-style inventory (scripts/netns-hosts.sh writes one).
    let inventory = hosts.dir.join("inventory.ini");
    assert!(inventory.is_file());
    let uris = hosts.dir.join("uris.txt");
    std::fs::write(&uris, "/one\n/one\n").unwrap();
    let spec = format!(
        "name = \"hosts-peers\"\ndescription = \"peers across hosts\"\n\
         mechanisms = [\"epoll-et\", \"nginx\", \"lighttpd\"]\n\
         workload = {{ uri_list = \"{}\" }}\nrates = [300]\nidle = [0]\ntrials = 1\n\
         duration_s = 1\n",
        uris.display()
    );
    let (said, out) = run(&hosts, &inventory, "peers", &spec, &[]);
    // The list was copied to each client host and checked there by its sha256.
    for h in ["h2", "h3"] {
        assert!(
            said.lines()
                .any(|l| l.contains(&format!("host {h}: the URI list"))
                    && l.contains("copied to")
                    && l.contains("sha256 ")),
            "{said}"
        );
    }
    let s = summary(&out);
    let series: std::collections::BTreeSet<&str> =
        s.points.iter().map(|p| p.series.as_str()).collect();
    assert!(series.contains("nginx"), "{series:?}");
    assert!(
        series.iter().any(|x| x.starts_with("lighttpd")),
        "{series:?}"
    );
    for p in &s.points {
        assert_eq!(p.status, Status::Ok, "{p:?}");
        let load = p.load.as_ref().unwrap();
        assert!(load.replies.unwrap_or(0) > 0, "{p:?}");
        // Measured on the server host: its address, its CPU (a peer's workers counted).
        assert!(p.server_cpu_s.unwrap() > 0.0, "{p:?}");
        if p.series != "epoll-et" {
            let cmds = p.commands.join("\n");
            assert!(cmds.contains("ssh h0 -- \"mkdir -p"), "{cmds}");
            assert!(cmds.contains(&hosts.address(0)), "{cmds}");
        }
    }
    nothing_left(&hosts);

    // A micro-benchmark on a named host, its JSON brought back.
    let micro = "name = \"hosts-pipetest\"\ndescription = \"pipetest on a host\"\n\
        [micro]\nbenchmark = \"pipetest\"\n\
        args = [\"--pipes\", \"10,100\", \"--message-threads\", \"1\", \"--generations\", \"50\", \
        \"--repeat\", \"1\"]\n";
    let (said, out) = run(&hosts, &inventory, "micro", micro, &["--on", "h3"]);
    assert!(said.contains("on host h3"), "{said}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("micro.json")).unwrap()).unwrap();
    assert!(
        record["bench_command"]
            .as_str()
            .unwrap()
            .starts_with("ssh h3 -- "),
        "{record}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("pipetest.json")).unwrap()).unwrap();
    assert!(report.is_object(), "{report}");
    assert!(out.join("report.html").exists());
    // Its file there was removed; nothing of it runs.
    let left = std::fs::read_dir(hosts.dir.join("h3/work"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect::<Vec<_>>();
    assert!(left.is_empty(), "{left:?}");
    nothing_left(&hosts);
    drop(hosts);
    eprintln!(
        "peers, URI list and micro across hosts: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
