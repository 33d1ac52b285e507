use super::*;

const GOOD: &str = r#"
name = "t"
mechanisms = ["select", "epoll-et", "nginx", "lighttpd:poll"]
rates = [1000, 2000]
idle = [0, 100]
duration_s = 1

[[series]]
label = "epoll-lt accept-limit=10"
mechanism = "epoll-lt"
flags = ["--accept-limit", "10"]
"#;

fn err(src: &str) -> (usize, String, String) {
    match Spec::parse(src, "t.toml") {
        Err(LabError::Spec { line, key, msg, .. }) => (line, key, msg),
        other => panic!("expected a spec error, got {other:?}"),
    }
}

#[test]
fn proxy_experiments_parse() {
    let src = r#"
name = "p"
workload = "polymix"
polymix_objects = 200
rates = [20]

[proxy]
origin_flags = ["--origin-delay", "20"]

[[series]]
label = "epoll-et splice 8K"
mechanism = "epoll-et"
flags = ["--forward", "splice"]
object_size = "8K"

[[series]]
label = "nginx proxy_pass"
mechanism = "nginx"

[[series]]
label = "haproxy"
mechanism = "haproxy"
"#;
    let s = Spec::parse(src, "p.toml").unwrap();
    assert_eq!(s.workload, Workload::Polymix);
    assert_eq!(s.polymix_objects, 200);
    assert_eq!(s.object_size, "polymix4");
    let px = s.proxy.as_ref().unwrap();
    assert_eq!(px.origin_flags, ["--origin-delay", "20"]);
    assert_eq!(px.origin_cpu, None);
    assert_eq!(s.series[0].object_size.as_deref(), Some("8K"));
    let list = s.series_list(&|_| true, &[]);
    assert_eq!(list[1].kind, ServerKind::Nginx);
    assert_eq!(list[2].kind, ServerKind::Haproxy);
    assert_eq!(list[2].label, "haproxy");
    // HAProxy serves no files: only a proxy peer.
    let (line, key, msg) = err("name = \"p\"\nrates = [1]\nmechanisms = [\"haproxy\"]\n");
    assert_eq!((line, key.as_str()), (3, "mechanisms"), "{msg}");
    assert!(msg.contains("[proxy]"), "{msg}");
    // The built-in proxy experiments parse.
    for f in ["fig-proxy-cpu", "fig-proxy-sizes"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments")
            .join(format!("{f}.toml"));
        let s = Spec::load(&path).unwrap();
        assert!(s.proxy.is_some() && s.workload == Workload::Polymix, "{f}");
    }
    let (_, key, _) =
        err("name = \"p\"\nrates = [1]\nmechanisms = [\"select\"]\n[proxy]\norigin = 1\n");
    assert_eq!(key, "origin");
}

#[test]
fn every_shipped_sweep_names_its_family_and_it_is_the_one_its_shape_implies() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let mut s = Spec::load(&path).unwrap();
        if s.micro.is_some() {
            continue;
        }
        n += 1;
        let named = s.findings.take();
        assert!(named.is_some(), "{} has no `findings` key", path.display());
        assert_eq!(named, Some(s.family()), "{}", path.display());
    }
    assert!(n >= 10, "{n} sweeps in {}", dir.display());
    // An explicit key wins over the shape; an unknown family is refused by name.
    let s = Spec::parse(&format!("findings = \"none\"\n{GOOD}"), "t.toml").unwrap();
    assert_eq!(s.family(), Family::None);
    assert_eq!(err(&format!("findings = \"papers\"\n{GOOD}")).1, "findings");
}

#[test]
fn a_series_may_run_at_some_of_the_swept_values() {
    let src = format!(
        "{GOOD}\n[sweep]\nflag = \"--workers\"\nvalues = [1, 64, 512]\n\
             [[series]]\nlabel = \"t\"\nmechanism = \"epoll-lt\"\nsweep_values = [1, 64]\n"
    );
    let s = Spec::parse(&src, "t.toml").unwrap();
    assert!(s.series_sweeps_at("t", Some(64.0)) && !s.series_sweeps_at("t", Some(512.0)));
    assert!(s.series_sweeps_at("select", Some(512.0)));
    // The sweep's legs and its estimate: `run::sweep`'s tests.
    let (_, key, msg) = err(&src.replace("sweep_values = [1, 64]", "sweep_values = [2]"));
    assert_eq!(key, "sweep_values");
    assert!(
        msg.contains("2 is not one of the `[sweep]` values"),
        "{msg}"
    );
}

