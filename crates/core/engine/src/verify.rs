//! `livestate verify`: every stored file of a directory checked against its checksums or its
//! metadata, each damaged or missing file named.

use std::path::Path;

use livestate_lsm::TableCheck;
use livestate_record::{FilesCheck, RecordCheck};
use paimon::catalog::Identifier;

use crate::error::EngineError;
use crate::layout::{Layout, WriteLock};
use crate::schema::{ARCHIVE_TABLE, RECORD_DB, STATE_DB};
use crate::{load_spec, open_catalog};

/// What checking a directory found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerifyReport {
    /// The record: every table file block by block, every event decoded, the id index.
    pub record: RecordCheck,
    /// The other embedded stores (`index`, `boundary`), table file by table file.
    pub stores: Vec<StoreCheck>,
    /// Every state table and `record.events`: every snapshot and tag and the files they need.
    pub tables: Vec<TableCheck>,
}

/// One embedded store other than the record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StoreCheck {
    pub name: String,
    pub path: String,
    #[serde(flatten)]
    pub files: FilesCheck,
}

impl VerifyReport {
    /// Every problem found, each naming a file (or the table or store it concerns).
    pub fn problems(&self) -> Vec<String> {
        let mut out = self.record.problems.clone();
        for s in &self.stores {
            out.extend(s.files.problems.iter().map(ToString::to_string));
        }
        for t in &self.tables {
            out.extend(t.problems.iter().map(|p| format!("{} ({}): {}", p.file, t.table, p.message)));
        }
        out
    }

    pub fn is_clean(&self) -> bool {
        self.record.is_clean()
            && self.stores.iter().all(|s| s.files.problems.is_empty())
            && self.tables.iter().all(|t| t.problems.is_empty())
    }
}

/// Checks everything stored in the directory `dir`: the record (fjall checksums every block:
/// each table file is read block by block, then every event is decoded and the id index
/// cross-checked), the lookup index and the proposal store (block by block), and every
/// Paimon table (each snapshot and tag parses, each manifest list and manifest decodes, each
/// manifest and data file exists with the size its metadata records, each data file's parquet
/// footer counts the rows its metadata records). Nothing is changed.
///
/// Takes the directory's write lock: the embedded stores can be open in one process only.
///
/// # Errors
/// [`EngineError::NotInitialized`], [`EngineError::Locked`], or a spec that does not load.
/// Damage is reported in the result, not as an error.
pub async fn verify(dir: &Path) -> Result<VerifyReport, EngineError> {
    let layout = Layout::new(dir)?;
    if !layout.is_initialized() {
        return Err(EngineError::NotInitialized { dir: layout.dir });
    }
    let _lock = WriteLock::acquire(&layout)?;
    let spec = load_spec(&layout)?;
    let catalog = open_catalog(&layout)?;
    let mut report =
        VerifyReport { record: livestate_record::check_record(&layout.record_dir()), ..Default::default() };
    for (name, path) in [("index", layout.index_dir()), ("boundary", layout.boundary_dir())] {
        if path.is_dir() {
            report.stores.push(StoreCheck {
                name: name.into(),
                path: path.display().to_string(),
                files: livestate_record::check_files(&path),
            });
        }
    }
    let mut tables: Vec<(String, String)> =
        spec.tables.keys().map(|t| (STATE_DB.to_string(), t.clone())).collect();
    tables.push((RECORD_DB.to_string(), ARCHIVE_TABLE.to_string()));
    for (db, name) in tables {
        let full = format!("{db}.{name}");
        let check = match catalog.table(&Identifier::new(db.as_str(), name.as_str())).await {
            Ok(table) => match livestate_lsm::verify_table(&table, &full).await {
                Ok(c) => c,
                Err(e) => TableCheck {
                    table: full.clone(),
                    problems: vec![livestate_lsm::Problem {
                        file: table.location().to_string(),
                        message: e.to_string(),
                    }],
                    ..Default::default()
                },
            },
            Err(e) => TableCheck {
                table: full.clone(),
                problems: vec![livestate_lsm::Problem {
                    file: format!(
                        "{}/{db}.db/{name}",
                        layout
                            .warehouse()
                            .map_or_else(|_| layout.warehouse_dir().display().to_string(), |w| w.uri())
                    ),
                    message: format!("the table does not open (its schema files): {e}"),
                }],
                ..Default::default()
            },
        };
        report.tables.push(check);
    }
    Ok(report)
}

/// `e`, or [`EngineError::Damaged`] when checking `version` of `table` (`None`: the latest
/// snapshot) finds damaged files: the failure of an operation on a table is explained by the
/// files it could not read. Costs nothing unless an operation failed.
pub(crate) async fn diagnose(
    table: &paimon::Table,
    name: &str,
    version: Option<&livestate_lsm::Version>,
    e: EngineError,
) -> EngineError {
    if matches!(
        e,
        EngineError::Damaged { .. } | EngineError::Maintenance(livestate_lsm::LsmError::Damaged { .. })
    ) {
        return e;
    }
    let problems = livestate_lsm::check_version(table, name, version).await;
    if problems.is_empty() {
        e
    } else {
        EngineError::Damaged { table: name.to_string(), problems, cause: Box::new(e) }
    }
}
