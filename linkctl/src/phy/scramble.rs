//! `linkctl phy scramble` (in progress).

#[derive(clap::Args, Debug)]
pub struct ScrambleArgs {}

pub fn scramble(_args: ScrambleArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet available")
}
