//! Experiment specs: one TOML file per figure or table (`experiments/*.toml`).
//!
//! Parsing is strict (`deny_unknown_fields`) because a misspelt key silently falling back to a
//! default would produce a plausible but wrong figure. Every error names the key and the line.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::LabError;

mod validate;

/// The names of every mechanism the μserver offers, readiness and completion, as the documents
/// spell them (`evlab-wire`'s list, kept equal to the registry in `evlab-poll` by a test there;
/// the `quick` default sweeps all supported ones). Specs name mechanisms exactly, without the
/// command line's aliases, so that a results directory reads the same as the figure it makes.
pub const EVLAB_MECHANISMS: &[&str] = evlab_wire::mechanisms::NAMES;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// What the experiment shows, in one line of plain words, for `evlab run --list`; absent:
    /// the description's first sentence.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// Mechanisms (evlab) and peers (`nginx`, `lighttpd:<handler>`, `lighttpd:*`, and with
    /// `[proxy]` `haproxy`), or `"all"` for every evlab mechanism this kernel supports.
    #[serde(default)]
    pub mechanisms: Vec<String>,
    /// Extra lines with their own flags (the accept-limit study), drawn after `mechanisms`.
    #[serde(default)]
    pub series: Vec<SeriesSpec>,
    /// Flags given to every `evlab serve` (not to peers).
    #[serde(default = "default_server_flags")]
    pub server_flags: Vec<String>,
    /// Flags added to every `evlab load`.
    #[serde(default)]
    pub load_flags: Vec<String>,
    /// With `active_conns`: measure each point over a fixed window of `duration_s` (the load
    /// ends then, whatever is in flight: `evlab load --stop-after`), not for as long as its
    /// calls take.
    #[serde(default)]
    pub fixed_window: bool,
    /// Keep every reply's latency of each point's measured run beside the summary
    /// (`evlab load --latencies`: `load/point-NNN.latencies.csv`, one per client host across
    /// hosts).
    #[serde(default)]
    pub keep_latencies: bool,
    #[serde(default)]
    pub workload: Workload,
    /// Offered request rates (connections/s × calls per connection is not used: this is the
    /// connection rate httperf calls `--rate`, which for one call per connection is requests/s),
    /// or `"auto"`: `auto_rates` × the median capacity calibration measured, capped at the
    /// client's clean ceiling.
    #[serde(default)]
    pub rates: Rates,
    /// With `rates = "auto"`: the rates as multiples of the series' median capacity.
    #[serde(default = "default_auto_rates")]
    pub auto_rates: Vec<f64>,
    /// A CPU budget for the server (a cgroup CPU quota, as a share of one CPU), or `"auto"`:
    /// chosen by calibration so that the fastest series saturates at `auto_target` × the
    /// client's clean ceiling. None: the server has its whole CPU.
    #[serde(default)]
    pub server_cpu_budget: Option<Budget>,
    /// With `server_cpu_budget = "auto"`: where the fastest series should saturate, as a share
    /// of the client's clean ceiling.
    #[serde(default = "default_auto_target")]
    pub auto_target: f64,
    pub rate_search: Option<RateSearch>,
    /// `[knee]`: after each series' rates at each idle count in each trial, its capacity found
    /// by bisection on one server (`model::knee`); the rules on what a server sustains read
    /// it where a run has it (docs/findings.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<crate::model::knee::KneeSpec>,
    #[serde(default = "one")]
    pub calls_per_conn: u32,
    /// Idle connection counts; one set of lines (one figure) per count.
    #[serde(default = "zero_idle")]
    pub idle: Vec<usize>,
    /// The idle holder runs with `--request-first`: each idle connection sends one `GET /one`
    /// (every point's document root has it) at set-up and reads its reply before it stays idle (the LSE page's "dead"
    /// connections, `deadconn_last`).
    #[serde(default)]
    pub idle_request_first: bool,
    /// httperf's fixed set of active connections (`--num-conns N`, the LSE page's 100) instead of
    /// rate × duration: each makes `calls_per_conn` calls, so a point lasts as long as the server
    /// takes to answer N × calls_per_conn requests, and its reply rate is the server's throughput
    /// with N busy connections. `duration_s` then only sizes the estimate and the time limit
    /// (3 × `duration_s` + `timeout_s` + 30 s).
    #[serde(default)]
    pub active_conns: Option<u64>,
    #[serde(default = "default_duration")]
    pub duration_s: f64,
    #[serde(default)]
    pub warmup_s: f64,
    /// Trials: a fixed number, or with `[sequential]` (which it must not be given with) the
    /// first block's, `first`.
    #[serde(default = "one")]
    pub trials: u32,
    /// `[sequential]`: trials added in blocks after `first` until every finding is decided,
    /// `most`, or the time budget (`model::sequential`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequential: Option<crate::model::sequential::SequentialSpec>,
    #[serde(default = "default_timeout")]
    pub timeout_s: f64,
    #[serde(default)]
    pub server_cpu: usize,
    #[serde(default = "default_client_cpus")]
    pub client_cpus: Vec<usize>,
    /// Run evlab servers with `--profile` (time every syscall) for the Table 1 syscall table.
    #[serde(default)]
    pub profile: bool,
    /// SPECweb99 file set size (directories of 36 files, ~4.9 MiB each).
    #[serde(default = "default_fileset_dirs")]
    pub fileset_dirs: usize,
    /// Late starts (> 1 ms) above this share of connections are noted as jitter, with its size.
    /// Lateness alone does not invalidate a point: a VM's scheduling jitter makes some.
    #[serde(default = "default_late_start_limit")]
    pub late_start_limit: f64,
    /// A point is invalid when the generator started connections at less than this share of
    /// the offered rate (it fell behind for good, not for a moment).
    #[serde(default = "default_start_rate_limit")]
    pub start_rate_limit: f64,
    /// Client CPU share (of the client CPUs) at or above which a point is "client-saturated".
    #[serde(default = "default_client_cpu_limit")]
    pub client_cpu_limit: f64,
    /// Seconds between consecutive points (the paper waited 120 s for TIME_WAIT; evlab's load
    /// generator uses fresh source addresses instead, so the default is 0).
    #[serde(default)]
    pub pause_s: f64,
    /// A micro-benchmark (`[micro]`) instead of a server sweep: the lab runs it once and
    /// reports its table and the seed's findings (see `docs/micro.md`). The sweep's keys do not
    /// apply.
    #[serde(default)]
    pub micro: Option<MicroSpec>,
    /// `[proxy]`: each point measures `evlab proxy` (the series' mechanism, its flags given to
    /// the proxy) in front of an `evlab serve` origin; three processes per point. The proxy
    /// runs pinned to `server_cpu` inside the budget, and its CPU per reply is the point's; the
    /// origin runs outside the budget and is not measured. Series `nginx` is nginx
    /// `proxy_pass` (no cache) in front of the same origin, series `haproxy` HAProxy (no cache,
    /// `option splice-auto`).
    #[serde(default)]
    pub proxy: Option<ProxySpec>,
    /// `[sweep]`: a server flag swept over values (`--workers` 1, 2, 4, …): every series runs at
    /// every value, and the figures put the value on x, one line per series.
    #[serde(default)]
    pub sweep: Option<SweepSpec>,
    /// `[network]`: WAN conditions between the client hosts and the server, applied with `tc`
    /// (and iptables) on the client hosts for the whole run (`evlab run --hosts` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,
    /// Made for a server host and client hosts: refused without `--hosts` (its rates are for
    /// client machines that one machine's client cannot stand in for).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hosts_only: bool,
    /// Polymix-like workload: objects of each kind in the origin's file set.
    #[serde(default = "default_polymix_objects")]
    pub polymix_objects: usize,
    /// Polymix-like workload: `polymix4` or one size for every object (`8K`, `65536`).
    #[serde(default = "default_object_size")]
    pub object_size: String,
    /// Which family of findings judges the run (`paper`, `proxy`, `deadconn`, `herd`, `none`;
    /// `micro` names the micro-benchmarks' rules and judges nothing in a sweep).
    /// Absent (a summary written before the key existed): the family the run's shape implies
    /// ([`Spec::family`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub findings: Option<Family>,
    /// The placebo control (`evlab run NAME --placebo`): both arms of every comparison get
    /// the same condition. Every evlab series runs one mechanism (epoll-lt where the experiment
    /// has it, else its first series'), under its own label, and the idle holder is not
    /// started, whatever idle count a point is labelled with. Only the plan and the points
    /// read it; the findings never do, so a rule that claims a difference must then come out
    /// "not reproduced" or "inconclusive".
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub placebo: bool,
    /// The seed of the order in which each trial visits its arms (series × idle count, at each
    /// swept value): drawn when a run starts unless the experiment gives one, and recorded in
    /// summary.json, so that a resumed run keeps the order and another run can repeat it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_seed: Option<u64>,
    /// In a placebo run: the flags every evlab series runs with (those of epoll-lt's series
    /// where the experiment has one, else of its first evlab series), set by
    /// [`Spec::make_placebo`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placebo_flags: Option<Vec<String>>,
}

