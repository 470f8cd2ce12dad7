//! Java Paimon readers (Flink, Spark, Trino) map the columns of the files livestate writes
//! correctly.
//!
//! No Java runs here: no Java Paimon jars are available offline. Instead the test checks, file by
//! file, the rule the Java reader applies, as read in apache/paimon (releases 1.0 to 2.0):
//!
//! - `paimon-core/src/main/java/org/apache/paimon/io/KeyValueFileReaderFactory.java`:
//!   `Builder#formatReaderMappingBuilder` asks for `_KEY_<k>..., _SEQUENCE_NUMBER, _VALUE_KIND,
//!   <columns>` (`KeyValue.createKeyValueFields`), and `createRecordReader` decodes the rows
//!   with `KeyValueDataFileRecordReader` in that order.
//! - `paimon-core/src/main/java/org/apache/paimon/utils/FormatReaderMapping.java`:
//!   `Builder#build` then calls `trimKeyFields`, which maps every `_KEY_<k>` (field id
//!   `SpecialFields.KEY_FIELD_ID_START` + id of `k`) to the value column with the id of `k`, so
//!   the file is asked only for `_SEQUENCE_NUMBER`, `_VALUE_KIND` and the table's columns; a
//!   key whose id has no column fails ("Can't find field with id").
//! - `paimon-format/src/main/java/org/apache/paimon/format/parquet/ParquetReaderFactory.java`:
//!   `clipParquetSchema` finds those columns in the parquet file **by name**; a missing one is
//!   read as null (a warning only), which is why every asked-for name must be in every file.
//! - `paimon-api/src/main/java/org/apache/paimon/CoreOptions.java`: `DATA_FILE_THIN_MODE`
//!   (`data-file.thin-mode`, default false) is read only by writers
//!   (`KeyValueFileWriterFactory.FileWriterContextFactory`); with it true, Java writes the same
//!   layout as livestate (`KeyValueThinDataFileWriterImpl`), so the option must say true.
//!
//! Readers before Java Paimon 1.0 (no `trimKeyFields`, apache/paimon#4651) would ask the file
//! for `_KEY_<k>` and get nulls: they cannot read these tables, which the test also pins down.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{derive, fresh, line};
use parquet::file::reader::{FileReader, SerializedFileReader};
use serde_json::{json, Value};

/// `SpecialFields.KEY_FIELD_ID_START` in Java Paimon (`Integer.MAX_VALUE / 2`).
const KEY_FIELD_ID_START: i64 = (i32::MAX / 2) as i64;

/// A column of a Paimon schema file or a parquet file: name and field id.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Column {
    name: String,
    id: Option<i64>,
}

/// The latest schema file of a table directory, as JSON.
fn latest_schema(table_dir: &Path) -> Value {
    let dir = table_dir.join("schema");
    let latest = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("schema-")?.parse::<u64>().ok())
        .max()
        .unwrap_or_else(|| panic!("no schema file in {}", dir.display()));
    serde_json::from_slice(&std::fs::read(dir.join(format!("schema-{latest}"))).unwrap()).unwrap()
}

/// Every parquet file under the table's bucket (and partition) directories.
fn parquet_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() && !["schema", "snapshot", "manifest", "tag", "index"].contains(&name.as_str()) {
            parquet_files(&p, out);
        } else if name.ends_with(".parquet") {
            out.push(p);
        }
    }
}

fn physical_columns(file: &Path) -> Vec<Column> {
    let reader = SerializedFileReader::new(std::fs::File::open(file).unwrap()).unwrap();
    let schema = reader.metadata().file_metadata().schema_descr().root_schema().clone();
    schema
        .get_fields()
        .iter()
        .map(|f| {
            let info = f.get_basic_info();
            Column { name: f.name().to_string(), id: info.has_id().then(|| i64::from(info.id())) }
        })
        .collect()
}

/// The names Java Paimon (1.0+) asks a key-value data file for: `_KEY_` fields trimmed onto
/// the value columns with the same id (`FormatReaderMapping.Builder#trimKeyFields`), then
/// `_SEQUENCE_NUMBER`, `_VALUE_KIND` and the value columns, each once.
fn java_read_names(fields: &[Column], primary_key: &[String]) -> Vec<String> {
    let by_id: BTreeMap<i64, &str> = fields.iter().map(|c| (c.id.unwrap(), c.name.as_str())).collect();
    let mut asked: Vec<(String, i64)> = primary_key
        .iter()
        .map(|k| {
            let id = fields.iter().find(|c| &c.name == k).unwrap().id.unwrap();
            (format!("_KEY_{k}"), KEY_FIELD_ID_START + id)
        })
        .collect();
    asked.push(("_SEQUENCE_NUMBER".into(), i64::from(i32::MAX - 1)));
    asked.push(("_VALUE_KIND".into(), i64::from(i32::MAX - 2)));
    asked.extend(fields.iter().map(|c| (c.name.clone(), c.id.unwrap())));
    let mut out: Vec<String> = Vec::new();
    for (name, id) in asked {
        let target = if name.starts_with("_KEY_") {
            let value_id = id - KEY_FIELD_ID_START;
            by_id
                .get(&value_id)
                .unwrap_or_else(|| panic!("Java: can't find field with id {value_id} for {name}"))
                .to_string()
        } else {
            name
        };
        if !out.contains(&target) {
            out.push(target);
        }
    }
    out
}

