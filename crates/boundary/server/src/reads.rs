//! Reads: tables, rows with receipts, consistent multi-table reads, trigger firings and metrics.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use livestate_api::read::{
    BucketHealth, ConsistentAnswer, ConsistentRead, Firing, Firings, QuarantineList, Quarantined, Receipt,
    RowsAnswer, Spend, TableHealth, TableInfo, TableSpend, TagInfo,
};
use livestate_engine::read::parse_where;
use livestate_engine::{At, EngineError, ReadRequest, Rows};
use serde::Deserialize;
use serde_json::Value;

use crate::auth::Permission;
use crate::error::{parse_body, ApiError};
use crate::{Caller, Shared};

/// Most rows one read returns unless it asks for fewer.
pub(crate) const DEFAULT_LIMIT: usize = 10_000;

/// The first value of query parameter `name`.
pub(crate) fn query_param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// Text form of a JSON key value, as a query string would carry it.
pub(crate) fn key_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Reads `table` at `at` with `keys` filters, a `where` condition and a limit.
pub(crate) async fn read_rows(
    s: &Shared,
    table: &str,
    keys: Vec<(String, String)>,
    condition: Option<&str>,
    limit: Option<usize>,
    at: At,
) -> Result<Rows, ApiError> {
    let ts = livestate_engine::read::table_spec(s.spec(), table)?;
    let condition = match condition {
        Some(c) => Some(parse_where(ts, c)?),
        None => None,
    };
    let req = ReadRequest { table: table.to_string(), keys, at };
    let mut rows = s.reader().read_where(&req, condition.as_ref()).await?;
    rows.select(None, Some(limit.unwrap_or(DEFAULT_LIMIT)))?;
    Ok(rows)
}

/// A read's rows as the typed answer of one table.
pub(crate) fn rows_answer(rows: &Rows) -> RowsAnswer {
    RowsAnswer {
        receipt: wire_receipt(&rows.receipt),
        columns: rows.columns.clone(),
        rows: rows.json_objects(),
    }
}

/// A receipt on the wire (the engine's, without what only the engine uses).
pub(crate) fn wire_receipt(r: &livestate_engine::Receipt) -> Receipt {
    Receipt {
        table: r.table.clone(),
        snapshot_id: r.snapshot_id,
        offset: r.offset,
        committed_at: r.committed_at.clone(),
        lag_ms: r.lag_ms,
        budget: r.budget.clone(),
        within_budget: r.within_budget,
        measured_by: r.measured_by,
        served_by: r.served_by,
    }
}

/// A table's health on the wire (every field of the engine's, by name).
fn table_info(info: livestate_engine::TableInfo) -> TableInfo {
    let livestate_engine::TableInfo {
        name,
        derived_by,
        merge_engine,
        buckets,
        receipt,
        total_rows_in_files,
        health,
        quarantined,
        last_quarantined,
        spend,
    } = info;
    let livestate_lsm::TableHealth {
        latest_snapshot,
        earliest_snapshot,
        snapshots,
        buckets: bucket_health,
        tags,
    } = health;
    let health = TableHealth {
        latest_snapshot,
        earliest_snapshot,
        snapshots,
        buckets: bucket_health
            .into_iter()
            .map(|b| {
                let livestate_lsm::BucketHealth { bucket, files, sorted_runs, files_per_level, bytes, rows } =
                    b;
                BucketHealth { bucket, files, sorted_runs, files_per_level, bytes, rows }
            })
            .collect(),
        tags: tags
            .into_iter()
            .map(|t| {
                let livestate_lsm::TagInfo { name, snapshot_id } = t;
                TagInfo { name, snapshot_id }
            })
            .collect(),
    };
    let spend_of = |s: livestate_engine::spend::Spend| {
        let livestate_engine::spend::Spend {
            commits,
            compactions,
            files_written,
            bytes_written,
            busy_ms,
            cpu_us,
            derive_cpu_us,
        } = s;
        Spend { commits, compactions, files_written, bytes_written, busy_ms, cpu_us, derive_cpu_us }
    };
    let spend = spend.map(|s| {
        let livestate_engine::spend::TableSpend { last_hour, total, since_ms } = s;
        TableSpend { last_hour: spend_of(last_hour), total: spend_of(total), since_ms }
    });
    TableInfo {
        name,
        derived_by,
        merge_engine,
        buckets,
        receipt: wire_receipt(&receipt),
        total_rows_in_files,
        health,
        quarantined,
        last_quarantined: last_quarantined.map(quarantined_entry),
        spend,
    }
}

