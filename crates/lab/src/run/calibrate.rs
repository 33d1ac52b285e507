//! Calibration: before the sweep, `evlab run` measures this machine so that one experiment
//! shows the same shape anywhere.
//!
//! 1. The client's ceiling: `evlab load` offered far more than it can start (against an
//!    unconstrained epoll-et server), so the rate at which it did start connections is its
//!    limit here (the better of two tries). The sweep offers at most `CLEAN_SHARE` of it, where the client keeps its
//!    schedule with its CPU below the validity limit (docs/methodology.md has the evidence).
//! 2. With `server_cpu_budget = "auto"`: a probe of epoll-et at a trial budget, then the budget
//!    scaled so that epoll-et saturates at `auto_target` × the clean ceiling (capacity grows
//!    about linearly with the budget), probed again to check.
//! 3. A short saturation probe per series (idle 0, at the budget): rising rates on one server
//!    until one is not kept up with; its capacity is the last rate kept up with.
//! 4. With `rates = "auto"`: `auto_rates` × the median capacity, capped at the clean ceiling.

use std::path::Path;
use std::time::Instant;

use crate::run::cgroup::CpuBudget;
use crate::run::point::{self, LoadAsk, PointCtx, Procs};
use crate::run::progress::Progress;
use evlab_reason::model::calibration::{Calibration, Capacity, Probe, CLEAN_SHARE};
use evlab_reason::model::spec::{Budget, Series, ServerKind};
use evlab_reason::model::text::thousands;
use evlab_reason::LabError;

/// The trial budget of the first epoll-et probe.
const TRIAL_BUDGET: f64 = 0.1;
/// The saturation probe's steps, as shares of the clean ceiling (×1.5 apart).
const STEPS: [f64; 4] = [0.3, 0.45, 0.67, 1.0];
/// Seconds per probe step.
const STEP_S: f64 = 0.7;

/// What one probe step saw.
fn probe_step(
    ctx: &PointCtx,
    port: u16,
    docroot: &Path,
    pdir: &Path,
    rate: f64,
    secs: f64,
    tag: &str,
) -> Result<(Probe, bool), LabError> {
    let run = point::run_load(
        ctx,
        "evlab load (calibration)",
        &LoadAsk {
            port,
            docroot,
            pdir,
            rate,
            secs,
            timeout_s: 1.0,
            sample_interval_s: 1.0,
            tag,
        },
    )?;
    let l = &run.report;
    let conns = l.connections.initiated.max(1);
    let replies = l.replies.status.s2xx;
    // Kept up: nearly every connection answered, and not after a queue that grew through the
    // step (a throttled server stalls for one quota period, 10 ms, at most).
    let kept = replies as f64 >= 0.95 * conns as f64
        && l.latency_ms.p99 <= 100.0
        && l.schedule
            .achieved_start_rate
            .is_none_or(|a| a >= 0.97 * rate);
    Ok((
        Probe {
            what: String::new(),
            series: String::new(),
            budget: ctx.budget.map(|b| b.share),
            offered: rate,
            replies_per_s: Some(replies as f64 / run.wall_s.max(1e-9)),
            achieved_start_rate: l.schedule.achieved_start_rate,
            client_cpu_busy: run.client_busy,
        },
        kept,
    ))
}

/// Rising rates against one server of `s` until one is not kept up with.
fn saturation_probe(
    ctx: &PointCtx,
    s: &Series,
    clean: f64,
    n: usize,
    probes: &mut Vec<Probe>,
) -> Result<Capacity, LabError> {
    let pdir = ctx.scratch.join(format!("calibrate-{n}"));
    let docroot = point::docroot(ctx, &pdir)?;
    let mut procs = Procs::default();
    let mut commands = vec![];
    let r = (|| {
        let port = point::start_server(ctx, s, 0, &docroot, &pdir, &mut procs, &mut commands)?;
        let mut cap = Capacity {
            series: s.label.clone(),
            replies_per_s: 0.0,
            saturated: false,
        };
        for (i, f) in STEPS.iter().enumerate() {
            let rate = (clean * f).round();
            let (mut p, kept) =
                probe_step(ctx, port, &docroot, &pdir, rate, STEP_S, &format!("p{i}"))?;
            p.what = "saturation probe".into();
            p.series = s.label.clone();
            let got = p.replies_per_s.unwrap_or(0.0);
            probes.push(p);
            if !kept {
                cap.saturated = true;
                if i == 0 {
                    cap.replies_per_s = got.min(rate);
                }
                break;
            }
            cap.replies_per_s = rate;
        }
        Ok(cap)
    })();
    procs.stop();
    r
}

