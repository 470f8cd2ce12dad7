//! Merging the files of a compaction unit into new files one level up.
//!
//! The inputs are read as stored (sequence number, row kind, every column) and ordered by key
//! and sequence number. Where the table's merge engine only picks stored cells (deduplicate,
//! first-row, partial-update without sequence fields, groups or ignored deletes; see
//! [`crate::merge`]), the unit is merged column by column from those rows. Anything else is
//! merged by the `paimon` crate's own merge reader over the unit as one split, so every merge
//! engine and option (aggregation, sequence groups, remove-record-on-delete) behaves exactly as
//! it does for any reader. A key the merge dropped (its newest row is a delete) keeps that
//! delete row in the output unless the output is the bottom of the tree, so older runs cannot
//! resurface.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, Int64Array, Int8Array, RecordBatch, UInt32Array};
use arrow_ord::sort::{lexsort_to_indices, SortColumn, SortOptions};
use arrow_schema::SchemaRef;
use futures::TryStreamExt;
use paimon::spec::{DataFileMeta, RowKind};
use paimon::{DataSplit, Table};

use crate::error::{paimon_err, LsmError, Result};
use crate::files::BucketFiles;
use crate::kvfile::{FileSource, KvFile};
use crate::merge::{self, KeyOrder, Pick};

const SEQUENCE: &str = "_SEQUENCE_NUMBER";
const VALUE_KIND: &str = "_VALUE_KIND";

/// One compaction job for one bucket.
pub(crate) struct Rewrite<'a> {
    pub table: &'a Table,
    pub name: &'a str,
    pub bucket: &'a BucketFiles,
    pub inputs: Vec<DataFileMeta>,
    pub snapshot_id: i64,
    pub output_level: i32,
    pub drop_delete: bool,
    pub first_row: bool,
    /// How the table's merge engine picks stored cells, when it only picks them
    /// ([`Pick::for_options`]); `None` merges through the `paimon` crate's reader.
    pub pick: Option<Pick>,
    pub target_file_size: u64,
    /// Files of the older runs left alone. A first-row table keeps the first row of a key in
    /// the oldest run holding it, so merged rows whose key an older run has are dropped (what
    /// Java Paimon's lookup does); readers then never see a key in two levels.
    pub older: Vec<DataFileMeta>,
}

