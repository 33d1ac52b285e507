//! `evlab run` and `evlab report` (stub: owned by the experiment-runner work).

#[derive(clap::Args, Debug)]
pub struct RunArgs {}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {}

pub fn run(_a: RunArgs) -> anyhow::Result<()> {
    anyhow::bail!("evlab run is not implemented yet")
}

pub fn report(_a: ReportArgs) -> anyhow::Result<()> {
    anyhow::bail!("evlab report is not implemented yet")
}
