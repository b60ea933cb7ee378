//! `linkctl dl decode` end to end: the spec's worked examples, a whole posted write, idle runs, and every
//! kind of damage reported with exit status 2; bad hex refused.

use std::process::Output;

use link_dl::flit::{seal_packet, IdentFlit, PacketHeader, FLIT_LEN};
use link_dl::seq::Seq;
use link_dl::Vc;
use link_tl::header::{Header, Opcode};

mod common;
#[path = "../src/test_rng.rs"]
mod test_rng;

fn decode(args: &[&str], input: &[u8]) -> Output {
    common::linkctl_with_input(&["dl", "decode"], args, input)
}

/// The JSON lines `decode --json` prints for `hex`, and its exit code.
fn read(hex: &str) -> (Vec<serde_json::Value>, Option<i32>) {
    let out = decode(&["--json"], hex.as_bytes());
    let items = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (items, out.status.code())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x} ")).collect()
}

/// A posted write of 128 bytes to endpoint 3, sequence number 9, as the data link sends it.
fn posted_write() -> Vec<u8> {
    let tl = Header::Request {
        opcode: Opcode::PostedWrite,
        dest: 3,
        addr: 0x1000,
    }
    .emit()
    .unwrap();
    let header = PacketHeader {
        payload_flits: 8,
        vc: Vc::Posted,
        seq: Seq::new(9),
        ack: Seq::new(2),
        credit_vc: Vc::Request,
        credit: 7,
        tl,
    };
    let mut packet = vec![0u8; 9 * FLIT_LEN];
    header
        .emit((&mut packet[..FLIT_LEN]).try_into().unwrap())
        .unwrap();
    for (i, b) in packet[FLIT_LEN..].iter_mut().enumerate() {
        *b = i as u8;
    }
    seal_packet(&mut packet);
    packet
}

#[test]
fn the_worked_examples_of_section_2_decode_to_their_fields() {
    let out = decode(&["85 11 00 00 01 23 45 67 89 ab cd ef 37 06 23 7f"], b"");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "     0  Ident   node 0123456789abcdef port 17\n"
    );
    let (items, code) = read("81 00 3f f0 00 40 00 80 12 34 00 00 ae 23 54 d8");
    assert_eq!(code, Some(0));
    assert_eq!(items[0]["kind"], "control");
    assert_eq!(items[0]["type"], "Update");
    assert_eq!(items[0]["ack"], 1023);
    assert_eq!(items[0]["credits"], serde_json::json!([64, 128, 0x1234, 0]));
    // Section 2.2's header flit carries an arbitrary transaction-layer header: the data link checks it
    // (the CRC matches) and the transaction layer refuses it (opcode 0).
    let mut packet = "61 01 40 38 48 12 34 56 78 9a bc de dd 79 41 3b ".to_owned();
    packet += &hex(&(0..128).collect::<Vec<u8>>());
    let (items, code) = read(&packet);
    assert_eq!(code, Some(2));
    let p = &items[0];
    assert_eq!(
        (p["kind"].as_str(), p["flits"].as_u64()),
        (Some("packet"), Some(9))
    );
    assert_eq!((p["seq"].as_u64(), p["ack"].as_u64()), (Some(5), Some(3)));
    assert_eq!(
        (p["vc"].as_str(), p["credit_vc"].as_str()),
        (Some("posted"), Some("response"))
    );
    assert_eq!(
        (p["credit"].as_u64(), p["tl"].as_str()),
        (Some(0x12), Some("0123456789abcde"))
    );
    assert_eq!(
        (p["crc"].as_str(), p["crc_ok"].as_bool()),
        (Some("3b4179dd"), Some(true))
    );
    assert!(p["tl_error"].as_str().unwrap().contains("opcode"));
}

/// A packet of section 3.8 as the data link sends it (sequence number 0, acknowledging 0, credit
/// field zero): its header `tl` on `vc` and `flits` after the header flit.
fn spec_packet(vc: Vc, tl: u64, flits: &[[u8; FLIT_LEN]]) -> Vec<u8> {
    let header = PacketHeader {
        payload_flits: flits.len() as u8,
        vc,
        seq: Seq::new(0),
        ack: Seq::new(0),
        credit_vc: Vc::Request,
        credit: 0,
        tl,
    };
    let mut packet = vec![0u8; FLIT_LEN];
    header.emit((&mut packet[..]).try_into().unwrap()).unwrap();
    packet.extend(flits.as_flattened());
    seal_packet(&mut packet);
    packet
}

