//! The `record.events` archive, written on a task of its own.
//!
//! Every event goes to the archive, so its Arrow batches and Parquet files are as much work as
//! all the state tables' together. The derivers hand each chunk's archive rows over through a
//! bounded channel and go on deriving; the task buffers them, hands Paimon every
//! [`crate::sink`] batch, commits once its oldest uncommitted event is a second old (or its window
//! has been open a second while the derivers work off a backlog) and compacts in the background,
//! so the second core encodes the archive while the first derives the state tables.
//!
//! Exactly once as before: the task commits with the offset below which it was handed every
//! event as the commit identifier; rows handed over but not committed are lost with the process
//! and derived again after a restart, from that identifier.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arrow_array::builder::{Int64Builder, StringBuilder, TimestampMillisecondBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::SchemaRef;
use livestate_spec::{Event, Freshness};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::error::EngineError;
use crate::sink::{SinkProgress, TableSink};
use crate::upkeep::Upkeep;

/// How often the archive commits.
pub(crate) const COMMIT_INTERVAL: Duration = Duration::from_secs(1);

/// Chunks handed over and not yet taken by the task: the derivers wait beyond this.
const QUEUED_CHUNKS: usize = 2;

/// A chunk's archive rows, built straight into the archive's Arrow columns as the derivers
/// apply each event: no row of values per event, and the day partition computed once per day,
/// not formatted per event (docs/columnar-derivation.md, slice 5).
pub(crate) struct ArchiveBatch {
    table: String,
    schema: SchemaRef,
    offset: Int64Builder,
    id: StringBuilder,
    event_type: StringBuilder,
    module: StringBuilder,
    occurred_at: TimestampMillisecondBuilder,
    recorded_at: TimestampMillisecondBuilder,
    causation: StringBuilder,
    data: StringBuilder,
    day: StringBuilder,
    /// The last day written: days since the epoch and its `YYYY-MM-DD`.
    last_day: Option<(i64, String)>,
    /// When the oldest event of the batch was recorded.
    oldest_recorded_ms: Option<i64>,
}

const MS_PER_DAY: i64 = 86_400_000;

impl ArchiveBatch {
    /// An empty batch of the archive's columns ([`crate::schema::ARCHIVE_COLUMNS`], as `schema`
    /// gives them) for `table` (named in errors).
    pub fn new(table: &str, schema: SchemaRef) -> ArchiveBatch {
        ArchiveBatch {
            table: table.to_string(),
            schema,
            offset: Int64Builder::new(),
            id: StringBuilder::new(),
            event_type: StringBuilder::new(),
            module: StringBuilder::new(),
            occurred_at: TimestampMillisecondBuilder::new(),
            recorded_at: TimestampMillisecondBuilder::new(),
            causation: StringBuilder::new(),
            data: StringBuilder::new(),
            day: StringBuilder::new(),
            last_day: None,
            oldest_recorded_ms: None,
        }
    }

    /// Adds the archive row of `event`, recorded at `offset` at `recorded_at_ms` with `data`
    /// the JSON text of its recorded `data` object: the row of [`crate::schema::ARCHIVE_COLUMNS`] the
    /// recorded event has.
    pub fn push(&mut self, offset: u64, recorded_at_ms: i64, event: &Event, data: &str) {
        self.oldest_recorded_ms.get_or_insert(recorded_at_ms);
        self.offset.append_value(offset as i64);
        self.id.append_value(&event.id);
        self.event_type.append_value(&event.event_type);
        self.module.append_value(event.module());
        self.occurred_at.append_value(event.occurred_at.timestamp_millis());
        self.recorded_at.append_value(recorded_at_ms);
        self.causation.append_option(event.causation.as_deref());
        self.data.append_value(data);
        let day_number = recorded_at_ms.div_euclid(MS_PER_DAY);
        if self.last_day.as_ref().is_none_or(|(n, _)| *n != day_number) {
            let mut day = livestate_spec::types::format_timestamp(
                &livestate_spec::types::millis_to_timestamp(recorded_at_ms),
            );
            day.truncate(10);
            self.last_day = Some((day_number, day));
        }
        self.day.append_value(&self.last_day.as_ref().expect("set above").1);
    }

