//! `livestate export flink-sql`: the Flink SQL that recreates a directory's state tables in a
//! Paimon catalog, with the columns, primary key and options Paimon stores for them, and the
//! INSERT jobs that derive them from a Kafka topic carrying the record (docs/scale-out.md).
//!
//! A mapping is exported as one `SELECT ... WHERE type = '<event>'` over the Kafka table, and a
//! table's mappings as one `INSERT INTO` of their `UNION ALL`, so each table has one Flink sink
//! (one writer, as Paimon needs); the table's merge engine (partial update, aggregation, first
//! row) does the rest inside Paimon, as it does for livestate. What Flink SQL cannot express is printed as a `--`
//! comment naming the feature, never as SQL that would derive something else:
//!
//! - delete mappings: an INSERT fed by an append-only topic produces no `-D` rows;
//! - a data field whose type differs between event types: the one Kafka table cannot type it.
//!
//! When the spec marks tables `derived_by = "external"`, only their mappings are exported (the
//! others stay livestate's), each reading the topic from the first offset livestate's own last
//! commit of the table did not cover, so the handover applies every event exactly once.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use livestate_spec::expr::{BinOp, Expr};
use livestate_spec::{Action, CompanySpec, Mapping, Value, ValueType};

use crate::error::{paimon_err, EngineError};
use crate::layout::Layout;
use crate::schema::{paimon_type, TableId, STATE_DB};

/// The Flink catalog the state tables are created in.
pub const CATALOG: &str = "livestate";
/// The Kafka table of the record, in Flink's built-in in-memory catalog.
pub const RECORD_TABLE: &str = "`default_catalog`.`default_database`.`livestate_record`";
/// Alias of the record row in every INSERT (table names start with a letter, so it never
/// collides with a lookup table's alias).
const EV: &str = "`_e`";

/// Where the exported SQL points Flink: the warehouse and the Kafka topic of the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlinkTarget {
    /// Warehouse URI of the Paimon catalog (`file:///...`, `s3://bucket/path`, ...).
    pub warehouse: String,
    pub kafka_topic: String,
    /// `HOST:PORT[,HOST:PORT...]`.
    pub kafka_bootstrap: String,
}

/// A state table as Paimon stores it: the source of every column type and option exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTable {
    pub name: String,
    /// Column name and Paimon SQL type (`STRING NOT NULL`, `DECIMAL(12, 2)`), in order.
    pub columns: Vec<(String, String)>,
    pub primary_keys: Vec<String>,
    pub partition_keys: Vec<String>,
    pub options: BTreeMap<String, String>,
    pub comment: Option<String>,
    /// For a table marked `derived_by = "external"` that livestate derived before: the record
    /// offset its last livestate commit reflects (every event below it is in the table).
    pub handed_over_at: Option<u64>,
}

/// Reads every state table's stored schema and renders the SQL with [`render`].
///
/// # Errors
/// [`EngineError::NotInitialized`], spec errors, Paimon errors opening a table, and
/// [`EngineError::Mismatch`] when a stored table's columns differ from the spec's.
pub async fn flink_sql(layout: &Layout, target: &FlinkTarget) -> Result<String, EngineError> {
    let spec = crate::load_spec(layout)?;
    let catalog = crate::open_catalog(layout)?;
    let mut tables = Vec::new();
    for t in spec.tables.values() {
        let id = TableId::state(&t.name);
        let full = id.full_name();
        let table = catalog.table(id.identifier()).await.map_err(paimon_err(&full, "open"))?;
        let schema = table.schema();
        let mut stored = StoredTable {
            name: t.name.clone(),
            columns: schema
                .fields()
                .iter()
                .map(|f| (f.name().to_string(), f.data_type().to_string()))
                .collect(),
            primary_keys: schema.primary_keys().to_vec(),
            partition_keys: schema.partition_keys().to_vec(),
            options: schema.options().iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            comment: schema.comment().map(str::to_string),
            handed_over_at: None,
        };
        let names: Vec<&str> = stored.columns.iter().map(|(n, _)| n.as_str()).collect();
        let declared: Vec<&str> = t.columns.keys().map(String::as_str).collect();
        if names != declared {
            return Err(EngineError::Mismatch {
                table: full,
                message: format!("Paimon stores columns {names:?}, the spec declares {declared:?}"),
            });
        }
        if !t.derived_here() {
            let own = crate::schema::latest_own_snapshot(&table)
                .await
                .map_err(paimon_err(&full, "read snapshot"))?;
            stored.handed_over_at = own.map(|s| u64::try_from(s.commit_identifier()).unwrap_or(0));
        }
        tables.push(stored);
    }
    Ok(render(&spec, &tables, target))
}

