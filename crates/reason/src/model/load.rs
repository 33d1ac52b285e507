//! The lab's side of `evlab load --json` and `GET /.evlab/stats`: both are read into the types
//! their producers serialize, defined in `evlab-wire` ([`LoadReport`], [`ServerStats`]), so a
//! field that is renamed or missing is an error naming it, not a guess or a made-up zero. The
//! processes stay separate; only the types are shared, and the lab depends on neither engine.
//!
//! [`LoadSummary`] is what a point keeps of the generator's report in `summary.json`. Its fields
//! are optional because `evlab report` also reads results written before every field existed;
//! from a [`LoadReport`] each is filled, but for the achieved start rate, which a run of fewer
//! than two starts does not have.

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use evlab_wire::load::LoadReport;
pub use evlab_wire::server::ServerStats;

use crate::LabError;

/// Reads the report `evlab load --json` wrote. `what` names it in the error, as does the
/// missing or malformed field.
pub fn parse_report(text: &str, what: &str) -> Result<LoadReport, LabError> {
    serde_json::from_str(text)
        .map_err(|e| LabError::Point(format!("{what} is not a report of evlab load: {e}")))
}

/// Reads the document `GET /.evlab/stats` answered.
pub fn parse_server_stats(text: &str) -> Result<ServerStats, LabError> {
    serde_json::from_str(text)
        .map_err(|e| LabError::Point(format!("/.evlab/stats is not evlab serve's stats: {e}")))
}

/// Reads the report file `path`.
pub fn read_report(path: &Path) -> Result<(LoadReport, String), LabError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        LabError::Point(format!(
            "evlab load wrote no JSON ({}): {e}",
            path.display()
        ))
    })?;
    let r = parse_report(&text, &format!("{}", path.display()))?;
    Ok((r, text))
}

/// What the runner needs from one `evlab load` run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LoadSummary {
    /// Offered rate (connections/s, `--rate`), as the generator scheduled it.
    pub offered_rate: Option<f64>,
    pub conn_rate: Option<f64>,
    pub reply_rate_avg: Option<f64>,
    pub reply_rate_min: Option<f64>,
    pub reply_rate_max: Option<f64>,
    pub reply_rate_stddev: Option<f64>,
    pub replies: Option<u64>,
    pub requests: Option<u64>,
    pub connections: Option<u64>,
    pub status_2xx: Option<u64>,
    pub duration_s: Option<f64>,
    pub errors: Errors,
    pub latency_ms: Latency,
    pub late_starts: Option<u64>,
    /// How the generator kept its schedule.
    #[serde(default)]
    pub schedule: Schedule,
    /// Client CPU as the generator reports it (fraction of one CPU × threads, 0..n).
    pub client_cpu: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Errors {
    pub total: Option<u64>,
    pub client_timo: Option<u64>,
    pub connrefused: Option<u64>,
    pub connreset: Option<u64>,
    pub fd_unavail: Option<u64>,
    pub addrunavail: Option<u64>,
    pub ftab_full: Option<u64>,
    pub other: Option<u64>,
}

impl Errors {
    /// Names as httperf prints them, with the count.
    pub fn named(&self) -> [(&'static str, Option<u64>); 7] {
        [
            ("client-timo", self.client_timo),
            ("connrefused", self.connrefused),
            ("connreset", self.connreset),
            ("fd-unavail", self.fd_unavail),
            ("addrunavail", self.addrunavail),
            ("ftab-full", self.ftab_full),
            ("other", self.other),
        ]
    }

    pub fn sum(&self) -> u64 {
        self.total
            .unwrap_or_else(|| self.named().iter().filter_map(|(_, v)| *v).sum())
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
}

/// The generator's schedule: how late its starts were and whether it kept up.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Schedule {
    /// Connections per second asked for.
    pub offered_rate: Option<f64>,
    /// Connections per second between the first slot and the last actual start.
    pub achieved_start_rate: Option<f64>,
    pub late_p50_ms: Option<f64>,
    pub late_p99_ms: Option<f64>,
    pub late_max_ms: Option<f64>,
    /// How far behind its slot the last start was.
    pub end_lag_ms: Option<f64>,
    /// The largest lateness in each sample interval.
    #[serde(default)]
    pub lag_ms: Vec<f64>,
}

/// One sample interval of a run (httperf samples the reply rate every 5 s; evlab's generator
/// lets the interval be chosen).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Sample {
    /// Seconds since the start of the run, at the end of the interval.
    pub t_s: f64,
    pub reply_rate: Option<f64>,
    pub conn_rate: Option<f64>,
    pub errors: Option<f64>,
    pub p99_ms: Option<f64>,
}

