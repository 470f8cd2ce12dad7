//! The lookup index: every state table's current row per primary key, in an embedded store
//! (`D/index/`), kept exactly at the table's last commit.
//!
//! The deriver merges each row operation into the key's current row with the table's merge
//! engine ([`livestate_spec::Merger`]), so after a commit the index holds what a full Paimon
//! read of that snapshot returns. Each table's entry in `meta` says which commit identifier
//! (record offset) the index reflects; a table whose index does not match its latest
//! livestate snapshot is rebuilt from Paimon when the derivers open.
//!
//! Keys are the primary-key values as a JSON array; rows are the full row in the binary
//! encoding of [`crate::index_row`] (JSON arrays in rows an older livestate stored).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use livestate_spec::{CompanySpec, Value, ValueType};
use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::index_row::{self, Needle};
use crate::triggers::{Effects, Firing};

/// Which commit a table's index reflects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexMeta {
    /// Commit identifier (record offset) of the snapshot reflected.
    pub identifier: u64,
    pub snapshot_id: Option<i64>,
    /// When that snapshot was committed (ms since the epoch); lets a latest read take its
    /// receipt from here instead of from Paimon. Absent in indexes written before it existed
    /// and after a rebuild, until the next commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed_at_ms: Option<i64>,
}

struct TableIndex {
    rows: Keyspace,
    types: Vec<ValueType>,
    key_idx: Vec<usize>,
    /// The table's entry of `meta`, held in memory: every read of the index asks for it, and
    /// a store read plus a JSON decode was a tenth of a point read. Loaded when the index opens
    /// and set wherever the entry is written, after the write and, for a commit's batch,
    /// before its `Applying` mark ends, so a read checked by [`IndexView::unchanged`] never
    /// pairs rows with a meta of another commit.
    meta: std::sync::RwLock<Option<IndexMeta>>,
}

impl TableIndex {
    fn meta(&self) -> Option<IndexMeta> {
        *self.meta.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn set_meta(&self, meta: Option<IndexMeta>) {
        *self.meta.write().unwrap_or_else(std::sync::PoisonError::into_inner) = meta;
    }
}

fn stored_meta(meta: &Keyspace, table: &str) -> Result<Option<IndexMeta>, EngineError> {
    match meta.get(table.as_bytes()).map_err(store_err(table))? {
        None => Ok(None),
        Some(b) => Ok(serde_json::from_slice(&b).ok()),
    }
}

/// The lookup index of a data directory.
pub struct Index {
    db: Database,
    meta: Keyspace,
    tables: HashMap<String, TableIndex>,
    /// Trigger and key of every disarmed trigger (`trigger 0x00 key`).
    disarmed: Keyspace,
    /// Firings by trigger and sequence (`trigger 0x00 seq`), as JSON.
    firings: Keyspace,
    /// Consumer cursors (`trigger 0x00 consumer` → last acknowledged seq).
    cursors: Keyspace,
    /// Seals every keyspace's memtable for a flush once its writes are a period old.
    flush: livestate_record::memory::PeriodicFlush,
    /// Odd while a commit's batch is being applied, bumped before and after each: a reader
    /// that sees the same even value before and after its reads saw no part of any batch.
    /// Sound with one writer at a time, which the index has (the derive loop).
    applied: AtomicU64,
}

/// Marks a batch being applied to the index from creation to drop (see `Index::applied`).
struct Applying<'a>(&'a AtomicU64);

impl<'a> Applying<'a> {
    fn start(counter: &'a AtomicU64) -> Applying<'a> {
        counter.fetch_add(1, Ordering::SeqCst);
        Applying(counter)
    }
}

impl Drop for Applying<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn pair(a: &str, b: &[u8]) -> Vec<u8> {
    let mut k = a.as_bytes().to_vec();
    k.push(0);
    k.extend_from_slice(b);
    k
}

fn store_err(table: &str) -> impl Fn(fjall::Error) -> EngineError + '_ {
    move |source| EngineError::Index { table: table.to_string(), source }
}

/// Reads of the index checked against the commits applied meanwhile (see [`Index::view`]).
pub struct IndexView<'a> {
    index: &'a Index,
    started: u64,
}

