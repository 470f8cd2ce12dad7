//! What a table's merge engine does to a key's row when a row operation arrives.
//!
//! These are Paimon's merge semantics for the options livestate accepts, applied one operation
//! at a time, so the deriver can keep each key's current row (the lookup index) and the
//! before/after of every change (the changelog) without reading the table back:
//!
//! - **deduplicate**: an upsert replaces the row; a delete removes it.
//! - **partial-update**: an upsert sets the columns it carries (null means "keep"); a delete
//!   removes the row (`partial-update.remove-record-on-delete`) or is dropped (`ignore-delete`).
//! - **aggregation**: an upsert folds each value column into the row with the column's
//!   function (`fields.<c>.aggregate-function`, else `fields.default-aggregate-function`, else
//!   `last_non_null_value`); null inputs leave a column unchanged, except for `last_value`; a
//!   delete removes the row (`aggregation.remove-record-on-delete`) or is dropped.
//! - **first-row**: the first upsert of a key stays; deletes are dropped (`ignore-delete`).
//!
//! A delete row's values are ignored. `sequence.field` and sequence groups are refused when a
//! spec is loaded, so operations apply in record order.

use std::cmp::Ordering;

use crate::company::{Action, MergeEngine, TableSpec};
use crate::expr::compare;
use crate::types::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Fold {
    Key,
    Sum,
    Product,
    Max,
    Min,
    LastValue,
    LastNonNull,
    FirstValue,
    FirstNonNull,
    BoolAnd,
    BoolOr,
    ListAgg(String),
}

/// The merge behaviour of one table.
#[derive(Debug, Clone)]
pub struct Merger {
    engine: MergeEngine,
    folds: Vec<Fold>,
    remove_on_delete: bool,
}

impl Merger {
    /// The merger of `table`.
    ///
    /// # Errors
    /// An option the merger cannot follow (`sequence.field`, sequence groups, an unknown
    /// aggregate function), named.
    pub fn new(table: &TableSpec) -> Result<Merger, String> {
        let opt = |k: &str| table.options.get(k).map(String::as_str);
        if opt("sequence.field").is_some() || table.options.keys().any(|k| k.ends_with(".sequence-group")) {
            return Err(format!(
                "table `{}`: sequence.field and sequence groups are not supported (changes apply in record order)",
                table.name
            ));
        }
        let default = opt("fields.default-aggregate-function").unwrap_or("last_non_null_value");
        let mut folds = Vec::new();
        for col in table.columns.keys() {
            if table.is_key(col) {
                folds.push(Fold::Key);
                continue;
            }
            let f = opt(&format!("fields.{col}.aggregate-function")).unwrap_or(default);
            folds.push(match f {
                "sum" => Fold::Sum,
                "product" => Fold::Product,
                "max" => Fold::Max,
                "min" => Fold::Min,
                "last_value" => Fold::LastValue,
                "last_non_null_value" => Fold::LastNonNull,
                "first_value" => Fold::FirstValue,
                "first_non_null_value" => Fold::FirstNonNull,
                "bool_and" => Fold::BoolAnd,
                "bool_or" => Fold::BoolOr,
                "listagg" => {
                    Fold::ListAgg(opt(&format!("fields.{col}.list-agg-delimiter")).unwrap_or(",").to_string())
                }
                other => {
                    return Err(format!(
                        "table `{}`: aggregate function `{other}` is not supported",
                        table.name
                    ))
                }
            });
        }
        let remove_on_delete = match table.merge_engine {
            MergeEngine::Deduplicate => true,
            MergeEngine::PartialUpdate => opt("partial-update.remove-record-on-delete") == Some("true"),
            MergeEngine::Aggregation => opt("aggregation.remove-record-on-delete") == Some("true"),
            MergeEngine::FirstRow => false,
        } && opt("ignore-delete") != Some("true");
        Ok(Merger { engine: table.merge_engine, folds, remove_on_delete })
    }

    /// Whether a delete removes the key's row (else it is dropped, as Paimon drops it).
    pub fn removes_on_delete(&self) -> bool {
        self.remove_on_delete
    }

    /// Whether an upsert replaces the whole row (`deduplicate`): then a window's last row alone
    /// says what the key holds, whatever came before it.
    pub fn replaces_rows(&self) -> bool {
        self.engine == MergeEngine::Deduplicate
    }

