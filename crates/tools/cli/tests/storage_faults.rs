//! Storage faults against the real binary: a full disk, failing writes and failing fsyncs
//! injected into `livestate` by an LD_PRELOAD shim (`tests/faults/inject.c`), and record,
//! manifest and data files damaged on disk. livestate must say what failed and where, never
//! acknowledge what it could not store, change nothing already stored, and recover once the
//! fault is gone; a damaged file is found and named, never skipped.
//!
//! Linux only: the shim relies on LD_PRELOAD and /proc/self/fd.
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use livestate_testkit::{free_port, Child as Server};
use serde_json::{json, Value};

/// The fault shim, compiled once per test run.
fn shim() -> &'static Path {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        let src = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("tests/faults/inject.c");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("libinject.so");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let built = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&out)
            .arg(&src)
            .arg("-ldl")
            .output()
            .unwrap_or_else(|e| panic!("the fault tests need a C compiler (`{cc}`): {e}"));
        assert!(
            built.status.success(),
            "compiling {}: {}",
            src.display(),
            String::from_utf8_lossy(&built.stderr)
        );
        out
    })
}

/// One injected fault: which calls fail on which files, and a counter proving it fired.
struct Fault {
    mode: &'static str,
    /// Substring of the paths of the files that fail.
    path: String,
    after_bytes: Option<u64>,
    /// Fail only while this file exists.
    arm: Option<PathBuf>,
    counter: PathBuf,
}

impl Fault {
    fn new(mode: &'static str, path: &str, scratch: &Path) -> Fault {
        let counter = scratch.join(format!("fault-counter-{}", std::process::id()));
        let _ = std::fs::remove_file(&counter);
        Fault { mode, path: path.into(), after_bytes: None, arm: None, counter }
    }

    fn after_bytes(mut self, n: u64) -> Fault {
        self.after_bytes = Some(n);
        self
    }

    fn armed_by(mut self, file: PathBuf) -> Fault {
        self.arm = Some(file);
        self
    }

    fn inject(&self, c: &mut Command) {
        c.env("LD_PRELOAD", shim())
            .env("FAULT_MODE", self.mode)
            .env("FAULT_PATH", &self.path)
            .env("FAULT_COUNTER", &self.counter);
        if let Some(n) = self.after_bytes {
            c.env("FAULT_AFTER_BYTES", n.to_string());
        }
        if let Some(a) = &self.arm {
            c.env("FAULT_ARM_FILE", a);
        }
    }

    /// How many calls the shim has failed so far.
    fn fired(&self) -> u64 {
        std::fs::read_to_string(&self.counter).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
    }
}

fn livestate(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_livestate"));
    c.args(args).arg("--dir").arg(dir).env("LIVESTATE_LOG", "off").env_remove("RUST_BACKTRACE");
    c
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(c: &mut Command, stdin: Option<&str>) -> Out {
    use std::io::Write;
    c.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    if let Some(text) = stdin {
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn ok(c: &mut Command) -> String {
    let out = run(c, None);
    assert_eq!(out.code, 0, "{c:?} failed: {}", out.stderr);
    out.stdout
}

/// `n` stock counts with ids `{prefix}-{i}`.
fn counts(prefix: &str, n: usize) -> String {
    (0..n)
        .map(|i| {
            json!({"id": format!("{prefix}-{i}"), "type": "inventory.stock_counted",
                "occurred_at": "2026-03-02T08:00:00Z",
                "data": {"item": format!("part-{:04}", i % 40), "location": "north", "on_hand": i}})
            .to_string()
                + "\n"
        })
        .collect()
}

fn ids(lines: &str) -> Vec<String> {
    lines
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].as_str().unwrap().to_string())
        .collect()
}

/// Every event id in the record, in offset order (offsets checked to be dense from 0).
fn recorded_ids(dir: &Path) -> Vec<String> {
    let record = livestate_record::Record::open(&dir.join("record")).unwrap();
    let events = record.read(0, usize::MAX).unwrap();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.offset, i as u64, "offsets are dense");
    }
    assert_eq!(record.next_offset(), events.len() as u64);
    events.into_iter().map(|e| e.event.id).collect()
}

