//! Commits to an append table shaped like `record.events`, with append compaction after every
//! commit (as `livestate serve` does for the archive) versus none, side by side.
//!
//! ```text
//! cargo bench -p livestate-lsm --bench append -- --commits 1000 --rows 1000
//! ```
//!
//! Each commit appends `--rows` events (an offset, an id, a type and a JSON payload of about
//! 200 bytes) to one day partition. "on" runs automatic append compaction after every commit
//! and expires snapshots every 100 commits, keeping the 10 newest; "off" is the `paimon` crate
//! alone, expiring the same way so only compaction differs.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType as ADT, Field, Schema as ASchema};
use futures::TryStreamExt;
use livestate_lsm::{CommitLock, CompactMode, Maintainer, Version};
use paimon::spec::{BigIntType, DataType, Schema, VarCharType};
use paimon::Table;

struct Args {
    commits: usize,
    rows: usize,
}

fn args() -> Args {
    Args {
        commits: common::number_flag("--commits").unwrap_or(1000),
        rows: common::number_flag("--rows").unwrap_or(1000),
    }
}

#[derive(Default)]
struct Figures {
    commit_times: Vec<Duration>,
    compact: Duration,
    rewritten_rows: i64,
    live_files: usize,
    data_files_on_disk: usize,
    data_bytes_on_disk: u64,
    manifest_bytes_on_disk: u64,
    plan: Duration,
    full_read: Duration,
    rows_read: usize,
}

async fn create(dir: &Path) -> Table {
    let string = || DataType::VarChar(VarCharType::string_type());
    let schema = Schema::builder()
        .column("event_offset", DataType::BigInt(BigIntType::new()))
        .column("id", string())
        .column("type", string())
        .column("data", string())
        .column("day", string())
        .partition_keys(["day"])
        .option("snapshot.num-retained.min", "10")
        .option("snapshot.time-retained", "1 ms")
        .build()
        .unwrap();
    common::create_table(dir, "record", "events", schema).await
}

fn batch(from: usize, rows: usize) -> RecordBatch {
    let schema = Arc::new(ASchema::new(vec![
        Field::new("event_offset", ADT::Int64, true),
        Field::new("id", ADT::Utf8, true),
        Field::new("type", ADT::Utf8, true),
        Field::new("data", ADT::Utf8, true),
        Field::new("day", ADT::Utf8, true),
    ]));
    let offsets: Vec<i64> = (from..from + rows).map(|o| o as i64).collect();
    let ids: Vec<String> = offsets.iter().map(|o| format!("evt-{o:012}")).collect();
    let types: Vec<&str> = offsets
        .iter()
        .map(|o| ["inventory.stock_counted", "commerce.order_placed"][(*o % 2) as usize])
        .collect();
    let data: Vec<String> = offsets
        .iter()
        .map(|o| {
            format!(
                r#"{{"item":"part-{:05}","location":"loc-{}","qty":{},"order_id":"so-{:08}","note":"steady load"}}"#,
                o % 10_000,
                o % 7,
                o % 97,
                o
            )
        })
        .collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(offsets)),
            Arc::new(StringArray::from(ids)),
            Arc::new(StringArray::from(types)),
            Arc::new(StringArray::from(data)),
            Arc::new(StringArray::from(vec!["2026-12-01"; rows])),
        ],
    )
    .unwrap()
}

async fn read_all(table: &Table) -> (Duration, usize) {
    let t = Instant::now();
    let rb = table.new_read_builder();
    let plan = rb.new_scan().plan().await.unwrap();
    let planned = t.elapsed();
    let batches: Vec<RecordBatch> =
        rb.new_read().unwrap().to_arrow(plan.splits()).unwrap().try_collect().await.unwrap();
    (planned, batches.iter().map(RecordBatch::num_rows).sum())
}

