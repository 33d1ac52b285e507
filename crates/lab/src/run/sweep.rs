//! The sweep: for every trial, idle count, series and rate, one point — a fresh server pinned to
//! its CPU, idle holders, one measured `evlab load` run, the server's counters and CPU time —
//! then everything stopped and checked gone. A failed point is recorded and the sweep goes on;
//! Ctrl-C ends the current point and the results so far are written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::run::calibrate;
use crate::run::cgroup::{CpuBudget, Parent};
use crate::run::estimate::{self, Forecast};
use crate::run::fileset::{make_fileset, polymix_dir, polymix_fileset_argv, specweb_fileset_argv};
use crate::run::knee;
use crate::run::looks;
use crate::run::machine;
use crate::run::plan::{new_summary, plan, Plan, RunOptions};
use crate::run::point::PointCtx;
use crate::run::procs::{self, interrupted};
use crate::run::progress::Progress;
use crate::run::remote::HostsRun;
use crate::run::remote_steps::On;
use evlab_reason::model::knee::{Knee, INTERRUPTED};
use evlab_reason::model::results::{self, PointResult, Resumption, Status, Summary};
use evlab_reason::model::spec::{Budget, Series, Spec, Workload};
use evlab_reason::render::report;
use evlab_reason::LabError;

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
pub fn run(mut opts: RunOptions) -> Result<(PathBuf, Summary), LabError> {
    if let Some(m) = opts.spec.micro.clone() {
        return crate::run::micro::run(&opts, &m, stamp());
    }
    let t0 = Instant::now();
    // On this machine, idle counts past the descriptor limit its children get are left out,
    // saying so (across hosts each remote process asks for 65,536 itself).
    let over_limit = match opts.hosts {
        None => crate::run::plan::fit_idle_to_limit(
            &mut opts.spec,
            crate::run::plan::child_fd_limit(),
            evlab_sys::geteuid() == 0,
        ),
        Some(_) => vec![],
    };
    if opts.spec.order_seed.is_none() {
        opts.spec.order_seed = Some(draw_order_seed());
    }
    if opts.spec.idle.is_empty() {
        return Err(LabError::Io(format!(
            "no idle count of `{}` fits the descriptor limit: {}",
            opts.spec.name,
            over_limit.first().map_or("", |s| s.reason.as_str())
        )));
    }
    let spec = &opts.spec;
    if let Some(why) =
        evlab_reason::model::hosts::needs_hosts(spec).filter(|_| opts.hosts.is_none())
    {
        return Err(LabError::Io(why));
    }
    // A budget needs a group this user may write: found and tried before anything is made or
    // measured, so that a run that cannot have one stops at once, saying what to do.
    // (Across hosts, the budget is a group on the server host, found by `HostsRun::prepare`.)
    let cgroup = match spec.server_cpu_budget {
        Some(_) if opts.hosts.is_none() => {
            Some(Parent::for_run(opts.cgroup.as_deref()).map_err(LabError::Io)?)
        }
        _ => None,
    };
    let out = match &opts.out_dir {
        Some(d) => d.clone(),
        None => opts.results_root.join(&spec.name).join(stamp()),
    };
    std::fs::create_dir_all(&out)
        .map_err(|e| LabError::Io(format!("cannot create {}: {e}", out.display())))?;
    let progress = Progress::new(opts.quiet);
    let mut hosts = match &opts.hosts {
        Some(h) => Some(HostsRun::prepare(h.clone(), spec, &opts.evlab, &progress)?),
        None => None,
    };
    let Plan {
        series,
        mut skipped,
    } = match &hosts {
        Some(h) => h.plan(&opts.spec),
        None => plan(&opts.evlab, &opts.spec),
    };
    skipped.extend(over_limit);
    for s in &skipped {
        progress.warn(&format!("evlab run: skipping {}: {}", s.series, s.reason));
    }
    let mut summary = match &opts.resume {
        Some(earlier) => resumed_summary(earlier, &opts, &series, &progress),
        None => new_summary(&opts, &series, skipped),
    };
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
    if let Some(h) = &hosts {
        summary.hosts = h.checks.clone();
        summary.network = h.network_applied();
    }
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
    let budget = calibrate_across(&base, hosts.as_mut(), &series, &mut summary, &progress)?;
    let ctx = PointCtx {
        budget: budget.as_ref(),
        ..base
    };
    let swept = sweep(&ctx, hosts.as_ref(), &series, &mut summary, t0, &progress);
    if let Some(h) = &hosts {
        summary.network = h.finish(&progress);
    }
    swept?;
    summary.finished = Some(results::utc(results::now_secs()));
    summary.wall_s = t0.elapsed().as_secs_f64();
    write_tables(&summary, &out)?;
    report::write(&summary, &out)?;
    Ok((out, summary))
}

