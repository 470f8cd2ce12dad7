//! What every contender's tables hold, as one comparable value per table: each row written as
//! canonical text (integers in decimal, decimals without trailing zeros, timestamps as
//! milliseconds since the epoch, null as `\N`), the lines sorted, and the SHA-256 of them.
//!
//! Two contenders agree on a table when its row count and digest are equal; the run refuses
//! to report a contender whose tables differ from livestate's.

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use livestate_spec::Value;

/// The tables the workload writes, in the order they are compared.
pub const TABLES: [&str; 3] = ["stock", "open_orders", "work_queue"];

/// One table's content, in a form two contenders can compare.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableDigest {
    pub table: String,
    pub rows: u64,
    pub sha256: String,
}

/// The digest of `rows`, each given as its cells' canonical text (`None` for null).
pub fn of(table: &str, rows: impl IntoIterator<Item = Vec<Option<String>>>) -> TableDigest {
    let mut lines: Vec<String> = rows
        .into_iter()
        .map(|r| r.into_iter().map(|c| c.unwrap_or_else(|| "\\N".into())).collect::<Vec<_>>().join("\t"))
        .collect();
    lines.sort_unstable();
    let mut h = Sha256::new();
    for l in &lines {
        h.update(l.as_bytes());
        h.update(b"\n");
    }
    let sha256 = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    TableDigest { table: table.into(), rows: lines.len() as u64, sha256 }
}

/// A livestate value as canonical text.
pub fn cell(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::Int(i) => Some(i.to_string()),
        Value::Decimal(d) => Some(d.normalize().to_string()),
        Value::Timestamp(t) => Some(t.timestamp_millis().to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::String(s) => Some(s.clone()),
    }
}

/// The first table of `theirs` that differs from `ours` (by name, rows and digest), described.
pub fn disagreement(ours: &[TableDigest], theirs: &[TableDigest]) -> Option<String> {
    for t in TABLES {
        let a = ours.iter().find(|d| d.table == t);
        let b = theirs.iter().find(|d| d.table == t);
        if a != b {
            let show = |d: Option<&TableDigest>| {
                d.map_or_else(
                    || "missing".to_string(),
                    |d| format!("{} rows, sha256 {}", d.rows, &d.sha256[..16]),
                )
            };
            return Some(format!("table {t}: {} against {}", show(a), show(b)));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_cells(a: &str, b: Option<&str>) -> Vec<Option<String>> {
        vec![Some(a.to_string()), b.map(str::to_string)]
    }

    #[test]
    fn row_order_does_not_matter() {
        let x = of("stock", [two_cells("1", Some("a")), two_cells("2", None)]);
        let y = of("stock", [two_cells("2", None), two_cells("1", Some("a"))]);
        assert_eq!(x, y);
        assert_eq!(x.rows, 2);
        assert!(disagreement(std::slice::from_ref(&x), &[y]).is_none());
    }

    #[test]
    fn any_cell_matters_null_and_the_empty_string_included() {
        let x = of("stock", [two_cells("1", Some("a")), two_cells("2", None)]);
        let z = of("stock", [two_cells("2", Some("")), two_cells("1", Some("a"))]);
        assert_ne!(x.sha256, z.sha256, "null and the empty string differ");
        assert!(disagreement(std::slice::from_ref(&x), &[z]).is_some());
    }

    #[test]
    fn a_missing_table_disagrees() {
        let x = of("stock", [two_cells("1", Some("a"))]);
        assert!(disagreement(&[x], &[]).is_some());
    }

    #[test]
    fn a_decimal_cell_loses_its_trailing_zeros() {
        let d = rust_decimal::Decimal::new(1250, 2);
        assert_eq!(cell(&Value::Decimal(d)).as_deref(), Some("12.5"));
    }

    #[test]
    fn a_timestamp_cell_is_milliseconds_since_the_epoch() {
        let t = livestate_spec::types::millis_to_timestamp(1_772_438_400_123);
        assert_eq!(cell(&Value::Timestamp(t)).as_deref(), Some("1772438400123"));
    }

    #[test]
    fn a_null_cell_is_absent() {
        assert_eq!(cell(&Value::Null), None);
    }
}
