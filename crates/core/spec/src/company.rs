//! The company spec: event types, state tables and mappings, read from a directory of TOML files.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::Deserialize;

use crate::decision::{self, DecisionKind, RawDecision};
use crate::error::{Problem, SpecError};
use crate::expr::{Expr, ExprType};
use crate::freshness::Freshness;
use crate::options;
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
}

/// A lookup join: the row of `table` whose primary key is given by `key` (expressions over the
/// event, in the table's key order). Expressions of the mapping name its columns `table.column`;
/// they are null when there is no such row.
#[derive(Debug, Clone, PartialEq)]
pub struct Lookup {
    pub table: String,
    pub key: Vec<Expr>,
}

impl CompanySpec {
    /// Reads every `*.toml` file in `dir` (sorted by name) and checks the whole spec.
    ///
    /// # Errors
    /// [`SpecError::Io`] when a file cannot be read (or is not UTF-8); [`SpecError::Invalid`]
    /// listing every problem (file, location, reason) when the spec is wrong or a file is larger
    /// than [`MAX_SPEC_FILE_BYTES`].
    pub fn load_dir(dir: &Path) -> Result<CompanySpec, SpecError> {
        let io = |source| SpecError::Io { path: dir.to_path_buf(), source };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(SpecError::Invalid(vec![Problem {
                file: dir.to_path_buf(),
                at: "(directory)".into(),
                message: "no .toml files found".into(),
            }]));
        }
        let mut sources = Vec::new();
        let mut too_big = Vec::new();
        let mut total = 0u64;
        for f in files {
            let io = |source| SpecError::Io { path: f.clone(), source };
            let meta = std::fs::metadata(&f).map_err(io)?;
            let len = meta.len();
            // A FIFO or a device named `*.toml` would block the read, or never end.
            if !meta.is_file() {
                too_big.push(Problem {
                    file: f,
                    at: "(file)".into(),
                    message: "not a regular file; a spec file must be one".into(),
                });
                continue;
            }
            total += len;
            if total > MAX_SPEC_BYTES {
                too_big.push(Problem {
                    file: f,
                    at: "(directory)".into(),
                    message: format!("the spec's files hold more than {} MiB together", MAX_SPEC_BYTES >> 20),
                });
                break;
            }
            if len > MAX_SPEC_FILE_BYTES {
                too_big.push(Problem {
                    file: f,
                    at: "(file)".into(),
                    message: format!(
                        "{len} bytes; a spec file may hold at most {} KiB",
                        MAX_SPEC_FILE_BYTES >> 10
                    ),
                });
                continue;
            }
            let text =
                std::fs::read_to_string(&f).map_err(|source| SpecError::Io { path: f.clone(), source })?;
            sources.push((f, text));
        }
        if !too_big.is_empty() {
            return Err(SpecError::Invalid(too_big));
        }
        Self::from_sources(&sources)
    }

    /// Checks a spec given as `(file name, TOML text)` pairs.
    ///
    /// # Errors
    /// [`SpecError::Invalid`] listing every problem.
    pub fn from_sources(sources: &[(PathBuf, String)]) -> Result<CompanySpec, SpecError> {
        let mut b = Builder::default();
        for (file, text) in sources {
            match toml::from_str::<RawFile>(text) {
                Ok(raw) => b.add_file(file, raw),
                Err(e) => b.problem(file, "(syntax)", e.message().to_string() + &span_hint(text, e.span())),
            }
        }
        b.finish()
    }

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