/// The server's and the clients' CPUs, those this machine has; a warning when some are
/// missing, as those processes then run unpinned.
pub(crate) fn pinned_cpus(spec: &Spec, progress: &Progress) -> (Vec<usize>, Vec<usize>) {
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
        let argv = specweb_fileset_argv(&opts.evlab, spec, &dir);
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
/// [`calibrate_or_budget`] where the run's servers are (across hosts, the budget it chose is
/// the hosts'; what calibration failed on leaves the hosts clean).
fn calibrate_across(
    base: &PointCtx,
    hosts: Option<&mut HostsRun>,
    series: &[Series],
    summary: &mut Summary,
    progress: &Progress,
) -> Result<Option<CpuBudget>, LabError> {
    let on = hosts.as_deref().map_or(On::Here, |h| On::Hosts(h, None));
    let budget = calibrate_or_budget(base, on, series, summary, progress);
    if let Some(h) = hosts {
        h.calibrated_budget = summary
            .calibration
            .as_ref()
            .and_then(|c| c.server_cpu_budget);
        if budget.is_err() {
            h.finish(progress);
        }
    }
    budget
}

fn calibrate_or_budget(
    base: &PointCtx,
    on: On,
    series: &[Series],
    summary: &mut Summary,
    progress: &Progress,
) -> Result<Option<CpuBudget>, LabError> {
    let spec = &base.opts.spec;
    // A resumed run keeps the calibration its points were measured with (their rates, the
    // budget): only a run that never got past calibrating calibrates again.
    if let Some(cal) = &summary.calibration {
        return match (cal.server_cpu_budget, base.cgroup) {
            (Some(b), Some(parent)) => {
                Ok(Some(CpuBudget::new_in(parent, b).map_err(|e| {
                    LabError::Io(format!("the calibrated budget {b}: {e}"))
                })?))
            }
            _ => Ok(None),
        };
    }
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
        let (cal, b) = calibrate::run(base, on, &probed, progress)?;
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

/// What the sweep carries from leg to leg, and from block to block of a sequential run.
struct Sweeping<'a> {
    ctx: &'a PointCtx<'a>,
    hosts: Option<&'a HostsRun>,
    progress: &'a Progress,
    t0: Instant,
    /// The fixed (or calibrated) rates, and a rate search's candidates.
    fixed: Vec<f64>,
    search_rates: Option<usize>,
    /// The series on budgets of their own (the negative controls).
    own_budgets: BTreeMap<String, CpuBudget>,
    forecast: Forecast,
    samples_path: PathBuf,
    samples_text: String,
    /// The number the next new point takes (after those of a run resumed).
    next_index: usize,
    /// The points of this sweep so far, kept or new (by index).
    used: std::collections::BTreeSet<usize>,
    /// The points visited so far (the progress line's count).
    index: usize,
}

/// Every point of the sweep, in order, each recorded (summary, points.csv, samples.csv) as
/// soon as it is measured, so that an interrupted run keeps what it did; stops early on
/// Ctrl-C, and a rate search stops a series' rates at its knee. With `[sequential]`, the trials
/// run in blocks: after each, a look (`run::looks`) says whether another block runs.
fn sweep(
    ctx: &PointCtx,
    hosts: Option<&HostsRun>,
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
    // A resumed sequential run first makes every trial it had committed to.
    let mut legs = sweep_order_of(spec, series, 1..=summary.trials());
    let samples_path = ctx.out.join("samples.csv");
    let samples_text = samples_csv(summary);
    results::write_atomic(&samples_path, &samples_text)?;
    let mut st = Sweeping {
        ctx,
        hosts,
        progress,
        t0,
        search_rates: spec.rate_search.as_ref().map(estimate::search_rates),
        own_budgets: own_budgets(spec, series, hosts.is_some())?,
        forecast: forecast_of(ctx, summary, &legs, fixed.len()),
        fixed,
        samples_path,
        samples_text,
        // Points made anew are numbered after those of the run resumed (their raw reports are
        // `load/point-NNN.json`).
        next_index: summary.points.iter().map(|p| p.index).max().unwrap_or(0),
        used: std::collections::BTreeSet::new(),
        index: 0,
    };
    announce(
        ctx,
        (series.len(), summary.trials()),
        st.fixed.len(),
        st.search_rates,
        &st.forecast,
        progress,
    );
    let clock = looks::Clock::new(t0, summary);
    let mut first_leg = 0;
    loop {
        for (i, leg) in legs.iter().enumerate() {
            if !run_leg(&mut st, summary, first_leg + i, *leg)? {
                return Ok(());
            }
        }
        let Some(next) = looks::after_block(summary, &clock, progress) else {
            return Ok(());
        };
        write_tables(summary, ctx.out)?;
        legs = sweep_order_of(spec, series, next);
        first_leg = st.forecast.legs().len();
        st.forecast.extend(
            spec,
            &legs
                .iter()
                .map(|(t, i, s, v)| (leg_label(spec, s, *v), *i, *t))
                .collect::<Vec<_>>(),
            st.fixed.len(),
        );
    }
}

/// One leg: its series' rates at its idle count in its trial (and swept value), then its
/// capacity search. Returns whether the sweep goes on (false: interrupted).
fn run_leg(
    st: &mut Sweeping,
    summary: &mut Summary,
    leg: usize,
    (trial, idle, s, swept): SweepLeg,
) -> Result<bool, LabError> {
    let (ctx, progress) = (st.ctx, st.progress);
    let spec = &ctx.opts.spec;
    let mut below = 0;
    let rates: Vec<f64> = match (&spec.rate_search, st.search_rates) {
        (Some(rs), Some(n)) => (0..n).map(|i| rs.start + rs.step * i as f64).collect(),
        _ => st.fixed.clone(),
    };
    for rate in rates {
        if interrupted() {
            summary.interrupted = true;
            return Ok(false);
        }
        st.index += 1;
        let (p, is_new) =
            match take_kept(summary, &mut st.used, (&s.label, idle, trial, swept, rate)) {
                // Kept from the run resumed: it counts in the series' rate search as then.
                Some(p) => {
                    st.forecast.point_kept(leg, rate);
                    (p, false)
                }
                None => {
                    progress.start_point(
                        &st.forecast,
                        st.index,
                        &format!(
                            "{} idle={idle} rate={rate}/s trial {trial}",
                            leg_label(spec, s, swept)
                        ),
                    );
                    let pctx = PointCtx {
                        budget: st.own_budgets.get(&s.label).or(ctx.budget),
                        ..*ctx
                    };
                    st.next_index += 1;
                    let p = crate::run::remote::run_point(
                        &pctx,
                        st.hosts,
                        st.next_index,
                        s,
                        swept,
                        idle,
                        rate,
                        trial,
                    );
                    st.forecast.point_done(leg, rate, p.wall_s);
                    (p, true)
                }
            };
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
            st.forecast.leg_over(leg);
        }
        if is_new {
            progress.finish_point(&st.forecast, st.index, &p);
            // A point measured again replaces the run's earlier, invalid one.
            st.used.insert(p.index);
            record_point(summary, ctx.out, p, &st.used, &mut st.samples_text);
            results::write_atomic(&st.samples_path, &st.samples_text)?;
            summary.wall_s = st.t0.elapsed().as_secs_f64();
            write_tables(summary, ctx.out)?;
        }
        if summary.interrupted {
            return Ok(false);
        }
        if search_over {
            break;
        }
        if is_new && spec.pause_s > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(spec.pause_s));
        }
    }
    st.forecast.leg_over(leg);
    let Some(ks) = &spec.knee else {
        return Ok(true);
    };
    if interrupted() {
        summary.interrupted = true;
        return Ok(false);
    }
    if knee_kept(summary, (s, idle, trial)) {
        st.forecast.knee_done(leg, 0.0);
        return Ok(true);
    }
    let pctx = PointCtx {
        budget: st.own_budgets.get(&s.label).or(ctx.budget),
        ..*ctx
    };
    let on = st
        .hosts
        .map_or(On::Here, |h| On::Hosts(h, h.share_for(spec, &s.label)));
    let k = knee::after_leg(
        &pctx,
        on,
        ks,
        summary,
        (s, idle, trial),
        &st.fixed,
        progress,
    );
    st.forecast.knee_done(leg, k.wall_s);
    if let Some(r) = summary.resumed.last_mut() {
        r.measured_knees += 1;
    }
    summary.knees.push(k);
    summary.wall_s = st.t0.elapsed().as_secs_f64();
    write_tables(summary, ctx.out)?;
    Ok(true)
}

