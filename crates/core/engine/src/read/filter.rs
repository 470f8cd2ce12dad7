//! Filters: `column=value` parameters and `where` conditions, typed against the table and
//! turned into Paimon predicates where they can skip files.

use super::*;

pub(crate) fn parse_filter(ts: &TableSpec, col: &str, text: &str) -> Result<(usize, Value), EngineError> {
    let bad = |message: String| EngineError::BadRequest { table: ts.name.clone(), message };
    let Some(idx) = ts.columns.get_index_of(col) else {
        return Err(bad(format!(
            "no column `{col}` (columns: {})",
            ts.columns.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    };
    let ty = ts.columns[idx];
    let json = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .filter(|j| !j.is_string() && !j.is_null())
        .unwrap_or_else(|| serde_json::Value::String(text.to_string()));
    let v = Value::from_json(&json, ty)
        .or_else(|_| Value::from_json(&serde_json::Value::String(text.into()), ty))
        .map_err(|e| bad(format!("`{col}={text}`: {e}")))?;
    Ok((idx, v))
}

pub(crate) fn datum(v: &Value) -> Option<Datum> {
    Some(match v {
        Value::Null => return None,
        Value::String(s) => Datum::String(s.clone()),
        Value::Int(i) => Datum::Long(*i),
        Value::Bool(b) => Datum::Bool(*b),
        Value::Decimal(d) => Datum::Decimal { unscaled: d.mantissa(), precision: 38, scale: d.scale() },
        Value::Timestamp(t) => Datum::Timestamp { millis: t.timestamp_millis(), nanos: 0 },
    })
}

/// The equalities `condition` requires that are filters on `ts`'s columns: a literal of the
/// column's own type, compared exactly (a decimal or timestamp may equal a value spelled
/// otherwise, an int column compared with a decimal literal is left to the condition).
pub(crate) fn required_filters(ts: &TableSpec, condition: &Expr) -> Vec<(usize, Value)> {
    use livestate_spec::ValueType;
    condition
        .required_equalities()
        .into_iter()
        .filter_map(|(name, v)| {
            let idx = ts.columns.get_index_of(name)?;
            let exact = matches!(
                (ts.columns[idx], v),
                (ValueType::String, Value::String(_))
                    | (ValueType::Int, Value::Int(_))
                    | (ValueType::Bool, Value::Bool(_))
            );
            exact.then(|| (idx, v.clone()))
        })
        .collect()
}

/// Parses a `where` condition over `ts`'s columns (the spec's expression language, e.g.
/// `on_hand - reserved < 10 and location == 'north'`) and checks it is a condition.
///
/// # Errors
/// [`EngineError::BadRequest`] naming what does not parse or fit.
pub fn parse_where(ts: &TableSpec, text: &str) -> Result<Expr, EngineError> {
    let bad = |message: String| EngineError::BadRequest { table: ts.name.clone(), message };
    let expr = Expr::parse(text).map_err(|e| bad(format!("where `{text}`: {e}")))?;
    let ty =
        expr.type_check(&|n| ts.columns.get(n).copied()).map_err(|e| bad(format!("where `{text}`: {e}")))?;
    if !matches!(ty, ExprType::Of(livestate_spec::ValueType::Bool) | ExprType::Null) {
        return Err(bad(format!("where `{text}` is not a condition (it yields {ty})")));
    }
    Ok(expr)
}
