//! The boundary on the wire: what an agent proposes (citing what it read), what a person
//! decides, what a proposal is in the inbox and in its module's outbox.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How risky the agent judges the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum RiskLevel {
    Low,
    Medium,
    High,
}

impl RiskLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            RiskLevel::Low => "low",
            RiskLevel::Medium => "medium",
            RiskLevel::High => "high",
        }
    }
}

/// Where a proposal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ProposalStatus {
    /// Waiting for a person.
    Pending,
    Approved,
    Rejected,
}

impl ProposalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ProposalStatus::Pending => "pending",
            ProposalStatus::Approved => "approved",
            ProposalStatus::Rejected => "rejected",
        }
    }

    /// The status a query parameter names (`pending`, `approved`, `rejected`).
    ///
    /// # Errors
    /// A message naming the value and what is expected.
    pub fn parse(text: &str) -> Result<ProposalStatus, String> {
        match text {
            "pending" => Ok(ProposalStatus::Pending),
            "approved" => Ok(ProposalStatus::Approved),
            "rejected" => Ok(ProposalStatus::Rejected),
            other => Err(format!("status `{other}`: expected pending, approved or rejected")),
        }
    }
}

impl std::fmt::Display for ProposalStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a person decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = DecisionVerdict))]
pub enum Verdict {
    Approve,
    Reject,
}

impl Verdict {
    /// The status a proposal takes once decided so.
    pub fn status(self) -> ProposalStatus {
        match self {
            Verdict::Approve => ProposalStatus::Approved,
            Verdict::Reject => ProposalStatus::Rejected,
        }
    }
}

/// A cited source: a snapshot of a table the agent read, and the keys or rows it used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Source {
    pub table: String,
    /// The receipt's snapshot.
    pub snapshot_id: i64,
    /// The receipt's record offset.
    #[serde(default)]
    pub offset: Option<u64>,
    /// The receipt's lag when the agent read it.
    #[serde(default)]
    pub lag_ms: Option<u64>,
    /// The receipt's commit time.
    #[serde(default)]
    pub committed_at: Option<String>,
    /// `column: value` filters the agent read by.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub keys: Vec<Map<String, Value>>,
    /// Rows (or some of their columns, key columns included) the agent used: each must be what
    /// the snapshot holds.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub rows: Vec<Map<String, Value>>,
    /// Set by the server: the tag that pins the snapshot (refused from agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// The rule an agent applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rule {
    pub name: String,
    pub version: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub parameters: Map<String, Value>,
    /// The rule in words.
    pub text: String,
}

/// How risky the agent judges the action, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Risk {
    pub level: RiskLevel,
    #[serde(default)]
    pub reasons: Vec<String>,
}

/// What an agent proposes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewProposal {
    /// What kind of action, e.g. `stock_replenishment`.
    pub kind: String,
    /// The module that carries the action out once approved.
    pub module: String,
    /// One line for the inbox.
    pub summary: String,
    /// The drafted action.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub action: Map<String, Value>,
    pub sources: Vec<Source>,
    pub rule: Rule,
    pub risk: Risk,
    /// The same key from the same agent names the same proposal: a retried request makes
    /// no second one.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// The answer to a proposal: its id, its status, where the record holds it, and the tag
/// pinning each cited table's snapshot (`duplicate` when the same request came again with its
/// idempotency key: the tags are the first request's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Proposed {
    pub id: String,
    pub status: ProposalStatus,
    /// Offset of the `decisions.proposal_created` event.
    pub offset: u64,
    /// The tags pinning the snapshots the proposal cites, one per table and snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<PinnedTag>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
}

/// A tag pinning a snapshot a proposal cites, so an auditor reads it months later.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PinnedTag {
    pub table: String,
    pub snapshot_id: i64,
    pub tag: String,
}

/// A person's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewDecision {
    pub decision: Verdict,
    pub reason: String,
}

/// The answer to a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Decided {
    pub id: String,
    pub status: ProposalStatus,
    pub decided_by: String,
    /// Offset of the `decisions.proposal_decided` event.
    pub offset: u64,
}

/// A decision on a proposal, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Decision {
    /// `approved` or `rejected`.
    pub decision: ProposalStatus,
    pub decided_by: String,
    pub decided_at: String,
    pub reason: Option<String>,
    /// Offset of the `decisions.proposal_decided` event.
    pub offset: u64,
}

/// A proposal as the inbox lists it (the whole document stays in the record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProposalEntry {
    pub id: String,
    pub kind: String,
    pub agent: String,
    pub module: String,
    pub summary: String,
    pub risk_level: RiskLevel,
    pub status: ProposalStatus,
    pub created_at: String,
    /// Offset of the `decisions.proposal_created` event.
    pub created_offset: u64,
    pub decision: Option<Decision>,
}

