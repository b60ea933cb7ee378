//! pcap traces of link traffic: the file is what docs/spec.md section 7 says, every record is a packet
//! or control flit that checks, and tshark with our Lua dissector reads the same fields back.

use std::path::{Path, PathBuf};

use fabric_sim::collective::{Kind, OP_PARTIAL, OP_RESULT};
use fabric_sim::discover::node_id;
use fabric_sim::run::{run, Algo, Recording, Report, Sweep};
use fabric_sim::topology::Topology;
use fabric_sim::trace::{self, pseudo_header, Hop, Record, TlLayout, Tracer, RECORD_CONTROL, RECORD_PACKET};
use fabric_sim::wire;
use link_dl::flit::{check_packet_crc, ControlFlit, ControlKind, IdentFlit, PacketHeader, FLIT_LEN};
use link_dl::seq::Seq;
use link_phy::time::{Duration, Instant};

#[path = "support/tshark.rs"]
mod tshark_support;
use tshark_support::{tshark, tshark_available};

fn spec() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/spec.md")).unwrap()
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("openlink-{}-{name}", std::process::id()))
}

/// A trace or waveforms written to `path`, at most `limit` records.
fn recording(path: &Path, limit: u64) -> Recording {
    Recording {
        path: path.to_path_buf(),
        limit,
        name: "the recording".into(),
        only_nodes: Vec::new(),
        received: false,
    }
}

fn traced_sweep(path: &Path, limit: u64) -> Report {
    let topology = Topology::builtin("mesh4").unwrap();
    let sweep = Sweep {
        limit_per_size: Duration::from_ms(10),
        pcap: Some(recording(path, limit)),
        ..Sweep::new(topology, Kind::AllReduce, Algo::Ring, 1024, 4096)
    };
    let report = run(&sweep, &mut |_| {}).unwrap();
    assert!(report.verified);
    report
}

