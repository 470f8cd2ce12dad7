//! `kill -9` of the deriver at arbitrary moments loses and doubles nothing: after a final catch-up,
//! every table equals the fold of the whole record, and the archive holds every event once.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn livestate(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_livestate"));
    c.args(args).arg("--dir").arg(dir);
    c
}

/// Appends `events` through `livestate emit -`.
fn emit_all(dir: &Path, events: &[Value]) {
    let mut emit =
        livestate(dir, &["emit", "-"]).stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    emit.stdin.take().unwrap().write_all(livestate_sim::to_json_lines(events).as_bytes()).unwrap();
    assert!(emit.wait().unwrap().success());
}

fn ok(mut c: Command) -> String {
    let out = c.output().unwrap();
    assert!(out.status.success(), "{:?} failed: {}", c, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Waits up to `delay_ms` for `child` to finish, then SIGKILLs it (no destructor, no flush, no
/// final commit). Returns whether it was still running.
fn kill_9_after(mut child: std::process::Child, delay_ms: u64) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(delay_ms) && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(3));
    }
    let running = child.try_wait().unwrap().is_none();
    if running {
        child.kill().unwrap();
    }
    child.wait().unwrap();
    running
}

#[test]
fn kill_9_mid_derivation_loses_and_doubles_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    ok(livestate(&dir, &["init"]));
    let cfg = livestate_sim::SimConfig { items: 150, orders: 12_000, jobs: 400, ..Default::default() };
    let events = livestate_sim::company_events(&cfg);
    emit_all(&dir, &events);

    // The model: what reservations_total must hold after the whole record is folded in.
    let mut model: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for e in &events {
        let d = &e["data"];
        let sign = match e["type"].as_str().unwrap() {
            "commerce.order_placed" => 1,
            "commerce.order_shipped" | "commerce.order_cancelled" => -1,
            _ => continue,
        };
        let entry = model.entry(d["item"].as_str().unwrap().to_string()).or_default();
        entry.0 += sign * d["qty"].as_i64().unwrap();
        entry.1 += sign;
    }

    let mut kills_mid_run = 0;
    for delay_ms in [120u64, 260, 400, 90, 330, 520] {
        let child = livestate(&dir, &["derive", "--once", "--commit-every", "700"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        kills_mid_run += usize::from(kill_9_after(child, delay_ms));
    }
    assert!(
        kills_mid_run >= 2,
        "the deriver must have been killed mid-run at least twice, was {kills_mid_run}"
    );
    ok(livestate(&dir, &["derive", "--once"]));

    let out: Value =
        serde_json::from_str(&ok(livestate(&dir, &["read", "reservations_total", "--json"]))).unwrap();
    let got: BTreeMap<String, (i64, i64)> = out["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["item"].as_str().unwrap().to_string(),
                (r["reserved_qty"].as_i64().unwrap(), r["open_lines"].as_i64().unwrap()),
            )
        })
        .collect();
    assert_eq!(got, model, "sums must equal the fold of the record: nothing lost, nothing applied twice");
    assert_eq!(out["receipt"]["offset"].as_u64().unwrap(), events.len() as u64);

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let ls = livestate_engine::Livestate::open(&dir).await.unwrap();
        let archive = ls.archive_rows().await.unwrap();
        let offsets: Vec<i64> = archive
            .iter()
            .map(|r| match r[0] {
                livestate_spec::Value::Int(o) => o,
                ref other => panic!("offset column holds {other:?}"),
            })
            .collect();
        assert_eq!(
            offsets,
            (0..events.len() as i64).collect::<Vec<_>>(),
            "every event archived exactly once"
        );
    });
}

/// Every data file under a table's bucket directories.
fn data_files_on_disk(table_dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(table_dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() && p.file_name().unwrap().to_string_lossy().starts_with("bucket-") {
            n += std::fs::read_dir(&p).unwrap().count();
        }
    }
    n
}

fn all_rows(dir: &Path, tables: &[&str]) -> Vec<Value> {
    tables
        .iter()
        .map(|t| {
            let v: Value = serde_json::from_str(&ok(livestate(dir, &["read", t, "--json"]))).unwrap();
            v["rows"].clone()
        })
        .collect()
}

#[test]
fn kill_9_during_compaction_or_expiry_keeps_every_row_and_leftovers_are_cleaned() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    // No compaction while deriving (a trigger never reached), one snapshot retained after expiry.
    let spec = livestate_testkit::example_spec()
        .only(&["events.toml", "mappings.toml", "tables.toml"])
        .option_everywhere("num-sorted-run.compaction-trigger", "1000")
        .option_everywhere("snapshot.num-retained.min", "1")
        .option_everywhere("snapshot.time-retained", "1 ms")
        .write(&tmp.path().join("spec"));
    ok(livestate(&dir, &["init", "--spec", spec.to_str().unwrap()]));
    let cfg = livestate_sim::SimConfig { items: 60, orders: 3000, jobs: 200, ..Default::default() };
    let events = livestate_sim::company_events(&cfg);
    emit_all(&dir, &events);
    ok(livestate(&dir, &["derive", "--once", "--commit-every", "250"]));

    let tables = ["stock", "work_queue", "open_orders", "reservations_total", "item_first_seen"];
    let before = all_rows(&dir, &tables);
    let mut kills_mid_run = 0;
    for (i, delay_ms) in [60u64, 120, 30, 180, 90, 240, 150, 45].into_iter().enumerate() {
        let table = tables[i % tables.len()];
        let args: Vec<&str> = if i % 2 == 0 {
            vec!["compact", table, "--full"]
        } else {
            vec!["expire", "--orphans-older-than", "1h"]
        };
        let child = livestate(&dir, &args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        kills_mid_run += usize::from(kill_9_after(child, delay_ms));
        assert_eq!(
            all_rows(&dir, &tables),
            before,
            "rows changed after {args:?} was killed at {delay_ms} ms"
        );
    }
    assert!(
        kills_mid_run >= 3,
        "compaction or expiry must have been killed mid-run, was {kills_mid_run} times"
    );

    // Finishing the work and sweeping with no safety window leaves exactly the live files.
    for t in tables {
        ok(livestate(&dir, &["compact", t, "--full"]));
    }
    ok(livestate(&dir, &["expire", "--orphans-older-than", "0s"]));
    assert_eq!(all_rows(&dir, &tables), before);
    let info: Value = serde_json::from_str(&ok(livestate(&dir, &["tables", "--json"]))).unwrap();
    for t in info.as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let live: u64 =
            t["health"]["buckets"].as_array().unwrap().iter().map(|b| b["files"].as_u64().unwrap()).sum();
        let on_disk = data_files_on_disk(&dir.join("warehouse/state.db").join(name));
        assert_eq!(on_disk as u64, live, "{name}: files on disk beyond the live ones");
    }
}
