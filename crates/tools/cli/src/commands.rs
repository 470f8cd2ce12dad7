//! The commands. Each returns `anyhow::Result`; `lib.rs` decides the exit code.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use livestate_engine::{
    At, EngineError, Follow, Layout, Livestate, Progress, ReadRequest, Reader, SharedRead,
};

use crate::args::Command;
use crate::render;
use crate::Usage;

pub async fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Init { dir, spec, warehouse } => init(&dir, spec.as_deref(), warehouse.as_deref()).await,
        Command::Emit { dir, input, skip_invalid, json } => emit(&dir, &input, skip_invalid, json).await,
        Command::Derive { dir, once, commit_every } => derive(&dir, once, commit_every).await,
        Command::Read { dir, table, keys, snapshot, tag, json } => {
            let at = match (snapshot, tag) {
                (Some(s), _) => At::Snapshot(s),
                (_, Some(t)) => At::Tag(t),
                _ => At::Latest,
            };
            read_table(&dir, table, keys, at, json).await
        }
        Command::Tables { dir, json, advise: false } => tables(&dir, json).await,
        Command::Tables { dir, json, advise: true } => advise(&dir, json).await,
        Command::Demo { dir, seed, items, rate, duration, approve, listen, blocked_after } => {
            if !(rate > 0.0 && rate <= 100_000.0) {
                return Err(
                    Usage(format!("--rate {rate}: give events per second between 0 and 100000")).into()
                );
            }
            let opts =
                crate::demo::DemoOptions { dir, seed, items, rate, duration, approve, listen, blocked_after };
            crate::demo::run(opts).await.map(|_| ())
        }
        Command::Compact { dir, table, full } => compact(&dir, &table, full).await,
        Command::Rederive { dir, spec, tables, json } => rederive(&dir, spec.as_deref(), &tables, json).await,
        Command::Verify { dir, json } => verify(&dir, json).await,
        Command::Serve { dir, listen, principals, tag_retention, webhook } => {
            let listener = tokio::net::TcpListener::bind(&listen)
                .await
                .with_context(|| format!("listening on {listen}"))?;
            let layout = Layout::new(&dir)?;
            let principals_file = principals.clone().unwrap_or_else(|| layout.principals_file());
            let config = livestate_server::ServeConfig {
                principals,
                tag_retention,
                webhooks: webhook.into_iter().collect(),
                ..Default::default()
            };
            eprintln!("serving {} on http://{}", dir.display(), listener.local_addr()?);
            if livestate_server::auth::list_principals(&principals_file)
                .map(|p| p.is_empty())
                .unwrap_or(false)
            {
                eprintln!(
                    "no principals yet: every call gets 401. Issue tokens with `livestate token add --dir {} agent:NAME`",
                    dir.display()
                );
            }
            livestate_server::serve_with(&dir, listener, config, stop_requested()).await?;
            eprintln!("stopped; everything pending was committed");
            Ok(())
        }
        Command::Token(t) => token(t),
        Command::Export(e) => export(e).await,
        Command::Sql { dir, query, limit, json } => sql(&dir, &query, limit, json).await,
        Command::Mcp { url, token } => Ok(livestate_mcp::serve_stdio(&url, &token).await?),
        Command::Audit { id, server, json } => audit(&id, &server.url, &server.token, json).await,
        Command::Sheet { id, kind, since, server, json } => match (id, kind) {
            (_, Some(kind)) => history(&kind, &since, &server.url, &server.token, json).await,
            (Some(id), None) => sheet(&id, &server.url, &server.token, json).await,
            (None, None) => Err(Usage("give a proposal id or --kind KIND".into()).into()),
        },
        Command::Watch { dir, trigger, consumer, peek } => watch(&dir, &trigger, &consumer, peek).await,
        Command::Expire { dir, table, orphans_older_than } => expire(&dir, table, orphans_older_than).await,
    }
}

