//! Column statistics as Paimon stores them in manifests (`SimpleStats`: a min row, a max row
//! and null counts).
//!
//! The `paimon` crate keeps its stats type and builder private but lets the type be
//! deserialised, so statistics are computed here and handed over in its serde form.

use arrow_array::{Array, RecordBatch};
use arrow_ord::ord::make_comparator;
use arrow_schema::SortOptions;
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

    /// The same statistics for the columns at `cols` only, in that order (a file's key
    /// columns, say).
    pub fn project(&self, cols: &[usize]) -> MinMax {
        MinMax {
            mins: cols.iter().map(|&c| self.mins[c].clone()).collect(),
            maxs: cols.iter().map(|&c| self.maxs[c].clone()).collect(),
            nulls: cols.iter().map(|&c| self.nulls[c]).collect(),
        }
    }

    /// Paimon's stats value for columns of Paimon types `types`.
    pub fn finish<T: DeserializeOwned>(&self, types: &[DataType]) -> Result<T, String> {
        stats(&self.mins, &self.maxs, &self.nulls, types)
    }
}

/// Min, max and null count of every column of `batch` (of Paimon types `types`, in column order).
///
/// Column by column: each column's smallest and largest value are found by comparing the
/// Arrow array in place, and only those two become Paimon values. Float columns take the
/// value-by-value path, whose comparison (`Datum`'s, under which NaN is neither smaller nor
/// larger than anything) Arrow's total order does not share.
pub(crate) fn column_bounds(batch: &RecordBatch, types: &[DataType]) -> Result<MinMax, String> {
    let mut acc = MinMax::new(types.len());
    for (col, ty) in types.iter().enumerate() {
        let array = batch.column(col);
        let extract = |row: usize| extract_datum_from_arrow(batch, row, col, ty).map_err(|e| e.to_string());
        if matches!(ty, DataType::Float(_) | DataType::Double(_)) {
            for row in 0..batch.num_rows() {
                acc.add(col, extract(row)?);
            }
            continue;
        }
        acc.add_nulls(col, i64::try_from(array.null_count()).expect("rows fit i64"));
        let Some((lo, hi)) = bounds(array.as_ref())? else { continue };
        acc.add(col, extract(lo)?);
        acc.add(col, extract(hi)?);
    }
    Ok(acc)
}

/// The rows of `array`'s first smallest and first largest non-null value, `None` when every
/// value is null.
fn bounds(array: &dyn Array) -> Result<Option<(usize, usize)>, String> {
    let cmp = make_comparator(array, array, SortOptions::default()).map_err(|e| e.to_string())?;
    let mut valid = (0..array.len()).filter(|&i| array.is_valid(i));
    let Some(first) = valid.next() else { return Ok(None) };
    let (mut lo, mut hi) = (first, first);
    for i in valid {
        if cmp(i, lo).is_lt() {
            lo = i;
        } else if cmp(i, hi).is_gt() {
            hi = i;
        }
    }
    Ok(Some((lo, hi)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        ArrayRef, BooleanArray, Decimal128Array, Float64Array, Int64Array, StringArray,
        TimestampMillisecondArray,
    };
    use paimon::spec::{BigIntType, BooleanType, DecimalType, DoubleType, TimestampType, VarCharType};

    use super::*;

    /// Stats computed value by value, as before the column path: the oracle.
    fn by_rows(batch: &RecordBatch, types: &[DataType]) -> MinMax {
        let mut acc = MinMax::new(types.len());
        for row in 0..batch.num_rows() {
            for (col, ty) in types.iter().enumerate() {
                acc.add(col, extract_datum_from_arrow(batch, row, col, ty).unwrap());
            }
        }
        acc
    }

    /// Stats column by column, read back from the Paimon form they are handed over in.
    fn by_columns(batch: &RecordBatch, types: &[DataType]) -> MinMax {
        let stats: serde_json::Value = column_bounds(batch, types).unwrap().finish(types).unwrap();
        let row = |k: &str| {
            let bytes: Vec<u8> = serde_json::from_value(stats[k].clone()).unwrap();
            let row = BinaryRow::from_serialized_bytes(&bytes).unwrap();
            types.iter().enumerate().map(|(col, ty)| row.get_datum(col, ty).unwrap()).collect()
        };
        MinMax {
            mins: row("_MIN_VALUES"),
            maxs: row("_MAX_VALUES"),
            nulls: serde_json::from_value(stats["_NULL_COUNTS"].clone()).unwrap(),
        }
    }

    #[test]
    fn stats_taken_column_by_column_equal_stats_taken_value_by_value() {
        let types = vec![
            DataType::VarChar(VarCharType::default()),
            DataType::BigInt(BigIntType::default()),
            DataType::Boolean(BooleanType::default()),
            DataType::Decimal(DecimalType::new(12, 2).unwrap()),
            DataType::Timestamp(TimestampType::new(3).unwrap()),
            DataType::Double(DoubleType::default()),
            DataType::BigInt(BigIntType::default()),
        ];
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![
                Some("pear"),
                None,
                Some("apple"),
                Some("zebra"),
                Some("Zebra"),
            ])),
            Arc::new(Int64Array::from(vec![Some(3), Some(-9), None, Some(i64::MAX), Some(-9)])),
            Arc::new(BooleanArray::from(vec![Some(true), Some(false), Some(true), None, None])),
            Arc::new(
                Decimal128Array::from(vec![Some(150), Some(-25), None, Some(99_999), Some(0)])
                    .with_precision_and_scale(12, 2)
                    .unwrap(),
            ),
            Arc::new(TimestampMillisecondArray::from(vec![
                Some(5),
                Some(-1),
                Some(1_700_000_000_000),
                None,
                Some(5),
            ])),
            Arc::new(Float64Array::from(vec![Some(1.5), Some(f64::NAN), Some(-2.0), None, Some(7.25)])),
            Arc::new(Int64Array::from(vec![None::<i64>; 5])),
        ];
        let fields: Vec<arrow_schema::Field> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| arrow_schema::Field::new(format!("c{i}"), c.data_type().clone(), true))
            .collect();
        let batch = RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), columns).unwrap();
        let (rows, cols) = (by_rows(&batch, &types), by_columns(&batch, &types));
        assert_eq!(cols.mins, rows.mins);
        assert_eq!(cols.maxs, rows.maxs);
        assert_eq!(cols.nulls, rows.nulls);
        assert_eq!(cols.mins[0], Some(Datum::String("Zebra".into())), "bytes order: upper case first");
        assert_eq!(cols.maxs[1], Some(Datum::Long(i64::MAX)));
        assert_eq!(cols.nulls, vec![1, 1, 2, 1, 1, 1, 5]);
        assert_eq!(
            (cols.mins[6].clone(), cols.maxs[6].clone()),
            (None, None),
            "a column of nulls has no bounds"
        );
        // A file's key statistics are its columns' statistics, projected.
        let keys = column_bounds(&batch, &types).unwrap().project(&[1, 0]);
        assert_eq!((keys.mins, keys.nulls), (vec![rows.mins[1].clone(), rows.mins[0].clone()], vec![1, 1]));
    }
}