/// The whole Flink SQL script: settings, catalog, database, one `CREATE TABLE IF NOT EXISTS`
/// per table, the Kafka table of the record, and a statement set with one INSERT per
/// exportable mapping (a `--` comment naming the reason for every other mapping).
pub fn render(spec: &CompanySpec, tables: &[StoredTable], target: &FlinkTarget) -> String {
    let fields = DataFields::of(spec);
    // With tables handed over, Flink derives those alone; the others stay livestate's, and a
    // second writer on them would overwrite livestate's snapshots.
    let handover = spec.tables.values().any(|t| !t.derived_here());
    let stays_with_livestate =
        |table: &str| handover && spec.table(table).is_none_or(livestate_spec::TableSpec::derived_here);
    let exported: Vec<Result<String, String>> = spec
        .mappings
        .iter()
        .map(|m| {
            if stays_with_livestate(&m.table) {
                return Err(format!(
                    "`{}` is derived by livestate (only derived_by = \"external\" tables are exported)",
                    m.table
                ));
            }
            let from = tables.iter().find(|t| t.name == m.table).and_then(|t| t.handed_over_at);
            mapping_select(spec, &fields, m, from)
        })
        .collect();
    let mut out = String::new();
    let n_ok = exported.iter().filter(|e| e.is_ok()).count();
    let _ = writeln!(
        out,
        "-- Generated by `livestate export flink-sql`: {} state table(s), {} of {} mapping(s) as INSERT jobs.",
        tables.len(),
        n_ok,
        exported.len()
    );
    out.push_str(
        "-- Run with Flink's SQL client, the Paimon and Kafka connectors on its class path.\n\
         -- What runs where, and what Flink cannot take over: docs/scale-out.md.\n\
         -- The options are the ones Paimon stores for each table. With changelog-producer = 'input',\n\
         -- Flink writes its input rows as the changelog, where livestate writes every change's full\n\
         -- before and after: streaming readers see partial rows of partial-update tables and deltas\n\
         -- of aggregation tables.\n\n",
    );
    // Timestamps: livestate stores UTC; TIMESTAMP_LTZ -> TIMESTAMP casts use this zone.
    out.push_str("SET 'table.local-time-zone' = 'UTC';\n\n");
    let _ = writeln!(
        out,
        "CREATE CATALOG {} WITH (\n  'type' = 'paimon',\n  'warehouse' = {}\n);\n",
        ident(CATALOG),
        literal(&target.warehouse)
    );
    let _ = writeln!(out, "CREATE DATABASE IF NOT EXISTS {}.{};\n", ident(CATALOG), ident(STATE_DB));
    if handover {
        let external: Vec<&str> =
            spec.tables.values().filter(|t| !t.derived_here()).map(|t| t.name.as_str()).collect();
        let _ = writeln!(
            out,
            "-- Handover: Flink derives {} (derived_by = \"external\"); livestate derives every other table.\n",
            external.join(", ")
        );
    }
    for t in tables {
        let left: Vec<usize> = spec
            .mappings
            .iter()
            .enumerate()
            .filter(|(i, m)| m.table == t.name && exported[*i].is_err() && !stays_with_livestate(&m.table))
            .map(|(i, _)| i)
            .collect();
        if !left.is_empty() {
            let list = left.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
            let _ = writeln!(
                out,
                "-- Table {}: mapping(s) {list} cannot run in Flink (below); Flink alone would derive a different table.",
                t.name
            );
        }
        out.push_str(&create_table(t));
        out.push('\n');
    }
    out.push_str(&record_table(&fields, target));
    out.push('\n');
    if n_ok > 0 {
        out.push_str("EXECUTE STATEMENT SET\nBEGIN\n");
    }
    // One INSERT per table, its mappings' SELECTs joined by UNION ALL: one Flink sink, so one
    // writer (one commit user, one sequence of sequence numbers) per table, as Paimon needs.
    let mut order: Vec<&str> = Vec::new();
    for m in &spec.mappings {
        if !order.contains(&m.table.as_str()) {
            order.push(m.table.as_str());
        }
    }
    for table in order {
        let of_table: Vec<usize> =
            (0..spec.mappings.len()).filter(|i| spec.mappings[*i].table == table).collect();
        for &i in &of_table {
            if let Err(why) = &exported[i] {
                let m = &spec.mappings[i];
                let _ = writeln!(out, "-- mapping {i}: {} -> {}", m.event, m.table);
                let _ = writeln!(out, "-- not exported: {why}");
            }
        }
        let selects: Vec<(usize, &String)> =
            of_table.iter().filter_map(|&i| exported[i].as_ref().ok().map(|sql| (i, sql))).collect();
        if selects.is_empty() {
            continue;
        }
        let Some(t) = spec.table(table) else { continue };
        let columns: Vec<String> = t.columns.keys().cloned().collect();
        let _ = writeln!(
            out,
            "INSERT INTO {}.{}.{} ({})",
            ident(CATALOG),
            ident(STATE_DB),
            ident(table),
            idents(&columns)
        );
        for (k, (i, sql)) in selects.iter().enumerate() {
            if k > 0 {
                out.push_str("UNION ALL\n");
            }
            let m = &spec.mappings[*i];
            let _ = writeln!(out, "-- mapping {i}: {} -> {}", m.event, m.table);
            out.push_str(sql);
        }
        out.truncate(out.trim_end().len());
        out.push_str(";\n");
    }
    if n_ok > 0 {
        out.push_str("END;\n");
    }
    out
}

