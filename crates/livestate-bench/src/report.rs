//! The side-by-side table: each figure for livestate and each peer, and livestate's ratio to
//! the peer, printed as Markdown (so a run pastes into docs/BENCHMARKS.md as it is).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::engine::{Freshness, Ingest, Reads, Steady};
use crate::stats::Latencies;
use crate::{postgres, pypaimon};

/// Everything one run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub mode: String,
    pub machine: String,
    pub commit: String,
    pub date: String,
    pub events: u64,
    pub item_locations: usize,
    pub batch: usize,
    pub livestate: Ours,
    pub postgres: Option<postgres::Figures>,
    pub pypaimon: Option<Pypaimon>,
}

/// livestate's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ours {
    pub ingest: Ingest,
    pub ingest_peak_pss_mib: f64,
    pub reads: Reads,
    pub http: Latencies,
    pub serve_pss_mib: f64,
    pub freshness: Vec<Freshness>,
    pub steady: Steady,
}

/// pypaimon's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pypaimon {
    pub write: pypaimon::Write,
    pub scan_own: pypaimon::Scan,
    pub scan_livestate: pypaimon::Scan,
    pub lookups: pypaimon::Lookups,
}

struct Row {
    figure: String,
    ours: Option<f64>,
    pg: Option<f64>,
    py: Option<f64>,
    higher_is_better: bool,
}

fn row(
    figure: impl Into<String>,
    ours: Option<f64>,
    pg: Option<f64>,
    py: Option<f64>,
    higher_is_better: bool,
) -> Row {
    Row { figure: figure.into(), ours, pg, py, higher_is_better }
}

fn num(v: Option<f64>) -> String {
    match v {
        None => String::new(),
        Some(v) if v.abs() >= 1000.0 => {
            let s = format!("{:.0}", v);
            let (sign, digits) = s.strip_prefix('-').map_or(("", s.as_str()), |d| ("-", d));
            let mut out = String::new();
            for (i, c) in digits.chars().enumerate() {
                if i > 0 && (digits.len() - i) % 3 == 0 {
                    out.push(',');
                }
                out.push(c);
            }
            format!("{sign}{out}")
        }
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.3}"),
    }
}

fn ratio(ours: Option<f64>, peer: Option<f64>) -> String {
    match (ours, peer) {
        (Some(a), Some(b)) if b != 0.0 => format!("{:.2}x", a / b),
        _ => String::new(),
    }
}

impl Results {
    fn rows(&self) -> Vec<Row> {
        let l = &self.livestate;
        let pg = self.postgres.as_ref();
        let py = self.pypaimon.as_ref();
        let ms = |us: f64| us / 1000.0;
        let per_s = |n: u64, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
        let mut rows = vec![
            row(
                "ingest: events/s, durable and derived into stock, work_queue, open_orders",
                Some(per_s(l.ingest.events, l.ingest.seconds)),
                pg.map(|p| per_s(p.events, p.seconds)),
                py.map(|p| per_s(p.write.events, p.write.seconds)),
                true,
            ),
            row(
                "ingest: events/s acknowledged durable (livestate: in the record)",
                Some(per_s(l.ingest.events, l.ingest.append_seconds)),
                pg.map(|p| per_s(p.events, p.seconds)),
                py.map(|p| per_s(p.write.events, p.write.seconds)),
                true,
            ),
            row(
                "ingest: commits",
                Some(l.ingest.commits as f64),
                pg.map(|p| p.commits as f64),
                py.map(|p| p.write.commits as f64),
                false,
            ),
            row(
                "ingest: peak memory, MiB (PSS)",
                Some(l.ingest_peak_pss_mib),
                pg.map(|p| p.peak_pss_mib),
                py.map(|p| p.write.peak_pss_mib),
                false,
            ),
            row(
                "storage after ingest, MiB (livestate: record + warehouse)",
                Some(l.ingest.record_mib + l.ingest.warehouse_mib),
                pg.map(|p| p.database_mib),
                None,
                false,
            ),
        ];
        for f in &l.freshness {
            rows.push(row(
                format!("freshness at {} events/s: append to visible p50, ms", f.rate),
                Some(ms(f.visible.p50_us)),
                None,
                None,
                false,
            ));
            rows.push(row(
                format!("freshness at {} events/s: append to visible p99, ms", f.rate),
                Some(ms(f.visible.p99_us)),
                None,
                None,
                false,
            ));
        }
        let lookup_rows: [(&str, &Latencies); 3] = [
            ("livestate index, in process", &l.reads.index),
            ("livestate read API, in process", &l.reads.read_api),
            ("livestate over HTTP", &l.http),
        ];
        for (what, lat) in lookup_rows {
            for (p, ours, pgv, pyv) in [
                ("p50", lat.p50_us, pg.map(|p| p.lookups.p50_us), py.map(|p| p.lookups.p50_us)),
                ("p99", lat.p99_us, pg.map(|p| p.lookups.p99_us), py.map(|p| p.lookups.p99_us)),
            ] {
                rows.push(row(format!("point lookup {p}, µs: {what} (peers: PostgreSQL by primary key over loopback; pypaimon filtered read)"), Some(ours), pgv, pyv, false));
            }
        }
        rows.push(row(
            "point lookup p50, µs: livestate without the index (Paimon scan with the key as filter; peer: pypaimon)",
            Some(l.reads.paimon_scan.p50_us),
            None,
            py.map(|p| p.lookups.p50_us),
            false,
        ));
        rows.push(row(
            "full scan of stock, rows/s (pypaimon: its own table)",
            Some(per_s(l.reads.scan_rows, l.reads.scan_seconds)),
            pg.map(|p| per_s(p.scan_rows, p.scan_seconds)),
            py.map(|p| per_s(p.scan_own.rows, p.scan_own.seconds_median)),
            true,
        ));
        rows.push(row(
            "full scan of livestate's stock table, rows/s (livestate's reader; pypaimon reading the same files)",
            Some(per_s(l.reads.scan_rows, l.reads.scan_seconds)),
            None,
            py.map(|p| per_s(p.scan_livestate.rows, p.scan_livestate.seconds_median)),
            true,
        ));
        let s = &l.steady;
        rows.push(row(
            format!("LSM after {} more commits: data files of stock", s.commits),
            Some(s.reads.shape.data_files as f64),
            None,
            None,
            false,
        ));
        rows.push(row(
            format!("LSM after {} more commits: max sorted runs per bucket", s.commits),
            Some(s.reads.shape.max_sorted_runs as f64),
            None,
            None,
            false,
        ));
        rows.push(row(
            format!("LSM after {} more commits: snapshots kept", s.commits),
            Some(s.reads.shape.snapshots as f64),
            None,
            None,
            false,
        ));
        rows.push(row(
            "LSM steady state: commit (derive + commit) p50, ms",
            Some(ms(s.commit.p50_us)),
            None,
            None,
            false,
        ));
        rows.push(row(
            "LSM steady state: commit (derive + commit) p99, ms",
            Some(ms(s.commit.p99_us)),
            None,
            None,
            false,
        ));
        rows.push(row(
            "LSM steady state: index lookup p99, µs",
            Some(s.reads.index.p99_us),
            None,
            None,
            false,
        ));
        rows.push(row(
            "LSM steady state: full scan, rows/s",
            Some(per_s(s.reads.scan_rows, s.reads.scan_seconds)),
            None,
            None,
            true,
        ));
        rows.push(row(
            "livestate serve memory after the HTTP lookups, MiB (PSS)",
            Some(l.serve_pss_mib),
            None,
            None,
            false,
        ));
        rows
    }

