//! livestate's own merge-on-read of a primary-key table it derives: each bucket's data files
//! read as stored, their rows ordered by key and sequence number, and each key's cells picked
//! column by column as compaction picks them ([`livestate_lsm::merge`]), or, for an aggregation
//! table, each key's rows folded with the table's [`Merger`], the same merge the derivers apply
//! to every operation.
//!
//! The `paimon` crate's reader merges a key by building a one-row Arrow batch for it (a slice
//! or a null array per column, then a batch), which a profile of full scans of a partial-update
//! table charged with half of the scan's time. This merge works on whole columns instead: the
//! bucket's files are concatenated once, their keys converted to byte-comparable rows once,
//! the rows ordered by (key, sequence number) with a stable sort that merges the files' sorted
//! runs, and only the rows the merge engine needs are decoded.
//!
//! It reads exactly what Paimon's reader reads, and is used only where that is plain: a table
//! livestate derives (so every file was written by livestate or by its compaction), whose
//! merge engine [`Merger`] follows (no sequence field, no sequence groups), without deletion
//! vectors, each file in the table's current layout. A bucket holding a retraction (`-U`/`-D`)
//! is merged by Paimon's reader unless the table is `deduplicate`, where the latest row of a
//! key simply wins or removes it. Anything else falls back to the `paimon` crate's reader, a
//! bucket at a time. `tests/merge_read.rs` checks both give the same rows for every merge
//! engine.

use std::sync::Arc;

use arrow_array::{Array, BooleanArray, Int64Array, Int8Array, UInt32Array};
use livestate_lsm::merge::{KeyOrder, Merged, Pick};
use livestate_spec::{Action, MergeEngine, Merger, TableSpec, Value};
use paimon::spec::RowKind;
use paimon::{DataSplit, Table};

use crate::error::{arrow_err, shape_err, EngineError};

const SEQUENCE: &str = "_SEQUENCE_NUMBER";
const VALUE_KIND: &str = "_VALUE_KIND";

/// The merger livestate reads `table` with itself, or `None` when the `paimon` crate's reader
/// must merge it (see the module documentation).
pub(crate) fn own_merger(table: &Table, ts: &TableSpec) -> Option<Merger> {
    if !ts.derived_here() || table.schema().primary_keys().is_empty() {
        return None;
    }
    let options = table.schema().options();
    if options.get("deletion-vectors.enabled").is_some_and(|v| v == "true") {
        return None;
    }
    let names: Vec<&str> = table.schema().fields().iter().map(|f| f.name()).collect();
    let spec_names: Vec<&str> = ts.columns.keys().map(String::as_str).collect();
    if names != spec_names {
        return None;
    }
    Merger::new(ts).ok()
}

/// One bucket merged: its rows in key order, with each row's key as byte-comparable bytes
/// (`keys.row(key_of[i])` is the key of `rows[i]`), so buckets are merged into one key order
/// without reading the rows again.
pub(crate) struct MergedBucket {
    pub rows: Vec<Vec<Value>>,
    order: KeyOrder,
    /// The group of `order` each row's key is.
    group_of: Vec<u32>,
}

impl MergedBucket {
    fn key(&self, i: usize) -> &[u8] {
        self.order.keys.row(self.order.first(self.group_of[i] as usize) as usize).data()
    }
}

/// A bucket's stored rows, ordered for merging.
struct Ordered {
    /// Every stored row of the bucket: `_SEQUENCE_NUMBER`, `_VALUE_KIND`, then the table's
    /// columns.
    raw: arrow_array::RecordBatch,
    /// Each stored row's kind.
    kinds: Vec<RowKind>,
    /// The stored rows in (key, sequence number) order, grouped by key.
    order: KeyOrder,
}

impl Ordered {
    /// The table's columns of every stored row.
    fn user(&self, full: &str) -> Result<arrow_array::RecordBatch, EngineError> {
        self.raw
            .project(&(2..self.raw.num_columns()).collect::<Vec<_>>())
            .map_err(|source| EngineError::Arrow { table: full.to_string(), source })
    }
}

