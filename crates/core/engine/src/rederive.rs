//! Re-deriving state tables from the whole record once their spec is fixed (`livestate
//! rederive`, docs/formats/spec.md#re-deriving-tables-after-a-fix).
//!
//! A mapping that was wrong (its row operations were quarantined, or it derived wrong values) is
//! fixed in the spec; the tables it feeds are then derived again from offset 0 in a *twin*: a
//! scratch directory `D/rederive.tmp/` with a warehouse and a lookup index of its own, holding
//! the named tables and every table they look up, derived by the same derivers with the fixed
//! spec. Each named table then takes the twin's rows:
//!
//! 1. the fixed spec replaces `D/spec/` (as a whole), so events derived later use it too;
//! 2. one OVERWRITE snapshot replaces the table's data files with copies of the twin's; its
//!    commit identifier is the record offset the twin reached, so the derivers resume there;
//! 3. when the table keeps a changelog, one more snapshot holds only a changelog: each key the
//!    fix changed, before and after (`-U`/`+U`, `+I`, `-D`), so streaming readers see the
//!    correction. The lookup index and the table's triggers take the same changes;
//! 4. the table's quarantine entries become the twin's.
//!
//! Earlier snapshots and tags keep their rows: an audit of a proposal that read the old rows
//! still sees exactly what it read. The directory must not be in use (the command takes its
//! write lock). Interrupted, it is run again: the twin is derived anew and a table that already
//! holds the twin's rows gets no new snapshot. Before step 3 the lookup index of the table is
//! marked stale, so a crash between the snapshots makes the next start rebuild it from a full
//! read instead of trusting it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use livestate_spec::CompanySpec;
use livestate_spec::Value;
use paimon::CommitMessage;
use serde::Serialize;

use crate::catalog::Catalog;
use crate::derive::{Derivers, Progress, Target, CATCH_UP_COMMIT_EVENTS};
use crate::error::{io_err, paimon_err, EngineError};
use crate::index::{Index, IndexMeta};
use crate::layout::Layout;
use crate::quarantine::{self, Quarantined};
use crate::schema::{latest_own_snapshot, state_schema, TableId, COMMIT_USER};
use crate::warehouse::Warehouse;
use crate::window::{BeforeAfter, Tracking};
use crate::Livestate;

/// What re-deriving did, per table named.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RederiveReport {
    /// The record offset the tables now reflect (every event below it).
    pub through: u64,
    /// Events read from the record.
    pub events: u64,
    pub tables: Vec<RederivedTable>,
    /// Whether the spec given replaced the directory's.
    pub spec_replaced: bool,
}

/// One re-derived table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RederivedTable {
    pub name: String,
    pub rows: u64,
    /// Keys whose row the re-derivation changed (added, changed or removed).
    pub changed_keys: u64,
    /// The OVERWRITE snapshot and the changelog snapshot; `None` when no row changed (the
    /// table keeps its snapshot).
    pub overwrite_snapshot: Option<i64>,
    pub changelog_snapshot: Option<i64>,
    pub quarantined_before: u64,
    pub quarantined_after: u64,
}

