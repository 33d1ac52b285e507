//! The proxy paper's findings (Rosu & Rosu, USENIX 2003): uselect against select and epoll,
//! splice against copy with Polymix and the two together (Fig. 11), splice's (and KeepCopy's)
//! gain at the small and the large objects of its Fig. 7, under uselect (Fig. 8), and at the
//! lowest and highest rates of its Fig. 9, the load against the number of connections (Fig. 4),
//! uselect's load against the others' with many connections and only hits (Fig. 5) and its
//! response time there (Fig. 6), each decided by its pre-registered rule (`analysis::rules`).

use super::common::*;
use crate::analysis::rules::rule;
use crate::model::results::{PointResult, Summary};
use crate::model::spec::ServerKind;

/// What a proxy series is: its mechanism (or `nginx`, `haproxy`), forwarding mode and object
/// size.
pub(crate) struct ProxySeries {
    pub(crate) label: String,
    pub(crate) mechanism: String,
    pub(crate) mode: String,
    pub(crate) size: String,
    /// No flag but `--forward`: the proxy as the experiment's other series run it (not, say,
    /// with its cache off).
    pub(crate) plain: bool,
}

pub(crate) fn proxy_series(s: &Summary) -> Vec<ProxySeries> {
    s.series
        .iter()
        .map(|x| s.experiment.labelled(x))
        .map(|x| ProxySeries {
            label: x.label.clone(),
            mechanism: match x.kind {
                ServerKind::Nginx => "nginx".into(),
                ServerKind::Haproxy => "haproxy".into(),
                _ => x.mechanism.clone(),
            },
            mode: x
                .flags
                .windows(2)
                .find(|w| w[0] == "--forward")
                .map(|w| w[1].clone())
                .unwrap_or_else(|| "copy".into()),
            size: s
                .experiment
                .series
                .iter()
                .find(|y| y.label == x.label)
                .and_then(|y| y.object_size.clone())
                .unwrap_or_else(|| s.experiment.object_size.clone()),
            plain: x.kind == ServerKind::Evlab
                && match x.flags.as_slice() {
                    [] => true,
                    [f, _] => f == "--forward",
                    _ => false,
                },
        })
        .collect()
}

/// An object size in KiB ("4K", "1M"; bare numbers are bytes); None for a distribution
/// ("polymix4").
fn size_kb(size: &str) -> Option<f64> {
    let t = size.trim();
    let (num, mult) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1.0),
        'm' | 'M' => (&t[..t.len() - 1], 1024.0),
        _ => (t, 1.0 / 1024.0),
    };
    num.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(|v| v * mult)
}

/// The value of the load's flag `name` (`--cacheable 0`), where the experiment sets it.
fn load_share(s: &Summary, name: &str) -> Option<f64> {
    s.experiment
        .load_flags
        .windows(2)
        .find(|w| w[0] == name)
        .and_then(|w| w[1].parse::<f64>().ok())
}

/// Whether the run's load offers (almost) only hits (`--hit-ratio` ≥ 0.95): the setting of the
/// source's Figs. 4-6, "the hit ratio is almost 100%".
fn hits_only(s: &Summary) -> bool {
    load_share(s, "--hit-ratio").is_some_and(|h| h >= 0.95)
}

/// Whether the run's objects are cacheable, from the load's `--cacheable` share: Some(true)
/// when every object is, Some(false) when none is, None for a mix (the Polymix default).
pub(crate) fn cacheable(s: &Summary) -> Option<bool> {
    let share = load_share(s, "--cacheable")?;
    if share >= 1.0 {
        Some(true)
    } else if share <= 0.0 {
        Some(false)
    } else {
        None
    }
}

fn cpu(p: &PointResult) -> Option<f64> {
    p.server_cpu_us_per_reply
}

/// The mean response time (ms) of a point, as the load measured it.
fn mean_ms(p: &PointResult) -> Option<f64> {
    p.load.as_ref()?.latency_ms.mean
}

