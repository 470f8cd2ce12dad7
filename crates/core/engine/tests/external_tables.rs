//! A table another engine derives (`derived_by = "external"`, e.g. Flink running the INSERTs of
//! `livestate export flink-sql`): livestate never writes, compacts or expires it, reads it from
//! Paimon with a receipt that claims no record offset, pins tags on it, and the export hands
//! exactly it over, from the first record offset livestate's own commits did not cover.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int8Array, RecordBatch, StringArray, TimestampMillisecondArray};
use arrow_schema::{DataType, Field, Schema};
use common::{derive, line, rows};
use livestate_engine::flink::{flink_sql, FlinkTarget};
use livestate_engine::{At, EngineError, Livestate, ReadRequest};
use serde_json::json;

const FLINK_USER: &str = "flink-job-7f3a";

/// The example company's spec, with `derived_by = "external"` on each of `external`.
fn spec_with_external(root: &Path, external: &[&str]) -> PathBuf {
    let mut files = livestate_testkit::example_spec();
    for t in external {
        files = files.derived_externally(t);
    }
    files.write(&root.join("spec"))
}

/// Adds `derived_by = "external"` under `[tables.<t>]` in the spec directory's tables.toml.
fn mark_external(spec_dir: &Path, external: &[&str]) {
    let mut files = livestate_testkit::SpecFiles::load(spec_dir);
    for t in external {
        files = files.derived_externally(t);
    }
    files.save();
}

fn risk(n: u32, supplier: &str, level: &str) -> String {
    line(
        n,
        "procurement.supplier_risk_assessed",
        json!({"supplier": supplier, "level": level, "reason": "audit"}),
    )
}

fn count(n: u32, on_hand: i64) -> String {
    line(n, "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": on_hand}))
}

/// Commits `rows` (supplier, level) into `state.supplier_risk` as another engine would: its own
/// commit user, its checkpoint number as the commit identifier.
async fn flink_commits(ls: &Livestate, rows: &[(&str, &str)], checkpoint: i64) {
    let table = ls.table("supplier_risk").await.unwrap();
    let base = paimon::arrow::build_target_arrow_schema(table.schema().fields()).unwrap();
    let mut fields: Vec<Field> = base.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(paimon::spec::VALUE_KIND_FIELD_NAME, DataType::Int8, false));
    let schema = Arc::new(Schema::new(fields));
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| -> ArrayRef {
            match (f.name().as_str(), f.data_type()) {
                ("supplier", _) => Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                ("level", _) => Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
                ("reason", _) => Arc::new(StringArray::from_iter_values(rows.iter().map(|_| "flink"))),
                (_, DataType::Timestamp(_, _)) => Arc::new(
                    TimestampMillisecondArray::from_iter_values(rows.iter().map(|_| 1_772_438_400_000))
                        .with_data_type(f.data_type().clone()),
                ),
                (_, DataType::Int8) => Arc::new(Int8Array::from_iter_values(rows.iter().map(|_| 0))),
                (name, ty) => panic!("unexpected column {name} {ty}"),
            }
        })
        .collect();
    let batch = RecordBatch::try_new(schema, columns).unwrap();
    let wb = table.new_write_builder().with_commit_user(FLINK_USER).unwrap();
    let mut write = wb.new_write().unwrap();
    write.write_arrow_batch(&batch).await.unwrap();
    let messages = write.prepare_commit().await.unwrap();
    wb.new_commit().commit_with_identifier(messages, checkpoint).await.unwrap();
}

async fn snapshots(ls: &Livestate, table: &str) -> Vec<(i64, String, i64)> {
    let t = ls.table(table).await.unwrap();
    let sm = t.snapshot_manager();
    let mut out = Vec::new();
    for id in sm.list_all_ids().await.unwrap() {
        let s = sm.get_snapshot(id).await.unwrap();
        out.push((id, s.commit_user().to_string(), s.commit_identifier()));
    }
    out
}

async fn read(ls: &Livestate, table: &str, keys: &[(&str, &str)], at: At) -> livestate_engine::Rows {
    let req = ReadRequest {
        table: table.into(),
        keys: keys.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        at,
    };
    ls.read(&req).await.unwrap()
}

