//! Proposals, decisions, outboxes and audits: the only things an agent or a person writes.
//!
//! A proposal cites the snapshots it read; the server checks each exists and that every cited
//! row is what that snapshot holds, pins each with a tag named after the proposal, and records
//! a `decisions.proposal_created` event carrying the whole proposal. A decision records
//! `decisions.proposal_decided`; an approval lands in the module's outbox. Both are checked and
//! recorded one at a time, and each answer waits until the proposal store has applied the
//! event, so a second decision always sees the first.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use livestate_engine::At;
use livestate_spec::{CompanySpec, Event, EventEnvelope, ValueType};
use serde_json::{Map, Value};

use crate::auth::{Permission, DECISIONS_MODULE};
use crate::error::{parse_body, ApiError};
use crate::reads::{key_text, query_param, read_rows, wire_receipt};
use crate::store::{ProposalEntry, PROPOSAL_CREATED, PROPOSAL_DECIDED};
use crate::{Caller, Shared};
use livestate_api::ErrorCode;

/// The fields the two decisions events must declare (all strings; `reason` may be optional).
const CREATED_FIELDS: [&str; 7] =
    ["proposal_id", "kind", "agent", "module", "summary", "risk_level", "document"];
const DECIDED_FIELDS: [&str; 9] =
    ["proposal_id", "kind", "agent", "module", "summary", "risk_level", "decision", "decided_by", "reason"];

/// Checks that `spec` declares the decisions events proposals need.
///
/// # Errors
/// A message naming the missing event type or field.
pub(crate) fn check_spec(spec: &CompanySpec) -> Result<(), String> {
    for (ty, fields) in [(PROPOSAL_CREATED, &CREATED_FIELDS[..]), (PROPOSAL_DECIDED, &DECIDED_FIELDS[..])] {
        let Some(ev) = spec.events.get(ty) else {
            return Err(format!("the spec declares no `{ty}` event type (see examples/company/events.toml)"));
        };
        for f in fields {
            match ev.fields.get(*f) {
                Some(fs) if fs.ty == ValueType::String => {}
                _ => return Err(format!("event type `{ty}` needs a string field `{f}`")),
            }
        }
    }
    Ok(())
}

pub use livestate_api::proposal::{
    Audit, CausedEvent, Decided, Evidence, NewDecision, NewProposal, Outbox, PinnedTag, ProposalDoc,
    ProposalDocument, ProposalList, ProposalStatus, Proposed, Risk, Rule, Source, StateAfter,
};

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_text(what: &str, s: &str, max: usize) -> Result<(), ApiError> {
    if s.trim().is_empty() {
        return Err(ApiError::bad_request(format!("`{what}` is empty")));
    }
    if s.chars().count() > max {
        return Err(ApiError::bad_request(format!("`{what}` is longer than {max} characters")));
    }
    Ok(())
}

fn check_proposal(spec: &CompanySpec, p: &NewProposal) -> Result<(), ApiError> {
    let bad = |m: String| ApiError::bad_request(m);
    if !valid_name(&p.kind) {
        return Err(bad(format!("kind `{}`: use 1-64 letters, digits or `_`", p.kind)));
    }
    if p.module == DECISIONS_MODULE || !spec.events.values().any(|e| e.module == p.module) {
        let mut modules: Vec<&str> =
            spec.events.values().map(|e| e.module.as_str()).filter(|m| *m != DECISIONS_MODULE).collect();
        modules.sort_unstable();
        modules.dedup();
        return Err(bad(format!(
            "module `{}` is not a module of this company (modules: {})",
            p.module,
            modules.join(", ")
        )));
    }
    check_text("summary", &p.summary, 300)?;
    check_text("rule.name", &p.rule.name, 100)?;
    check_text("rule.version", &p.rule.version, 40)?;
    check_text("rule.text", &p.rule.text, 4000)?;
    if p.risk.reasons.len() > 20 {
        return Err(bad("risk.reasons: at most 20".into()));
    }
    for (i, r) in p.risk.reasons.iter().enumerate() {
        check_text(&format!("risk.reasons[{i}]"), r, 500)?;
    }
    if p.sources.is_empty() || p.sources.len() > 50 {
        return Err(bad("`sources` must cite 1 to 50 snapshots the proposal is based on".into()));
    }
    let cited: usize = p.sources.iter().map(|s| s.rows.len() + s.keys.len()).sum();
    if cited > 500 {
        return Err(bad("sources cite more than 500 keys and rows".into()));
    }
    if let Some(k) = &p.idempotency_key {
        check_text("idempotency_key", k, 200)?;
    }
    Ok(())
}