const UNIT: &str = "µs/request";

/// The series, the run's idle counts (ascending) and its object sizes (in the spec's order).
struct Run<'s> {
    s: &'s Summary,
    /// The level its intervals decide at.
    level: f64,
    series: Vec<ProxySeries>,
    idles: Vec<usize>,
    sizes: Vec<String>,
}

impl Run<'_> {
    /// The plain series of `mech` forwarding by `mode` at `size`.
    fn find(&self, mech: &str, mode: &str, size: &str) -> Option<&str> {
        self.series
            .iter()
            .find(|x| x.plain && x.mechanism == mech && x.mode == mode && x.size == size)
            .map(|x| x.label.as_str())
    }

    /// The evlab mechanisms, in the order of the series.
    fn mechanisms(&self) -> Vec<&str> {
        let mut m: Vec<&str> = Vec::new();
        for x in self.series.iter().filter(|x| x.plain) {
            if !m.contains(&x.mechanism.as_str()) {
                m.push(&x.mechanism);
            }
        }
        m
    }

    /// Rule `id` on A = the series `a`, B = the series `b`, at `idle` idle connections.
    fn judge(&self, id: &str, (a, b): (&str, &str), idle: usize) -> Finding {
        let side = |series| Side { series, idle };
        judge((self.s, self.level), rule(id), side(a), side(b), &cpu, UNIT)
    }

    /// Rule `id` on the CPU per request of series `x` at `idles` = (A's, B's) idle counts.
    fn judge_idles(&self, id: &str, x: &str, (a, b): (usize, usize)) -> Finding {
        let side = |idle| Side { series: x, idle };
        judge((self.s, self.level), rule(id), side(a), side(b), &cpu, UNIT)
    }

    /// Whether the run measured `idle` idle connections.
    fn has_idle(&self, idle: usize) -> bool {
        self.idles.contains(&idle)
    }
}

/// The proxy paper's findings, for runs with `[proxy]`.
pub(super) fn findings(s: &Summary, level: f64) -> Vec<Finding> {
    let series = proxy_series(s);
    let mut idles = s.idle_counts();
    idles.sort_unstable();
    idles.dedup();
    let mut sizes: Vec<String> = Vec::new();
    for x in &series {
        if !sizes.contains(&x.size) {
            sizes.push(x.size.clone());
        }
    }
    let run = Run {
        s,
        level,
        series,
        idles,
        sizes,
    };
    let mut out = uselect(&run);
    out.extend(polymix_splice(&run));
    out.extend(combined(&run));
    out.extend(sizes_of(&run));
    out.extend(rate_sweep(&run));
    out.extend(connections(&run));
    out.extend(hits_cpu(&run));
    out.extend(response_time(&run));
    out.extend(uselect_sizes(&run));
    out
}

/// On a run that offers (almost) only hits (Fig. 5): uselect's CPU per request against
/// select's, poll's and epoll's at each idle count of at least 5,000, and uselect's at 10,000
/// against epoll's at 5,000, per object size.
fn hits_cpu(run: &Run) -> Vec<Finding> {
    if !hits_only(run.s) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for size in &run.sizes {
        let Some(u) = run.find("uring-poll", "copy", size) else {
            continue;
        };
        for (other, id) in [
            ("select", "proxy-hits-uselect-vs-select"),
            ("poll", "proxy-hits-uselect-vs-poll"),
            ("epoll-et", "proxy-hits-uselect-vs-epoll"),
        ] {
            if let Some(b) = run.find(other, "copy", size) {
                for &idle in run.idles.iter().filter(|&&i| i >= 5000) {
                    out.push(run.judge(id, (u, b), idle));
                }
            }
        }
        if let Some(e) = run.find("epoll-et", "copy", size) {
            if run.has_idle(5000) && run.has_idle(10_000) {
                let (a, b) = (
                    Side {
                        series: u,
                        idle: 10_000,
                    },
                    Side {
                        series: e,
                        idle: 5000,
                    },
                );
                let id = rule("proxy-hits-uselect-10k-below-epoll-5k");
                out.push(judge((run.s, run.level), id, a, b, &cpu, UNIT));
            }
        }
    }
    out
}

