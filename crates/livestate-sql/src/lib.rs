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
//! 3. The plan runs with a row limit and a time limit.
//!
//! `VERSION AS OF` clauses (`stock VERSION AS OF 12`, `stock VERSION AS OF 'proposal-…'`) are
//! found by a small scanner that skips string literals and comments; a clause it gets wrong
//! can only make a query read the wrong version or fail, never write, because the checks
//! above apply to whatever it produces. Every answer carries a receipt per table read.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use livestate_engine::{At, Catalog, LagSource, Receipt};
use livestate_spec::CompanySpec;
use paimon::catalog::Identifier;
use paimon_datafusion::PaimonTableProvider;
use serde::Serialize;
use serde_json::Value;

/// Why a query was not answered.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The query does not parse or plan (unknown table or column, syntax, two statements).
    #[error("the query cannot be planned: {0}")]
    Plan(String),
    /// The plan holds an operator that is not a read.
    #[error("refused: only read-only queries are allowed, and this plan contains {0}")]
    NotReadOnly(String),
    /// A `VERSION AS OF` names a snapshot or tag that does not exist.
    #[error("{0}")]
    Version(String),
    #[error("the query ran longer than {0:?} and was stopped")]
    Timeout(Duration),
    /// The query failed on the values it computed: a division by zero, a cast that does not
    /// fit, an arithmetic overflow. The caller's error, like a plan error.
    #[error("the query failed on its data: {0}")]
    Data(String),
    #[error("running the query: {0}")]
    Exec(String),
    #[error(transparent)]
    Engine(Box<livestate_engine::EngineError>),
}

impl From<livestate_engine::EngineError> for SqlError {
    fn from(e: livestate_engine::EngineError) -> SqlError {
        SqlError::Engine(Box::new(e))
    }
}

impl SqlError {
    /// An error of planning or running a query: [`SqlError::Data`] when its root is a value the
    /// query computed (division by zero, a failed cast, an overflow), else `other`.
    fn of_datafusion(e: &datafusion::error::DataFusionError, other: fn(String) -> SqlError) -> SqlError {
        use datafusion::arrow::error::ArrowError;
        use datafusion::error::DataFusionError;
        let root = e.find_root();
        let data = match root {
            DataFusionError::ArrowError(a, _) => matches!(
                a.as_ref(),
                ArrowError::DivideByZero
                    | ArrowError::CastError(_)
                    | ArrowError::ArithmeticOverflow(_)
                    | ArrowError::ParseError(_)
            ),
            _ => false,
        };
        if data {
            SqlError::Data(root.to_string())
        } else {
            other(e.to_string())
        }
    }

    /// Whether the caller can fix it (a 4xx rather than a 5xx).
    pub fn is_input_error(&self) -> bool {
        matches!(
            self,
            SqlError::Plan(_)
                | SqlError::NotReadOnly(_)
                | SqlError::Version(_)
                | SqlError::Timeout(_)
                | SqlError::Data(_)
        ) || matches!(self, SqlError::Engine(e) if livestate_engine::is_input_error(e.as_ref()))
    }
}

/// Limits of one query.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub rows: usize,
    pub time: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { rows: 1000, time: Duration::from_secs(30) }
    }
}

/// A query's answer.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub columns: Vec<String>,
    pub rows: Vec<Value>,
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
    .map_err(|e| SqlError::Plan(e.to_string()))?;
    match refused {
        Some(why) => Err(SqlError::NotReadOnly(why)),
        None => Ok(scanned),
    }
}

