//! The lookup index and the changelog agree with Paimon: after every commit the index holds
//! exactly what a full Paimon read returns, and replaying every commit's changelog onto an
//! empty map gives the same rows, for tables of all four merge engines.

mod common;

use std::collections::BTreeMap;

use common::workload::{count, event, event_op, TABLES};
use common::{canon, fresh, line};
use futures::TryStreamExt;
use livestate_engine::read::ServedBy;
use livestate_engine::Livestate;
use livestate_spec::Value;
use paimon::IncrementalScanMode;
use proptest::prelude::*;
use serde_json::json;

async fn paimon_rows(ls: &Livestate, table: &str) -> Vec<String> {
    let ts = ls.spec().table(table).unwrap();
    let t = ls.table(table).await.unwrap();
    canon(livestate_engine::read::paimon_scan_all(&t, ts).await.unwrap())
}

fn index_rows(ls: &Livestate, table: &str) -> Vec<String> {
    canon(ls.indexed_rows(table).unwrap())
}

/// Every change row of every snapshot, replayed in order onto an empty map keyed by primary key.
async fn replayed(ls: &Livestate, table: &str) -> Vec<String> {
    let ts = ls.spec().table(table).unwrap();
    let t = ls.table(table).await.unwrap();
    let Some(latest) = t.snapshot_manager().get_latest_snapshot_id().await.unwrap() else {
        return Vec::new();
    };
    let rb = t.new_read_builder();
    let plan = rb.new_incremental_scan(IncrementalScanMode::Changelog, 0, latest).plan().await.unwrap();
    let batches: Vec<arrow_array::RecordBatch> =
        rb.new_read().unwrap().to_audit_log_arrow(&plan).unwrap().try_collect().await.unwrap();
    let key_idx: Vec<usize> = ts.primary_key.iter().map(|k| ts.columns.get_index_of(k).unwrap()).collect();
    let mut map: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for b in batches {
        let kinds = livestate_engine::read::row_kinds(&b).unwrap();
        let user = b.project(&(1..b.num_columns()).collect::<Vec<_>>()).unwrap();
        let rows = livestate_engine::read::rows_of(&user, ts).unwrap();
        for (kind, row) in kinds.into_iter().zip(rows) {
            let key = serde_json::to_string(&key_idx.iter().map(|&i| row[i].to_json()).collect::<Vec<_>>())
                .unwrap();
            if kind.is_add() {
                map.insert(key, row);
            } else {
                let gone = map.remove(&key);
                let kind = kind.short_string();
                assert_eq!(gone.as_ref(), Some(&row), "{table}: {kind} of a row that was not there");
            }
        }
    }
    canon(map.into_values())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn index_and_changelog_match_paimon_after_every_commit(
        chunks in proptest::collection::vec(proptest::collection::vec(event_op(4), 1..8), 1..8)
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let (_d, ls) = fresh().await;
            let mut n = 0;
            for chunk in &chunks {
                let lines: Vec<String> = chunk.iter().filter_map(|o| { n += 1; event(n, o) }).collect();
                ls.emit(&lines.join("\n"), false).unwrap();
                let mut d = ls.derivers().await.unwrap();
                ls.catch_up(&mut d, 1_000, &mut |_| {}).await.unwrap();
                d.finish().await;
                for t in TABLES {
                    assert_eq!(index_rows(&ls, t), paimon_rows(&ls, t).await, "index of {t}");
                }
            }
            for t in TABLES {
                assert_eq!(replayed(&ls, t).await, paimon_rows(&ls, t).await, "changelog of {t}");
            }
        });
    }
}

/// A directory whose `stock` holds `n` rows (item `part-i` at `north`), derived and committed.
async fn stock_of(n: u32) -> (tempfile::TempDir, Livestate) {
    let (d, ls) = fresh().await;
    let lines: Vec<String> = (0..n)
        .map(|i| {
            line(
                i,
                "inventory.stock_counted",
                json!({"item": format!("part-{i}"), "location": "north", "on_hand": i64::from(i)}),
            )
        })
        .collect();
    ls.emit(&lines.join("\n"), false).unwrap();
    let mut d2 = ls.derivers().await.unwrap();
    ls.catch_up(&mut d2, 100_000, &mut |_| {}).await.unwrap();
    d2.finish().await;
    (d, ls)
}

