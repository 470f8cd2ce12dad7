//! A data commit's files, written by livestate: each bucket's rows of the commit as one level-0
//! file sorted by key, numbered from the bucket's next sequence number, as Paimon's
//! `MergeTreeWriter` numbers the rows it flushes.
//!
//! Used instead of the `paimon` crate's `TableWrite` by a writer that hands over at most one
//! row per key per commit: livestate merges each commit window per key with the table's merge
//! engine before it writes, and the crate's write buffer sorted and merged those rows again, one
//! key at a time, building a one-row Arrow array per key (docs/BENCHMARKS.md, fourteenth pass).
//! Layout of the files: [`crate::kvfile`]; where they sit in the LSM: docs/formats/lsm.md.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, Int8Array, RecordBatch, UInt32Array};
use arrow_schema::SchemaRef;
use paimon::spec::{BinaryRow, RowKind, EMPTY_BINARY_ROW};
use paimon::{CommitMessage, Table};

use crate::error::{paimon_err, LsmError, Result};
use crate::files::{live_files, Version};
use crate::kvfile::{self, FileSource, KvFile};
use crate::merge::KeyOrder;

/// Writes data commits of one primary-key table with a fixed bucket count and no partitions.
///
/// It keeps each bucket's next sequence number from one commit to the next, as the crate's
/// writer does, so it must be the table's only data writer while it lives (livestate's writer
/// lock sees to that); compaction keeps the sequence numbers of the rows it rewrites, so it
/// does not disturb the count.
pub struct Level0Writer {
    table: Table,
    name: String,
    buckets: i32,
    /// The primary-key columns among the table's columns.
    key_idx: Vec<usize>,
    physical: SchemaRef,
    /// Each bucket's next sequence number (a bucket not here starts at 0).
    next_seq: HashMap<i32, i64>,
}

impl Level0Writer {
    /// A writer for `table` as its latest snapshot leaves it: each bucket continues after the
    /// highest sequence number of its live files.
    ///
    /// # Errors
    /// [`LsmError::Refused`] for a table without a primary key, with partitions or without a
    /// fixed bucket count; Paimon errors reading the latest snapshot's manifests.
    pub async fn open(table: &Table, name: &str) -> Result<Level0Writer> {
        let refused = |message: &str| LsmError::Refused { table: name.to_string(), message: message.into() };
        let schema = table.schema();
        let buckets = match schema.options().get("bucket").map(|b| b.parse::<i32>()) {
            None => 1,
            Some(Ok(n)) if n >= 1 => n,
            Some(_) => return Err(refused("livestate writes data files only for a fixed bucket count")),
        };
        if !schema.partition_keys().is_empty() {
            return Err(refused("livestate writes data files only for tables without partitions"));
        }
        let fields = schema.fields();
        let key_idx: Vec<usize> = schema
            .primary_keys()
            .iter()
            .map(|k| fields.iter().position(|f| f.name() == k).expect("a primary key is a field"))
            .collect();
        if key_idx.is_empty() {
            return Err(refused("livestate writes level-0 files only for tables with a primary key"));
        }
        let mut next_seq = HashMap::new();
        let latest = table
            .snapshot_manager()
            .get_latest_snapshot_id()
            .await
            .map_err(paimon_err(name, "read the latest snapshot"))?;
        if let Some(id) = latest {
            for b in live_files(table, name, &Version::Snapshot(id)).await? {
                if let Some(max) = b.files.iter().map(|f| f.max_sequence_number).max() {
                    next_seq.insert(b.bucket, max + 1);
                }
            }
        }
        Ok(Level0Writer {
            table: table.clone(),
            name: name.to_string(),
            buckets,
            key_idx,
            physical: kvfile::physical_schema(table, name)?,
            next_seq,
        })
    }

    /// The bucket `rows`' row `i` belongs to: Paimon's, the hash of its key `BinaryRow` modulo
    /// the bucket count.
    fn bucket_of(&self, rows: &RecordBatch, i: usize) -> Result<i32> {
        let key = BinaryRow::from_arrow(rows, i, &self.key_idx, self.table.schema().fields())
            .map_err(paimon_err(&self.name, "bucket of a key"))?;
        Ok((key.hash_code() % self.buckets).wrapping_abs())
    }