impl Livestate {
    /// Derives `tables` again from the whole record with the spec in `fixed` (or the
    /// directory's own spec), and makes them hold the result (see the module doc).
    ///
    /// # Errors
    /// [`EngineError::BadRequest`] naming what the fixed spec may not change (an event, a
    /// table's columns, key, merge engine or options, a table not named) or a table that cannot
    /// be re-derived; [`EngineError::UnknownTable`]; the spec's own errors; derivation, Paimon
    /// and I/O errors (the tables are then as they were, or hold the new rows; run it again).
    pub async fn rederive(
        &self,
        fixed: Option<&Path>,
        tables: &[String],
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<RederiveReport, EngineError> {
        let spec = match fixed {
            Some(dir) => CompanySpec::load_dir(dir)?,
            None => self.spec.clone(),
        };
        let named = check_fixed(&self.spec, &spec, tables)?;
        let twin_spec = twin_spec(&spec, &named);
        let before = quarantine::entries(&self.layout, None, usize::MAX)?;

        // The twin, derived from offset 0 through the record's head.
        let twin = Layout::new(&self.layout.rederive_dir())?;
        let _ = std::fs::remove_dir_all(&twin.dir);
        std::fs::create_dir_all(twin.warehouse_dir()).map_err(io_err(&twin.dir))?;
        let twin_catalog = Catalog::open(&Warehouse::Local(twin.warehouse_dir()))?;
        crate::create_state_tables(&twin_catalog, &twin_spec).await?;
        let twin_index = Arc::new(Index::open(&twin.index_dir(), &twin_spec)?);
        let derived = {
            let tail = Arc::new(crate::tail::Tail::new(self.record.next_offset()));
            let target = Target { catalog: &twin_catalog, layout: &twin, fence: None, archive: false };
            let locks = crate::sink::TableLocks::default();
            let mut d = Derivers::open(target, &twin_spec, &twin_index, &tail, &locks).await?;
            let r = d.catch_up(&self.record, &twin_spec, CATCH_UP_COMMIT_EVENTS, progress).await;
            d.finish().await;
            r?
        };
        let through = derived.through;
        let identifier = i64::try_from(through).expect("record offsets fit i64");
        let twin_quarantine = quarantine::entries(&twin, None, usize::MAX)?;

        let mut report =
            RederiveReport { through, events: derived.events, tables: Vec::new(), spec_replaced: false };
        if let Some(dir) = fixed {
            self.layout.replace_spec(dir)?;
            report.spec_replaced = true;
        }
        for name in &named {
            let ts = spec.table(name).expect("checked above");
            let id = TableId::state(name);
            let full = id.full_name();
            let source =
                twin_catalog.table(id.identifier()).await.map_err(paimon_err(&full, "open the twin"))?;
            let (target, _) = crate::read::get_table(&self.catalog, &spec, name).await?;
            let old = crate::read::scan(&target, ts, &[]).await?;
            let new = crate::read::scan(&source, ts, &[]).await?;
            let diff = diff(&self.index, name, old, &new)?;
            let count = |entries: &[Quarantined]| entries.iter().filter(|e| &e.table == name).count() as u64;
            let mut done = RederivedTable {
                name: name.clone(),
                rows: new.len() as u64,
                changed_keys: diff.len() as u64,
                quarantined_before: count(&before),
                quarantined_after: count(&twin_quarantine),
                ..Default::default()
            };
            if !diff.is_empty() {
                let maintainer = self.maintainer(name).await?;
                let written = maintainer.overwrite_from(&source, COMMIT_USER, identifier).await?;
                done.overwrite_snapshot = Some(written.snapshot_id);
                // From here until the index takes the changes, it must not be trusted.
                self.index.forget(name)?;
                let triggers = spec.triggers.values().filter(|tr| &tr.table == name).cloned().collect();
                let mut tracking = Tracking::new(ts, triggers, Arc::clone(&self.index))?;
                let window = tracking.recovered(diff);
                let mut last = written.snapshot_id;
                if window.rules().changelog {
                    last = commit_changelog(&target, &full, &window, identifier).await?;
                    done.changelog_snapshot = Some(last);
                }
                let snap = target
                    .snapshot_manager()
                    .get_snapshot(last)
                    .await
                    .map_err(paimon_err(&full, "read snapshot"))?;
                let committed_at_ms = i64::try_from(snap.time_millis()).unwrap_or(0);
                let meta = IndexMeta {
                    identifier: through,
                    snapshot_id: Some(last),
                    committed_at_ms: Some(committed_at_ms),
                };
                window.apply_to_index(meta, chrono::Utc::now().timestamp_millis())?;
            }
            quarantine::replace(&self.layout, name, twin_quarantine.iter().filter(|e| &e.table == name))?;
            report.tables.push(done);
        }
        drop(twin_index);
        let _ = std::fs::remove_dir_all(&twin.dir);
        // The status file reports each table's position and quarantine: write it as they stand.
        self.derivers().await?.write_status(&self.record)?;
        Ok(report)
    }
}

/// Checks that `fixed` changes only how the named tables derive; the names, deduplicated, in
/// spec order.
fn check_fixed(
    current: &CompanySpec,
    fixed: &CompanySpec,
    tables: &[String],
) -> Result<Vec<String>, EngineError> {
    let refuse = |table: &str, message: String| EngineError::BadRequest { table: table.to_string(), message };
    if tables.is_empty() {
        return Err(refuse("(none)", "name at least one table to re-derive".into()));
    }
    for t in tables {
        let Some(ts) = current.table(t) else {
            return Err(EngineError::UnknownTable {
                name: t.clone(),
                known: current.tables.keys().cloned().collect(),
            });
        };
        if !ts.derived_here() {
            return Err(refuse(
                t,
                "derived_by = \"external\": the engine that derives it re-derives it".into(),
            ));
        }
    }
    // The record's events were checked against these definitions; they cannot change under it.
    for (name, e) in &current.events {
        match fixed.events.get(name) {
            Some(f) if f.fields == e.fields => {}
            Some(_) => {
                return Err(refuse(name, format!("the fixed spec changes the fields of event `{name}`; the record's events were checked against them, so re-deriving changes only mappings")))
            }
            None => return Err(refuse(name, format!("the fixed spec drops event `{name}`, which the record may hold"))),
        }
    }
    if let Some(extra) = fixed.events.keys().find(|n| !current.events.contains_key(*n)) {
        return Err(refuse(
            extra,
            format!(
                "the fixed spec adds event `{extra}`; add events with a new directory, not a re-derivation"
            ),
        ));
    }
    for (name, t) in &current.tables {
        let Some(f) = fixed.tables.get(name) else {
            return Err(refuse(name, format!("the fixed spec drops table `{name}`")));
        };
        if tables.contains(name) {
            // The Paimon table stays: same columns, key, merge engine and options.
            if !f.derived_here() {
                return Err(refuse(name, format!("the fixed spec has another engine derive `{name}`; that is a change of its own, not a re-derivation")));
            }
            if state_schema(t).ok() != state_schema(f).ok() {
                return Err(refuse(name, format!("the fixed spec changes the columns, key, merge engine or options of `{name}`; re-deriving keeps the Paimon table and changes only its mappings")));
            }
        } else if t != f || mappings_of(current, name) != mappings_of(fixed, name) {
            return Err(refuse(
                name,
                format!("the fixed spec changes table `{name}` too; name it to re-derive it as well"),
            ));
        }
    }
    if let Some(extra) = fixed.tables.keys().find(|n| !current.tables.contains_key(*n)) {
        return Err(refuse(
            extra,
            format!("the fixed spec adds table `{extra}`; a new table needs a new directory"),
        ));
    }
    Ok(current.tables.keys().filter(|n| tables.contains(n)).cloned().collect())
}

fn mappings_of<'s>(spec: &'s CompanySpec, table: &str) -> Vec<&'s livestate_spec::Mapping> {
    spec.mappings.iter().filter(|m| m.table == table).collect()
}

