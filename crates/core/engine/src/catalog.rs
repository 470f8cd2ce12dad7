//! The warehouse's Paimon catalog, and the file I/O its tables are opened with.

use paimon::catalog::Identifier;
use paimon::io::FileIO;
use paimon::table::SchemaManager;
use paimon::{Catalog as _, FileSystemCatalog, Table};

use crate::error::{paimon_err, EngineError};
use crate::local_io;
use crate::warehouse::Warehouse;

/// A warehouse's Paimon filesystem catalog. Tables of a local warehouse are opened, and their
/// schemas read, with one shared file I/O over [`local_io`]'s operator (reads sized to the files
/// they read); tables on object storage with the catalog's own.
pub struct Catalog {
    paimon: FileSystemCatalog,
    /// The local warehouse's directory and the file I/O of its tables.
    local: Option<(String, FileIO)>,
}

impl Catalog {
    /// Opens the catalog of `warehouse`.
    ///
    /// # Errors
    /// [`EngineError::Paimon`] for a configuration the `paimon` crate refuses.
    pub fn open(warehouse: &Warehouse) -> Result<Catalog, EngineError> {
        let options = warehouse.catalog_options();
        let uri = warehouse.uri();
        let local = match warehouse {
            Warehouse::S3(_) => None,
            Warehouse::Local(_) => {
                let op =
                    local_io::operator().map_err(|e| paimon_err("warehouse", "open catalog")(e.into()))?;
                let io = FileIO::from_path(&uri)
                    .and_then(|b| b.with_props(options.to_map().iter()).with_fs_operator(op).build())
                    .map_err(paimon_err("warehouse", "open catalog"))?;
                Some((uri.trim_end_matches('/').to_string(), io))
            }
        };
        let paimon = FileSystemCatalog::new(options).map_err(paimon_err("warehouse", "open catalog"))?;
        Ok(Catalog { paimon, local })
    }

    /// The `paimon` crate's catalog (databases, table creation; tables on object storage).
    pub fn paimon(&self) -> &FileSystemCatalog {
        &self.paimon
    }

    /// Opens a table of the catalog at its latest schema.
    ///
    /// # Errors
    /// The `paimon` crate's: [`paimon::Error::TableNotExist`], or a schema it cannot read.
    pub async fn table(&self, identifier: &Identifier) -> paimon::Result<Table> {
        let Some((warehouse, io)) = &self.local else {
            return self.paimon.get_table(identifier).await;
        };
        // Paimon's filesystem layout: `<warehouse>/<database>.db/<table>/schema/schema-<id>`.
        let location = format!("{warehouse}/{}.db/{}", identifier.database(), identifier.object());
        let schema = SchemaManager::new(io.clone(), location.clone())
            .latest()
            .await?
            .ok_or_else(|| paimon::Error::TableNotExist { full_name: identifier.full_name() })?;
        Ok(Table::new(io.clone(), identifier.clone(), location, (*schema).clone(), None))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::schema::{archive_schema, ARCHIVE_TABLE, RECORD_DB};

    #[tokio::test]
    async fn a_local_table_opens_where_and_as_the_paimon_catalog_opens_it_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(&Warehouse::Local(dir.path().join("warehouse"))).unwrap();
        catalog.paimon().create_database(RECORD_DB, true, HashMap::new()).await.unwrap();
        let id = Identifier::new(RECORD_DB, ARCHIVE_TABLE);
        catalog.paimon().create_table(&id, archive_schema().unwrap(), true).await.unwrap();

        let ours = catalog.table(&id).await.unwrap();
        let theirs = catalog.paimon().get_table(&id).await.unwrap();
        assert_eq!(ours.location(), theirs.location());
        assert_eq!(ours.schema().id(), theirs.schema().id());
        assert_eq!(ours.schema().fields(), theirs.schema().fields());

        let missing = Identifier::new(RECORD_DB, "no_such_table");
        match catalog.table(&missing).await {
            Err(paimon::Error::TableNotExist { full_name }) => assert_eq!(full_name, "record.no_such_table"),
            other => panic!("expected TableNotExist, got {:?}", other.map(|t| t.location().to_string())),
        }
    }
}