/// How long the sweep's legs should take, from calibration's capacities where there are some.
fn forecast_of(ctx: &PointCtx, summary: &Summary, legs: &[SweepLeg], nfixed: usize) -> Forecast {
    let spec = &ctx.opts.spec;
    let capacity = summary
        .calibration
        .iter()
        .flat_map(|c| &c.capacities)
        .map(|c| (c.series.clone(), c.replies_per_s))
        .collect();
    Forecast::new(
        spec,
        ctx.duration,
        &legs
            .iter()
            .map(|(t, i, s, v)| (leg_label(spec, s, *v), *i, *t))
            .collect::<Vec<_>>(),
        nfixed,
        capacity,
    )
}

/// Series on their own budgets (the negative controls), each with a group of its own here
/// (none `across` hosts: there each point's server gets its group on its host).
fn own_budgets(
    spec: &Spec,
    series: &[Series],
    across: bool,
) -> Result<BTreeMap<String, CpuBudget>, LabError> {
    let mut own = BTreeMap::new();
    if across {
        return Ok(own);
    }
    for s in series {
        if let Some(b) = spec.series_budget(&s.label) {
            let g = CpuBudget::new(b).map_err(|e| {
                LabError::Io(format!("series `{}`: cpu_budget = {b}: {e}", s.label))
            })?;
            own.insert(s.label.clone(), g);
        }
    }
    Ok(own)
}

