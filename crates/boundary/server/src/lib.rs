//! The agent boundary over HTTP: one process that records events, runs the derivers
//! (compaction and expiry included), and serves reads with receipts, consistent multi-table
//! reads, trigger firings, proposals, decisions, outboxes and audits to authenticated
//! principals.
//!
//! Routes (JSON, under `/v1`; the OpenAPI document is `GET /v1/openapi.json`):
//!
//! | route | permission | what |
//! |---|---|---|
//! | `POST /v1/events` | `emit:<module>` | JSON-lines body; every line checked, then appended durably |
//! | `GET /v1/tables` | `read` | every state table: budget, receipt (lag against budget), files and runs |
//! | `GET /v1/quarantine` | `read` | row operations whose derivation failed and was set aside; `table=`, `limit=` |
//! | `GET /v1/tables/{table}/rows` | `read` | rows with a receipt; `col=value`, `where=`, `limit=`, `snapshot=N` or `tag=T` |
//! | `GET /v1/tables/{table}/schema` | `read` | columns and types, primary key, merge engine, budget, options |
//! | `POST /v1/reads` | `read` | several tables as of one record offset (a barrier) |
//! | `POST /v1/sql` | `read` | one read-only SQL query (checked on its plan), with a receipt per table |
//! | `GET /v1/triggers/{trigger}/firings` | `subscribe` | firings after the caller's cursor |
//! | `GET /v1/triggers/{trigger}/stream` | `subscribe` | the same as server-sent events |
//! | `POST /v1/proposals` | `propose` | checks and pins the cited snapshots, records the proposal |
//! | `GET /v1/proposals`, `GET /v1/proposals/{id}` | `read` | the inbox, one proposal |
//! | `POST /v1/proposals/{id}/decision` | `decide:<module>` | approve or reject, once |
//! | `GET /v1/proposals/{id}/audit` | `read` | proposal, pinned evidence, decision, caused events, state after |
//! | `GET /v1/outbox/{module}` | `outbox:<module>` | approved proposals for the module to carry out |
//! | `GET /metrics` | `read` | Prometheus text: lag against budget per table, proposals |
//!
//! Roles and tokens: [`auth`]. The proposal store: [`store`].

pub mod auth;
mod error;
pub mod heap;
mod history;
pub mod listen;
mod openapi;
mod proposals;
mod reads;
mod shared;
mod sheet;
pub mod store;
mod web;
mod webhook;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use livestate_api::event::{AppendedLine, EventsAnswer};
use livestate_api::health::{Health, HealthStatus, StoreMemory, Stores};
use livestate_api::principal::{Role, WhoAmI};
use livestate_api::ErrorCode;
use livestate_engine::{Follow, Livestate};
use shared::{Opened, Shared};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

pub use error::{ApiError, ServerError};

use crate::auth::{Permission, Principal, Principals};
use crate::store::Store;

/// How a server runs, beyond its directory.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The principals file; `D/principals.toml` when `None`.
    pub principals: Option<PathBuf>,
    /// How long a tag pinning a proposal's evidence is kept, in Paimon's duration format.
    pub tag_retention: String,
    /// Module → URL that approved proposals are POSTed to (with retries), besides the outbox.
    pub webhooks: BTreeMap<String, String>,
    /// Largest request body accepted (larger ones get 413).
    pub max_body_bytes: usize,
    /// Where `POST /v1/sql` queries run, and their limits (clones share threads and counts).
    pub sql: livestate_sql::Queries,
    /// Timeouts and the cap on connections (see [`listen`]).
    pub connections: listen::ConnectionLimits,
}

impl Default for ServeConfig {
    fn default() -> ServeConfig {
        ServeConfig {
            principals: None,
            tag_retention: "400 d".into(),
            webhooks: BTreeMap::new(),
            max_body_bytes: 4 << 20,
            sql: livestate_sql::Queries::new(livestate_sql::Limits::default()),
            connections: listen::ConnectionLimits::default(),
        }
    }
}

