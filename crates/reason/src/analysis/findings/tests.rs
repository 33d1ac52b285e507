use super::*;

/// The rules' own verdicts: these tests judge each rule, and the withholding of "no
/// difference" verdicts beside a negative control that did not pass is tested apart
/// (`no_difference_verdicts_stand_only_beside_a_passed_negative_control`).
pub(crate) fn findings(s: &Summary) -> Vec<Finding> {
    by_rules(s, crate::analysis::sample::LEVEL)
}
use crate::analysis::stats::Claim;
use crate::model::load::LoadSummary;
use crate::model::results::PointResult;
use crate::model::results::Status;
use crate::model::spec::{Series, ServerKind, Spec};

/// A summary of `series` × `idle` × `rates` × `trials` from a TOML spec, every point ok and
/// valid, replying `reply(series, idle, rate, trial)` per second with the server's CPU
/// `util(…)` busy and `cpu_us` per reply. Tests then flag or fail points by hand.
pub(crate) fn summary(
    series: &[&str],
    idle: &[usize],
    rates: &[f64],
    trials: u32,
    reply: &dyn Fn(&str, usize, f64, u32) -> f64,
) -> Summary {
    let toml = format!(
            "name = \"t\"\nmechanisms = [{}]\nrates = [{}]\nidle = [{}]\ntrials = {trials}\nduration_s = 2\n",
            series
                .iter()
                .map(|m| format!("\"{m}\""))
                .collect::<Vec<_>>()
                .join(", "),
            rates
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            idle.iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    let spec = Spec::parse(&toml, "test").unwrap();
    let ser: Vec<Series> = series
        .iter()
        .map(|m| Series {
            label: m.to_string(),
            kind: ServerKind::Evlab,
            mechanism: m.to_string(),
            flags: vec![],
        })
        .collect();
    let mut points = vec![];
    for t in 0..trials {
        for &i in idle {
            for se in &ser {
                for &r in rates {
                    let mut p = PointResult::new(points.len(), se, i, r, t, 2.0);
                    let got = reply(&se.label, i, r, t);
                    p.load = Some(LoadSummary {
                        offered_rate: Some(r),
                        reply_rate_avg: Some(got),
                        ..Default::default()
                    });
                    p.server_cpu_util = Some((got / 10_000.0).min(1.0));
                    let pays = se.label == "select" || se.label == "poll";
                    p.server_cpu_us_per_reply = Some(if i > 0 && pays { 30.0 } else { 10.0 });
                    p.client_cpu_busy = Some(r / 20_000.0);
                    points.push(p);
                }
            }
        }
    }
    Summary {
        format: crate::model::results::FORMAT,
        experiment: spec,
        spec_path: "t.toml".into(),
        spec_text: toml,
        command: "evlab run t.toml".into(),
        duration_override: None,
        started: "2026-01-01T00:00:00Z".into(),
        finished: Some("2026-01-01T00:01:00Z".into()),
        wall_s: 60.0,
        interrupted: false,
        machine: Default::default(),
        series: ser,
        skipped: vec![],
        calibration: None,
        quiet: None,
        points,
        knees: vec![],
        resumed: vec![],
        hosts: vec![],
        network: vec![],
        sequential: None,
    }
}

/// The herd macro-benchmark's shape: `shared`, `exclusive` and `reuseport` (epoll-lt) at
/// each worker count, every point valid, for 8 s at 10,000/s offered: `reply(mode, n)`
/// replies/s (± 1% between trials), a quarter of a CPU spent on them, `ctx(mode, n)`
/// context switches per connection, and accepts spread evenly except by `exclusive`, whose
/// first worker takes half.
pub(crate) fn herd_summary(
    workers: &[f64],
    trials: u32,
    reply: &dyn Fn(&str, f64) -> f64,
    ctx: &dyn Fn(&str, f64) -> f64,
) -> Summary {
    let toml = format!(
            "name = \"herd-t\"\nrates = [10000]\nserver_cpu_budget = 0.25\ntrials = {trials}\n\
             duration_s = 8\n[sweep]\nflag = \"--workers\"\nvalues = [{}]\n\
             [[series]]\nlabel = \"shared\"\nmechanism = \"epoll-lt\"\nflags = [\"--accept-mode\", \"shared\"]\n\
             [[series]]\nlabel = \"exclusive\"\nmechanism = \"epoll-lt\"\nflags = [\"--accept-mode\", \"exclusive\"]\n\
             [[series]]\nlabel = \"reuseport\"\nmechanism = \"epoll-lt\"\nflags = [\"--accept-mode\", \"reuseport\"]\n",
            workers
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    let mut s = summary(&["select"], &[0], &[10_000.0], 1, &|_, _, _, _| 0.0);
    s.experiment = Spec::parse(&toml, "herd-t.toml").unwrap();
    s.spec_text = toml;
    s.series = s.experiment.series_list(&|_| true, &[]);
    s.points.clear();
    for t in 0..trials {
        for &n in workers {
            for se in s.series.clone() {
                let mut p = PointResult::new(s.points.len() + 1, &se, 0, 10_000.0, t + 1, 8.0);
                p.swept = Some(crate::model::results::Swept {
                    name: "workers".into(),
                    value: n,
                });
                let got = reply(&se.label, n) * (1.0 + 0.01 * t as f64);
                let conns = (got * 8.0) as u64;
                p.load = Some(LoadSummary {
                    offered_rate: Some(10_000.0),
                    reply_rate_avg: Some(got),
                    connections: Some(conns),
                    replies: Some(conns),
                    status_2xx: Some(conns),
                    ..Default::default()
                });
                p.load.as_mut().unwrap().latency_ms.p99 = Some(900.0);
                p.server_cpu_us_per_reply = Some(0.25e6 / got);
                p.client_cpu_busy = Some(0.5);
                let w = n as usize;
                let mut per = vec![conns / w as u64; w];
                if se.label == "exclusive" && w > 1 {
                    per = vec![conns / (2 * (w as u64 - 1)); w];
                    per[0] = conns / 2;
                }
                p.server = Some(crate::model::results::ServerCounters {
                    requests: conns,
                    accepted: conns,
                    per_worker_accepted: per,
                    ..Default::default()
                });
                p.server_ctx_switches = Some((ctx(&se.label, n) * conns as f64) as u64);
                s.points.push(p);
            }
        }
    }
    s
}

/// A/B ratios that clearly satisfy and clearly contradict rule `id`'s claim, and its threshold.
fn pass_fail_edge(id: &str) -> (f64, f64, f64) {
    use crate::analysis::stats::Claim;
    match crate::analysis::rules::rule(id).claim.unwrap() {
        Claim::AtMost(x) => (x * 0.8, x * 1.25, x),
        Claim::AtLeast(x) => (x * 1.25, x * 0.8, x),
        Claim::Within(m) => (1.0, (1.0 + m) * 1.5, 1.0 + m),
    }
}

/// One arm of a rule in a synthetic run: which points it holds, how its quantity is scaled,
/// and whether it is arm B (scaled by 1/ratio, so that A/B is the ratio either way).
pub(crate) struct Arm<'a> {
    pub(crate) holds: &'a dyn Fn(&PointResult) -> bool,
    pub(crate) scale: &'a dyn Fn(&mut PointResult, f64),
    pub(crate) is_b: bool,
}

/// Rule `id` on `base` (both arms equal), with the arm's trials scaled so that A/B is
/// `ratio`, each trial by `noise[trial % 3]`; the finding of `id` whose evidence has `has`.
fn decide(
    base: &Summary,
    id: &str,
    arm: &Arm,
    has: &str,
    (ratio, noise): (f64, [f64; 3]),
) -> Finding {
    let mut s = base.clone();
    for p in s.points.iter_mut().filter(|p| (arm.holds)(p)) {
        let r = if arm.is_b { 1.0 / ratio } else { ratio };
        (arm.scale)(p, r * noise[p.trial as usize % 3]);
    }
    findings(&s)
        .into_iter()
        .find(|f| f.rule == id && f.evidence.contains(has))
        .unwrap_or_else(|| panic!("no finding of {id} with {has:?}: {:?}", findings(&s)))
}

/// Each outcome of rule `id`: reproduced at a ratio well inside its claim, not reproduced well
/// outside it, inconclusive at its threshold with a wide spread, and inconclusive with one of
/// the arm's three trials flagged.
pub(crate) fn each_outcome(base: &Summary, id: &str, arm: &Arm, has: &str) {
    let (pass, fail, edge) = pass_fail_edge(id);
    let tight = [0.99, 1.0, 1.01];
    for (case, want) in [
        ((pass, tight), Verdict::Reproduced),
        ((fail, tight), Verdict::NotReproduced),
        ((edge, [0.7, 1.0, 1.3]), Verdict::Inconclusive),
    ] {
        let f = decide(base, id, arm, has, case);
        assert_eq!(f.verdict, want, "{id} at A/B {}: {}", case.0, f.evidence);
        assert!(
            f.evidence.contains("n = 3") && f.evidence.contains("A/B = "),
            "{id}: {}",
            f.evidence
        );
    }
    let mut flagged = base.clone();
    if let Some(p) = flagged.points.iter_mut().find(|p| (arm.holds)(p)) {
        p.flags.push("client fell behind: started 90%".into());
    }
    let f = decide(&flagged, id, arm, has, (pass, tight));
    assert_eq!(f.verdict, Verdict::Inconclusive, "{id}: {}", f.evidence);
    assert!(
        f.evidence.contains("n = 2 of 3 trials") && f.evidence.contains("needs ≥ 3"),
        "{id}: {}",
        f.evidence
    );
}

pub(crate) fn scale_cpu(p: &mut PointResult, r: f64) {
    p.server_cpu_us_per_reply = p.server_cpu_us_per_reply.map(|c| c * r);
}

fn scale_replies(p: &mut PointResult, r: f64) {
    let l = p.load.as_mut().unwrap();
    l.reply_rate_avg = l.reply_rate_avg.map(|x| x * r);
}

fn scale_ctx(p: &mut PointResult, r: f64) {
    p.server_ctx_switches = p.server_ctx_switches.map(|c| (c as f64 * r).round() as u64);
}

/// The herd-serve shape: 1, 4 and 64 workers, 3 trials, every mode alike (10,000 replies/s,
/// 2 context switches per connection).
fn herd_base() -> Summary {
    herd_summary(&[1.0, 4.0, 64.0], 3, &|_, _| 10_000.0, &|_, _| 2.0)
}

#[test]
fn herd_rules_give_each_outcome_at_the_most_workers() {
    let base = herd_base();
    for (id, other, scale) in [
        (
            "herd-cpu-vs-exclusive",
            "exclusive",
            scale_cpu as fn(&mut PointResult, f64),
        ),
        ("herd-cpu-vs-reuseport", "reuseport", scale_cpu),
        ("herd-wakeups-vs-exclusive", "exclusive", scale_ctx),
        ("herd-wakeups-vs-reuseport", "reuseport", scale_ctx),
    ] {
        let holds = |p: &PointResult| p.series == other && p.swept_value() == Some(64.0);
        let arm = Arm {
            holds: &holds,
            scale: &scale,
            is_b: true,
        };
        each_outcome(&base, id, &arm, "A shared, no idle, 64 workers");
    }
}

#[test]
fn herd_judges_each_mode_alone_and_prints_no_throughput_finding() {
    // Shared costs 40% more CPU than exclusive at 64 workers, as much as reuseport: one rule
    // is reproduced, the other not; no "partly".
    let mut s = herd_base();
    for p in &mut s.points {
        if p.series != "exclusive" && p.swept_value() == Some(64.0) {
            scale_cpu(p, 1.4);
        }
    }
    let f = findings(&s);
    let ids: Vec<&str> = f.iter().map(|f| f.rule.as_str()).collect();
    assert_eq!(
        ids,
        [
            "herd-cpu-vs-exclusive",
            "herd-wakeups-vs-exclusive",
            "herd-cpu-vs-reuseport",
            "herd-wakeups-vs-reuseport"
        ]
    );
    assert_eq!(by_rule(&s, "herd-cpu-vs-exclusive").0, Verdict::Reproduced);
    assert_eq!(
        by_rule(&s, "herd-cpu-vs-reuseport").0,
        Verdict::NotReproduced
    );
    assert!(f.iter().all(|f| f.verdict != Verdict::Partly));
    let (_, e) = by_rule(&s, "herd-cpu-vs-exclusive");
    assert!(
        e.starts_with("at 10,000/s offered: A shared, no idle, 64 workers: n = 3"),
        "{e}"
    );
    // A sweep of workers whose series are not accept modes: no herd finding, and none of the
    // paper's (its points at different worker counts are not trials of one curve).
    let mut s = herd_summary(&[1.0, 8.0], 3, &|_, _| 8_000.0, &|_, _| 2.0);
    for x in &mut s.series {
        x.flags.clear();
    }
    assert!(findings(&s).is_empty());
    // Exclusive not measured at 64 workers: judged at the most workers both were, 4.
    let mut s = herd_base();
    s.points
        .retain(|p| !(p.series == "exclusive" && p.swept_value() == Some(64.0)));
    let (_, e) = by_rule(&s, "herd-wakeups-vs-exclusive");
    assert!(e.contains("A shared, no idle, 4 workers"), "{e}");
    let (_, e) = by_rule(&s, "herd-wakeups-vs-reuseport");
    assert!(e.contains("A shared, no idle, 64 workers"), "{e}");
}

/// herd_base with a copy of every series as pre-forked processes (`--as processes`, labelled
/// "MODE processes"), their points alike.
fn herd_with_processes() -> Summary {
    let mut s = herd_base();
    let procs: Vec<_> = s
        .series
        .iter()
        .map(|x| {
            let mut x = x.clone();
            x.label = format!("{} processes", x.label);
            x.flags
                .extend(["--as".to_string(), "processes".to_string()]);
            x
        })
        .collect();
    let points: Vec<PointResult> = s
        .points
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p.series = format!("{} processes", p.series);
            p
        })
        .collect();
    let n = s.points.len();
    for (i, mut p) in points.into_iter().enumerate() {
        p.index = n + i + 1;
        s.points.push(p);
    }
    s.series.extend(procs);
    s
}

