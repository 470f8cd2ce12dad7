//! Paimon schemas for state tables and the record archive.

use livestate_spec::options::THIN_MODE_OPTION;
use livestate_spec::{MergeEngine, TableSpec, ValueType};
use paimon::spec::{
    BigIntType, BooleanType, DataType, DecimalType, Schema, Snapshot, TimestampType, VarCharType,
};
use paimon::Table;

/// Database holding the state tables.
pub const STATE_DB: &str = "state";
/// Database holding the record archive.
pub const RECORD_DB: &str = "record";
/// The archive table's name inside [`RECORD_DB`].
pub const ARCHIVE_TABLE: &str = "events";
/// A table of the warehouse: a state table in [`STATE_DB`] or the archive in [`RECORD_DB`].
/// Its text (`state.stock`, `record.events`) is how errors, receipts, the status file and
/// maintainers name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableId(paimon::catalog::Identifier);

impl TableId {
    /// The state table `name` (as the spec names it).
    pub fn state(name: &str) -> TableId {
        TableId(paimon::catalog::Identifier::new(STATE_DB, name))
    }

    /// The `record.events` archive.
    pub fn archive() -> TableId {
        TableId(paimon::catalog::Identifier::new(RECORD_DB, ARCHIVE_TABLE))
    }

    /// The table as the catalog names it.
    pub fn identifier(&self) -> &paimon::catalog::Identifier {
        &self.0
    }

    /// Its text, `database.table`.
    pub fn full_name(&self) -> String {
        self.to_string()
    }
}

impl std::fmt::Display for TableId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0.database(), self.0.object())
    }
}

/// Commit user of every snapshot livestate writes; its commit identifier is a record offset.
pub const COMMIT_USER: &str = "livestate";

/// The Paimon type of a livestate value type.
///
/// # Errors
/// Only for a decimal precision Paimon rejects (the spec checks it first).
pub fn paimon_type(ty: ValueType) -> paimon::Result<DataType> {
    Ok(match ty {
        ValueType::String => DataType::VarChar(VarCharType::string_type()),
        ValueType::Int => DataType::BigInt(BigIntType::new()),
        ValueType::Decimal { precision, scale } => {
            DataType::Decimal(DecimalType::new(u32::from(precision), u32::from(scale))?)
        }
        ValueType::Bool => DataType::Boolean(BooleanType::new()),
        ValueType::Timestamp => DataType::Timestamp(TimestampType::new(3)?),
    })
}

/// The Paimon schema of a state table: its columns, primary key and options, verbatim, plus
/// the options that describe how livestate writes it (`changelog-producer`, and
/// `data-file.thin-mode` = `true`).
///
/// Why thin mode is stated: the `paimon` crate (0.4.0, `table/kv_file_writer.rs`) and
/// livestate's compaction (`livestate-lsm` `kvfile`) write primary-key data files as
/// `_SEQUENCE_NUMBER, _VALUE_KIND, <columns>`, without the `_KEY_<k>` copies of the key that
/// Java Paimon writes by default. Java readers since 1.0 never read `_KEY_` columns
/// (`FormatReaderMapping.Builder#trimKeyFields` maps each `_KEY_<k>` to the value column with
/// the same field id), so they read these files whatever the option says; the option matters to
/// Java *writers* (`KeyValueFileWriterFactory.FileWriterContextFactory`:
/// `options.dataFileThinMode() && supportsThinMode(..)` picks `KeyValueThinDataFileWriterImpl`),
/// so a Flink or Spark job writing or compacting the same table keeps the one layout. See
/// docs/scale-out.md.
///
/// # Errors
/// When Paimon's own schema checks reject the table.
pub fn state_schema(spec: &TableSpec) -> paimon::Result<Schema> {
    let mut b = Schema::builder();
    for (name, ty) in &spec.columns {
        b = b.column(name.clone(), paimon_type(*ty)?);
    }
    b = b.primary_key(spec.primary_key.clone());
    for (k, v) in &spec.options {
        b = b.option(k.clone(), v.clone());
    }
    if !spec.options.contains_key("changelog-producer") {
        // livestate writes every change with its before and after as changelog files in the
        // commit; readers find them where `input` puts them (APPEND snapshots). Paimon allows
        // first-row tables only `lookup`, whose changelog pypaimon also reads from every
        // snapshot (Java's streaming source reads it from COMPACT snapshots only).
        let producer = if spec.merge_engine == MergeEngine::FirstRow { "lookup" } else { "input" };
        b = b.option("changelog-producer", producer);
    }
    if !spec.options.contains_key(THIN_MODE_OPTION) {
        b = b.option(THIN_MODE_OPTION, "true");
    }
    b.comment(spec.description.clone()).build()
}

/// Columns of `record.events`, in order.
pub const ARCHIVE_COLUMNS: [(&str, ValueType); 9] = [
    ("event_offset", ValueType::Int),
    ("id", ValueType::String),
    ("type", ValueType::String),
    ("module", ValueType::String),
    ("occurred_at", ValueType::Timestamp),
    ("recorded_at", ValueType::Timestamp),
    ("causation", ValueType::String),
    ("data", ValueType::String),
    ("day", ValueType::String),
];

/// The append-only archive of the record, partitioned by the UTC day the event was recorded.
///
/// # Errors
/// Never in practice; Paimon's schema checks run here.
pub fn archive_schema() -> paimon::Result<Schema> {
    let mut b = Schema::builder();
    for (name, ty) in ARCHIVE_COLUMNS {
        b = b.column(name, paimon_type(ty)?);
    }
    b.partition_keys(["day"])
        .comment(Some("Every event livestate recorded, in offset order (append-only).".into()))
        .build()
}

/// The latest snapshot written by livestate (its deriver or its compaction, which carries the
/// deriver's identifier forward), scanning back past snapshots of other writers.
///
/// # Errors
/// Paimon I/O errors.
pub async fn latest_own_snapshot(table: &Table) -> paimon::Result<Option<Snapshot>> {
    let sm = table.snapshot_manager();
    let Some(latest) = sm.get_latest_snapshot_id().await? else {
        return Ok(None);
    };
    // Newest first; the first missing snapshot is the expired past.
    for id in (1..=latest).rev() {
        match sm.get_snapshot(id).await {
            Ok(s) if s.commit_user() == COMMIT_USER || s.commit_user() == livestate_lsm::COMPACT_USER => {
                return Ok(Some(s))
            }
            Ok(_) => {}
            Err(paimon::Error::SnapshotNotExist { .. }) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}