/// A quarantined row operation on the wire.
fn quarantined_entry(q: livestate_engine::quarantine::Quarantined) -> Quarantined {
    let livestate_engine::quarantine::Quarantined { table, offset, event_id, event_type, message } = q;
    Quarantined { table, offset, event_id, event_type, message }
}

/// A firing on the wire.
fn firing(f: livestate_engine::triggers::Firing) -> Firing {
    let livestate_engine::triggers::Firing {
        trigger,
        seq,
        table,
        key,
        before,
        after,
        snapshot_id,
        offset,
        fired_at_ms,
    } = f;
    Firing { trigger, seq, table, key, before, after, snapshot_id, offset, fired_at_ms }
}

#[utoipa::path(get, path = "/v1/tables", security(("token" = [])),
    responses((status = 200, description = "Every state table: merge engine, buckets, receipt (budget, lag, within budget), files, sorted runs, snapshots and tags", body = Vec<TableInfo>),
        (status = 401, description = "No valid token"), (status = 403, description = "The caller may not read")))]
pub(crate) async fn tables(
    State(s): State<Arc<Shared>>,
    caller: Caller,
) -> Result<Json<Vec<TableInfo>>, ApiError> {
    caller.require(Permission::Read)?;
    let infos = s.table_infos().await?;
    Ok(Json(infos.into_iter().map(table_info).collect()))
}

/// Which quarantined row operations to list.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct QuarantineQuery {
    /// Only this state table's.
    table: Option<String>,
    /// At most this many, the latest (default 100, at most 10000).
    limit: Option<usize>,
}

#[utoipa::path(get, path = "/v1/quarantine", security(("token" = [])), params(QuarantineQuery),
    responses((status = 200, description = "The latest row operations the derivers set aside because their derivation failed: table, offset, event id and type, message (oldest first)", body = QuarantineList),
        (status = 400, description = "An unknown parameter or a limit that is not a whole number"),
        (status = 401, description = "No valid token"), (status = 403, description = "The caller may not read"),
        (status = 404, description = "Unknown table")))]
pub(crate) async fn quarantine(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    query: Result<Query<QuarantineQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<QuarantineList>, ApiError> {
    caller.require(Permission::Read)?;
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if let Some(t) = &q.table {
        livestate_engine::read::table_spec(s.spec(), t)?;
    }
    let limit = q.limit.unwrap_or(100).clamp(1, 10_000);
    let layout = s.ls().layout().clone();
    let entries = tokio::task::spawn_blocking(move || {
        livestate_engine::quarantine::entries(&layout, q.table.as_deref(), limit).map_err(ApiError::from)
    })
    .await
    .map_err(ApiError::internal)??;
    Ok(Json(QuarantineList { entries: entries.into_iter().map(quarantined_entry).collect() }))
}

fn parse_limit(v: &str) -> Result<usize, ApiError> {
    v.parse().map_err(|_| ApiError::bad_request(format!("limit `{v}` is not a whole number")))
}

#[utoipa::path(get, path = "/v1/tables/{table}/rows", security(("token" = [])),
    params(("table" = String, Path, description = "A state table"),
        ("where" = Option<String>, Query, description = "A condition over the columns, e.g. `on_hand < 10 and location == 'north'`"),
        ("limit" = Option<usize>, Query, description = "At most this many rows (default 10000)"),
        ("snapshot" = Option<i64>, Query, description = "Read this snapshot instead of the latest"),
        ("tag" = Option<String>, Query, description = "Read the snapshot this tag pins"),
        ("column" = Option<String>, Query, description = "Any other parameter is a `column=value` filter")),
    responses((status = 200, description = "Rows in key order, with a receipt", body = RowsAnswer),
        (status = 400, description = "A filter, condition, snapshot or tag that does not fit"),
        (status = 404, description = "Unknown table")))]