fn token(cmd: crate::args::TokenCommand) -> anyhow::Result<()> {
    use crate::args::TokenCommand;
    use livestate_server::auth;
    let file = |dir: &Path| -> anyhow::Result<PathBuf> {
        let layout = Layout::new(dir)?;
        if !layout.is_initialized() {
            return Err(EngineError::NotInitialized { dir: layout.dir }.into());
        }
        Ok(layout.principals_file())
    };
    match cmd {
        TokenCommand::Add { dir, name, scope } => {
            let token = auth::add_principal(&file(&dir)?, &name, &scope)?;
            eprintln!("{name}: token issued. It is shown once; only its hash is stored.");
            println!("{token}");
        }
        TokenCommand::Revoke { dir, name } => {
            auth::revoke_principal(&file(&dir)?, &name)?;
            eprintln!("{name}: revoked (a running server refuses the token from now on)");
        }
        TokenCommand::List { dir } => {
            for p in auth::list_principals(&file(&dir)?)? {
                let scopes = if p.scopes.is_empty() {
                    String::new()
                } else {
                    format!("  scopes: {}", p.scopes.join(", "))
                };
                println!("{}{scopes}", p.name);
            }
        }
    }
    Ok(())
}

async fn sql(dir: &Path, query: &str, limit: usize, json: bool) -> anyhow::Result<()> {
    let ctx = ReadCtx::open(dir).await?;
    let limits = livestate_sql::Limits { rows: limit, ..Default::default() };
    let answer = livestate_sql::query(&ctx.reader(), query, limits).await;
    ctx.close().await?;
    let answer = answer?;
    if json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(());
    }
    let cells: Vec<Vec<String>> = answer
        .rows
        .iter()
        .map(|r| {
            answer
                .columns
                .iter()
                .map(|c| match r.get(c) {
                    Some(serde_json::Value::String(s)) => s.clone(),
                    None | Some(serde_json::Value::Null) => "null".into(),
                    Some(v) => v.to_string(),
                })
                .collect()
        })
        .collect();
    print!("{}", render::grid(&answer.columns, &cells));
    println!("{} row(s){}", answer.rows.len(), if answer.truncated { " (limit reached)" } else { "" });
    for r in &answer.receipts {
        println!("{}", render::receipt_line(r));
    }
    Ok(())
}

async fn audit(id: &str, url: &str, token: &str, json: bool) -> anyhow::Result<()> {
    let client = livestate_client::Client::new(url, token)?;
    let a = client.audit(id).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&a)?);
        return Ok(());
    }
    print!("{}", render::audit(&a));
    Ok(())
}

async fn sheet(id: &str, url: &str, token: &str, json: bool) -> anyhow::Result<()> {
    let client = livestate_client::Client::new(url, token)?;
    let sheet = client.sheet(id).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&sheet)?);
        return Ok(());
    }
    print!("{}", render::sheet(&sheet));
    Ok(())
}

async fn history(kind: &str, since: &str, url: &str, token: &str, json: bool) -> anyhow::Result<()> {
    let client = livestate_client::Client::new(url, token)?;
    let h = client.decision_history(kind, since).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&h)?);
        return Ok(());
    }
    print!("{}", render::history(&h));
    Ok(())
}

async fn init(dir: &Path, spec: Option<&Path>, warehouse: Option<&str>) -> anyhow::Result<()> {
    let builtin;
    let spec_dir = match spec {
        Some(p) => p.to_path_buf(),
        None => {
            builtin = crate::example_spec_dir()?;
            builtin.path().to_path_buf()
        }
    };
    let ls = Livestate::init_with(dir, &spec_dir, warehouse).await?;
    println!(
        "initialised {} with {} state tables ({}) and the record archive record.events",
        ls.layout().dir.display(),
        ls.spec().tables.len(),
        ls.spec().tables.keys().cloned().collect::<Vec<_>>().join(", ")
    );
    ls.release_lease().await?;
    Ok(())
}

