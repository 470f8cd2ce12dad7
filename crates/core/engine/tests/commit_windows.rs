//! A commit hands Paimon each changed key once: the window's operations merged with the table's
//! merge engine. What Paimon readers see (read here without the lookup index) must be what the
//! index and the changelog say, for every merge engine.

mod common;

use std::path::Path;

use common::{derive, fresh, line};
use livestate_engine::{At, Livestate, ReadRequest};
use serde_json::{json, Value};

/// Rows of `table` read from its Paimon files (no lookup index), and from the index.
async fn paimon_and_index(ls: &Livestate, table: &str) -> (Vec<Value>, Vec<Value>) {
    let req = ReadRequest { table: table.into(), keys: vec![], at: At::Latest };
    let from_files = ls.read_files(&req).await.unwrap();
    let from_index = ls.read(&req).await.unwrap();
    (from_files.json_rows(), from_index.json_rows())
}

/// Rows in the table's data files (changelog files not counted), summed over every bucket.
fn data_file_rows(ls: &Livestate, table: &str) -> i64 {
    let dir = ls.layout().warehouse_dir().join("state.db").join(table);
    let mut rows = 0;
    for bucket in std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("bucket-"))
    {
        for f in std::fs::read_dir(bucket.path()).unwrap().flatten() {
            let name = f.file_name().to_string_lossy().to_string();
            if name.starts_with("data-") && name.ends_with(".parquet") {
                rows += parquet_rows(&f.path());
            }
        }
    }
    rows
}

fn parquet_rows(path: &Path) -> i64 {
    use parquet::file::reader::FileReader as _;
    let file = std::fs::File::open(path).unwrap();
    parquet::file::reader::SerializedFileReader::new(file).unwrap().metadata().file_metadata().num_rows()
}

fn order(n: u32, id: &str, qty: i64) -> String {
    line(
        n,
        "commerce.order_placed",
        json!({"order_id": id, "line": 1, "customer": "c", "item": "gear", "location": "east", "qty": qty, "unit_price": "1.00"}),
    )
}

fn shipped(n: u32, id: &str, qty: i64) -> String {
    line(
        n,
        "commerce.order_shipped",
        json!({"order_id": id, "line": 1, "item": "gear", "location": "east", "qty": qty}),
    )
}

#[tokio::test]
async fn an_aggregation_commit_writes_its_windows_aggregate_so_paimon_readers_count_each_event_once() {
    let (_d, ls) = fresh().await;
    // Three commits, each with several operations on the one key of reservations_total.
    ls.emit(&[order(1, "a", 5), order(2, "b", 7)].join("\n"), false).unwrap();
    derive(&ls).await;
    ls.emit(&[shipped(3, "a", 5), order(4, "c", 2), order(5, "d", 4)].join("\n"), false).unwrap();
    derive(&ls).await;
    ls.emit(&[shipped(6, "b", 7), order(7, "e", 1)].join("\n"), false).unwrap();
    derive(&ls).await;
    let want = vec![
        json!({"item": "gear", "reserved_qty": 7, "open_lines": 3, "last_order_at": "2026-03-02T08:00:07.000"}),
    ];
    let (files, index) = paimon_and_index(&ls, "reservations_total").await;
    assert_eq!(files, want, "Paimon merges the windows' aggregates into the running total once");
    assert_eq!(index, want);
}

#[tokio::test]
async fn a_key_set_many_times_in_one_window_reaches_paimon_as_one_row() {
    let (_d, ls) = fresh().await;
    let counts: Vec<String> = (0..50)
        .map(|n| {
            line(n, "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": n}))
        })
        .collect();
    ls.emit(&counts.join("\n"), false).unwrap();
    derive(&ls).await;
    assert_eq!(data_file_rows(&ls, "stock"), 1, "fifty operations on one key, one row written");
    let (files, index) = paimon_and_index(&ls, "stock").await;
    assert_eq!(files, index);
    assert_eq!(files[0]["on_hand"], 49);
    // A window whose operations leave a row as it was writes nothing for it: item_first_seen
    // (first-row) keeps bolt's first event, so the later counts change only stock.
    assert_eq!(data_file_rows(&ls, "item_first_seen"), 1);
    let again =
        line(60, "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 7}));
    ls.emit(&again, false).unwrap();
    let r = derive(&ls).await;
    assert_eq!(r.events, 1);
    assert_eq!(data_file_rows(&ls, "stock"), 2, "the changed stock row is written");
    assert_eq!(data_file_rows(&ls, "item_first_seen"), 1, "the unchanged first-row key is not written again");
}

