//! The front door for reads. Every reader of state tables (the server's routes, the CLI's
//! `read`/`tables`/`sql`, the SQL crate, the benchmark) goes through a [`Reader`], so none of
//! them passes the catalog, the spec, the lag source and the lookup index around piecemeal.
//!
//! Two processes read: the one that derives the tables ([`crate::Livestate::reader`]: lag
//! measured against its own record, keys answered by its lookup index) and one that only reads
//! a directory another process writes ([`SharedRead::reader`]: the warehouse's files, lag from
//! the status file the writer leaves).

use super::*;

/// Read access to a directory's state tables; see the module documentation.
#[derive(Clone)]
pub struct Reader<'a> {
    catalog: &'a Catalog,
    spec: &'a CompanySpec,
    lag: LagSource<'a>,
    index: Option<&'a Index>,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(
        catalog: &'a Catalog,
        spec: &'a CompanySpec,
        lag: LagSource<'a>,
        index: Option<&'a Index>,
    ) -> Reader<'a> {
        Reader { catalog, spec, lag, index }
    }

    /// The same reader answering from the tables' files only (what another reader of the
    /// warehouse sees), never from the lookup index.
    #[must_use]
    pub fn without_index(self) -> Reader<'a> {
        Reader { index: None, ..self }
    }

    pub fn spec(&self) -> &'a CompanySpec {
        self.spec
    }

    /// The Paimon table of the state table `name`, for engines that register tables themselves
    /// (SQL). Reading it is the caller's; livestate writes only through its derivers.
    ///
    /// # Errors
    /// [`EngineError::UnknownTable`], or Paimon errors opening it.
    pub async fn table(&self, name: &str) -> Result<Table, EngineError> {
        get_table(self.catalog, self.spec, name).await.map(|(t, _)| t)
    }

    /// Rows of a state table as `req` asks, with a receipt (see [`read()`]).
    ///
    /// # Errors
    /// As [`read()`].
    pub async fn read(&self, req: &ReadRequest) -> Result<Rows, EngineError> {
        read(self.catalog, self.spec, req, &self.lag, self.index).await
    }

    /// Every row of `table` as of `at`, from its files, as Arrow batches with a receipt (see
    /// [`scan_batches`]).
    ///
    /// # Errors
    /// As [`scan_batches`].
    pub async fn scan_batches(&self, table: &str, at: &At) -> Result<Batches, EngineError> {
        scan_batches(self.catalog, self.spec, table, at, &self.lag).await
    }

    /// As [`Reader::read`], keeping only the rows `condition` holds for (see [`read_where`]).
    ///
    /// # Errors
    /// As [`read_where`].
    pub async fn read_where(&self, req: &ReadRequest, condition: Option<&Expr>) -> Result<Rows, EngineError> {
        read_where(self.catalog, self.spec, req, condition, &self.lag, self.index).await
    }

    /// The receipt a read of `table` at `at` would carry, without its rows.
    ///
    /// # Errors
    /// As [`receipt`].
    pub async fn receipt(&self, table: &str, at: &At) -> Result<Receipt, EngineError> {
        receipt(self.catalog, self.spec, table, at, &self.lag).await
    }

    /// Health of every state table (see [`tables`]).
    ///
    /// # Errors
    /// As [`tables`].
    pub async fn tables(
        &self,
        maintainers: Option<&HashMap<String, livestate_lsm::Maintainer>>,
    ) -> Result<Vec<TableInfo>, EngineError> {
        tables(self.catalog, self.spec, &self.lag, maintainers).await
    }

    /// Every row of the `record.events` archive, in offset order.
    ///
    /// # Errors
    /// As [`archive_rows`].
    pub async fn archive_rows(&self) -> Result<Vec<Vec<Value>>, EngineError> {
        archive_rows(self.catalog).await
    }
}

/// What a process that does not own a directory reads it with: the spec, the warehouse and the
/// status file the owning process last wrote.
pub struct SharedRead {
    spec: CompanySpec,
    catalog: Catalog,
    status: Option<std::sync::Arc<Status>>,
}

impl SharedRead {
    /// Opens `layout`'s spec and warehouse for reading, without the write lock.
    ///
    /// # Errors
    /// The spec or the warehouse cannot be opened.
    pub fn open(layout: &crate::Layout) -> Result<SharedRead, EngineError> {
        Ok(SharedRead {
            spec: crate::load_spec(layout)?,
            catalog: crate::open_catalog(layout)?,
            status: Status::load(layout).map(std::sync::Arc::new),
        })
    }

    pub fn reader(&self) -> Reader<'_> {
        Reader::new(&self.catalog, &self.spec, LagSource::Status(self.status.clone()), None)
    }
}
