//! `evlab run --hosts` against real hosts: three network namespaces made by
//! scripts/netns-hosts.sh (a server and two clients, each with its own sshd), reached over the
//! system's OpenSSH. Needs root (namespaces) and sshd; skips with the reason otherwise, and
//! fails where EVLAB_REQUIRE asks for `netns`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn usable() -> bool {
    use evlab_poll::testing::{require, root};
    require(
        "netns",
        root(),
        "run --hosts: not root — network namespaces need root (CI runs as root)",
    ) && require(
        "netns",
        Path::new("/usr/sbin/sshd").exists(),
        "run --hosts: no /usr/sbin/sshd (scripts/setup.sh installs openssh-server)",
    )
}

/// The test hosts, taken down (and checked gone) however the test ends.
struct NetnsHosts {
    dir: PathBuf,
    tag: String,
}

impl NetnsHosts {
    fn up(n: usize) -> (NetnsHosts, PathBuf) {
        let tag = format!("r{}", std::process::id() % 100_000);
        let dir = std::env::temp_dir().join(format!("evlab-runhosts-{}", std::process::id()));
        let h = NetnsHosts {
            dir: dir.clone(),
            tag: tag.clone(),
        };
        let o = Command::new(workspace().join("scripts/netns-hosts.sh"))
            .args(["up", &n.to_string(), dir.to_str().unwrap()])
            .env("EVLAB_NETNS_TAG", &tag)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout);
        let file = PathBuf::from(out.lines().last().unwrap().trim());
        assert!(file.is_file(), "{out}");
        (h, file)
    }

    /// The evlab processes still running in any of the namespaces.
    fn evlab_left(&self) -> Vec<String> {
        let mut left = vec![];
        for i in 0..3 {
            let ns = format!("{}-h{i}", self.tag);
            let o = Command::new("ip")
                .args(["netns", "pids", &ns])
                .output()
                .unwrap();
            for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                if comm.trim() == "evlab" {
                    let args =
                        std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    left.push(format!("{ns}: {pid} {}", args.replace('\0', " ")));
                }
            }
        }
        left
    }
}

impl Drop for NetnsHosts {
    fn drop(&mut self) {
        let o = Command::new(workspace().join("scripts/netns-hosts.sh"))
            .args(["down", self.dir.to_str().unwrap()])
            .env("EVLAB_NETNS_TAG", &self.tag)
            .output()
            .unwrap();
        let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
        let left = String::from_utf8_lossy(&ns.stdout);
        if !std::thread::panicking() {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert!(
                !left.contains(&format!("{}-h", self.tag)),
                "namespaces left: {left}"
            );
            assert!(!self.dir.exists());
        }
    }
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_run_across_one_server_and_two_client_hosts_merges_their_reports_exactly() {
    if !usable() {
        return;
    }
    let t0 = Instant::now();
    let (hosts, file) = NetnsHosts::up(3);
    let spec = hosts.dir.join("tiny.toml");
    std::fs::write(
        &spec,
        "name = \"hosts-tiny\"\ndescription = \"epoll-et across hosts\"\n\
         mechanisms = [\"epoll-et\"]\nrates = [200, 300]\nidle = [0, 50]\n\
         duration_s = 1\ntrials = 1\n",
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
    let s = json(&out.join("summary.json"));
    // The three hosts, each with its kernel, evlab and clock offset (zero within its bound:
    // the namespaces share this machine's clock).
    let hs = s["hosts"].as_array().unwrap();
    let names: Vec<&str> = hs.iter().map(|h| h["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["h0", "h1", "h2"]);
    assert_eq!(hs[0]["role"], "server");
    for h in hs {
        assert!(h["kernel"].as_str().unwrap().starts_with("Linux"), "{h}");
        assert!(h["evlab_version"].as_str().unwrap().starts_with("evlab "));
        let (off, bound) = (
            h["clock_offset_ms"].as_f64().unwrap(),
            h["clock_bound_ms"].as_f64().unwrap(),
        );
        assert!(off.abs() <= bound + 0.01 && bound < 1000.0, "{h}");
    }
    let points = s["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    for p in points {
        assert_eq!(p["status"], "ok", "{p}");
        assert!(p["flags"].as_array().unwrap().is_empty(), "{p}");
        let idx = p["index"].as_u64().unwrap();
        let raw: Vec<serde_json::Value> = ["h1", "h2"]
            .iter()
            .map(|h| json(&out.join(format!("load/point-{idx:03}-{h}.json"))))
            .collect();
        // Each client got half the rate, and the point's replies are theirs added.
        for r in &raw {
            assert_eq!(
                r["config"]["rate"].as_f64().unwrap() * 2.0,
                p["rate"].as_f64().unwrap()
            );
        }
        let sum: u64 = raw
            .iter()
            .map(|r| r["replies"]["total"].as_u64().unwrap())
            .sum();
        assert_eq!(p["load"]["replies"].as_u64().unwrap(), sum, "{p}");
        assert!(sum > 0);
        // The merged p99 comes from the added histograms: it lies between the clients' own.
        let p99s: Vec<f64> = raw
            .iter()
            .map(|r| r["latency_ms"]["p99"].as_f64().unwrap())
            .collect();
        let merged = p["load"]["latency_ms"]["p99"].as_f64().unwrap();
        let (lo, hi) = (p99s[0].min(p99s[1]), p99s[0].max(p99s[1]));
        assert!(lo <= merged && merged <= hi, "{merged} not in [{lo}, {hi}]");
        // The server's CPU and counters were read on its host and over the bridge.
        assert!(p["server_cpu_s"].as_f64().is_some(), "{p}");
        assert!(p["server"]["requests"].as_u64().unwrap() >= sum, "{p}");
        assert_eq!(p["hosts"].as_array().unwrap().len(), 2);
    }
    // The report says where it ran.
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("across hosts"), "{md}");
    // Nothing left running on any host.
    let left = hosts.evlab_left();
    assert!(left.is_empty(), "{left:?}");
    drop(hosts);
    eprintln!("run --hosts test: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn experiments_that_cannot_run_across_hosts_are_refused_with_the_reason() {
    let dir = std::env::temp_dir().join(format!("evlab-runhosts-refuse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hosts = dir.join("h.toml");
    std::fs::write(
        &hosts,
        "[[host]]\nname = \"s\"\ndestination = \"s\"\nrole = \"server\"\naddress = \"10.0.0.1\"\n",
    )
    .unwrap();
    for (experiment, says) in [
        ("quick", "server CPU budget"),
        ("peers", "peer server"),
        ("pipetest", "micro-benchmark"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_evlab"))
            .args(["run", experiment, "--hosts", hosts.to_str().unwrap()])
            .arg("--out")
            .arg(dir.join("out"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{experiment}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("cannot run with --hosts") && err.contains(says),
            "{experiment}: {err}"
        );
        assert!(
            !dir.join("out").exists(),
            "nothing was made for {experiment}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