#[test]
fn herd_processes_have_rules_of_their_own_and_threads_keep_theirs() {
    let base = herd_with_processes();
    let ids: Vec<String> = findings(&base).into_iter().map(|f| f.rule).collect();
    assert_eq!(
        ids,
        [
            "herd-cpu-vs-exclusive",
            "herd-wakeups-vs-exclusive",
            "herd-cpu-vs-reuseport",
            "herd-wakeups-vs-reuseport",
            "herd-procs-cpu-vs-exclusive",
            "herd-procs-wakeups-vs-exclusive",
            "herd-procs-cpu-vs-reuseport",
            "herd-procs-wakeups-vs-reuseport",
        ]
    );
    for (id, other, scale) in [
        (
            "herd-procs-cpu-vs-exclusive",
            "exclusive processes",
            scale_cpu as fn(&mut PointResult, f64),
        ),
        (
            "herd-procs-cpu-vs-reuseport",
            "reuseport processes",
            scale_cpu,
        ),
        (
            "herd-procs-wakeups-vs-exclusive",
            "exclusive processes",
            scale_ctx,
        ),
        (
            "herd-procs-wakeups-vs-reuseport",
            "reuseport processes",
            scale_ctx,
        ),
    ] {
        let holds = |p: &PointResult| p.series == other && p.swept_value() == Some(64.0);
        let arm = Arm {
            holds: &holds,
            scale: &scale,
            is_b: true,
        };
        each_outcome(&base, id, &arm, "A shared processes, no idle, 64 workers");
    }
    // A herd among processes only: the process rules see it, the thread rules do not.
    let mut s = herd_with_processes();
    for p in &mut s.points {
        if p.series == "shared processes" && p.swept_value() == Some(64.0) {
            scale_cpu(p, 1.5);
        }
    }
    assert_eq!(
        by_rule(&s, "herd-procs-cpu-vs-reuseport").0,
        Verdict::Reproduced
    );
    assert_eq!(
        by_rule(&s, "herd-cpu-vs-reuseport").0,
        Verdict::NotReproduced
    );
    // Only processes in the run: no thread finding.
    let mut s = herd_with_processes();
    s.series.retain(|x| x.label.ends_with("processes"));
    s.points.retain(|p| p.series.ends_with("processes"));
    assert!(findings(&s)
        .iter()
        .all(|f| f.rule.starts_with("herd-procs-")));
    assert_eq!(findings(&s).len(), 4);
}

