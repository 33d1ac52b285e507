//! `evlab run --list`: each built-in experiment with its points, its time, what it needs and
//! what it shows, in a table as wide as the terminal (at most 120 columns), then what the
//! columns mean.
//!
//! What an experiment needs is read from its spec: root or a cgroup for a CPU budget, the peer
//! servers it names, the open-file limit its idle connections (or a micro-benchmark's pipes and
//! descriptors) take, and hosts for one made for several machines. Each need this machine lacks
//! is marked, so that the list answers "can I run it here?" before anything runs.

use std::path::Path;

use evlab_reason::model::spec::Spec;

use crate::run::estimate::{self, IDLE_SETUP_S, POINT_OVERHEAD_S};

/// The mark after a need this machine lacks.
const MISSING: &str = "✗";

/// The widest the table gets, whatever the terminal.
pub const MAX_WIDTH: usize = 120;

/// The need column's width: longer needs continue on the next line.
const NEED_WIDTH: usize = 21;

/// What this machine has, for the needs' marks.
pub struct Here {
    /// The descriptor limit `evlab run`'s children get (`plan::child_fd_limit`).
    pub fd_limit: u64,
    /// Whether a cgroup for a CPU budget was found (root, `--cgroup`, `$EVLAB_CGROUP`, or the
    /// user's own group).
    pub cgroup: bool,
    /// Whether a peer's program is installed.
    pub installed: fn(&str) -> bool,
}

impl Here {
    /// This machine, with `cgroup` as `evlab run --cgroup` would name it.
    pub fn probe(cgroup: Option<&Path>) -> Here {
        Here {
            fd_limit: crate::run::plan::child_fd_limit(),
            cgroup: crate::run::cgroup::Parent::find(cgroup).is_ok(),
            installed: crate::run::peers::installed,
        }
    }
}

/// One thing an experiment needs, and whether this machine lacks it.
#[derive(Debug, Clone, PartialEq)]
pub struct Need {
    pub word: String,
    pub missing: bool,
}

impl std::fmt::Display for Need {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{}",
            self.word,
            if self.missing { MISSING } else { "" }
        )
    }
}

/// The largest number a flag of a micro-benchmark's args takes (`--pipes 10,100` → 100).
fn flag_max(args: &[String], flag: &str) -> Option<u64> {
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1)?
        .split(',')
        .filter_map(|v| v.trim().replace('_', "").parse::<u64>().ok())
        .max()
}

/// The descriptors a run of `spec` takes in one process: the most idle connections plus the
/// load's and a margin (as `plan::fit_idle_to_limit` counts them); a micro-benchmark's pipes
/// (two descriptors each) or descriptors held. None: no more than any machine gives.
fn descriptors(spec: &Spec) -> Option<u64> {
    if let Some(m) = &spec.micro {
        return match m.benchmark.as_str() {
            "pipetest" => flag_max(&m.args, "--pipes").map(|p| 2 * p + 64),
            "fdalloc" => Some(flag_max(&m.args, "--total").unwrap_or(100_000) + 64),
            _ => None,
        };
    }
    let idle = *spec.idle.iter().max()?;
    (idle > 0).then(|| crate::run::plan::descriptors_for(spec, idle))
}

/// What `spec` needs, each marked where `here` lacks it. Across hosts (`hosts_only`) what the
/// hosts have is not known here: only the hosts file is asked for.
pub fn needs(spec: &Spec, here: &Here) -> Vec<Need> {
    let mut out = Vec::new();
    let local = !spec.hosts_only;
    let budget =
        spec.server_cpu_budget.is_some() || spec.series.iter().any(|s| s.cpu_budget.is_some());
    if budget && spec.micro.is_none() {
        out.push(Need {
            word: "root/cgroup".into(),
            missing: local && !here.cgroup,
        });
    }
    if let Some(n) = descriptors(spec) {
        out.push(Need {
            word: format!("{}k fds", n.div_ceil(1000)),
            missing: local && here.fd_limit < n,
        });
    }
    let names: Vec<&str> = spec
        .mechanisms
        .iter()
        .chain(spec.series.iter().map(|s| &s.mechanism))
        .map(|m| m.split(':').next().unwrap_or(m))
        .collect();
    for peer in ["nginx", "lighttpd", "haproxy"] {
        if names.contains(&peer) {
            out.push(Need {
                word: peer.into(),
                missing: local && !(here.installed)(peer),
            });
        }
    }
    if spec.hosts_only {
        out.push(Need {
            word: "--hosts".into(),
            missing: false,
        });
    }
    out
}