/// The rows of `source.table` at `at` for the source's keys, or for the key columns of its
/// cited rows.
async fn rows_for(
    s: &Shared,
    source: &Source,
    at: At,
) -> Result<(Vec<Map<String, Value>>, livestate_engine::Receipt), ApiError> {
    let ts = s.spec().table(&source.table).expect("checked");
    let mut lookups: Vec<Vec<(String, String)>> =
        source.keys.iter().map(|k| k.iter().map(|(c, v)| (c.clone(), key_text(v))).collect()).collect();
    for (j, row) in source.rows.iter().enumerate() {
        let mut key = Vec::new();
        for k in &ts.primary_key {
            let v = row.get(k).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "sources: a cited row of `{}` (rows[{j}]) lacks key column `{k}`",
                    ts.name
                ))
            })?;
            key.push((k.clone(), key_text(v)));
        }
        lookups.push(key);
    }
    lookups.dedup();
    let mut out = Vec::new();
    let mut receipt = None;
    for key in lookups {
        let rows = read_rows(s, &source.table, key, None, None, at.clone()).await?;
        for r in rows.json_objects() {
            if !out.contains(&r) {
                out.push(r);
            }
        }
        receipt = Some(rows.receipt);
    }
    let receipt = match receipt {
        Some(r) => r,
        None => read_rows(s, &source.table, Vec::new(), None, Some(0), at).await?.receipt,
    };
    Ok((out, receipt))
}

/// Each cited row that no row in `found` matches on every cited column.
fn unmatched(cited: &[Map<String, Value>], found: &[Map<String, Value>]) -> Vec<usize> {
    cited
        .iter()
        .enumerate()
        .filter(|(_, c)| !found.iter().any(|f| c.iter().all(|(k, v)| f.get(k) == Some(v))))
        .map(|(i, _)| i)
        .collect()
}

fn proposal_id(agent: &str, key: Option<&str>) -> String {
    match key {
        Some(k) => {
            let h = crate::auth::hash_token(&format!("{agent}\u{0}{k}"));
            format!("p{}", &h[..15])
        }
        None => {
            let mut bytes = [0u8; 8];
            getrandom::fill(&mut bytes).expect("the operating system provides randomness");
            format!("p{}", &crate::auth::hex(&bytes)[..15])
        }
    }
}

fn now_text() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Appends one server event (checked against the spec like any other) and waits until the
/// proposal store has applied it. Returns its offset.
async fn record(s: &Arc<Shared>, id: String, ty: &str, data: Map<String, Value>) -> Result<u64, ApiError> {
    let env = EventEnvelope { id, event_type: ty.into(), occurred_at: now_text(), data, causation: None };
    let shared = Arc::clone(s);
    let appended =
        tokio::task::spawn_blocking(move || shared.ls().emit_envelope(env).map_err(ApiError::from))
            .await
            .map_err(ApiError::internal)??;
    s.appended();
    let offset = appended.offset;
    s.followed(offset).await?;
    Ok(offset)
}

fn enabled(s: &Shared) -> Result<(), ApiError> {
    match s.decisions_unsupported() {
        None => Ok(()),
        Some(why) => Err(ApiError::new(ErrorCode::NotImplemented, format!("proposals are disabled: {why}"))),
    }
}

#[utoipa::path(post, path = "/v1/proposals", security(("token" = [])), request_body = NewProposal,
    responses((status = 201, description = "Recorded: id, offset and the tags pinning each cited snapshot", body = Proposed),
        (status = 200, description = "The same request was sent before with this idempotency key: that proposal", body = Proposed),
        (status = 409, description = "The idempotency key was used before for a different request"),
        (status = 400, description = "Malformed, or a cited snapshot or row that does not exist"),
        (status = 403, description = "Only agents propose")))]