/// A bucket's stored rows read and ordered, or `None` when this bucket must be read by Paimon's
/// reader (see the module documentation).
///
/// # Errors
/// A data file that cannot be read or decoded.
async fn ordered(
    table: &Table,
    ts: &TableSpec,
    merger: &Merger,
    split: &DataSplit,
    filters: &[(usize, Value)],
    full: &str,
) -> Result<Option<Ordered>, EngineError> {
    let schema_id = table.schema().id();
    let files = split.data_files();
    if files.iter().any(|f| f.schema_id != schema_id || f.write_cols.is_some())
        || split.data_deletion_files().is_some_and(|d| d.iter().any(Option::is_some))
    {
        return Ok(None);
    }
    let bad = shape_err(full);
    let mut batches = Vec::new();
    for file in files {
        let path = split.data_file_path(file);
        let reader = livestate_lsm::kvfile::open_data_file(table, full, &path, file).await?;
        for batch in reader {
            batches.push(batch.map_err(|e| bad(format!("data file {}: {e}", file.file_name)))?);
        }
    }
    let Some(first) = batches.first() else { return Ok(None) };
    let schema = first.schema();
    let expected = [SEQUENCE, VALUE_KIND].into_iter().chain(ts.columns.keys().map(String::as_str));
    if !schema.fields().iter().map(|f| f.name().as_str()).eq(expected)
        || batches.iter().any(|b| b.schema().fields() != schema.fields())
    {
        return Ok(None);
    }
    let raw = arrow_select::concat::concat_batches(&schema, &batches).map_err(arrow_err(full))?;
    drop(batches);
    // A read by key merges only that key's rows.
    let raw = match key_mask(&raw, ts, filters) {
        Some(mask) => arrow_select::filter::filter_record_batch(&raw, &mask).map_err(arrow_err(full))?,
        None => raw,
    };
    let (Some(seqs), Some(kinds)) = (
        raw.column(0).as_any().downcast_ref::<Int64Array>(),
        raw.column(1).as_any().downcast_ref::<Int8Array>(),
    ) else {
        return Ok(None);
    };
    let kinds: Vec<RowKind> = kinds
        .values()
        .iter()
        .map(|&k| RowKind::from_value(k).map_err(|e| bad(format!("row kind {k}: {e}"))))
        .collect::<Result<_, _>>()?;
    let dedup = ts.merge_engine == MergeEngine::Deduplicate && merger.removes_on_delete();
    if !dedup && kinds.iter().any(|k| !k.is_add()) {
        return Ok(None);
    }
    let key_cols: Vec<_> = ts
        .primary_key
        .iter()
        .map(|k| raw.column(2 + ts.columns.get_index_of(k).expect("key column")).clone())
        .collect();
    // Each file is sorted by key: a stable sort of the concatenation merges those runs.
    let order = KeyOrder::new(&key_cols, seqs.values()).map_err(arrow_err(full))?;
    Ok(Some(Ordered { raw, kinds, order }))
}

/// One bucket merged into rows, or `None` when this bucket must be read by Paimon's reader (see
/// the module documentation). Deduplicate, first-row and partial-update buckets are merged
/// column by column ([`merge_columns`]) and only the merged rows decoded; aggregation buckets
/// decode every stored row and fold each key's rows with the table's [`Merger`].
///
/// # Errors
/// A data file that cannot be read or decoded.
pub(crate) async fn merge_split(
    table: &Table,
    ts: &TableSpec,
    merger: &Merger,
    split: &DataSplit,
    filters: &[(usize, Value)],
    full: &str,
) -> Result<Option<MergedBucket>, EngineError> {
    let Some(o) = ordered(table, ts, merger, split, filters, full).await? else { return Ok(None) };
    let bad = shape_err(full);
    let user = o.user(full)?;
    if let Some(merged) = merge_columns(&o, ts, &user, full)? {
        let rows = crate::rows::from_batch(&merged.batch).map_err(bad)?;
        return Ok(Some(MergedBucket { rows, order: o.order, group_of: merged.groups }));
    }
    let Ordered { kinds, order, .. } = o;
    let taken = arrow_select::take::take_record_batch(&user, &UInt32Array::from(order.order.clone()))
        .map_err(arrow_err(full))?;
    let mut decoded = crate::rows::from_batch(&taken).map_err(bad)?.into_iter();
    let mut out = Vec::with_capacity(order.groups.len());
    let mut group_of = Vec::with_capacity(order.groups.len());
    for (g, range) in order.groups.iter().enumerate() {
        let mut current = None;
        for &i in &order.order[range.clone()] {
            let row = decoded.next().expect("one decoded row per row folded");
            let action = if kinds[i as usize].is_add() { Action::Upsert } else { Action::Delete };
            current = merger.apply(current, action, &row);
        }
        if let Some(row) = current {
            out.push(row);
            group_of.push(u32::try_from(g).expect("groups are rows, which fit u32"));
        }
    }
    Ok(Some(MergedBucket { rows: out, order, group_of }))
}

