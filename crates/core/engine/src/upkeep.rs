//! Table upkeep driven by freshness budgets: when each table compacts and expires.
//!
//! | budget            | compaction                                              |
//! |-------------------|---------------------------------------------------------|
//! | under a minute    | in the background after each commit; commits only wait  |
//! |                   | when the bucket's sorted runs reach the stop trigger     |
//! | a minute or more  | right after a commit, when universal compaction picks   |
//! | nightly           | a full compaction right after the nightly commit        |
//!
//! `full-compaction.delta-commits` turns every n-th compaction into a full one. Expiry runs
//! after a commit, at most once per commit interval (but not more than once a second) and at
//! least once a minute while commits happen; it never takes the commit lock.
//! Maintenance failures are logged and reported, never fatal to derivation: the state is
//! still correct, only less compact.

use std::time::{Duration, Instant};

use livestate_lsm::{CompactMode, CompactReport, ExpireReport, LsmError, Maintainer};

use crate::spend::{cpu_timed, SpendMeter};
use livestate_spec::Freshness;
use tokio::task::JoinHandle;

/// Expiry runs at most this often per table (and at most once per commit interval).
const EXPIRE_AT_MOST_EVERY: Duration = Duration::from_secs(60);

/// ... and at most once a second (short budgets commit several times a second).
const EXPIRE_AT_LEAST_EVERY: Duration = Duration::from_secs(1);

/// Budgets below this compact in the background.
const BACKGROUND_BELOW: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cadence {
    Background,
    AfterCommit,
    Nightly,
}

impl Cadence {
    pub fn of(f: &Freshness) -> Cadence {
        match f {
            Freshness::Within(d) if *d < BACKGROUND_BELOW => Cadence::Background,
            Freshness::Within(_) => Cadence::AfterCommit,
            Freshness::Nightly { .. } => Cadence::Nightly,
        }
    }
}

/// A compaction's outcome, its wall time and its CPU time.
type Compacted = ((Result<CompactReport, LsmError>, Duration), Duration);

pub(crate) struct Upkeep {
    cadence: Cadence,
    expire_every: Duration,
    /// The running background compaction, with when it started.
    compacting: Option<JoinHandle<Compacted>>,
    expiring: Option<JoinHandle<Result<ExpireReport, LsmError>>>,
    /// Data commits since the running background compaction started.
    commits_while_compacting: usize,
    commits_since_full: u64,
    last_expire: Option<Instant>,
    /// The latest maintenance failure, for status reporting.
    pub last_error: Option<String>,
    /// Counts each compaction that committed.
    spend: SpendMeter,
}

impl Upkeep {
    pub fn new(freshness: &Freshness, spend: SpendMeter) -> Upkeep {
        Upkeep {
            cadence: Cadence::of(freshness),
            expire_every: freshness
                .commit_interval()
                .map_or(EXPIRE_AT_MOST_EVERY, |i| i.clamp(EXPIRE_AT_LEAST_EVERY, EXPIRE_AT_MOST_EVERY)),
            compacting: None,
            expiring: None,
            commits_while_compacting: 0,
            commits_since_full: 0,
            last_expire: None,
            last_error: None,
            spend,
        }
    }

    fn record<T>(&mut self, name: &str, what: &str, r: Result<Result<T, LsmError>, tokio::task::JoinError>) {
        let err = match r {
            Ok(Ok(_)) => return,
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        tracing::warn!(table = name, "{what} failed: {err}");
        self.last_error = Some(format!("{what}: {err}"));
    }

    /// A compaction's outcome: counted when it committed, recorded when it failed.
    fn compacted(&mut self, name: &str, r: Result<Compacted, tokio::task::JoinError>) {
        let r = r.map(|((r, took), cpu)| {
            r.inspect(|report| {
                if report.snapshot_id.is_some() {
                    let bytes = u64::try_from(report.bytes_out).unwrap_or(0);
                    let now = chrono::Utc::now().timestamp_millis();
                    self.spend.compaction(now, report.files_out as u64, bytes, took, cpu);
                }
            })
        });
        self.record(name, "compaction", r);
    }

    /// Collects finished background work; waits for a running compaction when the table's
    /// sorted runs may have reached `num-sorted-run.stop-trigger` (each data commit adds at
    /// most one run per bucket), so a write-heavy table cannot outrun its compaction.
    pub async fn before_commit(&mut self, m: &Maintainer) {
        let opts = m.compaction_options();
        let must_wait = opts.trigger + self.commits_while_compacting >= opts.stop_trigger;
        if let Some(h) = self.compacting.take_if(|h| must_wait || h.is_finished()) {
            let r = h.await;
            self.compacted(m.name(), r);
            self.commits_while_compacting = 0;
        }
        if let Some(h) = self.expiring.take_if(|h| h.is_finished()) {
            let r = h.await;
            self.record(m.name(), "expiry", r);
        }
    }

    fn mode(&mut self, m: &Maintainer) -> CompactMode {
        self.commits_since_full += 1;
        match m.compaction_options().full_delta_commits {
            Some(n) if self.commits_since_full >= n => {
                self.commits_since_full = 0;
                CompactMode::Full
            }
            _ => CompactMode::Auto,
        }
    }

    /// After a data commit: compacts as the table's budget says and starts an expiry when one
    /// is due. `inline` runs background work in place (catch-up and shutdown).
    pub async fn after_commit(&mut self, m: &Maintainer, inline: bool) {
        let mode = match self.cadence {
            Cadence::Nightly => CompactMode::Full,
            _ => self.mode(m),
        };
        if self.cadence == Cadence::Background && !inline {
            if self.compacting.is_some() {
                self.commits_while_compacting += 1;
            } else {
                let m = m.clone();
                self.compacting = Some(tokio::spawn(cpu_timed(async move {
                    let started = Instant::now();
                    let r = m.compact(mode, |_, _| {}).await;
                    (r, started.elapsed())
                })));
            }
        } else {
            let r = cpu_timed(async {
                let started = Instant::now();
                let r = m.compact(mode, |_, _| {}).await;
                (r, started.elapsed())
            })
            .await;
            self.compacted(m.name(), Ok(r));
        }
        if self.last_expire.is_none_or(|t| t.elapsed() >= self.expire_every) && self.expiring.is_none() {
            self.last_expire = Some(Instant::now());
            let name = m.name().to_string();
            let m = m.clone();
            let task = async move { m.expire(chrono::Utc::now().timestamp_millis(), |_, _| {}).await };
            if inline {
                let r = task.await;
                self.record(&name, "expiry", Ok(r));
            } else {
                self.expiring = Some(tokio::spawn(task));
            }
        }
    }

    /// Waits for background work (at shutdown).
    pub async fn finish(&mut self, name: &str) {
        if let Some(h) = self.compacting.take() {
            let r = h.await;
            self.compacted(name, r);
        }
        if let Some(h) = self.expiring.take() {
            let r = h.await;
            self.record(name, "expiry", r);
        }
    }
}