impl IndexView<'_> {
    /// As [`Index::meta`].
    ///
    /// # Errors
    /// Store errors.
    pub fn meta(&self, table: &str) -> Result<Option<IndexMeta>, EngineError> {
        self.index.meta(table)
    }

    /// As [`Index::get`].
    ///
    /// # Errors
    /// Store errors, or a stored row that does not decode.
    pub fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<Value>>, EngineError> {
        self.index.get(table, key)
    }

    /// As [`Index::rows`].
    ///
    /// # Errors
    /// Store errors, or a stored row that does not decode.
    pub fn rows(&self, table: &str) -> Result<Vec<Vec<Value>>, EngineError> {
        self.index.rows(table)
    }

    /// As [`Index::rows_matching`].
    ///
    /// # Errors
    /// Store errors, or a stored row that does not decode.
    pub fn rows_matching<'v>(
        &self,
        table: &str,
        values: impl IntoIterator<Item = &'v Value>,
    ) -> Result<Vec<Vec<Value>>, EngineError> {
        self.index.rows_matching(table, values)
    }

    /// Whether no commit was being applied when the view was taken and none has been applied
    /// since: then everything read through it belongs to the commit its meta names.
    pub fn unchanged(&self) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.started.is_multiple_of(2) && self.index.applied.load(Ordering::SeqCst) == self.started
    }
}

/// Each keyspace flushes its writes to a table file once they hold 2 MiB (fjall's default is
/// 64 MiB, which, over a dozen keyspaces that a busy server writes slowly, held hundreds of MiB
/// that never flushed; see `livestate_record::memory` for what a memtable costs).
fn keyspace_options() -> KeyspaceCreateOptions {
    KeyspaceCreateOptions::default().max_memtable_size(2 * 1024 * 1024)
}

impl Index {
    /// What the index's store holds in memory now (block cache and unflushed writes).
    pub fn memory(&self) -> livestate_record::StoreMemory {
        livestate_record::StoreMemory::of(&self.db)
    }

    /// Opens (creating if needed) the index in `path` for the tables of `spec`.
    ///
    /// # Errors
    /// The store cannot be opened.
    pub fn open(path: &Path, spec: &CompanySpec) -> Result<Index, EngineError> {
        let db = livestate_record::memory::database(path, livestate_record::memory::INDEX_CACHE_BYTES)
            .open()
            .map_err(store_err("(index)"))?;
        let ks = |name: &str| db.keyspace(name, keyspace_options).map_err(store_err("(index)"));
        let (meta, disarmed, firings, cursors) =
            (ks("meta")?, ks("disarmed")?, ks("firings")?, ks("cursors")?);
        let mut tables = HashMap::new();
        // Tables another engine derives are read from Paimon, never from here.
        for t in spec.tables.values().filter(|t| t.derived_here()) {
            let rows = db.keyspace(&format!("t.{}", t.name), keyspace_options).map_err(store_err(&t.name))?;
            let key_idx =
                t.primary_key.iter().map(|k| t.columns.get_index_of(k).expect("key column")).collect();
            let stored = stored_meta(&meta, &t.name)?;
            tables.insert(
                t.name.clone(),
                TableIndex {
                    rows,
                    types: t.columns.values().copied().collect(),
                    key_idx,
                    meta: std::sync::RwLock::new(stored),
                },
            );
        }
        let flush = livestate_record::memory::PeriodicFlush::new(livestate_record::memory::FLUSH_PERIOD);
        Ok(Index { db, meta, tables, disarmed, firings, cursors, flush, applied: AtomicU64::new(0) })
    }