/// The answer of `GET /v1/proposals`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProposalList {
    /// Newest first.
    pub proposals: Vec<ProposalEntry>,
}

/// A proposal as the record keeps it (`decisions.proposal_created`'s `document`): what the
/// agent sent, without its idempotency key, with the server's id, the agent's name, the time,
/// and in each source the tag that pins it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProposalDocument {
    pub id: String,
    pub agent: String,
    pub created_at: String,
    pub kind: String,
    pub module: String,
    pub summary: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub action: Map<String, Value>,
    pub sources: Vec<Source>,
    pub rule: Rule,
    pub risk: Risk,
}

impl ProposalDocument {
    /// The document of `proposal`, as the agent `agent` sent it, recorded as `id` at `created_at`.
    pub fn recorded(proposal: NewProposal, id: &str, agent: &str, created_at: &str) -> ProposalDocument {
        let NewProposal { kind, module, summary, action, sources, rule, risk, idempotency_key: _ } = proposal;
        ProposalDocument {
            id: id.to_string(),
            agent: agent.to_string(),
            created_at: created_at.to_string(),
            kind,
            module,
            summary,
            action,
            sources,
            rule,
            risk,
        }
    }

    /// Whether this document records `proposal`: the same request, whatever the server added
    /// (id, agent, time, the tags pinning the sources) and whatever the idempotency key.
    pub fn records(&self, proposal: &NewProposal) -> bool {
        let untagged = |sources: &[Source]| -> Vec<Source> {
            sources.iter().map(|src| Source { tag: None, ..src.clone() }).collect()
        };
        self.kind == proposal.kind
            && self.module == proposal.module
            && self.summary == proposal.summary
            && self.action == proposal.action
            && untagged(&self.sources) == untagged(&proposal.sources)
            && self.rule == proposal.rule
            && self.risk == proposal.risk
    }
}

/// The answer of `GET /v1/proposals/{id}`: where the proposal stands, and the whole document
/// the agent sent (with the server's id, agent, time and tags).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProposalDoc {
    pub proposal: ProposalEntry,
    pub document: ProposalDocument,
}

/// One cited source in an audit: the rows read back from the tag that pins its snapshot, next
/// to the rows the agent cited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Evidence {
    pub table: String,
    /// The tag pinning the cited snapshot.
    pub tag: String,
    pub snapshot_id: i64,
    /// The record offset the agent's receipt named.
    pub cited_offset: Option<u64>,
    /// The lag the agent's receipt named.
    pub cited_lag_ms: Option<u64>,
    /// The commit time the agent's receipt named.
    pub cited_committed_at: Option<String>,
    /// The `column: value` filters the agent read by.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub keys: Vec<Map<String, Value>>,
    /// The rows the agent cited.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub cited_rows: Vec<Map<String, Value>>,
    /// What the pinned snapshot holds for the cited keys and rows, read now.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub rows_at_tag: Vec<Map<String, Value>>,
    pub receipt_at_tag: crate::read::Receipt,
    /// Every cited row is exactly what the pinned snapshot holds.
    pub cited_rows_identical: bool,
}

/// An event a module recorded citing the proposal as its causation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CausedEvent {
    pub offset: u64,
    pub id: String,
    #[serde(rename = "type")]
    pub event_type: String,
    pub occurred_at: String,
    pub causation: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub data: Map<String, Value>,
}

/// The current rows of one key that the evidence or the caused events touched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StateAfter {
    pub table: String,
    /// The primary key, column to value.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub key: Map<String, Value>,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub rows: Vec<Map<String, Value>>,
    pub receipt: crate::read::Receipt,
}

/// The answer of `GET /v1/proposals/{id}/audit`: the proposal, its evidence read back from the
/// pinned tags, the decision, the events it caused and the state after them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Audit {
    pub proposal: ProposalDocument,
    pub status: ProposalStatus,
    /// Offset of the `decisions.proposal_created` event.
    pub created_offset: u64,
    pub evidence: Vec<Evidence>,
    pub decision: Option<Decision>,
    /// Oldest first.
    pub caused_events: Vec<CausedEvent>,
    pub state_after: Vec<StateAfter>,
}

/// An approved proposal waiting in its module's outbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutboxItem {
    /// The cursor: offset of the approving decision. Pass it as `after` to get what follows.
    pub cursor: u64,
    pub proposal_id: String,
    pub kind: String,
    pub module: String,
    pub summary: String,
    /// The drafted action, as the agent proposed it.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub action: Value,
    pub decided_by: String,
    pub decided_at: String,
    pub reason: Option<String>,
}

