//! Merging the files of a compaction unit into new files one level up.
//!
//! The merge itself is Paimon's: the input files are read as one split through the crate's own
//! merge reader, so every merge engine (deduplicate, first-row, partial-update, aggregation,
//! sequence groups, remove-record-on-delete) behaves exactly as it does for any reader. The
//! inputs are also read raw, which gives each key's sequence numbers and its latest raw row:
//! a key the merge dropped (its newest row is a delete) keeps that delete row in the output
//! unless the output is the bottom of the tree, so older runs cannot resurface.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, Int64Array, Int8Array, RecordBatch, UInt32Array};
use arrow_ord::sort::{lexsort_to_indices, SortColumn, SortOptions};
use arrow_row::{RowConverter, SortField};
use arrow_schema::SchemaRef;
use futures::TryStreamExt;
use paimon::spec::{DataFileMeta, RowKind};
use paimon::{DataSplit, Table};

use crate::error::{paimon_err, LsmError, Result};
use crate::files::BucketFiles;
use crate::kvfile::{FileSource, KvFile};

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
    pub target_file_size: u64,
    /// Files of the older runs left alone. A first-row table keeps the first row of a key in
    /// the oldest run holding it, so merged rows whose key an older run has are dropped (what
    /// Java Paimon's lookup does); readers then never see a key in two levels.
    pub older: Vec<DataFileMeta>,
}

struct KeyInfo {
    min_seq: i64,
    max_seq: i64,
    /// Row (in the raw batch) with the highest sequence number.
    latest: usize,
    merged: bool,
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
        let converter = RowConverter::new(
            raw_keys.iter().map(|&i| SortField::new(schema.field(i).data_type().clone())).collect(),
        )
        .map_err(|e| self.file_err("(inputs)", e))?;
        let key_cols = |batch: &RecordBatch, idx: &[usize]| {
            idx.iter().map(|&i| batch.column(i).clone()).collect::<Vec<_>>()
        };
        let raw_rows = converter
            .convert_columns(&key_cols(&raw, &raw_keys))
            .map_err(|e| self.file_err("(inputs)", e))?;
        let seqs = downcast::<Int64Array>(raw.column(seq_idx))
            .ok_or_else(|| self.file_err("(inputs)", "bad _SEQUENCE_NUMBER"))?;
        let kinds = downcast::<Int8Array>(raw.column(kind_idx))
            .ok_or_else(|| self.file_err("(inputs)", "bad _VALUE_KIND"))?;
        let mut keys: HashMap<Box<[u8]>, KeyInfo> = HashMap::with_capacity(raw.num_rows());
        for i in 0..raw.num_rows() {
            let seq = seqs.value(i);
            keys.entry(raw_rows.row(i).as_ref().into())
                .and_modify(|k| {
                    k.min_seq = k.min_seq.min(seq);
                    if seq > k.max_seq {
                        k.max_seq = seq;
                        k.latest = i;
                    }
                })
                .or_insert(KeyInfo { min_seq: seq, max_seq: seq, latest: i, merged: false });
        }

        let mut older_keys: std::collections::HashSet<Box<[u8]>> = std::collections::HashSet::new();
        if self.first_row && !self.older.is_empty() {
            let older = self.read_raw(&split, &self.older).await?;
            let idx: Vec<usize> = pks
                .iter()
                .map(|k| older.schema().index_of(k))
                .collect::<Result<_, _>>()
                .map_err(|e| self.file_err("(older runs)", e))?;
            let rows = converter
                .convert_columns(&key_cols(&older, &idx))
                .map_err(|e| self.file_err("(older runs)", e))?;
            older_keys.extend((0..older.num_rows()).map(|i| Box::<[u8]>::from(rows.row(i).as_ref())));
        }

        // Paimon's merge of the unit.
        let rb = self.table.new_read_builder();
        let read = rb.new_read().map_err(paimon_err(self.name, "open reader"))?;
        let merged: Vec<RecordBatch> = read
            .to_arrow(std::slice::from_ref(&split))
            .map_err(paimon_err(self.name, "merge"))?
            .try_collect()
            .await
            .map_err(paimon_err(self.name, "merge"))?;

        let mut parts: Vec<RecordBatch> = Vec::new();
        for batch in &merged {
            if batch.num_rows() == 0 {
                continue;
            }
            let merged_keys: Vec<usize> = pks
                .iter()
                .map(|k| {
                    batch
                        .schema()
                        .index_of(k)
                        .map_err(|_| self.file_err("(merge)", format!("merged rows lack key {k}")))
                })
                .collect::<Result<_>>()?;
            let rows = converter
                .convert_columns(&key_cols(batch, &merged_keys))
                .map_err(|e| self.file_err("(merge)", e))?;
            let mut seq_out = Vec::with_capacity(batch.num_rows());
            let mut keep = Vec::with_capacity(batch.num_rows());
            for i in 0..batch.num_rows() {
                keep.push(!older_keys.contains(rows.row(i).as_ref()));
                let info = keys.get_mut(rows.row(i).as_ref()).ok_or_else(|| {
                    self.file_err("(merge)", "the merge produced a key absent from its inputs")
                })?;
                info.merged = true;
                seq_out.push(if self.first_row { info.min_seq } else { info.max_seq });
            }
            let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
            for (i, field) in schema.fields().iter().enumerate() {
                columns.push(if i == seq_idx {
                    Arc::new(Int64Array::from(seq_out.clone()))
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
            for info in keys.values().filter(|k| !k.merged) {
                let kind = RowKind::from_value(kinds.value(info.latest))
                    .map_err(paimon_err(self.name, "row kind"))?;
                if kind.is_add() {
                    return Err(LsmError::Refused {
                        table: self.name.to_string(),
                        message: "the merge dropped a key whose newest row is an insert; refusing to compact"
                            .into(),
                    });
                }
                vanished.push(u32::try_from(info.latest).expect("bucket rows fit u32"));
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
        let all = arrow_select::concat::concat_batches(&schema, &parts)
            .map_err(|e| self.file_err("(output)", e))?;
        let sort: Vec<SortColumn> = raw_keys
            .iter()
            .map(|&i| SortColumn {
                values: all.column(i).clone(),
                options: Some(SortOptions { descending: false, nulls_first: true }),
            })
            .collect();
        let order = lexsort_to_indices(&sort, None).map_err(|e| self.file_err("(output)", e))?;
        let sorted =
            arrow_select::take::take_record_batch(&all, &order).map_err(|e| self.file_err("(output)", e))?;

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
