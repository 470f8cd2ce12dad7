//! Merging a bucket's stored rows column by column, for the merge engines whose merge only picks
//! stored cells: deduplicate (a key's latest row), first-row (its first) and partial-update (per
//! column, its latest row where that column is not null).
//!
//! The `paimon` crate's merge reader builds a one-row Arrow batch for every key it merges. Here
//! the stored rows are ordered by (key, sequence number) once, with a stable sort that merges
//! the files' sorted runs, and each output column is taken with one Arrow `take` from the rows
//! the merge engine picks. Compaction ([`crate::Maintainer::compact`]) and livestate's reads
//! both merge this way; anything the pick cannot express (aggregation, sequence fields or
//! groups, per-field aggregates, ignored deletes, a first-row or partial-update unit holding a
//! retraction) is left to the crate's reader.

use std::collections::HashMap;
use std::ops::Range;

use arrow_array::{Array, ArrayRef, RecordBatch, UInt32Array};
use arrow_row::{Row, RowConverter, Rows, SortField};
use arrow_schema::ArrowError;
use paimon::spec::RowKind;

/// Which stored row each merged cell is taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// `deduplicate`: the key's latest row. A key whose latest row is a retraction (`-U`/`-D`)
    /// is removed.
    Latest,
    /// `first-row`: the key's first row.
    First,
    /// `partial-update`: for each column, the key's latest row where that column is not null.
    LatestNonNull,
}

impl Pick {
    /// The pick that merges a table with these options as Paimon does, or `None` when merging
    /// takes more than picking cells: the aggregation engine, a `sequence.field`, a
    /// `rowkind.field`, sequence groups or per-field aggregates (`fields.*`), deletes ignored.
    pub fn for_options(options: &HashMap<String, String>) -> Option<Pick> {
        let unusual = options.iter().any(|(k, v)| {
            k.starts_with("fields.")
                || k == "sequence.field"
                || k == "rowkind.field"
                || (k.ends_with("ignore-delete") && v != "false")
        });
        if unusual {
            return None;
        }
        match merge_engine(options) {
            "deduplicate" => Some(Pick::Latest),
            "first-row" => Some(Pick::First),
            "partial-update" => Some(Pick::LatestNonNull),
            _ => None,
        }
    }
}

/// The table's `merge-engine` option, `deduplicate` when it is not set (Paimon's default).
pub fn merge_engine(options: &HashMap<String, String>) -> &str {
    options.get("merge-engine").map_or("deduplicate", String::as_str)
}

/// Stored rows in (key, sequence number) order, grouped by key.
pub struct KeyOrder {
    converter: RowConverter,
    /// Each stored row's key, byte-comparable.
    pub keys: Rows,
    /// The stored rows in (key, sequence number) order; rows of one key and one sequence number
    /// keep their input order.
    pub order: Vec<u32>,
    /// Each key's rows in sequence order, as a range of `order`; the groups are in key order.
    pub groups: Vec<Range<usize>>,
}

impl KeyOrder {
    /// Orders rows by their key columns (`key_columns`, one array per primary-key column) and
    /// sequence numbers (`sequences`, one per row).
    ///
    /// # Errors
    /// A key column type Arrow's row format cannot compare, or more than `u32::MAX` rows.
    pub fn new(key_columns: &[ArrayRef], sequences: &[i64]) -> Result<KeyOrder, ArrowError> {
        let converter =
            RowConverter::new(key_columns.iter().map(|c| SortField::new(c.data_type().clone())).collect())?;
        let keys = converter.convert_columns(key_columns)?;
        let rows = u32::try_from(sequences.len()).map_err(|_| {
            ArrowError::ComputeError(format!("{} rows are too many to merge", sequences.len()))
        })?;
        let mut order: Vec<u32> = (0..rows).collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (a as usize, b as usize);
            keys.row(a).cmp(&keys.row(b)).then(sequences[a].cmp(&sequences[b]))
        });
        let mut groups = Vec::new();
        let mut start = 0;
        for i in 1..=order.len() {
            if i == order.len() || keys.row(order[i] as usize) != keys.row(order[start] as usize) {
                groups.push(start..i);
                start = i;
            }
        }
        Ok(KeyOrder { converter, keys, order, groups })
    }

    /// The stored row that comes first in group `g`.
    pub fn first(&self, g: usize) -> u32 {
        self.order[self.groups[g].start]
    }

    /// The stored row that comes last (the latest) in group `g`.
    pub fn latest(&self, g: usize) -> u32 {
        self.order[self.groups[g].end - 1]
    }

    /// Converts other key columns (of the same types) to byte-comparable keys.
    ///
    /// # Errors
    /// Columns whose types differ from the ones this order was built on.
    pub fn convert(&self, key_columns: &[ArrayRef]) -> Result<Rows, ArrowError> {
        self.converter.convert_columns(key_columns)
    }

    /// The group holding `key`, if any.
    pub fn group_of(&self, key: Row<'_>) -> Option<usize> {
        self.groups.binary_search_by(|g| self.keys.row(self.order[g.start] as usize).cmp(&key)).ok()
    }
}

