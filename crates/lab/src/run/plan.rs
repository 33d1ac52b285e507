//! The plan: which series an experiment measures on this machine, and the options of a run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::run::machine;
use crate::run::peers;
use crate::run::procs::{self};
use evlab_reason::model::results::{self, SkippedSeries, Summary};
use evlab_reason::model::sequential::{Record, Rule};
use evlab_reason::model::spec::{Series, ServerKind, Spec, POSITIVE_CONTROL};

pub struct RunOptions {
    /// The `evlab` binary (the running one, or the test's).
    pub evlab: PathBuf,
    pub spec: Spec,
    pub spec_path: String,
    pub spec_text: String,
    pub duration_override: Option<f64>,
    /// `results/`: the run goes to `<results>/<name>/<timestamp>/` unless `out_dir` is given.
    pub results_root: PathBuf,
    pub out_dir: Option<PathBuf>,
    /// The `evlab run …` command line, recorded.
    pub command: String,
    pub quiet: bool,
    /// The cgroup the server's CPU budgets are made in (`--cgroup`); None: `$EVLAB_CGROUP` or
    /// the default (see `run::cgroup::Parent`).
    pub cgroup: Option<PathBuf>,
    /// `--resume`: the summary of the run to go on with (`out_dir` is its directory); its
    /// valid points, finished searches and calibration are kept.
    pub resume: Option<Summary>,
    /// `--hosts FILE`: the server and the clients run on these hosts over OpenSSH.
    pub hosts: Option<evlab_reason::model::hosts::Hosts>,
    /// `--on HOST`: the host of `hosts` a micro-benchmark runs on (default: the server host).
    pub on: Option<String>,
}

/// Which evlab mechanisms this kernel supports: name → `Ok(())` or the reason it is not.
pub fn mechanism_support(evlab: &Path) -> BTreeMap<String, Result<(), String>> {
    procs::command_line_output(&[&evlab.display().to_string(), "serve", "--list-mechanisms"])
        .map(|text| parse_mechanism_support(&text))
        .unwrap_or_default()
}

/// `evlab serve --list-mechanisms`'s output read: name → `Ok(())` or the reason it is not.
pub fn parse_mechanism_support(text: &str) -> BTreeMap<String, Result<(), String>> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if let Some((_, tail)) = line.split_once("supported: ") {
            let r = if tail.trim_start().starts_with("yes") {
                Ok(())
            } else {
                Err(tail
                    .trim()
                    .trim_start_matches("no")
                    .trim_start_matches(':')
                    .trim()
                    .to_string())
            };
            out.insert(name.to_string(), r);
        }
    }
    out
}

/// The series a run measures on this machine, and those it skips with the reason.
pub struct Plan {
    pub series: Vec<Series>,
    pub skipped: Vec<SkippedSeries>,
}

pub(crate) fn needs_lighttpd(spec: &Spec) -> bool {
    spec.mechanisms
        .iter()
        .chain(spec.series.iter().map(|s| &s.mechanism))
        .any(|m| m.starts_with("lighttpd"))
}

/// lighttpd's event handlers, when the experiment needs lighttpd and it is installed.
pub fn lighttpd_handlers(spec: &Spec) -> Vec<String> {
    if needs_lighttpd(spec) && peers::installed("lighttpd") {
        peers::lighttpd_handlers()
    } else {
        vec![]
    }
}

/// Plans a run of `spec` with the mechanisms `evlab` supports here and the peers installed.
pub fn plan(evlab: &Path, spec: &Spec) -> Plan {
    plan_with(spec, &mechanism_support(evlab), &lighttpd_handlers(spec))
}

/// Plans a run of `spec` given which evlab mechanisms this kernel supports and lighttpd's
/// event handlers (empty: lighttpd is missing or offers none).
pub fn plan_with(
    spec: &Spec,
    support: &BTreeMap<String, Result<(), String>>,
    handlers: &[String],
) -> Plan {
    plan_on(spec, support, handlers, &peers::installed)
}

