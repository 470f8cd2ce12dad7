//! The lookup index: every state table's current row per primary key, in an embedded store
//! (`D/index/`), kept exactly at the table's last commit.
//!
//! The deriver merges each row operation into the key's current row with the table's merge
//! engine ([`livestate_spec::Merger`]), so after a commit the index holds what a full Paimon
//! read of that snapshot returns. Each table's entry in `meta` says which commit identifier
//! (record offset) the index reflects; a table whose index does not match its latest
//! livestate snapshot is rebuilt from Paimon when the derivers open.
//!
//! Keys are the primary-key values as a JSON array; rows are the full row as a JSON array.

use std::collections::HashMap;
use std::path::Path;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use livestate_spec::{CompanySpec, Value, ValueType};
use serde::{Deserialize, Serialize};

use crate::error::EngineError;

/// Which commit a table's index reflects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexMeta {
    /// Commit identifier (record offset) of the snapshot reflected.
    pub identifier: u64,
    pub snapshot_id: Option<i64>,
}

struct TableIndex {
    rows: Keyspace,
    types: Vec<ValueType>,
    key_idx: Vec<usize>,
}

/// The lookup index of a data directory.
pub struct Index {
    db: Database,
    meta: Keyspace,
    tables: HashMap<String, TableIndex>,
}

fn store_err(table: &str) -> impl Fn(fjall::Error) -> EngineError + '_ {
    move |e| EngineError::Index { table: table.to_string(), message: e.to_string() }
}

impl Index {
    /// Opens (creating if needed) the index in `path` for the tables of `spec`.
    ///
    /// # Errors
    /// The store cannot be opened.
    pub fn open(path: &Path, spec: &CompanySpec) -> Result<Index, EngineError> {
        let db = Database::builder(path).open().map_err(store_err("(index)"))?;
        let meta = db.keyspace("meta", KeyspaceCreateOptions::default).map_err(store_err("(index)"))?;
        let mut tables = HashMap::new();
        for t in spec.tables.values() {
            let rows = db
                .keyspace(&format!("t.{}", t.name), KeyspaceCreateOptions::default)
                .map_err(store_err(&t.name))?;
            let key_idx =
                t.primary_key.iter().map(|k| t.columns.get_index_of(k).expect("key column")).collect();
            tables.insert(
                t.name.clone(),
                TableIndex { rows, types: t.columns.values().copied().collect(), key_idx },
            );
        }
        Ok(Index { db, meta, tables })
    }

    fn table(&self, name: &str) -> Result<&TableIndex, EngineError> {
        self.tables
            .get(name)
            .ok_or_else(|| EngineError::Index { table: name.into(), message: "not indexed".into() })
    }

    /// The index key of a full-width row of `table`.
    ///
    /// # Errors
    /// An unknown table.
    pub fn key_of(&self, table: &str, row: &[Value]) -> Result<Vec<u8>, EngineError> {
        let t = self.table(table)?;
        Ok(key_bytes(t.key_idx.iter().map(|&i| &row[i])))
    }

    /// The current row of `key` in `table`.
    ///
    /// # Errors
    /// Store errors, or a stored row that does not decode.
    pub fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<Value>>, EngineError> {
        let t = self.table(table)?;
        match t.rows.get(key).map_err(store_err(table))? {
            None => Ok(None),
            Some(bytes) => decode_row(table, &t.types, &bytes).map(Some),
        }
    }

    /// Which commit `table`'s index reflects, if any.
    ///
    /// # Errors
    /// Store errors.
    pub fn meta(&self, table: &str) -> Result<Option<IndexMeta>, EngineError> {
        match self.meta.get(table.as_bytes()).map_err(store_err(table))? {
            None => Ok(None),
            Some(b) => Ok(serde_json::from_slice(&b).ok()),
        }
    }

    /// Applies one commit's changes (key → new row, or `None` for removed) and records `meta`,
    /// atomically.
    ///
    /// # Errors
    /// Store errors.
    pub fn apply<'a>(
        &self,
        table: &str,
        changes: impl IntoIterator<Item = (&'a [u8], Option<&'a [Value]>)>,
        meta: IndexMeta,
    ) -> Result<(), EngineError> {
        let t = self.table(table)?;
        let mut batch = self.db.batch();
        for (key, row) in changes {
            match row {
                Some(r) => batch.insert(&t.rows, key, encode_row(r)),
                None => batch.remove(&t.rows, key),
            }
        }
        batch.insert(&self.meta, table.as_bytes(), serde_json::to_vec(&meta).expect("meta encodes"));
        batch.commit().map_err(store_err(table))?;
        self.db.persist(PersistMode::Buffer).map_err(store_err(table))?;
        Ok(())
    }

    /// Replaces `table`'s index with `rows` (as read from Paimon) reflecting `meta`.
    ///
    /// # Errors
    /// Store errors.
    pub fn rebuild(&self, table: &str, rows: &[Vec<Value>], meta: IndexMeta) -> Result<(), EngineError> {
        let t = self.table(table)?;
        let mut batch = self.db.batch();
        for kv in t.rows.iter() {
            let k = kv.key().map_err(store_err(table))?;
            batch.remove(&t.rows, k);
        }
        batch.commit().map_err(store_err(table))?;
        let keyed: Vec<(Vec<u8>, &Vec<Value>)> =
            rows.iter().map(|r| (key_bytes(t.key_idx.iter().map(|&i| &r[i])), r)).collect();
        self.apply(table, keyed.iter().map(|(k, r)| (k.as_slice(), Some(r.as_slice()))), meta)
    }

    /// Every row indexed for `table`, in key-byte order.
    ///
    /// # Errors
    /// Store errors, or a stored row that does not decode.
    pub fn rows(&self, table: &str) -> Result<Vec<Vec<Value>>, EngineError> {
        let t = self.table(table)?;
        let mut out = Vec::new();
        for kv in t.rows.iter() {
            let (_, v) = kv.into_inner().map_err(store_err(table))?;
            out.push(decode_row(table, &t.types, &v)?);
        }
        Ok(out)
    }

    /// Number of rows indexed for `table`.
    ///
    /// # Errors
    /// Store errors.
    pub fn len(&self, table: &str) -> Result<usize, EngineError> {
        let t = self.table(table)?;
        Ok(t.rows.iter().count())
    }
}

/// Key bytes of key values in key order.
pub fn key_bytes<'a>(values: impl Iterator<Item = &'a Value>) -> Vec<u8> {
    let json: Vec<serde_json::Value> = values.map(Value::to_json).collect();
    serde_json::to_vec(&json).expect("values encode")
}

fn encode_row(row: &[Value]) -> Vec<u8> {
    let json: Vec<serde_json::Value> = row.iter().map(Value::to_json).collect();
    serde_json::to_vec(&json).expect("values encode")
}

fn decode_row(table: &str, types: &[ValueType], bytes: &[u8]) -> Result<Vec<Value>, EngineError> {
    let bad = |m: String| EngineError::Index {
        table: table.into(),
        message: format!("stored row does not decode: {m}"),
    };
    let json: Vec<serde_json::Value> = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    if json.len() != types.len() {
        return Err(bad(format!("{} values for {} columns", json.len(), types.len())));
    }
    json.iter().zip(types).map(|(j, t)| Value::from_json(j, *t).map_err(bad)).collect()
}
