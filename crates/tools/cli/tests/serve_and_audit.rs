//! The binary end to end: `livestate token add` issues tokens, `livestate serve` answers them,
//! an agent proposes, a person approves, `livestate audit` prints the chain, `livestate token
//! revoke` locks a running server's door at once, and Ctrl-C stops it cleanly.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::token;
use livestate_client::TableRead;
use livestate_testkit::{free_port, Child as Server};
use serde_json::json;

fn livestate(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_livestate")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_serve_propose_decide_audit_and_revoke_through_the_binary() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let d = dir.to_str().unwrap();
    assert_eq!(livestate(&["init", "--dir", d]).0, 0);
    let (code, _, err) = livestate(&["token", "add", "--dir", d, "person:ana"]);
    assert_eq!(code, 2, "a person without scope is refused: {err}");
    assert!(err.contains("scope"), "{err}");
    let inventory = token(&dir, "module:inventory", &[]);
    let agent = token(&dir, "agent:procurement", &[]);
    let ana = token(&dir, "person:ana", &["procurement"]);
    let (_, list, _) = livestate(&["token", "list", "--dir", d]);
    assert!(list.contains("person:ana  scopes: procurement") && !list.contains(&ana), "{list}");
    assert!(!std::fs::read_to_string(dir.join("principals.toml")).unwrap().contains(&agent));

    let url = format!("http://127.0.0.1:{}", free_port());
    let listen = url.trim_start_matches("http://").to_string();
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_livestate"))
            .args(["serve", "--dir", d, "--listen", &listen])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let as_inventory = livestate_client::Client::new(&url, &inventory).unwrap();
    let as_agent = livestate_client::Client::new(&url, &agent).unwrap();
    let as_ana = livestate_client::Client::new(&url, &ana).unwrap();
    let started = Instant::now();
    while as_agent.whoami().await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(60), "serve came up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let line = json!({"id": "c1", "type": "inventory.stock_counted", "occurred_at": "2026-03-02T08:00:00Z", "data": {"item": "bolt", "location": "north", "on_hand": 7}});
    as_inventory.emit(&format!("{line}\n")).await.unwrap();
    let read = as_agent.consistent_read(&[TableRead::table("stock").key("item", "bolt")]).await.unwrap();
    let r = &read.results[0];
    let created = as_agent.propose(&common::bolt_order_citing(r)).await.unwrap();
    let id = created.id.as_str();
    as_ana.decide(id, true, "needed for the week").await.unwrap();

    let (code, out, err) = livestate(&["audit", id, "--url", &url, "--token", &agent]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("proposal {id} (replenishment_order) by agent procurement")), "{out}");
    assert!(out.contains("cited rows identical"), "{out}");
    assert!(out.contains("\"on_hand\":7"), "{out}");
    assert!(out.contains("decision: approved by person:ana"), "{out}");
    let (code, _, err) = livestate(&["audit", "p-none", "--url", &url, "--token", &agent]);
    assert_eq!(code, 2, "an unknown proposal is the caller's mistake");
    assert!(err.contains("no proposal `p-none`"), "{err}");

    // Revoking works on the running server, without a restart.
    let (code, _, err) = livestate(&["token", "revoke", "--dir", d, "agent:procurement"]);
    assert_eq!(code, 0, "{err}");
    let e = as_agent.whoami().await.unwrap_err();
    assert_eq!(e.status().map(|s| s.as_u16()), Some(401), "{e}");
    as_ana.whoami().await.unwrap();

    // Ctrl-C stops it cleanly.
    let pid = server.0.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let out =
        std::mem::replace(&mut server.0, Command::new("true").spawn().unwrap()).wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("everything pending was committed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sheet_command_prints_each_input_what_changed_the_arithmetic_and_the_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    assert_eq!(livestate(&["init", "--dir", dir.to_str().unwrap()]).0, 0);
    let admin = token(&dir, "admin", &[]);
    let agent = token(&dir, "agent:procurement", &[]);
    let served = common::serve(&dir);
    let url = served.url();
    let as_admin = livestate_client::Client::new(&url, &admin).unwrap();
    let as_agent = livestate_client::Client::new(&url, &agent).unwrap();
    let line = |id: &str, ty: &str, data: serde_json::Value| {
        json!({"id": id, "type": ty, "occurred_at": "2026-03-02T08:00:00Z", "data": data}).to_string() + "\n"
    };
    let lines = [
        line("c1", "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 7})),
        line(
            "p1",
            "procurement.planning_set",
            json!({"item": "bolt", "location": "north", "reorder_point": 40, "target": 100}),
        ),
        line(
            "l1",
            "procurement.supplier_item_listed",
            json!({"supplier": "acme", "item": "bolt", "pack_size": 50, "unit_price": "2.00", "lead_time_days": 2}),
        ),
        line("s1", "procurement.supplier_risk_assessed", json!({"supplier": "acme", "level": "low"})),
    ];
    as_admin.emit(&lines.concat()).await.unwrap();
    let read = as_agent
        .consistent_read(&[
            TableRead::table("stock").key("item", "bolt").key("location", "north"),
            TableRead::table("supplier_items").key("item", "bolt").key("supplier", "acme"),
            TableRead::table("supplier_risk").key("supplier", "acme"),
        ])
        .await
        .unwrap();
    let sources: Vec<serde_json::Value> = read
        .results
        .iter()
        .map(|r| json!({"table": r.receipt.table, "snapshot_id": r.receipt.snapshot_id, "offset": r.receipt.offset, "rows": [r.rows.first()]}))
        .collect();
    let proposal = json!({
        "kind": "stock_replenishment", "module": "procurement", "summary": "order 100 bolts",
        "action": {"item": "bolt", "location": "north", "supplier": "acme", "qty": 100},
        "sources": sources,
        "rule": {"name": "order-up-to-target", "version": "1", "text": "order up to the target"},
        "risk": {"level": "low"},
    });
    let id = as_agent.propose(&proposal).await.unwrap().id;
    as_admin
        .emit(&line(
            "c2",
            "inventory.stock_counted",
            json!({"item": "bolt", "location": "north", "on_hand": 3}),
        ))
        .await
        .unwrap();
    // Stock's budget is 5 minutes: a consistent read commits the count now.
    let now = as_agent.consistent_read(&[TableRead::table("stock").key("item", "bolt")]).await.unwrap();
    assert_eq!(now.results[0].cell(0, "on_hand"), json!(3));

    let (code, out, err) = livestate(&["sheet", &id, "--url", &url, "--token", &agent]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("Order 100 x bolt from acme for north: available 7 < reorder point 40\n"),
        "{out}"
    );
    let on_hand = out.lines().find(|l| l.starts_with("on_hand ")).expect("an on_hand line");
    assert!(on_hand.contains("stock.on_hand") && on_hand.contains("CHANGED"), "{on_hand}");
    let target = out.lines().find(|l| l.starts_with("target ")).expect("a target line");
    assert!(target.trim_end().ends_with("no"), "{target}");
    assert!(out.contains("available = coalesce(on_hand, 0) - coalesce(reserved, 0) + coalesce(inbound, 0) = coalesce(7, 0) - coalesce(null, 0) + coalesce(null, 0) = 7"), "{out}");
    assert!(out.contains("all 8 inputs were read at one instant"), "{out}");
    let (code, out, err) = livestate(&["sheet", &id, "--url", &url, "--token", &agent, "--json"]);
    assert_eq!(code, 0, "{err}");
    let sheet: livestate_client::sheet::Sheet = serde_json::from_str(&out).unwrap();
    assert_eq!(sheet.inputs.len(), 8);
    assert!(sheet.verdict.one_instant);
    let (code, _, err) = livestate(&["sheet", "p-none", "--url", &url, "--token", &agent]);
    assert_eq!(code, 2, "an unknown proposal is the caller's mistake: {err}");

    // The kind's history: one approved decision, on hand recounted before it.
    let ana = token(&dir, "person:ana", &["procurement"]);
    livestate_client::Client::new(&url, &ana).unwrap().decide(&id, true, "ok").await.unwrap();
    let args = ["sheet", "--kind", "stock_replenishment", "--since", "1d", "--url", &url, "--token", &ana];
    let (code, out, err) = livestate(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("1 proposals: 1 approved, 0 rejected, 0 pending"), "{out}");
    assert!(out.contains("inputs not read at one instant: 0 of 1"), "{out}");
    let on_hand = out.lines().find(|l| l.starts_with("on_hand ")).expect("an on_hand line");
    assert!(on_hand.contains("stock.on_hand") && on_hand.contains("1 of 1"), "{on_hand}");
    let target = out.lines().find(|l| l.starts_with("target ")).expect("a target line");
    assert!(target.contains("0 of 1"), "{target}");
    let (code, _, err) = livestate(&["sheet", "--kind", "nope", "--url", &url, "--token", &ana]);
    assert_eq!(code, 2, "an undeclared kind is the caller's mistake: {err}");
    assert!(err.contains("no decision kind `nope`"), "{err}");
}
