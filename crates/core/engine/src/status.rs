//! The status file (`D/status.json`): where each table stands against the record, as the
//! writing process last reported it, for other processes to read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{io_err, EngineError};
use crate::layout::Layout;
use crate::quarantine::Quarantined;

/// What the writing process last reported: where each table stands against the record.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Status {
    pub written_at_ms: i64,
    pub pid: u32,
    /// Offset the next event will get.
    pub record_next_offset: u64,
    pub tables: BTreeMap<String, TableProgress>,
}

/// A table's progress: the snapshot it last committed and how far the record has been checked.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TableProgress {
    pub snapshot_id: Option<i64>,
    /// Every event below this offset is reflected by `snapshot_id` (events that change nothing in
    /// this table need no commit, so this can run ahead of the snapshot's commit identifier).
    pub through: u64,
    /// Commit identifier of `snapshot_id`. A compaction since keeps it, so `through` still holds
    /// while the latest snapshot has this identifier (absent in files written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifier: Option<u64>,
    /// Lag measured by the writer when it wrote the status, in milliseconds.
    pub lag_ms: u64,
    /// Row operations of this table the derivers set aside (`quarantine.jsonl`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quarantined: u64,
    /// The latest of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_quarantined: Option<Quarantined>,
    /// What the table's commits and compactions cost this process (absent in files written
    /// before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<crate::spend::TableSpend>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TableProgress {
    /// Whether `through` holds for a table read at snapshot `snapshot_id` with commit identifier
    /// `identifier`: the same snapshot, or one of the same commit (a compaction keeps the
    /// identifier, and livestate commits only with new events, so no two commits share one).
    pub fn still_holds(&self, snapshot_id: Option<i64>, identifier: u64) -> bool {
        self.snapshot_id == snapshot_id || (snapshot_id.is_some() && self.identifier == Some(identifier))
    }
}

impl Status {
    /// Reads the status file; `None` when it does not exist or cannot be parsed (it is advisory).
    pub fn load(layout: &Layout) -> Option<Status> {
        let text = std::fs::read(layout.status_file()).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Writes the status file atomically (temporary file + rename).
    ///
    /// # Errors
    /// [`EngineError::Io`].
    pub fn store(&self, layout: &Layout) -> Result<(), EngineError> {
        let path = layout.status_file();
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(self).expect("status serialises");
        std::fs::write(&tmp, bytes).map_err(io_err(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io_err(&path))
    }
}

#[cfg(test)]
mod tests {
    use super::TableProgress;

    #[test]
    fn checked_through_holds_for_its_snapshot_and_for_a_compaction_of_the_same_commit_only() {
        let p = TableProgress {
            snapshot_id: Some(58),
            identifier: Some(17_693),
            through: 18_903,
            lag_ms: 0,
            ..TableProgress::default()
        };
        assert!(p.still_holds(Some(58), 17_693), "the same snapshot");
        assert!(p.still_holds(Some(59), 17_693), "a compaction after the commit");
        assert!(p.still_holds(Some(57), 17_693), "the commit, when the status named its compaction");
        assert!(!p.still_holds(Some(60), 18_000), "a later commit");
        assert!(!p.still_holds(None, 17_693), "no snapshot");
        let old = TableProgress { identifier: None, ..p };
        assert!(!old.still_holds(Some(59), 17_693), "a status written before identifiers were kept");
    }
}