#[tokio::test]
async fn lines_placed_and_shipped_in_one_window_never_reach_paimon_and_earlier_ones_are_deleted() {
    let (_d, ls) = fresh().await;
    ls.emit(&order(1, "kept", 3), false).unwrap();
    ls.emit(&order(2, "gone", 3), false).unwrap();
    derive(&ls).await;
    // In one window: a line placed and shipped (never visible), an earlier line shipped.
    ls.emit(&[order(3, "brief", 1), shipped(4, "brief", 1), shipped(5, "gone", 3)].join("\n"), false)
        .unwrap();
    derive(&ls).await;
    let (files, index) = paimon_and_index(&ls, "open_orders").await;
    assert_eq!(files, index);
    let ids: Vec<&str> = files.iter().map(|r| r["order_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["kept"]);
    // The first commit wrote two rows; the second only the delete of "gone".
    assert_eq!(data_file_rows(&ls, "open_orders"), 3);
}

/// A spec with a partial-update table whose rows a delete removes.
fn removable_spec(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("events.toml"),
        r#"
[events."sensor.set_a"]
fields = { id = "string", a = "int" }
[events."sensor.set_b"]
fields = { id = "string", b = "int" }
[events."sensor.removed"]
fields = { id = "string" }
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("tables.toml"),
        r#"
[tables.readings]
primary_key = ["id"]
freshness = "1s"
options = { "merge-engine" = "partial-update", "partial-update.remove-record-on-delete" = "true", bucket = "1" }
[tables.readings.columns]
id = "string"
a = "int"
b = "int"
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("mappings.toml"),
        r#"
[[mappings]]
event = "sensor.set_a"
table = "readings"
set = { id = "id", a = "a" }

[[mappings]]
event = "sensor.set_b"
table = "readings"
set = { id = "id", b = "b" }

[[mappings]]
event = "sensor.removed"
table = "readings"
action = "delete"
set = { id = "id" }
"#,
    )
    .unwrap();
}

#[tokio::test]
async fn a_partial_update_row_removed_and_set_again_in_one_window_keeps_only_the_new_columns() {
    let tmp = tempfile::tempdir().unwrap();
    removable_spec(&tmp.path().join("spec"));
    let ls = Livestate::init(&tmp.path().join("d"), &tmp.path().join("spec")).await.unwrap();
    ls.emit(
        &[
            line(1, "sensor.set_a", json!({"id": "s1", "a": 1})),
            line(2, "sensor.set_b", json!({"id": "s1", "b": 2})),
        ]
        .join("\n"),
        false,
    )
    .unwrap();
    derive(&ls).await;
    // One window: removed, then only `a` set again. `b` must not come back from the old row.
    ls.emit(
        &[
            line(3, "sensor.removed", json!({"id": "s1"})),
            line(4, "sensor.set_a", json!({"id": "s1", "a": 5})),
        ]
        .join("\n"),
        false,
    )
    .unwrap();
    derive(&ls).await;
    let want = vec![json!({"id": "s1", "a": 5, "b": null})];
    let (files, index) = paimon_and_index(&ls, "readings").await;
    assert_eq!(index, want);
    assert_eq!(files, want, "the removed row's columns do not come back in Paimon's files");
    // The delete and the new row went to Paimon in two commits, each at a record offset.
    let snapshots = std::fs::read_dir(ls.layout().warehouse_dir().join("state.db/readings/snapshot"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("snapshot-"))
        .count();
    assert_eq!(snapshots, 3, "one commit for the first window, two for the one that removed and set again");
    // And a row removed for good within a window is gone from the files too.
    ls.emit(
        &[
            line(5, "sensor.set_b", json!({"id": "s1", "b": 9})),
            line(6, "sensor.removed", json!({"id": "s1"})),
        ]
        .join("\n"),
        false,
    )
    .unwrap();
    derive(&ls).await;
    let (files, index) = paimon_and_index(&ls, "readings").await;
    assert!(files.is_empty() && index.is_empty(), "{files:?} {index:?}");
}