    /// Writes `rows` (the table's columns in order, at most one row per key) with their row
    /// kinds as level-0 files, one per bucket, and describes them as one commit message per
    /// bucket written. Nothing is committed: the caller commits the messages (a file whose
    /// commit never happens is an orphan, which orphan cleanup removes).
    ///
    /// # Errors
    /// [`LsmError::Refused`] when `kinds` does not match the rows or a key appears twice (nothing
    /// is written then); [`LsmError::DataFile`] when a file cannot be encoded or stored.
    pub async fn write(&mut self, rows: &RecordBatch, kinds: &[RowKind]) -> Result<Vec<CommitMessage>> {
        let refused = |message: String| LsmError::Refused { table: self.name.clone(), message };
        let arrow = |e: arrow_schema::ArrowError| refused(format!("the commit's rows: {e}"));
        if kinds.len() != rows.num_rows() {
            return Err(refused(format!("{} row kinds for {} rows", kinds.len(), rows.num_rows())));
        }
        if rows.num_columns() + 2 != self.physical.fields().len() {
            return Err(refused(format!(
                "{} columns for a table of {}",
                rows.num_columns(),
                self.physical.fields().len() - 2
            )));
        }
        let mut by_bucket: BTreeMap<i32, Vec<u32>> = BTreeMap::new();
        for i in 0..rows.num_rows() {
            let row = u32::try_from(i).map_err(|_| refused("more than 2^32 rows in one commit".into()))?;
            by_bucket.entry(self.bucket_of(rows, i)?).or_default().push(row);
        }
        // Sort every bucket first, so that a key given twice refuses the commit before any file
        // is written.
        let mut sorted: Vec<(i32, UInt32Array)> = Vec::with_capacity(by_bucket.len());
        for (bucket, idx) in by_bucket {
            let idx = UInt32Array::from(idx);
            let keys: Vec<ArrayRef> = self
                .key_idx
                .iter()
                .map(|&k| arrow_select::take::take(rows.column(k).as_ref(), &idx, None))
                .collect::<std::result::Result<_, _>>()
                .map_err(arrow)?;
            let order = KeyOrder::new(&keys, &vec![0; idx.len()]).map_err(arrow)?;
            if order.groups.len() != idx.len() {
                return Err(refused(format!(
                    "{} rows of {} keys in bucket {bucket}: a commit's files hold one row per key",
                    idx.len(),
                    order.groups.len()
                )));
            }
            sorted.push((bucket, order.order.iter().map(|&j| idx.value(j as usize)).collect()));
        }
        let partition = EMPTY_BINARY_ROW.to_serialized_bytes();
        let root = self.table.location().trim_end_matches('/').to_string();
        let mut messages = Vec::with_capacity(sorted.len());
        for (bucket, idx) in sorted {
            let base = self.next_seq.get(&bucket).copied().unwrap_or(0);
            let n = i64::try_from(idx.len()).expect("a bucket's rows fit i64");
            let mut columns: Vec<ArrayRef> = Vec::with_capacity(rows.num_columns() + 2);
            columns.push(Arc::new(Int64Array::from_iter_values(base..base + n)));
            columns.push(Arc::new(Int8Array::from_iter_values(
                idx.values().iter().map(|&i| kinds[i as usize].to_value()),
            )));
            for c in rows.columns() {
                columns.push(arrow_select::take::take(c.as_ref(), &idx, None).map_err(arrow)?);
            }
            let batch = RecordBatch::try_new(Arc::clone(&self.physical), columns).map_err(arrow)?;
            let kind = KvFile { level: 0, ordinal: 0, source: FileSource::Append };
            let file =
                kvfile::write(&self.table, &self.name, &format!("{root}/bucket-{bucket}"), &batch, kind)
                    .await?;
            // Counted as used once the file exists, committed or not, as the crate's writer
            // counts the rows of a prepared commit.
            self.next_seq.insert(bucket, base + n);
            messages.push(CommitMessage::new(partition.clone(), bucket, vec![file]));
        }
        Ok(messages)
    }
}
