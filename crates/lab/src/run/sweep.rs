//! The sweep: for every trial, idle count, series and rate, one point — a fresh server pinned to
//! its CPU, idle holders, one measured `evlab load` run, the server's counters and CPU time —
//! then everything stopped and checked gone. A failed point is recorded and the sweep goes on;
//! Ctrl-C ends the current point and the results so far are written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::model::knee::{Knee, KneeSpec, FAR_WIDENING, NEAR_WIDENING};
use crate::model::results::{self, Status, Summary};
use crate::model::spec::{Budget, Series, Spec, Workload};
use crate::render::report;
use crate::run::calibrate;
use crate::run::cgroup::{CpuBudget, Parent};
use crate::run::estimate::{self, Forecast};
use crate::run::knee::{self, Bounds, Start};
use crate::run::machine;
use crate::run::plan::{new_summary, plan, Plan, RunOptions};
use crate::run::point::{make_fileset, polymix_dir, polymix_fileset_argv, run_point, PointCtx};
use crate::run::procs::{self, interrupted};
use crate::run::progress::Progress;
use crate::LabError;

fn stamp() -> String {
    results::utc(results::now_secs())
        .replace(['-', ':'], "")
        .replace('T', "-")
        .trim_end_matches('Z')
        .to_string()
}

/// A scratch directory for docroots and peer configs, removed at the end of the run.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, LabError> {
        let base = std::env::temp_dir().join(format!(
            "evlab-run-{}-{}",
            std::process::id(),
            results::now_secs()
        ));
        std::fs::create_dir_all(&base)?;
        Ok(Scratch(base))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the experiment; returns the results directory and what was measured.
pub fn run(opts: RunOptions) -> Result<(PathBuf, Summary), LabError> {
    if let Some(m) = opts.spec.micro.clone() {
        return crate::run::micro::run(&opts, &m, stamp());
    }
    let t0 = Instant::now();
    let spec = &opts.spec;
    // A budget needs a group this user may write: found and tried before anything is made or
    // measured, so that a run that cannot have one stops at once, saying what to do.
    let cgroup = match spec.server_cpu_budget {
        Some(_) => Some(Parent::for_run(opts.cgroup.as_deref()).map_err(LabError::Io)?),
        None => None,
    };
    let out = match &opts.out_dir {
        Some(d) => d.clone(),
        None => opts.results_root.join(&spec.name).join(stamp()),
    };
    std::fs::create_dir_all(&out)
        .map_err(|e| LabError::Io(format!("cannot create {}: {e}", out.display())))?;
    let progress = Progress::new(opts.quiet);
    let Plan { series, skipped } = plan(&opts.evlab, &opts.spec);
    for s in &skipped {
        progress.warn(&format!("evlab run: skipping {}: {}", s.series, s.reason));
    }
    let mut summary = new_summary(&opts, &series, skipped);
    // Before anything is measured: is the machine quiet? Recorded either way.
    let quiet = machine::quiet_check(1.0);
    // A note, not a warning: `--quiet` keeps its promise of one line per point (the report
    // and summary.json record it either way).
    if let Some(why) = quiet.problem() {
        progress.note(&format!(
            "evlab run: the machine is not quiet ({why}); its points may be flagged and its \
             intervals wide"
        ));
    }
    summary.quiet = Some(quiet);
    let (server_cpus, client_cpus) = pinned_cpus(spec, &progress);
    let scratch = Scratch::new()?;
    let fileset = make_filesets(&opts, &scratch.0, &progress)?;
    let base = PointCtx {
        opts: &opts,
        scratch: &scratch.0,
        fileset: fileset.as_deref(),
        out: &out,
        server_cpus: &server_cpus,
        client_cpus: &client_cpus,
        duration: opts.duration_override.unwrap_or(spec.duration_s),
        budget: None,
        cgroup: cgroup.as_ref(),
    };
    let budget = calibrate_or_budget(&base, &series, &mut summary, &progress)?;
    let ctx = PointCtx {
        budget: budget.as_ref(),
        ..base
    };
    sweep(&ctx, &series, &mut summary, t0, &progress)?;
    summary.finished = Some(results::utc(results::now_secs()));
    summary.wall_s = t0.elapsed().as_secs_f64();
    write_tables(&summary, &out)?;
    report::write(&summary, &out)?;
    Ok((out, summary))
}

/// The server's and the clients' CPUs, those this machine has; a warning when some are
/// missing, as those processes then run unpinned.
fn pinned_cpus(spec: &Spec, progress: &Progress) -> (Vec<usize>, Vec<usize>) {
    let ncpu = procs::online_cpus();
    let pin =
        |cpus: &[usize]| -> Vec<usize> { cpus.iter().copied().filter(|&c| c < ncpu).collect() };
    let server_cpus = pin(&[spec.server_cpu]);
    let client_cpus = pin(&spec.client_cpus);
    if server_cpus.is_empty() || client_cpus.is_empty() {
        progress.warn(&format!(
            "evlab run: warning: this machine has {ncpu} CPU(s); server_cpu {} / client_cpus {:?} \
             are not all available, so those processes are not pinned",
            spec.server_cpu, spec.client_cpus
        ));
    }
    (server_cpus, client_cpus)
}

