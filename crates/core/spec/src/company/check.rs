//! The spec's check: raw files in, a checked [`CompanySpec`] or every problem found out.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;

use super::raw::{RawEvent, RawFile, RawMapping, RawTable, RawTrigger};
use super::{
    Action, CompanySpec, DerivedBy, EventType, FieldSpec, Lookup, Mapping, TableSpec, Trigger,
    ENVELOPE_NAMES, MAX_SPEC_ITEMS,
};
use crate::decision::{self, RawDecision};
use crate::error::{Problem, SpecError};
use crate::expr::{Expr, ExprType};
use crate::freshness::Freshness;
use crate::options;
use crate::program::Program;
use crate::types::ValueType;

#[derive(Default)]
pub(super) struct Builder {
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
    pub(super) fn problem(&mut self, file: &Path, at: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem { file: file.to_path_buf(), at: at.into(), message: message.into() });
    }

    /// The condition `src` (a trigger's, a mapping's `when`), which must type-check to bool
    /// against `resolve`; otherwise a problem at `at`, worded by `not_bool` for another type.
    fn condition(
        &mut self,
        file: &Path,
        at: String,
        src: &str,
        resolve: &dyn Fn(&str) -> Option<ValueType>,
        not_bool: impl FnOnce(&ExprType) -> String,
    ) -> Option<Expr> {
        match typed(src, resolve) {
            Ok((e, ExprType::Of(ValueType::Bool))) => Some(e),
            Ok((_, t)) => {
                self.problem(file, at, not_bool(&t));
                None
            }
            Err(e) => {
                self.problem(file, at, e);
                None
            }
        }
    }

    pub(super) fn add_file(&mut self, file: &Path, raw: RawFile) {
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
        let mut check = |field: &str, src: &str| {
            self.condition(file, format!("{at}.{field}"), src, &resolve, |t| {
                format!("`{src}` is {t}; a trigger condition must be bool")
            })
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
        self.events.insert(name.clone(), EventType::new(name, module, raw.description, fields));
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
            self.condition(file, format!("{at}.when"), w, &resolve, |t| {
                format!("a condition must be bool, this is {t}")
            })
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
            match typed(src, &resolve) {
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
        let looked_up: Vec<&TableSpec> = looked_up.iter().collect();
        let program = match Program::compile(
            &event.fields,
            &table,
            action,
            &lookups,
            &looked_up,
            when.as_ref(),
            &set,
        ) {
            Ok(p) => p,
            Err(e) => {
                self.problem(file, at, format!("the mapping does not compile: {e}"));
                return None;
            }
        };
        Some(Mapping { event: raw.event, table: raw.table, action, lookups, when, set, program })
    }

    pub(super) fn finish(mut self) -> Result<CompanySpec, SpecError> {
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

/// `src` parsed and type-checked against `resolve`, with its type.
fn typed(src: &str, resolve: &dyn Fn(&str) -> Option<ValueType>) -> Result<(Expr, ExprType), String> {
    let e = Expr::parse(src)?;
    let t = e.type_check(resolve)?;
    Ok((e, t))
}
