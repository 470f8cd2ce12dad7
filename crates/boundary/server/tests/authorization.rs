//! Every endpoint × every role: 2xx where the role holds the permission, 401 without a valid
//! token, 403 naming the missing permission otherwise. Then bad requests: each gets a 4xx with
//! a message, and nothing stored changes.

mod common;

use common::{event, start};
use livestate_client::TableInfo;
use reqwest::Method;
use serde_json::{json, Value};

/// Who calls: a principal of the test server, no token, or a token nobody holds.
const CALLERS: [&str; 9] = [
    "(none)",
    "(bad)",
    "module:inventory",
    "module:procurement",
    "agent:procurement",
    "person:olaf",
    "admin",
    "module:commerce",
    // Last, so the matrix's one approval is made after everyone else was refused.
    "person:ana",
];

struct Call {
    method: Method,
    path: String,
    body: Option<String>,
    /// Callers that may; everyone else with a valid token gets 403.
    allowed: &'static [&'static str],
    /// No token needed.
    public: bool,
}

const READERS: &[&str] = &["agent:procurement", "person:olaf", "person:ana", "admin"];

async fn send(url: &str, token: Option<&str>, call: &Call) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut req = client.request(call.method.clone(), format!("{url}{}", call.path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = &call.body {
        req = req.body(b.clone());
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    if resp
        .headers()
        .get("content-type")
        .is_some_and(|c| c.to_str().unwrap().starts_with("text/event-stream"))
    {
        return (status, Value::Null);
    }
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn proposal(snapshot: i64, key: &str) -> String {
    json!({
        "kind": "replenishment_order", "module": "procurement", "summary": "order 10 bolts",
        "action": {"item": "bolt", "qty": 10},
        "sources": [{"table": "stock", "snapshot_id": snapshot, "keys": [{"item": "bolt"}]}],
        "rule": {"name": "r", "version": "1", "text": "order up to target"},
        "risk": {"level": "low"},
        "idempotency_key": key
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_answers_every_role_as_the_role_matrix_says() {
    let server = start().await;
    let url = server.url();
    let snapshot = common::bolt_in_stock(&server, 5).await.0.unwrap();
    let created = server
        .client("agent:procurement")
        .propose(&serde_json::from_str::<Value>(&proposal(snapshot, "seed")).unwrap())
        .await
        .unwrap();
    let id = created.id.clone();

    let calls = vec![
        Call { method: Method::GET, path: "/v1/health".into(), body: None, allowed: &[], public: true },
        Call { method: Method::GET, path: "/v1/openapi.json".into(), body: None, allowed: &[], public: true },
        Call {
            method: Method::GET,
            path: "/v1/whoami".into(),
            body: None,
            allowed: &[
                "module:inventory",
                "module:procurement",
                "module:commerce",
                "agent:procurement",
                "person:olaf",
                "person:ana",
                "admin",
            ],
            public: false,
        },
        Call {
            method: Method::GET,
            path: "/v1/principals".into(),
            body: None,
            allowed: &["admin"],
            public: false,
        },
        Call {
            method: Method::POST,
            path: "/v1/events".into(),
            body: Some(event(
                "m-1",
                "inventory.stock_counted",
                json!({"item": "nut", "location": "north", "on_hand": 5}),
            )),
            allowed: &["module:inventory", "admin"],
            public: false,
        },
        Call {
            method: Method::POST,
            path: "/v1/events".into(),
            body: Some(event(
                "d-1",
                "decisions.proposal_created",
                json!({"proposal_id": "x", "kind": "k", "agent": "a", "module": "procurement", "summary": "s", "risk_level": "low", "document": "{}"}),
            )),
            allowed: &[],
            public: false,
        },
        Call { method: Method::GET, path: "/v1/tables".into(), body: None, allowed: READERS, public: false },
        Call {
            method: Method::GET,
            path: "/v1/tables/stock/rows?item=bolt".into(),
            body: None,
            allowed: READERS,
            public: false,
        },
        Call {
            method: Method::POST,
            path: "/v1/reads".into(),
            body: Some(json!({"tables": [{"table": "stock"}, {"table": "work_queue"}]}).to_string()),
            allowed: READERS,
            public: false,
        },
        Call {
            method: Method::GET,
            path: "/v1/triggers/job_blocked/firings".into(),
            body: None,
            allowed: &["agent:procurement", "admin"],
            public: false,
        },
        Call {
            method: Method::GET,
            path: "/v1/triggers/job_blocked/stream".into(),
            body: None,
            allowed: &["agent:procurement", "admin"],
            public: false,
        },
        Call {
            method: Method::POST,
            path: "/v1/proposals".into(),
            body: Some(proposal(snapshot, "matrix")),
            allowed: &["agent:procurement"],
            public: false,
        },
        Call {
            method: Method::GET,
            path: "/v1/proposals".into(),
            body: None,
            allowed: READERS,
            public: false,
        },
        Call {
            method: Method::GET,
            path: format!("/v1/proposals/{id}"),
            body: None,
            allowed: READERS,
            public: false,
        },
        Call {
            method: Method::GET,
            path: format!("/v1/proposals/{id}/audit"),
            body: None,
            allowed: READERS,
            public: false,
        },
        Call {
            method: Method::GET,
            path: "/v1/decision-kinds".into(),
            body: None,
            allowed: READERS,
            public: false,
        },
        Call {
            method: Method::POST,
            path: format!("/v1/proposals/{id}/decision"),
            body: Some(json!({"decision": "approve", "reason": "fine"}).to_string()),
            allowed: &["person:ana"],
            public: false,
        },
        Call {
            method: Method::GET,
            path: "/v1/outbox/procurement".into(),
            body: None,
            allowed: &["module:procurement", "admin"],
            public: false,
        },
        Call { method: Method::GET, path: "/metrics".into(), body: None, allowed: READERS, public: false },
    ];

    let mut wrong = Vec::new();
    for call in &calls {
        for caller in CALLERS {
            let token = match caller {
                "(none)" => None,
                "(bad)" => Some("lst_0000000000000000000000000000000000000000000000"),
                name => Some(server.token(name)),
            };
            let (status, body) = send(&url, token, call).await;
            let ok = if call.public {
                status == 200
            } else if token.is_none() || caller == "(bad)" {
                status == 401
            } else if call.allowed.contains(&caller) {
                (200..300).contains(&status)
            } else {
                status == 403
                    && body["message"].as_str().is_some_and(|e| e.contains(caller) || e.contains("decisions"))
            };
            if !ok {
                wrong.push(format!("{} {} as {caller}: {status} {body}", call.method, call.path));
            }
        }
    }
    assert!(wrong.is_empty(), "unexpected answers:\n{}", wrong.join("\n"));
}

/// Who sends it, method, path, body, the status expected and words the message must contain.
type BadCase = (&'static str, Method, &'static str, Vec<u8>, u16, &'static str);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_a_4xx_naming_the_problem_and_change_nothing() {
    let server = start().await;
    let url = server.url();
    let admin = server.client("admin");
    let snapshot = common::bolt_in_stock(&server, 5).await.0.unwrap();
    let head_before = server.client("admin").tables().await.unwrap();
    let offset_before =
        reqwest::get(format!("{url}/v1/health")).await.unwrap().json::<Value>().await.unwrap()
            ["record_next_offset"]
            .clone();

    let good = serde_json::from_str::<Value>(&proposal(snapshot, "k")).unwrap();
    let with = |path: &str, value: Value| {
        let mut p = good.clone();
        let mut at = &mut p;
        let parts: Vec<&str> = path.split('.').collect();
        for part in &parts[..parts.len() - 1] {
            at = match part.parse::<usize>() {
                Ok(i) => &mut at[i],
                Err(_) => &mut at[*part],
            };
        }
        at[parts[parts.len() - 1]] = value;
        p.to_string()
    };
    let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_action = good
        .to_string()
        .replace(r#""action":{"item":"bolt","qty":10}"#, &format!(r#""action":{{"a":{deep}}}"#));
    assert!(deep_action.len() > 20_000);
    let huge = format!("{{\"tables\": [{{\"table\": \"{}\"}}]}}", "x".repeat(5 << 20));
    let cases: Vec<BadCase> = vec![
        ("agent:procurement", Method::POST, "/v1/reads", b"{not json".to_vec(), 400, "request body"),
        (
            "agent:procurement",
            Method::POST,
            "/v1/reads",
            br#"{"tables": [{"table": "stock", "colour": 1}]}"#.to_vec(),
            400,
            "unknown field `colour`",
        ),
        (
            "agent:procurement",
            Method::POST,
            "/v1/reads",
            br#"{"tables": [{"table": "stok"}]}"#.to_vec(),
            404,
            "stok",
        ),
        ("agent:procurement", Method::POST, "/v1/reads", br#"{"tables": []}"#.to_vec(), 400, "1 to 32"),
        ("agent:procurement", Method::POST, "/v1/reads", Vec::new(), 400, "empty"),
        ("agent:procurement", Method::POST, "/v1/reads", huge.into_bytes(), 413, ""),
        ("agent:procurement", Method::GET, "/v1/tables/stok/rows", Vec::new(), 404, "stok"),
        (
            "agent:procurement",
            Method::GET,
            "/v1/tables/stock/rows?colour=red",
            Vec::new(),
            400,
            "no column `colour`",
        ),
        (
            "agent:procurement",
            Method::GET,
            "/v1/tables/stock/rows?on_hand=many",
            Vec::new(),
            400,
            "on_hand=many",
        ),
        (
            "agent:procurement",
            Method::GET,
            "/v1/tables/stock/rows?where=on_hand%20%3C",
            Vec::new(),
            400,
            "where",
        ),
        (
            "agent:procurement",
            Method::GET,
            "/v1/tables/stock/rows?where=on_hand%20%2B%201",
            Vec::new(),
            400,
            "not a condition",
        ),
        (
            "agent:procurement",
            Method::GET,
            "/v1/tables/stock/rows?snapshot=999",
            Vec::new(),
            400,
            "no snapshot 999",
        ),
        (
            "agent:procurement",
            Method::GET,
            "/v1/tables/stock/rows?tag=nope",
            Vec::new(),
            400,
            "no tag `nope`",
        ),
        (
            "agent:procurement",
            Method::GET,
            "/v1/tables/stock/rows?limit=lots",
            Vec::new(),
            400,
            "limit `lots`",
        ),
        (
            "agent:procurement",
            Method::GET,
            "/v1/tables/..%2F..%2Fetc/rows",
            Vec::new(),
            404,
            "unknown table `../../etc`",
        ),
        ("agent:procurement", Method::GET, "/v1/triggers/nope/firings", Vec::new(), 404, "nope"),
        ("agent:procurement", Method::POST, "/v1/proposals", b"[1,2".to_vec(), 400, "request body"),
        (
            "agent:procurement",
            Method::POST,
            "/v1/proposals",
            with("colour", json!("red")).into_bytes(),
            400,
            "unknown field `colour`",
        ),
        (
            "agent:procurement",
            Method::POST,
            "/v1/proposals",
            with("sources.0.snapshot_id", json!(999)).into_bytes(),
            400,
            "no snapshot 999",
        ),
        (
            "agent:procurement",
            Method::POST,
            "/v1/proposals",
            with("sources.0.rows", json!([{"item": "bolt", "location": "north", "on_hand": 6}])).into_bytes(),
            400,
            // Names the row the table holds for that key instead.
            "for that key",
        ),
        (
            "agent:procurement",
            Method::POST,
            "/v1/proposals",
            with("sources.0.rows", json!([{"item": "bolt", "location": "nowhere"}])).into_bytes(),
            400,
            "it holds no row with that key",
        ),
        (
            "agent:procurement",
            Method::POST,
            "/v1/proposals",
            with("sources.0.table", json!("stok")).into_bytes(),
            400,
            "no table `stok`",
        ),
        (
            "agent:procurement",
            Method::POST,
            "/v1/proposals",
            with("sources.0.tag", json!("proposal-mine")).into_bytes(),
            400,
            "sources[0].tag",
        ),
        (
            "agent:procurement",
            Method::POST,
            "/v1/proposals",
            with("sources", json!([])).into_bytes(),
            400,
            "sources",
        ),
        (
            "agent:procurement",
            Method::POST,
            "/v1/proposals",
            with("module", json!("decisions")).into_bytes(),
            400,
            "not a module",
        ),
        (
            "agent:procurement",
            Method::POST,
            "/v1/proposals",
            with("risk.level", json!("extreme")).into_bytes(),
            400,
            "risk.level",
        ),
        (
            "agent:procurement",
            Method::POST,
            "/v1/proposals",
            with("kind", json!("../x")).into_bytes(),
            400,
            "kind",
        ),
        (
            "agent:procurement",
            Method::POST,
            "/v1/proposals",
            with("summary", json!("")).into_bytes(),
            400,
            "summary",
        ),
        (
            "agent:procurement",
            Method::POST,
            "/v1/proposals",
            deep_action.into_bytes(),
            400,
            "recursion limit",
        ),
        ("agent:procurement", Method::POST, "/v1/proposals", deep.clone().into_bytes(), 400, "request body"),
        (
            "person:ana",
            Method::POST,
            "/v1/proposals/nope/decision",
            br#"{"decision": "approve", "reason": "x"}"#.to_vec(),
            404,
            "no proposal `nope`",
        ),
        (
            "person:ana",
            Method::POST,
            "/v1/proposals/nope/decision",
            br#"{"decision": "maybe", "reason": "x"}"#.to_vec(),
            400,
            "maybe",
        ),
        (
            "person:ana",
            Method::POST,
            "/v1/proposals/nope/decision",
            br#"{"decision": "approve", "reason": "  "}"#.to_vec(),
            400,
            "reason",
        ),
        ("module:inventory", Method::POST, "/v1/events", vec![0xff, 0xfe, b'\n'], 400, "UTF-8"),
        (
            "module:inventory",
            Method::POST,
            "/v1/events",
            event("x1", "inventory.nope", json!({})).into_bytes(),
            400,
            "unknown event type",
        ),
        (
            "module:inventory",
            Method::POST,
            "/v1/events",
            event(
                "bolt-5",
                "inventory.stock_counted",
                json!({"item": "bolt", "location": "north", "on_hand": 6}),
            )
            .into_bytes(),
            409,
            "bolt-5",
        ),
        (
            "module:procurement",
            Method::GET,
            "/v1/outbox/procurement?after=soon",
            Vec::new(),
            400,
            "after `soon`",
        ),
        ("admin", Method::GET, "/v1/nowhere", Vec::new(), 404, "no such route"),
    ];
    // No pooled connections: the server closes one after refusing an oversized body unread.
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let mut wrong = Vec::new();
    for (who, method, path, body, status, says) in cases {
        let resp = client
            .request(method.clone(), format!("{url}{path}"))
            .bearer_auth(server.token(who))
            .body(body)
            .send()
            .await
            .unwrap();
        let got = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        if got != status || !text.contains(says) {
            wrong.push(format!(
                "{method} {path} as {who}: expected {status} saying {says:?}, got {got} {text:.300}"
            ));
        }
    }
    assert!(wrong.is_empty(), "unexpected answers:\n{}", wrong.join("\n"));

    // Nothing stored changed: no event appended, no proposal, no tag.
    let offset_after = reqwest::get(format!("{url}/v1/health")).await.unwrap().json::<Value>().await.unwrap()
        ["record_next_offset"]
        .clone();
    assert_eq!(offset_before, offset_after);
    assert!(admin.proposals(None).await.unwrap().proposals.is_empty());
    let tables = admin.tables().await.unwrap();
    for t in &tables {
        assert!(t.health.tags.is_empty(), "{}", t.name);
    }
    let stock = |v: &[TableInfo]| v.iter().find(|t| t.name == "stock").unwrap().receipt.snapshot_id;
    assert_eq!(stock(&head_before), stock(&tables));
}

#[tokio::test]
async fn guessing_tokens_is_cut_off_after_thirty_failures_a_minute_from_one_address() {
    let server = start().await;
    let http = reqwest::Client::new();
    let tables = format!("{}/v1/tables", server.url());
    let get = |token: Option<String>| {
        let mut req = http.get(&tables);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move { req.send().await.unwrap().status().as_u16() }
    };
    // Requests without a token guess nothing and do not count.
    for _ in 0..40 {
        assert_eq!(get(None).await, 401);
    }
    for i in 0..30 {
        assert_eq!(get(Some(format!("lst_guess{i:040}"))).await, 401, "guess {i}");
    }
    // The 31st attempt from this address is refused before any token is checked, even a valid one.
    let refused = http.get(&tables).bearer_auth(server.token("admin")).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 429);
    let body: Value = refused.json().await.unwrap();
    assert!(body["message"].as_str().unwrap().contains("too many failed authentications"), "{body}");
    assert_eq!(get(Some("lst_another".into())).await, 429);
}
