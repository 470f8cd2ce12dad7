//! Writing a primary-key data or changelog file in Paimon's physical layout, with the
//! `DataFileMeta` a manifest needs.
//!
//! Layout (what the `paimon` crate's own writer produces): `_SEQUENCE_NUMBER BIGINT`,
//! `_VALUE_KIND TINYINT`, then the table's columns in order, each carrying its Paimon field id;
//! rows sorted by primary key; parquet with zstd level 1.

use std::sync::Arc;

use arrow_array::{Int64Array, Int8Array, RecordBatch};
use arrow_schema::{DataType as ArrowType, Field, Schema as ArrowSchema, SchemaRef};
use paimon::spec::{BinaryRow, DataFileMeta, DataType, RowKind};
use paimon::Table;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use crate::error::{paimon_err, LsmError, Result};
use crate::stats::column_bounds;

/// Where a file comes from (`_FILE_SOURCE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileSource {
    /// Written by a data commit.
    Append,
    /// Written by compaction.
    Compact,
}

/// What kind of file to write.
#[derive(Debug, Clone, Copy)]
pub struct KvFile {
    pub level: i32,
    /// Distinguishes files written together (the `-<n>` in the name).
    pub ordinal: usize,
    pub source: FileSource,
}

/// Opens the data file at `path` (described by `file`) for reading in batches of 8,192 rows.
///
/// # Errors
/// The file cannot be read, or is not parquet ([`LsmError::DataFile`] names it).
pub async fn open_data_file(
    table: &Table,
    name: &str,
    path: &str,
    file: &DataFileMeta,
) -> Result<parquet::arrow::arrow_reader::ParquetRecordBatchReader> {
    let bytes = table
        .file_io()
        .new_input(path)
        .map_err(paimon_err(name, "open data file"))?
        .read()
        .await
        .map_err(paimon_err(name, "read data file"))?;
    parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|b| b.with_batch_size(8192).build())
        .map_err(|e| LsmError::data_file(name, &file.file_name, e))
}

/// The physical schema of `table`'s data and changelog files.
///
/// # Errors
/// A column type Paimon cannot map to Arrow.
pub fn physical_schema(table: &Table, name: &str) -> Result<SchemaRef> {
    let user = paimon::arrow::build_target_arrow_schema(table.schema().fields())
        .map_err(paimon_err(name, "arrow schema"))?;
    let mut fields = vec![
        Arc::new(Field::new("_SEQUENCE_NUMBER", ArrowType::Int64, false)),
        Arc::new(Field::new("_VALUE_KIND", ArrowType::Int8, false)),
    ];
    fields.extend(user.fields().iter().cloned());
    Ok(Arc::new(ArrowSchema::new(fields)))
}

/// Writes `rows` (physical layout, sorted by key) into the bucket directory `bucket_path` and
/// describes the file. A changelog file is named `changelog-…`, a data file `data-…`
/// (or the table's `data-file.prefix`).
///
/// # Errors
/// Encoding or writing the file failed; nothing is left behind then.
pub async fn write(
    table: &Table,
    name: &str,
    bucket_path: &str,
    rows: &RecordBatch,
    kind: KvFile,
) -> Result<DataFileMeta> {
    write_named(table, name, bucket_path, rows, kind, false).await
}

/// As [`write`], for a changelog file.
///
/// # Errors
/// As [`write`].
pub async fn write_changelog(
    table: &Table,
    name: &str,
    bucket_path: &str,
    rows: &RecordBatch,
    ordinal: usize,
) -> Result<DataFileMeta> {
    let kind = KvFile { level: 0, ordinal, source: FileSource::Append };
    write_named(table, name, bucket_path, rows, kind, true).await
}