/// The valid point of a resumed run this leg's rate keeps (series, idle count, trial, swept
/// value, rate), if there is one not kept yet: a grid may offer one rate twice, and each of
/// its points keeps one earlier point.
fn take_kept(
    summary: &Summary,
    used: &mut std::collections::BTreeSet<usize>,
    (series, idle, trial, swept, rate): (&str, usize, u32, Option<f64>, f64),
) -> Option<PointResult> {
    let p = summary.points.iter().find(|p| {
        p.valid() && !used.contains(&p.index) && same_point(p, series, idle, trial, swept, rate)
    })?;
    used.insert(p.index);
    Some(p.clone())
}

/// Whether a resumed run keeps its capacity search of this series, idle count and trial: one
/// that ended by itself (closed or not) is kept; one Ctrl-C cut short is dropped, to be made
/// again.
fn knee_kept(summary: &mut Summary, (s, idle, trial): (&Series, usize, u32)) -> bool {
    let same = |k: &Knee| k.series == s.label && k.idle == idle && k.trial == trial;
    if summary
        .knees
        .iter()
        .any(|k| same(k) && k.stopped.as_deref() != Some(INTERRUPTED))
    {
        return true;
    }
    summary.knees.retain(|k| !same(k));
    false
}

/// The run's opening line: its shape, its number of points, how long it should take, and
/// where its results go.
fn announce(
    ctx: &PointCtx,
    (nseries, trials): (usize, u32),
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
        "evlab run: {} — {} series{} × {rates_words} × {} idle counts × {}, {} s per point{}: {}{} points{}, about {} (an estimate); results in {}",
        spec.name,
        nseries,
        spec.sweep
            .as_ref()
            .map(|sw| format!(" × {} {} values", sw.values.len(), sw.name()))
            .unwrap_or_default(),
        spec.idle.len(),
        match &spec.sequential {
            Some(q) => format!(
                "{trials} trials (then up to {} by the sequential rule, a block only while a \
                 finding is undecided{})",
                q.most,
                q.budget_s.map_or(String::new(), |b| format!(
                    " and it is forecast to end within {b} s of the start"
                ))
            ),
            None => format!("{trials} trials"),
        },
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

/// The sweep's legs in the order they run: trial → swept value → the arms (series × idle
/// count) in an order drawn afresh for each trial and value from the experiment's
/// `order_seed`, so that a drift over the run (a neighbour on the host, a warming cache) favours
/// no arm, the idle arm included, in the expectation; at each swept value every arm runs before
/// the next value. Each leg runs its series' rates. These are the experiment's `trials` (with
/// `[sequential]`, the first block's: later blocks are [`sweep_order_of`] their trials).
pub fn sweep_order<'a>(spec: &Spec, series: &'a [Series]) -> Vec<SweepLeg<'a>> {
    sweep_order_of(spec, series, 1..=spec.trials)
}