fn read_pcap(path: &Path) -> Vec<Record> {
    trace::read(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn every_record_is_a_packet_or_control_flit_that_checks() {
    let path = temp("all.pcap");
    let report = traced_sweep(&path, u64::MAX);
    let records = read_pcap(&path);
    std::fs::remove_file(&path).unwrap();
    let summary = report.trace.unwrap();
    assert_eq!((summary.records, summary.dropped), (records.len() as u64, 0));
    // In time order across the directions, though each sends its bursts ahead.
    let late = records.windows(2).position(|w| w[1].ns < w[0].ns);
    assert_eq!(late, None, "a record earlier than the one before it");
    // Each link direction initialises once: one InitFc1, one InitFc2 and one Ident recorded, the repeats
    // counted.
    let directions = 2 * 6;
    let control = |r: &Record| r.pseudo_header[1] == RECORD_CONTROL;
    let flit = |r: &Record| -> [u8; FLIT_LEN] { r.bytes[..].try_into().unwrap() };
    let init = |r: &Record| {
        control(r)
            && matches!(
                ControlFlit::parse(&flit(r)).map(|c| c.kind),
                Ok(ControlKind::InitFc1 | ControlKind::InitFc2)
            )
    };
    assert_eq!(records.iter().filter(|r| init(r)).count(), 2 * directions);
    let idents: Vec<IdentFlit> = records
        .iter()
        .filter(|r| control(r))
        .filter_map(|r| IdentFlit::parse(&flit(r)).ok())
        .collect();
    assert_eq!(idents.len(), directions);
    let mesh4 = Topology::builtin("mesh4").unwrap();
    // Each says the sending node and port of its record: node IDs are the hashes of the node names.
    for r in records.iter().filter(|r| control(r)) {
        if let Ok(ident) = IdentFlit::parse(&flit(r)) {
            let sender = usize::from(u16::from_be_bytes([r.pseudo_header[4], r.pseudo_header[5]]));
            assert_eq!(ident.port, r.pseudo_header[8]);
            assert_eq!(ident.node, node_id(&mesh4.nodes[sender].name));
        }
    }
    assert!(summary.init_repeats > 0);
    let mut packets = 0;
    // Per link direction (trunk, sending node): the time of the last record.
    let mut last = std::collections::HashMap::new();
    for r in &records {
        assert_eq!(r.pseudo_header[0], 1, "pseudo-header version");
        let previous = last.insert(
            (r.pseudo_header[2..4].to_vec(), r.pseudo_header[4..6].to_vec()),
            r.ns,
        );
        assert!(
            previous.is_none_or(|p| p <= r.ns),
            "time runs forward on each link direction"
        );
        match r.pseudo_header[1] {
            RECORD_PACKET => {
                let head: [u8; FLIT_LEN] = r.bytes[..FLIT_LEN].try_into().unwrap();
                let header = PacketHeader::parse(&head).unwrap();
                assert_eq!(r.bytes.len(), FLIT_LEN * (1 + usize::from(header.payload_flits)));
                assert_eq!(check_packet_crc(&r.bytes), Ok(()));
                packets += 1;
            }
            RECORD_CONTROL => {
                assert_eq!(r.bytes.len(), FLIT_LEN);
                let flit = flit(r);
                assert!(ControlFlit::parse(&flit).is_ok() || IdentFlit::parse(&flit).is_ok());
            }
            other => panic!("record kind {other}"),
        }
    }
    // Every packet delivered crossed at least one link (mesh4 has no switches: exactly one).
    assert!(
        packets >= report.packets,
        "{packets} packet records for {} packets",
        report.packets
    );
}

#[test]
fn the_limit_bounds_the_file() {
    let path = temp("limit.pcap");
    let report = traced_sweep(&path, 25);
    let records = read_pcap(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(records.len(), 25);
    let summary = report.trace.unwrap();
    assert_eq!(summary.records, 25);
    assert!(summary.dropped > 0);
}

#[test]
fn the_worked_example_of_section_7() {
    let flit = ControlFlit {
        kind: ControlKind::Update,
        ack: Seq::new(5),
        credits: [64, 64, 128, 64],
    }
    .emit();
    let hop = Hop {
        trunk: 2,
        from: (0, 1),
        to: (4, 0),
    };
    let mut out = Vec::new();
    let mut tracer = Tracer::new(&mut out, 8, 10).unwrap();
    tracer.unit(4, hop, Instant(1_234_000), &flit).unwrap();
    drop(tracer);
    let record: String = out[24..]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        spec().contains(&record),
        "the spec no longer shows the record:\n{record}"
    );
    assert_eq!(
        pseudo_header(RECORD_CONTROL, hop, TlLayout::Simulator)[..],
        out[24 + 16..24 + 28]
    );
}

#[test]
fn tshark_reads_the_fields_the_simulator_wrote() {
    if !tshark_available() {
        return;
    }
    let path = temp("tshark.pcap");
    traced_sweep(&path, 12_000);
    let records = read_pcap(&path);
    let fields = [
        "openlink.record",
        "openlink.trunk",
        "openlink.from_node",
        "openlink.to_node",
        "openlink.seq",
        "openlink.vc",
        "openlink.tl",
        "openlink.crc",
        "openlink.control",
        "openlink.ident.node",
        "openlink.ident.port",
        "openlink.tl.opcode",
        "openlink.tl.source",
        "openlink.tl.offset",
        "openlink.tl.multicast",
        "_ws.col.Info",
    ];
    let mut args = vec!["-T", "fields", "-E", "separator=,", "-E", "occurrence=f"];
    args.extend(fields.iter().flat_map(|f| ["-e", f]));
    let out = tshark(&path, &args);
    std::fs::remove_file(&path).unwrap();
    let lines: Vec<String> = out.lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), records.len());
    let (mut packets, mut idents) = (0, 0);
    for (line, r) in lines.iter().zip(&records) {
        // The summary (Info) comes after 15 fields, and may hold commas: only a packet's is checked.
        let (at, _) = line
            .match_indices(',')
            .nth(14)
            .expect("15 fields and the summary");
        let (fields, info) = (&line[..at], &line[at + 1..]);
        let mut summary = None;
        let be16 = |i: usize| u16::from_be_bytes([r.pseudo_header[i], r.pseudo_header[i + 1]]);
        let crc = u32::from_le_bytes(r.bytes[12..16].try_into().unwrap());
        let expected = match r.pseudo_header[1] {
            RECORD_PACKET => {
                packets += 1;
                let h = PacketHeader::parse(&r.bytes[..16].try_into().unwrap()).unwrap();
                // The simulator's own header (spec section 7.1), and the summary line names it.
                let (dest, source, group) = wire::route_fields(h.tl);
                let opcode = wire::opcode(h.tl);
                let name = match opcode {
                    OP_PARTIAL => "partial sum",
                    OP_RESULT => "result",
                    _ => panic!("a ring all-reduce sends partial sums and results, not {opcode:#x}"),
                };
                summary = Some(format!(
                    "{} seq {} ack {}, {name} {source} -> {dest}, offset {:X}h, {} payload flits",
                    h.vc.name(),
                    h.seq.get(),
                    h.ack.get(),
                    wire::offset(h.tl),
                    h.payload_flits
                ));
                format!(
                    "1,{},{},{},{},{},{:#018x},{crc:#010x},,,,{opcode:#04x},{source},{:#010x},{}",
                    be16(2),
                    be16(4),
                    be16(6),
                    h.seq.get(),
                    h.vc.index(),
                    h.tl,
                    wire::offset(h.tl),
                    u8::from(group.is_some())
                )
            }
            _ => {
                let flit = r.bytes[..].try_into().unwrap();
                if let Ok(ident) = IdentFlit::parse(&flit) {
                    idents += 1;
                    format!(
                        "2,{},{},{},,,,{crc:#010x},5,{:#018x},{},,,,",
                        be16(2),
                        be16(4),
                        be16(6),
                        ident.node,
                        ident.port
                    )
                } else {
                    let c = ControlFlit::parse(&flit).unwrap();
                    format!(
                        "2,{},{},{},,,,{crc:#010x},{},,,,,,",
                        be16(2),
                        be16(4),
                        be16(6),
                        c.kind as u8
                    )
                }
            }
        };
        assert_eq!(fields, expected);
        if let Some(summary) = summary {
            assert_eq!(info, summary);
        }
    }
    assert!(packets > 0, "the trace's first records include data packets");
    assert!(idents > 0, "and identity flits");
}