/// As [`plan_with`], with `installed` saying whether a peer's program is installed where the
/// servers run (this machine, or the server host of a run across hosts).
pub fn plan_on(
    spec: &Spec,
    support: &BTreeMap<String, Result<(), String>>,
    handlers: &[String],
    installed: &dyn Fn(&str) -> bool,
) -> Plan {
    let supported = |m: &str| matches!(support.get(m), Some(Ok(())));
    let mut series = Vec::new();
    let mut skipped = Vec::new();
    let mut skip = |label: &str, reason: String| {
        skipped.push(SkippedSeries {
            series: label.to_string(),
            reason,
        })
    };
    if needs_lighttpd(spec) && handlers.is_empty() {
        skip(
            "lighttpd",
            if installed("lighttpd") {
                "lighttpd -V lists no usable event handler".into()
            } else {
                "lighttpd is not installed".into()
            },
        );
    }
    for s in spec.series_list(&supported, handlers) {
        match s.kind {
            ServerKind::Evlab => match support.get(&s.mechanism) {
                Some(Ok(())) => series.push(s),
                Some(Err(why)) => skip(&s.label, format!("not supported here: {why}")),
                None => skip(
                    &s.label,
                    "`evlab serve --list-mechanisms` does not list it".into(),
                ),
            },
            ServerKind::Nginx if !installed("nginx") => {
                skip(&s.label, "nginx is not installed".into())
            }
            ServerKind::Haproxy if !installed("haproxy") => {
                skip(&s.label, "haproxy is not installed".into())
            }
            ServerKind::Lighttpd if !handlers.contains(&s.mechanism) => skip(
                &s.label,
                format!("this lighttpd has no `{}` event handler", s.mechanism),
            ),
            _ => series.push(s),
        }
    }
    if spec.placebo {
        placebo(&mut series, spec.placebo_flags.as_deref());
        // The positive control, exempt: select with its idle connections really held, where
        // the experiment has idle connections and this kernel has select.
        if spec.idle.iter().any(|&i| i > 0) && supported("select") {
            series.push(Series {
                label: POSITIVE_CONTROL.into(),
                kind: ServerKind::Evlab,
                mechanism: "select".into(),
                flags: vec![],
            });
        }
    }
    Plan { series, skipped }
}

/// The placebo's plan: every evlab series runs one mechanism with one set of flags (the
/// accept mode and limit, the forwarding mode, the workers: whatever its flags set) under its
/// own label, those of epoll-lt where the plan has it, else of the first evlab series; so that
/// a comparison between two series compares a condition with itself.
fn placebo(series: &mut [Series], flags: Option<&[String]>) {
    let evlab = |s: &&Series| s.kind == ServerKind::Evlab;
    let reference = series
        .iter()
        .filter(evlab)
        .find(|s| s.mechanism == "epoll-lt")
        .or_else(|| series.iter().find(evlab))
        .map(|s| (s.mechanism.clone(), s.flags.clone()));
    if let Some((m, own)) = reference {
        // The flags the points run with (`Spec::run_flags`), where the spec was made a
        // placebo by `make_placebo`; else the reference series' own.
        let flags = flags.map_or(own, <[String]>::to_vec);
        for s in series.iter_mut().filter(|s| s.kind == ServerKind::Evlab) {
            s.mechanism = m.clone();
            s.flags = flags.clone();
        }
    }
}

/// The build of the `evlab` binary that runs the points: its `--version` line without the
/// name ("0.1.0 (commit 0cf31d8a1b2c, clean; rustc 1.91.0 …)"), or this crate's version when
/// the binary does not answer.
pub(crate) fn build_of(evlab: &Path) -> String {
    procs::command_line_output(&[&evlab.display().to_string(), "--version"])
        .and_then(|s| {
            let line = s.lines().next()?.trim().to_string();
            line.strip_prefix("evlab ").map(str::to_string)
        })
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string())
}

