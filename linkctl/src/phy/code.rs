//! `linkctl phy encode` and `decode` (in progress).

#[derive(clap::Args, Debug)]
pub struct EncodeArgs {}
#[derive(clap::Args, Debug)]
pub struct DecodeArgs {}

pub fn encode(_args: EncodeArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet available")
}
pub fn decode(_args: DecodeArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet available")
}