/// A latest read of every row of `stock`, and the same read from the files alone.
async fn whole_reads(ls: &Livestate) -> (livestate_engine::Rows, livestate_engine::Rows) {
    let req = livestate_engine::ReadRequest {
        table: "stock".into(),
        keys: vec![],
        at: livestate_engine::At::Latest,
    };
    (ls.read(&req).await.unwrap(), ls.read_files(&req).await.unwrap())
}

#[tokio::test]
async fn a_whole_read_of_a_small_table_is_answered_by_the_index() {
    let (_d, ls) = stock_of(50).await;
    let (read, files) = whole_reads(&ls).await;
    assert_eq!(read.receipt.served_by, ServedBy::Index);
    assert_eq!(read.rows, files.rows);
    assert_eq!(
        (read.receipt.snapshot_id, read.receipt.offset),
        (files.receipt.snapshot_id, files.receipt.offset)
    );
}

#[tokio::test]
async fn a_whole_read_of_a_large_table_is_served_from_its_files_with_the_rows_the_index_holds() {
    let n = livestate_engine::read::WHOLE_READ_FROM_FILES_ROWS as u32;
    let (_d, ls) = stock_of(n).await;
    let (read, files) = whole_reads(&ls).await;
    assert_eq!(read.receipt.served_by, ServedBy::Paimon);
    assert_eq!(read.rows.len(), n as usize);
    assert_eq!(read.rows, files.rows, "in key order, as the index answers");
    assert_eq!(canon(read.rows.clone()), index_rows(&ls, "stock"));
    assert_eq!(
        (read.receipt.snapshot_id, read.receipt.offset),
        (files.receipt.snapshot_id, files.receipt.offset)
    );
}

#[tokio::test]
async fn a_filtered_read_of_a_large_table_is_still_answered_by_the_index() {
    let n = livestate_engine::read::WHOLE_READ_FROM_FILES_ROWS as u32;
    let (_d, ls) = stock_of(n).await;
    let (read, _) = whole_reads(&ls).await;
    let req = livestate_engine::ReadRequest {
        table: "stock".into(),
        keys: vec![("location".into(), "north".into())],
        at: livestate_engine::At::Latest,
    };
    let filtered = ls.read(&req).await.unwrap();
    assert_eq!(filtered.receipt.served_by, ServedBy::Index);
    assert_eq!(filtered.rows, read.rows);
}

#[tokio::test]
async fn a_point_lookup_is_answered_by_the_index_with_the_same_row_and_receipt() {
    let (_d, ls) = fresh().await;
    let lines: Vec<String> = (1..=6).map(|n| count(n, (n % 3) as u8, i64::from(n))).collect();
    ls.emit(&lines.join("\n"), false).unwrap();
    let mut d = ls.derivers().await.unwrap();
    ls.catch_up(&mut d, 1_000, &mut |_| {}).await.unwrap();
    let read = |keys: &[(&str, &str)], index: bool| {
        let req = livestate_engine::ReadRequest {
            table: "stock".into(),
            keys: keys.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            at: livestate_engine::At::Latest,
        };
        let ls = &ls;
        async move { if index { ls.read(&req).await } else { ls.read_files(&req).await }.unwrap() }
    };
    let key = [("item", "part-1"), ("location", "north")];
    let from_index = read(&key, true).await;
    let from_paimon = read(&key, false).await;
    assert_eq!(from_index.receipt.served_by, ServedBy::Index);
    assert_eq!(from_paimon.receipt.served_by, ServedBy::Paimon);
    assert_eq!(from_index.rows, from_paimon.rows);
    assert_eq!(from_index.rows.len(), 1);
    assert_eq!(from_index.receipt.snapshot_id, from_paimon.receipt.snapshot_id);
    assert_eq!(from_index.receipt.offset, from_paimon.receipt.offset);
    // Not every key column given: the index's rows are filtered, and agree with a scan.
    let partial = read(&[("item", "part-1")], true).await;
    assert_eq!(partial.receipt.served_by, ServedBy::Index);
    assert_eq!(partial.rows, read(&[("item", "part-1")], false).await.rows);
    // A key that is not there: no rows, still from the index.
    let none = read(&[("item", "part-9"), ("location", "north")], true).await;
    assert!(none.rows.is_empty() && none.receipt.served_by == ServedBy::Index);
    assert_eq!(from_index.receipt.committed_at, from_paimon.receipt.committed_at);
    assert_eq!(from_index.receipt.lag_ms.is_some(), from_paimon.receipt.lag_ms.is_some());

    // The index answers a latest read without opening a Paimon file: with the table's
    // snapshots out of reach, the key read still gets its row and receipt.
    let snapshots = ls.layout().warehouse_dir().join("state.db/stock/snapshot");
    let aside = snapshots.with_file_name("snapshot.aside");
    std::fs::rename(&snapshots, &aside).unwrap();
    let blind = read(&key, true).await;
    std::fs::rename(&aside, &snapshots).unwrap();
    assert_eq!((blind.rows, blind.receipt), (from_index.rows.clone(), from_index.receipt.clone()));
}