/// The authenticated caller of a request (`Authorization: Bearer <token>`).
pub(crate) struct Caller(pub Principal);

impl Caller {
    /// 403 unless the caller holds `p`.
    fn require(&self, p: Permission) -> Result<(), ApiError> {
        if self.0.may(&p) {
            Ok(())
        } else {
            Err(ApiError::forbidden(&self.0, &p))
        }
    }
}

impl FromRequestParts<Arc<Shared>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &Arc<Shared>) -> Result<Caller, ApiError> {
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let client = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip())
            .filter(|_| token.is_some());
        if client.is_some_and(|ip| s.auth_failures().blocked(ip)) {
            return Err(ApiError::new(
                ErrorCode::TooManyRequests,
                format!(
                    "too many failed authentications from this address ({} in {} s); wait and retry",
                    auth::Failures::LIMIT,
                    auth::Failures::WINDOW.as_secs()
                ),
            ));
        }
        s.principals().authenticate(token).map(Caller).map_err(|e| {
            if let Some(ip) = client {
                s.auth_failures().record(ip);
            }
            ApiError::unauthenticated(&e)
        })
    }
}

/// Serves the directory `dir` on `listener` with the default configuration until `shutdown`
/// resolves. See [`serve_with`].
///
/// # Errors
/// As [`serve_with`].
pub async fn serve(
    dir: &Path,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    serve_with(dir, listener, ServeConfig::default(), shutdown).await
}

