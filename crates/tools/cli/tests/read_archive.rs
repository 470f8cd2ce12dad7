//! `livestate read record.events` prints the record archive, every event in offset order, as
//! any Paimon reader of `record.events` sees it (the engines group compares Java Paimon's read
//! of the archive with it); it is read whole, so filters and time travel are refused.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

fn livestate(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_livestate")).args(args).arg("--dir").arg(dir).output().unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = livestate(dir, args);
    assert!(out.status.success(), "livestate {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn read_record_events_prints_every_archived_event_in_offset_order() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    ok(&dir, &["init"]);
    let events = tmp.path().join("events.jsonl");
    let lines = [
        json!({"id": "a1", "type": "inventory.stock_counted", "occurred_at": "2026-03-02T08:00:00Z",
               "data": {"item": "bolt", "location": "north", "on_hand": 40}}),
        json!({"id": "a2", "type": "commerce.reservation_changed", "occurred_at": "2026-03-02T08:00:01.250Z",
               "data": {"item": "bolt", "location": "north", "reserved": 5}, "causation": "p1"}),
    ];
    std::fs::write(&events, lines.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")).unwrap();
    ok(&dir, &["emit", events.to_str().unwrap()]);
    ok(&dir, &["derive", "--once"]);

    let out: Value = serde_json::from_str(&ok(&dir, &["read", "record.events", "--json"])).unwrap();
    assert_eq!(out["table"], "record.events");
    let columns: Vec<&str> = out["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(
        columns,
        ["event_offset", "id", "type", "module", "occurred_at", "recorded_at", "causation", "data", "day"]
    );
    let rows = out["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{out}");
    assert_eq!((rows[0]["event_offset"].clone(), rows[0]["id"].clone()), (json!(0), json!("a1")));
    assert_eq!((rows[1]["event_offset"].clone(), rows[1]["id"].clone()), (json!(1), json!("a2")));
    assert_eq!(rows[1]["module"], "commerce");
    assert_eq!(rows[1]["occurred_at"], "2026-03-02T08:00:01.250");
    assert_eq!(rows[1]["causation"], "p1");
    assert_eq!(rows[0]["causation"], Value::Null);
    let data: Value = serde_json::from_str(rows[1]["data"].as_str().unwrap()).unwrap();
    assert_eq!(data["reserved"], 5);

    // Text output: a header, one line per event, and the count.
    let text = ok(&dir, &["read", "record.events"]);
    assert!(text.starts_with("event_offset\tid\t"), "{text}");
    assert!(text.trim_end().ends_with("2 event(s)"), "{text}");
}

#[test]
fn read_record_events_refuses_keys_and_time_travel_naming_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    ok(&dir, &["init"]);
    for args in [
        &["read", "record.events", "--key", "id=a1"][..],
        &["read", "record.events", "--snapshot", "1"][..],
        &["read", "record.events", "--tag", "t"][..],
    ] {
        let out = livestate(&dir, args);
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("record.events is read whole"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} printed rows");
    }
}
