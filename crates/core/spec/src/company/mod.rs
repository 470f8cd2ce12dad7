//! The company spec: event types, state tables and mappings, read from a directory of TOML files.
//!
//! This module holds the checked spec's types; `load` reads the files, `raw` is the TOML as
//! written, `check` turns raw files into a checked spec, collecting every problem.

use std::collections::BTreeMap;

use indexmap::IndexMap;

use crate::decision::DecisionKind;
use crate::expr::Expr;
use crate::freshness::Freshness;
pub use crate::options::MergeEngine;
use crate::types::ValueType;

/// Largest spec file read (1 MiB): specs are written by hand, and a larger file is a mistake
/// (a data file in the spec directory) rather than a spec.
pub const MAX_SPEC_FILE_BYTES: u64 = 1 << 20;

/// Largest spec directory read (4 MiB over all its files).
pub const MAX_SPEC_BYTES: u64 = 4 << 20;

/// Most state tables, event types, mappings and triggers a spec may declare, each. A company's
/// spec is written by hand; every table costs a Paimon table, a writer and index state, so a
/// spec of thousands is a mistake, and the lookup graph and index metadata grow with its size.
pub const MAX_SPEC_ITEMS: usize = 1000;

/// Names every event carries besides its data fields.
pub const ENVELOPE_NAMES: [(&str, ValueType); 5] = [
    ("$event.id", ValueType::String),
    ("$event.type", ValueType::String),
    ("$event.occurred_at", ValueType::Timestamp),
    ("$event.offset", ValueType::Int),
    ("$event.causation", ValueType::String),
];

/// A checked company spec. Once built, every mapping refers to existing events, tables and
/// columns with fitting types, and every table's Paimon options are ones livestate can honour.
#[derive(Debug, Clone)]
pub struct CompanySpec {
    pub events: IndexMap<String, EventType>,
    pub tables: IndexMap<String, TableSpec>,
    pub mappings: Vec<Mapping>,
    pub triggers: IndexMap<String, Trigger>,
    /// Decision kinds (`[decisions.KIND]`): the inputs each decision looks at, its rule and
    /// its action in words.
    pub decisions: IndexMap<String, DecisionKind>,
}

/// An edge trigger on a state table: it fires once for a key when `when` turns true for the
/// key's row, and re-arms when `rearm` holds (default: when `when` no longer holds) or the
/// row is deleted.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub name: String,
    pub table: String,
    pub description: Option<String>,
    pub when: Expr,
    pub rearm: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EventType {
    pub name: String,
    /// The module that may emit it: the part of the name before the first dot.
    pub module: String,
    pub description: Option<String>,
    pub fields: IndexMap<String, FieldSpec>,
    /// The fields' names as every event of the type carries them ([`crate::event::Fields`]).
    pub layout: std::sync::Arc<crate::event::FieldLayout>,
}

impl EventType {
    /// The event type `name` of module `module` with `fields`, in their order.
    pub fn new(
        name: String,
        module: String,
        description: Option<String>,
        fields: IndexMap<String, FieldSpec>,
    ) -> EventType {
        let layout = std::sync::Arc::new(crate::event::FieldLayout::of(fields.keys()));
        EventType { name, module, description, fields, layout }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpec {
    pub ty: ValueType,
    pub required: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TableSpec {
    pub name: String,
    pub description: Option<String>,
    pub primary_key: Vec<String>,
    pub columns: IndexMap<String, ValueType>,
    /// Paimon table options, verbatim; `merge-engine` and `bucket` are always present.
    pub options: BTreeMap<String, String>,
    pub merge_engine: MergeEngine,
    pub freshness: Freshness,
    /// Who writes the table: livestate's deriver, or another engine (Flink) running its
    /// mappings; livestate then only reads it, pins tags on it and audits it.
    pub derived_by: DerivedBy,
}

/// Who derives a state table from the record (`derived_by` in the spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DerivedBy {
    /// livestate's deriver writes, compacts and expires it (the default).
    #[default]
    Livestate,
    /// Another engine (Flink, from `livestate export flink-sql`) writes and maintains it;
    /// livestate never writes it.
    External,
}

impl std::fmt::Display for DerivedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DerivedBy::Livestate => "livestate",
            DerivedBy::External => "external",
        })
    }
}

