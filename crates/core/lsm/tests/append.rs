//! Compaction of append tables: small files merged in write order, committed as COMPACT
//! snapshots that every Paimon reader (and time travel) reads correctly.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType as ADT, Field, Schema as ASchema};
use futures::TryStreamExt;
use livestate_lsm::{CommitLock, CompactMode, Maintainer};
use paimon::spec::{BigIntType, CommitKind, DataType, Schema, VarCharType};
use paimon::{Table, TableCommit, TableWrite};

struct Append {
    _dir: tempfile::TempDir,
    table: Table,
    write: TableWrite,
    commit: TableCommit,
    lock: CommitLock,
    maintainer: Maintainer,
    identifier: i64,
    next: i64,
}

async fn append_table(options: &[(&str, &str)]) -> Append {
    let dir = tempfile::tempdir().unwrap();
    let b = Schema::builder()
        .column("n", DataType::BigInt(BigIntType::new()))
        .column("s", DataType::VarChar(VarCharType::string_type()))
        .column("day", DataType::VarChar(VarCharType::string_type()))
        .partition_keys(["day"]);
    let (_, table, write, commit, lock, maintainer) =
        common::create_table(dir.path(), "events", b, options).await;
    Append { _dir: dir, table, write, commit, lock, maintainer, identifier: 0, next: 0 }
}

impl Append {
    /// One commit of `rows` rows into each of the days `d1` and `d2` (`n` counts up).
    async fn commit(&mut self, rows: usize) {
        for day in ["d1", "d2"] {
            let n: Vec<i64> = (self.next..self.next + rows as i64).collect();
            self.next += rows as i64;
            let schema = Arc::new(ASchema::new(vec![
                Field::new("n", ADT::Int64, true),
                Field::new("s", ADT::Utf8, true),
                Field::new("day", ADT::Utf8, true),
            ]));
            let batch = RecordBatch::try_new(
                schema,
                vec![
                    Arc::new(Int64Array::from(n.clone())),
                    Arc::new(StringArray::from(n.iter().map(|v| format!("event {v}")).collect::<Vec<_>>())),
                    Arc::new(StringArray::from(vec![day; rows])),
                ],
            )
            .unwrap();
            self.write.write_arrow_batch(&batch).await.unwrap();
        }
        let messages = self.write.prepare_commit().await.unwrap();
        self.identifier += 1;
        let _guard = self.lock.lock().await;
        self.commit.commit_with_identifier(messages, self.identifier).await.unwrap();
    }

    /// The number of files of the latest snapshot, per partition.
    async fn files(&self) -> HashMap<Vec<u8>, usize> {
        let latest = self.table.snapshot_manager().get_latest_snapshot_id().await.unwrap().unwrap();
        let buckets =
            livestate_lsm::live_files(&self.table, "db.events", &livestate_lsm::Version::Snapshot(latest))
                .await
                .unwrap();
        let mut out = HashMap::new();
        for b in buckets {
            *out.entry(b.partition.to_serialized_bytes()).or_default() += b.files.len();
        }
        out
    }
}

/// `(day, n, s)` of every row `table` reads, in the order it reads them.
async fn rows(table: &Table) -> Vec<(String, i64, String)> {
    let rb = table.new_read_builder();
    let plan = rb.new_scan().plan().await.unwrap();
    let batches: Vec<RecordBatch> =
        rb.new_read().unwrap().to_arrow(plan.splits()).unwrap().try_collect().await.unwrap();
    let mut out = Vec::new();
    for b in batches {
        let n = b.column_by_name("n").unwrap().as_any().downcast_ref::<Int64Array>().unwrap();
        let s = b.column_by_name("s").unwrap().as_any().downcast_ref::<StringArray>().unwrap();
        let d = b.column_by_name("day").unwrap().as_any().downcast_ref::<StringArray>().unwrap();
        for i in 0..b.num_rows() {
            out.push((d.value(i).to_string(), n.value(i), s.value(i).to_string()));
        }
    }
    out
}

fn sorted(mut v: Vec<(String, i64, String)>) -> Vec<(String, i64, String)> {
    v.sort();
    v
}

async fn at_snapshot(table: &Table, id: i64) -> Table {
    table
        .copy_with_time_travel_strict(HashMap::from([("scan.snapshot-id".to_string(), id.to_string())]))
        .await
        .unwrap()
}

#[tokio::test]
async fn small_files_of_an_append_table_merge_into_one_per_partition_with_every_row_in_order() {
    let mut t = append_table(&[]).await;
    for _ in 0..12 {
        t.commit(50).await;
    }
    let before = rows(&t.table).await;
    assert_eq!(before.len(), 1200);
    assert_eq!(t.files().await.values().sum::<usize>(), 24);
    let last_data = t.table.snapshot_manager().get_latest_snapshot_id().await.unwrap().unwrap();

    let report = t.maintainer.compact(CompactMode::Auto, |_, _| {}).await.unwrap();
    assert_eq!((report.buckets, report.files_in, report.files_out), (2, 24, 2), "{report:?}");
    assert_eq!((report.rows_in, report.rows_out), (1200, 1200));
    let latest = t.table.snapshot_manager().get_latest_snapshot().await.unwrap().unwrap();
    assert_eq!(Some(latest.id()), report.snapshot_id);
    assert_eq!(latest.commit_kind(), &CommitKind::COMPACT);
    assert_eq!(latest.total_record_count(), Some(1200));

    // One file per day now, holding that day's rows in the order they were written.
    assert!(t.files().await.values().all(|&f| f == 1));
    let after = rows(&t.table).await;
    for day in ["d1", "d2"] {
        let of = |v: &[(String, i64, String)]| v.iter().filter(|r| r.0 == day).cloned().collect::<Vec<_>>();
        let (was, is) = (of(&before), of(&after));
        let mut in_order = was.clone();
        in_order.sort_by_key(|r| r.1);
        assert_eq!(is, in_order, "{day} rows out of write order");
    }
    assert_eq!(sorted(after.clone()), sorted(before.clone()));
    // The snapshot before the compaction still reads its own files.
    assert_eq!(sorted(rows(&at_snapshot(&t.table, last_data).await).await), sorted(before));

    // A second automatic compaction right away has nothing to do.
    let again = t.maintainer.compact(CompactMode::Auto, |_, _| {}).await.unwrap();
    assert_eq!((again.snapshot_id, again.files_in), (None, 0), "{again:?}");
}

