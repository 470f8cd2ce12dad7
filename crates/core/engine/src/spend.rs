//! What a table's freshness costs, measured: the commits and compactions its budget causes, the
//! files and bytes they write and how long they take, over the last hour and since the process
//! started.
//!
//! Each state table's sink holds a [`SpendMeter`]; its commit task adds each commit (the data
//! and changelog files it wrote, and the wall time from handing the window's rows to Paimon to
//! the lookup index being moved), and its upkeep adds each compaction that committed (the files
//! it wrote and its wall time). Beside the wall time, which on a busy machine includes waiting
//! for a core, each commit and compaction counts its CPU time: the thread CPU time of every poll
//! of its future ([`cpu_timed`]), on whichever worker thread ran it. Work a future hands to
//! another thread (a blocking file call) is not in it.
//!
//! Derivation counts too: the CPU time the derivers spend applying a chunk of events (running
//! the mappings, merging each row operation into its table's window, tracking before and after)
//! is measured per chunk and shared among the tables by the row operations each received
//! ([`apportion`]): one event's mappings feed several tables at once, so a share is an
//! attribution, not a separate measurement. Parsing an event is not in it (done once, at
//! append, for every table alike).
//! The derivers publish each table's [`TableSpend`] in their status (`GET /v1/tables`,
//! `/metrics`, `livestate tables`).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What one table spent in some span of time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spend {
    /// Data commits (snapshots of kind APPEND) the derivers made.
    pub commits: u64,
    /// Compactions that committed (snapshots of kind COMPACT).
    pub compactions: u64,
    /// Data, changelog and compacted files written by those commits and compactions.
    pub files_written: u64,
    pub bytes_written: u64,
    /// Wall time of those commits and compactions, in milliseconds.
    pub busy_ms: u64,
    /// CPU time of those commits and compactions and the table's share of derivation, in
    /// microseconds (absent in a status file written before it was measured: 0).
    #[serde(default)]
    pub cpu_us: u64,
    /// Of `cpu_us`, the table's share of derivation: applying events to its window.
    #[serde(default)]
    pub derive_cpu_us: u64,
}

impl Spend {
    fn add(&mut self, o: &Spend) {
        self.commits += o.commits;
        self.compactions += o.compactions;
        self.files_written += o.files_written;
        self.bytes_written += o.bytes_written;
        self.busy_ms += o.busy_ms;
        self.cpu_us += o.cpu_us;
        self.derive_cpu_us += o.derive_cpu_us;
    }
}

/// A table's measured spend, as the derivers publish it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSpend {
    /// The last 60 minutes (or since the start, when the process is younger).
    pub last_hour: Spend,
    /// Since the process started measuring (`since_ms`).
    pub total: Spend,
    /// When measuring started, milliseconds since the epoch.
    pub since_ms: i64,
}

/// Minutes kept for [`TableSpend::last_hour`].
const MINUTES: i64 = 60;

#[derive(Debug, Default)]
struct Meter {
    since_ms: i64,
    total: Spend,
    /// (minute since the epoch, what was spent in it), oldest first, at most [`MINUTES`].
    minutes: VecDeque<(i64, Spend)>,
}

/// One table's meter; clones share it (the commit task and the upkeep add to the same one).
#[derive(Debug, Clone)]
pub(crate) struct SpendMeter(Arc<Mutex<Meter>>);

impl SpendMeter {
    pub fn new(now_ms: i64) -> SpendMeter {
        SpendMeter(Arc::new(Mutex::new(Meter { since_ms: now_ms, ..Default::default() })))
    }

    fn add(&self, now_ms: i64, s: &Spend) {
        let mut m = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        m.total.add(s);
        let minute = now_ms.div_euclid(60_000);
        match m.minutes.back_mut() {
            Some((at, spent)) if *at == minute => spent.add(s),
            _ => m.minutes.push_back((minute, *s)),
        }
        while m.minutes.front().is_some_and(|(at, _)| *at <= minute - MINUTES) {
            m.minutes.pop_front();
        }
    }

    /// CPU time of a commit counted by [`SpendMeter::commit`] (known once its task ends).
    pub fn commit_cpu(&self, now_ms: i64, cpu: Duration) {
        self.add(now_ms, &Spend { cpu_us: micros(cpu), ..Default::default() });
    }

    /// The table's share `cpu` of the CPU time spent applying a chunk of events.
    pub fn derivation(&self, now_ms: i64, cpu: Duration) {
        let us = micros(cpu);
        if us > 0 {
            self.add(now_ms, &Spend { cpu_us: us, derive_cpu_us: us, ..Default::default() });
        }
    }

    /// A data commit that wrote `files` files of `bytes` bytes in `took`.
    pub fn commit(&self, now_ms: i64, files: u64, bytes: u64, took: Duration) {
        let busy_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        self.add(
            now_ms,
            &Spend { commits: 1, files_written: files, bytes_written: bytes, busy_ms, ..Default::default() },
        );
    }

    /// A compaction that committed, writing `files` files of `bytes` bytes in `took` of wall
    /// time and `cpu` of CPU time.
    pub fn compaction(&self, now_ms: i64, files: u64, bytes: u64, took: Duration, cpu: Duration) {
        let busy_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        self.add(
            now_ms,
            &Spend {
                compactions: 1,
                files_written: files,
                bytes_written: bytes,
                busy_ms,
                cpu_us: micros(cpu),
                ..Default::default()
            },
        );
    }

