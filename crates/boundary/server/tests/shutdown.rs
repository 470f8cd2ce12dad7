//! A graceful stop (Ctrl-C, SIGTERM, the demo ending) leaves nothing acknowledged underived.

mod common;

use common::{event, start};
use serde_json::json;

#[tokio::test]
async fn a_graceful_stop_commits_every_event_acknowledged_before_it_in_every_table() {
    let mut server = start().await;
    // Appends in flight while the server is asked to stop: the ones it acknowledges are in the
    // record, and the stop must derive and commit them, not leave them for the next start.
    let client = server.client("module:inventory");
    let mut sends = Vec::new();
    for n in 0..40 {
        let client = client.clone();
        sends.push(tokio::spawn(async move {
            let line = event(
                &format!("c{n}"),
                "inventory.stock_counted",
                json!({"item": format!("i{n}"), "location": "north", "on_hand": n}),
            );
            client.emit(&line).await.is_ok()
        }));
    }
    // Stop as soon as the first append is answered, with the others still arriving.
    while !sends.iter().any(|s| s.is_finished()) {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    server.stop().await;
    let mut acknowledged = 0;
    for s in sends {
        acknowledged += u64::from(s.await.unwrap());
    }
    assert!(acknowledged >= 1);

    let ls = livestate_engine::Livestate::open(server.dir()).await.unwrap();
    let head = ls.record().next_offset();
    assert!(head >= acknowledged, "{head} events recorded, {acknowledged} acknowledged");
    // Derivers open positioned after each table's last commit: nothing recorded is left over.
    let derivers = ls.derivers().await.unwrap();
    assert_eq!(derivers.position(), head, "the stop committed every table through the record's head");
}