/// Fig. 8: uselect's splice (on a non-cacheable run) or splice-keep (on a cacheable one, the
/// source's KeepCopy) against its copy, at the largest object size both were measured at if it
/// is at least 64 KB; nothing on a run whose cacheability is a mix.
fn uselect_sizes(run: &Run) -> Vec<Finding> {
    let (mode, id) = match cacheable(run.s) {
        Some(false) => ("splice", "proxy-uselect-splice-large"),
        Some(true) => ("splice-keep", "proxy-uselect-keepcopy-large"),
        None => return Vec::new(),
    };
    let Some(&idle) = run.idles.first() else {
        return Vec::new();
    };
    let largest = run
        .sizes
        .iter()
        .filter_map(|z| {
            let pair = (
                run.find("uring-poll", mode, z)?,
                run.find("uring-poll", "copy", z)?,
            );
            Some((pair, size_kb(z)?))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1));
    match largest {
        Some((pair, kb)) if kb >= 64.0 => vec![run.judge(id, pair, idle)],
        _ => Vec::new(),
    }
}

/// With one object size (the Polymix-like workload): uselect with the source's splice
/// (uring-poll splice-keep) against select with copy, once per idle count (Fig. 11's and the
/// abstract's 58-78%).
fn combined(run: &Run) -> Vec<Finding> {
    let [size] = run.sizes.as_slice() else {
        return Vec::new();
    };
    let (Some(a), Some(b)) = (
        run.find("uring-poll", "splice-keep", size),
        run.find("select", "copy", size),
    ) else {
        return Vec::new();
    };
    run.idles
        .iter()
        .map(|&idle| run.judge("proxy-combined-vs-select", (a, b), idle))
        .collect()
}

/// On a non-cacheable run with one object size and several offered rates (Fig. 9): splice and
/// splice-release against copy per mechanism, at the lowest and at the highest rate, with the
/// fewest idle connections.
fn rate_sweep(run: &Run) -> Vec<Finding> {
    let ([size], Some(&idle)) = (run.sizes.as_slice(), run.idles.first()) else {
        return Vec::new();
    };
    if cacheable(run.s) != Some(false) || run.s.offered_rates(|_| true).len() < 2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for m in run.mechanisms() {
        let Some(b) = run.find(m, "copy", size) else {
            continue;
        };
        for mode in ["splice", "splice-release"] {
            if let Some(a) = run.find(m, mode, size) {
                for id in ["proxy-rate-splice-lowest", "proxy-rate-splice-highest"] {
                    out.push(run.judge(id, (a, b), idle));
                }
            }
        }
    }
    out
}

/// On a run that offers (almost) only hits (Fig. 4): uselect's CPU per request from the fewest
/// to the most idle connections, and select's and epoll's from 1,000 to 2,500, per object size.
fn connections(run: &Run) -> Vec<Finding> {
    if !hits_only(run.s) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for size in &run.sizes {
        if let (Some(u), Some(&few), Some(&most)) = (
            run.find("uring-poll", "copy", size),
            run.idles.first(),
            run.idles.last(),
        ) {
            if few < most {
                out.push(run.judge_idles("proxy-conns-uselect-flat", u, (most, few)));
            }
        }
        for (mech, id) in [
            ("select", "proxy-conns-select-grows"),
            ("epoll-et", "proxy-conns-epoll-grows"),
        ] {
            if let Some(x) = run.find(mech, "copy", size) {
                if run.has_idle(1000) && run.has_idle(2500) {
                    out.push(run.judge_idles(id, x, (2500, 1000)));
                }
            }
        }
    }
    out
}

