use std::sync::Arc;

use livestate_record::{Record, RecordError};
use livestate_spec::{DataJson, EventEnvelope};

mod common;

fn ev(id: &str, qty: i64) -> EventEnvelope<DataJson> {
    common::event(id, serde_json::json!({"qty": qty}))
}

#[test]
fn offsets_are_dense_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let r = Record::open(dir.path()).unwrap();
        let out = r.append((0..5).map(|i| ev(&format!("e{i}"), i)).collect()).unwrap();
        assert_eq!(out.iter().map(|a| a.offset).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
    }
    let r = Record::open(dir.path()).unwrap();
    assert_eq!(r.next_offset(), 5);
    let out = r.append(vec![ev("e5", 5)]).unwrap();
    assert_eq!(out[0].offset, 5);
    let all = r.read(0, 100).unwrap();
    assert_eq!(all.len(), 6);
    assert_eq!(all[3].event.id, "e3");
    assert_eq!(all[3].event.data["qty"], serde_json::json!(3));
    assert_eq!(r.read(4, 1).unwrap()[0].offset, 4);
    assert_eq!(r.offset_of("e2").unwrap(), Some(2));
}

#[test]
fn resent_id_returns_original_offset_and_appends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let r = Record::open(dir.path()).unwrap();
    r.append(vec![ev("a", 1), ev("b", 2)]).unwrap();
    let again = r.append(vec![ev("b", 2), ev("c", 3)]).unwrap();
    assert_eq!(again[0].offset, 1);
    assert!(again[0].duplicate);
    assert_eq!(again[1].offset, 2);
    assert!(!again[1].duplicate);
    assert_eq!(r.next_offset(), 3);
}

#[test]
fn resent_id_with_different_content_fails_the_whole_request() {
    let dir = tempfile::tempdir().unwrap();
    let r = Record::open(dir.path()).unwrap();
    r.append(vec![ev("a", 1)]).unwrap();
    let err = r.append(vec![ev("new", 9), ev("a", 2)]).unwrap_err();
    assert!(matches!(err, RecordError::IdConflict { ref id, offset: 0 } if id == "a"), "{err}");
    assert_eq!(r.next_offset(), 1, "nothing of the failed request may be appended");
    assert_eq!(r.offset_of("new").unwrap(), None);
}

#[test]
fn duplicate_id_within_one_request_is_recorded_once() {
    let dir = tempfile::tempdir().unwrap();
    let r = Record::open(dir.path()).unwrap();
    let out = r.append(vec![ev("x", 1), ev("x", 1)]).unwrap();
    assert_eq!(out[0].offset, out[1].offset);
    assert_eq!(r.next_offset(), 1);
}

#[test]
fn concurrent_appends_share_fsyncs_and_keep_offsets_dense() {
    let dir = tempfile::tempdir().unwrap();
    let r = Arc::new(Record::open(dir.path()).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let r = Arc::clone(&r);
            std::thread::spawn(move || {
                (0..50)
                    .map(|i| r.append(vec![ev(&format!("t{t}-{i}"), i)]).unwrap()[0].offset)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut offsets: Vec<u64> = threads.into_iter().flat_map(|h| h.join().unwrap()).collect();
    offsets.sort_unstable();
    assert_eq!(offsets, (0..400).collect::<Vec<_>>());
    let stats = r.stats();
    assert_eq!(stats.requests, 400);
    assert!(stats.syncs <= 400);
}