/// lse-deadconn's shape: poll, epoll-lt, epoll-et and uring with 0, 5,000 and 19,000 dead
/// connections, 3 trials, every one answering 10,000/s.
fn deadconn_base() -> Summary {
    let mut s = summary(
        &["poll", "epoll-lt", "epoll-et", "uring"],
        &[0, 5000, 19000],
        &[100.0],
        3,
        &|_, _, _, _| 10_000.0,
    );
    s.experiment.idle_request_first = true;
    s
}

#[test]
fn deadconn_rules_give_each_outcome_per_mechanism() {
    let base = deadconn_base();
    for (id, m) in [
        ("deadconn-poll-drops", "poll"),
        ("deadconn-epoll-flat", "epoll-lt"),
        ("deadconn-epoll-flat", "epoll-et"),
    ] {
        let holds = |p: &PointResult| p.series == m && p.idle == 19000;
        let arm = Arm {
            holds: &holds,
            scale: &scale_replies,
            is_b: false,
        };
        each_outcome(&base, id, &arm, &format!("A {m}, 19,000 idle"));
    }
}

#[test]
fn deadconn_judges_each_epoll_alone_and_not_uring() {
    let mut s = deadconn_base();
    for p in &mut s.points {
        if p.idle == 19000 && p.series != "epoll-lt" {
            scale_replies(p, if p.series == "poll" { 0.1 } else { 0.5 });
        }
    }
    let f = findings(&s);
    assert_eq!(f.len(), 3, "{f:?}");
    let verdict_of = |m: &str| {
        f.iter()
            .find(|f| f.evidence.contains(&format!("A {m}, 19,000 idle")))
            .unwrap()
            .verdict
    };
    assert_eq!(verdict_of("poll"), Verdict::Reproduced);
    assert_eq!(verdict_of("epoll-lt"), Verdict::Reproduced);
    assert_eq!(verdict_of("epoll-et"), Verdict::NotReproduced);
    // poll's points with 19,000 failed: the most it was measured with is 5,000.
    for p in &mut s.points {
        if p.series == "poll" && p.idle == 19000 {
            p.status = Status::Failed;
        }
    }
    let (_, e) = by_rule(&s, "deadconn-poll-drops");
    assert!(e.contains("A poll, 5,000 idle: n = 3"), "{e}");
}

/// A built-in proxy experiment with 3 trials of every series at each of its idle counts and
/// offered rates, every point valid with 100 µs per request and a mean response time of 2 ms.
pub(crate) fn proxy_run(name: &str) -> Summary {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments")
        .join(format!("{name}.toml"));
    let spec = Spec::load(&path).unwrap();
    let ser = spec.series_list(&|_| true, &[]);
    let mut s = summary(&["select"], &[0], &[10.0], 1, &|_, _, _, _| 10.0);
    s.points.clear();
    for t in 0..3 {
        for &idle in &spec.idle {
            for se in &ser {
                for &rate in spec.rates.fixed() {
                    let mut p = PointResult::new(s.points.len() + 1, se, idle, rate, t, 2.0);
                    p.server_cpu_us_per_reply = Some(100.0);
                    let mut load = LoadSummary::default();
                    load.latency_ms.mean = Some(2.0);
                    p.load = Some(load);
                    s.points.push(p);
                }
            }
        }
    }
    s.experiment = spec;
    s.series = ser;
    s
}

/// fig-proxy-sizes with its load's `--cacheable` share set to `share` (None: removed).
pub(crate) fn proxy_sizes(share: Option<&str>) -> Summary {
    let mut s = proxy_run("fig-proxy-sizes");
    let flags = &mut s.experiment.load_flags;
    let i = flags.iter().position(|f| f == "--cacheable").unwrap();
    match share {
        Some(v) => flags[i + 1] = v.into(),
        None => {
            flags.drain(i..i + 2);
        }
    }
    s
}

#[test]
fn proxy_rules_give_each_outcome() {
    let cpu_run = proxy_run("fig-proxy-cpu");
    let plain = proxy_sizes(Some("0"));
    let cacheable = proxy_sizes(Some("1"));
    let keepcopy = proxy_run("fig-proxy-sizes-cacheable");
    for (base, id, series, idle, is_b) in [
        (&cpu_run, "proxy-uselect-vs-select", "select copy", 0, true),
        (
            &cpu_run,
            "proxy-uselect-vs-select",
            "select copy",
            10000,
            true,
        ),
        (&cpu_run, "proxy-uselect-vs-epoll", "epoll-et copy", 0, true),
        (
            &cpu_run,
            "proxy-uselect-vs-epoll",
            "epoll-et copy",
            10000,
            true,
        ),
        (
            &cpu_run,
            "proxy-splice-vs-copy",
            "select splice-keep",
            0,
            false,
        ),
        (
            &cpu_run,
            "proxy-splice-vs-copy",
            "uring splice-keep",
            0,
            false,
        ),
        (&plain, "proxy-splice-size-small", "splice 4K", 0, false),
        (&plain, "proxy-splice-size-large", "splice 128K", 0, false),
        (
            &cacheable,
            "proxy-keepcopy-small",
            "splice-keep 4K",
            0,
            false,
        ),
        (
            &cacheable,
            "proxy-keepcopy-large",
            "splice-keep 128K",
            0,
            false,
        ),
        (
            &plain,
            "proxy-uselect-splice-large",
            "uring-poll splice 128K",
            0,
            false,
        ),
        (
            &keepcopy,
            "proxy-uselect-keepcopy-large",
            "uring-poll copy 128K",
            0,
            true,
        ),
    ] {
        let holds = |p: &PointResult| p.series == series && p.idle == idle;
        let arm = Arm {
            holds: &holds,
            scale: &scale_cpu,
            is_b,
        };
        let idle_words = if idle == 0 { "no idle" } else { "10,000 idle" };
        let has = if is_b {
            format!("B {series}, {idle_words}")
        } else {
            format!("A {series}, {idle_words}")
        };
        each_outcome(base, id, &arm, &has);
    }
}

