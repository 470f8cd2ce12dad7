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

/// Builds one batch from `rows` (each as wide as the table) against `schema`.
///
/// # Errors
/// A message when a value does not fit its column's Arrow type.
pub fn to_batch(schema: &Arc<ArrowSchema>, rows: &[KindRow]) -> Result<RecordBatch, String> {
    let has_kind = schema.fields().last().is_some_and(|f| f.name() == VALUE_KIND_FIELD_NAME);
    let ncols = schema.fields().len() - usize::from(has_kind);
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (c, field) in schema.fields().iter().take(ncols).enumerate() {
        let values = rows.iter().map(|(_, r)| &r[c]);
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
    let mut rows = vec![Vec::with_capacity(batch.num_columns()); batch.num_rows()];
    for (c, col) in batch.columns().iter().enumerate() {
        let name = batch.schema().field(c).name().clone();
        for (r, row) in rows.iter_mut().enumerate() {
            row.push(cell(col.as_ref(), r).map_err(|e| format!("column `{name}`: {e}"))?);
        }
    }
    Ok(rows)
}

fn cell(col: &dyn Array, i: usize) -> Result<Value, String> {
    if col.is_null(i) {
        return Ok(Value::Null);
    }
    let any = col.as_any();
    macro_rules! get {
        ($t:ty) => {
            any.downcast_ref::<$t>().expect("array type matches its data type").value(i)
        };
    }
    Ok(match col.data_type() {
        ArrowType::Utf8 => Value::String(get!(StringArray).to_string()),
        ArrowType::LargeUtf8 => Value::String(get!(LargeStringArray).to_string()),
        ArrowType::Utf8View => Value::String(get!(StringViewArray).to_string()),
        ArrowType::Int64 => Value::Int(get!(Int64Array)),
        ArrowType::Int32 => Value::Int(i64::from(get!(Int32Array))),
        ArrowType::Boolean => Value::Bool(get!(BooleanArray)),
        ArrowType::Decimal128(_, s) => Value::Decimal(
            Decimal::try_from_i128_with_scale(get!(Decimal128Array), *s as u32).map_err(|e| e.to_string())?,
        ),
        ArrowType::Timestamp(unit, _) => {
            let ms = match unit {
                TimeUnit::Second => get!(TimestampSecondArray) * 1000,
                TimeUnit::Millisecond => get!(TimestampMillisecondArray),
                TimeUnit::Microsecond => get!(TimestampMicrosecondArray).div_euclid(1000),
                TimeUnit::Nanosecond => get!(TimestampNanosecondArray).div_euclid(1_000_000),
            };
            Value::Timestamp(millis_to_timestamp(ms))
        }
        ArrowType::Int8 => Value::Int(i64::from(
            any.downcast_ref::<arrow_array::Int8Array>().expect("array type matches its data type").value(i),
        )),
        other => return Err(format!("livestate does not read arrow type {other}")),
    })
}
