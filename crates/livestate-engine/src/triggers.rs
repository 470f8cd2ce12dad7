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

/// What one commit does to triggers: new firings and arming changes (trigger, key, armed).
#[derive(Debug, Default)]
pub(crate) struct Effects {
    pub firings: Vec<Firing>,
    pub arming: Vec<(String, Vec<u8>, bool)>,
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

    /// Evaluates one committed change of `key`. `armed(trigger)` says whether the trigger is
    /// armed for the key (before this change).
    #[allow(clippy::too_many_arguments)]
    pub fn evaluate(
        &self,
        table: &str,
        key: &[u8],
        before: Option<&[Value]>,
        after: Option<&[Value]>,
        armed: &dyn Fn(&str) -> bool,
        at: (Option<i64>, u64, i64),
        next_seq: &mut dyn FnMut(&str) -> u64,
        out: &mut Effects,
    ) {
        for t in &self.triggers {
            let is_armed = armed(&t.name);
            let Some(row) = after else {
                if !is_armed {
                    out.arming.push((t.name.clone(), key.to_vec(), true));
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
                    snapshot_id: at.0,
                    offset: at.1,
                    fired_at_ms: at.2,
                });
                out.arming.push((t.name.clone(), key.to_vec(), false));
            } else if !is_armed {
                let rearm = match &t.rearm {
                    Some(r) => self.holds(r, row),
                    None => !cond,
                };
                if rearm {
                    out.arming.push((t.name.clone(), key.to_vec(), true));
                }
            }
        }
    }
}