async fn emit(dir: &Path, input: &str, skip_invalid: bool, json: bool) -> anyhow::Result<()> {
    let bytes = if input == "-" {
        let mut b = Vec::new();
        std::io::stdin().read_to_end(&mut b).context("reading events from standard input")?;
        b
    } else {
        std::fs::read(input).map_err(|e| Usage(format!("reading events from {input}: {e}")))?
    };
    let (text, mut not_utf8) = livestate_engine::decode_lines(&bytes);
    let (text, decisions) = refuse_decisions(text);
    not_utf8.extend(decisions);
    not_utf8.sort_by_key(|e| e.line);
    if !not_utf8.is_empty() && !skip_invalid {
        return Err(EngineError::InvalidEvents(not_utf8).into());
    }
    let ls = Livestate::open(dir).await?;
    // Each chunk's offsets are printed once the record has acknowledged it (after its fsync): a
    // line without an offset was not recorded.
    let mut printed = 0;
    let outcome = ls.emit_with(&text, skip_invalid, |chunk| {
        for (line, a) in chunk {
            if json {
                println!(
                    "{}",
                    serde_json::json!({"line": line, "offset": a.offset, "duplicate": a.duplicate})
                );
            } else if a.duplicate {
                println!("line {line}: offset {} (already recorded)", a.offset);
            } else {
                println!("line {line}: offset {}", a.offset);
            }
        }
        printed += chunk.len();
    });
    let mut report = match outcome {
        Ok(r) => r,
        Err(e) if printed > 0 => {
            return Err(anyhow::Error::new(e).context(format!(
                "the first {printed} event(s) were recorded (offsets printed); the rest were not"
            )))
        }
        Err(e) => return Err(e.into()),
    };
    report.skipped.extend(not_utf8);
    report.skipped.sort_by_key(|e| e.line);
    for e in &report.skipped {
        eprintln!("skipped {e}");
    }
    let new = report.appended.iter().filter(|(_, a)| !a.duplicate).count();
    eprintln!(
        "{} event(s) appended, {} already recorded, {} skipped; record head is now offset {}",
        new,
        report.appended.len() - new,
        report.skipped.len(),
        ls.record().next_offset()
    );
    ls.release_lease().await?;
    Ok(())
}

/// Leaves empty, and returns as bad lines, the lines whose event type is `decisions.*`: only
/// `livestate serve` appends those (from proposals and decisions an agent and a person made
/// through it, docs/api.md), so a proposal cannot be forged into the inbox from a shell.
fn refuse_decisions(text: String) -> (String, Vec<livestate_engine::LineError>) {
    let decisions = livestate_server::auth::DECISIONS_MODULE;
    let mut refused = Vec::new();
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        // Only a line that names the module is parsed here; the engine checks every line.
        let head = line
            .contains(decisions)
            .then(|| livestate_spec::LineHead::peek(line))
            .flatten()
            .filter(|h| h.module() == decisions);
        match head {
            Some(h) => refused.push(livestate_engine::LineError {
                line: i + 1,
                error: livestate_spec::EventError::new(
                    "type",
                    format!(
                        "`{}` events are appended only by `livestate serve`, from the proposals and decisions made through it",
                        h.event_type
                    ),
                ),
                id: h.id,
            }),
            None => out.push_str(line),
        }
    }
    (out, refused)
}

fn progress_bar() -> ProgressBar {
    let pb = ProgressBar::new(0);
    pb.set_style(
        ProgressStyle::with_template("{spinner} deriving {pos}/{len} events [{bar:30}] {per_sec} eta {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb
}

async fn derive(dir: &Path, once: bool, commit_every: u64) -> anyhow::Result<()> {
    let ls = Livestate::open(dir).await?;
    let mut derivers = ls.derivers().await?;
    let pb = progress_bar();
    let report = ls
        .catch_up(&mut derivers, commit_every, &mut |p: Progress| {
            pb.set_length(p.total);
            pb.set_position(p.done);
        })
        .await?;
    pb.finish_and_clear();
    eprintln!(
        "derived {} event(s) into {} row(s), {} commit(s); every table reflects record offsets < {}",
        report.events, report.rows, report.commits, report.through
    );
    if once {
        ls.release_lease().await?;
        return Ok(());
    }
    eprintln!("following the record; Ctrl-C (or SIGTERM) commits what is pending and stops");
    let (stopped_tx, stop) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        stop_requested().await;
        let _ = stopped_tx.send(true);
    });
    let last = ls.follow(&mut derivers, Follow::until(stop)).await?;
    ls.release_lease().await?;
    let commits = last.commits;
    eprintln!("stopped after {commits} final commit(s)");
    Ok(())
}

/// Read access: the writer's own view when no other process owns the directory, otherwise the
/// warehouse plus the status file the owner writes.
enum ReadCtx {
    Owned(Box<Livestate>),
    Shared(Box<SharedRead>),
}

