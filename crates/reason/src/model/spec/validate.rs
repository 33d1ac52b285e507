//! Checking a parsed spec: each rule names the key it is about, and the error its line
//! ([`line_of_key`]), so that a misspelt or impossible value is found where it was written.

use super::*;

impl Spec {
    pub(super) fn validate(&self, src: &str, origin: &str) -> Result<(), LabError> {
        let bad = |key: &str, msg: String| LabError::Spec {
            origin: origin.to_string(),
            line: line_of_key(src, key),
            key: key.to_string(),
            msg,
        };
        if self.name.trim().is_empty() || self.name.contains(['/', '\\']) {
            return Err(bad("name", "must be a non-empty name without `/`".into()));
        }
        if let Some(m) = &self.micro {
            return Self::validate_micro(m).map_err(|(key, msg)| bad(key, msg));
        }
        self.validate_mechanisms()
            .and_then(|()| self.validate_rates())
            .and_then(|()| self.validate_run())
            .map_err(|(key, msg)| bad(key, msg))?;
        if let Some(sw) = &self.sweep {
            self.validate_sweep(sw)
                .map_err(|(key, msg)| bad(key, msg))?;
        }
        if self.workload == Workload::Specweb && self.fileset_dirs == 0 {
            return Err(bad("fileset_dirs", "must be at least 1".into()));
        }
        if let Some(n) = &self.network {
            n.validate().map_err(|(key, msg)| bad(key, msg))?;
        }
        if let Some(q) = &self.sequential {
            // Both would say how many trials: `trials` a fixed number, `[sequential]` a rule.
            let given = toml::from_str::<toml::Table>(src).is_ok_and(|t| t.contains_key("trials"));
            if given {
                return Err(bad(
                    "trials",
                    "give `trials` (a fixed number) or `[sequential]` (trials chosen by a rule: \
                     `first`, then blocks up to `most`), not both"
                        .into(),
                ));
            }
            q.validate().map_err(|(key, msg)| bad(key, msg))?;
        }
        Ok(())
    }

