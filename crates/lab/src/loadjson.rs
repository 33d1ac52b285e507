//! The one place that knows the shape of `evlab load --json` and `--samples` output.
//!
//! The load generator's report is its own crate's business (`crates/load/src/summary.rs`); the
//! runner reads only the fields below, through lookups that accept a few spellings, so that a
//! renamed field means editing one table here rather than the runner. A field that is missing
//! stays `None` and shows as blank in the report rather than as a made-up zero.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the runner needs from one `evlab load` run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LoadSummary {
    /// Offered request rate (requests/s), as the generator scheduled it.
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

/// What one measured run of `evlab load` is asked to do.
pub struct LoadArgs<'a> {
    pub port: u16,
    pub workload: &'a crate::spec::Workload,
    /// Document root or file set (for `specweb`).
    pub docroot: &'a std::path::Path,
    pub rate: f64,
    pub duration_s: f64,
    pub calls_per_conn: u32,
    pub timeout_s: f64,
    pub json: &'a std::path::Path,
    pub samples: &'a std::path::Path,
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
        // Points are seconds long, not httperf's minutes: sample the reply rate every second.
        "--sample-interval".into(),
        "1".into(),
        "--quiet".into(),
    ];
    match a.workload {
        crate::spec::Workload::OneByte => v.extend(["--uri".into(), "/one".into()]),
        crate::spec::Workload::Specweb => {
            v.extend(["--specweb".into(), a.docroot.display().to_string()])
        }
        crate::spec::Workload::UriList(p) => {
            v.extend(["--uri-list".into(), p.display().to_string()])
        }
    }
    let conns = (a.rate * a.duration_s).ceil().max(1.0) as u64;
    v.extend([
        "--rate".into(),
        fmt_num(a.rate),
        "--num-conns".into(),
        conns.to_string(),
    ]);
    if a.workload != &crate::spec::Workload::Specweb {
        // SPECweb99 sessions draw their own number of requests.
        v.extend(["--num-calls".into(), a.calls_per_conn.to_string()]);
    }
    v.extend([
        "--timeout".into(),
        fmt_num(a.timeout_s),
        "--json".into(),
        a.json.display().to_string(),
        "--samples".into(),
        a.samples.display().to_string(),
    ]);
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

fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

fn f(v: &Value, paths: &[&str]) -> Option<f64> {
    paths.iter().find_map(|p| at(v, p).and_then(Value::as_f64))
}

fn u(v: &Value, paths: &[&str]) -> Option<u64> {
    paths.iter().find_map(|p| {
        at(v, p).and_then(|x| x.as_u64().or_else(|| x.as_f64().map(|f| f.round() as u64)))
    })
}

/// Latency in milliseconds; the generator may report µs, ms or s (the key says which).
fn lat(v: &Value, names: &[&str]) -> Option<f64> {
    for base in ["latency", "reply_time", "latency_ms", "latency_us"] {
        for n in names {
            let Some(x) = at(v, &format!("{base}.{n}")).and_then(Value::as_f64) else {
                continue;
            };
            return Some(match base {
                "latency_us" => x / 1000.0,
                _ => x,
            });
        }
        for n in names {
            for (suffix, scale) in [("_ms", 1.0), ("_us", 1e-3), ("_s", 1e3)] {
                if let Some(x) = at(v, &format!("{base}.{n}{suffix}")).and_then(Value::as_f64) {
                    return Some(x * scale);
                }
            }
        }
    }
    None
}

pub fn parse_summary(v: &Value) -> LoadSummary {
    let e = |names: &[&str]| {
        let paths: Vec<String> = names
            .iter()
            .flat_map(|n| {
                [
                    format!("errors.{n}"),
                    format!("errors.{}", n.replace('-', "_")),
                ]
            })
            .collect();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        u(v, &refs)
    };
    LoadSummary {
        offered_rate: f(
            v,
            &[
                "offered_rate",
                "request_rate.offered",
                "rate.offered",
                "config.rate",
                "rate",
            ],
        ),
        conn_rate: f(v, &["connection_rate.avg", "conn_rate", "connections.rate"]),
        reply_rate_avg: f(
            v,
            &["reply_rate.avg", "reply_rate.mean", "replies.rate.avg"],
        ),
        reply_rate_min: f(v, &["reply_rate.min", "replies.rate.min"]),
        reply_rate_max: f(v, &["reply_rate.max", "replies.rate.max"]),
        reply_rate_stddev: f(
            v,
            &["reply_rate.stddev", "reply_rate.sd", "replies.rate.stddev"],
        ),
        replies: u(v, &["replies.total", "replies", "responses.total"]),
        requests: u(v, &["requests.sent", "requests.total", "requests"]),
        connections: u(
            v,
            &[
                "connections.initiated",
                "connections.total",
                "connections",
                "conns",
            ],
        ),
        status_2xx: u(v, &["replies.2xx", "status.2xx", "replies.status.2xx"]),
        duration_s: f(v, &["duration_s", "elapsed_s", "test_duration_s"]),
        errors: Errors {
            total: e(&["total"]),
            client_timo: e(&["client-timo", "timeout"]),
            connrefused: e(&["connrefused"]),
            connreset: e(&["connreset"]),
            fd_unavail: e(&["fd-unavail"]),
            addrunavail: e(&["addrunavail"]),
            ftab_full: e(&["ftab-full"]),
            other: e(&["other"]),
        },
        latency_ms: Latency {
            p50: lat(v, &["p50", "median"]),
            p90: lat(v, &["p90"]),
            p99: lat(v, &["p99"]),
            p999: lat(v, &["p999", "p99_9"]),
            max: lat(v, &["max"]),
            mean: lat(v, &["mean", "avg"]),
        },
        late_starts: u(
            v,
            &[
                "late_starts.count",
                "late_starts",
                "schedule.late_starts",
                "connections.late",
            ],
        ),
        schedule: Schedule {
            offered_rate: f(v, &["schedule.offered_rate", "config.rate"]),
            achieved_start_rate: f(v, &["schedule.achieved_start_rate"]),
            late_p50_ms: f(v, &["schedule.lateness_ms.p50"]),
            late_p99_ms: f(v, &["schedule.lateness_ms.p99"]),
            late_max_ms: f(v, &["schedule.lateness_ms.max", "late_starts.max_ms"]),
            end_lag_ms: f(v, &["schedule.end_lag_ms"]),
            lag_ms: at(v, "schedule.lag_ms")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default(),
        },
        client_cpu: f(v, &["cpu.total", "client_cpu", "cpu.utilization"])
            .or_else(|| f(v, &["cpu.percent"]).map(|p| p / 100.0)),
    }
}

