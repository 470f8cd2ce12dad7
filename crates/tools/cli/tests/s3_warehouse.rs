//! An object-storage warehouse (`livestate init --warehouse s3://bucket/prefix`) against moto's
//! S3 server on loopback: every maintenance command works there and pypaimon reads the same rows
//! through its S3 file system; the single-writer lease refuses a second writer and fences off a
//! writer whose lease was taken over, without any snapshot being overwritten
//! (docs/formats/lease.md).
//!
//! moto comes from `scripts/pyenv.sh --with-s3-server`, into the venv that holds pypaimon.

mod common;

use common::{canonical, python, repo};
use livestate_client::TableRead;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// moto's S3 server on a free loopback port, stopped on drop.
struct S3Server {
    _child: livestate_testkit::Child,
    endpoint: String,
    python: String,
}

impl S3Server {
    fn start() -> S3Server {
        let out = Command::new("bash")
            .arg(repo().join("scripts/pyenv.sh"))
            .arg("--with-s3-server")
            .output()
            .expect("run scripts/pyenv.sh --with-s3-server");
        assert!(out.status.success(), "pyenv.sh --with-s3-server: {}", String::from_utf8_lossy(&out.stderr));
        let python = String::from_utf8(out.stdout).unwrap().lines().last().unwrap().trim().to_string();
        assert_eq!(python, python_or(&python), "one venv");
        let server = PathBuf::from(&python).with_file_name("moto_server");
        let port = livestate_testkit::free_port();
        let child = Command::new(server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(30), "moto_server did not listen on {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        S3Server {
            _child: livestate_testkit::Child(child),
            endpoint: format!("http://127.0.0.1:{port}"),
            python,
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ]
    }

