//! The approval inbox on the web: server-rendered pages for people, with a little JavaScript
//! for live updates (server-sent events). Assets live in `assets/` and are built into the
//! binary; no build step.
//!
//! Sign-in takes a `person:` token (agents and modules cannot sign in, so they cannot decide
//! here either). The session is a random id in an `HttpOnly`, `SameSite=Strict` cookie; the
//! token stays in server memory and is checked against the principals file on every request,
//! so revoking it ends the session. Every form carries the session's CSRF token. Failed
//! sign-ins are limited to 10 a minute.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Form, Path as UrlPath, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::Value;

use crate::auth::{Permission, Principal, Role};
use crate::proposals::{audit_of, decide_as, document, find, NewDecision};
use crate::{Caller, Shared};

const CSS: &str = include_str!("../assets/app.css");
const JS: &str = include_str!("../assets/app.js");
const COOKIE: &str = "livestate_session";
/// Failed sign-ins allowed per minute (over all clients).
const SIGN_IN_FAILURES_PER_MINUTE: usize = 10;
/// Sessions end after this long.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

struct Session {
    token: String,
    csrf: String,
    started: Instant,
}

/// Signed-in people, and recent failed sign-ins.
#[derive(Default)]
pub(crate) struct Sessions {
    map: Mutex<HashMap<String, Session>>,
    failures: Mutex<VecDeque<Instant>>,
}

fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    getrandom::fill(&mut b).expect("the operating system provides randomness");
    crate::auth::hex(&b)
}

/// (unix seconds, lag in ms) samples, oldest first.
type Samples = VecDeque<(i64, Option<u64>)>;

/// Each table's measured lag over the last hour, sampled every few seconds.
#[derive(Default)]
pub(crate) struct LagHistory {
    map: Mutex<BTreeMap<String, Samples>>,
}

/// Samples kept per table (an hour at one every 5 s).
const LAG_SAMPLES: usize = 720;
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

    fn of(&self, table: &str) -> Vec<(i64, Option<u64>)> {
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
        let lag = s.ls.lag_source();
        for name in s.ls.spec().tables.keys() {
            let at = livestate_engine::At::Latest;
            if let Ok(r) = livestate_engine::read::receipt(s.ls.catalog(), s.ls.spec(), name, &at, &lag).await
            {
                s.lag_history.record(name, now, r.lag_ms);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(LAG_SAMPLE_EVERY) => {}
            _ = stop.changed() => {}
        }
    }
}

/// HTML-escapes text.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

pub(crate) fn page(title: &str, who: Option<(&Principal, &str)>, body: &str) -> Response {
    let nav = match who {
        Some((p, csrf)) => format!(
            r#"<nav aria-label="Main"><a href="/inbox">Inbox</a><a href="/decisions">Decisions</a><a href="/tables">Tables</a></nav>
<form method="post" action="/signout"><input type="hidden" name="csrf" value="{csrf}"><span class="muted">Signed in as {name}</span> <button type="submit">Sign out</button></form>"#,
            csrf = esc(csrf),
            name = esc(&p.name)
        ),
        None => String::new(),
    };
    let html = format!(
        r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · livestate</title><link rel="stylesheet" href="/assets/app.css"></head>
<body>
<header><span class="brand">livestate</span>{nav}</header>
<main id="main">
{body}
</main>
<script src="/assets/app.js" defer></script>
</body></html>"#,
        title = esc(title)
    );
    let mut r = Html(html).into_response();
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        "default-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'"
            .parse()
            .expect("header"),
    );
    r
}

fn cookie_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| {
            let (k, v) = c.trim().split_once('=')?;
            (k == COOKIE).then(|| v.to_string())
        })
}

/// Why a page request is turned away.
pub(crate) enum Refused {
    /// No live session: sign in.
    SignIn,
    /// A form without this session's CSRF token.
    StaleForm,
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::SignIn => Redirect::to("/signin").into_response(),
            Refused::StaleForm => {
                (StatusCode::FORBIDDEN, "the form is stale or was not sent by this site; reload the page")
                    .into_response()
            }
        }
    }
}

/// The signed-in person of a request and the session's CSRF token, or a redirect to sign in.
pub(crate) fn person(s: &Shared, headers: &HeaderMap) -> Result<(Caller, String), Refused> {
    let to_signin = || Refused::SignIn;
    let id = cookie_of(headers).ok_or_else(to_signin)?;
    let (token, csrf) = {
        let mut map = s.sessions.map.lock().expect("sessions");
        match map.get(&id) {
            Some(sess) if sess.started.elapsed() < SESSION_TTL => (sess.token.clone(), sess.csrf.clone()),
            Some(_) => {
                map.remove(&id);
                return Err(to_signin());
            }
            None => return Err(to_signin()),
        }
    };
    match s.principals.authenticate(Some(&token)) {
        Ok(p) => Ok((Caller(p), csrf)),
        Err(_) => {
            s.sessions.map.lock().expect("sessions").remove(&id);
            Err(to_signin())
        }
    }
}