async fn run(a: &Args, dir: &Path, compact: bool) -> Figures {
    let table = create(dir).await;
    let lock = CommitLock::default();
    let m = Maintainer::new(table.clone(), "record.events", lock.clone()).unwrap();
    let wb = table.new_write_builder().with_commit_user("bench").unwrap();
    let mut write = wb.new_write().unwrap();
    let commit = wb.new_commit();
    let mut f = Figures::default();
    let progress = (a.commits / 10).max(1);
    for n in 0..a.commits {
        let t = Instant::now();
        write.write_arrow_batch(&batch(n * a.rows, a.rows)).await.unwrap();
        let msgs = write.prepare_commit().await.unwrap();
        {
            let _g = lock.lock().await;
            commit.commit_with_identifier(msgs, n as i64 + 1).await.unwrap();
        }
        f.commit_times.push(t.elapsed());
        let t = Instant::now();
        if compact {
            let r = m.compact(CompactMode::Auto, |_, _| {}).await.unwrap();
            f.rewritten_rows += r.rows_in;
        }
        if n % 100 == 99 {
            m.expire(chrono::Utc::now().timestamp_millis(), |_, _| {}).await.unwrap();
        }
        f.compact += t.elapsed();
        if n % progress == progress - 1 {
            eprintln!("  {}: {}/{} commits", if compact { "on" } else { "off" }, n + 1, a.commits);
        }
    }
    write.close().await;
    let table_dir = dir.join("record.db/events");
    (f.data_files_on_disk, f.data_bytes_on_disk) = common::files(&table_dir, &|p| p.contains("/bucket-"));
    f.manifest_bytes_on_disk = common::files(&table_dir.join("manifest"), &|_| true).1;
    let latest = table.snapshot_manager().get_latest_snapshot_id().await.unwrap().unwrap();
    f.live_files = livestate_lsm::live_files(&table, "record.events", &Version::Snapshot(latest))
        .await
        .unwrap()
        .iter()
        .map(|b| b.files.len())
        .sum();
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let (plan, rows) = read_all(&table).await;
        times.push((t.elapsed(), plan));
        f.rows_read = rows;
    }
    times.sort();
    (f.full_read, f.plan) = times[1];
    f
}

fn main() {
    let a = args();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        eprintln!("{} commits of {} events to an append table like record.events", a.commits, a.rows);
        let off = run(&a, &tmp.path().join("off"), false).await;
        let on = run(&a, &tmp.path().join("on"), true).await;
        assert_eq!(off.rows_read, a.commits * a.rows, "every event is read once");
        assert_eq!(on.rows_read, off.rows_read, "both tables hold the same events");

        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
        let pct = |f: &Figures, q: f64| {
            let mut t = f.commit_times.clone();
            t.sort();
            t[((t.len() - 1) as f64 * q) as usize]
        };
        let ratio = |on: f64, off: f64| if off > 0.0 { format!("{:.2}x", on / off) } else { "-".into() };
        let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1 << 20) as f64);
        println!(
            "\n| {} commits x {} events | compaction off | compaction on | on / off |",
            a.commits, a.rows
        );
        println!("|---|---:|---:|---:|");
        let row =
            |name: &str, off: String, on: String, r: String| println!("| {name} | {off} | {on} | {r} |");
        row(
            "live data files",
            off.live_files.to_string(),
            on.live_files.to_string(),
            ratio(on.live_files as f64, off.live_files as f64),
        );
        row(
            "data files on disk (10 newest snapshots kept)",
            off.data_files_on_disk.to_string(),
            on.data_files_on_disk.to_string(),
            ratio(on.data_files_on_disk as f64, off.data_files_on_disk as f64),
        );
        row(
            "data bytes on disk",
            mib(off.data_bytes_on_disk),
            mib(on.data_bytes_on_disk),
            ratio(on.data_bytes_on_disk as f64, off.data_bytes_on_disk as f64),
        );
        row(
            "manifest bytes on disk",
            mib(off.manifest_bytes_on_disk),
            mib(on.manifest_bytes_on_disk),
            ratio(on.manifest_bytes_on_disk as f64, off.manifest_bytes_on_disk as f64),
        );
        row(
            "full read, median of 3",
            ms(off.full_read),
            ms(on.full_read),
            ratio(on.full_read.as_secs_f64(), off.full_read.as_secs_f64()),
        );
        row(
            "of which planning",
            ms(off.plan),
            ms(on.plan),
            ratio(on.plan.as_secs_f64(), off.plan.as_secs_f64()),
        );
        for (name, q) in [("commit p50", 0.5), ("commit p99", 0.99)] {
            row(
                name,
                ms(pct(&off, q)),
                ms(pct(&on, q)),
                ratio(pct(&on, q).as_secs_f64(), pct(&off, q).as_secs_f64()),
            );
        }
        let total = |f: &Figures| f.commit_times.iter().sum::<Duration>();
        row(
            "commits, last 100 (sum)",
            ms(off.commit_times.iter().rev().take(100).sum()),
            ms(on.commit_times.iter().rev().take(100).sum()),
            String::new(),
        );
        row(
            "all commits (sum)",
            ms(total(&off)),
            ms(total(&on)),
            ratio(total(&on).as_secs_f64(), total(&off).as_secs_f64()),
        );
        row("compaction and expiry (sum)", ms(off.compact), ms(on.compact), String::new());
        row(
            "rows rewritten per row written",
            "0".into(),
            format!("{:.2}", on.rewritten_rows as f64 / (a.commits * a.rows) as f64),
            String::new(),
        );
    });
}