/// The words of `text` in lines of at most `width` characters (a longer word alone on its
/// line); `sep` is what the words were split at and are joined with again.
fn wrap(text: &str, width: usize, sep: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(sep).filter(|w| !w.is_empty()) {
        let n = line.chars().count();
        if n > 0 && n + sep.chars().count() + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push_str(sep);
        }
        line.push_str(word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// The experiment's line in plain words: its `summary`, else its description's first sentence.
fn summary(spec: &Spec) -> String {
    if !spec.summary.trim().is_empty() {
        return spec.summary.trim().to_string();
    }
    let d = spec
        .description
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    match d.find(". ") {
        Some(i) => d[..=i].to_string(),
        None => d,
    }
}

/// One row: name, points, time, needs, what it shows.
struct Row {
    name: String,
    points: String,
    time: String,
    needs: Vec<Need>,
    shows: String,
}

/// `experiments` (name, TOML text) as `evlab run --list` prints them, for a terminal `width`
/// columns wide (at most [`MAX_WIDTH`] used): points and times for this machine (the series
/// `evlab`, the binary that would run them, supports here), at `duration_override` seconds per
/// point or each experiment's own `duration_s`.
pub fn list(
    experiments: &[(&str, &str)],
    evlab: &Path,
    duration_override: Option<f64>,
    here: &Here,
    width: usize,
) -> String {
    let support = crate::run::plan::mechanism_support(evlab);
    let mut handlers: Option<Vec<String>> = None;
    let mut rows = Vec::new();
    for (name, text) in experiments {
        let spec = match Spec::parse(text, name) {
            Ok(s) => s,
            Err(e) => {
                rows.push(Row {
                    name: name.to_string(),
                    points: "?".into(),
                    time: "?".into(),
                    needs: vec![],
                    shows: e.to_string(),
                });
                continue;
            }
        };
        let (points, time) = match &spec.micro {
            // One run of a benchmark, not a sweep of points: the time the reference machine
            // took, where the experiment says.
            Some(m) => (
                "—".to_string(),
                m.reference_s
                    .map_or("—".into(), |s| format!("~{}", estimate::hms(s.max(1.0)))),
            ),
            None => {
                let uses_lighttpd = spec
                    .mechanisms
                    .iter()
                    .chain(spec.series.iter().map(|s| &s.mechanism))
                    .any(|m| m.starts_with("lighttpd"));
                let h = if uses_lighttpd {
                    handlers
                        .get_or_insert_with(|| crate::run::plan::lighttpd_handlers(&spec))
                        .clone()
                } else {
                    vec![]
                };
                let plan = crate::run::plan::plan_with(&spec, &support, &h);
                let e = estimate::estimate(
                    &spec,
                    plan.series.len(),
                    duration_override.unwrap_or(spec.duration_s),
                );
                (
                    e.points.to_string(),
                    format!("~{}", estimate::hms(e.seconds)),
                )
            }
        };
        rows.push(Row {
            name: name.to_string(),
            points,
            time,
            needs: needs(&spec, here),
            shows: summary(&spec),
        });
    }
    let mut out = table(&rows, width.min(MAX_WIDTH));
    out.push('\n');
    for para in legend(duration_override) {
        for line in wrap(&para, width.min(MAX_WIDTH), " ") {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// The rows in columns. The needs wrap within their column; what the experiment shows fills the
/// rest of the line and wraps under itself, or, on a terminal too narrow for that, goes on lines
/// of its own below its row.
fn table(rows: &[Row], width: usize) -> String {
    let head = Row {
        name: "experiment".into(),
        points: "points".into(),
        time: "time".into(),
        needs: vec![Need {
            word: "needs".into(),
            missing: false,
        }],
        shows: "what it shows".into(),
    };
    let all: Vec<&Row> = std::iter::once(&head).chain(rows).collect();
    let w = |f: &dyn Fn(&Row) -> usize| all.iter().map(|r| f(r)).max().unwrap_or(0);
    let (w0, w1, w2) = (
        w(&|r| r.name.chars().count()),
        w(&|r| r.points.chars().count()),
        w(&|r| r.time.chars().count()),
    );
    // A need is never split; a line that the next continues ends with a comma.
    let needs_of = |r: &Row| {
        let text = r
            .needs
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let mut lines = wrap(&text, NEED_WIDTH - 1, ", ");
        let last = lines.len() - 1;
        for l in &mut lines[..last] {
            l.push(',');
        }
        lines
    };
    let w3 = w(&|r| {
        needs_of(r)
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
    });
    let prefix = w0 + w1 + w2 + w3 + 8;
    let beside = width.saturating_sub(prefix) >= 36;
    let pad = |s: &str, w: usize| format!("{s}{}", " ".repeat(w.saturating_sub(s.chars().count())));
    let mut out = String::new();
    for r in all {
        let needs = needs_of(r);
        let shows = if beside {
            wrap(&r.shows, width - prefix, " ")
        } else {
            vec![]
        };
        for i in 0..needs.len().max(shows.len()).max(1) {
            let first = i == 0;
            let line = format!(
                "{}  {}  {}  {}  {}",
                pad(if first { &r.name } else { "" }, w0),
                pad(if first { &r.points } else { "" }, w1),
                pad(if first { &r.time } else { "" }, w2),
                pad(needs.get(i).map_or("", |s| s.as_str()), w3),
                shows.get(i).map_or("", |s| s.as_str()),
            );
            out.push_str(line.trim_end());
            out.push('\n');
        }
        if !beside {
            for line in wrap(&r.shows, width.saturating_sub(4), " ") {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }
    out
}

/// What the columns mean, a paragraph each.
fn legend(duration_override: Option<f64>) -> Vec<String> {
    vec![
        "points: for this machine (the series it supports); ≤N: calibrated rates that coincide \
         are measured once; ~N (≤M): a rate search stops at each series' knee, N points \
         expected, M at most; —: a micro-benchmark, one run of its own."
            .into(),
        format!(
            "time: an estimate at {}: points × (duration + ~{POINT_OVERHEAD_S} s, ~{:.1} s more \
             with 10,000 idle connections) + calibration. A micro-benchmark's is what it took on \
             the reference machine (2 vCPUs; docs/micro.md): its time depends on the machine.",
            match duration_override {
                Some(d) => format!("--duration {d} s per point"),
                None => "each experiment's duration_s".into(),
            },
            IDLE_SETUP_S * 10_000.0
        ),
        "needs: root/cgroup: root, or a group of the cpu controller you may write (--cgroup), \
         for the server's CPU budget; N fds: an open-file limit (ulimit -Hn) of at least N \
         thousand, for idle connections, pipes or descriptors; nginx, lighttpd, haproxy: peer \
         servers; --hosts: a server and client machines (docs/hosts.md)."
            .into(),
        format!(
            "{MISSING}: missing here. Without root or a cgroup the run stops before it measures; \
             a missing peer, and what does not fit the open-file limit (idle counts, pipes), \
             are left out and said so."
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> Spec {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments")
            .join(format!("{name}.toml"));
        Spec::parse(&std::fs::read_to_string(&path).unwrap(), name).unwrap()
    }

    fn words(n: &[Need]) -> Vec<String> {
        n.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn needs_come_from_the_spec_and_are_marked_where_missing() {
        let bare = Here {
            fd_limit: 1024,
            cgroup: false,
            installed: |_| false,
        };
        let rich = Here {
            fd_limit: 1 << 20,
            cgroup: true,
            installed: |_| true,
        };
        assert_eq!(
            words(&needs(&spec("quick"), &bare)),
            ["root/cgroup✗", "12k fds✗"]
        );
        assert_eq!(
            words(&needs(&spec("quick"), &rich)),
            ["root/cgroup", "12k fds"]
        );
        assert_eq!(
            words(&needs(&spec("peers"), &bare)),
            ["12k fds✗", "nginx✗", "lighttpd✗"]
        );
        assert_eq!(
            words(&needs(&spec("fig-proxy-cpu"), &rich)),
            ["12k fds", "nginx", "haproxy"]
        );
        // 16,000 pipes: two descriptors each; fdalloc's 100,000 held.
        assert_eq!(words(&needs(&spec("pipetest"), &rich)), ["33k fds"]);
        assert_eq!(words(&needs(&spec("fdalloc"), &bare)), ["101k fds✗"]);
        assert!(needs(&spec("malloc"), &bare).is_empty());
        // Across hosts nothing here is checked; the hosts file is asked for.
        let t = words(&needs(&spec("testbed"), &bare));
        assert_eq!(t.last().map(String::as_str), Some("--hosts"), "{t:?}");
        assert!(t.iter().all(|w| !w.contains(MISSING)), "{t:?}");
    }

    #[test]
    fn words_wrap_within_the_width() {
        assert_eq!(wrap("a bb ccc dddd", 6, " "), ["a bb", "ccc", "dddd"]);
        assert_eq!(
            wrap("averyveryverylongword x", 5, " "),
            ["averyveryverylongword", "x"]
        );
        assert_eq!(wrap("", 5, " "), [""]);
    }
}
