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

use std::time::Instant;

use crate::run::cgroup::CpuBudget;
use crate::run::point::PointCtx;
use crate::run::progress::Progress;
use crate::run::remote_steps::On;
use crate::run::stepper::{StepAsk, Stepper};
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
    server: &mut dyn Stepper,
    share: Option<f64>,
    rate: f64,
    secs: f64,
    tag: &str,
) -> Result<(Probe, bool), LabError> {
    let run = server.step(&StepAsk {
        what: "evlab load (calibration)",
        rate,
        secs,
        timeout_s: 1.0,
        sample_interval_s: 1.0,
        tag,
    })?;
    let conns = run.connections.max(1);
    // Kept up: nearly every connection answered, and not after a queue that grew through the
    // step (a throttled server stalls for one quota period, 10 ms, at most).
    let kept = run.replies as f64 >= 0.95 * conns as f64
        && run.p99_ms <= 100.0
        && run.achieved_start_rate.is_none_or(|a| a >= 0.97 * rate);
    Ok((
        Probe {
            what: String::new(),
            series: String::new(),
            budget: share,
            offered: rate,
            replies_per_s: Some(run.replies as f64 / run.wall_s.max(1e-9)),
            achieved_start_rate: run.achieved_start_rate,
            client_cpu_busy: run.client_busy,
        },
        kept,
    ))
}

/// Starts `s`'s server where `on` says, runs `f` against it, and stops it whatever happens.
fn with_server<T>(
    ctx: &PointCtx,
    on: On,
    s: &Series,
    dir: &str,
    f: impl FnOnce(&mut dyn Stepper) -> Result<T, LabError>,
) -> Result<T, LabError> {
    let mut server = on.start(ctx, s, 0, dir).map_err(|(e, _)| e)?;
    let r = f(server.as_mut());
    server.stop();
    r
}

/// Rising rates against one server of `s` until one is not kept up with.
fn saturation_probe(
    ctx: &PointCtx,
    on: On,
    s: &Series,
    clean: f64,
    n: usize,
    probes: &mut Vec<Probe>,
) -> Result<Capacity, LabError> {
    let share = match on {
        On::Here => ctx.budget.map(|b| b.share),
        On::Hosts(_, share) => share,
    };
    with_server(ctx, on, s, &format!("calibrate-{n}"), |server| {
        let mut cap = Capacity {
            series: s.label.clone(),
            replies_per_s: 0.0,
            saturated: false,
        };
        for (i, f) in STEPS.iter().enumerate() {
            let rate = (clean * f).round();
            let (mut p, kept) = probe_step(server, share, rate, STEP_S, &format!("p{i}"))?;
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
    })
}

/// Measures this machine, or with hosts the server host under every client host (see the
/// module's notes). Returns the calibration and, on this machine, the budget the sweep runs
/// its servers in (across hosts the calibration's `server_cpu_budget` is that share).
pub(crate) fn run(
    ctx: &PointCtx,
    on: On,
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
    client_ceiling(ctx, on.with_share(None), &reference, &mut cal, progress)?;
    let mut n = 0;
    let (share, budget) = choose_budget(ctx, on, &reference, &mut cal, &mut n, progress)?;
    cal.server_cpu_budget = share;

    // 3. Each series' capacity.
    let c = PointCtx {
        budget: budget.as_ref(),
        ..*ctx
    };
    for s in series {
        n += 1;
        let cap = saturation_probe(
            &c,
            on.with_share(share),
            s,
            cal.client_clean,
            n,
            &mut cal.probes,
        )?;
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

/// 1. The client's ceiling (across hosts: every client host's together), against an
///    unbudgeted `reference` server, into `cal` (with its clean share, what the sweep offers
///    at most).
fn client_ceiling(
    ctx: &PointCtx,
    on: On,
    reference: &Series,
    cal: &mut Calibration,
    progress: &Progress,
) -> Result<(), LabError> {
    let unbudgeted = PointCtx {
        budget: None,
        ..*ctx
    };
    let p = with_server(&unbudgeted, on, reference, "calibrate-client", |server| {
        // 12,000 connections offered at 60,000/s: started as fast as the client can. The
        // better of two tries, so that a moment's disturbance does not halve every rate.
        let mut best: Option<Probe> = None;
        for t in 0..2 {
            let (mut p, _) = probe_step(server, None, 60_000.0, 0.2, &format!("ceiling{t}"))?;
            p.what = "client ceiling".into();
            p.series = reference.label.clone();
            if best.as_ref().is_none_or(|b| {
                p.achieved_start_rate.unwrap_or(0.0) > b.achieved_start_rate.unwrap_or(0.0)
            }) {
                best = Some(p);
            }
        }
        Ok(best.expect("two tries"))
    })?;
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
///    (probes numbered on from `n`), with the reason in `cal`: its share and, on this machine,
///    the group the sweep's servers join.
fn choose_budget(
    ctx: &PointCtx,
    on: On,
    reference: &Series,
    cal: &mut Calibration,
    n: &mut usize,
    progress: &Progress,
) -> Result<(Option<f64>, Option<CpuBudget>), LabError> {
    let spec = &ctx.opts.spec;
    // A group here; across hosts each server's is made on the server host from the share.
    let group = |b: f64, what: &str| -> Result<Option<CpuBudget>, LabError> {
        match on {
            On::Here => Ok(Some(
                new_budget(ctx, b).map_err(|e| LabError::Io(format!("{what}: {e}")))?,
            )),
            On::Hosts(..) => Ok(None),
        }
    };
    match spec.server_cpu_budget {
        None => {
            cal.budget_reason = "none asked for: the server has its whole CPU".into();
            Ok((None, None))
        }
        Some(Budget::Share(b)) => {
            cal.budget_reason = "given by the experiment".into();
            Ok((Some(b), group(b, &format!("server_cpu_budget = {b}"))?))
        }
        Some(Budget::Auto) => {
            let target = spec.auto_target * cal.client_clean;
            let mut b = TRIAL_BUDGET;
            for round in 0..2 {
                let bud = group(b, "server_cpu_budget = \"auto\"")?;
                let c = PointCtx {
                    budget: bud.as_ref(),
                    ..*ctx
                };
                *n += 1;
                let cap = saturation_probe(
                    &c,
                    on.with_share(Some(b)),
                    reference,
                    cal.client_clean,
                    *n,
                    &mut cal.probes,
                )?;
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
            Ok((Some(b), group(b, "server_cpu_budget = \"auto\"")?))
        }
    }
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
