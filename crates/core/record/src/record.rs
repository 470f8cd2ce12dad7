//! The durable, append-only record with group commit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use fjall::config::{PartitioningPolicy, PinningPolicy};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, OwnedWriteBatch, PersistMode};

use livestate_spec::{DataJson, EventEnvelope};

use crate::entry::RecordedEvent;
use crate::error::{write_failure, RecordError};
use crate::memory::StoreMemory;
use crate::segment::{self, Segments};
use crate::store_check::{read_error, store_error};

/// The outcome of appending one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub offset: u64,
    /// True when the id was already recorded (with the same content): nothing was appended.
    pub duplicate: bool,
}

/// Counters a caller can show or assert on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordStats {
    /// fsyncs performed (one per group commit).
    pub syncs: u64,
    /// Append requests served.
    pub requests: u64,
}

/// An append-only log of events, each with a dense offset starting at 0.
///
/// Appends are acknowledged only after an fsync. Concurrent [`Record::append`] calls are
/// grouped: one caller (the leader) writes every queued request in one batch and one fsync while
/// the others wait, so throughput grows with concurrency instead of collapsing.
#[derive(Clone)]
pub struct Record {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) path: PathBuf,
    db: Database,
    /// The events below `segments_from`, of a record written before segments (version 1).
    pub(crate) events: Keyspace,
    pub(crate) ids: Keyspace,
    /// The record's own values: [`IDS_THROUGH`].
    meta: Keyspace,
    /// Where the events from `segments_from` on are.
    pub(crate) segments: Segments,
    pub(crate) segments_from: u64,
    state: Mutex<State>,
    done: Condvar,
}

struct State {
    next_offset: u64,
    last_recorded_ms: i64,
    queue: Vec<(u64, Vec<EventEnvelope<DataJson>>)>,
    next_ticket: u64,
    leader: bool,
    results: HashMap<u64, Result<(Vec<Appended>, i64), RecordError>>,
    /// Why appends are refused (the first failed write and whether the disk was full).
    poisoned: Option<(String, bool)>,
    stats: RecordStats,
}

/// How the `ids` keyspace lays out its bloom filters: one whole filter per table file at level 0,
/// 4 KiB partitions from level 1 on.
///
/// Every append asks the `ids` keyspace whether each event's id is already recorded, and almost
/// every answer is no, which the table files' bloom filters give without reading data. By
/// fjall's default a table file below level 0 has one filter block of about 1.25 bytes per id,
/// not pinned in memory, and with the record's small block cache each check loaded and
/// checksummed whole filter blocks again. In a 60-minute soak, by minute 21 half the server's
/// CPU went to this, and it took 632 of the 1,000 events a second asked of it
/// (docs/BENCHMARKS.md, "Soak"). A partitioned filter keeps a small top-level index pinned and
/// loads one 4 KiB partition per check. Level 0 keeps fjall's default (pinned), small because
/// level-0 tables are flushed memtables.
///
/// fjall stores a keyspace's options when it creates the keyspace, so a record created before
/// this layout keeps whole filters.
pub(crate) fn ids_filter_partitioning() -> PartitioningPolicy {
    PartitioningPolicy::new([false, true])
}

/// How the `ids` keyspace compacts: leveled, as fjall's default, but merging level 0 into
/// level 1 once it holds 16 tables instead of 4.
///
/// Ids arrive in no order, so every flushed table overlaps all of level 1, and each merge of
/// level 0 rewrites level 1 whole: with fjall's default, every 8 MiB of new ids (four 2 MiB
/// memtables) rewrote all the ids so far. At 16 that happens every 32 MiB. Reads pay one more
/// bloom filter per level-0 table, pinned in memory, and almost every check is a miss that
/// the filters answer. Measured alone (`livestate-bench parts`, docs/BENCHMARKS.md, nineteenth
/// pass), the record's append went from 3.7-4.1 to 2.9 µs per event.
///
/// fjall stores a keyspace's compaction strategy when it creates the keyspace, so a record
/// created before this keeps fjall's default.
pub(crate) fn ids_compaction() -> Arc<dyn lsm_tree::compaction::CompactionStrategy + Send + Sync> {
    Arc::new(fjall::compaction::Leveled::default().with_l0_threshold(16))
}