/// The series a placebo run adds, exempt from the placebo: select with its idle connections
/// really held, so that the run shows it can still find the paper's largest effect.
pub const POSITIVE_CONTROL: &str = "select (positive control)";

impl Spec {
    /// Whether each point is measured over a fixed window (`fixed_window` with `active_conns`).
    pub fn window(&self) -> bool {
        self.fixed_window && self.active_conns.is_some()
    }

    /// Whether a point of series `label` holds its idle connections: always, except in a
    /// placebo run, where only the positive control does.
    pub fn holds_idle(&self, label: &str) -> bool {
        !self.placebo || label == POSITIVE_CONTROL
    }

    /// Series `x` as its label names it: its own mechanism and flags. In a placebo run every
    /// series ran one mechanism with one set of flags, but a comparison's arms are still the
    /// conditions their labels name (the series of a mechanism is labelled with its name, a
    /// `[[series]]` by its entry); the exempt positive control and peers are as they ran. Any
    /// other run: `x` itself.
    pub fn labelled(&self, x: &Series) -> Series {
        if !self.placebo || x.kind != ServerKind::Evlab || x.label == POSITIVE_CONTROL {
            return x.clone();
        }
        match self.series_spec(&x.label) {
            Some(sp) => Series {
                mechanism: sp.mechanism.clone(),
                flags: sp.flags.clone(),
                ..x.clone()
            },
            None => Series {
                mechanism: x.label.clone(),
                flags: Vec::new(),
                ..x.clone()
            },
        }
    }