/// A read answered by the index returns the rows of exactly the commit its receipt names, even
/// while the next commit is being applied (reads outside one view could see a commit's new rows
/// under the previous commit's snapshot id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_read_pairs_rows_with_the_snapshot_they_belong_to_while_commits_are_applied() {
    let (_d, ls) = fresh().await;
    ls.emit(&count(1, 1, 1), false).unwrap();
    let mut d = ls.derivers().await.unwrap();
    ls.catch_up(&mut d, 1_000, &mut |_| {}).await.unwrap();
    let key = [("item", "part-1"), ("location", "north")];
    let key_values: Vec<Value> = key.iter().map(|(_, v)| Value::String(v.to_string())).collect();
    let key_bytes = livestate_engine::index::key_bytes(key_values.iter());
    let template = ls.current_row("stock", &key_values).unwrap().expect("the counted row");
    let on_hand = ls.spec().table("stock").unwrap().columns.get_index_of("on_hand").unwrap();

    // Commit n sets on_hand to n and names snapshot FIRST + n (past the derivers' own). It also
    // writes 2,000 other rows after the one read, so applying it takes long enough for reads
    // to land in the middle.
    const FIRST: i64 = 1_000_000;
    let commits: i64 = 300;
    let item = ls.spec().table("stock").unwrap().columns.get_index_of("item").unwrap();
    let fillers: Vec<(Vec<u8>, Vec<Value>)> = (0..2_000)
        .map(|i| {
            let mut row = template.clone();
            row[item] = Value::String(format!("filler-{i}"));
            (livestate_engine::index::key_bytes([row[item].clone(), key_values[1].clone()].iter()), row)
        })
        .collect();
    // An index of its own, which this test writes as the derivers would (the directory's own
    // index is written only by its derivers), holding the counted row as of commit 0.
    let index_dir = tempfile::tempdir().unwrap();
    let catalog = livestate_engine::open_catalog(ls.layout()).unwrap();
    let index =
        std::sync::Arc::new(livestate_engine::index::Index::open(index_dir.path(), ls.spec()).unwrap());
    let first =
        livestate_engine::index::IndexMeta { identifier: 0, snapshot_id: Some(FIRST), committed_at_ms: None };
    index.apply("stock", std::iter::once((key_bytes.as_slice(), Some(template.as_slice()))), first).unwrap();
    let reader_index = std::sync::Arc::clone(&index);
    let reader_key = key_bytes.clone();
    let writer = std::thread::spawn(move || {
        for n in 1..=commits {
            let mut row = template.clone();
            row[on_hand] = Value::Int(n);
            let meta = livestate_engine::index::IndexMeta {
                identifier: 0,
                snapshot_id: Some(FIRST + n),
                committed_at_ms: Some(1_772_438_400_000 + n),
            };
            let changes = std::iter::once((key_bytes.as_slice(), Some(row.as_slice())))
                .chain(fillers.iter().map(|(k, r)| (k.as_slice(), Some(r.as_slice()))));
            index.apply("stock", changes, meta).unwrap();
        }
    });
    let req = livestate_engine::ReadRequest {
        table: "stock".into(),
        keys: key.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        at: livestate_engine::At::Latest,
    };
    let mut checked = 0;
    let mut viewed = 0;
    while !writer.is_finished() {
        // The view itself: what it read is one commit's whenever it says nothing changed.
        let view = reader_index.view();
        let meta = view.meta("stock").unwrap().unwrap();
        let row = view.get("stock", &reader_key).unwrap().unwrap();
        if let Some(snapshot) = meta.snapshot_id.filter(|&s| s > FIRST && view.unchanged()) {
            assert_eq!(row[on_hand], Value::Int(snapshot - FIRST), "a view mixed two commits");
            viewed += 1;
        }
        let read =
            livestate_engine::read::read(&catalog, ls.spec(), &req, &ls.lag_source(), Some(&*reader_index))
                .await
                .unwrap();
        if read.receipt.served_by != ServedBy::Index {
            continue;
        }
        let Some(snapshot) = read.receipt.snapshot_id.filter(|&s| s > FIRST) else { continue };
        assert_eq!(
            read.rows[0][on_hand],
            Value::Int(snapshot - FIRST),
            "rows of another commit than {:?}",
            read.receipt
        );
        checked += 1;
    }
    writer.join().unwrap();
    assert!(
        checked > 100 && viewed > 100,
        "only {checked} reads and {viewed} views while the commits were applied"
    );
}