    fn table(&self, name: &str) -> Result<&TableIndex, EngineError> {
        self.tables.get(name).ok_or_else(|| EngineError::IndexCorrupt {
            table: name.into(),
            message: "the index holds no such table".into(),
        })
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
        match self.tables.get(table) {
            Some(t) => Ok(t.meta()),
            // Not indexed here: whatever the store holds (nothing a commit here writes).
            None => stored_meta(&self.meta, table),
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
        self.apply_with(table, changes, meta, &Effects::default())
    }

    /// As [`Index::apply`], with the commit's trigger firings and arming changes in the same
    /// atomic batch.
    ///
    /// # Errors
    /// Store errors.
    pub(crate) fn apply_with<'a>(
        &self,
        table: &str,
        changes: impl IntoIterator<Item = (&'a [u8], Option<&'a [Value]>)>,
        meta: IndexMeta,
        effects: &Effects,
    ) -> Result<(), EngineError> {
        let t = self.table(table)?;
        let mut batch = self.db.batch();
        for f in &effects.firings {
            batch.insert(
                &self.firings,
                pair(&f.trigger, &f.seq.to_be_bytes()),
                serde_json::to_vec(f).expect("firing encodes"),
            );
        }
        for crate::triggers::Arming { trigger, key, armed } in &effects.arming {
            if *armed {
                batch.remove(&self.disarmed, pair(trigger, key));
            } else {
                batch.insert(&self.disarmed, pair(trigger, key), b"");
            }
        }
        for (key, row) in changes {
            match row {
                Some(r) => batch.insert(&t.rows, key, index_row::encode(r)),
                None => batch.remove(&t.rows, key),
            }
        }
        batch.insert(&self.meta, table.as_bytes(), serde_json::to_vec(&meta).expect("meta encodes"));
        {
            let _applying = Applying::start(&self.applied);
            batch.commit().map_err(store_err(table))?;
            t.set_meta(Some(meta));
        }
        let mode = if effects.firings.is_empty() { PersistMode::Buffer } else { PersistMode::SyncAll };
        self.db.persist(mode).map_err(store_err(table))?;
        let keyspaces = [&self.meta, &self.disarmed, &self.firings, &self.cursors];
        // The batch is applied: a failure to seal memtables is only reported (the next write
        // meets the same journal and fails properly).
        if let Err(e) =
            self.flush.after_write(keyspaces.into_iter().chain(self.tables.values().map(|t| &t.rows)))
        {
            tracing::warn!(error = %e, "the lookup index could not seal its memtables for a flush");
        }
        Ok(())
    }

    /// Forgets which commit `table`'s index reflects, durably: until the next
    /// [`Index::apply`] or [`Index::rebuild`], the derivers' recovery rebuilds it from a full
    /// read of the table instead of trusting it (a re-derivation marks it so while it replaces
    /// the table's contents).
    ///
    /// # Errors
    /// Store errors.
    pub(crate) fn forget(&self, table: &str) -> Result<(), EngineError> {
        let t = self.table(table)?;
        {
            let _applying = Applying::start(&self.applied);
            self.meta.remove(table.as_bytes()).map_err(store_err(table))?;
            t.set_meta(None);
        }
        self.db.persist(PersistMode::SyncAll).map_err(store_err(table))
    }

    /// Replaces `table`'s index with `rows` (as read from Paimon) reflecting `meta`.
    ///
    /// # Errors
    /// Store errors.
    pub(crate) fn rebuild(
        &self,
        table: &str,
        rows: &[Vec<Value>],
        meta: IndexMeta,
    ) -> Result<(), EngineError> {
        let t = self.table(table)?;
        let keyed: HashMap<Vec<u8>, &Vec<Value>> =
            rows.iter().map(|r| (key_bytes(t.key_idx.iter().map(|&i| &r[i])), r)).collect();
        // One batch: stale keys out, every row in, and the meta, so a crash leaves the old index.
        let mut batch = self.db.batch();
        for kv in t.rows.iter() {
            let k = kv.key().map_err(store_err(table))?;
            if !keyed.contains_key(k.as_ref()) {
                batch.remove(&t.rows, k);
            }
        }
        for (k, r) in &keyed {
            batch.insert(&t.rows, k.as_slice(), index_row::encode(r));
        }
        batch.insert(&self.meta, table.as_bytes(), serde_json::to_vec(&meta).expect("meta encodes"));
        {
            let _applying = Applying::start(&self.applied);
            batch.commit().map_err(store_err(table))?;
            t.set_meta(Some(meta));
        }
        self.db.persist(PersistMode::Buffer).map_err(store_err(table))
    }

