//! `evlab load-merge FILE…`: several `evlab load --json` reports (one per client) merged
//! exactly, printed as one JSON document (`evlab_wire::merge`).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use evlab_wire::load::LoadReport;

pub const EXAMPLES: &str = "\
Examples:
  evlab load-merge c1.json c2.json
      the clients' reports of one run merged: counts added, percentiles from
      their histograms added together, rates over the window all of them ran in
  evlab load-merge c*.json | jq .latency_ms.p99
      the p99 of every reply of every client

Two clients that start together:
  T=$(date -d '+5 sec' +%s.%N)
  evlab load --start-at $T --server S --uri /one --rate 500 -d 30 --json c1.json
  (the same on the second client, --json c2.json), then:
  evlab load-merge c1.json c2.json

Each report needs its latency_histogram and clock (written by evlab load since they were \
added); histograms of another unit or precision are refused.

Exit status: 0 when merged, 1 when a file cannot be read or the reports cannot be merged.";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// `evlab load --json` reports, one per client
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut reports = Vec::with_capacity(a.files.len());
    for f in &a.files {
        let name = f.display().to_string();
        let text = std::fs::read_to_string(f).with_context(|| format!("{name}: cannot read"))?;
        let r: LoadReport = serde_json::from_str(&text)
            .with_context(|| format!("{name}: not an evlab load --json report"))?;
        reports.push((name, r));
    }
    let m = evlab_wire::merge::merge(&reports)?;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{}", serde_json::to_string_pretty(&m)?) {
        // A reader that went away (`| head`) ends the output quietly.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