/// Offsets printed by `emit` (one per line acknowledged).
fn printed_offsets(stdout: &str) -> Vec<u64> {
    stdout
        .lines()
        .filter_map(|l| l.split_once(": offset ").map(|(_, o)| o.split(' ').next().unwrap().parse().unwrap()))
        .collect()
}

fn init(dir: &Path) {
    ok(&mut livestate(dir, &["init"]));
}

#[test]
fn full_disk_while_emitting_acknowledges_nothing_and_the_record_reopens_with_what_was_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    init(&dir);
    let first = counts("a", 100);
    let out = run(&mut livestate(&dir, &["emit", "-"]), Some(&first));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(printed_offsets(&out.stdout), (0..100).collect::<Vec<_>>());

    // The disk fills up part-way through the journal write: a torn batch on disk.
    let second = counts("b", 100);
    let fault = Fault::new("enospc", "/d/record/", tmp.path()).after_bytes(700);
    let mut emit = livestate(&dir, &["emit", "-"]);
    fault.inject(&mut emit);
    let out = run(&mut emit, Some(&second));
    assert!(fault.fired() > 0, "the shim must have failed a write");
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(printed_offsets(&out.stdout).is_empty(), "nothing may be acknowledged: {}", out.stdout);
    for needle in ["could not store the events", "none of them is acknowledged", "No space left on device"] {
        assert!(out.stderr.contains(needle), "`{needle}` missing from: {}", out.stderr);
    }
    assert!(out.stderr.contains(&dir.join("record").display().to_string()), "{}", out.stderr);

    // Space is back: the record holds exactly what was acknowledged, and takes the rest.
    assert_eq!(recorded_ids(&dir), ids(&first), "exactly the acknowledged events, the torn batch dropped");
    let out = run(&mut livestate(&dir, &["emit", "-"]), Some(&second));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(printed_offsets(&out.stdout), (100..200).collect::<Vec<_>>());
    assert!(!out.stdout.contains("already recorded"), "{}", out.stdout);
    assert_eq!(recorded_ids(&dir), [ids(&first), ids(&second)].concat());
    assert_eq!(ok(&mut livestate(&dir, &["verify"])).matches("DAMAGED").count(), 0);
}

#[test]
fn a_write_error_after_the_first_chunk_keeps_that_chunk_and_says_where_the_record_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    init(&dir);
    // Two chunks of 10,000 events (one group write and fdatasync each); the disk fails a
    // segment write part-way through the second (the first takes about 2.5 MB of segment).
    let lines = counts("a", 20_000);
    let fault = Fault::new("eio-write", ".seg", tmp.path()).after_bytes(3_500_000);
    let mut emit = livestate(&dir, &["emit", "-"]);
    fault.inject(&mut emit);
    let out = run(&mut emit, Some(&lines));
    assert!(fault.fired() > 0, "the shim must have failed a write");
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(printed_offsets(&out.stdout), (0..10_000).collect::<Vec<_>>(), "the first chunk only");
    for needle in [
        "the first 10000 event(s) were recorded (offsets printed); the rest were not",
        "could not store the events",
        "Input/output error",
    ] {
        assert!(out.stderr.contains(needle), "`{needle}` missing from: {}", out.stderr);
    }
    let all = ids(&lines);
    assert_eq!(recorded_ids(&dir), all[..10_000]);

    let out = run(&mut livestate(&dir, &["emit", "-"]), Some(&lines));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(printed_offsets(&out.stdout), (0..20_000).collect::<Vec<_>>());
    assert_eq!(out.stdout.matches("(already recorded)").count(), 10_000);
    assert_eq!(recorded_ids(&dir), all);
}

