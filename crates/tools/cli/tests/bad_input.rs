//! Malformed and hostile input to every entry point of the `livestate` binary: event lines
//! (`emit`), spec directories (`init --spec`), table, tag, trigger, consumer and principal names
//! (`read`, `compact`, `expire`, `watch`, `token`), proposal ids (`audit`) and SQL (`sql`).
//!
//! Every refused case must exit with 2 (input the caller can fix), say what is wrong on stderr,
//! not panic, and change nothing stored: the record's head, every table's snapshots and tags,
//! the warehouse's files, the principals file and what sits next to the directory are compared
//! before and after each case. Inputs that are odd but harmless (CRLF endings, a byte-order mark,
//! empty lines, an id re-sent with the same content) are accepted.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

/// What one run of the binary did.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(args: &[OsString], stdin: &[u8]) -> Ran {
    let mut child = Command::new(env!("CARGO_BIN_EXE_livestate"))
        .args(args)
        .env_remove("LIVESTATE_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    // The child may refuse before reading all of a large input: a broken pipe is its answer.
    let _ = input.write_all(stdin);
    drop(input);
    let out = child.wait_with_output().unwrap();
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

fn ok(args: &[OsString], stdin: &[u8]) -> Ran {
    let r = run(args, stdin);
    assert_eq!(r.code, Some(0), "{args:?} failed: {}", r.stderr);
    r
}

fn counted(id: &str, item: &str, on_hand: Value) -> String {
    json!({"id": id, "type": "inventory.stock_counted", "occurred_at": "2026-03-02T08:00:00Z",
        "data": {"item": item, "location": "north", "on_hand": on_hand}})
    .to_string()
}

fn placed(id: &str, unit_price: Value) -> String {
    json!({"id": id, "type": "commerce.order_placed", "occurred_at": "2026-03-02T08:00:00Z",
        "data": {"order_id": "so-1", "line": 1, "customer": "c", "item": "bolt", "location": "north",
                 "qty": 1, "unit_price": unit_price}})
    .to_string()
}

/// A directory with a few events, every table derived once, and an admin principal.
struct Fixture {
    tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        let f = Fixture { tmp, dir };
        ok(&f.args(&["init"]), b"");
        let lines = [
            counted("c1", "bolt", json!(50)),
            counted("c2", "nut", json!(7)),
            json!({"id": "p1", "type": "procurement.planning_set", "occurred_at": "2026-03-02T08:00:00Z",
                "data": {"item": "nut", "location": "north", "reorder_point": 20, "target": 60}})
            .to_string(),
        ]
        .join("\n");
        ok(&f.args(&["emit"]), lines.as_bytes());
        ok(&f.args(&["derive", "--once"]), b"");
        ok(&f.args(&["token", "add", "admin"]), b"");
        f
    }

    /// `args` followed by `--dir D`.
    fn args(&self, args: &[&str]) -> Vec<OsString> {
        let mut v = os(args);
        v.push("--dir".into());
        v.push(self.dir.clone().into());
        v
    }

    /// The offset the next event would get (an empty `emit` appends nothing and says).
    fn record_head(&self) -> u64 {
        let r = ok(&self.args(&["emit"]), b"");
        let at = r.stderr.find("record head is now offset ").expect("emit reports the head");
        r.stderr[at + "record head is now offset ".len()..].trim().parse().unwrap()
    }

    /// Everything a refused command must leave as it was.
    fn stored(&self) -> Value {
        let tables: Value = serde_json::from_str(&ok(&self.args(&["tables", "--json"]), b"").stdout).unwrap();
        let tables: Vec<Value> = tables
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                json!([
                    t["name"],
                    t["receipt"]["snapshot_id"],
                    t["receipt"]["offset"],
                    t["health"]["earliest_snapshot"],
                    t["health"]["snapshots"],
                    t["health"]["tags"]
                ])
            })
            .collect();
        let mut files = Vec::new();
        walk(&self.dir.join("warehouse"), &self.dir, &mut files);
        files.sort();
        let mut beside: Vec<String> = std::fs::read_dir(self.tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        beside.sort();
        json!({
            "record_head": self.record_head(),
            "tables": tables,
            "warehouse_files": files,
            "principals": std::fs::read_to_string(self.dir.join("principals.toml")).unwrap(),
            "beside_the_directory": beside,
        })
    }
}

fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, base, out);
        } else {
            out.push(p.strip_prefix(base).unwrap().display().to_string());
        }
    }
}

/// A name as a test's message shows it: quoted, escaped, at most 40 characters.
fn short(s: &str) -> String {
    let head: String = s.chars().take(40).collect();
    format!("{head:?}{}", if head.len() < s.len() { "..." } else { "" })
}

/// One refused invocation: arguments, standard input, and words stderr must contain.
struct Refused {
    what: String,
    args: Vec<OsString>,
    stdin: Vec<u8>,
    says: Vec<String>,
}

fn refused(what: &str, args: Vec<OsString>, stdin: impl Into<Vec<u8>>, says: &[&str]) -> Refused {
    Refused {
        what: what.into(),
        args,
        stdin: stdin.into(),
        says: says.iter().map(|s| s.to_string()).collect(),
    }
}

/// Runs each case; returns what went wrong (empty when every case was refused as it should be
/// and nothing stored changed).
fn check_refused(f: &Fixture, cases: Vec<Refused>) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut before = f.stored();
    for c in cases {
        let r = run(&c.args, &c.stdin);
        let mut problems = Vec::new();
        if r.code != Some(2) {
            problems.push(format!("exit {:?}, expected 2", r.code));
        }
        if r.stderr.contains("panicked at") {
            problems.push("panicked".into());
        }
        for s in &c.says {
            if !r.stderr.contains(s.as_str()) {
                problems.push(format!("stderr does not say {s:?}"));
            }
        }
        let after = f.stored();
        if after != before {
            problems.push(format!("stored state changed:\n  before {before}\n  after  {after}"));
            before = after;
        }
        if !problems.is_empty() {
            let stderr: String = r.stderr.chars().take(600).collect();
            wrong.push(format!("{}: {}\n  stderr: {stderr}", c.what, problems.join("; ")));
        }
    }
    wrong
}