    /// The run as Markdown: what ran where, the side-by-side table and the goals.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "livestate benchmark ({} mode), {}; commit {}; {}",
            self.mode, self.date, self.commit, self.machine
        );
        let _ = writeln!(
            out,
            "workload: {} events over {} item-locations, {} events per append / transaction / pypaimon commit round\n",
            self.events, self.item_locations, self.batch
        );
        if let Some(pg) = &self.postgres {
            let _ = writeln!(out, "peer PostgreSQL: {}", pg.version);
        }
        let _ = writeln!(out, "| figure | livestate | PostgreSQL | pypaimon | livestate / PostgreSQL | livestate / pypaimon | better |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---|");
        for r in self.rows() {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.figure,
                num(r.ours),
                num(r.pg),
                num(r.py),
                ratio(r.ours, r.pg),
                ratio(r.ours, r.py),
                if r.higher_is_better { "higher" } else { "lower" }
            );
        }
        let _ = writeln!(out, "\nGoals (aims, not assertions):\n");
        let _ = writeln!(out, "| goal | measured | met |");
        let _ = writeln!(out, "|---|---:|---|");
        for (goal, measured, met) in self.goals() {
            let _ = writeln!(out, "| {goal} | {measured} | {} |", if met { "yes" } else { "no" });
        }
        out
    }

    fn goals(&self) -> Vec<(&'static str, String, bool)> {
        let l = &self.livestate;
        let ours = l.ingest.events as f64 / l.ingest.seconds.max(1e-9);
        let mut g = Vec::new();
        if let Some(pg) = &self.postgres {
            let r = ours / (pg.events as f64 / pg.seconds.max(1e-9));
            g.push(("end to end ≥ 5x PostgreSQL", format!("{r:.2}x"), r >= 5.0));
        }
        if let Some(py) = &self.pypaimon {
            let r = ours / (py.write.events as f64 / py.write.seconds.max(1e-9));
            g.push(("end to end ≥ 20x pypaimon", format!("{r:.2}x"), r >= 20.0));
        }
        if let Some(f) = l.freshness.iter().max_by_key(|f| f.rate) {
            let p99 = f.visible.p99_us / 1000.0;
            g.push((
                "freshness p99 ≤ 250 ms at the highest rate",
                format!("{p99:.0} ms at {}/s", f.rate),
                p99 <= 250.0,
            ));
        }
        g.push((
            "lookup p99 ≤ 50 µs in process (index)",
            format!("{:.1} µs", l.reads.index.p99_us),
            l.reads.index.p99_us <= 50.0,
        ));
        g.push(("lookup p99 ≤ 1 ms over HTTP", format!("{:.0} µs", l.http.p99_us), l.http.p99_us <= 1000.0));
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_and_ratios_are_ours_over_the_peer() {
        assert_eq!(num(Some(1_234_567.4)), "1,234,567");
        assert_eq!(num(Some(-1234.0)), "-1,234");
        assert_eq!(num(Some(12.34)), "12.3");
        assert_eq!(num(Some(0.5)), "0.500");
        assert_eq!(num(None), "");
        assert_eq!(ratio(Some(10.0), Some(4.0)), "2.50x");
        assert_eq!(ratio(Some(1.0), Some(0.0)), "");
    }
}