#[test]
fn failed_fsync_of_the_record_is_never_acknowledged_and_a_retry_records_each_event_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    init(&dir);
    let first = counts("a", 50);
    assert_eq!(run(&mut livestate(&dir, &["emit", "-"]), Some(&first)).code, 0);

    let second = counts("b", 50);
    let fault = Fault::new("eio-fsync", "/d/record/", tmp.path());
    let mut emit = livestate(&dir, &["emit", "-"]);
    fault.inject(&mut emit);
    let out = run(&mut emit, Some(&second));
    assert!(fault.fired() > 0, "the shim must have failed an fsync");
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(printed_offsets(&out.stdout).is_empty(), "a failed fsync acknowledges nothing: {}", out.stdout);
    assert!(out.stderr.contains("could not store the events"), "{}", out.stderr);
    assert!(out.stderr.contains("Input/output error"), "{}", out.stderr);

    // Whether the unsynced batch reached the disk is settled by the reopen; the events are there
    // at most once, and re-sending them (same ids) records each exactly once.
    let after_fault = recorded_ids(&dir);
    assert_eq!(after_fault[..50], ids(&first)[..], "acknowledged events unchanged");
    assert!(
        after_fault.len() == 50 || after_fault == [ids(&first), ids(&second)].concat(),
        "{after_fault:?}"
    );
    let out = run(&mut livestate(&dir, &["emit", "-"]), Some(&second));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(printed_offsets(&out.stdout), (50..100).collect::<Vec<_>>());
    assert_eq!(recorded_ids(&dir), [ids(&first), ids(&second)].concat());
}

async fn start_server(
    dir: &Path,
    fault: Option<&Fault>,
    token: &str,
) -> (Server, livestate_client::Client, String) {
    let url = format!("http://127.0.0.1:{}", free_port());
    let mut c = livestate(dir, &["serve", "--listen", url.trim_start_matches("http://")]);
    if let Some(f) = fault {
        f.inject(&mut c);
    }
    let server = Server(c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap());
    let client = livestate_client::Client::new(&url, token).unwrap();
    let started = Instant::now();
    while client.whoami().await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(120), "serve came up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (server, client, url)
}