pub(crate) async fn rows(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    UrlPath(table): UrlPath<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    caller.require(Permission::Read)?;
    let mut at = At::Latest;
    let (mut keys, mut condition, mut limit) = (Vec::new(), None, None);
    for (k, v) in params {
        match k.as_str() {
            "snapshot" => {
                let id = v
                    .parse()
                    .map_err(|_| ApiError::bad_request(format!("snapshot `{v}` is not a number")))?;
                at = At::Snapshot(id);
            }
            "tag" => at = At::Tag(v),
            "where" => condition = Some(v),
            "limit" => limit = Some(parse_limit(&v)?),
            _ => keys.push((k, v)),
        }
    }
    let rows = read_rows(&s, &table, keys, condition.as_deref(), limit, at).await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], rows.answer_json()).into_response())
}

/// Most tables one consistent read may name.
const MAX_READS: usize = 32;

#[utoipa::path(post, path = "/v1/reads", security(("token" = [])), request_body = ConsistentRead,
    responses((status = 200, description = "`offset` and, per table, rows and a receipt whose snapshot reflects exactly the events below `offset`", body = ConsistentAnswer),
        (status = 400, description = "Malformed request"), (status = 404, description = "Unknown table")))]
pub(crate) async fn consistent(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    body: axum::body::Bytes,
) -> Result<Json<ConsistentAnswer>, ApiError> {
    caller.require(Permission::Read)?;
    let req: ConsistentRead = parse_body(&body)?;
    if req.tables.is_empty() || req.tables.len() > MAX_READS {
        return Err(ApiError::bad_request(format!("`tables` must name 1 to {MAX_READS} tables")));
    }
    for t in &req.tables {
        if !livestate_engine::read::table_spec(s.spec(), &t.table)?.derived_here() {
            return Err(ApiError::bad_request(format!(
                "table `{}` is derived_by = \"external\": another engine commits it at its own \
                 checkpoints, not at record offsets, so it cannot be read as of one offset; read it \
                 alone with GET /v1/tables/{}/rows",
                t.table, t.table
            )));
        }
    }
    let mut names: Vec<String> = req.tables.iter().map(|t| t.table.clone()).collect();
    names.sort();
    names.dedup();
    // Everything recorded before this request is in the read (read-your-writes).
    let barrier = s.barrier(names, s.record().next_offset()).await?;
    let mut results = Vec::new();
    for t in &req.tables {
        let snapshot = barrier.snapshots.iter().find(|(n, _)| n == &t.table).and_then(|(_, id)| *id);
        let keys = t.keys.iter().map(|(k, v)| (k.clone(), key_text(v))).collect();
        let mut rows = match snapshot {
            Some(id) => {
                read_rows(&s, &t.table, keys, t.condition.as_deref(), t.limit, At::Snapshot(id)).await?
            }
            // Never committed: empty as of any offset.
            None => read_rows(&s, &t.table, keys, t.condition.as_deref(), t.limit, At::Latest).await?,
        };
        rows.receipt.offset = Some(barrier.offset);
        results.push(rows_answer(&rows));
    }
    Ok(Json(ConsistentAnswer { offset: barrier.offset, results }))
}

/// The consumer name a caller's cursor is kept under: its own name, or `name/consumer`.
fn consumer_of(caller: &Caller, consumer: Option<&str>) -> Result<String, ApiError> {
    match consumer.map(str::trim).filter(|c| !c.is_empty()) {
        None => Ok(caller.0.name.clone()),
        Some(c) if c.len() <= 64 && c.chars().all(|ch| ch.is_ascii_alphanumeric() || "_-.".contains(ch)) => {
            Ok(format!("{}/{c}", caller.0.name))
        }
        Some(c) => {
            Err(ApiError::bad_request(format!("consumer `{c}`: use 1-64 letters, digits, `_`, `-` or `.`")))
        }
    }
}

fn known_trigger(s: &Shared, trigger: &str) -> Result<(), ApiError> {
    if s.spec().triggers.contains_key(trigger) {
        return Ok(());
    }
    let known = s.spec().triggers.keys().cloned().collect();
    Err(EngineError::UnknownTrigger { name: trigger.into(), known }.into())
}