    /// Makes this the placebo control of itself (`evlab run NAME --placebo`): results under
    /// `NAME-placebo`, and every series on the experiment's own CPU budget (a series' budget is a
    /// compared factor: the negative control's). The plan then gives every evlab series one
    /// mechanism and one set of flags, and no series but the positive control holds idle
    /// connections (`run::plan`, `run::point`).
    pub fn make_placebo(&mut self) {
        self.placebo = true;
        self.name = format!("{}-placebo", self.name);
        for s in &mut self.series {
            s.cpu_budget = None;
        }
        let evlab: Vec<Series> = self
            .series_list(&|_| true, &[])
            .into_iter()
            .filter(|s| s.kind == ServerKind::Evlab)
            .collect();
        self.placebo_flags = evlab
            .iter()
            .find(|s| s.mechanism == "epoll-lt")
            .or(evlab.first())
            .map(|s| s.flags.clone());
    }

    /// The flags series `label` runs with: its `[[series]]` entry's, or in a placebo run
    /// (but for the exempt positive control) the placebo's.
    pub fn run_flags(&self, label: &str) -> Vec<String> {
        match &self.placebo_flags {
            Some(f) if self.placebo && label != POSITIVE_CONTROL => f.clone(),
            _ => self
                .series_spec(label)
                .map(|x| x.flags.clone())
                .unwrap_or_default(),
        }
    }
}

/// The families of findings, one module each in `analysis::findings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// The μserver paper's figures and Table 1 (Gammo et al., OLS 2004).
    Paper,
    /// The proxy paper's uselect and splice findings (Rosu & Rosu, USENIX 2003).
    Proxy,
    /// The LSE epoll page's dead connections (dphttpd).
    Deadconn,
    /// The Linux Scalability Project's accept herd under load.
    Herd,
    /// No findings (a sweep whose series are not accept modes).
    None,
    /// The micro-benchmarks' own findings (pipetest, fdalloc, herd, malloc): judged on the
    /// benchmark's report by `analysis::micro` (as `evlab-micro` writes it), registered in
    /// `analysis::rules` beside the others. Never
    /// inferred from a sweep's shape; a sweep that names it has no findings of its own.
    Micro,
}