/// `GET /v1/health` (public) over a plain TCP stream: its status and JSON body.
async fn health(url: &str) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET /v1/health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).await.unwrap();
    let status = text.split(' ').nth(1).unwrap().parse().unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1.to_string();
    // The JSON object is between the first `{` and the last `}` (the body may be chunked).
    (status, serde_json::from_str(&body[body.find('{').unwrap()..=body.rfind('}').unwrap()]).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_5xx_for_events_it_could_not_store_and_keeps_every_acknowledged_event_after_a_restart()
{
    for (mode, status) in [("enospc", 507u16), ("eio-fsync", 503)] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        init(&dir);
        let token = ok(&mut livestate(&dir, &["token", "add", "module:inventory"])).trim().to_string();
        let reader = ok(&mut livestate(&dir, &["token", "add", "agent:reader"])).trim().to_string();
        let arm = tmp.path().join("arm");
        let fault = Fault::new(mode, "/d/record/", tmp.path()).armed_by(arm.clone());
        let (server, client, url) = start_server(&dir, Some(&fault), &token).await;

        let first = counts("a", 30);
        let acked = client.emit(&first).await.unwrap();
        let acked: Vec<u64> = acked.appended.iter().map(|a| a.offset).collect();
        assert_eq!(acked, (0..30).collect::<Vec<_>>());

        std::fs::write(&arm, "").unwrap();
        let second = counts("b", 30);
        let e = client.emit(&second).await.unwrap_err();
        assert!(fault.fired() > 0, "{mode}: the shim must have fired");
        assert_eq!(e.status().map(|s| s.as_u16()), Some(status), "{mode}: {e}");
        assert!(e.to_string().contains("could not store the events"), "{mode}: {e}");
        std::fs::remove_file(&arm).unwrap();

        // The fault is gone, but the record stays closed to appends until the restart.
        let third = counts("c", 30);
        let e = client.emit(&third).await.unwrap_err();
        assert!(e.status().is_some_and(|s| s.is_server_error()), "{mode}: {e}");
        assert!(e.to_string().contains("refuses appends since an earlier write failed"), "{mode}: {e}");
        let (code, body) = health(&url).await;
        assert_eq!(code, 503, "{mode}: health says the record refuses appends: {body}");
        // Reads keep working.
        client.with_token(&reader).tables().await.unwrap();
        drop(server);

        let (server, client, url) = start_server(&dir, None, &token).await;
        assert_eq!(health(&url).await.0, 200);
        client.emit(&second).await.unwrap();
        client.emit(&third).await.unwrap();
        drop(server);
        assert_eq!(
            recorded_ids(&dir),
            [ids(&first), ids(&second), ids(&third)].concat(),
            "{mode}: every acknowledged event kept at its offset, each event once"
        );
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else if e.file_name() != "livestate.lock" {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

fn emit_sim(dir: &Path, orders: usize) {
    let cfg = livestate_sim::SimConfig { items: 30, orders, jobs: 40, ..Default::default() };
    let lines = livestate_sim::to_json_lines(&livestate_sim::company_events(&cfg));
    let out = run(&mut livestate(dir, &["emit", "-"]), Some(&lines));
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// Every row of every state table and of the archive, read from Paimon (not the index).
fn warehouse_rows(dir: &Path) -> BTreeMap<String, Vec<Vec<livestate_spec::Value>>> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let ls = livestate_engine::Livestate::open(dir).await.unwrap();
        let mut out = BTreeMap::new();
        for (name, ts) in &ls.spec().tables {
            let table = ls.table(name).await.unwrap();
            let mut rows = livestate_engine::read::scan_all(&table, ts).await.unwrap();
            rows.sort_by_key(|r| format!("{r:?}"));
            out.insert(name.clone(), rows);
        }
        out.insert("record.events".into(), ls.archive_rows().await.unwrap());
        out
    })
}

#[test]
fn full_disk_in_the_warehouse_fails_derive_and_compact_naming_the_file_and_recovers_to_the_same_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    init(&base);
    emit_sim(&base, 500);
    let clean = tmp.path().join("clean");
    copy_dir(&base, &clean);
    ok(&mut livestate(&clean, &["derive", "--once", "--commit-every", "300"]));
    let expected = warehouse_rows(&clean);
    assert!(expected["stock"].len() > 10 && expected["record.events"].len() > 500);

    // The disk fills up at different points: the first data file, mid-way, late.
    let mut failed = 0;
    for budget in [0u64, 6_000, 60_000, 200_000] {
        let name = format!("derive-{budget}");
        let dir = tmp.path().join(&name);
        copy_dir(&base, &dir);
        let fault = Fault::new("enospc", &format!("/{name}/warehouse/"), tmp.path()).after_bytes(budget);
        let mut derive = livestate(&dir, &["derive", "--once", "--commit-every", "300"]);
        fault.inject(&mut derive);
        let out = run(&mut derive, None);
        if out.code != 0 {
            failed += 1;
            assert!(fault.fired() > 0, "budget {budget}: failed without an injected fault: {}", out.stderr);
            assert_eq!(out.code, 1, "{}", out.stderr);
            let e = &out.stderr;
            assert!(e.contains("No space left on device"), "budget {budget}: {e}");
            assert!(e.contains("table state.") || e.contains("table record.events"), "names the table: {e}");
            assert!(e.contains(&format!("{name}/warehouse/")), "names the file: {e}");
        }
        // No snapshot points at a missing or partial file.
        let v = run(&mut livestate(&dir, &["verify"]), None);
        assert_eq!(v.code, 0, "budget {budget}: {}{}", v.stdout, v.stderr);
        ok(&mut livestate(&dir, &["derive", "--once", "--commit-every", "300"]));
        let recovered = warehouse_rows(&dir);
        for (table, rows) in &expected {
            let got = &recovered[table];
            let missing: Vec<_> = rows.iter().filter(|r| !got.contains(r)).collect();
            let extra: Vec<_> = got.iter().filter(|r| !rows.contains(r)).collect();
            assert!(
                missing.is_empty() && extra.is_empty() && got.len() == rows.len(),
                "budget {budget}: {table} after recovery: {} rows, expected {}; missing {missing:?}; not expected {extra:?}",
                got.len(),
                rows.len()
            );
        }
    }
    assert!(failed >= 3, "the full disk must have stopped derivation at least three times, did {failed}");

    // Compaction on a full disk: refused, inputs untouched, then done once there is room.
    let dir = tmp.path().join("compact");
    copy_dir(&clean, &dir);
    for budget in [0u64, 3_000] {
        let fault =
            Fault::new("enospc", "/compact/warehouse/state.db/stock/", tmp.path()).after_bytes(budget);
        let mut compact = livestate(&dir, &["compact", "stock", "--full"]);
        fault.inject(&mut compact);
        let out = run(&mut compact, None);
        assert!(fault.fired() > 0, "budget {budget}: the compaction must have hit the full disk");
        assert_eq!(out.code, 1, "{}", out.stderr);
        for needle in
            ["table state.stock", "No space left on device", "compact/warehouse/state.db/stock/bucket-"]
        {
            assert!(out.stderr.contains(needle), "`{needle}` missing: {}", out.stderr);
        }
        let v = run(&mut livestate(&dir, &["verify"]), None);
        assert_eq!(v.code, 0, "{}{}", v.stdout, v.stderr);
        assert_eq!(warehouse_rows(&dir), expected);
    }
    let out = ok(&mut livestate(&dir, &["compact", "stock", "--full"]));
    assert!(out.contains("COMPACT snapshot"), "{out}");
    assert_eq!(warehouse_rows(&dir), expected);
}

