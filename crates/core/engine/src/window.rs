//! A state table's commit window: every key the operations since the last commit touched, with
//! its row at that commit, its row now and the window's own merged row.
//!
//! The derivers merge each row operation into its key's entry with the table's merge engine
//! ([`livestate_spec::Merger`]); nothing reaches Paimon until the commit. Committing closes the
//! window into a [`ClosedWindow`], which says what Paimon receives ([`ClosedWindow::rows`]: at
//! most one row per key, the window's aggregate for an aggregation table), the changelog
//! ([`ClosedWindow::changes`]), trigger firings ([`ClosedWindow::effects`]) and the lookup
//! index's new rows. A closed window may be committed on a task of its own while the next
//! window fills: a key the next window touches takes its row at the last commit from the
//! closed window until that commit has moved the lookup index.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use indexmap::IndexMap;
use livestate_spec::{Action, Merger, TableSpec, Trigger, Value};
use paimon::spec::RowKind;

use crate::error::EngineError;
use crate::index::{Index, IndexMeta};
use crate::triggers::{Change, CommitPoint, Effects, TableTriggers};

/// A key's row at the last commit and now (`None`: no row).
pub(crate) type BeforeAfter = (Option<Vec<Value>>, Option<Vec<Value>>);

/// What the operations of the commit window did to one key.
#[derive(Debug, Clone, Default)]
pub(crate) struct Touched {
    /// The key's row at the last commit.
    pub before: Option<Vec<Value>>,
    /// The key's row now.
    pub now: Option<Vec<Value>>,
    /// The window's operations merged from nothing, with the table's merge engine, since the
    /// window's last removing delete: what Paimon must merge into the committed row. For an
    /// aggregation table this is the window's aggregate, not the running total, so a reader
    /// merging it with the earlier files counts each operation once.
    pub window: Option<Vec<Value>>,
    /// A delete that removes rows happened in the window: Paimon must drop the committed row
    /// before merging `window`.
    pub reset: bool,
}

impl Touched {
    fn unchanged(before: Option<Vec<Value>>) -> Touched {
        Touched { now: before.clone(), before, window: None, reset: false }
    }

    /// A change read back from a committed changelog (no window: Paimon has it already).
    pub fn committed((before, now): BeforeAfter) -> Touched {
        Touched { before, now, window: None, reset: false }
    }

    fn before_after(&self) -> (Option<&Vec<Value>>, Option<&Vec<Value>>) {
        (self.before.as_ref(), self.now.as_ref())
    }
}

/// What every window of one table follows: its name, key columns, merge engine, triggers and
/// the lookup index its rows at the last commit come from.
pub(crate) struct Rules {
    pub table: String,
    merger: Merger,
    pub index: Arc<Index>,
    /// Whether commits carry a changelog (`changelog-producer` other than `none`).
    pub changelog: bool,
    pub key_idx: Vec<usize>,
    triggers: TableTriggers,
}

/// Row-level bookkeeping of a state table: the open window, and the closed one whose commit may
/// still be running.
pub(crate) struct Tracking {
    rules: Arc<Rules>,
    /// Every key the open window's operations touched (sorted by key when the window closes).
    touched: IndexMap<Vec<u8>, Touched>,
    /// The window closed for a commit that has not moved the lookup index yet.
    closing: Option<Arc<ClosedWindow>>,
    /// The last window whose commit finished: each key it touched has its committed row there
    /// (until a later window commits), so a key touched again is not read back from the lookup
    /// index, which costs a store lookup and a decode. Dropped when the next window closes (that
    /// one then answers for its keys), so a table never holds more windows than while a commit
    /// runs: the open one and one closed.
    previous: Option<Arc<ClosedWindow>>,
}

impl Tracking {
    pub fn new(ts: &TableSpec, triggers: Vec<Trigger>, index: Arc<Index>) -> Result<Tracking, EngineError> {
        let merger =
            Merger::new(ts).map_err(|message| EngineError::Merge { table: ts.name.clone(), message })?;
        let key_idx: Vec<usize> =
            ts.primary_key.iter().map(|k| ts.columns.get_index_of(k).expect("key column")).collect();
        let columns = ts.columns.keys().cloned().collect();
        let rules = Rules {
            table: ts.name.clone(),
            merger,
            index,
            changelog: ts.options.get("changelog-producer").is_none_or(|v| v != "none"),
            triggers: TableTriggers { triggers, columns, key_idx: key_idx.clone() },
            key_idx,
        };
        Ok(Tracking { rules: Arc::new(rules), touched: IndexMap::new(), closing: None, previous: None })
    }

