//! `evlab pool DIR...`: several runs of one experiment, each finding pooled with the run as a
//! random effect (`evlab_lab::analysis::pool`).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use evlab_lab::analysis::pool;
use evlab_lab::model::results::Summary;

pub const EXAMPLES: &str = "\
Examples:
  evlab pool results/quick/*/
      every run of quick: per finding, the runs that judged it (k), the pooled
      A/B with its 90% interval, the spread between runs (τ, I²) and the
      pooled verdict
  evlab pool run1 run2 run3 --json
      the same as JSON: findings[] with id, k, ratio, lo, hi, tau, i2, verdict

The run is a random effect: τ² by REML, the interval by Hartung-Knapp on k - 1 degrees of \
freedom (docs/findings.md). A paper run's \"no difference\" findings are pooled only beside \
a pooled negative control that passes; else they read \"not judged\".";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Results directories of one experiment (each with summary.json)
    #[arg(value_name = "DIR", required = true, num_args = 1..)]
    pub dirs: Vec<PathBuf>,
    /// Print JSON instead of the table
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for d in &a.dirs {
        let name = d.display().to_string();
        if d.is_file() {
            anyhow::bail!(
                "{name}: a file, not a results directory of `evlab run` (a glob that ends in a \
                 slash, such as `quick-knee-run*/`, matches only directories)"
            );
        }
        let s = Summary::read_json(d)
            .with_context(|| format!("{name}: not a results directory of `evlab run`"))?;
        runs.push((name, s));
    }
    let p = pool::pool(&runs).map_err(anyhow::Error::msg)?;
    let out = if a.json {
        serde_json::to_string_pretty(&p)? + "\n"
    } else {
        pool::text(&p)
    };
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        // A reader that went away (`| head`) ends the output quietly.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
