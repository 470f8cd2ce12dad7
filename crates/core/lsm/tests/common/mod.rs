#![allow(dead_code)]
//! A small Paimon table harness: create a table with a merge engine, write rows with row
//! kinds through the `paimon` crate's own writer, read what a Paimon reader sees.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_array::{Array, Int64Array, Int8Array, RecordBatch, StringArray};
use arrow_schema::{DataType as ADT, Field, Schema as ASchema};
use futures::TryStreamExt;
use livestate_lsm::{CommitLock, Maintainer};
use paimon::catalog::Identifier;
use paimon::spec::{BigIntType, DataType, RowKind, Schema, VarCharType};
use paimon::{Catalog, FileSystemCatalog, Options, Table, TableCommit, TableWrite};

/// Key, `a` (bigint), `b` (string); `None` is SQL null.
pub type Row = (i64, Option<i64>, Option<String>);

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub catalog: FileSystemCatalog,
    pub table: Table,
    write: TableWrite,
    commit: TableCommit,
    pub lock: CommitLock,
    pub maintainer: Maintainer,
    identifier: i64,
}

/// A new table `db.<name>` of schema `b` with `options`, in a warehouse under `dir`, with a
/// writer, a committer and a maintainer sharing one commit lock.
pub async fn create_table(
    dir: &std::path::Path,
    name: &str,
    mut b: paimon::spec::SchemaBuilder,
    options: &[(&str, &str)],
) -> (FileSystemCatalog, Table, TableWrite, TableCommit, CommitLock, Maintainer) {
    let mut o = Options::new();
    o.set("warehouse", dir.join("wh").to_str().unwrap());
    let catalog = FileSystemCatalog::new(o).unwrap();
    catalog.create_database("db", true, HashMap::new()).await.unwrap();
    for (k, v) in options {
        b = b.option(*k, *v);
    }
    let id = Identifier::new("db", name);
    catalog.create_table(&id, b.build().unwrap(), false).await.unwrap();
    let table = catalog.get_table(&id).await.unwrap();
    let wb = table.new_write_builder().with_commit_user("writer").unwrap();
    let write = wb.new_write().unwrap();
    let commit = wb.new_commit();
    let lock = CommitLock::default();
    let maintainer = Maintainer::new(table.clone(), format!("db.{name}"), lock.clone()).unwrap();
    (catalog, table, write, commit, lock, maintainer)
}

pub async fn harness(options: &[(&str, &str)]) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let b = Schema::builder()
        .column("k", DataType::BigInt(BigIntType::new()))
        .column("a", DataType::BigInt(BigIntType::new()))
        .column("b", DataType::VarChar(VarCharType::string_type()))
        .primary_key(["k"])
        .option("bucket", "2");
    let (catalog, table, write, commit, lock, maintainer) = create_table(dir.path(), "t", b, options).await;
    Harness { dir, catalog, table, write, commit, lock, maintainer, identifier: 0 }
}

fn batch(rows: &[(RowKind, Row)]) -> RecordBatch {
    let schema = Arc::new(ASchema::new(vec![
        Field::new("k", ADT::Int64, false),
        Field::new("a", ADT::Int64, true),
        Field::new("b", ADT::Utf8, true),
        Field::new("_VALUE_KIND", ADT::Int8, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(rows.iter().map(|(_, r)| r.0).collect::<Vec<_>>())),
            Arc::new(Int64Array::from(rows.iter().map(|(_, r)| r.1).collect::<Vec<_>>())),
            Arc::new(StringArray::from(rows.iter().map(|(_, r)| r.2.clone()).collect::<Vec<_>>())),
            Arc::new(Int8Array::from(rows.iter().map(|(k, _)| k.to_value()).collect::<Vec<_>>())),
        ],
    )
    .unwrap()
}

/// `rows` as the table's columns alone, and their row kinds beside them (what a
/// [`livestate_lsm::Level0Writer`] takes).
pub fn columns_and_kinds(rows: &[(RowKind, Row)]) -> (RecordBatch, Vec<RowKind>) {
    let b = batch(rows);
    (b.project(&[0, 1, 2]).unwrap(), rows.iter().map(|(k, _)| *k).collect())
}

impl Harness {
    /// Commits `messages` as one snapshot (under the shared commit lock), by the harness's
    /// commit user with its next identifier.
    pub async fn commit_messages(&mut self, messages: Vec<paimon::CommitMessage>) {
        self.identifier += 1;
        let _guard = self.lock.lock().await;
        self.commit.commit_with_identifier(messages, self.identifier).await.unwrap();
    }

    /// Writes `rows` and commits them as one snapshot (under the shared commit lock).
    pub async fn commit(&mut self, rows: &[(RowKind, Row)]) {
        if !rows.is_empty() {
            self.write.write_arrow_batch(&batch(rows)).await.unwrap();
        }
        let messages = self.write.prepare_commit().await.unwrap();
        self.identifier += 1;
        let _guard = self.lock.lock().await;
        self.commit.commit_with_identifier(messages, self.identifier).await.unwrap();
    }

    /// Rows a Paimon reader sees at `table` (all files planned, so level 0 counts too).
    pub async fn read_all(&self) -> BTreeMap<i64, (Option<i64>, Option<String>)> {
        read(&self.table, true).await
    }

    /// Rows a default Paimon batch scan sees (first-row tables skip level 0 there).
    pub async fn read_default(&self) -> BTreeMap<i64, (Option<i64>, Option<String>)> {
        read(&self.table, false).await
    }

    pub async fn read_tag(&self, tag: &str) -> BTreeMap<i64, (Option<i64>, Option<String>)> {
        let t = self
            .table
            .copy_with_time_travel_strict(HashMap::from([("scan.tag-name".to_string(), tag.to_string())]))
            .await
            .unwrap();
        read(&t, true).await
    }
}

pub async fn read(table: &Table, all_files: bool) -> BTreeMap<i64, (Option<i64>, Option<String>)> {
    let rb = table.new_read_builder();
    let scan = if all_files { rb.new_scan().with_scan_all_files() } else { rb.new_scan() };
    let plan = scan.plan().await.unwrap();
    let batches: Vec<RecordBatch> =
        rb.new_read().unwrap().to_arrow(plan.splits()).unwrap().try_collect().await.unwrap();
    let mut out = BTreeMap::new();
    for b in batches {
        let k = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let a = b.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
        let s = b.column(2).as_any().downcast_ref::<StringArray>().unwrap();
        for i in 0..b.num_rows() {
            let prev = out.insert(
                k.value(i),
                ((!a.is_null(i)).then(|| a.value(i)), (!s.is_null(i)).then(|| s.value(i).to_string())),
            );
            assert!(prev.is_none(), "key {} read twice", k.value(i));
        }
    }
    out
}
