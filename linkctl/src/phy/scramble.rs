//! `linkctl phy scramble`: XOR stdin with a PCIe scrambler's keystream from reset, to stdout.
//!
//! Every byte is treated as a scrambled data symbol, so scrambling zeros prints the keystream itself, and
//! running the output through again gives the input back.

use std::io::{self, Read, Write};

use anyhow::{bail, Context};
use link_phy::scrambler::{Gen1Scrambler, Gen3Scrambler};

#[derive(clap::Args, Debug)]
pub struct ScrambleArgs {
    /// PCIe generation: 1 or 2 (2.5/5 GT/s, x^16 scrambler), 3, 4 or 5 (8 GT/s and up, x^23 per lane)
    #[arg(long)]
    gen: u32,
    /// Lane number 0-31, whose seed the x^23 scrambler starts from (generation 3 and up; default 0)
    #[arg(long)]
    lane: Option<u32>,
}

enum Scrambler {
    Gen1(Gen1Scrambler),
    Gen3(Gen3Scrambler),
}

impl Scrambler {
    fn from_args(args: &ScrambleArgs) -> anyhow::Result<Scrambler> {
        match (args.gen, args.lane) {
            (1 | 2, None) => Ok(Scrambler::Gen1(Gen1Scrambler::new())),
            (1 | 2, Some(_)) => {
                bail!("--lane applies only to --gen 3, 4 or 5 (the 2.5/5 GT/s scrambler is the same on every lane)")
            }
            (3..=5, lane) => {
                let lane = lane.unwrap_or(0);
                if lane > 31 {
                    bail!("--lane {lane} is out of range: lanes are numbered 0 to 31");
                }
                Ok(Scrambler::Gen3(Gen3Scrambler::new(lane as usize)))
            }
            (gen, _) => bail!("--gen {gen} is not a PCIe generation: use 1, 2, 3, 4 or 5"),
        }
    }

    fn apply(&mut self, data: &mut [u8]) {
        match self {
            Scrambler::Gen1(s) => s.apply(data),
            Scrambler::Gen3(s) => s.apply(data),
        }
    }
}

pub fn scramble(args: ScrambleArgs) -> anyhow::Result<()> {
    let mut scrambler = Scrambler::from_args(&args)?;
    let mut stdin = io::stdin().lock();
    let mut stdout = io::stdout().lock();
    // A multiple of 16 bytes, so that each read but the last keeps to the scramblers' fast path.
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("reading stdin"),
        };
        scrambler.apply(&mut buf[..n]);
        stdout.write_all(&buf[..n]).context("writing stdout")?;
    }
    stdout.flush().context("writing stdout")
}
