//! The decision pages: the sheet section of a proposal page, `/decisions` (the declared kinds)
//! and `/decisions/{kind}` (a kind's history over a window).

use std::sync::Arc;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::html::{esc, page, text};
use super::session::person;
use crate::Shared;

/// The sheet as HTML: (the action in words, the sheet's section). The person sees the numbers
/// first, then the arithmetic and the verdict; the raw action stays behind a disclosure.
pub(crate) fn sheet_html(sh: &crate::sheet::Sheet) -> (String, String) {
    let mut rows = String::new();
    for i in &sh.inputs {
        let key: Vec<String> = i.key.iter().map(|(k, v)| format!("{k}={}", text(v))).collect();
        let fresh = match i.fresh_enough {
            Some(true) => r#"<span class="fresh">within</span>"#.to_string(),
            Some(false) => r#"<span class="stale">over</span>"#.to_string(),
            None => "unknown".to_string(),
        };
        let lag = i.lag_ms.map_or("-".to_string(), |l| format!("{l} ms"));
        let changed = if i.changed_since {
            format!(r#"<span class="changed">changed since: now {}</span>"#, esc(&text(&i.value_now)))
        } else {
            r#"<span class="muted">unchanged</span>"#.to_string()
        };
        rows.push_str(&format!(
            r#"<tr data-input="{name}"><th scope="row">{name}</th><td class="value">{value}</td><td><code>{table}.{column}</code> at {key}</td><td>snapshot {snap}, offset {offset}, committed {committed}</td><td>{lag} against {need} needed: {fresh}</td><td class="now">{changed}</td></tr>"#,
            name = esc(&i.name),
            value = esc(&text(&i.value)),
            table = esc(&i.table),
            column = esc(&i.column),
            key = esc(&key.join(", ")),
            snap = i.snapshot_id,
            offset = i.offset.map_or("-".to_string(), |o| o.to_string()),
            committed = esc(i.committed_at.as_deref().unwrap_or("-")),
            lag = esc(&lag),
            need = esc(&i.need),
        ));
    }
    let steps: String = sh
        .rule
        .iter()
        .map(|st| {
            let value = st.error.as_ref().map_or_else(|| text(&st.value), |e| format!("error: {e}"));
            format!(
                "<li><code>{name} = {expr}</code> = <code>{with}</code> = <strong>{value}</strong></li>",
                name = esc(&st.name),
                expr = esc(&st.expression),
                with = esc(&st.with_values),
                value = esc(&value)
            )
        })
        .collect();
    let verdict_class = if sh.verdict.one_instant { "one-instant" } else { "several-instants" };
    let html = format!(
        r#"<section id="sheet" aria-label="Decision input sheet"><h2>What this decision looks at</h2>
<table class="sheet"><thead><tr><th scope="col">input</th><th scope="col">value used</th><th scope="col">from</th><th scope="col">read at</th><th scope="col">lag</th><th scope="col">now</th></tr></thead><tbody>{rows}</tbody></table>
<h3>The rule's arithmetic</h3><ol id="arithmetic">{steps}</ol>
<p id="verdict" class="{verdict_class}">{verdict}</p></section>"#,
        verdict = esc(&sh.verdict.text),
    );
    (esc(&sh.summary), html)
}

pub(crate) async fn kinds(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let (caller, csrf) = match person(&s, &headers) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let mut rows = String::new();
    for k in s.spec().decisions.values() {
        let inputs: Vec<String> = k
            .inputs
            .values()
            .map(|i| format!("{} ({}.{}, need {})", i.name, i.table, i.column, i.need))
            .collect();
        rows.push_str(&format!(
            r#"<tr data-kind="{name}"><td><a href="/decisions/{name}">{name}</a></td><td>{module}</td><td>{description}</td><td>{inputs}</td></tr>"#,
            name = esc(&k.name),
            module = esc(&k.module),
            description = esc(k.description.as_deref().unwrap_or("")),
            inputs = esc(&inputs.join(", ")),
        ));
    }
    let body = if rows.is_empty() {
        r#"<h1>Decisions</h1><p class="muted">The spec declares no decision kinds ([decisions.KIND]).</p>"#
            .to_string()
    } else {
        format!(
            r#"<h1>Decisions</h1>
<p class="muted">Each decision kind the spec declares, and the numbers it looks at. Open one for its history: how often it is decided, how long people take, how often each number changed before the decision or was staler than the decision needs, and how often the numbers were not read at one instant.</p>
<table><thead><tr><th scope="col">Kind</th><th scope="col">Module</th><th scope="col">What</th><th scope="col">Inputs</th></tr></thead><tbody>{rows}</tbody></table>"#
        )
    };
    page("Decisions", Some((&caller.0, &csrf)), &body)
}

#[derive(Deserialize)]
pub(crate) struct Window {
    since: Option<String>,
}

pub(crate) async fn kind(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    UrlPath(kind): UrlPath<String>,
    Query(w): Query<Window>,
) -> Response {
    let (caller, csrf) = match person(&s, &headers) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let since = w.since.unwrap_or_else(|| "30d".into());
    let h = match crate::history::history_of(&s, &kind, &since).await {
        Ok(h) => h,
        Err(e) => {
            return (
                e.status(),
                page("Decisions", Some((&caller.0, &csrf)), &format!("<h1>{}</h1>", esc(&e.message))),
            )
                .into_response()
        }
    };
    let days: String = h
        .per_day
        .iter()
        .map(|d| format!("<tr><td>{}</td><td>{}</td><td>{}</td></tr>", esc(&d.day), d.proposed, d.decided))
        .collect();
    let wait = h.time_to_decide.as_ref().map_or("no decisions yet".to_string(), |t| {
        format!(
            "median {} ms, p90 {} ms, max {} ms over {} decisions",
            t.median_ms, t.p90_ms, t.max_ms, t.count
        )
    });
    let inputs: String = h
        .inputs
        .iter()
        .map(|i| {
            format!(
                r#"<tr data-input="{name}"><th scope="row">{name}</th><td><code>{table}.{column}</code></td><td>{need}</td><td class="changed-count">{changed} of {checked}</td><td>{unknown}</td><td class="stale-count">{stale} of {known}</td></tr>"#,
                name = esc(&i.name),
                table = esc(&i.table),
                column = esc(&i.column),
                need = esc(&i.need),
                changed = i.changed_before_decision,
                checked = i.decided_checked,
                unknown = i.unknown,
                stale = i.staler_than_needed,
                known = i.lag_known,
            )
        })
        .collect();
    let body = format!(
        r#"<p><a href="/decisions">← Decisions</a></p>
<h1>{kind}</h1>
<p class="muted">From {since} to {until}: computed from the recorded proposals and decisions, the tags that pin what each agent read, and the record between each read and its decision.{truncated}</p>
<p id="counts">{proposals} proposals: {approved} approved, {rejected} rejected, {pending} pending. Time to decide: {wait}.</p>
<p id="split">Inputs not read at one instant: {split} of {proposals}.</p>
<h2>Per day</h2>
<table><thead><tr><th scope="col">Day (UTC)</th><th scope="col">Proposed</th><th scope="col">Decided</th></tr></thead><tbody>{days}</tbody></table>
<h2>Inputs</h2>
<table id="inputs"><thead><tr><th scope="col">Input</th><th scope="col">From</th><th scope="col">Need</th><th scope="col">Changed before the decision</th><th scope="col">Unknown</th><th scope="col">Staler than needed</th></tr></thead><tbody>{inputs}</tbody></table>"#,
        kind = esc(&h.kind),
        since = esc(&h.since),
        until = esc(&h.until),
        truncated = if h.truncated { " Only the newest proposals were examined." } else { "" },
        proposals = h.proposals,
        approved = h.approved,
        rejected = h.rejected,
        pending = h.pending,
        wait = esc(&wait),
        split = h.not_one_instant,
    );
    page(&h.kind, Some((&caller.0, &csrf)), &body)
}