fn create_table(t: &StoredTable) -> String {
    let mut out =
        format!("CREATE TABLE IF NOT EXISTS {}.{}.{} (\n", ident(CATALOG), ident(STATE_DB), ident(&t.name));
    let mut lines: Vec<String> = t.columns.iter().map(|(n, ty)| format!("  {} {ty}", ident(n))).collect();
    if !t.primary_keys.is_empty() {
        lines.push(format!("  PRIMARY KEY ({}) NOT ENFORCED", idents(&t.primary_keys)));
    }
    out.push_str(&lines.join(",\n"));
    out.push_str("\n)");
    if let Some(c) = &t.comment {
        let _ = write!(out, " COMMENT {}", literal(c));
    }
    if !t.partition_keys.is_empty() {
        let _ = write!(out, " PARTITIONED BY ({})", idents(&t.partition_keys));
    }
    out.push_str(" WITH (\n");
    let opts: Vec<String> =
        t.options.iter().map(|(k, v)| format!("  {} = {}", literal(k), literal(v))).collect();
    out.push_str(&opts.join(",\n"));
    out.push_str("\n);\n");
    out
}

/// The data fields of every event type, typed once for the Kafka table's `data` ROW.
struct DataFields {
    /// Field name and type, in the order the event types declare them.
    types: Vec<(String, ValueType)>,
    /// Fields declared with different types by different event types: name -> description.
    conflicts: BTreeMap<String, String>,
}