/// Serves the directory `dir` on `listener` until `shutdown` resolves, then commits what is
/// pending and stops.
///
/// # Errors
/// The directory cannot be opened (not initialised, in use by another process), the proposal
/// store cannot be opened, or serving failed. A failing derivation stops the server with its
/// error.
pub async fn serve_with(
    dir: &Path,
    listener: TcpListener,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let ls = Livestate::open(dir).await?;
    let decisions_unsupported = proposals::check_spec(ls.spec()).err();
    if let Some(why) = &decisions_unsupported {
        tracing::warn!("proposals are disabled: {why}");
    }
    for module in config.webhooks.keys() {
        if !ls.spec().events.values().any(|e| &e.module == module) {
            return Err(ServerError::Config(format!("webhook for `{module}`: no event type of that module")));
        }
    }
    let mut derivers = ls.derivers().await?;
    ls.catch_up(&mut derivers, livestate_engine::CATCH_UP_COMMIT_EVENTS, &mut |_| {}).await?;
    let store = Store::open(&ls.layout().boundary_dir())?;
    while store.follow(ls.record())? > 0 {}
    let (followed_tx, followed) = watch::channel(store.through()?);
    let (stop_tx, stop_rx) = watch::channel(false);
    let (head, _) = watch::channel(ls.record().next_offset());
    let (barriers, barrier_rx) = mpsc::channel(64);
    let principals =
        Principals::new(config.principals.clone().unwrap_or_else(|| ls.layout().principals_file()));
    // Tags pin proposals' evidence on every table, also those another engine derives.
    let mut maintainers = derivers.maintainers();
    maintainers.extend(ls.external_maintainers().await?);
    let shared = Arc::new(Shared::new(Opened {
        ls,
        head,
        stopping: stop_rx.clone(),
        principals,
        store,
        followed,
        barriers,
        maintainers,
        config,
        decisions_unsupported,
    }));

    // A failed derivation (a full disk, a damaged table file) stops the server with its error
    // rather than leave it accepting events it no longer derives.
    let (derive_failed_tx, mut derive_failed) = watch::channel(false);
    // The derive loop stops after the HTTP server: an event a request appended while the server
    // drained is derived and committed before the process exits, and a consistent read waiting
    // for a barrier during the drain is still answered.
    let (derive_stop_tx, derive_stop_rx) = watch::channel(false);
    let derive_loop = tokio::spawn({
        let s = Arc::clone(&shared);
        let follow = Follow { stop: derive_stop_rx, head: Some(s.head()), barriers: Some(barrier_rx) };
        let mut derivers = derivers;
        async move {
            let r = s.ls().follow(&mut derivers, follow).await;
            if let Err(e) = &r {
                tracing::error!(error = %e, "derivation failed; the server stops");
                let _ = derive_failed_tx.send(true);
            }
            r
        }
    });
    let follower = tokio::spawn(follow_loop(Arc::clone(&shared), followed_tx, stop_rx.clone()));
    let webhooks: Vec<_> = shared
        .config()
        .webhooks
        .iter()
        .map(|(m, url)| {
            tokio::spawn(webhook::deliver(Arc::clone(&shared), m.clone(), url.clone(), stop_rx.clone()))
        })
        .collect();

    let sampler = tokio::spawn(web::sample_lag(Arc::clone(&shared), stop_rx.clone()));
    let app = router(Arc::clone(&shared));
    let limits = shared.config().connections;
    let served = listen::serve(listener, app, limits, async move {
        let failed = async {
            if derive_failed.wait_for(|failed| *failed).await.is_err() {
                // The loop ended without failing (it only ends when stopping).
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = shutdown => {}
            _ = failed => {}
        }
        let _ = stop_tx.send(true);
    })
    .await;
    let _ = derive_stop_tx.send(true);
    let derived = derive_loop.await.map_err(|e| std::io::Error::other(e.to_string()))?;
    let followed = follower.await.map_err(|e| std::io::Error::other(e.to_string()))?;
    for w in webhooks {
        let _ = w.await;
    }
    let _ = sampler.await;
    served?;
    derived?;
    followed?;
    // Everything is committed: another directory may take an object-storage warehouse at once.
    shared.ls().release_lease().await?;
    Ok(())
}

fn router(shared: Arc<Shared>) -> Router {
    let max_body = shared.config().max_body_bytes;
    Router::new()
        .route("/v1/openapi.json", get(openapi::document))
        .route("/v1/health", get(health))
        .route("/v1/whoami", get(whoami))
        .route("/v1/principals", get(principals))
        .route("/v1/events", post(post_events))
        .route("/v1/tables", get(reads::tables))
        .route("/v1/quarantine", get(reads::quarantine))
        .route("/v1/tables/{table}/rows", get(reads::rows))
        .route("/v1/tables/{table}/schema", get(reads::schema))
        .route("/v1/reads", post(reads::consistent))
        .route("/v1/sql", post(reads::sql))
        .route("/v1/triggers/{trigger}/firings", get(reads::firings))
        .route("/v1/triggers/{trigger}/stream", get(reads::stream))
        .route("/v1/proposals", post(proposals::create).get(proposals::list))
        .route("/v1/proposals/{id}", get(proposals::get))
        .route("/v1/proposals/{id}/decision", post(proposals::decide))
        .route("/v1/proposals/{id}/audit", get(proposals::audit))
        .route("/v1/proposals/{id}/sheet", get(sheet::sheet))
        .route("/v1/decision-kinds", get(sheet::kinds))
        .route("/v1/decision-kinds/{kind}/history", get(history::history))
        .route("/v1/outbox/{module}", get(proposals::outbox))
        .route("/metrics", get(reads::metrics))
        // The web inbox for people (cookie sessions; see `web`).
        .route("/", get(web::root))
        .route("/assets/app.css", get(web::asset_css))
        .route("/assets/app.js", get(web::asset_js))
        .route("/signin", get(web::signin_page).post(web::signin))
        .route("/signout", post(web::signout))
        .route("/inbox", get(web::inbox))
        .route("/inbox/rows", get(web::inbox_fragment))
        .route("/inbox/events", get(web::inbox_events))
        .route("/proposals/{id}", get(web::proposal))
        .route("/proposals/{id}/decide", post(web::decide))
        .route("/proposals/{id}/audit", get(web::lineage))
        .route("/tables", get(web::tables))
        .route("/decisions", get(web::decisions::kinds))
        .route("/decisions/{kind}", get(web::decisions::kind))
        .fallback(|| async { ApiError::not_found("no such route (see /v1/openapi.json)") })
        .layer(DefaultBodyLimit::max(max_body))
        .layer(axum::middleware::from_fn_with_state(max_body, bounded_and_json))
        .with_state(shared)
}

/// Answers 413 from `Content-Length` before reading any of the body (a client announcing more
/// than the limit and sending nothing must not hold the connection), and gives the plain-text
/// answers of axum's own layers and extractors (413 over the limit, 405 for a method a route
/// does not take, 400/415/422 from a body extractor) the API's JSON error, keeping their
/// headers (`Allow`). HTML answers of the web pages are left as they are.
async fn bounded_and_json(
    State(max_body): State<usize>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
    use axum::response::IntoResponse;
    let announced =
        req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if let Some(len) = announced.filter(|&len| len > max_body as u64) {
        // Lingering close: what of the body arrives within a second (at most twice the limit) is
        // read and dropped, so a client still writing it reads the 413 instead of a reset; a
        // client that sends nothing holds the connection no longer than that.
        let body = req.into_body();
        tokio::spawn(async move {
            use futures::StreamExt as _;
            let mut stream = body.into_data_stream();
            let mut read = 0usize;
            let drain = async {
                while let Some(Ok(chunk)) = stream.next().await {
                    read += chunk.len();
                    if read > max_body.saturating_mul(2) {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
        });
        return ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("the body is {len} bytes; at most {max_body} are accepted"),
        )
        .into_response();
    }
    let r = next.run(req).await;
    let plain =
        r.headers().get(CONTENT_TYPE).is_none_or(|v| v.to_str().is_ok_and(|t| t.starts_with("text/plain")));
    if !(r.status().is_client_error() || r.status().is_server_error()) || !plain {
        return r;
    }
    let status = r.status();
    let (parts, body) = r.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_string();
    let message =
        if text.is_empty() { status.canonical_reason().unwrap_or("error").to_string() } else { text };
    let mut out = ApiError::of_status(status, message).into_response();
    for (name, value) in &parts.headers {
        if name != CONTENT_TYPE && name != CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

async fn follow_loop(
    s: Arc<Shared>,
    followed: watch::Sender<u64>,
    mut stop_rx: watch::Receiver<bool>,
) -> Result<(), ServerError> {
    let mut head = s.head();
    loop {
        let stopping = *stop_rx.borrow();
        let shared = Arc::clone(&s);
        let n = tokio::task::spawn_blocking(move || shared.store().follow(shared.record()))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))??;
        followed.send_replace(s.store().through()?);
        if n == 0 {
            if stopping {
                return Ok(());
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = head.changed() => {}
                _ = stop_rx.changed() => {}
            }
        }
    }
}

#[utoipa::path(get, path = "/v1/health", responses((status = 200, description = "The server is up; `stores` gives each embedded store's block cache and unflushed writes in bytes", body = Health),
    (status = 503, description = "The record refuses appends since a write failed: restart the server", body = Health)))]
