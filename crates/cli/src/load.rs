//! `evlab load` (stub: owned by the load-generator work).

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("evlab load is not implemented yet")
}
