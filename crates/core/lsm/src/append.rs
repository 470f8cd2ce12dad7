//! Compaction of append tables (no primary key): small files merged into larger ones.
//!
//! An append bucket has no keys to merge, only files to concatenate. Files are kept in the
//! order they were written (sequence number, then creation time, then name: the `paimon`
//! crate's append writer records sequence number 0 for every file) and only consecutive
//! small files are merged, so each output holds the rows of its inputs in their order and
//! sits where they sat. The picker is universal compaction's size-ratio rule applied to
//! files instead of sorted runs: starting from the newest small file, older small files join
//! while each is no bigger than what has been gathered so far (plus `compaction.size-ratio`
//! percent), and `compaction.min.file-num` files start a merge. Files therefore grow in
//! tiers, and each row is rewritten about log₂(target ÷ file size) times before its file
//! reaches the small-file threshold and is left alone for good.

use std::ops::Range;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use paimon::spec::{BinaryRow, DataFileMeta, DataType};
use paimon::Table;
use parquet::arrow::ArrowWriter;

use crate::error::{LsmError, Result};
use crate::files::BucketFiles;
use crate::stats::MinMax;

/// Rows per parquet row group of a compacted file (bounds the writer's buffer).
const ROW_GROUP_ROWS: usize = 64 * 1024;

/// The knobs of the append picker (see [`crate::AppendOptions`]).
#[derive(Debug, Clone, Copy)]
pub struct AppendPicker {
    /// Files at least this big are never rewritten.
    pub small: u64,
    /// Output files roll at this size.
    pub target: u64,
    pub min_files: usize,
    pub max_files: usize,
    /// `compaction.size-ratio`, in percent.
    pub size_ratio: u64,
}

/// The indexes of `files` in write order.
pub fn write_order(files: &[DataFileMeta]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..files.len()).collect();
    idx.sort_by(|&a, &b| {
        let (fa, fb) = (&files[a], &files[b]);
        (fa.min_sequence_number, fa.creation_time, &fa.file_name).cmp(&(
            fb.min_sequence_number,
            fb.creation_time,
            &fb.file_name,
        ))
    });
    idx
}

impl AppendPicker {
    fn is_small(&self, size: u64) -> bool {
        size < self.small
    }

    /// What to merge now: ranges of `sizes` (file sizes in write order, oldest first), each
    /// of at least `min_files` consecutive small files; empty when nothing is due.
    pub fn pick(&self, sizes: &[u64]) -> Vec<Range<usize>> {
        let mut picks = Vec::new();
        let mut end = sizes.len();
        while end > 0 {
            if !self.is_small(sizes[end - 1]) {
                end -= 1;
                continue;
            }
            let mut start = end - 1;
            let mut gathered = sizes[start];
            while start > 0 && end - start < self.max_files && gathered < self.target {
                let older = sizes[start - 1];
                let limit = gathered as f64 * (100.0 + self.size_ratio as f64) / 100.0;
                if !self.is_small(older) || older as f64 > limit {
                    break;
                }
                start -= 1;
                gathered += older;
            }
            if end - start >= self.min_files {
                picks.push(start..end);
                end = start;
            } else {
                end -= 1;
            }
        }
        picks.reverse();
        picks
    }

    /// Every run of consecutive small files, packed in order into groups of at most `target`
    /// bytes; groups of one file are left alone, so a second full compaction does nothing.
    pub fn full(&self, sizes: &[u64]) -> Vec<Range<usize>> {
        let mut picks = Vec::new();
        let mut start = 0;
        let mut gathered = 0u64;
        let close = |picks: &mut Vec<Range<usize>>, start: usize, end: usize| {
            if end >= start + 2 {
                picks.push(start..end);
            }
        };
        for (i, &size) in sizes.iter().enumerate() {
            if !self.is_small(size) {
                close(&mut picks, start, i);
                start = i + 1;
                gathered = 0;
                continue;
            }
            if gathered > 0 && gathered.saturating_add(size) > self.target {
                close(&mut picks, start, i);
                start = i;
                gathered = 0;
            }
            gathered += size;
        }
        close(&mut picks, start, sizes.len());
        picks
    }

    /// The newest `n` files (at least two), when they are all small.
    pub fn newest(&self, sizes: &[u64], n: usize) -> Vec<Range<usize>> {
        let small_tail = sizes.iter().rev().take_while(|&&s| self.is_small(s)).count();
        let n = n.max(2).min(small_tail);
        if n < 2 {
            return Vec::new();
        }
        std::iter::once(sizes.len() - n..sizes.len()).collect()
    }
}