impl DataFields {
    fn of(spec: &CompanySpec) -> DataFields {
        let mut types: Vec<(String, ValueType)> = Vec::new();
        let mut uses: BTreeMap<String, Vec<(ValueType, String)>> = BTreeMap::new();
        for ev in spec.events.values() {
            for (f, fs) in &ev.fields {
                if !types.iter().any(|(n, _)| n == f) {
                    types.push((f.clone(), fs.ty));
                }
                uses.entry(f.clone()).or_default().push((fs.ty, ev.name.clone()));
            }
        }
        let mut conflicts = BTreeMap::new();
        for (f, used) in uses {
            let kinds: BTreeSet<String> = used.iter().map(|(ty, _)| ty.to_string()).collect();
            if kinds.len() > 1 {
                types.retain(|(n, _)| *n != f);
                let list: Vec<String> = used.iter().map(|(ty, ev)| format!("{ty} in {ev}")).collect();
                conflicts.insert(f, list.join(", "));
            }
        }
        DataFields { types, conflicts }
    }
}

/// The Kafka table: one JSON message per event, the record entry in its canonical form.
fn record_table(fields: &DataFields, target: &FlinkTarget) -> String {
    let mut out = String::from(
        "-- The record: one JSON message per event in the record's canonical form (docs/formats/record.md),\n\
         -- in record order on a single partition.\n",
    );
    for (f, uses) in &fields.conflicts {
        let _ = writeln!(out, "-- data field `{f}` is left out of `data`: its type differs ({uses}).");
    }
    let _ = writeln!(out, "CREATE TABLE {RECORD_TABLE} (");
    let row: Vec<String> =
        fields.types.iter().map(|(f, ty)| format!("{} {}", ident(f), sql_type(*ty))).collect();
    let _ = writeln!(out, "  `id` STRING,\n  `type` STRING,\n  `occurred_at` TIMESTAMP_LTZ(3),");
    // Flink has no empty ROW type: without any data field there is no `data` column.
    if !row.is_empty() {
        let _ = writeln!(out, "  `data` ROW<{}>,", row.join(", "));
    }
    let _ = writeln!(
        out,
        "  `causation` STRING,\n  `record_offset` BIGINT METADATA FROM 'offset' VIRTUAL,\n  `proc_time` AS PROCTIME()\n) WITH ("
    );
    let opts = [
        ("connector", "kafka"),
        ("topic", target.kafka_topic.as_str()),
        ("properties.bootstrap.servers", target.kafka_bootstrap.as_str()),
        ("properties.group.id", "livestate-flink"),
        ("scan.startup.mode", "earliest-offset"),
        ("format", "json"),
        ("json.timestamp-format.standard", "ISO-8601"),
        ("json.fail-on-missing-field", "false"),
        ("json.ignore-parse-errors", "false"),
    ];
    let opts: Vec<String> = opts.iter().map(|(k, v)| format!("  {} = {}", literal(k), literal(v))).collect();
    out.push_str(&opts.join(",\n"));
    out.push_str("\n);\n");
    out
}

