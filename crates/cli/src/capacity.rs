//! `evlab capacity URL`: the highest request rate a server sustains under a latency objective.
//! Each trial is the lab's capacity search (`model::knee::next_rate`, the bisection of
//! `evlab run`'s `[knee]`) over short steps of wrk2's model: `-c` connections at a held request
//! rate, each step kept when the server kept up with it (`KneeStep::judge`: its settled reply
//! rate at least 95% of the offered), its latency percentile (from each request's due time) met
//! the objective, and enough requests were answered 2xx/3xx. The trials give a 90% interval.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use evlab_lab::analysis::stats::Arm;
use evlab_lab::model::knee::{self, Knee, KneeSpec, KneeStep, FAR_WIDENING};
use evlab_load::gen::{self, Live, LoadConfig};
use evlab_load::summary::{self, Stats};
use evlab_load::workload::{Fixed, Workload};
use serde_json::json;

use crate::args::usage;
use crate::output::Sink;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The target, as wrk takes it: http://HOST[:PORT]/PATH
    #[arg(value_name = "URL")]
    pub url: String,
    /// The latency objective, pN=DURATION (plain numbers are ms): a step whose Nth percentile
    /// latency, from each request's due time, is over it is not kept
    #[arg(long, value_name = "pN=DURATION", default_value = "p99=10ms", value_parser = slo)]
    pub slo: Slo,
    /// The share of a step's requests that must be answered 2xx or 3xx (99.9% or 0.999)
    #[arg(long, value_name = "SHARE", default_value = "99.9%", value_parser = crate::args::share)]
    pub success: f64,
    /// Searches, each from the same start; the answer is their mean with its 90% interval
    #[arg(long, default_value = "3", value_parser = crate::args::count)]
    pub trials: usize,
    /// Connections the load is held over (wrk's -c)
    #[arg(short = 'c', long, default_value = "50", value_parser = crate::args::count)]
    pub connections: usize,
    /// Generator threads (wrk's -t)
    #[arg(short = 't', long, default_value = "1", value_parser = crate::args::count)]
    pub threads: usize,
    /// Each step's length: seconds, or with a unit (500ms, 2s)
    #[arg(long, value_name = "DURATION", default_value = "1", value_parser = crate::args::seconds)]
    pub step: f64,
    /// Steps at most per search
    #[arg(long, default_value = "12", value_parser = crate::args::count)]
    pub steps: usize,
    /// The search stops when the highest rate kept and the lowest not kept are within this
    /// ratio; the capacity is their geometric middle
    #[arg(long, default_value_t = 1.06)]
    pub resolution: f64,
    /// Write the answer and every step as JSON to FILE (`-`: stdout, the text to stderr)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub const EXAMPLES: &str = "\
Examples:
  evlab capacity http://127.0.0.1:8080/one --slo p99=10ms
      the highest rate under a 10 ms p99: three searches of 1 s steps over
      50 connections
  evlab capacity http://127.0.0.1:8080/ --slo p99.9=50ms --success 99% \\
    --trials 5 --json cap.json
      five searches, a stricter objective, the report as JSON too

Each search first runs the connections flat out for a step (wrk's model) to find what the \
server and this client do together, then bisects the rate (wrk2's model) from 0.9 of that. A \
search that keeps the objective there gives a lower bound: this client offers no more.

Exit status: 0 with a capacity; 99 when even the lowest rate tried misses the objective; 1 on \
an error; 2 on a usage error.";

/// A latency objective: the percentile and its bound in ms.
#[derive(Clone, Copy, Debug)]
pub struct Slo {
    pub percentile: f64,
    pub ms: f64,
}

fn slo(s: &str) -> Result<Slo, String> {
    let (p, d) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}': give pN=DURATION, e.g. p99=10ms"))?;
    let percentile = p
        .trim()
        .strip_prefix('p')
        .and_then(|x| x.parse::<f64>().ok())
        .filter(|x| *x > 0.0 && *x <= 100.0)
        .ok_or_else(|| format!("'{s}': '{p}' is not a percentile (p50, p99, p99.9)"))?;
    let ms = crate::args::millis(d.trim())?;
    if ms <= 0.0 {
        return Err(format!("'{s}': the bound must be more than zero"));
    }
    Ok(Slo { percentile, ms })
}

