//! Read-only SQL over the state tables, with `paimon-datafusion` as the engine.
//!
//! Read-only holds by construction, not by looking at the SQL text:
//!
//! 1. Each query gets a fresh DataFusion session whose only tables are the spec's state
//!    tables, each registered as a `PaimonTableProvider` pinned to the snapshot that is
//!    latest when the query starts (or to the snapshot or tag a `VERSION AS OF` names). No
//!    catalog is registered, so there is nothing to create, alter or drop, and procedures
//!    (`CALL sys.*`) do not exist in this session.
//! 2. The SQL is turned into a logical plan without executing anything
//!    (`SessionState::create_logical_plan`: exactly one statement, else an error), and the
//!    plan, subqueries included, may contain only query operators (projection, filter,
//!    join, aggregate, window, sort, limit, union, distinct, values, subquery, table scan).
//!    DML, DDL, COPY, statements (SET, transactions), EXPLAIN ANALYZE and extensions are
//!    refused, naming the operator.
//! 3. The plan runs under [`Limits`], enforced here for every caller (HTTP, MCP, CLI):
//!    - the text's size, token count, list lengths and nesting depth are checked on the
//!      tokenizer's output before anything recursive sees it ([`shape`]);
//!    - planning and running happen on the threads of [`Queries`] (a runtime of their own
//!      with large stacks), never the caller's, within a limit of queries at once overall
//!      and per principal ([`SqlError::Busy`]);
//!    - one wall-clock limit covers planning and running; when it passes, or when the caller
//!      drops the future (an HTTP client that went away), the work is aborted;
//!    - operators reserve memory from a pool of the query's limit inside one shared by all
//!      queries, and sorts and aggregates spill to a temporary directory beyond it;
//!    - every scalar function is checked against the size of what it builds, before it runs
//!      for those whose output grows with an argument's value (`repeat`, `lpad`,
//!      `array_repeat`, `range`, …), and after it runs for all ([`functions`]);
//!    - the answer holds at most a number of rows and of JSON bytes, and says when it was
//!      `truncated`.
//!
//! `VERSION AS OF` clauses (`stock VERSION AS OF 12`, `stock VERSION AS OF 'proposal-…'`) are
//! found by a small scanner that skips string literals and comments; a clause it gets wrong
//! can only make a query read the wrong version or fail, never write, because the checks
//! above apply to whatever it produces. Every answer carries a receipt per table read.
//!
//! ```no_run
//! # async fn example(ls: &livestate_engine::Livestate) -> Result<(), livestate_sql::SqlError> {
//! use livestate_sql::{Limits, Queries};
//! let queries = Queries::new(Limits { time: std::time::Duration::from_secs(5), ..Limits::default() });
//! let answer = queries.run("agent:procurement", &ls.reader(), "SELECT count(*) AS n FROM stock", 10).await?;
//! println!("{:?} truncated: {}", answer.rows, answer.truncated);
//! # Ok(()) }
//! ```

mod error;
pub mod functions;
mod limits;
mod memory;
mod overflow;
mod pool;
pub mod shape;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::execution::disk_manager::DiskManagerBuilder;
use datafusion::execution::memory_pool::GreedyMemoryPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
use livestate_engine::{At, Reader, Receipt};
use paimon_datafusion::PaimonTableProvider;
use serde::Serialize;
use serde_json::{Map, Value};

pub use error::{Busy, Shape, SqlError};
pub use limits::Limits;
pub use pool::Queries;

/// One row of an answer: `column: value`, a null cell left out.
pub type Row = Map<String, Value>;

/// A query's answer.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
    /// More rows matched than the limit let through.
    pub truncated: bool,
    /// One receipt per table the plan scans.
    pub receipts: Vec<Receipt>,
}

/// A `VERSION AS OF` clause found in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    start: usize,
    end: usize,
    table: String,
    at: At,
}