/// One mapping as the SELECT of its table's INSERT (a branch of its UNION ALL), or why it
/// cannot be one. `from`: the record offset to start reading the topic at (a table livestate
/// derived up to there), instead of the earliest.
fn mapping_select(
    spec: &CompanySpec,
    fields: &DataFields,
    m: &Mapping,
    from: Option<u64>,
) -> Result<String, String> {
    if m.action == Action::Delete {
        return Err("delete mapping: an INSERT fed by the append-only Kafka topic produces no -D rows, \
                    so Flink SQL cannot remove the row (keep livestate deriving this table)"
            .into());
    }
    let table = spec.table(&m.table).ok_or_else(|| format!("unknown table `{}`", m.table))?;
    let lookups: Vec<&str> = m.lookups.iter().map(|l| l.table.as_str()).collect();
    let r = Render { fields, lookups: &lookups };
    let mut select = Vec::new();
    for (col, ty) in &table.columns {
        let value = match m.set.iter().find(|(c, _)| c == col) {
            Some((_, e)) => r.expr(e)?,
            None => "NULL".to_string(),
        };
        select.push(format!("  CAST({value} AS {})", sql_type(*ty)));
    }
    // The topic's offsets are the record's (one partition, filled from offset 0 in order).
    let hint = from.map_or(String::new(), |o| {
        format!(
            " /*+ OPTIONS('scan.startup.mode' = 'specific-offsets', 'scan.startup.specific-offsets' = 'partition:0,offset:{o}') */"
        )
    });
    let mut out = format!("SELECT\n{}\nFROM {RECORD_TABLE}{hint} AS {EV}\n", select.join(",\n"));
    for l in &m.lookups {
        let lt = spec.table(&l.table).ok_or_else(|| format!("unknown lookup table `{}`", l.table))?;
        let mut on = Vec::new();
        for (k, e) in lt.primary_key.iter().zip(&l.key) {
            on.push(format!("{}.{} = {}", ident(&l.table), ident(k), r.expr(e)?));
        }
        let _ = writeln!(
            out,
            "LEFT JOIN {}.{}.{} FOR SYSTEM_TIME AS OF {EV}.`proc_time` AS {}\n  ON {}",
            ident(CATALOG),
            ident(STATE_DB),
            ident(&l.table),
            ident(&l.table),
            on.join(" AND ")
        );
    }
    let _ = write!(out, "WHERE {EV}.`type` = {}", literal(&m.event));
    if let Some(w) = &m.when {
        let _ = write!(out, " AND ({})", r.expr(w)?);
    }
    out.push('\n');
    Ok(out)
}

/// Renders livestate expressions as Flink SQL over the record row and the looked-up rows.
struct Render<'a> {
    fields: &'a DataFields,
    lookups: &'a [&'a str],
}

impl Render<'_> {
    fn expr(&self, e: &Expr) -> Result<String, String> {
        Ok(match e {
            Expr::Literal(v) => value_literal(v),
            Expr::Name(n) => self.name(n)?,
            Expr::Neg(a) => format!("(- {})", self.expr(a)?),
            Expr::Not(a) => format!("(NOT {})", self.expr(a)?),
            Expr::Coalesce(args) => {
                let args: Result<Vec<String>, String> = args.iter().map(|a| self.expr(a)).collect();
                format!("COALESCE({})", args?.join(", "))
            }
            // livestate divides exactly; Flink divides decimals, so the dividend becomes a
            // DECIMAL(38, 18) (an INT division would truncate).
            Expr::Binary(BinOp::Div, a, b) => {
                format!("(CAST({} AS DECIMAL(38, 18)) / {})", self.expr(a)?, self.expr(b)?)
            }
            Expr::Binary(op, a, b) => {
                let op = match op {
                    BinOp::Add => "+",
                    BinOp::Sub => "-",
                    BinOp::Mul => "*",
                    BinOp::Div => "/",
                    BinOp::Eq => "=",
                    BinOp::Ne => "<>",
                    BinOp::Lt => "<",
                    BinOp::Le => "<=",
                    BinOp::Gt => ">",
                    BinOp::Ge => ">=",
                    BinOp::And => "AND",
                    BinOp::Or => "OR",
                };
                format!("({} {op} {})", self.expr(a)?, self.expr(b)?)
            }
        })
    }

    fn name(&self, n: &str) -> Result<String, String> {
        Ok(match n {
            "$event.id" => format!("{EV}.`id`"),
            "$event.type" => format!("{EV}.`type`"),
            "$event.causation" => format!("{EV}.`causation`"),
            // UTC wall time, as livestate stores it (the session zone is UTC).
            "$event.occurred_at" => format!("CAST({EV}.`occurred_at` AS TIMESTAMP(3))"),
            // The topic's offsets are the record's (one partition, filled from offset 0).
            "$event.offset" => format!("{EV}.`record_offset`"),
            _ => match n.split_once('.') {
                Some((t, c)) if self.lookups.contains(&t) => format!("{}.{}", ident(t), ident(c)),
                _ => {
                    if let Some(uses) = self.fields.conflicts.get(n) {
                        return Err(format!(
                            "data field `{n}` has different types in different event types ({uses}), so the Kafka table cannot type it"
                        ));
                    }
                    format!("{EV}.`data`.{}", ident(n))
                }
            },
        })
    }
}