/// On a run that offers (almost) only hits (Fig. 6): uselect's mean response time against
/// select's and epoll's, once per idle count of at least 5,000.
fn response_time(run: &Run) -> Vec<Finding> {
    if !hits_only(run.s) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for size in &run.sizes {
        let Some(u) = run.find("uring-poll", "copy", size) else {
            continue;
        };
        for (other, id) in [
            ("select", "proxy-rt-uselect-vs-select"),
            ("epoll-et", "proxy-rt-uselect-vs-epoll"),
            ("poll", "proxy-rt-uselect-vs-poll"),
        ] {
            let Some(b) = run.find(other, "copy", size) else {
                continue;
            };
            for &idle in run.idles.iter().filter(|&&i| i >= 5000) {
                let side = |series| Side { series, idle };
                out.push(judge(
                    (run.s, run.level),
                    rule(id),
                    side(u),
                    side(b),
                    &mean_ms,
                    "ms",
                ));
            }
        }
    }
    out
}

/// uselect (uring-poll) against select and against epoll (epoll-et), both in copy mode: one
/// verdict per rule, object size and idle count, favourable or not; none where every request
/// is a miss (the source's uselect claims all come with hits).
fn uselect(run: &Run) -> Vec<Finding> {
    if load_share(run.s, "--hit-ratio") == Some(0.0) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for size in &run.sizes {
        let Some(u) = run.find("uring-poll", "copy", size) else {
            continue;
        };
        for (other, id) in [
            ("select", "proxy-uselect-vs-select"),
            ("epoll-et", "proxy-uselect-vs-epoll"),
        ] {
            if let Some(b) = run.find(other, "copy", size) {
                for &idle in &run.idles {
                    out.push(run.judge(id, (u, b), idle));
                }
            }
        }
    }
    out
}

/// With one object size (the Polymix-like workload): splice-keep against copy per mechanism,
/// with the fewest idle connections.
fn polymix_splice(run: &Run) -> Vec<Finding> {
    let ([size], Some(&idle)) = (run.sizes.as_slice(), run.idles.first()) else {
        return Vec::new();
    };
    run.mechanisms()
        .into_iter()
        .filter_map(|m| {
            let a = run.find(m, "splice-keep", size)?;
            let b = run.find(m, "copy", size)?;
            Some(run.judge("proxy-splice-vs-copy", (a, b), idle))
        })
        .collect()
}

/// With several object sizes (Fig. 7): at the smallest size if ≤ 4 KB and at the largest if
/// ≥ 64 KB, splice against copy on a non-cacheable run, splice-keep against copy on a
/// cacheable one; nothing on a run whose cacheability is a mix.
fn sizes_of(run: &Run) -> Vec<Finding> {
    let mut sized: Vec<(&String, f64)> = run
        .sizes
        .iter()
        .filter_map(|z| Some((z, size_kb(z)?)))
        .collect();
    sized.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (Some(&(small, small_kb)), Some(&(large, large_kb))) = (sized.first(), sized.last()) else {
        return Vec::new();
    };
    let Some(&idle) = run.idles.first() else {
        return Vec::new();
    };
    if sized.len() < 2 {
        return Vec::new();
    }
    let (mode, small_id, large_id) = match cacheable(run.s) {
        Some(false) => (
            "splice",
            "proxy-splice-size-small",
            "proxy-splice-size-large",
        ),
        Some(true) => (
            "splice-keep",
            "proxy-keepcopy-small",
            "proxy-keepcopy-large",
        ),
        None => return Vec::new(),
    };
    let mut out = Vec::new();
    for (size, id, applies) in [
        (small, small_id, small_kb <= 4.0),
        (large, large_id, large_kb >= 64.0),
    ] {
        let pair = run
            .mechanisms()
            .into_iter()
            .find_map(|m| Some((run.find(m, mode, size)?, run.find(m, "copy", size)?)));
        if let (true, Some(pair)) = (applies, pair) {
            out.push(run.judge(id, pair, idle));
        }
    }
    out
}