#[test]
fn a_series_may_have_its_own_budget_and_idle_counts() {
    let src = format!(
            "{GOOD}\n[[series]]\nlabel = \"c\"\nmechanism = \"epoll-lt\"\ncpu_budget = 0.2\nidle = [0]\n"
        );
    let s = Spec::parse(&src, "t.toml").unwrap();
    assert_eq!(s.series_budget("c"), Some(0.2));
    assert_eq!(s.series_budget("select"), None);
    assert!(s.series_runs_at("c", 0) && !s.series_runs_at("c", 100));
    assert!(s.series_runs_at("select", 100));
    let bad = src.replace("cpu_budget = 0.2", "cpu_budget = 0");
    assert_eq!(err(&bad).1, "cpu_budget");
    let bad = src.replace("idle = [0]\n", "idle = [5]\n");
    let (_, key, msg) = err(&bad);
    assert_eq!(key, "idle");
    assert!(
        msg.contains("5 is not one of the experiment's idle counts"),
        "{msg}"
    );
}

#[test]
fn active_conns_and_request_first_parse() {
    let src = GOOD.replacen(
        "duration_s = 1",
        "duration_s = 1\nactive_conns = 100\nidle_request_first = true",
        1,
    );
    let s = Spec::parse(&src, "t.toml").unwrap();
    assert_eq!(s.active_conns, Some(100));
    assert!(s.idle_request_first);
    let bad = GOOD.replacen("duration_s = 1", "duration_s = 1\nactive_conns = 0", 1);
    assert_eq!(err(&bad).1, "active_conns");
    let s = Spec::parse(GOOD, "t.toml").unwrap();
    assert_eq!(s.active_conns, None);
    assert!(!s.idle_request_first);
}

#[test]
fn sweep_parses_and_runs_every_series_at_every_value() {
    let src = format!("{GOOD}\n[sweep]\nflag = \"--workers\"\nvalues = [1, 2, 64]\n");
    let s = Spec::parse(&src, "t.toml").unwrap();
    let sw = s.sweep.as_ref().unwrap();
    assert_eq!(sw.flag, "--workers");
    assert_eq!(sw.values, [1.0, 2.0, 64.0]);
    assert_eq!(sw.name(), "workers");
    assert_eq!(s.sweep_values(), [Some(1.0), Some(2.0), Some(64.0)]);
    assert_eq!(SweepSpec::arg(64.0), "64");
    assert_eq!(SweepSpec::arg(0.5), "0.5");
    let labelled = src.replace("values = [1, 2, 64]", "values = [1]\nlabel = \"threads\"");
    let s = Spec::parse(&labelled, "t.toml").unwrap();
    assert_eq!(s.sweep.unwrap().name(), "threads");
    // Without `[sweep]`, one leg per series as before.
    assert_eq!(Spec::parse(GOOD, "t.toml").unwrap().sweep_values(), [None]);
    // The shipped herd macro-benchmark: three accept modes, as threads at seven worker
    // counts (1 … 64) and as processes at ten (1 … 512).
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/herd-serve.toml");
    let s = Spec::load(&path).unwrap();
    assert_eq!(s.sweep_values().len(), 10);
    let series = s.series_list(&|_| true, &[]);
    let modes: Vec<_> = series.iter().map(|x| x.flags.join(" ")).collect();
    assert_eq!(
        modes,
        [
            "--accept-mode shared",
            "--accept-mode exclusive",
            "--accept-mode reuseport",
            "--accept-mode shared --as processes",
            "--accept-mode exclusive --as processes",
            "--accept-mode reuseport --as processes",
        ]
    );
    for x in &series {
        let threads = !x.flags.contains(&"processes".to_string());
        assert!(s.series_sweeps_at(&x.label, Some(64.0)), "{}", x.label);
        assert_eq!(
            s.series_sweeps_at(&x.label, Some(512.0)),
            !threads,
            "{}",
            x.label
        );
    }
    // 153 points: `run::estimate`'s tests.
}

