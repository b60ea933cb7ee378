//! The ordering rules of spec section 3.6, enforced by the transmit queue over a link whose credit per
//! channel the test controls.

use link_dl::flit::Flit;
use link_dl::{DlError, Vc};
use link_tl::header::{CompletionHeader, Status};
use link_tl::ordering::{Egress, LinkTx};
use link_tl::packet::{Completion, Packet, Read, RequestId};
use link_tl::{TlError, Tlp};

/// A link that accepts packets on a channel only while the test says it has credit, and records them.
#[derive(Default)]
struct Link {
    open: [bool; 4],
    sent: Vec<(Vc, u64)>,
}

impl LinkTx for Link {
    fn can_send(&self, vc: Vc, _payload_flits: usize) -> bool {
        self.open[vc.index()]
    }

    fn send(&mut self, vc: Vc, tl: u64, _payload: &[Flit]) -> Result<(), DlError> {
        if !self.open[vc.index()] {
            return Err(DlError::NoCredit {
                vc,
                needed: 1,
                available: 0,
            });
        }
        self.sent.push((vc, tl));
        Ok(())
    }
}

fn write(dest: u16, addr: u64) -> Packet {
    let mut p = Packet::new();
    p.posted_write(dest, addr, &[1; 64]).unwrap();
    p
}

fn read(dest: u16, tag: u16) -> Packet {
    let mut p = Packet::new();
    let id = RequestId { requester: 9, tag };
    Tlp::Read(Read {
        dest,
        addr: 0,
        len: 64,
        id,
    })
    .emit(&mut p)
    .unwrap();
    p
}

fn completion(to: u16, tag: u16) -> Packet {
    let mut p = Packet::new();
    let header = CompletionHeader {
        requester: to,
        completer: 9,
        tag,
        status: Status::Success,
        offset: 0,
        len: 0,
    };
    Tlp::Completion(Completion { header, data: &[] })
        .emit(&mut p)
        .unwrap();
    p
}

fn all_open() -> Link {
    Link {
        open: [true; 4],
        sent: Vec::new(),
    }
}

#[test]
fn with_credit_everywhere_packets_leave_in_the_order_queued() {
    let mut q = Egress::<8>::new();
    let packets = [
        write(1, 0),
        read(1, 0),
        completion(2, 5),
        write(2, 0x80),
        read(3, 1),
        write(1, 0x100),
    ];
    for p in &packets {
        q.push(p.clone()).unwrap();
    }
    let mut link = all_open();
    assert_eq!(q.pump(&mut link), packets.len());
    let expected: Vec<(Vc, u64)> = packets.iter().map(|p| (p.vc(), p.tl())).collect();
    assert_eq!(link.sent, expected);
    assert!(q.is_empty());
}

#[test]
fn posted_writes_stay_in_order() {
    let mut q = Egress::<8>::new();
    let writes: Vec<Packet> = (0..6).map(|i| write(1 + i % 2, 0x80 * i as u64)).collect();
    for w in &writes {
        q.push(w.clone()).unwrap();
    }
    let mut link = Link::default();
    assert_eq!(q.pump(&mut link), 0);
    link.open[Vc::Posted.index()] = true;
    assert_eq!(q.pump(&mut link), 6);
    let tls: Vec<u64> = link.sent.iter().map(|&(_, tl)| tl).collect();
    assert_eq!(tls, writes.iter().map(Packet::tl).collect::<Vec<_>>());
}

#[test]
fn a_read_does_not_pass_an_earlier_posted_write_to_the_same_destination() {
    let mut q = Egress::<8>::new();
    q.push(write(1, 0)).unwrap();
    q.push(read(1, 0)).unwrap();
    // Requests have credit, posted writes do not: the read waits behind the write.
    let mut link = Link::default();
    link.open[Vc::Request.index()] = true;
    assert_eq!(q.pump(&mut link), 0);
    assert!(!q.may_send(Vc::Request));
    assert!(q.counters().held_for_order > 0);
    link.open[Vc::Posted.index()] = true;
    assert_eq!(q.pump(&mut link), 2);
    assert_eq!(
        link.sent,
        [(Vc::Posted, write(1, 0).tl()), (Vc::Request, read(1, 0).tl())]
    );
}

