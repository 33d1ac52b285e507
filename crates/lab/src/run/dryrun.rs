//! `evlab run NAME --plan`: every point and capacity search a run of this machine would make,
//! in the order it would make them, each with the argv of every process it would start, built
//! by the functions the run starts them with (`point::server_argv`, `idle_argv`, `load_argv`,
//! `origin_argv`); nothing is started or measured. What only the run can know is a
//! placeholder: `{scratch}`, `{port}`, `{origin}`, `{rate}`, `{conns}`, `{step}`
//! ([`PLACEHOLDERS`]); [`fits`] matches a recorded argv against its template.

use std::net::SocketAddr;
use std::path::Path;

use serde_json::{json, Value};

use crate::run::plan::{self, Plan, RunOptions};
use crate::run::point::{self, LoadAsk, PointCtx};
use crate::run::sweep;
use evlab_reason::model::knee::SAMPLE_S;
use evlab_reason::model::results::SkippedSeries;
use evlab_reason::model::sequential::{Rule, SequentialSpec};
use evlab_reason::model::spec::{Budget, Series, ServerKind, Workload};
use evlab_reason::model::text::{num, shell_line};
use evlab_reason::LabError;

/// The placeholders of a plan's commands, and what the run puts there.
pub const PLACEHOLDERS: [(&str, &str); 6] = [
    (
        "{scratch}",
        "the run's scratch directory (removed when it ends)",
    ),
    (
        "{port}",
        "the server's port (it listens on port 0 and says which)",
    ),
    ("{origin}", "the origin's address, likewise"),
    (
        "{rate}",
        "the rate, set at run time (calibrated, or a search's step)",
    ),
    ("{conns}", "the connections of that rate over the duration"),
    ("{step}", "the number of the search's step"),
];

/// The server port and the origin address a plan is built with, made placeholders after:
/// ports below 1024 that no ephemeral port can be.
const PLAN_PORT: u16 = 1;
const PLAN_ORIGIN: &str = "127.0.0.1:2";

/// One point or capacity search of the plan.
pub struct Planned {
    /// `point` or `capacity search`.
    pub kind: &'static str,
    pub series: String,
    pub trial: u32,
    pub idle: usize,
    /// The figure's x value: the swept flag's value, the series' object size, the rate, or
    /// (calibrated or searched) what the rate will be.
    pub x: Value,
    /// The server's CPU budget, a share of one CPU (`"auto"`: calibrated); null: none.
    pub budget: Value,
    /// Every process's argv, in start order.
    pub commands: Vec<Vec<String>>,
}

/// What `--plan` prints.
pub struct DryRun {
    pub experiment: String,
    pub placebo: bool,
    pub order_seed: u64,
    /// Whether the run calibrates first (its rates or budget depend on this machine).
    pub calibrates: bool,
    pub skipped: Vec<SkippedSeries>,
    pub points: Vec<Planned>,
    /// With `[sequential]`: the rule that decides, look by look, whether blocks after the
    /// first run (`points` are the first block's).
    pub sequential: Option<SequentialSpec>,
}

