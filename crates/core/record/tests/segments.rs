//! The record's segment files (docs/formats/record.md, "Segments"): a torn last group is cut
//! off at open, a damaged entry below it is reported and never skipped, reads cross segment and
//! sparse-index boundaries, and every event acknowledged before a `kill -9` is read back.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use livestate_record::{check_record, Record, RecordError};
use livestate_spec::{DataJson, EventEnvelope};

mod common;

fn ev(i: u64) -> EventEnvelope<DataJson> {
    common::event(
        format!("e{i:06}"),
        serde_json::json!({"qty": i, "note": "some text to make the entry longer"}),
    )
}

/// Appends events `from..to` in requests of `per` events.
fn append(r: &Record, from: u64, to: u64, per: u64) {
    let mut i = from;
    while i < to {
        let end = (i + per).min(to);
        r.append((i..end).map(ev).collect()).unwrap();
        i = end;
    }
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("segments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    files.sort();
    files
}

fn ids(events: &[livestate_record::RecordedEvent]) -> Vec<String> {
    events.iter().map(|e| e.event.id.clone()).collect()
}

fn want_ids(from: u64, to: u64) -> Vec<String> {
    (from..to).map(|i| ev(i).id).collect()
}

#[test]
fn reads_cross_segment_and_sparse_index_boundaries_from_every_offset() {
    let dir = tempfile::tempdir().unwrap();
    let r = Record::open_sealing_at(dir.path(), 16 * 1024).unwrap();
    // Requests of 7 events: groups straddle the index's every-64th marks and the seal size.
    append(&r, 0, 1000, 7);
    let segments = segment_files(dir.path());
    assert!(segments.len() >= 5, "{} segments", segments.len());
    for seg in &segments[..segments.len() - 1] {
        assert!(seg.with_extension("idx").exists(), "a sealed segment has its index: {}", seg.display());
    }
    for from in (0..1000).step_by(13).chain([63, 64, 65, 127, 128, 998, 999]) {
        for limit in [1, 64, 130, 5000] {
            let got = r.read(from, limit).unwrap();
            let to = (from + limit as u64).min(1000);
            assert_eq!(ids(&got), want_ids(from, to), "read({from}, {limit})");
            assert!(got.iter().zip(from..).all(|(e, o)| e.offset == o));
        }
        assert_eq!(r.get(from).unwrap().map(|e| e.event.id), Some(ev(from).id));
    }
    assert!(r.read(1000, 10).unwrap().is_empty());
    assert_eq!(r.get(1000).unwrap(), None);
    drop(r);
    // Reopened, the sealed segments read from their `.idx` files, or by a scan without them.
    std::fs::remove_file(segments[1].with_extension("idx")).unwrap();
    let r = Record::open_sealing_at(dir.path(), 16 * 1024).unwrap();
    assert_eq!(r.next_offset(), 1000);
    assert_eq!(ids(&r.read(0, 2000).unwrap()), want_ids(0, 1000));
    append(&r, 1000, 1100, 50);
    assert_eq!(ids(&r.read(950, 2000).unwrap()), want_ids(950, 1100));
    drop(r);
    let check = check_record(dir.path());
    assert_eq!(check.events, 1100);
    assert_eq!(check.problems.len(), 1, "only the missing index: {:?}", check.problems);
    assert!(check.problems[0].contains("has no sparse index"), "{:?}", check.problems);
}

#[test]
fn an_empty_segment_a_crash_left_after_sealing_is_the_open_one_and_appends_go_on_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let r = Record::open_sealing_at(dir.path(), 4 * 1024).unwrap();
    append(&r, 0, 200, 10);
    let last_ms = r.get(199).unwrap().unwrap().recorded_at_ms;
    drop(r);
    // Created and made durable, then the crash: no group was written to it.
    let empty = dir.path().join("segments").join(format!("{:020}.seg", 200));
    std::fs::File::create(&empty).unwrap();
    let r = Record::open_sealing_at(dir.path(), 4 * 1024).unwrap();
    assert_eq!(r.next_offset(), 200);
    append(&r, 200, 210, 10);
    assert!(r.get(200).unwrap().unwrap().recorded_at_ms >= last_ms, "recorded times never go back");
    assert_eq!(ids(&r.read(190, 100).unwrap()), want_ids(190, 210));
    assert!(std::fs::metadata(&empty).unwrap().len() > 0, "the group went to the empty segment");
    drop(r);
    // Sealing writes the index before it creates the next segment; this test made the next
    // segment by hand, so the one before it has none (reads rebuild it by a scan).
    let check = check_record(dir.path());
    assert_eq!(check.events, 210);
    assert_eq!(check.problems.len(), 1, "{:?}", check.problems);
    assert!(check.problems[0].contains("has no sparse index"), "{:?}", check.problems);
}

