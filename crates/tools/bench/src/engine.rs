//! livestate's side of every figure, run in a child process of the benchmark (so its memory is
//! its own): ingest, freshness, lookups and scans, and the LSM after many small commits.
//!
//! Each function drives the engine the way `livestate serve` does: one thread appends (each
//! append durable before it returns), the derivers step continuously and commit each table when
//! its freshness budget says so, compacting and expiring in the background.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use livestate_engine::{At, Derivers, Livestate, ReadRequest, Reader};
use livestate_spec::Value;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::digest::{self, TableDigest};
use crate::error::{BenchError, Result};
use crate::stats::{Latencies, Scanned};
use crate::workload::{key, touches_stock, Generator};

/// The table freshness is measured on (its budget is 1 s in the benchmark spec).
const FRESH_TABLE: &str = "stock";

/// What ingesting the workload did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ingest {
    /// Events per append.
    pub batch: usize,
    pub events: u64,
    /// From the first append to every table committed through the last event.
    pub seconds: f64,
    /// When the last append was acknowledged (all events durable in the record).
    pub append_seconds: f64,
    pub commits: u64,
    pub rows: u64,
    pub data_files: u64,
    pub warehouse_mib: f64,
    pub record_mib: f64,
    pub peak_rss_mib: f64,
}

/// Append-to-visible latency at one event rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Freshness {
    pub rate: u64,
    /// Events per second actually appended.
    pub achieved_rate: f64,
    /// From the start of the append that carried a stock event to the commit of `stock` that
    /// made it readable.
    pub visible: Latencies,
    pub commits: u64,
}

/// Point lookups and full scans of the stock table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reads {
    /// The lookup index, in process.
    pub index: Latencies,
    /// The read API in process (`read::read`: receipt from the latest snapshot, then the index).
    pub read_api: Latencies,
    /// The same read with the index switched off: a Paimon scan with the key as filter.
    pub paimon_scan: Latencies,
    pub scan_rows: u64,
    /// Median of three full reads of the Paimon files (the read API without the index).
    pub scan_seconds: f64,
    /// Median of three full reads through the read API at the latest version (with the lookup
    /// index, which serves a whole read of a table this size from the files since the fifteenth
    /// pass).
    #[serde(default)]
    pub index_scan_seconds: f64,
    /// Median of three full reads of the Paimon files as Arrow batches (livestate's merge, column
    /// by column; no row decoded).
    #[serde(default)]
    pub columnar_scan_seconds: f64,
    pub shape: Shape,
}

/// A table's LSM shape.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Shape {
    pub snapshots: usize,
    pub data_files: usize,
    pub max_sorted_runs: usize,
}

/// The stock table after many small commits.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Steady {
    pub commits: u64,
    pub events_per_commit: usize,
    pub seconds: f64,
    /// Each barrier: derive and commit the new events (compaction runs in the background).
    pub commit: Latencies,
    pub reads: Reads,
}

/// What lies below a directory.
struct DiskUsage {
    parquet_files: u64,
    bytes: u64,
}

/// Parquet data files and bytes of every file below `path`, in one walk.
fn disk_usage(path: &Path) -> DiskUsage {
    let mut parquet = 0;
    let mut bytes = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(p),
                Ok(m) => {
                    parquet += u64::from(p.extension().is_some_and(|x| x == "parquet"));
                    bytes += m.len();
                }
                Err(_) => {}
            }
        }
    }
    DiskUsage { parquet_files: parquet, bytes }
}

const MIB: f64 = 1024.0 * 1024.0;

/// Commits and rows of a derivation run.
#[derive(Debug, Default, Clone, Copy)]
struct Derived {
    commits: u64,
    rows: u64,
}

