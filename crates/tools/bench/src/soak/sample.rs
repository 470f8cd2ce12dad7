//! What the sampler sees every few seconds, and the memory and lag figures made from it.

use std::str::FromStr;
use std::time::Instant;

use livestate_client::{Client, TableInfo};
use serde::{Deserialize, Serialize};

use super::{tally, Shared, FLAT_FRACTION, FLAT_MIB};
use crate::memory::{pss_kib, pss_parts, tree, PssParts};

/// The server's memory over the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Memory {
    /// Seconds since the measured run started, and the PSS of the server's process tree in MiB.
    pub samples: Vec<(f64, f64)>,
    /// Length of the warm-up and of each compared window (a minute, or a fifth of a shorter run).
    pub window_seconds: f64,
    /// Mean PSS in the first window after the warm-up.
    pub first_window_mib: f64,
    /// Mean PSS in the last window.
    pub last_window_mib: f64,
    pub growth_mib: f64,
    pub growth_fraction: f64,
    /// Least-squares slope of PSS after the warm-up, MiB per minute.
    pub slope_mib_per_minute: f64,
    /// The same over the second half of the run only: near zero when memory rose to a ceiling
    /// (caches and buffers filling) and stayed, positive when it keeps growing.
    #[serde(default)]
    pub second_half_slope_mib_per_minute: f64,
    pub peak_mib: f64,
    /// Growth within [`FLAT_MIB`] or [`FLAT_FRACTION`], whichever allows more.
    pub flat: bool,
    /// Seconds since the measured run started, and what the server's embedded stores held in
    /// memory (block caches and unflushed writes, as `GET /v1/health` reports them) in MiB.
    #[serde(default)]
    pub store_samples: Vec<(f64, f64)>,
    /// Mean of the stores' memory in the first window after the warm-up.
    #[serde(default)]
    pub stores_first_window_mib: f64,
    /// Mean of the stores' memory in the last window.
    #[serde(default)]
    pub stores_last_window_mib: f64,
    /// Seconds since the measured run started, and the heap in use (allocated, not freed) as
    /// `GET /v1/health` reports it, in MiB; empty when the server does not count it.
    #[serde(default)]
    pub heap_samples: Vec<(f64, f64)>,
    /// Mean heap in use in the first window after the warm-up.
    #[serde(default)]
    pub heap_first_window_mib: f64,
    /// Mean heap in use in the last window.
    #[serde(default)]
    pub heap_last_window_mib: f64,
    /// Seconds since the measured run started, and the anonymous part of the PSS (heap, stacks,
    /// memory the allocator holds) in MiB; empty on a kernel that does not split the PSS.
    #[serde(default)]
    pub anon_samples: Vec<(f64, f64)>,
    #[serde(default)]
    pub anon_first_window_mib: f64,
    #[serde(default)]
    pub anon_last_window_mib: f64,
    /// The same for the file-backed part (the binary's code and libraries as far as they were
    /// paged in, mapped files).
    #[serde(default)]
    pub file_samples: Vec<(f64, f64)>,
    #[serde(default)]
    pub file_first_window_mib: f64,
    #[serde(default)]
    pub file_last_window_mib: f64,
}

/// One table's lag over the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TableLag {
    pub table: String,
    pub budget: String,
    /// The budget in milliseconds; `None` for a nightly budget (its allowance moves).
    pub budget_ms: Option<u64>,
    pub samples: u64,
    pub max_lag_ms: u64,
    /// Samples whose receipt said the table was outside its budget.
    pub over_budget_samples: u64,
    pub snapshots_at_end: u64,
    pub tags_at_end: u64,
}

impl TableLag {
    /// Within budget at every sample.
    pub fn within_budget(&self) -> bool {
        self.over_budget_samples == 0
    }
}

/// One look at the server: when, its memory, and every table's receipt and health.
pub(super) struct Sample {
    at: f64,
    pss_mib: f64,
    /// Block caches and unflushed writes of the server's embedded stores.
    stores_mib: f64,
    /// Heap in use, when the server counts it.
    heap_mib: Option<f64>,
    /// The PSS split into anonymous and file-backed memory, where the kernel reports it.
    parts_mib: Option<(f64, f64)>,
    tables: Vec<TableInfo>,
}

