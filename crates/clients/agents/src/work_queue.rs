//! The work-queue agent.
//!
//! Rule `unblock-stale-jobs` v1: a job blocked for longer than the threshold gets one
//! proposal: move it to a free machine (one that appears in the queue with no released job)
//! when there is one, else release it as it is. It cites the blocked job's row (every input
//! of the declared kinds `job_reassignment` and `job_release`) and the rows that show the
//! machine is free.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use livestate_client::{
    Client, ClientError, NewProposal, ProposalStatus, Risk, RiskLevel, RowsAnswer, Rule, TableRead,
};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::{object, rows_of, source, text, Narration};

pub const RULE: &str = "unblock-stale-jobs";
pub const RULE_VERSION: &str = "1";
/// The rule in words, as each proposal states it.
const RULE_TEXT: &str =
    "A job blocked longer than the threshold moves to a free machine if there is one, else is released.";

/// What to do about one blocked job.
#[derive(Debug, Clone, PartialEq)]
pub enum JobAction {
    /// Move to this machine; the rows show it is free.
    Reassign {
        job: Value,
        to_machine: String,
        machine_rows: Vec<Value>,
    },
    Release {
        job: Value,
    },
}

impl JobAction {
    /// The blocked job's row.
    pub fn job(&self) -> &Value {
        match self {
            JobAction::Reassign { job, .. } | JobAction::Release { job } => job,
        }
    }
}

fn blocked_since(row: &Value) -> Option<chrono::DateTime<chrono::Utc>> {
    let t = text(row, "changed_at");
    chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f").ok().map(|n| n.and_utc())
}

/// Applies the rule to the work queue's rows at `now`.
pub fn plan(queue: &[Value], threshold: Duration, now: chrono::DateTime<chrono::Utc>) -> Vec<JobAction> {
    let mut by_machine: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for r in queue {
        if !text(r, "machine").is_empty() {
            by_machine.entry(text(r, "machine")).or_default().push(r);
        }
    }
    let mut free: BTreeSet<&str> = by_machine
        .iter()
        .filter(|(_, jobs)| {
            jobs.iter().all(|j| text(j, "status") != "released" && text(j, "status") != "blocked")
        })
        .map(|(m, _)| *m)
        .collect();
    let mut out = Vec::new();
    for job in queue.iter().filter(|r| text(r, "status") == "blocked") {
        let Some(since) = blocked_since(job) else { continue };
        if now.signed_duration_since(since).to_std().unwrap_or_default() < threshold {
            continue;
        }
        let own = text(job, "machine");
        match free.iter().find(|m| **m != own).copied() {
            Some(m) => {
                free.remove(m);
                out.push(JobAction::Reassign {
                    job: job.clone(),
                    to_machine: m.to_string(),
                    machine_rows: by_machine[m].iter().map(|r| (*r).clone()).collect(),
                });
            }
            None => out.push(JobAction::Release { job: job.clone() }),
        }
    }
    out
}

/// The work-queue agent: one proposal per blocked job while it is pending.
pub struct WorkQueueAgent {
    client: Client,
    threshold: Duration,
    /// Job → its pending proposal.
    pending: BTreeMap<String, String>,
    narrate: Option<mpsc::UnboundedSender<Narration>>,
}

impl WorkQueueAgent {
    pub fn new(
        client: Client,
        threshold: Duration,
        narrate: Option<mpsc::UnboundedSender<Narration>>,
    ) -> WorkQueueAgent {
        WorkQueueAgent { client, threshold, pending: BTreeMap::new(), narrate }
    }

    /// Reads the queue once and proposes for every job blocked too long; returns the ids.
    ///
    /// # Errors
    /// API errors.
    pub async fn poll(&mut self) -> Result<Vec<String>, ClientError> {
        let read = self.client.consistent_read(&[TableRead::table("work_queue")]).await?;
        // The server answers every table a consistent read names.
        let Some(queue) = read.result("work_queue") else { return Ok(Vec::new()) };
        let rows = rows_of(queue);
        let mut made = Vec::new();
        for action in plan(&rows, self.threshold, chrono::Utc::now()) {
            let job_id = text(action.job(), "job_id").to_string();
            if let Some(id) = self.pending.get(&job_id).cloned() {
                if self.client.proposal(&id).await?.proposal.status == ProposalStatus::Pending {
                    continue;
                }
                self.pending.remove(&job_id);
            }
            // The queue's rows come from its snapshot: a queue without one has no job to act on.
            let Some(proposal) = proposal(action, queue, self.threshold, read.offset) else { continue };
            let id = self.client.propose(&proposal).await?.id;
            self.pending.insert(job_id, id.clone());
            if let Some(tx) = &self.narrate {
                let _ = tx.send(Narration::Proposed {
                    id: id.clone(),
                    summary: proposal.summary,
                    risk: RiskLevel::Low,
                });
            }
            made.push(id);
        }
        Ok(made)
    }
}

