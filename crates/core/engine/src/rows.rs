//! Conversion between livestate values and Arrow record batches in Paimon's column types.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Decimal128Builder, Int64Builder, Int8Builder, StringBuilder, TimestampMillisecondBuilder,
};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Decimal128Array, Int32Array, Int64Array, LargeStringArray, RecordBatch,
    StringArray, StringViewArray, TimestampMicrosecondArray, TimestampMillisecondArray,
    TimestampNanosecondArray, TimestampSecondArray,
};
use arrow_schema::{DataType as ArrowType, Field, Schema as ArrowSchema, TimeUnit};
use livestate_spec::types::millis_to_timestamp;
use livestate_spec::Value;
use paimon::spec::{RowKind, VALUE_KIND_FIELD_NAME};
use rust_decimal::Decimal;

/// A row to write and its Paimon row kind.
pub type KindRow = (RowKind, Vec<Value>);

/// The Arrow schema Paimon expects for writes to `table`, with a `_VALUE_KIND` column when
/// `with_kind` (primary-key tables).
pub fn write_schema(table: &paimon::Table, with_kind: bool) -> paimon::Result<Arc<ArrowSchema>> {
    let base = paimon::arrow::build_target_arrow_schema(table.schema().fields())?;
    if !with_kind {
        return Ok(base);
    }
    let mut fields: Vec<Field> = base.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(VALUE_KIND_FIELD_NAME, ArrowType::Int8, false));
    Ok(Arc::new(ArrowSchema::new(fields)))
}

/// Builds one batch from `rows` (each as wide as the table, owned or borrowed) against `schema`.
///
/// # Errors
/// A message when a value does not fit its column's Arrow type.
pub fn to_batch<R: AsRef<[Value]>>(
    schema: &Arc<ArrowSchema>,
    rows: &[(RowKind, R)],
) -> Result<RecordBatch, String> {
    let has_kind = schema.fields().last().is_some_and(|f| f.name() == VALUE_KIND_FIELD_NAME);
    let ncols = schema.fields().len() - usize::from(has_kind);
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (c, field) in schema.fields().iter().take(ncols).enumerate() {
        let values = rows.iter().map(|(_, r)| &r.as_ref()[c]);
        columns.push(
            build_column(field.data_type(), values).map_err(|e| format!("column `{}`: {e}", field.name()))?,
        );
    }
    if has_kind {
        let mut b = Int8Builder::with_capacity(rows.len());
        for (k, _) in rows {
            b.append_value(k.to_value());
        }
        columns.push(Arc::new(b.finish()));
    }
    RecordBatch::try_new(Arc::clone(schema), columns).map_err(|e| e.to_string())
}

/// A one-value array of Arrow type `ty` holding `v`, for comparing a column with it.
///
/// # Errors
/// As [`to_batch`]: `v` does not fit `ty`, or livestate does not write `ty`.
pub fn array_of(ty: &ArrowType, v: &Value) -> Result<ArrayRef, String> {
    build_column(ty, std::iter::once(v))
}

fn mismatch(v: &Value, ty: &ArrowType) -> String {
    format!("value `{v}` does not fit arrow type {ty}")
}

fn build_column<'a>(ty: &ArrowType, values: impl Iterator<Item = &'a Value>) -> Result<ArrayRef, String> {
    // One builder per Arrow type; `$pat => $val` picks the value out of the matching variant.
    macro_rules! column {
        ($builder:expr, $pat:pat => $val:expr) => {{
            let mut b = $builder;
            for v in values {
                match v {
                    Value::Null => b.append_null(),
                    $pat => b.append_value($val),
                    other => return Err(mismatch(other, ty)),
                }
            }
            b
        }};
    }
    Ok(match ty {
        ArrowType::Utf8 => Arc::new(column!(StringBuilder::new(), Value::String(x) => x).finish()),
        ArrowType::Int64 => Arc::new(column!(Int64Builder::new(), Value::Int(x) => *x).finish()),
        ArrowType::Boolean => Arc::new(column!(BooleanBuilder::new(), Value::Bool(x) => *x).finish()),
        ArrowType::Timestamp(TimeUnit::Millisecond, None) => Arc::new(
            column!(TimestampMillisecondBuilder::new(), Value::Timestamp(t) => t.timestamp_millis()).finish(),
        ),
        ArrowType::Decimal128(p, s) => {
            // Values were coerced to the column's type when the mapping ran; an int is accepted too.
            let mut b = Decimal128Builder::new();
            for v in values {
                let mut d = match v {
                    Value::Null => {
                        b.append_null();
                        continue;
                    }
                    Value::Decimal(d) => *d,
                    Value::Int(i) => Decimal::from(*i),
                    other => return Err(mismatch(other, ty)),
                };
                d.rescale(u32::from(*s as u8));
                b.append_value(d.mantissa());
            }
            Arc::new(b.finish().with_precision_and_scale(*p, *s).map_err(|e| e.to_string())?)
        }
        other => return Err(format!("livestate does not write arrow type {other}")),
    })
}

