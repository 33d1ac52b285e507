//! `evlab compare A B`: two results directories (or two `evlab load --json` reports) side by
//! side, each change with its interval, the findings' verdicts on both (`evlab_lab::analysis::
//! compare`).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use evlab_lab::analysis::compare::{self, Comparison};
use evlab_lab::model::results::Summary;
use evlab_lab::render::compare as render;
use evlab_wire::load::LoadReport;

use crate::Exit;

/// The exit status when a finding's verdict differs between the runs.
pub const VERDICT_CHANGED: i32 = 3;

pub const EXAMPLES: &str = "\
Examples:
  evlab compare results/quick/20261125-095300 results/quick/20261125-100100
      two runs of one experiment, run 1 and run 2: the summary first, each finding judged
      on both (changed verdicts first), each capacity and point as run 2 / run 1 with its
      90% interval (* beyond the runs' spread, ~ not)
  evlab compare before.json after.json
      two evlab load --json reports (one run each: changes without an interval)
  evlab compare RUN1 RUN2 --md compare.md --json compare.json
      the same in Markdown and JSON besides the terminal

Exit status: 0 when no finding changed verdict; 3 when one did (named first, for CI);
1 when a directory or file cannot be read; 2 on a usage error, or for runs of two
different experiments without --force.";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Run 1: a results directory (with summary.json) or an `evlab load --json` file
    #[arg(value_name = "RUN1")]
    pub a: PathBuf,
    /// Run 2, of the same kind
    #[arg(value_name = "RUN2")]
    pub b: PathBuf,
    /// Compare runs of two different experiments all the same (their findings and points
    /// mostly do not match)
    #[arg(long)]
    pub force: bool,
    /// Also write the comparison as Markdown to this file
    #[arg(long, value_name = "FILE")]
    pub md: Option<PathBuf>,
    /// Also write the comparison as JSON to this file (`-`: stdout, instead of the text)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

enum Side {
    Run(Box<Summary>),
    Load(Box<LoadReport>),
}

fn read(p: &Path) -> anyhow::Result<Side> {
    let name = p.display();
    if p.is_dir() {
        let s = Summary::read_json(p)
            .with_context(|| format!("{name}: not a results directory of `evlab run`"))?;
        return Ok(Side::Run(Box::new(s)));
    }
    let text = std::fs::read_to_string(p).with_context(|| format!("{name}: cannot read"))?;
    let r: LoadReport = serde_json::from_str(&text).with_context(|| {
        format!("{name}: neither a results directory nor an evlab load --json report")
    })?;
    Ok(Side::Load(Box::new(r)))
}

fn write_to(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("{}: cannot write", path.display()))
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let (an, bn) = (a.a.display().to_string(), a.b.display().to_string());
    let c: Comparison = match (read(&a.a)?, read(&a.b)?) {
        (Side::Run(x), Side::Run(y)) => {
            if let Some(d) = compare::different_experiments(&x, &y).filter(|_| !a.force) {
                return Err(crate::args::usage(format!(
                    "{d}: different experiments answer different questions, so their findings \
                     and points do not match (--force compares them all the same)"
                )));
            }
            compare::summaries(&an, &x, &bn, &y)
        }
        (Side::Load(x), Side::Load(y)) => compare::loads(&an, &x, &bn, &y),
        _ => anyhow::bail!(
            "{an} and {bn}: compare two results directories or two evlab load --json reports, \
             not one of each"
        ),
    };
    if let Some(p) = &a.md {
        write_to(p, &render::markdown(&c))?;
    }
    let json = serde_json::to_string_pretty(&c)? + "\n";
    let mut out = std::io::stdout().lock();
    let printed = match &a.json {
        Some(p) if p.as_os_str() == "-" => out.write_all(json.as_bytes()),
        Some(p) => {
            write_to(p, &json)?;
            out.write_all(render::text(&c).as_bytes())
        }
        None => out.write_all(render::text(&c).as_bytes()),
    };
    match printed {
        // A reader that went away (`| head`) ends the output quietly.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r?,
    }
    if c.verdicts_changed() > 0 {
        return Err(Exit(VERDICT_CHANGED).into());
    }
    Ok(())
}