/// A `where` condition reads the rows it holds for, whether the lookup index answers (skipping
/// rows by their stored bytes first) or Paimon does: the same rows as filtering every row by
/// hand, also when the value sought appears in another column, holds a quote or is not ASCII.
#[tokio::test]
async fn a_where_condition_reads_the_same_rows_from_the_index_and_from_paimon() {
    let (_d, ls) = fresh().await;
    let items = ["part-1", "part-10", "pa\"rt-1", "pärt-1"];
    let lines: Vec<String> = (1..=24u32)
        .map(|n| {
            let item = items[n as usize % items.len()];
            // The customer of every third order is named like an item.
            let customer = if n % 3 == 0 { "part-1".to_string() } else { format!("c-{n}") };
            line(
                n,
                "commerce.order_placed",
                json!({"order_id": format!("so-{}", n % 7), "line": n, "customer": customer, "item": item,
                       "location": "north", "qty": n % 5 + 1, "unit_price": "2.50"}),
            )
        })
        .collect();
    ls.emit(&lines.join("\n"), false).unwrap();
    common::derive(&ls).await;
    let ts = ls.spec().table("open_orders").unwrap();
    let col = |n: &str| ts.columns.get_index_of(n).unwrap();
    let all = ls.indexed_rows("open_orders").unwrap();
    let latest = livestate_engine::ReadRequest {
        table: "open_orders".into(),
        keys: Vec::new(),
        at: livestate_engine::At::Latest,
    };
    let snapshot = ls.read_files(&latest).await.unwrap().receipt.snapshot_id;
    for condition in [
        "item == 'part-1'",
        "'pa\"rt-1' == item",
        "item == 'pärt-1' and qty > 2",
        "customer == 'part-1' and item == 'part-10'",
        "item == 'part-1' or qty == 5",
        "order_id == 'so-3' and line == 10",
        "line == 24 and order_id == 'so-3'",
        "item == 'part-2'",
    ] {
        let expr = livestate_engine::read::parse_where(ts, condition).unwrap();
        let by_hand: Vec<Vec<Value>> = all
            .iter()
            .filter(|r| expr.holds(&|n: &str| ts.columns.get_index_of(n).map(|i| r[i].clone())).unwrap())
            .cloned()
            .collect();
        for (at, index) in [
            (livestate_engine::At::Latest, true),
            (livestate_engine::At::Latest, false),
            (livestate_engine::At::Snapshot(snapshot.unwrap()), false),
        ] {
            let req = livestate_engine::ReadRequest {
                table: "open_orders".into(),
                keys: Vec::new(),
                at: at.clone(),
            };
            let reader = if index { ls.reader() } else { ls.reader().without_index() };
            let rows = reader.read_where(&req, Some(&expr)).await.unwrap();
            assert_eq!(
                rows.receipt.served_by,
                if index { ServedBy::Index } else { ServedBy::Paimon },
                "{condition}"
            );
            assert_eq!(canon(rows.rows), canon(by_hand.clone()), "{condition} at {at:?}, index {index}");
        }
    }
    // The value sought in another column does not make a row match.
    assert!(all.iter().any(|r| r[col("customer")] == Value::String("part-1".into())
        && r[col("item")] != Value::String("part-1".into())));
}
