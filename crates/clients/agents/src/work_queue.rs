//! The work-queue agent.
//!
//! Rule `unblock-stale-jobs` v1: a job blocked for longer than the threshold gets one
//! proposal: move it to a free machine (one that appears in the queue with no released job)
//! when there is one, else release it as it is. It cites the blocked job's row (every input
//! of the declared kinds `job_reassignment` and `job_release`) and the rows that show the
//! machine is free.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use livestate_client::{Client, ClientError, ProposalStatus, RiskLevel, TableRead};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::{rows_of, source, text, Narration};

pub const RULE: &str = "unblock-stale-jobs";
pub const RULE_VERSION: &str = "1";

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
            let job = match &action {
                JobAction::Reassign { job, .. } | JobAction::Release { job } => job.clone(),
            };
            let job_id = text(&job, "job_id").to_string();
            if let Some(id) = self.pending.get(&job_id).cloned() {
                if self.client.proposal(&id).await?.proposal.status == ProposalStatus::Pending {
                    continue;
                }
                self.pending.remove(&job_id);
            }
            let (kind, summary, act, cited) = match action {
                JobAction::Reassign { job, to_machine, machine_rows } => {
                    let mut cited = vec![job.clone()];
                    cited.extend(machine_rows);
                    (
                        "job_reassignment",
                        format!("Move blocked {job_id} from {} to free {to_machine}", text(&job, "machine")),
                        json!({"job_id": job_id, "from_machine": text(&job, "machine"), "to_machine": to_machine}),
                        cited,
                    )
                }
                JobAction::Release { job } => (
                    "job_release",
                    format!("Release {job_id}, blocked: {}", text(&job, "block_reason")),
                    json!({"job_id": job_id}),
                    vec![job],
                ),
            };
            let proposal = json!({
                "kind": kind, "module": "operations", "summary": summary, "action": act,
                "sources": [source(queue, &cited, None)],
                "rule": {"name": RULE, "version": RULE_VERSION, "parameters": {"threshold_seconds": self.threshold.as_secs()},
                         "text": "A job blocked longer than the threshold moves to a free machine if there is one, else is released."},
                "risk": {"level": "low", "reasons": ["reversible: the job can be blocked again"]},
                "idempotency_key": format!("{job_id}@{}", read.offset),
            });
            let id = self.client.propose(&proposal).await?.id;
            self.pending.insert(job_id, id.clone());
            if let Some(tx) = &self.narrate {
                let _ = tx.send(Narration::Proposed { id: id.clone(), summary, risk: RiskLevel::Low });
            }
            made.push(id);
        }
        Ok(made)
    }
}

#[cfg(test)]
mod tests {
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
}