/// The merged rows of a bucket.
pub struct Merged {
    /// One row per key left, in key order, with every column of the stored rows.
    pub batch: RecordBatch,
    /// The group (in [`KeyOrder::groups`]) each merged row comes from.
    pub groups: Vec<u32>,
}

/// Merges `stored` (the rows `order` was built on; `kinds` holds each one's row kind) by `pick`,
/// taking each output cell from the stored row the pick names. `None` when a first-row or
/// partial-update merge meets a retraction, which only Paimon's own merge handles.
///
/// # Errors
/// An Arrow failure taking the cells.
pub fn merge(
    stored: &RecordBatch,
    kinds: &[RowKind],
    order: &KeyOrder,
    pick: Pick,
) -> Result<Option<Merged>, ArrowError> {
    if pick != Pick::Latest && kinds.iter().any(|k| !k.is_add()) {
        return Ok(None);
    }
    let whole_rows = |rows: Vec<u32>, groups: Vec<u32>| {
        let batch = arrow_select::take::take_record_batch(stored, &UInt32Array::from(rows))?;
        Ok(Some(Merged { batch, groups }))
    };
    let all_groups = || (0..order.groups.len()).map(|g| g as u32);
    match pick {
        Pick::Latest => {
            let groups: Vec<u32> =
                all_groups().filter(|&g| kinds[order.latest(g as usize) as usize].is_add()).collect();
            whole_rows(groups.iter().map(|&g| order.latest(g as usize)).collect(), groups)
        }
        Pick::First => {
            whole_rows(all_groups().map(|g| order.first(g as usize)).collect(), all_groups().collect())
        }
        Pick::LatestNonNull => {
            // A column without nulls takes every key's latest row; one with nulls, per key the
            // latest row whose bit in the null bitmap is set (read directly, not per cell through
            // the array).
            let latest: UInt32Array = (0..order.groups.len()).map(|g| order.latest(g)).collect();
            let mut columns = Vec::with_capacity(stored.num_columns());
            for col in stored.columns() {
                let Some(nulls) = col.logical_nulls().filter(|n| n.null_count() > 0) else {
                    columns.push(arrow_select::take::take(col.as_ref(), &latest, None)?);
                    continue;
                };
                let picked: UInt32Array = order
                    .groups
                    .iter()
                    .map(|g| {
                        order.order[g.clone()].iter().rev().copied().find(|&i| nulls.is_valid(i as usize))
                    })
                    .collect();
                columns.push(arrow_select::take::take(col.as_ref(), &picked, None)?);
            }
            let batch = RecordBatch::try_new(stored.schema(), columns)?;
            Ok(Some(Merged { batch, groups: all_groups().collect() }))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray};

    use super::*;

    /// Key `k`, sequence `s` and an optional value per stored row, as two sorted runs would hold
    /// them (rows of the second run interleaved with the first's).
    fn stored(rows: &[(i64, i64, Option<&str>)]) -> (RecordBatch, KeyOrder) {
        let k: ArrayRef = Arc::new(rows.iter().map(|r| r.0).collect::<Int64Array>());
        let v: ArrayRef = Arc::new(rows.iter().map(|r| r.2).collect::<StringArray>());
        let seqs: Vec<i64> = rows.iter().map(|r| r.1).collect();
        let batch = RecordBatch::try_from_iter([("k", k.clone()), ("v", v)]).unwrap();
        (batch, KeyOrder::new(&[k], &seqs).unwrap())
    }

    fn values(m: &Merged) -> Vec<(i64, Option<String>)> {
        let k = m.batch.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let v = m.batch.column(1).as_any().downcast_ref::<StringArray>().unwrap();
        (0..m.batch.num_rows()).map(|i| (k.value(i), v.is_valid(i).then(|| v.value(i).to_string()))).collect()
    }

    const ROWS: [(i64, i64, Option<&str>); 5] =
        [(2, 1, Some("a")), (1, 2, Some("b")), (2, 5, None), (1, 4, Some("c")), (3, 3, None)];

    #[test]
    fn each_pick_takes_the_cells_its_merge_engine_keeps() {
        let (batch, order) = stored(&ROWS);
        let adds = [RowKind::Insert; 5];
        let own = |(k, v): (i64, Option<&str>)| (k, v.map(str::to_string));
        let latest = merge(&batch, &adds, &order, Pick::Latest).unwrap().unwrap();
        assert_eq!(values(&latest), [(1, Some("c")), (2, None), (3, None)].map(own));
        let first = merge(&batch, &adds, &order, Pick::First).unwrap().unwrap();
        assert_eq!(values(&first), [(1, Some("b")), (2, Some("a")), (3, None)].map(own));
        let partial = merge(&batch, &adds, &order, Pick::LatestNonNull).unwrap().unwrap();
        assert_eq!(values(&partial), [(1, Some("c")), (2, Some("a")), (3, None)].map(own));
        assert_eq!(partial.groups, [0, 1, 2]);
    }

    #[test]
    fn a_key_whose_latest_row_is_a_retraction_is_removed_by_deduplicate() {
        let (batch, order) = stored(&ROWS);
        let latest = merge(&batch, &retracting_key_1(), &order, Pick::Latest).unwrap().unwrap();
        assert_eq!(values(&latest), [(2, None), (3, None)]);
        assert_eq!(latest.groups, [1, 2]);
    }

    /// The stored rows' kinds with key 1's latest row a retraction.
    fn retracting_key_1() -> [RowKind; 5] {
        let mut kinds = [RowKind::Insert; 5];
        kinds[3] = RowKind::Delete;
        kinds
    }

    #[test]
    fn a_retraction_under_first_row_or_partial_update_is_left_to_paimon() {
        let (batch, order) = stored(&ROWS);
        let kinds = retracting_key_1();
        assert!(merge(&batch, &kinds, &order, Pick::First).unwrap().is_none());
        assert!(merge(&batch, &kinds, &order, Pick::LatestNonNull).unwrap().is_none());
    }

    #[test]
    fn a_key_is_found_by_its_group() {
        let (_, order) = stored(&ROWS);
        let probe: ArrayRef = Arc::new(Int64Array::from(vec![3, 4]));
        let rows = order.convert(&[probe]).unwrap();
        assert_eq!(order.group_of(rows.row(0)), Some(2));
        assert_eq!(order.group_of(rows.row(1)), None);
    }

    #[test]
    fn options_the_pick_cannot_express_leave_the_merge_to_paimon() {
        let opts = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert_eq!(Pick::for_options(&opts(&[])), Some(Pick::Latest));
        assert_eq!(Pick::for_options(&opts(&[("merge-engine", "first-row")])), Some(Pick::First));
        assert_eq!(
            Pick::for_options(&opts(&[
                ("merge-engine", "partial-update"),
                ("partial-update.remove-record-on-delete", "true")
            ])),
            Some(Pick::LatestNonNull)
        );
        assert_eq!(Pick::for_options(&opts(&[("merge-engine", "aggregation")])), None);
        assert_eq!(
            Pick::for_options(&opts(&[("merge-engine", "partial-update"), ("fields.a.sequence-group", "b")])),
            None
        );
        assert_eq!(Pick::for_options(&opts(&[("sequence.field", "ts")])), None);
        assert_eq!(Pick::for_options(&opts(&[("ignore-delete", "true")])), None);
        assert_eq!(Pick::for_options(&opts(&[("ignore-delete", "false")])), Some(Pick::Latest));
    }
}