/// The merged rows of a deduplicate, first-row or partial-update bucket, one batch of the
/// table's columns (`user`, every stored row) in key order, merged column by column by
/// [`livestate_lsm::merge`]; `None` for an aggregation table, which folds values. `ordered` sends
/// a bucket holding a retraction to Paimon's reader for every engine but deduplicate.
fn merge_columns(
    o: &Ordered,
    ts: &TableSpec,
    user: &arrow_array::RecordBatch,
    full: &str,
) -> Result<Option<Merged>, EngineError> {
    let pick = match ts.merge_engine {
        MergeEngine::Deduplicate => Pick::Latest,
        MergeEngine::FirstRow => Pick::First,
        MergeEngine::PartialUpdate => Pick::LatestNonNull,
        MergeEngine::Aggregation => return Ok(None),
    };
    livestate_lsm::merge::merge(user, &o.kinds, &o.order, pick)
        .map_err(|source| EngineError::Arrow { table: full.to_string(), source })
}

/// One bucket merged into one Arrow batch of the table's columns, in key order, or `None` when
/// this bucket must be read by Paimon's reader (see the module documentation): column by column
/// ([`merge_columns`]), or for an aggregation table folded row by row as [`merge_split`] does
/// and encoded again.
///
/// # Errors
/// A data file that cannot be read or decoded.
pub(crate) async fn merge_split_batch(
    table: &Table,
    ts: &TableSpec,
    merger: &Merger,
    split: &DataSplit,
    full: &str,
) -> Result<Option<arrow_array::RecordBatch>, EngineError> {
    if ts.merge_engine == MergeEngine::Aggregation {
        let Some(bucket) = merge_split(table, ts, merger, split, &[], full).await? else {
            return Ok(None);
        };
        let schema =
            crate::rows::write_schema(table, false).map_err(crate::error::paimon_err(full, "schema"))?;
        let rows: Vec<crate::rows::KindRow> = bucket.rows.into_iter().map(|r| (RowKind::Insert, r)).collect();
        let batch = crate::rows::to_batch(&schema, &rows).map_err(shape_err(full))?;
        return Ok(Some(batch));
    }
    let Some(o) = ordered(table, ts, merger, split, &[], full).await? else { return Ok(None) };
    let user = o.user(full)?;
    Ok(merge_columns(&o, ts, &user, full)?.map(|m| m.batch))
}

/// Which stored rows hold the key values `filters` name, or `None` when no filter is on a key
/// column (a value column's filter holds only for the merged row, so it is checked after the
/// merge) or a key column's type is not one livestate writes.
fn key_mask(
    raw: &arrow_array::RecordBatch,
    ts: &TableSpec,
    filters: &[(usize, Value)],
) -> Option<BooleanArray> {
    let mut keep: Option<Vec<bool>> = None;
    for (idx, v) in filters {
        let (name, _) = ts.columns.get_index(*idx)?;
        if !ts.is_key(name) {
            continue;
        }
        let col = raw.column(2 + idx);
        let holds: Vec<bool> = if v.is_null() {
            (0..col.len()).map(|i| col.is_null(i)).collect()
        } else {
            let value = crate::rows::array_of(col.data_type(), v).ok()?;
            let eq = arrow_ord::cmp::eq(col, &arrow_array::Scalar::new(value)).ok()?;
            (0..eq.len()).map(|i| eq.is_valid(i) && eq.value(i)).collect()
        };
        keep = Some(match keep {
            None => holds,
            Some(k) => k.iter().zip(holds).map(|(a, b)| *a && b).collect(),
        });
    }
    keep.map(BooleanArray::from)
}