#[test]
fn proxy_rules_apply_where_the_seed_measured() {
    // fig-proxy-cpu: uselect at every idle count (select and epoll), splice-keep against copy
    // per mechanism (not nginx, not the proxy with its cache off), no size rule.
    let mut s = proxy_run("fig-proxy-cpu");
    for p in &mut s.points {
        if p.series == "select copy" && p.idle == 10000 {
            scale_cpu(p, 3.0);
        }
    }
    let count = |s: &Summary, id: &str| findings(s).iter().filter(|f| f.rule == id).count();
    assert_eq!(count(&s, "proxy-uselect-vs-select"), 2);
    assert_eq!(count(&s, "proxy-uselect-vs-epoll"), 2);
    assert_eq!(count(&s, "proxy-splice-vs-copy"), 5);
    // uselect with splice-keep against select with copy, at each idle count.
    assert_eq!(count(&s, "proxy-combined-vs-select"), 2);
    assert_eq!(findings(&s).len(), 11, "{:?}", findings(&s));
    // uselect equals select without idle connections and is a third of it with them: both
    // verdicts are printed, the unfavourable one too.
    let of = |id: &str, has: &str| {
        findings(&s)
            .into_iter()
            .find(|f| f.rule == id && f.evidence.contains(has))
            .unwrap()
            .verdict
    };
    assert_eq!(
        of("proxy-uselect-vs-select", "select copy, no idle"),
        Verdict::NotReproduced
    );
    assert_eq!(
        of("proxy-uselect-vs-select", "select copy, 10,000 idle"),
        Verdict::Reproduced
    );
    assert_eq!(
        of("proxy-uselect-vs-epoll", "epoll-et copy, 10,000 idle"),
        Verdict::NotReproduced
    );
    // The μserver's findings do not apply to proxy runs.
    assert!(findings(&s).iter().all(|f| f.source.starts_with("Rosu")));
    // Sizes: splice's rules on a non-cacheable run, KeepCopy's on a cacheable one, neither
    // on a mix.
    let ids = |s: &Summary| -> Vec<String> { findings(s).into_iter().map(|f| f.rule).collect() };
    // Fig. 7's at each end of the sizes (epoll-et's series), Fig. 8's at 128 KB (uring-poll's).
    assert_eq!(
        ids(&proxy_sizes(Some("0"))),
        [
            "proxy-splice-size-small",
            "proxy-splice-size-large",
            "proxy-uselect-splice-large"
        ]
    );
    assert_eq!(
        ids(&proxy_sizes(Some("1"))),
        ["proxy-keepcopy-small", "proxy-keepcopy-large"]
    );
    assert_eq!(
        ids(&proxy_run("fig-proxy-sizes-cacheable")),
        [
            "proxy-keepcopy-small",
            "proxy-keepcopy-large",
            "proxy-uselect-keepcopy-large"
        ]
    );
    assert!(ids(&proxy_sizes(Some("0.7"))).is_empty());
    assert!(ids(&proxy_sizes(None)).is_empty());
}

pub(crate) fn scale_mean_ms(p: &mut PointResult, r: f64) {
    let l = &mut p.load.as_mut().unwrap().latency_ms;
    l.mean = l.mean.map(|m| m * r);
}

/// The rules of fig-proxy-combined, -rate and -conns, each on its own experiment's shape:
/// reproduced well inside the claim, not reproduced well outside it, inconclusive at the
/// threshold with a wide spread or with a trial flagged.
#[test]
fn proxy_figure_rules_give_each_outcome() {
    let combined = proxy_run("fig-proxy-combined");
    let rate = proxy_run("fig-proxy-rate");
    let conns = proxy_run("fig-proxy-conns");
    type Case<'a> = (&'a Summary, &'a str, &'a str, usize, Option<f64>, bool);
    let cases: [Case; 11] = [
        (
            &combined,
            "proxy-combined-vs-select",
            "uring-poll splice-keep",
            0,
            None,
            false,
        ),
        (
            &combined,
            "proxy-combined-vs-select",
            "select copy",
            10000,
            None,
            true,
        ),
        (
            &rate,
            "proxy-rate-splice-lowest",
            "select splice",
            0,
            Some(1000.0),
            false,
        ),
        (
            &rate,
            "proxy-rate-splice-lowest",
            "select splice-release",
            0,
            Some(1000.0),
            false,
        ),
        (
            &rate,
            "proxy-rate-splice-highest",
            "select splice",
            0,
            Some(5000.0),
            false,
        ),
        (
            &rate,
            "proxy-rate-splice-highest",
            "select copy",
            0,
            Some(5000.0),
            true,
        ),
        (
            &conns,
            "proxy-conns-uselect-flat",
            "uring-poll copy",
            10000,
            None,
            false,
        ),
        (
            &conns,
            "proxy-conns-select-grows",
            "select copy",
            2500,
            None,
            false,
        ),
        (
            &conns,
            "proxy-conns-epoll-grows",
            "epoll-et copy",
            1000,
            None,
            true,
        ),
        (
            &conns,
            "proxy-rt-uselect-vs-select",
            "select copy",
            5000,
            None,
            true,
        ),
        (
            &conns,
            "proxy-rt-uselect-vs-epoll",
            "uring-poll copy",
            10000,
            None,
            false,
        ),
    ];
    for (base, id, series, idle, rate, is_b) in cases {
        let holds = |p: &PointResult| {
            p.series == series && p.idle == idle && rate.is_none_or(|r| p.rate == r)
        };
        let rt = id.starts_with("proxy-rt-");
        let arm = Arm {
            holds: &holds,
            scale: if rt { &scale_mean_ms } else { &scale_cpu },
            is_b,
        };
        let idle_words = match idle {
            0 => "no idle".to_string(),
            n => format!("{} idle", crate::model::text::thousands(n as f64)),
        };
        let has = format!("{} {series}, {idle_words}", if is_b { "B" } else { "A" });
        each_outcome(base, id, &arm, &has);
    }
}

#[test]
fn proxy_figure_rules_apply_where_the_seed_measured() {
    let count = |s: &Summary, id: &str| findings(s).iter().filter(|f| f.rule == id).count();
    // fig-proxy-combined: the combined rule at each idle count, beside uselect's (no epoll
    // series) and splice-keep's per mechanism; splice-release is shown, not judged.
    let s = proxy_run("fig-proxy-combined");
    assert_eq!(count(&s, "proxy-combined-vs-select"), 2);
    assert_eq!(count(&s, "proxy-uselect-vs-select"), 2);
    assert_eq!(count(&s, "proxy-uselect-vs-epoll"), 0);
    assert_eq!(count(&s, "proxy-splice-vs-copy"), 2);
    assert_eq!(findings(&s).len(), 6, "{:?}", findings(&s));
    assert!(findings(&s)
        .iter()
        .all(|f| !f.evidence.contains("splice-release")));
    // fig-proxy-rt: the CPU rules at each of its three idle counts; no response-time rule on a
    // workload with misses.
    let s = proxy_run("fig-proxy-rt");
    assert_eq!(count(&s, "proxy-uselect-vs-select"), 3);
    assert_eq!(count(&s, "proxy-uselect-vs-epoll"), 3);
    assert_eq!(count(&s, "proxy-combined-vs-select"), 3);
    assert_eq!(count(&s, "proxy-splice-vs-copy"), 2);
    assert_eq!(findings(&s).len(), 11, "{:?}", findings(&s));
    // fig-proxy-rate: each splice mode at the lowest and the highest rate, nothing else; the
    // same run with cacheable objects judges none.
    let mut s = proxy_run("fig-proxy-rate");
    assert_eq!(count(&s, "proxy-rate-splice-lowest"), 2);
    assert_eq!(count(&s, "proxy-rate-splice-highest"), 2);
    assert_eq!(findings(&s).len(), 4, "{:?}", findings(&s));
    let low = findings(&s)
        .into_iter()
        .find(|f| f.rule == "proxy-rate-splice-lowest")
        .unwrap();
    assert!(
        low.evidence.starts_with("at 1,000/s offered"),
        "{}",
        low.evidence
    );
    let high = findings(&s)
        .into_iter()
        .find(|f| f.rule == "proxy-rate-splice-highest")
        .unwrap();
    assert!(
        high.evidence.starts_with("at 5,000/s offered"),
        "{}",
        high.evidence
    );
    let i = s
        .experiment
        .load_flags
        .iter()
        .position(|f| f == "--cacheable")
        .unwrap();
    s.experiment.load_flags[i + 1] = "1".into();
    assert!(findings(&s).is_empty(), "{:?}", findings(&s));
    // fig-proxy-conns: uselect flat from 250 to 10,000, select and epoll from 1,000 to 2,500,
    // the response-time rules at 5,000 and 10,000, uselect's CPU rules at every count.
    let mut s = proxy_run("fig-proxy-conns");
    for id in [
        "proxy-conns-uselect-flat",
        "proxy-conns-select-grows",
        "proxy-conns-epoll-grows",
    ] {
        assert_eq!(count(&s, id), 1, "{id}");
    }
    assert_eq!(count(&s, "proxy-rt-uselect-vs-select"), 2);
    assert_eq!(count(&s, "proxy-rt-uselect-vs-epoll"), 2);
    assert_eq!(count(&s, "proxy-rt-uselect-vs-poll"), 2);
    assert_eq!(count(&s, "proxy-uselect-vs-select"), 5);
    // Fig. 5: uselect against each of the other three at 5,000 and 10,000, and at 10,000
    // against epoll at 5,000.
    for id in [
        "proxy-hits-uselect-vs-select",
        "proxy-hits-uselect-vs-poll",
        "proxy-hits-uselect-vs-epoll",
    ] {
        assert_eq!(count(&s, id), 2, "{id}");
    }
    assert_eq!(count(&s, "proxy-hits-uselect-10k-below-epoll-5k"), 1);
    let (_, e) = by_rule(&s, "proxy-hits-uselect-10k-below-epoll-5k");
    assert!(
        e.contains("A uring-poll copy, 10,000 idle") && e.contains("B epoll-et copy, 5,000 idle"),
        "{e}"
    );
    assert_eq!(findings(&s).len(), 26, "{:?}", findings(&s));
    let (_, e) = by_rule(&s, "proxy-conns-uselect-flat");
    assert!(
        e.contains("A uring-poll copy, 10,000 idle") && e.contains("B uring-poll copy, 250 idle"),
        "{e}"
    );
    let (_, e) = by_rule(&s, "proxy-rt-uselect-vs-select");
    assert!(e.contains("mean 2.00 ms"), "{e}");
    // Without the hits-only load, none of Fig. 4's, Fig. 5's or Fig. 6's rules applies.
    let i = s
        .experiment
        .load_flags
        .iter()
        .position(|f| f == "--hit-ratio")
        .unwrap();
    s.experiment.load_flags[i + 1] = "0.58".into();
    assert!(findings(&s)
        .iter()
        .all(|f| !f.rule.starts_with("proxy-conns-")
            && !f.rule.starts_with("proxy-rt-")
            && !f.rule.starts_with("proxy-hits-")));
}

