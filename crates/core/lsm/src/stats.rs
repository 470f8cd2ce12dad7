//! Column statistics as Paimon stores them in manifests (`SimpleStats`: a min row, a max row
//! and null counts).
//!
//! The `paimon` crate keeps its stats type and builder private but lets the type be
//! deserialised, so statistics are computed here and handed over in its serde form.

use arrow_array::RecordBatch;
use paimon::spec::{extract_datum_from_arrow, BinaryRow, DataType, Datum};
use serde::de::DeserializeOwned;

/// Serialized Paimon row holding `datums`.
pub(crate) fn row_bytes(datums: &[Option<Datum>], types: &[DataType]) -> Vec<u8> {
    let pairs: Vec<(Option<&Datum>, &DataType)> = datums.iter().map(Option::as_ref).zip(types).collect();
    BinaryRow::from_datums(&pairs).to_serialized_bytes()
}

/// Builds Paimon's stats value (of whatever type the target field has).
pub(crate) fn stats<T: DeserializeOwned>(
    mins: &[Option<Datum>],
    maxs: &[Option<Datum>],
    nulls: &[i64],
    types: &[DataType],
) -> Result<T, String> {
    let json = serde_json::json!({
        "_MIN_VALUES": row_bytes(mins, types),
        "_MAX_VALUES": row_bytes(maxs, types),
        "_NULL_COUNTS": nulls,
    });
    serde_json::from_value(json).map_err(|e| format!("building column statistics: {e}"))
}

/// Running min, max and null count of a row of columns.
pub(crate) struct MinMax {
    mins: Vec<Option<Datum>>,
    maxs: Vec<Option<Datum>>,
    nulls: Vec<i64>,
}

impl MinMax {
    pub fn new(columns: usize) -> MinMax {
        MinMax { mins: vec![None; columns], maxs: vec![None; columns], nulls: vec![0; columns] }
    }

    pub fn add(&mut self, pos: usize, value: Option<Datum>) {
        match value {
            Some(d) => {
                if self.mins[pos].as_ref().is_none_or(|m| d < *m) {
                    self.mins[pos] = Some(d.clone());
                }
                if self.maxs[pos].as_ref().is_none_or(|m| d > *m) {
                    self.maxs[pos] = Some(d);
                }
            }
            None => self.nulls[pos] += 1,
        }
    }

    /// Counts `n` more nulls at `pos`.
    pub fn add_nulls(&mut self, pos: usize, n: i64) {
        self.nulls[pos] += n;
    }

    /// Paimon's stats value for columns of Paimon types `types`.
    pub fn finish<T: DeserializeOwned>(&self, types: &[DataType]) -> Result<T, String> {
        stats(&self.mins, &self.maxs, &self.nulls, types)
    }
}

/// Min, max and null count of columns `cols` (of Paimon types `types`) in `batch`.
pub(crate) fn column_stats<T: DeserializeOwned>(
    batch: &RecordBatch,
    cols: &[usize],
    types: &[DataType],
) -> Result<T, String> {
    let mut acc = MinMax::new(cols.len());
    for row in 0..batch.num_rows() {
        for (pos, (&col, ty)) in cols.iter().zip(types).enumerate() {
            acc.add(pos, extract_datum_from_arrow(batch, row, col, ty).map_err(|e| e.to_string())?);
        }
    }
    acc.finish(types)
}
