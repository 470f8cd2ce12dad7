//! The seed's test run over history: for a declared decision kind, from the recorded proposals
//! and decisions, how often decisions are made and how long a person takes, and for each input
//! how often its value changed between the agent's read and the decision, how often it was
//! staler than the decision needs, and how often the inputs were not read at one instant.
//!
//! The values the agent used are read back from the tags pinning its snapshots; the value at the
//! decision is that row carried forward through the record's events between the snapshot's
//! offset and the decision's, with the table's merge engine, so the report is reproducible from
//! the record and the tags alone.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, Query, State};
use axum::Json;
use livestate_engine::At;
use livestate_spec::{CompanySpec, DecisionKind, Event, Merger, Value as SpecValue};

use crate::auth::Permission;
use crate::error::ApiError;
use crate::reads::{key_text, query_param};
use crate::sheet::{citing, instant_off_worker, lag_at_proposal, need_ms, row_at, ReadCache};
use crate::store::ProposalEntry;
use crate::{Caller, Shared};

/// Most proposals one report examines (the newest in the window).
pub const MAX_PROPOSALS: usize = 10_000;

/// Most record events scanned for one proposal between the agent's read and the decision;
/// beyond, whether its inputs changed is reported as unknown.
pub const MAX_SCAN: u64 = 100_000;

/// Most record events one report reads over all its proposals (proposals whose ranges overlap
/// read the same events again): past it, the remaining proposals' inputs are unknown, so one
/// request of 10,000 proposals cannot decode a billion events.
pub const MAX_REPORT_SCAN: u64 = 1_000_000;

pub use livestate_api::sheet::{Day, History, InputHistory, Spread};

/// The row one input group (a table and key read at one snapshot) is tracked through.
struct Group {
    table: String,
    key: Vec<(String, SpecValue)>,
    /// The snapshot's offset: every event below it is in `row`.
    from: u64,
    row: Option<Vec<SpecValue>>,
}

/// What one proposal contributes.
struct Examined {
    /// Per input: its group and its lag when proposed; `None` for an input the proposal does
    /// not cite (recorded before the kind declared it).
    inputs: Vec<Option<(usize, Option<u64>)>>,
    groups: Vec<Group>,
    /// Offset of the decision event, when decided.
    decided_at: Option<u64>,
    one_instant: bool,
}

#[utoipa::path(get, path = "/v1/decision-kinds/{kind}/history", security(("token" = [])),
    params(("kind" = String, Path), ("since" = Option<String>, Query, description = "How far back, e.g. 30d (default), 12h")),
    responses((status = 200, description = "How often the kind's decisions are made and how long they take; per input how often it changed before the decision and was staler than needed; how often the inputs were not read at one instant", body = History),
        (status = 404, description = "The spec declares no such decision kind")))]