    /// The rows added since the last take, and when the oldest of them was recorded; `None`
    /// when there are none.
    ///
    /// # Errors
    /// The columns do not fit the archive's schema.
    pub fn take(&mut self) -> Result<Option<(RecordBatch, i64)>, EngineError> {
        let Some(oldest) = self.oldest_recorded_ms.take() else {
            return Ok(None);
        };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.offset.finish()),
            Arc::new(self.id.finish()),
            Arc::new(self.event_type.finish()),
            Arc::new(self.module.finish()),
            Arc::new(self.occurred_at.finish()),
            Arc::new(self.recorded_at.finish()),
            Arc::new(self.causation.finish()),
            Arc::new(self.data.finish()),
            Arc::new(self.day.finish()),
        ];
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns)
            .map_err(|source| EngineError::Arrow { table: self.table.clone(), source })?;
        Ok(Some((batch, oldest)))
    }
}

enum Msg {
    /// The archive rows of consecutive events (none when every event was below the archive's
    /// position) and when the oldest was recorded; every event below `end` has now been
    /// handed over. `behind`: the derivers are working off a backlog (see `WindowAge::due`).
    Rows { rows: Option<(RecordBatch, i64)>, end: u64, behind: bool },
    /// Commit what is pending now; whether a snapshot was made.
    Commit(oneshot::Sender<Result<bool, EngineError>>),
    /// Wait for background compaction and expiry.
    Finish(oneshot::Sender<()>),
}

/// The derivers' handle on the archive task.
pub(crate) struct Archive {
    tx: mpsc::Sender<Msg>,
    task: Option<JoinHandle<Result<(), EngineError>>>,
    /// What the task last published (its position, last commit and window).
    progress: Arc<Mutex<SinkProgress>>,
    /// Every event below it has been handed to the task.
    position: u64,
    /// The rows of the chunk being applied.
    batch: ArchiveBatch,
    /// Snapshots the task has committed, and how many of them [`Archive::take_commits`] gave.
    commits: Arc<AtomicU64>,
    counted: u64,
}

impl Archive {
    /// Starts the task that owns `sink` (positioned where its last commit left off).
    pub fn start(sink: TableSink) -> Archive {
        let position = sink.position();
        let batch = ArchiveBatch::new(sink.name(), sink.arrow_schema());
        let progress = Arc::new(Mutex::new(sink.progress()));
        let (tx, rx) = mpsc::channel(QUEUED_CHUNKS);
        let upkeep = Upkeep::new(&Freshness::Within(COMMIT_INTERVAL * 2), sink.spend().clone());
        let commits = Arc::new(AtomicU64::new(0));
        let shared = Shared { progress: Arc::clone(&progress), commits: Arc::clone(&commits) };
        let task = tokio::spawn(run(sink, upkeep, rx, shared));
        Archive { tx, task: Some(task), progress, position, batch, commits, counted: 0 }
    }

