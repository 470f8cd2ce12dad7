//! A running server on loopback with one principal of each role, for the HTTP tests.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use livestate_client::{Client, TableRead};
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

pub struct TestServer {
    pub addr: SocketAddr,
    pub dir: PathBuf,
    pub tokens: HashMap<&'static str, String>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<Result<(), livestate_server::ServerError>>>,
    _tmp: tempfile::TempDir,
}

impl TestServer {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A client acting as `principal`.
    pub fn client(&self, principal: &str) -> Client {
        Client::new(&self.url(), &self.tokens[principal]).unwrap()
    }

    /// Stops the server gracefully and returns its directory (kept until the server is dropped).
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(h) = self.handle.take() {
            tokio::time::timeout(Duration::from_secs(60), h)
                .await
                .expect("the server stops when asked")
                .unwrap()
                .unwrap();
        }
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
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    drop(livestate_engine::Livestate::init(&dir, &spec(tmp.path())).await.unwrap());
    let file = dir.join("principals.toml");
    let mut tokens = HashMap::new();
    for (name, scopes) in PRINCIPALS {
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        tokens.insert(name, livestate_server::auth::add_principal(&file, name, &scopes).unwrap());
    }
    let mut server =
        TestServer { addr: ([127, 0, 0, 1], 0).into(), dir, tokens, stop: None, handle: None, _tmp: tmp };
    server.serve(config).await;
    server
}

impl TestServer {
    /// Serves the directory (again, after [`TestServer::stop`]) on a new port.
    pub async fn serve(&mut self, config: livestate_server::ServeConfig) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        self.addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served_dir = self.dir.clone();
        self.handle = Some(tokio::spawn(async move {
            livestate_server::serve_with(&served_dir, listener, config, async {
                let _ = stopped.await;
            })
            .await
        }));
        self.stop = Some(stop);
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while client.get(format!("{}/v1/health", self.url())).send().await.is_err() {
            assert!(Instant::now() < deadline, "the server came up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
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
