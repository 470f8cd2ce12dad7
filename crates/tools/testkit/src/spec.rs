//! A spec directory's TOML files, edited by key instead of by text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The example company's spec, every file of `examples/company`.
pub fn example_spec() -> SpecFiles {
    SpecFiles::load(&crate::example_dir())
}

/// The TOML files of a spec directory, by file name, with typed overrides. Each override
/// panics naming what it did not find (an unknown table, decision or input), so a test never
/// runs quietly against a spec its edit missed.
#[derive(Debug, Clone)]
pub struct SpecFiles {
    /// Where the files were read (`save` writes them back there).
    from: PathBuf,
    files: BTreeMap<String, toml::Table>,
}

impl SpecFiles {
    /// Every `*.toml` file of `dir`.
    ///
    /// # Panics
    /// When the directory or a file cannot be read or parsed.
    pub fn load(dir: &Path) -> SpecFiles {
        let mut files = BTreeMap::new();
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|x| x == "toml") {
                let text =
                    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
                let table: toml::Table =
                    toml::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()));
                let name = path.file_name().expect("a file name").to_string_lossy().into_owned();
                files.insert(name, table);
            }
        }
        assert!(!files.is_empty(), "no TOML files in {}", dir.display());
        SpecFiles { from: dir.to_path_buf(), files }
    }

    /// Keeps only the files named (e.g. no decisions or triggers).
    ///
    /// # Panics
    /// When a name is not one of the files.
    pub fn only(mut self, names: &[&str]) -> SpecFiles {
        for n in names {
            assert!(self.files.contains_key(*n), "no spec file {n} (files: {:?})", self.files.keys());
        }
        self.files.retain(|name, _| names.contains(&name.as_str()));
        self
    }

    /// `[section.name]` of whichever file declares it.
    fn entry(&mut self, section: &str, name: &str) -> &mut toml::Table {
        let known: Vec<String> = self
            .files
            .values()
            .filter_map(|f| f.get(section).and_then(toml::Value::as_table))
            .flat_map(|t| t.keys().cloned())
            .collect();
        self.files
            .values_mut()
            .filter_map(|f| f.get_mut(section).and_then(toml::Value::as_table_mut))
            .find_map(|t| t.get_mut(name).and_then(toml::Value::as_table_mut))
            .unwrap_or_else(|| panic!("the spec has no {section}.{name} (it has: {})", known.join(", ")))
    }

    fn table(&mut self, table: &str) -> &mut toml::Table {
        self.entry("tables", table)
    }

    /// Table `table`'s freshness budget, e.g. `"200ms"`.
    pub fn freshness(mut self, table: &str, budget: &str) -> SpecFiles {
        self.table(table).insert("freshness".into(), budget.into());
        self
    }

    /// Option `key` of table `table`'s Paimon options.
    pub fn option(mut self, table: &str, key: &str, value: &str) -> SpecFiles {
        let options = self
            .table(table)
            .entry("options")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .unwrap_or_else(|| panic!("tables.{table}.options is not a table"));
        options.insert(key.into(), value.into());
        self
    }

    fn table_names(&self) -> Vec<String> {
        let names: Vec<String> = self
            .files
            .values()
            .filter_map(|f| f.get("tables").and_then(toml::Value::as_table))
            .flat_map(|t| t.keys().cloned())
            .collect();
        assert!(!names.is_empty(), "the spec has no tables");
        names
    }

    /// Every table's freshness budget.
    pub fn freshness_everywhere(mut self, budget: &str) -> SpecFiles {
        for name in self.table_names() {
            self = self.freshness(&name, budget);
        }
        self
    }

    /// Option `key` of every table's Paimon options.
    pub fn option_everywhere(mut self, key: &str, value: &str) -> SpecFiles {
        for name in self.table_names() {
            self = self.option(&name, key, value);
        }
        self
    }

    /// Another engine derives `table` (`derived_by = "external"`).
    pub fn derived_externally(mut self, table: &str) -> SpecFiles {
        self.table(table).insert("derived_by".into(), "external".into());
        self
    }

    /// How fresh decision `decision` needs its input `input`, e.g. `"1ms"`.
    pub fn need(mut self, decision: &str, input: &str, need: &str) -> SpecFiles {
        let inputs = self
            .entry("decisions", decision)
            .get_mut("inputs")
            .and_then(toml::Value::as_table_mut)
            .unwrap_or_else(|| panic!("decisions.{decision} has no inputs"));
        let known: Vec<String> = inputs.keys().cloned().collect();
        inputs
            .get_mut(input)
            .and_then(toml::Value::as_table_mut)
            .unwrap_or_else(|| {
                panic!("decisions.{decision} has no input {input} (it has: {})", known.join(", "))
            })
            .insert("need".into(), need.into());
        self
    }

    /// Writes the files into `dir` (created if needed) and returns it.
    ///
    /// # Panics
    /// When a file cannot be written.
    pub fn write(&self, dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        for (name, table) in &self.files {
            let text = toml::to_string(table).expect("a TOML table serializes");
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        }
        dir.to_path_buf()
    }

    /// Writes the files back where they were read.
    pub fn save(&self) {
        self.write(&self.from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reread(files: &SpecFiles) -> SpecFiles {
        let tmp = std::env::temp_dir().join(format!(
            "testkit-spec-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&tmp);
        let back = SpecFiles::load(&files.write(&tmp));
        std::fs::remove_dir_all(&tmp).unwrap();
        back
    }

    fn get<'a>(f: &'a SpecFiles, path: &[&str]) -> Option<&'a toml::Value> {
        f.files.values().find_map(|t| {
            let mut v = t.get(path[0])?;
            for p in &path[1..] {
                v = v.get(p)?;
            }
            Some(v)
        })
    }

    #[test]
    fn overrides_land_where_the_spec_loader_reads_them_and_survive_a_write() {
        let f = example_spec()
            .freshness("stock", "200ms")
            .option("stock", "snapshot.num-retained.min", "2")
            .option_everywhere("num-sorted-run.compaction-trigger", "3")
            .derived_externally("supplier_risk")
            .need("stock_replenishment", "inbound", "1ms");
        let f = reread(&f);
        let everywhere = reread(&example_spec().freshness_everywhere("1s"));
        for t in ["stock", "supplier_risk", "item_first_seen"] {
            let budget = get(&everywhere, &["tables", t, "freshness"]).and_then(toml::Value::as_str);
            assert_eq!(budget, Some("1s"), "{t}");
        }
        let s = |path: &[&str]| get(&f, path).and_then(toml::Value::as_str).map(str::to_string);
        assert_eq!(s(&["tables", "stock", "freshness"]).as_deref(), Some("200ms"));
        assert_eq!(s(&["tables", "stock", "options", "snapshot.num-retained.min"]).as_deref(), Some("2"));
        assert_eq!(s(&["tables", "stock", "options", "merge-engine"]).as_deref(), Some("partial-update"));
        assert_eq!(
            s(&["tables", "work_queue", "options", "num-sorted-run.compaction-trigger"]).as_deref(),
            Some("3")
        );
        assert_eq!(s(&["tables", "supplier_risk", "derived_by"]).as_deref(), Some("external"));
        assert_eq!(
            s(&["decisions", "stock_replenishment", "inputs", "inbound", "need"]).as_deref(),
            Some("1ms")
        );
        assert_eq!(
            s(&["decisions", "stock_replenishment", "inputs", "on_hand", "need"]).as_deref(),
            Some("1m")
        );
    }

    #[test]
    fn only_keeps_the_named_files() {
        let f = example_spec().only(&["events.toml", "mappings.toml", "tables.toml"]);
        assert_eq!(f.files.keys().collect::<Vec<_>>(), ["events.toml", "mappings.toml", "tables.toml"]);
    }

    #[test]
    #[should_panic(expected = "the spec has no tables.stok")]
    fn an_unknown_table_is_named() {
        let _ = example_spec().freshness("stok", "1s");
    }

    #[test]
    #[should_panic(expected = "has no input inbnd")]
    fn an_unknown_decision_input_is_named() {
        let _ = example_spec().need("stock_replenishment", "inbnd", "1ms");
    }
}