fn span_hint(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    span.map(|s| format!(" (line {})", text[..s.start.min(text.len())].lines().count().max(1)))
        .unwrap_or_default()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    events: IndexMap<String, RawEvent>,
    #[serde(default)]
    tables: IndexMap<String, RawTable>,
    #[serde(default)]
    mappings: Vec<RawMapping>,
    #[serde(default)]
    triggers: IndexMap<String, RawTrigger>,
    #[serde(default)]
    decisions: IndexMap<String, RawDecision>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrigger {
    table: String,
    description: Option<String>,
    when: String,
    rearm: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    description: Option<String>,
    fields: IndexMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    description: Option<String>,
    primary_key: Vec<String>,
    freshness: String,
    columns: IndexMap<String, String>,
    #[serde(default)]
    options: BTreeMap<String, toml::Value>,
    derived_by: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMapping {
    event: String,
    table: String,
    #[serde(default)]
    action: Option<String>,
    /// Table → its key columns → expressions over the event.
    #[serde(default)]
    lookup: IndexMap<String, IndexMap<String, String>>,
    when: Option<String>,
    set: IndexMap<String, String>,
}

#[derive(Default)]
struct Builder {
    problems: Vec<Problem>,
    events: IndexMap<String, EventType>,
    tables: IndexMap<String, TableSpec>,
    raw_mappings: Vec<(PathBuf, usize, RawMapping)>,
    raw_triggers: Vec<(PathBuf, String, RawTrigger)>,
    raw_decisions: Vec<(PathBuf, String, RawDecision)>,
    table_files: BTreeMap<String, PathBuf>,
}

pub(crate) fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl Builder {
    fn problem(&mut self, file: &Path, at: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem { file: file.to_path_buf(), at: at.into(), message: message.into() });
    }

    fn add_file(&mut self, file: &Path, raw: RawFile) {
        for (name, ev) in raw.events {
            self.add_event(file, name, ev);
        }
        for (name, t) in raw.tables {
            self.add_table(file, name, t);
        }
        for (i, m) in raw.mappings.into_iter().enumerate() {
            self.raw_mappings.push((file.to_path_buf(), i, m));
        }
        for (name, t) in raw.triggers {
            self.raw_triggers.push((file.to_path_buf(), name, t));
        }
        for (name, d) in raw.decisions {
            self.raw_decisions.push((file.to_path_buf(), name, d));
        }
    }

    fn add_trigger(&mut self, file: &Path, name: String, raw: RawTrigger) -> Option<Trigger> {
        let at = format!("triggers.{name}");
        if !valid_name(&name) {
            self.problem(
                file,
                &at,
                "a trigger name is lowercase letters, digits and `_`, starting with a letter",
            );
        }
        let Some(table) = self.tables.get(&raw.table).cloned() else {
            self.problem(file, format!("{at}.table"), format!("unknown table `{}`", raw.table));
            return None;
        };
        if !table.derived_here() {
            self.problem(
                file,
                format!("{at}.table"),
                format!(
                    "table `{}` is derived_by = \"external\": triggers fire from livestate's own \
                     derivation, which does not write it",
                    raw.table
                ),
            );
            return None;
        }
        let resolve = |n: &str| table.columns.get(n).copied();
        let mut check = |field: &str, src: &str| match Expr::parse(src)
            .and_then(|e| e.type_check(&resolve).map(|t| (e, t)))
        {
            Ok((e, ExprType::Of(ValueType::Bool))) => Some(e),
            Ok((_, t)) => {
                self.problem(
                    file,
                    format!("{at}.{field}"),
                    format!("`{src}` is {t}; a trigger condition must be bool"),
                );
                None
            }
            Err(e) => {
                self.problem(file, format!("{at}.{field}"), e);
                None
            }
        };
        let when = check("when", &raw.when);
        let rearm = match &raw.rearm {
            Some(r) => Some(check("rearm", r)?),
            None => None,
        };
        Some(Trigger { name, table: raw.table, description: raw.description, when: when?, rearm })
    }

    fn add_event(&mut self, file: &Path, name: String, raw: RawEvent) {
        let at = format!("events.\"{name}\"");
        let module = match name.split_once('.') {
            Some((m, rest)) if valid_name(m) && valid_name(rest) => m.to_string(),
            _ => {
                return self.problem(
                    file,
                    at,
                    "event type must be named module.event_name in lower_snake_case",
                );
            }
        };
        if self.events.contains_key(&name) {
            return self.problem(file, at, "event type declared twice");
        }
        let mut fields = IndexMap::new();
        for (f, ty) in raw.fields {
            if !valid_name(&f) {
                self.problem(file, format!("{at}.fields.{f}"), "field names are lower_snake_case");
                continue;
            }
            let (ty, required) = match ty.strip_suffix('?') {
                Some(t) => (t, false),
                None => (ty.as_str(), true),
            };
            match ty.parse::<ValueType>() {
                Ok(ty) => {
                    fields.insert(f, FieldSpec { ty, required });
                }
                Err(e) => self.problem(file, format!("{at}.fields.{f}"), e),
            }
        }
        self.events.insert(name.clone(), EventType { name, module, description: raw.description, fields });
    }

    fn add_table(&mut self, file: &Path, name: String, raw: RawTable) {
        let at = format!("tables.{name}");
        if !valid_name(&name) {
            return self.problem(file, at, "table names are lower_snake_case, at most 64 characters");
        }
        if self.tables.contains_key(&name) || self.table_files.contains_key(&name) {
            return self.problem(file, at, "table declared twice");
        }
        // Declared, even if wrong: mappings to it are not reported again as "unknown table".
        self.table_files.insert(name.clone(), file.to_path_buf());
        let before = self.problems.len();
        let mut columns = IndexMap::new();
        for (c, ty) in &raw.columns {
            if !valid_name(c) {
                self.problem(file, format!("{at}.columns.{c}"), "column names are lower_snake_case");
            }
            match ty.parse::<ValueType>() {
                Ok(t) => {
                    columns.insert(c.clone(), t);
                }
                Err(e) => self.problem(file, format!("{at}.columns.{c}"), e),
            }
        }
        if raw.primary_key.is_empty() {
            self.problem(file, format!("{at}.primary_key"), "a state table needs a primary key");
        }
        let mut seen = HashSet::new();
        for k in &raw.primary_key {
            if !raw.columns.contains_key(k) {
                self.problem(
                    file,
                    format!("{at}.primary_key"),
                    format!("key column `{k}` is not among the columns"),
                );
            }
            if !seen.insert(k) {
                self.problem(file, format!("{at}.primary_key"), format!("key column `{k}` is listed twice"));
            }
        }
        let derived_by = match raw.derived_by.as_deref() {
            None | Some("livestate") => DerivedBy::Livestate,
            Some("external") => DerivedBy::External,
            Some(other) => {
                self.problem(
                    file,
                    format!("{at}.derived_by"),
                    format!("unknown deriver `{other}` (livestate or external)"),
                );
                DerivedBy::Livestate
            }
        };
        let freshness = match raw.freshness.parse::<Freshness>() {
            Ok(f) => Some(f),
            Err(e) => {
                self.problem(file, format!("{at}.freshness"), e);
                None
            }
        };
        let mut opts = BTreeMap::new();
        for (k, v) in raw.options {
            let text = match v {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    self.problem(
                        file,
                        format!("{at}.options.\"{k}\""),
                        format!("option values are text, numbers or booleans, found {}", other.type_str()),
                    );
                    continue;
                }
            };
            opts.insert(k, text);
        }
        let merge_engine = match options::check(&opts, &columns, &raw.primary_key) {
            Ok(m) => Some(m),
            Err(errs) => {
                for (k, msg) in errs {
                    self.problem(file, format!("{at}.options.\"{k}\""), msg);
                }
                None
            }
        };
        opts.entry("merge-engine".into()).or_insert_with(|| "deduplicate".into());
        opts.entry("bucket".into()).or_insert_with(|| "1".into());
        if self.problems.len() > before {
            return;
        }
        let (Some(freshness), Some(merge_engine)) = (freshness, merge_engine) else {
            return;
        };
        self.tables.insert(
            name.clone(),
            TableSpec {
                name,
                description: raw.description,
                primary_key: raw.primary_key,
                columns,
                options: opts,
                merge_engine,
                freshness,
                derived_by,
            },
        );
    }

    fn add_mapping(&mut self, file: &Path, index: usize, raw: RawMapping) -> Option<Mapping> {
        let at = format!("mappings[{index}] ({} -> {})", raw.event, raw.table);
        let Some(event) = self.events.get(&raw.event).cloned() else {
            self.problem(file, at, format!("unknown event type `{}`", raw.event));
            return None;
        };
        let Some(table) = self.tables.get(&raw.table).cloned() else {
            if !self.table_files.contains_key(&raw.table) {
                self.problem(file, at, format!("unknown table `{}`", raw.table));
            }
            return None;
        };
        let action = match raw.action.as_deref() {
            None | Some("upsert") => Action::Upsert,
            Some("delete") => Action::Delete,
            Some(other) => {
                self.problem(
                    file,
                    format!("{at}.action"),
                    format!("unknown action `{other}` (upsert or delete)"),
                );
                return None;
            }
        };
        let before = self.problems.len();
        let event_type = |n: &str| -> Option<ValueType> {
            event
                .fields
                .get(n)
                .map(|f| f.ty)
                .or_else(|| ENVELOPE_NAMES.iter().find(|(e, _)| *e == n).map(|(_, t)| *t))
        };
        let mut lookups = Vec::new();
        let mut looked_up: Vec<TableSpec> = Vec::new();
        for (lt_name, keys) in &raw.lookup {
            let lat = format!("{at}.lookup.{lt_name}");
            let Some(lt) = self.tables.get(lt_name).cloned() else {
                self.problem(file, lat, format!("unknown table `{lt_name}`"));
                continue;
            };
            if table.derived_here() && !lt.derived_here() {
                self.problem(
                    file,
                    lat,
                    format!(
                        "table `{lt_name}` is derived_by = \"external\": livestate's lookups read its own \
                         index of the tables it derives, which holds no rows of `{lt_name}`"
                    ),
                );
                continue;
            }
            let given: Vec<&String> = keys.keys().collect();
            let wanted: Vec<&String> = lt.primary_key.iter().collect();
            let mut sorted_given = given.clone();
            sorted_given.sort();
            let mut sorted_wanted = wanted.clone();
            sorted_wanted.sort();
            if sorted_given != sorted_wanted {
                self.problem(
                    file,
                    lat,
                    format!("give exactly the key columns of `{lt_name}`: {}", lt.primary_key.join(", ")),
                );
                continue;
            }
            let mut key = Vec::new();
            for col in &lt.primary_key {
                let src = &keys[col];
                let ty = lt.columns[col];
                match Expr::parse(src).and_then(|e| e.type_check(&event_type).map(|t| (e, t))) {
                    Ok((e, ExprType::Of(t))) if ty.accepts(t) => key.push(e),
                    Ok((_, t)) => self.problem(
                        file,
                        format!("{lat}.{col}"),
                        format!("`{src}` is {t}, key `{col}` is {ty}"),
                    ),
                    Err(e) => self.problem(file, format!("{lat}.{col}"), e),
                }
            }
            if key.len() == lt.primary_key.len() {
                lookups.push(Lookup { table: lt_name.clone(), key });
                looked_up.push(lt);
            }
        }
        let resolve = |n: &str| -> Option<ValueType> {
            event_type(n).or_else(|| {
                let (t, c) = n.split_once('.')?;
                looked_up.iter().find(|lt| lt.name == t)?.columns.get(c).copied()
            })
        };
        let when = raw.when.as_ref().and_then(|w| {
            match Expr::parse(w).and_then(|e| e.type_check(&resolve).map(|t| (e, t))) {
                Ok((e, ExprType::Of(ValueType::Bool))) => Some(e),
                Ok((_, t)) => {
                    self.problem(
                        file,
                        format!("{at}.when"),
                        format!("a condition must be bool, this is {t}"),
                    );
                    None
                }
                Err(e) => {
                    self.problem(file, format!("{at}.when"), e);
                    None
                }
            }
        });
        let mut set = Vec::new();
        for (col, src) in &raw.set {
            let cat = format!("{at}.set.{col}");
            let Some(col_ty) = table.columns.get(col) else {
                self.problem(file, cat, format!("table `{}` has no column `{col}`", table.name));
                continue;
            };
            if action == Action::Delete && !table.is_key(col) {
                self.problem(file, cat, "a delete mapping sets only primary-key columns");
                continue;
            }
            match Expr::parse(src).and_then(|e| e.type_check(&resolve).map(|t| (e, t))) {
                Ok((_, ExprType::Null)) if table.is_key(col) => {
                    self.problem(file, cat, "a key column cannot be set to null");
                }
                Ok((e, ExprType::Null)) => set.push((col.clone(), e)),
                Ok((e, ExprType::Of(t))) if col_ty.accepts(t) || decimal_into_decimal(*col_ty, t) => {
                    set.push((col.clone(), e))
                }
                Ok((_, ExprType::Of(t))) => {
                    self.problem(file, cat, format!("expression `{src}` is {t}, column `{col}` is {col_ty}"))
                }
                Err(e) => self.problem(file, cat, e),
            }
        }
        for k in &table.primary_key {
            if !raw.set.contains_key(k) {
                self.problem(
                    file,
                    format!("{at}.set"),
                    format!("key column `{k}` of table `{}` is not set", table.name),
                );
            }
        }
        if action == Action::Delete {
            if let Some(why) = table.delete_refusal() {
                self.problem(file, format!("{at}.action"), why);
            }
        }
        if !table.derived_here() && action == Action::Delete {
            self.problem(
                file,
                format!("{at}.action"),
                format!(
                    "table `{}` is derived_by = \"external\": a delete mapping cannot run in Flink \
                     (an INSERT fed by the append-only record topic produces no -D rows)",
                    table.name
                ),
            );
        }
        if self.problems.len() > before {
            return None;
        }
        set.sort_by_key(|(c, _)| table.columns.get_index_of(c));
        Some(Mapping { event: raw.event, table: raw.table, action, lookups, when, set })
    }

    fn finish(mut self) -> Result<CompanySpec, SpecError> {
        let raw = std::mem::take(&mut self.raw_mappings);
        let mut mappings = Vec::new();
        for (file, i, m) in raw {
            if let Some(m) = self.add_mapping(&file, i, m) {
                mappings.push(m);
            }
        }
        let mut triggers = IndexMap::new();
        for (file, name, t) in std::mem::take(&mut self.raw_triggers) {
            if triggers.contains_key(&name) {
                self.problem(&file, format!("triggers.{name}"), "declared twice");
                continue;
            }
            if let Some(t) = self.add_trigger(&file, name.clone(), t) {
                triggers.insert(name, t);
            }
        }
        let mut modules: Vec<&str> =
            self.events.values().map(|e| e.module.as_str()).filter(|m| *m != "decisions").collect();
        modules.sort_unstable();
        modules.dedup();
        let mut decisions = IndexMap::new();
        for (file, name, d) in std::mem::take(&mut self.raw_decisions) {
            if decisions.contains_key(&name) {
                self.problems.push(Problem {
                    file,
                    at: format!("decisions.{name}"),
                    message: "declared twice".into(),
                });
                continue;
            }
            if let Some(k) = decision::check(&file, &name, d, &self.tables, &modules, &mut self.problems) {
                decisions.insert(name, k);
            }
        }
        for (what, n) in [
            ("decisions", decisions.len()),
            ("tables", self.tables.len()),
            ("events", self.events.len()),
            ("mappings", mappings.len()),
            ("triggers", triggers.len()),
        ] {
            if n > MAX_SPEC_ITEMS {
                self.problems.push(Problem {
                    file: PathBuf::from("(spec)"),
                    at: what.into(),
                    message: format!("{n} declared; a spec may declare at most {MAX_SPEC_ITEMS}"),
                });
            }
        }
        if self.problems.is_empty() && self.tables.is_empty() {
            self.problems.push(Problem {
                file: PathBuf::from("(spec)"),
                at: "tables".into(),
                message: "no state tables declared".into(),
            });
        }
        if !self.problems.is_empty() {
            return Err(SpecError::Invalid(self.problems));
        }
        Ok(CompanySpec { events: self.events, tables: self.tables, mappings, triggers, decisions })
    }
}

/// Decimal expressions may feed decimal columns of any scale; the value is checked when it is
/// computed (digits that would be lost are an error, never silently rounded).
fn decimal_into_decimal(col: ValueType, t: ValueType) -> bool {
    matches!((col, t), (ValueType::Decimal { .. }, ValueType::Decimal { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