#[test]
fn the_transactions_of_section_3_8_decode_to_their_fields() {
    // The 128-byte posted write of bytes 00h to 7Fh to endpoint 5, local address 12345680h, byte for
    // byte as the spec gives its header flit.
    let mut write = "61 00 00 00 00 20 28 00 01 23 45 68 85 0d 2a a7 ".to_owned();
    write += &hex(&(0..128).collect::<Vec<u8>>());
    let (items, code) = read(&write);
    assert_eq!(code, Some(0));
    assert_eq!(
        items[0]["transaction"],
        serde_json::json!({"opcode": "PostedWrite", "dest": 5, "address": "000012345680"}),
        "{}",
        items[0]
    );
    let out = decode(&[&write], b"");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.ends_with("CRC a72a0d85 ok: PostedWrite to endpoint 5, address 12345680h\n"),
        "{text}"
    );
    // Endpoint 2 refusing tag 7 of endpoint 1: a completion without data.
    let refusal = hex(&spec_packet(Vc::Response, 0x0200_0804_03A0_0000, &[]));
    let (items, code) = read(&refusal);
    assert_eq!(code, Some(0), "{items:?}");
    assert_eq!(
        items[0]["transaction"],
        serde_json::json!({"opcode": "Completion", "dest": 1, "completer": 2, "tag": 7,
                           "status": "UnsupportedRequest", "offset": 0, "length": 0})
    );
    let text = String::from_utf8(decode(&[&refusal], b"").stdout).unwrap();
    assert!(
        text.ends_with(": Completion to endpoint 1 from endpoint 2, tag 7, UnsupportedRequest\n"),
        "{text}"
    );
    // Endpoint 1 ringing doorbell 3 of endpoint 9, its value in the extension flit.
    let extension = [
        0, 0x40, 0, 0, 0, 0, 0, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
    ];
    let doorbell = hex(&spec_packet(Vc::Posted, 0x0060_4808_0018_0000, &[extension]));
    let (items, code) = read(&doorbell);
    assert_eq!(code, Some(0), "{items:?}");
    assert_eq!(
        items[0]["transaction"],
        serde_json::json!({"opcode": "Message", "dest": 9, "code": "Doorbell", "index": 3, "source": 1,
                           "value": "1122334455667788", "length": 0})
    );
    let text = String::from_utf8(decode(&[&doorbell], b"").stdout).unwrap();
    assert!(
        text.ends_with(": Message Doorbell 3 to endpoint 9, from endpoint 1, value 1122334455667788h\n"),
        "{text}"
    );
    // The second completion of the read of 300 bytes: 128 bytes at offset 16, to endpoint 1 from 1023.
    let data = [[0u8; FLIT_LEN]; 8];
    let completion = hex(&spec_packet(Vc::Response, 0x0200_0FFE_1500_21FE, &data));
    let text = String::from_utf8(decode(&[&completion], b"").stdout).unwrap();
    assert!(
        text.ends_with(
            ": Completion to endpoint 1 from endpoint 1023, tag 42, Success, 128 bytes at offset 16\n"
        ),
        "{text}"
    );
}

#[test]
fn a_stream_of_packets_idle_and_identity_flits_decodes_in_order() {
    let ident = IdentFlit { node: 42, port: 5 }.emit();
    let mut stream = posted_write();
    stream.extend([0u8; 3 * FLIT_LEN]);
    stream.extend(ident);
    stream.extend(posted_write());
    // Raw bytes on stdin give the same reading as hex.
    let out = decode(&["--binary", "--json"], &stream);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let (items, code) = read(&hex(&stream));
    assert_eq!(code, Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().lines().count(),
        items.len()
    );
    let kinds: Vec<_> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["packet", "idle", "ident", "packet"]);
    let at: Vec<_> = items.iter().map(|i| i["at"].as_u64().unwrap()).collect();
    assert_eq!(at, [0, 9, 12, 13]);
    assert_eq!(items[1]["units"], 3);
    assert_eq!(
        (items[2]["node"].as_str(), items[2]["port"].as_u64()),
        (Some("000000000000002a"), Some(5))
    );
    assert_eq!(items[0]["crc_ok"], true);
    assert_eq!(items[0]["transaction"]["opcode"], "PostedWrite");
    assert!(items.iter().all(|i| i["ok"] == true));
}