impl Spec {
    /// The experiment's family of findings: its `findings` key, or, where it has none, the one
    /// its shape implies (how summaries written before the key were judged).
    pub fn family(&self) -> Family {
        if let Some(f) = self.findings {
            return f;
        }
        if self.proxy.is_some() {
            Family::Proxy
        } else if self.sweep.as_ref().is_none_or(|sw| sw.flag == "--workers")
            && self
                .series
                .iter()
                .any(|x| x.flags.iter().any(|f| f == "--accept-mode"))
        {
            Family::Herd
        } else if self.sweep.is_some() {
            Family::None
        } else if self.idle_request_first {
            Family::Deadconn
        } else {
            Family::Paper
        }
    }
}

/// `[proxy]`: the origin behind the measured proxy.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProxySpec {
    /// Flags for the origin's `evlab serve` (e.g. `--origin-delay`); the Polymix workload adds
    /// `--no-store-prefix /polymix/u/`.
    #[serde(default)]
    pub origin_flags: Vec<String>,
    /// Flags for every `evlab proxy` series, before the series' own (e.g. the Polymix-like
    /// experiments' `--cache-ttl`, which gives their objects the freshness their origin does not
    /// state).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proxy_flags: Vec<String>,
    /// The origin's CPU (default: the first client CPU).
    #[serde(default)]
    pub origin_cpu: Option<usize>,
}

/// `[sweep]`: one flag of the measured server, swept. Each series runs once per value with
/// `flag value` added to its flags (after the experiment's and the series' own), so a point is
/// (series, value, idle count, rate, trial), and the report draws reply rate, CPU per reply and
/// p99 against the value.
/// `[network]`: what the link between each client host and the server does to packets.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// Delay added to each packet the client host sends, ms (netem only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<f64>,
    /// Share of the packets lost, percent (0–100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_pct: Option<f64>,
    /// The client host's sending rate, Mbit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_mbit: Option<f64>,
    /// The client hosts it applies on, by name (absent: every client host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// The flag, e.g. `--workers`.
    pub flag: String,
    /// Its values, in the order they run and are drawn (increasing).
    pub values: Vec<f64>,
    /// What the x axis says (default: the flag without its dashes).
    #[serde(default)]
    pub label: Option<String>,
}

impl NetworkSpec {
    fn validate(&self) -> Result<(), (&'static str, String)> {
        let positive = |key, v: Option<f64>, max: f64| match v {
            Some(x) if !(x.is_finite() && x > 0.0 && x <= max) => {
                Err((key, format!("must be over 0 and at most {max}, not {x}")))
            }
            _ => Ok(()),
        };
        positive("delay_ms", self.delay_ms, 60_000.0)?;
        positive("loss_pct", self.loss_pct, 100.0)?;
        positive("rate_mbit", self.rate_mbit, 1e6)?;
        if self.delay_ms.is_none() && self.loss_pct.is_none() && self.rate_mbit.is_none() {
            return Err((
                "network",
                "gives no condition: give delay_ms, loss_pct or rate_mbit".into(),
            ));
        }
        Ok(())
    }

    /// The conditions in words, e.g. "1% loss, 10 Mbit/s".
    pub fn words(&self) -> String {
        let mut v = vec![];
        if let Some(d) = self.delay_ms {
            v.push(format!("{d} ms delay"));
        }
        if let Some(l) = self.loss_pct {
            v.push(format!("{l}% loss"));
        }
        if let Some(r) = self.rate_mbit {
            v.push(format!("{r} Mbit/s"));
        }
        v.join(", ")
    }
}

impl SweepSpec {
    /// The x axis' name: `label`, or the flag without its dashes (`workers`).
    pub fn name(&self) -> String {
        self.label
            .clone()
            .unwrap_or_else(|| self.flag.trim_start_matches('-').to_string())
    }

    /// A value as the flag is given it: integers without a decimal point.
    pub fn arg(value: f64) -> String {
        if value.fract() == 0.0 && value.abs() < 1e15 {
            format!("{}", value as i64)
        } else {
            value.to_string()
        }
    }
}

/// The requests a SPECweb99-like session makes on average: 30% make one, 70% 5 to 15
/// (`evlab load --specweb-calls specweb99`, its default; `CallsPerConn::SPECWEB99.mean()` in
/// evlab-load, which the cli's tests hold equal to this).
pub const SPECWEB99_CALLS: f64 = 0.3 + 0.7 * 10.0;

/// The micro-benchmarks an experiment may run.
pub const MICRO_BENCHMARKS: &[&str] = &["pipetest", "herd", "fdalloc", "malloc", "readahead"];