/// One step as the answer shows it.
struct Step {
    step: KneeStep,
    latency_ms: f64,
    success: f64,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let (host, port, uri) = crate::args::http_url(&a.url).map_err(usage)?;
    let target: SocketAddr = (host.as_str(), port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host}"))?
        .find(|s| s.is_ipv4())
        .with_context(|| format!("{host} has no IPv4 address"))?;
    if !(a.resolution > 1.0 && a.resolution <= 2.0) {
        return Err(usage(format!(
            "--resolution {}: a ratio above 1 and at most 2",
            a.resolution
        )));
    }
    let mut json_out = a
        .json
        .as_deref()
        .map(|p| Sink::open("--json", p))
        .transpose()?;
    let to_stderr = a.json.as_deref() == Some(std::path::Path::new("-"));
    let say = |line: String| {
        if to_stderr {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    let spec = KneeSpec {
        steps: a.steps as u32,
        step_s: a.step,
        resolution: a.resolution,
        settle_s: (a.step * 0.2).min(0.2),
        timeout_s: 2.0,
    };
    let host_header = if port == 80 {
        host.clone()
    } else {
        format!("{host}:{port}")
    };
    let step_load = |rate: Option<f64>| -> anyhow::Result<(Stats, f64, f64)> {
        let mut cfg = LoadConfig::new(target, rate.unwrap_or(1e6), a.connections as u64);
        cfg.host = host_header.clone();
        cfg.endless = true;
        cfg.threads = a.threads;
        cfg.stop_after = Some(Duration::from_secs_f64(a.step));
        cfg.sample_interval = Duration::from_secs_f64(knee::SAMPLE_S);
        cfg.timeout = Duration::from_secs(2);
        cfg.pace = rate.map(|r| Duration::from_secs_f64(a.connections as f64 / r));
        let uri = uri.clone();
        let factory = move |_| Box::new(Fixed::new(&uri, 1)) as Box<dyn Workload>;
        let stop = AtomicBool::new(false);
        let (st, info) = gen::run(&cfg, &factory, &stop, &Live::default())?;
        let busy = (info.user_s + info.system_s) / info.duration_s.max(1e-9) / a.threads as f64;
        Ok((st, info.duration_s, busy))
    };
    say(format!(
        "evlab capacity {}: {} search(es) of {} s steps over {} connections, kept when the \
         server keeps up, p{} <= {} ms and >= {}% answered 2xx/3xx",
        a.url,
        a.trials,
        a.step,
        a.connections,
        a.slo.percentile,
        a.slo.ms,
        a.success * 100.0
    ));
    let mut searches: Vec<Search> = Vec::new();
    for trial in 1..=a.trials {
        searches.push(search(&a, &spec, trial, &step_load, &say)?);
    }
    let values: Vec<f64> = searches.iter().filter_map(|s| s.value).collect();
    let arm = Arm::of(&values);
    let objective = format!(
        "p{} <= {} ms and >= {}% answered 2xx/3xx",
        a.slo.percentile,
        a.slo.ms,
        a.success * 100.0
    );
    let mut answer = answer_line(arm.as_ref(), values.len(), a.trials, &objective);
    let bounds = searches
        .iter()
        .filter(|x| x.why.starts_with("at least"))
        .count();
    if bounds > 0 && !values.is_empty() {
        answer.push_str(&format!(
            "; {bounds} of them only a lower bound (this client could offer no more): the \
             capacity is at least this"
        ));
    }
    say(answer.clone());
    if let Some(out) = &mut json_out {
        let v = to_json(&a, &searches, &values, arm.as_ref(), &answer);
        out.write((serde_json::to_string_pretty(&v)? + "\n").as_bytes())?;
    }
    if values.is_empty() {
        eprintln!("evlab capacity: the objective ({objective}) was missed at every rate tried");
        return Err(Exit(crate::threshold::EXIT_CROSSED).into());
    }
    Ok(())
}

/// One search's steps and its answer: a capacity (or a lower bound), or none, and why.
struct Search {
    shown: Vec<Step>,
    value: Option<f64>,
    why: String,
}

/// What a step of load gives: the generator's figures, the run's length (s) and the client's
/// CPU share.
type StepLoad<'a> = dyn Fn(Option<f64>) -> anyhow::Result<(Stats, f64, f64)> + 'a;

/// One search (`trial`): a flat-out step, then the lab's bisection from 0.9 of its rate.
fn search(
    a: &Args,
    spec: &KneeSpec,
    trial: usize,
    step_load: &StepLoad,
    say: &dyn Fn(String),
) -> anyhow::Result<Search> {
    let spec = spec.clone();
    // Flat out first: what the server and this client do together bounds the search.
    let (st, d, _) = step_load(None)?;
    let flat = st.ok_replies() as f64 / d.max(1e-9);
    if flat <= 0.0 {
        anyhow::bail!(
            "trial {trial}: no request was answered 2xx/3xx at all ({} errors): is the URL right?",
            st.errors.total()
        );
    }
    let mut k = Knee {
        trial: trial as u32,
        start: flat.round(),
        start_from: "the flat-out step".into(),
        widening: FAR_WIDENING,
        ..Knee::default()
    };
    let mut shown = Vec::new();
    // The search offers at most 0.9 of the flat-out rate, so that the client has room to
    // keep its schedule: a search kept there gives a lower bound, not a capacity.
    let (floor, ceiling) = ((flat / 64.0).max(1.0), (0.9 * flat).round());
    k.start = ceiling;
    while let Some(rate) = knee::next_rate(&k, &spec, floor, ceiling) {
        let rate = rate.round().max(1.0);
        let (st, d, busy) = step_load(Some(rate))?;
        let samples: Vec<(f64, f64, u64)> = st
            .samples
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let t = i as f64 * knee::SAMPLE_S;
                (t, t + knee::SAMPLE_S, n)
            })
            .collect();
        // No reply: no latency, and no step kept.
        let latency_ms =
            summary::percentile_ms(&st.latency, a.slo.percentile).unwrap_or(f64::INFINITY);
        // Of the requests that ended (answered, or lost with their connection): those still in
        // flight when the step's window closed are neither.
        let success = st.ok_replies() as f64 / (st.replies + st.errors.total()).max(1) as f64;
        let mut step = KneeStep {
            offered: rate,
            connections: st.requests,
            replies: st.ok_replies(),
            settled_rate: knee::settled_rate(&samples, spec.settle_s, d.min(a.step)),
            p99_ms: latency_ms,
            client_cpu_busy: Some(busy),
            ..KneeStep::default()
        };
        step.kept = step.judge() && latency_ms <= a.slo.ms && success >= a.success;
        say(format!(
            "  trial {trial} step {}: {:>9.0}/s offered, {:>9.0}/s answered, p{} {:.2} ms, \
             {:.2}% 2xx/3xx, client CPU {:.0}%: {}",
            k.steps.len() + 1,
            rate,
            step.settled_rate,
            a.slo.percentile,
            latency_ms,
            success * 100.0,
            busy * 100.0,
            if step.kept { "kept" } else { "not kept" }
        ));
        k.steps.push(step.clone());
        shown.push(Step {
            step,
            latency_ms,
            success,
        });
    }
    let (value, why) = match (k.capacity(spec.resolution), k.kept(), k.failed()) {
        (Some(c), ..) => (Some(c), format!("{c:.0}/s")),
        (None, Some(lo), None) => (
            Some(lo),
            format!("at least {lo:.0}/s: kept up to the most this client offers"),
        ),
        (None, None, Some(_)) => (
            None,
            format!("none: not kept even at {floor:.0}/s, the search's floor"),
        ),
        (None, ..) => (
            None,
            format!("none: the bracket did not close in {} steps", a.steps),
        ),
    };
    say(format!("  trial {trial}: {why}"));
    Ok(Search { shown, value, why })
}

