//! `livestate mcp` with a real MCP client written by someone else: the official MCP Python SDK
//! starts it over stdio against a running server, lists tools and resources, reads stock with
//! a receipt, proposes citing it, sees the proposal pending, reads with SQL, and every attempt
//! to write through `sql` (INSERT, CALL sys.create_tag, DROP, two statements, a comment trick)
//! is refused and changes nothing.

mod common;

use common::{python, repo, token};
use livestate_client::{TableInfo, TableRead};
use std::process::Command;

use serde_json::{json, Value};

fn livestate(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_livestate")).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_reads_with_receipts_proposes_and_cannot_write_through_sql() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let d = dir.to_str().unwrap();
    livestate(&["init", "--dir", d]);
    let (admin, agent, ana) = (
        token(&dir, "admin", &[]),
        token(&dir, "agent:procurement", &[]),
        token(&dir, "person:ana", &["procurement"]),
    );
    let server = common::serve(&dir);
    let url = server.url();
    let as_admin = livestate_client::Client::new(&url, &admin).unwrap();
    let line = |id: &str, loc: &str, n: i64| {
        json!({"id": id, "type": "inventory.stock_counted", "occurred_at": "2026-03-02T08:00:00Z", "data": {"item": "bolt", "location": loc, "on_hand": n}}).to_string() + "\n"
    };
    as_admin.emit(&(line("c1", "north", 50) + &line("c2", "south", 70))).await.unwrap();
    // Committed before the agent looks (the stock table's budget is minutes).
    as_admin.consistent_read(&[TableRead::table("stock")]).await.unwrap();
    let before = as_admin.tables().await.unwrap();

    let out = Command::new(python())
        .arg(repo().join("tests/interop/mcp_agent.py"))
        .arg(env!("CARGO_BIN_EXE_livestate"))
        .arg(&url)
        .arg(&agent)
        .output()
        .unwrap();
    assert!(out.status.success(), "the MCP client failed: {}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(out.stdout.trim_ascii()).unwrap();

    let tools: Vec<&str> = r["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    for t in [
        "list_tables",
        "describe_table",
        "read_rows",
        "consistent_read",
        "sql",
        "propose",
        "proposal_status",
        "wait_for_trigger",
    ] {
        assert!(tools.contains(&t), "tool {t} in {tools:?}");
    }
    assert!(r["resources"].as_array().unwrap().contains(&json!("livestate://tables/stock")));
    assert_eq!(r["stock_schema"]["schema"]["primary_key"], json!(["item", "location"]));
    assert_eq!(r["read"]["rows"].as_array().unwrap().len(), 2);
    assert!(r["read"]["receipt"]["snapshot_id"].is_i64(), "reads carry a receipt: {}", r["read"]);
    assert_eq!(r["status"], "pending");
    assert!(r["consistent_offset"].as_u64().unwrap() >= 2);
    assert_eq!(r["sql"]["rows"].as_array().unwrap().len(), 2);
    assert_eq!(
        r["sql"]["receipts"][0]["table"], "stock",
        "sql answers carry a receipt per table: {}",
        r["sql"]
    );
    for (name, refusal) in r["refused"].as_object().unwrap() {
        assert_eq!(refusal["is_error"], true, "{name} was refused: {refusal}");
        assert!(refusal["text"].as_str().unwrap().contains("400"), "{name}: {refusal}");
    }

    // The proposal is in the inbox, for a person to decide.
    let id = r["proposed"]["id"].as_str().unwrap();
    let as_ana = livestate_client::Client::new(&url, &ana).unwrap();
    let pending = as_ana.proposals(Some(livestate_client::ProposalStatus::Pending)).await.unwrap();
    assert_eq!(pending.proposals[0].id, id);
    assert_eq!(pending.proposals[0].agent, "procurement");

    // Nothing the SQL attempts did changed anything: same rows, no tag `evil`, same tables.
    let stock = as_ana.rows("stock", &[("item", "bolt")]).await.unwrap();
    let on_hand: Vec<i64> = stock.rows.iter().map(|r| r["on_hand"].as_i64().unwrap()).collect();
    assert_eq!(on_hand, vec![50, 70]);
    let after = as_admin.tables().await.unwrap();
    let names = |v: &[TableInfo]| v.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&before), names(&after));
    let stock_tags: Vec<&str> = after
        .iter()
        .find(|t| t.name == "stock")
        .unwrap()
        .health
        .tags
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert!(stock_tags.iter().all(|t| t.starts_with("proposal-")), "{stock_tags:?}");
}
