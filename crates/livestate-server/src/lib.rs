//! The HTTP API of livestate (first slice): one process that records events, runs the derivers
//! (compaction and expiry included) and serves reads with receipts and trigger firings, so
//! producers, readers and consumers no longer need the directory to themselves.
//!
//! Routes, all JSON, under `/v1`:
//!
//! | route | what |
//! |---|---|
//! | `POST /v1/events` | JSON-lines body; validates every line and appends durably; answers each line's offset |
//! | `GET /v1/tables` | every state table: engine, budget, receipt (lag against budget), files and runs |
//! | `GET /v1/tables/{table}/rows?col=value&...` | rows with a receipt; `snapshot=N` or `tag=T` time-travel; every key column given → answered by the lookup index |
//! | `GET /v1/triggers/{trigger}/firings?consumer=C[&ack=false][&limit=N]` | firings after the consumer's cursor; moves the cursor unless `ack=false` |
//! | `GET /v1/triggers/{trigger}/stream?consumer=C` | the same as server-sent events (`event: firing`, `id: seq`), each acknowledged once handed to the connection, as they are committed |
//!
//! Not yet here (issue 5): principals, roles and tokens, consistent multi-table reads,
//! proposals, decisions, outboxes, audit, OpenAPI and metrics.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use livestate_engine::{is_input_error, At, EngineError, Livestate, ReadRequest};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("serving HTTP: {0}")]
    Io(#[from] std::io::Error),
}

struct Shared {
    ls: Livestate,
    /// Wakes the derive loop when events arrive.
    appended: Notify,
    /// Turns true when the server is stopping: streams end so the shutdown can finish.
    stopping: watch::Receiver<bool>,
}

/// An API error: a status and a message naming the problem.
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({"error": self.1}))).into_response()
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        let status = match &e {
            EngineError::UnknownTable { .. } | EngineError::UnknownTrigger { .. } => StatusCode::NOT_FOUND,
            EngineError::Record(livestate_engine::RecordError::IdConflict { .. }) => StatusCode::CONFLICT,
            e if is_input_error(e) => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(status, e.to_string())
    }
}

/// Serves the directory `dir` on `listener` until `shutdown` resolves, then commits what is
/// pending and stops.
///
/// # Errors
/// The directory cannot be opened (not initialised, in use by another process), or serving
/// failed. A failing derivation stops the server with its error.
pub async fn serve(
    dir: &Path,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let ls = Livestate::open(dir).await?;
    let mut derivers = ls.derivers().await?;
    derivers.catch_up(&ls.record, &ls.spec, livestate_engine::CATCH_UP_COMMIT_EVENTS, &mut |_| {}).await?;
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let shared = Arc::new(Shared { ls, appended: Notify::new(), stopping: stop_rx.clone() });

    let loop_shared = Arc::clone(&shared);
    let derive_loop = tokio::spawn(async move {
        let ls = &loop_shared.ls;
        let mut last_status = std::time::Instant::now();
        loop {
            if *stop_rx.borrow() {
                break;
            }
            let step = derivers.step(&ls.record, &ls.spec).await?;
            if last_status.elapsed() >= Duration::from_secs(1) {
                derivers.write_status(&ls.record)?;
                last_status = std::time::Instant::now();
            }
            if step.events == 0 {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    _ = loop_shared.appended.notified() => {}
                    _ = stop_rx.changed() => {}
                }
            }
        }
        derivers.commit_all().await?;
        derivers.finish().await;
        derivers.write_status(&ls.record)?;
        Ok::<(), EngineError>(())
    });

    let app = Router::new()
        .route("/v1/events", post(post_events))
        .route("/v1/tables", get(get_tables))
        .route("/v1/tables/{table}/rows", get(get_rows))
        .route("/v1/triggers/{trigger}/firings", get(get_firings))
        .route("/v1/triggers/{trigger}/stream", get(stream_firings))
        .with_state(Arc::clone(&shared));
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            let _ = stop_tx.send(true);
        })
        .await;
    let derived = derive_loop.await.map_err(|e| std::io::Error::other(e.to_string()))?;
    served?;
    derived?;
    Ok(())
}