/// The run's file set in `scratch`, for the workloads that read one; None for the others.
fn make_filesets(
    opts: &RunOptions,
    scratch: &Path,
    progress: &Progress,
) -> Result<Option<PathBuf>, LabError> {
    let spec = &opts.spec;
    if spec.workload == Workload::Specweb {
        // One file set per run: it is read-only, and the server caches what it serves.
        let dir = scratch.join("fileset");
        let argv = vec![
            opts.evlab.display().to_string(),
            "fileset".into(),
            dir.display().to_string(),
            "--dirs".into(),
            spec.fileset_dirs.to_string(),
        ];
        make_fileset(&argv, progress)?;
        Ok(Some(dir))
    } else if spec.workload == Workload::Polymix {
        let dir = scratch.join("polymix");
        let argv = polymix_fileset_argv(&opts.evlab, spec, &spec.object_size, &dir);
        make_fileset(&argv, progress)?;
        // What the lab waits on before each point: `GET /one`, through the proxy.
        std::fs::write(dir.join("one"), b"a")?;
        // Series with their own object size get their own file set.
        for size in spec.series.iter().filter_map(|x| x.object_size.as_ref()) {
            let d = polymix_dir(&dir, size);
            if d.exists() {
                continue;
            }
            let argv = polymix_fileset_argv(&opts.evlab, spec, size, &d);
            make_fileset(&argv, progress)?;
            std::fs::write(d.join("one"), b"a")?;
        }
        Ok(Some(dir))
    } else {
        Ok(None)
    }
}

/// Calibrates, when the experiment's rates or budget depend on this machine (the calibration
/// goes into the summary, written at once); returns the budget the sweep's servers run in.
fn calibrate_or_budget(
    base: &PointCtx,
    series: &[Series],
    summary: &mut Summary,
    progress: &Progress,
) -> Result<Option<CpuBudget>, LabError> {
    let spec = &base.opts.spec;
    let mut budget = None;
    let needs_calibration =
        spec.rates.is_auto() || matches!(spec.server_cpu_budget, Some(Budget::Auto));
    if needs_calibration && !series.is_empty() {
        progress.note("evlab run: calibrating: the client's ceiling, then each series' capacity");
        // A series on its own budget (a control) is not probed: its capacity would move the
        // median the rates are chosen from.
        let probed: Vec<Series> = series
            .iter()
            .filter(|s| spec.series_budget(&s.label).is_none())
            .cloned()
            .collect();
        let (cal, b) = calibrate::run(base, &probed, progress)?;
        budget = b;
        summary.calibration = Some(cal);
        write_tables(summary, base.out)?;
    } else if let (Some(Budget::Share(b)), Some(parent)) = (spec.server_cpu_budget, base.cgroup) {
        budget = Some(
            CpuBudget::new_in(parent, b)
                .map_err(|e| LabError::Io(format!("server_cpu_budget = {b}: {e}")))?,
        );
    }
    Ok(budget)
}