async fn write_named(
    table: &Table,
    name: &str,
    bucket_path: &str,
    chunk: &RecordBatch,
    kind: KvFile,
    changelog: bool,
) -> Result<DataFileMeta> {
    let file_name = new_file_name(table, changelog, kind.ordinal);
    let fail =
        |message: String| LsmError::DataFile { table: name.to_string(), file: file_name.clone(), message };
    if chunk.num_rows() == 0 || chunk.num_columns() < 3 {
        return Err(fail("nothing to write".into()));
    }
    let props = writer_properties().build();
    let mut buf = Vec::new();
    let mut writer =
        ArrowWriter::try_new(&mut buf, chunk.schema(), Some(props)).map_err(|e| fail(e.to_string()))?;
    writer.write(chunk).map_err(|e| fail(e.to_string()))?;
    writer.close().map_err(|e| fail(e.to_string()))?;

    let fields = table.schema().fields();
    let user =
        chunk.project(&(2..chunk.num_columns()).collect::<Vec<_>>()).map_err(|e| fail(e.to_string()))?;
    if user.num_columns() != fields.len() {
        return Err(fail(format!("{} columns for a table of {}", user.num_columns(), fields.len())));
    }
    let pk_idx: Vec<usize> = table
        .schema()
        .primary_keys()
        .iter()
        .map(|k| fields.iter().position(|f| f.name() == k).expect("key is a field"))
        .collect();
    let key_types: Vec<DataType> = pk_idx.iter().map(|&i| fields[i].data_type().clone()).collect();
    let all_types: Vec<DataType> = fields.iter().map(|f| f.data_type().clone()).collect();
    // Each column's bounds once: the key columns' statistics are theirs, projected.
    let bounds = column_bounds(&user, &all_types).map_err(fail)?;
    let key_stats = bounds.project(&pk_idx).finish(&key_types).map_err(fail)?;
    let value_stats = bounds.finish(&all_types).map_err(fail)?;
    let key_of = |row: usize| {
        BinaryRow::from_arrow(&user, row, &pk_idx, fields)
            .map(|r| r.to_serialized_bytes())
            .map_err(paimon_err(name, "key bounds"))
    };
    let seqs = chunk
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| fail("column 0 is not _SEQUENCE_NUMBER".into()))?;
    let kinds = chunk
        .column(1)
        .as_any()
        .downcast_ref::<Int8Array>()
        .ok_or_else(|| fail("column 1 is not _VALUE_KIND".into()))?;
    let deletes = (0..chunk.num_rows())
        .filter(|&i| !RowKind::from_value(kinds.value(i)).is_ok_and(|k| k.is_add()))
        .count();
    let meta = DataFileMeta {
        file_name: file_name.clone(),
        file_size: i64::try_from(buf.len()).expect("file size fits i64"),
        row_count: i64::try_from(chunk.num_rows()).expect("rows fit i64"),
        min_key: key_of(0)?,
        max_key: key_of(chunk.num_rows() - 1)?,
        key_stats,
        value_stats,
        min_sequence_number: seqs.values().iter().copied().min().unwrap_or(0),
        max_sequence_number: seqs.values().iter().copied().max().unwrap_or(0),
        schema_id: table.schema().id(),
        level: kind.level,
        extra_files: vec![],
        creation_time: Some(chrono::Utc::now()),
        delete_row_count: Some(i64::try_from(deletes).expect("rows fit i64")),
        embedded_index: None,
        file_source: Some(match kind.source {
            FileSource::Append => 0,
            FileSource::Compact => 1,
        }),
        value_stats_cols: None,
        external_path: None,
        first_row_id: None,
        write_cols: None,
        column_max_sequence_numbers: None,
    };
    store(table, name, &meta.data_file_path(bucket_path), buf).await?;
    Ok(meta)
}

/// A new data (or changelog) file name: the table's `data-file.prefix` (`changelog-file.prefix`),
/// a UUID and `ordinal`, which distinguishes files written together.
pub(crate) fn new_file_name(table: &Table, changelog: bool, ordinal: usize) -> String {
    let opts = table.schema().options();
    let prefix = if changelog {
        opts.get("changelog-file.prefix").map_or("changelog-", String::as_str)
    } else {
        opts.get("data-file.prefix").map_or("data-", String::as_str)
    };
    format!("{prefix}{}-{ordinal}.parquet", uuid::Uuid::new_v4())
}

/// How every file livestate writes is encoded: parquet, zstd level 1, chunk statistics.
pub(crate) fn writer_properties() -> parquet::file::properties::WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("zstd level 1")))
        .set_statistics_enabled(EnabledStatistics::Chunk)
}

/// Writes `buf` as the file at `path`.
///
/// # Errors
/// Creating or writing the file failed; a partial file (a full disk) is removed then, as
/// nothing references it, rather than left to orphan cleanup.
pub(crate) async fn store(table: &Table, name: &str, path: &str, buf: Vec<u8>) -> Result<()> {
    let output = table.file_io().new_output(path).map_err(paimon_err(name, "create file"))?;
    if let Err(e) = output.write(bytes::Bytes::from(buf)).await {
        let _ = table.file_io().delete_file(path).await;
        return Err(paimon_err(name, "write file")(e));
    }
    Ok(())
}
