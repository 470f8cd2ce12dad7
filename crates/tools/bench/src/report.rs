//! The side-by-side table: each figure for livestate and each peer, and livestate's ratio to
//! the peer, printed as Markdown (so a run pastes into docs/BENCHMARKS.md as it is).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::digest::TableDigest;
use crate::engine::{Freshness, Ingest, Reads, Steady};
use crate::postgres::Mode;
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
    /// Events per append / transaction of each ingest.
    pub batches: Vec<usize>,
    /// The least work the ingest needs, at each batch size ([`crate::limit`]).
    pub limits: Vec<crate::limit::Limit>,
    pub livestate: Ours,
    pub postgres: Option<postgres::Figures>,
    pub pypaimon: Option<Pypaimon>,
}

/// One ingest of livestate's, in a child process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IngestRun {
    pub ingest: Ingest,
    pub peak_pss_mib: f64,
    /// What the state tables held afterwards.
    pub digests: Vec<TableDigest>,
}

/// livestate's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ours {
    /// One per batch size, in the order run; the later steps read the first's tables.
    pub ingests: Vec<IngestRun>,
    pub reads: Reads,
    pub http: Latencies,
    pub serve_pss_mib: f64,
    pub freshness: Vec<Freshness>,
    pub steady: Steady,
}

/// pypaimon's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pypaimon {
    /// Events per commit round (the largest batch size of the run).
    pub batch: usize,
    pub write: pypaimon::Write,
    pub scan_own: pypaimon::Scan,
    pub scan_livestate: pypaimon::Scan,
    pub lookups: pypaimon::Lookups,
}

/// One figure: livestate's and each peer's ([`PEERS`] order).
struct Row {
    figure: String,
    ours: Option<f64>,
    peers: [Option<f64>; 3],
    higher_is_better: bool,
}

/// The peers' columns.
const PEERS: [&str; 3] = ["PostgreSQL set-based", "PostgreSQL pipelined", "pypaimon"];