    /// The row after `action` with `row` (full width, in column order) meets `current`.
    pub fn apply(&self, current: Option<Vec<Value>>, action: Action, row: &[Value]) -> Option<Vec<Value>> {
        if action == Action::Delete {
            return if self.remove_on_delete { None } else { current };
        }
        match self.engine {
            MergeEngine::Deduplicate => Some(row.to_vec()),
            MergeEngine::FirstRow => Some(current.unwrap_or_else(|| row.to_vec())),
            MergeEngine::PartialUpdate => Some(match current {
                None => row.to_vec(),
                Some(mut cur) => {
                    for (c, v) in cur.iter_mut().zip(row) {
                        if !v.is_null() {
                            *c = v.clone();
                        }
                    }
                    cur
                }
            }),
            MergeEngine::Aggregation => {
                let first = current.is_none();
                let acc = current.unwrap_or_else(|| vec![Value::Null; row.len()]);
                Some(self.fold(acc, row, first))
            }
        }
    }

    /// [`Merger::apply`] with `row` owned: where the result is `row` itself (an upsert that
    /// replaces the row, or one that meets no row), it is moved rather than copied.
    pub fn apply_owned(
        &self,
        current: Option<Vec<Value>>,
        action: Action,
        row: Vec<Value>,
    ) -> Option<Vec<Value>> {
        match (action, self.engine, current) {
            (Action::Upsert, MergeEngine::Deduplicate, _) => Some(row),
            (Action::Upsert, MergeEngine::FirstRow | MergeEngine::PartialUpdate, None) => Some(row),
            (_, _, current) => self.apply(current, action, &row),
        }
    }

    fn fold(&self, mut acc: Vec<Value>, row: &[Value], first: bool) -> Vec<Value> {
        for ((slot, v), f) in acc.iter_mut().zip(row).zip(&self.folds) {
            let a: &Value = slot;
            let next = match f {
                Fold::Key | Fold::LastValue => Some(v.clone()),
                Fold::FirstValue => first.then(|| v.clone()),
                _ if v.is_null() => None,
                _ if a.is_null() => Some(v.clone()),
                Fold::LastNonNull => Some(v.clone()),
                Fold::FirstNonNull => None,
                Fold::Sum => add(a, v),
                Fold::Product => mul(a, v),
                Fold::Max => (compare(v, a) == Some(Ordering::Greater)).then(|| v.clone()),
                Fold::Min => (compare(v, a) == Some(Ordering::Less)).then(|| v.clone()),
                Fold::BoolAnd => bools(a, v).map(|(x, y)| Value::Bool(x && y)),
                Fold::BoolOr => bools(a, v).map(|(x, y)| Value::Bool(x || y)),
                Fold::ListAgg(d) => match (a, v) {
                    (Value::String(x), Value::String(y)) => Some(Value::String(format!("{x}{d}{y}"))),
                    _ => None,
                },
            };
            if let Some(n) = next {
                *slot = n;
            }
        }
        acc
    }
}

fn add(a: &Value, b: &Value) -> Option<Value> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(Value::Int(x.wrapping_add(*y))),
        (Value::Decimal(x), Value::Decimal(y)) => x.checked_add(*y).map(Value::Decimal),
        _ => None,
    }
}

fn mul(a: &Value, b: &Value) -> Option<Value> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(Value::Int(x.wrapping_mul(*y))),
        (Value::Decimal(x), Value::Decimal(y)) => x.checked_mul(*y).map(Value::Decimal),
        _ => None,
    }
}

