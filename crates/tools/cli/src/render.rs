//! Text rendering of rows, receipts and table lists.

use livestate_engine::read::format_lag;
use livestate_engine::{Receipt, Rows, TableInfo};

/// Rows as an aligned text table.
pub fn rows_table(rows: &Rows) -> String {
    let cells: Vec<Vec<String>> = rows
        .rows
        .iter()
        .map(|r| r.iter().map(|v| if v.is_null() { "·".to_string() } else { v.to_string() }).collect())
        .collect();
    grid(&rows.columns, &cells)
}

/// A text grid with a header row.
pub fn grid(header: &[String], cells: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in cells {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |vals: &[String]| {
        let mut s = String::new();
        for (i, v) in vals.iter().enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            s.push_str(v);
            if i + 1 < vals.len() {
                s.push_str(&" ".repeat(widths[i] - v.chars().count()));
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(header);
    out.push_str(&line(&widths.iter().map(|w| "─".repeat(*w)).collect::<Vec<_>>()));
    for r in cells {
        out.push_str(&line(r));
    }
    out
}

/// One line describing a receipt.
pub fn receipt_line(r: &Receipt) -> String {
    let snap = r.snapshot_id.map_or("no snapshot yet".to_string(), |s| format!("snapshot {s}"));
    let lag = match (r.lag_ms, r.within_budget) {
        (Some(l), Some(true)) => format!("lag {} within budget {}", format_lag(l), r.budget),
        (Some(l), Some(false)) => format!("lag {} OVER budget {}", format_lag(l), r.budget),
        _ => format!("budget {}", r.budget),
    };
    let committed = r.committed_at.as_deref().map(|c| format!(", committed {c}")).unwrap_or_default();
    let via = if r.served_by == livestate_engine::read::ServedBy::Index {
        ", served by the lookup index"
    } else {
        ""
    };
    let reflects = match r.offset {
        Some(o) => format!("reflects record offsets < {o}"),
        None => "derived by another engine (no record offset, lag not measured)".into(),
    };
    format!("receipt: {} {snap}, {reflects}{committed}, {lag}{via}", r.table)
}

/// `livestate tables` as text.
pub fn tables(infos: &[TableInfo]) -> String {
    let header: Vec<String> = [
        "table",
        "merge engine",
        "budget",
        "snapshot",
        "offset",
        "lag",
        "snapshots kept",
        "tags",
        "files per bucket",
        "sorted runs",
        "rows in files",
        "quarantined",
        "last hour: commits, compactions, written, busy",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let cells: Vec<Vec<String>> = infos
        .iter()
        .map(|t| {
            let r = &t.receipt;
            let lag = match (r.lag_ms, r.within_budget) {
                (Some(l), Some(false)) => format!("{} OVER", format_lag(l)),
                (Some(l), _) => format_lag(l),
                (None, _) => "?".into(),
            };
            let h = &t.health;
            let per_bucket = |f: &dyn Fn(&livestate_lsm::BucketHealth) -> usize| {
                if h.buckets.is_empty() {
                    "-".to_string()
                } else {
                    h.buckets.iter().map(|b| f(b).to_string()).collect::<Vec<_>>().join(" ")
                }
            };
            let kept = match (h.earliest_snapshot, h.latest_snapshot) {
                (Some(e), Some(l)) => format!("{} ({e}..{l})", h.snapshots),
                _ => "0".into(),
            };
            vec![
                t.name.clone(),
                t.merge_engine.clone(),
                r.budget.clone(),
                r.snapshot_id.map_or("-".into(), |s| s.to_string()),
                r.offset.map_or("external".into(), |o| o.to_string()),
                lag,
                kept,
                h.tags.len().to_string(),
                per_bucket(&|b| b.files),
                per_bucket(&|b| b.sorted_runs),
                t.total_rows_in_files.map_or("-".into(), |n| n.to_string()),
                t.quarantined.to_string(),
                t.spend.as_ref().map_or("-".into(), |sp| spend(&sp.last_hour)),
            ]
        })
        .collect();
    grid(&header, &cells)
}

/// What a table spent in some span: `12 commits, 1 compaction, 3.4 MiB, 0.8 s busy, 0.3 s CPU`.
pub fn spend(s: &livestate_engine::spend::Spend) -> String {
    let plural = |n: u64, one: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") };
    format!(
        "{}, {}, {:.1} MiB, {:.1} s busy, {:.2} s CPU",
        plural(s.commits, "commit"),
        plural(s.compactions, "compaction"),
        s.bytes_written as f64 / (1024.0 * 1024.0),
        s.busy_ms as f64 / 1000.0,
        s.cpu_us as f64 / 1e6
    )
}

/// A proposal's audit (`GET /v1/proposals/{id}/audit`) as text.
pub fn audit(a: &livestate_client::Audit) -> String {
    use serde_json::Value;
    use std::fmt::Write as _;
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let p = &a.proposal;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "proposal {} ({}) by agent {} for module {}: {}",
        p.id, p.kind, p.agent, p.module, p.summary
    );
    let _ = writeln!(
        out,
        "  created {} at offset {}; status {}",
        p.created_at,
        a.created_offset,
        a.status.as_str()
    );
    let _ = writeln!(out, "  rule {} v{}: {}", p.rule.name, p.rule.version, p.rule.text);
    let _ = writeln!(out, "  risk {}: {}", p.risk.level.as_str(), p.risk.reasons.join("; "));
    let _ = writeln!(out, "  action {}", Value::Object(p.action.clone()));
    let _ = writeln!(out, "\nevidence (read back from the pinned tags):");
    for e in &a.evidence {
        let same = if e.cited_rows_identical { "cited rows identical" } else { "CITED ROWS DIFFER" };
        let _ = writeln!(out, "  {} snapshot {} (tag {}): {}", e.table, e.snapshot_id, e.tag, same);
        for r in &e.rows_at_tag {
            let _ = writeln!(out, "    {}", Value::Object(r.clone()));
        }
    }
    match &a.decision {
        Some(d) => {
            let _ = writeln!(
                out,
                "\ndecision: {} by {} at {} (offset {}): {}",
                d.decision.as_str(),
                d.decided_by,
                d.decided_at,
                d.offset,
                or_dash(d.reason.clone())
            );
        }
        None => {
            let _ = writeln!(out, "\ndecision: pending");
        }
    }
    let _ = writeln!(out, "\nevents caused:");
    for ev in &a.caused_events {
        let _ = writeln!(
            out,
            "  offset {} {} {} {}",
            ev.offset,
            ev.event_type,
            ev.id,
            Value::Object(ev.data.clone())
        );
    }
    let _ = writeln!(out, "\nstate now:");
    for st in &a.state_after {
        let _ = writeln!(
            out,
            "  {} {} (snapshot {}):",
            st.table,
            Value::Object(st.key.clone()),
            or_dash(st.receipt.snapshot_id.map(|s| s.to_string()))
        );
        for r in &st.rows {
            let _ = writeln!(out, "    {}", Value::Object(r.clone()));
        }
    }
    out
}

/// `livestate sheet`: the action in words, one line per input, the arithmetic, the verdict.
pub fn sheet(sh: &livestate_client::sheet::Sheet) -> String {
    use serde_json::Value;
    use std::fmt::Write as _;
    let s = |v: &Value| match v {
        Value::String(t) => t.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    let mut out = String::new();
    let _ = writeln!(out, "{}", sh.summary);
    let _ = writeln!(
        out,
        "proposal {} ({}) by agent {} for module {}, {}; created {}",
        sh.proposal_id, sh.kind, sh.agent, sh.module, sh.status, sh.created_at
    );
    let header: Vec<String> = [
        "input",
        "value used",
        "from",
        "key",
        "snapshot",
        "offset",
        "lag",
        "need",
        "fresh",
        "now",
        "changed",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect();
    let cells: Vec<Vec<String>> = sh
        .inputs
        .iter()
        .map(|i| {
            vec![
                i.name.clone(),
                s(&i.value),
                format!("{}.{}", i.table, i.column),
                i.key.iter().map(|(k, v)| format!("{k}={}", s(v))).collect::<Vec<_>>().join(","),
                i.snapshot_id.to_string(),
                i.offset.map_or("-".into(), |o| o.to_string()),
                i.lag_ms.map_or("-".into(), |l| format!("{l} ms")),
                i.need.clone(),
                match i.fresh_enough {
                    Some(true) => "yes".into(),
                    Some(false) => "NO".into(),
                    None => "-".into(),
                },
                s(&i.value_now),
                if i.changed_since { "CHANGED".into() } else { "no".into() },
            ]
        })
        .collect();
    let _ = writeln!(out, "\n{}", grid(&header, &cells));
    let _ = writeln!(out, "rule: {}", sh.rule_text);
    for st in &sh.rule {
        let value = st.error.as_ref().map_or_else(|| s(&st.value), |e| format!("error: {e}"));
        let _ = writeln!(out, "  {} = {} = {} = {}", st.name, st.expression, st.with_values, value);
    }
    let _ = writeln!(out, "\n{}", sh.verdict.text);
    out
}

/// `livestate sheet --kind`: the kind's decisions over the window, then one line per input.
pub fn history(h: &livestate_client::sheet::History) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "{} from {} to {}", h.kind, h.since, h.until);
    let _ = writeln!(
        out,
        "  {} proposals: {} approved, {} rejected, {} pending{}",
        h.proposals,
        h.approved,
        h.rejected,
        h.pending,
        if h.truncated { " (only the newest were examined)" } else { "" }
    );
    for d in &h.per_day {
        let _ = writeln!(out, "  {}: {} proposed, {} decided", d.day, d.proposed, d.decided);
    }
    match &h.time_to_decide {
        Some(t) => {
            let _ = writeln!(
                out,
                "  time to decide: median {} ms, p90 {} ms, max {} ms ({} decisions)",
                t.median_ms, t.p90_ms, t.max_ms, t.count
            );
        }
        None => {
            let _ = writeln!(out, "  no decisions yet");
        }
    }
    let _ = writeln!(out, "  inputs not read at one instant: {} of {}", h.not_one_instant, h.proposals);
    let header: Vec<String> =
        ["input", "from", "need", "changed before decision", "unknown", "staler than needed"]
            .iter()
            .map(|h| h.to_string())
            .collect();
    let cells: Vec<Vec<String>> = h
        .inputs
        .iter()
        .map(|i| {
            vec![
                i.name.clone(),
                format!("{}.{}", i.table, i.column),
                i.need.clone(),
                format!("{} of {}", i.changed_before_decision, i.decided_checked),
                i.unknown.to_string(),
                format!("{} of {}", i.staler_than_needed, i.lag_known),
            ]
        })
        .collect();
    let _ = writeln!(out, "\n{}", grid(&header, &cells));
    out
}

/// `livestate verify`: one line per store and table, then every problem.
pub fn verify(r: &livestate_engine::verify::VerifyReport) -> String {
    let state = |n: usize| if n == 0 { "ok".to_string() } else { format!("{n} problem(s)") };
    let mut out = format!(
        "record: {} event(s), {} table file(s) checked block by block: {}\n",
        r.record.events,
        r.record.files,
        state(r.record.problems.len())
    );
    for s in &r.stores {
        out.push_str(&format!(
            "{}: {} table file(s) checked block by block: {}\n",
            s.name,
            s.files.files,
            state(s.files.problems.len())
        ));
    }
    for t in &r.tables {
        out.push_str(&format!(
            "{}: {} snapshot(s), {} tag(s), {} manifest list(s), {} manifest(s), {} data file(s): {}\n",
            t.table,
            t.snapshots,
            t.tags,
            t.manifest_lists,
            t.manifests,
            t.data_files,
            state(t.problems.len())
        ));
    }
    let problems = r.problems();
    if problems.is_empty() {
        out.push_str("every file checks out\n");
    }
    for p in problems {
        out.push_str(&format!("DAMAGED {p}\n"));
    }
    out
}