/// Flips bytes in the middle of `file`.
fn flip_middle(file: &Path) {
    let mut bytes = std::fs::read(file).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 8] {
        *b ^= 0x5a;
    }
    std::fs::write(file, bytes).unwrap();
}

/// Cuts `file` to half its size.
fn truncate_half(file: &Path) {
    let len = std::fs::metadata(file).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(file).unwrap().set_len(len / 2).unwrap();
}

type Damage = (&'static str, fn(&Path));
const DAMAGES: [Damage; 2] = [("bytes flipped", flip_middle), ("truncated", truncate_half)];

/// Flips the bytes of `file`'s first page header, right after parquet's leading magic.
///
/// Parquet pages carry no checksum (the `parquet` crate writes none), so only a change that
/// stops a page from decompressing or decoding can be found. A flip in the middle of a data
/// file may land in bytes that still decode, to other values (zstd's literals, say): the
/// middle of the level-0 files livestate writes since 13d1af0 decoded without an error, where
/// the `paimon` crate's files happened to fail.
fn flip_page_header(file: &Path) {
    let mut bytes = std::fs::read(file).unwrap();
    assert_eq!(&bytes[..4], b"PAR1", "{} is a parquet file", file.display());
    for b in &mut bytes[4..12] {
        *b ^= 0x5a;
    }
    std::fs::write(file, bytes).unwrap();
}

/// The damages done to a file of `kind`: a data file's flip goes to a page header (see
/// [`flip_page_header`]).
fn damages_of(kind: &str) -> [Damage; 2] {
    match kind {
        "data file" => [("bytes flipped", flip_page_header), ("truncated", truncate_half)],
        _ => DAMAGES,
    }
}

#[test]
fn a_damaged_record_file_is_named_by_derive_and_verify_and_never_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    init(&base);
    assert_eq!(run(&mut livestate(&base, &["emit", "-"]), Some(&counts("e", 3000))).code, 0);
    // The events are in the record's open segment.
    let largest = base.join("record/segments/00000000000000000000.seg");
    let size = std::fs::metadata(&largest).unwrap().len();
    assert!(size > 50_000, "the segment holds the events ({size} bytes)");
    assert_eq!(ok(&mut livestate(&base, &["verify"])).matches("DAMAGED").count(), 0);

    for (what, damage) in DAMAGES {
        let dir = tmp.path().join(what.replace(' ', "-"));
        copy_dir(&base, &dir);
        let file = dir.join(largest.strip_prefix(&base).unwrap());
        damage(&file);
        let shown = file.display().to_string();

        let v = run(&mut livestate(&dir, &["verify"]), None);
        assert_eq!(v.code, 1, "{what}: {}", v.stdout);
        assert!(
            v.stdout.contains(&format!("DAMAGED {shown}")),
            "{what}: verify names the file: {}",
            v.stdout
        );
        assert!(v.stderr.contains("problem(s) found"), "{what}: {}", v.stderr);

        let d = run(&mut livestate(&dir, &["derive", "--once"]), None);
        assert_eq!(d.code, 1, "{what}: derivation must stop, not skip events: {}", d.stderr);
        assert!(d.stderr.contains("is damaged"), "{what}: {}", d.stderr);
        assert!(d.stderr.contains(&shown), "{what}: derive names the file: {}", d.stderr);
        assert!(d.stderr.contains("which was acknowledged"), "{what}: {}", d.stderr);
        if what == "bytes flipped" {
            assert!(d.stderr.contains("CRC-32C does not match"), "{what}: {}", d.stderr);
        }
    }
}