pub(crate) async fn history(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    UrlPath(kind): UrlPath<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<History>, ApiError> {
    caller.require(Permission::Read)?;
    let since = query_param(&params, "since").unwrap_or("30d");
    history_of(&s, &kind, since).await.map(Json)
}

/// The history report of `kind` over the last `since` (for the API, the web page and the CLI).
///
/// # Errors
/// 404 for an undeclared kind, 400 for a `since` that is not a duration; read errors.
pub(crate) async fn history_of(s: &Arc<Shared>, kind: &str, since: &str) -> Result<History, ApiError> {
    let spec = s.spec();
    let Some(k) = spec.decisions.get(kind) else {
        return Err(ApiError::not_found(format!(
            "no decision kind `{kind}` (declared: {})",
            spec.decisions.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    };
    let window = livestate_spec::freshness::parse_duration(since)
        .map_err(|e| ApiError::bad_request(format!("since: {e}")))?;
    let until = chrono::Utc::now();
    let from = chrono::Duration::from_std(window)
        .ok()
        .and_then(|d| until.checked_sub_signed(d))
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
    let text = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let cutoff = text(from);
    let (mut entries, truncated) = s.store().of_kind_since(kind, &cutoff, MAX_PROPOSALS)?;
    entries.reverse();
    let mut cache = ReadCache::new();
    let mut examined = Vec::new();
    for p in &entries {
        examined.push(examine(s, k, p, &mut cache).await?);
    }
    // Carry each group's row forward to the decision, off the async workers.
    let shared = Arc::clone(s);
    let kind_name = kind.to_string();
    let examined = tokio::task::spawn_blocking(move || {
        let k = &shared.spec().decisions[&kind_name];
        carry_forward(&shared, k, examined)
    })
    .await
    .map_err(ApiError::internal)??;
    Ok(report(s.spec(), k, &entries, &examined, &cutoff, &text(until), truncated))
}

/// The inputs of one proposal as the agent read them.
async fn examine(
    s: &Arc<Shared>,
    k: &DecisionKind,
    p: &ProposalEntry,
    cache: &mut ReadCache,
) -> Result<Examined, ApiError> {
    let doc = s.proposal_document(p)?;
    let (sources, action) = (doc.sources, doc.action);
    let mut groups: Vec<Group> = Vec::new();
    let mut instants: std::collections::HashMap<(String, Option<u64>, Option<u64>), Option<u64>> =
        std::collections::HashMap::new();
    let mut inputs = Vec::new();
    let mut offsets = Vec::new();
    for input in k.inputs.values() {
        // A proposal recorded before the kind declared this input may not cite it.
        let cited = k
            .input_key(input, &action)
            .ok()
            .and_then(|key| citing(s.spec(), &sources, input, &key).map(|i| (key, &sources[i])));
        let Some((key, src)) = cited else {
            offsets.push(None);
            inputs.push(None);
            continue;
        };
        let tag = src.tag.clone().unwrap_or_default();
        let filters: Vec<(String, String)> =
            key.iter().map(|(c, v)| (c.clone(), key_text(&v.to_json()))).collect();
        let (row, receipt) =
            row_at(s, cache, &input.table, &filters, At::Tag(tag.clone()), format!("tag:{tag}")).await?;
        let offset = match instants.get(&(input.table.clone(), receipt.offset, src.offset)) {
            Some(o) => *o,
            None => {
                let o =
                    instant_off_worker(s, &input.table, receipt.offset, src.offset, p.created_offset).await?;
                instants.insert((input.table.clone(), receipt.offset, src.offset), o);
                o
            }
        };
        offsets.push(offset);
        let lag = lag_at_proposal(s, offset, p.created_offset)?;
        let from = receipt.offset.unwrap_or(u64::MAX);
        let g = match groups.iter().position(|g| g.table == input.table && g.key == key && g.from == from) {
            Some(g) => g,
            None => {
                let ts = s.spec().table(&input.table).expect("checked at load");
                let typed = row.map(|r| {
                    ts.columns
                        .iter()
                        .map(|(c, ty)| {
                            r.get(c)
                                .and_then(|v| SpecValue::from_json(v, *ty).ok())
                                .unwrap_or(SpecValue::Null)
                        })
                        .collect()
                });
                groups.push(Group { table: input.table.clone(), key, from, row: typed });
                groups.len() - 1
            }
        };
        inputs.push(Some((g, lag)));
    }
    offsets.sort();
    offsets.dedup();
    let one_instant = offsets.len() == 1 && offsets[0].is_some();
    Ok(Examined { inputs, groups, decided_at: p.decision.as_ref().map(|d| d.offset), one_instant })
}

/// Per group, its row at the decision: `None` when unknown (undecided, or too many events),
/// `Some(None)` when there was no row.
type AtDecision = Vec<Option<Option<Vec<SpecValue>>>>;

/// Applies every event between each group's snapshot and the decision to its row; a group
/// whose range is longer than [`MAX_SCAN`] (or unknown) is left as `None` (unknown).
fn carry_forward(
    s: &Shared,
    k: &DecisionKind,
    examined: Vec<Examined>,
) -> Result<Vec<(Examined, AtDecision)>, ApiError> {
    let spec: &CompanySpec = s.spec();
    let mut mergers: BTreeMap<String, Merger> = BTreeMap::new();
    for i in k.inputs.values() {
        if !mergers.contains_key(&i.table) {
            let m = Merger::new(spec.table(&i.table).expect("checked")).map_err(ApiError::internal)?;
            mergers.insert(i.table.clone(), m);
        }
    }
    let fetch = |table: &str, key: &[SpecValue]| s.ls().current_row(table, key).ok().flatten();
    let mut out = Vec::new();
    let mut budget = MAX_REPORT_SCAN;
    for ex in examined {
        let Some(decided) = ex.decided_at else {
            let n = ex.groups.len();
            out.push((ex, vec![None; n]));
            continue;
        };
        let mut rows: AtDecision = ex
            .groups
            .iter()
            .map(|g| {
                (g.from != u64::MAX && decided.saturating_sub(g.from) <= MAX_SCAN.min(budget))
                    .then(|| g.row.clone())
            })
            .collect();
        let start = ex.groups.iter().zip(&rows).filter(|(_, r)| r.is_some()).map(|(g, _)| g.from).min();
        if let Some(mut at) = start {
            budget -= decided.saturating_sub(at);
            while at < decided {
                let batch = s.record().read(at, (decided - at).min(2048) as usize)?;
                if batch.is_empty() {
                    break;
                }
                let next = batch.last().map_or(decided, |e| e.offset + 1);
                for ev in batch {
                    if ev.offset >= decided {
                        break;
                    }
                    let offset = ev.offset;
                    let Ok(event) = Event::decode(ev.event, spec) else { continue };
                    let Ok(ops) = event.row_ops_with(spec, offset, &fetch) else { continue };
                    for op in ops {
                        let ts = spec.table(&op.table).expect("a mapped table");
                        for (g, row) in ex.groups.iter().zip(rows.iter_mut()) {
                            let Some(row) = row else { continue };
                            if g.table != op.table || offset < g.from {
                                continue;
                            }
                            let same_key = g.key.iter().all(|(c, v)| {
                                ts.columns.get_index_of(c).and_then(|i| op.row.get(i)) == Some(v)
                            });
                            if same_key {
                                *row = mergers[&g.table].apply(row.take(), op.action, &op.row);
                            }
                        }
                    }
                }
                at = next;
            }
        }
        out.push((ex, rows));
    }
    Ok(out)
}

fn report(
    spec: &CompanySpec,
    k: &DecisionKind,
    entries: &[ProposalEntry],
    examined: &[(Examined, AtDecision)],
    since: &str,
    until: &str,
    truncated: bool,
) -> History {
    let mut days: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut waits = Vec::new();
    let (mut approved, mut rejected, mut pending) = (0, 0, 0);
    for p in entries {
        days.entry(p.created_at.chars().take(10).collect()).or_default().0 += 1;
        match &p.decision {
            Some(d) => {
                days.entry(d.decided_at.chars().take(10).collect()).or_default().1 += 1;
                if d.decision == livestate_api::proposal::ProposalStatus::Approved {
                    approved += 1;
                } else {
                    rejected += 1;
                }
                let at = |t: &str| livestate_spec::types::parse_timestamp(t).ok();
                if let (Some(a), Some(b)) = (at(&p.created_at), at(&d.decided_at)) {
                    waits.push((b - a).num_milliseconds());
                }
            }
            None => pending += 1,
        }
    }
    waits.sort_unstable();
    let pick = |q: f64| waits[((waits.len() - 1) as f64 * q).round() as usize];
    let time_to_decide = (!waits.is_empty()).then(|| Spread {
        count: waits.len() as u64,
        median_ms: pick(0.5),
        p90_ms: pick(0.9),
        max_ms: *waits.last().expect("not empty"),
    });
    let mut inputs: Vec<InputHistory> = k
        .inputs
        .values()
        .map(|i| InputHistory {
            name: i.name.clone(),
            table: i.table.clone(),
            column: i.column.clone(),
            need: i.need.to_string(),
            decided_checked: 0,
            changed_before_decision: 0,
            unknown: 0,
            lag_known: 0,
            staler_than_needed: 0,
        })
        .collect();
    let mut not_one_instant = 0;
    for ((ex, at_decision), p) in examined.iter().zip(entries) {
        if !ex.one_instant {
            not_one_instant += 1;
        }
        for ((input, h), cited) in k.inputs.values().zip(inputs.iter_mut()).zip(&ex.inputs) {
            let Some((g, lag)) = cited else {
                if ex.decided_at.is_some() {
                    h.unknown += 1;
                }
                continue;
            };
            if let Some(lag) = lag {
                h.lag_known += 1;
                if *lag > need_ms(&input.need, &p.created_at) {
                    h.staler_than_needed += 1;
                }
            }
            if ex.decided_at.is_none() {
                continue;
            }
            let i = spec.table(&input.table).and_then(|t| t.columns.get_index_of(&input.column));
            let column = |row: &Option<Vec<SpecValue>>| -> SpecValue {
                row.as_ref().zip(i).and_then(|(r, i)| r.get(i)).cloned().unwrap_or(SpecValue::Null)
            };
            match &at_decision[*g] {
                None => h.unknown += 1,
                Some(now) => {
                    h.decided_checked += 1;
                    if column(&ex.groups[*g].row) != column(now) {
                        h.changed_before_decision += 1;
                    }
                }
            }
        }
    }
    History {
        kind: k.name.clone(),
        since: since.to_string(),
        until: until.to_string(),
        proposals: entries.len() as u64,
        approved,
        rejected,
        pending,
        per_day: days.into_iter().map(|(day, (proposed, decided))| Day { day, proposed, decided }).collect(),
        time_to_decide,
        inputs,
        not_one_instant,
        truncated,
    }
}
