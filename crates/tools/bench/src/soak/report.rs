//! A soak as Markdown, for docs/BENCHMARKS.md.

use std::fmt::Write as _;

use super::{Soak, TableLag, FLAT_FRACTION, FLAT_MIB};

impl Soak {
    /// Every request of the run succeeded, every table stayed within its budget at every sample
    /// and memory was sampled and stayed flat.
    pub fn healthy(&self) -> bool {
        self.errors.total == 0
            && !self.tables.is_empty()
            && self.tables.iter().all(TableLag::within_budget)
            && self.memory.flat
    }

    /// The run as Markdown, ready for docs/BENCHMARKS.md.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "livestate soak, {}; commit {}; {}", self.date, self.commit, self.machine);
        let _ = writeln!(
            out,
            "{:.1} min of `livestate serve` (example company, {} item-locations): {} events/s asked, {:.0} achieved; \
             {} point reads/s; {} consistent reads/s of stock and open_orders; a proposal every {} s, every third decided; \
             {}\n",
            self.seconds / 60.0,
            self.item_locations,
            self.rate,
            self.achieved_rate,
            self.read_rate,
            self.consistent_rate,
            self.proposal_seconds,
            if self.order_book > 0 {
                format!("order book held at {} open orders ({} at the end)", self.order_book, self.open_orders_at_end)
            } else {
                format!("order book unbounded ({} open orders at the end)", self.open_orders_at_end)
            }
        );
        let m = &self.memory;
        let _ = writeln!(out, "| memory (PSS of the server) | MiB |");
        let _ = writeln!(out, "|---|---:|");
        let _ = writeln!(
            out,
            "| first window after warm-up ({:.0} s each), mean | {:.1} |",
            m.window_seconds, m.first_window_mib
        );
        let _ = writeln!(out, "| last window, mean | {:.1} |", m.last_window_mib);
        let _ = writeln!(out, "| growth | {:+.1} ({:+.1} %) |", m.growth_mib, m.growth_fraction * 100.0);
        let _ = writeln!(out, "| slope after warm-up, MiB/min | {:+.2} |", m.slope_mib_per_minute);
        let _ = writeln!(
            out,
            "| slope over the second half, MiB/min | {:+.2} |",
            m.second_half_slope_mib_per_minute
        );
        let _ = writeln!(out, "| peak | {:.1} |", m.peak_mib);
        let mut windows = |what: &str, first: f64, last: f64| {
            let _ = writeln!(out, "| {what}, first → last window | {first:.1} → {last:.1} |");
        };
        windows(
            "of which embedded stores' caches and unflushed writes",
            m.stores_first_window_mib,
            m.stores_last_window_mib,
        );
        windows(
            "the rest (PSS minus the stores)",
            m.first_window_mib - m.stores_first_window_mib,
            m.last_window_mib - m.stores_last_window_mib,
        );
        if !m.heap_samples.is_empty() {
            windows(
                "heap in use (allocated, not freed; stores included)",
                m.heap_first_window_mib,
                m.heap_last_window_mib,
            );
        }
        if !m.anon_samples.is_empty() {
            windows(
                "anonymous (heap, stacks, what the allocator holds)",
                m.anon_first_window_mib,
                m.anon_last_window_mib,
            );
            windows(
                "file-backed (code paged in, mapped files)",
                m.file_first_window_mib,
                m.file_last_window_mib,
            );
        }
        let _ = writeln!(
            out,
            "| flat (growth ≤ {FLAT_MIB:.0} MiB or {:.0} %, whichever is larger) | {} |\n",
            FLAT_FRACTION * 100.0,
            if m.flat { "yes" } else { "no" }
        );
        let _ = writeln!(out, "| table | budget | max lag, ms | samples over budget | samples | snapshots at end | tags at end |");
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|");
        for l in &self.tables {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                l.table,
                l.budget,
                l.max_lag_ms,
                l.over_budget_samples,
                l.samples,
                l.snapshots_at_end,
                l.tags_at_end
            );
        }
        let _ = writeln!(out, "\n| request | count | p50, ms | p99, ms | max, ms | errors |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
        let l = &self.latencies;
        for (what, kind, lat) in [
            ("POST /v1/events (one module's share of a tick)", "emit", &l.emit),
            ("GET /v1/tables/stock/rows (one key)", "point_read", &l.point_read),
            ("POST /v1/reads (stock + open_orders)", "consistent_read", &l.consistent_read),
            ("POST /v1/proposals", "proposal", &l.proposal),
            (
                "proposal answered → visible in approval_inbox (budget 1s)",
                "proposal_visible",
                &l.proposal_visible,
            ),
            ("POST /v1/proposals/{id}/decision", "decision", &l.decision),
            ("GET /v1/tables (sampler)", "tables", &l.tables),
        ] {
            let errors = self.errors.by_kind.get(kind).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "| {what} | {} | {:.2} | {:.2} | {:.2} | {errors} |",
                lat.n,
                lat.p50_us / 1000.0,
                lat.p99_us / 1000.0,
                lat.max_us / 1000.0
            );
        }
        let c = &self.counts;
        let _ = writeln!(
            out,
            "\nevents acknowledged {}, appends {}, point reads {}, consistent reads {}, proposals {}, decisions {}, samples {}; errors {}",
            c.events, c.emits, c.point_reads, c.consistent_reads, c.proposals, c.decisions, c.samples, self.errors.total
        );
        for e in &self.errors.first {
            let _ = writeln!(out, "- {e}");
        }
        out
    }
}
