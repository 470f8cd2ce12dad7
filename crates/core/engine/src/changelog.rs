//! livestate's changelog: every commit of a state table carries each changed key's row before
//! and after it as Paimon changelog files (`-U`/`+U`, `+I`, `-D`), one per bucket, in the same
//! snapshot; and reading one snapshot's changelog back, to recover the lookup index after a crash.
//! Format: docs/formats/index.md.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, Int8Array, RecordBatch, UInt32Array};
use arrow_ord::sort::{lexsort_to_indices, SortColumn};
use livestate_spec::TableSpec;
use paimon::spec::BinaryRow;
use paimon::{CommitMessage, Table};

use crate::error::{arrow_err, paimon_err, shape_err, EngineError};
use crate::rows;
use crate::window::{BeforeAfter, ClosedWindow};

/// The before/after of every key changed by snapshot `id`, read from its changelog.
pub(crate) async fn changes_of(
    table: &Table,
    ts: &TableSpec,
    name: &str,
    id: i64,
) -> Result<BTreeMap<Vec<u8>, BeforeAfter>, EngineError> {
    use futures::TryStreamExt;
    let rb = table.new_read_builder();
    let plan = rb
        .new_incremental_scan(paimon::IncrementalScanMode::Changelog, id - 1, id)
        .plan()
        .await
        .map_err(paimon_err(name, "plan changelog"))?;
    let batches: Vec<RecordBatch> = rb
        .new_read()
        .map_err(paimon_err(name, "read changelog"))?
        .to_audit_log_arrow(&plan)
        .map_err(paimon_err(name, "read changelog"))?
        .try_collect()
        .await
        .map_err(paimon_err(name, "read changelog"))?;
    let key_idx: Vec<usize> =
        ts.primary_key.iter().map(|k| ts.columns.get_index_of(k).expect("key column")).collect();
    let mut out: BTreeMap<Vec<u8>, BeforeAfter> = BTreeMap::new();
    for b in batches {
        let kinds = crate::read::row_kinds(&b)?;
        let user = b
            .project(&(1..b.num_columns()).collect::<Vec<_>>())
            .map_err(|source| EngineError::Arrow { table: name.to_string(), source })?;
        for (kind, row) in kinds.into_iter().zip(crate::read::rows_of(&user, ts)?) {
            let key = crate::index::key_bytes(key_idx.iter().map(|&i| &row[i]));
            let e = out.entry(key).or_insert((None, None));
            if kind.is_retract() {
                e.0 = Some(row);
            } else {
                e.1 = Some(row);
            }
        }
    }
    Ok(out)
}

/// Writes the pending commit's changes as Paimon changelog files, one per bucket, and adds
/// them to that bucket's commit message.
pub(crate) async fn attach(
    table: &Table,
    name: &str,
    window: &ClosedWindow,
    messages: &mut [CommitMessage],
) -> Result<(), EngineError> {
    let changes = window.changes();
    let key_idx = &window.rules().key_idx;
    if changes.is_empty() {
        return Ok(());
    }
    let arrow = shape_err(name);
    let plain = rows::write_schema(table, false).map_err(paimon_err(name, "schema"))?;
    let user = rows::to_batch(&plain, &changes).map_err(arrow)?;
    let fields = table.schema().fields();
    let buckets: i32 = table.schema().options().get("bucket").and_then(|b| b.parse().ok()).unwrap_or(1);
    let mut by_bucket: BTreeMap<i32, Vec<u32>> = BTreeMap::new();
    for i in 0..user.num_rows() {
        let key = BinaryRow::from_arrow(&user, i, key_idx, fields).map_err(paimon_err(name, "bucket"))?;
        by_bucket.entry((key.hash_code() % buckets).wrapping_abs()).or_default().push(i as u32);
    }
    let physical = livestate_lsm::kvfile::physical_schema(table, name)?;
    for (bucket, idx) in by_bucket {
        let message =
            messages.iter_mut().find(|m| m.bucket == bucket).ok_or_else(|| EngineError::ArrowShape {
                table: name.to_string(),
                message: format!("a change in bucket {bucket}, which this commit wrote nothing to"),
            })?;
        let seq = message.new_files.iter().map(|f| f.max_sequence_number).max().unwrap_or(0);
        let take = UInt32Array::from(idx.clone());
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![seq; idx.len()])),
            Arc::new(Int8Array::from(
                idx.iter().map(|&i| changes[i as usize].0.to_value()).collect::<Vec<_>>(),
            )),
        ];
        for c in user.columns() {
            columns.push(arrow_select::take::take(c.as_ref(), &take, None).map_err(arrow_err(name))?);
        }
        let batch = RecordBatch::try_new(physical.clone(), columns).map_err(arrow_err(name))?;
        // Files are sorted by primary key (their min/max keys say so); -U stays before +U.
        let mut sort: Vec<SortColumn> = key_idx
            .iter()
            .map(|&k| SortColumn { values: batch.column(k + 2).clone(), options: None })
            .collect();
        sort.push(SortColumn {
            values: Arc::new(UInt32Array::from_iter_values(0..idx.len() as u32)),
            options: None,
        });
        let order = lexsort_to_indices(&sort, None).map_err(arrow_err(name))?;
        let batch = arrow_select::take::take_record_batch(&batch, &order).map_err(arrow_err(name))?;
        let bucket_path = format!("{}/bucket-{bucket}", table.location().trim_end_matches('/'));
        let file = livestate_lsm::kvfile::write_changelog(table, name, &bucket_path, &batch, 0).await?;
        message.new_changelog_files.push(file);
    }
    Ok(())
}
