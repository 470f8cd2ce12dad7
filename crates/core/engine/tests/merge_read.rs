//! livestate's own merge-on-read, into rows and into Arrow columns, gives the rows the `paimon`
//! crate's reader gives, for tables of all four merge engines (partial-update, deduplicate with
//! deletes, aggregation, first-row), after every commit and after compactions that leave
//! deletes in the middle of the tree.

mod common;

use common::workload::{event, event_or_compaction, Op, TABLES};
use common::{canon, fresh, line};
use livestate_engine::read::{paimon_scan_all, rows_of, scan_all, scan_all_batches};
use livestate_engine::Livestate;
use livestate_spec::expr::compare;
use livestate_spec::Value;
use proptest::prelude::*;
use serde_json::json;

/// Each table read by livestate's merge and by the crate's, which must agree.
async fn assert_reads_agree(ls: &Livestate, when: &str) {
    for name in TABLES {
        let ts = ls.spec().table(name).unwrap();
        let t = ls.table(name).await.unwrap();
        let own = scan_all(&t, ts).await.unwrap();
        let key_idx: Vec<usize> =
            ts.primary_key.iter().map(|k| ts.columns.get_index_of(k).unwrap()).collect();
        let key = |r: &Vec<Value>| key_idx.iter().map(|&i| r[i].clone()).collect::<Vec<_>>();
        for pair in own.windows(2) {
            let (a, b) = (key(&pair[0]), key(&pair[1]));
            let order = a.iter().zip(&b).map(|(x, y)| compare(x, y).unwrap()).find(|o| o.is_ne());
            assert_eq!(
                order,
                Some(std::cmp::Ordering::Less),
                "{name} {when}: rows in key order, {a:?} then {b:?}"
            );
        }
        let paimon = canon(paimon_scan_all(&t, ts).await.unwrap());
        assert_eq!(canon(own), paimon, "{name} {when}: livestate's merge against the paimon crate's");
        let batches = scan_all_batches(&t, ts).await.unwrap();
        let columnar: Vec<Vec<Value>> = batches.iter().flat_map(|b| rows_of(b, ts).unwrap()).collect();
        assert_eq!(
            canon(columnar),
            paimon,
            "{name} {when}: livestate's columnar merge against the paimon crate's"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn livestate_merges_every_engine_as_paimon_does_across_commits_and_compactions(
        chunks in proptest::collection::vec(proptest::collection::vec(event_or_compaction(5), 1..10), 1..10)
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let (_d, ls) = fresh().await;
            let mut n = 0;
            for (c, chunk) in chunks.iter().enumerate() {
                let lines: Vec<String> = chunk.iter().filter_map(|o| { n += 1; event(n, o) }).collect();
                if !lines.is_empty() {
                    ls.emit(&lines.join("\n"), false).unwrap();
                    let mut d = ls.derivers().await.unwrap();
                    ls.catch_up(&mut d, 1_000, &mut |_| {}).await.unwrap();
                    d.finish().await;
                }
                assert_reads_agree(&ls, &format!("after chunk {c}")).await;
                for mode in chunk.iter().filter_map(|o| match o { Op::Compact(m) => Some(m), _ => None }) {
                    for name in TABLES {
                        ls.maintainer(name).await.unwrap().compact(*mode, |_, _| {}).await.unwrap();
                    }
                    assert_reads_agree(&ls, &format!("after {mode:?} in chunk {c}")).await;
                }
            }
        });
    }
}