    /// What was spent in the hour before `now_ms`, and in total.
    pub fn read(&self, now_ms: i64) -> TableSpend {
        let m = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let minute = now_ms.div_euclid(60_000);
        let mut last_hour = Spend::default();
        for (_, s) in m.minutes.iter().filter(|(at, _)| *at > minute - MINUTES) {
            last_hour.add(s);
        }
        TableSpend { last_hour, total: m.total, since_ms: m.since_ms }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Runs `f`, returning its output and the CPU time its polls took (see the module doc).
/// `cpu` shared by weight: each share is `cpu × ops[i] / Σ ops` (rounded down to a
/// microsecond); all zero when no operation was counted.
pub(crate) fn apportion(cpu: Duration, ops: &[u64]) -> Vec<Duration> {
    let total: u128 = ops.iter().map(|&o| u128::from(o)).sum();
    ops.iter()
        .map(|&o| {
            if total == 0 {
                return Duration::ZERO;
            }
            let us = cpu.as_micros() * u128::from(o) / total;
            Duration::from_micros(u64::try_from(us).unwrap_or(u64::MAX))
        })
        .collect()
}

pub(crate) async fn cpu_timed<F: Future>(f: F) -> (F::Output, Duration) {
    let mut f = std::pin::pin!(f);
    let mut cpu = Duration::ZERO;
    let out = std::future::poll_fn(|cx| {
        let before = thread_cpu();
        let r = f.as_mut().poll(cx);
        cpu += thread_cpu().saturating_sub(before);
        r
    })
    .await;
    (out, cpu)
}

/// The calling thread's CPU time so far (zero where the platform has no such clock).
fn thread_cpu() -> Duration {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid timespec for the call to write; the clock id is a constant.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return Duration::new(
                u64::try_from(ts.tv_sec).unwrap_or(0),
                u32::try_from(ts.tv_nsec).unwrap_or(0),
            );
        }
    }
    Duration::ZERO
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    #[test]
    fn the_last_hour_drops_what_was_spent_more_than_sixty_minutes_ago_and_the_total_keeps_it() {
        let start = 1_000 * MIN;
        let m = SpendMeter::new(start);
        m.commit(start, 2, 1_000, Duration::from_millis(5));
        m.commit(start + 10, 1, 500, Duration::from_millis(3));
        m.compaction(start + 30 * MIN, 1, 1_200, Duration::from_millis(40), Duration::from_millis(30));
        m.commit_cpu(start + 10, Duration::from_micros(2_500));
        let r = m.read(start + 30 * MIN);
        assert_eq!(
            r.last_hour,
            Spend {
                commits: 2,
                compactions: 1,
                files_written: 4,
                bytes_written: 2_700,
                busy_ms: 48,
                cpu_us: 32_500,
                derive_cpu_us: 0,
            }
        );
        assert_eq!((r.total, r.since_ms), (r.last_hour, start));
        // An hour after the first two commits' minute, only the compaction is in the last hour.
        let r = m.read(start + 60 * MIN);
        assert_eq!(
            r.last_hour,
            Spend {
                compactions: 1,
                files_written: 1,
                bytes_written: 1_200,
                busy_ms: 40,
                cpu_us: 30_000,
                ..Default::default()
            }
        );
        assert_eq!(r.total.commits, 2);
        // Adding much later drops the old minutes from the meter itself (it stays bounded).
        m.commit(start + 200 * MIN, 1, 1, Duration::ZERO);
        assert_eq!(m.0.lock().unwrap().minutes.len(), 1);
        assert_eq!(m.read(start + 200 * MIN).last_hour.commits, 1);
        assert_eq!(m.read(start + 200 * MIN).total.commits, 3);
    }

    #[test]
    fn derivation_cpu_is_shared_by_the_row_operations_each_table_received() {
        let shares = apportion(Duration::from_micros(1_000), &[3, 1, 0]);
        assert_eq!(shares, vec![Duration::from_micros(750), Duration::from_micros(250), Duration::ZERO]);
        assert_eq!(apportion(Duration::from_millis(5), &[0, 0]), vec![Duration::ZERO; 2]);
        let m = SpendMeter::new(0);
        m.derivation(1_000, shares[0]);
        m.derivation(2_000, Duration::ZERO);
        m.commit_cpu(3_000, Duration::from_micros(250));
        let spent = m.read(4_000).total;
        assert_eq!((spent.cpu_us, spent.derive_cpu_us), (1_000, 750), "derivation is part of the CPU time");
    }

    #[tokio::test]
    async fn a_futures_cpu_time_counts_its_polls_and_not_its_waits() {
        // Spins until the thread has had 20 ms of CPU (not of wall time: on a loaded machine
        // the thread is not running for all of a wall-clock spin).
        let busy = || {
            let t = thread_cpu();
            let mut x = 0u64;
            while thread_cpu() - t < Duration::from_millis(20) {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            x
        };
        let ((), cpu) = cpu_timed(async {
            busy();
            tokio::time::sleep(Duration::from_millis(100)).await;
            busy();
        })
        .await;
        assert!(cpu >= Duration::from_millis(30), "{cpu:?}: two 20 ms spins");
        assert!(cpu < Duration::from_millis(90), "{cpu:?}: the 100 ms sleep is not CPU time");
    }
}