/// Measures this machine (see the module's notes). Returns the calibration and the budget the
/// sweep runs its servers in.
pub(crate) fn run(
    ctx: &PointCtx,
    series: &[Series],
    progress: &Progress,
) -> Result<(Calibration, Option<CpuBudget>), LabError> {
    let t0 = Instant::now();
    let spec = &ctx.opts.spec;
    let mut cal = Calibration::default();
    let reference = series
        .iter()
        .find(|s| s.kind == ServerKind::Evlab && s.mechanism == "epoll-et")
        .cloned()
        .unwrap_or(Series {
            label: "epoll-et".into(),
            kind: ServerKind::Evlab,
            mechanism: "epoll-et".into(),
            flags: vec![],
        });
    client_ceiling(ctx, &reference, &mut cal, progress)?;
    let mut n = 0;
    let budget = choose_budget(ctx, &reference, &mut cal, &mut n, progress)?;
    cal.server_cpu_budget = budget.as_ref().map(|b| b.share);

    // 3. Each series' capacity.
    let c = PointCtx {
        budget: budget.as_ref(),
        ..*ctx
    };
    for s in series {
        n += 1;
        let cap = saturation_probe(&c, s, cal.client_clean, n, &mut cal.probes)?;
        progress.note(&format!(
            "evlab run: calibration: {} keeps up with {}{:.0}/s",
            s.label,
            if cap.saturated { "" } else { "at least " },
            cap.replies_per_s
        ));
        cal.capacities.push(cap);
    }
    if spec.rates.is_auto() {
        cal.rates = auto_rates(&spec.auto_rates, &cal);
    }
    cal.wall_s = t0.elapsed().as_secs_f64();
    Ok((cal, budget))
}

/// 1. The client's ceiling, against an unbudgeted `reference` server, into `cal` (with its
///    clean share, what the sweep offers at most).
fn client_ceiling(
    ctx: &PointCtx,
    reference: &Series,
    cal: &mut Calibration,
    progress: &Progress,
) -> Result<(), LabError> {
    let pdir = ctx.scratch.join("calibrate-client");
    let docroot = point::docroot(ctx, &pdir)?;
    let mut procs = Procs::default();
    let mut commands = vec![];
    let unbudgeted = PointCtx {
        budget: None,
        ..*ctx
    };
    let r = (|| {
        let port = point::start_server(
            &unbudgeted,
            reference,
            0,
            &docroot,
            &pdir,
            &mut procs,
            &mut commands,
        )?;
        // 12,000 connections offered at 60,000/s: started as fast as the client can. The
        // better of two tries, so that a moment's disturbance does not halve every rate.
        let mut best: Option<Probe> = None;
        for t in 0..2 {
            let (mut p, _) = probe_step(
                &unbudgeted,
                port,
                &docroot,
                &pdir,
                60_000.0,
                0.2,
                &format!("ceiling{t}"),
            )?;
            p.what = "client ceiling".into();
            p.series = reference.label.clone();
            if best.as_ref().is_none_or(|b| {
                p.achieved_start_rate.unwrap_or(0.0) > b.achieved_start_rate.unwrap_or(0.0)
            }) {
                best = Some(p);
            }
        }
        Ok::<_, LabError>(best.expect("two tries"))
    })();
    procs.stop();
    let p = r?;
    cal.client_ceiling = p.achieved_start_rate.unwrap_or(0.0);
    cal.probes.push(p);
    if cal.client_ceiling < 100.0 {
        return Err(LabError::Io(format!(
            "calibration: the client started only {:.0} connections/s flat out",
            cal.client_ceiling
        )));
    }
    cal.client_clean = (cal.client_ceiling * CLEAN_SHARE).round();
    progress.note(&format!(
        "evlab run: calibration: the client starts {:.0} connections/s flat out; the sweep offers at most {:.0}/s",
        cal.client_ceiling, cal.client_clean
    ));
    Ok(())
}

