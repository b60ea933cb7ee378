//! The worked examples of docs/spec.md sections 4 and 5: the flow hash and a flow off a failed port, the
//! register writes, and the identity registers.

use switch_fw::identity::PortPeer;
use switch_fw::reduce::Element;
use switch_fw::route::{Flow, RouteTable};
use switch_fw::switch::{Arrival, Destination, Forward, Switch};
use switch_fw::PortSet;

fn spec() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/spec.md")).unwrap()
}

#[test]
fn flow_hash_of_section_4() {
    assert!(spec().contains(
        "give `hash = 5581AC37h`; over the ports {4, 5, 6, 7}, `5581AC37h mod 4 = 3` picks port 7"
    ));
    let flow = Flow {
        source: 3,
        destination: 7,
        vc: 1,
    };
    assert_eq!(flow.hash(), 0x5581_AC37);
    let mut table = RouteTable::default();
    table.set(7, PortSet(0b1111_0000)).unwrap();
    assert_eq!(table.select(flow), Ok(7));
}

#[test]
fn flow_off_a_failed_port_of_section_4() {
    assert!(spec().contains("failed, the flow takes port number `5581AC37h mod 3 = 0` of {4, 5, 6}, port 4"));
    let mut s: Switch<8, 64> = Switch::new();
    s.routes.set(7, PortSet(0b1111_0000)).unwrap();
    s.set_port_down(7, true);
    let packet = Arrival {
        handle: 1,
        vc: 1,
        flits: 9,
        destination: Destination::Unicast(7),
        source: Some(3),
    };
    assert_eq!(s.ingress(0, packet), Ok(1));
    let mut out: heapless::Vec<Forward, 8> = heapless::Vec::new();
    s.arbitrate(|_, _| true, &mut out);
    assert_eq!(out.iter().map(|f| f.output).collect::<Vec<_>>(), [4]);
}

/// The table of one of section 5's worked examples, found by its header: (address, value) per row.
fn table_in_spec(header: &str) -> Vec<(u32, u32)> {
    let spec = spec();
    let start = spec.find(header).expect("the example's table");
    spec[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<u32> = l
                .split('|')
                .map(|c| c.trim().trim_matches('`').trim_end_matches('h').replace('_', ""))
                .filter(|c| !c.is_empty())
                .map(|c| u32::from_str_radix(&c, 16).unwrap())
                .collect();
            (cells[0], cells[1])
        })
        .collect()
}

#[test]
fn registers_of_section_5() {
    let writes = table_in_spec("| address | value |");
    assert_eq!(writes.len(), 8);
    let mut s: Switch<64, 64> = Switch::new();
    for &(address, value) in &writes {
        s.write_register(address, value).unwrap();
    }
    assert_eq!(s.routes.get(5), PortSet(1 << 3 | 1 << 40));
    assert_eq!(s.partitions.of(5), Some(2));
    assert_eq!(s.multicast.get(1), Ok(PortSet(0b111)));
    let group = s.reducer.get(0).expect("reduction group 0 committed");
    assert_eq!(
        (group.contributors, group.result_group, group.element),
        (PortSet(0b1111), 1, Element::U32)
    );
    for &(address, value) in &writes {
        assert_eq!(
            s.read_register(address),
            Ok(value),
            "register {address:#x} reads back"
        );
    }
    assert_eq!(s.read_register(0x0004_0000), Ok(64));
    assert!(s.write_register(0x0000_0002, 1).is_err(), "unaligned");
    assert!(s.write_register(0x0003_0008, 3 << 16).is_err(), "element code 3");
}

#[test]
fn identity_registers_of_section_5() {
    let reads = table_in_spec("| address | reads |");
    assert_eq!(reads.len(), 7);
    let mut s: Switch<64, 64> = Switch::new();
    s.identity.node = 0x0123_4567_89AB_CDEF;
    let peer = PortPeer {
        node: 0xFEDC_BA98_7654_3210,
        port: 17,
        links: 5,
        mbps: 5 * 25_000,
    };
    s.identity.set_peer(2, Some(peer)).unwrap();
    for &(address, value) in &reads {
        assert_eq!(s.read_register(address), Ok(value), "register {address:#x}");
        assert!(
            s.write_register(address, value).is_err(),
            "{address:#x} is read only"
        );
    }
    // Port 1's link is down; port 64 is not in the map.
    assert_eq!(s.read_register(0x0005_0018), Ok(0));
    assert!(s.read_register(0x0005_0000 + 16 * 64).is_err());
}