/// A Paimon file of `state.stock` and where it is used.
struct TableFiles {
    /// A manifest every snapshot uses (snapshot 1's delta manifest).
    manifest: String,
    /// The latest snapshot's delta manifest list.
    manifest_list: String,
    /// A data file snapshot 1 sees (still live: this spec never compacts while deriving).
    data_file: String,
}

fn stock_files(dir: &Path) -> TableFiles {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let layout = livestate_engine::Layout::new(dir).unwrap();
        let catalog = livestate_engine::open_catalog(&layout).unwrap();
        let table = catalog.table(&paimon::catalog::Identifier::new("state", "stock")).await.unwrap();
        let sm = table.snapshot_manager();
        let first = sm.get_snapshot(1).await.unwrap();
        let latest = sm.get_latest_snapshot().await.unwrap().unwrap();
        assert!(latest.id() > 2, "several snapshots");
        let metas =
            paimon::spec::ManifestList::read(table.file_io(), &sm.manifest_path(first.delta_manifest_list()))
                .await
                .unwrap();
        let buckets = livestate_lsm::live_files(&table, "state.stock", &livestate_lsm::Version::Snapshot(1))
            .await
            .unwrap();
        let b = &buckets[0];
        TableFiles {
            manifest: sm.manifest_path(metas[0].file_name()),
            manifest_list: sm.manifest_path(latest.delta_manifest_list()),
            data_file: b.files[0].data_file_path(&b.bucket_path),
        }
    })
}

/// Every file below `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// `path` from the data directory on, as every message shows it whatever the URI scheme.
fn tail_of(path: &str) -> &str {
    &path[path.find("warehouse/").expect("a warehouse path")..]
}