pub(crate) fn by_rule(s: &Summary, id: &str) -> (Verdict, String) {
    let f = findings(s)
        .into_iter()
        .find(|f| f.rule == id)
        .unwrap_or_else(|| panic!("no finding of rule {id}"));
    (f.verdict, f.evidence)
}

/// select, poll, epoll-lt and epoll-et at 2,000 and 8,000/s, no idle and 10,000, 3 trials
/// that vary by ±1% (the same in every series: a trial's machine state). Past the knee
/// (8,000/s) every series answers 5,000/s without idle connections; `at_idle(m)` what it
/// answers with them. select and poll pay 30 µs per reply with idle connections, 10 without.
pub(crate) fn fig5(at_idle: &dyn Fn(&str) -> f64) -> Summary {
    summary(
        &["select", "poll", "epoll-lt", "epoll-et"],
        &[0, 10_000],
        &[2000.0, 8000.0],
        3,
        &|m, idle, rate, t| {
            let noise = [0.99, 1.0, 1.01][t as usize];
            let v = match (idle, rate) {
                (_, r) if r < 5000.0 => r,
                (0, _) => 5000.0,
                _ => at_idle(m),
            };
            v * noise
        },
    )
}

#[test]
fn paper_rules_reproduce_on_the_papers_shape() {
    let s = fig5(&|m| match m {
        "select" | "poll" => 2000.0,
        "epoll-lt" => 4500.0,
        _ => 5000.0,
    });
    for id in [
        "fig1-select-as-epoll-lt",
        "fig1-poll-as-epoll-lt",
        "fig3-epoll-et-no-gain",
        "fig5-select-replies",
        "fig5-poll-replies",
        "fig5-epoll-lt-slight",
        "fig5-select-below-epoll-lt",
        "fig5-poll-below-epoll-lt",
        "fig5-epoll-et-unaffected",
        "fig5-select-cpu",
        "fig5-poll-cpu",
    ] {
        let (v, e) = by_rule(&s, id);
        assert_eq!(v, Verdict::Reproduced, "{id}: {e}");
        assert!(e.contains("n = 3") && e.contains("[90%: "), "{id}: {e}");
    }
    let (_, e) = by_rule(&s, "fig5-select-replies");
    assert!(
        e.starts_with("at 8,000/s offered: A select, 10,000 idle: n = 3, mean 2,000 replies/s"),
        "{e}"
    );
    assert!(e.contains("A/B = 0.40"), "{e}");
    let (_, e) = by_rule(&s, "fig5-select-cpu");
    assert!(e.starts_with("at 2,000/s offered"), "{e}");
}

#[test]
fn paper_rules_reject_the_opposite_shape() {
    // Idle connections cost nothing; select answers 60% of epoll-lt with none... (below)
    let mut s = fig5(&|m| match m {
        "epoll-et" => 3000.0,
        "epoll-lt" => 2000.0,
        _ => 4950.0,
    });
    for p in s.points.iter_mut() {
        if p.series == "select" && p.idle == 0 && p.rate == 8000.0 {
            let l = p.load.as_mut().unwrap();
            l.reply_rate_avg = l.reply_rate_avg.map(|x| x * 0.6);
        }
        p.server_cpu_us_per_reply = Some(10.0 * if p.trial == 1 { 1.01 } else { 1.0 });
    }
    for id in [
        "fig1-select-as-epoll-lt",
        "fig5-poll-replies",
        "fig5-epoll-lt-slight",
        "fig5-select-below-epoll-lt",
        "fig5-poll-below-epoll-lt",
        "fig5-epoll-et-unaffected",
        "fig5-select-cpu",
    ] {
        let (v, e) = by_rule(&s, id);
        assert_eq!(v, Verdict::NotReproduced, "{id}: {e}");
    }
}

#[test]
fn spread_or_missing_trials_leave_a_rule_inconclusive() {
    // select with idle connections: 3,000, 4,500 and 4,000 against 5,000: a mean drop of 23%
    // whose interval straddles the 20% threshold.
    let mut s = fig5(&|_| 5000.0);
    for p in s.points.iter_mut() {
        if p.series == "select" && p.idle == 10_000 && p.rate == 8000.0 {
            let v = [3000.0, 4500.0, 4000.0][p.trial as usize];
            p.load.as_mut().unwrap().reply_rate_avg = Some(v);
        }
    }
    let (v, e) = by_rule(&s, "fig5-select-replies");
    assert_eq!(v, Verdict::Inconclusive, "{e}");
    // A flagged trial is left out, and two valid trials are not enough.
    let mut s = fig5(&|_| 2000.0);
    for p in s.points.iter_mut() {
        if p.series == "poll" && p.idle == 10_000 && p.rate == 8000.0 && p.trial == 2 {
            p.flags.push("client fell behind: started 90%".into());
        }
    }
    let (v, e) = by_rule(&s, "fig5-poll-replies");
    assert_eq!(v, Verdict::Inconclusive, "{e}");
    assert!(e.contains("n = 2 of 3 trials"), "{e}");
    assert!(e.contains("needs ≥ 3 valid trials per arm"), "{e}");
    // The other mechanism's verdict is untouched.
    assert_eq!(by_rule(&s, "fig5-select-replies").0, Verdict::Reproduced);
}

#[test]
fn fig7_finds_the_unlimited_series_by_inf_or_no_flag() {
    let mut s = summary(&["epoll-lt"], &[0], &[2000.0, 8000.0], 3, &|_, _, r, t| {
        r.min(5000.0) * [0.99, 1.0, 1.01][t as usize]
    });
    let base = s.series[0].clone();
    let mut lim = base.clone();
    lim.label = "epoll-lt accept-limit=10".into();
    lim.flags = vec!["--accept-limit".into(), "10".into()];
    let mut inf = base.clone();
    inf.label = "epoll-lt accept-limit=inf".into();
    inf.flags = vec!["--accept-limit".into(), "inf".into()];
    s.series = vec![inf.clone(), lim.clone()];
    let mut extra = vec![];
    for p in s.points.iter_mut() {
        p.series = inf.label.clone();
        let mut q = p.clone();
        q.series = lim.label.clone();
        if q.rate == 8000.0 {
            let l = q.load.as_mut().unwrap();
            l.reply_rate_avg = l.reply_rate_avg.map(|x| x * 1.3);
        }
        extra.push(q);
    }
    s.points.extend(extra);
    let (v, e) = by_rule(&s, "fig7-accept-limit");
    assert_eq!(v, Verdict::Reproduced, "{e}");
    assert!(e.contains("A epoll-lt accept-limit=10"), "{e}");
}