#[test]
fn a_torn_last_group_is_cut_off_at_open_and_appends_go_on_after_it() {
    for torn in ["half an entry", "a group without its end", "zeros", "a flipped byte in the last group"] {
        let dir = tempfile::tempdir().unwrap();
        let r = Record::open(dir.path()).unwrap();
        append(&r, 0, 30, 10);
        drop(r);
        let seg = segment_files(dir.path()).pop().unwrap();
        let whole = std::fs::read(&seg).unwrap();
        // A fourth group, written as a crash might have left it.
        let r = Record::open(dir.path()).unwrap();
        append(&r, 30, 40, 10);
        drop(r);
        let mut bytes = std::fs::read(&seg).unwrap();
        match torn {
            "half an entry" => bytes.truncate(whole.len() + 30),
            "a group without its end" => bytes.truncate(bytes.len() - 8),
            "zeros" => {
                bytes.truncate(whole.len());
                bytes.extend([0u8; 4096]);
            }
            _ => {
                let at = whole.len() + 100;
                bytes[at] ^= 0x40;
            }
        }
        std::fs::write(&seg, &bytes).unwrap();
        // The group's ids were stored, so it counts as acknowledged unless they go too: a crash
        // before its ids' batch is what tears a group.
        forget_ids_from(dir.path(), 30);
        let r = Record::open(dir.path()).unwrap();
        assert_eq!(r.next_offset(), 30, "{torn}: the torn group is cut off");
        assert_eq!(std::fs::metadata(&seg).unwrap().len(), whole.len() as u64, "{torn}");
        append(&r, 30, 45, 5);
        assert_eq!(ids(&r.read(0, 100).unwrap()), want_ids(0, 45), "{torn}");
        drop(r);
        let check = check_record(dir.path());
        assert!(check.is_clean(), "{torn}: {:?}", check.problems);
    }
}

