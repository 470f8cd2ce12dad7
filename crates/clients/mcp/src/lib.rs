//! `livestate mcp`: a Model Context Protocol server on stdio for LLM agents.
//!
//! Every tool is one call of the public HTTP API with the agent's own token (through
//! [`livestate_client`]), so the token decides what the agent may do and this server adds no
//! power of its own: an agent token reads, subscribes and proposes; it cannot decide, emit or
//! write state, here or anywhere. Every tool that reads state returns the receipts it got, so
//! the agent can cite them in a proposal. Table schemas are resources (`livestate://tables/NAME`).

use std::time::Duration;

use livestate_client::{Client, ClientError, ErrorCode, ErrorKind, TableRead};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource, ResourceContents,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{
    schemars, tool, tool_handler, tool_router, ErrorData as McpError, RoleServer, ServerHandler, ServiceExt,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Why the MCP server stopped.
#[derive(Debug, thiserror::Error)]
pub enum McpServerError {
    #[error("{0}")]
    Client(#[from] ClientError),
    #[error("MCP transport: {0}")]
    Transport(String),
}

impl McpServerError {
    /// Whose failure this is: the client's kind, or unavailable when the MCP transport fails.
    pub fn kind(&self) -> ErrorKind {
        match self {
            McpServerError::Client(e) => e.kind(),
            McpServerError::Transport(_) => ErrorKind::Unavailable,
        }
    }
}

/// The MCP server: a client of the livestate API with one agent's token.
#[derive(Clone)]
pub struct LivestateMcp {
    client: Client,
    tool_router: ToolRouter<LivestateMcp>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct TableArg {
    /// A state table, e.g. `stock`
    pub table: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ReadRowsArgs {
    /// A state table, e.g. `stock`
    pub table: String,
    /// Column filters, e.g. {"item": "part-0001"}
    #[serde(default)]
    pub keys: Map<String, Value>,
    /// A condition over the columns, e.g. `on_hand < 10 and location == 'north'`
    #[serde(default, rename = "where")]
    pub condition: Option<String>,
    /// At most this many rows (default 100)
    #[serde(default)]
    pub limit: Option<usize>,
    /// Read this past snapshot instead of the latest
    #[serde(default)]
    pub snapshot: Option<i64>,
    /// Read the snapshot this tag pins
    #[serde(default)]
    pub tag: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ConsistentReadArgs {
    /// Tables to read as of one record offset: each {"table", "keys"?, "where"?, "limit"?}
    pub tables: Vec<Value>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SqlArgs {
    /// One read-only query, e.g. `SELECT item, sum(on_hand) FROM stock GROUP BY item`; time travel with `FROM stock VERSION AS OF 12`
    pub query: String,
    /// At most this many rows (default 1000)
    #[serde(default)]
    pub limit: Option<usize>,
}

// The `propose` tool's arguments are also the body it sends: the agent's proposal as it wrote
// it, field for field a `NewProposal`. Its sources, rule and risk go to the server untouched, so
// the server checks the token first and then names what does not fit, as for any agent. (A `//`
// comment: a doc comment would become the tool's schema description.)
#[derive(Debug, Deserialize, Serialize, schemars::JsonSchema)]
pub struct ProposeArgs {
    /// What kind of action, e.g. `stock_replenishment`; a declared kind (see decision_kinds) must cite every input
    pub kind: String,
    /// The module that would carry it out, e.g. `procurement`
    pub module: String,
    /// One line for the approval inbox
    pub summary: String,
    /// The drafted action (a JSON object)
    pub action: Map<String, Value>,
    /// What you read: each {"table", "snapshot_id", "offset"?, "keys"?, "rows"?}, from the receipts
    pub sources: Vec<Value>,
    /// The rule applied: {"name", "version", "parameters"?, "text"}
    pub rule: Value,
    /// {"level": "low"|"medium"|"high", "reasons": [...]}
    pub risk: Value,
    /// Retrying with the same key makes no second proposal
    // Left out of the body when absent; the schema still says it defaults to null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = null))]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ProposalArg {
    /// A proposal id, e.g. `p0123456789abcd`
    pub id: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct HistoryArgs {
    /// A declared decision kind, e.g. `stock_replenishment`
    pub kind: String,
    /// How far back, e.g. `30d` (default), `12h`
    #[serde(default)]
    pub since: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WaitArgs {
    /// A trigger, e.g. `stock_below_reorder_point`
    pub trigger: String,
    /// Give up after this many seconds (default 30, at most 300)
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

fn answer<T: Serialize>(v: Result<T, ClientError>) -> Result<CallToolResult, McpError> {
    match v {
        Ok(v) => Ok(CallToolResult::success(vec![ContentBlock::text(
            serde_json::to_string_pretty(&v).unwrap_or_default(),
        )])),
        // The API's refusal (403, 400, 404...) is the tool's answer: the agent reads why.
        Err(e) => Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())])),
    }
}

#[tool_router]
impl LivestateMcp {
    /// A server acting with `token` against the livestate API at `url`.
    ///
    /// # Errors
    /// A URL that is not http(s).
    pub fn new(url: &str, token: &str) -> Result<LivestateMcp, ClientError> {
        Ok(LivestateMcp { client: Client::new(url, token)?, tool_router: Self::tool_router() })
    }

    #[tool(
        description = "List the state tables: merge engine, freshness budget, and each table's receipt (snapshot, record offset, lag, whether within budget)."
    )]
    async fn list_tables(&self) -> Result<CallToolResult, McpError> {
        answer(self.client.tables().await.map(|t| {
            let list: Vec<Value> = t
                .iter()
                .map(|i| json!({"name": i.name, "merge_engine": i.merge_engine, "budget": i.receipt.budget, "receipt": i.receipt}))
                .collect();
            json!({"tables": list})
        }))
    }

    #[tool(
        description = "Describe one table: columns and types, primary key, merge engine, freshness budget, current lag, snapshots and tags."
    )]
    async fn describe_table(&self, Parameters(a): Parameters<TableArg>) -> Result<CallToolResult, McpError> {
        answer(self.describe(&a.table).await)
    }

    #[tool(
        description = "Read rows of a table by key or simple filters, with a receipt (snapshot, record offset, lag) to cite in a proposal."
    )]
    async fn read_rows(&self, Parameters(a): Parameters<ReadRowsArgs>) -> Result<CallToolResult, McpError> {
        let mut params: Vec<(String, String)> = a
            .keys
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string)))
            .collect();
        if let Some(w) = a.condition {
            params.push(("where".into(), w));
        }
        params.push(("limit".into(), a.limit.unwrap_or(100).to_string()));
        if let Some(s) = a.snapshot {
            params.push(("snapshot".into(), s.to_string()));
        }
        if let Some(t) = a.tag {
            params.push(("tag".into(), t));
        }
        let refs: Vec<(&str, &str)> = params.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        answer(self.client.rows(&a.table, &refs).await)
    }

    #[tool(
        description = "Read several tables as of ONE record offset (a consistent snapshot across tables), each with its receipt."
    )]
    async fn consistent_read(
        &self,
        Parameters(a): Parameters<ConsistentReadArgs>,
    ) -> Result<CallToolResult, McpError> {
        let mut tables = Vec::with_capacity(a.tables.len());
        for (i, t) in a.tables.into_iter().enumerate() {
            match serde_json::from_value::<TableRead>(t) {
                Ok(t) => tables.push(t),
                // The agent reads which entry does not fit and why.
                Err(e) => {
                    return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                        "tables[{i}] is not {{\"table\", \"keys\"?, \"where\"?, \"limit\"?}}: {e}"
                    ))]))
                }
            }
        }
        answer(self.client.consistent_read(&tables).await)
    }

    #[tool(
        description = "Run one read-only SQL query over the state tables (no INSERT, CALL, DDL, COPY or second statement; row and time limits). The answer carries a receipt per table read."
    )]
    async fn sql(&self, Parameters(a): Parameters<SqlArgs>) -> Result<CallToolResult, McpError> {
        answer(self.client.sql(&a.query, a.limit).await)
    }

    #[tool(
        description = "Propose an action for a person to approve: kind, module, summary, drafted action, the sources you read (receipts and rows), the rule applied and the risk. Returns the proposal id and the tags pinning your sources."
    )]
    async fn propose(&self, Parameters(a): Parameters<ProposeArgs>) -> Result<CallToolResult, McpError> {
        answer(self.client.propose(&a).await)
    }

    #[tool(
        description = "The decision kinds this company declares, and what a proposal of each must hold: its module, the action's fields, every input (a table column read by a key taken from the action, and how fresh the decision needs it), the rule's arithmetic and the summary template. A proposal of a declared kind must cite a receipt (snapshot and row, or the key) for every input, or it is refused naming the input: read these before you propose."
    )]
    async fn decision_kinds(&self) -> Result<CallToolResult, McpError> {
        answer(self.client.decision_kinds().await)
    }

    #[tool(
        description = "The input sheet of a proposal of a declared kind: each input's value as the pinned snapshot holds it, its table, key, snapshot, offset and lag against the decision's need, its value now and whether it changed since; the rule's arithmetic with the numbers in it; and whether all inputs were read at one instant."
    )]
    async fn decision_sheet(
        &self,
        Parameters(a): Parameters<ProposalArg>,
    ) -> Result<CallToolResult, McpError> {
        let sheet = self.client.sheet(&a.id).await.map(|sh| serde_json::to_value(sh).unwrap_or_default());
        answer(sheet)
    }

    #[tool(
        description = "A declared decision kind over history (default the last 30 days): proposals per day, approvals, time to decide, and per input how often it changed between the agent's read and the decision and how often it was staler than the decision needs, and how often the inputs were not read at one instant."
    )]
    async fn decision_history(
        &self,
        Parameters(a): Parameters<HistoryArgs>,
    ) -> Result<CallToolResult, McpError> {
        let since = a.since.as_deref().unwrap_or("30d");
        let h = self.client.decision_history(&a.kind, since).await;
        answer(h.map(|h| serde_json::to_value(h).unwrap_or_default()))
    }

    #[tool(
        description = "The status of a proposal (pending, approved, rejected), its decision and its document."
    )]
    async fn proposal_status(
        &self,
        Parameters(a): Parameters<ProposalArg>,
    ) -> Result<CallToolResult, McpError> {
        answer(self.client.proposal(&a.id).await)
    }

    #[tool(
        description = "Wait for the next firing of a trigger for this agent (its own cursor): the row's key, before and after, and the snapshot that committed it."
    )]
    async fn wait_for_trigger(
        &self,
        Parameters(a): Parameters<WaitArgs>,
    ) -> Result<CallToolResult, McpError> {
        let deadline =
            tokio::time::Instant::now() + Duration::from_secs(a.timeout_seconds.unwrap_or(30).min(300));
        loop {
            match self.client.next_firing(&a.trigger).await {
                Ok(Some(f)) => {
                    return answer(Ok(json!({"firing": serde_json::to_value(f).unwrap_or_default()})))
                }
                Ok(None) => {}
                Err(e) => return answer::<Value>(Err(e)),
            }
            if tokio::time::Instant::now() >= deadline {
                return answer(Ok(json!({"firing": null, "note": "no firing before the timeout"})));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl LivestateMcp {
    async fn describe(&self, table: &str) -> Result<Value, ClientError> {
        let tables = self.client.tables().await?;
        let info = tables
            .into_iter()
            .find(|t| t.name == table)
            .ok_or_else(|| ClientError::api(ErrorCode::NotFound, format!("unknown table `{table}`")))?;
        let schema = self.client.schema(table).await?;
        Ok(
            json!({"name": table, "schema": schema, "merge_engine": info.merge_engine, "receipt": info.receipt, "health": info.health}),
        )
    }
}

/// The API's refusal as an MCP protocol error, by its kind: not found is "resource not found",
/// another refusal of the caller's request (a bad parameter, a conflict, a missing permission)
/// an invalid request, anything else an internal error. The message keeps the status and the
/// server's words.
fn protocol_error(e: ClientError) -> McpError {
    match e.kind() {
        ErrorKind::NotFound => McpError::resource_not_found(e.to_string(), None),
        ErrorKind::Input | ErrorKind::Conflict => McpError::invalid_request(e.to_string(), None),
        ErrorKind::Unavailable | ErrorKind::Internal => McpError::internal_error(e.to_string(), None),
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for LivestateMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().build())
            .with_server_info(Implementation::new("livestate", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Read the company's live state with receipts, propose actions citing them; a person decides. \
                 Use consistent_read to see several tables as of one moment.",
            )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let tables = self.client.tables().await.map_err(protocol_error)?;
        let resources: Vec<Resource> = tables
            .into_iter()
            .map(|t| Resource::new(format!("livestate://tables/{}", t.name), t.name))
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let Some(table) = request.uri.strip_prefix("livestate://tables/") else {
            return Err(McpError::resource_not_found(format!("no resource {}", request.uri), None));
        };
        let v = self.describe(table).await.map_err(protocol_error)?;
        let text = serde_json::to_string_pretty(&v).unwrap_or_default();
        Ok(ReadResourceResult::new(vec![ResourceContents::text(text, request.uri)]).into())
    }
}

/// Serves MCP on stdin/stdout until the client closes it.
///
/// # Errors
/// The transport failed.
pub async fn serve_stdio(url: &str, token: &str) -> Result<(), McpServerError> {
    let server = LivestateMcp::new(url, token)?;
    let running = server
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(|e| McpServerError::Transport(e.to_string()))?;
    running.waiting().await.map_err(|e| McpServerError::Transport(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use livestate_client::NewProposal;

    use super::*;

    fn args(idempotency_key: Option<&str>) -> ProposeArgs {
        let mut args = json!({
            "kind": "stock_replenishment", "module": "procurement", "summary": "order 10 bolts",
            "action": {"item": "bolt", "location": "north", "supplier": "acme", "qty": 10},
            "sources": [{"table": "stock", "snapshot_id": 4, "rows": [{"item": "bolt", "on_hand": 5}]},
                        {"table": "supplier_risk", "snapshot_id": 7, "keys": [{"supplier": "acme"}]}],
            "rule": {"name": "r", "version": "1", "text": "order up to target"},
            "risk": {"level": "low", "reasons": []},
        });
        if let Some(k) = idempotency_key {
            args["idempotency_key"] = json!(k);
        }
        serde_json::from_value(args).expect("the tool's arguments")
    }

    #[test]
    fn the_propose_tool_sends_the_json_it_used_to_build() {
        // What the `json!` the tool built before the typed wire gave for these arguments.
        let old = |key: Option<&str>| {
            let mut body = json!({
                "action": {"item": "bolt", "location": "north", "qty": 10, "supplier": "acme"},
                "kind": "stock_replenishment", "module": "procurement",
                "risk": {"level": "low", "reasons": []},
                "rule": {"name": "r", "text": "order up to target", "version": "1"},
                "sources": [{"rows": [{"item": "bolt", "on_hand": 5}], "snapshot_id": 4, "table": "stock"},
                            {"keys": [{"supplier": "acme"}], "snapshot_id": 7, "table": "supplier_risk"}],
                "summary": "order 10 bolts"
            });
            if let Some(k) = key {
                body["idempotency_key"] = json!(k);
            }
            body
        };
        for key in [None, Some("k-1")] {
            assert_eq!(serde_json::to_value(args(key)).expect("serializes"), old(key), "key {key:?}");
        }
    }

    #[test]
    fn the_propose_tools_schema_says_what_it_said_before_the_body_was_typed() {
        let schema = serde_json::to_value(schemars::schema_for!(ProposeArgs)).expect("serializes");
        assert_eq!(schema["properties"]["idempotency_key"]["default"], Value::Null, "{schema}");
        assert!(schema["properties"]["idempotency_key"].get("default").is_some(), "{schema}");
        assert!(schema.get("description").is_none(), "no description of the struct: {schema}");
    }

    #[test]
    fn the_propose_tools_body_is_a_new_proposal_field_for_field() {
        let body = serde_json::to_value(args(Some("k-1"))).expect("serializes");
        let p: NewProposal = serde_json::from_value(body).expect("the server's type reads every field");
        assert_eq!((p.kind.as_str(), p.idempotency_key.as_deref()), ("stock_replenishment", Some("k-1")));
        assert_eq!((p.sources.len(), p.rule.name.as_str(), p.risk.reasons.len()), (2, "r", 0));
    }
}
