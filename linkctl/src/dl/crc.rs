//! `linkctl dl crc`: the packet CRC of the bytes on stdin (a packet without its CRC field, bytes 12 to 15
//! of the header flit), or the CRC's parameters as JSON.

use std::io::{self, Read, Write};

use anyhow::{ensure, Context};
use link_dl::crc::{self, Digest};

#[derive(clap::Args, Debug)]
pub struct CrcArgs {
    /// Print the CRC's parameters and its Hamming-distance guarantee as JSON instead (stdin is not read)
    #[arg(long)]
    describe: bool,
}

pub fn crc(args: CrcArgs) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    if args.describe {
        serde_json::to_writer_pretty(&mut out, &describe()?).context("writing stdout")?;
        writeln!(out).context("writing stdout")?;
        return Ok(());
    }
    let mut digest = Digest::new();
    let mut stdin = io::stdin().lock();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match stdin.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => digest.update(&buffer[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("reading stdin"),
        }
    }
    writeln!(out, "{:08x}", digest.finalize()).context("writing stdout")?;
    Ok(())
}

fn describe() -> anyhow::Result<serde_json::Value> {
    let algorithm = crc::ALGORITHM;
    let check = crc::checksum(b"123456789");
    ensure!(
        check == algorithm.check,
        "this build computes {check:08x} for \"123456789\", not the catalogue's {:08x}",
        algorithm.check
    );
    let hex = |value: u32| format!("0x{value:08x}");
    Ok(serde_json::json!({
        "name": "CRC-32C",
        "catalogue_name": "CRC-32/ISCSI",
        "width": algorithm.width,
        "polynomial": hex(algorithm.poly),
        "init": hex(algorithm.init),
        "refin": algorithm.refin,
        "refout": algorithm.refout,
        "xorout": hex(algorithm.xorout),
        "check": hex(check),
        "residue": hex(algorithm.residue),
        "covers": "every byte of the packet except the 4-byte CRC field, in wire order; the field is sent least significant byte first",
        "hamming_distance": {
            "distance": crc::HAMMING_DISTANCE,
            "holds_up_to_data_bits": crc::HAMMING_DISTANCE_MAX_DATA_BITS,
            "longest_packet_bytes": crc::MAX_PACKET_LEN,
            "longest_packet_data_bits": (crc::MAX_PACKET_LEN - crc::CRC_LEN) * 8,
            "source": "P. Koopman, 32-bit cyclic redundancy codes for Internet applications (DSN 2002), CRC zoo entry 0x8f6e37a0; proved for the longest packet by link-dl/tests/crc_hamming.rs",
        },
        "implementation": if crc::hardware_accelerated() { "sse4.2 crc32 instruction" } else { "slice-by-16 table" },
    }))
}