impl TableSpec {
    pub fn is_key(&self, column: &str) -> bool {
        self.primary_key.iter().any(|k| k == column)
    }

    /// Whether livestate derives (writes, compacts, expires) this table.
    pub fn derived_here(&self) -> bool {
        self.derived_by == DerivedBy::Livestate
    }

    /// Why a delete mapping on this table would break it, or `None` when deletes are safe.
    ///
    /// In paimon 0.4.0 a `-D` row on a partial-update table without one of these options makes every
    /// later read fail; first-row and aggregation tables likewise need their delete option.
    pub fn delete_refusal(&self) -> Option<String> {
        let on = |k: &str| self.options.get(k).is_some_and(|v| v == "true");
        match self.merge_engine {
            MergeEngine::Deduplicate => None,
            MergeEngine::PartialUpdate if on("partial-update.remove-record-on-delete") || on("ignore-delete") => None,
            MergeEngine::PartialUpdate => Some(format!(
                "table `{}` is partial-update: deleting needs option partial-update.remove-record-on-delete = \"true\" (or ignore-delete); without it every later read of the table fails",
                self.name
            )),
            MergeEngine::Aggregation if on("aggregation.remove-record-on-delete") || on("ignore-delete") => None,
            MergeEngine::Aggregation => Some(format!(
                "table `{}` is an aggregation table: deleting needs option aggregation.remove-record-on-delete = \"true\" (or ignore-delete)",
                self.name
            )),
            MergeEngine::FirstRow if on("ignore-delete") => None,
            MergeEngine::FirstRow => Some(format!(
                "table `{}` is first-row: it keeps the first row for good; deletes need ignore-delete = \"true\" and are then dropped",
                self.name
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Upsert,
    Delete,
}

/// One event type feeding one table.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    pub event: String,
    pub table: String,
    pub action: Action,
    /// Other tables' current rows this mapping reads (lookup joins), in declaration order.
    pub lookups: Vec<Lookup>,
    pub when: Option<Expr>,
    /// Column → expression, in the table's column order.
    pub set: Vec<(String, Expr)>,
    /// The above compiled against the event type and the tables, as derivation runs it.
    pub program: crate::program::Program,
}

/// A lookup join: the row of `table` whose primary key is given by `key` (expressions over the
/// event, in the table's key order). Expressions of the mapping name its columns `table.column`;
/// they are null when there is no such row.
#[derive(Debug, Clone, PartialEq)]
pub struct Lookup {
    pub table: String,
    pub key: Vec<Expr>,
}

mod check;
mod load;
mod raw;

pub(crate) use check::valid_name;

impl CompanySpec {
    /// The table spec named `name`.
    pub fn table(&self, name: &str) -> Option<&TableSpec> {
        self.tables.get(name)
    }

    /// Mappings fed by event type `event`.
    pub fn mappings_for<'a>(&'a self, event: &'a str) -> impl Iterator<Item = &'a Mapping> + 'a {
        self.mappings.iter().filter(move |m| m.event == event)
    }

    /// Mappings fed by event type `event` into tables livestate derives (not `derived_by =
    /// "external"` ones): the ones `emit` dry-runs and derivation applies.
    pub fn derived_mappings_for<'a>(&'a self, event: &'a str) -> impl Iterator<Item = &'a Mapping> + 'a {
        self.mappings_for(event).filter(|m| self.table(&m.table).is_some_and(TableSpec::derived_here))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SpecError;

    /// Problems of a spec made of `tables` (a `t` table fed by `m.a`, an external `x` table) and
    /// `rest`, or the spec.
    fn load(rest: &str) -> Result<CompanySpec, Vec<String>> {
        let text = format!(
            r#"
[events."m.a"]
fields = {{ k = "string", n = "int" }}
[tables.t]
primary_key = ["k"]
freshness = "1s"
[tables.t.columns]
k = "string"
n = "int"
[tables.x]
primary_key = ["k"]
freshness = "5m"
derived_by = "external"
[tables.x.columns]
k = "string"
n = "int"
{rest}"#
        );
        CompanySpec::from_sources(&[("s.toml".into(), text)]).map_err(|e| match e {
            SpecError::Invalid(p) => p.into_iter().map(|p| format!("{}: {}", p.at, p.message)).collect(),
            other => vec![other.to_string()],
        })
    }

    #[test]
    fn a_spec_of_more_tables_than_the_limit_is_refused_naming_the_count() {
        let tables: String = (0..=MAX_SPEC_ITEMS)
            .map(|i| format!("[tables.t{i}]\nprimary_key = [\"k\"]\nfreshness = \"1s\"\ncolumns = {{ k = \"string\" }}\n"))
            .collect();
        let e = CompanySpec::from_sources(&[("s.toml".into(), tables)]).unwrap_err().to_string();
        assert!(e.contains("1001 declared; a spec may declare at most 1000"), "{e}");
    }

    #[test]
    fn a_fifo_named_like_a_spec_file_is_refused_instead_of_blocking_the_read() {
        let dir = std::env::temp_dir().join(format!("livestate-spec-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("tables.toml");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let e = CompanySpec::load_dir(&dir).map(|_| ()).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.contains("tables.toml") && e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn an_external_table_keeps_its_mappings_but_livestate_runs_only_its_own() {
        let spec = load(
            "[[mappings]]\nevent = \"m.a\"\ntable = \"t\"\nset = { k = \"k\", n = \"n\" }\n\
             [[mappings]]\nevent = \"m.a\"\ntable = \"x\"\nset = { k = \"k\", n = \"n + 1\" }\n",
        )
        .unwrap();
        assert_eq!(spec.tables["x"].derived_by, DerivedBy::External);
        assert_eq!(spec.tables["t"].derived_by, DerivedBy::Livestate);
        assert_eq!(spec.mappings_for("m.a").count(), 2);
        let derived: Vec<&str> = spec.derived_mappings_for("m.a").map(|m| m.table.as_str()).collect();
        assert_eq!(derived, ["t"]);
    }

    #[test]
    fn what_only_livestate_can_run_is_refused_on_an_external_table() {
        let lookup = "[[mappings]]\nevent = \"m.a\"\ntable = \"t\"\nlookup = { x = { k = \"k\" } }\nset = { k = \"k\", n = \"x.n\" }\n";
        let e = load(lookup).unwrap_err();
        assert!(e.iter().any(|p| p.contains("lookup.x") && p.contains("derived_by = \"external\"")), "{e:?}");
        let trigger = "[triggers.big]\ntable = \"x\"\nwhen = \"n > 3\"\n";
        let e = load(trigger).unwrap_err();
        assert!(e.iter().any(|p| p.starts_with("triggers.big.table") && p.contains("external")), "{e:?}");
        let delete =
            "[[mappings]]\nevent = \"m.a\"\ntable = \"x\"\naction = \"delete\"\nset = { k = \"k\" }\n";
        let e = load(delete).unwrap_err();
        assert!(e.iter().any(|p| p.contains(".action") && p.contains("-D rows")), "{e:?}");
        let offset =
            "[[mappings]]\nevent = \"m.a\"\ntable = \"x\"\nset = { k = \"k\", n = \"$event.offset\" }\n";
        assert!(load(offset).is_ok(), "the record offset is the Kafka offset of the record topic");
        assert!(load("").is_ok(), "the base spec itself loads");
        let text = "[tables.y]\nprimary_key = [\"k\"]\nfreshness = \"1s\"\nderived_by = \"flink\"\n[tables.y.columns]\nk = \"string\"\n";
        let e = load(text).unwrap_err();
        assert!(e.iter().any(|p| p.contains("tables.y.derived_by") && p.contains("`flink`")), "{e:?}");
    }

    #[test]
    fn an_external_table_may_look_up_a_table_livestate_derives() {
        let spec = load(
            "[[mappings]]\nevent = \"m.a\"\ntable = \"x\"\nlookup = { t = { k = \"k\" } }\nset = { k = \"k\", n = \"t.n\" }\n",
        )
        .unwrap();
        assert_eq!(spec.mappings[0].lookups[0].table, "t");
    }
}