#[utoipa::path(get, path = "/v1/triggers/{trigger}/firings", security(("token" = [])),
    params(("trigger" = String, Path), ("consumer" = Option<String>, Query, description = "A name for a separate cursor of the caller's"),
        ("ack" = Option<bool>, Query, description = "`false` leaves the cursor where it is"), ("limit" = Option<usize>, Query)),
    responses((status = 200, description = "Firings after the caller's cursor, oldest first", body = Firings), (status = 404, description = "Unknown trigger")))]
pub(crate) async fn firings(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    UrlPath(trigger): UrlPath<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<Firings>, ApiError> {
    caller.require(Permission::Subscribe)?;
    known_trigger(&s, &trigger)?;
    let param = |name: &str| query_param(&params, name);
    let consumer = consumer_of(&caller, param("consumer"))?;
    let limit = param("limit").map(parse_limit).transpose()?.unwrap_or(1000);
    let ack = param("ack") != Some("false");
    let firings = s.ls().firings().pending(&trigger, &consumer, limit)?;
    if ack {
        if let Some(last) = firings.last() {
            s.ls().firings().ack(&trigger, &consumer, last.seq)?;
        }
    }
    Ok(Json(Firings { consumer, firings: firings.into_iter().map(firing).collect() }))
}

/// How often a stream looks for new firings.
const STREAM_POLL: Duration = Duration::from_millis(50);

#[utoipa::path(get, path = "/v1/triggers/{trigger}/stream", security(("token" = [])),
    params(("trigger" = String, Path), ("consumer" = Option<String>, Query)),
    responses((status = 200, description = "Server-sent events `firing` (id = seq), each acknowledged once handed to the connection", content_type = "text/event-stream")))]