/// epoll-lt and a control series of it on its own budget answering `factor` × as much past
/// the knee, 3 trials each.
fn control(factor: f64) -> Summary {
    let mut s = summary(&["epoll-lt"], &[0], &[2000.0, 8000.0], 3, &|_, _, r, t| {
        r.min(5000.0) * [0.99, 1.0, 1.01][t as usize]
    });
    s.experiment.series.push(crate::model::spec::SeriesSpec {
        label: "epoll-lt on less".into(),
        mechanism: "epoll-lt".into(),
        flags: vec![],
        object_size: None,
        cpu_budget: Some(0.2),
        idle: Some(vec![0]),
        sweep_values: None,
    });
    let mut c = s.series[0].clone();
    c.label = "epoll-lt on less".into();
    s.series.push(c.clone());
    let extra: Vec<PointResult> = s
        .points
        .iter()
        .map(|p| {
            let mut q = p.clone();
            q.series = c.label.clone();
            let l = q.load.as_mut().unwrap();
            l.reply_rate_avg = l.reply_rate_avg.map(|x| x * factor);
            q
        })
        .collect();
    s.points.extend(extra);
    s
}

#[test]
fn the_negative_control_is_judged_by_the_equivalence_rule() {
    // 20% less capacity: the equivalence test must see the difference.
    let (v, e) = by_rule(&control(0.83), "control-budget-not-equivalent");
    assert_eq!(v, Verdict::NotReproduced, "{e}");
    assert!(e.contains("A epoll-lt on less, no idle: n = 3"), "{e}");
    // Were the pair the same, the rule would call them equivalent: the control can fail.
    let (v, e) = by_rule(&control(1.0), "control-budget-not-equivalent");
    assert_eq!(v, Verdict::Reproduced, "{e}");
}

#[test]
fn a_highest_rate_every_series_keeps_up_with_decides_nothing_on_replies() {
    // Every series answers all it is offered at both rates: equal by construction.
    let s = summary(
        &["select", "epoll-lt"],
        &[0, 10_000],
        &[2000.0, 4000.0],
        3,
        &|_, _, r, t| r * [0.99, 1.0, 1.0][t as usize],
    );
    for id in ["fig1-select-as-epoll-lt", "fig5-select-replies"] {
        let (v, e) = by_rule(&s, id);
        assert_eq!(v, Verdict::Inconclusive, "{id}: {e}");
        assert!(e.contains("not past its knee"), "{id}: {e}");
    }
    // CPU per reply at the lowest rate has no such condition.
    assert_eq!(by_rule(&s, "fig5-select-cpu").0, Verdict::Reproduced);
}

/// A search of `series` at `idle` in `trial`, as `run::knee` makes one, against a server of
/// capacity `truth` (`model::knee::simulate`).
fn knee_of(series: &str, idle: usize, trial: u32, truth: f64) -> crate::model::knee::Knee {
    use crate::model::knee::{simulate, KneeSpec, FAR_WIDENING};
    let mut k = simulate(
        truth,
        5000.0,
        FAR_WIDENING,
        &KneeSpec::default(),
        (100.0, 20_000.0),
    );
    k.series = series.into();
    k.idle = idle;
    k.trial = trial;
    k
}

/// `s` with a capacity search per series, idle count and trial, closed around
/// `truth(series, idle)` × the trial's noise (±2%).
pub(crate) fn with_knees(mut s: Summary, truth: &dyn Fn(&str, usize) -> f64) -> Summary {
    s.experiment.knee = Some(crate::model::knee::KneeSpec::default());
    for t in 0..s.experiment.trials {
        for &idle in &s.experiment.idle.clone() {
            for series in s.series.clone() {
                let noise = [0.98, 1.0, 1.02][t as usize % 3];
                let k = knee_of(&series.label, idle, t, truth(&series.label, idle) * noise);
                s.knees.push(k);
            }
        }
    }
    s
}

#[test]
fn capacity_rules_read_the_knees_where_a_run_has_them() {
    // The overloaded reply rates say the opposite of the paper; the capacities say the paper's
    // shape, and decide.
    let s = fig5(&|m| match m {
        "select" | "poll" => 5000.0,
        _ => 2000.0,
    });
    let s = with_knees(s, &|m, idle| match (m, idle) {
        (_, 0) => 6000.0,
        ("select" | "poll", _) => 3000.0,
        ("epoll-lt", _) => 5700.0,
        _ => 6000.0,
    });
    for id in [
        "fig1-select-as-epoll-lt",
        "fig1-poll-as-epoll-lt",
        "fig3-epoll-et-no-gain",
        "fig5-select-replies",
        "fig5-poll-replies",
        "fig5-epoll-lt-slight",
        "fig5-select-below-epoll-lt",
        "fig5-poll-below-epoll-lt",
        "fig5-epoll-et-unaffected",
    ] {
        let (v, e) = by_rule(&s, id);
        assert_eq!(v, Verdict::Reproduced, "{id}: {e}");
        assert!(
            e.starts_with("capacity (bisected to ±3.0%): A "),
            "{id}: {e}"
        );
        assert!(e.contains("n = 3") && e.contains("[90%: "), "{id}: {e}");
    }
    // The CPU rules still read the lowest rate's points.
    let (v, e) = by_rule(&s, "fig5-select-cpu");
    assert_eq!(v, Verdict::Reproduced, "{e}");
    assert!(e.starts_with("at 2,000/s offered"), "{e}");
}

#[test]
fn searches_that_did_not_close_leave_a_capacity_rule_inconclusive() {
    let mut s = with_knees(fig5(&|_| 5000.0), &|_, _| 6000.0);
    // select's searches with idle connections: one never closed (it reached the client's
    // ceiling, say), so two trials remain.
    let k = s
        .knees
        .iter_mut()
        .find(|k| k.series == "select" && k.idle == 10_000)
        .unwrap();
    k.steps.retain(|st| st.kept);
    let (v, e) = by_rule(&s, "fig5-select-replies");
    assert_eq!(v, Verdict::Inconclusive, "{e}");
    assert!(e.contains("n = 2 of 3 trials"), "{e}");
    assert!(e.contains("≥ 3 closed searches per arm"), "{e}");
}

/// Synthetic null runs of the capacity rules: each trial's true capacity varies by `cv`
/// (log-normal), is bisected as a search does, and judged as the rules do (floor included).
fn knee_rule_rate(claim: Claim, true_ratio: f64, cv: f64, runs: usize, seed: u64) -> f64 {
    use crate::analysis::stats::{Decision, Ratio, Rng};
    let res = crate::model::knee::KneeSpec::default().resolution;
    let floor = res.ln().powi(2) / 12.0;
    let mut rng = Rng::new(seed);
    let mut yes = 0;
    for _ in 0..runs {
        let mut arm = |m: f64| -> Vec<f64> {
            (0..3)
                .map(|_| {
                    let truth = 6000.0 * m * (cv * rng.normal()).exp();
                    knee_of("x", 0, 0, truth).capacity(res).unwrap()
                })
                .collect()
        };
        let (a, b) = (arm(true_ratio), arm(1.0));
        let r = Ratio::of_floored(&a, &b, floor).unwrap();
        if claim.decide(r.lo, r.hi) == Decision::Reproduced {
            yes += 1;
        }
    }
    yes as f64 / runs as f64
}