/// The rows of merged buckets in one key order, by their keys' bytes (the rows themselves are
/// only moved, never read: they are cold by now).
fn in_key_order(buckets: Vec<MergedBucket>) -> Vec<Vec<Value>> {
    let total = buckets.iter().map(|b| b.rows.len()).sum();
    let mut at = vec![0usize; buckets.len()];
    // The bucket each row of the result comes from, in order.
    let mut from = Vec::with_capacity(total);
    loop {
        let mut best: Option<usize> = None;
        for (b, bucket) in buckets.iter().enumerate() {
            if at[b] < bucket.rows.len() && best.is_none_or(|x| bucket.key(at[b]) < buckets[x].key(at[x])) {
                best = Some(b);
            }
        }
        let Some(b) = best else { break };
        from.push(b);
        at[b] += 1;
    }
    let mut rows: Vec<_> = buckets.into_iter().map(|b| b.rows.into_iter()).collect();
    from.into_iter().map(|b| rows[b].next().expect("one row per entry")).collect()
}

/// The rows of `plan`'s splits merged by livestate where it can, by Paimon's reader where it
/// cannot; each split on a task of its own, as many at once as the machine has cores. In key
/// order when livestate merged every split (the second field says so), else in split order.
pub(crate) async fn merged_plan_rows(
    table: &Table,
    ts: &TableSpec,
    merger: Merger,
    filters: &[(usize, Value)],
    rb: &paimon::ReadBuilder<'_>,
    plan: &paimon::Plan,
    full: &str,
) -> Result<(Vec<Vec<Value>>, bool), EngineError> {
    let (merger, table, ts) = (Arc::new(merger), Arc::new(table.clone()), Arc::new(ts.clone()));
    let filters: Arc<[(usize, Value)]> = filters.into();
    // Each part merged by livestate (`Ok`) or by the crate's reader (`Err`).
    let parts: Vec<Result<MergedBucket, Vec<Vec<Value>>>> =
        super::scan::per_split(rb, plan, full, |split, fallback, permits| {
            let (merger, table, ts, filters) = (merger.clone(), table.clone(), ts.clone(), filters.clone());
            let (split, full) = (split.clone(), full.to_string());
            async move {
                let own = {
                    let _permit = permits.acquire().await.expect("the semaphore is never closed");
                    merge_split(&table, &ts, &merger, &split, &filters, &full).await?
                };
                match own {
                    Some(bucket) => Ok(Ok(bucket)),
                    None => super::scan::split_rows(fallback, full, permits).await.map(Err),
                }
            }
        })
        .await?;
    if parts.iter().all(Result::is_ok) {
        return Ok((in_key_order(parts.into_iter().flatten().collect()), true));
    }
    let rows = parts
        .into_iter()
        .flat_map(|p| match p {
            Ok(bucket) => bucket.rows,
            Err(rows) => rows,
        })
        .collect();
    Ok((rows, false))
}