    /// Runs python code with boto3 as `s3` (a client of this server); its standard output.
    fn boto(&self, code: &str) -> String {
        let script = format!("import boto3, json, sys\ns3 = boto3.client('s3')\n{code}");
        let out = Command::new(&self.python).args(["-c", &script]).envs(self.env()).output().unwrap();
        assert!(out.status.success(), "boto3: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    fn create_bucket(&self, bucket: &str) {
        self.boto(&format!("s3.create_bucket(Bucket='{bucket}')"));
    }

    /// Every snapshot object below `prefix` with its ETag. A `snapshot-N.tmp-…` object is a commit
    /// in flight (the paimon crate writes one, then deletes it when S3 refuses the rename), not a
    /// snapshot: a writer resumed inside its commit removes it.
    fn snapshots(&self, bucket: &str, prefix: &str) -> BTreeMap<String, String> {
        let out = self.boto(&format!(
            "p = s3.get_paginator('list_objects_v2')\n\
             out = {{o['Key']: o['ETag'] for page in p.paginate(Bucket='{bucket}', Prefix='{prefix}') \
             for o in page.get('Contents', []) \
             if '/snapshot/snapshot-' in o['Key'] and '.tmp-' not in o['Key']}}\n\
             print(json.dumps(out))"
        ));
        serde_json::from_str(&out).unwrap()
    }
}

/// `p` when `LIVESTATE_PYTHON` is unset, else the python the other interop tests use.
fn python_or(p: &str) -> String {
    if std::env::var("LIVESTATE_PYTHON").is_ok() {
        p.to_string()
    } else {
        python()
    }
}

fn run(s3: &S3Server, dir: &Path, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_livestate"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .envs(s3.env())
        .envs(extra_env.iter().copied())
        .output()
        .unwrap()
}

fn livestate(s3: &S3Server, dir: &Path, args: &[&str]) -> String {
    let out = run(s3, dir, args, &[]);
    assert!(out.status.success(), "livestate {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn emit(s3: &S3Server, dir: &Path, lines: &str) {
    let mut c = common::livestate_command(dir, &["emit", "-"]);
    c.envs(s3.env());
    common::emit_with(c, lines);
}

fn livestate_rows(s3: &S3Server, dir: &Path, table: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["read", table, "--json"];
    args.extend_from_slice(extra);
    let v: Value = serde_json::from_str(&livestate(s3, dir, &args)).unwrap();
    canonical(v["rows"].as_array().unwrap().clone())
}

fn pypaimon_rows(s3: &S3Server, warehouse: &str, table: &str, tag: Option<&str>) -> Vec<String> {
    let mut c = Command::new(&s3.python);
    c.arg(repo().join("tests/interop/read_s3.py"))
        .arg(warehouse)
        .arg(format!("state.{table}"))
        .envs(s3.env());
    if let Some(t) = tag {
        c.args(["--tag", t]);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "pypaimon read of {table}: {}", String::from_utf8_lossy(&out.stderr));
    canonical(String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()))
}

#[tokio::test]
async fn s3_warehouse_derives_compacts_expires_tags_and_reads_back_with_pypaimon() {
    let s3 = S3Server::start();
    s3.create_bucket("livestate-wh");
    let warehouse = "s3://livestate-wh/acme/live";
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    livestate(&s3, &dir, &["init", "--warehouse", warehouse]);
    assert!(!dir.join("warehouse").exists(), "the warehouse is not local");
    let config = std::fs::read_to_string(dir.join("warehouse.json")).unwrap();
    assert!(config.contains(warehouse) && !config.contains("testing"), "no credentials on disk: {config}");

    let events = livestate_sim::company_events(&livestate_sim::SimConfig::default());
    emit(&s3, &dir, &livestate_sim::to_json_lines(&events));
    livestate(&s3, &dir, &["derive", "--once"]);
    let compacted = livestate(&s3, &dir, &["compact", "stock", "--full"]);
    assert!(compacted.contains("COMPACT snapshot"), "{compacted}");

    // Pin stock as a proposal would (the server's `pin`), in-process: this test alone sets the
    // S3 variables in its own environment.
    for (k, v) in s3.env() {
        std::env::set_var(k, v);
    }
    let snapshot = {
        let v: Value = serde_json::from_str(&livestate(&s3, &dir, &["read", "stock", "--json"])).unwrap();
        v["receipt"]["snapshot_id"].as_i64().unwrap()
    };
    let tag = format!("proposal-s3-stock-s{snapshot}");
    {
        let ls = livestate_engine::Livestate::open(&dir).await.unwrap();
        assert!(ls.leased(), "an S3 warehouse is written under its lease");
        ls.maintainer("stock").await.unwrap().pin(&tag, snapshot, None).await.unwrap();
    }
    let more: String = [
        json!({"id": "more-1", "type": "inventory.stock_counted", "occurred_at": "2026-03-03T09:00:00Z", "data": {"item": "part-0001", "location": "north", "on_hand": 3}}),
        json!({"id": "more-2", "type": "commerce.order_placed", "occurred_at": "2026-03-03T09:00:02Z", "data": {"order_id": "so-s3", "line": 1, "customer": "c-1", "item": "part-0001", "location": "north", "qty": 2, "unit_price": "4.20"}}),
    ]
    .iter()
    .map(|v| v.to_string() + "\n")
    .collect();
    emit(&s3, &dir, &more);
    livestate(&s3, &dir, &["derive", "--once"]);
    let expired = livestate(&s3, &dir, &["expire", "--orphans-older-than", "0s"]);
    assert!(expired.contains("state.stock: expired"), "{expired}");
    let verified = livestate(&s3, &dir, &["verify"]);
    assert!(verified.contains("every file checks out"), "{verified}");

    for table in ["stock", "open_orders", "reservations_total", "work_queue"] {
        let ours = livestate_rows(&s3, &dir, table, &[]);
        assert!(!ours.is_empty(), "{table} has rows");
        assert_eq!(
            pypaimon_rows(&s3, warehouse, table, None),
            ours,
            "pypaimon reads {table} as livestate does"
        );
    }
    let at_tag = livestate_rows(&s3, &dir, "stock", &["--tag", &tag]);
    assert_ne!(at_tag, livestate_rows(&s3, &dir, "stock", &[]), "the tag pins an older stock");
    assert_eq!(pypaimon_rows(&s3, warehouse, "stock", Some(&tag)), at_tag, "pypaimon reads the tag");
}

#[test]
fn s3_lease_refuses_a_second_writer_and_fences_a_writer_whose_lease_was_taken_over() {
    let s3 = S3Server::start();
    s3.create_bucket("livestate-lease");
    let warehouse = "s3://livestate-lease/wh";
    let ttl = Duration::from_millis(5_000);
    let ttl_env = [("LIVESTATE_LEASE_TTL_MS", "5000")];
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2) = (tmp.path().join("d1"), tmp.path().join("d2"));
    let out = run(&s3, &d1, &["init", "--warehouse", warehouse], &ttl_env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Enough events that writer 1, committing every 10, is still deriving when it is stopped,
    // however fast the machine.
    let cfg = livestate_sim::SimConfig { items: 40, orders: 2_000, jobs: 100, ..Default::default() };
    let events = livestate_sim::company_events(&cfg);
    emit(&s3, &d1, &livestate_sim::to_json_lines(&events));

    // Writer 1 derives, committing every 10 events; it renews its lease as it goes.
    let mut w1 = Command::new(env!("CARGO_BIN_EXE_livestate"))
        .args(["derive", "--once", "--commit-every", "10", "--dir"])
        .arg(&d1)
        .envs(s3.env())
        .envs(ttl_env)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while s3.snapshots("livestate-lease", "wh/state.db/stock/").is_empty() {
        assert!(started.elapsed() < Duration::from_secs(60), "writer 1 committed nothing");
        if let Some(status) = w1.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut w1.stderr.take().unwrap(), &mut err).unwrap();
            panic!("writer 1 ended ({status}) before it was stopped: {err}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    // A second directory on the same warehouse is refused while writer 1 holds the lease.
    let out = run(&s3, &d2, &["init", "--warehouse", warehouse], &ttl_env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a second writer must be refused");
    assert!(stderr.contains("in use by another livestate writer"), "{stderr}");
    assert!(!d2.join("spec.tmp").exists(), "a refused init leaves no staged spec behind");

    // Writer 1 stalls (as in a long pause) past its lease; writer 2 takes the warehouse over
    // and commits.
    let pid = w1.id().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    assert!(w1.try_wait().unwrap().is_none(), "writer 1 was still deriving when stopped");
    std::thread::sleep(ttl + Duration::from_millis(500));
    let out = run(&s3, &d2, &["init", "--warehouse", warehouse], &ttl_env);
    assert!(
        out.status.success(),
        "writer 2 takes the expired lease: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let compacted =
        String::from_utf8(run(&s3, &d2, &["compact", "stock", "--full"], &ttl_env).stdout).unwrap();
    assert!(compacted.contains("COMPACT snapshot"), "writer 2 commits: {compacted}");
    let before = s3.snapshots("livestate-lease", "wh/");

    // Writer 1 resumes: its next commit is refused, and nothing it could write lands.
    assert!(Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());
    let out = w1.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "writer 1 must not finish its derivation");
    assert!(stderr.contains("taken over"), "writer 1 says why: {stderr}");
    let after = s3.snapshots("livestate-lease", "wh/");
    // Every snapshot writer 2 saw is still there, unchanged. (A commit writer 1 had already
    // checked its lease for when it was stopped may still land as a new snapshot: the window
    // docs/formats/lease.md describes. It never replaces one.)
    for (key, etag) in &before {
        assert_eq!(after.get(key), Some(etag), "{key} overwritten or removed after the takeover");
    }
    assert!(after.len() <= before.len() + 2, "writer 1 kept committing after losing its lease: {after:?}");

    // A writer that ends cleanly gives the lease up: writer 1's directory takes the warehouse
    // back at once, well within the TTL, after writer 2's compaction ended.
    let out = run(&s3, &d1, &["expire"], &ttl_env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let released = Instant::now();
    let d3 = tmp.path().join("d3");
    let out = run(&s3, &d3, &["init", "--warehouse", warehouse], &ttl_env);
    assert!(
        out.status.success() && released.elapsed() < ttl,
        "a third directory takes the released lease at once: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_serve_records_derives_pins_a_proposal_and_gives_the_lease_up_on_sigterm() {
    let s3 = S3Server::start();
    s3.create_bucket("livestate-serve");
    let warehouse = "s3://livestate-serve/wh";
    // A lease that would outlive the test: only giving it up lets another directory in.
    let ttl_env = [("LIVESTATE_LEASE_TTL_MS", "600000")];
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    assert!(run(&s3, &dir, &["init", "--warehouse", warehouse], &ttl_env).status.success());
    let token = |name: &str| livestate(&s3, &dir, &["token", "add", name]).trim().to_string();
    let (inventory, agent) = (token("module:inventory"), token("agent:procurement"));
    let server = livestate_testkit::ServeCommand::new(Path::new(env!("CARGO_BIN_EXE_livestate")), &dir)
        .envs(s3.env())
        .envs(ttl_env)
        .capture_stderr()
        .start();
    let as_inventory = livestate_client::Client::new(&server.url(), &inventory).unwrap();
    let as_agent = livestate_client::Client::new(&server.url(), &agent).unwrap();

    let count = |n: i64| {
        json!({"id": format!("c{n}"), "type": "inventory.stock_counted", "occurred_at": "2026-03-02T08:00:00Z", "data": {"item": "bolt", "location": "north", "on_hand": n}}).to_string() + "\n"
    };
    as_inventory.emit(&count(7)).await.unwrap();
    let read = as_agent.consistent_read(&[TableRead::table("stock").key("item", "bolt")]).await.unwrap();
    let r = &read.results[0];
    assert_eq!(r.cell(0, "on_hand"), json!(7), "{read}");
    let created = as_agent.propose(&common::bolt_order_citing(r)).await.unwrap();
    let tag = created.tags.as_ref().unwrap()[0].tag.clone();
    as_inventory.emit(&count(9)).await.unwrap();
    as_agent.consistent_read(&[TableRead::table("stock")]).await.unwrap();

    // SIGTERM, as a service manager stops it: pending work committed, the lease given up.
    let out = server.stop("TERM");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains("everything pending was committed"), "{stderr}");

    // The bucket holds what the server wrote: the latest stock and the pinned one, for any reader.
    let latest = pypaimon_rows(&s3, warehouse, "stock", None);
    assert_eq!(latest, livestate_rows(&s3, &dir, "stock", &[]));
    assert!(latest[0].contains("\"on_hand\":9"), "{latest:?}");
    let pinned = pypaimon_rows(&s3, warehouse, "stock", Some(&tag));
    assert!(pinned[0].contains("\"on_hand\":7"), "the tag pins what the agent cited: {pinned:?}");

    // Another directory takes the warehouse at once, though the lease had ten minutes to run.
    let other = tmp.path().join("standby");
    let out = run(&s3, &other, &["init", "--warehouse", warehouse], &ttl_env);
    assert!(
        out.status.success(),
        "the stopped server gave its lease up: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_lease_checks_never_take_the_holders_own_renewals_for_a_takeover() {
    use livestate_engine::lease::Lease;
    use livestate_engine::warehouse::S3Env;
    let s3 = S3Server::start();
    s3.create_bucket("livestate-renew");
    let loc = livestate_engine::S3Location::parse("s3://livestate-renew/wh").unwrap();
    let env = S3Env {
        endpoint: Some(s3.endpoint.clone()),
        region: "us-east-1".into(),
        access_key_id: Some("testing".into()),
        secret_access_key: Some("testing".into()),
        session_token: None,
        path_style: true,
    };
    // Renewed every 200 ms while checks run back to back, as commits check it under load.
    let lease = Lease::acquire_with(&loc, &env, "writer-a", Duration::from_millis(600)).await.unwrap();
    let first = lease.epoch().unwrap();
    let started = Instant::now();
    let mut checks = 0;
    while started.elapsed() < Duration::from_secs(3) {
        if let Err(e) = lease.check().await {
            panic!("check {checks} refused the holder's own lease: {e}");
        }
        checks += 1;
    }
    assert!(lease.epoch().unwrap() >= first + 5, "the lease was renewed meanwhile ({checks} checks)");
    lease.release().await.unwrap();
}