/// Every opcode of the simulator's header (spec section 7.1) that a collective sends, as the dissector
/// reads it from traces of a tree, an in-switch reduction and an all-to-all under a link failure: the
/// opcode's name, a multicast group, a returned packet's original opcode and a tree credit's count.
#[test]
fn tshark_names_every_collective_opcode_of_the_simulators_header() {
    use fabric_sim::collective::tree::OP_CREDIT;
    use fabric_sim::run::FaultSpec;
    if !tshark_available() {
        return;
    }
    let dgx = |kind, algo, bytes| Sweep {
        limit_per_size: Duration::from_ms(10),
        ..Sweep::new(Topology::builtin("dgx-h100").unwrap(), kind, algo, bytes, bytes)
    };
    let mut failing = dgx(Kind::AllToAll, Algo::P2p, 1 << 20);
    failing.faults = vec![FaultSpec::Link {
        a: "gpu3".into(),
        b: "nvswitch2".into(),
        at: Duration::from_ns(300),
    }];
    // A small buffer: the tree's chunks outnumber its slots, so it sends credits.
    let tree = Sweep {
        buffer_bytes: 4096,
        ..dgx(Kind::AllReduce, Algo::Tree, 64 * 1024)
    };
    let sweeps = [tree, dgx(Kind::AllReduce, Algo::SwitchReduce, 4096), failing];
    let names = [
        (wire::OP_WRITE, "data"),
        (OP_PARTIAL, "partial sum"),
        (OP_RESULT, "result"),
        (OP_CREDIT, "tree credit"),
        (wire::OP_REDUCE_READ, "ld_reduce"),
        (wire::OP_READ, "engine read"),
        (wire::OP_READ_DATA, "read answer"),
        (wire::OP_REDUCE_DATA, "sum"),
    ];
    let name = |op: u64| names.iter().find(|&&(o, _)| o == op).map(|&(_, n)| n);
    let mut seen = std::collections::BTreeSet::new();
    for (i, mut sweep) in sweeps.into_iter().enumerate() {
        let path = temp(&format!("opcodes{i}.pcap"));
        sweep.pcap = Some(recording(&path, 20_000));
        assert!(run(&sweep, &mut |_| {}).unwrap().verified);
        let records = read_pcap(&path);
        let lines = tshark(
            &path,
            &[
                "-T",
                "fields",
                "-E",
                "separator=|",
                "-E",
                "occurrence=f",
                "-e",
                "openlink.tl.group",
            ]
            .into_iter()
            .chain([
                "-e",
                "openlink.tl.returned_opcode",
                "-e",
                "openlink.tl.credit.count",
            ])
            .chain(["-e", "_ws.col.Info"])
            .collect::<Vec<_>>(),
        );
        std::fs::remove_file(&path).unwrap();
        assert_eq!(lines.lines().count(), records.len());
        for (line, r) in lines.lines().zip(&records) {
            if r.pseudo_header[1] != RECORD_PACKET {
                continue;
            }
            let tl = PacketHeader::parse(&r.bytes[..16].try_into().unwrap())
                .unwrap()
                .tl;
            let (op, offset) = (wire::opcode(tl), wire::offset(tl));
            let (dest, source, group) = wire::route_fields(tl);
            let fields: Vec<&str> = line.splitn(4, '|').collect();
            let (what, to, offset, returned, count) = match op {
                wire::OP_BOUNCE => {
                    let original = wire::unbounce(tl);
                    let what = format!("returned {}", name(wire::opcode(original)).unwrap());
                    let returned = format!("{:#04x}", wire::opcode(original));
                    (
                        what,
                        dest.to_string(),
                        wire::offset(original),
                        returned,
                        String::new(),
                    )
                }
                _ => {
                    let count = if op == OP_CREDIT {
                        (offset & 0x01FF_FFFF).to_string()
                    } else {
                        String::new()
                    };
                    let to = group.map_or(dest.to_string(), |g| format!("group {g}"));
                    (name(op).unwrap().to_owned(), to, offset, String::new(), count)
                }
            };
            seen.insert(op);
            let group = group.map_or(String::new(), |g| g.to_string());
            assert_eq!(fields[..3], [&group[..], &returned[..], &count[..]], "{line}");
            let summary = format!("{what} {source} -> {to}, offset {offset:X}h,");
            assert!(fields[3].contains(&summary), "{line}: no {summary}");
        }
    }
    let expected: std::collections::BTreeSet<u64> = names.iter().map(|&(o, _)| o).collect();
    assert_eq!(
        seen,
        &expected | &[wire::OP_BOUNCE].into(),
        "opcodes seen in the traces"
    );
}

