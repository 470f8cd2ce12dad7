//! The PostgreSQL peer: what a team would build instead of livestate with the database it
//! already runs. A throwaway server on loopback (its own data directory, default durability:
//! `fsync` and `synchronous_commit` on), an `events` table every event is appended to, and the
//! state tables kept by upserts, one transaction per batch, in one of two modes ([`Mode`]):
//!
//! - **set-based** (the strongest method an experienced PostgreSQL user would pick): the batch
//!   is `COPY`'d into a temporary staging table, then one set-based statement per event kind
//!   applies it: `INSERT … SELECT DISTINCT ON (key) … ORDER BY key, seq DESC … ON CONFLICT DO
//!   UPDATE` (and one `DELETE … USING` for closed order lines), so each key is written once per
//!   batch;
//! - **pipelined**: one prepared `INSERT … ON CONFLICT DO UPDATE` of exactly the columns an
//!   event sets (a partial update of the stock row) per event, the statements of a batch
//!   pipelined.
//!
//! Both must end with the same tables, and with livestate's: [`digests`] reads them back for the
//! run to compare ([`crate::digest`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use futures::SinkExt as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Statement};

use crate::digest::{self, TableDigest};
use crate::error::{BenchError, Result};
use crate::stats::{Latencies, Scanned};
use crate::workload::key;

const PEER: &str = "PostgreSQL";

const SCHEMA: &str = "
CREATE TABLE events (id text PRIMARY KEY, type text NOT NULL, occurred_at timestamptz NOT NULL, data jsonb NOT NULL);
CREATE TABLE stock (item text, location text, on_hand bigint, reserved bigint, inbound bigint, reorder_point bigint,
    target bigint, updated_at timestamptz, PRIMARY KEY (item, location));
CREATE TABLE work_queue (job_id text PRIMARY KEY, status text, block_reason text, machine text, team text,
    changed_at timestamptz);
CREATE TABLE open_orders (order_id text, line bigint, customer text, item text, location text, qty bigint,
    unit_price numeric(12,2), line_value numeric(14,2), placed_at timestamptz, PRIMARY KEY (order_id, line));
";

/// How the state tables are fed (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// `COPY` into staging, then one set-based upsert per event kind.
    SetBased,
    /// One prepared upsert per event, pipelined.
    Pipelined,
}

impl Mode {
    pub const ALL: [Mode; 2] = [Mode::SetBased, Mode::Pipelined];

    pub fn label(self) -> &'static str {
        match self {
            Mode::SetBased => "PostgreSQL set-based (COPY + INSERT … SELECT DISTINCT ON)",
            Mode::Pipelined => "PostgreSQL pipelined upserts",
        }
    }
}

/// One ingest of the workload into fresh tables.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ingest {
    pub mode: Mode,
    pub batch: usize,
    pub events: u64,
    pub seconds: f64,
    pub commits: u64,
    pub peak_pss_mib: f64,
    pub database_mib: f64,
    /// What the state tables held afterwards.
    pub digests: Vec<TableDigest>,
}

/// What the PostgreSQL peer did: every ingest, then lookups and scans of the last one's tables.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Figures {
    pub version: String,
    pub ingests: Vec<Ingest>,
    pub lookups: Latencies,
    pub scan_rows: u64,
    pub scan_seconds: f64,
}

impl Figures {
    /// The ingest of `mode` at `batch` events per transaction.
    pub fn ingest(&self, mode: Mode, batch: usize) -> Option<&Ingest> {
        self.ingests.iter().find(|i| i.mode == mode && i.batch == batch)
    }
}

/// A PostgreSQL server of our own, stopped (and its data removed) on drop.
pub struct Server {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    /// The user to run as when we are root (PostgreSQL refuses to run as root).
    run_as: Option<String>,
    pub version: String,
}

/// The directory with `initdb`, `pg_ctl` and `postgres`: `LIVESTATE_PG_BIN`, else the newest
/// Debian `/usr/lib/postgresql/N/bin`, else the `PATH`.
fn bin_dir() -> Result<PathBuf> {
    if let Ok(d) = std::env::var("LIVESTATE_PG_BIN") {
        return Ok(PathBuf::from(d));
    }
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, p): &(u32, PathBuf)| p.join("initdb").exists())
        .collect();
    debian.sort();
    if let Some((_, p)) = debian.pop() {
        return Ok(p);
    }
    std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).find(|d| d.join("initdb").exists()))
        .ok_or_else(|| {
            BenchError::peer(
                PEER,
                "initdb not found: install PostgreSQL 15 (Debian: apt-get install postgresql-15) or set LIVESTATE_PG_BIN",
            )
        })
}