/// The answer of `GET /v1/outbox/{module}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Outbox {
    pub module: String,
    /// Oldest first.
    pub items: Vec<OutboxItem>,
    /// The cursor to pass as `after` next.
    pub next_after: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_levels_and_verdicts_are_the_lowercase_words_on_the_wire() {
        let entry = ProposalEntry {
            id: "p1".into(),
            kind: "stock_replenishment".into(),
            agent: "agent:procurement".into(),
            module: "procurement".into(),
            summary: "order".into(),
            risk_level: RiskLevel::Medium,
            status: ProposalStatus::Approved,
            created_at: "2026-03-02T08:00:00.000Z".into(),
            created_offset: 7,
            decision: None,
        };
        let v = serde_json::to_value(&entry).expect("serializes");
        assert_eq!((v["risk_level"].as_str(), v["status"].as_str()), (Some("medium"), Some("approved")));
        let d: NewDecision =
            serde_json::from_str(r#"{"decision":"reject","reason":"too much"}"#).expect("parses");
        assert_eq!(d.decision.status(), ProposalStatus::Rejected);
        let bad = serde_json::from_str::<NewDecision>(r#"{"decision":"maybe","reason":"r"}"#).unwrap_err();
        assert!(bad.to_string().contains("approve") && bad.to_string().contains("reject"), "{bad}");
        assert_eq!(ProposalStatus::parse("pending"), Ok(ProposalStatus::Pending));
        assert!(ProposalStatus::parse("open")
            .unwrap_err()
            .contains("expected pending, approved or rejected"));
    }

    fn first_answer() -> Proposed {
        serde_json::from_str(
            r#"{"id":"p1","status":"pending","offset":3,"tags":[{"table":"stock","snapshot_id":4,"tag":"proposal-p1-s4"}]}"#,
        )
        .expect("parses")
    }

    #[test]
    fn a_first_proposal_answer_carries_its_tags() {
        let first = first_answer();
        assert!(!first.duplicate && first.tags.as_ref().is_some_and(|t| t[0].tag == "proposal-p1-s4"));
    }

    #[test]
    fn a_repeated_proposal_answer_says_duplicate_without_tags() {
        let again = serde_json::to_value(Proposed { tags: None, duplicate: true, ..first_answer() })
            .expect("serializes");
        assert_eq!(
            again,
            serde_json::json!({"id": "p1", "status": "pending", "offset": 3, "duplicate": true})
        );
    }

    fn new_proposal() -> NewProposal {
        serde_json::from_value(serde_json::json!({
            "kind": "stock_replenishment", "module": "procurement", "summary": "order 65 bolts",
            "action": {"item": "bolt", "qty": 65},
            "sources": [{"table": "stock", "snapshot_id": 4, "rows": [{"item": "bolt", "on_hand": 50}]}],
            "rule": {"name": "order-up-to-target", "version": "1", "text": "order up to the target"},
            "risk": {"level": "low"},
            "idempotency_key": "k-1"
        }))
        .expect("parses")
    }

    #[test]
    fn a_recorded_proposal_keeps_what_the_agent_sent_but_its_idempotency_key() {
        let doc = ProposalDocument::recorded(new_proposal(), "p1", "procurement", "2026-03-02T08:00:00.000Z");
        let v = serde_json::to_value(&doc).expect("serializes");
        assert!(v.get("idempotency_key").is_none(), "{v}");
        assert_eq!((v["id"].as_str(), v["agent"].as_str()), (Some("p1"), Some("procurement")));
        assert_eq!(v["sources"][0]["rows"][0]["on_hand"], 50);
        assert!(v["sources"][0].get("tag").is_none(), "no tag until the server pins one: {v}");
        let back: ProposalDocument = serde_json::from_value(v).expect("parses back");
        assert_eq!(back, doc);
        let mut pinned = doc.clone();
        pinned.sources[0].tag = Some("proposal-p1-s4".into());
        assert!(pinned.records(&new_proposal()), "the tag and the key are the server's, not the request's");
        let other = NewProposal { summary: "order 66 bolts".into(), ..new_proposal() };
        assert!(!pinned.records(&other));
    }

    #[test]
    fn an_audits_caused_event_names_its_event_type_as_type() {
        let ev = CausedEvent {
            offset: 9,
            id: "po-1".into(),
            event_type: "procurement.inbound_changed".into(),
            occurred_at: "2026-03-02T08:00:00.000Z".into(),
            causation: Some("p1".into()),
            data: Map::new(),
        };
        let v = serde_json::to_value(&ev).expect("serializes");
        assert_eq!(v["type"], "procurement.inbound_changed");
        assert!(v.get("event_type").is_none(), "{v}");
        assert_eq!(serde_json::from_value::<CausedEvent>(v).expect("parses back"), ev);
    }
}