/// The answer and every step as JSON (`--json`).
fn to_json(
    a: &Args,
    searches: &[Search],
    values: &[f64],
    arm: Option<&Arm>,
    answer: &str,
) -> serde_json::Value {
    let steps: Vec<Vec<serde_json::Value>> = searches
        .iter()
        .map(|x| {
            x.shown
                .iter()
                .map(|s| {
                    json!({
                        "offered": s.step.offered,
                        "settled_rate": s.step.settled_rate,
                        "latency_ms": s.latency_ms,
                        "success": s.success,
                        "kept": s.step.kept,
                        "client_cpu_busy": s.step.client_cpu_busy,
                    })
                })
                .collect()
        })
        .collect();
    let two = values.len() >= 2;
    json!({
        "url": a.url,
        "objective": {"percentile": a.slo.percentile, "ms": a.slo.ms, "success": a.success},
        "capacity": {
            "value": arm.map(|m| m.mean),
            "lo": arm.filter(|_| two).map(|m| m.lo),
            "hi": arm.filter(|_| two).map(|m| m.hi),
            "trials": searches.iter().map(|s| s.value).collect::<Vec<_>>(),
            "why": searches.iter().map(|s| s.why.clone()).collect::<Vec<_>>(),
            "steps": steps,
        },
        "answer": answer,
    })
}

/// The one line of answer: the capacity with its interval over the searches that gave one.
fn answer_line(arm: Option<&Arm>, closed: usize, trials: usize, objective: &str) -> String {
    match arm {
        Some(m) if closed >= 2 => format!(
        "capacity: {:.0} requests/s [90%: {:.0}–{:.0}] over {} of {} searches, under {objective}",
        m.mean,
        m.lo,
        m.hi,
        closed,
        trials
    ),
        Some(m) => format!(
            "capacity: {:.0} requests/s from {} of {} searches (no interval), under {objective}",
            m.mean, closed, trials
        ),
        None => format!("no capacity: no search kept any rate under {objective}"),
    }
}
