//! Pass/fail criteria of an `evlab load` run, as k6's thresholds are: `p99<20ms`,
//! `errors<0.1%`, `rate>0.99`, each judged on the whole run once it is over. Unless told
//! `--threshold none`, a run also keeps two defaults: at most 1% of its connections may end in
//! an error (refused, reset, timed out), and at most 1% of its replies may have a status other
//! than 2xx or 3xx. A run past any threshold exits [`EXIT_CROSSED`], saying which.

use evlab_load::summary::{self, Stats};

/// The exit status of a run past a threshold (k6's).
pub const EXIT_CROSSED: i32 = 99;

/// The defaults, unless `--threshold none` (a metric given explicitly replaces its default).
pub const DEFAULTS: [&str; 2] = ["errors<=1%", "failed<=1%"];

/// What a threshold reads of the run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    /// The latency at this percentile (100: the largest), in milliseconds.
    Latency(f64),
    /// Connections that ended in an error (refused, reset, timed out, …), over those started.
    Errors,
    /// Replies with a status other than 2xx or 3xx, over the replies.
    Failed,
    /// Requests answered with a 2xx or 3xx, over the requests sent: the success rate.
    Rate,
    /// 2xx and 3xx replies per second over the run.
    Rps,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub metric: Metric,
    op: Op,
    /// Milliseconds for latency, a share (0–1) for errors, failed and rate, per second for rps.
    value: f64,
    /// As given.
    pub text: String,
}

const METRICS: &str = "p50, p90, p99, p99.9 (any percentile pN), max, errors, failed, rate, rps";

impl std::str::FromStr for Threshold {
    type Err = String;

    fn from_str(s: &str) -> Result<Threshold, String> {
        let t = s.trim();
        let at = t.find(['<', '>']).ok_or_else(|| {
            format!("'{s}' is not a threshold: give METRIC<VALUE or METRIC>VALUE (<=, >= too), e.g. 'p99<20ms', 'errors<0.1%', 'rate>0.99'")
        })?;
        let (name, rest) = (t[..at].trim(), &t[at..]);
        let (op, value) = match rest {
            r if r.starts_with("<=") => (Op::Le, &r[2..]),
            r if r.starts_with(">=") => (Op::Ge, &r[2..]),
            r if r.starts_with('<') => (Op::Lt, &r[1..]),
            r => (Op::Gt, &r[1..]),
        };
        let metric = match name {
            "max" => Metric::Latency(100.0),
            "errors" => Metric::Errors,
            "failed" => Metric::Failed,
            "rate" => Metric::Rate,
            "rps" => Metric::Rps,
            n => match n.strip_prefix('p').map(str::parse::<f64>) {
                Some(Ok(p)) if p > 0.0 && p <= 100.0 => Metric::Latency(p),
                _ => return Err(format!("'{s}': no metric '{name}' (metrics: {METRICS})")),
            },
        };
        let value = value.trim();
        let value = match metric {
            Metric::Latency(_) => crate::args::millis(value)
                .map_err(|e| format!("'{s}': {e} (a latency: 20ms, 1.5s; plain: ms)"))?,
            Metric::Errors | Metric::Failed | Metric::Rate => {
                crate::args::share(value).map_err(|e| format!("'{s}': {e}"))?
            }
            Metric::Rps => value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("'{s}': '{value}' is not a number of replies per second"))?,
        };
        Ok(Threshold {
            metric,
            op,
            value,
            text: t.to_string(),
        })
    }
}

/// The thresholds of a run: those given (`none` drops the defaults), `--max-error-rate` as
/// `errors<=SHARE`, and the defaults for the metrics not given.
pub fn resolve(given: &[String], max_error_rate: Option<f64>) -> Result<Vec<Threshold>, String> {
    let none = given.iter().any(|g| g.trim() == "none");
    let mut out: Vec<Threshold> = given
        .iter()
        .filter(|g| g.trim() != "none")
        .map(|g| g.parse())
        .collect::<Result<_, _>>()?;
    if let Some(m) = max_error_rate {
        out.push(Threshold {
            metric: Metric::Errors,
            op: Op::Le,
            value: m,
            text: format!("errors<={}% (--max-error-rate)", m * 100.0),
        });
    }
    if !none {
        for d in DEFAULTS {
            let t: Threshold = d.parse().expect("the defaults parse");
            if !out.iter().any(|o| o.metric == t.metric) {
                out.push(t);
            }
        }
    }
    Ok(out)
}

impl Threshold {
    /// What the run measured of this metric, in the threshold's unit; None when it cannot say
    /// (no reply, hence no latency; nothing started).
    pub fn measured(&self, s: &Stats, duration_s: f64) -> Option<f64> {
        let ok = s.ok_replies();
        let ratio = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
        match self.metric {
            Metric::Latency(p) => summary::percentile_ms(&s.latency, p),
            Metric::Errors => ratio(s.errors.total(), s.initiated),
            Metric::Failed => ratio(s.replies - ok.min(s.replies), s.replies),
            Metric::Rate => ratio(ok, s.requests),
            Metric::Rps => (duration_s > 0.0).then(|| ok as f64 / duration_s),
        }
    }

    /// Whether `v` keeps to the threshold.
    fn holds(&self, v: f64) -> bool {
        match self.op {
            Op::Lt => v < self.value,
            Op::Le => v <= self.value,
            Op::Gt => v > self.value,
            Op::Ge => v >= self.value,
        }
    }

