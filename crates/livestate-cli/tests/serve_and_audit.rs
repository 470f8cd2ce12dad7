//! The binary end to end: `livestate token add` issues tokens, `livestate serve` answers them,
//! an agent proposes, a person approves, `livestate audit` prints the chain, `livestate token
//! revoke` locks a running server's door at once, and Ctrl-C stops it cleanly.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

fn livestate(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_livestate")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn token(dir: &Path, name: &str, scopes: &[&str]) -> String {
    let mut args = vec!["token", "add", "--dir", dir.to_str().unwrap(), name];
    for s in scopes {
        args.extend(["--scope", s]);
    }
    let (code, out, err) = livestate(&args);
    assert_eq!(code, 0, "{err}");
    out.trim().to_string()
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
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
    let read =
        as_agent.consistent_read(&[json!({"table": "stock", "keys": {"item": "bolt"}})]).await.unwrap();
    let r = &read["results"][0];
    let created = as_agent.propose(&common::bolt_order_citing(r)).await.unwrap();
    let id = created["id"].as_str().unwrap();
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