/// A row whose PostgreSQL figure is the database's (not one mode's): in the set-based column.
fn row(
    figure: impl Into<String>,
    ours: Option<f64>,
    pg: Option<f64>,
    py: Option<f64>,
    higher_is_better: bool,
) -> Row {
    Row { figure: figure.into(), ours, peers: [pg, None, py], higher_is_better }
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
        let mut rows = Vec::new();
        for run in &l.ingests {
            let b = run.ingest.batch;
            let pg_at = |m: Mode| pg.and_then(|p| p.ingest(m, b));
            let (set, piped) = (pg_at(Mode::SetBased), pg_at(Mode::Pipelined));
            let py_at = py.filter(|p| p.batch == b);
            let i = &run.ingest;
            let pg_rate = |x: Option<&postgres::Ingest>| x.map(|x| per_s(x.events, x.seconds));
            let py_rate = py_at.map(|p| per_s(p.write.events, p.write.seconds));
            rows.push(Row {
                figure: format!("ingest, {b} events per batch: events/s, durable and derived into stock, work_queue, open_orders"),
                ours: Some(per_s(i.events, i.seconds)),
                peers: [pg_rate(set), pg_rate(piped), py_rate],
                higher_is_better: true,
            });
            rows.push(Row {
                figure: format!(
                    "ingest, {b} events per batch: events/s acknowledged durable (livestate: in the record)"
                ),
                ours: Some(per_s(i.events, i.append_seconds)),
                peers: [pg_rate(set), pg_rate(piped), py_rate],
                higher_is_better: true,
            });
            rows.push(Row {
                figure: format!("ingest, {b} events per batch: commits"),
                ours: Some(i.commits as f64),
                peers: [
                    set.map(|x| x.commits as f64),
                    piped.map(|x| x.commits as f64),
                    py_at.map(|p| p.write.commits as f64),
                ],
                higher_is_better: false,
            });
            rows.push(Row {
                figure: format!("ingest, {b} events per batch: peak memory, MiB (PSS)"),
                ours: Some(run.peak_pss_mib),
                peers: [
                    set.map(|x| x.peak_pss_mib),
                    piped.map(|x| x.peak_pss_mib),
                    py_at.map(|p| p.write.peak_pss_mib),
                ],
                higher_is_better: false,
            });
            if let Some(lim) = self.limits.iter().find(|x| x.batch == b) {
                rows.push(row(
                    format!("limit line, {b} events per batch: events/s (parse, append durably, merge, encode as Parquet; one core)"),
                    Some(lim.events_per_second()),
                    None,
                    None,
                    true,
                ));
                rows.push(row(
                    format!("livestate end to end as a fraction of the limit line, {b} events per batch"),
                    Some(per_s(i.events, i.seconds) / lim.events_per_second()),
                    None,
                    None,
                    true,
                ));
            }
            rows.push(Row {
                figure: format!(
                    "storage after ingest, {b} events per batch, MiB (livestate: record + warehouse)"
                ),
                ours: Some(i.record_mib + i.warehouse_mib),
                peers: [set.map(|x| x.database_mib), piped.map(|x| x.database_mib), None],
                higher_is_better: false,
            });
        }
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
            "full scan of stock through the read API (latest version; a table this size is served from its files), rows/s",
            Some(per_s(l.reads.scan_rows, l.reads.index_scan_seconds)),
            pg.map(|p| per_s(p.scan_rows, p.scan_seconds)),
            None,
            true,
        ));
        rows.push(row(
            "full scan of stock's Paimon files as Arrow batches (livestate's merge, column by column), rows/s",
            Some(per_s(l.reads.scan_rows, l.reads.columnar_scan_seconds)),
            pg.map(|p| per_s(p.scan_rows, p.scan_seconds)),
            None,
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
        let batches: Vec<String> = self.batches.iter().map(usize::to_string).collect();
        let _ = writeln!(
            out,
            "workload: {} events over {} item-locations; {} events per append / transaction{}\n",
            self.events,
            self.item_locations,
            batches.join(" and "),
            self.pypaimon
                .as_ref()
                .map(|p| format!(" (pypaimon: {} per commit round)", p.batch))
                .unwrap_or_default()
        );
        if let Some(pg) = &self.postgres {
            let _ = writeln!(
                out,
                "peer PostgreSQL: {}; every ingest ended with livestate's tables (same digests)\n",
                pg.version
            );
        }
        let _ = write!(out, "| figure | livestate |");
        for p in PEERS {
            let _ = write!(out, " {p} |");
        }
        for p in PEERS {
            let _ = write!(out, " livestate / {p} |");
        }
        let _ = writeln!(out, " better |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---|");
        for r in self.rows() {
            let _ = write!(out, "| {} | {} |", r.figure, num(r.ours));
            for v in r.peers {
                let _ = write!(out, " {} |", num(v));
            }
            for v in r.peers {
                let _ = write!(out, " {} |", ratio(r.ours, v));
            }
            let _ = writeln!(out, " {} |", if r.higher_is_better { "higher" } else { "lower" });
        }
        let _ = writeln!(out, "\nGoals (aims, not assertions):\n");
        let _ = writeln!(out, "| goal | measured | met |");
        let _ = writeln!(out, "|---|---:|---|");
        for (goal, measured, met) in self.goals() {
            let _ = writeln!(out, "| {goal} | {measured} | {} |", if met { "yes" } else { "no" });
        }
        out
    }

    fn goals(&self) -> Vec<(String, String, bool)> {
        let l = &self.livestate;
        let rate = |events: u64, seconds: f64| events as f64 / seconds.max(1e-9);
        let mut g = Vec::new();
        for run in &l.ingests {
            let (b, i) = (run.ingest.batch, &run.ingest);
            let ours = rate(i.events, i.seconds);
            if let Some(pg) = self.postgres.as_ref().and_then(|p| p.ingest(Mode::SetBased, b)) {
                let r = ours / rate(pg.events, pg.seconds);
                g.push((
                    format!("end to end ≥ 5x PostgreSQL set-based, {b} per batch"),
                    format!("{r:.2}x"),
                    r >= 5.0,
                ));
                let m = run.peak_pss_mib;
                g.push((
                    format!("peak memory ≤ PostgreSQL's (set-based), {b} per batch"),
                    format!("{m:.0} MiB against {:.0}", pg.peak_pss_mib),
                    m <= pg.peak_pss_mib,
                ));
            }
            if let Some(lim) = self.limits.iter().find(|x| x.batch == b) {
                let f = ours / lim.events_per_second();
                g.push((
                    format!("end to end ≥ 1/3 of the limit line, {b} per batch"),
                    format!("{f:.2}"),
                    f >= 1.0 / 3.0,
                ));
            }
            if let Some(py) = self.pypaimon.as_ref().filter(|p| p.batch == b) {
                let r = ours / rate(py.write.events, py.write.seconds);
                g.push((format!("end to end ≥ 20x pypaimon, {b} per batch"), format!("{r:.2}x"), r >= 20.0));
            }
        }
        let scan = rate(l.reads.scan_rows, l.reads.scan_seconds);
        let index_scan = rate(l.reads.scan_rows, l.reads.index_scan_seconds);
        g.push((
            "full scan of stock's Paimon files ≥ 2M rows/s".into(),
            format!("{:.2}M rows/s", scan / 1e6),
            scan >= 2e6,
        ));
        g.push((
            "full scan of stock through the read API ≥ 2M rows/s".into(),
            format!("{:.2}M rows/s", index_scan / 1e6),
            index_scan >= 2e6,
        ));
        let columnar = rate(l.reads.scan_rows, l.reads.columnar_scan_seconds);
        g.push((
            "full scan of stock's Paimon files as Arrow batches ≥ 2M rows/s".into(),
            format!("{:.2}M rows/s", columnar / 1e6),
            columnar >= 2e6,
        ));
        if let Some(pg) = &self.postgres {
            let theirs = rate(pg.scan_rows, pg.scan_seconds);
            let r = scan / theirs;
            g.push(("full scan of the Paimon files ≥ 1.5x PostgreSQL".into(), format!("{r:.2}x"), r >= 1.5));
            let r = index_scan / theirs;
            g.push(("full scan through the read API ≥ 1.5x PostgreSQL".into(), format!("{r:.2}x"), r >= 1.5));
            let r = columnar / theirs;
            g.push(("full scan as Arrow batches ≥ 1.5x PostgreSQL".into(), format!("{r:.2}x"), r >= 1.5));
            let (ours, theirs) = (l.http.p50_us, pg.lookups.p50_us);
            g.push((
                "HTTP point read p50 ≤ PostgreSQL's by primary key".into(),
                format!("{ours:.0} µs against {theirs:.0}"),
                ours <= theirs,
            ));
        }
        g.push((
            "in-process read p99 < 5 µs".into(),
            format!("{:.1} µs", l.reads.read_api.p99_us),
            l.reads.read_api.p99_us < 5.0,
        ));
        if let Some(f) = l.freshness.iter().max_by_key(|f| f.rate) {
            let p99 = f.visible.p99_us / 1000.0;
            g.push((
                "freshness p99 ≤ 250 ms at the highest rate".into(),
                format!("{p99:.0} ms at {}/s", f.rate),
                p99 <= 250.0,
            ));
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_by_thousands_with_three_figures_below_a_hundred() {
        assert_eq!(num(Some(1_234_567.4)), "1,234,567");
        assert_eq!(num(Some(-1234.0)), "-1,234");
        assert_eq!(num(Some(12.34)), "12.3");
        assert_eq!(num(Some(0.5)), "0.500");
        assert_eq!(num(None), "");
    }

    #[test]
    fn a_ratio_is_ours_over_the_peers() {
        assert_eq!(ratio(Some(10.0), Some(4.0)), "2.50x");
    }

    #[test]
    fn a_ratio_against_a_peer_of_zero_is_blank() {
        assert_eq!(ratio(Some(1.0), Some(0.0)), "");
    }
}
