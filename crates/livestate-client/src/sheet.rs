//! The typed answers of `GET /v1/proposals/{id}/sheet` (a decision's input sheet) and
//! `GET /v1/decision-kinds/{kind}/history` (the sheets of a kind over a window).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Every number a decision looked at, where it came from, how fresh it was against what the
/// decision needs, what it is now, the rule's arithmetic and whether the inputs were read at
/// one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sheet {
    pub proposal_id: String,
    pub kind: String,
    pub description: Option<String>,
    pub module: String,
    pub agent: String,
    /// `pending`, `approved` or `rejected`.
    pub status: String,
    pub created_at: String,
    /// The action in words (the kind's summary template with the values the agent used).
    pub summary: String,
    /// The one line the agent wrote.
    pub agent_summary: String,
    pub action: Map<String, Value>,
    pub inputs: Vec<SheetInput>,
    pub rule: Vec<SheetStep>,
    pub rule_text: String,
    pub verdict: Verdict,
}

/// One input: the value used (read back from the pinned tag), its receipt, its lag against the
/// decision's need, and the value now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SheetInput {
    pub name: String,
    pub table: String,
    pub column: String,
    pub key: Map<String, Value>,
    pub value: Value,
    pub snapshot_id: i64,
    pub tag: String,
    pub offset: Option<u64>,
    pub committed_at: Option<String>,
    /// Staleness when the proposal was recorded, measured on the record.
    pub lag_ms: Option<u64>,
    /// The lag the agent's receipt gave.
    pub cited_lag_ms: Option<u64>,
    pub need: String,
    pub need_ms: u64,
    pub fresh_enough: Option<bool>,
    pub value_now: Value,
    pub now_snapshot_id: Option<i64>,
    pub now_offset: Option<u64>,
    pub changed_since: bool,
}

/// One step of the rule's arithmetic, with the numbers in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SheetStep {
    pub name: String,
    pub expression: String,
    pub with_values: String,
    pub value: Value,
    pub error: Option<String>,
}

/// Whether the inputs were read at one instant, or at which instants and how far apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub one_instant: bool,
    pub instants: Vec<Instant>,
    pub offset_spread: u64,
    pub time_spread_ms: i64,
    pub text: String,
}

/// Inputs read at one record offset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instant {
    pub offset: Option<u64>,
    pub committed_at: Option<String>,
    pub inputs: Vec<String>,
}

/// A decision kind over a window of recorded proposals and decisions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub kind: String,
    pub since: String,
    pub until: String,
    pub proposals: u64,
    pub approved: u64,
    pub rejected: u64,
    pub pending: u64,
    pub per_day: Vec<Day>,
    pub time_to_decide: Option<Spread>,
    pub inputs: Vec<InputHistory>,
    pub not_one_instant: u64,
    pub truncated: bool,
}

/// Proposals made and decisions taken on one UTC day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Day {
    pub day: String,
    pub proposed: u64,
    pub decided: u64,
}

/// How long people took to decide, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub count: u64,
    pub median_ms: i64,
    pub p90_ms: i64,
    pub max_ms: i64,
}

/// One input over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputHistory {
    pub name: String,
    pub table: String,
    pub column: String,
    pub need: String,
    pub decided_checked: u64,
    pub changed_before_decision: u64,
    pub unknown: u64,
    pub lag_known: u64,
    pub staler_than_needed: u64,
}