#[tokio::test]
async fn new_small_files_wait_for_the_minimum_then_merge_without_rewriting_the_big_one() {
    let mut t = append_table(&[("compaction.min.file-num", "3"), ("target-file-size", "64 kb")]).await;
    // Files big enough to pass the small-file threshold (0.7 × 64 KiB) on their own.
    t.commit(6000).await;
    let files = t.files().await;
    assert!(files.len() == 2 && files.values().all(|&f| f == 1), "{files:?}");
    t.commit(10).await;
    t.commit(10).await;
    let r = t.maintainer.compact(CompactMode::Auto, |_, _| {}).await.unwrap();
    assert_eq!(r.files_in, 0, "two small files are below compaction.min.file-num: {r:?}");
    t.commit(10).await;
    let r = t.maintainer.compact(CompactMode::Auto, |_, _| {}).await.unwrap();
    assert_eq!((r.files_in, r.files_out, r.rows_in), (6, 2, 60), "the big files stay: {r:?}");
    assert!(t.files().await.values().all(|&f| f == 2));
    assert_eq!(rows(&t.table).await.len(), 2 * (6000 + 30));
}

#[tokio::test]
async fn full_compaction_then_expiry_leaves_only_the_merged_files_on_disk() {
    let mut t = append_table(&[("snapshot.num-retained.min", "1"), ("snapshot.time-retained", "1 ms")]).await;
    for _ in 0..3 {
        t.commit(20).await;
    }
    let before = sorted(rows(&t.table).await);
    let r = t.maintainer.compact(CompactMode::Full, |_, _| {}).await.unwrap();
    assert_eq!((r.files_in, r.files_out), (6, 2), "{r:?}");
    assert_eq!(t.maintainer.compact(CompactMode::Full, |_, _| {}).await.unwrap().snapshot_id, None);
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    t.maintainer.expire(chrono::Utc::now().timestamp_millis(), |_, _| {}).await.unwrap();
    let on_disk: usize = std::fs::read_dir(t._dir.path().join("wh/db.db/events"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("day="))
        .map(|d| {
            walk(&d.path()).into_iter().filter(|p| p.extension().is_some_and(|x| x == "parquet")).count()
        })
        .sum();
    assert_eq!(on_disk, 2, "the compacted inputs were deleted by expiry");
    assert_eq!(sorted(rows(&t.table).await), before);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test]
async fn merged_files_carry_the_combined_column_statistics_of_their_inputs() {
    let mut t = append_table(&[("metadata.stats-mode", "full"), ("compaction.min.file-num", "2")]).await;
    t.commit(10).await;
    t.commit(10).await;
    t.maintainer.compact(CompactMode::Auto, |_, _| {}).await.unwrap();
    t.commit(10).await;
    t.commit(10).await;
    // The two newest files per day only: the first merged file is left as it is.
    let r = t.maintainer.compact(CompactMode::NewestRuns(2), |_, _| {}).await.unwrap();
    assert_eq!((r.files_in, r.files_out), (4, 2), "{r:?}");
    let latest = t.table.snapshot_manager().get_latest_snapshot_id().await.unwrap().unwrap();
    let files = livestate_lsm::live_files(&t.table, "db.events", &livestate_lsm::Version::Snapshot(latest))
        .await
        .unwrap();
    let ty = DataType::BigInt(BigIntType::new());
    for b in &files {
        let mut bounds = Vec::new();
        for f in &b.files {
            let lo = paimon::spec::BinaryRow::from_serialized_bytes(f.value_stats.min_values()).unwrap();
            let hi = paimon::spec::BinaryRow::from_serialized_bytes(f.value_stats.max_values()).unwrap();
            assert_eq!(lo.arity(), 3, "{:?}", f.value_stats_cols);
            assert_eq!(f.row_count, 20);
            bounds.push((lo.get_datum(0, &ty).unwrap().unwrap(), hi.get_datum(0, &ty).unwrap().unwrap()));
        }
        // Day d1 got n 0-9 and 20-29 in the first two commits, 40-49 and 60-69 in the next
        // two (d2 the ranges between): the bounds of each merged file cover its rows and
        // stop short of the other's.
        bounds.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        let (first, second) = (&bounds[0], &bounds[1]);
        assert!(first.0 < first.1 && first.1 < second.0 && second.0 < second.1, "{bounds:?}");
    }
    assert_eq!(rows(&t.table).await.len(), 80);
}

#[tokio::test]
async fn append_compaction_refuses_a_table_with_deletion_vectors_and_changes_nothing() {
    let mut t = append_table(&[("deletion-vectors.enabled", "true")]).await;
    for _ in 0..6 {
        t.commit(5).await;
    }
    let latest = t.table.snapshot_manager().get_latest_snapshot_id().await.unwrap();
    let err = t.maintainer.compact(CompactMode::Auto, |_, _| {}).await.unwrap_err().to_string();
    assert!(err.contains("db.events") && err.contains("deletion-vectors.enabled"), "{err}");
    assert_eq!(t.table.snapshot_manager().get_latest_snapshot_id().await.unwrap(), latest);
}
