//! Decision input sheets: for a proposal of a declared decision kind, every number the decision
//! looks at, where it came from, how fresh it was against what the decision needs, what it is
//! now, the rule's arithmetic with the numbers in it, and whether the numbers were read at one
//! instant.
//!
//! A proposal of a declared kind must cite a receipt for every input ([`check_inputs`], before
//! anything is pinned or recorded). The sheet reads each input's value back from the tag that
//! pins the cited snapshot, so it holds after the rows changed, after compaction and after
//! expiry.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::Json;
use livestate_engine::At;
use livestate_spec::{CompanySpec, DecisionInput, DecisionKind, Freshness, Value as SpecValue};
use serde_json::{Map, Value};

use crate::auth::Permission;
use crate::error::ApiError;
use crate::reads::{key_text, read_rows};
use crate::{Caller, Shared};
use livestate_api::proposal::{NewProposal, Source};

pub use livestate_api::sheet::{
    InputDoc, Instant, KindDoc, KindList, Sheet, SheetInput, SheetStep, StepDoc, Verdict,
};

/// The declared decision kind named `kind`, if any.
fn declared<'a>(spec: &'a CompanySpec, kind: &str) -> Option<&'a DecisionKind> {
    spec.decisions.get(kind)
}

/// Whether `row` (a cited row or key) has `key`'s values on the key columns.
fn has_key(ts: &livestate_spec::TableSpec, row: &Map<String, Value>, key: &[(String, SpecValue)]) -> bool {
    key.iter().all(|(col, want)| {
        row.get(col).and_then(|v| SpecValue::from_json(v, ts.columns[col.as_str()]).ok()).as_ref()
            == Some(want)
    })
}

/// The source citing `input` for `key`: a cited row with that key holding the input's column,
/// or a `keys` entry naming exactly that key.
pub(crate) fn citing(
    spec: &CompanySpec,
    sources: &[Source],
    input: &DecisionInput,
    key: &[(String, SpecValue)],
) -> Option<usize> {
    let ts = spec.table(&input.table)?;
    sources.iter().position(|s| {
        s.table == input.table
            && (s.rows.iter().any(|r| r.contains_key(&input.column) && has_key(ts, r, key))
                || s.keys.iter().any(|k| k.len() == key.len() && has_key(ts, k, key)))
    })
}

/// For a proposal of a declared kind: the module is the kind's, the action holds the declared
/// fields, and a source cites a receipt for every input.
///
/// # Errors
/// 400 naming the module, the action field or the first input not cited.
pub(crate) fn check_inputs(spec: &CompanySpec, p: &NewProposal) -> Result<(), ApiError> {
    let Some(kind) = declared(spec, &p.kind) else { return Ok(()) };
    if p.module != kind.module {
        return Err(ApiError::bad_request(format!(
            "module `{}`: proposals of kind `{}` are carried out by `{}`",
            p.module, kind.name, kind.module
        )));
    }
    kind.check_action(&p.action).map_err(ApiError::bad_request)?;
    for input in kind.inputs.values() {
        let key = kind.input_key(input, &p.action).map_err(ApiError::bad_request)?;
        if citing(spec, &p.sources, input, &key).is_none() {
            return Err(ApiError::bad_request(format!(
                "input `{}` of kind `{}` ({}.{} at {}) is not cited: cite a row of `{}` with that key (holding `{}`) \
                 or the key itself, with the receipt it was read with",
                input.name,
                kind.name,
                input.table,
                input.column,
                key_words(&key),
                input.table,
                input.column
            )));
        }
    }
    Ok(())
}

fn key_words(key: &[(String, SpecValue)]) -> String {
    key.iter().map(|(c, v)| format!("{c}={v}")).collect::<Vec<_>>().join(", ")
}

/// Rows read for a sheet, by (table, key, version).
pub(crate) type ReadCache =
    HashMap<(String, String, String), (Option<Map<String, Value>>, livestate_engine::Receipt)>;

