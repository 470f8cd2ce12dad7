//! What the engine's unit tests share: the example company's spec and full-width rows of its
//! tables.

use livestate_spec::{CompanySpec, Value};

/// The example company's spec, loaded.
pub(crate) fn example_company() -> CompanySpec {
    CompanySpec::load_dir(&livestate_testkit::example_dir()).expect("the example spec loads")
}

/// A full-width row of `table` with `cells` set and every other column null.
pub(crate) fn row(spec: &CompanySpec, table: &str, cells: &[(&str, Value)]) -> Vec<Value> {
    let ts = spec.table(table).unwrap_or_else(|| panic!("no table {table}"));
    let mut out = vec![Value::Null; ts.columns.len()];
    for (col, v) in cells {
        out[ts.columns.get_index_of(*col).unwrap_or_else(|| panic!("no column {col} in {table}"))] =
            v.clone();
    }
    out
}
