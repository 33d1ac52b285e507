//! report.md and a self-contained report.html (inline SVG, inline CSS), both rendered from the
//! same document model so they always say the same thing; and the figures as `fig-*.svg`.
//!
//! Rendering depends only on `summary.json`, so `evlab report DIR` reproduces the files exactly.

use std::fmt::Write as _;
use std::path::Path;

use crate::analysis::findings::{self, Finding, Verdict};
use crate::analysis::rules::{registration, Registration};
use crate::model::calibration::Calibration;
use crate::model::results::{write_atomic, Summary};
use crate::model::sequential::level_words;
use crate::model::spec::Spec;
use crate::model::text::thousands;
use crate::render::block::Block;
use crate::render::page;
use crate::LabError;

pub(crate) mod answer;
mod figures;
mod proxy;
mod tables;

use self::answer::{answer, controls};
use self::figures::*;
use self::proxy::*;
use self::tables::*;

/// The report, answer first: one sentence on what the run asked and found, the findings chart
/// with the controls' status beside it, and the contents; then what was run, the paper's
/// figures and their tables, each finding in full, how it was measured (calibration,
/// validity), the machine and the commands (raw material collapsed).
fn document(s: &Summary) -> Vec<Block> {
    let fs = findings::findings(s);
    let mut d = vec![Block::H(1, format!("evlab run: {}", s.experiment.name))];
    d.extend(answer(s, &fs));
    d.push(Block::Toc);
    d.push(Block::H(2, "What was run".into()));
    d.extend(overview(s));
    d.extend(crate::render::knee::section(s));
    d.extend(one_rate_section(s));
    d.extend(size_section(s));
    let ax = axis(s);
    if ax != Axis::Rate {
        d.extend(swept_sections(s, &ax));
    }
    for &idle in s.idle_counts().iter().filter(|_| ax == Axis::Rate) {
        d.extend(rate_section(s, idle));
    }
    // The proxy's response time after its CPU, the source's main figure.
    d.extend(response_section(s));
    if !fs.is_empty() {
        d.push(Block::H(2, "The findings in full".into()));
        d.push(Block::P(format!(
            "{}.{}",
            verdict_counts(&fs),
            chance_sentence(&fs)
        )));
        d.push(Block::P(controls(s, &fs)));
        let level = findings::verdict_level(s);
        d.push(Block::List(
            fs.iter().map(|f| verdict_line(f, level)).collect(),
        ));
    }
    d.extend(syscall_table(s));
    if let Some(c) = &s.calibration {
        d.extend(calibration_section(c));
    }
    d.extend(validity_section(s));
    d.extend(paper_section(s, &fs));
    d.extend(machine_section(s));
    d.extend(reproduce_section(s));
    d
}

/// "Of 10 findings: 5 reproduced, 0 not reproduced, 5 inconclusive" (and "partly" where any).
pub fn verdict_counts(fs: &[Finding]) -> String {
    let n = |v: Verdict| fs.iter().filter(|f| f.verdict == v).count();
    format!(
        "Of {} findings: {} reproduced, {}{} not reproduced, {} inconclusive{}",
        fs.len(),
        n(Verdict::Reproduced),
        match n(Verdict::Partly) {
            0 => String::new(),
            p => format!("{p} partly, "),
        },
        n(Verdict::NotReproduced),
        n(Verdict::Inconclusive),
        match n(Verdict::NotJudged) {
            0 => String::new(),
            k => format!(", {k} not judged"),
        }
    )
}

/// How many of the run's "reproduced" verdicts chance alone would give, and how many of its
/// verdicts are not tests of a seed's claim (post hoc rules, the lab's extensions).
fn chance_sentence(fs: &[Finding]) -> String {
    let (k, expected) = findings::chance_reproduced(fs);
    let mut out = String::new();
    if k > 0 {
        let _ = write!(
            out,
            " With no effect anywhere, chance alone would make about {expected:.2} of the {k} rules \
             that claim a difference and were judged on an interval come out reproduced (at \
             most 5% each)."
        );
    }
    let not_pre = fs
        .iter()
        .filter(|f| registration(&f.rule).0 != Registration::PreRegistered)
        .count();
    if not_pre > 0 {
        let _ = write!(
            out,
            " {not_pre} of the {} verdicts are on post hoc rules or the lab's extensions \
             (marked), not tests of a seed's claim.",
            fs.len()
        );
    }
    out
}

