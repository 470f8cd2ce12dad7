//! Each table's lag over the last hour, sampled in the background for the tables page, and
//! drawn as an SVG sparkline.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::Shared;

/// (unix seconds, lag in ms) samples, oldest first.
pub(crate) type Samples = VecDeque<(i64, Option<u64>)>;

/// Each table's measured lag over the last hour, sampled every few seconds.
#[derive(Default)]
pub(crate) struct LagHistory {
    map: Mutex<BTreeMap<String, Samples>>,
}

/// Samples kept per table (an hour at one every 5 s).
pub(crate) const LAG_SAMPLES: usize = 720;

pub(crate) const LAG_SAMPLE_EVERY: Duration = Duration::from_secs(5);

impl LagHistory {
    pub(crate) fn record(&self, table: &str, at_s: i64, lag_ms: Option<u64>) {
        let mut m = self.map.lock().expect("lag history");
        let q = m.entry(table.to_string()).or_default();
        q.push_back((at_s, lag_ms));
        while q.len() > LAG_SAMPLES {
            q.pop_front();
        }
    }

    pub(crate) fn of(&self, table: &str) -> Vec<(i64, Option<u64>)> {
        self.map
            .lock()
            .expect("lag history")
            .get(table)
            .map(|q| q.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// Samples every table's lag until the server stops.
pub(crate) async fn sample_lag(s: Arc<Shared>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        if *stop.borrow() {
            return;
        }
        // Receipts only: the lag needs the latest snapshot, not the files and runs `tables` reads.
        let now = chrono::Utc::now().timestamp();
        let reader = s.reader();
        for name in s.spec().tables.keys() {
            if let Ok(r) = reader.receipt(name, &livestate_engine::At::Latest).await {
                s.lag_history().record(name, now, r.lag_ms);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(LAG_SAMPLE_EVERY) => {}
            _ = stop.changed() => {}
        }
    }
}

pub(crate) fn sparkline(samples: &[(i64, Option<u64>)], budget_ms: u64) -> String {
    let points: Vec<(i64, u64)> = samples.iter().filter_map(|(t, l)| l.map(|l| (*t, l))).collect();
    if points.len() < 2 {
        return r#"<span class="muted">collecting</span>"#.into();
    }
    let (t0, t1) = (points[0].0, points.last().expect("two points").0.max(points[0].0 + 1));
    let max = points.iter().map(|p| p.1).max().unwrap_or(1).max(budget_ms).max(1) as f64;
    let xy: Vec<String> = points
        .iter()
        .map(|(t, l)| {
            format!("{:.1},{:.1}", (t - t0) as f64 / (t1 - t0) as f64 * 100.0, 20.0 - *l as f64 / max * 20.0)
        })
        .collect();
    let budget_y = 20.0 - budget_ms as f64 / max * 20.0;
    format!(
        r#"<svg class="spark" viewBox="0 0 100 20" preserveAspectRatio="none" role="img" aria-label="lag over the last hour, at most {peak} ms"><line x1="0" x2="100" y1="{budget_y:.1}" y2="{budget_y:.1}"/><polyline points="{pts}"/></svg>"#,
        peak = points.iter().map(|p| p.1).max().unwrap_or(0),
        pts = xy.join(" ")
    )
}
