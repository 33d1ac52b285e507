//! The report's tables: rates by trial, any metric by series and rate, the syscall shares and
//! counters, and each point's validity checks; with the words and numbers they are written in
//! (and the overview's words for the hosts, their ports and the network).

use std::collections::BTreeMap;

use crate::analysis::findings;
use crate::analysis::stats::Arm;
use crate::analysis::syscalls::{syscall_shares, Profile, PAPER_ROWS};
use crate::model::results::{PointResult, ServerCounters, Status, Summary};
use crate::model::text::thousands;
use crate::render::block::Block;

pub(super) fn idle_words(idle: usize) -> String {
    match idle {
        0 => "no idle connections".into(),
        n => format!("{} idle connections", thousands(n as f64)),
    }
}

/// A whole number with thousands separators, else as it is (a swept value of 0.5).
pub(super) fn number(v: f64) -> String {
    if v.fract() == 0.0 {
        thousands(v)
    } else {
        v.to_string()
    }
}

pub(super) fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Which trials a table cell averages.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Trials {
    /// Valid trials (what verdicts use); invalid ones only where no trial was valid.
    Valid,
    /// Every ok trial, valid or not (a diagnosis of the points, such as the client's CPU).
    AllOk,
}

/// Rows: offered rate; columns: series; cells: `f`, the mean over trials as `which` says (of
/// valid trials: ± the half-width of the mean's 90% t interval where there are two). A †
/// marks a value that rests on invalid points; "(+n†)" after a valid mean says n more trials
/// were invalid and left out; ✗ marks a point whose every trial failed.
pub(super) fn rate_table(
    s: &Summary,
    idle: usize,
    f: &dyn Fn(&PointResult) -> Option<f64>,
    digits: usize,
    which: Trials,
) -> Block {
    table_by(
        s,
        &|p| p.idle == idle,
        &|p| Some(p.rate),
        "offered",
        f,
        digits,
        which,
    )
}

