//! Every MCP tool and resource × every kind of caller, through a real MCP client session (the
//! SDK's client over an in-process duplex pipe to [`LivestateMcp`], which calls a running
//! server over HTTP with the caller's token). A tool succeeds exactly where the role matrix of
//! the agent boundary allows and otherwise answers with the API's refusal (401 or 403 naming
//! the caller and the missing permission). A token revoked while a session is open stops
//! working on the next call; the principals file holds hashes only; writing through the `sql`
//! tool is refused and changes nothing.

use std::path::{Path, PathBuf};

use livestate_client::{Client, TableRead};
use livestate_mcp::LivestateMcp;
use livestate_testkit::InProcessServer;
use rmcp::model::{CallToolRequestParams, ErrorCode, ReadResourceRequestParams, ResourceContents};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::ServiceExt;
use serde_json::{json, Value};

/// The principals every test server has, with their scopes.
const PRINCIPALS: [(&str, &[&str]); 5] = [
    ("agent:procurement", &[]),
    ("person:ana", &["procurement"]),
    ("module:inventory", &[]),
    ("admin", &[]),
    // Revoked before any session starts.
    ("agent:retired", &[]),
];

/// A token of the right shape that nobody holds.
const UNKNOWN_TOKEN: &str = "lst_000000000000000000000000000000000000000000000000";

/// The example directory served in this process, with a token per principal (`agent:retired`'s
/// revoked).
struct Server(InProcessServer);

impl std::ops::Deref for Server {
    type Target = InProcessServer;

    fn deref(&self) -> &InProcessServer {
        &self.0
    }
}

impl Server {
    fn client(&self, principal: &str) -> Client {
        Client::new(&self.url(), self.token(principal)).unwrap()
    }

    /// The offset the next recorded event will get (`/v1/health` is public).
    async fn record_next_offset(&self) -> Value {
        let health: Value =
            reqwest::get(format!("{}/v1/health", self.url())).await.unwrap().json().await.unwrap();
        health["record_next_offset"].clone()
    }

    async fn stop(&mut self) {
        self.0.stop().await;
    }
}

/// The example company's spec, `stock` at a 200 ms budget so reads see new events quickly.
fn spec(dir: &Path) -> PathBuf {
    livestate_testkit::example_spec().freshness("stock", "200ms").write(&dir.join("spec"))
}

/// Initialises a directory, issues a token per principal (revoking `agent:retired`'s), and
/// serves it on loopback.
async fn start() -> Server {
    let server = InProcessServer::start(spec, &PRINCIPALS, livestate_server::ServeConfig::default()).await;
    livestate_server::auth::revoke_principal(&server.principals_file(), "agent:retired").unwrap();
    Server(server)
}

type Session = RunningService<RoleClient, ()>;

