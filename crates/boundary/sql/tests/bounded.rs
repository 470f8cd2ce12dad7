//! Every query runs within its limits, whoever calls (HTTP, MCP, CLI): deep, long, wide,
//! slow, memory-hungry and value-inflating queries are refused or stopped with an error that
//! names the limit, and the process goes on.

use std::path::Path;
use std::time::{Duration, Instant};

use livestate_api::ErrorKind;
use livestate_engine::Livestate;
use livestate_sql::{Busy, Limits, Queries, SqlError};
use serde_json::{json, Value};

/// An initialised directory of the example spec (its tables empty).
async fn example() -> (tempfile::TempDir, Livestate) {
    let tmp = tempfile::tempdir().unwrap();
    // The crate's directory as cargo gives it to the test process, not as compiled in: a build
    // directory shared with a clone at another path reuses this binary.
    let crate_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let spec = Path::new(&crate_dir).join("../../../examples/company");
    let ls = Livestate::init(&tmp.path().join("d"), &spec).await.unwrap();
    (tmp, ls)
}

async fn run(ls: &Livestate, queries: &Queries, sql: &str) -> Result<livestate_sql::Answer, SqlError> {
    queries.run("agent:test", &ls.reader(), sql, 100).await
}

/// An answer's rows as JSON values, to compare with `json!` literals.
fn rows(a: livestate_sql::Answer) -> Vec<Value> {
    a.rows.into_iter().map(Value::Object).collect()
}