    /// A view for reads that pair rows with the meta they reflect: it reads the index as it
    /// is, and [`IndexView::unchanged`] says afterwards whether no commit was applied meanwhile.
    /// A commit's rows and meta are written in one batch, but a read may see part of a batch
    /// being applied (new rows under the old meta); a fjall snapshot did not prevent it here
    /// (`tests/changes_and_index.rs` caught one mixing two commits).
    pub fn view(&self) -> IndexView<'_> {
        IndexView { index: self, started: self.applied.load(Ordering::SeqCst) }
    }

    /// About how many rows `table` holds, without reading them: the entries of its store's
    /// files and unflushed writes, counting a key written again before compaction merged it
    /// more than once (so at least the number of rows).
    ///
    /// # Errors
    /// An unknown table.
    pub fn approximate_rows(&self, table: &str) -> Result<usize, EngineError> {
        Ok(self.table(table)?.rows.approximate_len())
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

    /// The rows indexed for `table` that may hold every one of `values` in some column, in key
    /// order (the order reads return rows in): a row whose stored bytes do not contain a value's encoding cannot hold it
    /// and is skipped without being decoded. Only strings, integers and booleans narrow the scan
    /// (each has exactly one encoding); the caller still compares the columns it means.
    ///
    /// # Errors
    /// Store errors, or a stored row that does not decode.
    pub fn rows_matching<'v>(
        &self,
        table: &str,
        values: impl IntoIterator<Item = &'v Value>,
    ) -> Result<Vec<Vec<Value>>, EngineError> {
        let needles: Vec<Needle> = values.into_iter().filter_map(Needle::new).collect();
        let t = self.table(table)?;
        let mut stored = Vec::new();
        for kv in t.rows.iter() {
            let (_, v) = kv.into_inner().map_err(store_err(table))?;
            if needles.iter().all(|n| n.found_in(&v)) {
                stored.push(v);
            }
        }
        let mut rows = decode_rows(table, &t.types, &t.key_idx, &stored)?;
        if !rows.sorted {
            rows.rows.sort_by(|a, b| key_order(&t.key_idx, a, b));
        }
        Ok(rows.rows)
    }

    /// Whether `trigger` is armed for `key` (it is until it fires).
    ///
    /// # Errors
    /// Store errors.
    pub fn is_armed(&self, trigger: &str, key: &[u8]) -> Result<bool, EngineError> {
        Ok(!self.disarmed.contains_key(pair(trigger, key)).map_err(store_err(trigger))?)
    }

    /// The sequence number of `trigger`'s latest firing (0 before the first).
    ///
    /// # Errors
    /// Store errors.
    pub fn last_seq(&self, trigger: &str) -> Result<u64, EngineError> {
        match self.firings.prefix(pair(trigger, b"")).next_back() {
            None => Ok(0),
            Some(kv) => {
                let k = kv.key().map_err(store_err(trigger))?;
                Ok(u64::from_be_bytes(k[k.len() - 8..].try_into().expect("8-byte seq")))
            }
        }
    }

    /// The last firing `consumer` acknowledged for `trigger` (0 for none).
    ///
    /// # Errors
    /// Store errors.
    pub fn cursor(&self, trigger: &str, consumer: &str) -> Result<u64, EngineError> {
        Ok(match self.cursors.get(pair(trigger, consumer.as_bytes())).map_err(store_err(trigger))? {
            Some(v) => u64::from_be_bytes(v.as_ref().try_into().unwrap_or([0; 8])),
            None => 0,
        })
    }

    /// Up to `limit` firings of `trigger` after `consumer`'s cursor, oldest first.
    ///
    /// # Errors
    /// Store errors.
    pub fn pending(&self, trigger: &str, consumer: &str, limit: usize) -> Result<Vec<Firing>, EngineError> {
        let from = self.cursor(trigger, consumer)? + 1;
        let mut out = Vec::new();
        for kv in
            self.firings.range(pair(trigger, &from.to_be_bytes())..pair(trigger, &[0xff; 9])).take(limit)
        {
            let (_, v) = kv.into_inner().map_err(store_err(trigger))?;
            out.push(serde_json::from_slice(&v).map_err(|e| EngineError::IndexCorrupt {
                table: trigger.into(),
                message: format!("stored firing does not decode: {e}"),
            })?);
        }
        Ok(out)
    }

    /// Records that `consumer` has handled `trigger`'s firings up to `seq`, durably.
    ///
    /// # Errors
    /// Store errors.
    pub fn ack(&self, trigger: &str, consumer: &str, seq: u64) -> Result<(), EngineError> {
        self.cursors
            .insert(pair(trigger, consumer.as_bytes()), seq.to_be_bytes())
            .map_err(store_err(trigger))?;
        self.db.persist(PersistMode::SyncAll).map_err(store_err(trigger))
    }
}