/// Runs the derivers until `done` is set and every appended event is committed in every table,
/// calling `after_step` after each step.
async fn derive_until_done(
    ls: &Livestate,
    d: &mut Derivers,
    done: &AtomicBool,
    new_events: &Notify,
    after_step: &mut dyn FnMut(&Derivers),
) -> Result<Derived> {
    let mut out = Derived::default();
    loop {
        let step = ls.step(d).await?;
        out.commits += step.commits;
        out.rows += step.rows;
        after_step(d);
        if step.events == 0 {
            if done.load(Ordering::Acquire) && d.position() >= ls.record().next_offset() {
                break;
            }
            tokio::select! {
                _ = new_events.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    }
    out.commits += d.commit_all().await?;
    after_step(d);
    d.finish().await;
    Ok(out)
}

/// Appends on a thread of its own, as `livestate serve` does on its request tasks: each call of
/// `next` gives the next append (or `None` to stop) and gets the offsets appended. Returns the
/// thread, which ends with the time the last append was acknowledged.
fn producer(
    ls: &Arc<Livestate>,
    done: &Arc<AtomicBool>,
    new_events: &Arc<Notify>,
    mut next: impl FnMut(Option<&[u64]>) -> Option<String> + Send + 'static,
) -> std::thread::JoinHandle<Result<Instant>> {
    let (ls, done, new_events) = (Arc::clone(ls), Arc::clone(done), Arc::clone(new_events));
    std::thread::spawn(move || {
        let result = (|| {
            let mut offsets: Vec<u64> = Vec::new();
            let mut first = true;
            while let Some(lines) = next(if first { None } else { Some(&offsets) }) {
                first = false;
                let report = ls.emit(&lines, false)?;
                offsets.clear();
                offsets.extend(report.appended.iter().map(|(_, a)| a.offset));
                new_events.notify_one();
            }
            Ok(Instant::now())
        })();
        done.store(true, Ordering::Release);
        new_events.notify_one();
        result
    })
}

fn join(t: std::thread::JoinHandle<Result<Instant>>) -> Result<Instant> {
    t.join().map_err(|_| BenchError::peer("livestate", "the appending thread panicked"))?
}

/// Creates `dir` from `spec_dir` and ingests the JSON-lines `events`, `batch` events per
/// append.
///
/// # Errors
/// Engine errors; a refused event line.
pub async fn ingest(dir: &Path, spec_dir: &Path, events: &Path, batch: usize) -> Result<Ingest> {
    use std::io::BufRead as _;
    // The input is read one append at a time, as a module sends its events: the memory figure
    // is the engine's, not a copy of the whole workload (PostgreSQL's figure does not include
    // the client's input either).
    let file = std::fs::File::open(events).map_err(BenchError::io("read events", events))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let read_error: Arc<Mutex<Option<std::io::Error>>> = Arc::default();
    let failed = Arc::clone(&read_error);
    let mut n = 0u64;
    let counted = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = Arc::clone(&counted);
    // Each append's lines are read straight into one string sized like the last append's, as a
    // server receives a body of known length: no string per line, no copies as it grows.
    let mut last_len = 0usize;
    let next_append = move |_: Option<&[u64]>| {
        let mut text = String::with_capacity(last_len + last_len / 8);
        let mut taken = 0;
        while taken < batch.max(1) {
            let start = text.len();
            match reader.read_line(&mut text) {
                Ok(0) => break,
                Err(e) => {
                    *failed.lock().expect("no holder panics") = Some(e);
                    return None;
                }
                Ok(_) if text[start..].trim().is_empty() => text.truncate(start),
                Ok(_) => taken += 1,
            }
        }
        last_len = text.len();
        n += taken as u64;
        count.store(n, Ordering::Release);
        (taken > 0).then_some(text)
    };
    let ls = Arc::new(Livestate::init(dir, spec_dir).await?);
    let mut d = ls.derivers().await?;
    let done = Arc::new(AtomicBool::new(false));
    let new_events = Arc::new(Notify::new());
    let start = Instant::now();
    let thread = producer(&ls, &done, &new_events, next_append);
    let derived = derive_until_done(&ls, &mut d, &done, &new_events, &mut |_| {}).await;
    let appended = join(thread)?;
    if let Some(e) = read_error.lock().expect("no holder panics").take() {
        return Err(BenchError::io("read events", events)(e));
    }
    let n = counted.load(Ordering::Acquire);
    let derived = derived?;
    let seconds = start.elapsed().as_secs_f64();
    let DiskUsage { parquet_files: data_files, bytes: warehouse } = disk_usage(&ls.layout().warehouse_dir());
    let record = disk_usage(&ls.layout().record_dir()).bytes;
    let peak_rss_mib = crate::memory::own_peak_rss_mib();
    Ok(Ingest {
        batch,
        events: n,
        seconds,
        append_seconds: appended.duration_since(start).as_secs_f64(),
        commits: derived.commits,
        rows: derived.rows,
        data_files,
        warehouse_mib: warehouse as f64 / MIB,
        record_mib: record as f64 / MIB,
        peak_rss_mib,
    })
}

/// Each state table's content as of its latest snapshot ([`crate::digest`]), read in a process of
/// its own after the ingest, so the ingest's memory figure does not include it.
///
/// # Errors
/// Engine errors.
pub async fn digests_of(dir: &Path) -> Result<Vec<TableDigest>> {
    let ls = Livestate::open(dir).await?;
    let files = ls.reader().without_index();
    let mut out = Vec::new();
    for table in digest::TABLES {
        let req = ReadRequest { table: table.into(), keys: vec![], at: At::Latest };
        let rows = files.read(&req).await?;
        out.push(digest::of(table, rows.rows.iter().map(|r| r.iter().map(digest::cell).collect())));
    }
    Ok(out)
}

/// Appends at `rate` events per second for `seconds` (an append every 10 ms) into the
/// ingested `dir` while deriving, and measures how long each stock event takes to become
/// readable.
///
/// # Errors
/// Engine errors.
pub async fn freshness(
    dir: &Path,
    item_locations: usize,
    seed: u64,
    rate: u64,
    seconds: f64,
) -> Result<Freshness> {
    const TICK: Duration = Duration::from_millis(10);
    let ls = Arc::new(Livestate::open(dir).await?);
    let mut d = ls.derivers().await?;
    ls.catch_up(&mut d, u64::MAX, &mut |_| {}).await?;
    let done = Arc::new(AtomicBool::new(false));
    let new_events = Arc::new(Notify::new());
    // Stock events appended and not yet visible: (offset, when its append started).
    let waiting: Arc<Mutex<VecDeque<(u64, Instant)>>> = Arc::default();
    let mut generator = Generator::new(seed ^ rate, item_locations, &format!("fresh{rate}-"));
    // Skip the initial counts: this directory has every item-location already.
    for _ in 0..item_locations {
        generator.next_event();
    }
    let per_tick = (rate as f64 * TICK.as_secs_f64()).round().max(1.0) as usize;
    let ticks = (seconds / TICK.as_secs_f64()).ceil() as usize;
    let start = Instant::now();
    let mut tick = 0;
    let mut pending: Option<(Instant, Vec<bool>)> = None;
    let w = Arc::clone(&waiting);
    let thread = producer(&ls, &done, &new_events, move |offsets| {
        if let (Some(offsets), Some((at, stock))) = (offsets, pending.take()) {
            let mut w = w.lock().expect("no holder panics");
            w.extend(offsets.iter().zip(stock).filter(|(_, s)| *s).map(|(o, _)| (*o, at)));
        }
        if tick == ticks {
            return None;
        }
        let due = start + TICK * tick as u32;
        tick += 1;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let events: Vec<serde_json::Value> = (0..per_tick).map(|_| generator.next_event()).collect();
        let stock = events.iter().map(|e| touches_stock(e["type"].as_str().unwrap_or(""))).collect();
        pending = Some((Instant::now(), stock));
        Some(events.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))
    });
    let mut samples = Vec::new();
    let mut visible_through = 0;
    let derived = derive_until_done(&ls, &mut d, &done, &new_events, &mut |d| {
        let Some(livestate_engine::Committed { through, .. }) = d.committed(FRESH_TABLE) else { return };
        if through <= visible_through {
            return;
        }
        visible_through = through;
        let now = Instant::now();
        let mut w = waiting.lock().expect("no holder panics");
        while w.front().is_some_and(|(o, _)| *o < through) {
            let (_, at) = w.pop_front().expect("checked");
            samples.push(now.duration_since(at));
        }
    })
    .await;
    let finished = join(thread)?;
    let derived = derived?;
    let appended = (ticks * per_tick) as f64;
    Ok(Freshness {
        rate,
        achieved_rate: appended / finished.duration_since(start).as_secs_f64(),
        visible: Latencies::of(&mut samples),
        commits: derived.commits,
    })
}

fn key_request(i: usize) -> ReadRequest {
    let (item, loc) = key(i);
    ReadRequest {
        table: FRESH_TABLE.into(),
        keys: vec![("item".into(), item), ("location".into(), loc.into())],
        at: At::Latest,
    }
}

/// Spreads `n` lookups over the item-locations (a fixed stride, so every run reads the same keys).
fn sample_keys(item_locations: usize, n: usize) -> impl Iterator<Item = usize> {
    let stride = 7919; // prime: visits keys all over the table
    (0..n).map(move |j| (j * stride) % item_locations.max(1))
}

/// Point lookups (index, read API, Paimon scan) and full scans of the stock table.
///
/// # Errors
/// Engine errors; a key that is not found.
pub async fn reads(ls: &Livestate, item_locations: usize, lookups: usize) -> Result<Reads> {
    let mut index = Vec::with_capacity(lookups);
    for i in sample_keys(item_locations, lookups) {
        let (item, loc) = key(i);
        let k = [Value::String(item), Value::String(loc.into())];
        let t = Instant::now();
        let row = ls.current_row(FRESH_TABLE, &k)?;
        index.push(t.elapsed());
        if row.is_none() {
            return Err(BenchError::peer(
                "livestate",
                format!("index lookup of item-location {i} found nothing"),
            ));
        }
    }
    let (indexed, files) = (ls.reader(), ls.reader().without_index());
    let mut read_api = timed_reads(&indexed, item_locations, (lookups / 10).max(10)).await?;
    let mut paimon_scan = timed_reads(&files, item_locations, (lookups / 200).max(5)).await?;
    let Scanned { rows: scan_rows, seconds: scan_seconds } = full_scans(&files, FRESH_TABLE, 3).await?;
    let Scanned { rows: index_rows, seconds: index_scan_seconds } =
        full_scans(&indexed, FRESH_TABLE, 3).await?;
    let Scanned { rows: columnar_rows, seconds: columnar_scan_seconds } =
        columnar_scans(&files, FRESH_TABLE, 3).await?;
    if index_rows != scan_rows || columnar_rows != scan_rows {
        let message = format!(
            "a full read gave {scan_rows} rows from Paimon, {columnar_rows} as Arrow batches and {index_rows} from the index"
        );
        return Err(BenchError::peer("livestate", message));
    }
    Ok(Reads {
        index: Latencies::of(&mut index),
        read_api: Latencies::of(&mut read_api),
        paimon_scan: Latencies::of(&mut paimon_scan),
        scan_rows,
        scan_seconds,
        index_scan_seconds,
        columnar_scan_seconds,
        shape: shape(ls).await?,
    })
}

/// Rows and median seconds of `times` full reads of the stock table through the read API, with
/// the lookup index or without it (as `reader` is).
async fn full_scans(reader: &Reader<'_>, table: &str, times: usize) -> Result<Scanned> {
    let mut reads = Vec::new();
    for _ in 0..times.max(1) {
        let req = ReadRequest { table: table.into(), keys: vec![], at: At::Latest };
        let t = Instant::now();
        let rows = reader.read(&req).await?;
        reads.push((rows.rows.len() as u64, t.elapsed().as_secs_f64()));
    }
    Ok(Scanned::median_of(&reads))
}

/// Rows and median seconds of `times` full reads of the stock table's files as Arrow batches.
async fn columnar_scans(reader: &Reader<'_>, table: &str, times: usize) -> Result<Scanned> {
    let mut reads = Vec::new();
    for _ in 0..times.max(1) {
        let t = Instant::now();
        let batches = reader.scan_batches(table, &At::Latest).await?;
        reads.push((batches.num_rows() as u64, t.elapsed().as_secs_f64()));
    }
    Ok(Scanned::median_of(&reads))
}

/// The full scans alone, `times` of each (from the files, then through the lookup index, then
/// from the files as Arrow batches), on an ingested directory: for A/B runs and profiles of that
/// step.
///
/// # Errors
/// Engine errors.
pub async fn scans_of(dir: &Path, table: &str, times: usize) -> Result<serde_json::Value> {
    let ls = Livestate::open(dir).await?;
    let Scanned { rows, seconds: files_seconds } =
        full_scans(&ls.reader().without_index(), table, times).await?;
    let index_seconds = full_scans(&ls.reader(), table, times).await?.seconds;
    let columnar_seconds = columnar_scans(&ls.reader(), table, times).await?.seconds;
    Ok(serde_json::json!({
        "columnar_seconds": columnar_seconds,
        "columnar_rows_per_s": rows as f64 / columnar_seconds,
        "rows": rows,
        "files_seconds": files_seconds,
        "files_rows_per_s": rows as f64 / files_seconds,
        "index_seconds": index_seconds,
        "index_rows_per_s": rows as f64 / index_seconds,
    }))
}

/// `n` key reads through the read API, with the lookup index or without it (as `reader` is).
async fn timed_reads(reader: &Reader<'_>, item_locations: usize, n: usize) -> Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(n);
    for i in sample_keys(item_locations, n) {
        let t = Instant::now();
        let rows = reader.read(&key_request(i)).await?;
        out.push(t.elapsed());
        if rows.rows.len() != 1 {
            let message = format!("read of item-location {i} gave {} rows", rows.rows.len());
            return Err(BenchError::peer("livestate", message));
        }
    }
    Ok(out)
}

async fn shape(ls: &Livestate) -> Result<Shape> {
    let m = ls.maintainer(FRESH_TABLE).await?;
    let h = m.health().await.map_err(|e| BenchError::peer("livestate", e.to_string()))?;
    Ok(Shape {
        snapshots: h.snapshots,
        data_files: h.buckets.iter().map(|b| b.files).sum(),
        max_sorted_runs: h.buckets.iter().map(|b| b.sorted_runs).max().unwrap_or(0),
    })
}

/// Opens `dir` and reads it (see [`reads`]).
///
/// # Errors
/// As [`reads`].
pub async fn reads_of(dir: &Path, item_locations: usize, lookups: usize) -> Result<Reads> {
    let ls = Livestate::open(dir).await?;
    reads(&ls, item_locations, lookups).await
}

/// `commits` small commits of the stock table, each a consistency barrier over
/// `events_per_commit` new stock events (as many concurrent consistent reads would cause), then
/// the table's shape and reads.
///
/// # Errors
/// Engine errors.
pub async fn steady(
    dir: &Path,
    item_locations: usize,
    seed: u64,
    commits: u64,
    events_per_commit: usize,
    lookups: usize,
) -> Result<Steady> {
    let ls = Livestate::open(dir).await?;
    let mut d = ls.derivers().await?;
    ls.catch_up(&mut d, u64::MAX, &mut |_| {}).await?;
    let mut generator = Generator::new(seed ^ 0x5eed, item_locations, "steady-");
    for _ in 0..item_locations {
        generator.next_event();
    }
    let tables = [FRESH_TABLE.to_string()];
    let mut latencies = Vec::with_capacity(commits as usize);
    let start = Instant::now();
    for _ in 0..commits {
        let mut lines = String::new();
        let mut n = 0;
        while n < events_per_commit {
            let e = generator.next_event();
            if touches_stock(e["type"].as_str().unwrap_or("")) {
                lines.push_str(&e.to_string());
                lines.push('\n');
                n += 1;
            }
        }
        ls.emit(&lines, false)?;
        let t = Instant::now();
        ls.barrier(&mut d, &tables, ls.record().next_offset()).await?;
        latencies.push(t.elapsed());
        // The other tables (the archive among them) commit at their own budgets.
        ls.step(&mut d).await?;
    }
    d.commit_all().await?;
    d.finish().await;
    let seconds = start.elapsed().as_secs_f64();
    drop(d);
    Ok(Steady {
        commits,
        events_per_commit,
        seconds,
        commit: Latencies::of(&mut latencies),
        reads: reads(&ls, item_locations, lookups).await?,
    })
}