/// Every point of the sweep, in order, each recorded (summary, points.csv, samples.csv) as
/// soon as it is measured, so that an interrupted run keeps what it did; stops early on
/// Ctrl-C, and a rate search stops a series' rates at its knee.
fn sweep(
    ctx: &PointCtx,
    series: &[Series],
    summary: &mut Summary,
    t0: Instant,
    progress: &Progress,
) -> Result<(), LabError> {
    let spec = &ctx.opts.spec;
    let fixed: Vec<f64> = match &summary.calibration {
        Some(c) if spec.rates.is_auto() => c.rates.clone(),
        _ => spec.rates.fixed().to_vec(),
    };
    let search_rates = spec.rate_search.as_ref().map(estimate::search_rates);
    let legs = sweep_order(spec, series);
    let capacity = summary
        .calibration
        .iter()
        .flat_map(|c| &c.capacities)
        .map(|c| (c.series.clone(), c.replies_per_s))
        .collect();
    let mut forecast = Forecast::new(
        spec,
        ctx.duration,
        &legs
            .iter()
            .map(|(t, i, s, v)| (leg_label(spec, s, *v), *i, *t))
            .collect::<Vec<_>>(),
        fixed.len(),
        capacity,
    );
    let samples_path = ctx.out.join("samples.csv");
    let mut samples_text = format!("{}\n", results::SAMPLES_HEADER);
    results::write_atomic(&samples_path, &samples_text)?;
    announce(
        ctx,
        series.len(),
        fixed.len(),
        search_rates,
        &forecast,
        progress,
    );

    // Series on their own budgets (the negative controls) each get a group of their own.
    let mut own_budgets: BTreeMap<String, CpuBudget> = BTreeMap::new();
    for s in series {
        if let Some(b) = spec.series_budget(&s.label) {
            let g = CpuBudget::new(b).map_err(|e| {
                LabError::Io(format!("series `{}`: cpu_budget = {b}: {e}", s.label))
            })?;
            own_budgets.insert(s.label.clone(), g);
        }
    }
    let mut index = 0;
    'all: for (leg, (trial, idle, s, swept)) in legs.iter().enumerate() {
        let (trial, idle, swept) = (*trial, *idle, *swept);
        let mut below = 0;
        let rates: Vec<f64> = match (&spec.rate_search, search_rates) {
            (Some(rs), Some(n)) => (0..n).map(|i| rs.start + rs.step * i as f64).collect(),
            _ => fixed.clone(),
        };
        for rate in rates {
            if interrupted() {
                summary.interrupted = true;
                break 'all;
            }
            index += 1;
            progress.start_point(
                &forecast,
                index,
                &format!(
                    "{} idle={idle} rate={rate}/s trial {trial}",
                    leg_label(spec, s, swept)
                ),
            );
            let own = own_budgets.get(&s.label);
            let pctx = PointCtx {
                budget: own.or(ctx.budget),
                ..*ctx
            };
            let p = run_point(&pctx, index, s, swept, idle, rate, trial);
            forecast.point_done(leg, rate, p.wall_s);
            if p.status == Status::Interrupted {
                summary.interrupted = true;
            }
            // Whether this point ends the series' search, decided before its line is printed,
            // so that the line counts the points as they now stand.
            let search_over = spec.rate_search.as_ref().is_some_and(|rs| {
                // A point that measured the client says nothing of the server: past the
                // client's limit the search for this series is over.
                let client_limited = p.flags.iter().any(|f| f.starts_with("client"));
                if !matches!(p.reply_rate(), Some(r) if r >= rs.below * rate) {
                    below += 1;
                }
                client_limited || below >= rs.past
            });
            if search_over {
                forecast.leg_over(leg);
            }
            progress.finish_point(&forecast, index, &p);
            samples_text.push_str(&results::samples_csv_rows(&p));
            summary.points.push(p);
            results::write_atomic(&samples_path, &samples_text)?;
            summary.wall_s = t0.elapsed().as_secs_f64();
            write_tables(summary, ctx.out)?;
            if summary.interrupted {
                break 'all;
            }
            if search_over {
                break;
            }
            if spec.pause_s > 0.0 {
                std::thread::sleep(Duration::from_secs_f64(spec.pause_s));
            }
        }
        forecast.leg_over(leg);
        if let Some(ks) = &spec.knee {
            if interrupted() {
                summary.interrupted = true;
                break 'all;
            }
            let pctx = PointCtx {
                budget: own_budgets.get(&s.label).or(ctx.budget),
                ..*ctx
            };
            let k = knee_leg(&pctx, ks, summary, (s, idle, trial), &fixed, progress);
            forecast.knee_done(leg, k.wall_s);
            summary.knees.push(k);
            summary.wall_s = t0.elapsed().as_secs_f64();
            write_tables(summary, ctx.out)?;
        }
    }
    Ok(())
}

