//! The one loop that keeps a directory's tables current while a process runs: follow the
//! record, commit each table when its freshness budget asks, answer consistency barriers, and
//! publish the derivers' progress; when asked to stop, derive and commit everything recorded
//! and write the status. `livestate derive` (without `--once`) and `livestate serve` both run it.

use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};

use crate::derive::{Barrier, DeriveReport, Derivers, CATCH_UP_COMMIT_EVENTS};
use crate::error::EngineError;
use crate::Livestate;

/// How long the loop waits for news when the record has nothing new (an append in this process
/// or a barrier wakes it sooner).
const IDLE_WAIT: Duration = Duration::from_millis(50);

/// How often the status file is written for other processes (this process's readers see every
/// step's progress at once).
const STATUS_FILE_EVERY: Duration = Duration::from_secs(1);

/// A request to commit `tables` through one offset at or past `target` (a consistent read).
pub struct BarrierRequest {
    pub tables: Vec<String>,
    pub target: u64,
    pub reply: oneshot::Sender<Result<Barrier, EngineError>>,
}

/// What the loop listens to besides the record.
pub struct Follow {
    /// Stops the loop once it turns `true`, between steps, never inside one: a step dropped
    /// halfway would leave events applied that its position does not count.
    pub stop: watch::Receiver<bool>,
    /// Raised by appends in this process, so the loop does not wait out its idle pause.
    pub head: Option<watch::Receiver<u64>>,
    /// Consistency barriers to answer between steps.
    pub barriers: Option<mpsc::Receiver<BarrierRequest>>,
}

impl Follow {
    /// A loop that only stops on `stop`.
    pub fn until(stop: watch::Receiver<bool>) -> Follow {
        Follow { stop, head: None, barriers: None }
    }
}

impl Livestate {
    /// Runs `derivers` until `follow.stop` turns `true`, then derives and commits everything
    /// recorded up to the head, waits for background upkeep and writes the status. Returns
    /// what that last catch-up did.
    ///
    /// # Errors
    /// As [`Derivers::step`]: what was committed before the error stays committed and a restart
    /// resumes from there. A barrier's own error goes to its requester, not here.
    pub async fn follow(&self, derivers: &mut Derivers, follow: Follow) -> Result<DeriveReport, EngineError> {
        let Follow { mut stop, mut head, mut barriers } = follow;
        // Receipts need the derivers' progress from the first request on: without a published
        // status every read would load the status file from disk until the first step that
        // moves (7.5 % of a server's CPU right after a start, in a profile of point reads).
        self.publish_status(derivers.status(&self.record)?);
        let mut last_file = Instant::now();
        let mut waiting: Option<BarrierRequest> = None;
        loop {
            if *stop.borrow() {
                break;
            }
            let step = derivers.step(&self.record, &self.spec).await?;
            let mut moved = step.events > 0 || step.commits > 0;
            while let Some(req) = waiting.take().or_else(|| barriers.as_mut().and_then(|b| b.try_recv().ok()))
            {
                let answer = derivers.barrier(&self.record, &self.spec, &req.tables, req.target).await;
                let _ = req.reply.send(answer);
                moved = true;
            }
            let file_due = last_file.elapsed() >= STATUS_FILE_EVERY;
            if moved || file_due {
                let status = derivers.status(&self.record)?;
                if file_due {
                    status.store(&self.layout)?;
                    last_file = Instant::now();
                }
                self.publish_status(status);
            }
            if step.events == 0 {
                let head_changed = async {
                    match head.as_mut() {
                        Some(h) => {
                            let _ = h.changed().await;
                        }
                        None => std::future::pending().await,
                    }
                };
                let barrier = async {
                    match barriers.as_mut() {
                        Some(b) => b.recv().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = tokio::time::sleep(IDLE_WAIT) => {}
                    _ = head_changed => {}
                    _ = stop.changed() => {}
                    req = barrier => waiting = req,
                }
            }
        }
        if let Some(b) = barriers.as_mut() {
            b.close();
        }
        // Everything recorded, up to the record's head, is derived and committed.
        let report = derivers.catch_up(&self.record, &self.spec, CATCH_UP_COMMIT_EVENTS, &mut |_| {}).await?;
        derivers.finish().await;
        let status = derivers.status(&self.record)?;
        status.store(&self.layout)?;
        self.publish_status(status);
        Ok(report)
    }
}