#[tokio::test]
async fn an_external_table_is_never_written_by_livestate_and_reads_what_its_engine_committed() {
    let root = tempfile::tempdir().unwrap();
    let spec = spec_with_external(root.path(), &["supplier_risk"]);
    let ls = Livestate::init(&root.path().join("d"), &spec).await.unwrap();
    ls.emit(&[risk(1, "s1", "high"), count(2, 40)].join("\n"), false).unwrap();
    derive(&ls).await;
    assert!(snapshots(&ls, "supplier_risk").await.is_empty(), "livestate derived an external table");
    assert_eq!(rows(&ls, "stock", &[]).await.len(), 1, "the other tables are derived as before");
    let empty = read(&ls, "supplier_risk", &[], At::Latest).await;
    assert!(empty.rows.is_empty());
    assert_eq!(
        (empty.receipt.snapshot_id, empty.receipt.offset, empty.receipt.lag_ms, empty.receipt.measured_by),
        (None, None, None, livestate_engine::read::MeasuredBy::External)
    );

    // The other engine commits; livestate serves exactly that, from Paimon.
    flink_commits(&ls, &[("s1", "high"), ("s2", "low")], 7).await;
    let got = read(&ls, "supplier_risk", &[], At::Latest).await;
    let levels: Vec<(String, String)> =
        got.json_rows().iter().map(|r| (r["supplier"].to_string(), r["level"].to_string())).collect();
    assert_eq!(levels, [("\"s1\"".into(), "\"high\"".into()), ("\"s2\"".into(), "\"low\"".into())]);
    assert_eq!(got.receipt.snapshot_id, Some(1));
    assert_eq!(got.receipt.offset, None, "a checkpoint number is not a record offset");
    assert_eq!(
        (got.receipt.measured_by, got.receipt.served_by),
        (livestate_engine::read::MeasuredBy::External, livestate_engine::read::ServedBy::Paimon)
    );
    assert!(got.receipt.committed_at.is_some());
    let one = read(&ls, "supplier_risk", &[("supplier", "s2")], At::Latest).await;
    assert_eq!(one.rows.len(), 1);

    // More events, another derivation: still nothing of livestate's in the table.
    ls.emit(&risk(3, "s3", "medium"), false).unwrap();
    derive(&ls).await;
    assert_eq!(snapshots(&ls, "supplier_risk").await, [(1, FLINK_USER.to_string(), 7)]);

    // Upkeep is the other engine's; consistent reads at one offset cannot include it.
    assert!(!ls.table_names().iter().any(|t| t == "supplier_risk"));
    let refused = ls.maintainer("supplier_risk").await.err().expect("compaction of an external table");
    assert!(
        matches!(&refused, EngineError::BadRequest { table, .. } if table == "supplier_risk"),
        "{refused}"
    );
    assert!(refused.to_string().contains("derived_by = \"external\""), "{refused}");
    let mut derivers = ls.derivers().await.unwrap();
    let at = ls.record().next_offset();
    let e = ls.barrier(&mut derivers, &["stock".into(), "supplier_risk".into()], at).await;
    assert!(e.unwrap_err().to_string().contains("cannot join a read as of one offset"));

    // A proposal's evidence is pinned on it like on any table, and read back from the tag.
    let pins = ls.external_maintainers().await.unwrap();
    pins["supplier_risk"].pin("proposal-p1-s1", 1, Some("400 d")).await.unwrap();
    flink_commits(&ls, &[("s1", "low")], 8).await;
    let tagged = read(&ls, "supplier_risk", &[("supplier", "s1")], At::Tag("proposal-p1-s1".into())).await;
    assert_eq!(tagged.json_rows()[0]["level"], "high");
    assert_eq!((tagged.receipt.snapshot_id, tagged.receipt.offset), (Some(1), None));
    assert_eq!(
        read(&ls, "supplier_risk", &[("supplier", "s1")], At::Latest).await.json_rows()[0]["level"],
        "low"
    );
}

#[tokio::test]
async fn export_hands_a_table_over_from_the_first_offset_its_last_livestate_commit_did_not_cover() {
    let root = tempfile::tempdir().unwrap();
    let spec = spec_with_external(root.path(), &[]);
    let dir = root.path().join("d");
    let handed_over_at;
    {
        let ls = Livestate::init(&dir, &spec).await.unwrap();
        ls.emit(&[risk(1, "s1", "high"), count(2, 40), risk(3, "s2", "low"), count(4, 41)].join("\n"), false)
            .unwrap();
        derive(&ls).await;
        let own = snapshots(&ls, "supplier_risk").await;
        handed_over_at = own.last().expect("livestate derived the table").2;
        assert_eq!(handed_over_at, 4, "its last commit reflects the four events");
    }
    // The handover: the stored spec marks the table external.
    let target = FlinkTarget {
        warehouse: "s3://acme/warehouse".into(),
        kafka_topic: "acme.record".into(),
        kafka_bootstrap: "kafka-1:9092".into(),
    };
    let layout = livestate_engine::Layout::new(&dir).unwrap();
    mark_external(&layout.spec_dir(), &["supplier_risk"]);
    let sql = flink_sql(&layout, &target).await.unwrap();
    assert!(sql.contains("-- Handover: Flink derives supplier_risk"), "{sql}");
    let inserts: Vec<&str> = sql.matches("INSERT INTO `livestate`.`state`.`").collect();
    assert_eq!(inserts.len(), 1, "only the external table's mapping is a job:\n{sql}");
    assert!(sql.contains("INSERT INTO `livestate`.`state`.`supplier_risk`"), "{sql}");
    assert!(
        sql.contains(&format!("'scan.startup.specific-offsets' = 'partition:0,offset:{handed_over_at}'")),
        "Flink starts where livestate stopped:\n{sql}"
    );
    assert!(sql.contains("-- not exported: `stock` is derived by livestate"), "{sql}");
    // Every table is still created (IF NOT EXISTS), so the catalog knows them all.
    assert!(sql.contains("CREATE TABLE IF NOT EXISTS `livestate`.`state`.`stock`"), "{sql}");

    // livestate no longer writes it; its other tables go on.
    let ls = Livestate::open(&dir).await.unwrap();
    let before = snapshots(&ls, "supplier_risk").await;
    ls.emit(&[risk(5, "s3", "medium"), count(6, 42)].join("\n"), false).unwrap();
    derive(&ls).await;
    assert_eq!(snapshots(&ls, "supplier_risk").await, before);
    assert_eq!(rows(&ls, "stock", &[]).await[0]["on_hand"], 42);
    // Reads of it no longer come from livestate's index (which stopped following it).
    let r = read(&ls, "supplier_risk", &[("supplier", "s1")], At::Latest).await;
    assert_eq!(
        (r.receipt.served_by, r.receipt.offset, r.rows.len()),
        (livestate_engine::read::ServedBy::Paimon, None, 1)
    );
}
