//! `livestate export flink-sql` prints SQL that a SQL parser accepts and that recreates every
//! state table with the columns, primary key and options Paimon stores for it, and accounts for
//! every mapping with an INSERT job or a comment naming why it cannot be one.
//!
//! The statements are parsed with sqlparser (as DataFusion re-exports it): the state tables with
//! its Hive dialect (which knows `COMMENT` and `WITH (...)` together), the INSERTs with its
//! BigQuery dialect (which knows `FOR SYSTEM_TIME AS OF`). Three Flink constructs no dialect
//! knows are checked as text instead: `CREATE CATALOG`, `EXECUTE STATEMENT SET BEGIN ... END`,
//! and, in the Kafka table, the computed column `AS PROCTIME()`, the Kafka offset's
//! `METADATA FROM 'offset' VIRTUAL` and the `ROW<...>` type (parsed as its equivalent
//! `STRUCT<...>`). No Flink runs here.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use datafusion::sql::sqlparser::ast::{CreateTableOptions, SetExpr, SqlOption, Statement};
use datafusion::sql::sqlparser::dialect::{BigQueryDialect, Dialect, GenericDialect, HiveDialect};
use datafusion::sql::sqlparser::parser::Parser;
use livestate_spec::{Action, CompanySpec};
use serde_json::Value;

