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
//! least once a minute while commits happen; a table that does not commit still expires once
//! a minute while the record is followed, so its snapshots and tags (a proposal's pins among
//! them) go when their retention ends, not at its next event. Expiry never takes the commit
//! lock.
//! Maintenance failures are logged and reported, never fatal to derivation: the state is
//! still correct, only less compact.

use std::time::{Duration, Instant};

use livestate_lsm::{CompactMode, CompactReport, ExpireReport, LsmError, Maintainer};

use crate::error::EngineError;
use crate::sink::TableSink;
use crate::spend::{cpu_timed, SpendMeter};
use livestate_spec::Freshness;
use tokio::task::JoinHandle;

/// Expiry runs at least this often per table while it commits (and at most once per commit
/// interval); and this often while it does not.
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

/// Collects `sink`'s running commit when it has finished (or waits for it, `wait`), with the
/// upkeep `upkeep` asks after it (`inline`: in place, at catch-up and shutdown); the snapshots
/// made (0 or 1). A sink that commits in place (the archive) has none running.
///
/// # Errors
/// The running commit failed.
pub(crate) async fn collect_with_upkeep(
    sink: &mut TableSink,
    upkeep: &mut Upkeep,
    wait: bool,
    inline: bool,
) -> Result<u64, EngineError> {
    if !wait && !sink.commit_finished() {
        return Ok(0);
    }
    let made = sink.finish_commit().await?.is_some();
    if made {
        upkeep.after_commit(sink.maintainer(), inline).await;
    }
    Ok(u64::from(made))
}

/// Commits everything `sink` has pending and waits for it, with the upkeep `upkeep` asks before
/// and after, the one way a table commits with its upkeep (state tables and the archive alike):
/// a commit still running is collected first, with its own upkeep after it. The snapshots
/// made (the running commit's and this one).
///
/// # Errors
/// Paimon and index errors of either commit.
pub(crate) async fn commit_with_upkeep(
    sink: &mut TableSink,
    upkeep: &mut Upkeep,
    inline: bool,
) -> Result<u64, EngineError> {
    let mut made = collect_with_upkeep(sink, upkeep, true, false).await?;
    upkeep.before_commit(sink.maintainer()).await;
    if sink.commit().await?.is_some() {
        made += 1;
        upkeep.after_commit(sink.maintainer(), inline).await;
    }
    Ok(made)
}

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
    /// When this upkeep began (a quiet table's first expiry is a minute after).
    since: Instant,
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
            since: Instant::now(),
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
        self.collect_expiry(m.name()).await;
    }

    /// Records the background expiry's outcome once it has finished.
    async fn collect_expiry(&mut self, name: &str) {
        if let Some(h) = self.expiring.take_if(|h| h.is_finished()) {
            let r = h.await;
            self.record(name, "expiry", r);
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
        if self.expiry_due(Instant::now(), true) {
            self.expire(m, inline).await;
        }
    }

    /// Between commits, while the record is followed: starts the expiry a table that has not
    /// committed for a while is due ([`Upkeep::expiry_due`]), in the background.
    pub async fn when_idle(&mut self, m: &Maintainer) {
        self.collect_expiry(m.name()).await;
        if self.expiry_due(Instant::now(), false) {
            self.expire(m, false).await;
        }
    }

    /// Whether an expiry is due at `now`, right after a commit (`committed`) or between
    /// commits: never while one runs; after a commit, once the table's expiry interval has
    /// passed since the last (the first commit expires at once); between commits, once a
    /// minute has passed since the last expiry (or since the upkeep began).
    fn expiry_due(&self, now: Instant, committed: bool) -> bool {
        if self.expiring.is_some() {
            return false;
        }
        let since_last = |from: Instant| now.saturating_duration_since(from);
        match (committed, self.last_expire) {
            (true, None) => true,
            (true, Some(last)) => since_last(last) >= self.expire_every,
            (false, last) => since_last(last.unwrap_or(self.since)) >= EXPIRE_AT_MOST_EVERY,
        }
    }

    /// Starts an expiry of `m`'s snapshots and tags: in place (`inline`) or on a task.
    async fn expire(&mut self, m: &Maintainer, inline: bool) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn upkeep(freshness: &str) -> Upkeep {
        let f: Freshness = freshness.parse().unwrap();
        Upkeep::new(&f, SpendMeter::new(0))
    }

    #[test]
    fn the_first_commit_expires_at_once_and_later_ones_once_per_commit_interval() {
        // A 40 s budget commits every 5 s.
        let mut u = upkeep("40s");
        let t0 = u.since;
        assert!(u.expiry_due(t0, true));
        u.last_expire = Some(t0);
        assert!(!u.expiry_due(t0 + Duration::from_secs(4), true));
        assert!(u.expiry_due(t0 + Duration::from_secs(5), true));
    }

    #[test]
    fn a_short_budget_expires_at_most_once_a_second() {
        let mut short = upkeep("200ms");
        let t0 = short.since;
        short.last_expire = Some(t0);
        assert!(!short.expiry_due(t0 + Duration::from_millis(900), true));
        assert!(short.expiry_due(t0 + Duration::from_secs(1), true));
    }

    #[test]
    fn a_long_budget_expires_at_least_once_a_minute() {
        let mut long = upkeep("1h");
        let t0 = long.since;
        long.last_expire = Some(t0);
        assert!(!long.expiry_due(t0 + Duration::from_secs(59), true));
        assert!(long.expiry_due(t0 + Duration::from_secs(60), true));
    }

    #[test]
    fn a_table_that_does_not_commit_expires_once_a_minute() {
        let mut u = upkeep("1s");
        let t0 = u.since;
        // Not at once after a start (the first commit, or a minute, comes first) ...
        assert!(!u.expiry_due(t0, false));
        assert!(!u.expiry_due(t0 + Duration::from_secs(59), false));
        assert!(u.expiry_due(t0 + Duration::from_secs(60), false));
        // ... and a minute after the last expiry, whatever the commit interval.
        u.last_expire = Some(t0 + Duration::from_secs(60));
        assert!(!u.expiry_due(t0 + Duration::from_secs(61), false));
        assert!(u.expiry_due(t0 + Duration::from_secs(120), false));
    }

    #[tokio::test]
    async fn no_expiry_is_due_while_one_runs() {
        let mut u = upkeep("1s");
        let t0 = u.since;
        u.expiring = Some(tokio::spawn(std::future::pending()));
        assert!(!u.expiry_due(t0 + Duration::from_secs(3600), true));
        assert!(!u.expiry_due(t0 + Duration::from_secs(3600), false));
        u.expiring.take().unwrap().abort();
    }
}