#[tokio::test]
async fn java_readers_map_every_data_and_changelog_file_of_every_table() {
    let (_tmp, ls) = fresh().await;
    let events = [
        line(1, "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 40})),
        line(2, "commerce.reservation_changed", json!({"item": "bolt", "location": "north", "reserved": 4})),
        line(
            3,
            "commerce.order_placed",
            json!({"order_id": "so-1", "line": 1, "customer": "c1", "item": "bolt", "location": "north", "qty": 3, "unit_price": "2.50"}),
        ),
        line(
            4,
            "commerce.order_placed",
            json!({"order_id": "so-2", "line": 1, "customer": "c2", "item": "nut", "location": "east", "qty": 1, "unit_price": "0.10"}),
        ),
        line(5, "operations.job_status_changed", json!({"job_id": "j1", "status": "released"})),
        line(6, "procurement.supplier_risk_assessed", json!({"supplier": "acme", "level": "low"})),
        line(
            7,
            "procurement.supplier_item_listed",
            json!({"supplier": "acme", "item": "bolt", "pack_size": 10, "unit_price": "1.00", "lead_time_days": 3}),
        ),
        line(
            8,
            "decisions.proposal_created",
            json!({"proposal_id": "p1", "kind": "k", "agent": "a", "module": "procurement", "summary": "s", "risk_level": "low", "document": "{}"}),
        ),
    ];
    ls.emit(&events.join("\n"), false).unwrap();
    derive(&ls).await;
    // A second commit with a delete, then a full compaction: files from the `paimon` crate's
    // writer and from livestate's own compaction (livestate-lsm) are both checked.
    let more = [
        line(
            9,
            "commerce.order_shipped",
            json!({"order_id": "so-1", "line": 1, "item": "bolt", "location": "north", "qty": 3}),
        ),
        line(10, "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 37})),
        line(
            11,
            "operations.job_status_changed",
            json!({"job_id": "j1", "status": "blocked", "block_reason": "no steel"}),
        ),
    ];
    ls.emit(&more.join("\n"), false).unwrap();
    derive(&ls).await;
    for t in ["stock", "open_orders", "item_first_seen"] {
        let m = ls.maintainer(t).await.unwrap();
        let report = m.compact(livestate_lsm::CompactMode::Full, |_, _| {}).await.unwrap();
        assert!(report.snapshot_id.is_some(), "{t}: the full compaction committed");
    }

    let warehouse = ls.layout().warehouse_dir();
    let mut checked_files = 0;
    for (name, spec) in &ls.spec().tables {
        let dir = warehouse.join("state.db").join(name);
        let schema = latest_schema(&dir);
        assert_eq!(
            schema["options"]["data-file.thin-mode"], "true",
            "{name}: the options must say the files have no _KEY_ columns: {}",
            schema["options"]
        );
        let fields: Vec<Column> = schema["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| Column { name: f["name"].as_str().unwrap().into(), id: f["id"].as_i64() })
            .collect();
        let primary_key: Vec<String> =
            schema["primaryKeys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().into()).collect();
        assert_eq!(primary_key, spec.primary_key, "{name}");
        let asked = java_read_names(&fields, &primary_key);

        let mut files = Vec::new();
        parquet_files(&dir, &mut files);
        assert!(files.len() >= 2, "{name}: a data file and a changelog file at least, found {files:?}");
        for file in &files {
            let physical = physical_columns(file);
            let names: Vec<&str> = physical.iter().map(|c| c.name.as_str()).collect();
            // The thin layout: no key copies, system columns first, then the table's columns.
            let mut expected = vec!["_SEQUENCE_NUMBER", "_VALUE_KIND"];
            expected.extend(fields.iter().map(|c| c.name.as_str()));
            assert_eq!(names, expected, "{}", file.display());
            // Every name Java asks for is in the file (a missing one would read as null) ...
            for n in &asked {
                assert!(names.contains(&n.as_str()), "{}: Java asks for `{n}`", file.display());
            }
            // ... and the table's columns carry the schema's field ids, through which Java
            // matched the trimmed keys to them.
            for c in &physical[2..] {
                let declared = fields.iter().find(|f| f.name == c.name).unwrap();
                assert_eq!(c.id, declared.id, "{}: field id of `{}`", file.display(), c.name);
            }
            // A pre-1.0 reader would ask for the key copies by name and read nulls.
            for k in &primary_key {
                assert!(!names.contains(&format!("_KEY_{k}").as_str()), "{}", file.display());
            }
            checked_files += 1;
        }
    }
    assert!(checked_files >= 2 * ls.spec().tables.len(), "checked {checked_files} files");

    // The archive is an append table: its files are just its columns, and thin mode (a
    // primary-key option) is not set on it.
    let archive = warehouse.join("record.db").join("events");
    let schema = latest_schema(&archive);
    assert!(schema["options"].get("data-file.thin-mode").is_none(), "{}", schema["options"]);
    let columns: Vec<&str> =
        schema["fields"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    let mut files = Vec::new();
    parquet_files(&archive, &mut files);
    assert!(!files.is_empty());
    for file in &files {
        let names: Vec<String> = physical_columns(file).into_iter().map(|c| c.name).collect();
        assert_eq!(names, columns, "{}", file.display());
    }
}

#[tokio::test]
async fn a_spec_cannot_claim_files_with_key_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("spec");
    std::fs::create_dir_all(&spec).unwrap();
    std::fs::write(
        spec.join("t.toml"),
        r#"
[tables.t]
primary_key = ["k"]
freshness = "1s"
options = { "data-file.thin-mode" = "false" }
[tables.t.columns]
k = "string"
"#,
    )
    .unwrap();
    let err = match livestate_engine::Livestate::init(&tmp.path().join("d"), &spec).await {
        Ok(_) => panic!("a spec with data-file.thin-mode = false was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("data-file.thin-mode") && err.contains("_KEY_"), "{err}");
    assert!(!tmp.path().join("d").join("warehouse").exists(), "nothing is created");
}