    pub fn rules(&self) -> &Arc<Rules> {
        &self.rules
    }

    /// Merges one row operation into its key's entry of the open window.
    ///
    /// # Errors
    /// Lookup index errors reading the key's row at the last commit.
    pub fn apply(&mut self, kind: RowKind, row: Vec<Value>) -> Result<(), EngineError> {
        let r = &*self.rules;
        let key = crate::index::key_bytes(r.key_idx.iter().map(|&i| &row[i]));
        let action = if kind.is_add() { Action::Upsert } else { Action::Delete };
        let t = match self.touched.entry(key) {
            indexmap::map::Entry::Occupied(e) => e.into_mut(),
            indexmap::map::Entry::Vacant(e) => {
                // The row at the last commit: the closing window's, while its commit runs, else
                // the last committed window's, else the index's.
                let committed = [&self.closing, &self.previous]
                    .into_iter()
                    .find_map(|w| w.as_ref().and_then(|c| c.touched.get(e.key())));
                let before = match committed {
                    Some(closed) => closed.now.clone(),
                    None => r.index.get(&r.table, e.key())?,
                };
                e.insert(Touched::unchanged(before))
            }
        };
        t.now = r.merger.apply(t.now.take(), action, &row);
        if action == Action::Delete && r.merger.removes_on_delete() {
            t.window = None;
            t.reset = true;
        } else {
            t.window = r.merger.apply_owned(t.window.take(), action, row);
        }
        Ok(())
    }

    /// Whether upserting `row` would set again a row this window removed from a table whose
    /// upserts merge into the row (partial-update, aggregation): such an upsert must go to
    /// Paimon in a later commit than the delete (see `Derivers::apply`).
    pub fn would_revive(&self, row: &[Value]) -> bool {
        let r = &*self.rules;
        // Only a table whose deletes remove rows can have a window that reset a key (stock, a
        // partial-update table without deletes, never computes the key here).
        if r.merger.replaces_rows() || !r.merger.removes_on_delete() {
            return false;
        }
        let key = crate::index::key_bytes(r.key_idx.iter().map(|&i| &row[i]));
        self.touched.get(&key).is_some_and(|k| k.reset && k.before.is_some())
    }

    /// Keys the open window holds.
    pub fn keys(&self) -> usize {
        self.touched.len()
    }

    /// Closes the open window for a commit (a new one opens empty). Until [`Tracking::closed`]
    /// is called, keys the new window touches take their row at the last commit from it.
    pub fn close(&mut self) -> Arc<ClosedWindow> {
        // Sorted in place: a key the next window touches is still found by its hash.
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable_keys();
        let closed = Arc::new(ClosedWindow { rules: Arc::clone(&self.rules), touched });
        self.closing = Some(Arc::clone(&closed));
        self.previous = None;
        closed
    }

    /// The closed window's commit has moved the lookup index (`committed`), or failed. A
    /// committed window keeps answering for its keys' rows until the next window closes;
    /// other rows come from the index.
    pub fn closed(&mut self, committed: bool) {
        let closing = self.closing.take();
        // After a failed commit nothing is known to be committed but what the index holds.
        self.previous = if committed { closing } else { None };
    }

    /// Replaces the open window with changes read back from committed changelogs (recovering
    /// the index after a crash).
    pub fn recovered(&mut self, changes: BTreeMap<Vec<u8>, BeforeAfter>) -> Arc<ClosedWindow> {
        let touched = changes.into_iter().map(|(k, c)| (k, Touched::committed(c))).collect();
        Arc::new(ClosedWindow { rules: Arc::clone(&self.rules), touched })
    }
}

/// A window closed for its commit, keys in order.
pub(crate) struct ClosedWindow {
    rules: Arc<Rules>,
    /// Iterated in key order, looked up by hash.
    touched: IndexMap<Vec<u8>, Touched>,
}

