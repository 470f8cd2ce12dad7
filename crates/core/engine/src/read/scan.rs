//! Scans: a table's rows from its Parquet files (planned and decoded on every core), Arrow
//! batches as rows, and the `record.events` archive.

use std::sync::Arc;

use tokio::sync::Semaphore;

use super::*;

impl Rows {
    /// Keeps the rows for which `condition` holds, then at most `limit` of them.
    ///
    /// # Errors
    /// [`EngineError::BadRequest`] when the condition fails on a row (an overflow, say).
    pub fn select(&mut self, condition: Option<&Expr>, limit: Option<usize>) -> Result<(), EngineError> {
        if let Some(cond) = condition {
            let mut kept = Vec::with_capacity(self.rows.len());
            for row in std::mem::take(&mut self.rows) {
                let lookup = |n: &str| self.columns.iter().position(|c| c == n).map(|i| row[i].clone());
                let holds = cond.holds(&lookup).map_err(|message| EngineError::BadRequest {
                    table: self.receipt.table.clone(),
                    message,
                })?;
                if holds {
                    kept.push(row);
                }
            }
            self.rows = kept;
        }
        if let Some(n) = limit {
            self.rows.truncate(n);
        }
        Ok(())
    }
}

/// Every row of `table` (as of the version the handle points at), merged as livestate's reads
/// merge it (see [`scan`]).
///
/// # Errors
/// Paimon or Arrow errors.
pub async fn scan_all(table: &Table, ts: &TableSpec) -> Result<Vec<Vec<Value>>, EngineError> {
    scan(table, ts, &[]).await
}

/// Every row of `table` (as of the version the handle points at) as Arrow batches of its
/// columns, merged by livestate's own merge where it reads the table exactly as Paimon does
/// (column by column, see `merge.rs`), else by the `paimon` crate's reader: a batch or more per
/// bucket, buckets in the plan's order, rows in key order within a bucket livestate merged.
///
/// # Errors
/// Paimon or Arrow errors.
pub async fn scan_all_batches(
    table: &Table,
    ts: &TableSpec,
) -> Result<Vec<arrow_array::RecordBatch>, EngineError> {
    let full = TableId::state(&ts.name).full_name();
    let Some((rb, plan)) = planned(table, ts, &[], &full).await? else { return Ok(Vec::new()) };
    merge::merged_plan_batches(table, ts, merge::own_merger(table, ts), &rb, &plan, &full).await
}

/// Every row of `table`, merged by the `paimon` crate's reader alone, never by livestate's own
/// merge: what checks compare livestate's reads against.
///
/// # Errors
/// Paimon or Arrow errors.
pub async fn paimon_scan_all(table: &Table, ts: &TableSpec) -> Result<Vec<Vec<Value>>, EngineError> {
    let full = TableId::state(&ts.name).full_name();
    let Some((rb, plan)) = planned(table, ts, &[], &full).await? else { return Ok(Vec::new()) };
    plan_rows(&rb, &plan, &full).await
}

/// The rows of an Arrow batch of `ts`'s columns.
///
/// # Errors
/// A column whose values do not decode.
pub fn rows_of(batch: &arrow_array::RecordBatch, ts: &TableSpec) -> Result<Vec<Vec<Value>>, EngineError> {
    crate::rows::from_batch(batch).map_err(crate::error::shape_err(&ts.name))
}

/// The row kinds (`+I`, `-U`, `+U`, `-D`) in the first column of an audit-log batch, whether
/// the reader wrote them as their short strings or as their byte values.
///
/// # Errors
/// The first column holds no row kinds.
pub fn row_kinds(batch: &arrow_array::RecordBatch) -> Result<Vec<paimon::spec::RowKind>, EngineError> {
    use arrow_array::Array;
    use paimon::spec::RowKind;
    let col = batch.column(0);
    let bad = || EngineError::ArrowShape {
        table: "(changelog)".into(),
        message: "first column is not a row kind".into(),
    };
    if let Some(s) = col.as_any().downcast_ref::<arrow_array::StringArray>() {
        return (0..s.len()).map(|i| RowKind::from_short_string(s.value(i)).map_err(|_| bad())).collect();
    }
    let k = col.as_any().downcast_ref::<arrow_array::Int8Array>().ok_or_else(bad)?;
    (0..k.len()).map(|i| RowKind::from_value(k.value(i)).map_err(|_| bad())).collect()
}

/// The rows of `table` for which `filters` hold, merged, in key order: by livestate's own
/// merge where it reads the table exactly as Paimon does (`merge.rs`), else by the `paimon`
/// crate's reader.
pub(crate) async fn scan(
    table: &Table,
    ts: &TableSpec,
    filters: &[(usize, Value)],
) -> Result<Vec<Vec<Value>>, EngineError> {
    let full = TableId::state(&ts.name).full_name();
    let Some((rb, plan)) = planned(table, ts, filters, &full).await? else { return Ok(Vec::new()) };
    let (mut rows, in_order) = match merge::own_merger(table, ts) {
        Some(merger) => merge::merged_plan_rows(table, ts, merger, filters, &rb, &plan, &full).await?,
        None => (plan_rows(&rb, &plan, &full).await?, false),
    };
    if !filters.is_empty() {
        rows.retain(|r| filters.iter().all(|(i, v)| &r[*i] == v));
    }
    if !in_order {
        sort_by_key(ts, &mut rows);
    }
    Ok(rows)
}