/// The part of `spec` the twin derives: the named tables and every table their mappings look
/// up, directly or through another lookup; no triggers (the twin fires nothing).
fn twin_spec(spec: &CompanySpec, named: &[String]) -> CompanySpec {
    let mut wanted: BTreeSet<String> = named.iter().cloned().collect();
    loop {
        let more: Vec<String> = spec
            .mappings
            .iter()
            .filter(|m| wanted.contains(&m.table))
            .flat_map(|m| m.lookups.iter().map(|l| l.table.clone()))
            .filter(|t| !wanted.contains(t))
            .collect();
        if more.is_empty() {
            break;
        }
        wanted.extend(more);
    }
    let mut twin = spec.clone();
    twin.tables.retain(|name, _| wanted.contains(name));
    twin.mappings.retain(|m| wanted.contains(&m.table));
    twin.triggers.clear();
    twin.decisions.clear();
    twin
}

/// Each key whose row differs between `old` and `new`, with its row before and after.
fn diff(
    index: &Index,
    table: &str,
    old: Vec<Vec<Value>>,
    new: &[Vec<Value>],
) -> Result<BTreeMap<Vec<u8>, BeforeAfter>, EngineError> {
    let mut before: HashMap<Vec<u8>, Vec<Value>> = HashMap::with_capacity(old.len());
    for row in old {
        before.insert(index.key_of(table, &row)?, row);
    }
    let mut out = BTreeMap::new();
    for row in new {
        let key = index.key_of(table, row)?;
        match before.remove(&key) {
            Some(b) if &b == row => {}
            b => {
                out.insert(key, (b, Some(row.clone())));
            }
        }
    }
    out.extend(before.into_iter().map(|(k, b)| (k, (Some(b), None))));
    Ok(out)
}

/// Commits `window`'s changes as a snapshot holding only changelog files, by the derivers'
/// commit user with `identifier`; its id.
async fn commit_changelog(
    table: &paimon::Table,
    name: &str,
    window: &crate::window::ClosedWindow,
    identifier: i64,
) -> Result<i64, EngineError> {
    let table = table.copy_with_options(HashMap::from([("changelog-producer".into(), "none".into())]));
    let buckets: i32 = table.schema().options().get("bucket").and_then(|b| b.parse().ok()).unwrap_or(1);
    let partition = paimon::spec::EMPTY_BINARY_ROW.to_serialized_bytes();
    let mut messages: Vec<CommitMessage> =
        (0..buckets).map(|b| CommitMessage::new(partition.clone(), b, Vec::new())).collect();
    crate::changelog::attach(&table, name, window, &mut messages).await?;
    messages.retain(|m| !m.new_changelog_files.is_empty());
    let wb = table.new_write_builder().with_commit_user(COMMIT_USER).map_err(paimon_err(name, "writer"))?;
    wb.new_commit().commit_with_identifier(messages, identifier).await.map_err(paimon_err(name, "commit"))?;
    let latest = latest_own_snapshot(&table).await.map_err(paimon_err(name, "read snapshot"))?;
    latest.map(|s| s.id()).ok_or_else(|| EngineError::Paimon {
        table: name.to_string(),
        what: "commit of the changelog",
        source: paimon::Error::DataInvalid {
            message: "the commit left no snapshot of livestate's".into(),
            source: None,
        },
    })
}
