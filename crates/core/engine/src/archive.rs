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

use livestate_spec::{Freshness, Value};
use paimon::spec::RowKind;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::error::EngineError;
use crate::sink::{SinkProgress, TableSink};
use crate::upkeep::Upkeep;

/// How often the archive commits.
pub(crate) const COMMIT_INTERVAL: Duration = Duration::from_secs(1);

/// Chunks handed over and not yet taken by the task: the derivers wait beyond this.
const QUEUED_CHUNKS: usize = 2;

/// One event's archive row and when it was recorded.
pub(crate) type ArchiveRow = (i64, Vec<Value>);

enum Msg {
    /// Rows of consecutive events; every event below `end` has now been handed over.
    /// `behind`: the derivers are working off a backlog (see `WindowAge::due`).
    Rows { rows: Vec<ArchiveRow>, end: u64, behind: bool },
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
    /// Snapshots the task has committed, and how many of them [`Archive::take_commits`] gave.
    commits: Arc<AtomicU64>,
    counted: u64,
}

impl Archive {
    /// Starts the task that owns `sink` (positioned where its last commit left off).
    pub fn start(sink: TableSink) -> Archive {
        let position = sink.position();
        let progress = Arc::new(Mutex::new(sink.progress()));
        let (tx, rx) = mpsc::channel(QUEUED_CHUNKS);
        let upkeep = Upkeep::new(&Freshness::Within(COMMIT_INTERVAL * 2), sink.spend.clone());
        let commits = Arc::new(AtomicU64::new(0));
        let shared = Shared { progress: Arc::clone(&progress), commits: Arc::clone(&commits) };
        let task = tokio::spawn(run(sink, upkeep, rx, shared));
        Archive { tx, task: Some(task), progress, position, commits, counted: 0 }
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

    /// Hands over the rows of the events below `end` not handed over yet (in offset order).
    ///
    /// # Errors
    /// The task's error when it has stopped.
    pub async fn hand_over(
        &mut self,
        rows: Vec<ArchiveRow>,
        end: u64,
        behind: bool,
    ) -> Result<(), EngineError> {
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
                for (recorded_at_ms, row) in rows {
                    sink.push((RowKind::Insert, row), recorded_at_ms).await?;
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
                upkeep.finish(&sink.name).await;
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
    upkeep.before_commit(&sink.maintainer).await;
    let made = sink.commit().await?.is_some();
    if made {
        shared.commits.fetch_add(1, Ordering::AcqRel);
        upkeep.after_commit(&sink.maintainer, inline).await;
    }
    Ok(made)
}