/// The batches of `plan`'s splits, each bucket merged by livestate where it can
/// ([`merge_split_batch`], `merger` given) and by Paimon's reader where it cannot; each split on
/// a task of its own, as many at once as the machine has cores. Buckets in the plan's order.
pub(crate) async fn merged_plan_batches(
    table: &Table,
    ts: &TableSpec,
    merger: Option<Merger>,
    rb: &paimon::ReadBuilder<'_>,
    plan: &paimon::Plan,
    full: &str,
) -> Result<Vec<arrow_array::RecordBatch>, EngineError> {
    use futures::TryStreamExt;
    let (merger, table, ts) = (merger.map(Arc::new), Arc::new(table.clone()), Arc::new(ts.clone()));
    let parts = super::scan::per_split(rb, plan, full, |split, fallback, permits| {
        let (merger, table, ts) = (merger.clone(), table.clone(), ts.clone());
        let (split, full) = (split.clone(), full.to_string());
        async move {
            let _permit = permits.acquire().await.expect("the semaphore is never closed");
            let own = match &merger {
                Some(m) => merge_split_batch(&table, &ts, m, &split, &full).await?,
                None => None,
            };
            match own {
                Some(batch) => Ok(vec![batch]),
                None => {
                    fallback.try_collect::<Vec<_>>().await.map_err(crate::error::paimon_err(&full, "read"))
                }
            }
        }
    })
    .await?;
    Ok(parts.into_iter().flatten().filter(|b| b.num_rows() > 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Livestate, CATCH_UP_COMMIT_EVENTS};

    fn line(n: u32, ty: &str, data: serde_json::Value) -> String {
        serde_json::json!({"id": format!("m-{n}"), "type": ty, "occurred_at": "2026-03-02T08:00:00Z", "data": data})
            .to_string()
    }

    /// Every bucket of the partial-update, deduplicate (with deletes) and aggregation tables
    /// is merged by livestate, none handed back to the crate's reader.
    #[tokio::test]
    async fn livestate_merges_every_bucket_of_the_tables_it_derives_itself() {
        let dir = tempfile::tempdir().unwrap();
        let ls = Livestate::init(&dir.path().join("d"), &livestate_testkit::example_dir()).await.unwrap();
        let stock = |n: u32, field: &str, v: i64| {
            let data = serde_json::json!({"item": format!("part-{}", n % 5), "location": "north", field: v});
            line(n, "inventory.stock_counted", data)
        };
        let order = |n: u32, placed: bool| {
            let mut data = serde_json::json!({"order_id": format!("o{}", n % 4), "line": 1,
                "item": "part-1", "location": "north", "qty": 2});
            if placed {
                data["customer"] = "c".into();
                data["unit_price"] = "2.50".into();
                return line(n, "commerce.order_placed", data);
            }
            line(n, "commerce.order_shipped", data)
        };
        // Three commits, so each bucket holds several sorted runs, and orders shipped (deleted).
        for chunk in [0..20u32, 20..40, 40..60] {
            let lines: Vec<String> = chunk
                .map(|n| match n % 3 {
                    0 => stock(n, "on_hand", i64::from(n)),
                    1 => order(n, true),
                    _ => order(n, false),
                })
                .collect();
            ls.emit(&lines.join("\n"), false).unwrap();
            let mut d = ls.derivers().await.unwrap();
            ls.catch_up(&mut d, CATCH_UP_COMMIT_EVENTS, &mut |_| {}).await.unwrap();
            d.finish().await;
        }
        for name in ["stock", "open_orders", "reservations_total"] {
            let ts = ls.spec().table(name).unwrap();
            let table = ls.table(name).await.unwrap();
            let merger = own_merger(&table, ts).unwrap_or_else(|| panic!("{name} is merged by livestate"));
            let plan = table.new_read_builder().new_scan().plan().await.unwrap();
            assert!(!plan.splits().is_empty(), "{name} has data");
            let mut files = 0;
            for split in plan.splits() {
                files += split.data_files().len();
                let rows = merge_split(&table, ts, &merger, split, &[], name).await.unwrap();
                assert!(rows.is_some(), "{name} bucket {} fell back to the crate's reader", split.bucket());
                let batch = merge_split_batch(&table, ts, &merger, split, name).await.unwrap();
                let batch =
                    batch.unwrap_or_else(|| panic!("{name} bucket {} fell back in columns", split.bucket()));
                let rows = rows.unwrap().rows;
                assert_eq!(
                    crate::rows::from_batch(&batch).unwrap(),
                    rows,
                    "{name}: columns and rows merge alike"
                );
            }
            assert!(files > plan.splits().len(), "{name}: some bucket holds several files ({files})");
        }
    }
}