impl From<&LoadReport> for LoadSummary {
    fn from(r: &LoadReport) -> LoadSummary {
        let e = &r.errors.by_cause;
        LoadSummary {
            offered_rate: Some(r.config.rate),
            conn_rate: Some(r.connections.rate),
            reply_rate_avg: Some(r.replies.rate.avg),
            reply_rate_min: Some(r.replies.rate.min),
            reply_rate_max: Some(r.replies.rate.max),
            reply_rate_stddev: Some(r.replies.rate.stddev),
            replies: Some(r.replies.total),
            requests: Some(r.requests.sent),
            connections: Some(r.connections.initiated),
            status_2xx: Some(r.replies.status.s2xx),
            duration_s: Some(r.duration_s),
            errors: Errors {
                total: Some(r.errors.total),
                client_timo: Some(e.client_timo),
                connrefused: Some(e.connrefused),
                connreset: Some(e.connreset),
                fd_unavail: Some(e.fd_unavail),
                addrunavail: Some(e.addrunavail),
                ftab_full: Some(e.ftab_full),
                other: Some(e.other),
            },
            latency_ms: Latency {
                p50: Some(r.latency_ms.p50),
                p90: Some(r.latency_ms.p90),
                p99: Some(r.latency_ms.p99),
                p999: Some(r.latency_ms.p999),
                max: Some(r.latency_ms.max),
                mean: Some(r.latency_ms.mean),
            },
            late_starts: Some(r.late_starts.count),
            schedule: Schedule {
                offered_rate: Some(r.schedule.offered_rate),
                achieved_start_rate: r.schedule.achieved_start_rate,
                late_p50_ms: Some(r.schedule.lateness_ms.p50),
                late_p99_ms: Some(r.schedule.lateness_ms.p99),
                late_max_ms: Some(r.schedule.lateness_ms.max),
                end_lag_ms: Some(r.schedule.end_lag_ms),
                lag_ms: r.schedule.lag_ms.clone(),
            },
            client_cpu: Some(r.cpu.percent / 100.0),
        }
    }
}

/// The report's sample intervals, as a point keeps them (the generator reports the reply rate
/// only; the other columns of `samples.csv` stay empty).
pub fn samples(r: &LoadReport) -> Vec<Sample> {
    r.samples
        .iter()
        .map(|x| Sample {
            t_s: x.end_s,
            reply_rate: Some(x.reply_rate),
            ..Sample::default()
        })
        .collect()
}

/// What a point keeps of several clients' reports merged (`evlab_wire::merge`): counts added,
/// percentiles from the added histograms, the reply rate over the clients' common window; the
/// schedule's offered and achieved start rates summed, its lateness the worst client's.
/// `reports` are the merged ones, in the merge's order.
pub fn merged_summary(m: &evlab_wire::merge::MergedLoad, reports: &[LoadReport]) -> LoadSummary {
    let e = &m.errors.by_cause;
    let max = |f: &dyn Fn(&LoadReport) -> f64| reports.iter().map(f).fold(0.0, f64::max);
    let achieved: Option<f64> = reports.iter().map(|r| r.schedule.achieved_start_rate).sum();
    let longest = reports
        .iter()
        .map(|r| r.schedule.lag_ms.len())
        .max()
        .unwrap_or(0);
    let lag_ms = (0..longest)
        .map(|i| max(&|r: &LoadReport| r.schedule.lag_ms.get(i).copied().unwrap_or(0.0)))
        .collect();
    LoadSummary {
        offered_rate: Some(m.rates.offered_rate_sum),
        conn_rate: Some(m.rates.connection_rate_sum),
        reply_rate_avg: Some(m.rates.window_reply_rate),
        reply_rate_min: None,
        reply_rate_max: None,
        reply_rate_stddev: None,
        replies: Some(m.replies.total),
        requests: Some(m.requests.sent),
        connections: Some(m.connections.initiated),
        status_2xx: Some(m.replies.status.s2xx),
        duration_s: Some(m.window.duration_s),
        errors: Errors {
            total: Some(m.errors.total),
            client_timo: Some(e.client_timo),
            connrefused: Some(e.connrefused),
            connreset: Some(e.connreset),
            fd_unavail: Some(e.fd_unavail),
            addrunavail: Some(e.addrunavail),
            ftab_full: Some(e.ftab_full),
            other: Some(e.other),
        },
        latency_ms: Latency {
            p50: Some(m.latency_ms.p50),
            p90: Some(m.latency_ms.p90),
            p99: Some(m.latency_ms.p99),
            p999: Some(m.latency_ms.p999),
            max: Some(m.latency_ms.max),
            mean: Some(m.latency_ms.mean),
        },
        late_starts: Some(m.late_starts.count),
        schedule: Schedule {
            offered_rate: Some(m.rates.offered_rate_sum),
            achieved_start_rate: achieved,
            late_p50_ms: Some(max(&|r| r.schedule.lateness_ms.p50)),
            late_p99_ms: Some(max(&|r| r.schedule.lateness_ms.p99)),
            late_max_ms: Some(max(&|r| r.schedule.lateness_ms.max)),
            end_lag_ms: Some(max(&|r| r.schedule.end_lag_ms)),
            lag_ms,
        },
        client_cpu: Some(reports.iter().map(|r| r.cpu.percent / 100.0).sum()),
    }
}