/// Finds `<table> VERSION AS OF <n | 'tag'>` outside string literals and comments.
fn versions(sql: &str) -> Vec<Version> {
    #[derive(Debug)]
    enum Tok {
        Word(String),
        Num(String),
        Str(String),
        Other,
    }
    let b = sql.as_bytes();
    let mut toks: Vec<(usize, usize, Tok)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
        } else if c == b'\'' {
            let start = i;
            i += 1;
            let mut s = String::new();
            while i < b.len() {
                if b[i] == b'\'' && b.get(i + 1) == Some(&b'\'') {
                    s.push('\'');
                    i += 2;
                } else if b[i] == b'\'' {
                    i += 1;
                    break;
                } else {
                    s.push(b[i] as char);
                    i += 1;
                }
            }
            toks.push((start, i, Tok::Str(s)));
        } else if c == b'"' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += 1;
            }
            i += 1;
            toks.push((start, i.min(b.len()), Tok::Word(sql[start + 1..(i - 1).min(b.len())].to_string())));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
            toks.push((start, i, Tok::Word(sql[start..i].to_string())));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            toks.push((start, i, Tok::Num(sql[start..i].to_string())));
        } else {
            toks.push((i, i + 1, Tok::Other));
            i += 1;
        }
    }
    let kw = |t: &Tok, k: &str| matches!(t, Tok::Word(w) if w.eq_ignore_ascii_case(k));
    let mut out = Vec::new();
    for w in toks.windows(5) {
        if let (Tok::Word(table), true, true, true) =
            (&w[0].2, kw(&w[1].2, "version"), kw(&w[2].2, "as"), kw(&w[3].2, "of"))
        {
            let at = match &w[4].2 {
                Tok::Num(n) => n.parse().ok().map(At::Snapshot),
                Tok::Str(s) => Some(At::Tag(s.clone())),
                _ => None,
            };
            if let Some(at) = at {
                let table = table.rsplit('.').next().unwrap_or(table).to_string();
                out.push(Version { start: w[0].0, end: w[4].1, table, at });
            }
        }
    }
    out
}

/// Why an operator is not a read, or `None` when it is.
fn not_a_read(plan: &LogicalPlan) -> Option<String> {
    match plan {
        LogicalPlan::Projection(_)
        | LogicalPlan::Filter(_)
        | LogicalPlan::Window(_)
        | LogicalPlan::Aggregate(_)
        | LogicalPlan::Sort(_)
        | LogicalPlan::Join(_)
        | LogicalPlan::Repartition(_)
        | LogicalPlan::Union(_)
        | LogicalPlan::TableScan(_)
        | LogicalPlan::EmptyRelation(_)
        | LogicalPlan::Subquery(_)
        | LogicalPlan::SubqueryAlias(_)
        | LogicalPlan::Limit(_)
        | LogicalPlan::Values(_)
        | LogicalPlan::Distinct(_)
        | LogicalPlan::Unnest(_)
        | LogicalPlan::RecursiveQuery(_) => None,
        LogicalPlan::Dml(d) => Some(format!("a write ({} into {})", d.op, d.table_name)),
        LogicalPlan::Ddl(d) => Some(format!("a definition ({})", d.name())),
        LogicalPlan::Copy(_) => Some("COPY".into()),
        LogicalPlan::Statement(s) => Some(format!("a statement ({})", s.name())),
        LogicalPlan::Explain(_) => Some("EXPLAIN".into()),
        LogicalPlan::Analyze(_) => Some("EXPLAIN ANALYZE (it runs the query)".into()),
        LogicalPlan::Extension(e) => Some(format!("an extension ({})", e.node.name())),
        // No catch-all: a new kind of operator in a DataFusion upgrade must be classified here.
        LogicalPlan::DescribeTable(_) => Some("DESCRIBE".into()),
    }
}