/// A header flit of a packet with `payload_flits` more flits after it.
fn header_flit(payload_flits: u8) -> [u8; FLIT_LEN] {
    let mut flit = [0u8; FLIT_LEN];
    PacketHeader {
        payload_flits,
        vc: link_dl::vc::Vc::Posted,
        seq: Seq::new(1),
        ack: Seq::new(0),
        credit_vc: link_dl::vc::Vc::Request,
        credit: 0,
        tl: 0x1234,
    }
    .emit(&mut flit)
    .unwrap();
    flit
}

fn update_flit() -> [u8; FLIT_LEN] {
    ControlFlit {
        kind: ControlKind::Update,
        ack: Seq::new(5),
        credits: [64, 64, 128, 64],
    }
    .emit()
}

const HOP: Hop = Hop {
    trunk: 0,
    from: (0, 0),
    to: (1, 0),
};

#[test]
fn a_packet_that_straddles_two_bursts_keeps_the_records_in_time_order() {
    let ns = |n: u64| Instant(n * 1000);
    let mut out = Vec::new();
    let mut tracer = Tracer::new(&mut out, 4, 100).unwrap();
    // Direction 0's burst ends after the header flit of a 2-flit packet; direction 2 sends a control
    // flit meanwhile; direction 0's next burst, at 10 ns, carries the packet's last flit.
    tracer.advance(ns(0)).unwrap();
    tracer.unit(0, HOP, ns(0), &header_flit(1)).unwrap();
    tracer.advance(ns(5)).unwrap();
    tracer.unit(2, HOP, ns(5), &update_flit()).unwrap();
    tracer.advance(ns(10)).unwrap();
    tracer.unit(0, HOP, ns(10), &[0xAB; FLIT_LEN]).unwrap();
    tracer.flush().unwrap();
    drop(tracer);
    let path = temp("straddle.pcap");
    std::fs::write(&path, &out).unwrap();
    let records = read_pcap(&path);
    std::fs::remove_file(&path).unwrap();
    let order: Vec<(u64, u8)> = records.iter().map(|r| (r.ns, r.pseudo_header[1])).collect();
    assert_eq!(order, [(0, RECORD_PACKET), (5, RECORD_CONTROL)]);
}

#[test]
fn a_trace_of_large_messages_is_in_time_order() {
    // 64 KiB messages on mesh4 fill bursts back to back, so packets straddle them.
    let path = temp("large.pcap");
    let sweep = Sweep {
        limit_per_size: Duration::from_ms(10),
        pcap: Some(recording(&path, u64::MAX)),
        ..Sweep::new(
            Topology::builtin("mesh4").unwrap(),
            Kind::AllReduce,
            Algo::Ring,
            65_536,
            65_536,
        )
    };
    assert!(run(&sweep, &mut |_| {}).unwrap().verified);
    let records = read_pcap(&path);
    std::fs::remove_file(&path).unwrap();
    let late = records.windows(2).position(|w| w[1].ns < w[0].ns);
    assert_eq!(late, None, "a record earlier than the one before it");
}

