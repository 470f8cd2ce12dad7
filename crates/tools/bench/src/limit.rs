//! The limit line: the least work the ingest needs, done as directly as Rust allows on one core,
//! so livestate's end to end can be given as a fraction of it.
//!
//! Three phases over the same JSON-lines workload, timed one after another:
//!
//! 1. **parse**: every line into a typed struct (`serde_json` straight into fields, the
//!    timestamp parsed to milliseconds), nothing else checked;
//! 2. **append durably**: each batch's lines written to one file and `fdatasync`'d, the least an
//!    acknowledged append can cost;
//! 3. **merge and encode**: every event folded into its key's final row (stock partial-update,
//!    open order lines upserted and deleted, the work queue deduplicated) in hash maps, then the
//!    three tables' rows written as Parquet (zstd level 1, as livestate's files) and synced.
//!
//! What the limit leaves out, livestate does on top: the spec's checks and expressions, an id
//! index for idempotency, the archive of every event as a Paimon table, a commit per table per
//! budget (snapshots, manifests, changelog files), the lookup index and triggers.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::builder::{Decimal128Builder, Int64Builder, StringBuilder, TimestampMillisecondBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};

/// What the limit line measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Limit {
    pub events: u64,
    pub batch: usize,
    pub parse_seconds: f64,
    pub append_seconds: f64,
    pub encode_seconds: f64,
    /// Rows of the three tables written as Parquet.
    pub rows: u64,
}

impl Limit {
    pub fn seconds(&self) -> f64 {
        self.parse_seconds + self.append_seconds + self.encode_seconds
    }

    pub fn events_per_second(&self) -> f64 {
        self.events as f64 / self.seconds().max(1e-9)
    }
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    id: &'a str,
    #[serde(rename = "type", borrow)]
    event_type: &'a str,
    #[serde(borrow)]
    occurred_at: &'a str,
    data: Data,
}

#[derive(Deserialize, Default)]
struct Data {
    item: Option<String>,
    location: Option<String>,
    on_hand: Option<i64>,
    reserved: Option<i64>,
    inbound: Option<i64>,
    order_id: Option<String>,
    line: Option<i64>,
    customer: Option<String>,
    qty: Option<i64>,
    unit_price: Option<String>,
    job_id: Option<String>,
    status: Option<String>,
    block_reason: Option<String>,
    machine: Option<String>,
    team: Option<String>,
}

struct Parsed {
    kind: u8,
    at_ms: i64,
    data: Data,
}

const COUNTED: u8 = 0;
const RESERVED: u8 = 1;
const INBOUND: u8 = 2;
const PLACED: u8 = 3;
const CLOSED: u8 = 4;
const JOB: u8 = 5;

fn bad(message: String) -> BenchError {
    BenchError::peer("limit line", message)
}

fn parse(line: &str) -> Result<Parsed> {
    let l: Line<'_> = serde_json::from_str(line).map_err(|e| bad(format!("event line: {e}")))?;
    let kind = match l.event_type {
        "inventory.stock_counted" => COUNTED,
        "commerce.reservation_changed" => RESERVED,
        "procurement.inbound_changed" => INBOUND,
        "commerce.order_placed" => PLACED,
        "commerce.order_shipped" | "commerce.order_cancelled" => CLOSED,
        "operations.job_status_changed" => JOB,
        other => return Err(bad(format!("event type {other}"))),
    };
    let at_ms = chrono::DateTime::parse_from_rfc3339(l.occurred_at)
        .map_err(|e| bad(format!("occurred_at of {}: {e}", l.id)))?
        .timestamp_millis();
    Ok(Parsed { kind, at_ms, data: l.data })
}

#[derive(Default)]
struct Stock {
    on_hand: Option<i64>,
    reserved: Option<i64>,
    inbound: Option<i64>,
    updated_at: i64,
}

struct Order {
    customer: Option<String>,
    item: Option<String>,
    location: Option<String>,
    qty: i64,
    /// Cents.
    unit_price: i128,
    placed_at: i64,
}

struct Job {
    status: Option<String>,
    block_reason: Option<String>,
    machine: Option<String>,
    team: Option<String>,
    changed_at: i64,
}

fn cents(s: &str) -> Result<i128> {
    let d: rust_decimal::Decimal = s.parse().map_err(|e| bad(format!("unit_price {s}: {e}")))?;
    let mut d = d;
    d.rescale(2);
    Ok(d.mantissa())
}