#[test]
fn capacity_rules_keep_their_error_rates_on_bisected_values() {
    use crate::analysis::rules::{DEGRADE, SAME};
    for cv in [0.0, 0.02, 0.05, 0.10] {
        // No difference: "degrades" (A/B ≤ 0.80) almost never.
        let fp = knee_rule_rate(Claim::AtMost(DEGRADE), 1.0, cv, 400, 7);
        assert!(fp <= 0.05, "cv {cv}: degrade reproduced {fp} of null runs");
        // A true gap of twice the margin: "the same" almost never.
        let fp = knee_rule_rate(Claim::Within(SAME), 1.0 / (1.0 + 2.0 * SAME), cv, 400, 8);
        assert!(
            fp <= 0.05,
            "cv {cv}: equivalence passed {fp} of runs 20% apart"
        );
    }
    // And the rules have power where the effects are the seed's: select's drop to half, and
    // two servers within a few percent, with trials that vary by 2%.
    assert!(knee_rule_rate(Claim::AtMost(DEGRADE), 0.5, 0.02, 400, 9) >= 0.95);
    assert!(knee_rule_rate(Claim::Within(SAME), 1.0, 0.02, 400, 10) >= 0.5);
}

#[test]
fn sessions_of_several_requests_are_past_the_knee_by_their_own_measure() {
    // SPECweb99-like: 3 replies per offered session where every server keeps up (2,000/s),
    // 15,000 of the 24,000 a server that kept up would give at 8,000/s.
    let s = summary(
        &["select", "epoll-lt"],
        &[0],
        &[2000.0, 8000.0],
        3,
        &|_, _, r, t| (3.0 * r).min(15_000.0) * [0.99, 1.0, 1.01][t as usize],
    );
    let (v, e) = by_rule(&s, "fig1-select-as-epoll-lt");
    assert_eq!(v, Verdict::Reproduced, "{e}");
    // Where the sessions are all answered at the highest rate too, it is not past its knee.
    let s = summary(
        &["select", "epoll-lt"],
        &[0],
        &[2000.0, 4000.0],
        3,
        &|_, _, r, t| 3.0 * r * [0.99, 1.0, 1.01][t as usize],
    );
    let (v, e) = by_rule(&s, "fig1-select-as-epoll-lt");
    assert_eq!(v, Verdict::Inconclusive, "{e}");
    assert!(
        e.contains("of what it answers per offered connection below its knee (3.00 replies each)"),
        "{e}"
    );
}

/// A shipped experiment (`experiments/NAME.toml`), planned on a machine that supports every
/// mechanism it names, measured at two rates below and past a knee of `truth(series)` with a
/// capacity search per series and trial (±2% between trials).
pub(crate) fn shipped_run(name: &str, truth: &dyn Fn(&str) -> f64) -> Summary {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../experiments/{name}.toml"));
    let spec = Spec::load(&path).unwrap();
    // What the plan runs where every mechanism is supported (these experiments name no peer).
    let series = spec.series_list(&|_| true, &[]);
    assert!(
        series.iter().all(|x| x.kind == ServerKind::Evlab),
        "{name}: {series:?}"
    );
    let mut s = summary(&["epoll-lt"], &[0], &[2000.0, 8000.0], 3, &|_, _, _, _| 0.0);
    s.experiment = spec;
    s.series = series;
    s.points.clear();
    for t in 0..3 {
        for se in s.series.clone() {
            for r in [2000.0, 8000.0] {
                let mut p = PointResult::new(s.points.len(), &se, 0, r, t, 2.0);
                p.load = Some(LoadSummary {
                    offered_rate: Some(r),
                    reply_rate_avg: Some(r.min(truth(&se.label))),
                    ..Default::default()
                });
                p.server_cpu_us_per_reply = Some(10.0);
                s.points.push(p);
            }
        }
    }
    let knee = s.experiment.knee.clone();
    let mut s = with_knees(s, &|m, _| truth(m));
    s.experiment.knee = knee;
    s
}

#[test]
fn the_shipped_no_difference_experiments_plan_and_judge_their_negative_control() {
    use crate::analysis::rules::SAME;
    for (name, equivalence) in [
        (
            "quick",
            &[
                "fig1-select-as-epoll-lt",
                "fig1-poll-as-epoll-lt",
                "fig3-epoll-et-no-gain",
            ][..],
        ),
        (
            "fig1-one-byte",
            &["fig1-select-as-epoll-lt", "fig1-poll-as-epoll-lt"][..],
        ),
        (
            "fig3-epoll-variants",
            &[
                "fig3-epoll-et-no-gain",
                "fig3-epoll2-no-gain",
                "fig3-epoll-ctlv-no-gain",
            ][..],
        ),
        (
            "fig4-specweb-epoll-variants",
            &[
                "fig3-epoll-et-no-gain",
                "fig3-epoll2-no-gain",
                "fig3-epoll-ctlv-no-gain",
            ][..],
        ),
        ("fig7-accept-limit", &["fig7-epoll-lt-matches-select"][..]),
        // Its "no difference" rules read profiled shares, which these points have not.
        ("table1-syscalls", &[][..]),
    ] {
        // The plan: the control series, epoll-lt on the experiment's budget ÷ (1 + 2 × SAME).
        let ctl = shipped_run(name, &|_| 6000.0);
        assert_eq!(ctl.experiment.family(), crate::model::spec::Family::Paper);
        assert!(ctl.experiment.knee.is_some(), "{name}: no capacity search");
        let c = ctl
            .series
            .iter()
            .find(|x| ctl.experiment.series_budget(&x.label).is_some())
            .unwrap_or_else(|| panic!("{name}: no control series planned"));
        assert_eq!(c.mechanism, "epoll-lt", "{name}");
        let Some(crate::model::spec::Budget::Share(b)) = ctl.experiment.server_cpu_budget else {
            panic!("{name}: no fixed budget");
        };
        let want = b / (1.0 + 2.0 * SAME);
        let got = ctl.experiment.series_budget(&c.label).unwrap();
        assert!((got / want - 1.0).abs() < 0.001, "{name}: {got} ≠ {want}");
        assert!(ctl.experiment.series_runs_at(&c.label, 0), "{name}");
        // The judging: the control's capacity in proportion to its budget is told apart from
        // epoll-lt's (the control passes) while the equivalence rules are decided…
        let label = c.label.clone();
        let s = shipped_run(name, &|m| {
            if m == label {
                6000.0 * got / b
            } else {
                6000.0
            }
        });
        let (v, e) = by_rule(&s, "control-budget-not-equivalent");
        assert_eq!(v, Verdict::NotReproduced, "{name}: {e}");
        assert!(
            e.contains(&format!("A {label}, no idle: n = 3")),
            "{name}: {e}"
        );
        for id in equivalence {
            let (v, e) = by_rule(&s, id);
            assert_eq!(v, Verdict::Reproduced, "{name}: {id}: {e}");
        }
        let md = crate::render::report::render_md(&s);
        assert!(md.contains("Negative control: passed"), "{name}: {md}");
        // …and were its budget not smaller, the control would fail, and the report say so.
        let (v, e) = by_rule(&ctl, "control-budget-not-equivalent");
        assert_eq!(v, Verdict::Reproduced, "{name}: {e}");
        let md = crate::render::report::render_md(&ctl);
        assert!(md.contains("Negative control: FAILED"), "{name}: {md}");
    }
}

#[test]
fn a_paper_run_without_the_negative_control_says_so() {
    // fig5-one-byte-idle's shape: equivalence rules (fig1, fig5-epoll-et-unaffected) and no
    // series on a budget of its own.
    let s = with_knees(fig5(&|_| 5000.0), &|_, _| 6000.0);
    let md = crate::render::report::render_md(&s);
    // The controls beside the findings chart say it has none; the findings in full, why.
    assert!(md.contains("- Negative control: not in this run ("), "{md}");
    let line = md
        .lines()
        .find(|l| l.contains("Negative control: no negative control in this run"))
        .unwrap_or_else(|| panic!("{md}"));
    for id in ["fig1-select-as-epoll-lt", "fig5-epoll-et-unaffected"] {
        assert!(line.contains(id), "{line}");
    }
    // A run that judges no equivalence rule has nothing to say about it.
    let s = summary(&["select"], &[0, 10_000], &[2000.0], 3, &|_, _, r, _| r);
    assert!(!crate::render::report::render_md(&s).contains("no negative control in this run"));
}

