//! A client for the livestate HTTP API, for agents, modules, people's tools and tests: it
//! does exactly what an outside caller can do with its token, nothing more.
//!
//! ```no_run
//! # async fn example() -> Result<(), livestate_client::ClientError> {
//! let agent = livestate_client::Client::new("http://127.0.0.1:7070", "lst_...")?;
//! let stock = agent.rows("stock", &[("item", "part-0001")]).await?;
//! println!("snapshot {:?} at offset {:?}", stock.receipt.snapshot_id, stock.receipt.offset);
//! for row in &stock.rows {
//!     println!("{} on hand at {}", row["on_hand"], row["location"]);
//! }
//! # Ok(()) }
//! ```
//!
//! Answers are the API's types (`livestate_api`, re-exported here) where the API has typed
//! them: errors, the caller's name and role, appended events, tables with their health, rows
//! with their receipt, consistent reads, firings, proposals, decisions, outboxes, sheets and
//! histories;
//! the other routes answer their JSON (see `GET /v1/openapi.json`). An error carries the status
//! and the server's body: its stable code, its message and whether a retry can help.

pub use livestate_api::event::{AppendedLine, EventsAnswer};
pub use livestate_api::health::{Health, HealthStatus, StoreMemory, Stores};
pub use livestate_api::principal::{Role, WhoAmI};
pub use livestate_api::proposal::{
    Audit, CausedEvent, Decided, Evidence, NewDecision, NewProposal, Outbox, OutboxItem, PinnedTag,
    ProposalDoc, ProposalDocument, ProposalEntry, ProposalList, ProposalStatus, Proposed, Risk, RiskLevel,
    Rule, Source, StateAfter, Verdict,
};
pub use livestate_api::read::{
    BucketHealth, ConsistentAnswer, ConsistentRead, Firing, Firings, MeasuredBy, Quarantined, Receipt,
    RowsAnswer, SchemaColumn, ServedBy, Spend, SqlAnswer, SqlRequest, TableHealth, TableInfo, TableRead,
    TableSchema, TableSpend, TagInfo,
};
/// The typed answers of the sheet and history routes (defined once, in `livestate-api`).
pub use livestate_api::sheet;
pub use livestate_api::{ErrorBody, ErrorCode, ErrorKind};

use std::time::Duration;

use reqwest::Method;
pub use reqwest::StatusCode;
use serde_json::{json, Value};

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error status and this body (its stable code, its message
    /// and whether the same request may succeed later).
    #[error("{status}: {}", .body.message)]
    Api { status: StatusCode, body: ErrorBody },
    /// The server could not be reached, or its answer not read.
    #[error("calling livestate at {url}: {source}")]
    Transport {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with JSON that is not what the API documents.
    #[error("the server's answer is not {what}: {message}")]
    Answer { what: String, message: String },
    /// The base URL is not usable.
    #[error("base URL `{0}`: expected http://host:port")]
    BadUrl(String),
}

impl ClientError {
    /// The HTTP status, for API errors.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The server's stable code, for API errors.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Api { body, .. } => Some(body.code),
            _ => None,
        }
    }

    /// Whose failure this is: an API error's kind is its code's; a server that cannot be
    /// reached is unavailable, an answer that is not what the API documents internal, and a
    /// base URL that is not one the caller's input.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ClientError::Api { body, .. } => body.code.kind(),
            ClientError::Transport { .. } => ErrorKind::Unavailable,
            ClientError::Answer { .. } => ErrorKind::Internal,
            ClientError::BadUrl(_) => ErrorKind::Input,
        }
    }

    /// An API error as the server would have answered it, for a refusal decided on this side
    /// (a table the server does not list, say).
    pub fn api(code: ErrorCode, message: impl Into<String>) -> ClientError {
        let status = StatusCode::from_u16(code.status()).expect("every code's status is a valid status");
        ClientError::Api { status, body: ErrorBody::new(code, message) }
    }
}

/// An answer as the API type it documents.
fn typed<T: serde::de::DeserializeOwned>(v: Value, what: &str) -> Result<T, ClientError> {
    serde_json::from_value(v).map_err(|e| ClientError::Answer { what: what.into(), message: e.to_string() })
}

/// The error body of an answer: the API's own, or, for an answer that is not one (a proxy's
/// page, say), one made from its status and its text.
fn error_body(status: StatusCode, text: &str) -> ErrorBody {
    serde_json::from_str::<ErrorBody>(text).unwrap_or_else(|_| {
        let code = ErrorCode::of_status(status.as_u16()).unwrap_or(if status.is_client_error() {
            ErrorCode::BadRequest
        } else {
            ErrorCode::Internal
        });
        ErrorBody::new(code, text.trim())
    })
}

/// An authenticated client. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