/// The merge is livestate's own for every table it derives: a table whose files the crate's
/// reader would merge key by key reads the same through both, and a scan with a filter keeps
/// exactly the rows the filter names.
#[tokio::test]
async fn a_filtered_read_through_livestates_merge_keeps_exactly_the_named_rows() {
    let (_d, ls) = fresh().await;
    let lines: Vec<String> = (0..40u32)
        .map(|n| {
            let item = format!("part-{}", n % 7);
            line(n, "inventory.stock_counted", json!({"item": item, "location": "north", "on_hand": n}))
        })
        .collect();
    ls.emit(&lines.join("\n"), false).unwrap();
    common::derive(&ls).await;
    let req = livestate_engine::ReadRequest {
        table: "stock".into(),
        keys: vec![("item".into(), "part-3".into())],
        at: livestate_engine::At::Latest,
    };
    let rows = ls.reader().without_index().read(&req).await.unwrap();
    assert_eq!(rows.rows.len(), 1, "one row of part-3: {:?}", rows.rows);
    assert_eq!(rows.rows[0][0], Value::String("part-3".into()));
    assert_eq!(rows.rows[0][2], Value::Int(38), "the last count of part-3 (events 3, 10, ..., 38)");
    // A filter on a value column holds for the merged row only: part-3's older counts do not
    // match it, its last one does.
    let by_value = |on_hand: &str| livestate_engine::ReadRequest {
        table: "stock".into(),
        keys: vec![("on_hand".into(), on_hand.into())],
        at: livestate_engine::At::Latest,
    };
    assert!(ls.reader().without_index().read(&by_value("3")).await.unwrap().rows.is_empty());
    assert_eq!(ls.reader().without_index().read(&by_value("38")).await.unwrap().rows.len(), 1);
    // An integer key column, whole keys and part of one.
    let orders: Vec<String> = (0..6u32)
        .map(|l| {
            let data = json!({"order_id": "o1", "line": l, "customer": "c", "item": "part-1",
                "location": "north", "qty": 1 + l, "unit_price": "2.50"});
            line(100 + l, "commerce.order_placed", data)
        })
        .collect();
    ls.emit(&orders.join("\n"), false).unwrap();
    common::derive(&ls).await;
    let order_line = |keys: &[(&str, &str)]| livestate_engine::ReadRequest {
        table: "open_orders".into(),
        keys: keys.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        at: livestate_engine::At::Latest,
    };
    let files = ls.reader().without_index();
    let one = files.read(&order_line(&[("order_id", "o1"), ("line", "4")])).await.unwrap();
    assert_eq!(one.rows.len(), 1, "{:?}", one.rows);
    assert_eq!(one.rows[0][1], Value::Int(4));
    assert_eq!(files.read(&order_line(&[("line", "5")])).await.unwrap().rows.len(), 1);
    assert_eq!(files.read(&order_line(&[("order_id", "o1")])).await.unwrap().rows.len(), 6);
    assert!(files.read(&order_line(&[("order_id", "o2")])).await.unwrap().rows.is_empty());
}

/// A full read as Arrow batches gives the rows and the receipt a full read from the files
/// gives, at the latest version and at a past snapshot; an unknown table is named.
#[tokio::test]
async fn a_columnar_scan_reads_what_a_full_read_reads_now_and_at_a_past_snapshot() {
    let (_d, ls) = fresh().await;
    let counts = |from: u32, on_hand: i64| -> Vec<String> {
        (from..from + 12)
            .map(|n| {
                let data =
                    json!({"item": format!("part-{}", n % 6), "location": "north", "on_hand": on_hand});
                line(n, "inventory.stock_counted", data)
            })
            .collect()
    };
    ls.emit(&counts(0, 5).join("\n"), false).unwrap();
    common::derive(&ls).await;
    let files = ls.reader().without_index();
    let full = |at| livestate_engine::ReadRequest { table: "stock".into(), keys: vec![], at };
    let first = files.read(&full(livestate_engine::At::Latest)).await.unwrap();
    let past = livestate_engine::At::Snapshot(first.receipt.snapshot_id.unwrap());
    ls.emit(&counts(100, 9).join("\n"), false).unwrap();
    common::derive(&ls).await;
    for at in [livestate_engine::At::Latest, past] {
        let rows = files.read(&full(at.clone())).await.unwrap();
        let batches = ls.reader().scan_batches("stock", &at).await.unwrap();
        let ts = ls.spec().table("stock").unwrap();
        let columnar: Vec<Vec<Value>> =
            batches.batches.iter().flat_map(|b| rows_of(b, ts).unwrap()).collect();
        assert_eq!(batches.num_rows(), 6, "{at:?}");
        assert_eq!(canon(columnar), canon(rows.rows), "{at:?}");
        assert_eq!(batches.columns, rows.columns);
        assert_eq!(batches.receipt.snapshot_id, rows.receipt.snapshot_id, "{at:?}");
        assert_eq!(batches.receipt.offset, rows.receipt.offset, "{at:?}");
    }
    let e = ls.reader().scan_batches("stok", &livestate_engine::At::Latest).await.unwrap_err();
    assert!(e.to_string().contains("stok"), "{e}");
}
