//! The durable, append-only record with group commit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use fjall::config::{PartitioningPolicy, PinningPolicy};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, OwnedWriteBatch, PersistMode};

use livestate_spec::{DataJson, EventEnvelope};

use crate::entry::RecordedEvent;
use crate::error::{describe, is_out_of_space, RecordError};
use crate::memory::StoreMemory;
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
    pub(crate) events: Keyspace,
    pub(crate) ids: Keyspace,
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
            .keyspace("ids", || options().filter_block_partitioning_policy(ids_filter_partitioning()))
            .map_err(store_error(path))?;
        let (next_offset, last_recorded_ms) = match events.last_key_value() {
            None => (0, 0),
            Some(kv) => {
                let (k, v) = kv.into_inner().map_err(read_error(path, "events"))?;
                let offset = decode_offset(&k).ok_or_else(|| RecordError::Corrupt {
                    offset: 0,
                    reason: "last key is not an offset".into(),
                })?;
                let ev = RecordedEvent::decode(offset, &v)?;
                (offset + 1, ev.recorded_at_ms)
            }
        };
        Ok(Record {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                db,
                events,
                ids,
                state: Mutex::new(State {
                    next_offset,
                    last_recorded_ms,
                    queue: Vec::new(),
                    next_ticket: 0,
                    leader: false,
                    results: HashMap::new(),
                    poisoned: None,
                    stats: RecordStats::default(),
                }),
                done: Condvar::new(),
            }),
        })
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
                        let (reason, full) = (describe(&e), is_out_of_space(&e));
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
        for kv in inner.events.range(offset_key(from)..offset_key(head)).take(limit) {
            let (k, v) = kv.into_inner().map_err(read_error(&inner.path, "events"))?;
            let offset = decode_offset(&k).ok_or_else(|| RecordError::Corrupt {
                offset: from,
                reason: "key is not an offset".into(),
            })?;
            out.push(RecordedEvent::decode(offset, &v)?);
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
    fn entry(&self, offset: u64) -> Result<Option<fjall::Slice>, RecordError> {
        let inner = &*self.inner;
        if offset >= self.next_offset() {
            return Ok(None);
        }
        inner.events.get(offset_key(offset)).map_err(read_error(&inner.path, "events"))
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

    /// Writes one group in a single batch and fsync. Offsets are assigned here, by the only
    /// leader, so they stay dense and ordered.
    fn commit_group(
        &self,
        group: Vec<(u64, Vec<EventEnvelope<DataJson>>)>,
        start: u64,
        last_ms: i64,
    ) -> Result<GroupOk, (Vec<u64>, fjall::Error)> {
        let tickets: Vec<u64> = group.iter().map(|(t, _)| *t).collect();
        let fail = |e: fjall::Error| (tickets.clone(), e);
        let now_ms = chrono::Utc::now().timestamp_millis().max(last_ms);
        let events_in_group: usize = group.iter().map(|(_, events)| events.len()).sum();
        // Sized for the whole group at once (two entries an event), as `db.batch()` makes it
        // otherwise: grown by doubling, a batch of 10,000 events was copied into fresh pages
        // a dozen times.
        let mut batch = OwnedWriteBatch::with_capacity(self.db.clone(), 2 * events_in_group)
            .durability(Some(PersistMode::Buffer));
        let mut next = start;
        // Sized for the whole group at once: grown by doubling, its rehashes were about a tenth
        // of an append's CPU in a profile of 1,000-event appends. It borrows the group's
        // events: moving each envelope into it touched a fresh page every few events.
        let mut in_group: HashMap<&str, (u64, &EventEnvelope<DataJson>)> =
            HashMap::with_capacity(events_in_group);
        let mut results = Vec::with_capacity(group.len());
        let mut wrote = false;
        for (ticket, events) in &group {
            match self.plan_request(events, next, &in_group) {
                Ok(plan) => {
                    let mut outcomes = Vec::with_capacity(events.len());
                    for (ev, outcome) in events.iter().zip(plan) {
                        if !outcome.duplicate {
                            batch.insert(
                                &self.events,
                                offset_key(outcome.offset),
                                RecordedEvent::encode(ev, now_ms),
                            );
                            batch.insert(&self.ids, ev.id.as_bytes(), offset_key(outcome.offset));
                            in_group.insert(&ev.id, (outcome.offset, ev));
                            next = outcome.offset + 1;
                            wrote = true;
                        }
                        outcomes.push(outcome);
                    }
                    results.push((*ticket, Ok((outcomes, now_ms))));
                }
                Err(e) => results.push((*ticket, Err(e))),
            }
        }
        if wrote {
            batch.commit().map_err(fail)?;
            self.db.persist(PersistMode::SyncAll).map_err(fail)?;
        }
        Ok((results, next, now_ms))
    }

    fn plan_request(
        &self,
        events: &[EventEnvelope<DataJson>],
        mut next: u64,
        in_group: &HashMap<&str, (u64, &EventEnvelope<DataJson>)>,
    ) -> Result<Vec<Appended>, RecordError> {
        let mut local: HashMap<&str, (u64, &EventEnvelope<DataJson>)> = HashMap::with_capacity(events.len());
        let mut out = Vec::with_capacity(events.len());
        for ev in events {
            let prior = if let Some((o, e)) = local.get(ev.id.as_str()) {
                Some((*o, *e == ev))
            } else if let Some((o, e)) = in_group.get(ev.id.as_str()) {
                Some((*o, *e == ev))
            } else {
                match self.ids.get(ev.id.as_bytes()).map_err(read_error(&self.path, "ids"))? {
                    Some(v) => {
                        let o = decode_offset(&v).ok_or_else(|| RecordError::Corrupt {
                            offset: 0,
                            reason: format!("id index entry for `{}`", ev.id),
                        })?;
                        let stored = self
                            .events
                            .get(offset_key(o))
                            .map_err(read_error(&self.path, "events"))?
                            .ok_or_else(|| RecordError::Corrupt {
                                offset: o,
                                reason: "indexed event is missing".into(),
                            })?;
                        Some((o, RecordedEvent::decode(o, &stored)?.same_content(ev)))
                    }
                    None => None,
                }
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
    fn the_ids_keyspace_partitions_its_filters_from_level_1_and_keeps_them_so_after_reopen() {
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..2 {
            let r = Record::open(dir.path()).unwrap();
            let policy = &r.inner.ids.config.filter_block_partitioning_policy;
            assert_eq!(policy, &ids_filter_partitioning());
            assert_eq!(&policy[..], &[false, true], "whole at level 0, partitioned from level 1 on");
            // The events keyspace is read by offset ranges, never checked for absent keys.
            assert_ne!(&r.inner.events.config.filter_block_partitioning_policy, &ids_filter_partitioning());
        }
    }

    #[test]
    fn flushed_event_files_pin_no_index_or_filter_blocks_and_still_read_back() {
        use fjall::AbstractTree;
        let dir = tempfile::tempdir().unwrap();
        let r = Record::open(dir.path()).unwrap();
        for chunk in (0..4_000u64).collect::<Vec<_>>().chunks(1000) {
            r.append(chunk.iter().map(|&i| ev(i)).collect()).unwrap();
            r.inner.events.rotate_memtable_and_wait().unwrap();
            r.inner.ids.rotate_memtable_and_wait().unwrap();
        }
        assert!(r.inner.events.table_count() >= 4, "{} table files", r.inner.events.table_count());
        let events = &r.inner.events.tree;
        assert_eq!((events.pinned_filter_size(), events.pinned_block_index_size()), (0, 0));
        // fjall's default, kept by the ids keyspace: its level-0 files pin their filters, so
        // the figures above measure something.
        assert!(r.inner.ids.tree.pinned_filter_size() > 0);
        // Read back from the files, by range and by offset.
        let got = r.read(990, 20).unwrap();
        assert_eq!(got.iter().map(|e| e.offset).collect::<Vec<_>>(), (990..1010).collect::<Vec<_>>());
        assert_eq!(r.get(3_999).unwrap().map(|e| e.offset), Some(3_999));
        // And after a reopen (fjall stored the policy with the keyspace).
        drop(r);
        let r = Record::open(dir.path()).unwrap();
        assert_eq!(r.inner.events.config.filter_block_pinning_policy, events_pinning());
        assert_eq!(r.inner.events.config.index_block_pinning_policy, events_pinning());
        assert_eq!(r.get(2_500).unwrap().map(|e| e.event.id), Some("evt-00002500".to_string()));
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