fn value_literal(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::String(s) => literal(s),
        Value::Int(i) => format!("CAST({i} AS BIGINT)"),
        Value::Decimal(d) => d.to_string(),
        Value::Bool(b) => if *b { "TRUE" } else { "FALSE" }.into(),
        Value::Timestamp(t) => format!("TIMESTAMP '{}'", t.format("%Y-%m-%d %H:%M:%S%.3f")),
    }
}

/// The Flink (and Paimon) SQL type of a livestate type, nullable.
fn sql_type(ty: ValueType) -> String {
    paimon_type(ty).expect("the spec checked every decimal precision").to_string()
}

/// A Flink identifier in backquotes.
fn ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

fn idents(names: &[String]) -> String {
    names.iter().map(|n| ident(n)).collect::<Vec<_>>().join(", ")
}

/// A SQL string literal; line breaks become spaces so every statement stays line-oriented.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''").replace(['\n', '\r'], " "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(src: &str) -> Result<String, String> {
        let spec = CompanySpec::from_sources(&[(
            "t.toml".into(),
            r#"
[events."m.a"]
fields = { qty = "int", price = "decimal(12,2)", note = "string?", at = "timestamp" }
[events."m.b"]
fields = { qty = "string" }
[tables.t]
primary_key = ["k"]
freshness = "1s"
[tables.t.columns]
k = "string"
"#
            .to_string(),
        )])
        .unwrap();
        let fields = DataFields::of(&spec);
        Render { fields: &fields, lookups: &["stock"] }.expr(&Expr::parse(src).unwrap())
    }

    #[test]
    fn operators_become_flink_operators() {
        assert_eq!(expr("price * 2 == 5.00").unwrap(), "((`_e`.`data`.`price` * CAST(2 AS BIGINT)) = 5.00)");
        assert_eq!(expr("not (note != 'it''s')").unwrap(), "(NOT (`_e`.`data`.`note` <> 'it''s'))");
        assert_eq!(
            expr("coalesce(stock.on_hand, 0) - 1").unwrap(),
            "(COALESCE(`stock`.`on_hand`, CAST(0 AS BIGINT)) - CAST(1 AS BIGINT))"
        );
        assert_eq!(
            expr("price / 4").unwrap(),
            "(CAST(`_e`.`data`.`price` AS DECIMAL(38, 18)) / CAST(4 AS BIGINT))"
        );
        assert_eq!(expr("$event.occurred_at").unwrap(), "CAST(`_e`.`occurred_at` AS TIMESTAMP(3))");
    }

    #[test]
    fn events_without_fields_give_the_kafka_table_no_data_column() {
        let spec = CompanySpec::from_sources(&[(
            "t.toml".into(),
            "[events.\"m.ping\"]\nfields = {}\n[tables.t]\nprimary_key = [\"k\"]\nfreshness = \"1s\"\n[tables.t.columns]\nk = \"string\"\n[[mappings]]\nevent = \"m.ping\"\ntable = \"t\"\nset = { k = \"$event.id\" }\n".to_string(),
        )])
        .unwrap();
        let target =
            FlinkTarget { warehouse: "w".into(), kafka_topic: "t".into(), kafka_bootstrap: "b:1".into() };
        let sql = record_table(&DataFields::of(&spec), &target);
        assert!(
            !sql.contains("`data`") && sql.contains("`occurred_at` TIMESTAMP_LTZ(3),\n  `causation`"),
            "{sql}"
        );
    }

    #[test]
    fn the_record_offset_is_the_kafka_offset() {
        assert_eq!(
            expr("$event.offset").unwrap(),
            "`_e`.`record_offset`",
            "the Kafka offset is the record's"
        );
    }

    #[test]
    fn a_field_typed_two_ways_is_refused_naming_both_types() {
        let e = expr("qty").unwrap_err();
        assert!(e.contains("`qty`") && e.contains("int in m.a") && e.contains("string in m.b"), "{e}");
    }
}
