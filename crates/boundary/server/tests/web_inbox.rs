//! The web inbox in headless Chromium (through ChromeDriver): an agent's token cannot sign in;
//! a person signs in, sees a proposal appear without reloading, opens it, sees the evidence
//! rows from the pinned snapshot, approves, and sees the inbox update; a decision made
//! elsewhere meanwhile is refused with a clear message. Screenshots of the inbox and of a
//! proposal are saved as test artefacts. A proposal of a declared kind shows its sheet first:
//! each input with a marker when it changed since and the verdict, then the action in words.

mod common;

use common::browser::{artifacts, wait_for, Browser};
use common::decisions::{cite, read_all, replenishment, stocked};
use common::{event, eventually, start};
use fantoccini::Locator;
use livestate_client::ProposalStatus;
use serde_json::{json, Map, Value};

fn proposal(snapshot: Option<i64>, row: Option<&Map<String, Value>>, key: &str) -> Value {
    json!({
        "kind": "replenishment_order", "module": "procurement", "summary": format!("Order bolts ({key})"),
        "action": {"item": "bolt", "qty": 65, "supplier": "acme"},
        "sources": [{"table": "stock", "snapshot_id": snapshot, "rows": [row]}],
        "rule": {"name": "order-up-to-target", "version": "1", "parameters": {"target": 100}, "text": "order up to the target"},
        "risk": {"level": "medium", "reasons": ["order value over limit"]},
        "idempotency_key": key
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_sees_a_proposal_arrive_opens_its_evidence_and_approves_it() {
    let browser = Browser::start().await;
    let c = &browser.client;

    let server = start().await;
    let url = server.url();
    let (snapshot, row) = common::bolt_in_stock(&server, 50).await;

    // An agent's token does not open the inbox.
    c.goto(&format!("{url}/inbox")).await.unwrap();
    assert!(c.current_url().await.unwrap().path().starts_with("/signin"));
    c.find(Locator::Css("#token")).await.unwrap().send_keys(server.token("agent:procurement")).await.unwrap();
    c.find(Locator::Css("form button[type=submit]")).await.unwrap().click().await.unwrap();
    let refused = wait_for(c, ".flash.error").await.text().await.unwrap();
    assert!(refused.contains("Only people sign in here"), "{refused}");

    // A person signs in.
    c.find(Locator::Css("#token")).await.unwrap().send_keys(server.token("person:ana")).await.unwrap();
    c.find(Locator::Css("form button[type=submit]")).await.unwrap().click().await.unwrap();
    wait_for(c, "#pending").await;
    assert!(c.source().await.unwrap().contains("Nothing waiting"));

    // A proposal appears without a reload.
    c.execute("window.__not_reloaded = 42; return 0;", vec![]).await.unwrap();
    let agent = server.client("agent:procurement");
    let created = agent.propose(&proposal(snapshot, row.as_ref(), "first")).await.unwrap();
    let id = created.id.clone();
    let appeared = wait_for(c, &format!("tr[data-proposal='{id}']")).await;
    let listed = appeared.text().await.unwrap();
    assert!(listed.contains("Order bolts (first)"), "{listed}");
    // The drafted action in words, not as JSON (that is on the proposal's page, on request).
    assert!(listed.contains("item bolt, qty 65, supplier acme") && !listed.contains('{'), "{listed}");
    let same_page = c.execute("return window.__not_reloaded;", vec![]).await.unwrap();
    assert_eq!(same_page, json!(42), "the row arrived by server-sent events, not a reload");
    let out = artifacts();
    std::fs::write(out.join("inbox.png"), c.screenshot().await.unwrap()).unwrap();

    // The proposal page shows the evidence rows from the pinned snapshot.
    c.find(Locator::Css(&format!("tr[data-proposal='{id}'] a"))).await.unwrap().click().await.unwrap();
    let evidence = wait_for(c, "section[aria-label='Evidence from stock'] table").await.text().await.unwrap();
    assert!(evidence.contains("bolt") && evidence.contains("north") && evidence.contains("50"), "{evidence}");
    let page = c.source().await.unwrap();
    assert!(
        page.contains("order-up-to-target") && page.contains("order value over limit"),
        "rule and risk shown"
    );
    c.execute(
        "document.querySelector(\"section[aria-label='Evidence from stock']\").scrollIntoView(); return 0;",
        vec![],
    )
    .await
    .unwrap();
    std::fs::write(out.join("proposal.png"), c.screenshot().await.unwrap()).unwrap();

    // Approve with a reason.
    c.find(Locator::Css("#reason")).await.unwrap().send_keys("needed this week").await.unwrap();
    c.find(Locator::Css("button.approve")).await.unwrap().click().await.unwrap();
    let decided = wait_for(c, "#decision").await.text().await.unwrap();
    assert!(decided.contains("approved") && decided.contains("person:ana"), "{decided}");
    assert_eq!(server.client("admin").proposal(&id).await.unwrap().proposal.status, ProposalStatus::Approved);

    // The lineage: proposal, decision, (no module events yet), state now.
    c.goto(&format!("{url}/proposals/{id}/audit")).await.unwrap();
    let lineage = wait_for(c, "ol.lineage").await.text().await.unwrap();
    assert!(lineage.contains("approved by person:ana") && lineage.contains("needed this week"), "{lineage}");

    // A form post without the session's CSRF token is refused and decides nothing.
    let third = agent.propose(&proposal(snapshot, row.as_ref(), "third")).await.unwrap().id;
    let status = c
        .execute(
            "return fetch('/proposals/' + arguments[0] + '/decide', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'csrf=forged&decision=approve&reason=x'}).then(r => r.status);",
            vec![json!(third)],
        )
        .await
        .unwrap();
    assert_eq!(status, json!(403));
    assert_eq!(
        server.client("admin").proposal(&third).await.unwrap().proposal.status,
        ProposalStatus::Pending
    );
    server.client("person:ana").decide(&third, false, "cleanup").await.unwrap();

    // Decided elsewhere while the page was open: a clear refusal.
    let second = agent.propose(&proposal(snapshot, row.as_ref(), "second")).await.unwrap().id;
    c.goto(&format!("{url}/proposals/{second}")).await.unwrap();
    wait_for(c, "#reason").await.send_keys("me too").await.unwrap();
    server.client("person:ana").decide(&second, false, "decided by phone").await.unwrap();
    c.find(Locator::Css("button.approve")).await.unwrap().click().await.unwrap();
    let refusal = wait_for(c, ".flash.error").await.text().await.unwrap();
    assert!(refusal.contains("already rejected by person:ana"), "{refusal}");

    // The inbox no longer lists either; the tables page shows budgets and lag.
    c.goto(&format!("{url}/inbox")).await.unwrap();
    let pending = wait_for(c, "#pending").await.text().await.unwrap();
    assert!(pending.contains("Nothing waiting"), "{pending}");
    c.goto(&format!("{url}/tables")).await.unwrap();
    let tables = wait_for(c, "main table").await.text().await.unwrap();
    assert!(tables.contains("stock") && tables.contains("200ms"), "{tables}");
    let unread = wait_for(c, "main table tbody tr:nth-child(3) td.advice").await.text().await.unwrap();
    assert_eq!(unread, "read by no declared decision", "open_orders: {tables}");
    c.clone().close().await.unwrap();
    eprintln!("screenshots: {}", out.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_deciding_sees_the_sheet_first_then_the_action_in_words_what_changed_and_the_verdict() {
    let browser = Browser::start().await;
    let c = &browser.client;
    let server = start().await;
    let url = server.url();
    stocked(&server).await;
    let read = read_all(&server).await;
    let agent = server.client("agent:procurement");
    let sources = vec![cite(&read, "stock"), cite(&read, "supplier_items"), cite(&read, "supplier_risk")];
    let id = agent.propose(&replenishment(sources)).await.unwrap().id;
    // On hand changes after the agent read it.
    let counted =
        event("c9", "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 20}));
    server.client("module:inventory").emit(&counted).await.unwrap();
    eventually("the count to reach the stock row", || async {
        let r = agent.rows("stock", &[("item", "bolt"), ("location", "north")]).await.unwrap();
        (r.cell(0, "on_hand") == json!(20)).then_some(())
    })
    .await;

    browser.sign_in(&url, server.token("person:ana")).await;
    c.goto(&format!("{url}/proposals/{id}")).await.unwrap();
    let summary = wait_for(c, "#summary").await.text().await.unwrap();
    assert_eq!(summary, "Order 100 x bolt from acme for north: available 35 < reorder point 40");
    let on_hand = wait_for(c, "tr[data-input='on_hand']").await.text().await.unwrap();
    assert!(on_hand.contains("50") && on_hand.contains("stock.on_hand"), "{on_hand}");
    let changed = wait_for(c, "tr[data-input='on_hand'] .changed").await.text().await.unwrap();
    assert!(changed.contains("changed since: now 20"), "{changed}");
    assert!(
        c.find(Locator::Css("tr[data-input='reserved'] .changed")).await.is_err(),
        "reserved did not change"
    );
    let verdict = wait_for(c, "#verdict.one-instant").await.text().await.unwrap();
    assert!(verdict.contains("all 8 inputs were read at one instant"), "{verdict}");
    let arithmetic = wait_for(c, "#arithmetic").await.text().await.unwrap();
    assert!(
        arithmetic.contains("coalesce(50, 0) - coalesce(15, 0) + coalesce(null, 0)")
            && arithmetic.contains("35 < 40"),
        "{arithmetic}"
    );
    // The sheet comes before the evidence; the raw action only on request.
    let page = c.source().await.unwrap();
    let at = |what: &str| page.find(what).unwrap_or_else(|| panic!("{what} in the page"));
    assert!(at("id=\"sheet\"") < at("id=\"summary\"") && at("id=\"summary\"") < at("id=\"raw-action\""));
    assert!(at("id=\"raw-action\"") < at("Evidence: what the agent read"));
    assert!(!c.find(Locator::Css("#raw-action pre")).await.unwrap().is_displayed().await.unwrap());
    std::fs::write(artifacts().join("sheet.png"), c.screenshot().await.unwrap()).unwrap();

    // Approved, it shows in the kind's history: on hand changed before the decision.
    c.find(Locator::Css("#reason")).await.unwrap().send_keys("order it").await.unwrap();
    c.find(Locator::Css("button.approve")).await.unwrap().click().await.unwrap();
    wait_for(c, "#decision").await;
    c.goto(&format!("{url}/decisions")).await.unwrap();
    c.find(Locator::Css("tr[data-kind='stock_replenishment'] a")).await.unwrap().click().await.unwrap();
    let counts = wait_for(c, "#counts").await.text().await.unwrap();
    assert!(counts.contains("1 proposals: 1 approved, 0 rejected, 0 pending"), "{counts}");
    let changed = wait_for(c, "tr[data-input='on_hand'] .changed-count").await.text().await.unwrap();
    assert_eq!(changed, "1 of 1");
    let reserved = wait_for(c, "tr[data-input='reserved'] .changed-count").await.text().await.unwrap();
    assert_eq!(reserved, "0 of 1");
    let split = wait_for(c, "#split").await.text().await.unwrap();
    assert!(split.contains("0 of 1"), "{split}");
    std::fs::write(artifacts().join("decisions.png"), c.screenshot().await.unwrap()).unwrap();
    c.clone().close().await.unwrap();
}