/// One verdict: its word, the claim, the ratio with its interval (at `level`) where the rule
/// decided on one (else why not, in short), and where the paper says it.
fn verdict_line(f: &Finding, level: f64) -> String {
    let stop = if f.claim.ends_with('.') { "" } else { "." };
    let arms = f
        .arms
        .as_ref()
        .map_or(String::new(), |[a, b]| format!(" A = {a}; B = {b}:"));
    let numbers = match f.interval {
        Some([r, lo, hi]) => format!(
            "{arms} A/B = {r:.2} [{}: {lo:.2}–{hi:.2}].",
            level_words(level)
        ),
        None => match f.evidence.rsplit_once("; ") {
            Some((_, why))
                if f.verdict == Verdict::Inconclusive
                    || f.evidence.contains("; as measured it reads inconclusive") =>
            {
                format!("{arms} {why}.")
            }
            _ => String::new(),
        },
    };
    // Why a verdict was withheld, after what was measured.
    let numbers = match f.evidence.split_once("; as measured") {
        Some((why, _)) if f.verdict == Verdict::NotJudged => {
            let why = why.trim_start_matches("not judged: ");
            format!("{numbers} Withheld: {why}.")
        }
        _ => numbers,
    };
    let registered = match registration(&f.rule).0 {
        Registration::PreRegistered => String::new(),
        r => format!(" [{}]", r.word()),
    };
    format!(
        "**{}**{registered}: {}{stop}{numbers} ({})",
        f.verdict.word(),
        f.claim,
        f.source
    )
}

/// The experiment's description and one paragraph on what was run and how it went.
fn overview(s: &Summary) -> Vec<Block> {
    let e = &s.experiment;
    let mut d = Vec::new();
    if !e.description.trim().is_empty() {
        d.push(Block::P(e.description.trim().to_string()));
    }
    let ok = s.points.iter().filter(|p| p.ok()).count();
    let flagged = s
        .points
        .iter()
        .filter(|p| p.ok() && !p.flags.is_empty())
        .count();
    d.push(Block::P(format!(
        "{} workload{}; {} s per point{}; {}; {} trial(s); server on CPU {}, clients on CPU(s) {}; \
         {} points ({} measured, {} invalid, {} failed) in {:.0} s, {} → {}{}.",
        e.workload.label(),
        if e.calls_per_conn > 1 {
            format!(", {} requests per connection", e.calls_per_conn)
        } else {
            String::new()
        },
        s.duration_s(),
        if e.warmup_s > 0.0 {
            format!(" after {} s of warm-up", e.warmup_s)
        } else {
            String::new()
        },
        idle_and_sweep_words(e),
        s.trials(),
        e.server_cpu,
        e.client_cpus
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(","),
        s.points.len(),
        ok,
        flagged,
        s.points.len() - ok,
        s.wall_s,
        s.started,
        s.finished.as_deref().unwrap_or("(unfinished)"),
        if s.interrupted {
            " — **interrupted**: these are the points measured before Ctrl-C"
        } else {
            ""
        }
    )));
    if let Some(q) = &s.sequential {
        d.push(Block::P(sequential_words(q)));
    }
    for r in &s.resumed {
        d.push(Block::P(format!(
            "Resumed at {} by `{}` (evlab {}): {} valid point(s) and {} capacity search(es) \
             kept; {} point(s) and {} search(es) measured then (points missing, failed or \
             flagged before, searches interrupted).",
            r.at,
            r.command,
            r.evlab_version,
            r.kept_points,
            r.kept_knees,
            r.measured_points,
            r.measured_knees
        )));
    }
    if !s.hosts.is_empty() {
        d.push(Block::P(hosts_words(s)));
    }
    if let Some(q) = &s.quiet {
        d.push(Block::P(quiet_words(
            q,
            "flagged points and wide intervals",
        )));
    }
    if s.experiment.placebo {
        // Placebos recorded before flags and budgets were made equal too: equal all the same
        // where no series had flags or a budget of its own.
        let own =
            |x: &crate::model::spec::SeriesSpec| x.cpu_budget.is_some() || !x.flags.is_empty();
        let equal = if s.experiment.placebo_flags.is_some() || !s.experiment.series.iter().any(own)
        {
            "one mechanism, one set of flags and one CPU budget"
        } else {
            "one mechanism"
        };
        d.push(Block::P(format!(
            "**A placebo run** (`--placebo`): every evlab series ran {equal} under its own \
             label, and no idle connections were held whatever the idle count says, so its \
             findings test the rules, not the mechanisms."
        )));
    }
    d
}