/// A budget of `share` in the run's parent group (found and tried before calibration began).
fn new_budget(ctx: &PointCtx, share: f64) -> Result<CpuBudget, String> {
    match ctx.cgroup {
        Some(parent) => CpuBudget::new_in(parent, share),
        None => CpuBudget::new(share),
    }
}

/// 2. The budget: none, the experiment's, or (`"auto"`) one chosen by probing `reference`
///    (probes numbered on from `n`), with the reason in `cal`.
fn choose_budget(
    ctx: &PointCtx,
    reference: &Series,
    cal: &mut Calibration,
    n: &mut usize,
    progress: &Progress,
) -> Result<Option<CpuBudget>, LabError> {
    let spec = &ctx.opts.spec;
    let mut budget = None;
    match spec.server_cpu_budget {
        None => cal.budget_reason = "none asked for: the server has its whole CPU".into(),
        Some(Budget::Share(b)) => {
            budget = Some(
                new_budget(ctx, b)
                    .map_err(|e| LabError::Io(format!("server_cpu_budget = {b}: {e}")))?,
            );
            cal.budget_reason = "given by the experiment".into();
        }
        Some(Budget::Auto) => {
            let target = spec.auto_target * cal.client_clean;
            let mut b = TRIAL_BUDGET;
            for round in 0..2 {
                let bud = new_budget(ctx, b)
                    .map_err(|e| LabError::Io(format!("server_cpu_budget = \"auto\": {e}")))?;
                let c = PointCtx {
                    budget: Some(&bud),
                    ..*ctx
                };
                *n += 1;
                let cap = saturation_probe(&c, reference, cal.client_clean, *n, &mut cal.probes)?;
                let k = cap.replies_per_s.max(1.0);
                let next = (b * target / k).clamp(0.02, 1.0);
                progress.note(&format!(
                    "evlab run: calibration: {} keeps up with {:.0}/s at {:.0}% of a CPU",
                    reference.label,
                    k,
                    b * 100.0
                ));
                if round == 1 || (next / b - 1.0).abs() <= 0.25 {
                    if (next / b - 1.0).abs() > 0.25 {
                        b = next;
                    }
                    break;
                }
                b = next;
            }
            cal.budget_reason = format!(
                "chosen so that {} saturates near {:.0}% of the clean ceiling ({}/s): a server with a fraction of its CPU, as the paper's one server against eight clients",
                reference.label,
                spec.auto_target * 100.0,
                thousands(target)
            );
            budget = Some(new_budget(ctx, b).map_err(LabError::Io)?);
        }
    }
    Ok(budget)
}

/// 4. The rates: `multiples` × the median capacity, capped at the clean ceiling, in order
///    and without repeats.
fn auto_rates(multiples: &[f64], cal: &Calibration) -> Vec<f64> {
    // The median capacity: one probe that happened to land on a quiet moment must not move
    // every rate.
    let mut caps: Vec<f64> = cal.capacities.iter().map(|c| c.replies_per_s).collect();
    caps.sort_by(f64::total_cmp);
    let k = caps.get(caps.len() / 2).copied().unwrap_or(0.0).max(100.0);
    let mut rates: Vec<f64> = multiples
        .iter()
        .map(|m| round_rate(m * k).min(round_rate(cal.client_clean)))
        .collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    rates
}

/// Two significant figures: 1234 → 1200, 56789 → 57000.
fn round_rate(x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let mag = 10f64.powi(x.log10().floor() as i32 - 1);
    ((x / mag).round() * mag).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_round_to_two_figures() {
        assert_eq!(round_rate(1234.0), 1200.0);
        assert_eq!(round_rate(56789.0), 57000.0);
        assert_eq!(round_rate(987.0), 990.0);
        assert_eq!(round_rate(0.0), 0.0);
    }
}