#[test]
fn a_damaged_entry_below_the_last_group_is_reported_with_its_file_and_never_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let r = Record::open(dir.path()).unwrap();
    append(&r, 0, 100, 10);
    drop(r);
    let seg = segment_files(dir.path()).pop().unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let mid = bytes.len() / 3;
    bytes[mid] ^= 0x01;
    std::fs::write(&seg, &bytes).unwrap();
    let err = Record::open(dir.path()).err().expect("a damaged record does not open");
    assert!(matches!(err, RecordError::DamagedSegment { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains(&seg.display().to_string()) && text.contains("acknowledged"), "{text}");
    assert_eq!(std::fs::read(&seg).unwrap(), bytes, "nothing is cut from a damaged record");
    let check = check_record(dir.path());
    assert!(!check.is_clean());
    assert!(check.problems.iter().any(|p| p.contains(&seg.display().to_string())), "{:?}", check.problems);
}

#[test]
fn a_segment_cut_between_two_acknowledged_groups_keeps_the_record_from_opening() {
    let dir = tempfile::tempdir().unwrap();
    let r = Record::open(dir.path()).unwrap();
    append(&r, 0, 20, 10);
    drop(r);
    let seg = segment_files(dir.path()).pop().unwrap();
    let whole = std::fs::read(&seg).unwrap();
    let r = Record::open(dir.path()).unwrap();
    append(&r, 20, 30, 10);
    drop(r);
    // The third group, acknowledged, is gone without a trace in the segment.
    std::fs::write(&seg, &whole).unwrap();
    let err = Record::open(dir.path()).err().expect("acknowledged events are missing");
    assert!(err.to_string().contains("the segments end at offset 20, but events through offset 29"), "{err}");
}

#[test]
fn a_damaged_entry_in_a_sealed_segment_fails_the_read_that_meets_it() {
    let dir = tempfile::tempdir().unwrap();
    let r = Record::open_sealing_at(dir.path(), 8 * 1024).unwrap();
    append(&r, 0, 300, 10);
    drop(r);
    let seg = segment_files(dir.path()).remove(0);
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&seg, &bytes).unwrap();
    let r = Record::open_sealing_at(dir.path(), 8 * 1024).unwrap();
    // Reads beyond the damaged segment work; a read through it fails and names it.
    assert_eq!(ids(&r.read(250, 50).unwrap()), want_ids(250, 300));
    let err = r.read(0, 300).unwrap_err();
    assert!(matches!(err, RecordError::DamagedSegment { .. }), "{err}");
    assert!(err.to_string().contains(&seg.display().to_string()), "{err}");
}

/// Removes the ids of offsets from `from` on and sets the record's `ids_through` to `from`, as
/// a crash between a group's fsync and its ids' batch leaves the store.
fn forget_ids_from(dir: &Path, from: u64) {
    let db = fjall::Database::builder(dir).open().unwrap();
    let ids = db.keyspace("ids", fjall::KeyspaceCreateOptions::default).unwrap();
    let meta = db.keyspace("meta", fjall::KeyspaceCreateOptions::default).unwrap();
    let mut batch = db.batch();
    for kv in ids.iter() {
        let (k, v) = kv.into_inner().unwrap();
        if u64::from_be_bytes(v[..].try_into().unwrap()) >= from {
            batch.remove(&ids, k);
        }
    }
    batch.insert(&meta, "ids_through", from.to_be_bytes());
    batch.commit().unwrap();
    db.persist(fjall::PersistMode::SyncAll).unwrap();
}

const CHILD_DIR: &str = "LIVESTATE_RECORD_KILL_CHILD_DIR";

/// The appender the kill test runs as a child process: appends requests of 50 events and prints
/// the last offset of each as soon as it is acknowledged.
#[test]
fn appender_child_process() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let r = Record::open(Path::new(&dir)).unwrap();
    let mut i = r.next_offset();
    loop {
        r.append((i..i + 50).map(ev).collect()).unwrap();
        i += 50;
        println!("acked {}", i - 1);
    }
}

#[test]
fn every_event_acknowledged_before_a_kill_9_is_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut acked: Option<u64> = None;
    for (round, delay_ms) in [40u64, 90, 15, 150, 60].into_iter().enumerate() {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "appender_child_process", "--nocapture", "--test-threads", "1"])
            .env(CHILD_DIR, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = line.strip_prefix("acked ") {
                    last = Some(n.trim().parse::<u64>().unwrap());
                }
            }
            last
        });
        std::thread::sleep(Duration::from_millis(100 + delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        acked = reader.join().unwrap().or(acked);
        let r = Record::open(dir.path()).unwrap();
        let last = acked.expect("the child acknowledged events before it was killed");
        assert!(r.next_offset() > last, "round {round}: acknowledged {last}, head {}", r.next_offset());
        let all = r.read(0, usize::MAX).unwrap();
        assert_eq!(ids(&all), want_ids(0, all.len() as u64), "round {round}: dense, each once");
    }
    let check = check_record(dir.path());
    assert!(check.is_clean(), "{:?}", check.problems);
}
