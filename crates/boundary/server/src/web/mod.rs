//! The approval inbox on the web: server-rendered pages for people, with a little JavaScript
//! for live updates (server-sent events). Assets live in `assets/` and are built into the
//! binary; no build step.
//!
//! Sign-in takes a `person:` token (agents and modules cannot sign in, so they cannot decide
//! here either). The session is a random id in an `HttpOnly`, `SameSite=Strict` cookie; the
//! token stays in server memory and is checked against the principals file on every request,
//! so revoking it ends the session. Every form carries the session's CSRF token. Failed
//! sign-ins are limited to 10 a minute.

use std::sync::Arc;

use axum::extract::{Form, Path as UrlPath, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::Value;

use crate::auth::{Permission, Role};
use crate::proposals::{audit_of, decide_as, NewDecision};
use crate::Shared;

pub(crate) mod decisions;
mod html;
mod lag;
mod session;

pub(crate) use html::*;
pub(crate) use lag::*;
pub(crate) use session::*;

pub(crate) async fn asset_css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response()
}

pub(crate) async fn asset_js() -> Response {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], JS).into_response()
}

pub(crate) async fn root() -> Redirect {
    Redirect::to("/inbox")
}

#[derive(Deserialize)]
pub(crate) struct Note {
    #[serde(default)]
    msg: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

fn flash(n: &Note) -> String {
    let mut out = String::new();
    if let Some(m) = &n.msg {
        out.push_str(&format!(r#"<p class="flash" role="status">{}</p>"#, esc(m)));
    }
    if let Some(e) = &n.error {
        out.push_str(&format!(r#"<p class="flash error" role="alert">{}</p>"#, esc(e)));
    }
    out
}

pub(crate) async fn signin_page(Query(n): Query<Note>) -> Response {
    let body = format!(
        r#"<h1>Sign in</h1>
{flash}
<form method="post" action="/signin" class="decide">
<label for="token">Your person token</label>
<input type="password" id="token" name="token" autocomplete="current-password" required>
<p class="muted">Issued with <code>livestate token add person:NAME --scope MODULE</code>. Agents and modules cannot sign in.</p>
<div class="buttons"><button type="submit">Sign in</button></div>
</form>"#,
        flash = flash(&n)
    );
    page("Sign in", None, &body)
}

#[derive(Deserialize)]
pub(crate) struct SignIn {
    token: String,
}

pub(crate) async fn signin(State(s): State<Arc<Shared>>, Form(f): Form<SignIn>) -> Response {
    if s.sessions().sign_ins_blocked() {
        return (StatusCode::TOO_MANY_REQUESTS, "too many failed sign-ins; wait a minute").into_response();
    }
    let fail = |why: &str| {
        s.sessions().sign_in_failed();
        Redirect::to(&format!("/signin?error={}", urlencode(why))).into_response()
    };
    let p = match s.principals().authenticate(Some(&f.token)) {
        Ok(p) => p,
        Err(_) => return fail("That token is not valid (unknown or revoked)."),
    };
    if !matches!(p.role, Role::Person { .. }) {
        return fail(&format!("Only people sign in here; that token belongs to {}.", p.name));
    }
    let id = s.sessions().start(f.token);
    let mut r = Redirect::to("/inbox").into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        format!("{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}", SESSION_TTL.as_secs())
            .parse()
            .expect("a cookie header"),
    );
    r
}

#[derive(Deserialize)]
pub(crate) struct CsrfOnly {
    csrf: String,
}

pub(crate) async fn signout(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Form(f): Form<CsrfOnly>,
) -> Response {
    let (_, csrf) = match person(&s, &headers) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    if let Err(r) = check_csrf(&csrf, &f.csrf) {
        return r.into_response();
    }
    if let Some(id) = cookie_of(&headers) {
        s.sessions().end(&id);
    }
    let mut r = Redirect::to("/signin?msg=Signed%20out.").into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0").parse().expect("a cookie header"),
    );
    r
}

fn inbox_rows(s: &Shared) -> String {
    let pending = s.store().list(Some("pending"), 200).unwrap_or_default();
    if pending.is_empty() {
        return r#"<tr><td colspan="6" class="muted">Nothing waiting for a decision.</td></tr>"#.into();
    }
    let mut out = String::new();
    for p in pending {
        let action = s.proposal_document(&p).map(|d| action_words(&d.action)).unwrap_or_default();
        out.push_str(&format!(
            r#"<tr data-proposal="{id}"><td><a href="/proposals/{id}">{summary}</a></td><td>{kind}</td><td>{agent}</td><td class="action-words">{action}</td><td><span class="risk risk-{risk}">{risk}</span></td><td><time datetime="{created}">{age}</time></td></tr>"#,
            id = esc(&p.id),
            summary = esc(&p.summary),
            kind = esc(&p.kind),
            agent = esc(&p.agent),
            action = esc(&action),
            risk = esc(p.risk_level.as_str()),
            created = esc(&p.created_at),
            age = age(&p.created_at),
        ));
    }
    out
}

pub(crate) async fn inbox(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(n): Query<Note>,
) -> Response {
    let (caller, csrf) = match person(&s, &headers) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let decided: String = s
        .store()
        .list(None, 50)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.status != livestate_api::proposal::ProposalStatus::Pending)
        .take(10)
        .map(|p| {
            let by = p.decision.as_ref().map(|d| d.decided_by.clone()).unwrap_or_default();
            format!(
                r#"<li><a href="/proposals/{id}">{summary}</a> <span class="status status-{st}">{st}</span> <span class="muted">by {by}</span></li>"#,
                id = esc(&p.id),
                summary = esc(&p.summary),
                st = esc(p.status.as_str()),
                by = esc(&by)
            )
        })
        .collect();
    let body = format!(
        r#"<h1>Approval inbox</h1>
{flash}
<p class="muted">Proposals waiting for a decision, newest first. This list updates by itself.</p>
<table aria-describedby="inbox-caption">
<caption id="inbox-caption" class="muted">Pending proposals</caption>
<thead><tr><th scope="col">Proposal</th><th scope="col">Kind</th><th scope="col">Agent</th><th scope="col">Drafted action</th><th scope="col">Risk</th><th scope="col">Age</th></tr></thead>
<tbody id="pending" data-live="/inbox/events" data-fragment="/inbox/rows">{rows}</tbody>
</table>
<h2>Recently decided</h2>
<ul>{decided}</ul>"#,
        flash = flash(&n),
        rows = inbox_rows(&s),
    );
    page("Inbox", Some((&caller.0, &csrf)), &body)
}

pub(crate) async fn inbox_fragment(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Err(r) = person(&s, &headers) {
        return r.into_response();
    }
    Html(inbox_rows(&s)).into_response()
}

/// `changed` whenever the proposal store moves (a proposal or decision was recorded).
pub(crate) async fn inbox_events(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Err(r) = person(&s, &headers) {
        return r.into_response();
    }
    let mut followed = s.followed_rx();
    let mut stopping = s.stopping();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, std::convert::Infallible>>(8);
    tokio::spawn(async move {
        let mut last = *followed.borrow_and_update();
        loop {
            tokio::select! {
                changed = followed.changed() => if changed.is_err() { return },
                _ = stopping.changed() => return,
                _ = tx.closed() => return,
            }
            let now = *followed.borrow_and_update();
            if now != last {
                last = now;
                if tx.send(Ok(Event::default().event("changed").data(now.to_string()))).await.is_err() {
                    return;
                }
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

pub(crate) async fn proposal(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    Query(n): Query<Note>,
) -> Response {
    let (caller, csrf) = match person(&s, &headers) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let (p, audit) = match (s.proposal(&id), audit_of(&s, &id).await) {
        (Ok(p), Ok(a)) => (p, a),
        (Err(e), _) | (_, Err(e)) => {
            return (
                e.status(),
                page("Not found", Some((&caller.0, &csrf)), &format!("<h1>{}</h1>", esc(&e.message))),
            )
                .into_response()
        }
    };
    let doc = &audit.proposal;
    let params: String = doc
        .rule
        .parameters
        .iter()
        .map(|(k, v)| format!("<dt>{}</dt><dd>{}</dd>", esc(k), esc(&text(v))))
        .collect();
    let reasons: String = doc.risk.reasons.iter().map(|x| format!("<li>{}</li>", esc(x))).collect();
    let mut evidence = String::new();
    for e in &audit.evidence {
        let lag = e.cited_lag_ms.map_or("-".to_string(), |l| format!("{l} ms"));
        evidence.push_str(&format!(
            r#"<section aria-label="Evidence from {table}"><h3>{table}</h3>
<p class="muted">Snapshot {snap}, record offset {offset}, lag when read {lag}; pinned by tag <code>{tag}</code>. {same}</p>
{rows}</section>"#,
            table = esc(&e.table),
            snap = e.snapshot_id,
            offset = e.cited_offset.map_or("-".to_string(), |o| o.to_string()),
            lag = esc(&lag),
            tag = esc(&e.tag),
            same = if e.cited_rows_identical { "The rows cited are exactly these." } else { "<strong>The rows cited differ from the pinned snapshot.</strong>" },
            rows = rows_table(&s, &e.table, &e.rows_at_tag),
        ));
    }
    // A declared kind's sheet comes first; any other kind has none.
    let sheet = match crate::sheet::sheet_of(&s, &id).await {
        Ok(sh) => Some(decisions::sheet_html(&sh)),
        Err(e) if e.code == livestate_api::ErrorCode::NotFound => None,
        Err(e) => Some((
            esc(&p.summary),
            format!(r#"<p class="flash error">The sheet could not be read: {}</p>"#, esc(&e.message)),
        )),
    };
    // The numbers first, then the action in words, then (on request) the raw action.
    let (headline, sheet) = match sheet {
        Some((words, html)) => (
            format!("Decision input sheet: {}", esc(&p.kind)),
            format!(r#"{html}<h2>The action</h2><p id="summary" class="action-words">{words}</p>"#),
        ),
        None => (format!(r#"<span id="summary">{}</span>"#, esc(&p.summary)), String::new()),
    };
    let decision = match &p.decision {
        Some(d) => format!(
            r#"<p id="decision"><span class="status status-{st}">{st}</span> by {by} at {at}: {reason}</p>"#,
            st = esc(d.decision.as_str()),
            by = esc(&d.decided_by),
            at = esc(&d.decided_at),
            reason = esc(d.reason.as_deref().unwrap_or("")),
        ),
        None if caller.0.may(&Permission::Decide(p.module.clone())) => format!(
            r#"<form method="post" action="/proposals/{id}/decide" class="decide" id="decide">
<input type="hidden" name="csrf" value="{csrf}">
<label for="reason">Reason (required)</label>
<textarea id="reason" name="reason" rows="3" required></textarea>
<div class="buttons"><button type="submit" name="decision" value="approve" class="approve">Approve</button>
<button type="submit" name="decision" value="reject" class="reject">Reject</button></div>
</form>"#,
            id = esc(&p.id),
            csrf = esc(&csrf)
        ),
        None => format!(
            r#"<p class="muted">Pending. You may not decide proposals for module {}.</p>"#,
            esc(&p.module)
        ),
    };
    let body = format!(
        r#"<p><a href="/inbox">← Inbox</a></p>
<h1>{headline}</h1>
{flash}
<p><span class="status status-{status}">{status}</span> <span class="muted">{kind} proposed by agent {agent} for module {module}, {age} (record offset {offset})</span></p>
{sheet}
<details id="raw-action"><summary>Drafted action (JSON)</summary>
<pre>{action}</pre></details>
<h2>Rule: {rule} v{version}</h2>
<p>{rule_text}</p>
<dl>{params}</dl>
<h2>Risk: <span class="risk risk-{risk}">{risk}</span></h2>
<ul>{reasons}</ul>
<h2>Evidence: what the agent read</h2>
{evidence}
<h2>Decision</h2>
{decision}
<p><a href="/proposals/{id}/audit">Lineage: proposal → decision → module events → state</a></p>"#,
        flash = flash(&n),
        status = esc(p.status.as_str()),
        kind = esc(&p.kind),
        agent = esc(&p.agent),
        module = esc(&p.module),
        age = age(&p.created_at),
        offset = p.created_offset,
        action = esc(&serde_json::to_string_pretty(&doc.action).unwrap_or_default()),
        rule = esc(&doc.rule.name),
        version = esc(&doc.rule.version),
        rule_text = esc(&doc.rule.text),
        risk = esc(p.risk_level.as_str()),
        id = esc(&p.id),
    );
    page(&p.summary, Some((&caller.0, &csrf)), &body)
}

#[derive(Deserialize)]
pub(crate) struct DecideForm {
    csrf: String,
    decision: String,
    reason: String,
}

pub(crate) async fn decide(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    Form(f): Form<DecideForm>,
) -> Response {
    let (caller, csrf) = match person(&s, &headers) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    if let Err(r) = check_csrf(&csrf, &f.csrf) {
        return r.into_response();
    }
    let decision = match f.decision.as_str() {
        "approve" => livestate_api::proposal::Verdict::Approve,
        "reject" => livestate_api::proposal::Verdict::Reject,
        other => {
            let why = format!("decision `{other}`: expected approve or reject");
            return Redirect::to(&format!("/proposals/{}?error={}", urlencode(&id), urlencode(&why)))
                .into_response();
        }
    };
    let d = NewDecision { decision, reason: f.reason };
    let target = match decide_as(&s, &caller, &id, &d).await {
        Ok(v) => {
            format!("/proposals/{}?msg={}", urlencode(&id), urlencode(&format!("Recorded: {}.", v.status)))
        }
        Err(e) => format!("/proposals/{}?error={}", urlencode(&id), urlencode(&e.message)),
    };
    Redirect::to(&target).into_response()
}

pub(crate) async fn lineage(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Response {
    let (caller, csrf) = match person(&s, &headers) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let a = match audit_of(&s, &id).await {
        Ok(a) => a,
        Err(e) => {
            return (
                e.status(),
                page("Not found", Some((&caller.0, &csrf)), &format!("<h1>{}</h1>", esc(&e.message))),
            )
                .into_response()
        }
    };
    let doc = &a.proposal;
    let decision = match &a.decision {
        Some(d) => format!(
            "{} by {} at {}: {}",
            esc(d.decision.as_str()),
            esc(&d.decided_by),
            esc(&d.decided_at),
            esc(d.reason.as_deref().unwrap_or("-"))
        ),
        None => "Not decided yet.".into(),
    };
    let events: String = a
        .caused_events
        .iter()
        .map(|e| {
            format!(
                "<li>offset {} <code>{}</code> {} <code>{}</code></li>",
                e.offset,
                esc(&e.event_type),
                esc(&e.id),
                esc(&Value::Object(e.data.clone()).to_string())
            )
        })
        .collect();
    let state: String = a
        .state_after
        .iter()
        .map(|st| {
            format!(
                "<h3>{} <code>{}</code></h3>{}",
                esc(&st.table),
                esc(&Value::Object(st.key.clone()).to_string()),
                rows_table(&s, &st.table, &st.rows)
            )
        })
        .collect();
    let body = format!(
        r#"<p><a href="/proposals/{id}">← Proposal</a></p>
<h1>Lineage of {id}</h1>
<ol class="lineage">
<li><strong>Proposal</strong> by agent {agent}, {created} (offset {offset}): {summary}</li>
<li><strong>Decision</strong>: {decision}</li>
<li><strong>Module events</strong> citing it:<ul>{events}</ul></li>
<li><strong>State now</strong>:{state}</li>
</ol>"#,
        id = esc(&id),
        agent = esc(&doc.agent),
        created = esc(&doc.created_at),
        offset = a.created_offset,
        summary = esc(&doc.summary),
        events = if events.is_empty() { "<li class=\"muted\">none yet</li>".into() } else { events },
    );
    page(&format!("Lineage of {id}"), Some((&caller.0, &csrf)), &body)
}

pub(crate) async fn tables(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let (caller, csrf) = match person(&s, &headers) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let infos = match s.table_infos().await {
        Ok(i) => i,
        Err(e) => return e.into_response(),
    };
    let now = chrono::Utc::now();
    let advice = livestate_spec::advice::advise(s.spec());
    let mut rows = String::new();
    for i in &infos {
        let advised = match advice.iter().find(|a| a.table == i.name) {
            None => String::new(),
            Some(a) => match (a.verdict(), &a.recommended) {
                ("unread", _) => "read by no declared decision".to_string(),
                ("keep", _) => "keep".to_string(),
                (v, Some(r)) => format!("{v} to {r}"),
                (v, None) => v.to_string(),
            },
        };
        let budget_ms =
            s.spec().table(&i.name).map_or(0, |t| t.freshness.allowed_lag(now).as_millis() as u64);
        let over = i.receipt.within_budget == Some(false);
        let files: usize = i.health.buckets.iter().map(|b| b.files).sum();
        let runs = i.health.buckets.iter().map(|b| b.sorted_runs).max().unwrap_or(0);
        rows.push_str(&format!(
            r#"<tr{class}><td>{name}</td><td>{budget}</td><td>{lag}</td><td>{plot}</td><td>{snap}</td><td>{offset}</td><td>{files}</td><td>{runs}</td><td>{tags}</td><td>{quarantined}</td><td>{spend}</td><td class="advice">{advised}</td></tr>"#,
            advised = esc(&advised),
            class = if over { r#" class="over-budget""# } else { "" },
            name = esc(&i.name),
            budget = esc(&i.receipt.budget),
            lag = i.receipt.lag_ms.map_or("-".into(), livestate_engine::read::format_lag),
            plot = sparkline(&s.lag_history().of(&i.name), budget_ms),
            snap = i.receipt.snapshot_id.map_or("-".into(), |v| v.to_string()),
            offset = i.receipt.offset.map_or("external".into(), |o| o.to_string()),
            tags = i.health.tags.len(),
            spend = i.spend.as_ref().map_or("-".into(), |sp| esc(&spend_text(&sp.last_hour))),
            quarantined = match &i.last_quarantined {
                Some(q) => format!(
                    r#"<span class="over-budget" title="latest: offset {} ({}): {}">{}</span>"#,
                    q.offset,
                    esc(&q.event_type),
                    esc(&q.message),
                    i.quarantined
                ),
                None => i.quarantined.to_string(),
            },
        ));
    }
    let body = format!(
        r#"<h1>State tables</h1>
<p class="muted">Each table's freshness budget and measured lag (plot: the last hour; dashed line: the budget). Tables over budget are marked. Quarantined: row operations whose derivation failed and was set aside (the event stays in the record; hover for the latest). Spent: what the budget cost in the last hour, measured: data commits, compactions, bytes written and their wall time. Decisions need: the loosest budget serving every declared decision that reads the table (<code>livestate tables --advise</code>).</p>
<table><thead><tr><th scope="col">Table</th><th scope="col">Budget</th><th scope="col">Lag</th><th scope="col">Lag, last hour</th><th scope="col">Snapshot</th><th scope="col">Offset</th><th scope="col">Files</th><th scope="col">Max sorted runs</th><th scope="col">Tags</th><th scope="col">Quarantined</th><th scope="col">Spent, last hour</th><th scope="col">Decisions need</th></tr></thead>
<tbody>{rows}</tbody></table>"#
    );
    page("Tables", Some((&caller.0, &csrf)), &body)
}