impl ReadCtx {
    async fn open(dir: &Path) -> anyhow::Result<ReadCtx> {
        match Livestate::open(dir).await {
            Ok(ls) => Ok(ReadCtx::Owned(Box::new(ls))),
            // Another process (or, on object storage, another directory's writer) writes: read
            // the warehouse as it is.
            Err(EngineError::Locked { .. } | EngineError::LeaseHeld { .. }) => {
                Ok(ReadCtx::Shared(Box::new(SharedRead::open(&Layout::new(dir)?)?)))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Ends the read: gives up the object-storage lease that opening the directory took (a
    /// reader holding it would keep every other directory off the warehouse until it expired).
    async fn close(self) -> anyhow::Result<()> {
        if let ReadCtx::Owned(ls) = self {
            ls.release_lease().await?;
        }
        Ok(())
    }

    /// The owner's reader (with its lookup index), or the warehouse's as it is.
    fn reader(&self) -> Reader<'_> {
        match self {
            ReadCtx::Owned(ls) => ls.reader(),
            ReadCtx::Shared(s) => s.reader(),
        }
    }
}

fn parse_keys(keys: Vec<String>) -> anyhow::Result<Vec<(String, String)>> {
    keys.into_iter()
        .map(|k| match k.split_once('=') {
            Some((c, v)) if !c.trim().is_empty() => Ok((c.trim().to_string(), v.to_string())),
            _ => Err(Usage(format!("--key `{k}` is not of the form column=value")).into()),
        })
        .collect()
}

async fn read_table(dir: &Path, table: String, keys: Vec<String>, at: At, json: bool) -> anyhow::Result<()> {
    if table == ARCHIVE_NAME {
        return read_archive(dir, &keys, &at, json).await;
    }
    let keys = parse_keys(keys)?;
    let ctx = ReadCtx::open(dir).await?;
    let rows = ctx.reader().read(&ReadRequest { table, keys, at }).await;
    ctx.close().await?;
    let rows = rows?;
    if json {
        let out =
            serde_json::json!({"receipt": rows.receipt, "columns": rows.columns, "rows": rows.json_rows()});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", render::rows_table(&rows));
        println!("{} row(s)", rows.rows.len());
        println!("{}", render::receipt_line(&rows.receipt));
    }
    Ok(())
}

/// The record archive's name as commands take it.
const ARCHIVE_NAME: &str = "record.events";

/// `livestate read record.events`: every archived event in offset order (what any Paimon reader
/// of `record.events` sees), for comparing other engines' reads of the archive.
async fn read_archive(dir: &Path, keys: &[String], at: &At, json: bool) -> anyhow::Result<()> {
    if !keys.is_empty() || !matches!(at, At::Latest) {
        return Err(Usage(format!(
            "{ARCHIVE_NAME} is read whole and as of its latest snapshot: drop --key, --snapshot and --tag"
        ))
        .into());
    }
    let ctx = ReadCtx::open(dir).await?;
    let rows = ctx.reader().archive_rows().await;
    ctx.close().await?;
    let rows = rows?;
    let columns: Vec<&str> = livestate_engine::schema::ARCHIVE_COLUMNS.iter().map(|(c, _)| *c).collect();
    if json {
        let rows: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::Value::Object(
                    columns
                        .iter()
                        .map(|c| (*c).to_string())
                        .zip(r.iter().map(livestate_spec::Value::to_json))
                        .collect(),
                )
            })
            .collect();
        let out = serde_json::json!({"table": ARCHIVE_NAME, "columns": columns, "rows": rows});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{}", columns.join("\t"));
        for r in &rows {
            let cells: Vec<String> = r.iter().map(|v| v.to_json().to_string()).collect();
            println!("{}", cells.join("\t"));
        }
        println!("{} event(s)", rows.len());
    }
    Ok(())
}

async fn tables(dir: &Path, json: bool) -> anyhow::Result<()> {
    let ctx = ReadCtx::open(dir).await?;
    let infos = ctx.reader().tables(None).await;
    ctx.close().await?;
    let infos = infos?;
    if json {
        println!("{}", serde_json::to_string_pretty(&infos)?);
    } else {
        print!("{}", render::tables(&infos));
    }
    Ok(())
}

async fn advise(dir: &Path, json: bool) -> anyhow::Result<()> {
    let ctx = ReadCtx::open(dir).await?;
    let reader = ctx.reader();
    let advice = livestate_spec::advice::advise(reader.spec());
    // What each budget cost in the last hour, as the deriving process measured it.
    let measured: std::collections::HashMap<String, livestate_engine::spend::TableSpend> = reader
        .tables(None)
        .await
        .map(|infos| infos.into_iter().filter_map(|i| Some((i.name, i.spend?))).collect())
        .unwrap_or_default();
    drop(reader);
    ctx.close().await?;
    if json {
        let rows: Vec<serde_json::Value> = advice
            .iter()
            .map(|a| {
                serde_json::json!({
                    "table": a.table,
                    "budget": a.budget.to_string(),
                    "recommended": a.recommended.map(|r| r.to_string()),
                    "verdict": a.verdict(),
                    "commits_per_hour": a.commits_per_hour,
                    "recommended_commits_per_hour": a.recommended_commits_per_hour,
                    "measured_last_hour": measured.get(&a.table).map(|m| m.last_hour),
                    "readers": a.readers.iter().map(|r| serde_json::json!({"kind": r.kind, "input": r.input, "need": r.need.to_string()})).collect::<Vec<_>>(),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!("budget advice from the declared decision kinds (commits an hour at each budget's cadence; a change in the spec takes effect at the next start):");
    for a in &advice {
        println!("  {}", livestate_spec::advice::describe(a));
        if let Some(m) = measured.get(&a.table) {
            println!("    measured, last hour: {}", render::spend(&m.last_hour));
        }
    }
    Ok(())
}

fn count_bar(what: &str) -> ProgressBar {
    let pb = ProgressBar::new(0);
    pb.set_style(
        ProgressStyle::with_template(&format!("{{spinner}} {what} {{pos}}/{{len}} [{{bar:30}}] eta {{eta}}"))
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb
}

async fn rederive(dir: &Path, spec: Option<&Path>, tables: &[String], json: bool) -> anyhow::Result<()> {
    let ls = Livestate::open(dir).await?;
    let pb = progress_bar();
    let report = ls
        .rederive(spec, tables, &mut |p: Progress| {
            pb.set_length(p.total);
            pb.set_position(p.done);
        })
        .await?;
    pb.finish_and_clear();
    ls.release_lease().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "derived {} event(s) again; the tables reflect record offsets < {}",
        report.events, report.through
    );
    for t in &report.tables {
        let snapshots = match (t.overwrite_snapshot, t.changelog_snapshot) {
            (Some(o), Some(c)) => format!("OVERWRITE snapshot {o}, changelog snapshot {c}"),
            (Some(o), None) => format!("OVERWRITE snapshot {o}"),
            _ => "no row changed, no new snapshot".into(),
        };
        println!(
            "state.{}: {} row(s), {} key(s) changed ({snapshots}); quarantined {} -> {}",
            t.name, t.rows, t.changed_keys, t.quarantined_before, t.quarantined_after
        );
    }
    if report.spec_replaced {
        println!("the fixed spec replaced {}", ls.layout().spec_dir().display());
    }
    Ok(())
}

async fn compact(dir: &Path, table: &str, full: bool) -> anyhow::Result<()> {
    let ls = Livestate::open(dir).await?;
    let m = ls.maintainer(table).await?;
    let mode = if full { livestate_lsm::CompactMode::Full } else { livestate_lsm::CompactMode::Auto };
    let pb = count_bar("compacting buckets");
    let started = Instant::now();
    let r = m
        .compact(mode, |done, total| {
            pb.set_length(total as u64);
            pb.set_position(done as u64);
        })
        .await?;
    pb.finish_and_clear();
    match r.snapshot_id {
        Some(id) if r.buckets > 0 => println!(
            "{}: compacted {} bucket(s), {} file(s) ({} rows) into {} file(s) ({} rows) in {:.0} ms; COMPACT snapshot {id}",
            m.name(),
            r.buckets,
            r.files_in,
            r.rows_in,
            r.files_out,
            r.rows_out,
            started.elapsed().as_secs_f64() * 1000.0
        ),
        Some(id) => println!("{}: merged the manifests into COMPACT snapshot {id}", m.name()),
        None => println!("{}: nothing to compact", m.name()),
    }
    ls.release_lease().await?;
    Ok(())
}

async fn expire(dir: &Path, table: Option<String>, orphans_older_than: Duration) -> anyhow::Result<()> {
    let ls = Livestate::open(dir).await?;
    let names = match table {
        Some(t) => vec![t],
        None => {
            for t in ls.spec().tables.values().filter(|t| !t.derived_here()) {
                println!("state.{}: derived_by = \"external\", left to the engine deriving it", t.name);
            }
            ls.table_names()
        }
    };
    for name in names {
        let m = ls.maintainer(&name).await?;
        let pb = count_bar(&format!("expiring {}", m.name()));
        let now = chrono::Utc::now().timestamp_millis();
        let r = m
            .expire(now, |done, total| {
                pb.set_length(total);
                pb.set_position(done);
            })
            .await?;
        pb.finish_and_clear();
        let o = m.remove_orphans(orphans_older_than, now).await?;
        println!(
            "{}: expired {} snapshot(s){}, deleted {} data file(s) and {} manifest file(s); earliest snapshot {}; removed {} orphan file(s) ({} bytes)",
            m.name(),
            r.snapshots,
            if r.tags.is_empty() { String::new() } else { format!(" and tag(s) {}", r.tags.join(", ")) },
            r.data_files,
            r.manifest_files,
            r.earliest.map_or("-".into(), |e| e.to_string()),
            o.files,
            o.bytes
        );
    }
    ls.release_lease().await?;
    Ok(())
}

/// Prints the firings after `consumer`'s cursor; moves the cursor past each unless `peek`.
fn deliver(ls: &Livestate, trigger: &str, consumer: &str, peek: bool) -> anyhow::Result<usize> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let mut n = 0;
    loop {
        let batch = ls.firings().pending(trigger, consumer, 256)?;
        let Some(last) = batch.last().map(|f| f.seq) else { return Ok(n) };
        for f in &batch {
            writeln!(out, "{}", serde_json::to_string(f)?)?;
        }
        out.flush()?;
        n += batch.len();
        if peek {
            return Ok(n);
        }
        // Printed and flushed first, then acknowledged: a crash in between prints these again.
        ls.firings().ack(trigger, consumer, last)?;
    }
}

async fn watch(dir: &Path, trigger: &str, consumer: &str, peek: bool) -> anyhow::Result<()> {
    let ls = Livestate::open(dir).await?;
    if !ls.spec().triggers.contains_key(trigger) {
        let known = ls.spec().triggers.keys().cloned().collect();
        return Err(EngineError::UnknownTrigger { name: trigger.into(), known }.into());
    }
    // The names the API gives cursors: a principal's own (`agent:procurement`) or one of its
    // named cursors (`agent:procurement/night-shift`), or a bare name as the API takes it.
    let part_ok = |p: &str, extra: &str| {
        !p.is_empty()
            && p.len() <= 64
            && p != "."
            && p != ".."
            && p.chars().all(|ch| ch.is_ascii_alphanumeric() || "_-.".contains(ch) || extra.contains(ch))
    };
    let named = match consumer.split_once('/') {
        None => part_ok(consumer, ":"),
        Some((principal, own)) => part_ok(principal, ":") && part_ok(own, ""),
    };
    if !named {
        let shown: String = consumer.chars().take(60).collect();
        return Err(Usage(format!(
            "--consumer `{}`: a consumer is 1-64 letters, digits, `_`, `-`, `.` or `:`, or a principal and one of \
             its cursors as the API names them (`agent:procurement/night-shift`)",
            shown.escape_debug()
        ))
        .into());
    }
    let n = deliver(&ls, trigger, consumer, peek);
    ls.release_lease().await?;
    eprintln!("{} firing(s) of {trigger} for {consumer}", n?);
    Ok(())
}

async fn export(cmd: crate::args::ExportCommand) -> anyhow::Result<()> {
    let crate::args::ExportCommand::FlinkSql { dir, kafka_topic, kafka_bootstrap, warehouse } = cmd;
    let layout = Layout::new(&dir)?;
    let warehouse = match warehouse {
        Some(w) => w,
        None => match layout.warehouse()? {
            livestate_engine::Warehouse::Local(p) => format!("file://{}", p.display()),
            s3 => s3.uri(),
        },
    };
    let target = livestate_engine::flink::FlinkTarget { warehouse, kafka_topic, kafka_bootstrap };
    print!("{}", livestate_engine::flink::flink_sql(&layout, &target).await?);
    Ok(())
}

async fn verify(dir: &Path, json: bool) -> anyhow::Result<()> {
    let report = livestate_engine::verify::verify(dir).await?;
    let problems = report.problems();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"report": report, "problems": problems}))?
        );
    } else {
        print!("{}", render::verify(&report));
    }
    if problems.is_empty() {
        return Ok(());
    }
    bail!("{} problem(s) found in {}", problems.len(), dir.display())
}

/// Resolves when the process is asked to stop: Ctrl-C (SIGINT) or, on Unix, SIGTERM, which
/// service managers and container runtimes send. Either way what is pending is committed and an
/// object-storage lease given up before the process exits.
async fn stop_requested() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