async fn health(State(s): State<Arc<Shared>>) -> Response {
    // What each embedded store holds in memory: the part of the process's memory that caches
    // and unflushed writes account for (bounded by configuration, docs/guarantees.md).
    let store = |m: livestate_record::StoreMemory| StoreMemory {
        block_cache_bytes: m.block_cache_bytes,
        block_cache_capacity_bytes: m.block_cache_capacity_bytes,
        write_buffer_bytes: m.write_buffer_bytes,
        queued_flushes: m.queued_flushes as u64,
        journals: m.journals as u64,
    };
    let mut body = Health {
        status: HealthStatus::Ok,
        record_next_offset: s.record().next_offset(),
        stores: Stores {
            record: store(s.record().memory()),
            index: store(s.ls().index_memory()),
            proposals: store(s.store().memory()),
        },
        heap_live_bytes: heap::live_bytes(),
        error: None,
    };
    match s.record().refusing_appends() {
        None => Json(body).into_response(),
        Some(e) => {
            body.status = HealthStatus::RefusingAppends;
            body.error = Some(e.to_string());
            (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
        }
    }
}

#[utoipa::path(get, path = "/v1/whoami", security(("token" = [])),
    responses((status = 200, description = "The caller's name and role", body = WhoAmI), (status = 401, description = "No valid token")))]