pub(crate) async fn create(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    caller.require(Permission::Propose)?;
    enabled(&s)?;
    let agent = caller.0.agent_name().expect("only agents propose").to_string();
    let mut p: NewProposal = parse_body(&body)?;
    // A retry of a proposal already recorded (its answer lost, say, to a crash) gets that proposal,
    // even if a snapshot it cited has expired since.
    if let Some(existing) = s.store().get(&proposal_id(&agent, p.idempotency_key.as_deref()))? {
        return retried(&s, &p, &existing);
    }
    check_proposal(s.spec(), &p)?;
    crate::sheet::check_inputs(s.spec(), &p)?;
    for (i, src) in p.sources.iter().enumerate() {
        if src.tag.is_some() {
            return Err(ApiError::bad_request(format!(
                "sources[{i}].tag: the server names the tag that pins a source; leave it out"
            )));
        }
        if s.spec().table(&src.table).is_none() {
            return Err(ApiError::bad_request(format!(
                "sources[{i}].table: no table `{}` (tables: {})",
                src.table,
                s.spec().tables.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
    }
    // Every cited snapshot exists and holds the cited rows.
    for (i, src) in p.sources.iter().enumerate() {
        let (found, _) = rows_for(&s, src, At::Snapshot(src.snapshot_id))
            .await
            .map_err(|e| ApiError::new(e.code, format!("sources[{i}]: {}", e.message)))?;
        if let Some(&j) = unmatched(&src.rows, &found).first() {
            let ts = s.spec().table(&src.table).expect("checked");
            let cited = &src.rows[j];
            let same_key = found.iter().find(|f| ts.primary_key.iter().all(|k| f.get(k) == cited.get(k)));
            let holds = match same_key {
                Some(row) => format!("it holds {} for that key", Value::Object(row.clone())),
                None => "it holds no row with that key".to_string(),
            };
            return Err(ApiError::bad_request(format!(
                "sources[{i}].rows[{j}] {} is not what `{}` holds at snapshot {}: {holds}",
                Value::Object(cited.clone()),
                src.table,
                src.snapshot_id
            )));
        }
    }
    let id = proposal_id(&agent, p.idempotency_key.as_deref());
    let _one_at_a_time = s.deciding().await;
    if let Some(existing) = s.store().get(&id)? {
        return retried(&s, &p, &existing);
    }
    // Pin each cited snapshot (once per table and snapshot).
    let mut pinned: Vec<(String, String)> = Vec::new();
    let mut tags = Vec::new();
    for i in 0..p.sources.len() {
        let (table, snapshot) = (p.sources[i].table.clone(), p.sources[i].snapshot_id);
        let tag = format!("proposal-{id}-s{snapshot}");
        if !pinned.iter().any(|(t, g)| t == &table && g == &tag) {
            let m = s.maintainers().get(&table).expect("every state table has a maintainer");
            if let Err(e) = m.pin(&tag, snapshot, Some(&s.config().tag_retention)).await {
                for (t, g) in &pinned {
                    let _ = s.maintainers()[t].delete_tag(g).await;
                }
                return Err(ApiError::bad_request(format!("sources[{i}]: {e}")));
            }
            pinned.push((table.clone(), tag.clone()));
            tags.push(PinnedTag { table: table.clone(), snapshot_id: snapshot, tag: tag.clone() });
        }
        p.sources[i].tag = Some(tag);
    }
    let document = ProposalDocument::recorded(p, &id, &agent, &now_text());
    let text = serde_json::to_string(&document).map_err(ApiError::internal)?;
    // The event carries the document's headline fields beside the document itself.
    let ProposalDocument { kind, module, summary, risk, .. } = document;
    let mut data = Map::new();
    for (k, v) in [
        ("proposal_id", id.clone()),
        ("kind", kind),
        ("agent", agent),
        ("module", module),
        ("summary", summary),
        ("risk_level", risk.level.as_str().to_string()),
        ("document", text),
    ] {
        data.insert(k.into(), Value::String(v));
    }
    let offset = match record(&s, format!("decisions/created/{id}"), PROPOSAL_CREATED, data).await {
        Ok(o) => o,
        Err(e) => {
            for (t, g) in &pinned {
                let _ = s.maintainers()[t].delete_tag(g).await;
            }
            return Err(e);
        }
    };
    let answer = Proposed { id, status: ProposalStatus::Pending, offset, tags: Some(tags), duplicate: false };
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

/// The answer to a proposal sent with an idempotency key already used: the proposal it made
/// when the request is the same one again, a 409 naming the key when it is not (a key names
/// one request, not a slot to fill with another).
fn retried(s: &Shared, p: &NewProposal, existing: &ProposalEntry) -> Result<Response, ApiError> {
    if s.proposal_document(existing)?.records(p) {
        return Ok(duplicate(&existing.id, existing));
    }
    Err(ApiError::conflict(format!(
        "idempotency_key `{}` was used for proposal {} with a different request; use a new key for a new proposal",
        p.idempotency_key.as_deref().unwrap_or_default(),
        existing.id
    )))
}

/// The answer to a proposal sent again with the same idempotency key.
fn duplicate(id: &str, existing: &ProposalEntry) -> Response {
    let answer = Proposed {
        id: id.to_string(),
        status: existing.status,
        offset: existing.created_offset,
        tags: None,
        duplicate: true,
    };
    (StatusCode::OK, Json(answer)).into_response()
}

#[utoipa::path(get, path = "/v1/proposals", security(("token" = [])),
    params(("status" = Option<String>, Query, description = "pending, approved or rejected"), ("limit" = Option<usize>, Query)),
    responses((status = 200, description = "Proposals, newest first", body = ProposalList)))]
pub(crate) async fn list(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<ProposalList>, ApiError> {
    caller.require(Permission::Read)?;
    let param = |name: &str| query_param(&params, name);
    let status = param("status");
    if let Some(st) = status {
        ProposalStatus::parse(st).map_err(ApiError::bad_request)?;
    }
    let limit = match param("limit") {
        None => 100,
        Some(l) => {
            l.parse().map_err(|_| ApiError::bad_request(format!("limit `{l}` is not a whole number")))?
        }
    };
    Ok(Json(ProposalList { proposals: s.store().list(status, limit)? }))
}

#[utoipa::path(get, path = "/v1/proposals/{id}", security(("token" = [])), params(("id" = String, Path)),
    responses((status = 200, description = "Status, decision and the whole proposal document", body = ProposalDoc), (status = 404, description = "Unknown proposal")))]
pub(crate) async fn get(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<ProposalDoc>, ApiError> {
    caller.require(Permission::Read)?;
    let proposal = s.proposal(&id)?;
    let document = s.proposal_document(&proposal)?;
    Ok(Json(ProposalDoc { proposal, document }))
}

#[utoipa::path(post, path = "/v1/proposals/{id}/decision", security(("token" = [])), params(("id" = String, Path)),
    request_body = NewDecision,
    responses((status = 200, description = "Recorded", body = Decided), (status = 403, description = "Not a person deciding for this module"),
        (status = 404, description = "Unknown proposal"), (status = 409, description = "Already decided")))]
pub(crate) async fn decide(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    UrlPath(id): UrlPath<String>,
    body: axum::body::Bytes,
) -> Result<Json<Decided>, ApiError> {
    let d: NewDecision = parse_body(&body)?;
    decide_as(&s, &caller, &id, &d).await.map(Json)
}

/// Records `caller`'s decision on proposal `id` (for the API and the web inbox).
///
/// # Errors
/// 403 without `decide:<module>`, 404 unknown, 409 already decided, 400 bad input.
pub(crate) async fn decide_as(
    s: &Arc<Shared>,
    caller: &Caller,
    id: &str,
    d: &NewDecision,
) -> Result<Decided, ApiError> {
    caller.require(Permission::Read)?;
    enabled(s)?;
    let decision = d.decision.status();
    check_text("reason", &d.reason, 2000)?;
    let _one_at_a_time = s.deciding().await;
    let p = s.proposal(id)?;
    caller.require(Permission::Decide(p.module.clone()))?;
    if let Some(prev) = &p.decision {
        return Err(ApiError::conflict(format!(
            "proposal `{id}` was already {} by {} at {}",
            prev.decision, prev.decided_by, prev.decided_at
        )));
    }
    let mut data = Map::new();
    for (k, v) in [
        ("proposal_id", p.id.clone()),
        ("kind", p.kind.clone()),
        ("agent", p.agent.clone()),
        ("module", p.module.clone()),
        ("summary", p.summary.clone()),
        ("risk_level", p.risk_level.as_str().to_string()),
        ("decision", decision.as_str().to_string()),
        ("decided_by", caller.0.name.clone()),
        ("reason", d.reason.clone()),
    ] {
        data.insert(k.into(), Value::String(v));
    }
    let offset = record(s, format!("decisions/decided/{id}"), PROPOSAL_DECIDED, data).await?;
    Ok(Decided { id: id.to_string(), status: decision, decided_by: caller.0.name.clone(), offset })
}

#[utoipa::path(get, path = "/v1/outbox/{module}", security(("token" = [])),
    params(("module" = String, Path), ("after" = Option<u64>, Query, description = "The last cursor handled (0 for the start)"), ("limit" = Option<usize>, Query)),
    responses((status = 200, description = "Approved proposals for the module after the cursor, oldest first", body = Outbox), (status = 403, description = "Not this module (or an administrator)")))]