#[test]
fn a_read_to_another_destination_may_pass_a_waiting_posted_write() {
    let mut q = Egress::<8>::new();
    q.push(write(1, 0)).unwrap();
    q.push(read(2, 1)).unwrap();
    let mut link = Link::default();
    link.open[Vc::Request.index()] = true;
    assert_eq!(q.pump(&mut link), 1);
    assert_eq!(link.sent, [(Vc::Request, read(2, 1).tl())]);
    assert_eq!(q.queued(Vc::Posted), 1);
}

#[test]
fn completions_do_not_pass_posted_writes_to_the_same_destination() {
    let mut q = Egress::<8>::new();
    q.push(write(7, 0)).unwrap();
    q.push(completion(7, 3)).unwrap();
    let mut link = Link::default();
    link.open[Vc::Response.index()] = true;
    assert_eq!(q.pump(&mut link), 0);
    assert!(!q.may_send(Vc::Response));
    link.open[Vc::Posted.index()] = true;
    assert_eq!(q.pump(&mut link), 2);
    assert_eq!(
        link.sent,
        vec![
            (Vc::Posted, write(7, 0).tl()),
            (Vc::Response, completion(7, 3).tl())
        ]
    );
}

#[test]
fn posted_writes_pass_requests_and_completions_that_wait_for_credit() {
    let mut q = Egress::<8>::new();
    q.push(read(1, 0)).unwrap();
    q.push(completion(2, 1)).unwrap();
    q.push(write(1, 0)).unwrap();
    let mut link = Link::default();
    link.open[Vc::Posted.index()] = true;
    assert_eq!(q.pump(&mut link), 1);
    assert_eq!(link.sent, vec![(Vc::Posted, write(1, 0).tl())]);
    // Then the older requests go, oldest first.
    link.open = [true; 4];
    assert_eq!(q.pump(&mut link), 2);
    assert_eq!(
        link.sent[1..],
        [
            (Vc::Request, read(1, 0).tl()),
            (Vc::Response, completion(2, 1).tl())
        ]
    );
}

#[test]
fn a_later_posted_write_does_not_hold_an_earlier_read() {
    let mut q = Egress::<8>::new();
    q.push(read(1, 0)).unwrap();
    q.push(write(1, 0)).unwrap();
    let mut link = Link::default();
    link.open[Vc::Request.index()] = true;
    assert_eq!(q.pump(&mut link), 1);
    assert_eq!(link.sent, vec![(Vc::Request, read(1, 0).tl())]);
}

#[test]
fn a_full_queue_is_back_pressure() {
    let mut q = Egress::<2>::new();
    q.push(write(1, 0)).unwrap();
    q.push(write(1, 0x80)).unwrap();
    assert!(!q.has_room(Vc::Posted));
    assert_eq!(
        q.push(write(1, 0x100)),
        Err(TlError::QueueFull { vc: Vc::Posted })
    );
    assert_eq!(q.counters().queue_full, 1);
    assert!(q.push(read(1, 0)).is_ok(), "another channel's queue is separate");
    let mut link = all_open();
    assert_eq!(q.pump(&mut link), 3);
    assert_eq!(q.counters().sent, 3);
}

#[test]
fn a_read_held_behind_several_writes_is_counted_held_once_per_pump() {
    let mut q = Egress::<8>::new();
    for i in 0..3 {
        q.push(write(1, 0x80 * i)).unwrap();
    }
    q.push(read(1, 0)).unwrap();
    let mut link = Link {
        open: [true; 4],
        ..Link::default()
    };
    // The read waits while the three writes go, in one call: held once, not once per write.
    assert_eq!(q.pump(&mut link), 4);
    assert_eq!(q.counters().held_for_order, 1);
}