async fn whoami(caller: Caller) -> Json<WhoAmI> {
    let p = &caller.0;
    let role = match &p.role {
        auth::Role::Module(m) => Role::Module { module: m.clone() },
        auth::Role::Agent(a) => Role::Agent { agent: a.clone() },
        auth::Role::Person { name, scopes } => Role::Person { person: name.clone(), scopes: scopes.clone() },
        auth::Role::Admin => Role::Admin,
    };
    Json(WhoAmI { name: p.name.clone(), role })
}

#[utoipa::path(get, path = "/v1/principals", security(("token" = [])),
    responses((status = 200, description = "Every principal (names, roles and scopes; never tokens)", body = livestate_api::principal::Principals),
        (status = 401, description = "No valid token"), (status = 403, description = "Not an administrator")))]
async fn principals(
    State(s): State<Arc<Shared>>,
    caller: Caller,
) -> Result<Json<livestate_api::principal::Principals>, ApiError> {
    caller.require(Permission::Manage)?;
    let principals = s
        .principals()
        .names()
        .into_iter()
        .map(|e| livestate_api::principal::Principal {
            name: e.name,
            scopes: e.scopes,
            created_at: e.created_at,
        })
        .collect();
    Ok(Json(livestate_api::principal::Principals { principals }))
}

#[utoipa::path(post, path = "/v1/events", security(("token" = [])),
    request_body(content = String, description = "One JSON event envelope per line", content_type = "application/x-ndjson"),
    responses((status = 200, description = "Each line's offset (a re-sent id reports its original offset)", body = EventsAnswer),
        (status = 400, description = "A line is invalid; nothing was appended"),
        (status = 403, description = "An event of a module the caller may not emit"),
        (status = 409, description = "An id re-sent with different content"),
        (status = 413, description = "Body too large"),
        (status = 503, description = "The record could not store the events (a write or fsync failed) or refuses appends since one did; nothing of this request was acknowledged; retry after the server restarts"),
        (status = 507, description = "The disk is full: the record could not store the events; nothing of this request was acknowledged")))]
async fn post_events(
    State(s): State<Arc<Shared>>,
    caller: Caller,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let body = String::from_utf8(body.to_vec())
        .map_err(|e| ApiError::bad_request(format!("the body is not UTF-8: {e}")))?;
    // Every line's module must be the caller's to emit, before anything is checked or stored.
    for (i, line) in body.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Some(head) = livestate_spec::LineHead::peek(line) else {
            continue; // the event check names what is wrong with the line
        };
        if head.module() == auth::DECISIONS_MODULE {
            return Err(ApiError::new(ErrorCode::Forbidden,
                format!(
                    "line {}: `{}` events are written by the server from proposals and decisions; use /v1/proposals",
                    i + 1,
                    head.event_type
                ),
            ));
        }
        caller.require(Permission::Emit(head.module().to_string()))?;
    }
    let shared = Arc::clone(&s);
    let report = tokio::task::spawn_blocking(move || shared.ls().emit(&body, false).map_err(ApiError::from))
        .await
        .map_err(ApiError::internal)??;
    s.appended();
    let appended = report
        .appended
        .iter()
        .map(|(line, a)| AppendedLine { line: *line, offset: a.offset, duplicate: a.duplicate })
        .collect();
    Ok(Json(EventsAnswer { appended }).into_response())
}