/// The legs of the trials `trials`, as [`sweep_order`] orders them: each trial's order depends
/// on the seed and the trial's number alone, so a block added by a look runs as it would have
/// in a longer fixed design.
pub fn sweep_order_of<'a>(
    spec: &Spec,
    series: &'a [Series],
    trials: std::ops::RangeInclusive<u32>,
) -> Vec<SweepLeg<'a>> {
    let seed = spec.order_seed.unwrap_or(0);
    let mut out = Vec::new();
    for trial in trials {
        for (k, v) in spec.sweep_values().into_iter().enumerate() {
            let mut arms: Vec<(usize, &Series)> = spec
                .idle
                .iter()
                .flat_map(|&idle| series.iter().map(move |s| (idle, s)))
                .filter(|(idle, s)| {
                    spec.series_runs_at(&s.label, *idle) && spec.series_sweeps_at(&s.label, v)
                })
                .collect();
            let draw = seed ^ (u64::from(trial) << 32) ^ k as u64;
            evlab_reason::analysis::stats::Rng::new(draw).shuffle(&mut arms);
            out.extend(arms.into_iter().map(|(idle, s)| (trial, idle, s, v)));
        }
    }
    out
}

/// A seed for the arms' order when the experiment gives none: from the clock and the process.
pub fn draw_order_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ (u64::from(std::process::id()) << 40)
}

/// A leg's series as the progress line and the forecast name it: `shared workers=4`.
pub(crate) fn leg_label(spec: &Spec, s: &Series, swept: Option<f64>) -> String {
    match (&spec.sweep, swept) {
        (Some(sw), Some(v)) => format!(
            "{} {}={}",
            s.label,
            sw.name(),
            evlab_reason::model::spec::SweepSpec::arg(v)
        ),
        _ => s.label.clone(),
    }
}