/// Runs one read-only `sql` query over the state tables of `spec`.
///
/// # Errors
/// [`SqlError`]: not read-only, not plannable, unknown version, too slow, or a read error.
pub async fn query(
    catalog: &Catalog,
    spec: &CompanySpec,
    lag: &LagSource<'_>,
    sql: &str,
    limits: Limits,
) -> Result<Answer, SqlError> {
    let ctx = SessionContext::new();
    // Pin every table to its current latest snapshot, so the receipt names exactly what
    // the scan reads even if a commit lands meanwhile.
    let mut registered: HashMap<String, (String, Receipt)> = HashMap::new();
    for ts in spec.tables.values() {
        let receipt = livestate_engine::read::receipt(catalog, spec, &ts.name, &At::Latest, lag).await?;
        let provider = provider(catalog, &ts.name, receipt.snapshot_id.map(At::Snapshot)).await?;
        ctx.register_table(ts.name.as_str(), provider).map_err(|e| SqlError::Plan(e.to_string()))?;
        registered.insert(ts.name.clone(), (ts.name.clone(), receipt));
    }
    // Time travel: each clause becomes a table of its own, pinned to that version.
    let mut text = sql.to_string();
    for (n, v) in versions(sql).into_iter().enumerate().rev() {
        if spec.table(&v.table).is_none() {
            return Err(SqlError::Plan(format!(
                "no table `{}` (tables: {})",
                v.table,
                spec.tables.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        let receipt = livestate_engine::read::receipt(catalog, spec, &v.table, &v.at, lag)
            .await
            .map_err(|e| SqlError::Version(e.to_string()))?;
        let name = format!("{}__v{n}", v.table);
        let provider = provider(catalog, &v.table, Some(v.at.clone())).await?;
        ctx.register_table(name.as_str(), provider).map_err(|e| SqlError::Plan(e.to_string()))?;
        registered.insert(name.clone(), (v.table.clone(), receipt));
        text.replace_range(v.start..v.end, &format!("{name} AS {}", v.table));
    }
    let plan = ctx
        .state()
        .create_logical_plan(&text)
        .await
        .map_err(|e| SqlError::of_datafusion(&e, SqlError::Plan))?;
    let scanned = check_read_only(&plan)?;
    let mut receipts: BTreeMap<String, Receipt> = BTreeMap::new();
    for s in scanned {
        if let Some((_, r)) = registered.get(&s) {
            receipts.entry(s).or_insert_with(|| r.clone());
        }
    }
    let run = async {
        let df = ctx.execute_logical_plan(plan).await?;
        let df = df.limit(0, Some(limits.rows.saturating_add(1)))?;
        let columns: Vec<String> = df.schema().fields().iter().map(|f| f.name().clone()).collect();
        let batches = df.collect().await?;
        Ok::<_, datafusion::error::DataFusionError>((columns, batches))
    };
    let (columns, batches) = tokio::time::timeout(limits.time, run)
        .await
        .map_err(|_| SqlError::Timeout(limits.time))?
        .map_err(|e| SqlError::of_datafusion(&e, SqlError::Exec))?;
    let mut rows = Vec::new();
    for b in &batches {
        let mut w = arrow_json::ArrayWriter::new(Vec::new());
        w.write(b).map_err(|e| SqlError::Exec(e.to_string()))?;
        w.finish().map_err(|e| SqlError::Exec(e.to_string()))?;
        let bytes = w.into_inner();
        if !bytes.is_empty() {
            let arr: Vec<Value> =
                serde_json::from_slice(&bytes).map_err(|e| SqlError::Exec(e.to_string()))?;
            rows.extend(arr);
        }
    }
    let truncated = rows.len() > limits.rows;
    rows.truncate(limits.rows);
    Ok(Answer { columns, rows, truncated, receipts: receipts.into_values().collect() })
}

async fn provider(
    catalog: &Catalog,
    table: &str,
    at: Option<At>,
) -> Result<Arc<PaimonTableProvider>, SqlError> {
    let t = catalog
        .table(&Identifier::new(livestate_engine::schema::STATE_DB, table))
        .await
        .map_err(|e| SqlError::Exec(e.to_string()))?;
    let t = match at {
        None | Some(At::Latest) => t,
        Some(At::Snapshot(id)) => t
            .copy_with_time_travel_strict(HashMap::from([(
                paimon::spec::SCAN_SNAPSHOT_ID_OPTION.to_string(),
                id.to_string(),
            )]))
            .await
            .map_err(|e| SqlError::Version(format!("{table} VERSION AS OF {id}: {e}")))?,
        Some(At::Tag(tag)) => t
            .copy_with_time_travel_strict(HashMap::from([(
                paimon::spec::SCAN_TAG_NAME_OPTION.to_string(),
                tag.clone(),
            )]))
            .await
            .map_err(|e| SqlError::Version(format!("{table} VERSION AS OF '{tag}': {e}")))?,
    };
    Ok(Arc::new(PaimonTableProvider::try_new(t).map_err(|e| SqlError::Exec(e.to_string()))?))
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
