//! `evlab serve` (stub until the server lands).

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("evlab serve is not implemented yet")
}