/// An MCP client session with a `livestate mcp` server acting with `token`.
async fn session(url: &str, token: &str) -> Session {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let mcp = LivestateMcp::new(url, token).unwrap();
    tokio::spawn(async move {
        if let Ok(running) = mcp.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.expect("the MCP handshake succeeds whatever the token")
}

/// What a call answered: success or not, and its text.
#[derive(Debug)]
struct Answer {
    ok: bool,
    text: String,
    /// The MCP error code, for protocol errors (resources); tools answer with error results.
    code: Option<i32>,
}

async fn call_tool(s: &Session, tool: &str, args: Value) -> Answer {
    let Value::Object(args) = args else { panic!("arguments are an object") };
    let result = s
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: the tool answers (success or error result), got {e}"));
    let text = result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect();
    Answer { ok: result.is_error != Some(true), text, code: None }
}

fn protocol_answer<T>(r: Result<T, ServiceError>, text: impl FnOnce(T) -> String) -> Answer {
    match r {
        Ok(v) => Answer { ok: true, text: text(v), code: None },
        Err(ServiceError::McpError(e)) => {
            Answer { ok: false, text: e.message.to_string(), code: Some(e.code.0) }
        }
        Err(e) => panic!("the server answers with a result or an MCP error, got {e}"),
    }
}

async fn list_resources(s: &Session) -> Answer {
    protocol_answer(s.list_resources(None).await, |r| {
        r.resources.iter().map(|r| r.uri.clone()).collect::<Vec<_>>().join(" ")
    })
}

async fn read_resource(s: &Session, uri: &str) -> Answer {
    protocol_answer(s.read_resource(ReadResourceRequestParams::new(uri)).await, |r| {
        r.contents
            .iter()
            .map(|c| match c {
                ResourceContents::TextResourceContents { text, .. } => text.clone(),
                ResourceContents::BlobResourceContents { blob, .. } => blob.clone(),
                other => panic!("text or blob contents, got {other:?}"),
            })
            .collect()
    })
}

fn proposal(snapshot: i64, key: &str) -> Value {
    json!({
        "kind": "replenishment_order", "module": "procurement", "summary": "order 10 bolts",
        "action": {"item": "bolt", "qty": 10},
        "sources": [{"table": "stock", "snapshot_id": snapshot, "keys": [{"item": "bolt"}]}],
        "rule": {"name": "order-up-to-target", "version": "1", "text": "order up to target"},
        "risk": {"level": "low", "reasons": []},
        "idempotency_key": key
    })
}

/// Counts bolts at north as the administrator and commits the count; returns the stock snapshot.
async fn bolt_in_stock(server: &Server) -> i64 {
    let admin = server.client("admin");
    let line =
        json!({"id": "bolt-5", "type": "inventory.stock_counted", "occurred_at": "2026-03-02T08:00:00Z",
        "data": {"item": "bolt", "location": "north", "on_hand": 5}})
        .to_string()
            + "\n";
    admin.emit(&line).await.unwrap();
    let read = admin.consistent_read(&[TableRead::table("stock").key("item", "bolt")]).await.unwrap();
    let snapshot = read.results.first().and_then(|r| r.receipt.snapshot_id);
    assert!(snapshot.is_some(), "the count is committed: {read}");
    snapshot.unwrap()
}

const READERS: &[&str] = &["agent:procurement", "person:ana", "admin"];

/// Who calls: each principal by its token, a revoked token, and a token nobody holds.
const CALLERS: [&str; 6] =
    ["agent:procurement", "person:ana", "module:inventory", "admin", "agent:retired", "(unknown)"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mcp_tool_and_resource_answers_every_caller_as_the_role_matrix_says() {
    let mut server = start().await;
    let snapshot = bolt_in_stock(&server).await;
    let seed = server.client("agent:procurement").propose(&proposal(snapshot, "seed")).await.unwrap();
    let id = seed.id.clone();

    // Tool, arguments, who may.
    let tools: Vec<(&str, Value, &[&str])> = vec![
        ("list_tables", json!({}), READERS),
        ("describe_table", json!({"table": "stock"}), READERS),
        ("read_rows", json!({"table": "stock", "keys": {"item": "bolt"}}), READERS),
        ("consistent_read", json!({"tables": [{"table": "stock"}, {"table": "work_queue"}]}), READERS),
        ("sql", json!({"query": "SELECT item, on_hand FROM stock"}), READERS),
        ("propose", proposal(snapshot, "matrix"), &["agent:procurement"]),
        ("proposal_status", json!({"id": id}), READERS),
        ("decision_kinds", json!({}), READERS),
        ("decision_history", json!({"kind": "stock_replenishment"}), READERS),
        (
            "wait_for_trigger",
            json!({"trigger": "job_blocked", "timeout_seconds": 0}),
            &["agent:procurement", "admin"],
        ),
    ];

    let mut wrong = Vec::new();
    let mut check = |what: &str, caller: &str, allowed: bool, a: Answer| {
        let refusal_named = match caller {
            "agent:retired" | "(unknown)" => a.text.contains("401") && a.text.contains("not valid"),
            _ => a.text.contains("403") && a.text.contains(caller) && a.text.contains("lacks permission"),
        };
        // A refused resource is an invalid request, not a resource that does not exist.
        let code_right = a.code.is_none() || a.code == Some(ErrorCode::INVALID_REQUEST.0);
        let right = if allowed { a.ok } else { !a.ok && refusal_named && code_right };
        if !right {
            wrong.push(format!(
                "{what} as {caller}: expected {}, got {a:?}",
                if allowed { "success" } else { "a refusal" }
            ));
        }
    };
    for caller in CALLERS {
        let token = match caller {
            "(unknown)" => UNKNOWN_TOKEN,
            name => server.token(name),
        };
        let s = session(&server.url(), token).await;
        for (tool, args, allowed) in &tools {
            let a = call_tool(&s, tool, args.clone()).await;
            check(tool, caller, allowed.contains(&caller), a);
        }
        check("resources/list", caller, READERS.contains(&caller), list_resources(&s).await);
        let mut a = read_resource(&s, "livestate://tables/stock").await;
        // A resource read that succeeds must hold the table's schema.
        a.ok &= !a.ok || a.text.contains("\"primary_key\"");
        check("resources/read", caller, READERS.contains(&caller), a);
        s.cancel().await.unwrap();
    }
    assert!(wrong.is_empty(), "unexpected answers:\n{}", wrong.join("\n"));

    // Of every proposal attempt, only the agent's own went through.
    let all = server.client("admin").proposals(None).await.unwrap();
    let agents: Vec<&str> = all.proposals.iter().map(|p| p.agent.as_str()).collect();
    assert_eq!(agents, vec!["procurement", "procurement"], "{all:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_during_an_open_session_stops_working_on_the_next_call() {
    let mut server = start().await;
    let agent = session(&server.url(), server.token("agent:procurement")).await;
    let person = session(&server.url(), server.token("person:ana")).await;
    let before = call_tool(&agent, "list_tables", json!({})).await;
    assert!(before.ok, "{before:?}");
    assert!(before.text.contains("\"stock\""), "{}", before.text);

    // The store API `livestate token revoke` uses; the server and the session keep running.
    livestate_server::auth::revoke_principal(&server.principals_file(), "agent:procurement").unwrap();

    for (tool, args) in [
        ("list_tables", json!({})),
        ("read_rows", json!({"table": "stock"})),
        ("wait_for_trigger", json!({"trigger": "job_blocked", "timeout_seconds": 0})),
    ] {
        let after = call_tool(&agent, tool, args).await;
        assert!(!after.ok, "{tool} after revocation: {after:?}");
        assert!(
            after.text.contains("401") && after.text.contains("unknown or revoked"),
            "{tool}: {}",
            after.text
        );
    }
    let resource = read_resource(&agent, "livestate://tables/stock").await;
    assert!(!resource.ok && resource.text.contains("401"), "{resource:?}");
    // Everyone else's session goes on.
    let other = call_tool(&person, "list_tables", json!({})).await;
    assert!(other.ok, "{other:?}");

    // On disk: one SHA-256 per principal, no token in clear.
    let bytes = std::fs::read(server.principals_file()).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    for (name, token) in server.tokens() {
        assert!(
            !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
            "{name}'s token is in the principals file"
        );
        let hash = livestate_server::auth::hash_token(token);
        let listed = text.contains(&hash);
        let expected = !matches!(name, "agent:retired" | "agent:procurement");
        assert_eq!(listed, expected, "{name}'s hash in the file: {text}");
    }
    assert!(!text.contains("lst_"), "no token-shaped text at all: {text}");
    agent.cancel().await.unwrap();
    person.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_through_the_sql_tool_is_refused_and_changes_nothing() {
    let mut server = start().await;
    bolt_in_stock(&server).await;
    let admin = server.client("admin");
    let tables_before = livestate_testkit::snapshots_and_tags(&admin.tables().await.unwrap());
    let offset_before = server.record_next_offset().await;

    let agent = session(&server.url(), server.token("agent:procurement")).await;
    let tricks = [
        "INSERT INTO stock (item, location, on_hand) VALUES ('bolt', 'north', 999)",
        "DELETE FROM stock WHERE item = 'bolt'",
        "UPDATE stock SET on_hand = 0",
        "DROP TABLE stock",
        "CREATE TABLE evil AS SELECT * FROM stock",
        "SELECT 1; DELETE FROM stock",
        "SELECT 1 /* harmless */; DROP TABLE stock -- ;",
        "COPY stock TO '/tmp/livestate-stock-copy.csv'",
        "COPY (SELECT * FROM stock) TO 'stock-copy.parquet' STORED AS PARQUET",
        "CALL sys.create_tag('state.stock', 'evil', 1)",
        "CALL sys.expire_snapshots('state.stock', 1)",
        "SET datafusion.execution.batch_size = 1",
    ];
    let mut wrong = Vec::new();
    for q in tricks {
        let a = call_tool(&agent, "sql", json!({"query": q})).await;
        if a.ok || !a.text.contains("400") {
            wrong.push(format!("{q}: {a:?}"));
        }
    }
    assert!(wrong.is_empty(), "not refused with a 400:\n{}", wrong.join("\n"));
    assert!(!Path::new("/tmp/livestate-stock-copy.csv").exists(), "COPY wrote nothing");

    // Still readable, same rows, same snapshots, no tag, no event appended.
    let read = call_tool(&agent, "read_rows", json!({"table": "stock", "keys": {"item": "bolt"}})).await;
    let rows: Value = serde_json::from_str(&read.text).unwrap();
    assert_eq!(rows["rows"][0]["on_hand"], json!(5), "{rows}");
    assert_eq!(livestate_testkit::snapshots_and_tags(&admin.tables().await.unwrap()), tables_before);
    assert_eq!(server.record_next_offset().await, offset_before);
    agent.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_learns_what_a_kind_needs_is_refused_an_input_short_and_reads_the_sheet() {
    let mut server = start().await;
    let admin = server.client("admin");
    let event = |id: &str, ty: &str, data: Value| {
        json!({"id": id, "type": ty, "occurred_at": "2026-03-02T08:00:00Z", "data": data}).to_string() + "\n"
    };
    let lines = [
        event("c1", "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 5})),
        event(
            "l1",
            "procurement.supplier_item_listed",
            json!({"supplier": "acme", "item": "bolt", "pack_size": 10, "unit_price": "1.00", "lead_time_days": 1}),
        ),
        event("s1", "procurement.supplier_risk_assessed", json!({"supplier": "other", "level": "high"})),
    ];
    admin.emit(&lines.concat()).await.unwrap();
    let agent = session(&server.url(), server.token("agent:procurement")).await;

    // What the kind needs: every input with its table, column, key and need.
    let kinds = call_tool(&agent, "decision_kinds", json!({})).await;
    assert!(kinds.ok, "{kinds:?}");
    let kinds: Value = serde_json::from_str(&kinds.text).unwrap();
    let kind =
        kinds["kinds"].as_array().unwrap().iter().find(|k| k["name"] == "stock_replenishment").unwrap();
    let inputs: Vec<(&str, &str)> = kind["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["table"].as_str().unwrap(), i["column"].as_str().unwrap()))
        .collect();
    assert!(
        inputs.contains(&("supplier_risk", "level")) && inputs.contains(&("stock", "on_hand")),
        "{inputs:?}"
    );

    let read = call_tool(
        &agent,
        "consistent_read",
        json!({"tables": [
            {"table": "stock", "keys": {"item": "bolt"}},
            {"table": "supplier_items", "keys": {"item": "bolt"}},
            {"table": "supplier_risk", "keys": {"supplier": "acme"}},
        ]}),
    )
    .await;
    let read: Value = serde_json::from_str(&read.text).unwrap();
    let receipt = |i: usize| &read["results"][i]["receipt"];
    let cite = |i: usize| json!({"table": receipt(i)["table"], "snapshot_id": receipt(i)["snapshot_id"], "rows": [read["results"][i]["rows"][0]]});
    let mut args = json!({
        "kind": "stock_replenishment", "module": "procurement", "summary": "order 10 bolts",
        "action": {"item": "bolt", "location": "north", "supplier": "acme", "qty": 10},
        "sources": [cite(0), cite(1)],
        "rule": {"name": "r", "version": "1", "text": "order up to target"},
        "risk": {"level": "low", "reasons": []},
    });
    // acme has no risk row; without citing the key read the proposal is refused naming the input.
    let refused = call_tool(&agent, "propose", args.clone()).await;
    assert!(!refused.ok && refused.text.contains("input `supplier_risk`"), "{refused:?}");
    // Citing the key read (no row there) cites the input: its value is null.
    assert!(read["results"][2]["rows"].as_array().unwrap().is_empty(), "{read}");
    assert!(receipt(2)["snapshot_id"].is_i64(), "{read}");
    args["sources"].as_array_mut().unwrap().push(json!({"table": "supplier_risk", "snapshot_id": receipt(2)["snapshot_id"], "keys": [{"supplier": "acme"}]}));
    let made = call_tool(&agent, "propose", args).await;
    assert!(made.ok, "{made:?}");
    let id = serde_json::from_str::<Value>(&made.text).unwrap()["id"].as_str().unwrap().to_string();

    let sheet = call_tool(&agent, "decision_sheet", json!({"id": id})).await;
    assert!(sheet.ok, "{sheet:?}");
    let sheet: Value = serde_json::from_str(&sheet.text).unwrap();
    let input =
        |n: &str| sheet["inputs"].as_array().unwrap().iter().find(|i| i["name"] == n).unwrap().clone();
    assert_eq!(input("on_hand")["value"], json!(5));
    assert_eq!(input("pack_size")["value"], json!(10));
    assert_eq!(input("supplier_risk")["value"], Value::Null);
    assert_eq!(sheet["verdict"]["one_instant"], json!(true), "one consistent read: {}", sheet["verdict"]);
    let history =
        call_tool(&agent, "decision_history", json!({"kind": "stock_replenishment", "since": "1d"})).await;
    assert!(history.ok, "{history:?}");
    let history: Value = serde_json::from_str(&history.text).unwrap();
    assert_eq!((history["proposals"].clone(), history["pending"].clone()), (json!(1), json!(1)), "{history}");
    agent.cancel().await.unwrap();
    server.stop().await;
}
