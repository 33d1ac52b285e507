//! `evlab idle` (stub: owned by the load-generator work).

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("evlab idle is not implemented yet")
}
