//! The outstanding-request table: capacity, tag reuse, timeouts, late and unknown completions.

use link_phy::time::{Duration, Instant};
use link_tl::header::{CompletionHeader, Status};
use link_tl::tags::{Outstanding, Request, RequestKind};
use link_tl::TlError;

const TIMEOUT: Duration = Duration::from_us(10);

fn read(len: u16, cookie: u64) -> Request {
    Request {
        dest: 4,
        addr: 0x1000,
        kind: RequestKind::Read { len },
        cookie,
    }
}

fn done(tag: u16) -> CompletionHeader {
    CompletionHeader {
        requester: 1,
        completer: 4,
        tag,
        status: Status::Success,
        offset: 0,
        len: 0,
    }
}

fn data(tag: u16, offset: u16, len: u8) -> CompletionHeader {
    CompletionHeader {
        offset,
        len,
        ..done(tag)
    }
}

fn at(us: u64) -> Instant {
    Instant::ZERO + Duration::from_us(us)
}

#[test]
fn capacity_is_what_the_user_chose() {
    let mut table = Outstanding::<256>::new(TIMEOUT);
    let tags: Vec<u16> = (0..256)
        .map(|i| table.allocate(at(0), read(4, i)).unwrap())
        .collect();
    assert_eq!(table.allocate(at(0), read(4, 0)), Err(TlError::NoFreeTag));
    assert_eq!(table.outstanding(), 256);
    assert_eq!(table.available(), 0);
    let mut sorted = tags.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 256, "tags handed out twice");
    assert!(tags.iter().all(|&t| t < 1024));
    // One completion frees one slot.
    let d = table.complete(at(1), &data(tags[17], 0, 4)).unwrap();
    assert_eq!((d.cookie, d.finished), (17, Some(Status::Success)));
    assert!(table.allocate(at(1), read(4, 0)).is_ok());
    assert_eq!(table.allocate(at(1), read(4, 0)), Err(TlError::NoFreeTag));
}

#[test]
fn a_reused_slot_gets_a_new_tag_and_the_old_tag_is_unknown() {
    let mut table = Outstanding::<4>::new(TIMEOUT);
    let first = table
        .allocate(
            at(0),
            Request {
                kind: RequestKind::Write,
                ..read(4, 0)
            },
        )
        .unwrap();
    assert_eq!(
        table.complete(at(0), &done(first)).unwrap().finished,
        Some(Status::Success)
    );
    // The same slot comes back with the next generation: another tag.
    let second = table
        .allocate(
            at(0),
            Request {
                kind: RequestKind::Write,
                ..read(4, 1)
            },
        )
        .unwrap();
    assert_eq!(second % 4, first % 4);
    assert_ne!(second, first);
    // A duplicate of the first completion is not taken for the second request.
    assert_eq!(
        table.complete(at(0), &done(first)),
        Err(TlError::UnknownTag { tag: first })
    );
    assert_eq!(table.counters().unknown_tags, 1);
    assert_eq!(table.get(second).map(|r| r.cookie), Some(1));
    // Tags cycle through all 1024 values of the slot's generations before repeating.
    let mut seen = vec![first, second];
    table.complete(at(0), &done(second)).unwrap();
    for i in 0..300 {
        let t = table
            .allocate(
                at(0),
                Request {
                    kind: RequestKind::Write,
                    ..read(4, i)
                },
            )
            .unwrap();
        table.complete(at(0), &done(t)).unwrap();
        seen.push(t);
    }
    assert!(seen.windows(2).all(|w| w[0] != w[1]));
    assert!(seen.iter().all(|&t| t < 1024));
}

#[test]
fn timeouts_quarantine_the_tag_and_late_completions_are_counted_and_dropped() {
    let mut table = Outstanding::<1>::new(TIMEOUT);
    let tag = table.allocate(at(0), read(300, 77)).unwrap();
    assert_eq!(table.next_deadline(), Some(at(10)));
    assert_eq!(table.expire(at(9)), None);
    let expired = table.expire(at(10)).unwrap();
    assert_eq!((expired.tag, expired.request.cookie), (tag, 77));
    assert_eq!(table.counters().timeouts, 1);
    assert_eq!(table.outstanding(), 0);
    // Quarantined: the slot is not handed out, and a completion for the old tag is late.
    assert_eq!(table.allocate(at(11), read(4, 0)), Err(TlError::NoFreeTag));
    assert_eq!(
        table.complete(at(12), &data(tag, 0, 128)),
        Err(TlError::LateCompletion { tag })
    );
    assert_eq!(table.counters().late_completions, 1);
    // After the quarantine the slot comes back under another tag; the old tag is then unknown.
    assert_eq!(table.next_deadline(), Some(at(20)));
    assert_eq!(table.expire(at(20)), None);
    let fresh = table.allocate(at(20), read(4, 5)).unwrap();
    assert_ne!(fresh, tag);
    assert_eq!(
        table.complete(at(21), &data(tag, 0, 128)),
        Err(TlError::UnknownTag { tag })
    );
    assert_eq!(table.get(fresh).map(|r| r.cookie), Some(5));
    let c = table.counters();
    assert_eq!(
        (
            c.issued,
            c.completed,
            c.timeouts,
            c.late_completions,
            c.unknown_tags
        ),
        (2, 0, 1, 1, 1)
    );
}