/// Key bytes of key values in key order.
pub fn key_bytes<'a>(values: impl Iterator<Item = &'a Value>) -> Vec<u8> {
    Value::json_array(values)
}

/// Rows read at once above which [`decode_rows`] decodes on every core.
const PARALLEL_DECODE_ROWS: usize = 8192;

/// Decoded rows, and whether they are in key order.
struct Decoded {
    rows: Vec<Vec<Value>>,
    sorted: bool,
}

/// The order of rows by their key columns, as reads return them.
fn key_order(key_idx: &[usize], a: &[Value], b: &[Value]) -> std::cmp::Ordering {
    key_idx
        .iter()
        .map(|&i| livestate_spec::expr::compare(&a[i], &b[i]).unwrap_or(std::cmp::Ordering::Equal))
        .find(|o| o.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

/// Decodes `stored` rows in order, noting whether their keys are in order while each row is
/// still in cache: the index holds rows in the order of their keys' JSON bytes, which is the
/// keys' order for most keys, and sorting rows afterwards costs a cache miss per row. A long
/// list is decoded in as many contiguous parts as the machine has cores, each on a thread of
/// its own (decoding is most of a full read from the index).
fn decode_rows<B: AsRef<[u8]> + Sync>(
    table: &str,
    types: &[ValueType],
    key_idx: &[usize],
    stored: &[B],
) -> Result<Decoded, EngineError> {
    let decode_part = |part: &[B]| -> Result<Decoded, EngineError> {
        let mut rows: Vec<Vec<Value>> = Vec::with_capacity(part.len());
        let mut sorted = true;
        for v in part {
            let row = decode_row(table, types, v.as_ref())?;
            if let Some(last) = rows.last() {
                sorted &= key_order(key_idx, last, &row).is_le();
            }
            rows.push(row);
        }
        Ok(Decoded { rows, sorted })
    };
    let cores = crate::cores::cores();
    if stored.len() < PARALLEL_DECODE_ROWS || cores < 2 {
        return decode_part(stored);
    }
    let part = stored.len().div_ceil(cores);
    let parts: Vec<Result<Decoded, EngineError>> = std::thread::scope(|s| {
        let handles: Vec<_> = stored.chunks(part).map(|chunk| s.spawn(move || decode_part(chunk))).collect();
        handles.into_iter().map(|h| h.join().expect("decoding a row does not panic")).collect()
    });
    let mut out = Decoded { rows: Vec::with_capacity(stored.len()), sorted: true };
    for p in parts {
        let p = p?;
        if let (Some(last), Some(first)) = (out.rows.last(), p.rows.first()) {
            out.sorted &= key_order(key_idx, last, first).is_le();
        }
        out.sorted &= p.sorted;
        out.rows.extend(p.rows);
    }
    Ok(out)
}

fn decode_row(table: &str, types: &[ValueType], bytes: &[u8]) -> Result<Vec<Value>, EngineError> {
    let bad = |m: String| EngineError::IndexCorrupt {
        table: table.into(),
        message: format!("stored row does not decode: {m}"),
    };
    index_row::decode(bytes, types).map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{example_company, row};

    fn meta(identifier: u64) -> IndexMeta {
        IndexMeta { identifier, snapshot_id: Some(identifier as i64), committed_at_ms: Some(1) }
    }

    #[test]
    fn the_meta_held_in_memory_follows_every_write_and_survives_a_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = example_company();
        let bolt = |on_hand: i64| {
            let (item, location) = (Value::String("bolt".into()), Value::String("north".into()));
            row(&spec, "stock", &[("item", item), ("location", location), ("on_hand", Value::Int(on_hand))])
        };
        {
            let index = Index::open(tmp.path(), &spec).unwrap();
            assert_eq!(index.meta("stock").unwrap(), None);
            let r = bolt(5);
            let key = index.key_of("stock", &r).unwrap();
            index.apply("stock", [(key.as_slice(), Some(r.as_slice()))], meta(3)).unwrap();
            assert_eq!(index.meta("stock").unwrap(), Some(meta(3)));
            index.rebuild("stock", &[bolt(7)], meta(9)).unwrap();
            assert_eq!(index.meta("stock").unwrap(), Some(meta(9)));
            assert_eq!(index.get("stock", &key).unwrap(), Some(bolt(7)));
            index.forget("stock").unwrap();
            assert_eq!(index.meta("stock").unwrap(), None);
            index.apply("stock", [], meta(11)).unwrap();
            // Another table's entry is its own.
            assert_eq!(index.meta("work_queue").unwrap(), None);
        }
        let index = Index::open(tmp.path(), &spec).unwrap();
        assert_eq!(index.meta("stock").unwrap(), Some(meta(11)), "loaded from the store on open");
        assert_eq!(index.meta("no_such_table").unwrap(), None);
    }

    #[test]
    fn rows_an_older_livestate_stored_as_json_read_beside_binary_ones_and_filter_alike() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = example_company();
        let index = Index::open(tmp.path(), &spec).unwrap();
        let line = |order: &str, qty: i64| {
            let cells = [
                ("order_id", Value::String(order.into())),
                ("line", Value::Int(1)),
                ("qty", Value::Int(qty)),
            ];
            row(&spec, "open_orders", &cells)
        };
        let (binary, json) = (line("o-new", 7), line("o-old", 7));
        index.rebuild("open_orders", std::slice::from_ref(&binary), meta(1)).unwrap();
        // A row as an index written before the binary encoding holds it.
        let t = index.table("open_orders").unwrap();
        let old_key = index.key_of("open_orders", &json).unwrap();
        t.rows.insert(&old_key, Value::json_array(&json)).unwrap();
        assert_eq!(index.get("open_orders", &old_key).unwrap(), Some(json.clone()));
        let new_key = index.key_of("open_orders", &binary).unwrap();
        let stored = t.rows.get(&new_key).unwrap().unwrap();
        assert_eq!(stored[0], index_row::VERSION, "new rows are written in the binary encoding");
        // A filter finds the value in either encoding, and skips rows holding neither.
        let both = index.rows_matching("open_orders", [&Value::Int(7)]).unwrap();
        assert_eq!(both, vec![binary.clone(), json.clone()]);
        assert_eq!(index.rows_matching("open_orders", [&Value::String("o-old".into())]).unwrap(), vec![json]);
        assert!(index.rows_matching("open_orders", [&Value::Int(8)]).unwrap().is_empty());
    }

    /// Integer keys do not sort as their JSON bytes do (`10` before `9`): rows come back in key
    /// order all the same, whether decoded on one thread or on every core.
    #[test]
    fn rows_come_back_in_key_order_though_their_bytes_sort_otherwise() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = example_company();
        let index = Index::open(tmp.path(), &spec).unwrap();
        let line = |order: &str, line: i64| {
            let cells = [("order_id", Value::String(order.into())), ("line", Value::Int(line))];
            row(&spec, "open_orders", &cells)
        };
        for per_order in [100, PARALLEL_DECODE_ROWS as i64] {
            let rows: Vec<Vec<Value>> = (0..per_order).flat_map(|l| [line("a", l), line("b", l)]).collect();
            index.rebuild("open_orders", &rows, meta(1)).unwrap();
            let read = index.rows_matching("open_orders", []).unwrap();
            let mut expected = rows.clone();
            expected.sort_by(|a, b| key_order(&[0, 1], a, b));
            assert_eq!(read.len(), expected.len());
            assert!(read == expected, "{} rows in key order", read.len());
        }
    }
}