impl ClosedWindow {
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The rows the commit hands Paimon, in key order: for each key whose row changed, a
    /// delete of the committed row when the window reset it (not needed by `deduplicate` when
    /// the window ends with a row, which replaces it anyway), then the window's merged row. A
    /// key whose row ends as it was is not written at all.
    ///
    /// The delete carries the key alone: Paimon's partial-update and aggregation engines start
    /// the key's row again from a delete's values, so any other value would come back.
    pub fn rows(&self) -> impl Iterator<Item = (RowKind, Cow<'_, [Value]>)> + '_ {
        let replaces = self.rules.merger.replaces_rows();
        self.touched.values().filter(|t| t.before != t.now).flat_map(move |t| {
            let delete = match &t.before {
                Some(b) if t.reset && !(replaces && t.window.is_some()) => {
                    let mut key_only = vec![Value::Null; b.len()];
                    for &i in &self.rules.key_idx {
                        key_only[i] = b[i].clone();
                    }
                    Some((RowKind::Delete, Cow::Owned(key_only)))
                }
                _ => None,
            };
            delete.into_iter().chain(t.window.as_deref().map(|w| (RowKind::Insert, Cow::Borrowed(w))))
        })
    }

    /// The changes of the commit: (kind, row) in key order, -U before +U.
    pub fn changes(&self) -> Vec<(RowKind, &Vec<Value>)> {
        let mut out = Vec::new();
        for t in self.touched.values() {
            match t.before_after() {
                (None, Some(a)) => out.push((RowKind::Insert, a)),
                (Some(b), None) => out.push((RowKind::Delete, b)),
                (Some(b), Some(a)) if b != a => {
                    out.push((RowKind::UpdateBefore, b));
                    out.push((RowKind::UpdateAfter, a));
                }
                _ => {}
            }
        }
        out
    }

    /// Trigger firings and arming changes of the commit, once committed as `at`.
    fn effects(&self, at: CommitPoint) -> Result<Effects, EngineError> {
        let r = &*self.rules;
        let mut out = Effects::default();
        if r.triggers.triggers.is_empty() {
            return Ok(out);
        }
        let mut seqs: HashMap<String, u64> = HashMap::new();
        for t in &r.triggers.triggers {
            seqs.insert(t.name.clone(), r.index.last_seq(&t.name)?);
        }
        for (key, t) in &self.touched {
            let (before, after) = t.before_after();
            if before == after {
                continue;
            }
            // Each key appears once per commit, so its arming is read once, before evaluating.
            let mut armed: HashMap<&str, bool> = HashMap::new();
            for t in &r.triggers.triggers {
                armed.insert(&t.name, r.index.is_armed(&t.name, key)?);
            }
            let is_armed = |name: &str| armed.get(name).copied().unwrap_or(true);
            let mut next = |name: &str| {
                let s = seqs.get_mut(name).expect("trigger seq");
                *s += 1;
                *s
            };
            let change = Change { key, before: before.map(Vec::as_slice), after: after.map(Vec::as_slice) };
            r.triggers.evaluate(&r.table, &change, at, &is_armed, &mut next, &mut out);
        }
        Ok(out)
    }

    /// Moves the lookup index to the window's rows and records the commit's trigger firings, in
    /// one atomic batch, once the commit `meta` names is in Paimon.
    ///
    /// # Errors
    /// Lookup index errors.
    pub fn apply_to_index(&self, meta: IndexMeta, fired_at_ms: i64) -> Result<(), EngineError> {
        let r = &*self.rules;
        let effects = self.effects(CommitPoint {
            snapshot_id: meta.snapshot_id,
            offset: meta.identifier,
            at_ms: fired_at_ms,
        })?;
        r.index.apply_with(
            &r.table,
            self.touched.iter().map(|(k, t)| (k.as_slice(), t.now.as_deref())),
            meta,
            &effects,
        )
    }
}

#[cfg(test)]
mod tests {
    use livestate_spec::CompanySpec;

    use super::*;
    use crate::rows::KindRow;
    use crate::testing::{example_company, row};

    /// The example company's spec and a fresh lookup index for it.
    fn setup() -> (tempfile::TempDir, CompanySpec, Arc<Index>) {
        let spec = example_company();
        let tmp = tempfile::tempdir().unwrap();
        let index = Arc::new(Index::open(&tmp.path().join("index"), &spec).unwrap());
        (tmp, spec, index)
    }

