//! The declared decision kinds (`GET /v1/decision-kinds`), a decision's input sheet
//! (`GET /v1/proposals/{id}/sheet`) and the history of a decision kind
//! (`GET /v1/decision-kinds/{kind}/history`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The answer of `GET /v1/decision-kinds`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KindList {
    pub kinds: Vec<KindDoc>,
}

/// A declared decision kind: what a proposal of it must hold and cite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KindDoc {
    pub name: String,
    pub description: Option<String>,
    /// The module that carries it out: a proposal of this kind names it.
    pub module: String,
    /// The action in words; `{name}` is an action field, an input or a rule step.
    pub summary: String,
    /// The action's fields and their types.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub action: Map<String, Value>,
    /// Every input a proposal must cite a receipt for.
    pub inputs: Vec<InputDoc>,
    pub rule: Vec<StepDoc>,
}

/// One input of a decision kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InputDoc {
    pub name: String,
    pub table: String,
    pub column: String,
    #[serde(rename = "type")]
    pub ty: String,
    /// Key column of the table → the action field holding its value.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub key: Map<String, Value>,
    /// How fresh the decision needs it.
    pub need: String,
}

/// One step of a decision kind's rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepDoc {
    pub name: String,
    pub expression: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Sheet {
    pub proposal_id: String,
    pub kind: String,
    pub description: Option<String>,
    pub module: String,
    pub agent: String,
    pub status: crate::proposal::ProposalStatus,
    pub created_at: String,
    /// The action in words, from the kind's summary template and the values the agent used.
    pub summary: String,
    /// The one line the agent wrote.
    pub agent_summary: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub action: Map<String, Value>,
    /// One line per declared input, in the kind's order.
    pub inputs: Vec<SheetInput>,
    /// The rule's arithmetic over the values the agent used.
    pub rule: Vec<SheetStep>,
    /// The rule in the agent's words.
    pub rule_text: String,
    pub verdict: Verdict,
}

/// One number the decision looked at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SheetInput {
    pub name: String,
    pub table: String,
    pub column: String,
    /// The key it was read by (key column → value).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub key: Map<String, Value>,
    /// The value the agent used: what the pinned snapshot holds for the key (`null`: no row).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub value: Value,
    pub snapshot_id: i64,
    /// The tag that pins the snapshot.
    pub tag: String,
    /// The record offset the value is known to reflect (every event below it): the offset of
    /// the agent's receipt when the record shows no event for the table between the snapshot's
    /// commit and it (a consistent read's tables keep older snapshots when nothing touched
    /// them), else the snapshot's own.
    pub offset: Option<u64>,
    pub committed_at: Option<String>,
    /// How stale the number was when the proposal was recorded, measured on the record as
    /// receipts measure lag: how long the oldest event the snapshot does not reflect had been
    /// recorded (0 when it reflects every event recorded before the proposal).
    pub lag_ms: Option<u64>,
    /// The lag the agent's receipt gave when it read (as the agent cited it).
    pub cited_lag_ms: Option<u64>,
    /// How fresh this decision needs the number (`1m`, `nightly@02:00`).
    pub need: String,
    /// The need in milliseconds when the proposal was made.
    pub need_ms: u64,
    /// Whether `lag_ms` was within the need; `null` when the lag is unknown.
    pub fresh_enough: Option<bool>,
    /// The value now (`null`: no row now).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub value_now: Value,
    pub now_snapshot_id: Option<i64>,
    pub now_offset: Option<u64>,
    /// Whether the value now differs from the value the agent used.
    pub changed_since: bool,
}

/// One step of the rule's arithmetic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SheetStep {
    pub name: String,
    pub expression: String,
    /// The expression with the numbers in it.
    pub with_values: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub value: Value,
    /// Why the step has no value (an overflow, a division by zero).
    pub error: Option<String>,
}

/// Whether the inputs were read at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Verdict {
    /// Every input came from snapshots reflecting the same record offset.
    pub one_instant: bool,
    /// The instants the inputs were read at, by offset.
    pub instants: Vec<Instant>,
    /// Events recorded between the earliest and the latest instant (0 at one instant).
    pub offset_spread: u64,
    /// Milliseconds over which the events between the earliest and the latest instant were
    /// recorded (0 at one instant).
    pub time_spread_ms: i64,
    /// The verdict in words.
    pub text: String,
}

/// One instant some inputs were read at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Instant {
    pub offset: Option<u64>,
    pub committed_at: Option<String>,
    pub inputs: Vec<String>,
}

/// The history report of a decision kind: `GET /v1/decision-kinds/{kind}/history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct History {
    pub kind: String,
    /// The window: proposals created at or after `since` (UTC), up to `until`.
    pub since: String,
    pub until: String,
    pub proposals: u64,
    pub approved: u64,
    pub rejected: u64,
    pub pending: u64,
    /// Proposals made and decisions taken per UTC day, oldest first.
    pub per_day: Vec<Day>,
    /// How long a person took to decide (from the proposal to the decision).
    pub time_to_decide: Option<Spread>,
    pub inputs: Vec<InputHistory>,
    /// Proposals whose inputs were not all read at one record offset.
    pub not_one_instant: u64,
    /// More proposals were in the window than one report examines (the server's limit per report).
    pub truncated: bool,
}

/// One UTC day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Day {
    pub day: String,
    pub proposed: u64,
    pub decided: u64,
}

/// Durations in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Spread {
    pub count: u64,
    pub median_ms: i64,
    pub p90_ms: i64,
    pub max_ms: i64,
}

/// One input over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InputHistory {
    pub name: String,
    pub table: String,
    pub column: String,
    pub need: String,
    /// Decided proposals whose value at the decision could be computed.
    pub decided_checked: u64,
    /// Of those, how many times the value at the decision differed from the value used.
    pub changed_before_decision: u64,
    /// Decided proposals where it could not be computed (too many events in between, or a
    /// proposal recorded before the kind declared the input, which does not cite it).
    pub unknown: u64,
    /// Proposals whose lag for this input is known.
    pub lag_known: u64,
    /// Of those, how many read it staler than the decision needs.
    pub staler_than_needed: u64,
}