/// Reads every row of `batch` as values, column by column in schema order.
///
/// # Errors
/// A message naming a column of an Arrow type livestate does not read.
pub fn from_batch(batch: &RecordBatch) -> Result<Vec<Vec<Value>>, String> {
    // Each row is sized once (`vec![v; n]` clones would drop the capacity and regrow every row).
    let mut rows: Vec<Vec<Value>> =
        std::iter::repeat_with(|| Vec::with_capacity(batch.num_columns())).take(batch.num_rows()).collect();
    for (c, col) in batch.columns().iter().enumerate() {
        push_column(col.as_ref(), &mut rows)
            .map_err(|e| format!("column `{}`: {e}", batch.schema_ref().field(c).name()))?;
    }
    Ok(rows)
}

/// Appends the `i`-th value of `col` to the `i`-th row: the column's type is matched once, then
/// one loop per type.
fn push_column(col: &dyn Array, rows: &mut [Vec<Value>]) -> Result<(), String> {
    // `$t`: the array type; `|$v| $e`: a cell's value to a `Result<Value, String>`.
    macro_rules! each {
        ($t:ty, |$v:ident| $e:expr) => {{
            let a = col.as_any().downcast_ref::<$t>().expect("array type matches its data type");
            for (i, row) in rows.iter_mut().enumerate() {
                row.push(if a.is_null(i) {
                    Value::Null
                } else {
                    let $v = a.value(i);
                    $e?
                });
            }
        }};
    }
    let ok = Ok::<Value, String>;
    match col.data_type() {
        ArrowType::Utf8 => each!(StringArray, |v| ok(Value::String(v.to_string()))),
        ArrowType::LargeUtf8 => each!(LargeStringArray, |v| ok(Value::String(v.to_string()))),
        ArrowType::Utf8View => each!(StringViewArray, |v| ok(Value::String(v.to_string()))),
        ArrowType::Int64 => each!(Int64Array, |v| ok(Value::Int(v))),
        ArrowType::Int32 => each!(Int32Array, |v| ok(Value::Int(i64::from(v)))),
        ArrowType::Int8 => each!(arrow_array::Int8Array, |v| ok(Value::Int(i64::from(v)))),
        ArrowType::Boolean => each!(BooleanArray, |v| ok(Value::Bool(v))),
        ArrowType::Decimal128(_, s) => {
            let scale = *s as u32;
            each!(Decimal128Array, |v| Decimal::try_from_i128_with_scale(v, scale)
                .map(Value::Decimal)
                .map_err(|e| e.to_string()))
        }
        ArrowType::Timestamp(unit, _) => {
            let ts = |ms: i64| ok(Value::Timestamp(millis_to_timestamp(ms)));
            match unit {
                TimeUnit::Second => each!(TimestampSecondArray, |v| ts(v * 1000)),
                TimeUnit::Millisecond => each!(TimestampMillisecondArray, |v| ts(v)),
                TimeUnit::Microsecond => each!(TimestampMicrosecondArray, |v| ts(v.div_euclid(1000))),
                TimeUnit::Nanosecond => each!(TimestampNanosecondArray, |v| ts(v.div_euclid(1_000_000))),
            }
        }
        other => return Err(format!("livestate does not read arrow type {other}")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Arc<ArrowSchema> {
        Arc::new(ArrowSchema::new(vec![
            Field::new("s", ArrowType::Utf8, true),
            Field::new("i", ArrowType::Int64, true),
            Field::new("b", ArrowType::Boolean, true),
            Field::new("d", ArrowType::Decimal128(12, 2), true),
            Field::new("t", ArrowType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new(VALUE_KIND_FIELD_NAME, ArrowType::Int8, false),
        ]))
    }

    #[test]
    fn rows_written_to_a_batch_read_back_the_same_nulls_included() {
        let rows: Vec<KindRow> = vec![
            (
                RowKind::Insert,
                vec![
                    Value::String("part-1".into()),
                    Value::Int(-7),
                    Value::Bool(true),
                    Value::Decimal(Decimal::new(12345, 2)),
                    Value::Timestamp(millis_to_timestamp(1_700_000_000_123)),
                ],
            ),
            (RowKind::UpdateAfter, vec![Value::Null, Value::Null, Value::Null, Value::Null, Value::Null]),
            (
                RowKind::Delete,
                vec![
                    Value::String(String::new()),
                    Value::Int(i64::MAX),
                    Value::Bool(false),
                    Value::Decimal(Decimal::new(-1, 2)),
                    Value::Timestamp(millis_to_timestamp(0)),
                ],
            ),
        ];
        let batch = to_batch(&schema(), &rows).expect("rows fit the schema");
        let back = from_batch(&batch).expect("every column type is read");
        assert_eq!(back.len(), 3);
        for ((kind, written), read) in rows.iter().zip(&back) {
            assert_eq!(&read[..5], &written[..], "values read back as written");
            assert_eq!(read[5], Value::Int(i64::from(kind.to_value())), "the row kind column as an int");
            assert_eq!(read.capacity(), 6, "each row is sized once");
        }
    }

    #[test]
    fn a_column_of_a_type_livestate_does_not_read_is_named() {
        let schema = Arc::new(ArrowSchema::new(vec![Field::new("f", ArrowType::Float64, false)]));
        let col: ArrayRef = Arc::new(arrow_array::Float64Array::from(vec![1.5]));
        let batch = RecordBatch::try_new(schema, vec![col]).expect("valid batch");
        let e = from_batch(&batch).expect_err("float is not read");
        assert!(e.contains("column `f`") && e.contains("Float64"), "{e}");
    }
}