/// The sample intervals of clients that started together, added interval by interval (their
/// reply rates summed).
pub fn merged_samples(reports: &[LoadReport]) -> Vec<Sample> {
    let mut out: Vec<Sample> = Vec::new();
    for r in reports {
        for (i, x) in samples(r).into_iter().enumerate() {
            match out.get_mut(i) {
                Some(s) => {
                    s.reply_rate = Some(s.reply_rate.unwrap_or(0.0) + x.reply_rate.unwrap_or(0.0))
                }
                None => out.push(x),
            }
        }
    }
    out
}

/// What one measured run of `evlab load` is asked to do.
pub struct LoadArgs<'a> {
    pub port: u16,
    pub workload: &'a crate::model::spec::Workload,
    /// Document root or file set (for `specweb`).
    pub docroot: &'a std::path::Path,
    pub rate: f64,
    pub duration_s: f64,
    pub calls_per_conn: u32,
    /// A fixed number of connections (httperf's `--num-conns`) instead of rate × duration.
    pub active_conns: Option<u64>,
    pub timeout_s: f64,
    /// The reply rate's sampling interval (s).
    pub sample_interval_s: f64,
    pub json: &'a std::path::Path,
    /// `--latencies FILE`: every reply kept.
    pub latencies: Option<&'a std::path::Path>,
    /// `--stop-after SECS`: the run ends then, whatever is in flight.
    pub stop_after_s: Option<f64>,
    pub extra: &'a [String],
}