/// Refuses append tables whose files carry more than rows: compaction would drop what it
/// does not rewrite (file indexes, deletion vectors, row ids) or cannot read them.
///
/// # Errors
/// [`LsmError::Refused`] naming the option.
pub(crate) fn check_table(table: &Table, name: &str) -> Result<()> {
    let opts = table.schema().options();
    let on = |k: &str| opts.get(k).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let refuse = |message: String| Err(LsmError::Refused { table: name.to_string(), message });
    for key in ["deletion-vectors.enabled", "row-tracking.enabled", "data-evolution.enabled"] {
        if on(key) {
            return refuse(format!("append compaction does not support `{key}` = true"));
        }
    }
    if let Some(key) = opts.keys().find(|k| k.starts_with("file-index.")) {
        return refuse(format!("append compaction does not write file indexes (option `{key}`)"));
    }
    Ok(())
}

/// One merge: `inputs` (consecutive, in write order) of one bucket into new files.
pub(crate) struct AppendRewrite<'a> {
    pub table: &'a Table,
    pub name: &'a str,
    pub bucket: &'a BucketFiles,
    pub inputs: Vec<DataFileMeta>,
    pub target_file_size: u64,
}

/// A compacted file being written.
struct Output {
    writer: ArrowWriter<Vec<u8>>,
    rows: usize,
}