/// A file whose bytes a test can read while a tracer writes it.
#[derive(Clone, Default)]
struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_packet_cut_by_a_failure_holds_nothing_back() {
    let ns = |n: u64| Instant(n * 1000);
    let out = Shared::default();
    let mut tracer = Tracer::new(out.clone(), 4, 100).unwrap();
    tracer.unit(0, HOP, ns(0), &header_flit(1)).unwrap();
    tracer.cut(0);
    tracer.unit(2, HOP, ns(5), &update_flit()).unwrap();
    tracer.advance(ns(10)).unwrap();
    // The control flit is written at once: the packet that will never be whole does not hold it.
    assert_eq!(out.0.borrow().len(), 24 + 16 + 12 + FLIT_LEN);
    drop(tracer);
}

#[test]
fn a_refused_sweep_leaves_the_files_at_its_trace_paths_as_they_were() {
    // The tree cannot count the chunks of 16 GiB with 1 KiB buffers: refused before anything runs.
    let (pcap, vcd) = (temp("refused.pcap"), temp("refused.vcd"));
    std::fs::write(&pcap, "an older trace").unwrap();
    let sweep = Sweep {
        buffer_bytes: 1024,
        pcap: Some(recording(&pcap, 10)),
        vcd: Some(recording(&vcd, 10)),
        ..Sweep::new(
            Topology::builtin("mesh4").unwrap(),
            Kind::AllReduce,
            Algo::Tree,
            16 << 30,
            16 << 30,
        )
    };
    let err = run(&sweep, &mut |_| {}).unwrap_err();
    assert!(err.contains("give a larger --buffsize"), "{err}");
    let older = std::fs::read(&pcap).unwrap();
    std::fs::remove_file(&pcap).unwrap();
    let begun = vcd.exists();
    let _ = std::fs::remove_file(&vcd);
    assert_eq!(older, b"an older trace", "the trace's file was overwritten");
    assert!(!begun, "waveforms were begun at {}", vcd.display());
}

/// The data link's low-power handshake flits (spec section 2.9), which the simulator's fabrics never send
/// (their links do not sleep): written into a trace by hand, the dissector names each and its
/// acknowledgement, as it does an Update.
#[test]
fn tshark_names_the_low_power_handshake_flits() {
    if !tshark_available() {
        return;
    }
    let path = temp("tshark-pm.pcap");
    let hop = Hop {
        trunk: 0,
        from: (0, 1),
        to: (1, 2),
    };
    let mut tracer = Tracer::new(std::fs::File::create(&path).unwrap(), 2, 10).unwrap();
    for (i, (kind, ack)) in [(ControlKind::PmEnterL1, 17), (ControlKind::PmRequestAck, 1023)]
        .into_iter()
        .enumerate()
    {
        let flit = ControlFlit {
            kind,
            ack: Seq::new(ack),
            credits: [0; 4],
        }
        .emit();
        let at = Instant::ZERO + Duration::from_ns(10 * i as u64);
        tracer.unit(i, hop, at, &flit).unwrap();
    }
    tracer.flush().unwrap();
    assert_eq!(
        tshark_fields(&path, &["openlink.control", "_ws.col.Info"]),
        "6\tPM_Enter_L1 ack 17\n7\tPM_Request_Ack ack 1023\n"
    );
}

/// `fields` of each record of the hand-made trace at `path` (removed after), as tshark with the dissector
/// prints them: a line per record, tab-separated.
fn tshark_fields(path: &Path, fields: &[&str]) -> String {
    let mut args = vec!["-T", "fields"];
    args.extend(fields.iter().flat_map(|f| ["-e", f]));
    let out = tshark(path, &args);
    std::fs::remove_file(path).unwrap();
    out
}

/// What the coherence test reads of each record.
const COHERENCE_FIELDS: [&str; 10] = [
    "openlink.layout",
    "openlink.txn.opcode",
    "openlink.txn.dest",
    "openlink.txn.coh.message",
    "openlink.txn.coh.source",
    "openlink.txn.coh.phase",
    "openlink.txn.coh.line",
    "openlink.txn.ext.requester",
    "openlink.txn.ext.length",
    "_ws.col.Info",
];