pub(crate) async fn outbox(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    UrlPath(module): UrlPath<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<Outbox>, ApiError> {
    caller.require(Permission::Outbox(module.clone()))?;
    let param = |name: &str| query_param(&params, name);
    let number = |name: &str, default: u64| -> Result<u64, ApiError> {
        param(name).map_or(Ok(default), |v| {
            v.parse().map_err(|_| ApiError::bad_request(format!("{name} `{v}` is not a whole number")))
        })
    };
    let items = s.store().outbox(&module, number("after", 0)?, number("limit", 100)? as usize)?;
    let next = items.last().map_or(number("after", 0)?, |i| i.cursor);
    Ok(Json(Outbox { module, items, next_after: next }))
}

#[utoipa::path(get, path = "/v1/proposals/{id}/audit", security(("token" = [])), params(("id" = String, Path)),
    responses((status = 200, description = "The proposal, its evidence read back from the pinned tags, the decision, the events it caused and the state after them", body = Audit),
        (status = 404, description = "Unknown proposal")))]
pub(crate) async fn audit(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Audit>, ApiError> {
    caller.require(Permission::Read)?;
    audit_of(&s, &id).await.map(Json)
}

/// The audit of proposal `id` (for the API, the web pages and `livestate audit`).
///
/// # Errors
/// 404 unknown proposal; read errors.
pub(crate) async fn audit_of(s: &Arc<Shared>, id: &str) -> Result<Audit, ApiError> {
    let (s, id) = (Arc::clone(s), id.to_string());
    let p = s.proposal(&id)?;
    let doc = s.proposal_document(&p)?;
    let mut evidence = Vec::new();
    let mut followed_keys: BTreeSet<(String, String)> = BTreeSet::new();
    for src in &doc.sources {
        let tag = src.tag.clone().unwrap_or_default();
        let (rows, receipt) = rows_for(&s, src, At::Tag(tag.clone())).await?;
        let missing = unmatched(&src.rows, &rows);
        let ts = s.spec().table(&src.table).expect("a cited table exists");
        for r in &rows {
            let key: Map<String, Value> = ts
                .primary_key
                .iter()
                .map(|k| (k.clone(), r.get(k).cloned().unwrap_or(Value::Null)))
                .collect();
            followed_keys.insert((src.table.clone(), Value::Object(key).to_string()));
        }
        evidence.push(Evidence {
            table: src.table.clone(),
            tag,
            snapshot_id: src.snapshot_id,
            cited_offset: src.offset,
            cited_lag_ms: src.lag_ms,
            cited_committed_at: src.committed_at.clone(),
            keys: src.keys.clone(),
            cited_rows: src.rows.clone(),
            rows_at_tag: rows,
            receipt_at_tag: wire_receipt(&receipt),
            cited_rows_identical: missing.is_empty(),
        });
    }
    let mut caused_events = Vec::new();
    for offset in s.store().caused(&id)? {
        let Some(ev) = s.record().get(offset)? else { continue };
        for (table, key) in touched_keys(&s, &ev) {
            followed_keys.insert((table, key));
        }
        let e = ev.event;
        caused_events.push(CausedEvent {
            offset: ev.offset,
            id: e.id,
            event_type: e.event_type,
            occurred_at: e.occurred_at,
            causation: e.causation,
            data: e.data,
        });
    }
    let mut state_after = Vec::new();
    for (table, key) in followed_keys {
        let key: Map<String, Value> = serde_json::from_str(&key).map_err(ApiError::internal)?;
        let filters = key.iter().map(|(k, v)| (k.clone(), key_text(v))).collect();
        let rows = read_rows(&s, &table, filters, None, None, At::Latest).await?;
        state_after.push(StateAfter {
            table,
            key,
            rows: rows.json_objects(),
            receipt: wire_receipt(&rows.receipt),
        });
    }
    Ok(Audit {
        proposal: doc,
        status: p.status,
        created_offset: p.created_offset,
        evidence,
        decision: p.decision,
        caused_events,
        state_after,
    })
}

/// The (table, key) pairs an event's mappings write.
fn touched_keys(s: &Shared, ev: &livestate_record::RecordedEvent) -> Vec<(String, String)> {
    let Ok(event) = Event::decode(ev.event.clone(), s.spec()) else { return Vec::new() };
    let fetch = |table: &str, key: &[livestate_spec::Value]| s.ls().current_row(table, key).ok().flatten();
    let Ok(ops) = event.row_ops_with(s.spec(), ev.offset, &fetch) else { return Vec::new() };
    ops.into_iter()
        .filter_map(|op| {
            let ts = s.spec().table(&op.table)?;
            let key: Map<String, Value> = ts
                .primary_key
                .iter()
                .map(|k| (k.clone(), op.row[ts.columns.get_index_of(k).expect("key column")].to_json()))
                .collect();
            Some((op.table.clone(), Value::Object(key).to_string()))
        })
        .collect()
}