/// The proposal for `action`, from the work queue's read `queue` at record offset `offset`:
/// `job_reassignment` citing the job's row and the rows that show the machine free, or
/// `job_release` citing the job's row. `None` when the queue has no snapshot to cite.
fn proposal(action: JobAction, queue: &RowsAnswer, threshold: Duration, offset: u64) -> Option<NewProposal> {
    let job_id = text(action.job(), "job_id").to_string();
    let (kind, summary, action, cited) = match action {
        JobAction::Reassign { job, to_machine, machine_rows } => {
            let from = text(&job, "machine").to_string();
            let summary = format!("Move blocked {job_id} from {from} to free {to_machine}");
            let action = object([
                ("job_id", job_id.as_str().into()),
                ("from_machine", from.into()),
                ("to_machine", to_machine.into()),
            ]);
            let mut cited = vec![job];
            cited.extend(machine_rows);
            ("job_reassignment", summary, action, cited)
        }
        JobAction::Release { job } => {
            let summary = format!("Release {job_id}, blocked: {}", text(&job, "block_reason"));
            ("job_release", summary, object([("job_id", job_id.as_str().into())]), vec![job])
        }
    };
    Some(NewProposal {
        kind: kind.into(),
        module: "operations".into(),
        summary,
        action,
        sources: vec![source(queue, &cited, None)?],
        rule: Rule {
            name: RULE.into(),
            version: RULE_VERSION.into(),
            parameters: object([("threshold_seconds", threshold.as_secs().into())]),
            text: RULE_TEXT.into(),
        },
        risk: Risk {
            level: RiskLevel::Low,
            reasons: vec!["reversible: the job can be blocked again".into()],
        },
        idempotency_key: Some(format!("{job_id}@{offset}")),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_job_blocked_too_long_moves_to_a_free_machine_else_is_released() {
        let now: chrono::DateTime<chrono::Utc> = "2026-03-02T10:00:00Z".parse().unwrap();
        let row = |job: &str, status: &str, machine: &str, at: &str| json!({"job_id": job, "status": status, "machine": machine, "changed_at": at, "block_reason": "no material"});
        let queue = [
            row("j1", "blocked", "press-1", "2026-03-02T09:00:00.000"),
            row("j2", "released", "press-2", "2026-03-02T09:00:00.000"),
            row("j3", "done", "lathe-1", "2026-03-02T09:00:00.000"),
            row("j4", "blocked", "press-2", "2026-03-02T09:59:50.000"),
            row("j5", "blocked", "mill-3", "2026-03-02T08:00:00.000"),
        ];
        let plans = plan(&queue, Duration::from_secs(60), now);
        assert_eq!(plans.len(), 2, "j4 has not waited long enough");
        assert!(matches!(&plans[0], JobAction::Reassign { to_machine, .. } if to_machine == "lathe-1"));
        assert!(matches!(&plans[1], JobAction::Release { job } if job["job_id"] == "j5"));
    }

    #[test]
    fn the_typed_proposals_go_over_the_wire_as_the_json_the_agent_used_to_build() {
        let row = |job: &str, machine: &str, status: &str, at: &str| json!({"job_id": job, "status": status, "machine": machine, "changed_at": at, "block_reason": "no material"});
        let queue: RowsAnswer = serde_json::from_value(json!({
            "columns": [],
            "receipt": {"table": "work_queue", "snapshot_id": 6, "offset": 30, "committed_at": "2026-03-02T09:59:59.000Z",
                        "lag_ms": 2, "budget": "5s", "within_budget": true, "measured_by": "record", "served_by": "paimon"},
            "rows": [row("j1", "press-1", "blocked", "2026-03-02T09:00:00.000"), row("j3", "lathe-1", "done", "2026-03-02T09:00:00.000"),
                     row("j5", "mill-3", "blocked", "2026-03-02T08:00:00.000")]
        }))
        .expect("a rows answer");
        let now: chrono::DateTime<chrono::Utc> = "2026-03-02T10:00:00Z".parse().unwrap();
        let threshold = Duration::from_secs(600);
        let typed: Vec<NewProposal> = plan(&rows_of(&queue), threshold, now)
            .into_iter()
            .map(|a| proposal(a, &queue, threshold, 30).expect("the queue has a snapshot"))
            .collect();
        assert_eq!(typed.len(), 2, "{typed:?}");
        // What the `json!` the agent built before the typed wire gave for this queue.
        let receipt = json!({"committed_at": "2026-03-02T09:59:59.000Z", "lag_ms": 2, "offset": 30, "snapshot_id": 6, "table": "work_queue"});
        let rule = json!({"name": "unblock-stale-jobs", "parameters": {"threshold_seconds": 600},
            "text": "A job blocked longer than the threshold moves to a free machine if there is one, else is released.", "version": "1"});
        let risk = json!({"level": "low", "reasons": ["reversible: the job can be blocked again"]});
        let cited = |rows: Value| {
            let mut s = receipt.clone();
            s["rows"] = rows;
            s
        };
        let reassign = json!({
            "action": {"from_machine": "press-1", "job_id": "j1", "to_machine": "lathe-1"},
            "idempotency_key": "j1@30", "kind": "job_reassignment", "module": "operations", "risk": risk, "rule": rule,
            "sources": [cited(json!([
                {"block_reason": "no material", "changed_at": "2026-03-02T09:00:00.000", "job_id": "j1", "machine": "press-1", "status": "blocked"},
                {"block_reason": "no material", "changed_at": "2026-03-02T09:00:00.000", "job_id": "j3", "machine": "lathe-1", "status": "done"}]))],
            "summary": "Move blocked j1 from press-1 to free lathe-1"
        });
        let release = json!({
            "action": {"job_id": "j5"},
            "idempotency_key": "j5@30", "kind": "job_release", "module": "operations", "risk": risk, "rule": rule,
            "sources": [cited(json!([
                {"block_reason": "no material", "changed_at": "2026-03-02T08:00:00.000", "job_id": "j5", "machine": "mill-3", "status": "blocked"}]))],
            "summary": "Release j5, blocked: no material"
        });
        crate::assert_wire_unchanged(&typed[0], reassign);
        crate::assert_wire_unchanged(&typed[1], release);
    }
}
