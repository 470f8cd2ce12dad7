//! A running server on loopback with one principal of each role, for the HTTP tests.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use livestate_client::{Client, TableRead};
use livestate_testkit::InProcessServer;
use serde_json::{json, Map, Value};

pub mod browser;
pub mod decisions;

/// The principals every test server has, with their scopes.
pub const PRINCIPALS: [(&str, &[&str]); 7] = [
    ("module:inventory", &[]),
    ("module:commerce", &[]),
    ("module:procurement", &[]),
    ("agent:procurement", &[]),
    ("person:ana", &["procurement"]),
    ("person:olaf", &["operations"]),
    ("admin", &[]),
];

/// The example directory of [`spec`] served in this process, with a token for each of
/// [`PRINCIPALS`].
pub struct TestServer(InProcessServer);

impl TestServer {
    pub fn addr(&self) -> SocketAddr {
        self.0.addr()
    }

    pub fn url(&self) -> String {
        self.0.url()
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        self.0.dir()
    }

    /// The token of `principal`.
    pub fn token(&self, principal: &str) -> &str {
        self.0.token(principal)
    }

    /// A client acting as `principal`.
    pub fn client(&self, principal: &str) -> Client {
        Client::new(&self.url(), self.token(principal)).unwrap()
    }

    /// Stops the server gracefully (its directory is kept until the server is dropped).
    pub async fn stop(&mut self) {
        self.0.stop().await;
    }

    /// Serves the directory again, after [`TestServer::stop`], on a new port.
    pub async fn serve(&mut self, config: livestate_server::ServeConfig) {
        self.0.serve(config).await;
    }
}

/// The example spec, with `stock` at a 200 ms budget keeping few snapshots (so expiry runs
/// during a test), `work_queue` at 200 ms, and the `inbound` input of `stock_replenishment`
/// needed within 1 ms (so a test can read it staler than needed).
pub fn spec(dir: &Path) -> PathBuf {
    livestate_testkit::example_spec()
        .freshness("stock", "200ms")
        .option("stock", "snapshot.num-retained.min", "2")
        .option("stock", "snapshot.num-retained.max", "10")
        .option("stock", "snapshot.time-retained", "1 ms")
        .freshness("work_queue", "200ms")
        .need("stock_replenishment", "inbound", "1ms")
        .write(&dir.join("spec"))
}

/// Initialises a directory, issues a token per principal, and starts serving it.
pub async fn start() -> TestServer {
    start_with(livestate_server::ServeConfig::default()).await
}

pub async fn start_with(config: livestate_server::ServeConfig) -> TestServer {
    TestServer(InProcessServer::start(spec, &PRINCIPALS, config).await)
}

pub fn event(id: &str, ty: &str, data: Value) -> String {
    json!({"id": id, "type": ty, "occurred_at": "2026-03-02T08:00:00Z", "data": data}).to_string() + "\n"
}

pub fn caused(id: &str, ty: &str, data: Value, causation: &str) -> String {
    json!({"id": id, "type": ty, "occurred_at": "2026-03-02T08:00:00Z", "data": data, "causation": causation})
        .to_string()
        + "\n"
}

#[allow(unused_imports)] // Not every test binary polls.
pub use livestate_testkit::eventually;

/// Counts `on_hand` of bolt at north (as an administrator) and commits it with a consistent
/// read; returns the stock snapshot and the row as read (if any).
pub async fn bolt_in_stock(server: &TestServer, on_hand: i64) -> (Option<i64>, Option<Map<String, Value>>) {
    let admin = server.client("admin");
    admin
        .emit(&event(
            &format!("bolt-{on_hand}"),
            "inventory.stock_counted",
            json!({"item": "bolt", "location": "north", "on_hand": on_hand}),
        ))
        .await
        .unwrap();
    let read = admin.consistent_read(&[TableRead::table("stock").key("item", "bolt")]).await.unwrap();
    let stock = &read.results[0];
    (stock.receipt.snapshot_id, stock.rows.first().cloned())
}