/// Runs the limit line over the JSON-lines `events`, `batch` per durable append, with its files
/// under `work` (removed afterwards).
///
/// # Errors
/// A line that does not parse; I/O errors.
pub fn run(events: &Path, work: &Path, batch: usize) -> Result<Limit> {
    let text = std::fs::read_to_string(events).map_err(BenchError::io("read", events))?;
    let lines: Vec<&str> = text.lines().collect();
    std::fs::create_dir_all(work).map_err(BenchError::io("create", work))?;

    let t = Instant::now();
    let parsed: Vec<Parsed> = lines.iter().map(|l| parse(l)).collect::<Result<_>>()?;
    let parse_seconds = t.elapsed().as_secs_f64();

    let log = work.join("append.log");
    let t = Instant::now();
    {
        let mut f = std::fs::File::create(&log).map_err(BenchError::io("create", &log))?;
        let mut buf = Vec::with_capacity(1 << 20);
        for chunk in lines.chunks(batch.max(1)) {
            buf.clear();
            for l in chunk {
                buf.extend_from_slice(l.as_bytes());
                buf.push(b'\n');
            }
            f.write_all(&buf).map_err(BenchError::io("write", &log))?;
            f.sync_data().map_err(BenchError::io("sync", &log))?;
        }
    }
    let append_seconds = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let mut stock: HashMap<(String, String), Stock> = HashMap::new();
    let mut orders: HashMap<(String, i64), Order> = HashMap::new();
    let mut jobs: HashMap<String, Job> = HashMap::new();
    for p in parsed {
        let d = p.data;
        match p.kind {
            COUNTED | RESERVED | INBOUND => {
                let key = (d.item.unwrap_or_default(), d.location.unwrap_or_default());
                let s = stock.entry(key).or_default();
                match p.kind {
                    COUNTED => s.on_hand = d.on_hand.or(s.on_hand),
                    RESERVED => s.reserved = d.reserved.or(s.reserved),
                    _ => s.inbound = d.inbound.or(s.inbound),
                }
                s.updated_at = p.at_ms;
            }
            PLACED => {
                let key = (d.order_id.unwrap_or_default(), d.line.unwrap_or_default());
                let unit_price = cents(d.unit_price.as_deref().unwrap_or("0"))?;
                let order = Order {
                    customer: d.customer,
                    item: d.item,
                    location: d.location,
                    qty: d.qty.unwrap_or_default(),
                    unit_price,
                    placed_at: p.at_ms,
                };
                orders.insert(key, order);
            }
            CLOSED => {
                orders.remove(&(d.order_id.unwrap_or_default(), d.line.unwrap_or_default()));
            }
            _ => {
                let job = Job {
                    status: d.status,
                    block_reason: d.block_reason,
                    machine: d.machine,
                    team: d.team,
                    changed_at: p.at_ms,
                };
                jobs.insert(d.job_id.unwrap_or_default(), job);
            }
        }
    }
    let rows = (stock.len() + orders.len() + jobs.len()) as u64;
    write_parquet(&work.join("stock.parquet"), stock_batch(stock)?)?;
    write_parquet(&work.join("open_orders.parquet"), orders_batch(orders)?)?;
    write_parquet(&work.join("work_queue.parquet"), jobs_batch(jobs)?)?;
    let encode_seconds = t.elapsed().as_secs_f64();
    let events = lines.len() as u64;
    let _ = std::fs::remove_dir_all(work);
    Ok(Limit { events, batch, parse_seconds, append_seconds, encode_seconds, rows })
}

fn ts() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, None)
}

fn batch(fields: Vec<Field>, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| bad(e.to_string()))
}

fn stock_batch(rows: HashMap<(String, String), Stock>) -> Result<RecordBatch> {
    let n = rows.len();
    let (mut item, mut loc) = (StringBuilder::new(), StringBuilder::new());
    let (mut on_hand, mut reserved, mut inbound) =
        (Int64Builder::with_capacity(n), Int64Builder::with_capacity(n), Int64Builder::with_capacity(n));
    let mut at = TimestampMillisecondBuilder::with_capacity(n);
    for ((i, l), s) in rows {
        item.append_value(i);
        loc.append_value(l);
        on_hand.append_option(s.on_hand);
        reserved.append_option(s.reserved);
        inbound.append_option(s.inbound);
        at.append_value(s.updated_at);
    }
    let f = |name: &str, t: DataType, nullable: bool| Field::new(name, t, nullable);
    batch(
        vec![
            f("item", DataType::Utf8, false),
            f("location", DataType::Utf8, false),
            f("on_hand", DataType::Int64, true),
            f("reserved", DataType::Int64, true),
            f("inbound", DataType::Int64, true),
            f("updated_at", ts(), true),
        ],
        vec![
            Arc::new(item.finish()),
            Arc::new(loc.finish()),
            Arc::new(on_hand.finish()),
            Arc::new(reserved.finish()),
            Arc::new(inbound.finish()),
            Arc::new(at.finish()),
        ],
    )
}