/// One capacity search (`[knee]`) after a leg's rates: from an earlier trial's capacity of the
/// same series at the same idle count when there is one, else from calibration's (or the
/// highest fixed rate), between 1/16 of that and the client's clean ceiling.
fn knee_leg(
    ctx: &PointCtx,
    ks: &KneeSpec,
    summary: &Summary,
    (s, idle, trial): (&Series, usize, u32),
    fixed: &[f64],
    progress: &Progress,
) -> Knee {
    let earlier: Vec<f64> = summary
        .knees
        .iter()
        .filter(|k| k.series == s.label && k.idle == idle)
        .filter_map(|k| k.capacity(ks.resolution))
        .collect();
    let cal = summary.calibration.as_ref();
    let calibrated = cal.and_then(|c| {
        let caps: Vec<f64> = c
            .capacities
            .iter()
            .map(|x| x.replies_per_s)
            .filter(|x| *x > 0.0)
            .collect();
        c.capacities
            .iter()
            .find(|x| x.series == s.label && x.replies_per_s > 0.0)
            .map(|x| (x.replies_per_s, "calibration's capacity of the series"))
            .or_else(|| {
                crate::analysis::stats::Arm::of(&caps)
                    .map(|a| (a.mean, "calibration's mean capacity"))
            })
    });
    let top = fixed.iter().copied().reduce(f64::max).unwrap_or(1000.0);
    let start = if earlier.is_empty() {
        let (rate, from) = calibrated.unwrap_or((top, "the highest fixed rate"));
        Start {
            rate,
            from: from.into(),
            widening: FAR_WIDENING,
        }
    } else {
        let g = (earlier.iter().map(|x| x.ln()).sum::<f64>() / earlier.len() as f64).exp();
        Start {
            rate: g,
            from: format!("the capacity of {} earlier trial(s)", earlier.len()),
            widening: NEAR_WIDENING,
        }
    };
    let bounds = Bounds {
        floor: (start.rate / 16.0).max(1.0),
        ceiling: cal
            .map(|c| c.client_clean)
            .filter(|c| *c > 0.0)
            .unwrap_or(2.0 * top),
    };
    let n = summary.knees.len() + 1;
    progress.note(&format!(
        "evlab run: knee {n}: {} idle={idle} trial {trial}, from {:.0}/s",
        s.label, start.rate
    ));
    let k = knee::search(ctx, ks, (s, idle, trial), start, &bounds, n);
    let got = match (k.capacity(ks.resolution), k.kept(), k.failed()) {
        (Some(c), Some(lo), Some(hi)) => format!("{c:.0}/s (kept {lo:.0}, not {hi:.0})"),
        _ => format!(
            "no capacity: {}",
            k.stopped.as_deref().unwrap_or("bracket not closed")
        ),
    };
    progress.note(&format!(
        "  knee {n}: {} idle={idle} trial {trial}: {got} in {} steps, {:.1} s",
        s.label,
        k.steps.len(),
        k.wall_s
    ));
    k
}

/// The run's opening line: its shape, its number of points, how long it should take, and
/// where its results go.
fn announce(
    ctx: &PointCtx,
    nseries: usize,
    nfixed: usize,
    search_rates: Option<usize>,
    forecast: &Forecast,
    progress: &Progress,
) {
    let spec = &ctx.opts.spec;
    let fixed_rates = spec.rate_search.is_none();
    let rates_words = match (&spec.rate_search, search_rates) {
        (Some(rs), Some(n)) => format!(
            "a rate search ({}/s up by {}/s, at most {n} rates; it stops at each series' knee)",
            rs.start, rs.step
        ),
        _ => format!("{nfixed} rates"),
    };
    progress.note(&format!(
        "evlab run: {} — {} series{} × {rates_words} × {} idle counts × {} trials, {} s per point{}: {}{} points{}, about {} (an estimate); results in {}",
        spec.name,
        nseries,
        spec.sweep
            .as_ref()
            .map(|sw| format!(" × {} {} values", sw.values.len(), sw.name()))
            .unwrap_or_default(),
        spec.idle.len(),
        spec.trials,
        ctx.duration,
        ctx.budget
            .map(|b| format!(", server budget {:.0}% of a CPU", b.share * 100.0))
            .unwrap_or_default(),
        if fixed_rates { "" } else { "~" },
        forecast.total().ceil(),
        if fixed_rates { String::new() } else { " expected".into() },
        estimate::hms(forecast.remaining_s()),
        ctx.out.display()
    ));
}

/// A leg of the sweep: trial, idle count, series, and the `[sweep]` flag's value (if any).
pub type SweepLeg<'a> = (u32, usize, &'a Series, Option<f64>);

/// The sweep's legs in the order they run: trial → idle count → swept value → series, each
/// trial visiting the series in a rotated order, so that a drift over the run (a neighbour on
/// the host, a warming cache) does not always favour the same series; at each swept value every
/// series runs before the next value, for the same reason. Each leg runs its series' rates.
pub fn sweep_order<'a>(spec: &Spec, series: &'a [Series]) -> Vec<SweepLeg<'a>> {
    let mut out = Vec::new();
    for trial in 1..=spec.trials {
        let rot = (trial as usize - 1) % series.len().max(1);
        for &idle in &spec.idle {
            for v in spec.sweep_values() {
                for s in series[rot..].iter().chain(&series[..rot]) {
                    if spec.series_runs_at(&s.label, idle) {
                        out.push((trial, idle, s, v));
                    }
                }
            }
        }
    }
    out
}

/// A leg's series as the progress line and the forecast name it: `shared workers=4`.
pub(crate) fn leg_label(spec: &Spec, s: &Series, swept: Option<f64>) -> String {
    match (&spec.sweep, swept) {
        (Some(sw), Some(v)) => format!(
            "{} {}={}",
            s.label,
            sw.name(),
            crate::model::spec::SweepSpec::arg(v)
        ),
        _ => s.label.clone(),
    }
}

fn write_tables(summary: &Summary, out: &Path) -> Result<(), LabError> {
    summary.write_json(out)?;
    results::write_atomic(
        &out.join("points.csv"),
        &results::points_csv(&summary.points),
    )
}