    /// Every event below it has been handed over (rows of events below it are not wanted).
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The task's position, last commit and window as it last published them.
    pub fn progress(&self) -> SinkProgress {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Snapshots the task committed since the last call.
    pub fn take_commits(&mut self) -> u64 {
        let now = self.commits.load(Ordering::Acquire);
        let new = now - self.counted;
        self.counted = now;
        new
    }

    /// Adds the archive row of `event` (see [`ArchiveBatch::push`]) to the chunk being
    /// applied, unless it was handed over before.
    pub fn add(&mut self, offset: u64, recorded_at_ms: i64, event: &Event, data: &str) -> bool {
        if offset < self.position {
            return false;
        }
        self.batch.push(offset, recorded_at_ms, event, data);
        true
    }

    /// Hands over the rows added since the last hand-over, of the events below `end`.
    ///
    /// # Errors
    /// The task's error when it has stopped.
    pub async fn hand_over(&mut self, end: u64, behind: bool) -> Result<(), EngineError> {
        let rows = self.batch.take()?;
        if end <= self.position {
            return Ok(());
        }
        self.position = end;
        if self.tx.send(Msg::Rows { rows, end, behind }).await.is_err() {
            return Err(self.stopped().await);
        }
        Ok(())
    }

    /// Commits what the task holds; whether a snapshot was made.
    ///
    /// # Errors
    /// Paimon errors of the commit; the task's error when it has stopped.
    pub async fn commit(&mut self) -> Result<bool, EngineError> {
        let (reply, answer) = oneshot::channel();
        if self.tx.send(Msg::Commit(reply)).await.is_err() {
            return Err(self.stopped().await);
        }
        match answer.await {
            Ok(r) => r,
            Err(_) => Err(self.stopped().await),
        }
    }

    /// Waits for the archive's background compaction and expiry.
    pub async fn finish(&mut self) {
        let (reply, answer) = oneshot::channel();
        if self.tx.send(Msg::Finish(reply)).await.is_ok() {
            let _ = answer.await;
        }
    }

    /// The task's error, if it has stopped (it stops only on an error).
    ///
    /// # Errors
    /// That error.
    pub async fn check(&mut self) -> Result<(), EngineError> {
        if self.task.as_ref().is_some_and(JoinHandle::is_finished) {
            return Err(self.stopped().await);
        }
        Ok(())
    }

    async fn stopped(&mut self) -> EngineError {
        let gone = || EngineError::Derivation {
            offset: self.position,
            message: "the archive's task stopped".into(),
        };
        match self.task.take() {
            Some(t) => match t.await {
                Ok(Err(e)) => e,
                Ok(Ok(())) => gone(),
                Err(source) => EngineError::Task { what: "the archive's writer".into(), source },
            },
            None => gone(),
        }
    }
}

async fn run(
    mut sink: TableSink,
    mut upkeep: Upkeep,
    mut rx: mpsc::Receiver<Msg>,
    shared: Shared,
) -> Result<(), EngineError> {
    let mut behind = false;
    loop {
        let next = match due_in(&sink, behind) {
            Some(wait) => tokio::select! {
                m = rx.recv() => Next::Msg(m),
                () = tokio::time::sleep(wait) => Next::Due,
            },
            None => Next::Msg(rx.recv().await),
        };
        let msg = match next {
            Next::Due => {
                if due_in(&sink, behind).is_some_and(|w| w.is_zero()) {
                    commit(&mut sink, &mut upkeep, false, &shared).await?;
                    shared.publish(&sink);
                }
                continue;
            }
            // The derivers are gone: what was not committed is derived again after a restart.
            Next::Msg(None) => return Ok(()),
            Next::Msg(Some(msg)) => msg,
        };
        match msg {
            Msg::Rows { rows, end, behind: b } => {
                behind = b;
                if let Some((batch, oldest_recorded_ms)) = rows {
                    sink.push_batch(batch, oldest_recorded_ms).await?;
                }
                sink.advance_to(end);
                if due_in(&sink, behind).is_some_and(|w| w.is_zero()) {
                    commit(&mut sink, &mut upkeep, false, &shared).await?;
                }
            }
            Msg::Commit(reply) => {
                let r = commit(&mut sink, &mut upkeep, true, &shared).await;
                let failed = r.is_err();
                shared.publish(&sink);
                let _ = reply.send(r);
                if failed {
                    return Ok(());
                }
            }
            Msg::Finish(reply) => {
                upkeep.finish(sink.name()).await;
                let _ = reply.send(());
            }
        }
        shared.publish(&sink);
    }
}

/// What the task shares with its handle.
struct Shared {
    progress: Arc<Mutex<SinkProgress>>,
    commits: Arc<AtomicU64>,
}

impl Shared {
    fn publish(&self, sink: &TableSink) {
        *self.progress.lock().unwrap_or_else(PoisonError::into_inner) = sink.progress();
    }
}

enum Next {
    Msg(Option<Msg>),
    Due,
}

/// How long until the archive's window is due (zero: it is), `None` while it is empty: the
/// window is due once its oldest event was recorded [`COMMIT_INTERVAL`] ago or, while the
/// derivers work off a backlog, once it has been open that long ([`WindowAge::due`]).
fn due_in(sink: &TableSink, behind: bool) -> Option<Duration> {
    let window = sink.window_age();
    window.due_in(behind, chrono::Utc::now().timestamp_millis(), COMMIT_INTERVAL, COMMIT_INTERVAL)
}

/// Commits the archive with its upkeep before and after; whether a snapshot was made.
async fn commit(
    sink: &mut TableSink,
    upkeep: &mut Upkeep,
    inline: bool,
    shared: &Shared,
) -> Result<bool, EngineError> {
    let made = crate::upkeep::commit_with_upkeep(sink, upkeep, inline).await? > 0;
    if made {
        shared.commits.fetch_add(1, Ordering::AcqRel);
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::example_company;
    use livestate_record::RecordedEvent;
    use livestate_spec::types::{format_timestamp, millis_to_timestamp, parse_timestamp};
    use livestate_spec::Value;

    /// The archive row of a recorded event, one value per column, made from the stored entry:
    /// the oracle the Arrow columns are compared with.
    fn archive_row(ev: &RecordedEvent) -> Vec<Value> {
        let e = &ev.event;
        let recorded = millis_to_timestamp(ev.recorded_at_ms);
        let mut day = format_timestamp(&recorded);
        day.truncate(10);
        vec![
            Value::Int(ev.offset as i64),
            Value::String(e.id.clone()),
            Value::String(e.event_type.clone()),
            Value::String(e.event_type.split('.').next().unwrap_or_default().to_string()),
            parse_timestamp(&e.occurred_at).map_or(Value::Null, Value::Timestamp),
            Value::Timestamp(recorded),
            e.causation.clone().map_or(Value::Null, Value::String),
            Value::String(serde_json::to_string(&e.data).expect("serialising JSON into memory cannot fail")),
            Value::String(day),
        ]
    }

    /// Events of three types, one with a causation, recorded across a day boundary (and at
    /// the epoch's first day), each archived by the Arrow columns and by the row of values.
    #[test]
    fn the_archive_columns_hold_what_the_archive_rows_of_the_same_events_hold() {
        let spec = example_company();
        let schema = Arc::new(
            paimon::arrow::build_target_arrow_schema(crate::schema::archive_schema().unwrap().fields())
                .unwrap(),
        );
        let lines = [
            (
                r#"{"id":"a1","type":"inventory.stock_counted","occurred_at":"2026-03-01T23:59:59.999Z","data":{"item":"bolt","location":"north","on_hand":4}}"#,
                1_772_409_599_999,
            ),
            (
                r#"{"id":"a2","type":"commerce.order_placed","occurred_at":"2026-03-02T00:00:00Z","causation":"a1","data":{"order_id":"o1","line":1,"customer":"c","item":"bolt","location":"north","qty":2,"unit_price":"1.50"}}"#,
                1_772_409_600_000,
            ),
            (
                r#"{"id":"a3","type":"inventory.stock_counted","occurred_at":"1970-01-01T00:00:00Z","data":{"item":"nut \"7\"","location":"south","on_hand":0}}"#,
                5,
            ),
        ];
        let mut batch = ArchiveBatch::new("record.events", Arc::clone(&schema));
        let mut expected = Vec::new();
        for (offset, (line, recorded_at_ms)) in lines.into_iter().enumerate() {
            let event = Event::parse_line(line, &spec).unwrap();
            let stored = event.stored_envelope();
            let recorded = RecordedEvent { offset: offset as u64, recorded_at_ms, event: event.envelope() };
            batch.push(offset as u64, recorded_at_ms, &event, stored.data.as_str());
            expected.push((paimon::spec::RowKind::Insert, archive_row(&recorded)));
        }
        let (got, oldest) = batch.take().unwrap().expect("rows were added");
        assert_eq!(oldest, 1_772_409_599_999, "the first event's recording time");
        assert_eq!(got, crate::rows::to_batch(&schema, &expected).unwrap());
        assert!(batch.take().unwrap().is_none(), "taken: the batch is empty again");
    }
}