/// The rule that chose a sequential run's trials and its looks, in two sentences, and the
/// level of the verdicts where it is not the lab's 90%.
fn sequential_words(q: &crate::model::sequential::Record) -> String {
    let level = q.verdict_level();
    format!(
        "**Trials chosen by a rule fixed in advance** (`[sequential]`, docs/methodology.md): {}. \
         Looks: {}.{}",
        q.rule.words(),
        q.looks_words(),
        if (level - crate::analysis::sample::LEVEL).abs() > 1e-12 {
            format!(" The verdicts below are decided at {}.", level_words(level))
        } else {
            String::new()
        }
    )
}

/// What the quiet check before a run found (`run::machine::quiet_check`), in a sentence; when
/// the machine was not quiet, the run should `expect` what follows.
pub(crate) fn quiet_words(q: &crate::model::machine::Quiet, expect: &str) -> String {
    let cpus = q
        .cpu_busy
        .iter()
        .map(|b| format!("{:.0}%", b * 100.0))
        .collect::<Vec<_>>()
        .join(", ");
    match q.problem() {
        None => format!(
            "Before the run the machine was quiet: CPUs busy {cpus} over {:.1} s, {:.0}% \
             stolen at most, no other busy process.",
            q.seconds,
            q.steal * 100.0
        ),
        Some(why) => format!(
            "**Before the run the machine was not quiet** ({why}; CPUs busy {cpus} over \
             {:.1} s): expect {expect}.",
            q.seconds
        ),
    }
}

/// The idle counts, and with `[sweep]` the swept values: `no idle connections and 10,000 idle
/// connections; every series at 1, 2, 4 workers (`--workers N`)`, and a series that runs at
/// some of them (`sweep_values`) named with its own.
fn idle_and_sweep_words(e: &Spec) -> String {
    let list = |v: &[f64]| v.iter().map(|&v| number(v)).collect::<Vec<_>>().join(", ");
    e.idle
        .iter()
        .map(|&i| idle_words(i))
        .collect::<Vec<_>>()
        .join(" and ")
        + &e.sweep
            .as_ref()
            .map(|sw| {
                let own: Vec<String> = e
                    .series
                    .iter()
                    .filter_map(|x| {
                        let v = x.sweep_values.as_ref()?;
                        Some(format!("{} at {}", x.label, list(v)))
                    })
                    .collect();
                let every = if own.is_empty() {
                    "every series"
                } else {
                    "the series"
                };
                format!(
                    "; {every} at {} {} (`{} N`){}",
                    list(&sw.values),
                    sw.name(),
                    sw.flag,
                    if own.is_empty() {
                        String::new()
                    } else {
                        format!(", but {}", own.join(", "))
                    }
                )
            })
            .unwrap_or_default()
}