impl Server {
    /// Creates a cluster under `work/postgres` and starts it on a free loopback port.
    ///
    /// # Errors
    /// PostgreSQL missing, `initdb` or `pg_ctl start` failing (their output is in the error).
    pub fn start(work: &Path) -> Result<Server> {
        let bin = bin_dir()?;
        let data = work.join("postgres");
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data).map_err(BenchError::io("create", &data))?;
        let is_root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        let run_as = is_root.then(|| "postgres".to_string());
        if let Some(user) = &run_as {
            run(
                Command::new("chown").arg("-R").arg(format!("{user}:")).arg(&data),
                "chown the data directory",
            )?;
        }
        let version = String::from_utf8_lossy(
            &Command::new(bin.join("postgres"))
                .arg("--version")
                .output()
                .map_err(BenchError::io("run", bin.join("postgres")))?
                .stdout,
        )
        .trim()
        .to_string();
        let port = crate::process::free_port()?;
        let s = Server { bin, data, port, run_as, version };
        s.run_pg(
            "initdb",
            &["-D", s.data_str(), "-U", "bench", "-A", "trust", "-E", "UTF8", "--no-locale", "-N"],
        )?;
        let opts = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c shared_buffers=256MB -c max_wal_size=4GB",
            s.data_str()
        );
        let log = s.data.join("server.log");
        s.run_pg("pg_ctl", &["-D", s.data_str(), "-l", &log.to_string_lossy(), "-w", "-o", &opts, "start"])?;
        Ok(s)
    }

    fn data_str(&self) -> &str {
        self.data.to_str().expect("the work directory is UTF-8")
    }

    fn run_pg(&self, tool: &str, args: &[&str]) -> Result<()> {
        let exe = self.bin.join(tool);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        cmd.args(args);
        run(&mut cmd, tool)
    }

    /// The postmaster's pid (its children are the rest of the server).
    pub fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.data.join("postmaster.pid")).ok()?.lines().next()?.trim().parse().ok()
    }

    /// The connection string of the bench database.
    fn conninfo(&self) -> String {
        format!("host=127.0.0.1 port={} user=bench dbname=postgres", self.port)
    }

    /// A new connection.
    ///
    /// # Errors
    /// The server refusing it.
    pub async fn connect(&self) -> Result<Client> {
        connect(&self.conninfo()).await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.run_pg("pg_ctl", &["-D", self.data_str(), "-m", "immediate", "-w", "stop"]);
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd.output().map_err(|e| BenchError::peer(PEER, format!("{what}: {e}")))?;
    if !out.status.success() {
        return Err(BenchError::peer(
            PEER,
            format!(
                "{what} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ));
    }
    Ok(())
}

/// The prepared statements of the ingest.
struct Statements {
    events: Statement,
    counted: Statement,
    reserved: Statement,
    inbound: Statement,
    placed: Statement,
    closed: Statement,
    job: Statement,
}

impl Statements {
    async fn prepare(c: &Client) -> Result<Statements> {
        let stock = |col: &str| {
            format!(
                "INSERT INTO stock (item, location, {col}, updated_at) VALUES ($1, $2, $3, $4::text::timestamptz)
                 ON CONFLICT (item, location) DO UPDATE SET {col} = EXCLUDED.{col}, updated_at = EXCLUDED.updated_at"
            )
        };
        Ok(Statements {
            events: c
                .prepare(
                    "INSERT INTO events (id, type, occurred_at, data)
                     SELECT * FROM unnest($1::text[], $2::text[], $3::text[]::timestamptz[], $4::text[]::jsonb[])
                     ON CONFLICT (id) DO NOTHING",
                )
                .await?,
            counted: c.prepare(&stock("on_hand")).await?,
            reserved: c.prepare(&stock("reserved")).await?,
            inbound: c.prepare(&stock("inbound")).await?,
            placed: c
                .prepare(
                    "INSERT INTO open_orders (order_id, line, customer, item, location, qty, unit_price, line_value, placed_at)
                     VALUES ($1, $2, $3, $4, $5, $6::bigint, $7::text::numeric, $6::bigint * $7::text::numeric, $8::text::timestamptz)
                     ON CONFLICT (order_id, line) DO UPDATE SET customer = EXCLUDED.customer, item = EXCLUDED.item,
                       location = EXCLUDED.location, qty = EXCLUDED.qty, unit_price = EXCLUDED.unit_price,
                       line_value = EXCLUDED.line_value, placed_at = EXCLUDED.placed_at",
                )
                .await?,
            closed: c.prepare("DELETE FROM open_orders WHERE order_id = $1 AND line = $2").await?,
            job: c
                .prepare(
                    "INSERT INTO work_queue (job_id, status, block_reason, machine, team, changed_at)
                     VALUES ($1, $2, $3, $4, $5, $6::text::timestamptz)
                     ON CONFLICT (job_id) DO UPDATE SET status = EXCLUDED.status, block_reason = EXCLUDED.block_reason,
                       machine = EXCLUDED.machine, team = EXCLUDED.team, changed_at = EXCLUDED.changed_at",
                )
                .await?,
        })
    }
}

/// One event's statement and its parameters, owned so a batch's statements can be pipelined.
struct Op {
    stmt: Statement,
    params: Vec<Box<dyn ToSql + Sync + Send>>,
}

fn op(s: &Statements, e: &Value) -> Result<Op> {
    let d = &e["data"];
    let text = |k: &str| d[k].as_str().map(str::to_string);
    let int = |k: &str| d[k].as_i64();
    let at = e["occurred_at"].as_str().unwrap_or_default().to_string();
    let ty = e["type"].as_str().unwrap_or_default();
    let stock = |stmt: &Statement, col: &str| Op {
        stmt: stmt.clone(),
        params: vec![
            Box::new(text("item")),
            Box::new(text("location")),
            Box::new(int(col)),
            Box::new(at.clone()),
        ],
    };
    Ok(match ty {
        "inventory.stock_counted" => stock(&s.counted, "on_hand"),
        "commerce.reservation_changed" => stock(&s.reserved, "reserved"),
        "procurement.inbound_changed" => stock(&s.inbound, "inbound"),
        "commerce.order_placed" => Op {
            stmt: s.placed.clone(),
            params: vec![
                Box::new(text("order_id")),
                Box::new(int("line")),
                Box::new(text("customer")),
                Box::new(text("item")),
                Box::new(text("location")),
                Box::new(int("qty")),
                Box::new(text("unit_price")),
                Box::new(at),
            ],
        },
        "commerce.order_shipped" | "commerce.order_cancelled" => {
            Op { stmt: s.closed.clone(), params: vec![Box::new(text("order_id")), Box::new(int("line"))] }
        }
        "operations.job_status_changed" => Op {
            stmt: s.job.clone(),
            params: vec![
                Box::new(text("job_id")),
                Box::new(text("status")),
                Box::new(text("block_reason")),
                Box::new(text("machine")),
                Box::new(text("team")),
                Box::new(at),
            ],
        },
        other => return Err(BenchError::peer(PEER, format!("the workload has no event type {other}"))),
    })
}

/// Drops every table of an earlier ingest and creates them anew, then checkpoints, so each ingest
/// starts from the same empty database.
///
/// # Errors
/// PostgreSQL errors.
pub async fn reset(c: &Client) -> Result<()> {
    c.batch_execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;").await?;
    c.batch_execute(SCHEMA).await?;
    c.batch_execute("CHECKPOINT").await?;
    Ok(())
}

/// What one ingest did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Loaded {
    pub events: u64,
    pub seconds: f64,
    pub commits: u64,
}

/// Ingests the JSON-lines `events` into fresh tables, one transaction of `batch` events at a
/// time, in `mode`.
///
/// # Errors
/// PostgreSQL errors; a line that is not JSON.
pub async fn ingest(c: &mut Client, events: &str, batch: usize, mode: Mode) -> Result<Loaded> {
    reset(c).await?;
    match mode {
        Mode::SetBased => ingest_set_based(c, events, batch).await,
        Mode::Pipelined => ingest_pipelined(c, events, batch).await,
    }
}

async fn ingest_pipelined(c: &mut Client, events: &str, batch: usize) -> Result<Loaded> {
    let s = Statements::prepare(c).await?;
    let lines: Vec<&str> = events.lines().collect();
    let start = Instant::now();
    let mut commits = 0;
    for chunk in lines.chunks(batch.max(1)) {
        let parsed: Vec<Value> = chunk
            .iter()
            .map(|l| serde_json::from_str(l).map_err(|e| BenchError::peer(PEER, format!("event line: {e}"))))
            .collect::<Result<_>>()?;
        let column = |k: &str| {
            parsed.iter().map(|e| e[k].as_str().unwrap_or_default().to_string()).collect::<Vec<_>>()
        };
        let (ids, types, ats) = (column("id"), column("type"), column("occurred_at"));
        let data: Vec<String> = parsed.iter().map(|e| e["data"].to_string()).collect();
        let ops: Vec<Op> = parsed.iter().map(|e| op(&s, e)).collect::<Result<_>>()?;
        let tx = c.transaction().await?;
        let columns: [&(dyn ToSql + Sync); 4] = [&ids, &types, &ats, &data];
        let append = tx.execute(&s.events, &columns);
        let upserts = ops.iter().map(|o| {
            let params: Vec<&(dyn ToSql + Sync)> =
                o.params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect();
            let stmt = &o.stmt;
            let tx = &tx;
            async move { tx.execute(stmt, &params).await }
        });
        futures::try_join!(append, futures::future::try_join_all(upserts))?;
        tx.commit().await?;
        commits += 1;
    }
    Ok(Loaded { events: lines.len() as u64, seconds: start.elapsed().as_secs_f64(), commits })
}

/// The staging table of the set-based mode: one typed row per event of the batch, in record order
/// (`seq`), emptied at every commit.
const STAGING: &str = "
CREATE TEMPORARY TABLE staging (seq int NOT NULL, id text NOT NULL, type text NOT NULL,
    occurred_at timestamptz NOT NULL, data jsonb NOT NULL, item text, location text, on_hand bigint,
    reserved bigint, inbound bigint, order_id text, line bigint, customer text, qty bigint,
    unit_price numeric(12,2), job_id text, status text, block_reason text, machine text, team text)
    ON COMMIT DELETE ROWS;
";

/// The set-based statements, in the order they run in each transaction. Each event kind's latest
/// event per key (`DISTINCT ON … ORDER BY key, seq DESC`) is applied once. A stock row's
/// `updated_at` is the latest of the kinds' (`GREATEST`): occurred_at grows with the record, so
/// that is the last event's, as in the pipelined mode.
const SET_BASED: [&str; 7] = [
    "INSERT INTO events (id, type, occurred_at, data) SELECT id, type, occurred_at, data FROM staging
     ORDER BY seq ON CONFLICT (id) DO NOTHING",
    "INSERT INTO stock (item, location, on_hand, updated_at)
     SELECT DISTINCT ON (item, location) item, location, on_hand, occurred_at FROM staging
     WHERE type = 'inventory.stock_counted' ORDER BY item, location, seq DESC
     ON CONFLICT (item, location) DO UPDATE SET on_hand = EXCLUDED.on_hand,
       updated_at = GREATEST(stock.updated_at, EXCLUDED.updated_at)",
    "INSERT INTO stock (item, location, reserved, updated_at)
     SELECT DISTINCT ON (item, location) item, location, reserved, occurred_at FROM staging
     WHERE type = 'commerce.reservation_changed' ORDER BY item, location, seq DESC
     ON CONFLICT (item, location) DO UPDATE SET reserved = EXCLUDED.reserved,
       updated_at = GREATEST(stock.updated_at, EXCLUDED.updated_at)",
    "INSERT INTO stock (item, location, inbound, updated_at)
     SELECT DISTINCT ON (item, location) item, location, inbound, occurred_at FROM staging
     WHERE type = 'procurement.inbound_changed' ORDER BY item, location, seq DESC
     ON CONFLICT (item, location) DO UPDATE SET inbound = EXCLUDED.inbound,
       updated_at = GREATEST(stock.updated_at, EXCLUDED.updated_at)",
    // An order line's latest event decides: closed lines are deleted, placed ones upserted.
    "DELETE FROM open_orders o USING (
       SELECT DISTINCT ON (order_id, line) order_id, line, type FROM staging
       WHERE type IN ('commerce.order_placed', 'commerce.order_shipped', 'commerce.order_cancelled')
       ORDER BY order_id, line, seq DESC) l
     WHERE l.type <> 'commerce.order_placed' AND o.order_id = l.order_id AND o.line = l.line",
    "INSERT INTO open_orders (order_id, line, customer, item, location, qty, unit_price, line_value, placed_at)
     SELECT order_id, line, customer, item, location, qty, unit_price, qty * unit_price, occurred_at FROM (
       SELECT DISTINCT ON (order_id, line) * FROM staging
       WHERE type IN ('commerce.order_placed', 'commerce.order_shipped', 'commerce.order_cancelled')
       ORDER BY order_id, line, seq DESC) l
     WHERE l.type = 'commerce.order_placed'
     ON CONFLICT (order_id, line) DO UPDATE SET customer = EXCLUDED.customer, item = EXCLUDED.item,
       location = EXCLUDED.location, qty = EXCLUDED.qty, unit_price = EXCLUDED.unit_price,
       line_value = EXCLUDED.line_value, placed_at = EXCLUDED.placed_at",
    "INSERT INTO work_queue (job_id, status, block_reason, machine, team, changed_at)
     SELECT DISTINCT ON (job_id) job_id, status, block_reason, machine, team, occurred_at FROM staging
     WHERE type = 'operations.job_status_changed' ORDER BY job_id, seq DESC
     ON CONFLICT (job_id) DO UPDATE SET status = EXCLUDED.status, block_reason = EXCLUDED.block_reason,
       machine = EXCLUDED.machine, team = EXCLUDED.team, changed_at = EXCLUDED.changed_at",
];

/// The staging columns after `seq, id, type, occurred_at, data`, each taken from the event's data.
const STAGED_FIELDS: [&str; 15] = [
    "item",
    "location",
    "on_hand",
    "reserved",
    "inbound",
    "order_id",
    "line",
    "customer",
    "qty",
    "unit_price",
    "job_id",
    "status",
    "block_reason",
    "machine",
    "team",
];

/// Appends `v` to a `COPY … (FORMAT text)` line: `\N` for null, else the text with backslash,
/// tab, newline and carriage return escaped.
fn copy_cell(out: &mut Vec<u8>, v: Option<&str>) {
    let Some(v) = v else {
        out.extend_from_slice(b"\\N");
        return;
    };
    for b in v.bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
}

/// The batch as `COPY` text for the staging table.
fn staging_rows(lines: &[&str]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(lines.len() * 256);
    for (seq, line) in lines.iter().enumerate() {
        let e: Value =
            serde_json::from_str(line).map_err(|e| BenchError::peer(PEER, format!("event line: {e}")))?;
        let field = |k: &str| e[k].as_str().map(str::to_string);
        out.extend_from_slice(seq.to_string().as_bytes());
        for v in [field("id"), field("type"), field("occurred_at"), Some(e["data"].to_string())] {
            out.push(b'\t');
            copy_cell(&mut out, v.as_deref());
        }
        for k in STAGED_FIELDS {
            out.push(b'\t');
            let v = match &e["data"][k] {
                Value::Null => None,
                Value::String(s) => Some(s.clone()),
                other => Some(other.to_string()),
            };
            copy_cell(&mut out, v.as_deref());
        }
        out.push(b'\n');
    }
    Ok(out)
}

async fn ingest_set_based(c: &mut Client, events: &str, batch: usize) -> Result<Loaded> {
    c.batch_execute(STAGING).await?;
    let copy =
        format!("COPY staging (seq, id, type, occurred_at, data, {}) FROM STDIN", STAGED_FIELDS.join(", "));
    let mut statements = Vec::with_capacity(SET_BASED.len());
    for sql in SET_BASED {
        statements.push(c.prepare(sql).await?);
    }
    let lines: Vec<&str> = events.lines().collect();
    let start = Instant::now();
    let mut commits = 0;
    for chunk in lines.chunks(batch.max(1)) {
        let rows = bytes::Bytes::from(staging_rows(chunk)?);
        let tx = c.transaction().await?;
        let sink = tx.copy_in(&copy).await?;
        futures::pin_mut!(sink);
        sink.send(rows).await?;
        sink.finish().await?;
        for stmt in &statements {
            tx.execute(stmt, &[]).await?;
        }
        tx.commit().await?;
        commits += 1;
    }
    c.batch_execute("DROP TABLE staging").await?;
    Ok(Loaded { events: lines.len() as u64, seconds: start.elapsed().as_secs_f64(), commits })
}

/// Each state table's content ([`crate::digest`]): every column as canonical text, computed in
/// SQL (timestamps as epoch milliseconds, numerics without trailing zeros).
///
/// # Errors
/// PostgreSQL errors.
pub async fn digests(c: &Client) -> Result<Vec<TableDigest>> {
    let queries = [
        (
            "stock",
            "SELECT item, location, on_hand::text, reserved::text, inbound::text, reorder_point::text,
                    target::text, (extract(epoch FROM updated_at) * 1000)::bigint::text FROM stock",
        ),
        (
            "open_orders",
            "SELECT order_id, line::text, customer, item, location, qty::text, trim_scale(unit_price)::text,
                    trim_scale(line_value)::text, (extract(epoch FROM placed_at) * 1000)::bigint::text
             FROM open_orders",
        ),
        (
            "work_queue",
            "SELECT job_id, status, block_reason, machine, team,
                    (extract(epoch FROM changed_at) * 1000)::bigint::text FROM work_queue",
        ),
    ];
    let mut out = Vec::new();
    for (table, sql) in queries {
        let rows = c.query(sql, &[]).await?;
        out.push(digest::of(
            table,
            rows.iter().map(|r| (0..r.len()).map(|i| r.get::<_, Option<String>>(i)).collect()),
        ));
    }
    Ok(out)
}

/// `n` point lookups of stock rows by primary key (every column decoded), on a connection of
/// their own from a client on a thread of its own (see [`crate::process::on_one_thread`]).
///
/// # Errors
/// PostgreSQL errors; a key not found.
pub async fn lookups(s: &Server, item_locations: usize, n: usize) -> Result<Latencies> {
    let conf = s.conninfo();
    crate::process::on_one_thread(move || async move {
        lookups_on(&connect(&conf).await?, item_locations, n).await
    })
    .await
}

/// A connection to `conf`, its connection task spawned on the current runtime.
async fn connect(conf: &str) -> Result<Client> {
    let (client, conn) = tokio_postgres::connect(conf, NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            eprintln!("PostgreSQL connection ended: {e}");
        }
    });
    Ok(client)
}

