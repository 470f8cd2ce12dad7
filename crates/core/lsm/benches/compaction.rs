//! Commits of upserts to a partial-update table with compaction on versus off, side by side.
//!
//! ```text
//! cargo bench -p livestate-lsm --bench compaction -- --commits 1000
//! cargo bench -p livestate-lsm --bench compaction -- --commits 10000 --skip-full-each
//! ```
//!
//! Each commit upserts `--rows` random keys out of `--keys` (half set `a`, half set `b`, as two
//! modules filling one row would). "on" compacts after every commit the way a minutes-budget
//! table does (universal compaction, inline) and expires snapshots every 100 commits, keeping
//! the 10 newest; "full each commit" does the same with a full compaction after every commit
//! (`full-compaction.delta-commits = 1`); "off" is the `paimon` crate alone. "fully compacted"
//! is the universal table after one more full compaction: the floor for read times.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType as ADT, Field, Schema as ASchema};
use futures::TryStreamExt;
use livestate_lsm::{CommitLock, CompactMode, Maintainer};
use paimon::spec::{BigIntType, DataType, Datum, PredicateBuilder, Schema, VarCharType};
use paimon::Table;

struct Args {
    commits: usize,
    rows: usize,
    keys: u64,
    buckets: usize,
    /// Skip the "full each commit" run (it dominates the time of long runs).
    skip_full_each: bool,
}