pub(crate) async fn stream(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    UrlPath(trigger): UrlPath<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    caller.require(Permission::Subscribe)?;
    known_trigger(&s, &trigger)?;
    let consumer = consumer_of(&caller, query_param(&params, "consumer"))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, std::convert::Infallible>>(64);
    let mut stopping = s.stopping();
    tokio::spawn(async move {
        loop {
            if *stopping.borrow() {
                return;
            }
            let batch = match s.ls().firings().pending(&trigger, &consumer, 256) {
                Ok(b) => b,
                Err(e) => {
                    let _ = tx.send(Ok(Event::default().event("error").data(e.to_string()))).await;
                    return;
                }
            };
            for f in &batch {
                let data = serde_json::to_string(f).expect("firings encode");
                let event = Event::default().event("firing").id(f.seq.to_string()).data(data);
                // Handed to the connection: acknowledged. A closed connection stops here, and the
                // firing stays pending for the consumer's next connection.
                if tx.send(Ok(event)).await.is_err()
                    || s.ls().firings().ack(&trigger, &consumer, f.seq).is_err()
                {
                    return;
                }
            }
            if batch.is_empty() {
                tokio::select! {
                    _ = tokio::time::sleep(STREAM_POLL) => {}
                    _ = tx.closed() => return,
                    _ = stopping.changed() => return,
                }
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[utoipa::path(get, path = "/metrics", security(("token" = [])),
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
pub(crate) async fn metrics(State(s): State<Arc<Shared>>, caller: Caller) -> Result<Response, ApiError> {
    caller.require(Permission::Read)?;
    let infos = s.table_infos().await?;
    let now = chrono::Utc::now();
    let mut out = String::new();
    let mut family = |name: &str, help: &str, kind: &str, rows: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in rows {
            let _ = writeln!(out, "{name}{labels} {v}");
        }
    };
    let per_table = |f: &dyn Fn(&livestate_engine::TableInfo) -> Option<f64>| {
        infos
            .iter()
            .filter_map(|i| f(i).map(|v| (format!("{{table=\"{}\"}}", label(&i.name)), v)))
            .collect::<Vec<_>>()
    };
    family(
        "livestate_table_freshness_budget_seconds",
        "How stale the table may be (its freshness budget; for nightly tables, the time allowed right now).",
        "gauge",
        per_table(&|i| s.spec().table(&i.name).map(|ts| ts.freshness.allowed_lag(now).as_secs_f64())),
    );
    family(
        "livestate_table_lag_seconds",
        "How long the oldest event not yet in the table's latest snapshot has waited.",
        "gauge",
        per_table(&|i| i.receipt.lag_ms.map(|l| l as f64 / 1000.0)),
    );
    family(
        "livestate_table_within_budget",
        "1 when the table's lag is within its freshness budget, 0 when over budget.",
        "gauge",
        per_table(&|i| i.receipt.within_budget.map(|w| if w { 1.0 } else { 0.0 })),
    );
    family(
        "livestate_table_snapshot_id",
        "The table's latest livestate snapshot.",
        "gauge",
        per_table(&|i| i.receipt.snapshot_id.map(|v| v as f64)),
    );
    family(
        "livestate_table_offset",
        "The record offset the table's latest snapshot reflects.",
        "gauge",
        per_table(&|i| i.receipt.offset.map(|o| o as f64)),
    );
    family(
        "livestate_table_files",
        "Data files in the table's latest snapshot.",
        "gauge",
        per_table(&|i| Some(i.health.buckets.iter().map(|b| b.files).sum::<usize>() as f64)),
    );
    family(
        "livestate_table_max_sorted_runs",
        "The most sorted runs in any bucket of the table.",
        "gauge",
        per_table(&|i| Some(i.health.buckets.iter().map(|b| b.sorted_runs).max().unwrap_or(0) as f64)),
    );
    family(
        "livestate_table_tags",
        "Tags on the table (each pins a snapshot, e.g. a proposal's evidence).",
        "gauge",
        per_table(&|i| Some(i.health.tags.len() as f64)),
    );
    family(
        "livestate_table_quarantined",
        "Row operations of the table the derivers set aside because they failed (GET /v1/quarantine).",
        "counter",
        per_table(&|i| Some(i.quarantined as f64)),
    );
    // What each table's freshness costs: counters since the writing process started measuring
    // (`rate()` gives the spend per hour; `GET /v1/tables` gives the last hour directly).
    let spent = |f: &dyn Fn(&livestate_engine::spend::Spend) -> f64| {
        per_table(&|i| i.spend.as_ref().map(|sp| f(&sp.total)))
    };
    family(
        "livestate_table_commits_total",
        "Data commits the derivers made to the table since measuring started.",
        "counter",
        spent(&|sp| sp.commits as f64),
    );
    family(
        "livestate_table_compactions_total",
        "Compactions of the table that committed since measuring started.",
        "counter",
        spent(&|sp| sp.compactions as f64),
    );
    family(
        "livestate_table_written_bytes_total",
        "Bytes of data, changelog and compacted files its commits and compactions wrote.",
        "counter",
        spent(&|sp| sp.bytes_written as f64),
    );
    family(
        "livestate_table_busy_seconds_total",
        "Wall time of the table's commits and compactions (not CPU time).",
        "counter",
        spent(&|sp| sp.busy_ms as f64 / 1000.0),
    );
    family(
        "livestate_table_cpu_seconds_total",
        "CPU time of the table's commits and compactions (thread CPU time of their polls) and its share of derivation.",
        "counter",
        spent(&|sp| sp.cpu_us as f64 / 1e6),
    );
    family(
        "livestate_table_derive_cpu_seconds_total",
        "Of the table's CPU time, its share of derivation: the CPU time of applying each chunk of events, shared by the row operations each table received.",
        "counter",
        spent(&|sp| sp.derive_cpu_us as f64 / 1e6),
    );
    family(
        "livestate_record_next_offset",
        "The offset the next recorded event gets (events recorded so far).",
        "counter",
        vec![(String::new(), s.record().next_offset() as f64)],
    );
    family(
        "livestate_sql_queries_running",
        "SQL queries admitted and not yet finished (a stopped query counts until its work has ended).",
        "gauge",
        vec![(String::new(), s.config().sql.running() as f64)],
    );
    let counts = s.store().counts()?;
    family(
        "livestate_proposals",
        "Proposals by status.",
        "gauge",
        ["pending", "approved", "rejected"]
            .iter()
            .map(|st| (format!("{{status=\"{st}\"}}"), counts.get(*st).copied().unwrap_or(0) as f64))
            .collect(),
    );
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response())
}

#[utoipa::path(get, path = "/v1/tables/{table}/schema", security(("token" = [])), params(("table" = String, Path)),
    responses((status = 200, description = "Columns and types, primary key, merge engine, freshness budget, Paimon options", body = livestate_api::read::TableSchema), (status = 404, description = "Unknown table")))]
pub(crate) async fn schema(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    UrlPath(table): UrlPath<String>,
) -> Result<Json<livestate_api::read::TableSchema>, ApiError> {
    caller.require(Permission::Read)?;
    let ts = livestate_engine::read::table_spec(s.spec(), &table)?;
    let columns = ts
        .columns
        .iter()
        .map(|(c, t)| livestate_api::read::SchemaColumn {
            name: c.clone(),
            ty: t.to_string(),
            key: ts.is_key(c),
        })
        .collect();
    Ok(Json(livestate_api::read::TableSchema {
        table: ts.name.clone(),
        description: ts.description.clone(),
        columns,
        primary_key: ts.primary_key.clone(),
        merge_engine: ts.merge_engine.as_str().to_string(),
        budget: ts.freshness.to_string(),
        options: ts.options.clone(),
    }))
}

pub use livestate_api::read::{SqlAnswer, SqlRequest};

/// Most rows one SQL answer may hold, whatever the request asks.
const SQL_MAX_ROWS: usize = 10_000;

/// Seconds a caller turned away for load is told to wait (`Retry-After`).
const SQL_RETRY_AFTER_SECONDS: u64 = 1;

/// A query's answer on the wire.
fn sql_answer(a: livestate_sql::Answer) -> SqlAnswer {
    SqlAnswer {
        columns: a.columns,
        rows: a.rows,
        truncated: a.truncated,
        receipts: a.receipts.iter().map(wire_receipt).collect(),
    }
}

/// The answer to a query that was not answered: 413 for text over the limit, 408 past the
/// time limit, 429 (with `Retry-After`) past a concurrency limit, 503 (with `Retry-After`)
/// when all queries together hold their memory, 400 for the caller's query otherwise, 500
/// for ours.
fn sql_error(e: livestate_sql::SqlError) -> Response {
    let retryable = e.is_retryable();
    let mut r = ApiError::from(e).into_response();
    if retryable {
        r.headers_mut().insert(header::RETRY_AFTER, SQL_RETRY_AFTER_SECONDS.into());
    }
    r
}

#[utoipa::path(post, path = "/v1/sql", security(("token" = [])), request_body = SqlRequest,
    responses((status = 200, description = "`columns`, `rows`, `truncated` (rows were cut at the row limit or at 16 MiB of JSON) and a receipt per table read", body = SqlAnswer),
        (status = 400, description = "Not a single read-only query (the refusal names the operator), it does not plan, it nests too deep or has too many tokens or list items (the refusal names line and column), it failed on its values (division by zero, a failed cast), or it passed its memory limit or a function's value limit (named)"),
        (status = 401, description = "No valid token"), (status = 403, description = "The caller may not read"),
        (status = 408, description = "Planning and running took longer than the time limit; the query was stopped"),
        (status = 413, description = "The query text is longer than the limit (64 KiB), or the body longer than the server takes"),
        (status = 429, description = "The caller, or all callers together, run as many queries as the limit allows; `Retry-After` says when to try again"),
        (status = 503, description = "All running queries together hold the memory queries may take; `Retry-After` says when to try again")))]
pub(crate) async fn sql(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    caller.require(Permission::Read)?;
    let req: SqlRequest = parse_body(&body)?;
    let queries = &s.config().sql;
    let rows = req.limit.unwrap_or(queries.limits().rows).clamp(1, SQL_MAX_ROWS);
    // Dropping this future (the client went away) aborts the query's work.
    let answer = queries.run(&caller.0.name, &s.reader(), &req.query, rows).await;
    match answer {
        Ok(answer) => Ok(Json(sql_answer(answer)).into_response()),
        Err(e) => Ok(sql_error(e)),
    }
}