pub(super) async fn sample(server_pid: u32, agent: &Client, start: Instant, t: &Shared) -> Option<Sample> {
    let pids = tree(server_pid);
    let pss: u64 = pids.iter().copied().filter_map(pss_kib).sum();
    let parts = pids.iter().map(|p| pss_parts(*p)).sum::<Option<PssParts>>();
    let begin = Instant::now();
    let answer = agent.tables().await;
    let took = begin.elapsed();
    let health = agent.health().await;
    let mut t = tally(t);
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let (stores_mib, heap_mib) = match health {
        Ok(h) => (mib(h.stores.total_bytes()), h.heap_live_bytes.map(mib)),
        Err(e) => {
            t.error("health", e);
            return None;
        }
    };
    match answer {
        Ok(tables) => {
            t.counts.samples += 1;
            t.tables.push(took);
            Some(Sample {
                at: start.elapsed().as_secs_f64(),
                pss_mib: pss as f64 / 1024.0,
                stores_mib,
                heap_mib,
                parts_mib: parts.map(|p| (p.anon_kib as f64 / 1024.0, p.file_kib as f64 / 1024.0)),
                tables,
            })
        }
        Err(e) => {
            t.error("tables", e);
            None
        }
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Memory figures from `(seconds, MiB)` samples of a run `seconds` long.
pub(super) fn memory(samples: &[Sample], seconds: f64) -> Memory {
    let points: Vec<(f64, f64)> = samples.iter().map(|s| (s.at, s.pss_mib)).collect();
    let stores: Vec<(f64, f64)> = samples.iter().map(|s| (s.at, s.stores_mib)).collect();
    let heap: Vec<(f64, f64)> = samples.iter().filter_map(|s| Some((s.at, s.heap_mib?))).collect();
    let mut m = memory_of(points, stores, heap, seconds);
    let window = m.window_seconds;
    let anon: Vec<(f64, f64)> = samples.iter().filter_map(|s| Some((s.at, s.parts_mib?.0))).collect();
    let file: Vec<(f64, f64)> = samples.iter().filter_map(|s| Some((s.at, s.parts_mib?.1))).collect();
    m.anon_first_window_mib = window_mean(&anon, window, 2.0 * window);
    m.anon_last_window_mib = window_mean(&anon, seconds - window, seconds);
    m.anon_samples = anon;
    m.file_first_window_mib = window_mean(&file, window, 2.0 * window);
    m.file_last_window_mib = window_mean(&file, seconds - window, seconds);
    m.file_samples = file;
    m
}

/// Mean of the samples taken between `from` and `to` seconds.
fn window_mean(points: &[(f64, f64)], from: f64, to: f64) -> f64 {
    mean(&points.iter().filter(|(at, _)| *at >= from && *at <= to).map(|(_, m)| *m).collect::<Vec<_>>())
}

/// Length of the warm-up and of each compared window in a run `seconds` long.
fn window_of(seconds: f64) -> f64 {
    (seconds / 5.0).min(60.0)
}

/// Memory figures from `(seconds, MiB)` samples of PSS, the stores' memory and the heap in use.
fn memory_of(
    points: Vec<(f64, f64)>,
    stores: Vec<(f64, f64)>,
    heap: Vec<(f64, f64)>,
    seconds: f64,
) -> Memory {
    let window = window_of(seconds);
    let first = window_mean(&points, window, 2.0 * window);
    let last = window_mean(&points, seconds - window, seconds);
    let growth = last - first;
    let fraction = if first > 0.0 { growth / first } else { 0.0 };
    let slope_from = |from: f64| {
        let after: Vec<(f64, f64)> = points.iter().copied().filter(|(at, _)| *at >= from).collect();
        let (mx, my) = (
            mean(&after.iter().map(|p| p.0).collect::<Vec<_>>()),
            mean(&after.iter().map(|p| p.1).collect::<Vec<_>>()),
        );
        let sxx: f64 = after.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
        let sxy: f64 = after.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
        if sxx > 0.0 {
            sxy / sxx * 60.0
        } else {
            0.0
        }
    };
    let slope = slope_from(window);
    Memory {
        window_seconds: window,
        first_window_mib: first,
        last_window_mib: last,
        growth_mib: growth,
        growth_fraction: fraction,
        slope_mib_per_minute: slope,
        second_half_slope_mib_per_minute: slope_from(seconds / 2.0),
        peak_mib: points.iter().map(|(_, m)| *m).fold(0.0, f64::max),
        flat: first > 0.0 && growth <= FLAT_MIB.max(FLAT_FRACTION * first),
        samples: points,
        stores_first_window_mib: window_mean(&stores, window, 2.0 * window),
        stores_last_window_mib: window_mean(&stores, seconds - window, seconds),
        store_samples: stores,
        heap_first_window_mib: window_mean(&heap, window, 2.0 * window),
        heap_last_window_mib: window_mean(&heap, seconds - window, seconds),
        heap_samples: heap,
        ..Memory::default()
    }
}

/// Each table's largest lag and how often it was over budget, from the samples' receipts.
pub(super) fn lags(samples: &[Sample]) -> Vec<TableLag> {
    let mut out: Vec<TableLag> = Vec::new();
    for s in samples {
        for info in &s.tables {
            let (name, receipt) = (info.name.clone(), &info.receipt);
            let budget = receipt.budget.clone();
            let i = match out.iter().position(|l| l.table == name) {
                Some(i) => i,
                None => {
                    let budget_ms = match livestate_spec::Freshness::from_str(&budget) {
                        Ok(livestate_spec::Freshness::Within(d)) => Some(d.as_millis() as u64),
                        _ => None,
                    };
                    out.push(TableLag {
                        table: name,
                        budget,
                        budget_ms,
                        samples: 0,
                        max_lag_ms: 0,
                        over_budget_samples: 0,
                        snapshots_at_end: 0,
                        tags_at_end: 0,
                    });
                    out.len() - 1
                }
            };
            let l = &mut out[i];
            l.samples += 1;
            l.max_lag_ms = l.max_lag_ms.max(receipt.lag_ms.unwrap_or(0));
            l.over_budget_samples += u64::from(receipt.within_budget == Some(false));
            l.snapshots_at_end = info.health.snapshots as u64;
            l.tags_at_end = info.health.tags.len() as u64;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn memory_compares_the_first_window_after_warm_up_with_the_last() {
        // 10 minutes sampled every 5 s: 100 MiB during the warm-up minute, then a steady 120 MiB.
        let flat: Vec<(f64, f64)> =
            (0..=120).map(|i| (i as f64 * 5.0, if i < 12 { 100.0 } else { 120.0 })).collect();
        let m = memory_of(flat, Vec::new(), Vec::new(), 600.0);
        assert_eq!(m.window_seconds, 60.0);
        assert_eq!((m.first_window_mib, m.last_window_mib, m.growth_mib), (120.0, 120.0, 0.0));
        assert!(m.flat && m.slope_mib_per_minute.abs() < 1e-9, "{m:?}");
        // A leak of 10 MiB a minute after the warm-up is not flat.
        let leak: Vec<(f64, f64)> =
            (0..=120).map(|i| (i as f64 * 5.0, 100.0 + i as f64 * 5.0 / 6.0)).collect();
        // The stores' share is averaged over the same windows: here they fill from 10 to 40 MiB,
        // so they account for 30 of the leak's ~80 MiB.
        let stores: Vec<(f64, f64)> =
            (0..=120).map(|i| (i as f64 * 5.0, 10.0 + (i as f64 / 2.0).min(30.0))).collect();
        let m = memory_of(leak, stores, Vec::new(), 600.0);
        assert!(!m.flat, "{m:?}");
        assert_eq!(m.stores_last_window_mib, 40.0, "{m:?}");
        assert_eq!(m.stores_first_window_mib, 19.0, "{m:?}");
        assert!((m.slope_mib_per_minute - 10.0).abs() < 1e-6, "{m:?}");
        assert!((m.second_half_slope_mib_per_minute - 10.0).abs() < 1e-6, "{m:?}");
        // Caches filling for four minutes to a ceiling: not flat by the windows, but the second
        // half does not grow.
        let ceiling: Vec<(f64, f64)> =
            (0..=120).map(|i| (i as f64 * 5.0, 100.0 + (i.min(48) as f64) * 2.5)).collect();
        let m = memory_of(ceiling, Vec::new(), Vec::new(), 600.0);
        assert!(!m.flat && m.slope_mib_per_minute > 0.0, "{m:?}");
        assert!(m.second_half_slope_mib_per_minute.abs() < 1e-9, "{m:?}");
    }

    #[test]
    fn lags_keep_each_tables_largest_lag_and_count_samples_over_budget() {
        let table = |lag: u64, within: bool| -> TableInfo {
            serde_json::from_value(json!({
                "name": "stock", "derived_by": "livestate", "merge_engine": "partial-update", "buckets": "4",
                "receipt": {"table": "stock", "snapshot_id": 3, "offset": 10, "committed_at": null,
                            "lag_ms": lag, "budget": "1s", "within_budget": within,
                            "measured_by": "record", "served_by": "paimon"},
                "total_rows_in_files": null,
                "health": {"latest_snapshot": 3, "earliest_snapshot": 1, "snapshots": 3, "buckets": [],
                           "tags": [{"name": "t", "snapshot_id": 2}]},
                "quarantined": 0, "last_quarantined": null, "spend": null,
            }))
            .unwrap()
        };
        let samples = vec![
            Sample {
                at: 0.0,
                pss_mib: 1.0,
                stores_mib: 0.0,
                heap_mib: None,
                parts_mib: None,
                tables: vec![table(200, true)],
            },
            Sample {
                at: 5.0,
                pss_mib: 1.0,
                stores_mib: 0.0,
                heap_mib: None,
                parts_mib: None,
                tables: vec![table(1500, false)],
            },
            Sample {
                at: 10.0,
                pss_mib: 1.0,
                stores_mib: 0.0,
                heap_mib: None,
                parts_mib: None,
                tables: vec![table(0, true)],
            },
        ];
        let l = lags(&samples);
        assert_eq!(l.len(), 1);
        assert_eq!(
            (l[0].budget_ms, l[0].max_lag_ms, l[0].over_budget_samples, l[0].samples),
            (Some(1000), 1500, 1, 3)
        );
        assert!(!l[0].within_budget());
    }
}