    fn tracking(spec: &CompanySpec, table: &str, index: &Arc<Index>) -> Tracking {
        Tracking::new(spec.table(table).expect("a table of the example"), Vec::new(), Arc::clone(index))
            .unwrap()
    }

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    /// Closes the open window and commits it to the index as commit `id`, as a commit task does.
    fn commit(t: &mut Tracking, id: u64) -> Arc<ClosedWindow> {
        let closed = t.close();
        let meta = IndexMeta { identifier: id, snapshot_id: Some(id as i64), committed_at_ms: Some(0) };
        closed.apply_to_index(meta, 0).unwrap();
        t.closed(true);
        closed
    }

    /// The rows a closed window hands Paimon, owned (to compare with expected rows).
    fn rows(w: &ClosedWindow) -> Vec<KindRow> {
        w.rows().map(|(k, r)| (k, r.into_owned())).collect()
    }

    fn owned(changes: Vec<(RowKind, &Vec<Value>)>) -> Vec<(RowKind, Vec<Value>)> {
        changes.into_iter().map(|(k, r)| (k, r.clone())).collect()
    }

    #[test]
    fn a_partial_update_window_hands_paimon_one_merged_row_per_key_and_the_changelog_whole_rows() {
        let (_tmp, spec, index) = setup();
        let mut t = tracking(&spec, "stock", &index);
        let stock = |item: &str, cells: &[(&str, Value)]| {
            let mut all = vec![("item", s(item)), ("location", s("north"))];
            all.extend_from_slice(cells);
            row(&spec, "stock", &all)
        };
        t.apply(RowKind::Insert, stock("bolt", &[("on_hand", Value::Int(5))])).unwrap();
        t.apply(RowKind::Insert, stock("bolt", &[("reserved", Value::Int(2))])).unwrap();
        t.apply(RowKind::Insert, stock("nut", &[("on_hand", Value::Int(1))])).unwrap();
        assert_eq!(t.keys(), 2);
        let bolt = stock("bolt", &[("on_hand", Value::Int(5)), ("reserved", Value::Int(2))]);
        let nut = stock("nut", &[("on_hand", Value::Int(1))]);
        let first = commit(&mut t, 10);
        // Keys in order; nothing was committed before, so every change is an insert.
        assert_eq!(rows(&first), vec![(RowKind::Insert, bolt.clone()), (RowKind::Insert, nut.clone())]);
        assert_eq!(
            owned(first.changes()),
            vec![(RowKind::Insert, bolt.clone()), (RowKind::Insert, nut.clone())]
        );
        assert_eq!(index.get("stock", &index.key_of("stock", &bolt).unwrap()).unwrap(), Some(bolt.clone()));

        // The next window: bolt's row at the last commit comes from the window just committed,
        // Paimon gets only what this window set (it merges the rest), the changelog whole rows.
        t.apply(RowKind::Insert, stock("bolt", &[("on_hand", Value::Int(7))])).unwrap();
        let bolt_now = stock("bolt", &[("on_hand", Value::Int(7)), ("reserved", Value::Int(2))]);
        let second = commit(&mut t, 20);
        assert_eq!(rows(&second), vec![(RowKind::Insert, stock("bolt", &[("on_hand", Value::Int(7))]))]);
        assert_eq!(
            owned(second.changes()),
            vec![(RowKind::UpdateBefore, bolt), (RowKind::UpdateAfter, bolt_now.clone())]
        );

        // A third window reads nut's committed row back from the index (the last window did not
        // touch it); setting a column to the value it has changes nothing and writes nothing.
        t.apply(RowKind::Insert, stock("nut", &[("on_hand", Value::Int(1))])).unwrap();
        t.apply(RowKind::Insert, stock("bolt", &[("on_hand", Value::Int(8))])).unwrap();
        let third = commit(&mut t, 30);
        let bolt_last = stock("bolt", &[("on_hand", Value::Int(8)), ("reserved", Value::Int(2))]);
        assert_eq!(rows(&third), vec![(RowKind::Insert, stock("bolt", &[("on_hand", Value::Int(8))]))]);
        assert_eq!(
            owned(third.changes()),
            vec![(RowKind::UpdateBefore, bolt_now), (RowKind::UpdateAfter, bolt_last)]
        );
        assert_eq!(index.get("stock", &index.key_of("stock", &nut).unwrap()).unwrap(), Some(nut));
        assert_eq!(index.meta("stock").unwrap().map(|m| m.identifier), Some(30));
    }