/// Checks that every operator of `plan`, subqueries included, is a read; returns the tables
/// it scans (as registered).
///
/// # Errors
/// [`SqlError::NotReadOnly`] naming the first operator that is not a read.
pub fn check_read_only(plan: &LogicalPlan) -> Result<Vec<String>, SqlError> {
    let mut refused = None;
    let mut scanned = Vec::new();
    plan.apply_with_subqueries(|node| {
        if let Some(why) = not_a_read(node) {
            refused = Some(why);
            return Ok(TreeNodeRecursion::Stop);
        }
        if let LogicalPlan::TableScan(scan) = node {
            scanned.push(scan.table_name.table().to_string());
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .map_err(SqlError::plan)?;
    match refused {
        Some(why) => Err(SqlError::NotReadOnly(why)),
        None => Ok(scanned),
    }
}

/// Runs one read-only `sql` query over the state tables `reader` reads under `limits`, on
/// threads started for it (as `livestate sql` does; a server keeps one [`Queries`] for all).
///
/// # Errors
/// As [`Queries::run`].
pub async fn query(reader: &Reader<'_>, sql: &str, limits: Limits) -> Result<Answer, SqlError> {
    Queries::new(limits).run("local", reader, sql, limits.rows).await
}

/// What the task on the query threads hands back: only JSON, so nothing recursive of the
/// query (plans, expressions) is dropped on the caller's thread.
struct Ran {
    columns: Vec<String>,
    rows: Vec<Row>,
    truncated: bool,
    scanned: Vec<String>,
}

impl Queries {
    /// Runs one read-only `sql` query of `principal` over the state tables `reader` reads, with
    /// at most `rows` rows in the answer (and at most [`Limits::output_bytes`] of them).
    ///
    /// # Errors
    /// [`SqlError::TextTooLong`] and [`SqlError::TooComplex`] before anything runs;
    /// [`SqlError::Busy`] when the concurrency limits are reached; [`SqlError::Plan`],
    /// [`SqlError::NotReadOnly`], [`SqlError::Version`] for a query that is not a single read
    /// of known tables; [`SqlError::Timeout`], [`SqlError::Memory`], [`SqlError::ValueTooLarge`]
    /// and [`SqlError::Overloaded`] when a limit stopped it; [`SqlError::Data`] when it failed on
    /// its values; [`SqlError::Exec`] and [`SqlError::Engine`] otherwise.
    pub async fn run(
        &self,
        principal: &str,
        reader: &Reader<'_>,
        sql: &str,
        rows: usize,
    ) -> Result<Answer, SqlError> {
        let limits = self.inner.limits;
        shape::check(sql, &limits)?;
        let permit = self.admit(principal)?;
        let work = async move {
            let (tables, text, registered) = tables(reader, sql).await?;
            let memory = Arc::clone(&self.inner.memory);
            // The permit lives as long as the work, which may outlive the caller by the time
            // an abort takes to land.
            let mut task = self.spawn(async move {
                let _permit = permit;
                let ctx = session(&limits, memory, tables)?;
                plan_and_run(ctx, text, rows, limits).await
            })?;
            let ran = match (&mut task.0).await {
                Ok(ran) => ran?,
                Err(e) if e.is_panic() => {
                    let p = e.into_panic();
                    let what = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    return Err(SqlError::exec("the query failed inside the engine: ", what));
                }
                Err(e) => return Err(SqlError::exec("the query was stopped: ", e)),
            };
            let mut receipts: BTreeMap<String, Receipt> = BTreeMap::new();
            for s in ran.scanned {
                if let Some((_, r)) = registered.get(&s) {
                    receipts.entry(s).or_insert_with(|| r.clone());
                }
            }
            Ok(Answer {
                columns: ran.columns,
                rows: ran.rows,
                truncated: ran.truncated,
                receipts: receipts.into_values().collect(),
            })
        };
        tokio::time::timeout(limits.time, work).await.map_err(|_| SqlError::Timeout(limits.time))?
    }
}

/// The query's session, with its memory pool (inside `memory`, shared by all queries), spill
/// directory, bounded functions and `tables`. Built on the query threads: registering the
/// functions is CPU work.
fn session(
    limits: &Limits,
    memory: Arc<GreedyMemoryPool>,
    tables: Vec<(String, Arc<PaimonTableProvider>)>,
) -> Result<SessionContext, SqlError> {
    let pool = memory::QueryPool::new(limits.memory_bytes, memory, limits.total_memory_bytes);
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(pool))
        .with_disk_manager_builder(
            DiskManagerBuilder::default().with_max_temp_directory_size(limits.spill_bytes),
        )
        .build_arc()
        .map_err(|e| SqlError::exec("the query's runtime: ", e))?;
    let config = SessionConfig::new()
        .with_batch_size(functions::BATCH_ROWS)
        .with_target_partitions(limits.workers.max(1));
    let mut builder =
        SessionStateBuilder::new().with_config(config).with_runtime_env(runtime).with_default_features();
    functions::bound(&mut builder, limits);
    // After type coercion: integer `+`, `-`, `*` fail on overflow instead of wrapping.
    builder.analyzer_rules().get_or_insert_with(Vec::new).push(Arc::new(overflow::CheckedArithmetic::new()));
    let ctx = SessionContext::new_with_state(builder.build());
    for (name, provider) in tables {
        ctx.register_table(name.as_str(), provider).map_err(SqlError::plan)?;
    }
    Ok(ctx)
}

/// Providers for every table of `spec`, pinned to its latest snapshot, and one for each
/// `VERSION AS OF` clause; the text with those clauses replaced by the names registered; the
/// receipt of each registered name.
#[allow(clippy::type_complexity)]
async fn tables(
    reader: &Reader<'_>,
    sql: &str,
) -> Result<(Vec<(String, Arc<PaimonTableProvider>)>, String, HashMap<String, (String, Receipt)>), SqlError> {
    let mut tables = Vec::new();
    // Pin every table to its current latest snapshot, so the receipt names exactly what
    // the scan reads even if a commit lands meanwhile.
    let mut registered: HashMap<String, (String, Receipt)> = HashMap::new();
    let spec = reader.spec();
    for ts in spec.tables.values() {
        let receipt = reader.receipt(&ts.name, &At::Latest).await?;
        let provider = provider(reader, &ts.name, receipt.snapshot_id.map(At::Snapshot)).await?;
        tables.push((ts.name.clone(), provider));
        registered.insert(ts.name.clone(), (ts.name.clone(), receipt));
    }
    // Time travel: each clause becomes a table of its own, pinned to that version.
    let mut text = sql.to_string();
    for (n, v) in versions(sql).into_iter().enumerate().rev() {
        if spec.table(&v.table).is_none() {
            return Err(SqlError::plan(format!(
                "no table `{}` (tables: {})",
                v.table,
                spec.tables.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        let receipt = reader
            .receipt(&v.table, &v.at)
            .await
            .map_err(|e| SqlError::Version { at: String::new(), source: Box::new(e) })?;
        let name = format!("{}__v{n}", v.table);
        let provider = provider(reader, &v.table, Some(v.at.clone())).await?;
        tables.push((name.clone(), provider));
        registered.insert(name.clone(), (v.table.clone(), receipt));
        text.replace_range(v.start..v.end, &format!("{name} AS {}", v.table));
    }
    Ok((tables, text, registered))
}

/// Plans, checks and runs `text` in `ctx`; the answer's rows are cut at `rows` and at
/// [`Limits::output_bytes`] of JSON.
async fn plan_and_run(
    ctx: SessionContext,
    text: String,
    rows: usize,
    limits: Limits,
) -> Result<Ran, SqlError> {
    let plan = ctx
        .state()
        .create_logical_plan(&text)
        .await
        .map_err(|e| SqlError::of_datafusion(e, SqlError::plan))?;
    let scanned = check_read_only(&plan)?;
    let exec = |e: datafusion::error::DataFusionError| SqlError::of_datafusion(e, |e| SqlError::exec("", e));
    let df = ctx.execute_logical_plan(plan).await.map_err(exec)?;
    let df = df.limit(0, Some(rows.saturating_add(1))).map_err(exec)?;
    let columns: Vec<String> = df.schema().fields().iter().map(|f| f.name().clone()).collect();
    let mut stream = df.execute_stream().await.map_err(exec)?;
    let (mut out, mut bytes, mut truncated) = (Vec::new(), 0usize, false);
    'batches: while let Some(batch) = stream.next().await {
        let batch = batch.map_err(exec)?;
        let batch = batch.slice(0, batch.num_rows().min(rows + 1 - out.len()));
        let mut w = arrow_json::LineDelimitedWriter::new(Vec::new());
        w.write(&batch).map_err(|e| SqlError::exec("", e))?;
        w.finish().map_err(|e| SqlError::exec("", e))?;
        for line in w.into_inner().split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            if out.len() == rows || bytes + line.len() + 1 > limits.output_bytes {
                truncated = true;
                break 'batches;
            }
            bytes += line.len() + 1;
            out.push(serde_json::from_slice::<Row>(line).map_err(|e| SqlError::exec("", e))?);
        }
    }
    Ok(Ran { columns, rows: out, truncated, scanned })
}

async fn provider(
    reader: &Reader<'_>,
    table: &str,
    at: Option<At>,
) -> Result<Arc<PaimonTableProvider>, SqlError> {
    let t = reader.table(table).await?;
    let t = match at {
        None | Some(At::Latest) => t,
        Some(At::Snapshot(id)) => t
            .copy_with_time_travel_strict(HashMap::from([(
                paimon::spec::SCAN_SNAPSHOT_ID_OPTION.to_string(),
                id.to_string(),
            )]))
            .await
            .map_err(|e| SqlError::Version {
                at: format!("{table} VERSION AS OF {id}"),
                source: Box::new(e),
            })?,
        Some(At::Tag(tag)) => t
            .copy_with_time_travel_strict(HashMap::from([(
                paimon::spec::SCAN_TAG_NAME_OPTION.to_string(),
                tag.clone(),
            )]))
            .await
            .map_err(|e| SqlError::Version {
                at: format!("{table} VERSION AS OF '{tag}'"),
                source: Box::new(e),
            })?,
    };
    Ok(Arc::new(PaimonTableProvider::try_new(t).map_err(|e| SqlError::exec("", e))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_clauses_are_found_outside_strings_and_comments() {
        let v = versions("SELECT * FROM stock VERSION AS OF 12 s JOIN state.open_orders version as of 'proposal-p1-s3' o ON true WHERE x = 'stock VERSION AS OF 3' -- t VERSION AS OF 4");
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].table.as_str(), &v[0].at), ("stock", &At::Snapshot(12)));
        assert_eq!((v[1].table.as_str(), &v[1].at), ("open_orders", &At::Tag("proposal-p1-s3".into())));
    }
}