/// `[micro]`: which benchmark, with which flags.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MicroSpec {
    /// `pipetest`, `herd`, `fdalloc`, `malloc` or `readahead`.
    pub benchmark: String,
    /// Flags for its subcommand (`evlab pipetest …`); `--json` is the lab's.
    #[serde(default)]
    pub args: Vec<String>,
    /// Seconds the run took on the reference machine (results/reference), which
    /// `evlab run --list` gives as its time: a micro-benchmark runs once, for as long as the
    /// machine takes, so there is no model to estimate it by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_s: Option<f64>,
}

/// `rates`: a list, or `"auto"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "NumbersOrAuto", into = "NumbersOrAuto")]
pub enum Rates {
    Fixed(Vec<f64>),
    Auto,
}

impl Default for Rates {
    fn default() -> Self {
        Rates::Fixed(vec![])
    }
}

impl Rates {
    pub fn is_auto(&self) -> bool {
        matches!(self, Rates::Auto)
    }
    pub fn fixed(&self) -> &[f64] {
        match self {
            Rates::Fixed(v) => v,
            Rates::Auto => &[],
        }
    }
    fn is_empty(&self) -> bool {
        matches!(self, Rates::Fixed(v) if v.is_empty())
    }
}

/// `server_cpu_budget`: a share of one CPU, or `"auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "NumbersOrAuto", into = "NumbersOrAuto")]
pub enum Budget {
    Share(f64),
    Auto,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum NumbersOrAuto {
    Word(String),
    One(f64),
    Many(Vec<f64>),
}

fn auto_word(w: &str) -> Result<(), String> {
    if w == "auto" {
        Ok(())
    } else {
        Err(format!("`{w}`: expected a number or \"auto\""))
    }
}

impl TryFrom<NumbersOrAuto> for Rates {
    type Error = String;
    fn try_from(r: NumbersOrAuto) -> Result<Self, String> {
        match r {
            NumbersOrAuto::Word(w) => auto_word(&w).map(|_| Rates::Auto),
            NumbersOrAuto::One(x) => Ok(Rates::Fixed(vec![x])),
            NumbersOrAuto::Many(v) => Ok(Rates::Fixed(v)),
        }
    }
}

impl From<Rates> for NumbersOrAuto {
    fn from(r: Rates) -> Self {
        match r {
            Rates::Fixed(v) => NumbersOrAuto::Many(v),
            Rates::Auto => NumbersOrAuto::Word("auto".into()),
        }
    }
}

impl TryFrom<NumbersOrAuto> for Budget {
    type Error = String;
    fn try_from(r: NumbersOrAuto) -> Result<Self, String> {
        match r {
            NumbersOrAuto::Word(w) => auto_word(&w).map(|_| Budget::Auto),
            NumbersOrAuto::One(x) => Ok(Budget::Share(x)),
            NumbersOrAuto::Many(_) => Err("expected one number or \"auto\"".into()),
        }
    }
}

impl From<Budget> for NumbersOrAuto {
    fn from(b: Budget) -> Self {
        match b {
            Budget::Share(x) => NumbersOrAuto::One(x),
            Budget::Auto => NumbersOrAuto::Word("auto".into()),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SeriesSpec {
    /// Legend label, e.g. "epoll-lt accept-limit=10".
    pub label: String,
    pub mechanism: String,
    #[serde(default)]
    pub flags: Vec<String>,
    /// Polymix-like workload: this series' object size (its own file set), instead of the
    /// experiment's `object_size`.
    #[serde(default)]
    pub object_size: Option<String>,
    /// This series' own CPU budget (a share of one CPU) instead of the experiment's: the
    /// negative control of a "no difference" rule, the same mechanism on a budget that
    /// differs by twice the rule's margin (docs/findings.md). Calibration does not probe it.
    #[serde(default)]
    pub cpu_budget: Option<f64>,
    /// The idle counts this series runs at (some of the experiment's `idle`); every one when
    /// absent.
    #[serde(default)]
    pub idle: Option<Vec<usize>>,
    /// The `[sweep]` values this series runs at (some of them): herd-serve's threads stop at
    /// 64 workers where its processes go on to 512. Every one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_values: Option<Vec<f64>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RateSearch {
    pub start: f64,
    pub step: f64,
    pub max: f64,
    /// A series stops after `past` points whose reply rate fell below `below` × offered.
    #[serde(default = "default_below")]
    pub below: f64,
    #[serde(default = "default_past")]
    pub past: u32,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(try_from = "WorkloadRepr", into = "WorkloadRepr")]
pub enum Workload {
    /// The paper's one-byte workload: every request fetches `/one`.
    #[default]
    OneByte,
    /// SPECweb99-like, over a file set made by `evlab fileset`.
    Specweb,
    /// Requests drawn from a file of URIs (one a line).
    UriList(PathBuf),
    /// Polymix-like (`evlab load --polymix`) over a file set made by `evlab fileset --polymix`.
    Polymix,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum WorkloadRepr {
    Name(String),
    Table {
        #[serde(rename = "uri_list")]
        uri_list: PathBuf,
    },
}

impl TryFrom<WorkloadRepr> for Workload {
    type Error = String;
    fn try_from(r: WorkloadRepr) -> Result<Self, String> {
        match r {
            WorkloadRepr::Name(n) => match n.as_str() {
                "one-byte" => Ok(Workload::OneByte),
                "specweb" => Ok(Workload::Specweb),
                "polymix" => Ok(Workload::Polymix),
                other => Err(format!(
                    "unknown workload `{other}`: expected \"one-byte\", \"specweb\", \"polymix\" or {{ uri_list = \"FILE\" }}"
                )),
            },
            WorkloadRepr::Table { uri_list } => Ok(Workload::UriList(uri_list)),
        }
    }
}

impl From<Workload> for WorkloadRepr {
    fn from(w: Workload) -> Self {
        match w {
            Workload::OneByte => WorkloadRepr::Name("one-byte".into()),
            Workload::Specweb => WorkloadRepr::Name("specweb".into()),
            Workload::Polymix => WorkloadRepr::Name("polymix".into()),
            Workload::UriList(p) => WorkloadRepr::Table { uri_list: p },
        }
    }
}

impl Workload {
    pub fn label(&self) -> String {
        match self {
            Workload::OneByte => "one-byte".into(),
            Workload::Specweb => "SPECweb99-like".into(),
            Workload::Polymix => "Polymix-like".into(),
            Workload::UriList(p) => format!("URI list {}", p.display()),
        }
    }
}

fn default_server_flags() -> Vec<String> {
    // The paper's configuration (§4.2) and no header timeout: idle connections are the point.
    vec![
        "--sendfile".into(),
        "--cork".into(),
        "--header-timeout".into(),
        "0".into(),
    ]
}
fn one() -> u32 {
    1
}
fn zero_idle() -> Vec<usize> {
    vec![0]
}
fn default_duration() -> f64 {
    120.0
}
fn default_timeout() -> f64 {
    5.0
}
fn default_client_cpus() -> Vec<usize> {
    vec![1]
}
fn default_fileset_dirs() -> usize {
    10
}
fn default_polymix_objects() -> usize {
    10_000
}
fn default_object_size() -> String {
    "polymix4".into()
}
fn default_auto_rates() -> Vec<f64> {
    vec![0.3, 0.6, 0.9, 1.3, 1.8]
}
fn default_auto_target() -> f64 {
    0.5
}
fn default_start_rate_limit() -> f64 {
    0.99
}
fn default_late_start_limit() -> f64 {
    0.01
}
fn default_client_cpu_limit() -> f64 {
    0.95
}
fn default_below() -> f64 {
    0.9
}
fn default_past() -> u32 {
    2
}

/// One line of a figure: what to start and what to call it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Series {
    pub label: String,
    pub kind: ServerKind,
    /// evlab mechanism name, or the peer's event handler.
    pub mechanism: String,
    pub flags: Vec<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    Evlab,
    Nginx,
    Lighttpd,
    /// HAProxy, a proxy peer only (it serves no files).
    Haproxy,
}

impl Spec {
    pub fn parse(src: &str, origin: &str) -> Result<Spec, LabError> {
        let mut spec: Spec = toml::from_str(src).map_err(|e| {
            let (line, key) = match e.span() {
                Some(span) => locate(src, span.start),
                None => (0, None),
            };
            LabError::Spec {
                origin: origin.to_string(),
                line,
                key: key.unwrap_or_else(|| "?".into()),
                msg: e.message().to_string(),
            }
        })?;
        spec.validate(src, origin)?;
        if let Some(q) = &spec.sequential {
            spec.trials = q.first;
        }
        Ok(spec)
    }

    pub fn load(path: &Path) -> Result<Spec, LabError> {
        let src = std::fs::read_to_string(path)
            .map_err(|e| LabError::Io(format!("cannot read {}: {e}", path.display())))?;
        Spec::parse(&src, &path.display().to_string())
    }

    /// The series spec labelled `label`, if it came from `[[series]]`.
    fn series_spec(&self, label: &str) -> Option<&SeriesSpec> {
        self.series.iter().find(|s| s.label == label)
    }

    /// The requests each connection is expected to make: `calls_per_conn` (one-byte, URI
    /// list), SPECweb99's sessions' mean [`SPECWEB99_CALLS`]; None where it is not known here
    /// (Polymix, or SPECweb99 with `--specweb-calls` in `load_flags`).
    pub fn requests_per_conn(&self) -> Option<f64> {
        match self.workload {
            Workload::OneByte | Workload::UriList(_) => Some(f64::from(self.calls_per_conn)),
            Workload::Specweb
                if !self
                    .load_flags
                    .iter()
                    .any(|f| f.starts_with("--specweb-calls")) =>
            {
                Some(SPECWEB99_CALLS)
            }
            _ => None,
        }
    }

    /// The width a capacity search closes its bracket to (`[knee] resolution`, or its default).
    pub fn knee_resolution(&self) -> f64 {
        self.knee.as_ref().map_or_else(
            || crate::model::knee::KneeSpec::default().resolution,
            |k| k.resolution,
        )
    }

    /// A series' own CPU budget (`[[series]] cpu_budget`), if it has one.
    pub fn series_budget(&self, label: &str) -> Option<f64> {
        self.series_spec(label).and_then(|s| s.cpu_budget)
    }

    /// Whether the series labelled `label` runs at `idle` idle connections.
    pub fn series_runs_at(&self, label: &str, idle: usize) -> bool {
        self.series_spec(label)
            .and_then(|s| s.idle.as_ref())
            .is_none_or(|v| v.contains(&idle))
    }

    /// Whether the series labelled `label` runs at the swept value `v` (`None`: no sweep).
    pub fn series_sweeps_at(&self, label: &str, v: Option<f64>) -> bool {
        match (
            v,
            self.series_spec(label)
                .and_then(|s| s.sweep_values.as_ref()),
        ) {
            (Some(v), Some(vals)) => vals.contains(&v),
            _ => true,
        }
    }

    /// The swept values (one `None` when the experiment has no `[sweep]`).
    pub fn sweep_values(&self) -> Vec<Option<f64>> {
        match &self.sweep {
            Some(sw) => sw.values.iter().map(|&v| Some(v)).collect(),
            None => vec![None],
        }
    }

    /// The lines to draw, in legend order. `supported` answers whether an evlab mechanism runs
    /// on this kernel (used only to expand `"all"`); `lighttpd_handlers` expands `lighttpd:*`.
    pub fn series_list(
        &self,
        supported: &dyn Fn(&str) -> bool,
        lighttpd_handlers: &[String],
    ) -> Vec<Series> {
        let mut out = Vec::new();
        let evlab = |m: &str| Series {
            label: m.to_string(),
            kind: ServerKind::Evlab,
            mechanism: m.to_string(),
            flags: vec![],
        };
        for m in &self.mechanisms {
            match parse_mechanism_entry(m) {
                Ok(Entry::All) => out.extend(
                    EVLAB_MECHANISMS
                        .iter()
                        .filter(|m| supported(m))
                        .map(|m| evlab(m)),
                ),
                Ok(Entry::Evlab(m)) => out.push(evlab(&m)),
                Ok(Entry::Nginx) => out.push(Series {
                    label: "nginx".into(),
                    kind: ServerKind::Nginx,
                    mechanism: "epoll".into(),
                    flags: vec![],
                }),
                Ok(Entry::Haproxy) => out.push(Series {
                    label: "haproxy".into(),
                    kind: ServerKind::Haproxy,
                    mechanism: "epoll".into(),
                    flags: vec![],
                }),
                Ok(Entry::Lighttpd(None)) => {
                    for h in lighttpd_handlers {
                        out.push(lighttpd_series(h));
                    }
                }
                Ok(Entry::Lighttpd(Some(h))) => out.push(lighttpd_series(&h)),
                Err(_) => {}
            }
        }
        for s in &self.series {
            let kind = match parse_mechanism_entry(&s.mechanism) {
                Ok(Entry::Nginx) => ServerKind::Nginx,
                Ok(Entry::Haproxy) => ServerKind::Haproxy,
                Ok(Entry::Lighttpd(_)) => ServerKind::Lighttpd,
                _ => ServerKind::Evlab,
            };
            let mechanism = match parse_mechanism_entry(&s.mechanism) {
                Ok(Entry::Lighttpd(Some(h))) => h,
                Ok(Entry::Nginx | Entry::Haproxy) => "epoll".into(),
                _ => s.mechanism.clone(),
            };
            out.push(Series {
                label: s.label.clone(),
                kind,
                mechanism,
                flags: s.flags.clone(),
            });
        }
        out
    }
}

fn lighttpd_series(h: &str) -> Series {
    Series {
        label: format!("lighttpd:{h}"),
        kind: ServerKind::Lighttpd,
        mechanism: h.to_string(),
        flags: vec![],
    }
}

#[derive(Debug, PartialEq)]
pub enum Entry {
    All,
    Evlab(String),
    Nginx,
    Haproxy,
    /// `None`: every handler this lighttpd offers.
    Lighttpd(Option<String>),
}

pub fn parse_mechanism_entry(m: &str) -> Result<Entry, String> {
    if m == "all" {
        return Ok(Entry::All);
    }
    if EVLAB_MECHANISMS.contains(&m) {
        return Ok(Entry::Evlab(m.to_string()));
    }
    if m == "nginx" {
        return Ok(Entry::Nginx);
    }
    if m == "haproxy" {
        return Ok(Entry::Haproxy);
    }
    if m == "lighttpd" || m == "lighttpd:*" {
        return Ok(Entry::Lighttpd(None));
    }
    if let Some(h) = m.strip_prefix("lighttpd:") {
        if [
            "select",
            "poll",
            "linux-sysepoll",
            "freebsd-kqueue",
            "solaris-devpoll",
        ]
        .contains(&h)
        {
            return Ok(Entry::Lighttpd(Some(h.to_string())));
        }
        return Err(format!(
            "unknown lighttpd event handler `{h}` (select, poll, linux-sysepoll)"
        ));
    }
    Err(format!(
        "unknown mechanism `{m}`: expected one of {}, \"all\", \"nginx\", \"haproxy\", \"lighttpd\", \"lighttpd:HANDLER\"",
        EVLAB_MECHANISMS.join(", ")
    ))
}

/// 1-based line of byte offset `at`, and the key assigned on that line (or the table header).
fn locate(src: &str, at: usize) -> (usize, Option<String>) {
    let at = at.min(src.len());
    let line = src[..at].matches('\n').count() + 1;
    let text = src.lines().nth(line - 1).unwrap_or("");
    (line, key_on_line(text).or_else(|| key_before(src, at)))
}

fn key_on_line(text: &str) -> Option<String> {
    let t = text.trim();
    if t.starts_with('[') {
        return Some(t.trim_matches(|c| c == '[' || c == ']').trim().to_string());
    }
    let (k, _) = t.split_once('=')?;
    let k = k.trim().trim_matches('"');
    (!k.is_empty() && !k.contains(['{', ' ', ','])).then(|| k.to_string())
}

/// For a value spanning lines (an array), the key of the nearest assignment above.
fn key_before(src: &str, at: usize) -> Option<String> {
    src[..at].lines().rev().find_map(key_on_line)
}

/// Finds an experiment by name (`quick`) or path (`experiments/quick.toml`, `my.toml`).
pub fn resolve(name_or_path: &str, experiments_dir: &Path) -> Result<PathBuf, LabError> {
    let p = PathBuf::from(name_or_path);
    if p.is_file() {
        return Ok(p);
    }
    let named = experiments_dir.join(format!("{name_or_path}.toml"));
    if named.is_file() {
        return Ok(named);
    }
    let mut known: Vec<String> = std::fs::read_dir(experiments_dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().to_string();
                    n.strip_suffix(".toml").map(|s| s.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    known.sort();
    Err(LabError::Io(format!(
        "no experiment `{name_or_path}`: not a file, and no {} (known: {})",
        named.display(),
        if known.is_empty() {
            "none".into()
        } else {
            known.join(", ")
        }
    )))
}

#[cfg(test)]
mod tests;
