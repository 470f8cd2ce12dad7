//! A record whose id index files are damaged on disk: the check names the file, id checks fail
//! with `RecordError::Damaged` instead of taking a re-sent event for a new one, and a clean
//! record checks out. (Damaged segment files: `tests/segments.rs`.)

use std::path::{Path, PathBuf};

use livestate_record::{check_files, check_record, Record, RecordError};
use livestate_spec::{DataJson, EventEnvelope};

mod common;

fn ev(i: u64) -> EventEnvelope<DataJson> {
    common::event(
        format!("e{i}"),
        serde_json::json!({"qty": i, "note": format!("event number {i} with some text to fill blocks")}),
    )
}

/// A record of `n` events, moved from the journal into table files.
fn flushed_record(dir: &Path, n: u64) {
    let r = Record::open(dir).unwrap();
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        r.append(chunk.iter().map(|&i| ev(i)).collect()).unwrap();
    }
    drop(r);
    let db = fjall::Database::builder(dir).open().unwrap();
    for ks in ["events", "ids"] {
        db.keyspace(ks, fjall::KeyspaceCreateOptions::default).unwrap().rotate_memtable_and_wait().unwrap();
    }
}

/// The largest table file of the store (the ids: the events are in segment files).
fn largest_table_file(dir: &Path) -> PathBuf {
    let mut files = Vec::new();
    for ks in std::fs::read_dir(dir.join("keyspaces")).unwrap() {
        for f in std::fs::read_dir(ks.unwrap().path().join("tables")).into_iter().flatten() {
            let f = f.unwrap();
            files.push((f.metadata().unwrap().len(), f.path()));
        }
    }
    files.sort();
    files.pop().expect("table files").1
}

#[test]
fn a_clean_record_checks_out_event_by_event() {
    let tmp = tempfile::tempdir().unwrap();
    flushed_record(tmp.path(), 2000);
    let check = check_record(tmp.path());
    assert!(check.is_clean(), "{:?}", check.problems);
    assert_eq!(check.events, 2000);
    assert!(check.files >= 2, "the events and ids table files were checked: {}", check.files);
}

#[test]
fn flipped_bytes_in_the_ids_table_file_fail_the_id_checks_with_the_file_named() {
    let tmp = tempfile::tempdir().unwrap();
    flushed_record(tmp.path(), 2000);
    let file = largest_table_file(tmp.path());
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();

    let files = check_files(tmp.path());
    assert_eq!(files.problems.len(), 1, "{:?}", files.problems);
    assert_eq!(files.problems[0].file, file);
    assert!(files.problems[0].message.contains("checksum mismatch"), "{}", files.problems[0]);

    let r = Record::open(tmp.path()).unwrap();
    // Every id is checked when the events are sent again.
    let err = r.append((0..2000).map(ev).collect()).unwrap_err();
    match &err {
        RecordError::Damaged { keyspace, files, .. } => {
            assert_eq!(*keyspace, Some("ids"));
            assert_eq!(files.iter().map(|f| f.file.clone()).collect::<Vec<_>>(), vec![file.clone()]);
        }
        other => panic!("expected Damaged, got {other}"),
    }
    assert!(err.to_string().contains(&file.display().to_string()), "{err}");
    drop(r);
    let check = check_record(tmp.path());
    assert!(!check.is_clean());
    assert!(check.problems.iter().any(|p| p.contains(&file.display().to_string())), "{:?}", check.problems);
    assert!(check.problems.iter().any(|p| p.contains("keyspace `ids`")), "{:?}", check.problems);
}

#[test]
fn a_truncated_table_file_keeps_the_record_from_opening_and_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    flushed_record(tmp.path(), 2000);
    let file = largest_table_file(tmp.path());
    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(len / 2).unwrap();

    let err = Record::open(tmp.path()).err().expect("a truncated table file must not open");
    assert!(
        matches!(&err, RecordError::Damaged { files, .. } if files.iter().any(|f| f.file == file)),
        "{err}"
    );
    let check = check_record(tmp.path());
    assert!(check.problems.iter().any(|p| p.contains(&file.display().to_string())), "{:?}", check.problems);
    assert!(check.problems.iter().any(|p| p.contains("does not open")), "{:?}", check.problems);
}
