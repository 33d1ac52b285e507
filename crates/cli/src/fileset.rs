//! `evlab fileset` (stub: owned by the load-generator work).

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("evlab fileset is not implemented yet")
}