fn bools(a: &Value, b: &Value) -> Option<(bool, bool)> {
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => Some((*x, *y)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CompanySpec;

    fn table(name: &str) -> TableSpec {
        let dir = std::path::Path::new(
            &std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
        )
        .join("../../../examples/company");
        CompanySpec::load_dir(&dir).unwrap().table(name).unwrap().clone()
    }

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    #[test]
    fn partial_update_fills_one_row_from_three_modules() {
        let t = table("stock");
        let m = Merger::new(&t).unwrap();
        let width = t.columns.len();
        let mut row = vec![Value::Null; width];
        row[0] = s("bolt");
        row[1] = s("north");
        let with = |i: usize, v: i64| {
            let mut r = row.clone();
            r[i] = Value::Int(v);
            r
        };
        let a = m.apply(None, Action::Upsert, &with(2, 40));
        let b = m.apply(a, Action::Upsert, &with(3, 5));
        let c = m.apply(b, Action::Upsert, &with(4, 12)).unwrap();
        assert_eq!(&c[2..5], &[Value::Int(40), Value::Int(5), Value::Int(12)]);
    }

    /// A row of `t` for item bolt with the columns `set` filled, the rest null.
    fn row_of(t: &TableSpec, set: &[(&str, Value)]) -> Vec<Value> {
        let mut r = vec![Value::Null; t.columns.len()];
        r[t.columns.get_index_of("item").unwrap()] = s("bolt");
        for (name, v) in set {
            r[t.columns.get_index_of(*name).unwrap()] = v.clone();
        }
        r
    }

    #[test]
    fn aggregation_sums_a_sum_column() {
        let t = table("reservations_total");
        let m = Merger::new(&t).unwrap();
        let r1 = row_of(&t, &[("reserved_qty", Value::Int(5)), ("open_lines", Value::Int(1))]);
        let r2 = row_of(&t, &[("reserved_qty", Value::Int(-2)), ("open_lines", Value::Int(-1))]);
        let out = m.apply(m.apply(None, Action::Upsert, &r1), Action::Upsert, &r2).unwrap();
        let at = |name: &str| t.columns.get_index_of(name).unwrap();
        assert_eq!((&out[at("reserved_qty")], &out[at("open_lines")]), (&Value::Int(3), &Value::Int(0)));
    }

    #[test]
    fn aggregation_keeps_the_max_of_a_max_column_whatever_the_order() {
        let t = table("reservations_total");
        let m = Merger::new(&t).unwrap();
        let last = t.columns.get_index_of("last_order_at").unwrap();
        let ts = |text: &str| Value::Timestamp(text.parse().unwrap());
        let later = row_of(&t, &[("last_order_at", ts("2026-03-02T09:00:00Z"))]);
        let earlier = row_of(&t, &[("last_order_at", ts("2026-03-02T08:00:00Z"))]);
        let out = m.apply(m.apply(None, Action::Upsert, &later), Action::Upsert, &earlier).unwrap();
        assert_eq!(out[last], ts("2026-03-02T09:00:00Z"));
        // A null leaves the max as it is.
        let out = m.apply(Some(out), Action::Upsert, &row_of(&t, &[])).unwrap();
        assert_eq!(out[last], ts("2026-03-02T09:00:00Z"));
    }

    #[test]
    fn first_row_keeps_the_first_row_of_a_key() {
        let first = Merger::new(&table("item_first_seen")).unwrap();
        let r = |v: &str| vec![s("k"), s(v), Value::Null, Value::Null, Value::Null, Value::Null];
        assert_eq!(first.apply(Some(r("a")), Action::Upsert, &r("b")), Some(r("a")));
    }

    #[test]
    fn deduplicate_keeps_the_last_row_of_a_key() {
        let dedup = Merger::new(&table("work_queue")).unwrap();
        assert_eq!(dedup.apply(Some(work_row("a")), Action::Upsert, &work_row("b")), Some(work_row("b")));
        assert_eq!(dedup.apply(None, Action::Upsert, &work_row("b")), Some(work_row("b")));
    }

    #[test]
    fn a_delete_on_a_deduplicate_table_removes_the_row() {
        let dedup = Merger::new(&table("work_queue")).unwrap();
        assert_eq!(dedup.apply(Some(work_row("a")), Action::Delete, &work_row("b")), None);
    }

    #[test]
    fn applying_an_owned_row_merges_as_applying_a_borrowed_one_for_every_engine() {
        for name in ["stock", "work_queue", "item_first_seen", "reservations_total"] {
            let t = table(name);
            let m = Merger::new(&t).unwrap();
            let width = t.columns.len();
            // Rows that set different columns, a null, and an int where aggregation sums.
            let rows: Vec<Vec<Value>> = (0..3i64)
                .map(|i| {
                    let mut r = vec![Value::Null; width];
                    for (c, col) in t.columns.keys().enumerate() {
                        if t.is_key(col) {
                            r[c] = s("k");
                        } else if (c as i64 + i) % 2 == 0 {
                            r[c] = Value::Int(i + 1);
                        }
                    }
                    r
                })
                .collect();
            for current in [None, Some(rows[0].clone())] {
                for action in [Action::Upsert, Action::Delete] {
                    for row in &rows {
                        assert_eq!(
                            m.apply_owned(current.clone(), action, row.clone()),
                            m.apply(current.clone(), action, row),
                            "table {name}, {action:?} onto {current:?}"
                        );
                    }
                }
            }
        }
    }

    fn work_row(v: &str) -> Vec<Value> {
        vec![s("k"), s(v), Value::Null, Value::Null, Value::Null, Value::Null]
    }
}