impl Rewrite<'_> {
    fn file_err(&self, file: &str, message: impl std::fmt::Display) -> LsmError {
        LsmError::data_file(self.name, file, message)
    }

    fn split(&self) -> Result<DataSplit> {
        DataSplit::builder()
            .with_snapshot(self.snapshot_id)
            .with_partition(self.bucket.partition.clone())
            .with_bucket(self.bucket.bucket)
            .with_bucket_path(self.bucket.bucket_path.clone())
            .with_total_buckets(self.bucket.total_buckets)
            .with_data_files(self.inputs.clone())
            .with_raw_convertible(false)
            .build()
            .map_err(paimon_err(self.name, "build split"))
    }

    /// Reads every input file as stored: sequence number, row kind and all columns.
    async fn read_raw(&self, split: &DataSplit, files: &[DataFileMeta]) -> Result<RecordBatch> {
        let mut schema: Option<SchemaRef> = None;
        let mut batches = Vec::new();
        for file in files {
            let path = split.data_file_path(file);
            let reader = crate::kvfile::open_data_file(self.table, self.name, &path, file).await?;
            for batch in reader {
                let batch = batch.map_err(|e| self.file_err(&file.file_name, e))?;
                match &schema {
                    None => schema = Some(batch.schema()),
                    Some(s) if s.fields() != batch.schema().fields() => {
                        return Err(LsmError::Refused {
                            table: self.name.to_string(),
                            message: format!(
                                "file {} has a different layout from the other files of bucket {}; compacting across schema versions is not supported",
                                file.file_name, self.bucket.bucket
                            ),
                        });
                    }
                    Some(_) => {}
                }
                batches.push(batch);
            }
        }
        let schema = schema.ok_or_else(|| self.file_err("(inputs)", "no rows in the files to compact"))?;
        arrow_select::concat::concat_batches(&schema, &batches).map_err(|e| self.file_err("(inputs)", e))
    }

    /// The unit merged by the `paimon` crate's reader (every merge engine and option), each
    /// merged row with the group of `order` its key is.
    async fn paimon_merge(
        &self,
        split: &DataSplit,
        order: &KeyOrder,
    ) -> Result<Vec<(RecordBatch, Vec<u32>)>> {
        let rb = self.table.new_read_builder();
        let read = rb.new_read().map_err(paimon_err(self.name, "open reader"))?;
        let batches: Vec<RecordBatch> = read
            .to_arrow(std::slice::from_ref(split))
            .map_err(paimon_err(self.name, "merge"))?
            .try_collect()
            .await
            .map_err(paimon_err(self.name, "merge"))?;
        let pks = self.table.schema().primary_keys();
        let mut merged = Vec::with_capacity(batches.len());
        for batch in batches {
            let key_cols: Vec<ArrayRef> = pks
                .iter()
                .map(|k| {
                    batch
                        .column_by_name(k)
                        .cloned()
                        .ok_or_else(|| self.file_err("(merge)", format!("merged rows lack key {k}")))
                })
                .collect::<Result<_>>()?;
            let rows = order.convert(&key_cols).map_err(|e| self.file_err("(merge)", e))?;
            let groups: Vec<u32> = (0..batch.num_rows())
                .map(|i| {
                    order.group_of(rows.row(i)).map(|g| g as u32).ok_or_else(|| {
                        self.file_err("(merge)", "the merge produced a key absent from its inputs")
                    })
                })
                .collect::<Result<_>>()?;
            merged.push((batch, groups));
        }
        Ok(merged)
    }

    /// Runs the compaction and returns the new files (already written, not yet committed).
    pub async fn run(&self) -> Result<Vec<DataFileMeta>> {
        let split = self.split()?;
        let raw = self.read_raw(&split, &self.inputs).await?;
        let schema = raw.schema();
        let col = |name: &str| {
            schema
                .index_of(name)
                .map_err(|_| self.file_err("(inputs)", format!("data files have no column {name}")))
        };
        let seq_idx = col(SEQUENCE)?;
        let kind_idx = col(VALUE_KIND)?;
        let table_fields = self.table.schema().fields();
        let physical_user: Vec<usize> =
            (0..schema.fields().len()).filter(|&i| i != seq_idx && i != kind_idx).collect();
        let user_names: Vec<&str> = physical_user.iter().map(|&i| schema.field(i).name().as_str()).collect();
        let table_names: Vec<&str> = table_fields.iter().map(|f| f.name()).collect();
        if user_names != table_names {
            return Err(LsmError::Refused {
                table: self.name.to_string(),
                message: format!(
                    "data file columns {user_names:?} differ from the table's {table_names:?}; compacting across schema versions is not supported"
                ),
            });
        }
        let pks = self.table.schema().primary_keys();
        let raw_keys: Vec<usize> = pks.iter().map(|k| col(k)).collect::<Result<_>>()?;
        let key_cols = |batch: &RecordBatch, idx: &[usize]| {
            idx.iter().map(|&i| batch.column(i).clone()).collect::<Vec<_>>()
        };
        let seqs = downcast::<Int64Array>(raw.column(seq_idx))
            .ok_or_else(|| self.file_err("(inputs)", "bad _SEQUENCE_NUMBER"))?;
        let kinds = downcast::<Int8Array>(raw.column(kind_idx))
            .ok_or_else(|| self.file_err("(inputs)", "bad _VALUE_KIND"))?;
        let kinds: Vec<RowKind> = kinds
            .values()
            .iter()
            .map(|&k| RowKind::from_value(k))
            .collect::<std::result::Result<_, _>>()
            .map_err(paimon_err(self.name, "row kind"))?;
        let order = KeyOrder::new(&key_cols(&raw, &raw_keys), seqs.values())
            .map_err(|e| self.file_err("(inputs)", e))?;
        // Each key's sequence number in the output: its first row's for first-row (what Java
        // Paimon keeps), its latest row's otherwise.
        let out_seq = |g: usize| {
            let row = if self.first_row { order.first(g) } else { order.latest(g) };
            seqs.value(row as usize)
        };

        let mut older_keys: HashSet<Box<[u8]>> = HashSet::new();
        if self.first_row && !self.older.is_empty() {
            let older = self.read_raw(&split, &self.older).await?;
            let idx: Vec<usize> = pks
                .iter()
                .map(|k| older.schema().index_of(k))
                .collect::<Result<_, _>>()
                .map_err(|e| self.file_err("(older runs)", e))?;
            let rows =
                order.convert(&key_cols(&older, &idx)).map_err(|e| self.file_err("(older runs)", e))?;
            older_keys.extend((0..older.num_rows()).map(|i| Box::<[u8]>::from(rows.row(i).as_ref())));
        }

        // The unit merged: column by column where the merge engine only picks stored cells,
        // by Paimon's merge reader otherwise. Each merged row with the group of its key.
        let mut merged_groups = vec![false; order.groups.len()];
        let own = match self.pick {
            Some(pick) => {
                merge::merge(&raw, &kinds, &order, pick).map_err(|e| self.file_err("(merge)", e))?
            }
            None => None,
        };
        let merged: Vec<(RecordBatch, Vec<u32>)> = match own {
            Some(m) => vec![(m.batch, m.groups)],
            None => self.paimon_merge(&split, &order).await?,
        };

        let mut parts: Vec<RecordBatch> = Vec::new();
        for (batch, groups) in &merged {
            if batch.num_rows() == 0 {
                continue;
            }
            let mut seq_out = Vec::with_capacity(batch.num_rows());
            let mut keep = Vec::with_capacity(batch.num_rows());
            for &g in groups {
                let g = g as usize;
                keep.push(
                    older_keys.is_empty()
                        || !older_keys.contains(order.keys.row(order.first(g) as usize).as_ref()),
                );
                merged_groups[g] = true;
                seq_out.push(out_seq(g));
            }
            let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
            for (i, field) in schema.fields().iter().enumerate() {
                columns.push(if i == seq_idx {
                    Arc::new(Int64Array::from(std::mem::take(&mut seq_out)))
                } else if i == kind_idx {
                    Arc::new(Int8Array::from(vec![RowKind::Insert.to_value(); batch.num_rows()]))
                } else {
                    let c = batch.column_by_name(field.name()).ok_or_else(|| {
                        self.file_err("(merge)", format!("merged rows lack column {}", field.name()))
                    })?;
                    if c.data_type() != field.data_type() {
                        return Err(self.file_err(
                            "(merge)",
                            format!(
                                "column {} reads as {} but is stored as {}",
                                field.name(),
                                c.data_type(),
                                field.data_type()
                            ),
                        ));
                    }
                    c.clone()
                });
            }
            let part =
                RecordBatch::try_new(schema.clone(), columns).map_err(|e| self.file_err("(merge)", e))?;
            let part = if keep.iter().all(|k| *k) {
                part
            } else {
                arrow_select::filter::filter_record_batch(&part, &BooleanArray::from(keep))
                    .map_err(|e| self.file_err("(merge)", e))?
            };
            parts.push(part);
        }

        // Keys the merge dropped: their newest row is a retraction.
        if !self.drop_delete {
            let mut vanished: Vec<u32> = Vec::new();
            for g in (0..order.groups.len()).filter(|&g| !merged_groups[g]) {
                let latest = order.latest(g);
                if kinds[latest as usize].is_add() {
                    return Err(LsmError::Refused {
                        table: self.name.to_string(),
                        message: "the merge dropped a key whose newest row is an insert; refusing to compact"
                            .into(),
                    });
                }
                vanished.push(latest);
            }
            if !vanished.is_empty() {
                vanished.sort_unstable();
                let idx = UInt32Array::from(vanished);
                parts.push(
                    arrow_select::take::take_record_batch(&raw, &idx)
                        .map_err(|e| self.file_err("(inputs)", e))?,
                );
            }
        }
        if parts.is_empty() {
            return Ok(Vec::new());
        }
        // Each part is in key order: one alone needs no sort.
        let sorted = if parts.len() == 1 {
            parts.pop().expect("one part")
        } else {
            self.sorted(&schema, &parts, &raw_keys)?
        };
        let in_rows: i64 = self.inputs.iter().map(|f| f.row_count.max(1)).sum();
        let in_bytes: i64 = self.inputs.iter().map(|f| f.file_size).sum();
        let row_bytes = u64::try_from((in_bytes / in_rows.max(1)).max(1)).unwrap_or(1);
        let rows_per_file = usize::try_from((self.target_file_size / row_bytes).max(1)).unwrap_or(usize::MAX);
        let mut out = Vec::new();
        let mut offset = 0;
        while offset < sorted.num_rows() {
            let len = rows_per_file.min(sorted.num_rows() - offset);
            let chunk = sorted.slice(offset, len);
            let written = crate::kvfile::write(
                self.table,
                self.name,
                &self.bucket.bucket_path,
                &chunk,
                KvFile { level: self.output_level, ordinal: out.len(), source: FileSource::Compact },
            )
            .await;
            match written {
                Ok(meta) => out.push(meta),
                Err(e) => {
                    self.abort(&split, &out).await;
                    return Err(e);
                }
            }
            offset += len;
        }
        Ok(out)
    }

    /// The parts' rows in key order.
    fn sorted(&self, schema: &SchemaRef, parts: &[RecordBatch], keys: &[usize]) -> Result<RecordBatch> {
        let all =
            arrow_select::concat::concat_batches(schema, parts).map_err(|e| self.file_err("(output)", e))?;
        let sort: Vec<SortColumn> = keys
            .iter()
            .map(|&i| SortColumn {
                values: all.column(i).clone(),
                options: Some(SortOptions { descending: false, nulls_first: true }),
            })
            .collect();
        let order = lexsort_to_indices(&sort, None).map_err(|e| self.file_err("(output)", e))?;
        arrow_select::take::take_record_batch(&all, &order).map_err(|e| self.file_err("(output)", e))
    }

    /// Deletes files written by a compaction that will not be committed.
    pub(crate) async fn abort(&self, split: &DataSplit, files: &[DataFileMeta]) {
        for f in files {
            let _ = self.table.file_io().delete_file(&split.data_file_path(f)).await;
        }
    }
}

fn downcast<T: 'static>(a: &ArrayRef) -> Option<&T> {
    a.as_any().downcast_ref::<T>()
}