/// A query that runs for minutes unless stopped.
const ENDLESS: &str = "SELECT count(*) AS n FROM generate_series(1, 1000000000000) AS t(v)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deepest_accepted_query_plans_and_runs_and_one_step_deeper_is_refused() {
    let (_tmp, ls) = example().await;
    let queries = Queries::new(Limits::default());
    // 128 is the default bound: a chain of 128 operators, over a column so that it runs.
    let chain = format!("SELECT 1{} AS x", " + 1".repeat(128));
    let a = run(&ls, &queries, &chain).await.unwrap();
    assert_eq!(rows(a), vec![json!({"x": 129})]);
    let on_column = format!("SELECT on_hand{} AS x FROM stock", " + on_hand".repeat(127));
    run(&ls, &queries, &on_column).await.unwrap();
    // Parentheses and chains together, up to the bound (sqlparser's own recursion limit
    // of 50 holds first for parentheses alone).
    let nested = format!("SELECT {}1{} AS x", "(1 + ".repeat(20), " + 1)".repeat(20));
    let chained_inside = format!("SELECT {}1{}{} AS x", "(".repeat(40), " + 1".repeat(87), ")".repeat(40));
    for q in [&nested, &chained_inside] {
        let a = run(&ls, &queries, q).await.unwrap_or_else(|e| panic!("{q}: {e}"));
        assert!(a.rows[0]["x"].is_number(), "{a:?}");
    }
    // One step deeper: refused before planning, naming where.
    let deeper = format!("SELECT 1{} AS x", " + 1".repeat(129));
    let e = run(&ls, &queries, &deeper).await.unwrap_err();
    assert!(matches!(&e, SqlError::TooComplex(s) if s.what == "nesting depth" && s.found == 129), "{e}");
    assert_eq!(e.kind(), ErrorKind::Input, "{e}");
    assert!(e.to_string().contains("line 1, column"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_kilobytes_of_one_plus_one_are_refused_not_a_stack_overflow() {
    let (_tmp, ls) = example().await;
    let queries = Queries::new(Limits::default());
    for sql in [
        format!("SELECT 1{}", "+1".repeat(4000)),
        format!("SELECT {}1{}", "(".repeat(3000), ")".repeat(3000)),
        format!("SELECT {}1", "NOT ".repeat(2000)),
        format!("SELECT {}1{}", "CASE WHEN true THEN ".repeat(1000), " END".repeat(1000)),
        format!("SELECT * FROM stock{}", " JOIN stock USING (item)".repeat(500)),
        format!("SELECT 1{}", " UNION ALL SELECT 1".repeat(1000)),
        format!("SELECT 1{}", "::int".repeat(2000)),
    ] {
        let e = run(&ls, &queries, &sql).await.unwrap_err();
        assert!(matches!(&e, SqlError::TooComplex(_)), "{}…: {e}", &sql[..40]);
    }
    // The process is alive and answers.
    assert_eq!(rows(run(&ls, &queries, "SELECT 2 AS two").await.unwrap()), vec![json!({"two": 2})]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_over_the_size_limit_is_refused_before_planning() {
    let (_tmp, ls) = example().await;
    let queries = Queries::new(Limits::default());
    let long = format!("SELECT '{}'", "x".repeat(70_000));
    let e = run(&ls, &queries, &long).await.unwrap_err();
    assert!(matches!(e, SqlError::TextTooLong { .. }), "{e}");
    assert!(e.to_string().contains("64 KiB"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_over_the_item_limit_is_refused_at_once_and_the_widest_accepted_runs() {
    let (_tmp, ls) = example().await;
    let queries = Queries::new(Limits::default());
    // Thousands of columns: refused at once, where planning them would take minutes.
    let wide = format!("SELECT 1{}", ", 1".repeat(5000));
    let started = Instant::now();
    let e = run(&ls, &queries, &wide).await.unwrap_err();
    assert!(matches!(&e, SqlError::TooComplex(s) if s.what == "items in one list"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    // The widest accepted select list plans and runs well within the time limit.
    let items: Vec<String> = (0..1024).map(|i| format!("on_hand + {i} AS c{i}")).collect();
    let widest = format!("SELECT {} FROM stock", items.join(", "));
    let started = Instant::now();
    let a = run(&ls, &queries, &widest).await.unwrap();
    assert_eq!(a.columns.len(), 1024);
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_query_is_stopped_at_the_time_limit_and_its_place_is_freed() {
    let (_tmp, ls) = example().await;
    let queries =
        Queries::new(Limits { time: Duration::from_millis(500), per_principal: 1, ..Limits::default() });
    let started = Instant::now();
    let e = run(&ls, &queries, ENDLESS).await.unwrap_err();
    assert!(matches!(e, SqlError::Timeout(_)), "{e}");
    assert_eq!(e.kind(), ErrorKind::Input, "{e}");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    // The aborted work ends, and the principal's one place is free again.
    let deadline = Instant::now() + Duration::from_secs(5);
    while queries.running() > 0 {
        assert!(Instant::now() < deadline, "the stopped query still runs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(rows(run(&ls, &queries, "SELECT 1 AS one").await.unwrap()), vec![json!({"one": 1})]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_query_stops_its_work() {
    let (_tmp, ls) = example().await;
    let queries = Queries::new(Limits { time: Duration::from_secs(600), ..Limits::default() });
    let q = run(&ls, &queries, ENDLESS);
    // Polled for a while, then dropped, as an HTTP handler is when its client goes away.
    assert!(tokio::time::timeout(Duration::from_millis(500), q).await.is_err());
    let deadline = Instant::now() + Duration::from_secs(5);
    while queries.running() > 0 {
        assert!(Instant::now() < deadline, "the dropped query still runs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_beyond_the_concurrency_limits_are_turned_away_naming_the_limit() {
    let (_tmp, ls) = example().await;
    let limits =
        Limits { time: Duration::from_secs(600), per_principal: 1, concurrent: 2, ..Limits::default() };
    let queries = Queries::new(limits);
    let reader = ls.reader();
    let first = queries.run("agent:a", &reader, ENDLESS, 1);
    let busy = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mine = queries.run("agent:a", &reader, "SELECT 1", 1).await.unwrap_err();
        assert!(matches!(&mine, SqlError::Busy(Busy::Principal { limit: 1, .. })), "{mine}");
        assert!(mine.is_retryable() && mine.kind() == ErrorKind::Unavailable);
        assert!(mine.to_string().contains("agent:a runs 1 already, the limit per principal"), "{mine}");
        // Another principal still gets in (the overall limit is 2).
        let other = queries.run("agent:b", &reader, "SELECT 1 AS one", 1).await.unwrap();
        assert_eq!(rows(other), vec![json!({"one": 1})]);
        let second = queries.run("agent:b", &reader, ENDLESS, 1);
        let third = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            queries.run("agent:c", &reader, "SELECT 1", 1).await.unwrap_err()
        };
        tokio::select! {
            _ = second => panic!("the endless query ended"),
            all = third => assert!(matches!(all, SqlError::Busy(Busy::All { limit: 2 })), "{all}"),
        }
    };
    tokio::select! {
        _ = first => panic!("the endless query ended"),
        () = busy => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_that_build_values_from_an_argument_are_refused_above_the_value_limit() {
    let (_tmp, ls) = example().await;
    let queries = Queries::new(Limits::default());
    for (sql, named) in [
        ("SELECT repeat('x', 2000000000)", "repeat"),
        ("SELECT length(repeat('ab', 1000000000)) AS n", "repeat"),
        ("SELECT array_repeat(1, 2000000000)", "array_repeat"),
        ("SELECT list_repeat('x', 2000000000)", "array_repeat"),
        ("SELECT lpad('x', 2000000000)", "lpad"),
        ("SELECT rpad('x', 2000000000, 'yz')", "rpad"),
        ("SELECT array_resize([1], 2000000000)", "array_resize"),
        ("SELECT range(0, 2000000000)", "range"),
        ("SELECT range(DATE '1970-01-01', DATE '9999-01-01', INTERVAL '1 second')", "range"),
        ("SELECT generate_series(1, 2000000000)", "generate_series"),
        ("SELECT replace(repeat('x', 1000000), 'x', repeat('y', 1000))", "replace"),
        // Growth that compounds through nesting and `||` is caught after each step.
        ("SELECT repeat(repeat('x', 100000), 1000)", "repeat"),
        (
            "WITH a AS (SELECT repeat('x', 1000000) AS s), b AS (SELECT s || s || s || s || s || s || s || s AS s FROM a), \
             c AS (SELECT s || s || s || s || s || s || s || s AS s FROM b) SELECT length(s) AS n FROM c",
            "bounded",
        ),
        ("SELECT length(concat(repeat('x', 9000000), repeat('x', 9000000))) AS n", "concat"),
        ("SELECT to_hex(1) AS h, repeat('x', 20000000) AS r", "repeat"),
    ] {
        let e = run(&ls, &queries, sql).await.expect_err(sql);
        assert!(matches!(e, SqlError::ValueTooLarge { .. }), "{sql}: {e}");
        assert_eq!(e.kind(), ErrorKind::Input, "{e}");
        let m = e.to_string();
        assert!(m.contains(&format!("`{named}`")) && m.contains("16 MiB"), "{sql}: {m}");
    }
    // Within the limit they work as before, with their usual names.
    let a = run(
        &ls,
        &queries,
        "SELECT repeat('ab', 3) AS r, lpad('7', 3, '0') AS p, array_repeat(1, 2) AS a, range(0, 3) AS g, 'a' || 'b' AS c, length(repeat('x', 1000000)) AS n",
    )
    .await
    .unwrap();
    assert_eq!(
        rows(a),
        vec![json!({"r": "ababab", "p": "007", "a": [1, 1], "g": [0, 1, 2], "c": "ab", "n": 1000000})]
    );
    let unnamed = run(&ls, &queries, "SELECT 'a' || 'b'").await.unwrap();
    assert_eq!(unnamed.columns, vec!["Utf8(\"a\") || Utf8(\"b\")".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integer_overflow_over_rows_is_the_callers_data_error_not_a_wrapped_answer() {
    let (_tmp, ls) = example().await;
    let queries = Queries::new(Limits::default());
    for sql in [
        "SELECT v + 9223372036854775807 AS n FROM generate_series(1, 3) AS t(v)",
        "SELECT -v - 9223372036854775807 AS n FROM generate_series(1, 3) AS t(v)",
        "SELECT v * 4611686018427387904 AS n FROM generate_series(1, 3) AS t(v)",
        "SELECT sum(v * 4611686018427387904) AS n FROM generate_series(1, 3) AS t(v)",
        "SELECT count(*) AS n FROM stock WHERE on_hand + 9223372036854775807 > 0 OR true",
    ] {
        let e = run(&ls, &queries, sql).await.map(rows);
        if sql.contains("FROM stock") {
            // stock is empty: nothing to overflow, and the rewritten filter still plans and runs.
            assert_eq!(e.unwrap(), vec![json!({"n": 0})]);
            continue;
        }
        let e = e.expect_err(sql);
        assert!(matches!(e, SqlError::Data { .. }), "{sql}: {e}");
        assert_eq!(e.kind(), ErrorKind::Input, "{e}");
        assert!(e.to_string().contains("Overflow happened on"), "{sql}: {e}");
    }
    let fits =
        run(&ls, &queries, "SELECT v * 2 + 1 AS n, v - 10 FROM generate_series(1, 2) AS t(v)").await.unwrap();
    assert_eq!(
        rows(fits),
        vec![json!({"n": 3, "t.v - Int64(10)": -9}), json!({"n": 5, "t.v - Int64(10)": -8})]
    );
}

/// An aggregate that keeps every value it sees, and cannot spill.
const HUNGRY: &str = "SELECT cardinality(array_agg(v)) AS n FROM generate_series(1, 100000000) AS t(v)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_over_its_memory_limit_is_stopped_naming_the_limit() {
    let (_tmp, ls) = example().await;
    let queries = Queries::new(Limits { memory_bytes: 4 << 20, ..Limits::default() });
    let e = run(&ls, &queries, HUNGRY).await.unwrap_err();
    assert!(matches!(e, SqlError::Memory { .. }), "{e}");
    assert_eq!(e.kind(), ErrorKind::Input, "{e}");
    assert!(e.to_string().contains("memory limit of 4 MiB"), "{e}");
    // The same pool, shared by all queries, refuses with a retryable error.
    let queries = Queries::new(Limits { total_memory_bytes: 4 << 20, ..Limits::default() });
    let e = run(&ls, &queries, HUNGRY).await.unwrap_err();
    assert!(matches!(e, SqlError::Overloaded { .. }) && e.is_retryable(), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_is_cut_at_the_output_byte_limit() {
    let (_tmp, ls) = example().await;
    let queries = Queries::new(Limits { output_bytes: 10_000, ..Limits::default() });
    let a = run(&ls, &queries, "SELECT repeat('x', 1000) AS s FROM generate_series(1, 50) AS t(v)")
        .await
        .unwrap();
    assert!(a.truncated);
    assert_eq!(a.rows.len(), 9, "rows of ~1 KB each within 10 000 bytes");
    let a = run(&ls, &queries, "SELECT v FROM generate_series(1, 50) AS t(v)").await.unwrap();
    assert!(!a.truncated);
    assert_eq!(a.rows.len(), 50);
}

/// Not a check: how long planning and running take by the number of select items, without the
/// text limits (`cargo test -p livestate-sql --test bounded -- --ignored --nocapture`). The
/// list limit of 1,024 was chosen from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure_time_by_select_items() {
    let (_tmp, ls) = example().await;
    let unbounded = Limits {
        text_bytes: usize::MAX,
        tokens: usize::MAX,
        list_items: usize::MAX,
        time: Duration::from_secs(600),
        ..Limits::default()
    };
    let queries = Queries::new(unbounded);
    for n in [256, 1024, 4096, 16384] {
        for (what, sql) in [
            (
                "constants",
                format!("SELECT {}", (0..n).map(|i| format!("{i} AS c{i}")).collect::<Vec<_>>().join(", ")),
            ),
            (
                "columns",
                format!(
                    "SELECT {} FROM stock",
                    (0..n).map(|i| format!("on_hand + {i} AS c{i}")).collect::<Vec<_>>().join(", ")
                ),
            ),
        ] {
            let started = Instant::now();
            let r = run(&ls, &queries, &sql).await.map(|a| a.columns.len());
            println!("{n:>5} {what:<9} {:>8.2?} {r:?}", started.elapsed());
        }
    }
}
