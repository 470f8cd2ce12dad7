//! livestate's own level-0 files for a data commit ([`Level0Writer`]) against the `paimon`
//! crate's writer: the same commits, compactions and reopened writers leave the same rows, each
//! bucket's sequence numbers continue after its files, and a commit that names a key twice is
//! refused before anything is written.

mod common;

use std::collections::BTreeMap;

use common::{columns_and_kinds, harness, Harness, Row};
use livestate_lsm::{live_files, BucketFiles, CompactMode, Level0Writer, LsmError, Version};
use paimon::spec::RowKind;

/// A table of two buckets with frequent compaction, under `engine`'s options.
fn options(engine: &'static str) -> Vec<(&'static str, &'static str)> {
    let mut o = vec![("num-sorted-run.compaction-trigger", "3"), ("merge-engine", engine)];
    if engine == "partial-update" {
        o.push(("partial-update.remove-record-on-delete", "true"));
    }
    o
}

/// A small deterministic generator (the test needs variety, not a seed to shrink).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }
}

/// One commit's rows: distinct keys, some cells null, some deletes, in no particular order.
fn commit_rows(rng: &mut Lcg, step: u64) -> Vec<(RowKind, Row)> {
    let mut keys = BTreeMap::new();
    for _ in 0..1 + rng.next(12) {
        let k = i64::try_from(rng.next(40)).unwrap();
        let kind = if rng.next(5) == 0 { RowKind::Delete } else { RowKind::Insert };
        let a = (rng.next(3) > 0).then(|| i64::try_from(step * 100 + rng.next(100)).unwrap());
        let b = (rng.next(3) > 0).then(|| format!("s{step}-{k}"));
        keys.insert(k, (kind, (k, a, b)));
    }
    let mut rows: Vec<_> = keys.into_values().collect();
    let turn = usize::try_from(rng.next(rows.len() as u64)).unwrap();
    rows.rotate_left(turn);
    if rng.next(2) == 0 {
        rows.reverse();
    }
    rows
}

async fn files(h: &Harness) -> Vec<BucketFiles> {
    let id = h.table.snapshot_manager().get_latest_snapshot_id().await.unwrap().unwrap();
    live_files(&h.table, "db.t", &Version::Snapshot(id)).await.unwrap()
}

async fn same_rows_as_the_crates_writer(engine: &'static str) {
    let mut theirs = harness(&options(engine)).await;
    let mut ours = harness(&options(engine)).await;
    let mut writer = Level0Writer::open(&ours.table, "db.t").await.unwrap();
    let mut rng = Lcg(7);
    for step in 0..40 {
        let rows = commit_rows(&mut rng, step);
        theirs.commit(&rows).await;
        let (columns, kinds) = columns_and_kinds(&rows);
        let messages = writer.write(&columns, &kinds).await.unwrap();
        assert!(messages.iter().all(|m| m.new_files.len() == 1), "one file per bucket");
        ours.commit_messages(messages).await;
        if step % 6 == 5 {
            for h in [&theirs, &ours] {
                h.maintainer.compact(CompactMode::Auto, |_, _| {}).await.unwrap();
            }
        }
        if step % 9 == 8 {
            // A new writer continues after the files there, compacted or not.
            writer = Level0Writer::open(&ours.table, "db.t").await.unwrap();
        }
        assert_eq!(ours.read_all().await, theirs.read_all().await, "step {step} of {engine}");
    }
    // Each bucket's level-0 files hold disjoint, rising ranges of sequence numbers.
    for b in files(&ours).await {
        let mut ranges: Vec<(i64, i64)> =
            b.files.iter().map(|f| (f.min_sequence_number, f.max_sequence_number)).collect();
        ranges.sort_unstable();
        assert!(ranges.windows(2).all(|w| w[0].1 < w[1].0), "bucket {}: {ranges:?}", b.bucket);
    }
}

#[tokio::test]
async fn a_deduplicate_table_written_by_level0_files_reads_as_one_written_by_the_crate() {
    same_rows_as_the_crates_writer("deduplicate").await;
}

#[tokio::test]
async fn a_partial_update_table_written_by_level0_files_reads_as_one_written_by_the_crate() {
    same_rows_as_the_crates_writer("partial-update").await;
}

#[tokio::test]
async fn sequence_numbers_continue_after_the_files_each_bucket_already_has() {
    let mut h = harness(&options("deduplicate")).await;
    let rows: Vec<(RowKind, Row)> = (0..20).map(|k| (RowKind::Insert, (k, Some(k), None))).collect();
    h.commit(&rows).await;
    let before: BTreeMap<i32, i64> = files(&h)
        .await
        .iter()
        .map(|b| (b.bucket, b.files.iter().map(|f| f.max_sequence_number).max().unwrap()))
        .collect();
    assert_eq!(before.len(), 2, "the rows fill both buckets");
    let mut writer = Level0Writer::open(&h.table, "db.t").await.unwrap();
    let (columns, kinds) = columns_and_kinds(&rows);
    let messages = writer.write(&columns, &kinds).await.unwrap();
    for m in &messages {
        let f = &m.new_files[0];
        assert_eq!(f.min_sequence_number, before[&m.bucket] + 1, "bucket {}", m.bucket);
        assert_eq!(f.level, 0);
        assert_eq!(f.file_source, Some(0), "written by a data commit");
    }
    // The crate put each key in the bucket this writer computes: every key is read once.
    h.commit_messages(messages).await;
    assert_eq!(h.read_all().await.len(), 20);
}

#[tokio::test]
async fn a_commit_that_names_a_key_twice_is_refused_before_any_file_is_written() {
    let h = harness(&options("deduplicate")).await;
    let mut writer = Level0Writer::open(&h.table, "db.t").await.unwrap();
    let rows = [
        (RowKind::Insert, (1, Some(1), None)),
        (RowKind::Insert, (2, Some(2), None)),
        (RowKind::Insert, (1, Some(3), None)),
    ];
    let (columns, kinds) = columns_and_kinds(&rows);
    let err = writer.write(&columns, &kinds).await.unwrap_err();
    assert!(
        matches!(&err, LsmError::Refused { message, .. } if message.contains("one row per key")),
        "{err}"
    );
    let written = walkdir(h.table.location().trim_start_matches("file:"));
    assert!(written.iter().all(|p| !p.contains("bucket-")), "no data file: {written:?}");
    // Row kinds that do not match the rows are refused too.
    let err = writer.write(&columns, &kinds[..2]).await.unwrap_err();
    assert!(err.to_string().contains("2 row kinds for 3 rows"), "{err}");
}

/// Every file under `dir`.
fn walkdir(dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![std::path::PathBuf::from(dir)];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                todo.push(e.path());
            } else {
                out.push(e.path().display().to_string());
            }
        }
    }
    out
}