#[test]
fn no_difference_verdicts_stand_only_beside_a_passed_negative_control() {
    let f = |rule: &str, verdict: Verdict| Finding {
        rule: rule.into(),
        source: String::new(),
        claim: String::new(),
        verdict,
        evidence: "n = 3, A/B = 1.00".into(),
        interval: Some([1.0, 0.97, 1.03]),
        arms: None,
        trials: None,
    };
    let run = |control: Option<Verdict>| {
        let mut fs = vec![
            f("fig1-select-as-epoll-lt", Verdict::Reproduced),
            f("fig5-select-cpu", Verdict::Reproduced),
        ];
        fs.extend(control.map(|v| f("control-budget-not-equivalent", v)));
        controls::withhold_unguarded(&mut fs);
        fs
    };
    // Passed (decided not equivalent): the verdicts stand.
    let fs = run(Some(Verdict::NotReproduced));
    assert_eq!(negative_control_status(&fs), ControlStatus::Passed);
    assert_eq!(fs[0].verdict, Verdict::Reproduced);
    for (control, status, why) in [
        (
            Some(Verdict::Inconclusive),
            ControlStatus::Underpowered,
            "could not tell a known difference apart",
        ),
        (
            Some(Verdict::Reproduced),
            ControlStatus::Failed,
            "judged a known difference equivalent",
        ),
        (None, ControlStatus::Absent, "has no negative control"),
    ] {
        let fs = run(control);
        assert_eq!(negative_control_status(&fs), status);
        let eq = &fs[0];
        assert_eq!(eq.verdict, Verdict::NotJudged, "{control:?}");
        assert!(
            eq.evidence.starts_with("not judged: this run "),
            "{}",
            eq.evidence
        );
        assert!(eq.evidence.contains(why), "{}", eq.evidence);
        // What was measured is kept.
        assert!(
            eq.evidence
                .contains("as measured it reads reproduced: n = 3"),
            "{}",
            eq.evidence
        );
        assert_eq!(eq.interval, Some([1.0, 0.97, 1.03]));
        // A rule that claims a difference is not touched, nor is the control itself.
        assert_eq!(fs[1].verdict, Verdict::Reproduced);
        if let Some(c) = fs.get(2) {
            assert_eq!(Some(c.verdict), control);
        }
    }
}

#[test]
fn controls_pass_only_when_decided_their_own_way() {
    let f = |rule: &str, verdict: Verdict| Finding {
        rule: rule.into(),
        source: String::new(),
        claim: String::new(),
        verdict,
        evidence: String::new(),
        interval: Some([1.0, 0.9, 1.1]),
        arms: None,
        trials: None,
    };
    use Verdict::*;
    // The positive control: fig5-select-cpu in a run, control-positive in a placebo run.
    for (placebo, id) in [(false, "fig5-select-cpu"), (true, "control-positive")] {
        for (v, want) in [
            (Reproduced, ControlStatus::Passed),
            (NotReproduced, ControlStatus::Failed),
            (Inconclusive, ControlStatus::Underpowered),
        ] {
            assert_eq!(
                positive_control_status(placebo, &[f(id, v)]),
                want,
                "{id} {v:?}"
            );
        }
        assert_eq!(positive_control_status(placebo, &[]), ControlStatus::Absent);
    }
    // The negative control, over every pair of known difference it has.
    let neg = |vs: &[Verdict]| {
        let fs: Vec<Finding> = vs
            .iter()
            .map(|&v| f("control-budget-not-equivalent", v))
            .collect();
        negative_control_status(&fs)
    };
    assert_eq!(neg(&[NotReproduced, NotReproduced]), ControlStatus::Passed);
    assert_eq!(
        neg(&[NotReproduced, Inconclusive]),
        ControlStatus::Underpowered
    );
    assert_eq!(neg(&[NotReproduced, Reproduced]), ControlStatus::Failed);
    // A placebo run passes when no rule that claims a difference is reproduced; a rule of no
    // difference, or a control, reproduced there is no failure.
    let diff = "fig5-select-replies";
    assert!(claims_a_difference(diff) && !claims_a_difference("fig1-select-as-epoll-lt"));
    assert!(!claims_a_difference("control-positive"));
    let placebo = |fs: &[Finding]| placebo_status(true, fs);
    assert_eq!(placebo(&[f(diff, NotReproduced)]), ControlStatus::Passed);
    assert_eq!(placebo(&[f(diff, Inconclusive)]), ControlStatus::Passed);
    assert_eq!(placebo(&[f(diff, Reproduced)]), ControlStatus::Failed);
    assert_eq!(
        placebo(&[
            f("fig1-select-as-epoll-lt", Reproduced),
            f("control-positive", Reproduced)
        ]),
        ControlStatus::Passed
    );
    assert_eq!(placebo_status(false, &[]), ControlStatus::Absent);
    // Chance alone: 5% of the rules that claim a difference and were judged on an interval.
    let (k, e) = chance_reproduced(&[
        f(diff, Reproduced),
        f("fig1-select-as-epoll-lt", Reproduced),
    ]);
    assert_eq!(k, 1);
    assert!((e - 0.05).abs() < 1e-12);
}

/// A look judges the run by the report's own code at its level: the same ratio, a wider
/// interval at 99.8% than at 90%, each said in the evidence; and the report's verdicts are at
/// the level of the look that stopped a sequential run (90% in a run of fixed trials).
#[test]
fn the_rules_decide_at_the_level_they_are_given() {
    use crate::model::sequential::{Look, LookKind, Record, Rule, SequentialSpec};
    let mut s = summary(&["select"], &[0, 10_000], &[1000.0], 3, &|_, _, _, _| {
        1000.0
    });
    for p in s.points.iter_mut().filter(|p| p.idle > 0) {
        let noise = [0.8, 1.0, 1.25][p.trial as usize % 3];
        p.server_cpu_us_per_reply = p.server_cpu_us_per_reply.map(|c| c * noise);
    }
    let of = |fs: Vec<Finding>| {
        fs.into_iter()
            .find(|f| f.rule == "fig5-select-cpu")
            .unwrap()
    };
    let at90 = of(super::findings_at(&s, 0.90));
    let at998 = of(super::findings_at(&s, 0.998));
    let ([r1, lo1, hi1], [r2, lo2, hi2]) = (at90.interval.unwrap(), at998.interval.unwrap());
    assert_eq!(r1, r2);
    assert!(lo2 < lo1 && hi2 > hi1, "{lo1}-{hi1} within {lo2}-{hi2}");
    assert!(at90.evidence.contains("[90%: "), "{}", at90.evidence);
    assert!(at998.evidence.contains("[99.8%: "), "{}", at998.evidence);
    assert_eq!(at90.verdict, Verdict::Reproduced, "{}", at90.evidence);
    assert_eq!(at998.verdict, Verdict::Inconclusive, "{}", at998.evidence);
    // A run of fixed trials reads at 90%; a sequential one at its stopping look's level.
    assert_eq!(super::verdict_level(&s), 0.90);
    assert_eq!(of(super::findings(&s)).evidence, at90.evidence);
    let mut r = Record::new(Rule::of(&SequentialSpec {
        first: 3,
        block: 1,
        most: 6,
        budget_s: None,
    }));
    r.looks.push(Look {
        trials: 3,
        kind: LookKind::Interim,
        level: 0.998,
        judged: 1,
        decided: 1,
        undecided: vec![],
        elapsed_s: 1.0,
        next_block_s: Some(1.0),
        stopped: Some("all decided".into()),
    });
    s.sequential = Some(r);
    assert_eq!(of(super::findings(&s)).evidence, at998.evidence);
}
