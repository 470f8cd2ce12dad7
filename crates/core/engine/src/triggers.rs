//! Edge triggers: a condition over a state table's row that fires once when a key's committed
//! row turns it true, and re-arms when `rearm` holds (default: the condition no longer holds)
//! or the row is deleted.
//!
//! Triggers are evaluated on each commit's before/after rows, after the Paimon commit, and
//! their firings are stored in the lookup index's store in the same atomic batch that moves
//! the index to that commit. A change that was never committed therefore never fires, and a
//! crossing fires once. Changes between two commits are seen as one change (the row at the
//! previous commit against the row at this one).

use livestate_spec::{Trigger, Value};
use serde::{Deserialize, Serialize};

/// One firing, as delivered to consumers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Firing {
    pub trigger: String,
    /// Position in the trigger's firings, from 1.
    pub seq: u64,
    pub table: String,
    /// Primary-key columns and values.
    pub key: serde_json::Map<String, serde_json::Value>,
    /// The row at the previous commit (absent for a new row).
    pub before: Option<serde_json::Map<String, serde_json::Value>>,
    pub after: serde_json::Map<String, serde_json::Value>,
    /// The snapshot that committed the change and the record offset it reflects.
    pub snapshot_id: Option<i64>,
    pub offset: u64,
    /// When the change was committed (UTC, ms).
    pub fired_at_ms: i64,
}

/// What one commit does to triggers: new firings and arming changes.
#[derive(Debug, Default)]
pub(crate) struct Effects {
    pub firings: Vec<Firing>,
    pub arming: Vec<Arming>,
}

/// A trigger armed (it fires on the key's next change that meets its condition) or disarmed
/// (it fired, and waits for the key to be re-armed) for one key.
#[derive(Debug)]
pub(crate) struct Arming {
    pub trigger: String,
    pub key: Vec<u8>,
    pub armed: bool,
}

/// The commit a change was made by: what each of its firings records.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommitPoint {
    pub snapshot_id: Option<i64>,
    /// The record offset the commit reflects.
    pub offset: u64,
    /// When the commit was made (UTC, ms).
    pub at_ms: i64,
}

/// One key's change in a commit: its stored key and its rows before and after (`None`: absent).
pub(crate) struct Change<'a> {
    pub key: &'a [u8],
    pub before: Option<&'a [Value]>,
    pub after: Option<&'a [Value]>,
}

/// The triggers of one table, ready to evaluate rows.
pub(crate) struct TableTriggers {
    pub triggers: Vec<Trigger>,
    pub columns: Vec<String>,
    pub key_idx: Vec<usize>,
}

fn object(
    columns: &[String],
    row: &[Value],
    only: Option<&[usize]>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    for (i, (c, v)) in columns.iter().zip(row).enumerate() {
        if only.is_none_or(|o| o.contains(&i)) {
            m.insert(c.clone(), v.to_json());
        }
    }
    m
}

impl TableTriggers {
    fn holds(&self, e: &livestate_spec::expr::Expr, row: &[Value]) -> bool {
        let lookup = |n: &str| self.columns.iter().position(|c| c == n).map(|i| row[i].clone());
        e.holds(&lookup).unwrap_or(false)
    }

    /// Evaluates one committed change of `table`, made by the commit `at`. `armed(trigger)`
    /// says whether the trigger is armed for the key (before this change); `next_seq(trigger)`
    /// numbers a firing.
    pub fn evaluate(
        &self,
        table: &str,
        change: &Change<'_>,
        at: CommitPoint,
        armed: &dyn Fn(&str) -> bool,
        next_seq: &mut dyn FnMut(&str) -> u64,
        out: &mut Effects,
    ) {
        let Change { key, before, after } = *change;
        for t in &self.triggers {
            let is_armed = armed(&t.name);
            let Some(row) = after else {
                if !is_armed {
                    out.arming.push(Arming { trigger: t.name.clone(), key: key.to_vec(), armed: true });
                }
                continue;
            };
            let cond = self.holds(&t.when, row);
            if is_armed && cond {
                out.firings.push(Firing {
                    trigger: t.name.clone(),
                    seq: next_seq(&t.name),
                    table: table.to_string(),
                    key: object(&self.columns, row, Some(&self.key_idx)),
                    before: before.map(|b| object(&self.columns, b, None)),
                    after: object(&self.columns, row, None),
                    snapshot_id: at.snapshot_id,
                    offset: at.offset,
                    fired_at_ms: at.at_ms,
                });
                out.arming.push(Arming { trigger: t.name.clone(), key: key.to_vec(), armed: false });
            } else if !is_armed {
                let rearm = match &t.rearm {
                    Some(r) => self.holds(r, row),
                    None => !cond,
                };
                if rearm {
                    out.arming.push(Arming { trigger: t.name.clone(), key: key.to_vec(), armed: true });
                }
            }
        }
    }
}