impl AppendRewrite<'_> {
    fn file_err(&self, file: &str, message: impl std::fmt::Display) -> LsmError {
        LsmError::data_file(self.name, file, message)
    }

    /// Writes the merged files (not yet committed) and returns them. Reads one input at a
    /// time, so memory holds one input file and the output file being written.
    ///
    /// # Errors
    /// An input cannot be read or has another layout; writing failed. Files already written
    /// are removed then.
    pub async fn run(&self) -> Result<Vec<DataFileMeta>> {
        let template = self.template()?;
        let mut done = Vec::new();
        match self.write_all(&template, &mut done).await {
            Ok(()) => Ok(done),
            Err(e) => {
                self.abort(&done).await;
                Err(e)
            }
        }
    }

    async fn write_all(&self, template: &DataFileMeta, done: &mut Vec<DataFileMeta>) -> Result<()> {
        let schema_id = self.table.schema().id();
        let table_names: Vec<&str> = self.table.schema().fields().iter().map(|f| f.name()).collect();
        let mut layout: Option<SchemaRef> = None;
        let mut current: Option<Output> = None;
        for file in &self.inputs {
            if file.schema_id != schema_id || file.external_path.is_some() || !file.extra_files.is_empty() {
                return Err(LsmError::Refused {
                    table: self.name.to_string(),
                    message: format!(
                        "file {} was written under schema {} or carries extra files; append compaction only rewrites plain files of schema {schema_id}",
                        file.file_name, file.schema_id
                    ),
                });
            }
            let path = file.data_file_path(&self.bucket.bucket_path);
            let reader = crate::kvfile::open_data_file(self.table, self.name, &path, file).await?;
            let mut rows = 0usize;
            for batch in reader {
                let batch = batch.map_err(|e| self.file_err(&file.file_name, e))?;
                let schema = match &layout {
                    Some(s) => s.clone(),
                    None => {
                        let names: Vec<&str> =
                            batch.schema_ref().fields().iter().map(|f| f.name().as_str()).collect();
                        if names != table_names {
                            return Err(LsmError::Refused {
                                table: self.name.to_string(),
                                message: format!(
                                    "file {} has columns {names:?}, the table {table_names:?}; compacting across schema versions is not supported",
                                    file.file_name
                                ),
                            });
                        }
                        layout.insert(batch.schema()).clone()
                    }
                };
                if schema.fields() != batch.schema_ref().fields() {
                    return Err(LsmError::Refused {
                        table: self.name.to_string(),
                        message: format!(
                            "file {} has a different layout from the other files of bucket {}; compacting across schema versions is not supported",
                            file.file_name, self.bucket.bucket
                        ),
                    });
                }
                rows += batch.num_rows();
                self.write_batch(&mut current, &schema, &batch, template, done).await?;
            }
            if i64::try_from(rows).ok() != Some(file.row_count) {
                return Err(self.file_err(
                    &file.file_name,
                    format!("holds {rows} rows where its metadata records {}", file.row_count),
                ));
            }
        }
        if let Some(out) = current.take() {
            let meta = self.finish(out, template, done.len()).await?;
            done.push(meta);
        }
        Ok(())
    }

    async fn write_batch(
        &self,
        current: &mut Option<Output>,
        schema: &SchemaRef,
        batch: &RecordBatch,
        template: &DataFileMeta,
        done: &mut Vec<DataFileMeta>,
    ) -> Result<()> {
        let out = match current {
            Some(o) => o,
            None => {
                let props = crate::kvfile::writer_properties()
                    .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
                    .build();
                let writer = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props))
                    .map_err(|e| self.file_err("(output)", e))?;
                current.insert(Output { writer, rows: 0 })
            }
        };
        out.writer.write(batch).map_err(|e| self.file_err("(output)", e))?;
        out.rows += batch.num_rows();
        let written = out.writer.bytes_written() + out.writer.in_progress_size();
        if written as u64 >= self.target_file_size {
            let full = current.take().expect("an output is open");
            let meta = self.finish(full, template, done.len()).await?;
            done.push(meta);
        }
        Ok(())
    }

    /// Closes `out`, stores it and describes it (`template` with its name, size and rows).
    async fn finish(&self, out: Output, template: &DataFileMeta, ordinal: usize) -> Result<DataFileMeta> {
        let file_name = crate::kvfile::new_file_name(self.table, false, ordinal);
        let buf = out.writer.into_inner().map_err(|e| self.file_err(&file_name, e))?;
        let meta = DataFileMeta {
            file_name,
            file_size: i64::try_from(buf.len()).expect("file size fits i64"),
            row_count: i64::try_from(out.rows).expect("rows fit i64"),
            ..template.clone()
        };
        crate::kvfile::store(self.table, self.name, &meta.data_file_path(&self.bucket.bucket_path), buf)
            .await?;
        Ok(meta)
    }

    /// What every output file of this merge records, but for its name, size and rows.
    fn template(&self) -> Result<DataFileMeta> {
        let first = self.inputs.first().expect("a merge has inputs");
        let (value_stats, value_stats_cols) = self.merged_value_stats()?;
        Ok(DataFileMeta {
            file_name: String::new(),
            file_size: 0,
            row_count: 0,
            min_key: first.min_key.clone(),
            max_key: first.max_key.clone(),
            key_stats: first.key_stats.clone(),
            value_stats,
            min_sequence_number: self.inputs.iter().map(|f| f.min_sequence_number).min().unwrap_or(0),
            max_sequence_number: self.inputs.iter().map(|f| f.max_sequence_number).max().unwrap_or(0),
            schema_id: self.table.schema().id(),
            level: 0,
            extra_files: vec![],
            // The newest input's: files are ordered by creation time where sequence numbers
            // tie, and the merged rows stay where their inputs were.
            creation_time: self.inputs.iter().filter_map(|f| f.creation_time).max(),
            delete_row_count: Some(0),
            embedded_index: None,
            file_source: Some(1),
            value_stats_cols,
            external_path: None,
            first_row_id: None,
            write_cols: None,
            column_max_sequence_numbers: None,
        })
    }

    /// The inputs' column statistics combined (every output of a merge gets the whole
    /// merge's, which still bounds its rows), or none when the inputs do not all describe the
    /// same columns with known bounds.
    fn merged_value_stats<T: serde::de::DeserializeOwned>(&self) -> Result<(T, Option<Vec<String>>)> {
        let none = || -> Result<(T, Option<Vec<String>>)> {
            let stats = crate::stats::stats(&[], &[], &[], &[])
                .map_err(|message| LsmError::Refused { table: self.name.to_string(), message })?;
            Ok((stats, Some(Vec::new())))
        };
        let first = self.inputs.first().expect("a merge has inputs");
        if self.inputs.iter().any(|f| f.value_stats_cols != first.value_stats_cols) {
            return none();
        }
        let fields = self.table.schema().fields();
        let columns: Vec<(String, DataType)> = match &first.value_stats_cols {
            None => fields.iter().map(|f| (f.name().to_string(), f.data_type().clone())).collect(),
            Some(cols) if cols.is_empty() => return none(),
            Some(cols) => {
                let mut out = Vec::new();
                for c in cols {
                    match fields.iter().find(|f| f.name() == c) {
                        Some(f) => out.push((c.clone(), f.data_type().clone())),
                        None => return none(),
                    }
                }
                out
            }
        };
        let types: Vec<DataType> = columns.iter().map(|(_, t)| t.clone()).collect();
        // A file's bounds are two values of its column: their running min and max over every
        // file are the merged bounds.
        let mut acc = MinMax::new(types.len());
        for f in &self.inputs {
            let counts = f.value_stats.null_counts();
            let (Ok(lo), Ok(hi)) = (
                BinaryRow::from_serialized_bytes(f.value_stats.min_values()),
                BinaryRow::from_serialized_bytes(f.value_stats.max_values()),
            ) else {
                return none();
            };
            if counts.len() != types.len()
                || lo.arity() as usize != types.len()
                || hi.arity() as usize != types.len()
            {
                return none();
            }
            for (i, ty) in types.iter().enumerate() {
                let Some(n) = counts[i] else { return none() };
                acc.add_nulls(i, n);
                let (Ok(a), Ok(b)) = (lo.get_datum(i, ty), hi.get_datum(i, ty)) else { return none() };
                match (a, b) {
                    (Some(a), Some(b)) => {
                        acc.add(i, Some(a));
                        acc.add(i, Some(b));
                    }
                    // Bounds unknown although the file has values: no stats are safe.
                    _ if n < f.row_count => return none(),
                    _ => {}
                }
            }
        }
        let stats = acc
            .finish(&types)
            .map_err(|message| LsmError::Refused { table: self.name.to_string(), message })?;
        let cols = first.value_stats_cols.clone();
        Ok((stats, cols))
    }

    /// Deletes files written by a merge that will not be committed.
    pub(crate) async fn abort(&self, files: &[DataFileMeta]) {
        for f in files {
            let _ = self.table.file_io().delete_file(&f.data_file_path(&self.bucket.bucket_path)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KB: u64 = 1 << 10;
    const PICKER: AppendPicker =
        AppendPicker { small: 700 * KB, target: 1000 * KB, min_files: 5, max_files: 50, size_ratio: 1 };

    #[test]
    fn fewer_small_files_than_the_minimum_are_left_alone() {
        assert!(PICKER.pick(&[10 * KB; 4]).is_empty());
    }

    #[test]
    fn five_equal_small_files_merge_into_one() {
        assert_eq!(PICKER.pick(&[10 * KB; 5]), vec![0..5]);
    }

    #[test]
    fn a_big_file_is_never_rewritten_and_splits_the_runs_around_it() {
        let mut sizes = vec![10 * KB; 5];
        sizes.push(800 * KB);
        sizes.extend([10 * KB; 5]);
        assert_eq!(PICKER.pick(&sizes), vec![0..5, 6..11]);
        assert_eq!(PICKER.full(&sizes), vec![0..5, 6..11]);
    }

    #[test]
    fn merged_files_grow_in_tiers_rewriting_each_row_a_logarithmic_number_of_times() {
        // Simulate a writer adding one 10 KiB file per commit and compacting after each.
        let mut files: Vec<u64> = Vec::new();
        let mut written = 0u64;
        for _ in 0..2000 {
            files.push(10 * KB);
            for r in PICKER.pick(&files).into_iter().rev() {
                let merged: u64 = files[r.clone()].iter().sum();
                written += merged;
                files.splice(r, [merged]);
            }
        }
        let data = 2000 * 10 * KB;
        // Few files remain, and far fewer bytes were rewritten than merging everything
        // small after every commit would (which is quadratic).
        assert!(files.len() < 40, "{} files: {files:?}", files.len());
        assert!(written < data * 12, "rewrote {written} bytes for {data}");
        assert!(files.iter().filter(|&&s| s >= PICKER.small).count() >= 20, "{files:?}");
    }

    #[test]
    fn a_backlog_is_merged_at_most_max_files_at_a_time() {
        let picks = PICKER.pick(&[10 * KB; 120]);
        assert_eq!(picks, vec![0..20, 20..70, 70..120]);
    }

    #[test]
    fn full_packs_small_files_up_to_the_target_and_is_idempotent() {
        let sizes = [400 * KB, 400 * KB, 400 * KB, 100 * KB];
        assert_eq!(PICKER.full(&sizes), vec![0..2, 2..4]);
        assert!(PICKER.full(&[800 * KB, 500 * KB]).is_empty());
        assert!(PICKER.full(&[600 * KB, 600 * KB]).is_empty());
    }

    #[test]
    fn newest_takes_only_small_files_at_the_end() {
        assert_eq!(PICKER.newest(&[10 * KB, 800 * KB, 10 * KB, 10 * KB, 10 * KB], 2), vec![3..5]);
        assert_eq!(PICKER.newest(&[10 * KB, 800 * KB, 10 * KB], 3), Vec::<Range<usize>>::new());
    }
}