/// The summary a resumed run goes on with: the earlier run's, its points, searches and
/// calibration kept, with this resumption recorded.
fn resumed_summary(
    earlier: &Summary,
    opts: &RunOptions,
    series: &[Series],
    progress: &Progress,
) -> Summary {
    let mut s = earlier.clone();
    s.interrupted = false;
    s.finished = None;
    let build = crate::run::plan::build_of(&opts.evlab);
    if build != s.machine.evlab_version {
        progress.warn(&format!(
            "evlab run --resume: the run was made with evlab {}, and goes on with {build}: \
             its points will come from two builds (recorded)",
            s.machine.evlab_version
        ));
    }
    let planned: Vec<&str> = series.iter().map(|x| x.label.as_str()).collect();
    for x in &s.series {
        if !planned.contains(&x.label.as_str()) {
            progress.warn(&format!(
                "evlab run --resume: series `{}` cannot run on this machine now; its points \
                 so far are kept",
                x.label
            ));
        }
    }
    let kept_points = s.points.iter().filter(|p| p.valid()).count();
    let kept_knees = s
        .knees
        .iter()
        .filter(|k| k.stopped.as_deref() != Some(INTERRUPTED))
        .count();
    progress.note(&format!(
        "evlab run: resuming {}: {kept_points} valid point(s) and {kept_knees} capacity \
         search(es) kept, {} point(s) to measure again",
        s.experiment.name,
        s.points.len() - kept_points
    ));
    s.resumed.push(Resumption {
        at: results::utc(results::now_secs()),
        command: opts.command.clone(),
        evlab_version: build,
        kept_points,
        kept_knees,
        measured_points: 0,
        measured_knees: 0,
    });
    s
}

/// Whether `p` is the point of this series, idle count, trial, swept value and rate.
fn same_point(
    p: &PointResult,
    series: &str,
    idle: usize,
    trial: u32,
    swept: Option<f64>,
    rate: f64,
) -> bool {
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    p.series == series
        && p.idle == idle
        && p.trial == trial
        && close(p.rate, rate)
        && match (p.swept.as_ref(), swept) {
            (None, None) => true,
            (Some(a), Some(b)) => close(a.value, b),
            _ => false,
        }
}

/// Records a point just measured ([`replace_point`]) and its sample rows in `samples_text`:
/// appended, unless the point replaced an earlier one, when the text is made anew.
fn record_point(
    summary: &mut Summary,
    out: &Path,
    p: PointResult,
    used: &std::collections::BTreeSet<usize>,
    samples_text: &mut String,
) {
    let rows = results::samples_csv_rows(&p);
    if replace_point(summary, out, p, used) {
        *samples_text = samples_csv(summary);
    } else {
        samples_text.push_str(&rows);
    }
}

/// Records a point just measured: an earlier record of the same point that was not valid
/// (and is not one this sweep kept) goes, with its raw report, and a resumption counts it.
/// Returns whether an earlier record went.
fn replace_point(
    summary: &mut Summary,
    out: &Path,
    p: PointResult,
    used: &std::collections::BTreeSet<usize>,
) -> bool {
    let swept = p.swept.as_ref().map(|x| x.value);
    let earlier = summary.points.iter().position(|q| {
        !used.contains(&q.index) && same_point(q, &p.series, p.idle, p.trial, swept, p.rate)
    });
    if let Some(i) = earlier {
        let q = summary.points.remove(i);
        let raw = out.join("load").join(format!("point-{:03}.json", q.index));
        let _ = std::fs::remove_file(raw);
    }
    if let Some(r) = summary.resumed.last_mut() {
        r.measured_points += 1;
    }
    summary.points.push(p);
    earlier.is_some()
}

/// samples.csv: every recorded point's sample rows.
fn samples_csv(summary: &Summary) -> String {
    let mut text = format!("{}\n", results::SAMPLES_HEADER);
    for p in &summary.points {
        text.push_str(&results::samples_csv_rows(p));
    }
    text
}

fn write_tables(summary: &Summary, out: &Path) -> Result<(), LabError> {
    summary.write_json(out)?;
    results::write_atomic(
        &out.join("points.csv"),
        &results::points_csv(&summary.points),
    )
}

#[cfg(test)]
mod tests;