#[test]
fn damage_is_reported_and_fails_the_exit_status() {
    // One bit of the payload flipped: the CRC no longer matches.
    let mut flipped = posted_write();
    flipped[100] ^= 0x10;
    let (items, code) = read(&hex(&flipped));
    assert_eq!((code, items[0]["crc_ok"].as_bool()), (Some(2), Some(false)));
    // Cut short: the header announces 8 more flits, 3 follow.
    let (items, code) = read(&hex(&posted_write()[..4 * FLIT_LEN]));
    assert_eq!(code, Some(2));
    assert!(items[0]["error"].as_str().unwrap().contains("cut short"));
    // A control flit whose CRC does not check; then, as after any error, a receiver discards what
    // follows (a reserved flit kind, a whole good packet) until a control flit that checks, idle aside.
    let mut bad_ident = IdentFlit { node: 1, port: 1 }.emit();
    bad_ident[15] ^= 1;
    let mut stream = bad_ident.to_vec();
    stream.extend([0xC0; FLIT_LEN]);
    stream.extend(posted_write());
    stream.extend([0; FLIT_LEN]);
    stream.extend(IdentFlit { node: 2, port: 2 }.emit());
    stream.extend(posted_write());
    let (items, code) = read(&hex(&stream));
    assert_eq!(code, Some(2));
    let kinds: Vec<_> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["malformed", "discarded", "idle", "ident", "packet"],
        "{items:?}"
    );
    assert!(
        items[0]["error"].as_str().unwrap().contains("CRC"),
        "{}",
        items[0]
    );
    assert_eq!(
        (items[1]["at"].as_u64(), items[1]["units"].as_u64()),
        (Some(1), Some(10))
    );
    assert_eq!(
        (items[1]["ok"].as_bool(), items[4]["ok"].as_bool()),
        (Some(false), Some(true))
    );
    // Starting on a reserved kind: malformed, and the rest discarded up to a boundary.
    let mut stream = vec![0xC0; FLIT_LEN];
    stream.extend(posted_write());
    let (items, _) = read(&hex(&stream));
    let kinds: Vec<_> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["malformed", "discarded"]);
}