async fn post_events(State(s): State<Arc<Shared>>, body: String) -> Result<Json<Value>, ApiError> {
    let shared = Arc::clone(&s);
    let report = tokio::task::spawn_blocking(move || shared.ls.emit(&body, false).map_err(ApiError::from))
        .await
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    s.appended.notify_one();
    let appended: Vec<Value> = report
        .appended
        .iter()
        .map(|(line, a)| json!({"line": line, "offset": a.offset, "duplicate": a.duplicate}))
        .collect();
    Ok(Json(json!({ "appended": appended })))
}

async fn get_tables(State(s): State<Arc<Shared>>) -> Result<Json<Value>, ApiError> {
    let infos = livestate_engine::read::tables(&s.ls.catalog, &s.ls.spec, &s.ls.lag_source()).await?;
    Ok(Json(
        serde_json::to_value(infos)
            .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?,
    ))
}

async fn get_rows(
    State(s): State<Arc<Shared>>,
    UrlPath(table): UrlPath<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let mut at = At::Latest;
    let mut keys = Vec::new();
    for (k, v) in params {
        match k.as_str() {
            "snapshot" => {
                let id = v.parse().map_err(|_| {
                    ApiError(StatusCode::BAD_REQUEST, format!("snapshot `{v}` is not a number"))
                })?;
                at = At::Snapshot(id);
            }
            "tag" => at = At::Tag(v),
            _ => keys.push((k, v)),
        }
    }
    let req = ReadRequest { table, keys, at };
    let rows =
        livestate_engine::read::read(&s.ls.catalog, &s.ls.spec, &req, &s.ls.lag_source(), Some(&s.ls.index))
            .await?;
    Ok(Json(json!({"receipt": rows.receipt, "columns": rows.columns, "rows": rows.json_rows()})))
}

async fn get_firings(
    State(s): State<Arc<Shared>>,
    UrlPath(trigger): UrlPath<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let param = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    if !s.ls.spec.triggers.contains_key(&trigger) {
        let known = s.ls.spec.triggers.keys().cloned().collect();
        return Err(EngineError::UnknownTrigger { name: trigger, known }.into());
    }
    let consumer = param("consumer")
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| ApiError(StatusCode::BAD_REQUEST, "query parameter `consumer` is required".into()))?;
    let limit = match param("limit") {
        None => 1000,
        Some(l) => l
            .parse()
            .map_err(|_| ApiError(StatusCode::BAD_REQUEST, format!("limit `{l}` is not a number")))?,
    };
    let ack = param("ack") != Some("false");
    let firings = s.ls.index.pending(&trigger, consumer, limit)?;
    if ack {
        if let Some(last) = firings.last() {
            s.ls.index.ack(&trigger, consumer, last.seq)?;
        }
    }
    Ok(Json(json!({ "firings": firings })))
}

/// How often a stream looks for new firings.
const STREAM_POLL: Duration = Duration::from_millis(50);

async fn stream_firings(
    State(s): State<Arc<Shared>>,
    UrlPath(trigger): UrlPath<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    if !s.ls.spec.triggers.contains_key(&trigger) {
        let known = s.ls.spec.triggers.keys().cloned().collect();
        return Err(EngineError::UnknownTrigger { name: trigger, known }.into());
    }
    let consumer = params
        .iter()
        .find(|(k, v)| k == "consumer" && !v.trim().is_empty())
        .map(|(_, v)| v.clone())
        .ok_or_else(|| ApiError(StatusCode::BAD_REQUEST, "query parameter `consumer` is required".into()))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, std::convert::Infallible>>(64);
    let mut stopping = s.stopping.clone();
    tokio::spawn(async move {
        loop {
            if *stopping.borrow() {
                return;
            }
            let batch = match s.ls.index.pending(&trigger, &consumer, 256) {
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
                if tx.send(Ok(event)).await.is_err() || s.ls.index.ack(&trigger, &consumer, f.seq).is_err() {
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