/// The dissector reads the coherence examples of section 3.9 from a trace of section 3's layout (7.2):
/// agent 3's RdOwn of line 2Ah to home 1 with its extension flit, and home 1's SnpInv of it with phase 1.
#[test]
fn tshark_reads_the_coherence_examples_of_section_3_9() {
    if !tshark_available() {
        return;
    }
    let path = temp("tshark-coherence.pcap");
    let hop = Hop {
        trunk: 0,
        from: (0, 0),
        to: (1, 0),
    };
    let mut tracer = Tracer::new(std::fs::File::create(&path).unwrap(), 2, 10)
        .unwrap()
        .with_tl_layout(TlLayout::Transaction);
    let examples = [
        (
            link_dl::vc::Vc::Request,
            0x0300_0B00_0000_002A_u64,
            Some([0x00, 0xC0, 0x00, 0x02]),
        ),
        (link_dl::vc::Vc::Snoop, 0x0320_1900_6000_002A, None),
    ];
    for (i, (vc, tl, extension)) in examples.into_iter().enumerate() {
        let mut packet = vec![0u8; FLIT_LEN * (1 + usize::from(extension.is_some()))];
        let header = PacketHeader {
            payload_flits: u8::from(extension.is_some()),
            vc,
            seq: Seq::new(i as u16),
            ack: Seq::new(1023),
            credit_vc: link_dl::vc::Vc::Request,
            credit: 0,
            tl,
        };
        header
            .emit((&mut packet[..FLIT_LEN]).try_into().unwrap())
            .unwrap();
        if let Some(bytes) = extension {
            packet[FLIT_LEN..FLIT_LEN + 4].copy_from_slice(&bytes);
        }
        link_dl::flit::seal_packet(&mut packet);
        let at = Instant::ZERO + Duration::from_ns(10 * i as u64);
        for unit in packet.chunks_exact(FLIT_LEN) {
            tracer.unit(0, hop, at, unit.try_into().unwrap()).unwrap();
        }
    }
    tracer.flush().unwrap();
    assert_eq!(
        tshark_fields(&path, &COHERENCE_FIELDS),
        "1\t0x18\t1\tRdOwn\t0\t0\t0x0000002a\t3\t64\trequest seq 0 ack 1023, RdOwn to 1 from 3, line 2Ah, 1 payload flits\n\
         1\t0x19\t3\tSnpInv\t1\t1\t0x0000002a\t\t\tsnoop seq 1 ack 1023, SnpInv to 3 from 1, line 2Ah, 0 payload flits\n"
    );
}

/// A trace kept to some nodes' links holds exactly the records of the whole trace that cross one of them,
/// in the same order; a node the fabric does not have is refused before any file is made.
#[test]
fn a_trace_of_some_nodes_is_the_whole_traces_records_on_their_links() {
    let (whole, some) = (temp("whole.pcap"), temp("some.pcap"));
    traced_sweep(&whole, 1_000_000);
    let topology = Topology::builtin("mesh4").unwrap();
    let sweep = |path: &Path, only: &[&str]| Sweep {
        limit_per_size: Duration::from_ms(10),
        pcap: Some(Recording {
            only_nodes: only.iter().map(|n| n.to_string()).collect(),
            received: false,
            ..recording(path, 1_000_000)
        }),
        ..Sweep::new(topology.clone(), Kind::AllReduce, Algo::Ring, 1024, 4096)
    };
    assert!(
        run(&sweep(&some, &["gpu1", "gpu3"]), &mut |_| {})
            .unwrap()
            .verified
    );
    let node = |name: &str| topology.nodes.iter().position(|n| n.name == name).unwrap() as u16;
    let (n1, n3) = (node("gpu1"), node("gpu3"));
    let touches = |r: &Record| {
        let to = r.hop().to.0;
        [n1, n3].contains(&r.from_node()) || [n1, n3].contains(&to)
    };
    let expected: Vec<Record> = read_pcap(&whole).into_iter().filter(touches).collect();
    let kept = read_pcap(&some);
    assert!(!kept.is_empty() && kept.len() < read_pcap(&whole).len());
    assert_eq!(kept, expected);
    let missing = temp("missing.pcap");
    let refused = run(&sweep(&missing, &["gpu9"]), &mut |_| {}).unwrap_err();
    assert!(
        refused.contains("it is to keep node \"gpu9\"'s links"),
        "{refused}"
    );
    assert!(!missing.exists(), "no file is made for a refused trace");
    std::fs::remove_file(&whole).unwrap();
    std::fs::remove_file(&some).unwrap();
}