async fn lookups_on(c: &Client, item_locations: usize, n: usize) -> Result<Latencies> {
    let stmt = c.prepare("SELECT * FROM stock WHERE item = $1 AND location = $2").await?;
    let mut out = Vec::with_capacity(n);
    for j in 0..n {
        let (item, loc) = key((j * 7919) % item_locations.max(1));
        let t = Instant::now();
        let rows = c.query(&stmt, &[&item, &loc]).await?;
        let row = rows.first().map(decode_stock);
        out.push(t.elapsed());
        if row.is_none() {
            return Err(BenchError::peer(PEER, format!("no stock row for {item} at {loc}")));
        }
    }
    Ok(Latencies::of(&mut out))
}

type StockRow = (
    String,
    String,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<chrono::DateTime<chrono::Utc>>,
);

fn decode_stock(r: &tokio_postgres::Row) -> StockRow {
    (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5), r.get(6), r.get(7))
}

/// Full reads of the stock table (every column decoded): rows and the median of three, in seconds.
///
/// # Errors
/// PostgreSQL errors.
pub async fn scan(c: &Client) -> Result<Scanned> {
    let mut reads = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let rows = c.query("SELECT * FROM stock", &[]).await?;
        let n = rows.iter().map(decode_stock).count() as u64;
        reads.push((n, t.elapsed().as_secs_f64()));
    }
    Ok(Scanned::median_of(&reads))
}

/// The database's size on disk, in MiB.
///
/// # Errors
/// PostgreSQL errors.
pub async fn size_mib(c: &Client) -> Result<f64> {
    let row = c.query_one("SELECT pg_database_size(current_database())", &[]).await?;
    Ok(row.get::<_, i64>(0) as f64 / 1024.0 / 1024.0)
}

/// Waits until the server accepts connections.
///
/// # Errors
/// The server not answering within 30 s.
pub async fn ready(s: &Server) -> Result<Client> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match s.connect().await {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}