fn orders_batch(rows: HashMap<(String, i64), Order>) -> Result<RecordBatch> {
    let n = rows.len();
    let mut strings: Vec<StringBuilder> = (0..4).map(|_| StringBuilder::new()).collect();
    let (mut line, mut qty) = (Int64Builder::with_capacity(n), Int64Builder::with_capacity(n));
    let (mut price, mut value) = (Decimal128Builder::with_capacity(n), Decimal128Builder::with_capacity(n));
    let mut at = TimestampMillisecondBuilder::with_capacity(n);
    for ((id, l), o) in rows {
        strings[0].append_value(id);
        strings[1].append_option(o.customer);
        strings[2].append_option(o.item);
        strings[3].append_option(o.location);
        line.append_value(l);
        qty.append_value(o.qty);
        price.append_value(o.unit_price);
        value.append_value(o.unit_price * i128::from(o.qty));
        at.append_value(o.placed_at);
    }
    let dec = |p: u8, mut b: Decimal128Builder| -> Result<ArrayRef> {
        Ok(Arc::new(b.finish().with_precision_and_scale(p, 2).map_err(|e| bad(e.to_string()))?))
    };
    let mut s = strings.into_iter().map(|mut b| Arc::new(b.finish()) as ArrayRef);
    let mut next = || s.next().expect("four string columns");
    batch(
        vec![
            Field::new("order_id", DataType::Utf8, false),
            Field::new("customer", DataType::Utf8, true),
            Field::new("item", DataType::Utf8, true),
            Field::new("location", DataType::Utf8, true),
            Field::new("line", DataType::Int64, false),
            Field::new("qty", DataType::Int64, true),
            Field::new("unit_price", DataType::Decimal128(12, 2), true),
            Field::new("line_value", DataType::Decimal128(14, 2), true),
            Field::new("placed_at", ts(), true),
        ],
        vec![
            next(),
            next(),
            next(),
            next(),
            Arc::new(line.finish()),
            Arc::new(qty.finish()),
            dec(12, price)?,
            dec(14, value)?,
            Arc::new(at.finish()),
        ],
    )
}

fn jobs_batch(rows: HashMap<String, Job>) -> Result<RecordBatch> {
    let mut strings: Vec<StringBuilder> = (0..5).map(|_| StringBuilder::new()).collect();
    let mut at = TimestampMillisecondBuilder::with_capacity(rows.len());
    for (id, j) in rows {
        strings[0].append_value(id);
        strings[1].append_option(j.status);
        strings[2].append_option(j.block_reason);
        strings[3].append_option(j.machine);
        strings[4].append_option(j.team);
        at.append_value(j.changed_at);
    }
    let mut columns: Vec<ArrayRef> =
        strings.into_iter().map(|mut b| Arc::new(b.finish()) as ArrayRef).collect();
    columns.push(Arc::new(at.finish()));
    let names = ["job_id", "status", "block_reason", "machine", "team"];
    let mut fields: Vec<Field> =
        names.iter().enumerate().map(|(i, n)| Field::new(*n, DataType::Utf8, i > 0)).collect();
    fields.push(Field::new("changed_at", ts(), true));
    batch(fields, columns)
}

fn write_parquet(path: &Path, batch: RecordBatch) -> Result<()> {
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("zstd level 1")))
        .build();
    let file = std::fs::File::create(path).map_err(BenchError::io("create", path))?;
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).map_err(|e| bad(e.to_string()))?;
    w.write(&batch).map_err(|e| bad(e.to_string()))?;
    let file = w.into_inner().map_err(|e| bad(e.to_string()))?;
    file.sync_all().map_err(BenchError::io("sync", path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Generator;

    #[test]
    fn the_limit_line_folds_every_event_and_writes_each_table_once() {
        let tmp = tempfile::tempdir().unwrap();
        let events = tmp.path().join("events.jsonl");
        let mut g = Generator::new(7, 300, "e");
        let text: String = (0..5000).map(|_| format!("{}\n", g.next_event())).collect();
        std::fs::write(&events, text).unwrap();
        let work = tmp.path().join("work");
        let l = run(&events, &work, 1000).unwrap();
        assert_eq!(l.events, 5000);
        // Every item-location is counted first, so stock has 300 rows; plus orders and jobs.
        assert!(l.rows > 300, "{}", l.rows);
        assert!(l.seconds() > 0.0 && l.events_per_second() > 0.0);
        assert!(!work.exists(), "the limit line cleans up after itself");
    }
}