/// The summary as it stands before the first point: what was asked for, on what machine.
pub(crate) fn new_summary(
    opts: &RunOptions,
    series: &[Series],
    skipped: Vec<SkippedSeries>,
) -> Summary {
    Summary {
        format: results::FORMAT,
        experiment: opts.spec.clone(),
        spec_path: opts.spec_path.clone(),
        spec_text: opts.spec_text.clone(),
        command: opts.command.clone(),
        duration_override: opts.duration_override,
        started: results::utc(results::now_secs()),
        finished: None,
        wall_s: 0.0,
        interrupted: false,
        machine: machine::collect(&build_of(&opts.evlab)),
        series: series.to_vec(),
        skipped,
        calibration: None,
        quiet: None,
        points: vec![],
        knees: vec![],
        resumed: vec![],
        hosts: vec![],
        network: vec![],
        sequential: opts
            .spec
            .sequential
            .as_ref()
            .map(|q| Record::new(Rule::of(q))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn support(names: &[&str]) -> BTreeMap<String, Result<(), String>> {
        names.iter().map(|n| (n.to_string(), Ok(()))).collect()
    }

    #[test]
    fn a_placebo_plan_runs_one_mechanism_and_adds_the_exempt_positive_control() {
        let mut spec = Spec::parse(
            "name = \"t\"\nmechanisms = [\"select\", \"poll\", \"epoll-lt\", \"epoll-et\"]\n\
             rates = [1000]\nidle = [0, 10000]\n",
            "t",
        )
        .unwrap();
        let all = support(&["select", "poll", "epoll-lt", "epoll-et"]);
        let real = plan_with(&spec, &all, &[]);
        assert_eq!(real.series.len(), 4);
        assert!(real.series.iter().all(|s| s.label == s.mechanism));
        spec.placebo = true;
        let p = plan_with(&spec, &all, &[]);
        let labels: Vec<&str> = p.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            ["select", "poll", "epoll-lt", "epoll-et", POSITIVE_CONTROL]
        );
        // Every labelled series runs epoll-lt; the control runs select, and only it holds
        // its idle connections.
        assert!(p.series[..4].iter().all(|s| s.mechanism == "epoll-lt"));
        assert_eq!(p.series[4].mechanism, "select");
        assert!(spec.holds_idle(POSITIVE_CONTROL) && !spec.holds_idle("select"));
        // No idle connections in the experiment: no positive control to add.
        spec.idle = vec![0];
        assert_eq!(plan_with(&spec, &all, &[]).series.len(), 4);
    }

    /// The shipped experiments that compare, made placebos: every series but the exempt
    /// positive control runs one mechanism with one set of flags (accept mode and limit,
    /// forwarding mode) on one CPU budget, so each comparison's arms get the same condition.
    #[test]
    fn placebo_plans_of_the_shipped_experiments_give_every_arm_one_condition() {
        let all = support(&[
            "select",
            "poll",
            "epoll-lt",
            "epoll2",
            "epoll-ctlv",
            "epoll-et",
            "uring-poll",
            "uring",
        ]);
        for name in [
            "quick",
            "fig3-epoll-variants",
            "fig7-accept-limit",
            "herd-serve",
            "herd-capacity",
            "fig-proxy-sizes",
            "lse-deadconn",
        ] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("../../experiments/{name}.toml"));
            let mut spec = Spec::load(&path).unwrap();
            let real = plan_with(&spec, &all, &[]);
            // Each compares something: its arms differ in mechanism, flags or budget.
            let differ = |p: &Plan, spec: &Spec| {
                let arms: Vec<_> = p
                    .series
                    .iter()
                    .filter(|s| s.label != POSITIVE_CONTROL)
                    .map(|s| (&s.mechanism, &s.flags, spec.series_budget(&s.label)))
                    .collect();
                arms.windows(2).any(|w| w[0] != w[1])
            };
            assert!(differ(&real, &spec), "{name}: nothing to compare");
            spec.make_placebo();
            assert_eq!(spec.name, format!("{name}-placebo"));
            let p = plan_with(&spec, &all, &[]);
            assert!(!differ(&p, &spec), "{name}: {:?}", p.series);
            assert_eq!(p.series.len() - real.series.len(), {
                usize::from(spec.idle.iter().any(|&i| i > 0))
            });
            // Only the positive control holds idle connections.
            for s in &p.series {
                assert_eq!(
                    spec.holds_idle(&s.label),
                    s.label == POSITIVE_CONTROL,
                    "{name}"
                );
            }
            // The points run with the placebo's flags (`point_series` reads `run_flags`).
            for s in p.series.iter().filter(|s| s.label != POSITIVE_CONTROL) {
                assert_eq!(spec.run_flags(&s.label), s.flags, "{name}: {}", s.label);
            }
            // The findings still compare the conditions the labels name.
            for r in &real.series {
                let ran = p.series.iter().find(|s| s.label == r.label).unwrap();
                let named = spec.labelled(ran);
                assert_eq!(
                    (&named.mechanism, &named.flags),
                    (&r.mechanism, &r.flags),
                    "{name}"
                );
            }
        }
    }
    /// The proxy paper's figure experiments plan what their comments say: the series (mechanism
    /// and forwarding mode), idle counts, rates, trials and family, and the points and minutes
    /// their comments give, which `evlab run --list` estimates (each at most 15 minutes).
    #[test]
    fn the_proxy_figure_experiments_plan_what_their_comments_say() {
        use evlab_reason::model::spec::Family;
        let all = support(&["select", "poll", "epoll-et", "uring-poll", "uring"]);
        // name, series as "mechanism mode", idle counts, rates, trials × duration.
        type Want = (
            &'static str,
            &'static [&'static str],
            &'static [usize],
            &'static [f64],
        );
        let cases: [Want; 4] = [
            (
                "fig-proxy-combined",
                &[
                    "select copy",
                    "select splice-keep",
                    "uring-poll copy",
                    "uring-poll splice-keep",
                    "uring-poll splice-release",
                ],
                &[0, 10000],
                &[100.0],
            ),
            (
                "fig-proxy-rt",
                &[
                    "select copy",
                    "select splice-keep",
                    "select splice-release",
                    "epoll-et copy",
                    "uring-poll copy",
                    "uring-poll splice-keep",
                    "uring-poll splice-release",
                ],
                &[0, 1000, 10000],
                &[100.0],
            ),
            (
                "fig-proxy-rate",
                &["select copy", "select splice", "select splice-release"],
                &[0],
                &[1000.0, 2000.0, 3000.0, 4000.0, 5000.0],
            ),
            (
                "fig-proxy-conns",
                &[
                    "select copy",
                    "poll copy",
                    "epoll-et copy",
                    "uring-poll copy",
                ],
                &[250, 1000, 2500, 5000, 10000],
                &[100.0],
            ),
        ];
        for (name, series, idle, rates) in cases {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../experiments")
                .join(format!("{name}.toml"));
            let text = std::fs::read_to_string(&path).unwrap();
            let spec = Spec::parse(&text, name).unwrap();
            assert_eq!(spec.family(), Family::Proxy, "{name}");
            assert!(spec.proxy.is_some(), "{name}");
            let p = plan_with(&spec, &all, &[]);
            assert!(p.skipped.is_empty(), "{name}: {:?}", p.skipped);
            let got: Vec<String> = p
                .series
                .iter()
                .map(|s| {
                    let mode = s.flags.windows(2).find(|w| w[0] == "--forward");
                    format!("{} {}", s.mechanism, mode.map_or("copy", |w| w[1].as_str()))
                })
                .collect();
            assert_eq!(got, series, "{name}");
            // Each series is labelled by its mechanism and mode, as the findings name it.
            let labels: Vec<&str> = p.series.iter().map(|s| s.label.as_str()).collect();
            assert_eq!(labels, series, "{name}");
            assert_eq!(spec.idle, idle, "{name}");
            assert_eq!(spec.rates.fixed(), rates, "{name}");
            assert_eq!(spec.trials, 3, "{name}: every rule needs 3 trials");
            let e = crate::run::estimate::estimate(&spec, p.series.len(), spec.duration_s);
            let n = series.len() * idle.len() * rates.len() * 3;
            assert_eq!(e.points, crate::run::estimate::Count::Exact(n), "{name}");
            let minutes = (e.seconds / 60.0).round() as usize;
            assert!(minutes <= 15, "{name}: {minutes} minutes");
            let said = format!("{n} points, about {minutes} minutes");
            let flat = text.replace("\n# ", " ");
            assert!(
                flat.contains(&said),
                "{name}: its comment should say `{said}`"
            );
        }
    }
}

