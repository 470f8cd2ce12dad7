//! The proposal store (`D/boundary/`): proposals, their decisions, each module's outbox and
//! the events each proposal caused, derived from the record.
//!
//! The record is the truth: a proposal exists because a `decisions.proposal_created` event was
//! recorded, a decision because a `decisions.proposal_decided` one was, and a module event
//! belongs to a proposal because its `causation` names it. One follower reads the record in
//! order and applies each batch together with the offset it reached (`meta/through`) in one
//! atomic write, so after a crash it resumes exactly where the last batch ended and applies
//! nothing twice. Format: `docs/formats/boundary.md`.

use std::path::Path;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use livestate_api::proposal::ProposalStatus;
use livestate_api::ErrorKind;
use livestate_engine::RecordError;
use livestate_engine::RecordView;
use livestate_record::RecordedEvent;

/// Events read per follower batch.
const FOLLOW_CHUNK: usize = 4096;

pub const PROPOSAL_CREATED: &str = "decisions.proposal_created";
pub const PROPOSAL_DECIDED: &str = "decisions.proposal_decided";

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The embedded store could not be opened, read or written.
    #[error("proposal store: {0}")]
    Store(#[from] fjall::Error),
    /// A stored entry does not decode: the store is damaged or from another version.
    #[error("proposal store: a stored entry does not decode: {0}")]
    Entry(#[from] serde_json::Error),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("proposal store: event at offset {offset}: {message}")]
    Event { offset: u64, message: String },
}

impl StoreError {
    /// Whose failure this is: the record's own kind (a refused write is unavailable), else
    /// the server's (no request makes the store fail).
    pub fn kind(&self) -> ErrorKind {
        match self {
            StoreError::Record(e) => e.kind(),
            StoreError::Store(_) | StoreError::Entry(_) | StoreError::Event { .. } => ErrorKind::Internal,
        }
    }
}

pub use livestate_api::proposal::{Decision, OutboxItem, ProposalEntry};

/// The store.
pub struct Store {
    db: Database,
    meta: Keyspace,
    /// id → [`ProposalEntry`] JSON.
    proposals: Keyspace,
    /// created offset (8 bytes BE) → id: proposals newest first.
    by_offset: Keyspace,
    /// `module 0x00 cursor` → [`OutboxItem`] JSON.
    outbox: Keyspace,
    /// `id 0x00 offset` → event type: the events a proposal caused.
    caused: Keyspace,
    /// module → last cursor its webhook accepted.
    delivered: Keyspace,
}

fn pair(a: &str, n: u64) -> Vec<u8> {
    let mut k = a.as_bytes().to_vec();
    k.push(0);
    k.extend_from_slice(&n.to_be_bytes());
    k
}

fn tail_u64(k: &[u8]) -> u64 {
    u64::from_be_bytes(k[k.len() - 8..].try_into().expect("8-byte suffix"))
}

/// A string field of a decisions event that is one of a set of words (a status, a risk level).
fn word<T: serde::de::DeserializeOwned>(ev: &RecordedEvent, field: &str) -> Result<T, StoreError> {
    let t = text(ev, field)?;
    serde_json::from_value(serde_json::Value::String(t.clone())).map_err(|e| StoreError::Event {
        offset: ev.offset,
        message: format!("field `{field}` = `{t}`: {e}"),
    })
}

fn text(ev: &RecordedEvent, field: &str) -> Result<String, StoreError> {
    match ev.event.data.get(field) {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        _ => {
            Err(StoreError::Event { offset: ev.offset, message: format!("field `{field}` is not a string") })
        }
    }
}

impl Store {
    /// What the proposal store holds in memory now (block cache and unflushed writes).
    pub fn memory(&self) -> livestate_record::StoreMemory {
        livestate_record::StoreMemory::of(&self.db)
    }

    /// Opens (creating if needed) the store in `path`.
    ///
    /// # Errors
    /// The store cannot be opened.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let db = livestate_record::memory::database(path, livestate_record::memory::PROPOSALS_CACHE_BYTES)
            .open()?;
        // Writes flush to a table file at 1 MiB per keyspace (fjall's default: 64 MiB; see
        // `livestate_record::memory` for what a memtable costs).
        let options = || KeyspaceCreateOptions::default().max_memtable_size(1024 * 1024);
        let ks = |name: &str| db.keyspace(name, options).map_err(StoreError::from);
        Ok(Store {
            meta: ks("meta")?,
            proposals: ks("proposals")?,
            by_offset: ks("by_offset")?,
            outbox: ks("outbox")?,
            caused: ks("caused")?,
            delivered: ks("delivered")?,
            db,
        })
    }

    /// Every record offset below this has been applied.
    ///
    /// # Errors
    /// Store errors.
    pub fn through(&self) -> Result<u64, StoreError> {
        Ok(self.meta.get(b"through")?.map_or(0, |v| tail_u64(&v)))
    }

    /// Applies the record's next batch of events; returns how many were read.
    ///
    /// # Errors
    /// Record or store errors, or a decisions event without its fields.
    pub fn follow(&self, record: RecordView<'_>) -> Result<usize, StoreError> {
        let from = self.through()?;
        let events = record.read(from, FOLLOW_CHUNK)?;
        let Some(last) = events.last().map(|e| e.offset) else { return Ok(0) };
        let mut batch = self.db.batch();
        // Proposals changed in this batch, so a decision right after its creation sees it.
        let mut touched: std::collections::HashMap<String, ProposalEntry> = Default::default();
        for ev in &events {
            match ev.event.event_type.as_str() {
                PROPOSAL_CREATED => {
                    let p = ProposalEntry {
                        id: text(ev, "proposal_id")?,
                        kind: text(ev, "kind")?,
                        agent: text(ev, "agent")?,
                        module: text(ev, "module")?,
                        summary: text(ev, "summary")?,
                        risk_level: word(ev, "risk_level")?,
                        status: ProposalStatus::Pending,
                        created_at: ev.event.occurred_at.clone(),
                        created_offset: ev.offset,
                        decision: None,
                    };
                    if touched.contains_key(&p.id) || self.get(&p.id)?.is_some() {
                        continue;
                    }
                    batch.insert(&self.by_offset, ev.offset.to_be_bytes(), p.id.as_bytes());
                    touched.insert(p.id.clone(), p);
                }
                PROPOSAL_DECIDED => {
                    let id = text(ev, "proposal_id")?;
                    let Some(mut p) = touched.remove(&id).map_or_else(|| self.get(&id), |p| Ok(Some(p)))?
                    else {
                        tracing::warn!(offset = ev.offset, proposal = %id, "decision for an unknown proposal");
                        continue;
                    };
                    if p.decision.is_some() {
                        touched.insert(id, p);
                        continue;
                    }
                    let decision: ProposalStatus = word(ev, "decision")?;
                    let reason = match ev.event.data.get("reason") {
                        Some(serde_json::Value::String(s)) => Some(s.clone()),
                        _ => None,
                    };
                    let d = Decision {
                        decision,
                        decided_by: text(ev, "decided_by")?,
                        decided_at: ev.event.occurred_at.clone(),
                        reason,
                        offset: ev.offset,
                    };
                    p.status = decision;
                    if decision == ProposalStatus::Approved {
                        let action = self.action_of(record, p.created_offset)?;
                        let item = OutboxItem {
                            cursor: ev.offset,
                            proposal_id: p.id.clone(),
                            kind: p.kind.clone(),
                            module: p.module.clone(),
                            summary: p.summary.clone(),
                            action,
                            decided_by: d.decided_by.clone(),
                            decided_at: d.decided_at.clone(),
                            reason: d.reason.clone(),
                        };
                        batch.insert(
                            &self.outbox,
                            pair(&p.module, ev.offset),
                            serde_json::to_vec(&item).expect("outbox items encode"),
                        );
                    }
                    p.decision = Some(d);
                    touched.insert(id, p);
                }
                _ => {}
            }
            if let Some(c) = &ev.event.causation {
                if touched.contains_key(c) || self.proposals.contains_key(c.as_bytes())? {
                    batch.insert(&self.caused, pair(c, ev.offset), ev.event.event_type.as_bytes());
                }
            }
        }
        for (id, p) in &touched {
            batch.insert(&self.proposals, id.as_bytes(), serde_json::to_vec(p).expect("proposals encode"));
        }
        batch.insert(&self.meta, b"through", (last + 1).to_be_bytes());
        batch.commit()?;
        self.db.persist(PersistMode::SyncAll)?;
        Ok(events.len())
    }

    fn action_of(
        &self,
        record: RecordView<'_>,
        created_offset: u64,
    ) -> Result<serde_json::Value, StoreError> {
        let ev = record.get(created_offset)?.ok_or_else(|| StoreError::Event {
            offset: created_offset,
            message: "the proposal's creating event is missing".into(),
        })?;
        let doc: serde_json::Value = serde_json::from_str(&text(&ev, "document")?)
            .map_err(|e| StoreError::Event { offset: created_offset, message: format!("document: {e}") })?;
        Ok(doc.get("action").cloned().unwrap_or(serde_json::Value::Null))
    }

    /// The proposal `id`, if recorded.
    ///
    /// # Errors
    /// Store errors.
    pub fn get(&self, id: &str) -> Result<Option<ProposalEntry>, StoreError> {
        match self.proposals.get(id.as_bytes())? {
            None => Ok(None),
            Some(v) => serde_json::from_slice(&v).map(Some).map_err(StoreError::from),
        }
    }

    /// Proposals newest first, optionally only those with `status`.
    ///
    /// # Errors
    /// Store errors.
    pub fn list(&self, status: Option<&str>, limit: usize) -> Result<Vec<ProposalEntry>, StoreError> {
        let mut out = Vec::new();
        for kv in self.by_offset.iter().rev() {
            if out.len() >= limit {
                break;
            }
            let (_, id) = kv.into_inner()?;
            let id = String::from_utf8_lossy(&id).to_string();
            if let Some(p) = self.get(&id)? {
                if status.is_none_or(|s| s == p.status.as_str()) {
                    out.push(p);
                }
            }
        }
        Ok(out)
    }

    /// Proposals of `kind` created at or after `since` (RFC 3339 UTC), newest first, at most
    /// `limit`; `true` when more were left. Stops at the first proposal created before `since`.
    ///
    /// # Errors
    /// Store errors.
    pub fn of_kind_since(
        &self,
        kind: &str,
        since: &str,
        limit: usize,
    ) -> Result<(Vec<ProposalEntry>, bool), StoreError> {
        let mut out = Vec::new();
        for kv in self.by_offset.iter().rev() {
            let (_, id) = kv.into_inner()?;
            let Some(p) = self.get(&String::from_utf8_lossy(&id))? else { continue };
            if p.created_at.as_str() < since {
                break;
            }
            if p.kind == kind {
                if out.len() == limit {
                    return Ok((out, true));
                }
                out.push(p);
            }
        }
        Ok((out, false))
    }

    /// How many proposals there are per status.
    ///
    /// # Errors
    /// Store errors.
    pub fn counts(&self) -> Result<std::collections::BTreeMap<String, u64>, StoreError> {
        let mut out = std::collections::BTreeMap::new();
        for kv in self.proposals.iter() {
            let (_, v) = kv.into_inner()?;
            let p: ProposalEntry = serde_json::from_slice(&v)?;
            *out.entry(p.status.as_str().to_string()).or_insert(0) += 1;
        }
        Ok(out)
    }

    /// Up to `limit` items of `module`'s outbox after cursor `after`, oldest first.
    ///
    /// # Errors
    /// Store errors.
    pub fn outbox(&self, module: &str, after: u64, limit: usize) -> Result<Vec<OutboxItem>, StoreError> {
        let mut out = Vec::new();
        let from = pair(module, after.saturating_add(1));
        let to = pair(module, u64::MAX);
        for kv in self.outbox.range(from..=to).take(limit) {
            let (_, v) = kv.into_inner()?;
            out.push(serde_json::from_slice(&v)?);
        }
        Ok(out)
    }

    /// Offsets of the events that name proposal `id` as their causation, in order.
    ///
    /// # Errors
    /// Store errors.
    pub fn caused(&self, id: &str) -> Result<Vec<u64>, StoreError> {
        let mut out = Vec::new();
        for kv in self.caused.range(pair(id, 0)..=pair(id, u64::MAX)) {
            let k = kv.key()?;
            out.push(tail_u64(&k));
        }
        Ok(out)
    }

    /// The last cursor `module`'s webhook accepted (0 for none).
    ///
    /// # Errors
    /// Store errors.
    pub fn delivered(&self, module: &str) -> Result<u64, StoreError> {
        Ok(self.delivered.get(module.as_bytes())?.map_or(0, |v| tail_u64(&v)))
    }

    /// Records that `module`'s webhook accepted everything up to `cursor`, durably.
    ///
    /// # Errors
    /// Store errors.
    pub fn set_delivered(&self, module: &str, cursor: u64) -> Result<(), StoreError> {
        self.delivered.insert(module.as_bytes(), cursor.to_be_bytes())?;
        self.db.persist(PersistMode::SyncAll).map_err(StoreError::from)
    }
}