#[test]
fn damaged_paimon_files_are_named_by_reads_derivation_compaction_and_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = livestate_testkit::example_spec()
        .only(&["events.toml", "mappings.toml", "tables.toml"])
        .option_everywhere("num-sorted-run.compaction-trigger", "1000")
        .write(&tmp.path().join("spec"));
    let base = tmp.path().join("base");
    ok(&mut livestate(&base, &["init", "--spec", spec.to_str().unwrap()]));
    emit_sim(&base, 400);
    ok(&mut livestate(&base, &["derive", "--once", "--commit-every", "250"]));
    let files = stock_files(&base);
    assert_eq!(ok(&mut livestate(&base, &["verify"])).matches("DAMAGED").count(), 0);
    let more =
        json!({"id": "late-1", "type": "inventory.stock_counted", "occurred_at": "2026-03-03T08:00:00Z",
        "data": {"item": "late-part", "location": "north", "on_hand": 5}})
        .to_string()
            + "\n";

    for (kind, path) in [
        ("manifest", &files.manifest),
        ("manifest list", &files.manifest_list),
        ("data file", &files.data_file),
    ] {
        for (what, damage) in damages_of(kind) {
            let label = format!("{kind}, {what}");
            let dir = tmp.path().join(label.replace([' ', ','], "-"));
            copy_dir(&base, &dir);
            let rel = tail_of(path);
            let file = dir.join(rel);
            damage(&file);

            let v = run(&mut livestate(&dir, &["verify"]), None);
            assert_eq!(v.code, 1, "{label}: {}", v.stdout);
            assert!(
                v.stdout.lines().any(|l| l.starts_with("DAMAGED") && l.contains(rel)),
                "{label}: verify names {rel}: {}",
                v.stdout
            );

            let j = run(&mut livestate(&dir, &["verify", "--json"]), None);
            assert_eq!(j.code, 1, "{label}: {}", j.stderr);
            let report: Value = serde_json::from_str(&j.stdout).unwrap();
            let problems = report["problems"].as_array().unwrap();
            assert!(problems.iter().any(|p| p.as_str().unwrap().contains(rel)), "{label}: {problems:?}");
            let stock =
                report["report"]["tables"].as_array().unwrap().iter().find(|t| t["table"] == "state.stock");
            assert!(!stock.unwrap()["problems"].as_array().unwrap().is_empty(), "{label}");

            let mut failures: Vec<(&str, Out)> = Vec::new();
            match kind {
                "data file" => {
                    // Point reads of the latest state come from the index; snapshot 1 is read from Paimon.
                    failures.push((
                        "read",
                        run(&mut livestate(&dir, &["read", "stock", "--snapshot", "1"]), None),
                    ));
                    failures
                        .push(("compact", run(&mut livestate(&dir, &["compact", "stock", "--full"]), None)));
                }
                _ => {
                    assert_eq!(run(&mut livestate(&dir, &["emit", "-"]), Some(&more)).code, 0);
                    failures.push(("derive", run(&mut livestate(&dir, &["derive", "--once"]), None)));
                    failures.push(("tables", run(&mut livestate(&dir, &["tables"]), None)));
                    // Orphan cleanup must not take the files a damaged manifest names for orphans.
                    let before = files_under(&dir.join("warehouse/state.db/stock"));
                    failures.push((
                        "expire",
                        run(&mut livestate(&dir, &["expire", "stock", "--orphans-older-than", "0s"]), None),
                    ));
                    assert_eq!(
                        files_under(&dir.join("warehouse/state.db/stock")),
                        before,
                        "{label}: nothing deleted"
                    );
                }
            }
            for (step, out) in failures {
                assert_ne!(out.code, 0, "{label}: {step} must fail: {}", out.stdout);
                assert!(
                    out.stderr.contains("state.stock"),
                    "{label}: {step} names the table: {}",
                    out.stderr
                );
                assert!(out.stderr.contains(rel), "{label}: {step} names {rel}: {}", out.stderr);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_stops_with_the_error_when_the_warehouse_fills_up_and_derives_everything_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    init(&dir);
    let token = ok(&mut livestate(&dir, &["token", "add", "module:inventory"])).trim().to_string();
    let arm = tmp.path().join("arm");
    let fault = Fault::new("enospc", "/d/warehouse/", tmp.path()).armed_by(arm.clone());
    let (mut server, client, _) = start_server(&dir, Some(&fault), &token).await;
    let first = counts("a", 40);
    client.emit(&first).await.unwrap();

    // The warehouse is full: the events are still recorded and acknowledged, but derivation
    // cannot commit them, so the server stops with the error instead of serving ever staler state.
    std::fs::write(&arm, "").unwrap();
    let second = counts("b", 40);
    client.emit(&second).await.unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the server must stop once derivation fails");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(fault.fired() > 0, "the shim must have fired");
    assert_eq!(status.code(), Some(1));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut server.0.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(stderr.contains("/d/warehouse/"), "names the file: {stderr}");
    std::fs::remove_file(&arm).unwrap();

    let (server, _, _) = start_server(&dir, None, &token).await;
    drop(server);
    assert_eq!(recorded_ids(&dir), [ids(&first), ids(&second)].concat());
    ok(&mut livestate(&dir, &["derive", "--once"]));
    let d = dir.clone();
    let archived =
        tokio::task::spawn_blocking(move || warehouse_rows(&d)["record.events"].len()).await.unwrap();
    assert_eq!(archived, 80, "every acknowledged event derived once");
    let v = run(&mut livestate(&dir, &["verify"]), None);
    assert_eq!(v.code, 0, "{}", v.stdout);
}