/// Descriptors a process needs beyond its idle connections and the load's: its own files
/// (listener, poller, stats, documents), with room to spare.
const FD_MARGIN: u64 = 200;

/// The load's connections open at once, where the experiment does not fix them
/// (`active_conns`): an open-loop load past the server's capacity holds hundreds.
const OPEN_LOOP_CONNS: u64 = 1_000;

/// The descriptors the server and the idle holder each need for `idle` idle connections: those,
/// the load's connections and a margin.
pub fn descriptors_for(spec: &Spec, idle: usize) -> u64 {
    idle as u64 + spec.active_conns.unwrap_or(OPEN_LOOP_CONNS) + FD_MARGIN
}

/// Leaves out the idle counts that do not fit `limit` descriptors per process (the server and
/// the idle holder each hold one per idle connection, plus the load's and a margin); returns
/// what was left out, with the limit and how to raise it (`root`: whether this is root, who
/// could not raise it either). `evlab run` gives its children 65,536 where it may raise the
/// limit that far, else they keep this process's.
pub fn fit_idle_to_limit(spec: &mut Spec, limit: u64, root: bool) -> Vec<SkippedSeries> {
    let need = |n: usize| descriptors_for(spec, n);
    let how = if root {
        "root here may not raise it either (no CAP_SYS_RESOURCE: a container's capabilities), \
         so the machine's own limit must be raised where it is set (the container's or \
         systemd's LimitNOFILE), up to fs.nr_open"
            .to_string()
    } else {
        "raise the hard limit (as root: `ulimit -Hn 65536` in the shell that runs evlab, or a \
         `nofile` line in /etc/security/limits.conf), up to fs.nr_open; as root evlab run \
         raises it to 65,536 itself"
            .to_string()
    };
    let (fit, over): (Vec<usize>, Vec<usize>) = spec.idle.iter().partition(|&&n| need(n) <= limit);
    let left = over
        .iter()
        .map(|&n| SkippedSeries {
            series: format!(
                "{} idle connections",
                evlab_reason::model::text::thousands(n as f64)
            ),
            reason: format!(
                "need {} descriptors in the server and in the idle holder, and the limit \
                 evlab run's children get here is {limit} (`ulimit -Hn`): {how}",
                evlab_reason::model::text::thousands(need(n) as f64)
            ),
        })
        .collect();
    spec.idle = fit;
    left
}

