//! Readers at scale: pypaimon's Ray reader (`pypaimon.ray.read_paimon`, a Ray Dataset) and
//! Daft reader (`pypaimon.daft.read_paimon`, a Daft DataFrame) read livestate's tables, the
//! latest snapshot and a pinned tag, and see exactly the rows `livestate read` prints.
//!
//! Ray 2.60 and Daft 0.7.26 come from `scripts/pyenv.sh --with-scale-readers`, into the same venv
//! as pypaimon. When pip has no wheel of them for this Python, the script exits 3 and the test
//! skips, saying so on stderr.

mod common;

use common::{canonical, emit, livestate, livestate_rows, python, repo};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

/// A python that imports pypaimon, ray and daft, or `None` (after saying why) when no wheel of
/// Ray or Daft exists for this Python.
fn scale_python() -> Option<String> {
    let py = python();
    let has_engines = Command::new(&py)
        .args(["-c", "import pypaimon.ray, pypaimon.daft, ray, daft"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if has_engines {
        return Some(py);
    }
    let out = Command::new("bash")
        .arg(repo().join("scripts/pyenv.sh"))
        .arg("--with-scale-readers")
        .output()
        .expect("run scripts/pyenv.sh --with-scale-readers");
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => Some(String::from_utf8(out.stdout).unwrap().lines().last().unwrap().trim().to_string()),
        Some(3) => {
            eprintln!("SKIPPED: Ray/Daft readers not tested: {}", stderr.lines().last().unwrap_or_default());
            None
        }
        _ => panic!("scripts/pyenv.sh --with-scale-readers failed: {stderr}"),
    }
}

/// Reads `reads` (`state.T` or `state.T@TAG`) with one engine; rows per read, canonical.
fn engine_rows(py: &str, engine: &str, dir: &Path, reads: &[String]) -> Vec<Vec<String>> {
    let out_dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let out = Command::new(py)
        .arg(repo().join("tests/interop/read_scale.py"))
        .arg(engine)
        .arg(dir.join("warehouse"))
        .arg(out_dir.path())
        .args(reads)
        .env("RAY_USAGE_STATS_ENABLED", "0")
        .env("DAFT_ANALYTICS_ENABLED", "0")
        .env("DO_NOT_TRACK", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{engine} read of {reads:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{engine}: {} read(s) in {:.1}s", reads.len(), started.elapsed().as_secs_f64());
    (0..reads.len())
        .map(|i| {
            let text = std::fs::read_to_string(out_dir.path().join(format!("{i}.jsonl"))).unwrap();
            canonical(text.lines().map(|l| serde_json::from_str(l).unwrap()))
        })
        .collect()
}

/// The snapshot id in a table's receipt.
fn snapshot_of(dir: &Path, table: &str) -> i64 {
    let v: Value = serde_json::from_str(&livestate(dir, &["read", table, "--json"])).unwrap();
    v["receipt"]["snapshot_id"].as_i64().unwrap()
}

#[tokio::test]
async fn ray_and_daft_read_livestate_tables_and_a_pinned_tag() {
    let Some(py) = scale_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    livestate(&dir, &["init"]);
    let events = livestate_sim::company_events(&livestate_sim::SimConfig::default());
    emit(&dir, &livestate_sim::to_json_lines(&events));
    livestate(&dir, &["derive", "--once"]);

    // Pin the current stock and open orders as a proposal would (the same `pin` the server
    // uses), then move both tables on.
    let pinned = ["stock", "open_orders"];
    let mut tags = Vec::new();
    {
        let ls = livestate_engine::Livestate::open(&dir).await.unwrap();
        for t in pinned {
            let snapshot = snapshot_of(&dir, t);
            let tag = format!("proposal-scale-{t}-s{snapshot}");
            ls.maintainer(t).await.unwrap().pin(&tag, snapshot, None).await.unwrap();
            tags.push(tag);
        }
    }
    let more: String = [
        json!({"id": "more-1", "type": "inventory.stock_counted", "occurred_at": "2026-03-03T09:00:00Z", "data": {"item": "part-0001", "location": "north", "on_hand": 3}}),
        json!({"id": "more-2", "type": "commerce.order_shipped", "occurred_at": "2026-03-03T09:00:01Z", "data": {"order_id": "so-00002", "line": 1, "item": "part-0003", "location": "east", "qty": 8}}),
        json!({"id": "more-3", "type": "commerce.order_placed", "occurred_at": "2026-03-03T09:00:02Z", "data": {"order_id": "so-scale", "line": 1, "customer": "c-1", "item": "part-0001", "location": "north", "qty": 2, "unit_price": "4.20"}}),
    ]
    .iter()
    .map(|v| v.to_string() + "\n")
    .collect();
    emit(&dir, &more);
    livestate(&dir, &["derive", "--once"]);

    let latest = ["stock", "open_orders", "reservations_total", "work_queue"];
    let mut reads: Vec<String> = latest.iter().map(|t| format!("state.{t}")).collect();
    reads.extend(pinned.iter().zip(&tags).map(|(t, tag)| format!("state.{t}@{tag}")));
    let mut expected: Vec<Vec<String>> = latest.iter().map(|t| livestate_rows(&dir, t, &[])).collect();
    for (t, tag) in pinned.iter().zip(&tags) {
        let at_tag = livestate_rows(&dir, t, &["--tag", tag]);
        assert_ne!(at_tag, livestate_rows(&dir, t, &[]), "{t}: the tag pins an older state");
        expected.push(at_tag);
    }
    for rows in &expected {
        assert!(!rows.is_empty());
    }

    for engine in ["ray", "daft"] {
        let got = engine_rows(&py, engine, &dir, &reads);
        for ((read, got), want) in reads.iter().zip(&got).zip(&expected) {
            assert_eq!(got, want, "{engine} read {read}");
        }
    }
}
