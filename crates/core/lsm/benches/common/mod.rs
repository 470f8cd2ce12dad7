//! What both maintenance benchmarks need: a table in a fresh warehouse and a count of files.

use std::collections::HashMap;
use std::path::Path;

use paimon::catalog::Identifier;
use paimon::spec::Schema;
use paimon::{Catalog, FileSystemCatalog, Options, Table};

/// Creates table `db.name` of `schema` in a warehouse at `dir` and opens it.
pub async fn create_table(dir: &Path, db: &str, name: &str, schema: Schema) -> Table {
    let mut o = Options::new();
    o.set("warehouse", dir.to_str().unwrap());
    let catalog = FileSystemCatalog::new(o).unwrap();
    catalog.create_database(db, true, HashMap::new()).await.unwrap();
    let id = Identifier::new(db, name);
    catalog.create_table(&id, schema, false).await.unwrap();
    catalog.get_table(&id).await.unwrap()
}

/// Files under `dir` whose path `f` accepts: how many and their bytes.
pub fn files(dir: &Path, f: &dyn Fn(&str) -> bool) -> (usize, u64) {
    let (mut n, mut bytes) = (0, 0);
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            let (a, b) = files(&p, f);
            n += a;
            bytes += b;
        } else if f(&p.to_string_lossy()) {
            n += 1;
            bytes += p.metadata().unwrap().len();
        }
    }
    (n, bytes)
}

/// The number after `flag` on the command line, if the flag is given.
///
/// # Panics
/// The flag is not followed by a whole number.
pub fn number_flag(flag: &str) -> Option<usize> {
    let v: Vec<String> = std::env::args().collect();
    let at = v.iter().position(|a| a == flag)?;
    Some(v.get(at + 1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("a number after {flag}")))
}
