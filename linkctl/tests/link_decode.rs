//! `linkctl link run --capture` and `linkctl link decode`: a link's traffic captured lane by lane and read
//! back as the partner's port reads it, every packet sent found with its CRC checking; damage found;
//! a bad capture index refused.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("linkctl-decode-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `link run` with `args` (separated by spaces), captured into `dir`; its report.
fn run_captured(dir: &Path, args: &str) -> Value {
    let args: Vec<&str> = args.split_whitespace().collect();
    common::json(
        &["link", "run"],
        &[
            &args[..],
            &["--timing", "fast", "--capture", dir.to_str().unwrap()],
        ]
        .concat(),
    )
}

/// The capture index in `dir`.
fn read_index(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("capture.json")).unwrap()).unwrap()
}

/// Write `index` as the capture index in `dir`.
fn write_index(dir: &Path, index: &Value) {
    std::fs::write(dir.join("capture.json"), index.to_string()).unwrap();
}

/// Flip bits in four bytes of a lane's `file`, a `1/part` of the way into it.
fn spoil_four_bytes(file: &Path, part: usize) {
    let mut bytes = std::fs::read(file).unwrap();
    let at = bytes.len() / part;
    for b in &mut bytes[at..at + 4] {
        *b ^= 0x24;
    }
    std::fs::write(file, bytes).unwrap();
}

/// `link decode --json` of `dir` with `args`: its exit status and the objects it printed.
fn decode(dir: &Path, args: &[&str]) -> (Option<i32>, Vec<Value>) {
    let out = common::linkctl(
        &["link", "decode"],
        &[&[dir.to_str().unwrap(), "--json"][..], args].concat(),
    );
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let items = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status.code(), items)
}