fn livestate(dir: &Path, args: &[&str]) -> String {
    let out =
        Command::new(env!("CARGO_BIN_EXE_livestate")).args(args).arg("--dir").arg(dir).output().unwrap();
    assert!(out.status.success(), "livestate {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The exported script, cut into statements and the comments between them.
#[derive(Debug, Default)]
struct Script {
    statements: Vec<String>,
    /// `-- mapping N: event -> table` markers, each with the comment lines and the statement
    /// (if any) that follow it.
    mappings: BTreeMap<usize, (String, Vec<String>, Option<String>)>,
    statement_set: bool,
    ended: bool,
}

fn cut(sql: &str) -> Script {
    let mut s = Script::default();
    let mut current = String::new();
    // A marker outside a statement: a mapping not exported (its reason follows as comments).
    let mut mapping: Option<usize> = None;
    // Markers inside the current INSERT: one per SELECT of its UNION ALL, in order.
    let mut inside: Vec<usize> = Vec::new();
    for line in sql.lines() {
        if let Some(rest) = line.strip_prefix("-- mapping ") {
            let (n, what) = rest.split_once(": ").expect("-- mapping N: event -> table");
            let n: usize = n.parse().unwrap();
            assert!(
                s.mappings.insert(n, (what.to_string(), Vec::new(), None)).is_none(),
                "mapping {n} twice"
            );
            if current.is_empty() {
                mapping = Some(n);
            } else {
                inside.push(n);
                mapping = None;
            }
            continue;
        }
        if let Some(comment) = line.strip_prefix("-- ") {
            if let Some(n) = mapping {
                s.mappings.get_mut(&n).unwrap().1.push(comment.to_string());
            }
            continue;
        }
        match line {
            "EXECUTE STATEMENT SET" => {
                s.statement_set = true;
                continue;
            }
            "BEGIN" if s.statement_set && current.is_empty() => continue,
            "END;" if s.statement_set => {
                s.ended = true;
                mapping = None;
                continue;
            }
            "" if current.is_empty() => continue,
            _ => {}
        }
        mapping = None;
        current.push_str(line);
        current.push('\n');
        if line.ends_with(';') {
            let stmt = std::mem::take(&mut current).trim_end().trim_end_matches(';').to_string();
            if !inside.is_empty() {
                // One INSERT per table: each mapping gets its branch as an INSERT of its own.
                let (head, body) =
                    stmt.split_once('\n').expect("INSERT INTO ... (columns) on a line of its own");
                assert!(head.starts_with("INSERT INTO "), "{stmt}");
                let branches: Vec<&str> = body.split("\nUNION ALL\n").collect();
                assert_eq!(branches.len(), inside.len(), "one SELECT per mapping marker in\n{stmt}");
                for (n, branch) in inside.drain(..).zip(branches) {
                    s.mappings.get_mut(&n).unwrap().2 = Some(format!("{head}\n{branch}"));
                }
            }
            s.statements.push(stmt);
        }
    }
    assert!(current.trim().is_empty(), "unterminated statement: {current}");
    s
}

fn parse(dialect: &dyn Dialect, sql: &str) -> Statement {
    let mut stmts = Parser::parse_sql(dialect, sql).unwrap_or_else(|e| panic!("{e}:\n{sql}"));
    assert_eq!(stmts.len(), 1, "{sql}");
    stmts.remove(0)
}

/// `'text'` as sqlparser prints a single-quoted literal or identifier, unquoted.
fn unquote(s: &str) -> String {
    s.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')).unwrap_or(s).replace("''", "'")
}

fn with_options(opts: &CreateTableOptions) -> BTreeMap<String, String> {
    let CreateTableOptions::With(opts) = opts else { panic!("expected WITH (...), got {opts:?}") };
    opts.iter()
        .map(|o| match o {
            SqlOption::KeyValue { key, value } => (key.value.clone(), unquote(&value.to_string())),
            other => panic!("not a 'key' = 'value' option: {other}"),
        })
        .collect()
}

/// The latest schema file Paimon wrote for a state table.
fn schema_file(dir: &Path, table: &str) -> Value {
    let schema_dir = dir.join("warehouse/state.db").join(table).join("schema");
    let latest = std::fs::read_dir(&schema_dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("schema-")?.parse::<u64>().ok())
        .max()
        .unwrap();
    serde_json::from_slice(&std::fs::read(schema_dir.join(format!("schema-{latest}"))).unwrap()).unwrap()
}

/// Checks the statements every export has and returns the parsed state-table DDL by name.
fn check_common(script: &Script, warehouse: &str, topic: &str) -> BTreeMap<String, Statement> {
    let mut tables = BTreeMap::new();
    let mut kafka = 0;
    for stmt in &script.statements {
        if stmt.starts_with("SET ") {
            let parsed = parse(&GenericDialect {}, stmt);
            assert_eq!(parsed.to_string(), "SET 'table.local-time-zone' = 'UTC'");
        } else if stmt.starts_with("CREATE CATALOG ") {
            assert!(stmt.starts_with("CREATE CATALOG `livestate` WITH ("), "{stmt}");
            assert!(stmt.contains("'type' = 'paimon'"), "{stmt}");
            assert!(stmt.contains(&format!("'warehouse' = '{warehouse}'")), "{stmt}");
        } else if stmt.starts_with("CREATE DATABASE") {
            let parsed = parse(&GenericDialect {}, stmt);
            assert_eq!(parsed.to_string(), "CREATE DATABASE IF NOT EXISTS `livestate`.`state`");
        } else if stmt.starts_with("CREATE TABLE IF NOT EXISTS `livestate`.`state`.") {
            let parsed = parse(&HiveDialect {}, stmt);
            let Statement::CreateTable(ct) = &parsed else { panic!("{parsed}") };
            let name = ct.name.0.last().unwrap().to_string().trim_matches('`').to_string();
            assert!(tables.insert(name, parsed.clone()).is_none(), "table created twice: {stmt}");
        } else if stmt.starts_with("CREATE TABLE `default_catalog`.`default_database`.`livestate_record`") {
            kafka += 1;
            // The Flink constructs sqlparser lacks, checked as text and then put in the form it knows.
            assert!(stmt.contains("\n  `proc_time` AS PROCTIME()\n"), "{stmt}");
            let offset = " METADATA FROM 'offset' VIRTUAL";
            assert!(stmt.contains(&format!("\n  `record_offset` BIGINT{offset},\n")), "{stmt}");
            let plain = stmt
                .replace(",\n  `proc_time` AS PROCTIME()", "")
                .replace(offset, "")
                .replace("ROW<", "STRUCT<");
            let parsed = parse(&GenericDialect {}, &plain);
            let Statement::CreateTable(ct) = &parsed else { panic!("{parsed}") };
            let columns: Vec<String> = ct.columns.iter().map(|c| c.name.value.clone()).collect();
            assert_eq!(columns, ["id", "type", "occurred_at", "data", "causation", "record_offset"]);
            let opts = with_options(&ct.table_options);
            assert_eq!(opts["connector"], "kafka");
            assert_eq!(opts["topic"], topic);
            assert_eq!(opts["format"], "json");
        } else if stmt.starts_with("INSERT INTO ") {
            let parsed = parse(&BigQueryDialect {}, stmt);
            assert!(matches!(parsed, Statement::Insert(_)), "{parsed}");
        } else {
            panic!("unexpected statement:\n{stmt}");
        }
    }
    assert_eq!(kafka, 1, "one Kafka table of the record");
    tables
}

/// Every mapping has its marker, and exactly one of: an INSERT into its table whose SELECT
/// lists one value per column, or a `not exported:` comment.
fn check_mappings(spec: &CompanySpec, script: &Script) -> (usize, usize) {
    assert_eq!(script.mappings.len(), spec.mappings.len(), "{:?}", script.mappings.keys());
    let (mut inserts, mut comments) = (0, 0);
    for (i, m) in spec.mappings.iter().enumerate() {
        let (what, notes, stmt) = &script.mappings[&i];
        assert_eq!(what, &format!("{} -> {}", m.event, m.table), "mapping {i}");
        match stmt {
            Some(sql) => {
                assert!(notes.is_empty(), "mapping {i} has an INSERT and comments {notes:?}");
                let Statement::Insert(ins) = parse(&BigQueryDialect {}, sql) else { unreachable!() };
                assert_eq!(
                    ins.table.to_string(),
                    format!("`livestate`.`state`.`{}`", m.table),
                    "mapping {i}"
                );
                let table = &spec.tables[&m.table];
                let columns: Vec<String> =
                    ins.columns.iter().map(|c| c.to_string().replace('`', "")).collect();
                let declared: Vec<&String> = table.columns.keys().collect();
                assert_eq!(columns.iter().collect::<Vec<_>>(), declared, "mapping {i}");
                let SetExpr::Select(select) = ins.source.as_ref().unwrap().body.as_ref() else {
                    panic!("mapping {i}: not an INSERT ... SELECT")
                };
                assert_eq!(select.projection.len(), columns.len(), "mapping {i}");
                let filter = select.selection.as_ref().expect("a WHERE on the event type").to_string();
                assert!(filter.starts_with(&format!("`_e`.`type` = '{}'", m.event)), "mapping {i}: {filter}");
                assert!(m.action == Action::Upsert, "mapping {i}: a delete was exported as an INSERT");
                inserts += 1;
            }
            None => {
                assert!(
                    notes.len() == 1 && notes[0].starts_with("not exported: "),
                    "mapping {i} ({what}) has neither an INSERT nor a reason: {notes:?}"
                );
                comments += 1;
            }
        }
    }
    (inserts, comments)
}

#[test]
fn export_flink_sql_recreates_every_table_with_its_stored_options_and_every_mapping() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    livestate(&dir, &["init"]);
    let sql = livestate(
        &dir,
        &[
            "export",
            "flink-sql",
            "--kafka-topic",
            "acme.record",
            "--kafka-bootstrap",
            "kafka-1:9092",
            "--warehouse",
            "s3://acme/warehouse",
        ],
    );
    let script = cut(&sql);
    assert!(script.statement_set && script.ended, "the INSERTs run as one statement set");
    let tables = check_common(&script, "s3://acme/warehouse", "acme.record");

    let spec = CompanySpec::load_dir(&dir.join("spec")).unwrap();
    let mut declared: Vec<&String> = spec.tables.keys().collect();
    declared.sort();
    assert_eq!(tables.keys().collect::<Vec<_>>(), declared, "every state table, once");
    for (name, parsed) in &tables {
        let Statement::CreateTable(ct) = parsed else { unreachable!() };
        let stored = schema_file(&dir, name);
        // Options: exactly the ones in Paimon's schema file.
        let stored_opts: BTreeMap<String, String> = stored["options"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect();
        assert_eq!(with_options(&ct.table_options), stored_opts, "{name}");
        assert_eq!(stored_opts["data-file.thin-mode"], "true", "{name}");
        // Columns, in order, with the stored types (sqlparser prints `DECIMAL(12,2)`).
        let columns: Vec<String> = ct.columns.iter().map(|c| c.to_string().replace('`', "")).collect();
        let stored_columns: Vec<String> = stored["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                format!("{} {}", f["name"].as_str().unwrap(), f["type"].as_str().unwrap().replace(", ", ","))
            })
            .collect();
        assert_eq!(columns, stored_columns, "{name}");
        // Primary key, as Flink needs it.
        let keys: Vec<&str> =
            stored["primaryKeys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
        let pk = format!(
            "PRIMARY KEY ({}) NOT ENFORCED",
            keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
        );
        assert_eq!(ct.constraints.iter().map(|c| c.to_string()).collect::<Vec<_>>(), [pk], "{name}");
        assert_eq!(
            ct.comment.as_ref().map(|c| c.to_string()).as_deref(),
            stored["comment"].as_str(),
            "{name}"
        );
    }

    let (inserts, comments) = check_mappings(&spec, &script);
    // One INSERT per table with exported mappings: one Flink sink, one Paimon writer each.
    let mut exported_tables: Vec<&str> =
        spec.mappings.iter().filter(|m| m.action == Action::Upsert).map(|m| m.table.as_str()).collect();
    exported_tables.sort_unstable();
    exported_tables.dedup();
    let insert_into: Vec<&String> =
        script.statements.iter().filter(|s| s.starts_with("INSERT INTO ")).collect();
    assert_eq!(insert_into.len(), exported_tables.len(), "{sql}");
    let stock =
        insert_into.iter().find(|s| s.starts_with("INSERT INTO `livestate`.`state`.`stock`")).unwrap();
    assert_eq!(stock.matches("\nUNION ALL\n").count(), 3, "stock's four mappings in one INSERT:\n{stock}");
    // The example's two delete mappings (shipped and cancelled order lines) cannot be INSERTs.
    let deletes = spec.mappings.iter().filter(|m| m.action == Action::Delete).count();
    assert_eq!((inserts, comments), (spec.mappings.len() - deletes, deletes));
    assert!(sql.contains("-- Table open_orders: mapping(s) 5, 6 cannot run in Flink"), "{sql}");
    // The lookup join of open_orders into stock is a Flink lookup join on the stored table.
    assert!(sql
        .contains("LEFT JOIN `livestate`.`state`.`stock` FOR SYSTEM_TIME AS OF `_e`.`proc_time` AS `stock`"));
}

#[test]
fn export_flink_sql_names_what_flink_cannot_do_instead_of_printing_it() {
    let tmp = tempfile::tempdir().unwrap();
    let spec_dir = tmp.path().join("spec");
    std::fs::create_dir_all(&spec_dir).unwrap();
    std::fs::write(
        spec_dir.join("s.toml"),
        r#"
[events."shop.sold"]
fields = { item = "string", qty = "int", price = "decimal(10,2)" }
[events."shop.counted"]
fields = { item = "string", qty = "string" }
[tables.sales]
primary_key = ["item"]
freshness = "1s"
options = { "merge-engine" = "aggregation", "fields.qty.aggregate-function" = "sum", "fields.revenue.aggregate-function" = "sum" }
[tables.sales.columns]
item = "string"
qty = "int"
revenue = "decimal(20,2)"
half = "decimal(20,4)"
[tables.last_seen]
primary_key = ["item"]
freshness = "1s"
[tables.last_seen.columns]
item = "string"
at_offset = "int"
[[mappings]]
event = "shop.sold"
table = "sales"
when = "price > 0 and not (item == 'gift')"
set = { item = "item", revenue = "price * 2", half = "price / 2" }
[[mappings]]
event = "shop.sold"
table = "last_seen"
set = { item = "item", at_offset = "$event.offset" }
[[mappings]]
event = "shop.counted"
table = "last_seen"
set = { item = "item" }
[[mappings]]
event = "shop.counted"
table = "sales"
set = { item = "qty" }
"#,
    )
    .unwrap();
    let dir = tmp.path().join("d");
    livestate(&dir, &["init", "--spec", spec_dir.to_str().unwrap()]);
    let sql = livestate(&dir, &["export", "flink-sql"]);
    let script = cut(&sql);
    let warehouse = format!("file://{}", dir.join("warehouse").display());
    check_common(&script, &warehouse, "livestate.record");
    let spec = CompanySpec::load_dir(&dir.join("spec")).unwrap();
    let (inserts, comments) = check_mappings(&spec, &script);
    assert_eq!((inserts, comments), (3, 1), "{sql}");

    let note = |i: usize| script.mappings[&i].1.join(" ");
    // `$event.offset` is the Kafka offset of a topic that carries the record on one partition.
    let last_seen = script.mappings[&1].2.as_ref().unwrap();
    assert!(last_seen.contains("CAST(`_e`.`record_offset` AS BIGINT)"), "{last_seen}");
    // `qty` is an int in one event type and a string in the other: left out of the Kafka
    // table's `data`, and every mapping reading it is named.
    assert!(note(3).contains("`qty`") && note(3).contains("int in shop.sold"), "{}", note(3));
    assert!(sql.contains("-- data field `qty` is left out of `data`"), "{sql}");
    // Division is decimal, never integer division; the `when` condition is the WHERE.
    let sold = script.mappings[&0].2.as_ref().unwrap();
    assert!(sold.contains("CAST(`_e`.`data`.`price` AS DECIMAL(38, 18)) / CAST(2 AS BIGINT)"), "{sold}");
    assert!(
        sold.contains("WHERE `_e`.`type` = 'shop.sold' AND (((`_e`.`data`.`price` > CAST(0 AS BIGINT)) AND (NOT (`_e`.`data`.`item` = 'gift'))))"),
        "{sold}"
    );
}

#[test]
fn export_flink_sql_of_a_directory_that_is_not_one_fails_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_livestate"))
        .args(["export", "flink-sql", "--dir"])
        .arg(tmp.path().join("nothing"))
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no partial SQL on failure");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing") && err.contains("not a livestate directory"), "{err}");
}
