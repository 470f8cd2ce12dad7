//! Over real HTTP on loopback: a module emits, the server derives, a reader gets rows with a
//! receipt (from the lookup index for a key), a consumer gets each trigger firing once, and a
//! graceful stop commits everything.

use std::time::{Duration, Instant};

mod common;

use common::spec;
use livestate_testkit::InProcessServer;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An administrator's token: it may emit every module's events and read (agents' reads are
/// covered in `boundary.rs`).
static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// One HTTP/1.1 request; returns status and parsed JSON body.
async fn http(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> (u16, Value) {
    let token = TOKEN.get().expect("token issued");
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    let status: u16 = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn line(id: &str, ty: &str, data: Value) -> String {
    serde_json::json!({"id": id, "type": ty, "occurred_at": "2026-03-02T08:00:00Z", "data": data}).to_string()
        + "\n"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_emits_a_reader_reads_and_a_consumer_gets_each_firing_once() {
    let mut server =
        InProcessServer::start(spec, &[("admin", &[])], livestate_server::ServeConfig::default()).await;
    TOKEN.set(server.token("admin").to_string()).unwrap();
    let open = client(server.addr()).await;
    // A stream still open when the server stops does not hold the shutdown up.
    let closed = tokio::spawn(async move {
        let mut open = open;
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(70), open.read_to_end(&mut rest))
            .await
            .expect("stream closed at shutdown")
            .unwrap();
    });
    server.stop().await;
    closed.await.unwrap();
    // After a graceful stop everything is committed: the record holds the 6 events and the
    // directory opens again.
    let ls = livestate_engine::Livestate::open(server.dir()).await.unwrap();
    assert_eq!(ls.record().next_offset(), 6);
}

/// What the client does, in order; the stream of firings it leaves open when done.
async fn client(addr: std::net::SocketAddr) -> TcpStream {
    let events = line(
        "c1",
        "inventory.stock_counted",
        serde_json::json!({"item": "bolt", "location": "north", "on_hand": 50}),
    ) + &line(
        "p1",
        "procurement.planning_set",
        serde_json::json!({"item": "bolt", "location": "north", "reorder_point": 20, "target": 60}),
    );
    let (status, body) = http(addr, "POST", "/v1/events", &events).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["appended"].as_array().unwrap().len(), 2);
    let (status, body) = http(
        addr,
        "POST",
        "/v1/events",
        &line(
            "c2",
            "inventory.stock_counted",
            serde_json::json!({"item": "bolt", "location": "north", "on_hand": 12}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // The 200 ms table commits on its own; poll the row until it shows the second count.
    let started = Instant::now();
    let row = loop {
        let (status, body) = http(addr, "GET", "/v1/tables/stock/rows?item=bolt&location=north", "").await;
        assert_eq!(status, 200, "{body}");
        if body["rows"][0]["on_hand"] == 12 {
            break body;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "never visible: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(row["receipt"]["served_by"], "index");
    assert!(row["receipt"]["offset"].as_u64().unwrap() >= 3, "{row}");

    let (status, body) =
        http(addr, "GET", "/v1/triggers/stock_below_reorder_point/firings?consumer=buyer", "").await;
    assert_eq!(status, 200, "{body}");
    let firings = body["firings"].as_array().unwrap();
    assert_eq!(firings.len(), 1, "{body}");
    assert_eq!(firings[0]["after"]["on_hand"], 12);
    let (_, again) =
        http(addr, "GET", "/v1/triggers/stock_below_reorder_point/firings?consumer=buyer", "").await;
    assert!(again["firings"].as_array().unwrap().is_empty(), "delivered once: {again}");

    // Bad input gets a 4xx naming the problem, and nothing is appended.
    let (status, body) =
        http(addr, "POST", "/v1/events", &line("x", "inventory.nope", serde_json::json!({}))).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("unknown event type `inventory.nope`"), "{body}");
    // Every error answer has one body: the stable code, the message, whether a retry can help.
    assert_eq!(
        (body["code"].as_str(), body["retryable"].as_bool()),
        (Some("bad_request"), Some(false)),
        "{body}"
    );
    let (status, body) = http(addr, "GET", "/v1/tables/stok/rows", "").await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["code"], "not_found", "{body}");
    // An event id re-sent with other content contradicts what is stored: a conflict.
    let (status, body) = http(
        addr,
        "POST",
        "/v1/events",
        &line(
            "c1",
            "inventory.stock_counted",
            serde_json::json!({"item": "bolt", "location": "north", "on_hand": 51}),
        ),
    )
    .await;
    assert_eq!((status, body["code"].as_str()), (409, Some("conflict")), "{body}");
    // The client reads the same body, typed: the kind a program branches on.
    let c = livestate_client::Client::new(&format!("http://{addr}"), TOKEN.get().unwrap()).unwrap();
    let e = c.rows("stok", &[]).await.unwrap_err();
    assert_eq!(
        (e.kind(), e.code(), e.status().map(|s| s.as_u16())),
        (livestate_client::ErrorKind::NotFound, Some(livestate_client::ErrorCode::NotFound), Some(404)),
        "{e}"
    );
    assert!(e.to_string().contains("unknown table `stok`"), "{e}");
    let (status, _) =
        http(addr, "GET", "/v1/triggers/stock_below_reorder_point/firings?consumer=a/b", "").await;
    assert_eq!(status, 400);
    let (status, tables) = http(addr, "GET", "/v1/tables", "").await;
    assert_eq!(status, 200);
    assert!(tables.as_array().unwrap().iter().any(|t| t["name"] == "stock"));

    // A streaming consumer gets the existing firing and a new one as it is committed.
    let mut sse = TcpStream::connect(addr).await.unwrap();
    sse.write_all(
        format!("GET /v1/triggers/stock_below_reorder_point/stream?consumer=watcher HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n", TOKEN.get().unwrap()).as_bytes(),
    )
    .await
    .unwrap();
    let nut = line(
        "c3",
        "inventory.stock_counted",
        serde_json::json!({"item": "nut", "location": "north", "on_hand": 50}),
    ) + &line(
        "p2",
        "procurement.planning_set",
        serde_json::json!({"item": "nut", "location": "north", "reorder_point": 20, "target": 60}),
    ) + &line(
        "c4",
        "inventory.stock_counted",
        serde_json::json!({"item": "nut", "location": "north", "on_hand": 3}),
    );
    assert_eq!(http(addr, "POST", "/v1/events", &nut).await.0, 200);
    let mut seen = String::new();
    let started = Instant::now();
    while !(seen.contains("id: 1") && seen.contains("id: 2")) {
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(20), sse.read(&mut buf))
            .await
            .expect("firings stream")
            .unwrap();
        assert!(n > 0 && started.elapsed() < Duration::from_secs(20), "stream ended: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(seen.contains("event: firing") && seen.contains("\"nut\""), "{seen}");
    drop(sse);
    let (_, after) =
        http(addr, "GET", "/v1/triggers/stock_below_reorder_point/firings?consumer=watcher", "").await;
    assert!(after["firings"].as_array().unwrap().is_empty(), "streamed firings are acknowledged: {after}");

    let mut open = TcpStream::connect(addr).await.unwrap();
    open.write_all(format!("GET /v1/triggers/job_blocked/stream?consumer=late HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n", TOKEN.get().unwrap()).as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    open
}