/// Percent-encodes a query or path component.
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl Client {
    /// A client of the server at `base` (e.g. `http://127.0.0.1:7070`) acting with `token`.
    ///
    /// # Errors
    /// [`ClientError::BadUrl`] when `base` is not an http(s) URL.
    pub fn new(base: &str, token: &str) -> Result<Client, ClientError> {
        let base = base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ClientError::BadUrl(base));
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|source| ClientError::Transport { url: base.clone(), source })?;
        Ok(Client { base, token: token.to_string(), http })
    }

    /// The same server with another token.
    pub fn with_token(&self, token: &str) -> Client {
        Client { token: token.to_string(), ..self.clone() }
    }

    async fn call(&self, method: Method, path: &str, body: Option<Body<'_>>) -> Result<Value, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut req = self.http.request(method, &url).bearer_auth(&self.token);
        req = match body {
            Some(Body::Json(v)) => req.json(v),
            Some(Body::Lines(t)) => req.header("Content-Type", "application/x-ndjson").body(t.to_string()),
            None => req,
        };
        let transport = |source| ClientError::Transport { url: url.clone(), source };
        let resp = req.send().await.map_err(transport)?;
        let status = resp.status();
        let text = resp.text().await.map_err(transport)?;
        if !status.is_success() {
            return Err(ClientError::Api { status, body: error_body(status, &text) });
        }
        let value = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
        Ok(value)
    }

    async fn get(&self, path: &str) -> Result<Value, ClientError> {
        self.call(Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        self.call(Method::POST, path, Some(Body::Json(body))).await
    }

    /// `GET /v1/whoami`: the caller's name and role.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn whoami(&self) -> Result<WhoAmI, ClientError> {
        typed(self.get("/v1/whoami").await?, "the caller's name and role")
    }

    /// `POST /v1/events`: appends JSON-lines events; each line's offset.
    ///
    /// # Errors
    /// [`ClientError`] (400 names every bad line; nothing was appended then).
    pub async fn emit(&self, lines: &str) -> Result<EventsAnswer, ClientError> {
        typed(self.call(Method::POST, "/v1/events", Some(Body::Lines(lines))).await?, "the appended events")
    }

    /// `GET /v1/health`: whether the record takes appends, its next offset, and what each
    /// embedded store holds in memory (`stores`).
    ///
    /// # Errors
    /// [`ClientError`] (503 while the record refuses appends).
    pub async fn health(&self) -> Result<Health, ClientError> {
        typed(self.get("/v1/health").await?, "the health")
    }

    /// `GET /v1/tables`: every table's receipt, budget and health.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn tables(&self) -> Result<Vec<TableInfo>, ClientError> {
        typed(self.get("/v1/tables").await?, "the tables")
    }

    /// `GET /v1/tables/{table}/rows` with `column=value` filters (and `where`, `limit`,
    /// `snapshot`, `tag` as parameters of the same form).
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn rows(&self, table: &str, params: &[(&str, &str)]) -> Result<RowsAnswer, ClientError> {
        let query: Vec<String> = params.iter().map(|(k, v)| format!("{}={}", enc(k), enc(v))).collect();
        typed(self.get(&format!("/v1/tables/{}/rows?{}", enc(table), query.join("&"))).await?, "rows")
    }

    /// `POST /v1/reads`: several tables as of one record offset, e.g.
    /// `[TableRead::table("stock").key("item", "bolt"), TableRead::table("supplier_risk")]`.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn consistent_read(&self, tables: &[TableRead]) -> Result<ConsistentAnswer, ClientError> {
        // The body of `ConsistentRead`, serialized from the caller's slice without a copy.
        typed(self.post("/v1/reads", &json!({ "tables": tables })).await?, "a consistent read")
    }

    /// `GET /v1/triggers/{trigger}/firings`: firings after the caller's cursor (moved unless
    /// `ack` is false).
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn firings(
        &self,
        trigger: &str,
        consumer: Option<&str>,
        ack: bool,
    ) -> Result<Firings, ClientError> {
        let mut q = format!("ack={ack}");
        if let Some(c) = consumer {
            q.push_str(&format!("&consumer={}", enc(c)));
        }
        typed(self.get(&format!("/v1/triggers/{}/firings?{q}", enc(trigger))).await?, "firings")
    }

    /// `GET /v1/tables/{table}/schema`: columns and types, primary key, merge engine, budget.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn schema(&self, table: &str) -> Result<TableSchema, ClientError> {
        typed(self.get(&format!("/v1/tables/{}/schema", enc(table))).await?, "a table's schema")
    }

    /// `POST /v1/sql`: one read-only query; rows and a receipt per table read.
    ///
    /// # Errors
    /// [`ClientError`] (400 names why a query is refused).
    pub async fn sql(&self, query: &str, limit: Option<usize>) -> Result<SqlAnswer, ClientError> {
        let body =
            serde_json::to_value(SqlRequest { query: query.to_string(), limit }).expect("a query serializes");
        let v = self.post("/v1/sql", &body).await?;
        typed(v, "a SQL answer")
    }

    /// The next firing of `trigger` for the caller, handed over (acknowledged) at once.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn next_firing(&self, trigger: &str) -> Result<Option<Firing>, ClientError> {
        let v = self.get(&format!("/v1/triggers/{}/firings?limit=1", enc(trigger))).await?;
        let answer: Firings = typed(v, "firings")?;
        Ok(answer.firings.into_iter().next())
    }

    /// `POST /v1/proposals`: a [`NewProposal`], or any value that serializes to one (an agent
    /// that builds its proposal as JSON; the server names what does not fit).
    ///
    /// # Errors
    /// [`ClientError`]: 400 naming the field that does not fit, 409 for an idempotency key used
    /// for another request.
    pub async fn propose<P: serde::Serialize + ?Sized>(&self, proposal: &P) -> Result<Proposed, ClientError> {
        let body = serde_json::to_value(proposal)
            .map_err(|e| ClientError::Answer { what: "a proposal".into(), message: e.to_string() })?;
        typed(self.post("/v1/proposals", &body).await?, "a proposal's answer")
    }

    /// `GET /v1/proposals[?status=]`, newest first.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn proposals(&self, status: Option<ProposalStatus>) -> Result<ProposalList, ClientError> {
        let v = match status {
            Some(s) => self.get(&format!("/v1/proposals?status={s}")).await?,
            None => self.get("/v1/proposals").await?,
        };
        typed(v, "a list of proposals")
    }

    /// `GET /v1/proposals/{id}`.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn proposal(&self, id: &str) -> Result<ProposalDoc, ClientError> {
        typed(self.get(&format!("/v1/proposals/{}", enc(id))).await?, "a proposal")
    }

    /// `POST /v1/proposals/{id}/decision`.
    ///
    /// # Errors
    /// [`ClientError`] (409 when already decided).
    pub async fn decide(&self, id: &str, approve: bool, reason: &str) -> Result<Decided, ClientError> {
        let decision = NewDecision {
            decision: if approve { Verdict::Approve } else { Verdict::Reject },
            reason: reason.to_string(),
        };
        let body = serde_json::to_value(&decision).expect("a decision serializes");
        typed(self.post(&format!("/v1/proposals/{}/decision", enc(id)), &body).await?, "a decision's answer")
    }

    /// `GET /v1/proposals/{id}/audit`.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn audit(&self, id: &str) -> Result<Audit, ClientError> {
        let v = self.get(&format!("/v1/proposals/{}/audit", enc(id))).await?;
        typed(v, "an audit")
    }

    /// `GET /v1/proposals/{id}/sheet`: every input of the decision with its receipt, its lag
    /// against the decision's need and its value now, the rule's arithmetic and the verdict
    /// whether the inputs were read at one instant.
    ///
    /// # Errors
    /// [`ClientError`]; 404 for an unknown proposal or one of an undeclared kind.
    pub async fn sheet(&self, id: &str) -> Result<sheet::Sheet, ClientError> {
        typed(self.get(&format!("/v1/proposals/{}/sheet", enc(id))).await?, "a sheet")
    }

    /// `GET /v1/decision-kinds`: each declared decision kind's module, action fields, inputs
    /// (table, column, key, need), rule and summary template.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn decision_kinds(&self) -> Result<sheet::KindList, ClientError> {
        let v = self.get("/v1/decision-kinds").await?;
        typed(v, "a list of decision kinds")
    }

    /// `GET /v1/decision-kinds/{kind}/history?since=`: how often the kind's decisions are made
    /// and how long they take; per input how often it changed before the decision and was
    /// staler than needed; how often the inputs were not read at one instant.
    ///
    /// # Errors
    /// [`ClientError`]; 404 for an undeclared kind, 400 for a `since` that is not a duration.
    pub async fn decision_history(&self, kind: &str, since: &str) -> Result<sheet::History, ClientError> {
        let v = self.get(&format!("/v1/decision-kinds/{}/history?since={}", enc(kind), enc(since))).await?;
        typed(v, "a decision history")
    }

    /// `GET /v1/outbox/{module}?after=`.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn outbox(&self, module: &str, after: u64) -> Result<Outbox, ClientError> {
        typed(self.get(&format!("/v1/outbox/{}?after={after}", enc(module))).await?, "an outbox")
    }

    /// `GET /metrics` (Prometheus text).
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn metrics(&self) -> Result<String, ClientError> {
        match self.get("/metrics").await? {
            Value::String(s) => Ok(s),
            other => Ok(other.to_string()),
        }
    }
}

enum Body<'a> {
    Json(&'a Value),
    Lines(&'a str),
}