#[test]
fn bad_sweeps_name_the_key_and_say_why() {
    let with = |body: &str| format!("{GOOD}\n[sweep]\n{body}\n");
    let (line, key, msg) = err(&with("flag = \"workers\"\nvalues = [1]"));
    assert_eq!((line, key.as_str()), (14, "flag"));
    assert!(msg.contains("a long flag of the server"), "{msg}");
    let (line, key, msg) = err(&with("flag = \"--workers\"\nvalues = []"));
    assert_eq!((line, key.as_str()), (15, "values"));
    assert!(msg.contains("at least one value"), "{msg}");
    let (_, key, msg) = err(&with("flag = \"--workers\"\nvalues = [4, 2]"));
    assert_eq!(key, "values");
    assert!(
        msg.contains("2 after 4: give the values in increasing order"),
        "{msg}"
    );
    let (_, key, msg) = err(&with("flag = \"--workers\"\nvalues = [1, -2]"));
    assert_eq!(key, "values");
    assert!(msg.contains("-2: values must be zero or more"), "{msg}");
    let (_, key, msg) = err(&with("flag = \"--workers\"\nvalues = [1, \"many\"]"));
    assert_eq!(key, "values");
    assert!(msg.contains("invalid type"), "{msg}");
    let (line, key, _) = err(&with("flag = \"--workers\"\nvalues = [1]\nstep = 2"));
    assert_eq!((line, key.as_str()), (16, "step"));
    // The swept flag given by a series too: which would win?
    let clash = GOOD.replace("\"10\"]", "\"10\", \"--workers\", \"2\"]");
    let (_, key, msg) = err(&format!(
        "{clash}\n[sweep]\nflag = \"--workers\"\nvalues = [1]\n"
    ));
    assert_eq!(key, "flag");
    assert!(msg.contains("cannot also be in"), "{msg}");
    // Calibration probes a series once, not per value.
    let auto = with("flag = \"--workers\"\nvalues = [1]")
        .replace("rates = [1000, 2000]", "rates = \"auto\"");
    let (line, key, msg) = err(&auto);
    assert_eq!((line, key.as_str()), (4, "rates"));
    assert!(msg.contains("`[sweep]` needs fixed `rates`"), "{msg}");
}

#[test]
fn good_spec_parses_with_defaults() {
    let s = Spec::parse(GOOD, "t.toml").unwrap();
    assert_eq!(s.workload, Workload::OneByte);
    assert_eq!(s.calls_per_conn, 1);
    assert_eq!(s.client_cpus, vec![1]);
    assert_eq!(s.timeout_s, 5.0);
    let series = s.series_list(&|_| true, &[]);
    let labels: Vec<_> = series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "select",
            "epoll-et",
            "nginx",
            "lighttpd:poll",
            "epoll-lt accept-limit=10"
        ]
    );
    assert_eq!(series[3].kind, ServerKind::Lighttpd);
}

#[test]
fn all_expands_to_supported_mechanisms() {
    let s = Spec::parse("name='a'\nmechanisms=['all']\nrates=[1]", "t").unwrap();
    let supported = |m: &str| !m.starts_with("uring");
    let series = s.series_list(&supported, &[]);
    let labels: Vec<&str> = series.iter().map(|s| s.label.as_str()).collect();
    // Every mechanism of the registry that runs here, in the registry's order.
    let expected: Vec<&str> = EVLAB_MECHANISMS
        .iter()
        .copied()
        .filter(|m| supported(m))
        .collect();
    assert_eq!(labels, expected);
    assert!(labels.contains(&"select") && labels.contains(&"epoll-et"));
    assert!(!labels.iter().any(|l| l.starts_with("uring")), "{labels:?}");
}

#[test]
fn workloads() {
    let w = |v: &str| {
        Spec::parse(
            &format!("name='a'\nmechanisms=['poll']\nrates=[1]\nworkload = {v}"),
            "t",
        )
    };
    assert_eq!(w("\"specweb\"").unwrap().workload, Workload::Specweb);
    assert_eq!(
        w("{ uri_list = \"u.txt\" }").unwrap().workload,
        Workload::UriList("u.txt".into())
    );
    assert!(w("\"two-byte\"").is_err());
}

#[test]
fn unknown_key_names_key_and_line() {
    let (line, key, msg) = err("name = 'a'\nmechanisms = ['poll']\nrates = [1]\nrate = 5\n");
    assert_eq!((line, key.as_str()), (4, "rate"));
    assert!(msg.contains("unknown field"), "{msg}");
}