#[test]
fn malformed_and_hostile_event_lines_are_refused_by_line_and_field_and_append_nothing() {
    let f = Fixture::new();
    let emit = || f.args(&["emit"]);
    let file = |name: &str, bytes: &[u8]| -> OsString {
        let p = f.tmp.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.into()
    };
    let huge_line = counted("huge", &"x".repeat(10 << 20), json!(1));
    let huge = file("huge.jsonl", huge_line.as_bytes());
    let deep_line = format!(
        r#"{{"id":"deep","type":"inventory.stock_counted","occurred_at":"2026-03-02T08:00:00Z","data":{{"item":{}1{}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let deep = file("deep.jsonl", deep_line.as_bytes());
    let future = |at: &str| {
        json!({"id": "f1", "type": "inventory.stock_counted", "occurred_at": at,
            "data": {"item": "bolt", "location": "north", "on_hand": 1}})
        .to_string()
    };
    let in_a_week = (chrono::Utc::now() + chrono::Duration::days(7)).format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let with_file = |what: &str, path: OsString, says: &[&str]| {
        let mut a = emit();
        a.push(path);
        refused(what, a, Vec::new(), says)
    };
    let cases = vec![
        refused("invalid UTF-8", emit(), [&b"{\"id\":\"u1\"\xff\xfe}\n"[..]].concat(), &["line 1", "UTF-8"]),
        refused(
            "invalid UTF-8 on the second line",
            emit(),
            [counted("u2", "bolt", json!(1)).as_bytes(), b"\n\xc3\x28\n"].concat(),
            &["line 2", "UTF-8"],
        ),
        with_file("a 10 MB line", huge.clone(), &["line 1", "bytes", "at most"]),
        with_file("100,000 levels of nesting", deep.clone(), &["line 1", "recursion limit"]),
        refused(
            "a re-sent id with other content",
            emit(),
            counted("c1", "bolt", json!(51)),
            &["c1", "different content"],
        ),
        refused(
            "one conflicting id rejects the whole input",
            emit(),
            [counted("new-1", "bolt", json!(1)), counted("c2", "nut", json!(8))].join("\n"),
            &["c2"],
        ),
        refused("occurred_at in a week", emit(), future(&in_a_week), &["line 1", "occurred_at", "future"]),
        refused("occurred_at in the year 9999", emit(), future("9999-12-31T23:59:59Z"), &["occurred_at"]),
        refused("occurred_at beyond RFC 3339", emit(), future("+275760-09-13T00:00:00Z"), &["occurred_at"]),
        refused("occurred_at not a time", emit(), future("2026-02-30T08:00:00Z"), &["occurred_at"]),
        refused("an int past i64", emit(), counted("n1", "bolt", json!(9_223_372_036_854_775_808u64)), &["data.on_hand", "64 bits"]),
        refused(
            "an int below i64",
            emit(),
            r#"{"id":"n2","type":"inventory.stock_counted","occurred_at":"2026-03-02T08:00:00Z","data":{"item":"bolt","location":"north","on_hand":-9223372036854775809}}"#,
            &["data.on_hand"],
        ),
        refused(
            "a number past f64",
            emit(),
            r#"{"id":"n3","type":"inventory.stock_counted","occurred_at":"2026-03-02T08:00:00Z","data":{"item":"bolt","location":"north","on_hand":1e400}}"#,
            &["line 1"],
        ),
        refused("an int as a huge string", emit(), counted("n4", "bolt", json!("99999999999999999999")), &["data.on_hand"]),
        refused("a fraction for an int", emit(), counted("n5", "bolt", json!(1.5)), &["data.on_hand"]),
        refused("NaN for an int", emit(), counted("n6", "bolt", json!("NaN")), &["data.on_hand", "NaN"]),
        refused("Infinity for a decimal", emit(), placed("n7", json!("Infinity")), &["data.unit_price"]),
        refused("NaN for a decimal", emit(), placed("n8", json!("NaN")), &["data.unit_price"]),
        refused("-inf for a decimal", emit(), placed("n9", json!("-inf")), &["data.unit_price"]),
        refused("a decimal past its precision", emit(), placed("n10", json!("12345678901.00")), &["data.unit_price"]),
        refused(
            "a bare NaN token",
            emit(),
            r#"{"id":"n11","type":"inventory.stock_counted","occurred_at":"2026-03-02T08:00:00Z","data":{"item":"bolt","location":"north","on_hand":NaN}}"#,
            &["line 1"],
        ),
        refused("an unknown event type", emit(), json!({"id": "t1", "type": "inventory.stock_teleported", "occurred_at": "2026-03-02T08:00:00Z", "data": {}}).to_string(), &["unknown event type `inventory.stock_teleported`"]),
        refused("a type without a module", emit(), json!({"id": "t2", "type": "../x", "occurred_at": "2026-03-02T08:00:00Z", "data": {}}).to_string(), &["unknown event type `../x`"]),
        refused("an unknown field", emit(), json!({"id": "t3", "type": "inventory.stock_counted", "occurred_at": "2026-03-02T08:00:00Z", "data": {"item": "bolt", "location": "north", "on_hand": 1, "../x": 1}}).to_string(), &["data.../x"]),
        refused("an envelope key too many", emit(), json!({"id": "t4", "type": "inventory.stock_counted", "occurred_at": "2026-03-02T08:00:00Z", "data": {"item": "bolt", "location": "north", "on_hand": 1}, "offset": 0}).to_string(), &["unknown field `offset`"]),
        refused("an id with a control character", emit(), counted("a\u{7}b", "bolt", json!(1)), &["id", "control"]),
        refused("an id of 5000 characters", emit(), counted(&"i".repeat(5000), "bolt", json!(1)), &["id", "200 bytes"]),
        refused("an empty id", emit(), counted("", "bolt", json!(1)), &["id"]),
        refused("a lone surrogate", emit(), r#"{"id":"s1","type":"inventory.stock_counted","occurred_at":"2026-03-02T08:00:00Z","data":{"item":"\ud800","location":"north","on_hand":1}}"#, &["line 1", "escape"]),
        refused("an array, not an object", emit(), "[1,2,3]", &["line 1"]),
        refused("null", emit(), "null", &["line 1"]),
        refused("truncated JSON", emit(), &counted("x1", "bolt", json!(1))[..40], &["line 1"]),
        refused("a byte-order mark on the second line", emit(), format!("{}\n\u{feff}{}", counted("b1", "bolt", json!(1)), counted("b2", "bolt", json!(2))), &["line 2"]),
        refused("a missing input file", { let mut a = emit(); a.push("no-such-file.jsonl".into()); a }, Vec::new(), &["no-such-file.jsonl"]),
        // Only `livestate serve` appends decisions: a forged proposal would wait in the inbox.
        refused(
            "a proposal forged from a shell",
            emit(),
            json!({"id": "d1", "type": "decisions.proposal_created", "occurred_at": "2026-03-02T08:00:00Z", "data": {"proposal_id": "p-1", "kind": "replenishment_order", "agent": "procurement", "module": "procurement", "summary": "s", "risk_level": "low", "document": "{}"}}).to_string(),
            &["line 1", "decisions.proposal_created", "livestate serve"],
        ),
        refused(
            "a decision forged among good lines",
            emit(),
            [counted("g1", "bolt", json!(1)), json!({"id": "d2", "type": "decisions.proposal_decided", "occurred_at": "2026-03-02T08:00:00Z", "data": {"proposal_id": "p-1", "decision": "approved", "decided_by": "person:ana"}}).to_string()].join("\n"),
            &["line 2", "decisions.proposal_decided"],
        ),
    ];
    let wrong = check_refused(&f, cases);
    assert!(wrong.is_empty(), "{} case(s) wrong:\n{}", wrong.len(), wrong.join("\n"));

    // Under --skip-invalid a forged proposal is skipped and named, and nothing is recorded.
    let before = f.stored();
    let forged = json!({"id": "d3", "type": "decisions.proposal_created", "occurred_at": "2026-03-02T08:00:00Z", "data": {"proposal_id": "p-3", "kind": "replenishment_order", "agent": "procurement", "module": "procurement", "summary": "s", "risk_level": "low", "document": "{}"}}).to_string();
    let mut args = emit();
    args.push("--skip-invalid".into());
    let r = run(&args, forged.as_bytes());
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("skipped") && r.stderr.contains("decisions.proposal_created"), "{}", r.stderr);
    assert_eq!(f.stored(), before);
}

#[test]
fn odd_but_harmless_event_input_is_accepted() {
    let f = Fixture::new();
    let head = f.record_head();
    // The same content again: the original offset, nothing appended.
    let r = ok(&f.args(&["emit"]), counted("c1", "bolt", json!(50)).as_bytes());
    assert!(r.stdout.contains("line 1: offset 0 (already recorded)"), "{}", r.stdout);
    assert_eq!(f.record_head(), head);
    // Empty input, blank lines, CRLF endings and a byte-order mark at the start.
    let r = ok(&f.args(&["emit"]), b"\n\n  \n");
    assert!(r.stderr.contains("0 event(s) appended"), "{}", r.stderr);
    let input = format!(
        "\u{feff}{}\r\n\r\n{}\r\n",
        counted("crlf-1", "bolt", json!(1)),
        counted("crlf-2", "nut", json!(2))
    );
    let r = ok(&f.args(&["emit", "--json"]), input.as_bytes());
    let lines: Vec<Value> = r.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(
        lines,
        vec![
            json!({"line": 1, "offset": head, "duplicate": false}),
            json!({"line": 3, "offset": head + 1, "duplicate": false})
        ]
    );
    // With --skip-invalid, a line that is not UTF-8 is skipped by its number, the others go in.
    let input = [
        counted("skip-1", "bolt", json!(3)).as_bytes(),
        b"\n\xff\n",
        counted("skip-2", "nut", json!(4)).as_bytes(),
    ]
    .concat();
    let r = ok(&f.args(&["emit", "--skip-invalid"]), &input);
    assert!(r.stderr.contains("skipped line 2: (line): not UTF-8: byte 0xff at column 1"), "{}", r.stderr);
    assert_eq!(r.stdout, format!("line 1: offset {}\nline 3: offset {}\n", head + 2, head + 3));
    // A day ahead of the clock is still accepted (clocks drift); the data is kept as given.
    let tomorrow =
        (chrono::Utc::now() + chrono::Duration::hours(23)).format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let soon = json!({"id": "soon", "type": "inventory.stock_counted", "occurred_at": tomorrow,
        "data": {"item": "../../etc/passwd", "location": "a/b", "on_hand": -9_223_372_036_854_775_808i64}});
    ok(&f.args(&["emit"]), soon.to_string().as_bytes());
    ok(&f.args(&["derive", "--once"]), b"");
    let r = ok(&f.args(&["read", "stock", "--key", "item=../../etc/passwd", "--json"]), b"");
    let read: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(read["rows"][0]["location"], "a/b", "{read}");
    assert_eq!(read["rows"][0]["on_hand"], json!(i64::MIN), "{read}");
}

/// A spec directory: the built-in example with `file` replaced by (or added as) `text`.
fn spec_with(root: &Path, name: &str, file: &str, text: &[u8]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("../../../examples/company"),
    )
    .unwrap()
    {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    std::fs::write(dir.join(file), text).unwrap();
    dir
}

#[test]
fn broken_spec_directories_are_refused_naming_file_and_problem_and_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("d");
    let table = |name: &str, extra: &str| {
        format!(
            "[tables.{name}]\nprimary_key = [\"item\"]\nfreshness = \"5m\"\ncolumns = {{ item = \"string\", n = \"int\" }}\n{extra}"
        )
    };
    let budget = |b: &str| {
        format!("[tables.extra]\nprimary_key = [\"item\"]\nfreshness = \"{b}\"\ncolumns = {{ item = \"string\" }}\n")
    };
    let huge = {
        let mut t = String::from("# padding\n");
        while t.len() <= (1 << 20) + 10 {
            t.push_str("# livestate spec comment line, repeated to make the file large\n");
        }
        t
    };
    let cases: Vec<(&str, &str, Vec<u8>, Vec<&str>)> = vec![
        ("toml-syntax", "extra.toml", b"[tables.stock\n".to_vec(), vec!["extra.toml", "(syntax)"]),
        ("unknown-key", "extra.toml", table("extra", "colour = \"red\"\n").into_bytes(), vec!["extra.toml", "unknown field `colour`"]),
        ("unknown-top-level", "extra.toml", b"[views.x]\nsql = \"SELECT 1\"\n".to_vec(), vec!["extra.toml", "unknown field `views`"]),
        ("table-dotdot", "extra.toml", table("\"../x\"", "").into_bytes(), vec!["extra.toml", "tables.../x", "lower_snake_case"]),
        ("table-slash", "extra.toml", table("\"a/b\"", "").into_bytes(), vec!["extra.toml", "tables.a/b", "lower_snake_case"]),
        ("table-5000", "extra.toml", table(&"t".repeat(5000), "").into_bytes(), vec!["extra.toml", "at most 64 characters"]),
        (
            "column-control-char",
            "extra.toml",
            "[tables.extra]\nprimary_key = [\"item\"]\nfreshness = \"5m\"\ncolumns = { item = \"string\", \"a\\u0007b\" = \"int\" }\n".as_bytes().to_vec(),
            vec!["extra.toml", "column names are lower_snake_case"],
        ),
        (
            "key-not-a-column",
            "extra.toml",
            b"[tables.extra]\nprimary_key = [\"sku\"]\nfreshness = \"5m\"\ncolumns = { item = \"string\" }\n".to_vec(),
            vec!["extra.toml", "key column `sku` is not among the columns"],
        ),
        (
            "mapping-to-unknown-table",
            "extra.toml",
            b"[[mappings]]\nevent = \"inventory.stock_counted\"\ntable = \"stok\"\nset = { item = \"item\" }\n".to_vec(),
            vec!["extra.toml", "unknown table `stok`"],
        ),
        (
            "mapping-to-dotdot-table",
            "extra.toml",
            b"[[mappings]]\nevent = \"inventory.stock_counted\"\ntable = \"../stock\"\nset = { item = \"item\" }\n".to_vec(),
            vec!["extra.toml", "unknown table `../stock`"],
        ),
        (
            "event-type-dotdot",
            "extra.toml",
            b"[events.\"../x.y\"]\nfields = { a = \"int\" }\n".to_vec(),
            vec!["extra.toml", "module.event_name"],
        ),
        (
            "trigger-slash",
            "extra.toml",
            b"[triggers.\"a/b\"]\ntable = \"stock\"\nwhen = \"on_hand < 1\"\n".to_vec(),
            vec!["extra.toml", "a trigger name is lowercase"],
        ),
        ("budget-zero", "extra.toml", budget("0s").into_bytes(), vec!["extra.toml", "tables.extra.freshness", "zero"]),
        ("budget-negative", "extra.toml", budget("-5m").into_bytes(), vec!["extra.toml", "tables.extra.freshness", "`-5m`"]),
        ("budget-forever", "extra.toml", budget("forever").into_bytes(), vec!["extra.toml", "tables.extra.freshness", "`forever`"]),
        ("budget-overflow", "extra.toml", budget("18446744073709551615d").into_bytes(), vec!["extra.toml", "tables.extra.freshness", "too long"]),
        ("budget-two-years", "extra.toml", budget("730d").into_bytes(), vec!["extra.toml", "tables.extra.freshness", "365d"]),
        ("huge-file", "extra.toml", huge.into_bytes(), vec!["extra.toml", "bytes", "at most 1024 KiB"]),
        ("not-utf8", "extra.toml", b"# \xff\xfe\n".to_vec(), vec!["extra.toml", "UTF-8"]),
    ];
    let mut wrong = Vec::new();
    for (name, file, text, says) in cases {
        let spec = spec_with(tmp.path(), name, file, &text);
        let args =
            vec![OsString::from("init"), "--dir".into(), target.clone().into(), "--spec".into(), spec.into()];
        let r = run(&args, b"");
        let mut problems = Vec::new();
        if r.code != Some(2) {
            problems.push(format!("exit {:?}, expected 2", r.code));
        }
        if r.stderr.contains("panicked at") {
            problems.push("panicked".into());
        }
        for s in &says {
            if !r.stderr.contains(s) {
                problems.push(format!("stderr does not say {s:?}"));
            }
        }
        if target.exists() {
            problems.push("the target directory was created".into());
        }
        if !problems.is_empty() {
            let stderr: String = r.stderr.chars().take(600).collect();
            wrong.push(format!("{name}: {}\n  stderr: {stderr}", problems.join("; ")));
        }
    }
    for (what, args, says) in [
        ("a spec directory that does not exist", vec!["--spec", "no-such-spec"], "no-such-spec"),
        ("a spec directory without .toml files", vec!["--spec", "."], "no .toml files"),
    ] {
        let mut a = os(&["init", "--dir", target.to_str().unwrap()]);
        let empty = tmp.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        a.extend(
            args.iter().map(|s| if *s == "." { empty.clone().into_os_string() } else { OsString::from(s) }),
        );
        let r = run(&a, b"");
        if r.code != Some(2) || !r.stderr.contains(says) || target.exists() {
            wrong.push(format!("{what}: exit {:?}, stderr {}", r.code, r.stderr));
        }
    }
    assert!(wrong.is_empty(), "{} case(s) wrong:\n{}", wrong.len(), wrong.join("\n"));

    // Nothing was left behind: a good init works, and a second one is refused clearly.
    ok(&os(&["init", "--dir", target.to_str().unwrap()]), b"");
    let r = run(&os(&["init", "--dir", target.to_str().unwrap()]), b"");
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("already initialised"), "{}", r.stderr);
}