/// The read builder and plan of a scan of `table` with `filters` as predicates, `None` when the
/// table has no snapshot yet.
async fn planned<'t>(
    table: &'t Table,
    ts: &TableSpec,
    filters: &[(usize, Value)],
    full: &str,
) -> Result<Option<(paimon::ReadBuilder<'t>, paimon::Plan)>, EngineError> {
    let has_snapshot =
        table.snapshot_manager().get_latest_snapshot_id().await.map_err(paimon_err(full, "read snapshot"))?;
    if has_snapshot.is_none() {
        return Ok(None);
    }
    let mut rb = table.new_read_builder();
    if !filters.is_empty() {
        let pb = PredicateBuilder::new(table.schema().fields());
        let mut preds = Vec::new();
        for (idx, v) in filters {
            let col = ts.columns.get_index(*idx).expect("index from get_index_of").0;
            let p = match datum(v) {
                Some(d) => pb.equal(col, d),
                None => pb.is_null(col),
            };
            preds.push(p.map_err(paimon_err(full, "filter"))?);
        }
        rb.with_filter(Predicate::and(preds));
    }
    let mut scan = rb.new_scan();
    if ts.merge_engine == MergeEngine::FirstRow {
        // Paimon readers skip level-0 files of first-row tables; until compaction moves them up,
        // the merged view of every file is the table's content.
        scan = scan.with_scan_all_files();
    }
    let plan = scan.plan().await.map_err(paimon_err(full, "plan scan"))?;
    Ok(Some((rb, plan)))
}

pub(crate) fn sort_by_key(ts: &TableSpec, rows: &mut [Vec<Value>]) {
    let key_idx: Vec<usize> = ts.primary_key.iter().filter_map(|k| ts.columns.get_index_of(k)).collect();
    rows.sort_by(|a, b| {
        for &i in &key_idx {
            let o = compare(&a[i], &b[i]).unwrap_or(std::cmp::Ordering::Equal);
            if o.is_ne() {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    });
}

/// Every row of the `record.events` archive, in offset order (columns as in
/// [`crate::schema::ARCHIVE_COLUMNS`]).
///
/// # Errors
/// Paimon errors.
pub async fn archive_rows(catalog: &Catalog) -> Result<Vec<Vec<Value>>, EngineError> {
    let id = TableId::archive();
    let full = id.full_name();
    let table = catalog.table(id.identifier()).await.map_err(paimon_err(&full, "open"))?;
    if table
        .snapshot_manager()
        .get_latest_snapshot_id()
        .await
        .map_err(paimon_err(&full, "read snapshot"))?
        .is_none()
    {
        return Ok(Vec::new());
    }
    let rb = table.new_read_builder();
    let plan = rb.new_scan().plan().await.map_err(paimon_err(&full, "plan scan"))?;
    let mut rows = plan_rows(&rb, &plan, &full).await?;
    rows.sort_by_key(|r| match r.first() {
        Some(Value::Int(o)) => *o,
        _ => i64::MAX,
    });
    Ok(rows)
}

/// Reads every split of `plan` and converts the batches into rows, in split order. Splits
/// (buckets) are independent, so they are read and merged on their own tasks, as many at once
/// as the machine has cores: a full scan of a table of several buckets uses every core.
pub(crate) async fn plan_rows(
    rb: &paimon::ReadBuilder<'_>,
    plan: &paimon::Plan,
    full: &str,
) -> Result<Vec<Vec<Value>>, EngineError> {
    let parts =
        per_split(rb, plan, full, |_, stream, permits| split_rows(stream, full.to_string(), permits)).await?;
    let mut rows = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for part in parts {
        rows.extend(part);
    }
    Ok(rows)
}

/// Runs `work` on every split of `plan`, each on a task of its own, and returns their parts in
/// split order. `work` gets the split (to clone if its task needs it), the crate's stream for it (for a bucket read by Paimon's
/// reader) and the read's permits, one per core, which it holds while it reads. The first
/// failure ends the read: a `JoinSet` aborts its tasks when dropped, so a read given up on stops
/// reading.
pub(crate) async fn per_split<T, Fut>(
    rb: &paimon::ReadBuilder<'_>,
    plan: &paimon::Plan,
    full: &str,
    work: impl Fn(&paimon::DataSplit, paimon::table::ArrowRecordBatchStream, Arc<Semaphore>) -> Fut,
) -> Result<Vec<T>, EngineError>
where
    T: Send + 'static,
    Fut: std::future::Future<Output = Result<T, EngineError>> + Send + 'static,
{
    let read = rb.new_read().map_err(paimon_err(full, "read"))?;
    let permits = Arc::new(Semaphore::new(crate::cores::cores()));
    let mut tasks = tokio::task::JoinSet::new();
    let n = plan.splits().len();
    for (i, split) in plan.splits().iter().enumerate() {
        let stream = read.to_arrow(std::slice::from_ref(split)).map_err(paimon_err(full, "read"))?;
        let part = work(split, stream, permits.clone());
        tasks.spawn(async move { (i, part.await) });
    }
    let mut parts: Vec<Option<T>> = (0..n).map(|_| None).collect();
    while let Some(done) = tasks.join_next().await {
        let (i, part) =
            done.map_err(|source| EngineError::Task { what: format!("a read of part of {full}"), source })?;
        parts[i] = Some(part?);
    }
    Ok(parts.into_iter().flatten().collect())
}

/// The rows of one split's stream, read once one of `permits` is free.
pub(crate) async fn split_rows(
    stream: paimon::table::ArrowRecordBatchStream,
    full: String,
    permits: Arc<Semaphore>,
) -> Result<Vec<Vec<Value>>, EngineError> {
    let _permit = permits.acquire_owned().await.expect("the semaphore is never closed");
    let batches: Vec<_> = stream.try_collect().await.map_err(paimon_err(&full, "read"))?;
    let mut rows = Vec::with_capacity(batches.iter().map(arrow_array::RecordBatch::num_rows).sum());
    for b in &batches {
        rows.extend(crate::rows::from_batch(b).map_err(crate::error::shape_err(&full))?);
    }
    Ok(rows)
}