#[test]
fn bad_type_names_key_and_line() {
    let (line, key, msg) = err("name = 'a'\nmechanisms = ['poll']\nrates = 'fast'\n");
    assert_eq!((line, key.as_str()), (3, "rates"));
    assert!(msg.contains("expected a number or \"auto\""), "{msg}");
    // `rates` is a list or "auto": a bad element is reported at the key.
    let (line, key, _) = err("name = 'a'\nmechanisms = ['poll']\nrates = [1,\n  'x']\n");
    assert_eq!((line, key.as_str()), (3, "rates"));
    let (line, key, _) =
        err("name = 'a'\nmechanisms = ['poll']\nrates = 'auto'\nserver_cpu_budget = 0.001\n");
    assert_eq!((line, key.as_str()), (4, "server_cpu_budget"));
    let (line, key, _) = err("name = 'a'\nmechanisms = ['poll']\nrates=[1]\nduration_s = true\n");
    assert_eq!((line, key.as_str()), (4, "duration_s"));
}

#[test]
fn bad_values_name_key_and_line() {
    let (line, key, msg) = err("name = 'a'\n\nmechanisms = ['poll', 'kqueue']\nrates = [1]\n");
    assert_eq!((line, key.as_str()), (3, "mechanisms"));
    assert!(msg.contains("kqueue"), "{msg}");
    let (line, key, _) = err("name = 'a'\nmechanisms = ['poll']\nrates = [1, -2]\n");
    assert_eq!((line, key.as_str()), (3, "rates"));
    let (line, key, _) = err("name = 'a'\nmechanisms = ['poll']\nrates = [1]\nduration_s = 0\n");
    assert_eq!((line, key.as_str()), (4, "duration_s"));
    let (line, key, _) = err("name = 'a'\nmechanisms = ['poll']\n");
    assert_eq!((line, key.as_str()), (0, "rates"));
    let (line, key, _) =
        err("name = 'a'\nmechanisms = ['poll']\nrates=[1]\nworkload = 'two-byte'\n");
    assert_eq!((line, key.as_str()), (4, "workload"));
    let (line, key, _) = err(
        "name = 'a'\nmechanisms = ['poll']\nrates=[1]\n[[series]]\nlabel='x'\nmechanism='nope'\n",
    );
    assert_eq!((line, key.as_str()), (6, "mechanism"));
    let (line, key, _) = err(
            "name = 'a'\nmechanisms = ['poll']\nrates=[1]\n[[series]]\nlabel='x'\nmechanism='poll'\ncolour='red'\n",
        );
    assert_eq!((line, key.as_str()), (7, "colour"));
}

#[test]
fn error_display_names_file_key_and_line() {
    let e = Spec::parse("name = 'a'\nbogus = 1\n", "x.toml").unwrap_err();
    let s = e.to_string();
    assert!(s.contains("x.toml:2") && s.contains("`bogus`"), "{s}");
}

/// `[sequential]`: the first block's trials are `trials`; every bad value, and `trials` given
/// beside it, names its key and line, and nothing panics.
#[test]
fn sequential_trials_parse_and_bad_ones_name_the_key() {
    let head = "name = 'a'\nmechanisms = ['poll']\nrates = [1]\n";
    let s = Spec::parse(
        &format!("{head}[sequential]\nmost = 6\nbudget_s = 270\n"),
        "t.toml",
    )
    .unwrap();
    let q = s.sequential.as_ref().unwrap();
    assert_eq!(
        (q.first, q.block, q.most, q.budget_s),
        (3, 1, 6, Some(270.0))
    );
    assert_eq!(s.trials, 3, "the first block's");
    let s = Spec::parse(&format!("{head}[sequential]\nfirst = 4\nmost = 4\n"), "t").unwrap();
    assert_eq!((s.trials, s.sequential.unwrap().budget_s), (4, None));
    for (table, line, key) in [
        ("first = 1\nmost = 6\n", 5, "first"),
        ("block = 0\nmost = 6\n", 5, "block"),
        ("first = 4\nmost = 3\n", 6, "most"),
        ("most = 6\nbudget_s = 0\n", 6, "budget_s"),
        ("most = 6\nbudget_s = -5\n", 6, "budget_s"),
        ("most = 60\n", 5, "most"),
        ("most = 6\nlooks = 2\n", 6, "looks"),
        ("budget_s = 270\n", 4, "sequential"),
    ] {
        let (l, k, msg) = err(&format!("{head}[sequential]\n{table}"));
        assert_eq!((l, k.as_str()), (line, key), "{table}: {msg}");
    }
    let (l, k, msg) = err(&format!("{head}trials = 3\n[sequential]\nmost = 6\n"));
    assert_eq!((l, k.as_str()), (4, "trials"), "{msg}");
    assert!(msg.contains("not both"), "{msg}");
}