    /// Something to run: mechanisms or series, each naming a mechanism.
    fn validate_mechanisms(&self) -> Result<(), (&'static str, String)> {
        if self.mechanisms.is_empty() && self.series.is_empty() {
            return Err((
                "mechanisms",
                "no mechanisms and no [[series]]: nothing to run".into(),
            ));
        }
        let proxy_only = |key: &'static str, e: Entry| match e {
            Entry::Haproxy if self.proxy.is_none() => Err((
                key,
                "haproxy is a proxy peer: it needs `[proxy]` (it serves no files)".to_string(),
            )),
            _ => Ok(()),
        };
        for m in &self.mechanisms {
            let e = parse_mechanism_entry(m).map_err(|msg| ("mechanisms", msg))?;
            proxy_only("mechanisms", e)?;
        }
        for s in &self.series {
            let e = parse_mechanism_entry(&s.mechanism).map_err(|msg| ("mechanism", msg))?;
            proxy_only("mechanism", e)?;
            if let Some(b) = s.cpu_budget {
                if !(b > 0.0 && b <= 1.0) {
                    return Err(("cpu_budget", format!("{b}: must be in (0, 1]")));
                }
            }
            if let Some(v) = s.sweep_values.as_ref().and_then(|vals| {
                let all = self.sweep.as_ref().map_or(&[][..], |sw| &sw.values[..]);
                vals.iter().find(|v| !all.contains(v))
            }) {
                return Err((
                    "sweep_values",
                    format!(
                        "series `{}`: {v} is not one of the `[sweep]` values",
                        s.label
                    ),
                ));
            }
            if let Some(i) = s
                .idle
                .as_ref()
                .and_then(|v| v.iter().find(|i| !self.idle.contains(i)))
            {
                return Err((
                    "idle",
                    format!(
                        "series `{}`: {i} is not one of the experiment's idle counts",
                        s.label
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The rates (fixed, "auto" or a search, one of them) and what chooses them: the
    /// multiples, the budget, the calibration's target, the search's bounds.
    fn validate_rates(&self) -> Result<(), (&'static str, String)> {
        match (&self.rate_search, self.rates.is_empty()) {
            (None, true) => return Err(("rates", "give `rates` or `rate_search`".into())),
            (Some(_), false) => {
                return Err(("rates", "give `rates` or `rate_search`, not both".into()))
            }
            _ => {}
        }
        if self.rates.is_auto() && self.rate_search.is_some() {
            return Err(("rates", "give `rates` or `rate_search`, not both".into()));
        }
        if let Some(r) = self
            .rates
            .fixed()
            .iter()
            .find(|r| !(r.is_finite() && **r > 0.0))
        {
            return Err(("rates", format!("{r}: rates must be positive")));
        }
        if self.rates.is_auto() {
            if self.auto_rates.is_empty() {
                return Err(("auto_rates", "give at least one multiple".into()));
            }
            if let Some(r) = self
                .auto_rates
                .iter()
                .find(|r| !(r.is_finite() && **r > 0.0))
            {
                return Err(("auto_rates", format!("{r}: multiples must be positive")));
            }
        }
        if let Some(Budget::Share(b)) = self.server_cpu_budget {
            if !(0.01..=64.0).contains(&b) {
                return Err((
                    "server_cpu_budget",
                    format!("{b}: a share of one CPU, from 0.01 up"),
                ));
            }
        }
        if !(self.auto_target > 0.0 && self.auto_target <= 1.0) {
            return Err(("auto_target", "must be in (0, 1]".into()));
        }
        if !(self.start_rate_limit > 0.0 && self.start_rate_limit <= 1.0) {
            return Err(("start_rate_limit", "must be in (0, 1]".into()));
        }
        if let Some(k) = &self.knee {
            k.validate()?;
            if self.requests_per_conn().is_none() {
                return Err((
                    "knee",
                    "a capacity search reads requests against connections offered: not with the Polymix workload, or with `--specweb-calls` in load_flags (their requests per connection are not known here)".into(),
                ));
            }
            if self.sweep.is_some()
                || self.active_conns.is_some()
                || self.proxy.is_some()
                || self.rate_search.is_some()
            {
                return Err((
                    "knee",
                    "a capacity search follows each series' rates on one server: not with `[sweep]`, `[proxy]`, `rate_search` or `active_conns`".into(),
                ));
            }
        }
        if let Some(rs) = &self.rate_search {
            if !(rs.start > 0.0 && rs.step > 0.0 && rs.max >= rs.start) {
                return Err(("rate_search", "need 0 < start <= max and step > 0".into()));
            }
            if !(rs.below > 0.0 && rs.below <= 1.0) {
                return Err(("below", "must be in (0, 1]".into()));
            }
        }
        Ok(())
    }

    /// Each point's times and connections, the trials, idle counts, client CPUs and the
    /// validity rule's limits.
    fn validate_run(&self) -> Result<(), (&'static str, String)> {
        for (key, v) in [
            ("duration_s", self.duration_s),
            ("timeout_s", self.timeout_s),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err((key, format!("{v}: must be a positive number of seconds")));
            }
        }
        for (key, v) in [("warmup_s", self.warmup_s), ("pause_s", self.pause_s)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err((key, format!("{v}: must be zero or more seconds")));
            }
        }
        if self.calls_per_conn == 0 {
            return Err(("calls_per_conn", "must be at least 1".into()));
        }
        if self.active_conns == Some(0) {
            return Err(("active_conns", "must be at least 1".into()));
        }

        if self.trials == 0 {
            return Err(("trials", "must be at least 1".into()));
        }
        if self.idle.is_empty() {
            return Err(("idle", "give at least one count (0: none)".into()));
        }
        if self.client_cpus.is_empty() {
            return Err(("client_cpus", "give at least one CPU".into()));
        }
        if !(self.client_cpu_limit > 0.0 && self.client_cpu_limit <= 1.0) {
            return Err(("client_cpu_limit", "must be in (0, 1]".into()));
        }
        if !(self.late_start_limit >= 0.0 && self.late_start_limit <= 1.0) {
            return Err(("late_start_limit", "must be in [0, 1]".into()));
        }
        Ok(())
    }

    /// A micro-benchmark's: one that exists, and no `--json` (the runner sets it).
    fn validate_micro(m: &MicroSpec) -> Result<(), (&'static str, String)> {
        if !MICRO_BENCHMARKS.contains(&m.benchmark.as_str()) {
            return Err((
                "benchmark",
                format!(
                    "unknown micro-benchmark `{}`; valid: {}",
                    m.benchmark,
                    MICRO_BENCHMARKS.join(", ")
                ),
            ));
        }
        if m.args.iter().any(|a| a.starts_with("--json")) {
            return Err(("args", "`--json` is set by `evlab run`".into()));
        }
        if m.reference_s.is_some_and(|s| !(s.is_finite() && s >= 0.0)) {
            return Err((
                "reference_s",
                "must be a number of seconds, 0 or more".into(),
            ));
        }
        Ok(())
    }

    fn validate_sweep(&self, sw: &SweepSpec) -> Result<(), (&'static str, String)> {
        let name = sw.flag.trim_start_matches('-');
        if !sw.flag.starts_with("--")
            || name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err((
                "flag",
                format!(
                    "`{}`: a long flag of the server, such as \"--workers\"",
                    sw.flag
                ),
            ));
        }
        if sw.values.is_empty() {
            return Err(("values", "give at least one value".into()));
        }
        if let Some(v) = sw.values.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
            return Err(("values", format!("{v}: values must be zero or more")));
        }
        if let Some(w) = sw.values.windows(2).find(|w| w[1] <= w[0]) {
            return Err((
                "values",
                format!(
                    "{} after {}: give the values in increasing order, each once",
                    w[1], w[0]
                ),
            ));
        }
        let given = |flags: &[String]| flags.iter().any(|f| f == &sw.flag);
        if given(&self.server_flags) || self.series.iter().any(|s| given(&s.flags)) {
            return Err((
                "flag",
                format!(
                    "`{}` is swept, so it cannot also be in `server_flags` or a series' `flags`",
                    sw.flag
                ),
            ));
        }
        let auto_budget = matches!(self.server_cpu_budget, Some(Budget::Auto));
        if self.rates.is_auto() || auto_budget {
            return Err((
                if self.rates.is_auto() {
                    "rates"
                } else {
                    "server_cpu_budget"
                },
                "`[sweep]` needs fixed `rates` and a fixed (or no) `server_cpu_budget`: \
                 calibration probes each series once, not at each swept value"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// The first line that assigns `key` (0 when absent: the default was at fault).
fn line_of_key(src: &str, key: &str) -> usize {
    src.lines()
        .position(|l| {
            let t = l.trim_start();
            let t = t.strip_prefix('{').unwrap_or(t);
            t.starts_with(key) && t[key.len()..].trim_start().starts_with('=')
                || l.contains(&format!(" {key} ="))
                || l.contains(&format!("{{{key} ="))
        })
        .map(|i| i + 1)
        .unwrap_or(0)
}