fn check_csrf(expected: &str, given: &str) -> Result<(), Refused> {
    if !expected.is_empty()
        && expected.len() == given.len()
        && expected.as_bytes().iter().zip(given.as_bytes()).all(|(a, b)| a == b)
    {
        Ok(())
    } else {
        Err(Refused::StaleForm)
    }
}

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
    {
        let mut failures = s.sessions.failures.lock().expect("sessions");
        while failures.front().is_some_and(|t| t.elapsed() > Duration::from_secs(60)) {
            failures.pop_front();
        }
        if failures.len() >= SIGN_IN_FAILURES_PER_MINUTE {
            return (StatusCode::TOO_MANY_REQUESTS, "too many failed sign-ins; wait a minute")
                .into_response();
        }
    }
    let fail = |why: &str| {
        s.sessions.failures.lock().expect("sessions").push_back(Instant::now());
        Redirect::to(&format!("/signin?error={}", urlencode(why))).into_response()
    };
    let p = match s.principals.authenticate(Some(&f.token)) {
        Ok(p) => p,
        Err(_) => return fail("That token is not valid (unknown or revoked)."),
    };
    if !matches!(p.role, Role::Person { .. }) {
        return fail(&format!("Only people sign in here; that token belongs to {}.", p.name));
    }
    let id = random_hex(24);
    s.sessions
        .map
        .lock()
        .expect("sessions")
        .insert(id.clone(), Session { token: f.token, csrf: random_hex(16), started: Instant::now() });
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
        s.sessions.map.lock().expect("sessions").remove(&id);
    }
    let mut r = Redirect::to("/signin?msg=Signed%20out.").into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0").parse().expect("a cookie header"),
    );
    r
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn age(created_at: &str) -> String {
    let Ok(t) = chrono::DateTime::parse_from_rfc3339(created_at) else { return created_at.to_string() };
    let secs = (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds().max(0);
    match secs {
        0..=59 => format!("{secs} s ago"),
        60..=3599 => format!("{} min ago", secs / 60),
        3600..=86_399 => format!("{} h ago", secs / 3600),
        _ => format!("{} d ago", secs / 86_400),
    }
}

/// A drafted action as a person reads it in a list: `item bolt, qty 65, supplier acme`
/// (each field and its value, text unquoted; a nested value as compact JSON). The raw JSON
/// is on the proposal's page, on request.
fn action_words(action: &Value) -> String {
    let plain = |v: &Value| match v {
        Value::String(t) => t.clone(),
        Value::Null => "none".to_string(),
        other => other.to_string(),
    };
    match action {
        Value::Object(fields) => fields
            .iter()
            .map(|(k, v)| format!("{} {}", k.replace('_', " "), plain(v)))
            .collect::<Vec<_>>()
            .join(", "),
        other => plain(other),
    }
}

fn inbox_rows(s: &Shared) -> String {
    let pending = s.store.list(Some("pending"), 200).unwrap_or_default();
    if pending.is_empty() {
        return r#"<tr><td colspan="6" class="muted">Nothing waiting for a decision.</td></tr>"#.into();
    }
    let mut out = String::new();
    for p in pending {
        let action = document(s, &p).ok().and_then(|d| d.get("action").map(action_words)).unwrap_or_default();
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
        .store
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
    let mut followed = s.followed.clone();
    let mut stopping = s.stopping.clone();
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

/// Rows as an HTML table, columns in the order `table` declares them.
fn rows_table(s: &Shared, table: &str, rows: &[Value]) -> String {
    let Some(first) = rows.first().and_then(Value::as_object) else {
        return r#"<p class="muted">No rows.</p>"#.into();
    };
    let declared: Vec<&String> =
        s.ls.spec().table(table).map(|t| t.columns.keys().collect()).unwrap_or_default();
    let cols: Vec<&String> = if declared.is_empty() { first.keys().collect() } else { declared };
    let mut out = String::from("<table><thead><tr>");
    for c in &cols {
        out.push_str(&format!(r#"<th scope="col">{}</th>"#, esc(c)));
    }
    out.push_str("</tr></thead><tbody>");
    for r in rows {
        out.push_str("<tr>");
        for c in &cols {
            out.push_str(&format!("<td>{}</td>", esc(&text(&r[c.as_str()]))));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
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
    let (p, audit) = match (find(&s, &id), audit_of(&s, &id).await) {
        (Ok(p), Ok(a)) => (p, a),
        (Err(e), _) | (_, Err(e)) => {
            return (
                e.status(),
                page("Not found", Some((&caller.0, &csrf)), &format!("<h1>{}</h1>", esc(&e.message))),
            )
                .into_response()
        }
    };
    let doc = &audit["proposal"];
    let params: String = doc["rule"]["parameters"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("<dt>{}</dt><dd>{}</dd>", esc(k), esc(&text(v)))).collect())
        .unwrap_or_default();
    let reasons: String = doc["risk"]["reasons"]
        .as_array()
        .map(|r| r.iter().map(|x| format!("<li>{}</li>", esc(&text(x)))).collect())
        .unwrap_or_default();
    let mut evidence = String::new();
    for e in audit["evidence"].as_array().into_iter().flatten() {
        let lag = e["cited_lag_ms"].as_u64().map_or("-".to_string(), |l| format!("{l} ms"));
        evidence.push_str(&format!(
            r#"<section aria-label="Evidence from {table}"><h3>{table}</h3>
<p class="muted">Snapshot {snap}, record offset {offset}, lag when read {lag}; pinned by tag <code>{tag}</code>. {same}</p>
{rows}</section>"#,
            table = esc(&text(&e["table"])),
            snap = esc(&text(&e["snapshot_id"])),
            offset = esc(&text(&e["cited_offset"])),
            lag = esc(&lag),
            tag = esc(&text(&e["tag"])),
            same = if e["cited_rows_identical"] == Value::Bool(true) { "The rows cited are exactly these." } else { "<strong>The rows cited differ from the pinned snapshot.</strong>" },
            rows = rows_table(&s, &text(&e["table"]), e["rows_at_tag"].as_array().map(Vec::as_slice).unwrap_or(&[])),
        ));
    }
    // A declared kind's sheet comes first; any other kind has none.
    let sheet = match crate::sheet::sheet_of(&s, &id).await {
        Ok(sh) => Some(crate::web_decisions::sheet_html(&sh)),
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
        action = esc(&serde_json::to_string_pretty(&doc["action"]).unwrap_or_default()),
        rule = esc(&text(&doc["rule"]["name"])),
        version = esc(&text(&doc["rule"]["version"])),
        rule_text = esc(&text(&doc["rule"]["text"])),
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
    let doc = &a["proposal"];
    let decision = match a.get("decision").filter(|d| !d.is_null()) {
        Some(d) => format!(
            "{} by {} at {}: {}",
            esc(&text(&d["decision"])),
            esc(&text(&d["decided_by"])),
            esc(&text(&d["decided_at"])),
            esc(&text(&d["reason"]))
        ),
        None => "Not decided yet.".into(),
    };
    let events: String = a["caused_events"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "<li>offset {} <code>{}</code> {} <code>{}</code></li>",
                esc(&text(&e["offset"])),
                esc(&text(&e["type"])),
                esc(&text(&e["id"])),
                esc(&e["data"].to_string())
            )
        })
        .collect();
    let state: String = a["state_after"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|st| {
            format!(
                "<h3>{} <code>{}</code></h3>{}",
                esc(&text(&st["table"])),
                esc(&st["key"].to_string()),
                rows_table(&s, &text(&st["table"]), st["rows"].as_array().map(Vec::as_slice).unwrap_or(&[]))
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
        agent = esc(&text(&doc["agent"])),
        created = esc(&text(&doc["created_at"])),
        offset = esc(&text(&a["created_offset"])),
        summary = esc(&text(&doc["summary"])),
        events = if events.is_empty() { "<li class=\"muted\">none yet</li>".into() } else { events },
    );
    page(&format!("Lineage of {id}"), Some((&caller.0, &csrf)), &body)
}

fn sparkline(samples: &[(i64, Option<u64>)], budget_ms: u64) -> String {
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

/// `12 commits, 1 compaction, 3.4 MiB, 0.8 s busy, 0.31 s CPU`.
fn spend_text(s: &livestate_engine::spend::Spend) -> String {
    format!(
        "{} commits, {} compactions, {:.1} MiB, {:.1} s busy, {:.2} s CPU",
        s.commits,
        s.compactions,
        s.bytes_written as f64 / (1024.0 * 1024.0),
        s.busy_ms as f64 / 1000.0,
        s.cpu_us as f64 / 1e6
    )
}

pub(crate) async fn tables(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let (caller, csrf) = match person(&s, &headers) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let infos = match livestate_engine::read::tables(
        s.ls.catalog(),
        s.ls.spec(),
        &s.ls.lag_source(),
        Some(&s.maintainers),
    )
    .await
    {
        Ok(i) => i,
        Err(e) => return crate::error::ApiError::from(e).into_response(),
    };
    let now = chrono::Utc::now();
    let advice = livestate_spec::advice::advise(s.ls.spec());
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
            s.ls.spec().table(&i.name).map_or(0, |t| t.freshness.allowed_lag(now).as_millis() as u64);
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
            plot = sparkline(&s.lag_history.of(&i.name), budget_ms),
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