#[test]
fn hostile_table_tag_trigger_consumer_and_principal_names_are_refused_and_change_nothing() {
    let f = Fixture::new();
    let long = "n".repeat(5000);
    let hostile =
        ["../x", "a/b", "../../warehouse/state.db/stock", "tab\u{7}le", "new\nline", long.as_str(), ""];
    let mut cases = Vec::new();
    for name in hostile {
        let shown = short(name);
        cases.push(refused(
            &format!("read {shown}"),
            f.args(&["read", name]),
            Vec::new(),
            &["unknown table"],
        ));
        cases.push(refused(
            &format!("compact {shown}"),
            f.args(&["compact", name]),
            Vec::new(),
            &["unknown table"],
        ));
        cases.push(refused(
            &format!("expire {shown}"),
            f.args(&["expire", name]),
            Vec::new(),
            &["unknown table"],
        ));
        cases.push(refused(
            &format!("read stock --tag {shown}"),
            f.args(&["read", "stock", "--tag", name]),
            Vec::new(),
            &["tag"],
        ));
        cases.push(refused(
            &format!("watch {shown}"),
            f.args(&["watch", name, "--consumer", "c"]),
            Vec::new(),
            &["unknown trigger"],
        ));
        cases.push(refused(
            &format!("token add agent:{shown}"),
            f.args(&["token", "add", &format!("agent:{name}")]),
            Vec::new(),
            &["principal name", "1-64 letters"],
        ));
        cases.push(refused(
            &format!("token revoke {shown}"),
            f.args(&["token", "revoke", name]),
            Vec::new(),
            &["no principal"],
        ));
    }
    for consumer in
        ["", "c\u{7}", "new\nline", long.as_str(), "../../x", "..", "a/b/c", "agent:x/", "/x", "a b", "é"]
    {
        cases.push(refused(
            &format!("watch --consumer {}", short(consumer)),
            f.args(&["watch", "stock_below_reorder_point", "--consumer", consumer]),
            Vec::new(),
            &["--consumer"],
        ));
    }
    for name in ["../x", "state.../x", "record.events/../x", "state.stock/../../x"] {
        cases.push(refused(
            &format!("compact {name}"),
            f.args(&["compact", name]),
            Vec::new(),
            &["unknown table"],
        ));
    }
    for (what, args, says) in [
        ("read --snapshot -1", vec!["read", "stock", "--snapshot=-1"], "no snapshot -1"),
        (
            "read --snapshot i64::MAX",
            vec!["read", "stock", "--snapshot", "9223372036854775807"],
            "no snapshot",
        ),
        (
            "read --snapshot past i64",
            vec!["read", "stock", "--snapshot", "9223372036854775808"],
            "--snapshot",
        ),
        ("read --key without =", vec!["read", "stock", "--key", "item"], "column=value"),
        ("read --key =x", vec!["read", "stock", "--key", "=x"], "column=value"),
        ("read --key ../x=1", vec!["read", "stock", "--key", "../x=1"], "../x"),
        ("read --key on_hand=many", vec!["read", "stock", "--key", "on_hand=many"], "many"),
        ("token add a person without scope", vec!["token", "add", "person:ana"], "scope"),
        ("token add module:decisions", vec!["token", "add", "module:decisions"], "decisions"),
        ("token add admin twice", vec!["token", "add", "admin"], "already exists"),
        ("token add robot:x", vec!["token", "add", "robot:x"], "principal name"),
        (
            "token add an agent with a scope",
            vec!["token", "add", "agent:x", "--scope", "../x"],
            "only a person",
        ),
        (
            "expire --orphans-older-than forever",
            vec!["expire", "stock", "--orphans-older-than", "forever"],
            "forever",
        ),
        ("derive --commit-every 0", vec!["derive", "--once", "--commit-every", "0"], "commit-every"),
    ] {
        cases.push(refused(what, f.args(&args), Vec::new(), &[says]));
    }
    let wrong = check_refused(&f, cases);
    assert!(wrong.is_empty(), "{} case(s) wrong:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn sql_that_would_write_or_escape_is_refused_and_changes_nothing() {
    let f = Fixture::new();
    let copy_to = f.tmp.path().join("copied.csv");
    let copy = format!("COPY stock TO '{}'", copy_to.display());
    let copy_query = format!("COPY (SELECT * FROM stock) TO '{}' STORED AS CSV", copy_to.display());
    // Each query and what the refusal says.
    let writes = "only read-only queries are allowed";
    let unplanned = "the query cannot be planned";
    let queries = [
        ("INSERT INTO stock (item, location, on_hand) VALUES ('bolt', 'north', 999)", writes),
        ("INSERT INTO stock SELECT * FROM stock", writes),
        ("UPDATE stock SET on_hand = 0", writes),
        ("DELETE FROM stock", writes),
        ("DROP TABLE stock", writes),
        ("TRUNCATE stock", writes),
        ("CREATE TABLE evil AS SELECT * FROM stock", writes),
        ("CREATE EXTERNAL TABLE evil STORED AS CSV LOCATION '/etc/passwd'", writes),
        ("CREATE VIEW v AS SELECT * FROM stock", writes),
        ("ALTER TABLE stock ADD COLUMN x INT", "Unsupported SQL statement"),
        ("SELECT 1; DELETE FROM stock", "single SQL statement"),
        ("SELECT 1 /* harmless */; DROP TABLE stock -- ;", "single SQL statement"),
        (copy.as_str(), "COPY"),
        (copy_query.as_str(), "COPY"),
        ("CALL sys.create_tag('state.stock', 'evil', 1)", "Unsupported SQL statement"),
        ("CALL sys.rollback_to('state.stock', 1)", "Unsupported SQL statement"),
        ("SET datafusion.execution.target_partitions = 1", writes),
        ("SELECT * FROM stock VERSION AS OF 999999", "no snapshot 999999"),
        ("SELECT * FROM stock VERSION AS OF '../../x'", "not a tag name"),
        ("SELECT * FROM \"../warehouse\".stock", "not found"),
        ("SELECT * FROM record.events", "not found"),
        ("EXPLAIN ANALYZE DELETE FROM stock", "EXPLAIN ANALYZE"),
        ("", unplanned),
        ("SELEC * FROM stock", unplanned),
    ];
    let cases = queries
        .iter()
        .map(|(q, says)| refused(&format!("sql {}", short(q)), f.args(&["sql", q]), Vec::new(), &[says]))
        .collect();
    let wrong = check_refused(&f, cases);
    assert!(wrong.is_empty(), "{} case(s) wrong:\n{}", wrong.len(), wrong.join("\n"));
    assert!(!copy_to.exists(), "COPY wrote {}", copy_to.display());
    // The tables are still there and read as before.
    let r = ok(&f.args(&["sql", "SELECT item, on_hand FROM stock ORDER BY item", "--json"]), b"");
    let answer: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(answer["rows"], json!([{"item": "bolt", "on_hand": 50}, {"item": "nut", "on_hand": 7}]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_of_hostile_proposal_ids_is_refused_by_the_server() {
    let f = Fixture::new();
    let token = ok(&f.args(&["token", "add", "agent:reader"]), b"").stdout.trim().to_string();
    let server =
        livestate_testkit::ServeCommand::new(Path::new(env!("CARGO_BIN_EXE_livestate")), &f.dir).start();
    let url = server.url();
    let client = livestate_client::Client::new(&url, &token).unwrap();
    let tables_before = client.tables().await.unwrap();
    let long = "p".repeat(5000);
    let mut wrong = Vec::new();
    for id in ["../x", "a/b", "..", "p\u{7}x", "%2e%2e%2fx", "?x=1", "#frag", long.as_str()] {
        let args = vec![
            OsString::from("audit"),
            id.into(),
            "--url".into(),
            url.clone().into(),
            "--token".into(),
            token.clone().into(),
        ];
        let r = run(&args, b"");
        if r.code != Some(2) || !r.stderr.contains("404") || r.stderr.contains("panicked at") {
            wrong.push(format!("audit {}: exit {:?}: {:.300}", short(id), r.code, r.stderr));
        }
    }
    let tables_after = client.tables().await.unwrap();
    let proposals = client.proposals(None).await.unwrap();
    drop(server);
    assert!(wrong.is_empty(), "{} case(s) wrong:\n{}", wrong.len(), wrong.join("\n"));
    assert_eq!(
        livestate_testkit::snapshots_and_tags(&tables_after),
        livestate_testkit::snapshots_and_tags(&tables_before)
    );
    assert!(proposals.proposals.is_empty(), "{proposals:?}");
}