/// The `evlab load` arguments (after the binary) for one run: httperf's model, a fixed number
/// of connections at a fixed rate (`--num-conns` = rate × duration, as httperf users size runs).
pub fn load_argv(a: &LoadArgs) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "load".into(),
        "--server".into(),
        "127.0.0.1".into(),
        "--port".into(),
        a.port.to_string(),
        // Points are seconds long, not httperf's minutes: sample the reply rate every second
        // (a capacity search's steps every tenth of one).
        "--sample-interval".into(),
        fmt_num(a.sample_interval_s),
        "--quiet".into(),
        // A point with no replies, or past the load's default thresholds (a point past its
        // knee is by design), is a measurement the lab judges, not a failed command.
        "--allow-no-replies".into(),
        "--threshold".into(),
        "none".into(),
    ];
    match a.workload {
        crate::model::spec::Workload::OneByte => v.extend(["--uri".into(), "/one".into()]),
        crate::model::spec::Workload::Specweb => {
            v.extend(["--specweb".into(), a.docroot.display().to_string()])
        }
        crate::model::spec::Workload::UriList(p) => {
            v.extend(["--uri-list".into(), p.display().to_string()])
        }
        crate::model::spec::Workload::Polymix => {
            v.extend(["--polymix".into(), a.docroot.display().to_string()])
        }
    }
    let conns = a
        .active_conns
        .unwrap_or_else(|| (a.rate * a.duration_s).ceil().max(1.0) as u64);
    v.extend([
        "--rate".into(),
        fmt_num(a.rate),
        "--num-conns".into(),
        conns.to_string(),
    ]);
    if !matches!(
        a.workload,
        crate::model::spec::Workload::Specweb | crate::model::spec::Workload::Polymix
    ) {
        // SPECweb99 and Polymix sessions draw their own number of requests.
        v.extend(["--num-calls".into(), a.calls_per_conn.to_string()]);
    }
    v.extend([
        "--timeout".into(),
        fmt_num(a.timeout_s),
        "--json".into(),
        a.json.display().to_string(),
    ]);
    if let Some(l) = a.latencies {
        v.extend(["--latencies".into(), l.display().to_string()]);
    }
    if let Some(s) = a.stop_after_s {
        v.extend(["--stop-after".into(), fmt_num(s)]);
    }
    v.extend(a.extra.iter().cloned());
    v
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_conns_replace_rate_times_duration() {
        let wl = crate::model::spec::Workload::OneByte;
        let p = std::path::Path::new("/tmp/x.json");
        let mut a = LoadArgs {
            port: 8080,
            workload: &wl,
            docroot: p,
            rate: 100.0,
            duration_s: 20.0,
            calls_per_conn: 300,
            active_conns: None,
            timeout_s: 5.0,
            sample_interval_s: 1.0,
            json: p,
            latencies: None,
            stop_after_s: None,
            extra: &[],
        };
        let after = |v: &[String], flag: &str| {
            let i = v.iter().position(|x| x == flag).unwrap();
            v[i + 1].clone()
        };
        let v = load_argv(&a);
        assert_eq!(after(&v, "--num-conns"), "2000");
        a.active_conns = Some(100);
        let v = load_argv(&a);
        assert_eq!(after(&v, "--num-conns"), "100");
        assert_eq!(after(&v, "--num-calls"), "300");
        assert_eq!(after(&v, "--rate"), "100");
    }

    /// A report as `evlab load` wrote it (`evlab_load::summary::report`) for a made-up run:
    /// 3,000 connections at 1,000/s over 3 s, one of them started 40 ms late; 2,990 replies 2xx
    /// and 10 5xx; two client timeouts and one fd-unavail error.
    fn report() -> LoadReport {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/load-report.json"
        ));
        parse_report(text, "tests/data/load-report.json").unwrap()
    }

    #[test]
    fn polymix_load_argv_names_the_set_and_draws_its_own_calls() {
        let json = std::path::PathBuf::from("/tmp/x.json");
        let v = load_argv(&LoadArgs {
            port: 9,
            workload: &crate::model::spec::Workload::Polymix,
            docroot: std::path::Path::new("/srv/pm"),
            rate: 20.0,
            duration_s: 2.0,
            calls_per_conn: 1,
            timeout_s: 5.0,
            sample_interval_s: 1.0,
            json: &json,
            latencies: None,
            stop_after_s: None,
            extra: &["--hit-ratio".into(), "0".into()],
            active_conns: None,
        });
        let line = v.join(" ");
        assert!(line.contains("--polymix /srv/pm"), "{line}");
        assert!(!line.contains("--num-calls"), "{line}");
        assert!(line.ends_with("--hit-ratio 0"), "{line}");
    }

    #[test]
    fn a_report_round_trips_and_sums_up() {
        let r = report();
        let text = serde_json::to_string_pretty(&r).unwrap();
        let back = parse_report(&text, "test").unwrap();
        assert_eq!(back, r);
        let s = LoadSummary::from(&back);
        assert_eq!(s.offered_rate, Some(1000.0));
        assert_eq!(s.replies, Some(3000));
        assert_eq!(s.status_2xx, Some(2990));
        assert_eq!(s.connections, Some(3000));
        assert_eq!(s.errors.client_timo, Some(2));
        assert_eq!(s.errors.fd_unavail, Some(1));
        assert_eq!(s.errors.sum(), 3);
        assert_eq!(s.reply_rate_avg, Some(1000.0));
        assert!((s.client_cpu.unwrap() - 0.3).abs() < 1e-9);
        assert_eq!(s.late_starts, Some(1));
        assert_eq!(s.schedule.late_max_ms, Some(40.0));
        assert_eq!(s.schedule.lag_ms, vec![0.02, 40.0, 0.02]);
        assert!(s.schedule.achieved_start_rate.unwrap() > 990.0);
        let p99 = s.latency_ms.p99.unwrap();
        assert!((0.9..=1.0).contains(&p99), "{p99}");
        let x = samples(&back);
        assert_eq!(x.len(), 3);
        assert_eq!((x[2].t_s, x[2].reply_rate), (3.0, Some(1000.0)));
    }

    /// Removes `path` (dot-separated) from the JSON text of a report: raw on purpose, a
    /// document the type cannot write.
    fn without(r: &LoadReport, path: &str) -> String {
        let mut v = serde_json::to_value(r).unwrap();
        let (parent, last) = path.rsplit_once('.').unwrap_or(("", path));
        let mut o = &mut v;
        for k in parent.split('.').filter(|k| !k.is_empty()) {
            o = &mut o[k];
        }
        assert!(o.as_object_mut().unwrap().remove(last).is_some(), "{path}");
        v.to_string()
    }

    #[test]
    fn a_missing_field_is_an_error_that_names_it() {
        let r = report();
        for (path, field) in [
            ("schedule.end_lag_ms", "end_lag_ms"),
            ("replies.status.2xx", "2xx"),
            ("errors.fd_unavail", "fd_unavail"),
            ("latency_ms", "latency_ms"),
        ] {
            let e = parse_report(&without(&r, path), "load-run.json").unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("missing field `{field}`")),
                "{path}: {msg}"
            );
            assert!(msg.contains("load-run.json"), "{msg}");
        }
        // An achieved start rate is legitimately absent (fewer than two starts).
        let back = parse_report(&without(&r, "schedule.achieved_start_rate"), "x").unwrap();
        assert_eq!(back.schedule.achieved_start_rate, None);
    }
}