/// Reads `--samples FILE`: CSV with a header row, or JSON (an array, or one object a line).
pub fn parse_samples(text: &str) -> Vec<Sample> {
    let t = text.trim_start();
    if t.starts_with('[') {
        if let Ok(Value::Array(a)) = serde_json::from_str::<Value>(t) {
            return a.iter().map(sample_from_json).collect();
        }
    }
    if t.starts_with('{') {
        return t
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| sample_from_json(&v))
            .collect();
    }
    let mut lines = t
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'));
    let Some(header) = lines.next() else {
        return vec![];
    };
    let cols: Vec<String> = header.split(',').map(|c| c.trim().to_lowercase()).collect();
    let find = |names: &[&str]| names.iter().find_map(|n| cols.iter().position(|c| c == n));
    let ti = find(&["t_s", "t", "time_s", "time", "end_s"]);
    let ri = find(&["reply_rate", "replies_per_s", "replies/s"]);
    let ci = find(&["conn_rate", "connection_rate"]);
    let ei = find(&["errors"]);
    let pi = find(&["p99_ms", "p99"]);
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').map(str::trim).collect();
            let num = |i: Option<usize>| i.and_then(|i| cells.get(i)).and_then(|c| c.parse().ok());
            Sample {
                t_s: num(ti).unwrap_or(0.0),
                reply_rate: num(ri),
                conn_rate: num(ci),
                errors: num(ei),
                p99_ms: num(pi),
            }
        })
        .collect()
}

fn sample_from_json(v: &Value) -> Sample {
    Sample {
        t_s: f(v, &["t_s", "t", "time_s", "end_s"]).unwrap_or(0.0),
        reply_rate: f(v, &["reply_rate", "replies_per_s"]),
        conn_rate: f(v, &["conn_rate", "connection_rate"]),
        errors: f(v, &["errors"]),
        p99_ms: f(v, &["p99_ms", "latency.p99_ms"]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_nested_fields_and_error_spellings() {
        let v = json!({
            "offered_rate": 1000.0,
            "reply_rate": {"avg": 990.5, "min": 980.0, "max": 1000.0, "stddev": 3.0},
            "replies": {"total": 9905, "2xx": 9905},
            "errors": {"client_timo": 3, "fd-unavail": 1, "total": 4},
            "latency": {"p99_ms": 1.5, "p50_us": 200.0},
            "late_starts": 7
        });
        let s = parse_summary(&v);
        assert_eq!(s.offered_rate, Some(1000.0));
        assert_eq!(s.reply_rate_avg, Some(990.5));
        assert_eq!(s.replies, Some(9905));
        assert_eq!(s.errors.client_timo, Some(3));
        assert_eq!(s.errors.fd_unavail, Some(1));
        assert_eq!(s.errors.sum(), 4);
        assert_eq!(s.latency_ms.p99, Some(1.5));
        assert_eq!(s.latency_ms.p50, Some(0.2));
        assert_eq!(s.late_starts, Some(7));
        assert_eq!(s.latency_ms.max, None);
    }

    #[test]
    fn samples_csv_and_json_lines() {
        let csv = "t_s,reply_rate,conn_rate,errors\n1,100,100,0\n2,98.5,100,1\n";
        let s = parse_samples(csv);
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].reply_rate, Some(98.5));
        let jl = "{\"t_s\":1,\"reply_rate\":5}\n{\"t_s\":2,\"reply_rate\":6}\n";
        let s = parse_samples(jl);
        assert_eq!(s[1].t_s, 2.0);
        assert_eq!(s[1].reply_rate, Some(6.0));
    }
}
