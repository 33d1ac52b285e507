//! The capacity search (`[knee]`, `model::knee`): one server of a series, started as a point's
//! is (pinned, inside its budget, with the leg's idle connections held throughout), and short
//! steps of load against it, each judged kept or not, until the bracket around its knee is
//! closed. Between steps the server is let drain: the next step starts once it has used no
//! CPU for a while (what an overloaded step left queued is gone).

use std::time::Instant;

use crate::run::point::PointCtx;
use crate::run::procs::interrupted;
use crate::run::remote_steps::On;
use crate::run::stepper::{StepAsk, Stepper};
use evlab_reason::model::knee::{self, Knee, KneeSpec, KneeStep};
use evlab_reason::model::spec::Series;
use evlab_reason::LabError;

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
