//! `POST /v1/sql`: read-only SQL with receipts and time travel; writes of every kind are
//! refused on the plan and change nothing; no query takes more than its share (time,
//! depth, size, values, concurrency), and a query whose client goes away stops.

mod common;

use std::time::{Duration, Instant};

use common::{event, start};
use livestate_client::TableRead;
use serde_json::{json, Value};

/// A server whose stock counted bolt at north (50, then 10) and south (70), with an open order
/// of 5 at north; and `stock`'s snapshot before the second count.
async fn counted_twice() -> (common::TestServer, i64) {
    let server = start().await;
    let admin = server.client("admin");
    admin
        .emit(
            &(event("c1", "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 50}))
                + &event("c2", "inventory.stock_counted", json!({"item": "bolt", "location": "south", "on_hand": 70}))
                + &event("o1", "commerce.order_placed", json!({"order_id": "so-1", "line": 1, "customer": "c", "item": "bolt", "location": "north", "qty": 5, "unit_price": "2.50"}))),
        )
        .await
        .unwrap();
    let first =
        admin.consistent_read(&[TableRead::table("stock"), TableRead::table("open_orders")]).await.unwrap();
    let first_snapshot = first.results[0].receipt.snapshot_id.unwrap();
    admin
        .emit(&event(
            "c3",
            "inventory.stock_counted",
            json!({"item": "bolt", "location": "north", "on_hand": 10}),
        ))
        .await
        .unwrap();
    admin.consistent_read(&[TableRead::table("stock")]).await.unwrap();
    (server, first_snapshot)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_with_an_aggregate_answers_with_a_receipt_per_table_read() {
    let (server, first_snapshot) = counted_twice().await;
    let a = server
        .client("agent:procurement")
        .sql("SELECT s.location, s.on_hand, sum(o.qty) AS ordered FROM stock s LEFT JOIN open_orders o ON s.item = o.item AND s.location = o.location GROUP BY s.location, s.on_hand ORDER BY s.location", None)
        .await
        .unwrap();
    assert_eq!(
        json!(a.rows),
        json!([{"location": "north", "on_hand": 10, "ordered": 5}, {"location": "south", "on_hand": 70}]),
        "{a:?}"
    );
    let tables: Vec<&str> = a.receipts.iter().map(|r| r.table.as_str()).collect();
    assert_eq!(tables, vec!["open_orders", "stock"]);
    assert!(a.receipts[1].snapshot_id.unwrap() > first_snapshot);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_reads_a_table_as_of_a_snapshot_id() {
    let (server, first_snapshot) = counted_twice().await;
    let old = server
        .client("agent:procurement")
        .sql(
            &format!("SELECT on_hand FROM stock VERSION AS OF {first_snapshot} WHERE location = 'north'"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(json!(old.rows), json!([{"on_hand": 50}]));
    assert_eq!(old.receipts[0].snapshot_id, Some(first_snapshot));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_reads_a_table_as_of_the_tag_a_proposal_pinned() {
    let (server, first_snapshot) = counted_twice().await;
    let agent = server.client("agent:procurement");
    let created = agent
        .propose(&json!({
            "kind": "replenishment_order", "module": "procurement", "summary": "s", "action": {},
            "sources": [{"table": "stock", "snapshot_id": first_snapshot}],
            "rule": {"name": "r", "version": "1", "text": "t"}, "risk": {"level": "low"}
        }))
        .await
        .unwrap();
    let tag = created.tags.as_ref().unwrap()[0].tag.as_str();
    let tagged = agent
        .sql(&format!("SELECT sum(on_hand) AS total FROM stock VERSION AS OF '{tag}'"), None)
        .await
        .unwrap();
    assert_eq!(json!(tagged.rows), json!([{"total": 120}]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_as_of_a_snapshot_that_does_not_exist_is_refused_naming_it() {
    let (server, _) = counted_twice().await;
    let e = server
        .client("agent:procurement")
        .sql("SELECT * FROM stock VERSION AS OF 9999", None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no snapshot 9999"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_the_row_limit_is_truncated_and_says_so() {
    let (server, _) = counted_twice().await;
    let limited = server.client("agent:procurement").sql("SELECT * FROM stock", Some(1)).await.unwrap();
    assert_eq!((limited.rows.len(), limited.truncated), (1, true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_refuses_every_kind_of_write_on_the_plan_and_changes_nothing() {
    let (server, _) = counted_twice().await;
    let admin = server.client("admin");
    let agent = server.client("agent:procurement");
    // Everything emitted is committed first, so no budget commits during the check.
    admin.consistent_read(&[TableRead::table("approval_inbox")]).await.unwrap();
    let before = (
        admin.tables().await.unwrap(),
        std::fs::read_dir(server.dir().join("warehouse/state.db")).unwrap().count(),
    );
    let copy_target = server.dir().join("copied.csv");
    for q in [
        "INSERT INTO stock (item, location, on_hand) VALUES ('bolt', 'north', 999)".to_string(),
        "UPDATE stock SET on_hand = 0".to_string(),
        "DELETE FROM stock".to_string(),
        "CALL sys.create_tag('state.stock', 'evil', 1)".to_string(),
        "DROP TABLE stock".to_string(),
        "CREATE TABLE evil AS SELECT * FROM stock".to_string(),
        "CREATE VIEW evil AS SELECT * FROM stock".to_string(),
        format!("COPY stock TO '{}'", copy_target.display()),
        "SELECT 1; DROP TABLE stock".to_string(),
        "SELECT 1 /* ; */; DELETE FROM stock -- ;".to_string(),
        "EXPLAIN ANALYZE SELECT * FROM stock".to_string(),
        "SET datafusion.execution.batch_size = 1".to_string(),
        "SELECT * FROM information_schema.tables".to_string(),
        "SELECT * FROM stok".to_string(),
    ] {
        let e = agent.sql(&q, None).await.expect_err(&q);
        assert_eq!(e.status().map(|s| s.as_u16()), Some(400), "{q}: {e}");
    }
    let after = (
        admin.tables().await.unwrap(),
        std::fs::read_dir(server.dir().join("warehouse/state.db")).unwrap().count(),
    );
    assert_eq!(
        livestate_testkit::snapshots_and_tags(&before.0),
        livestate_testkit::snapshots_and_tags(&after.0)
    );
    assert_eq!(before.1, after.1);
    assert!(!copy_target.exists());
    let rows = agent.sql("SELECT on_hand FROM stock ORDER BY location", None).await.unwrap();
    assert_eq!(json!(rows.rows), json!([{"on_hand": 10}, {"on_hand": 70}]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modules_cannot_query() {
    let server = start().await;
    let e = server.client("module:inventory").sql("SELECT 1", None).await.unwrap_err();
    assert_eq!(e.status().map(|s| s.as_u16()), Some(403));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_failing_on_its_own_values_is_the_callers_error_and_named() {
    let server = start().await;
    let agent = server.client("agent:procurement");
    common::bolt_in_stock(&server, 50).await;
    // On a column (computed while running) and on constants (folded while planning).
    for (q, named) in [
        ("SELECT on_hand / (on_hand - on_hand) FROM stock", "Divide by zero"),
        ("SELECT 1 / 0", "Divide by zero"),
        ("SELECT CAST(item AS INT) FROM stock", "Cast error"),
        ("SELECT CAST('x' AS INT)", "Cast error"),
    ] {
        let e = agent.sql(q, None).await.expect_err(q);
        assert_eq!(e.status().map(|s| s.as_u16()), Some(400), "{q}: {e}");
        assert!(e.to_string().to_lowercase().contains(&named.to_lowercase()), "{q}: {e}");
    }
    // The server goes on answering.
    let rows = agent.sql("SELECT on_hand FROM stock", None).await.unwrap();
    assert_eq!(json!(rows.rows), json!([{"on_hand": 50}]));
}

/// A server whose SQL queries run under `limits`.
async fn start_sql(limits: livestate_sql::Limits) -> common::TestServer {
    common::start_with(livestate_server::ServeConfig {
        sql: livestate_sql::Queries::new(limits),
        ..Default::default()
    })
    .await
}

/// A query that runs for minutes unless stopped.
const ENDLESS: &str = "SELECT count(*) AS n FROM generate_series(1, 1000000000000) AS t(v)";

/// `POST /v1/sql` as `principal`, raw: status, headers and the JSON body.
async fn post_sql(
    server: &common::TestServer,
    principal: &str,
    query: &str,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/v1/sql", server.url()))
        .bearer_auth(server.token(principal))
        .json(&json!({ "query": query }))
        .send()
        .await
        .unwrap();
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    (status, headers, r.json().await.unwrap())
}

/// The `livestate_sql_queries_running` gauge of `/metrics`.
async fn sql_running(server: &common::TestServer) -> u64 {
    let text = reqwest::Client::new()
        .get(format!("{}/metrics", server.url()))
        .bearer_auth(server.token("admin"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line =
        text.lines().find(|l| l.starts_with("livestate_sql_queries_running ")).expect("the gauge is there");
    line.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_four_way_cross_join_is_stopped_at_its_time_limit_while_health_and_other_reads_are_served() {
    let limits = livestate_sql::Limits { time: Duration::from_secs(3), workers: 1, ..Default::default() };
    let server = start_sql(limits).await;
    let admin = server.client("admin");
    let lines: String = (0..100)
        .map(|i| {
            event(
                &format!("c{i}"),
                "inventory.stock_counted",
                json!({"item": format!("i{i}"), "location": "north", "on_hand": i}),
            )
        })
        .collect();
    admin.emit(&lines).await.unwrap();
    admin.consistent_read(&[TableRead::table("stock")]).await.unwrap();

    let agent = server.client("agent:procurement");
    let watcher = server.client("admin");
    watcher.health().await.unwrap();
    let started = Instant::now();
    let cross = tokio::spawn(async move {
        agent
            .sql("SELECT sum(a.on_hand + b.on_hand * c.on_hand - d.on_hand) AS s FROM stock a, stock b, stock c, stock d", None)
            .await
    });
    // While it runs: health within 100 ms, and another principal's reads and queries.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other = server.client("person:ana");
    let mut took = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        watcher.health().await.unwrap();
        took.push(t.elapsed());
        let rows = other.rows("stock", &[("item", "i7")]).await.unwrap();
        assert_eq!(rows.cell(0, "on_hand"), json!(7));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        took.iter().all(|t| *t < Duration::from_millis(100)),
        "/v1/health took {took:?} during the query"
    );
    assert_eq!(sql_running(&server).await, 1, "the cross join was still running meanwhile");
    let e = cross.await.unwrap().unwrap_err();
    assert_eq!(e.status().map(|s| s.as_u16()), Some(408), "{e}");
    assert!(started.elapsed() < Duration::from_secs(6), "{:?}", started.elapsed());
    assert!(e.to_string().contains("longer than 3s"), "{e}");
}

/// A server whose stock holds 50 bolts at north, and its procurement agent.
async fn bolt_server() -> (common::TestServer, livestate_client::Client) {
    let server = start_sql(livestate_sql::Limits::default()).await;
    common::bolt_in_stock(&server, 50).await;
    let agent = server.client("agent:procurement");
    (server, agent)
}

/// The HTTP status of a refused request.
fn status(e: &livestate_client::ClientError) -> Option<u16> {
    e.status().map(|s| s.as_u16())
}

/// After a refusal the same principal's next query is answered.
async fn still_answers(agent: &livestate_client::Client) {
    assert_eq!(
        json!(agent.sql("SELECT on_hand FROM stock", None).await.unwrap().rows),
        json!([{"on_hand": 50}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_nested_too_deep_is_400_naming_where_and_the_deepest_accepted_runs() {
    let (_server, agent) = bolt_server().await;
    // A few kilobytes of 1+1+…: a stack overflow once, now a 400 naming line and column.
    let e = agent.sql(&format!("SELECT 1{}", "+1".repeat(3000)), None).await.unwrap_err();
    assert_eq!(status(&e), Some(400), "{e}");
    assert!(e.to_string().contains("nesting depth reaches 129 at line 1, column"), "{e}");
    // The deepest accepted: 128 chained operators over a column, planned and run.
    let deepest = format!("SELECT on_hand{} AS x FROM stock", " + on_hand".repeat(128));
    let a = agent.sql(&deepest, None).await.unwrap();
    assert_eq!(json!(a.rows), json!([{"x": 50 * 129}]));
    let e = agent
        .sql(&format!("SELECT on_hand{} AS x FROM stock", " + on_hand".repeat(129)), None)
        .await
        .unwrap_err();
    assert_eq!(status(&e), Some(400), "{e}");
    still_answers(&agent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_of_thousands_of_columns_is_400_before_planning() {
    let (_server, agent) = bolt_server().await;
    // Refused at once (planning them took minutes).
    let started = Instant::now();
    let e =
        agent.sql(&format!("SELECT on_hand{} FROM stock", ", on_hand".repeat(5000)), None).await.unwrap_err();
    assert_eq!(status(&e), Some(400), "{e}");
    assert!(e.to_string().contains("items in one list reaches 1025"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    still_answers(&agent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_text_over_64_kib_is_413() {
    let (_server, agent) = bolt_server().await;
    let e = agent.sql(&format!("SELECT '{}' AS s", "x".repeat(70_000)), None).await.unwrap_err();
    assert_eq!(status(&e), Some(413), "{e}");
    assert!(e.to_string().contains("over the limit of 64 KiB"), "{e}");
    still_answers(&agent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_asked_for_huge_values_answer_400_naming_the_function() {
    let server = start_sql(livestate_sql::Limits::default()).await;
    let agent = server.client("agent:procurement");
    for (q, named) in [
        ("SELECT repeat('x', 2000000000)", "repeat"),
        ("SELECT array_repeat(1, 2000000000)", "array_repeat"),
        ("SELECT lpad('x', 2000000000)", "lpad"),
        ("SELECT rpad('x', 2000000000)", "rpad"),
        ("SELECT range(0, 2000000000)", "range"),
        ("SELECT generate_series(1, 2000000000)", "generate_series"),
        ("SELECT array_resize([1], 2000000000, 0)", "array_resize"),
    ] {
        let e = agent.sql(q, None).await.expect_err(q);
        assert_eq!(e.status().map(|s| s.as_u16()), Some(400), "{q}: {e}");
        assert!(e.to_string().contains(&format!("`{named}` would build")), "{q}: {e}");
        assert!(e.to_string().contains("16 MiB"), "{q}: {e}");
    }
    let a = agent.sql("SELECT repeat('ab', 2) AS r", None).await.unwrap();
    assert_eq!(json!(a.rows), json!([{"r": "abab"}]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_over_its_query_limit_gets_429_with_retry_after_and_others_are_served() {
    let limits =
        livestate_sql::Limits { per_principal: 1, time: Duration::from_secs(600), ..Default::default() };
    let server = start_sql(limits).await;
    let agent = server.client("agent:procurement");
    let endless = tokio::spawn(async move { agent.sql(ENDLESS, None).await });
    common::eventually("the endless query to run", || async {
        (sql_running(&server).await == 1).then_some(())
    })
    .await;
    let (status, headers, body) = post_sql(&server, "agent:procurement", "SELECT 1 AS one").await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(headers.get("retry-after").map(|v| v.to_str().unwrap()), Some("1"));
    assert!(headers.get("content-type").unwrap().to_str().unwrap().starts_with("application/json"));
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("agent:procurement runs 1 already, the limit per principal"),
        "{body}"
    );
    // Another principal is served meanwhile.
    let (status, _, body) = post_sql(&server, "person:ana", "SELECT 1 AS one").await;
    assert_eq!((status, body["rows"].clone()), (200, json!([{"one": 1}])), "{body}");
    endless.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_whose_client_disconnects_is_stopped_and_frees_its_place() {
    use tokio::io::AsyncWriteExt;
    let limits =
        livestate_sql::Limits { per_principal: 1, time: Duration::from_secs(600), ..Default::default() };
    let server = start_sql(limits).await;
    let body = json!({ "query": ENDLESS }).to_string();
    let mut socket = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let request = format!(
        "POST /v1/sql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        server.token("agent:procurement"),
        body.len()
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    common::eventually("the query to run", || async { (sql_running(&server).await == 1).then_some(()) })
        .await;
    drop(socket);
    let started = Instant::now();
    common::eventually("the query to stop", || async { (sql_running(&server).await == 0).then_some(()) })
        .await;
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    // The principal's one place is free again.
    let (status, _, body) = post_sql(&server, "agent:procurement", "SELECT 1 AS one").await;
    assert_eq!(status, 200, "{body}");
}