/// The plan of `opts`' run: its series on this machine (those it cannot run skipped, saying
/// why), its legs in the order `order_seed` draws, and each point's and search's commands.
pub fn dry_run(mut opts: RunOptions) -> Result<DryRun, LabError> {
    let mut skipped = plan::fit_idle_to_limit(
        &mut opts.spec,
        plan::child_fd_limit(),
        evlab_sys::geteuid() == 0,
    );
    let order_seed = *opts
        .spec
        .order_seed
        .get_or_insert_with(sweep::draw_order_seed);
    let Plan {
        series,
        skipped: more,
    } = plan::plan(&opts.evlab, &opts.spec);
    skipped.extend(more);
    // A scratch directory for real, as the peers' configs are written into it, and gone at
    // the end; in the commands it reads `{scratch}`.
    let scratch = std::env::temp_dir().join(format!("evlab-plan-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let points = planned_points(&opts, &series, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    let spec = &opts.spec;
    Ok(DryRun {
        experiment: spec.name.clone(),
        placebo: spec.placebo,
        order_seed,
        calibrates: spec.rates.is_auto() || matches!(spec.server_cpu_budget, Some(Budget::Auto)),
        skipped,
        points: points?,
        sequential: spec.sequential.clone(),
    })
}

fn planned_points(
    opts: &RunOptions,
    series: &[Series],
    scratch: &Path,
) -> Result<Vec<Planned>, LabError> {
    let spec = &opts.spec;
    let (server_cpus, client_cpus) =
        sweep::pinned_cpus(spec, &crate::run::progress::Progress::new(true));
    let fileset = match spec.workload {
        Workload::Specweb => Some(scratch.join("fileset")),
        Workload::Polymix => Some(scratch.join("polymix")),
        _ => None,
    };
    let ctx = PointCtx {
        opts,
        scratch,
        fileset: fileset.as_deref(),
        out: scratch,
        server_cpus: &server_cpus,
        client_cpus: &client_cpus,
        duration: opts.duration_override.unwrap_or(spec.duration_s),
        budget: None,
        cgroup: None,
    };
    // The rates of each leg: fixed, a rate search's candidates, or calibrated (unknown here).
    let rates: Vec<Option<f64>> = match (&spec.rate_search, &spec.rates) {
        (Some(rs), _) => (0..crate::run::estimate::search_rates(rs))
            .map(|i| Some(rs.start + rs.step * i as f64))
            .collect(),
        (None, r) if r.is_auto() => spec.auto_rates.iter().map(|_| None).collect(),
        (None, r) => r.fixed().iter().map(|&x| Some(x)).collect(),
    };
    let scratch_text = scratch.display().to_string();
    let template = |argv: Vec<String>, rate: Option<f64>| templated(argv, &scratch_text, rate);
    let mut out = Vec::new();
    let (mut index, mut nknee) = (0, 0);
    for (trial, idle, s, swept) in sweep::sweep_order(spec, series) {
        let budget = match (spec.series_budget(&s.label), spec.server_cpu_budget) {
            (Some(b), _) | (None, Some(Budget::Share(b))) => json!(b),
            (None, Some(Budget::Auto)) => json!("auto"),
            (None, None) => Value::Null,
        };
        let (own_set, object_size) = point::own_fileset(&ctx, &s.label);
        for (i, rate) in rates.iter().enumerate() {
            index += 1;
            let p = point::new_point(&ctx, index, s, swept, idle, rate.unwrap_or(0.0), trial);
            let run_series = point::point_series(spec, &p);
            let pctx = PointCtx {
                fileset: own_set.as_deref().or(ctx.fileset),
                ..ctx
            };
            let pdir = scratch.join(format!("point-{index}"));
            let mut commands = server_commands(&pctx, &run_series, idle, &pdir)?;
            let docroot = point::docroot_path(&pctx, &pdir);
            let ask = |secs: f64, tag: &'static str| LoadAsk {
                port: PLAN_PORT,
                docroot: &docroot,
                pdir: &pdir,
                rate: rate.unwrap_or(0.0),
                secs,
                timeout_s: spec.timeout_s,
                sample_interval_s: 1.0,
                tag,
            };
            if spec.warmup_s > 0.0 {
                let (argv, ..) = point::load_argv(&pctx, &ask(spec.warmup_s, "warmup"));
                commands.push(pinned(client_cpus.as_slice(), argv));
            }
            let (argv, ..) = point::load_argv(&pctx, &ask(ctx.duration, "run"));
            commands.push(pinned(client_cpus.as_slice(), argv));
            let x = match (swept, own_set.is_some(), rate) {
                (Some(v), ..) => json!(v),
                (None, true, _) => json!(object_size),
                (None, false, Some(r)) => json!(r),
                (None, false, None) => json!(format!("{} × capacity", num(spec.auto_rates[i], 2))),
            };
            out.push(Planned {
                kind: "point",
                series: s.label.clone(),
                trial,
                idle,
                x,
                budget: budget.clone(),
                commands: commands.into_iter().map(|c| template(c, *rate)).collect(),
            });
        }
        if let Some(ks) = &spec.knee {
            nknee += 1;
            let pdir = scratch.join(format!("knee-{nknee}"));
            let mut commands = server_commands(&ctx, s, idle, &pdir)?;
            let docroot = point::docroot_path(&ctx, &pdir);
            let (argv, ..) = point::load_argv(
                &ctx,
                &LoadAsk {
                    port: PLAN_PORT,
                    docroot: &docroot,
                    pdir: &pdir,
                    rate: 0.0,
                    secs: ks.step_s,
                    timeout_s: ks.timeout_s,
                    sample_interval_s: SAMPLE_S,
                    tag: "k{step}",
                },
            );
            commands.push(pinned(client_cpus.as_slice(), argv));
            out.push(Planned {
                kind: "capacity search",
                series: s.label.clone(),
                trial,
                idle,
                x: json!("capacity"),
                budget: budget.clone(),
                commands: commands.into_iter().map(|c| template(c, None)).collect(),
            });
        }
    }
    Ok(out)
}

/// The argv of the processes `point::start_server` starts for series `s` (origin, server,
/// idle holder), pinned as it pins them.
fn server_commands(
    ctx: &PointCtx,
    s: &Series,
    idle: usize,
    pdir: &Path,
) -> Result<Vec<Vec<String>>, LabError> {
    let spec = &ctx.opts.spec;
    let docroot = point::docroot_path(ctx, pdir);
    let mut v = Vec::new();
    let origin: Option<SocketAddr> = match &spec.proxy {
        Some(px) => {
            let (argv, cpus) = point::origin_argv(ctx, px, &docroot);
            v.push(pinned(&cpus, argv));
            Some(PLAN_ORIGIN.parse().expect("an address"))
        }
        None => None,
    };
    let port = if s.kind == ServerKind::Evlab {
        0
    } else {
        PLAN_PORT
    };
    let argv = point::server_argv(ctx, s, &docroot, pdir, port, origin)?;
    v.push(pinned(ctx.server_cpus, argv));
    if idle > 0 && spec.holds_idle(&s.label) {
        let argv = point::idle_argv(ctx, idle, "{port}");
        v.push(pinned(point::idle_cpus(ctx), argv));
    }
    Ok(v)
}

fn pinned(cpus: &[usize], argv: Vec<String>) -> Vec<String> {
    crate::run::procs::pinned_argv(cpus, &argv)
}

/// An argv built with the plan's stand-ins, with placeholders put in their place: the scratch
/// directory, the port after `--port`, the origin's address; and with no known rate, the
/// rate after `--rate` and the connections after `--num-conns` (unless the spec fixes them).
fn templated(argv: Vec<String>, scratch: &str, rate: Option<f64>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(argv.len());
    for a in argv {
        let prev = out.last().map(String::as_str);
        let a = match prev {
            Some("--port") if a == PLAN_PORT.to_string() => "{port}".to_string(),
            Some("--rate") if rate.is_none() => "{rate}".to_string(),
            Some("--num-conns") if rate.is_none() => "{conns}".to_string(),
            _ => a
                .replace(scratch, "{scratch}")
                .replace(PLAN_ORIGIN, "{origin}"),
        };
        out.push(a);
    }
    out
}

/// Whether `got`, an argv a run recorded, is what `template` (a plan's) says: as many words,
/// each equal but for its placeholders, each of which stands for a non-empty stretch.
pub fn fits(template: &[String], got: &[String]) -> bool {
    template.len() == got.len() && template.iter().zip(got).all(|(t, g)| word_fits(t, g))
}

fn word_fits(t: &str, g: &str) -> bool {
    // Literal stretches between placeholders, each found in order after the one before.
    let mut parts: Vec<&str> = Vec::new();
    let mut rest = t;
    while let Some(open) = rest.find('{') {
        match rest[open..].find('}') {
            Some(close)
                if PLACEHOLDERS
                    .iter()
                    .any(|(p, _)| *p == &rest[open..=open + close]) =>
            {
                parts.push(&rest[..open]);
                rest = &rest[open + close + 1..];
            }
            _ => break,
        }
    }
    if parts.is_empty() {
        return t == g;
    }
    parts.push(rest);
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !g.starts_with(first) || !g[first.len()..].ends_with(last) {
        return false;
    }
    let mut at = first.len();
    let end = g.len() - last.len();
    for mid in &parts[1..parts.len() - 1] {
        // Each placeholder stands for at least one character.
        match g.get(at + 1..end).and_then(|h| h.find(mid)) {
            Some(i) => at = at + 1 + i + mid.len(),
            None => return false,
        }
    }
    end > at
}

impl DryRun {
    pub fn to_json(&self) -> Value {
        json!({
            "experiment": self.experiment,
            "placebo": self.placebo,
            "order_seed": self.order_seed,
            "calibrates": self.calibrates,
            "placeholders": PLACEHOLDERS.iter().map(|(p, what)| json!({"name": p, "means": what})).collect::<Vec<_>>(),
            "sequential": self.sequential.as_ref().map(|q| json!({
                "first": q.first,
                "block": q.block,
                "most": q.most,
                "budget_s": q.budget_s,
                "rule": Rule::of(q).words(),
            })),
            "skipped": self.skipped.iter().map(|s| json!({"series": s.series, "reason": s.reason})).collect::<Vec<_>>(),
            "points": self.points.iter().map(|p| json!({
                "kind": p.kind,
                "series": p.series,
                "trial": p.trial,
                "idle": p.idle,
                "x": p.x,
                "server_cpu_budget": p.budget,
                "commands": p.commands,
            })).collect::<Vec<_>>(),
        })
    }

    /// The plan as text: a head saying what it is and how to run exactly it, then each point
    /// and search with its commands as a shell would take them.
    pub fn to_text(&self, evlab: &Path) -> String {
        let mut s = String::new();
        let npoints = self.points.iter().filter(|p| p.kind == "point").count();
        let nsearch = self.points.len() - npoints;
        s.push_str(&format!(
            "evlab run {}{} --plan: {npoints} points and {nsearch} capacity searches, in this order \
             (order seed {}: `--order-seed {}` runs exactly this plan); nothing is measured.\n",
            self.experiment.trim_end_matches("-placebo"),
            if self.placebo { " --placebo" } else { "" },
            self.order_seed,
            self.order_seed,
        ));
        if let Some(q) = &self.sequential {
            s.push_str(&format!(
                "These are trials 1–{}, the sequential rule's first block. Later blocks are \
                 conditional: after each block a look at the findings decides whether the next \
                 runs ({}; docs/methodology.md, \"Sequential trials\"); a later trial runs as \
                 trial 1 does, its arms in the order this seed draws for it.\n",
                q.first,
                Rule::of(q).words()
            ));
        }
        if self.calibrates {
            s.push_str(
                "It calibrates first (the client's ceiling, then each series' capacity): its \
                 rates or budget are set then.\n",
            );
        }
        for sk in &self.skipped {
            s.push_str(&format!("Skipped here: {}: {}\n", sk.series, sk.reason));
        }
        s.push_str(&format!(
            "`evlab` below is {}. Placeholders:\n",
            evlab.display()
        ));
        for (p, what) in PLACEHOLDERS {
            s.push_str(&format!("  {p:<10} {what}\n"));
        }
        let bin = evlab.display().to_string();
        for (i, p) in self.points.iter().enumerate() {
            let x = match &p.x {
                Value::String(t) => t.clone(),
                other => other.to_string(),
            };
            let budget = match &p.budget {
                Value::Number(b) => format!(
                    ", server budget {}% of a CPU",
                    num(b.as_f64().unwrap_or(0.0) * 100.0, 1)
                ),
                Value::String(_) => ", server budget calibrated".into(),
                _ => String::new(),
            };
            s.push_str(&format!(
                "\n{:>3}. trial {}: {}, {} idle, x = {x}{budget} ({})\n",
                i + 1,
                p.trial,
                p.series,
                p.idle,
                p.kind
            ));
            for c in &p.commands {
                let line = shell_line(c).replace(&shell_line(std::slice::from_ref(&bin)), "evlab");
                s.push_str(&format!("     {line}\n"));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn a_template_fits_what_its_placeholders_stand_for_and_nothing_else() {
        let t = v(&[
            "load",
            "--port",
            "{port}",
            "--json",
            "{scratch}/point-3/load-run.json",
        ]);
        assert!(fits(
            &t,
            &v(&[
                "load",
                "--port",
                "40713",
                "--json",
                "/tmp/evlab-run-1-2/point-3/load-run.json"
            ])
        ));
        // Another point's file, another flag, a missing word, an empty stretch: no.
        assert!(!fits(
            &t,
            &v(&[
                "load",
                "--port",
                "40713",
                "--json",
                "/tmp/x/point-4/load-run.json"
            ])
        ));
        assert!(!fits(
            &t,
            &v(&[
                "load",
                "--rate",
                "40713",
                "--json",
                "/tmp/x/point-3/load-run.json"
            ])
        ));
        assert!(!fits(&t, &v(&["load", "--port", "40713", "--json"])));
        assert!(!fits(
            &t,
            &v(&[
                "load",
                "--port",
                "",
                "--json",
                "/tmp/x/point-3/load-run.json"
            ])
        ));
        assert!(word_fits(
            "{scratch}/knee-1/load-k{step}.json",
            "/tmp/a/knee-1/load-k12.json"
        ));
        assert!(!word_fits(
            "{scratch}/knee-1/load-k{step}.json",
            "/tmp/a/knee-1/load-k.json"
        ));
        // Braces that are no placeholder are words like any other.
        assert!(word_fits("{x}", "{x}"));
        assert!(!word_fits("{x}", "y"));
    }

    #[test]
    fn the_stand_ins_become_placeholders() {
        let got = templated(
            v(&[
                "evlab",
                "load",
                "--port",
                "1",
                "--rate",
                "0",
                "--num-conns",
                "1",
                "--num-calls",
                "1",
                "--json",
                "/tmp/s/point-1/x.json",
                "--origin",
                "127.0.0.1:2",
            ]),
            "/tmp/s",
            None,
        );
        assert_eq!(
            got.join(" "),
            "evlab load --port {port} --rate {rate} --num-conns {conns} --num-calls 1 --json \
             {scratch}/point-1/x.json --origin {origin}"
        );
        let fixed = templated(
            v(&["--rate", "300", "--num-conns", "60"]),
            "/tmp/s",
            Some(300.0),
        );
        assert_eq!(fixed.join(" "), "--rate 300 --num-conns 60");
    }
}