fn args() -> Args {
    Args {
        commits: common::number_flag("--commits").unwrap_or(1000),
        rows: common::number_flag("--rows").unwrap_or(1000),
        keys: common::number_flag("--keys").map_or(100_000, |k| k as u64),
        buckets: common::number_flag("--buckets").unwrap_or(2),
        skip_full_each: std::env::args().any(|x| x == "--skip-full-each"),
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[derive(Default)]
struct Figures {
    write: Duration,
    compact: Duration,
    compactions: usize,
    data_files: usize,
    max_files_per_bucket: usize,
    max_runs: usize,
    snapshots: usize,
    manifests: usize,
    full_read: Duration,
    key_read: Duration,
    rows_read: usize,
}

async fn create(dir: &Path, buckets: usize) -> Table {
    let schema = Schema::builder()
        .column("k", DataType::BigInt(BigIntType::new()))
        .column("a", DataType::BigInt(BigIntType::new()))
        .column("b", DataType::VarChar(VarCharType::string_type()))
        .primary_key(["k"])
        .option("bucket", buckets.to_string())
        .option("merge-engine", "partial-update")
        // Expiry keeps the 10 newest snapshots (only the "on" run expires anything).
        .option("snapshot.time-retained", "1 ms")
        .build()
        .unwrap();
    common::create_table(dir, "db", "stock", schema).await
}

fn batch(rng: &mut Rng, rows: usize, keys: u64, n: usize) -> RecordBatch {
    let schema = Arc::new(ASchema::new(vec![
        Field::new("k", ADT::Int64, false),
        Field::new("a", ADT::Int64, true),
        Field::new("b", ADT::Utf8, true),
    ]));
    let ks: Vec<i64> = (0..rows).map(|_| (rng.next() % keys) as i64).collect();
    let a: Vec<Option<i64>> =
        (0..rows).map(|i| n.is_multiple_of(2).then_some((n * rows + i) as i64)).collect();
    let b: Vec<Option<String>> =
        (0..rows).map(|i| (!n.is_multiple_of(2)).then(|| format!("v{n}-{i}"))).collect();
    RecordBatch::try_new(
        schema,
        vec![Arc::new(Int64Array::from(ks)), Arc::new(Int64Array::from(a)), Arc::new(StringArray::from(b))],
    )
    .unwrap()
}

fn count(dir: &Path, f: &dyn Fn(&str) -> bool) -> usize {
    common::files(dir, f).0
}

async fn read_all(table: &Table) -> usize {
    let rb = table.new_read_builder();
    let plan = rb.new_scan().plan().await.unwrap();
    let batches: Vec<RecordBatch> =
        rb.new_read().unwrap().to_arrow(plan.splits()).unwrap().try_collect().await.unwrap();
    batches.iter().map(RecordBatch::num_rows).sum()
}

async fn read_key(table: &Table, k: i64) -> usize {
    let pb = PredicateBuilder::new(table.schema().fields());
    let mut rb = table.new_read_builder();
    rb.with_filter(pb.equal("k", Datum::Long(k)).unwrap());
    let plan = rb.new_scan().plan().await.unwrap();
    let batches: Vec<RecordBatch> =
        rb.new_read().unwrap().to_arrow(plan.splits()).unwrap().try_collect().await.unwrap();
    batches.iter().map(RecordBatch::num_rows).sum()
}

async fn median<F: std::future::Future<Output = usize>>(
    runs: usize,
    mut f: impl FnMut() -> F,
) -> (Duration, usize) {
    let mut times = Vec::new();
    let mut n = 0;
    for _ in 0..runs {
        let t = Instant::now();
        n = f().await;
        times.push(t.elapsed());
    }
    times.sort();
    (times[times.len() / 2], n)
}

async fn measure(table: &Table, dir: &Path, m: &Maintainer, f: &mut Figures) {
    let table_dir = dir.join("db.db/stock");
    f.data_files = count(&table_dir, &|p| p.contains("/bucket-"));
    f.snapshots = count(&table_dir.join("snapshot"), &|p| p.contains("snapshot-"));
    f.manifests = count(&table_dir.join("manifest"), &|_| true);
    let h = m.health().await.unwrap();
    f.max_files_per_bucket = h.buckets.iter().map(|b| b.files).max().unwrap_or(0);
    f.max_runs = h.buckets.iter().map(|b| b.sorted_runs).max().unwrap_or(0);
    // Reopen through the catalog as a reader would.
    let (full, rows) = median(3, || read_all(table)).await;
    f.full_read = full;
    f.rows_read = rows;
    let mut k = 0;
    let (key, _) = median(5, || {
        k += 7919;
        read_key(table, k)
    })
    .await;
    f.key_read = key;
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Off,
    Universal,
    FullEachCommit,
}

async fn run(a: &Args, dir: &Path, mode: Mode) -> (Figures, Option<Figures>) {
    let compact = mode != Mode::Off;
    let table = create(dir, a.buckets).await;
    let lock = CommitLock::default();
    let m = Maintainer::new(table.clone(), "db.stock", lock.clone()).unwrap();
    let wb = table.new_write_builder().with_commit_user("bench").unwrap();
    let mut write = wb.new_write().unwrap();
    let commit = wb.new_commit();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut f = Figures::default();
    let progress = (a.commits / 10).max(1);
    for n in 0..a.commits {
        let t = Instant::now();
        write.write_arrow_batch(&batch(&mut rng, a.rows, a.keys, n)).await.unwrap();
        let msgs = write.prepare_commit().await.unwrap();
        {
            let _g = lock.lock().await;
            commit.commit_with_identifier(msgs, n as i64 + 1).await.unwrap();
        }
        f.write += t.elapsed();
        if compact {
            let t = Instant::now();
            let how = if mode == Mode::FullEachCommit { CompactMode::Full } else { CompactMode::Auto };
            let r = m.compact(how, |_, _| {}).await.unwrap();
            f.compactions += usize::from(r.buckets > 0);
            if n % 100 == 99 {
                m.expire(chrono::Utc::now().timestamp_millis(), |_, _| {}).await.unwrap();
            }
            f.compact += t.elapsed();
        }
        if n % progress == progress - 1 {
            let name = ["off", "universal", "full each commit"][mode as usize];
            eprintln!("  {name}: {}/{} commits", n + 1, a.commits);
        }
    }
    write.close().await;
    measure(&table, dir, &m, &mut f).await;
    if mode != Mode::Universal {
        return (f, None);
    }
    let mut full = Figures::default();
    m.compact(CompactMode::Full, |_, _| {}).await.unwrap();
    measure(&table, dir, &m, &mut full).await;
    (f, Some(full))
}

fn main() {
    let a = args();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        eprintln!(
            "{} commits of {} upserts over {} keys, partial-update, {} buckets",
            a.commits, a.rows, a.keys, a.buckets
        );
        let (off, _) = run(&a, &tmp.path().join("off"), Mode::Off).await;
        let (on, full) = run(&a, &tmp.path().join("on"), Mode::Universal).await;
        let (eager, _) = if a.skip_full_each {
            (Figures::default(), None)
        } else {
            run(&a, &tmp.path().join("eager"), Mode::FullEachCommit).await
        };
        let full = full.unwrap();
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
        let rate = |f: &Figures| {
            let secs = (f.write + f.compact).as_secs_f64();
            format!("{:.0} rows/s", (a.commits * a.rows) as f64 / secs)
        };
        let ratio = |x: f64, y: f64| if y > 0.0 { format!("{:.2}x", x / y) } else { "-".into() };
        println!(
            "\n| {} commits x {} upserts | off | universal (default) | full each commit | fully compacted (floor) | universal / floor | full each / floor |",
            a.commits, a.rows
        );
        println!("|---|---|---|---|---|---|---|");
        let row = |name: &str, cells: [String; 4], ratios: [String; 2]| {
            println!("| {name} | {} | {} | {} | {} | {} | {} |", cells[0], cells[1], cells[2], cells[3], ratios[0], ratios[1]);
        };
        let all = [&off, &on, &eager, &full];
        let count_row = |name: &str, get: &dyn Fn(&Figures) -> usize| {
            row(name, all.map(|f| get(f).to_string()), [String::new(), String::new()]);
        };
        count_row("data files on disk", &|f| f.data_files);
        count_row("max files per bucket", &|f| f.max_files_per_bucket);
        count_row("max sorted runs per bucket", &|f| f.max_runs);
        count_row("snapshot files", &|f| f.snapshots);
        count_row("manifest files", &|f| f.manifests);
        let read_row = |name: &str, get: &dyn Fn(&Figures) -> Duration| {
            let floor = get(&full).as_secs_f64();
            row(
                name,
                all.map(|f| ms(get(f))),
                [ratio(get(&on).as_secs_f64(), floor), ratio(get(&eager).as_secs_f64(), floor)],
            );
        };
        read_row("full read (median of 3)", &|f| f.full_read);
        read_row("single-key read (median of 5)", &|f| f.key_read);
        row(
            "write throughput (commit + compaction)",
            [rate(&off), rate(&on), rate(&eager), String::new()],
            [
                format!("{} of off", ratio((off.write + off.compact).as_secs_f64(), (on.write + on.compact).as_secs_f64())),
                format!("{} of off", ratio((off.write + off.compact).as_secs_f64(), (eager.write + eager.compact).as_secs_f64())),
            ],
        );
        row(
            "time in commits / in compaction",
            [ms(off.write), format!("{} / {}", ms(on.write), ms(on.compact)), format!("{} / {}", ms(eager.write), ms(eager.compact)), String::new()],
            [String::new(), String::new()],
        );
        row(
            "compactions",
            ["0".into(), on.compactions.to_string(), eager.compactions.to_string(), String::new()],
            [String::new(), String::new()],
        );
        assert_eq!(off.rows_read, on.rows_read, "every run holds the same rows");
        assert_eq!(on.rows_read, full.rows_read);
        if !a.skip_full_each {
            assert_eq!(on.rows_read, eager.rows_read);
        }
        println!("\nrows in table: {}", on.rows_read);
    });
}
