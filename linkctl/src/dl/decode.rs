//! `linkctl dl decode`: what a receiver makes of a stream of 16-byte units (`docs/spec.md` section 2):
//! packets with their header fields and CRC check, control flits, identity flits, idle, anything
//! malformed, and what a receiver discards after an error until it finds a packet boundary again, as text
//! or JSON.

use std::io::{self, Read, Write};
use std::process::ExitCode;

use anyhow::{bail, ensure, Context};
use link_dl::flit::{
    check_packet_crc, is_ident, kind, ControlFlit, Flit, FlitKind, IdentFlit, PacketHeader, FLIT_LEN,
};
use link_tl::header::Header;
use link_tl::packet::Tlp;
use serde_json::{json, Value};

#[derive(clap::Args, Debug)]
pub struct DecodeArgs {
    /// The units in hex (spaces, colons and commas between digits are ignored); stdin when none are given
    hex: Vec<String>,
    /// Read raw bytes from stdin instead of hex
    #[arg(long, conflicts_with = "hex")]
    binary: bool,
    /// One JSON object per line per packet, control flit, run of idle units, malformed unit or run of
    /// units discarded after an error
    #[arg(long)]
    json: bool,
}

/// Decode the units; exit status 2 if any does not check (malformed, a CRC that does not match, a packet
/// cut short, a transaction-layer header a receiver would refuse).
pub fn decode(args: DecodeArgs) -> anyhow::Result<ExitCode> {
    let bytes = if args.binary {
        let mut bytes = Vec::new();
        io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .context("reading stdin")?;
        bytes
    } else if args.hex.is_empty() {
        let mut text = String::new();
        io::stdin()
            .lock()
            .read_to_string(&mut text)
            .context("reading stdin")?;
        parse_hex(&text)?
    } else {
        parse_hex(&args.hex.join(" "))?
    };
    ensure!(
        bytes.len() % FLIT_LEN == 0,
        "{} bytes are not a whole number of 16-byte units",
        bytes.len()
    );
    let units: Vec<Flit> = bytes
        .chunks_exact(FLIT_LEN)
        .map(|c| c.try_into().expect("chunks of 16"))
        .collect();
    let items = items(&units);
    let mut out = io::stdout().lock();
    for item in &items {
        if args.json {
            writeln!(out, "{item}")?;
        } else {
            writeln!(out, "{}", text(item))?;
        }
    }
    let bad = items.iter().any(|i| i["ok"] == false);
    Ok(if bad { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

fn parse_hex(text: &str) -> anyhow::Result<Vec<u8>> {
    let digits: Vec<char> = text
        .chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, ':' | ','))
        .collect();
    if let Some(bad) = digits.iter().find(|c| !c.is_ascii_hexdigit()) {
        bail!("{bad:?} is not a hex digit");
    }
    ensure!(digits.len() % 2 == 0, "an odd number of hex digits");
    Ok(digits
        .chunks(2)
        .map(|pair| {
            let byte: String = pair.iter().collect();
            u8::from_str_radix(&byte, 16).expect("hex digits checked")
        })
        .collect())
}

/// The receiver's reading of `units`, in order: one JSON object per packet, control or identity flit, run
/// of idle units, unit that does not parse, or run of units discarded after one; `at` is the index of its
/// first unit. The first unit is taken to start a packet, a control flit or idle (a capture starts on a
/// boundary). As a receiver does (`docs/spec.md` section 2.4), after a unit that does not parse or a CRC
/// that does not check, which leave it not knowing where the next packet starts, the units up to the
/// next control flit whose CRC checks are discarded (idle ones aside).
fn items(units: &[Flit]) -> Vec<Value> {
    let mut items = Vec::new();
    let mut at = 0;
    let mut resync = false;
    while at < units.len() {
        let unit = &units[at];
        let discarded = |u: &Flit| !control_that_checks(u) && *u != [0; FLIT_LEN];
        if resync && discarded(unit) {
            let run = units[at..].iter().take_while(|u| discarded(u)).count();
            items.push(json!({"at": at, "kind": "discarded", "units": run, "ok": false}));
            at += run;
            continue;
        }
        if control_that_checks(unit) {
            resync = false;
        }
        let (item, used) = match kind(unit) {
            Ok(FlitKind::Idle) => {
                let run = units[at..].iter().take_while(|u| **u == [0; FLIT_LEN]).count();
                (json!({"at": at, "kind": "idle", "units": run, "ok": true}), run)
            }
            Ok(FlitKind::Control) if is_ident(unit) => match IdentFlit::parse(unit) {
                Ok(ident) => (
                    json!({"at": at, "kind": "ident", "node": format!("{:016x}", ident.node),
                           "port": ident.port, "ok": true}),
                    1,
                ),
                Err(e) => (malformed(at, &e), 1),
            },
            Ok(FlitKind::Control) => match ControlFlit::parse(unit) {
                Ok(c) => (
                    json!({"at": at, "kind": "control", "type": format!("{:?}", c.kind), "ack": c.ack.get(),
                           "credits": c.credits, "ok": true}),
                    1,
                ),
                Err(e) => (malformed(at, &e), 1),
            },
            Ok(FlitKind::Packet) => match PacketHeader::parse(unit) {
                Ok(header) => packet(at, &units[at..], header),
                Err(e) => (malformed(at, &e), 1),
            },
            Err(e) => (malformed(at, &e), 1),
        };
        // A packet whose CRC does not check, or a unit that does not parse, loses the framing; a
        // transaction-layer header the receiver refuses does not (the data link took the packet).
        resync |= item.get("error").is_some() || item["crc_ok"] == false;
        items.push(item);
        at += used;
    }
    items
}

/// Whether `unit` is a control or identity flit whose CRC checks: a packet boundary a receiver that lost
/// its framing finds again.
fn control_that_checks(unit: &Flit) -> bool {
    matches!(kind(unit), Ok(FlitKind::Control))
        && (IdentFlit::parse(unit).is_ok() || ControlFlit::parse(unit).is_ok())
}

fn malformed(at: usize, error: &dyn std::fmt::Display) -> Value {
    json!({"at": at, "kind": "malformed", "error": error.to_string(), "ok": false})
}

/// The packet whose header flit is `units[0]`, parsed as `header`, and the units it takes.
fn packet(at: usize, units: &[Flit], header: PacketHeader) -> (Value, usize) {
    let len = 1 + usize::from(header.payload_flits);
    let mut item = json!({
        "at": at,
        "kind": "packet",
        "flits": len,
        "vc": header.vc.name(),
        "seq": header.seq.get(),
        "ack": header.ack.get(),
        "credit_vc": header.credit_vc.name(),
        "credit": header.credit,
        "tl": format!("{:015x}", header.tl),
    });
    if units.len() < len {
        item["error"] = json!(format!("cut short: {} of its {len} flits", units.len()));
        item["ok"] = json!(false);
        return (item, units.len());
    }
    let packet = &units[..len];
    let crc = u32::from_le_bytes(packet[0][12..].try_into().expect("4 bytes"));
    item["crc"] = json!(format!("{crc:08x}"));
    let crc_ok = check_packet_crc(packet.as_flattened()).is_ok();
    item["crc_ok"] = json!(crc_ok);
    // The transaction layer's reading: its header, and whether a receiver would take the packet.
    if let Ok(h) = Header::parse(header.tl) {
        item["transaction"] = json!(format!("{h:?}"));
    }
    let tl_error = Tlp::parse(header.vc, header.tl, &packet[1..]).err();
    if let Some(e) = tl_error {
        item["tl_error"] = json!(e.to_string());
    }
    item["ok"] = json!(crc_ok && tl_error.is_none());
    (item, len)
}

/// One line of text for an item.
fn text(item: &Value) -> String {
    let at = item["at"].as_u64().unwrap_or_default();
    let s = |key: &str| item[key].as_str().unwrap_or_default().to_owned();
    match item["kind"].as_str() {
        Some("idle") => format!("{at:>6}  idle x{}", item["units"]),
        Some("discarded") => format!(
            "{at:>6}  discarded x{} (finding a packet boundary again after the error)",
            item["units"]
        ),
        Some("ident") => format!("{at:>6}  Ident   node {} port {}", s("node"), item["port"]),
        Some("control") => format!(
            "{at:>6}  {:<7} ack {} credits {}",
            s("type"),
            item["ack"],
            item["credits"]
        ),
        Some("packet") => {
            let mut line = format!(
                "{at:>6}  packet  {} flits, {} seq {} ack {}, credit {} {}, TL {}",
                item["flits"],
                s("vc"),
                item["seq"],
                item["ack"],
                s("credit_vc"),
                item["credit"],
                s("tl")
            );
            if item.get("crc").is_some() {
                let verdict = if item["crc_ok"] == true { "ok" } else { "MISMATCH" };
                line += &format!(", CRC {} {verdict}", s("crc"));
            }
            if item.get("transaction").is_some() {
                line += &format!(": {}", s("transaction"));
            }
            for key in ["tl_error", "error"] {
                if item.get(key).is_some() {
                    line += &format!(" [{}]", s(key));
                }
            }
            line
        }
        _ => format!("{at:>6}  malformed: {}", s("error")),
    }
}
