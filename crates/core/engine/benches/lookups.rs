//! Point lookups from the lookup index against a filtered Paimon scan, the changelog's cost on
//! derivation, and trigger latency, side by side in one run.
//!
//! ```text
//! cargo bench -p livestate-engine --bench lookups -- --keys 100000
//! ```
//!
//! The stock table gets `--keys` rows (one count each, `--keys`/1000 commits). Point lookups
//! read random keys through `read::read` with the index and without it (a Paimon scan with the
//! key as filter). Derivation is timed twice on the same events, with the changelog on and with
//! `changelog-producer = none`. Trigger latency is from appending an event that crosses
//! `stock_below_reorder_point` to its firing being stored, with stock's budget at 200 ms.

use std::path::Path;
use std::time::{Duration, Instant};

use livestate_engine::{At, Livestate, ReadRequest};
use serde_json::json;

fn arg(name: &str, default: usize) -> usize {
    let v: Vec<String> = std::env::args().collect();
    v.iter()
        .position(|a| a == name)
        .and_then(|i| v.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn spec_dir(dir: &Path, changelog: bool) -> std::path::PathBuf {
    let spec = livestate_testkit::example_spec().freshness("stock", "200ms");
    let spec = if changelog { spec } else { spec.option_everywhere("changelog-producer", "none") };
    spec.write(&dir.join(if changelog { "spec-on" } else { "spec-off" }))
}

fn item(i: usize) -> String {
    format!("item-{i:07}")
}

fn counts(keys: usize) -> String {
    (0..keys)
        .map(|i| {
            json!({"id": format!("c{i}"), "type": "inventory.stock_counted", "occurred_at": "2026-03-02T08:00:00Z",
                   "data": {"item": item(i), "location": "north", "on_hand": 100 + i % 50}})
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn percentile(mut v: Vec<Duration>, p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

async fn derive_all(ls: &Livestate, commit_every: u64) -> Duration {
    let t = Instant::now();
    let mut d = ls.derivers().await.unwrap();
    ls.catch_up(&mut d, commit_every, &mut |_| {}).await.unwrap();
    d.finish().await;
    t.elapsed()
}

fn main() {
    let keys = arg("--keys", 100_000);
    let samples = arg("--samples", 2000);
    let scans = arg("--scans", 50);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let tmp = tempfile::tempdir().unwrap();
        let events = counts(keys);
        let commit_every = (keys as u64 / 100).max(1000);
        eprintln!("{keys} keys, a commit every {commit_every} events");
        let mut derive_times = Vec::new();
        let mut dirs = Vec::new();
        for changelog in [false, true] {
            let dir = tmp.path().join(if changelog { "on" } else { "off" });
            let ls = Livestate::init(&dir, &spec_dir(tmp.path(), changelog)).await.unwrap();
            ls.emit(&events, false).unwrap();
            derive_times.push(derive_all(&ls, commit_every).await);
            drop(ls);
            dirs.push(dir);
        }
        let ls = Livestate::open(&dirs[1]).await.unwrap();
        let (indexed, files) = (ls.reader(), ls.reader().without_index());
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % keys as u64) as usize
        };
        let read = |index: bool, i: usize| {
            let req = ReadRequest {
                table: "stock".into(),
                keys: vec![("item".into(), item(i)), ("location".into(), "north".into())],
                at: At::Latest,
            };
            let reader = if index { &indexed } else { &files };
            async move {
                let t = Instant::now();
                let r = reader.read(&req).await.unwrap();
                assert_eq!(r.rows.len(), 1);
                assert_eq!(r.receipt.served_by, if index { livestate_engine::read::ServedBy::Index } else { livestate_engine::read::ServedBy::Paimon });
                t.elapsed()
            }
        };
        let mut with_index = Vec::new();
        for _ in 0..samples {
            with_index.push(read(true, next()).await);
        }
        let mut with_paimon = Vec::new();
        for _ in 0..scans {
            with_paimon.push(read(false, next()).await);
        }
        let mut raw_index = Vec::new();
        for _ in 0..samples {
            let key = [livestate_spec::Value::String(item(next())), livestate_spec::Value::String("north".into())];
            let t = Instant::now();
            let row = ls.current_row("stock", &key).unwrap();
            raw_index.push(t.elapsed());
            assert!(row.is_some());
        }

        // Trigger latency: a count that drops a key below its reorder point, appended, derived
        // by steps (stock commits every 100 ms), until the firing is stored.
        let mut latencies = Vec::new();
        let mut d = ls.derivers().await.unwrap();
        for round in 0..10u32 {
            let i = next();
            let plan = json!({"id": format!("p{round}"), "type": "procurement.planning_set", "occurred_at": "2026-03-02T09:00:00Z",
                              "data": {"item": item(i), "location": "north", "reorder_point": 40, "target": 90}});
            ls.emit(&plan.to_string(), false).unwrap();
            d.commit_all().await.unwrap();
            let before = ls.firings().last_seq("stock_below_reorder_point").unwrap();
            let low = json!({"id": format!("l{round}"), "type": "inventory.stock_counted", "occurred_at": "2026-03-02T09:00:01Z",
                             "data": {"item": item(i), "location": "north", "on_hand": 1}});
            let t = Instant::now();
            ls.emit(&low.to_string(), false).unwrap();
            while ls.firings().last_seq("stock_below_reorder_point").unwrap() == before {
                ls.step(&mut d).await.unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            latencies.push(t.elapsed());
        }
        d.finish().await;

        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
        println!("\n| {keys} keys in stock | lookup index | Paimon filtered scan | scan / index |");
        println!("|---|---|---|---|");
        let p50 = (percentile(with_index.clone(), 0.5), percentile(with_paimon.clone(), 0.5));
        let p99 = (percentile(with_index, 0.99), percentile(with_paimon, 0.99));
        println!("| point read p50 (read API, with receipt) | {} | {} | {:.0}x |", us(p50.0), ms(p50.1), p50.1.as_secs_f64() / p50.0.as_secs_f64());
        println!("| point read p99 (read API, with receipt) | {} | {} | {:.0}x |", us(p99.0), ms(p99.1), p99.1.as_secs_f64() / p99.0.as_secs_f64());
        println!("| index get alone p50 / p99 | {} / {} | | |", us(percentile(raw_index.clone(), 0.5)), us(percentile(raw_index, 0.99)));
        println!("\n| derivation of {keys} events | changelog off | changelog on | on / off |");
        println!("|---|---|---|---|");
        let rate = |d: Duration| format!("{:.0} events/s", keys as f64 / d.as_secs_f64());
        println!(
            "| throughput | {} | {} | {:.2}x |",
            rate(derive_times[0]),
            rate(derive_times[1]),
            derive_times[0].as_secs_f64() / derive_times[1].as_secs_f64()
        );
        println!(
            "\ntrigger latency, append to stored firing (stock budget 200 ms, 10 rounds): p50 {}, max {}",
            ms(percentile(latencies.clone(), 0.5)),
            ms(percentile(latencies, 1.0))
        );
        println!("samples: {samples} index reads, {scans} Paimon scans");
    });
}