/// The row of `table` with the key `filters` at `at` (`None`: no row), with its receipt.
pub(crate) async fn row_at(
    s: &Shared,
    cache: &mut ReadCache,
    table: &str,
    filters: &[(String, String)],
    at: At,
    version: String,
) -> Result<(Option<Map<String, Value>>, livestate_engine::Receipt), ApiError> {
    let cache_key = (table.to_string(), format!("{filters:?}"), version);
    if let Some(hit) = cache.get(&cache_key) {
        return Ok(hit.clone());
    }
    let rows = read_rows(s, table, filters.to_vec(), None, Some(1), at).await?;
    let row = rows.json_rows().into_iter().next().and_then(|r| r.as_object().cloned());
    cache.insert(cache_key, (row.clone(), rows.receipt.clone()));
    Ok((row, rows.receipt))
}

/// How long the event at `offset` (the first one a snapshot does not reflect) had been recorded
/// when the proposal (recorded at `proposed`) was: 0 when there was none before the proposal.
pub(crate) fn lag_at_proposal(
    s: &Shared,
    offset: Option<u64>,
    proposed: u64,
) -> Result<Option<u64>, ApiError> {
    let Some(offset) = offset else { return Ok(None) };
    if offset >= proposed {
        return Ok(Some(0));
    }
    let record = s.record();
    let (Some(first), Some(proposal)) = (record.recorded_at_ms(offset)?, record.recorded_at_ms(proposed)?)
    else {
        return Ok(None);
    };
    Ok(Some(u64::try_from(proposal - first).unwrap_or(0)))
}

/// Most record events [`instant`] checks between a snapshot's commit and the offset cited.
pub const MAX_INSTANT_SCAN: u64 = 100_000;

/// The record offset an input read from `table`'s snapshot (committed through `committed`) is
/// known to reflect: the offset the agent's receipt gave (`cited`, e.g. a consistent read's, where
/// a table no event touched keeps an older snapshot) when the record shows no event of a type
/// mapped to `table` between the two (and the cited offset is before the proposal at `proposed`);
/// else the snapshot's own.
///
/// # Errors
/// Record errors.
pub(crate) fn instant(
    s: &Shared,
    table: &str,
    committed: Option<u64>,
    cited: Option<u64>,
    proposed: u64,
) -> Result<Option<u64>, ApiError> {
    let (Some(from), Some(to)) = (committed, cited) else { return Ok(committed) };
    if to <= from || to > proposed || to - from > MAX_INSTANT_SCAN {
        return Ok(Some(from));
    }
    let mut at = from;
    while at < to {
        let batch = s.record().read(at, (to - at).min(2048) as usize)?;
        let Some(last) = batch.last() else { break };
        for ev in batch.iter().filter(|e| e.offset < to) {
            if s.spec().mappings_for(&ev.event.event_type).any(|m| m.table == table) {
                return Ok(Some(from));
            }
        }
        at = last.offset + 1;
    }
    Ok(Some(to))
}

/// [`instant`] on a blocking thread (it may read up to [`MAX_INSTANT_SCAN`] record events).
///
/// # Errors
/// Record errors.
pub(crate) async fn instant_off_worker(
    s: &Arc<Shared>,
    table: &str,
    committed: Option<u64>,
    cited: Option<u64>,
    proposed: u64,
) -> Result<Option<u64>, ApiError> {
    let (s, table) = (Arc::clone(s), table.to_string());
    tokio::task::spawn_blocking(move || instant(&s, &table, committed, cited, proposed))
        .await
        .map_err(ApiError::internal)?
}

/// Milliseconds between the recording of the events at offsets `a` and `b` (`b` > `a`; 0 when
/// one is not recorded).
fn recorded_between(s: &Shared, a: u64, b: u64) -> Result<i64, ApiError> {
    let at = |o: u64| -> Result<Option<i64>, ApiError> { Ok(s.record().recorded_at_ms(o)?) };
    Ok(match (at(a)?, at(b.saturating_sub(1).max(a))?) {
        (Some(x), Some(y)) => y - x,
        _ => 0,
    })
}

pub(crate) fn need_ms(need: &Freshness, created_at: &str) -> u64 {
    let at = chrono::DateTime::parse_from_rfc3339(created_at)
        .map(|t| t.to_utc())
        .unwrap_or_else(|_| chrono::Utc::now());
    need.allowed_lag(at).as_millis() as u64
}