#[test]
fn the_units_before_bad_input_are_decoded_however_the_input_is_read() {
    // Idle, three identity flits and the start of a packet, read at once with what ends them.
    let mut units = hex(&[0; FLIT_LEN]);
    units += &hex(&IdentFlit { node: 42, port: 5 }.emit()).repeat(3);
    units += &hex(&posted_write()[..2 * FLIT_LEN]);
    for (end, error) in [
        ("zz", "'z' is not a hex digit"),
        ("01", "not a whole number of 16-byte units"),
    ] {
        let input = format!("{units}{end}");
        let out = decode(&[], input.as_bytes());
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{end}: {stderr}");
        assert!(stderr.contains(error), "{end}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        let text = String::from_utf8(out.stdout).unwrap();
        let kinds: Vec<_> = text
            .lines()
            .map(|l| l.split_whitespace().nth(1).unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["idle", "Ident", "Ident", "Ident", "packet"],
            "{end}: {text}"
        );
        // The packet the bad input cut off is reported as cut short.
        assert!(text.contains("cut short: 2 of its 9 flits"), "{text}");
        let (items, code) = read(&input);
        assert_eq!(code, Some(1));
        let at: Vec<_> = items.iter().map(|i| i["at"].as_u64().unwrap()).collect();
        assert_eq!(at, [0, 1, 2, 3, 4], "{end}: {items:?}");
    }
}

#[test]
fn input_that_is_not_whole_units_of_hex_is_refused() {
    common::assert_refused(&["dl", "decode"], &["12", "zz"]);
    common::assert_refused(&["dl", "decode"], &["1234"]);
    common::assert_refused(&["dl", "decode"], &["123"]);
}

/// An empty input, as hex arguments (an empty shell variable), hex or raw bytes on stdin, is an error,
/// not a stream that checks (it printed nothing and exited 0).
#[test]
fn empty_input_is_refused() {
    for (args, input) in [
        (&[""][..], &b""[..]),
        (&["", " "], b""),
        (&["--json"], b""),
        (&[], b" \n"),
        (&["--binary"], b""),
    ] {
        let out = decode(args, input);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(
            stderr, "linkctl: error: the input is empty: no 16-byte unit to decode\n",
            "{args:?}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// `--pcap` reads a trace record by record, each read as its pseudo-header's layout says, with its time and
/// hop: a copy's records as section 3's transactions, a simulation's by the simulator's header (7.1);
/// `at` numbers the records. A file cut inside a record is an error after the records before it, and a
/// file that is not a trace is refused with a message.
#[test]
fn a_trace_reads_back_record_by_record() {
    use fabric_sim::trace::read as read_trace;
    let dir = std::env::temp_dir().join(format!("linkctl-dl-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (copy, sim) = (dir.join("copy.pcap"), dir.join("sim.pcap"));
    let c = common::linkctl(
        &["tl", "copy"],
        &["--size", "1000", "--pull", "--pcap", copy.to_str().unwrap()],
    );
    assert!(c.status.success());
    let args = [
        "--topology",
        "mesh4",
        "--min",
        "1K",
        "--max",
        "1K",
        "--pcap",
        sim.to_str().unwrap(),
    ];
    assert!(common::linkctl(&["sim", "allreduce"], &args).status.success());
    for (path, key) in [(&copy, "transaction"), (&sim, "simulated")] {
        let records = read_trace(&std::fs::read(path).unwrap()).unwrap();
        let out = decode(&["--pcap", path.to_str().unwrap(), "--json"], b"");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let items: Vec<serde_json::Value> = (String::from_utf8(out.stdout).unwrap().lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(items.len(), records.len(), "an item per record");
        for (n, (item, record)) in items.iter().zip(&records).enumerate() {
            assert_eq!(item["at"], n);
            assert_eq!(item["time_ns"], record.ns);
            assert_eq!(item["from_node"], record.from_node());
            assert_eq!(item["ok"], true, "{item}");
            if item["kind"] == "packet" {
                assert!(item[key].is_object(), "{item}");
                assert_eq!(item["flits"].as_u64().unwrap() as usize * 16, record.bytes.len());
            }
        }
        assert!(items.iter().any(|i| i["kind"] == "packet"));
    }
    let whole = std::fs::read(&copy).unwrap();
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &whole[..whole.len() - 5]).unwrap();
    let out = decode(&["--pcap", cut.to_str().unwrap()], b"");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is cut short"));
    let lines = String::from_utf8(out.stdout).unwrap().lines().count();
    assert_eq!(
        lines + 1,
        read_trace(&whole).unwrap().len(),
        "the records before the cut are read"
    );
    common::assert_refused_saying(&["dl", "decode"], &["--pcap", "Cargo.toml"], "is not a trace");
    common::assert_refused_saying(
        &["dl", "decode"],
        &["--pcap", "x", "--binary"],
        "cannot be used with",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A trace of records of random bytes and lengths (whole units or not, any layout byte, most of them
/// starting as a packet's header flit, whose flit count may claim more than the record holds) reads to
/// the end: exit status 0 or 2 (the same with `--summary`), something printed for every record, nothing on
/// stderr; and the dissector reads every record without a Lua error.
#[test]
fn a_trace_of_random_records_reads_without_panic() {
    let mut next = test_rng::xorshift(0x5EED_7ACE);
    let path = std::env::temp_dir().join(format!("linkctl-dl-random-{}.pcap", std::process::id()));
    let mut file = Vec::new();
    file.extend_from_slice(&fabric_sim::trace::MAGIC_NS.to_le_bytes());
    // Version 2.4, time zone and accuracy 0, snapshot length 65535: a file tshark opens.
    file.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0]);
    file.extend_from_slice(&fabric_sim::trace::LINKTYPE.to_le_bytes());
    let records = 2000;
    for n in 0..records {
        let len = if n % 3 == 0 {
            16 * (1 + next() % 10)
        } else {
            next() % 161
        } as usize;
        let mut pseudo_header = [0u8; 12];
        pseudo_header.iter_mut().for_each(|b| *b = next() as u8);
        pseudo_header[10] %= 4;
        let total = (12 + len) as u32;
        file.extend_from_slice(&(n as u32).to_le_bytes());
        file.extend_from_slice(&0u32.to_le_bytes());
        file.extend_from_slice(&total.to_le_bytes());
        file.extend_from_slice(&total.to_le_bytes());
        file.extend_from_slice(&pseudo_header);
        let body = file.len();
        file.extend((0..len).map(|_| next() as u8));
        if len > 0 && n % 4 != 0 {
            // The header flit's kind: a packet.
            file[body] = (file[body] & 0x3F) | 0x40;
        }
    }
    std::fs::write(&path, &file).unwrap();
    let out = decode(&["--pcap", path.to_str().unwrap(), "--json"], b"");
    // Counted instead: the same exit status, and the total says so.
    let summary = decode(&["--pcap", path.to_str().unwrap(), "--json", "--summary"], b"");
    assert_eq!(summary.status.code(), out.status.code());
    assert!(
        summary.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&summary.stderr)
    );
    let total: serde_json::Value =
        serde_json::from_str(String::from_utf8(summary.stdout).unwrap().lines().last().unwrap()).unwrap();
    assert_eq!(total["direction"], "all");
    assert_eq!(total["ok"], out.status.code() == Some(0), "{total}");
    if common::tshark_available() {
        let text = common::tshark(&path, &["-V"]);
        assert!(
            text.matches("openlink").count() > records as usize,
            "the dissector ran"
        );
        assert!(
            !text.contains("Lua Error"),
            "{}",
            text.lines().find(|l| l.contains("Lua Error")).unwrap_or("")
        );
    }
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(out.status.code(), Some(0 | 2)), "{out:?}");
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let seen: std::collections::BTreeSet<u64> = (String::from_utf8(out.stdout).unwrap().lines())
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["at"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seen, (0..records).collect());
}

/// Atomics' operand flits and a partial write's byte enables (section 3.3), written into a trace: `dl
/// decode --pcap` gives each operand, expected value and the enabled bytes as the packets carry them, and
/// tshark with the dissector reads the same.
#[test]
fn operands_and_byte_enables_read_alike_in_dl_decode_and_the_dissector() {
    use fabric_sim::trace::{Hop, TlLayout, Tracer};
    use link_tl::packet::{Atomic, AtomicOp, Packet, RequestId, Tlp};
    let atomic = |op, size, operand, compare| {
        Tlp::Atomic(Atomic {
            dest: 2,
            op,
            addr: 0x40,
            size,
            id: RequestId { requester: 5, tag: 9 },
            operand,
            compare,
        })
    };
    let mut packets = Vec::new();
    for tlp in [
        atomic(AtomicOp::FetchAdd, 8, 0x0123_4567_89AB_CDEF, 0),
        atomic(AtomicOp::CompareSwap, 4, 0xDEAD_BEEF, 0x1234_5678),
        atomic(AtomicOp::Swap, 4, 0x0000_0007, 0),
    ] {
        let mut p = Packet::new();
        tlp.emit(&mut p).unwrap();
        packets.push(p);
    }
    let mut partial = Packet::new();
    partial.posted_write(2, 0x1003, &[0xAA; 20]).unwrap();
    packets.push(partial);
    let path = std::env::temp_dir().join(format!("linkctl-dl-operands-{}.pcap", std::process::id()));
    let hop = Hop {
        trunk: 0,
        from: (0, 0),
        to: (1, 0),
    };
    let mut tracer = Tracer::new(std::fs::File::create(&path).unwrap(), 2, 100)
        .unwrap()
        .with_tl_layout(TlLayout::Transaction);
    for (i, p) in packets.iter().enumerate() {
        let mut bytes = vec![0u8; p.flits() * FLIT_LEN];
        let header = PacketHeader {
            payload_flits: p.payload().len() as u8,
            vc: p.vc(),
            seq: Seq::new(i as u16),
            ack: Seq::new(1023),
            credit_vc: Vc::Request,
            credit: 0,
            tl: p.tl(),
        };
        header.emit((&mut bytes[..FLIT_LEN]).try_into().unwrap()).unwrap();
        bytes[FLIT_LEN..].copy_from_slice(p.payload().as_flattened());
        seal_packet(&mut bytes);
        let at = link_phy::time::Instant(1000 * i as u64);
        for unit in bytes.chunks_exact(FLIT_LEN) {
            tracer.unit(0, hop, at, unit.try_into().unwrap()).unwrap();
        }
    }
    tracer.flush().unwrap();
    drop(tracer);
    let out = decode(&["--pcap", path.to_str().unwrap(), "--json"], b"");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let items: Vec<serde_json::Value> = (String::from_utf8(out.stdout).unwrap().lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let t = |i: usize, key: &str| items[i]["transaction"][key].clone();
    assert_eq!(t(0, "operand"), "0123456789abcdef");
    assert_eq!(t(1, "operand"), "deadbeef");
    assert_eq!(t(1, "compare"), "12345678");
    assert_eq!(t(2, "operand"), "00000007");
    assert!(items[2]["transaction"].get("compare").is_none());
    assert_eq!(t(3, "opcode"), "PostedWritePartial");
    assert_eq!(t(3, "enabled_bytes"), 20);
    assert_eq!(t(3, "first_enabled"), 3);
    if common::tshark_available() {
        let fields = [
            "openlink.txn.operand",
            "openlink.txn.compare",
            "openlink.txn.enabled_bytes",
            "openlink.txn.first_enabled",
        ];
        let rows = common::tshark_fields(&path, &fields);
        let rows: Vec<Vec<&str>> = rows
            .iter()
            .map(|r| r.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(
            rows,
            [
                vec!["0x0123456789abcdef", "", "", ""],
                vec!["0x00000000deadbeef", "0x0000000012345678", "", ""],
                vec!["0x0000000000000007", "", "", ""],
                vec!["", "", "20", "3"],
            ]
        );
    }
    std::fs::remove_file(&path).unwrap();
}

/// `--fec` on random units of any length, short of the 256 units its search for the blocks' start takes
/// or past them, ends cleanly: exit status 0 or 2, a FEC summary last, nothing on stderr.
#[test]
fn random_units_in_fec_blocks_end_cleanly() {
    let mut next = test_rng::xorshift(0xFEC0_5EED);
    for units in [1usize, 15, 16, 255, 256, 257, 700] {
        let bytes: Vec<u8> = (0..units * FLIT_LEN).map(|_| next() as u8).collect();
        let out = decode(&["--fec", "--binary", "--json"], &bytes);
        assert!(matches!(out.status.code(), Some(0 | 2)), "{units} units: {out:?}");
        assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
        let last: serde_json::Value =
            serde_json::from_str(String::from_utf8(out.stdout).unwrap().lines().last().unwrap()).unwrap();
        assert_eq!(last["kind"], "fec", "{units} units");
        assert!(last["units_before_first_block"].as_u64().unwrap() < 16);
    }
}

/// `--summary` counts what the items say, per direction and in all, and says whether everything checked
/// as the exit status does: over a received trace of a noisy link, its figures are the item-by-item
/// output's, counted here, and its CRC errors and discarded units are the data links' own counts.
#[test]
fn a_summary_counts_what_the_items_say() {
    use std::collections::BTreeMap;
    let pcap = std::env::temp_dir().join(format!("linkctl-dl-summary-{}.pcap", std::process::id()));
    let path = pcap.to_str().unwrap();
    let run = common::linkctl(
        &["link", "run"],
        &[
            "--lanes",
            "2",
            "--packets",
            "300",
            "--both-ways",
            "--timing",
            "fast",
            "--ber",
            "1e-4",
            "--seed",
            "5",
            "--json",
            "--pcap-received",
            "--pcap",
            path,
        ],
    );
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let run: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let lines = |out: &Output| -> Vec<serde_json::Value> {
        (String::from_utf8(out.stdout.clone()).unwrap().lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let items_out = decode(&["--pcap", path, "--json"], b"");
    let summary_out = decode(&["--pcap", path, "--json", "--summary"], b"");
    let text_out = decode(&["--pcap", path, "--summary"], b"");
    std::fs::remove_file(&pcap).unwrap();
    assert_eq!(items_out.status.code(), Some(2));
    assert_eq!(summary_out.status.code(), Some(2), "the same exit status");
    assert_eq!(text_out.status.code(), Some(2));
    let (items, summary) = (lines(&items_out), lines(&summary_out));
    assert_eq!(summary.len(), 3, "two directions and the total: {summary:?}");
    let mut total = BTreeMap::<&str, u64>::new();
    for s in &summary[..2] {
        let mine: Vec<&serde_json::Value> = (items.iter())
            .filter(|i| i["from_node"] == s["from_node"] && i["to_node"] == s["to_node"])
            .collect();
        let count = |f: &dyn Fn(&serde_json::Value) -> u64| -> u64 { mine.iter().map(|i| f(i)).sum() };
        let is = |i: &serde_json::Value, kind: &str| u64::from(i["kind"] == kind);
        let expected = [
            ("packets", count(&|i| is(i, "packet"))),
            (
                "packet_flits",
                count(&|i| is(i, "packet") * i["flits"].as_u64().unwrap_or(0)),
            ),
            (
                "bad_crc",
                count(&|i| is(i, "packet") * u64::from(i["crc_ok"] == false)),
            ),
            ("replays", count(&|i| u64::from(i["replay"] == true))),
            ("control_flits", count(&|i| is(i, "control"))),
            ("ident", count(&|i| is(i, "ident"))),
            ("malformed", count(&|i| is(i, "malformed"))),
            (
                "discarded_units",
                count(&|i| is(i, "discarded") * i["units"].as_u64().unwrap_or(0)),
            ),
        ];
        for (key, value) in expected {
            assert_eq!(s[key], value, "{key}: {s}");
            *total.entry(key).or_default() += value;
        }
        let updates = count(&|i| u64::from(i["type"] == "Update"));
        assert_eq!(s["control"]["Update"], updates, "{s}");
        let times: Vec<u64> = mine.iter().map(|i| i["time_ns"].as_u64().unwrap()).collect();
        assert_eq!(s["first_ns"], *times.iter().min().unwrap());
        assert_eq!(s["last_ns"], *times.iter().max().unwrap());
        assert_eq!(s["ok"], mine.iter().all(|i| i["ok"] == true));
    }
    let all = &summary[2];
    assert_eq!(all["direction"], "all");
    for (key, value) in &total {
        assert_eq!(all[*key], *value, "{key}: {all}");
    }
    assert_eq!(all["ok"], false);
    // What the data links counted: a CRC error is a packet with a bad CRC or a control flit whose CRC
    // fails (read as malformed), and the units they discarded are the trace's discarded units (with, at
    // most, the unit each could not parse that started the discarding).
    let counted = |key: &str| -> u64 { (0..2).map(|p| run["counters"][p][key].as_u64().unwrap()).sum() };
    let (bad_crc, malformed) = (
        all["bad_crc"].as_u64().unwrap(),
        all["malformed"].as_u64().unwrap(),
    );
    let crc_errors = run["crc_errors"].as_u64().unwrap();
    assert!(
        bad_crc > 0 && (bad_crc..=bad_crc + malformed).contains(&crc_errors),
        "{all} {run}"
    );
    let (resync, unparsed) = (counted("resync_discards"), counted("malformed"));
    let discarded = all["discarded_units"].as_u64().unwrap();
    assert!((resync..=resync + unparsed).contains(&discarded), "{all} {run}");
    let text = String::from_utf8(text_out.stdout).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.lines().last().unwrap().starts_with("all: "), "{text}");
    assert!(text.contains(&format!("{bad_crc} with a bad CRC")), "{text}");
    assert!(text.trim_end().ends_with("NOT ok"), "{text}");
}
