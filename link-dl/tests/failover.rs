//! A link that fails for good hands its unacknowledged packets back, so that a fabric can send them
//! another way: together with what the partner received, they cover everything sent, in order.

mod common;

use link_dl::flit::FLIT_LEN;
use link_dl::Vc;

#[test]
fn unacknowledged_packets_and_received_ones_cover_everything_sent() {
    for cut in [0usize, 1, 7, 25, 60, 200] {
        let mut link = common::Joined::active();
        let mut sent = Vec::new();
        for k in 0..40u64 {
            let payload = vec![[k as u8; FLIT_LEN]; (k % 9) as usize];
            if link.a.send(Vc::Posted, k, &payload).is_ok() {
                sent.push((k, payload));
            }
        }
        assert!(sent.len() >= 20, "credit and replay room for a few packets");
        // The link dies after `cut` unit times: some packets arrived, some acknowledgements did not.
        link.wire(cut);
        let mut seen: Vec<(u64, Vec<[u8; FLIT_LEN]>)> = Vec::new();
        while let Some(p) = link.b.recv() {
            seen.push((p.tl, p.payload.to_vec()));
        }
        let mut taken = Vec::new();
        let expected = link.b.expected();
        let mut arrived = 0;
        link.a.take_unacknowledged(|seq, p| {
            // Sent before what the partner expects next: it arrived.
            arrived += usize::from(expected.is_after(seq));
            taken.push((p.tl, p.payload.to_vec()));
        });
        link.a.phy_down();
        assert_eq!(link.a.unacknowledged(), 0);
        // Received: a prefix of what was sent. Taken back: a suffix, overlapping only in packets whose
        // acknowledgement had not come back yet.
        assert_eq!(&sent[..seen.len()], &seen[..], "cut {cut}");
        let first_taken = sent.len() - taken.len();
        assert_eq!(&sent[first_taken..], &taken[..], "cut {cut}");
        assert!(
            first_taken <= seen.len(),
            "cut {cut}: nothing lost between the two"
        );
        // The partner's next expected sequence number tells exactly which taken back had arrived.
        assert_eq!(first_taken + arrived, seen.len(), "cut {cut}");
        if cut == 0 {
            assert_eq!((seen.len(), taken.len()), (0, sent.len()));
        }
        if cut == 200 {
            assert_eq!(
                (seen.len(), taken.len()),
                (sent.len(), 0),
                "all delivered and acknowledged"
            );
        }
    }
}