/// What calibration measured: the client's ceiling, the budget and the rates chosen, each
/// series' capacity, and every probe.
fn calibration_section(c: &Calibration) -> Vec<Block> {
    let mut d = vec![Block::H(2, "Calibration".into())];
    d.push(Block::P(format!(
        "Before the sweep ({:.0} s) this machine was measured. The client started {}/s \
         connections flat out; the sweep offers at most {}/s (its clean ceiling, {:.0}% of \
         that). Server CPU budget: {} — {}.{}",
        c.wall_s,
        thousands(c.client_ceiling),
        thousands(c.client_clean),
        crate::model::calibration::CLEAN_SHARE * 100.0,
        c.server_cpu_budget
            .map(|b| format!("{:.0}% of one CPU (cgroup CPU quota)", b * 100.0))
            .unwrap_or_else(|| "none".into()),
        c.budget_reason,
        if c.rates.is_empty() {
            String::new()
        } else {
            format!(
                " Rates offered: {} (the experiment's multiples of the median capacity).",
                c.rates
                    .iter()
                    .map(|r| format!("{}/s", thousands(*r)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    )));
    if !c.capacities.is_empty() {
        d.push(Block::P(
            "Capacity at the budget, no idle connections (the highest probe rate kept up with; \
             ≥ means the probe reached the clean ceiling without the series falling behind):"
                .into(),
        ));
        d.push(Block::Table(
            vec!["series".into(), "kept up with".into()],
            c.capacities
                .iter()
                .map(|x| {
                    vec![
                        x.series.clone(),
                        format!(
                            "{}{}/s",
                            if x.saturated { "" } else { "≥ " },
                            thousands(x.replies_per_s)
                        ),
                    ]
                })
                .collect(),
        ));
    }
    if !c.probes.is_empty() {
        d.push(Block::Details(
            format!("The probes, in order ({})", c.probes.len()),
            vec![Block::Table(
                vec![
                    "probe".into(),
                    "series".into(),
                    "budget".into(),
                    "offered/s".into(),
                    "replies/s".into(),
                    "starts/s".into(),
                    "client CPU busy".into(),
                ],
                c.probes
                    .iter()
                    .map(|p| {
                        vec![
                            p.what.clone(),
                            p.series.clone(),
                            p.budget
                                .map(|b| format!("{:.0}%", b * 100.0))
                                .unwrap_or_else(|| "–".into()),
                            thousands(p.offered),
                            p.replies_per_s.map(thousands).unwrap_or_default(),
                            p.achieved_start_rate.map(thousands).unwrap_or_default(),
                            p.client_cpu_busy
                                .map(|b| format!("{:.0}%", b * 100.0))
                                .unwrap_or_default(),
                        ]
                    })
                    .collect(),
            )],
        ));
    }
    d
}

/// One idle count against the offered rate: the figures, then the reply rate's, the server's
/// and the client's tables.
fn rate_section(s: &Summary, idle: usize) -> Vec<Block> {
    let mut d = vec![Block::H(2, format!("Reply rate, {}", idle_words(idle)))];
    // A line needs two rates: with one (quick: a low rate, and a capacity search for the
    // rest), the tables say it all.
    let rates = s.offered_rates(|p| p.idle == idle);
    if rates.len() > 1 {
        d.extend(figures(s, idle));
        if offered_met(s, &|_| true) {
            d.push(Block::P(
                "Every point answered what it was offered: the reply rate is only in its table."
                    .into(),
            ));
        }
    }
    d.push(Block::P(
        "Replies/s: the mean over valid trials, ± the half-width of the mean's 90% interval where \
         two or more (the figures' bars: their min–max). † marks a \
         value from invalid points only (hollow in the figures; see Validity), (+n†) n invalid \
         trials left out of a valid mean (hollow markers off the line), ✗ a failed point. No \
         verdict uses an invalid point."
            .into(),
    ));
    d.push(rate_table(s, idle, &|p| p.reply_rate(), 0, Trials::Valid));
    d.push(Block::P(
        "Server CPU time per reply (µs), all its processes, from /proc:".into(),
    ));
    d.push(rate_table(
        s,
        idle,
        &|p| p.server_cpu_us_per_reply,
        2,
        Trials::Valid,
    ));
    d.push(Block::P(
        "Client CPU busy (%, wall time minus the kernel's idle time on the client CPUs, so \
         loopback softirq included), mean over every trial; † where a trial was invalid:"
            .into(),
    ));
    d.push(rate_table(
        s,
        idle,
        &|p| p.client_cpu_busy.map(|b| b * 100.0),
        0,
        Trials::AllOk,
    ));
    d
}

/// The validity rule in words, the table of what it found, and the points that failed or
/// series that were skipped.
fn validity_section(s: &Summary) -> Vec<Block> {
    let e = &s.experiment;
    let mut d = vec![Block::H(2, "Validity".into())];
    d.push(Block::P(format!(
        "Verdicts use valid points only. A point is invalid when the client fell behind for good \
         (it started connections at under {:.0}% of the offered rate, or its lag grew to the end), \
         its CPU was busy ≥ {:.0}% of the time (softirq included), it ran out of resources \
         (addrunavail, fd-unavail, ftab-full), or the server did not serve; httperf's manual calls \
         such runs invalid; so is a point that failed. Isolated lateness (a VM's scheduling jitter) \
         and steal are notes, not flags. Every point's flags and notes are in points.csv and \
         summary.json.",
        e.start_rate_limit * 100.0,
        e.client_cpu_limit * 100.0,
    )));
    d.extend(validity_table(s));
    let failed: Vec<String> = s
        .points
        .iter()
        .filter(|p| !p.ok())
        .map(|p| {
            format!(
                "point {}: {} idle={} rate={}: {}",
                p.index,
                p.label(),
                p.idle,
                thousands(p.rate),
                p.reason.as_deref().unwrap_or("?")
            )
        })
        .collect();
    if !failed.is_empty() {
        d.push(Block::P("Failed points:".into()));
        d.push(Block::List(failed));
    }
    if !s.skipped.is_empty() {
        d.push(Block::P("Skipped:".into()));
        d.push(Block::List(
            s.skipped
                .iter()
                .map(|x| format!("{}: {}", x.series, x.reason))
                .collect(),
        ));
    }
    d
}

/// The findings against the papers': how many reproduced, what the paper measured on, and
/// each finding with its numbers.
fn paper_section(s: &Summary, fs: &[Finding]) -> Vec<Block> {
    let mut d = vec![Block::H(2, "The paper's findings on this machine".into())];
    if fs.is_empty() {
        d.push(Block::P(
            "This experiment does not measure any of the paper's comparisons (it needs the paper's \
             mechanisms, and idle counts 0 and > 0, to compare)."
                .into(),
        ));
        return d;
    }
    let n = |v: Verdict| fs.iter().filter(|f| f.verdict == v).count();
    let from = |src: &str| fs.iter().all(|f| f.source.starts_with(src));
    let paper = if s.experiment.proxy.is_some() {
        "The proxy paper measured Squid on a 1 GHz Pentium III running Linux 2.4, with \
         Polygraph clients and server on separate machines behind a WAN emulator"
    } else if from("LSP") {
        "The LSP measured Apache 1.3.6 (1,000 processes accepting on one port, its accept \
         lock removed) on a 4-way 450 MHz Xeon running Linux 2.2.9, with SPECweb99 clients \
         on four machines over 100 Mbps Ethernet"
    } else if from("LSE") {
        "The LSE page measured dphttpd on an 8-way 700 MHz PIII Xeon (SMP) and a 1-way \
         866 MHz PIII (UP) running Linux 2.5, with httperf and deadconn on a client machine"
    } else {
        "The paper measured a 2.4 GHz Xeon running Linux 2.6.5 uni-processor with eight \
         client machines over gigabit Ethernet"
    };
    d.push(Block::P(format!(
        "Of {} findings checked, {} reproduced, {}{} not reproduced, {} inconclusive{}. \
         {paper}; this run had {} on one machine over loopback ({}).",
        fs.len(),
        n(Verdict::Reproduced),
        match n(Verdict::Partly) {
            0 => String::new(),
            p => format!("{p} partly, "),
        },
        n(Verdict::NotReproduced),
        n(Verdict::Inconclusive),
        match n(Verdict::NotJudged) {
            0 => String::new(),
            k => format!(", {k} not judged"),
        },
        s.machine.cpu_model,
        s.machine
            .kernel
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    )));
    d.push(Block::Table(
        vec![
            "paper".into(),
            "finding".into(),
            "here".into(),
            "numbers".into(),
        ],
        fs.iter()
            .map(|f| {
                vec![
                    f.source.clone(),
                    f.claim.clone(),
                    f.verdict.word().into(),
                    f.evidence.clone(),
                ]
            })
            .collect(),
    ));
    d
}

/// The machine's kernel, CPU, memory and limits, and the tools' versions.
fn machine_section(s: &Summary) -> Vec<Block> {
    let m = &s.machine;
    let mut tools: Vec<String> = m.tools.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    tools.sort();
    vec![
        Block::H(2, "Machine and tools".into()),
        Block::List(vec![
            format!("kernel: {}", m.kernel),
            format!("CPU: {} × {}", m.cpus, m.cpu_model),
            format!("memory: {} MiB", m.memory_mib),
            format!(
                "open files: soft {}, hard {}, fs.nr_open {}",
                m.fd_limit_soft, m.fd_limit_hard, m.fs_nr_open
            ),
            format!(
                "net: ip_local_port_range {}, tcp_tw_reuse {}, somaxconn {}",
                m.ip_local_port_range, m.tcp_tw_reuse, m.somaxconn
            ),
            format!("evlab {}", m.evlab_version),
            format!("host: {}", m.hostname),
        ]),
        Block::List(tools),
    ]
}

/// How to run it all again, and each point by hand: the spec, then every point's commands.
fn reproduce_section(s: &Summary) -> Vec<Block> {
    let mut d = vec![Block::H(2, "How to reproduce".into())];
    d.push(Block::P(format!(
        "The whole run: `{}` (spec `{}`, below). Then each point by hand, in start order: its \
         commands make its document root again (the run's scratch directory is removed when \
         it ends), start the server (and the idle holder) in the background, wait until they \
         answer, run the load and stop them; pasted into a shell (sh or bash, with curl) they \
         measure the point again, on the port the run used. A CPU budget is made as the run \
         made it: a cgroup with a CPU quota (made by root, or by the owner of its parent group), which the server joins.",
        s.command, s.spec_path
    )));
    d.push(Block::Code(
        s.spec_text
            .lines()
            .map(crate::model::text::without_module_paths)
            .collect(),
    ));
    let mut cmds = Vec::new();
    for p in &s.points {
        cmds.push(format!(
            "# point {}: {} idle={} rate={} trial {}",
            p.index,
            p.label(),
            p.idle,
            p.rate,
            p.trial
        ));
        // Results from before the commands made the document root (evlab 0.1.0 until issue
        // 12) name a directory that is gone.
        if p.commands
            .first()
            .is_some_and(|c| !c.starts_with("mkdir -p "))
        {
            cmds.push(
                "# (recorded without its setup: first make the --root directory, holding a \
                 one-byte file `one`, and run the server in the background)"
                    .into(),
            );
        }
        cmds.extend(p.commands.iter().cloned());
    }
    let n = s.points.len();
    d.push(Block::Details(
        format!(
            "Each point's commands ({n} point{})",
            if n == 1 { "" } else { "s" }
        ),
        vec![Block::Code(cmds)],
    ));
    d.push(Block::P(
        "Raw data: `points.csv` (one row per point), `samples.csv` (one row per sample interval), \
         `summary.json` (everything), `load/point-NNN.json` (the generator's own reports). \
         Re-render with `evlab report DIR`. Method: docs/methodology.md."
            .into(),
    ));
    d
}

pub fn render_md(s: &Summary) -> String {
    page::markdown(&document(s))
}

pub fn render_html(s: &Summary) -> String {
    page::html(&format!("evlab run: {}", s.experiment.name), &document(s))
}

/// Writes report.md, report.html, every figure as `fig-*.svg`, and findings.json (the
/// verdicts and the controls, for programs).
pub fn write(s: &Summary, dir: &Path) -> Result<(), LabError> {
    let mut written = Vec::new();
    for b in document(s) {
        if let Block::Figure { file, svg, .. } = b {
            write_atomic(&dir.join(&file), &svg)?;
            written.push(file);
        }
    }
    // A figure an earlier rendering drew and this one does not would be a stale file beside
    // the report: the report's figures are exactly those it names.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with("fig-") && name.ends_with(".svg") && !written.contains(&name) {
                std::fs::remove_file(e.path())?;
            }
        }
    }
    crate::render::verdicts::write(dir, &crate::render::verdicts::verdicts(s))?;
    write_atomic(&dir.join("report.md"), &render_md(s))?;
    write_atomic(&dir.join("report.html"), &render_html(s))
}

#[cfg(test)]
mod tests;