    #[test]
    fn an_aggregation_window_writes_its_own_aggregate_while_the_changelog_shows_running_totals() {
        let (_tmp, spec, index) = setup();
        let mut t = tracking(&spec, "reservations_total", &index);
        let reserve = |qty: i64| {
            row(
                &spec,
                "reservations_total",
                &[("item", s("bolt")), ("reserved_qty", Value::Int(qty)), ("open_lines", Value::Int(1))],
            )
        };
        let total = |qty: i64, lines: i64| {
            row(
                &spec,
                "reservations_total",
                &[("item", s("bolt")), ("reserved_qty", Value::Int(qty)), ("open_lines", Value::Int(lines))],
            )
        };
        t.apply(RowKind::Insert, reserve(3)).unwrap();
        t.apply(RowKind::Insert, reserve(4)).unwrap();
        let first = commit(&mut t, 1);
        assert_eq!(rows(&first), vec![(RowKind::Insert, total(7, 2))]);
        t.apply(RowKind::Insert, reserve(5)).unwrap();
        let second = commit(&mut t, 2);
        // Paimon merges this with the committed 7: writing the running 12 would count 7 twice.
        assert_eq!(rows(&second), vec![(RowKind::Insert, total(5, 1))]);
        assert_eq!(
            owned(second.changes()),
            vec![(RowKind::UpdateBefore, total(7, 2)), (RowKind::UpdateAfter, total(12, 3))]
        );
    }

    #[test]
    fn a_deduplicate_delete_reaches_paimon_as_the_key_alone_unless_the_window_sets_the_row_again() {
        let (_tmp, spec, index) = setup();
        let mut t = tracking(&spec, "open_orders", &index);
        let line = |order: &str, qty: i64| {
            row(
                &spec,
                "open_orders",
                &[("order_id", s(order)), ("line", Value::Int(1)), ("qty", Value::Int(qty))],
            )
        };
        let key_only =
            |order: &str| row(&spec, "open_orders", &[("order_id", s(order)), ("line", Value::Int(1))]);
        t.apply(RowKind::Insert, line("o1", 2)).unwrap();
        t.apply(RowKind::Insert, line("o2", 3)).unwrap();
        commit(&mut t, 1);

        // o1 deleted; o2 deleted then placed again; o3 placed then deleted within the window.
        t.apply(RowKind::Delete, line("o1", 2)).unwrap();
        t.apply(RowKind::Delete, line("o2", 3)).unwrap();
        t.apply(RowKind::Insert, line("o2", 4)).unwrap();
        t.apply(RowKind::Insert, line("o3", 1)).unwrap();
        t.apply(RowKind::Delete, line("o3", 1)).unwrap();
        let w = commit(&mut t, 2);
        assert_eq!(
            rows(&w),
            vec![(RowKind::Delete, key_only("o1")), (RowKind::Insert, line("o2", 4))],
            "o3 never reached a commit, so Paimon hears nothing of it"
        );
        assert_eq!(
            owned(w.changes()),
            vec![
                (RowKind::Delete, line("o1", 2)),
                (RowKind::UpdateBefore, line("o2", 3)),
                (RowKind::UpdateAfter, line("o2", 4)),
            ]
        );
        assert_eq!(
            index.get("open_orders", &index.key_of("open_orders", &line("o1", 2)).unwrap()).unwrap(),
            None
        );
    }

    #[test]
    fn a_failed_commit_leaves_rows_at_the_last_commit_to_the_index() {
        let (_tmp, spec, index) = setup();
        let mut t = tracking(&spec, "work_queue", &index);
        let job = |status: &str| row(&spec, "work_queue", &[("job_id", s("j1")), ("status", s(status))]);
        t.apply(RowKind::Insert, job("released")).unwrap();
        commit(&mut t, 1);
        t.apply(RowKind::Insert, job("blocked")).unwrap();
        // Closed, but its commit failed: nothing moved the index.
        let failed = t.close();
        assert_eq!(failed.rows().count(), 1);
        t.closed(false);
        t.apply(RowKind::Insert, job("done")).unwrap();
        let w = commit(&mut t, 2);
        assert_eq!(
            owned(w.changes()),
            vec![(RowKind::UpdateBefore, job("released")), (RowKind::UpdateAfter, job("done"))],
            "the row at the last commit is the index's, not the failed window's"
        );
    }
}