    /// `v` as the threshold's metric is written: `12.3 ms`, `2.41%`, `1,234/s`.
    fn show(&self, v: f64) -> String {
        match self.metric {
            Metric::Latency(_) => format!("{v:.2} ms"),
            Metric::Errors | Metric::Failed | Metric::Rate => format!("{:.2}%", v * 100.0),
            Metric::Rps => format!("{v:.0}/s"),
        }
    }
}

/// The thresholds the run crossed, each as `errors 67.21% (errors<=1%)`. A metric the run
/// cannot measure (a latency with no reply) crosses none: "no reply" is its own failure.
pub fn crossed(ts: &[Threshold], s: &Stats, duration_s: f64) -> Vec<String> {
    ts.iter()
        .filter_map(|t| {
            let v = t.measured(s, duration_s)?;
            (!t.holds(v)).then(|| {
                let name = t.text.split(['<', '>']).next().unwrap_or("").trim();
                format!("{name} {} (threshold {})", t.show(v), t.text)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(initiated: u64, errors: u64, replies: [u64; 6], latencies_us: &[u64]) -> Stats {
        let mut s = Stats {
            initiated,
            status: replies,
            replies: replies.iter().sum(),
            requests: replies.iter().sum(),
            ..Stats::default()
        };
        s.errors.connrefused = errors;
        for &l in latencies_us {
            s.latency.record(l).unwrap();
        }
        s
    }

    #[test]
    fn thresholds_parse_as_k6_writes_them_and_refuse_the_rest() {
        let t: Threshold = "p99<20ms".parse().unwrap();
        assert_eq!(
            (t.metric, t.op, t.value),
            (Metric::Latency(99.0), Op::Lt, 20.0)
        );
        let t: Threshold = "p99.9 <= 1.5s".parse().unwrap();
        assert_eq!(
            (t.metric, t.op, t.value),
            (Metric::Latency(99.9), Op::Le, 1500.0)
        );
        let t: Threshold = "errors<0.1%".parse().unwrap();
        assert_eq!((t.metric, t.value), (Metric::Errors, 0.001));
        let t: Threshold = "rate>0.99".parse().unwrap();
        assert_eq!((t.metric, t.op, t.value), (Metric::Rate, Op::Gt, 0.99));
        let t: Threshold = "rps>=1000".parse().unwrap();
        assert_eq!((t.metric, t.op), (Metric::Rps, Op::Ge));
        assert_eq!(
            "max<1s".parse::<Threshold>().unwrap().metric,
            Metric::Latency(100.0)
        );
        for (bad, says) in [
            ("p99", "METRIC<VALUE"),
            ("p101<2", "no metric"),
            ("latency<2", "no metric"),
            ("errors<2", "not a share"),
            ("errors<-1%", "not a share"),
            ("p99<fast", "not a duration"),
            ("rps>lots", "replies per second"),
        ] {
            let e = bad.parse::<Threshold>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn the_defaults_hold_unless_none_or_replaced() {
        let ts = resolve(&[], None).unwrap();
        assert_eq!(ts.len(), 2);
        assert!(resolve(&["none".into()], None).unwrap().is_empty());
        let ts = resolve(&["errors<5%".into()], None).unwrap();
        assert_eq!(ts.len(), 2, "errors<5% replaces errors<=1%: {ts:?}");
        assert!(ts.iter().any(|t| t.text == "errors<5%"));
        let ts = resolve(&["none".into(), "p99<20ms".into()], Some(0.02)).unwrap();
        assert_eq!(ts.len(), 2);
        assert!(ts
            .iter()
            .any(|t| t.metric == Metric::Errors && t.value == 0.02));
        assert!(resolve(&["x".into()], None).is_err());
    }

    #[test]
    fn a_run_past_a_threshold_says_which_and_by_how_much() {
        let ts = resolve(&["p99<20ms".into(), "rate>0.99".into()], None).unwrap();
        // 67% of connections refused, the rest answered quickly with 200.
        let s = stats(300, 201, [0, 0, 99, 0, 0, 0], &[1_000; 99]);
        let c = crossed(&ts, &s, 3.0);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(c[0].starts_with("errors 67.00%"), "{c:?}");
        // Only 404s: every reply failed, and none succeeded.
        let s = stats(100, 0, [0, 0, 0, 0, 100, 0], &[1_000; 100]);
        let c = crossed(&ts, &s, 1.0);
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(c.iter().any(|x| x.starts_with("failed 100.00%")), "{c:?}");
        assert!(c.iter().any(|x| x.starts_with("rate 0.00%")), "{c:?}");
        // Slow replies cross the latency threshold; a clean, quick run crosses none.
        let s = stats(100, 0, [0, 0, 100, 0, 0, 0], &[50_000; 100]);
        assert_eq!(crossed(&ts, &s, 1.0).len(), 1);
        let s = stats(100, 0, [0, 0, 90, 10, 0, 0], &[1_000; 100]);
        assert!(crossed(&ts, &s, 1.0).is_empty());
        // No reply: no latency to judge, and the error share says what happened.
        let s = stats(10, 10, [0; 6], &[]);
        let c = crossed(&ts, &s, 1.0);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(c[0].starts_with("errors 100.00%"));
    }
}