/// How the `events` keyspace keeps its index and filter blocks: never pinned in memory, read
/// through the block cache like data blocks.
///
/// fjall pins a table file's blocks by the level the file is written to (by default index
/// blocks at levels 0 and 1, filters at level 0) and keeps them pinned while the file lives.
/// Events are keyed by offset, so every flushed table file holds keys above all earlier ones,
/// and compaction moves it down the levels without rewriting it: it keeps what it pinned at
/// level 0 for good. The record is kept for good, so those blocks grew with it, about 0.3 MiB a
/// minute at 1,000 events/s (a heap profile of a 30-minute soak, docs/BENCHMARKS.md, "Soak").
/// The keyspace is read by offset ranges and by offsets that exist, which a filter does not
/// speed up and an index block in the cache serves as well.
///
/// fjall stores a keyspace's options when it creates the keyspace, so a record created before
/// this policy keeps pinning (until a restart, when fjall pins by the level each file is at).
pub(crate) fn events_pinning() -> PinningPolicy {
    PinningPolicy::all(false)
}

/// The key in `meta` of the offset below which every event's id is in `ids`.
const IDS_THROUGH: &[u8] = b"ids_through";

fn offset_key(offset: u64) -> [u8; 8] {
    offset.to_be_bytes()
}

pub(crate) fn decode_offset(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

impl Record {
    /// Opens (creating if needed) the record stored in directory `path`.
    ///
    /// # Errors
    /// [`RecordError::Store`] when the store cannot be opened or recovered;
    /// [`RecordError::Damaged`] (naming the damaged files it finds) when stored bytes fail a check.
    pub fn open(path: &Path) -> Result<Record, RecordError> {
        Record::open_sealing_at(path, segment::SEGMENT_BYTES)
    }

    /// [`Record::open`] with segments sealed at `segment_bytes` instead of 64 MiB, for tests of
    /// reads across segments.
    ///
    /// # Errors
    /// As [`Record::open`].
    #[doc(hidden)]
    pub fn open_sealing_at(path: &Path, segment_bytes: u64) -> Result<Record, RecordError> {
        let db = crate::memory::database(path, crate::memory::RECORD_CACHE_BYTES)
            .open()
            .map_err(store_error(path))?;
        // Writes flush to a table file at 2 MiB per keyspace (fjall's default: 64 MiB; see
        // `crate::memory` for what a memtable costs): at 1,000 events/s that is a flush every
        // few seconds, and the memtables of both keyspaces cycle within about 10 MiB (at 4 MiB
        // they swung by twice that between two soak samples).
        let options = || KeyspaceCreateOptions::default().max_memtable_size(2 * 1024 * 1024);
        let events = db
            .keyspace("events", || {
                options()
                    .filter_block_pinning_policy(events_pinning())
                    .index_block_pinning_policy(events_pinning())
            })
            .map_err(store_error(path))?;
        let ids = db
            .keyspace("ids", || {
                options()
                    .filter_block_partitioning_policy(ids_filter_partitioning())
                    .compaction_strategy(ids_compaction())
            })
            .map_err(store_error(path))?;
        let meta = db.keyspace("meta", KeyspaceCreateOptions::default).map_err(store_error(path))?;
        let segments_from = match segment::read_format(path)? {
            Some(from) => from,
            None => {
                // A new record, or one of version 1 (every event in `events`): new events go
                // to segments from here on.
                let legacy_end = match events.last_key_value() {
                    None => 0,
                    Some(kv) => {
                        let (k, _) = kv.into_inner().map_err(read_error(path, "events"))?;
                        decode_offset(&k).ok_or_else(|| RecordError::Corrupt {
                            offset: 0,
                            reason: "last key is not an offset".into(),
                        })? + 1
                    }
                };
                segment::write_format(path, legacy_end)?;
                legacy_end
            }
        };
        let ids_through = match meta.get(IDS_THROUGH).map_err(read_error(path, "meta"))? {
            Some(v) => decode_offset(&v).ok_or_else(|| RecordError::Corrupt {
                offset: segments_from,
                reason: "the stored `ids_through` is not an offset".into(),
            })?,
            // Version 1 stored every id in the batch of its event.
            None => segments_from,
        };
        let opened = Segments::open(&path.join("segments"), segments_from, ids_through, segment_bytes)?;
        let next_offset = opened.next_offset;
        if next_offset < ids_through {
            // A segment cut between two groups reads whole; the ids say what was acknowledged.
            return Err(RecordError::DamagedSegment {
                file: path.join("segments"),
                position: 0,
                reason: format!(
                    "the segments end at offset {next_offset}, but events through offset {} were acknowledged",
                    ids_through - 1
                ),
            });
        }
        let mut inner = Inner {
            path: path.to_path_buf(),
            db,
            events,
            ids,
            meta,
            segments: opened.segments,
            segments_from,
            state: Mutex::new(State {
                next_offset,
                last_recorded_ms: 0,
                queue: Vec::new(),
                next_ticket: 0,
                leader: false,
                results: HashMap::new(),
                poisoned: None,
                stats: RecordStats::default(),
            }),
            done: Condvar::new(),
        };
        if next_offset > 0 {
            // The last entry, wherever it is (a segment, or the keyspace of version 1).
            let ms = RecordedEvent::decode_recorded_at(next_offset - 1, &inner.entry(next_offset - 1)?)?;
            inner.state.get_mut().expect("record state lock").last_recorded_ms = ms;
        }
        Record { inner: Arc::new(inner) }.with_ids_through(ids_through)
    }

    /// Stores the ids of the events from `ids_through` to the head, which a crash between a
    /// group's fsync and its ids' batch left out, before any append checks an id.
    fn with_ids_through(self, ids_through: u64) -> Result<Record, RecordError> {
        let inner = &*self.inner;
        let head = self.next_offset();
        if ids_through >= head {
            return Ok(self);
        }
        let mut batch = inner.db.batch().durability(Some(PersistMode::SyncAll));
        inner.segments.for_each(ids_through, head, |offset, bytes| {
            let ev = RecordedEvent::decode(offset, bytes)?;
            batch.insert(&inner.ids, ev.event.id.as_bytes(), offset_key(offset));
            Ok(true)
        })?;
        batch.insert(&inner.meta, IDS_THROUGH, offset_key(head));
        batch.commit().map_err(store_error(&inner.path))?;
        inner.db.persist(PersistMode::SyncAll).map_err(store_error(&inner.path))?;
        tracing::info!(
            record = %inner.path.display(),
            from = ids_through,
            to = head,
            "stored the ids of events a crash left unindexed"
        );
        Ok(self)
    }

    /// The offset the next new event will get (= the number of events recorded).
    pub fn next_offset(&self) -> u64 {
        self.inner.state.lock().expect("record state lock").next_offset
    }

    /// Why the record refuses appends, if an earlier write failed ([`RecordError::Poisoned`]).
    pub fn refusing_appends(&self) -> Option<RecordError> {
        let st = self.inner.state.lock().expect("record state lock");
        st.poisoned.as_ref().map(|(reason, full)| self.inner.poisoned(reason, *full))
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    /// Group-commit counters since open.
    pub fn stats(&self) -> RecordStats {
        self.inner.state.lock().expect("record state lock").stats
    }

    /// What the record's store holds in memory now (block cache and unflushed writes).
    pub fn memory(&self) -> StoreMemory {
        StoreMemory::of(&self.inner.db)
    }

    /// Appends `events` atomically and durably: when this returns `Ok`, every event is on disk
    /// (or was already, for a re-sent id). Re-sending an id with the same content returns its
    /// original offset; with different content the whole request fails and appends nothing.
    ///
    /// # Errors
    /// [`RecordError::IdConflict`] for a re-used id with new content; [`RecordError::WriteFailed`]
    /// when writing or syncing failed (a full disk, an I/O error), in which case nothing of the
    /// request is acknowledged and the record refuses every later append with
    /// [`RecordError::Poisoned`] until it is reopened: after a failed fsync the state of the
    /// written bytes is unknown, so the write is never retried in place. Whether a failed
    /// request is on disk is settled by the next open; re-sending its events (same ids) is safe.
    pub fn append(&self, events: Vec<EventEnvelope<DataJson>>) -> Result<Vec<Appended>, RecordError> {
        Ok(self.append_timed(events)?.0)
    }

    /// As [`Record::append`], also returning when the request's new events were recorded (ms
    /// since the epoch; every event of one request is recorded at the same time, the time
    /// [`RecordedEvent::recorded_at_ms`] reads back).
    ///
    /// # Errors
    /// As [`Record::append`].
    pub fn append_timed(
        &self,
        events: Vec<EventEnvelope<DataJson>>,
    ) -> Result<(Vec<Appended>, i64), RecordError> {
        if events.is_empty() {
            return Ok((Vec::new(), chrono::Utc::now().timestamp_millis()));
        }
        let inner = &*self.inner;
        let mut st = inner.state.lock().expect("record state lock");
        if let Some((reason, full)) = &st.poisoned {
            return Err(inner.poisoned(reason, *full));
        }
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.queue.push((ticket, events));
        loop {
            if let Some(r) = st.results.remove(&ticket) {
                return r;
            }
            if let Some((reason, full)) = st.poisoned.clone() {
                // An earlier group failed: refuse everything still queued, this request included.
                for (t, _) in std::mem::take(&mut st.queue) {
                    st.results.insert(t, Err(inner.poisoned(&reason, full)));
                }
                inner.done.notify_all();
                continue;
            }
            if !st.leader {
                st.leader = true;
                let group = std::mem::take(&mut st.queue);
                let start = st.next_offset;
                let last_ms = st.last_recorded_ms;
                drop(st);
                let outcome = inner.commit_group(group, start, last_ms);
                st = inner.state.lock().expect("record state lock");
                st.leader = false;
                st.stats.syncs += 1;
                match outcome {
                    Ok((results, next, ms)) => {
                        st.next_offset = next;
                        st.last_recorded_ms = ms;
                        st.stats.requests += results.len() as u64;
                        st.results.extend(results);
                    }
                    Err((tickets, e)) => {
                        let (reason, full) = write_failure(&e);
                        tracing::error!(
                            record = %inner.path.display(),
                            error = %reason,
                            "record write failed; nothing of the group is acknowledged and further appends are refused"
                        );
                        st.poisoned = Some((reason.clone(), full));
                        for t in tickets {
                            st.results.insert(
                                t,
                                Err(RecordError::WriteFailed {
                                    path: inner.path.clone(),
                                    reason: reason.clone(),
                                    out_of_space: full,
                                }),
                            );
                        }
                    }
                }
                inner.done.notify_all();
            } else {
                st = inner.done.wait(st).expect("record state lock");
            }
        }
    }

    /// Up to `limit` events starting at `from`, in offset order. Only acknowledged events are
    /// read (never those of a group still being written, or of one whose write failed).
    ///
    /// # Errors
    /// [`RecordError::Store`] on I/O failure, [`RecordError::Damaged`] when stored bytes fail a
    /// check, [`RecordError::Corrupt`] for an entry that does not decode.
    pub fn read(&self, from: u64, limit: usize) -> Result<Vec<RecordedEvent>, RecordError> {
        let inner = &*self.inner;
        let head = self.next_offset();
        if from >= head {
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity(limit.min(4096));
        let legacy_to = head.min(inner.segments_from);
        if from < legacy_to {
            for kv in inner.events.range(offset_key(from)..offset_key(legacy_to)).take(limit) {
                let (k, v) = kv.into_inner().map_err(read_error(&inner.path, "events"))?;
                let offset = decode_offset(&k).ok_or_else(|| RecordError::Corrupt {
                    offset: from,
                    reason: "key is not an offset".into(),
                })?;
                out.push(RecordedEvent::decode(offset, &v)?);
            }
        }
        let from = from.max(inner.segments_from);
        if out.len() < limit && from < head {
            let to = head.min(from.saturating_add((limit - out.len()) as u64));
            inner.segments.for_each(from, to, |offset, bytes| {
                out.push(RecordedEvent::decode(offset, bytes)?);
                Ok(true)
            })?;
        }
        Ok(out)
    }

    /// The event at `offset`, if recorded.
    ///
    /// # Errors
    /// As [`Record::read`].
    pub fn get(&self, offset: u64) -> Result<Option<RecordedEvent>, RecordError> {
        self.entry(offset)?.map(|v| RecordedEvent::decode(offset, &v)).transpose()
    }

    /// The stored entry at `offset`, when one is recorded there.
    fn entry(&self, offset: u64) -> Result<Option<Vec<u8>>, RecordError> {
        if offset >= self.next_offset() {
            return Ok(None);
        }
        self.inner.entry(offset).map(Some)
    }

    /// When the event at `offset` was recorded (UTC, ms): [`Record::get`]'s `recorded_at_ms`,
    /// without decoding the event.
    ///
    /// # Errors
    /// As [`Record::get`].
    pub fn recorded_at_ms(&self, offset: u64) -> Result<Option<i64>, RecordError> {
        self.entry(offset)?.map(|v| RecordedEvent::decode_recorded_at(offset, &v)).transpose()
    }

    /// The offset at which event id `id` was recorded.
    ///
    /// # Errors
    /// As [`Record::read`].
    pub fn offset_of(&self, id: &str) -> Result<Option<u64>, RecordError> {
        let inner = &*self.inner;
        let v = inner.ids.get(id.as_bytes()).map_err(read_error(&inner.path, "ids"))?;
        let head = self.next_offset();
        Ok(v.and_then(|v| decode_offset(&v)).filter(|&o| o < head))
    }
}

type GroupOk = (Vec<(u64, Result<(Vec<Appended>, i64), RecordError>)>, u64, i64);

impl Inner {
    fn poisoned(&self, reason: &str, out_of_space: bool) -> RecordError {
        RecordError::Poisoned { path: self.path.clone(), reason: reason.to_string(), out_of_space }
    }

    /// The stored bytes of the event at `offset`, which must be recorded.
    pub(crate) fn entry(&self, offset: u64) -> Result<Vec<u8>, RecordError> {
        if offset < self.segments_from {
            let v = self.events.get(offset_key(offset)).map_err(read_error(&self.path, "events"))?;
            return v.map(|v| v.to_vec()).ok_or_else(|| RecordError::Corrupt {
                offset,
                reason: "the event is missing from the `events` keyspace".into(),
            });
        }
        let mut out = None;
        self.segments.for_each(offset, offset + 1, |_, bytes| {
            out = Some(bytes.to_vec());
            Ok(false)
        })?;
        out.ok_or_else(|| RecordError::Corrupt {
            offset,
            reason: "the event is missing from its segment".into(),
        })
    }

    /// Writes one group: its entries to the open segment in one write and one fsync, then its
    /// ids and the new `ids_through` in one batch of the store. Offsets are assigned here, by
    /// the only leader, so they stay dense and ordered.
    fn commit_group(
        &self,
        group: Vec<(u64, Vec<EventEnvelope<DataJson>>)>,
        start: u64,
        last_ms: i64,
    ) -> Result<GroupOk, (Vec<u64>, Box<RecordError>)> {
        let tickets: Vec<u64> = group.iter().map(|(t, _)| *t).collect();
        let fail = |e: RecordError| (tickets.clone(), Box::new(e));
        let now_ms = chrono::Utc::now().timestamp_millis().max(last_ms);
        let events_in_group: usize = group.iter().map(|(_, events)| events.len()).sum();
        let mut entries = self.segments.group();
        let mut batch = OwnedWriteBatch::with_capacity(self.db.clone(), events_in_group + 1)
            .durability(Some(PersistMode::Buffer));
        let mut next = start;
        // Sized for the whole group at once: grown by doubling, its rehashes were about a tenth
        // of an append's CPU in a profile of 1,000-event appends. It borrows the group's
        // events: moving each envelope into it touched a fresh page every few events.
        let mut in_group: HashMap<&str, (u64, &EventEnvelope<DataJson>)> =
            HashMap::with_capacity(events_in_group);
        let mut results = Vec::with_capacity(group.len());
        for (ticket, events) in &group {
            match self
                .recorded_ids(events)
                .and_then(|recorded| self.plan_request(events, next, &in_group, &recorded))
            {
                Ok(plan) => {
                    let mut outcomes = Vec::with_capacity(events.len());
                    for (ev, outcome) in events.iter().zip(plan) {
                        if !outcome.duplicate {
                            entries.entry(|out| RecordedEvent::encode_into(ev, now_ms, out));
                            batch.insert(&self.ids, ev.id.as_bytes(), offset_key(outcome.offset));
                            in_group.insert(&ev.id, (outcome.offset, ev));
                            next = outcome.offset + 1;
                        }
                        outcomes.push(outcome);
                    }
                    results.push((*ticket, Ok((outcomes, now_ms))));
                }
                Err(e) => results.push((*ticket, Err(e))),
            }
        }
        if next > start {
            entries.commit(start).map_err(fail)?;
            // Not synced: a crash that loses this batch leaves events from `ids_through` on
            // whose ids the next open stores again before any append.
            batch.insert(&self.meta, IDS_THROUGH, offset_key(next));
            batch.commit().map_err(|e| fail(store_error(&self.path)(e)))?;
        }
        Ok((results, next, now_ms))
    }

    /// The offsets of a request's ids that are already recorded, looked up in key order (so
    /// consecutive checks walk the same memtable nodes and filter partitions).
    fn recorded_ids<'r>(
        &self,
        events: &'r [EventEnvelope<DataJson>],
    ) -> Result<HashMap<&'r str, u64>, RecordError> {
        let mut ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut found = HashMap::new();
        for id in ids {
            if let Some(v) = self.ids.get(id.as_bytes()).map_err(read_error(&self.path, "ids"))? {
                let o = decode_offset(&v).ok_or_else(|| RecordError::Corrupt {
                    offset: 0,
                    reason: format!("id index entry for `{id}`"),
                })?;
                found.insert(id, o);
            }
        }
        Ok(found)
    }

    fn plan_request(
        &self,
        events: &[EventEnvelope<DataJson>],
        mut next: u64,
        in_group: &HashMap<&str, (u64, &EventEnvelope<DataJson>)>,
        recorded: &HashMap<&str, u64>,
    ) -> Result<Vec<Appended>, RecordError> {
        let mut local: HashMap<&str, (u64, &EventEnvelope<DataJson>)> = HashMap::with_capacity(events.len());
        let mut out = Vec::with_capacity(events.len());
        for ev in events {
            let prior = if let Some((o, e)) = local.get(ev.id.as_str()) {
                Some((*o, *e == ev))
            } else if let Some((o, e)) = in_group.get(ev.id.as_str()) {
                Some((*o, *e == ev))
            } else if let Some(&o) = recorded.get(ev.id.as_str()) {
                let stored = self.entry(o)?;
                Some((o, RecordedEvent::decode(o, &stored)?.same_content(ev)))
            } else {
                None
            };
            match prior {
                Some((offset, true)) => out.push(Appended { offset, duplicate: true }),
                Some((offset, false)) => return Err(RecordError::IdConflict { id: ev.id.clone(), offset }),
                None => {
                    local.insert(&ev.id, (next, ev));
                    out.push(Appended { offset: next, duplicate: false });
                    next += 1;
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(i: u64) -> EventEnvelope<DataJson> {
        EventEnvelope {
            id: format!("evt-{i:08}"),
            event_type: "inventory.stock_counted".into(),
            occurred_at: "2026-01-01T00:00:00.000Z".into(),
            data: DataJson::parse(format!(r#"{{"qty":{i}}}"#)).unwrap(),
            causation: None,
        }
    }

    #[test]
    fn the_ids_keyspace_partitions_its_filters_and_compacts_at_16_tables_and_keeps_both_after_reopen() {
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..2 {
            let r = Record::open(dir.path()).unwrap();
            let strategy = &r.inner.ids.config.compaction_strategy;
            assert_eq!(strategy.get_name(), ids_compaction().get_name());
            assert_eq!(
                strategy.get_config(),
                ids_compaction().get_config(),
                "merged into level 1 at 16 tables"
            );
            use lsm_tree::compaction::CompactionStrategy;
            assert_ne!(strategy.get_config(), fjall::compaction::Leveled::default().get_config());
            let policy = &r.inner.ids.config.filter_block_partitioning_policy;
            assert_eq!(policy, &ids_filter_partitioning());
            assert_eq!(&policy[..], &[false, true], "whole at level 0, partitioned from level 1 on");
            // The events keyspace is read by offset ranges, never checked for absent keys.
            assert_ne!(&r.inner.events.config.filter_block_partitioning_policy, &ids_filter_partitioning());
        }
    }

    /// A record as version 1 wrote it: `n` events and their ids in the store's keyspaces, with
    /// the pinning policy of the time, and no `format` file.
    fn version_1_record(dir: &Path, n: u64) {
        let db = crate::memory::database(dir, crate::memory::RECORD_CACHE_BYTES).open().unwrap();
        let events = db
            .keyspace("events", || {
                KeyspaceCreateOptions::default()
                    .filter_block_pinning_policy(events_pinning())
                    .index_block_pinning_policy(events_pinning())
            })
            .unwrap();
        let ids = db.keyspace("ids", KeyspaceCreateOptions::default).unwrap();
        let mut batch = db.batch();
        for i in 0..n {
            batch.insert(&events, offset_key(i), RecordedEvent::encode(&ev(i), 1_000 + i as i64));
            batch.insert(&ids, ev(i).id.as_bytes(), offset_key(i));
        }
        batch.commit().unwrap();
        db.persist(PersistMode::SyncAll).unwrap();
        events.rotate_memtable_and_wait().unwrap();
    }

    #[test]
    fn a_version_1_record_is_read_through_its_keyspace_and_appended_to_in_segments() {
        let dir = tempfile::tempdir().unwrap();
        version_1_record(dir.path(), 300);
        let r = Record::open(dir.path()).unwrap();
        assert_eq!((r.next_offset(), r.inner.segments_from), (300, 300));
        assert!(dir.path().join("format").exists(), "the format file says where segments begin");
        // Old ids are duplicates at their offsets, found through the old entries.
        let out = r.append((295..305).map(ev).collect()).unwrap();
        let want: Vec<Appended> = (295..305).map(|o| Appended { offset: o, duplicate: o < 300 }).collect();
        assert_eq!(out, want);
        let conflict = EventEnvelope { occurred_at: "2026-01-02T00:00:00.000Z".into(), ..ev(7) };
        assert!(matches!(r.append(vec![conflict]), Err(RecordError::IdConflict { offset: 7, .. })));
        // Reads cross the boundary in both directions of every call.
        let got = r.read(290, 15).unwrap();
        assert_eq!(got.iter().map(|e| e.offset).collect::<Vec<_>>(), (290..305).collect::<Vec<_>>());
        assert_eq!(
            got.iter().map(|e| e.event.id.clone()).collect::<Vec<_>>(),
            (290..305).map(|i| ev(i).id).collect::<Vec<_>>()
        );
        assert_eq!(r.recorded_at_ms(299).unwrap(), Some(1_299));
        assert_eq!(r.get(304).unwrap().map(|e| e.event.id), Some(ev(304).id));
        assert_eq!(r.offset_of(&ev(3).id).unwrap(), Some(3));
        assert_eq!(r.offset_of(&ev(303).id).unwrap(), Some(303));
        drop(r);
        // Reopened, the boundary stays where it was and the last entry is a segment's.
        let r = Record::open(dir.path()).unwrap();
        assert_eq!((r.next_offset(), r.inner.segments_from), (305, 300));
        assert_eq!(r.read(0, 1000).unwrap().len(), 305);
        drop(r);
        let check = crate::check_record(dir.path());
        assert!(check.is_clean(), "{:?}", check.problems);
        assert_eq!(check.events, 305);
    }

    #[test]
    fn events_whose_ids_a_crash_kept_from_the_store_get_them_at_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let r = Record::open(dir.path()).unwrap();
        r.append((0..10).map(ev).collect()).unwrap();
        // A group made durable in its segment whose ids' batch never happened.
        let mut group = r.inner.segments.group();
        for i in 10..15 {
            group.entry(|out| RecordedEvent::encode_into(&ev(i), 5, out));
        }
        group.commit(10).unwrap();
        drop(r);
        let r = Record::open(dir.path()).unwrap();
        assert_eq!(r.next_offset(), 15, "the durable group is kept");
        assert_eq!(r.offset_of(&ev(12).id).unwrap(), Some(12), "its ids were stored again at open");
        // Re-sent, its events are duplicates at their offsets: nothing is recorded twice.
        let out = r.append((12..17).map(ev).collect()).unwrap();
        let want: Vec<Appended> = (12..17).map(|o| Appended { offset: o, duplicate: o < 15 }).collect();
        assert_eq!(out, want);
        drop(r);
        let check = crate::check_record(dir.path());
        assert!(check.is_clean(), "{:?}", check.problems);
        assert_eq!(check.events, 17);
    }

    #[test]
    fn ids_in_many_level_0_tables_are_found_as_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let r = Record::open(dir.path()).unwrap();
        for chunk in (0..3_000u64).collect::<Vec<_>>().chunks(250) {
            r.append(chunk.iter().map(|&i| ev(i)).collect()).unwrap();
            r.inner.ids.rotate_memtable_and_wait().unwrap();
        }
        assert!(r.inner.ids.table_count() >= 12, "{} tables", r.inner.ids.table_count());
        let resent: Vec<u64> = (0..3_000).step_by(7).collect();
        let out = r.append(resent.iter().map(|&i| ev(i)).collect()).unwrap();
        assert!(out.iter().zip(&resent).all(|(a, &i)| *a == Appended { offset: i, duplicate: true }));
        assert_eq!(r.next_offset(), 3_000);
    }

    #[test]
    fn ids_compacted_into_partitioned_filters_are_still_found_as_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let r = Record::open(dir.path()).unwrap();
        let n = 20_000u64;
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            r.append(chunk.iter().map(|&i| ev(i)).collect()).unwrap();
        }
        // Into table files, then into the last level, where every filter is partitioned.
        r.inner.ids.rotate_memtable_and_wait().unwrap();
        r.inner.ids.major_compact().unwrap();
        assert!(r.inner.ids.table_count() >= 1);
        // Re-sent ids (every 97th, across the whole key range) are duplicates at their offsets;
        // new ids are appended after the last.
        let resent: Vec<u64> = (0..n).step_by(97).collect();
        let mut batch: Vec<EventEnvelope<DataJson>> = resent.iter().map(|&i| ev(i)).collect();
        batch.extend((n..n + 10).map(ev));
        let out = r.append(batch).unwrap();
        for (a, &i) in out.iter().zip(&resent) {
            assert_eq!(*a, Appended { offset: i, duplicate: true }, "event {i}");
        }
        let fresh: Vec<Appended> = out[resent.len()..].to_vec();
        assert_eq!(fresh, (n..n + 10).map(|o| Appended { offset: o, duplicate: false }).collect::<Vec<_>>());
        assert_eq!(r.next_offset(), n + 10);
    }
}