/// Both directions' traffic, captured at 8b/10b on x4 and at 128b/130b on a reversed x2, decodes to every
/// packet each port sent, once, its CRC checking, with the lanes numbered as the link numbered them (B's
/// backward on the reversed link), and no receiver error on any lane.
#[test]
fn a_captured_run_decodes_to_every_packet_sent() {
    for (lanes, rate, reversed) in [(4, "5", false), (2, "8", true)] {
        let dir = temp_dir(&format!("run{lanes}"));
        let reversing = if reversed { "--reversed" } else { "" };
        let args = format!("--lanes {lanes} --max-rate {rate} --packets 40 --both-ways {reversing}");
        let report = run_captured(&dir, &args);
        assert_eq!(report["packets_delivered"], 80, "{report}");
        assert!(
            report["capture"]["files"].as_u64().unwrap() >= 2 * lanes as u64,
            "{report}"
        );
        let (code, items) = decode(&dir, &[]);
        assert_eq!(code, Some(0));
        for port in ["A", "B"] {
            let of_port = |kind: &'static str| {
                items
                    .iter()
                    .filter(move |i| i["tx_port"] == port && (i["kind"] == kind || i["event"] == kind))
            };
            let numbers: BTreeSet<u64> = of_port("packet")
                .map(|p| {
                    assert_eq!(p["crc_ok"], true, "{p}");
                    u64::from_str_radix(p["tl"].as_str().unwrap(), 16).unwrap()
                })
                .collect();
            assert_eq!(numbers, (0..40).collect(), "port {port} lanes {lanes}");
            assert_eq!(
                of_port("packet").count(),
                40,
                "each packet once: no replays on a clean channel"
            );
            for summary in of_port("lane_summary") {
                assert_eq!(summary["errors"], 0, "{summary}");
                assert!(summary["training_sets"].as_u64().unwrap() > 0, "{summary}");
            }
            let last_numbering = of_port("lanes").next_back().unwrap();
            assert_eq!(last_numbering["width"], lanes, "{last_numbering}");
            let backward = reversed && port == "B";
            for n in last_numbering["lane_numbers"].as_array().unwrap() {
                let (lane, number) = (n["lane"].as_u64().unwrap(), n["number"].as_u64().unwrap());
                let expected = if backward { lanes as u64 - 1 - lane } else { lane };
                assert_eq!(number, expected, "port {port}: {last_numbering}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A dump of a FEC link's units that loses one puts every block after it out of step: after three
/// uncorrectable blocks in a row `dl decode --fec` looks for the blocks' start again, and the packets after
/// them check again (without that, none would).
#[test]
fn a_unit_lost_from_a_fec_dump_puts_the_blocks_back_in_step() {
    let dir = temp_dir("fec-lost-unit");
    run_captured(&dir, "--lanes 4 --max-rate 8 --packets 200 --fec");
    let (_, items) = decode(&dir, &["--port", "a"]);
    let stretch = (items.iter())
        .filter(|i| i["event"] == "stretch" && i["rate_gts"] == 8.0)
        .map(|i| i["stretch"].as_u64().unwrap().to_string())
        .next()
        .unwrap();
    let units = common::linkctl(
        &["link", "decode"],
        &[dir.to_str().unwrap(), "--stretch", &stretch, "--units"],
    );
    let mut lines: Vec<&[u8]> = units.stdout.split_inclusive(|&b| b == b'\n').collect();
    assert!(lines.len() > 1200, "{}", lines.len());
    lines.remove(500);
    let dump: Vec<u8> = lines.concat();
    let out = common::linkctl_with_input(&["dl", "decode"], &["--fec", "--tl", "raw", "--json"], &dump);
    assert_eq!(out.status.code(), Some(2), "uncorrectable blocks are errors");
    let read: Vec<Value> = (String::from_utf8(out.stdout).unwrap().lines())
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect();
    let summary = read.iter().find(|i| i["kind"] == "fec").unwrap();
    assert_eq!(summary["realignments"], 1, "{summary}");
    assert_eq!(
        summary["units_skipped_realigning"], 15,
        "the blocks start a unit earlier: {summary}"
    );
    assert_eq!(summary["uncorrectable_blocks"], 3, "{summary}");
    let good: Vec<u64> = (read.iter())
        .filter(|i| i["kind"] == "packet" && i["crc_ok"] == true)
        .map(|i| u64::from_str_radix(i["tl"].as_str().unwrap(), 16).unwrap())
        .collect();
    // Lost: the packets in the three blocks and the units the search left out, and those the decoder
    // discards after them until a control flit shows it where a packet starts, as a data link would (its
    // partner would replay them). Every other checks, once, in order, to the last.
    assert!(
        good.len() >= 150 && good.windows(2).all(|w| w[0] < w[1]),
        "{good:?}"
    );
    assert_eq!(good.last(), Some(&199));
    assert!(read.iter().any(|i| i["kind"] == "discarded"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Edit the capture index's entry for port A's 128b/130b file of `lane` in `dir` with `edit`, which gives
/// the bytes of the file to keep (the range is cut to the file's length).
fn edit_lane_file(dir: &Path, lane: u64, edit: impl FnOnce(&mut Value) -> std::ops::Range<usize>) {
    let mut index = read_index(dir);
    let segment = (index["segments"].as_array_mut().unwrap().iter_mut())
        .find(|s| s["port"] == "A" && s["lane"] == lane && s["code"] == "128b130b")
        .unwrap();
    let keep = edit(segment);
    let file = dir.join(segment["file"].as_str().unwrap());
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[keep.start..keep.end.min(bytes.len())]).unwrap();
    write_index(dir, &index);
}

/// A board's capture may start its lanes' files at different times. Files of one port at one rate that
/// overlap are one stretch, read from the latest start, the bits before it in the earlier files left out
/// (a note says how many): the packets are those of the capture whose lanes started together.
#[test]
fn lanes_whose_files_start_apart_are_read_from_the_latest_start() {
    let dir = temp_dir("late-lane");
    run_captured(&dir, "--lanes 4 --max-rate 8 --packets 60");
    let (code, whole) = decode(&dir, &["--port", "a"]);
    assert_eq!(code, Some(0));
    let packets = |items: &[Value]| -> Vec<(Value, Value)> {
        let packets = items
            .iter()
            .filter(|i| i["kind"] == "packet" && i["crc_ok"] == true);
        packets.map(|p| (p["tl"].clone(), p["crc"].clone())).collect()
    };
    assert_eq!(packets(&whole).len(), 60);
    // Lane 1 starts 1,200 bits (0.15 us) late, lane 3 800 bits late: their files' first bits cut off.
    for (lane, late_bits) in [(1, 1200u64), (3, 800)] {
        edit_lane_file(&dir, lane, |segment| {
            let rate = segment["rate_gts"].as_f64().unwrap();
            segment["start_us"] =
                (segment["start_us"].as_f64().unwrap() + late_bits as f64 / (rate * 1e3)).into();
            segment["bits"] = (segment["bits"].as_u64().unwrap() - late_bits).into();
            late_bits as usize / 8..usize::MAX
        });
    }
    let (code, apart) = decode(&dir, &["--port", "a"]);
    assert_eq!(code, Some(0), "{apart:?}");
    assert_eq!(
        apart.iter().filter(|i| i["event"] == "stretch").count(),
        2,
        "still two stretches"
    );
    let notes: Vec<&Value> = apart.iter().filter(|i| i["event"] == "note").collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(
        notes[0]["skipped_bits"],
        serde_json::json!([{"lane": 0, "bits": 1200}, {"lane": 2, "bits": 1200}, {"lane": 3, "bits": 400}])
    );
    assert_eq!(packets(&apart), packets(&whole));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A board's capture may end its lanes' files at different times. Once a lane of the stream has ended the
/// others cannot be put together, so the reading stops there with a note saying where, instead of
/// overflowing the deskew buffer: the packets read are the first ones of the whole capture, each whole
/// with its CRC checking but the one the end cuts short. A lane out of the stream (left out of a narrower
/// link) that ends early stops nothing.
#[test]
fn a_lane_whose_file_ends_first_ends_the_stream_there() {
    let dir = temp_dir("short-lane");
    run_captured(&dir, "--lanes 4 --max-rate 8 --packets 60");
    let (code, whole) = decode(&dir, &["--port", "a"]);
    assert_eq!(code, Some(0));
    let packets = |items: &[Value]| -> Vec<Value> {
        items
            .iter()
            .filter(|i| i["kind"] == "packet" && i["stretch"] == 1)
            .cloned()
            .collect()
    };
    let whole_packets = packets(&whole);
    assert_eq!(whole_packets.len(), 60);
    let cut_bits = 18_000u64;
    let mut full_bits = 0;
    edit_lane_file(&dir, 2, |segment| {
        full_bits = segment["bits"].as_u64().unwrap();
        segment["bits"] = cut_bits.into();
        0..cut_bits.div_ceil(8) as usize
    });
    assert!(full_bits > cut_bits + 1000, "{full_bits}");
    let (_, cut) = decode(&dir, &["--port", "a"]);
    assert!(!cut.iter().any(|i| i["event"] == "deskew_lost"), "{cut:?}");
    let notes: Vec<&Value> = cut.iter().filter(|i| i["event"] == "note").collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(
        (notes[0]["stretch"].as_u64(), notes[0]["lane"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(notes[0]["lane_bits"], cut_bits);
    // The other lanes went on to the capture's end: less the lane's last word, of up to 64 bits, and the
    // word each other lane read in the turn that found the lane's file at its end.
    let unread = notes[0]["unread_bits"].as_u64().unwrap();
    assert!(
        (full_bits - cut_bits - 128..=full_bits - cut_bits).contains(&unread),
        "{unread} of {full_bits}"
    );
    let cut_packets = packets(&cut);
    assert!(
        cut_packets.len() > 20 && cut_packets.len() < 60,
        "{}",
        cut_packets.len()
    );
    let (last, before) = cut_packets.split_last().unwrap();
    assert_eq!(before, &whole_packets[..before.len()]);
    assert!(
        last == &whole_packets[before.len()] || last["ok"] == false,
        "{last}"
    );
    std::fs::remove_dir_all(&dir).unwrap();

    // Lane 3 dead: the link is x2 on lanes 0 and 1, and lane 2's transmitter stops early.
    let dir = temp_dir("short-unused-lane");
    run_captured(&dir, "--lanes 4 --dead-lane 3 --max-rate 8 --packets 40");
    let index = read_index(&dir);
    let bits = |lane: u64| {
        let segments = index["segments"].as_array().unwrap().iter();
        segments
            .filter(|s| s["port"] == "A" && s["lane"] == lane && s["code"] == "8b10b")
            .map(|s| s["bits"].as_u64().unwrap())
            .next()
    };
    assert!(bits(2) < bits(0), "lane 2 ends first: {index}");
    let (code, items) = decode(&dir, &["--port", "a"]);
    assert_eq!(code, Some(0));
    assert!(!items.iter().any(|i| i["event"] == "note"), "{items:?}");
    assert_eq!(
        items
            .iter()
            .filter(|i| i["kind"] == "packet" && i["ok"] == true)
            .count(),
        40
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A board's capture may not say which lane number each lane carries: at 128b/130b, where the number
/// seeds the lane's descrambler, they are read from the training sets, and the stream is the same.
#[test]
fn lane_numbers_left_out_at_128b130b_are_read_from_training_sets() {
    let dir = temp_dir("numbers");
    run_captured(&dir, "--lanes 2 --max-rate 8 --reversed --packets 20 --both-ways");
    let (code, with_numbers) = decode(&dir, &[]);
    assert_eq!(code, Some(0));
    let mut index = read_index(&dir);
    for s in index["segments"].as_array_mut().unwrap() {
        s["lane_number"] = Value::Null;
    }
    write_index(&dir, &index);
    let (code, without) = decode(&dir, &[]);
    assert_eq!(code, Some(0));
    let notes: Vec<&Value> = without.iter().filter(|i| i["event"] == "note").collect();
    assert_eq!(notes.len(), 2, "one per 8 GT/s stretch: {notes:?}");
    let rest: Vec<&Value> = without.iter().filter(|i| i["event"] != "note").collect();
    assert_eq!(rest, with_numbers.iter().collect::<Vec<_>>());
    assert_eq!(with_numbers.iter().filter(|i| i["kind"] == "packet").count(), 40);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A retrain in the middle of the traffic (the same rate, so the same stretch): the packet it cuts short
/// is shown as cut by the link leaving L0, which is no damage (exit status 0), and the stream starts over
/// when the link is back, where the data link replays it: every packet is there whole.
#[test]
fn a_retrain_restarts_the_stream() {
    let dir = temp_dir("retrain");
    run_captured(&dir, "--lanes 2 --max-rate 8 --packets 300 --retrain-at 1");
    let (code, items) = decode(&dir, &["--port", "a"]);
    assert_eq!(code, Some(0));
    let cut: Vec<&Value> = items.iter().filter(|i| i["left_l0"] == true).collect();
    assert_eq!(cut.len(), 1, "{cut:?}");
    let whole: BTreeSet<u64> = items
        .iter()
        .filter(|i| i["kind"] == "packet" && i["crc_ok"] == true)
        .map(|p| u64::from_str_radix(p["tl"].as_str().unwrap(), 16).unwrap())
        .collect();
    assert_eq!(whole, (0..300).collect());
    assert!(
        items
            .iter()
            .any(|i| i["event"] == "lane_summary" && i["sds"] == 2),
        "two starts of data"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--lane-events` prints each lane's ordered sets in order, a run of the same one as one line: their
/// counts add up to the lane's summary, and the training sets carry the lane's number.
#[test]
fn lane_events_add_up_to_the_summary() {
    let dir = temp_dir("lane-events");
    run_captured(&dir, "--lanes 2 --max-rate 5 --reversed --packets 5");
    let (code, items) = decode(&dir, &["--lane-events", "--port", "b"]);
    assert_eq!(code, Some(0));
    for summary in items.iter().filter(|i| i["event"] == "lane_summary") {
        let lane = summary["lane"].as_u64().unwrap();
        let of_lane = |kind: &'static str| {
            items
                .iter()
                .filter(move |i| {
                    i["event"] == "lane" && i["lane"] == lane && i["stretch"] == summary["stretch"]
                })
                .filter(move |i| i["lane_event"] == kind)
        };
        let count = |kind| of_lane(kind).map(|i| i["count"].as_u64().unwrap()).sum::<u64>();
        assert_eq!(
            count("training_set"),
            summary["training_sets"].as_u64().unwrap(),
            "{summary}"
        );
        assert_eq!(count("skp"), summary["skp"].as_u64().unwrap(), "{summary}");
        // On the reversed link B's physical lane l is logical lane 1 - l.
        assert!(
            of_lane("training_set").any(|i| i["training_set"]["lane"] == 1 - lane),
            "lane {lane}: {summary}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The README's example of `link decode` prints what the README shows, line for line (the lines it cuts
/// aside).
#[test]
fn the_readmes_example_is_what_it_prints() {
    let readme = include_str!("../../README.md");
    let example = readme
        .split("prints (the middle cut here) what port A sent at 8 GT/s after the speed change:\n\n```text\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README's example");
    let dir = temp_dir("readme");
    let d = dir.to_str().unwrap();
    let run = "--lanes 4 --max-rate 8 --packets 100 --capture".split(' ');
    let out = common::linkctl(&["link", "run"], &run.chain([d]).collect::<Vec<_>>());
    assert!(out.status.success());
    let out = common::linkctl(&["link", "decode"], &[d, "--port", "a", "--stretch", "1"]);
    assert_eq!(out.status.code(), Some(0));
    let printed = String::from_utf8(out.stdout).unwrap();
    let mut lines = printed.lines();
    for shown in example.lines().filter(|l| *l != "...") {
        assert!(
            lines.any(|l| l == shown),
            "not printed in this order: {shown}\n{printed}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--units` prints the stream `dl decode` reads: the two agree on every packet and flit.
#[test]
fn units_are_the_stream_dl_decode_reads() {
    let dir = temp_dir("units");
    run_captured(&dir, "--lanes 2 --max-rate 8 --packets 10");
    // Stretch 1: port A at 8 GT/s, where the packets are.
    let direct = common::linkctl(
        &["link", "decode"],
        &[dir.to_str().unwrap(), "--stretch", "1", "--tl", "transaction"],
    );
    let units = common::linkctl(
        &["link", "decode"],
        &[dir.to_str().unwrap(), "--stretch", "1", "--units"],
    );
    assert!(String::from_utf8_lossy(&units.stderr).contains("port A, stretch 1: 8 GT/s 128b130b"));
    let via_dl = common::linkctl_with_input(&["dl", "decode"], &[], &units.stdout);
    let items = |out: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(out)
            .lines()
            .filter(|l| l.starts_with(' '))
            .map(str::to_owned)
            .collect()
    };
    let direct = items(&direct.stdout);
    assert_eq!(
        direct.iter().filter(|l| l.contains("packet")).count(),
        10,
        "{direct:?}"
    );
    assert_eq!(direct, items(&via_dl.stdout));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Bits flipped in a lane's file are found: a receiver error on the lane or a packet that does not check,
/// and exit status 2.
#[test]
fn damage_in_a_capture_is_found() {
    let dir = temp_dir("damage");
    run_captured(&dir, "--lanes 2 --max-rate 8 --packets 200");
    spoil_four_bytes(&dir.join("a-lane1-1.bin"), 2);
    let (code, items) = decode(&dir, &["--port", "a"]);
    assert_eq!(code, Some(2));
    assert!(
        items
            .iter()
            .any(|i| i["ok"] == false || i["event"] == "lane_error"),
        "{items:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Files of random bits under a valid index, at either line code, with or without lane numbers, with or
/// without FEC blocks: read to the end without a panic, exit status 0 or 2 (the same with `--summary`), and
/// nothing on stderr.
#[test]
fn random_bits_in_the_files_end_cleanly() {
    let dir = temp_dir("random");
    run_captured(&dir, "--lanes 2 --max-rate 8 --packets 5");
    let index = read_index(&dir);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for round in 0..4 {
        let mut edited = index.clone();
        // Half the rounds read the stream in FEC blocks.
        edited["fec"] = (round >= 2).into();
        for s in edited["segments"].as_array_mut().unwrap() {
            let bits = s["bits"].as_u64().unwrap().min(40_000);
            s["bits"] = bits.into();
            if round % 2 == 1 {
                s["lane_number"] = Value::Null;
            }
            let bytes: Vec<u8> = (0..bits.div_ceil(8))
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            std::fs::write(dir.join(s["file"].as_str().unwrap()), bytes).unwrap();
        }
        write_index(&dir, &edited);
        let (code, items) = decode(&dir, &[]);
        assert!(matches!(code, Some(0 | 2)), "round {round}: {code:?}");
        assert!(items.iter().any(|i| i["event"] == "stream"), "round {round}");
        // Counted instead, the same exit status.
        let (summary_code, summary) = decode(&dir, &["--summary"]);
        assert_eq!(summary_code, code, "round {round}");
        assert!(
            summary.iter().any(|i| i["event"] == "data_summary"),
            "round {round}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_capture_is_refused() {
    let dir = temp_dir("bad");
    run_captured(&dir, "--lanes 1 --max-rate 2.5 --packets 2");
    let d = dir.to_str().unwrap();
    let decode = ["link", "decode"];
    common::assert_refused_saying(&decode, &[d, "--port", "c"], "--port must be a or b");
    common::assert_refused_saying(&decode, &[d, "--stretch", "9"], "--stretch 9: the capture has 2");
    common::assert_refused_saying(&decode, &[d, "--units", "--json"], "cannot be used with");
    common::assert_refused_saying(
        &decode,
        &[d, "--pcap", "/dev/stdout"],
        "--pcap names standard output",
    );
    common::assert_refused_saying(&decode, &[d, "--pcap-limit", "3"], "--pcap");
    let index = read_index(&dir);
    let segment = |edit: &dyn Fn(&mut Value)| {
        let mut v = index.clone();
        edit(&mut v["segments"][0]);
        write_index(&dir, &v);
    };
    for (edit, says) in [
        (
            &(|s: &mut Value| s["file"] = "../a-lane0-0.bin".into()) as &dyn Fn(&mut Value),
            "must name a file",
        ),
        (
            &|s: &mut Value| s["lane"] = 99.into(),
            "\"lane\" must be a lane number below 16",
        ),
        (
            &|s: &mut Value| s["lane_number"] = "x".into(),
            "\"lane_number\" must be null",
        ),
        (&|s: &mut Value| s["code"] = "9b11b".into(), "\"code\" must be"),
        (&|s: &mut Value| s["port"] = "C".into(), "\"port\" must be"),
        (
            &|s: &mut Value| s["bits"] = (s["bits"].as_u64().unwrap() + 64).into(),
            "bits short of what capture.json says",
        ),
    ] {
        segment(edit);
        common::assert_refused_saying(&decode, &[d], says);
    }
    let mut twice = index.clone();
    let twin = twice["segments"][0].clone();
    twice["segments"].as_array_mut().unwrap().push(twin);
    write_index(&dir, &twice);
    common::assert_refused_saying(&decode, &[d], "lane 0 has two files at once");
    let index_path = dir.join("capture.json");
    std::fs::write(&index_path, "{").unwrap();
    common::assert_refused_saying(&decode, &[d], "is not JSON");
    std::fs::remove_file(&index_path).unwrap();
    common::assert_refused_saying(&decode, &[d], "opening");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--pcap` writes what the receivers read as a trace (section 7): port A's packets and control flits
/// from node 0, port B's from node 1, a record per packet the decoder read (CRC checking, the same
/// header) and per control or identity flit but the initialisation flits that repeat, in time order
/// within the stretches' times, the layout byte as `--tl` says; tshark with the dissector reads each
/// port's packet numbers back.
#[test]
fn a_decoded_capture_is_written_as_a_trace() {
    use fabric_sim::trace::{read, TlLayout, RECORD_PACKET};
    use link_dl::flit::{check_packet_crc, PacketHeader};
    let dir = temp_dir("pcap");
    run_captured(&dir, "--lanes 4 --max-rate 8 --packets 40 --both-ways");
    let pcap = std::env::temp_dir().join(format!("linkctl-decode-{}.pcap", std::process::id()));
    let (code, items) = decode(&dir, &["--pcap", pcap.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    let records = read(&std::fs::read(&pcap).unwrap()).unwrap();
    let summary = items.iter().find(|i| i["event"] == "trace").unwrap();
    assert_eq!(summary["records"], records.len());
    assert_eq!(summary["dropped"], 0);
    assert!(records.windows(2).all(|w| w[0].ns <= w[1].ns), "time order");
    assert!(records.iter().all(|r| r.pseudo_header[10] == TlLayout::Raw as u8));
    let stretches: Vec<&Value> = items.iter().filter(|i| i["event"] == "stretch").collect();
    let mut numbers = Vec::new();
    for (node, port) in [(0u16, "A"), (1, "B")] {
        let packets: Vec<&Value> = (items.iter())
            .filter(|i| i["tx_port"] == port && i["kind"] == "packet")
            .collect();
        let of_node: Vec<_> = records.iter().filter(|r| r.from_node() == node).collect();
        let recorded: Vec<_> = (of_node.iter())
            .filter(|r| r.pseudo_header[1] == RECORD_PACKET)
            .collect();
        assert_eq!(recorded.len(), packets.len(), "port {port}");
        for (r, p) in recorded.iter().zip(&packets) {
            check_packet_crc(&r.bytes).unwrap();
            let header = PacketHeader::parse(r.bytes[..16].try_into().unwrap()).unwrap();
            assert_eq!(Ok(header.tl), u64::from_str_radix(p["tl"].as_str().unwrap(), 16));
            assert_eq!(u64::from(header.seq.get()), p["seq"].as_u64().unwrap());
        }
        numbers.push(
            recorded
                .iter()
                .map(|r| PacketHeader::parse(r.bytes[..16].try_into().unwrap()).unwrap().tl)
                .collect::<Vec<u64>>(),
        );
        // Within the port's stretches.
        let (start, end) =
            (stretches.iter())
                .filter(|s| s["tx_port"] == port)
                .fold((f64::MAX, 0.0f64), |(a, b), s| {
                    (
                        a.min(s["start_us"].as_f64().unwrap()),
                        b.max(s["end_us"].as_f64().unwrap()),
                    )
                });
        assert!(of_node
            .iter()
            .all(|r| (start * 1e3..=end * 1e3).contains(&(r.ns as f64))));
    }
    let flits = (items.iter())
        .filter(|i| i["kind"] == "control" || i["kind"] == "ident")
        .count() as u64;
    let control_records = records
        .iter()
        .filter(|r| r.pseudo_header[1] != RECORD_PACKET)
        .count() as u64;
    assert_eq!(control_records + summary["init_repeats"].as_u64().unwrap(), flits);
    // The layout follows --tl.
    for (tl, layout) in [
        ("transaction", TlLayout::Transaction),
        ("sim", TlLayout::Simulator),
    ] {
        let (_, _) = decode(
            &dir,
            &["--port", "a", "--tl", tl, "--pcap", pcap.to_str().unwrap()],
        );
        let records = read(&std::fs::read(&pcap).unwrap()).unwrap();
        assert!(records
            .iter()
            .all(|r| r.pseudo_header[10] == layout as u8 && r.from_node() == 0));
    }
    if common::tshark_available() {
        decode(&dir, &["--pcap", pcap.to_str().unwrap()]);
        let rows = common::tshark_fields(&pcap, &["openlink.from_node", "openlink.tl.number"]);
        for (node, sent) in numbers.iter().enumerate() {
            let read: Vec<u64> = (rows.iter())
                .filter(|r| r[0] == node.to_string() && !r[1].is_empty())
                .map(|r| r[1].parse().unwrap())
                .collect();
            assert_eq!(&read, sent, "node {node}");
            assert_eq!(read, (0..40).collect::<Vec<u64>>(), "node {node}");
        }
    }
    std::fs::remove_file(&pcap).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `link run` of `packets` captured at 8 GT/s on x2, a byte in every `step` of lane file `file`'s middle
/// (all but the first and last `1 / part` of it) xored with `xor`, decoded at port A with a trace: the
/// capture's directory, the trace's path, the items printed (exit status 2) and the trace's records.
fn damaged_capture_traced(
    name: &str,
    packets: u32,
    file: &str,
    (part, step, xor): (usize, usize, u8),
) -> (PathBuf, PathBuf, Vec<Value>, Vec<fabric_sim::trace::Record>) {
    let dir = temp_dir(name);
    run_captured(&dir, &format!("--lanes 2 --max-rate 8 --packets {packets}"));
    let file = dir.join(file);
    let mut bytes = std::fs::read(&file).unwrap();
    let len = bytes.len();
    for at in (len / part..len - len / part).step_by(step) {
        bytes[at] ^= xor;
    }
    std::fs::write(&file, bytes).unwrap();
    let pcap = std::env::temp_dir().join(format!("linkctl-decode-{name}-{}.pcap", std::process::id()));
    let (code, items) = decode(&dir, &["--port", "a", "--pcap", pcap.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    let records = fabric_sim::trace::read(&std::fs::read(&pcap).unwrap()).unwrap();
    (dir, pcap, items, records)
}

/// A capture with bits flipped on a lane makes a trace with packets whose CRC fails, recorded as read;
/// the dissector's CRC check agrees with the data link's on every record.
#[test]
fn the_dissector_checks_each_records_crc_as_the_data_link_does() {
    let (dir, pcap, _, records) = damaged_capture_traced("pcap-damage", 200, "a-lane1-1.bin", (4, 997, 0x10));
    let good: Vec<bool> = (records.iter())
        .filter(|r| r.pseudo_header[1] != fabric_sim::trace::RECORD_DISCARDED)
        .map(|r| link_dl::flit::check_packet_crc(&r.bytes).is_ok())
        .collect();
    assert!(
        good.iter().any(|&g| !g) && good.iter().filter(|&&g| g).count() > 100,
        "{good:?}"
    );
    if common::tshark_available() {
        let rows = common::tshark_fields(&pcap, &["openlink.crc.status"]);
        let read: Vec<bool> = rows
            .iter()
            .filter(|r| !r[0].is_empty())
            .map(|r| r[0] == "1")
            .collect();
        assert_eq!(read, good);
    }
    std::fs::remove_file(&pcap).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The trace of a damaged capture frames the stream as the data link, and the decoder, frame it
/// (docs/spec.md 2.4): its packet records are the decoder's packets, one for one, with the same CRC
/// verdicts, and after a packet whose CRC does not check the units up to a control flit that checks are
/// records of discarded units. Every unit of the stream but idle is in one record, in order, but for the
/// initialisation flits the trace counts as repeats.
#[test]
fn a_damaged_captures_trace_frames_packets_as_the_data_link_does() {
    use fabric_sim::trace::{RECORD_CONTROL, RECORD_DISCARDED, RECORD_PACKET};
    let (dir, pcap, items, records) =
        damaged_capture_traced("pcap-framing", 300, "a-lane0-1.bin", (5, 331, 0x42));
    let kinds = |record: u8| records.iter().filter(move |r| r.pseudo_header[1] == record);
    let packets: Vec<&Value> = items.iter().filter(|i| i["kind"] == "packet").collect();
    let recorded: Vec<_> = kinds(RECORD_PACKET).collect();
    assert_eq!(recorded.len(), packets.len());
    for (r, p) in recorded.iter().zip(&packets) {
        assert_eq!(r.bytes.len() as u64, 16 * p["flits"].as_u64().unwrap());
        let crc_ok = link_dl::flit::check_packet_crc(&r.bytes).is_ok();
        assert_eq!(crc_ok, p["crc_ok"] == true, "{p}");
    }
    assert!(
        packets.iter().any(|p| p["crc_ok"] == false),
        "the damage reaches packets"
    );
    let discarded_units: usize = kinds(RECORD_DISCARDED).map(|r| r.bytes.len() / 16).sum();
    assert!(discarded_units > 0);
    // Every unit but idle, in order, less the initialisation flits counted as repeats.
    let out = common::linkctl(
        &["link", "decode"],
        &[dir.to_str().unwrap(), "--port", "a", "--units"],
    );
    let stream: Vec<Vec<u8>> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            (0..16)
                .map(|i| u8::from_str_radix(&l[2 * i..2 * i + 2], 16).unwrap())
                .collect()
        })
        .filter(|u: &Vec<u8>| u.iter().any(|&b| b != 0))
        .collect();
    let traced: Vec<&[u8]> = records.iter().flat_map(|r| r.bytes.chunks_exact(16)).collect();
    let summary = items.iter().find(|i| i["event"] == "trace").unwrap();
    let repeats = summary["init_repeats"].as_u64().unwrap() as usize;
    assert_eq!(stream.len(), traced.len() + repeats);
    let mut left = traced.iter().peekable();
    for unit in &stream {
        if left.peek().is_some_and(|t| **t == unit.as_slice()) {
            left.next();
        } else {
            let init =
                link_dl::flit::ControlFlit::parse(unit.as_slice().try_into().unwrap()).is_ok_and(|c| {
                    matches!(
                        c.kind,
                        link_dl::flit::ControlKind::InitFc1 | link_dl::flit::ControlKind::InitFc2
                    )
                }) || link_dl::flit::IdentFlit::parse(unit.as_slice().try_into().unwrap()).is_ok();
            assert!(init, "a unit not traced: {unit:02x?}");
        }
    }
    assert!(left.next().is_none());
    assert!(kinds(RECORD_CONTROL).count() > 0);
    if common::tshark_available() {
        let rows = common::tshark_fields(&pcap, &["openlink.record", "openlink.discarded.units"]);
        let read: usize = (rows.iter())
            .filter(|r| r[0] == RECORD_DISCARDED.to_string())
            .map(|r| r[1].parse::<usize>().unwrap())
            .sum();
        assert_eq!(read, discarded_units);
    }
    // dl decode reads the trace's discarded records as the decoder's discarded runs.
    let out = common::linkctl(&["dl", "decode"], &["--pcap", pcap.to_str().unwrap(), "--json"]);
    let read: usize = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|i| i["kind"] == "discarded")
        .map(|i| i["units"].as_u64().unwrap() as usize)
        .sum();
    assert_eq!(read, discarded_units);
    std::fs::remove_file(&pcap).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A capture of a link running FEC (`link run --fec`, `capture.json`'s `fec`) is read in FEC blocks: every
/// packet found, its CRC checking; a burst on one lane inside a block is corrected by the code and every
/// packet still checks; read without the blocks (the index's `fec` false) the check units break the
/// stream; and the stream's units through `dl decode --fec` give the same packets.
#[test]
fn a_fec_capture_is_read_in_blocks_and_a_lanes_burst_corrected() {
    let dir = temp_dir("fec");
    let report = run_captured(&dir, "--lanes 4 --max-rate 8 --packets 60 --fec");
    assert_eq!(report["packets_delivered"], 60, "{report}");
    assert_eq!(read_index(&dir)["fec"], true);
    let numbers = |items: &[Value]| -> Vec<u64> {
        (items.iter())
            .filter(|i| i["tx_port"] == "A" && i["kind"] == "packet" && i["crc_ok"] == true)
            .map(|i| u64::from_str_radix(i["tl"].as_str().unwrap(), 16).unwrap())
            .collect()
    };
    let fec = |items: &[Value]| -> Value {
        (items.iter())
            .filter(|i| i["tx_port"] == "A" && i["event"] == "fec")
            .fold(
                serde_json::json!({"blocks": 0, "corrected_bytes": 0}),
                |mut sum, f| {
                    for key in ["blocks", "corrected_bytes"] {
                        sum[key] = (sum[key].as_u64().unwrap() + f[key].as_u64().unwrap()).into();
                    }
                    sum
                },
            )
    };
    let (code, items) = decode(&dir, &["--port", "a"]);
    assert_eq!(code, Some(0));
    assert_eq!(numbers(&items), (0..60).collect::<Vec<u64>>());
    assert!(fec(&items)["blocks"].as_u64().unwrap() > 30, "{}", fec(&items));
    assert_eq!(fec(&items)["corrected_bytes"], 0);
    // The units as dl decode --fec reads them.
    let stretch = (items.iter())
        .filter(|i| i["event"] == "stretch" && i["rate_gts"] == 8.0)
        .map(|i| i["stretch"].as_u64().unwrap().to_string())
        .next()
        .unwrap();
    let units = common::linkctl(
        &["link", "decode"],
        &[dir.to_str().unwrap(), "--stretch", &stretch, "--units"],
    );
    let dl_args = ["--fec", "--tl", "raw", "--json"];
    // Started 5 units into a block, as a board's dump may be, dl decode finds where the blocks start.
    let late: Vec<u8> = (units.stdout.split_inclusive(|&b| b == b'\n').skip(5))
        .flatten()
        .copied()
        .collect();
    let out = common::linkctl_with_input(&["dl", "decode"], &dl_args, &late);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(summary["kind"], "fec");
    assert_eq!(summary["units_before_first_block"], 11, "{summary}");
    let packets = (String::from_utf8_lossy(&out.stdout).lines())
        .filter(|l| l.contains("\"kind\":\"packet\"") && l.contains("\"crc_ok\":true"))
        .count();
    assert_eq!(packets, 60, "every packet, the first block being idle");
    let out = common::linkctl_with_input(&["dl", "decode"], &dl_args, &units.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: Vec<Value> = (String::from_utf8(out.stdout).unwrap().lines())
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect();
    assert!(read.iter().all(|i| i["ok"] == true), "{read:?}");
    let summary = read.iter().find(|i| i["kind"] == "fec").unwrap();
    let in_stretch = (items.iter())
        .find(|i| {
            i["event"] == "fec" && i["stretch"].as_u64().map(|n| n.to_string()) == Some(stretch.clone())
        })
        .unwrap();
    assert_eq!(summary["blocks"], in_stretch["blocks"]);
    let read: Vec<u64> = (read.iter())
        .filter(|i| i["kind"] == "packet" && i["crc_ok"] == true)
        .map(|i| u64::from_str_radix(i["tl"].as_str().unwrap(), 16).unwrap())
        .collect();
    assert_eq!(read, (0..60).collect::<Vec<u64>>());
    // Eight bits of one lane flipped inside a 128b/130b block's payload, two fifths into the stretch.
    let file = dir.join("a-lane1-1.bin");
    let mut bytes = std::fs::read(&file).unwrap();
    let bit = 130 * (bytes.len() * 8 * 2 / 5 / 130) + 20;
    for b in bit..bit + 8 {
        bytes[b / 8] ^= 1 << (b % 8);
    }
    std::fs::write(&file, &bytes).unwrap();
    let (code, items) = decode(&dir, &["--port", "a"]);
    assert_eq!(code, Some(0), "{items:?}");
    assert_eq!(numbers(&items), (0..60).collect::<Vec<u64>>());
    assert!(
        fec(&items)["corrected_bytes"].as_u64().unwrap() >= 1,
        "{}",
        fec(&items)
    );
    // Without the blocks, the check units are read as flits.
    let mut index = read_index(&dir);
    index["fec"] = false.into();
    write_index(&dir, &index);
    let (code, _) = decode(&dir, &["--port", "a"]);
    assert_eq!(code, Some(2));
    // --fec reads them in blocks whatever the index says.
    let (code, items) = decode(&dir, &["--port", "a", "--fec"]);
    assert_eq!(code, Some(0));
    assert_eq!(numbers(&items), (0..60).collect::<Vec<u64>>());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--summary` counts each stretch's data items as the item-by-item output prints them, a `data_summary`
/// per stretch, and the exit status is the same: on a capture with a retrain (a packet cut short as the
/// link left L0, counted apart and not damage) and bytes of one lane's file spoilt.
#[test]
fn a_summary_counts_each_stretchs_items() {
    let dir = temp_dir("summary");
    run_captured(&dir, "--lanes 2 --max-rate 8 --packets 300 --retrain-at 1");
    spoil_four_bytes(&dir.join("a-lane1-1.bin"), 3);
    let (code, items) = decode(&dir, &[]);
    let (summary_code, summary) = decode(&dir, &["--summary"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, Some(2));
    assert_eq!(summary_code, code);
    let data = |i: &Value| i.get("kind").is_some();
    assert!(!summary.iter().any(data), "no item printed one by one");
    let stretches: Vec<&Value> = items.iter().filter(|i| i["event"] == "stretch").collect();
    let summaries: Vec<&Value> = summary.iter().filter(|i| i["event"] == "data_summary").collect();
    assert_eq!(summaries.len(), stretches.len());
    let mut left_l0 = 0;
    for s in summaries {
        let mine: Vec<&Value> = (items.iter())
            .filter(|i| data(i) && i["stretch"] == s["stretch"] && i["tx_port"] == s["tx_port"])
            .collect();
        let count = |f: &dyn Fn(&Value) -> bool| mine.iter().filter(|i| f(i)).count() as u64;
        let sum = |kind: &str| -> u64 {
            (mine.iter())
                .filter(|i| i["kind"] == kind)
                .map(|i| i["units"].as_u64().unwrap())
                .sum()
        };
        let cut = count(&|i| i["left_l0"] == true);
        let packet = |i: &Value| i["kind"] == "packet" && i["left_l0"] != true;
        assert_eq!(s["left_l0"], cut, "{s}");
        assert_eq!(s["packets"], count(&packet), "{s}");
        assert_eq!(s["bad_crc"], count(&|i| packet(i) && i["crc_ok"] == false), "{s}");
        assert_eq!(s["control_flits"], count(&|i| i["kind"] == "control"), "{s}");
        assert_eq!(s["malformed"], count(&|i| i["kind"] == "malformed"), "{s}");
        assert_eq!(s["discarded_units"], sum("discarded"), "{s}");
        assert_eq!(s["idle_units"], sum("idle"), "{s}");
        assert_eq!(
            s["ok"],
            mine.iter().all(|i| i["ok"] == true || i["left_l0"] == true),
            "{s}"
        );
        left_l0 += cut;
    }
    assert!(left_l0 > 0, "the retrain cut a packet short");
    assert!(
        summary
            .iter()
            .any(|i| i["event"] == "data_summary" && i["ok"] == false),
        "the spoilt bytes show"
    );
}
