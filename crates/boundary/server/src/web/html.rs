//! The HTML kit of the pages: escaping, the page frame, the stylesheet and script, and the
//! small renderings (a row table, an age, an action in words, a table's spend).

use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use serde_json::Value;

use crate::auth::Principal;
use crate::Shared;

pub(crate) const CSS: &str = include_str!("../../assets/app.css");

pub(crate) const JS: &str = include_str!("../../assets/app.js");

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

pub(crate) fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub(crate) fn age(created_at: &str) -> String {
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
pub(crate) fn action_words(action: &serde_json::Map<String, Value>) -> String {
    let plain = |v: &Value| match v {
        Value::String(t) => t.clone(),
        Value::Null => "none".to_string(),
        other => other.to_string(),
    };
    action.iter().map(|(k, v)| format!("{} {}", k.replace('_', " "), plain(v))).collect::<Vec<_>>().join(", ")
}

/// Rows as an HTML table, columns in the order `table` declares them.
pub(crate) fn rows_table(s: &Shared, table: &str, rows: &[serde_json::Map<String, Value>]) -> String {
    let Some(first) = rows.first() else {
        return r#"<p class="muted">No rows.</p>"#.into();
    };
    let declared: Vec<&String> =
        s.spec().table(table).map(|t| t.columns.keys().collect()).unwrap_or_default();
    let cols: Vec<&String> = if declared.is_empty() { first.keys().collect() } else { declared };
    let mut out = String::from("<table><thead><tr>");
    for c in &cols {
        out.push_str(&format!(r#"<th scope="col">{}</th>"#, esc(c)));
    }
    out.push_str("</tr></thead><tbody>");
    for r in rows {
        out.push_str("<tr>");
        for c in &cols {
            out.push_str(&format!("<td>{}</td>", esc(&text(r.get(c.as_str()).unwrap_or(&Value::Null)))));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

/// `12 commits, 1 compaction, 3.4 MiB, 0.8 s busy, 0.31 s CPU`.
pub(crate) fn spend_text(s: &livestate_engine::spend::Spend) -> String {
    format!(
        "{} commits, {} compactions, {:.1} MiB, {:.1} s busy, {:.2} s CPU",
        s.commits,
        s.compactions,
        s.bytes_written as f64 / (1024.0 * 1024.0),
        s.busy_ms as f64 / 1000.0,
        s.cpu_us as f64 / 1e6
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::action_words;

    #[test]
    fn an_action_reads_as_its_fields_with_text_unquoted_and_nested_values_as_json() {
        let action = json!({"item": "bolt", "lines": [1, 2], "qty": 65, "supplier_id": null});
        let serde_json::Value::Object(action) = action else { unreachable!() };
        assert_eq!(action_words(&action), "item bolt, lines [1,2], qty 65, supplier id none");
    }
}