/// As `rate_table`, over the points `keep` accepts, one row per value of `x` (headed
/// `x_head`).
pub(super) fn table_by(
    s: &Summary,
    keep: &dyn Fn(&PointResult) -> bool,
    x: &dyn Fn(&PointResult) -> Option<f64>,
    x_head: &str,
    f: &dyn Fn(&PointResult) -> Option<f64>,
    digits: usize,
    which: Trials,
) -> Block {
    let mut rates: Vec<f64> = s.points.iter().filter(|p| keep(p)).filter_map(x).collect();
    rates.sort_by(|a, b| a.total_cmp(b));
    rates.dedup();
    let mut header = vec![x_head.to_string()];
    header.extend(s.series.iter().map(|x| x.label.clone()));
    let num = |m: f64| {
        if digits == 0 {
            thousands(m)
        } else {
            format!("{m:.digits$}")
        }
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let rows = rates
        .iter()
        .map(|&r| {
            let mut row = vec![number(r)];
            for series in &s.series {
                let ps: Vec<&PointResult> = s
                    .points
                    .iter()
                    .filter(|p| keep(p) && x(p) == Some(r) && p.series == series.label)
                    .collect();
                let of = |valid: bool| -> Vec<f64> {
                    ps.iter()
                        .filter(|p| p.ok() && p.valid() == valid)
                        .filter_map(|p| f(p))
                        .collect()
                };
                let (valid, invalid) = (of(true), of(false));
                let cell = if ps.is_empty() {
                    String::new()
                } else if valid.is_empty() && invalid.is_empty() {
                    if ps.iter().all(|p| p.status != Status::Ok) {
                        "✗".into()
                    } else {
                        "–".into()
                    }
                } else if valid.is_empty() {
                    format!("{}†", num(mean(&invalid)))
                } else if which == Trials::AllOk {
                    let all: Vec<f64> = valid.iter().chain(&invalid).copied().collect();
                    let mark = if invalid.is_empty() { "" } else { "†" };
                    format!("{}{mark}", num(mean(&all)))
                } else {
                    // The mean of the valid trials, ± the half-width of its 90% t interval
                    // where there are two or more.
                    let m = match Arm::of(&valid) {
                        Some(a) if valid.len() >= 2 => {
                            format!("{} ± {}", num(a.mean), num(a.hi - a.mean))
                        }
                        _ => num(mean(&valid)),
                    };
                    if invalid.is_empty() {
                        m
                    } else {
                        format!("{m} (+{}†)", invalid.len())
                    }
                };
                row.push(cell);
            }
            row
        })
        .collect();
    Block::Table(header, rows)
}

pub(super) fn syscall_table(s: &Summary) -> Vec<Block> {
    let shares = syscall_shares(s);
    if shares.is_empty() {
        return vec![];
    }
    let names = syscall_names(&shares);
    let mut header = vec!["syscall".to_string()];
    header.extend(shares.iter().map(|(p, _)| p.series.clone()));
    let cell = |v: Option<&(f64, f64)>, which: usize| match v {
        Some(&(share, _)) if which == 0 => format!("{:.2}", share * 100.0),
        Some(&(_, per)) => format!("{per:.2}"),
        None => "-".into(),
    };
    let mut share_rows: Vec<Vec<String>> = names
        .iter()
        .map(|n| {
            let mut row = vec![n.clone()];
            row.extend(shares.iter().map(|(_, r)| cell(r.get(n), 0)));
            row
        })
        .collect();
    let mut total = vec!["all syscalls".to_string()];
    total.extend(
        shares
            .iter()
            .map(|(_, r)| format!("{:.2}", r.values().map(|v| v.0).sum::<f64>() * 100.0)),
    );
    share_rows.push(total);
    let mut rr = vec!["replies/s".to_string()];
    rr.extend(
        shares
            .iter()
            .map(|(p, _)| p.reply_rate().map(thousands).unwrap_or_default()),
    );
    share_rows.push(rr);
    let per_rows: Vec<Vec<String>> = names
        .iter()
        .map(|n| {
            let mut row = vec![n.clone()];
            row.extend(shares.iter().map(|(_, r)| cell(r.get(n), 1)));
            row
        })
        .collect();
    let at: Vec<String> = shares
        .iter()
        .map(|(p, _)| format!("{} at {} req/s", p.series, thousands(p.rate)))
        .collect();
    vec![
        Block::H(2, "Where the server's time goes (as Table 1)".into()),
        Block::P(format!(
            "Percent of the measured run's wall time the server spent inside each system call, timed \
             by evlab's counted syscalls (`evlab serve --profile`: a monotonic clock read around each \
             call) rather than gprof, at the highest offered rate of each series with the fewest idle \
             connections ({}); \"all syscalls\" is their sum, and the rest of the run is the server's \
             time outside system calls. The shares are of wall time, not of the server's CPU time: \
             the time its CPU budget throttles it inside a call, or a blocking wait spends asleep, \
             counts, so at a rate past saturation they follow the paper's shares of its run time, \
             and at rates below saturation waits read large. The paper profiled at 22,000 requests/s, \
             past saturation.",
            at.join(", ")
        )),
        Block::Table(header.clone(), share_rows),
        Block::P("Calls per request (the paper's count: 3,947,769 `epoll_ctl` calls for epoll-LT against 1,949,404 `epoll_ctl` + `epoll_ctlv` for epoll-ctlv):".into()),
        Block::Table(header.clone(), per_rows),
        Block::P("The event mechanism's own counters over the same run:".into()),
        Block::Table(
            {
                let mut h = header;
                h[0] = "counter".into();
                h
            },
            counter_rows(&shares),
        ),
    ]
}

/// The syscall table's rows: the paper's (those any series made), then the others by their
/// largest share.
pub(super) fn syscall_names(shares: &[Profile]) -> Vec<String> {
    let mut names: Vec<String> = PAPER_ROWS
        .iter()
        .filter(|n| shares.iter().any(|(_, r)| r.contains_key(**n)))
        .map(|n| n.to_string())
        .collect();
    let mut rest: Vec<(String, f64)> = shares
        .iter()
        .flat_map(|(_, r)| r.iter().map(|(n, v)| (n.clone(), v.0)))
        .filter(|(n, _)| !PAPER_ROWS.contains(&n.as_str()))
        .collect();
    rest.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    for (n, _) in rest {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

/// The event mechanism's own counters at each series' profile point, per wait or per request.
pub(super) fn counter_rows(shares: &[Profile]) -> Vec<Vec<String>> {
    type Counter = Box<dyn Fn(&ServerCounters) -> Option<f64>>;
    let mut ev_rows = Vec::new();
    for (label, f) in [
        (
            "events per wait",
            Box::new(|c: &ServerCounters| c.events_per_wait()) as Counter,
        ),
        (
            "waits per request",
            Box::new(|c: &ServerCounters| {
                (c.requests > 0).then(|| c.waits as f64 / c.requests as f64)
            }),
        ),
        (
            "interest changes per request",
            Box::new(|c: &ServerCounters| {
                (c.requests > 0).then(|| c.interest_changes as f64 / c.requests as f64)
            }),
        ),
        (
            "discarded events per request",
            Box::new(|c: &ServerCounters| {
                (c.requests > 0).then(|| c.discarded as f64 / c.requests as f64)
            }),
        ),
        (
            "syscalls per request",
            Box::new(|c: &ServerCounters| {
                (c.requests > 0).then(|| c.syscalls_total() as f64 / c.requests as f64)
            }),
        ),
    ] {
        let mut row = vec![label.to_string()];
        row.extend(shares.iter().map(|(p, _)| {
            p.server
                .as_ref()
                .and_then(&f)
                .map(|v| format!("{v:.2}"))
                .unwrap_or_default()
        }));
        ev_rows.push(row);
    }
    ev_rows
}

/// The checks of the validity rule as the Validity table's columns: (flag or note kind, as
/// `findings::flag_kind` names it, column heading). Every check has its column whether it fired
/// or not, so the table says what was checked.
pub(super) const CHECKS: &[(&str, &str)] = &[
    ("client fell behind", "client fell behind"),
    ("client saturated", "client CPU saturated"),
    ("client out of resources", "client out of resources"),
    ("not serving", "non-2xx replies"),
    ("server exited during the run", "server exited"),
    ("left processes", "processes left"),
    ("failed", "failed"),
];

pub(super) const NOTES: &[(&str, &str)] = &[
    ("jitter", "note: jitter"),
    ("steal", "note: steal"),
    ("busy", "note: other processes"),
];

/// The validity of every point, compactly: one row per series and idle count, one column per
/// check (how many of its points each made invalid) and per kind of note; a last row for the
/// whole run; then the largest lateness and steal. Each point's flags and notes, in words, are
/// in points.csv and summary.json.
pub(super) fn validity_table(s: &Summary) -> Vec<Block> {
    #[derive(Default)]
    struct Group {
        total: usize,
        valid: usize,
        kinds: BTreeMap<String, usize>,
    }
    let order = |label: &str| {
        s.series
            .iter()
            .position(|x| x.label == label)
            .unwrap_or(usize::MAX)
    };
    // With `[sweep]`, a row per series and swept value (`shared workers=4`).
    let mut groups: BTreeMap<(usize, u64, usize, String), Group> = BTreeMap::new();
    let mut all = Group::default();
    for p in &s.points {
        let mut kinds: Vec<String> = p.flags.iter().map(|f| findings::flag_kind(f)).collect();
        match p.status {
            Status::Ok => {}
            Status::Failed => kinds.push("failed".into()),
            Status::Interrupted => kinds.push("interrupted".into()),
        }
        kinds.extend(p.notes.iter().map(|n| findings::flag_kind(n)));
        kinds.sort();
        kinds.dedup();
        for g in [
            groups
                .entry((
                    p.idle,
                    p.swept_value().unwrap_or(0.0).to_bits(),
                    order(&p.series),
                    p.label(),
                ))
                .or_default(),
            &mut all,
        ] {
            g.total += 1;
            if p.valid() {
                g.valid += 1;
            }
            for k in &kinds {
                *g.kinds.entry(k.clone()).or_default() += 1;
            }
        }
    }
    if groups.is_empty() {
        return vec![];
    }
    // Kinds no column names (a future check, an interrupted point) get columns of their own.
    let known: Vec<&str> = CHECKS.iter().chain(NOTES).map(|c| c.0).collect();
    let extra: Vec<String> = all
        .kinds
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .cloned()
        .collect();
    let mut columns: Vec<(String, String)> = CHECKS
        .iter()
        .map(|(k, h)| (k.to_string(), h.to_string()))
        .collect();
    columns.extend(extra.iter().map(|k| (k.clone(), k.clone())));
    columns.extend(NOTES.iter().map(|(k, h)| (k.to_string(), h.to_string())));
    let mut header: Vec<String> = vec!["series".into(), "idle".into(), "valid / points".into()];
    header.extend(columns.iter().map(|c| c.1.clone()));
    let row = |series: String, idle: String, g: &Group| {
        let mut r = vec![series, idle, format!("{} / {}", g.valid, g.total)];
        r.extend(columns.iter().map(|(k, _)| match g.kinds.get(k) {
            Some(n) => n.to_string(),
            None => "–".into(),
        }));
        r
    };
    let mut rows: Vec<Vec<String>> = groups
        .iter()
        .map(|((idle, _, _, series), g)| row(series.clone(), thousands(*idle as f64), g))
        .collect();
    rows.push(row("all".into(), String::new(), &all));
    let mut out = vec![
        Block::P(
            "Points per series and idle count, and how many of them each check made invalid (a \
             point may fail more than one); the notes do not invalidate:"
                .into(),
        ),
        Block::Table(header, rows),
    ];
    let noted: Vec<&PointResult> = s.points.iter().filter(|p| !p.notes.is_empty()).collect();
    let valid = s.points.iter().filter(|p| p.valid()).count();
    let mut t = format!(
        "{valid} of {} points valid; {} with notes (not invalidating).",
        s.points.len(),
        noted.len()
    );
    let worst = |f: &dyn Fn(&PointResult) -> Option<f64>| -> Option<(f64, usize)> {
        s.points
            .iter()
            .filter(|p| p.ok())
            .filter_map(|p| f(p).map(|v| (v, p.index)))
            .filter(|v| v.0.is_finite())
            .reduce(|a, b| if b.0 > a.0 { b } else { a })
    };
    let sched = |p: &PointResult| p.load.as_ref().map(|l| l.schedule.clone());
    if let Some((v, i)) = worst(&|p| sched(p)?.late_max_ms) {
        t.push_str(&format!(
            " Largest lateness of a start: {v:.1} ms (point {i})"
        ));
        if let Some((p99, j)) = worst(&|p| sched(p)?.late_p99_ms) {
            t.push_str(&format!("; largest p99 lateness {p99:.1} ms (point {j})"));
        }
        t.push('.');
    }
    if let Some((v, i)) = worst(&|p| p.steal) {
        t.push_str(&format!(
            " Largest steal: {:.1}% of a CPU (point {i}).",
            v * 100.0
        ));
    }
    out.push(Block::P(t));
    out
}

/// The paragraph of a run across hosts (`--hosts`): each host's role, kernel, evlab and clock
/// offset, and how the load was split and merged.
pub(super) fn hosts_words(s: &Summary) -> String {
    let each: Vec<String> = s
        .hosts
        .iter()
        .map(|h| {
            format!(
                "{} ({}{}): {}, {}{}, clock offset {:+.2} ms ± {:.2} ms",
                h.name,
                h.role
                    .map_or("host".to_string(), |r| format!("{r:?}").to_lowercase()),
                h.address
                    .as_deref()
                    .map(|a| format!(" at {a}"))
                    .unwrap_or_default(),
                h.kernel,
                h.evlab_version,
                if h.copied { " (copied there)" } else { "" },
                h.clock_offset_ms,
                h.clock_bound_ms
            )
        })
        .collect();
    let clients = s
        .hosts
        .iter()
        .filter(|h| h.role == Some(crate::model::hosts::Role::Client))
        .count();
    format!(
        "Run across hosts (`--hosts`): {}. The server ran on the server host, its CPU time and \
         context switches read there; each point's load was split evenly over the {clients} \
         client host(s), all started at one agreed instant (in each host's clock: plus its \
         offset), and their reports merged exactly (counts added, percentiles from the added \
         histograms, rates over their common window); each client's own report is beside \
         the summary (`load/point-NNN-HOST.json`).{}{}",
        each.join("; "),
        network_words(s),
        ports_words(s, clients)
    )
}

/// A warning for each client host whose ephemeral ports, each held 60 s in TIME_WAIT and not
/// reusable there (`tcp_tw_reuse` ≠ 1), cannot last the highest rate it was given: past them
/// connect() searches the port range in the kernel and the client falls behind.
pub(super) fn ports_words(s: &Summary, clients: usize) -> String {
    let top = s.points.iter().map(|p| p.rate).fold(0.0, f64::max) / clients.max(1) as f64;
    s.hosts
        .iter()
        .filter(|h| h.role == Some(crate::model::hosts::Role::Client))
        .filter_map(|h| {
            let sustained = h.sustained_connect_rate()?;
            (top > sustained).then(|| {
                format!(
                    " Host {} had net.ipv4.tcp_tw_reuse = {} and {} ephemeral ports, each held                      60 s in TIME_WAIT: about {} new connections/s to one server address,                      sustained, against the {} it was given; past that connect() searches the                      port range in the kernel and the client falls behind (set                      net.ipv4.tcp_tw_reuse = 1 there, as scripts/netns-hosts.sh does).",
                    h.name,
                    h.tcp_tw_reuse.unwrap_or(0),
                    thousands(h.ephemeral_ports.unwrap_or(0) as f64),
                    thousands(sustained),
                    thousands(top)
                )
            })
        })
        .collect()
}

/// The sentence on `[network]`'s conditions of a run across hosts (empty without them).
pub(super) fn network_words(s: &Summary) -> String {
    let each: Vec<String> = s
        .network
        .iter()
        .map(|n| {
            format!(
                "{} on host {}'s {} ({}{})",
                n.condition,
                n.host,
                n.interface,
                n.how.join(" and "),
                if n.removed {
                    ", removed after"
                } else {
                    ", NOT checked removed"
                }
            )
        })
        .collect();
    if each.is_empty() {
        String::new()
    } else {
        format!(
            " Network conditions (`[network]`) for the whole run: {}.",
            each.join("; ")
        )
    }
}
