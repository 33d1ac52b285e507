//! The capacity search (`[knee]`, `model::knee`): one server of a series, started as a point's
//! is (pinned, inside its budget, with the leg's idle connections held throughout), and short
//! steps of load against it, each judged kept or not, until the bracket around its knee is
//! closed. Between steps the server is let drain: the next step starts once it has used no
//! CPU for a while (what an overloaded step left queued is gone).

use std::time::Instant;

use crate::run::point::PointCtx;
use crate::run::procs::interrupted;
use crate::run::progress::Progress;
use crate::run::remote_steps::On;
use crate::run::stepper::{StepAsk, Stepper};
use evlab_reason::analysis::stats::Arm;
use evlab_reason::model::knee::{self, Knee, KneeSpec, KneeStep, FAR_WIDENING};
use evlab_reason::model::results::Summary;
use evlab_reason::model::spec::Series;
use evlab_reason::LabError;

/// One capacity search (`[knee]`) after a leg's rates: in every trial from calibration's
/// capacity of the series (or the highest fixed rate), between 1/16 of that and the client's
/// clean ceiling; its server where `on` says.
pub(crate) fn after_leg(
    ctx: &PointCtx,
    on: On,
    ks: &KneeSpec,
    summary: &Summary,
    (s, idle, trial): (&Series, usize, u32),
    fixed: &[f64],
    progress: &Progress,
) -> Knee {
    // Every trial's search starts from the same point, calibration's, so that the trials are
    // independent: a search that started from the earlier trials' capacity carried their error
    // into the next (and in a run of quick the near start saved no steps: 46 and 50 against 50).
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
            .or_else(|| Arm::of(&caps).map(|a| (a.mean, "calibration's mean capacity")))
    });
    let top = fixed.iter().copied().reduce(f64::max).unwrap_or(1000.0);
    let (rate, from) = calibrated.unwrap_or((top, "the highest fixed rate"));
    let start = Start {
        rate,
        from: from.into(),
        widening: FAR_WIDENING,
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
    let k = search(ctx, on, ks, (s, idle, trial), start, &bounds, n);
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

/// Where a search starts, and how far it widens first.
pub(crate) struct Start {
    pub rate: f64,
    pub from: String,
    pub widening: f64,
}

/// The rates a search may offer: from `floor` up to `ceiling` (the client's clean ceiling).
pub(crate) struct Bounds {
    pub floor: f64,
    pub ceiling: f64,
}

/// One search of series `s` at `idle` idle connections in `trial`, its server where `on` says.
pub(crate) fn search(
    ctx: &PointCtx,
    on: On,
    ks: &KneeSpec,
    (s, idle, trial): (&Series, usize, u32),
    start: Start,
    bounds: &Bounds,
    n: usize,
) -> Knee {
    let t0 = Instant::now();
    let mut k = Knee {
        series: s.label.clone(),
        idle,
        trial,
        start: start.rate,
        start_from: start.from,
        widening: start.widening,
        ..Knee::default()
    };
    match on.start(ctx, s, idle, &format!("knee-{n}")) {
        Err((e, commands)) => {
            k.commands = commands;
            k.stopped = Some(e.to_string());
        }
        Ok(mut server) => {
            (k.commands, k.argv) = server.started();
            let r = steps(ctx, ks, server.as_mut(), bounds, &mut k);
            if let Some(left) = server.stop() {
                k.stopped.get_or_insert(left);
            }
            if let Err(e) = r {
                k.stopped = Some(e.to_string());
            }
        }
    }
    k.wall_s = t0.elapsed().as_secs_f64();
    k
}

fn steps(
    ctx: &PointCtx,
    ks: &KneeSpec,
    server: &mut dyn Stepper,
    bounds: &Bounds,
    k: &mut Knee,
) -> Result<(), LabError> {
    let spec = &ctx.opts.spec;
    while let Some(rate) = knee::next_rate(k, ks, bounds.floor, bounds.ceiling) {
        if interrupted() {
            k.stopped = Some(evlab_reason::model::knee::INTERRUPTED.into());
            return Ok(());
        }
        let rate = rate.round();
        let run = server.step(&StepAsk {
            what: "evlab load (knee)",
            rate,
            secs: ks.step_s,
            timeout_s: ks.timeout_s,
            sample_interval_s: knee::SAMPLE_S,
            tag: &format!("k{}", k.steps.len() + 1),
        })?;
        k.commands.push(run.command.clone());
        k.argv.push(run.argv.clone());
        let mut step = KneeStep {
            offered: rate,
            connections: run.connections,
            replies: run.replies,
            settled_rate: knee::settled_rate(&run.samples, ks.settle_s, ks.step_s),
            p99_ms: run.p99_ms,
            achieved_start_rate: run.achieved_start_rate,
            client_cpu_busy: run.client_busy,
            calls_per_conn: spec.requests_per_conn().unwrap_or(1.0),
            kept: false,
            invalid: None,
            busy: run.busy.clone(),
        };
        step.kept = step.judge();
        // The points' validity rule: a step that measured the client says nothing of the
        // server; it is repeated once (`knee::next_rate`).
        if let Some(a) = step
            .achieved_start_rate
            .filter(|a| *a < spec.start_rate_limit * rate)
        {
            step.invalid = Some(format!(
                "client fell behind: started {a:.0} connections/s of {rate:.0} offered"
            ));
        } else if let Some(b) = step.client_cpu_busy.filter(|b| *b >= spec.client_cpu_limit) {
            step.invalid = Some(format!("client saturated: its CPU busy {:.0}%", b * 100.0));
        } else if let Some(why) = run.invalid {
            step.invalid = Some(why);
        }
        k.steps.push(step);
        server
            .settle()
            .map_err(|e| LabError::Point(format!("during the search: {e}")))?;
    }
    if k.stopped.is_none() && k.capacity(ks.resolution).is_none() {
        let last_invalid = k.steps.last().and_then(|s| s.invalid.clone());
        k.stopped = Some(match (k.kept(), k.failed()) {
            _ if last_invalid.is_some() => {
                format!("{} (twice)", last_invalid.unwrap_or_default())
            }
            (Some(lo), None) => {
                format!("kept up with {lo:.0}/s, the most the client offers cleanly: a lower bound")
            }
            (None, Some(_)) => format!(
                "not kept up with at {:.0}/s, the search's floor",
                bounds.floor
            ),
            _ => format!("bracket not closed in {} steps", ks.steps),
        });
    }
    Ok(())
}