#[test]
fn a_read_completes_when_every_piece_arrived_in_any_order() {
    let mut table = Outstanding::<2>::new(TIMEOUT);
    // 300 bytes at 0x1070: pieces [0, 16), [16, 144), [144, 272), [272, 300).
    let tag = table
        .allocate(
            at(0),
            Request {
                addr: 0x1070,
                ..read(300, 0)
            },
        )
        .unwrap();
    for (offset, len) in [(272, 28), (16, 128), (0, 16)] {
        assert_eq!(
            table.complete(at(1), &data(tag, offset, len)).unwrap().finished,
            None
        );
    }
    // A duplicate and a misplaced piece are refused without harm.
    assert_eq!(
        table.complete(at(1), &data(tag, 16, 128)),
        Err(TlError::CompletionMismatch { tag, offset: 16 })
    );
    assert_eq!(
        table.complete(at(1), &data(tag, 144, 100)),
        Err(TlError::CompletionMismatch { tag, offset: 144 })
    );
    assert_eq!(
        table.complete(at(1), &data(tag, 150, 122)),
        Err(TlError::CompletionMismatch { tag, offset: 150 })
    );
    assert_eq!(table.counters().mismatched, 3);
    let last = table.complete(at(1), &data(tag, 144, 128)).unwrap();
    assert_eq!(
        (last.offset, last.len, last.finished),
        (144, 128, Some(Status::Success))
    );
    assert_eq!(table.outstanding(), 0);
}

#[test]
fn error_status_ends_the_request_and_pieces_still_coming_are_late() {
    let mut table = Outstanding::<2>::new(TIMEOUT);
    let tag = table.allocate(at(0), read(256, 0)).unwrap();
    table.complete(at(1), &data(tag, 0, 128)).unwrap();
    let failed = CompletionHeader {
        status: Status::Poisoned,
        ..done(tag)
    };
    assert_eq!(
        table.complete(at(2), &failed).unwrap().finished,
        Some(Status::Poisoned)
    );
    assert_eq!(
        table.complete(at(3), &data(tag, 128, 128)),
        Err(TlError::LateCompletion { tag })
    );
    // Writes and atomics end with their one completion.
    let write = table
        .allocate(
            at(0),
            Request {
                kind: RequestKind::Write,
                ..read(4, 0)
            },
        )
        .unwrap();
    let abort = CompletionHeader {
        status: Status::CompleterAbort,
        ..done(write)
    };
    assert_eq!(
        table.complete(at(1), &abort).unwrap().finished,
        Some(Status::CompleterAbort)
    );
    assert_eq!(
        table.complete(at(1), &abort),
        Err(TlError::UnknownTag { tag: write })
    );
    let atomic = table
        .allocate(
            at(0),
            Request {
                kind: RequestKind::Atomic { size: 8 },
                ..read(4, 0)
            },
        )
        .unwrap();
    assert_eq!(
        table.complete(at(1), &data(atomic, 0, 4)),
        Err(TlError::CompletionMismatch {
            tag: atomic,
            offset: 0
        })
    );
    assert_eq!(
        table.complete(at(1), &data(atomic, 0, 8)).unwrap().finished,
        Some(Status::Success)
    );
    let c = table.counters();
    assert_eq!((c.completed, c.failed), (3, 2));
}

#[test]
fn completions_from_the_wrong_endpoint_or_for_unknown_tags_are_rejected() {
    let mut table = Outstanding::<8>::new(TIMEOUT);
    let tag = table.allocate(at(0), read(4, 0)).unwrap();
    let impostor = CompletionHeader {
        completer: 5,
        ..data(tag, 0, 4)
    };
    assert_eq!(
        table.complete(at(0), &impostor),
        Err(TlError::UnexpectedCompleter {
            tag,
            expected: 4,
            got: 5
        })
    );
    assert_eq!(
        table.complete(at(0), &data(1000, 0, 4)),
        Err(TlError::UnknownTag { tag: 1000 })
    );
    assert_eq!(
        table.complete(at(0), &data(tag + 1, 0, 4)),
        Err(TlError::UnknownTag { tag: tag + 1 })
    );
    let c = table.counters();
    assert_eq!((c.wrong_completer, c.unknown_tags), (1, 2));
    // The request is untouched and still completes.
    assert_eq!(
        table.complete(at(0), &data(tag, 0, 4)).unwrap().finished,
        Some(Status::Success)
    );
}

/// With more than 512 slots not every slot has a second generation, but those below `1024 - N` do: their
/// next tag must differ, so a completion later than the quarantine is unknown rather than taken for the
/// slot's next request (a table of 1000 slots used to hand slot 0 tag 0 again).
#[test]
fn a_large_table_still_changes_the_tag_of_a_reused_slot_where_it_can() {
    let mut table = Outstanding::<1000>::new(TIMEOUT);
    let first = table.allocate(at(0), read(4, 1)).unwrap();
    assert_eq!(first, 0);
    assert!(table.expire(at(10)).is_some());
    assert_eq!(table.expire(at(20)), None);
    let second = table.allocate(at(20), read(4, 2)).unwrap();
    assert_eq!(second, 1000, "slot 0's second generation");
    assert_eq!(
        table.complete(at(21), &data(first, 0, 4)),
        Err(TlError::UnknownTag { tag: first })
    );
    assert_eq!(table.get(second).map(|r| r.cookie), Some(2));
    // And back to the first generation after that: tags stay below 1024.
    table.complete(at(21), &data(second, 0, 4)).unwrap();
    assert_eq!(table.allocate(at(21), read(4, 3)), Ok(0));
}