#[utoipa::path(get, path = "/v1/proposals/{id}/sheet", security(("token" = [])), params(("id" = String, Path)),
    responses((status = 200, description = "Every input of the decision: the value used, its receipt, its lag against the decision's need, the value now, the rule's arithmetic and the one-instant verdict", body = Sheet),
        (status = 404, description = "Unknown proposal, one whose kind the spec does not declare, or one recorded before its kind declared an input it does not cite")))]
pub(crate) async fn sheet(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Sheet>, ApiError> {
    caller.require(Permission::Read)?;
    sheet_of(&s, &id).await.map(Json)
}

/// The sheet of proposal `id` (for the API and the web proposal page).
///
/// # Errors
/// 404 for an unknown proposal or an undeclared kind; read errors.
pub(crate) async fn sheet_of(s: &Arc<Shared>, id: &str) -> Result<Sheet, ApiError> {
    let p = s.proposal(id)?;
    let Some(kind) = declared(s.spec(), &p.kind) else {
        return Err(ApiError::not_found(format!(
            "proposal `{id}` is of kind `{}`, which the spec does not declare: it has no sheet (declared: {})",
            p.kind,
            s.spec().decisions.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    };
    let doc = s.proposal_document(&p)?;
    let (sources, action, agent_summary, rule_text) = (doc.sources, doc.action, doc.summary, doc.rule.text);
    // One read per (table, key, version): five inputs from one stock row read it once.
    let mut read_cache = ReadCache::new();
    let mut inputs = Vec::new();
    let mut typed: Vec<(String, SpecValue)> = Vec::new();
    for input in kind.inputs.values() {
        // A proposal recorded before its kind declared this input may not hold or cite it.
        let not_cited = || {
            ApiError::not_found(format!(
                "proposal `{id}` does not cite input `{}` of kind `{}` (it was recorded before the kind declared it): it has no sheet",
                input.name, kind.name
            ))
        };
        let key = kind.input_key(input, &action).map_err(|_| not_cited())?;
        let i = citing(s.spec(), &sources, input, &key).ok_or_else(not_cited)?;
        let src = &sources[i];
        let tag = src.tag.clone().unwrap_or_default();
        let filters: Vec<(String, String)> =
            key.iter().map(|(c, v)| (c.clone(), key_text(&v.to_json()))).collect();
        let (then_row, then_receipt) =
            row_at(s, &mut read_cache, &input.table, &filters, At::Tag(tag.clone()), format!("tag:{tag}"))
                .await?;
        let (now_row, now_receipt) =
            row_at(s, &mut read_cache, &input.table, &filters, At::Latest, "latest".into()).await?;
        let value = then_row.as_ref().and_then(|r| r.get(&input.column).cloned()).unwrap_or(Value::Null);
        let value_now = now_row.as_ref().and_then(|r| r.get(&input.column).cloned()).unwrap_or(Value::Null);
        typed.push((
            input.name.clone(),
            SpecValue::from_json(&value, input.column_type).unwrap_or(SpecValue::Null),
        ));
        let need_ms = need_ms(&input.need, &p.created_at);
        let offset =
            instant_off_worker(s, &input.table, then_receipt.offset, src.offset, p.created_offset).await?;
        let lag = lag_at_proposal(s, offset, p.created_offset)?;
        inputs.push(SheetInput {
            name: input.name.clone(),
            table: input.table.clone(),
            column: input.column.clone(),
            key: key.iter().map(|(c, v)| (c.clone(), v.to_json())).collect(),
            changed_since: value_now != value,
            value,
            snapshot_id: src.snapshot_id,
            tag,
            offset,
            committed_at: then_receipt.committed_at.clone(),
            lag_ms: lag,
            cited_lag_ms: src.lag_ms,
            need: input.need.to_string(),
            need_ms,
            fresh_enough: lag.map(|l| l <= need_ms),
            value_now,
            now_snapshot_id: now_receipt.snapshot_id,
            now_offset: now_receipt.offset,
        });
    }
    let lookup = |n: &str| -> Option<SpecValue> {
        typed.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()).or_else(|| {
            let ty = kind.action.get(n)?;
            action.get(n).and_then(|v| SpecValue::from_json(v, *ty).ok())
        })
    };
    let steps = kind.evaluate(&lookup);
    let summary = kind.render_summary(&|n| {
        steps
            .iter()
            .find(|st| st.name == n)
            .and_then(|st| st.value.clone().ok())
            .or_else(|| lookup(n))
            .map(|v| v.to_string())
    });
    let rule = steps
        .into_iter()
        .map(|st| SheetStep {
            name: st.name,
            expression: st.text,
            with_values: st.with_values,
            value: st.value.as_ref().map(SpecValue::to_json).unwrap_or(Value::Null),
            error: st.value.err(),
        })
        .collect();
    Ok(Sheet {
        proposal_id: p.id.clone(),
        kind: kind.name.clone(),
        description: kind.description.clone(),
        module: p.module.clone(),
        agent: p.agent.clone(),
        status: p.status,
        created_at: p.created_at.clone(),
        summary,
        agent_summary,
        action,
        verdict: verdict(&inputs, &|a, b| recorded_between(s, a, b).unwrap_or(0)),
        inputs,
        rule,
        rule_text,
    })
}

/// Groups the inputs by the offset their values are known to reflect; `between(a, b)` gives
/// the milliseconds over which the events from offset `a` up to `b` were recorded.
pub(crate) fn verdict(inputs: &[SheetInput], between: &dyn Fn(u64, u64) -> i64) -> Verdict {
    let mut instants: Vec<Instant> = Vec::new();
    for i in inputs {
        match instants.iter_mut().find(|x| x.offset == i.offset) {
            Some(x) => x.inputs.push(i.name.clone()),
            None => instants.push(Instant {
                offset: i.offset,
                committed_at: i.committed_at.clone(),
                inputs: vec![i.name.clone()],
            }),
        }
    }
    instants.sort_by_key(|x| x.offset);
    let offsets: Vec<u64> = instants.iter().filter_map(|x| x.offset).collect();
    let offset_spread = match (offsets.iter().min(), offsets.iter().max()) {
        (Some(a), Some(b)) => b - a,
        _ => 0,
    };
    let time_spread_ms = match (offsets.iter().min(), offsets.iter().max()) {
        (Some(a), Some(b)) if b > a => between(*a, *b),
        _ => 0,
    };
    let one_instant = instants.len() == 1 && instants[0].offset.is_some();
    let text = if one_instant {
        format!("all {} inputs were read at one instant: offset {}", inputs.len(), offsets[0])
    } else {
        let at: Vec<String> = instants
            .iter()
            .map(|x| {
                let o = x.offset.map_or("an unknown offset".to_string(), |o| format!("offset {o}"));
                format!("{o} ({})", x.inputs.join(", "))
            })
            .collect();
        format!(
            "the inputs were read at {} different instants: {}; {} events and {} ms apart",
            instants.len(),
            at.join("; "),
            offset_spread,
            time_spread_ms
        )
    };
    Verdict { one_instant, instants, offset_spread, time_spread_ms, text }
}

/// The declared decision kinds, as documentation for agents.
pub(crate) fn kind_list(spec: &CompanySpec) -> KindList {
    let kinds = spec
        .decisions
        .values()
        .map(|k| KindDoc {
            name: k.name.clone(),
            description: k.description.clone(),
            module: k.module.clone(),
            summary: k.summary.clone(),
            action: k.action.iter().map(|(f, t)| (f.clone(), Value::String(t.to_string()))).collect(),
            inputs: k
                .inputs
                .values()
                .map(|i| InputDoc {
                    name: i.name.clone(),
                    table: i.table.clone(),
                    column: i.column.clone(),
                    ty: i.column_type.to_string(),
                    key: i.key.iter().map(|(c, f)| (c.clone(), Value::String(f.clone()))).collect(),
                    need: i.need.to_string(),
                })
                .collect(),
            rule: k
                .rule
                .iter()
                .map(|st| StepDoc { name: st.name.clone(), expression: st.text.clone() })
                .collect(),
        })
        .collect();
    KindList { kinds }
}

#[utoipa::path(get, path = "/v1/decision-kinds", security(("token" = [])),
    responses((status = 200, description = "The declared decision kinds: each one's module, action fields, inputs (table, column, key, need), rule and summary template", body = KindList)))]
pub(crate) async fn kinds(State(s): State<Arc<Shared>>, caller: Caller) -> Result<Json<KindList>, ApiError> {
    caller.require(Permission::Read)?;
    Ok(Json(kind_list(s.spec())))
}