/// The descriptor limit `evlab run`'s children get: 65,536 where it may raise it (as root),
/// else this process's hard limit.
pub fn child_fd_limit() -> u64 {
    let raised = procs::child_nofile_if_raisable() as u64;
    let hard = evlab_sys::nofile_limit().map_or(0, |l| l.1);
    raised.max(hard)
}

#[cfg(test)]
mod fd_tests {
    use super::*;

    #[test]
    fn idle_counts_over_the_descriptor_limit_are_left_out_saying_how_to_raise_it() {
        let mut spec = Spec::parse(
            "name = \"d\"\ndescription = \"d\"\nmechanisms = [\"poll\"]\nrates = [100]\n\
             active_conns = 100\nidle = [0, 10000, 19000, 60000]\n",
            "d.toml",
        )
        .unwrap();
        let left = fit_idle_to_limit(&mut spec.clone(), 65_536, false);
        assert!(left.is_empty(), "{left:?}");
        let as_root = fit_idle_to_limit(&mut spec.clone(), 20_000, true);
        assert!(
            as_root[0].reason.contains("no CAP_SYS_RESOURCE"),
            "{as_root:?}"
        );
        let left = fit_idle_to_limit(&mut spec, 20_000, false);
        // 19,000 dead connections, 100 active and the margin fit 20,000; 60,000 do not.
        assert_eq!(spec.idle, [0, 10000, 19000]);
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].series, "60,000 idle connections");
        assert!(
            left[0].reason.starts_with("need 60,300 descriptors")
                && left[0].reason.contains("children get here is 20000")
                && left[0].reason.contains("/etc/security/limits.conf"),
            "{}",
            left[0].reason
        );
    }
}
