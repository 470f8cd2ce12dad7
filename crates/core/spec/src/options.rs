//! Paimon table options livestate accepts, checked before anything is written.
//!
//! Option names and values follow Java Paimon's `CoreOptions`. Unknown options are refused
//! rather than passed through: Paimon ignores a misspelt option silently, which would leave a
//! table behaving differently from what its spec says.

use std::collections::BTreeMap;

use indexmap::IndexMap;

use crate::freshness::parse_duration;
use crate::types::ValueType;

const AGGREGATE_FUNCTIONS: [&str; 11] = [
    "sum",
    "product",
    "max",
    "min",
    "last_value",
    "last_non_null_value",
    "first_value",
    "first_non_null_value",
    "bool_and",
    "bool_or",
    "listagg",
];

/// Paimon's merge engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeEngine {
    Deduplicate,
    PartialUpdate,
    Aggregation,
    FirstRow,
}

impl MergeEngine {
    pub fn as_str(self) -> &'static str {
        match self {
            MergeEngine::Deduplicate => "deduplicate",
            MergeEngine::PartialUpdate => "partial-update",
            MergeEngine::Aggregation => "aggregation",
            MergeEngine::FirstRow => "first-row",
        }
    }
}

/// Options whose value is a positive integer.
const INT_OPTIONS: [&str; 10] = [
    "num-sorted-run.compaction-trigger",
    "num-sorted-run.stop-trigger",
    "num-levels",
    "manifest.merge-min-count",
    "snapshot.expire.limit",
    "compaction.max-size-amplification-percent",
    "compaction.size-ratio",
    "full-compaction.delta-commits",
    "snapshot.num-retained.min",
    "snapshot.num-retained.max",
];

/// Options whose value is a duration (`1 h`, `30 min`, `7d` as Paimon writes them).
const DURATION_OPTIONS: [&str; 2] = ["snapshot.time-retained", "tag.default-time-retained"];

const BOOL_OPTIONS: [&str; 3] =
    ["partial-update.remove-record-on-delete", "ignore-delete", "aggregation.remove-record-on-delete"];

/// Data files of primary-key tables hold no `_KEY_` columns (see `livestate-engine`'s schema
/// module, which sets this option on every state table).
pub const THIN_MODE_OPTION: &str = "data-file.thin-mode";

/// Parquet codecs both livestate's writer and Java Paimon take for `file.compression`.
const COMPRESSIONS: [&str; 5] = ["zstd", "lz4", "snappy", "gzip", "none"];

/// The largest `write-buffer-size` (memory held per table writer) and `target-file-size`.
const MAX_WRITE_BUFFER_BYTES: u64 = 1 << 30;
const MAX_TARGET_FILE_BYTES: u64 = 4 << 30;

/// The largest value of a positive-integer option (`num-levels`: [`MAX_LEVELS`]).
const MAX_INT_OPTION: u32 = 1_000_000;
const MAX_LEVELS: u32 = 64;

/// Options whose value is a memory size (`128 mb`, `64MB`, `1 gb`).
const SIZE_OPTIONS: [&str; 2] = ["target-file-size", "write-buffer-size"];

/// Checks `opts` against the table's columns and returns its merge engine.
///
/// # Errors
/// Every offending option key with the reason.
pub fn check(
    opts: &BTreeMap<String, String>,
    columns: &IndexMap<String, ValueType>,
    primary_key: &[String],
) -> Result<MergeEngine, Vec<(String, String)>> {
    let mut errs = Vec::new();
    let mut err = |k: &str, m: String| errs.push((k.to_string(), m));
    let engine = match opts.get("merge-engine").map(String::as_str) {
        None | Some("deduplicate") => MergeEngine::Deduplicate,
        Some("partial-update") => MergeEngine::PartialUpdate,
        Some("aggregation") => MergeEngine::Aggregation,
        Some("first-row") => MergeEngine::FirstRow,
        Some(other) => {
            err(
                "merge-engine",
                format!(
                    "unknown merge engine `{other}` (deduplicate, partial-update, aggregation or first-row)"
                ),
            );
            MergeEngine::Deduplicate
        }
    };
    for (k, v) in opts {
        match k.as_str() {
            "merge-engine" => {}
            "bucket" => match v.parse::<i32>() {
                Ok(n) if (1..=1024).contains(&n) => {}
                _ => err(k, format!("`{v}`: livestate needs a fixed bucket count from 1 to 1024")),
            },
            "sequence.field" => err(
                k,
                "not supported: livestate applies changes in record order (its changelog and lookup index follow that order)".into(),
            ),
            "changelog-producer" => match v.as_str() {
                "none" => {}
                other => err(
                    k,
                    format!("`{other}`: livestate writes every table's changelog (before and after of each change) itself; `none` switches it off"),
                ),
            },
            THIN_MODE_OPTION => {
                if v != "true" {
                    err(
                        k,
                        format!("`{v}`: livestate's writer (paimon 0.4.0) always writes data files without `_KEY_` columns, so only `true` describes them"),
                    );
                }
            }
            "deletion-vectors.enabled" => {
                if v != "false" {
                    err(
                        k,
                        "deletion vectors are not supported: tables would read empty until compacted".into(),
                    );
                }
            }
            "fields.default-aggregate-function" => {
                if !AGGREGATE_FUNCTIONS.contains(&v.as_str()) {
                    err(k, format!("unknown aggregate function `{v}`"));
                }
                // It applies to every value column without a function of its own.
                for (col, ty) in columns {
                    let own = format!("fields.{col}.aggregate-function");
                    if primary_key.contains(col) || opts.contains_key(&own) {
                        continue;
                    }
                    if let Some(why) = unfit_aggregate(v, col, *ty) {
                        err(k, why);
                    }
                }
            }
            "file.compression" => {
                if !COMPRESSIONS.contains(&v.as_str()) {
                    err(k, format!("unknown codec `{v}` (one of {})", COMPRESSIONS.join(", ")));
                }
            }
            _ if k.starts_with("fields.") => check_field_option(k, v, columns, primary_key, engine, &mut err),
            _ if INT_OPTIONS.contains(&k.as_str()) => {
                let max = if k == "num-levels" { MAX_LEVELS } else { MAX_INT_OPTION };
                if !v.parse::<u32>().is_ok_and(|n| (1..=max).contains(&n)) {
                    err(k, format!("`{v}` is not a whole number from 1 to {max}"));
                }
            }
            _ if BOOL_OPTIONS.contains(&k.as_str()) => {
                if v != "true" && v != "false" {
                    err(k, format!("`{v}` is not true or false"));
                }
            }
            _ if DURATION_OPTIONS.contains(&k.as_str()) => {
                if parse_paimon_duration(v).is_none() {
                    err(k, format!("`{v}` is not a duration such as `1 h`, `30 min` or `7 d`"));
                }
            }
            _ if SIZE_OPTIONS.contains(&k.as_str()) => {
                let max = if k == "write-buffer-size" { MAX_WRITE_BUFFER_BYTES } else { MAX_TARGET_FILE_BYTES };
                match memory_size(v) {
                    None => err(k, format!("`{v}` is not a size such as `128 mb` or `64mb`")),
                    Some(n) if n == 0 || n > max => {
                        err(k, format!("`{v}` is outside 1 b to {} mb", max >> 20))
                    }
                    Some(_) => {}
                }
            }
            "file.format" => {
                if v != "parquet" {
                    err(k, format!("`{v}`: livestate writes and compacts parquet files only"));
                }
            }
            _ => err(k, "unknown or unsupported Paimon option".into()),
        }
    }
    // livestate gives first-row tables changelog-producer `lookup`, which Java Paimon refuses
    // together with full-compaction.delta-commits (SchemaValidation.validateTableSchema): Flink
    // and Spark could then not alter the table or read it with dynamic options.
    if engine == MergeEngine::FirstRow
        && opts.contains_key("full-compaction.delta-commits")
        && opts.get("changelog-producer").map(String::as_str) != Some("none")
    {
        err(
            "full-compaction.delta-commits",
            "a first-row table's changelog comes from `lookup`, which Java Paimon refuses together with this option (set changelog-producer = \"none\" to use it)".into(),
        );
    }
    let retained = |k: &str| opts.get(k).and_then(|v| v.parse::<u32>().ok());
    if let (Some(min), Some(max)) =
        (retained("snapshot.num-retained.min"), retained("snapshot.num-retained.max"))
    {
        if min > max {
            err("snapshot.num-retained.min", format!("{min} is above snapshot.num-retained.max ({max})"));
        }
    }
    if engine != MergeEngine::Aggregation && opts.keys().any(|k| k.ends_with(".aggregate-function")) {
        err("merge-engine", "aggregate functions need merge-engine = \"aggregation\"".into());
    }
    if errs.is_empty() {
        Ok(engine)
    } else {
        Err(errs)
    }
}

fn check_field_option(
    k: &str,
    v: &str,
    columns: &IndexMap<String, ValueType>,
    primary_key: &[String],
    engine: MergeEngine,
    err: &mut impl FnMut(&str, String),
) {
    let rest = &k["fields.".len()..];
    let Some((field, opt)) = rest.split_once('.') else {
        return err(k, "expected fields.<column>.<option>".into());
    };
    let Some(ty) = columns.get(field) else {
        return err(k, format!("`{field}` is not a column"));
    };
    match opt {
        "aggregate-function" => {
            if !AGGREGATE_FUNCTIONS.contains(&v) {
                return err(k, format!("unknown aggregate function `{v}`"));
            }
            if primary_key.iter().any(|p| p == field) {
                return err(k, format!("`{field}` is a key column and cannot be aggregated"));
            }
            if let Some(why) = unfit_aggregate(v, field, *ty) {
                err(k, why);
            }
        }
        "ignore-retract" => {
            if v != "true" && v != "false" {
                err(k, format!("`{v}` is not true or false"));
            }
        }
        "sequence-group" => {
            let _ = (v, engine);
            err(k, "sequence groups are not supported: livestate applies changes in record order".into())
        }
        _ => err(k, format!("unknown field option `{opt}`")),
    }
}

/// Why aggregate function `f` cannot fold column `col` of type `ty`, if it cannot.
fn unfit_aggregate(f: &str, col: &str, ty: ValueType) -> Option<String> {
    let fits = match f {
        "sum" | "product" => ty.is_numeric(),
        "bool_and" | "bool_or" => ty == ValueType::Bool,
        "listagg" => ty == ValueType::String,
        _ => true,
    };
    let needs = match f {
        "sum" | "product" => "a numeric",
        "bool_and" | "bool_or" => "a bool",
        _ => "a string",
    };
    (!fits).then(|| format!("`{f}` needs {needs} column, `{col}` is {ty}"))
}

/// Paimon's memory-size syntax, in bytes: a whole number and an optional unit (b, kb, mb,
/// gb); `None` when it does not parse or does not fit 64 bits.
fn memory_size(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let unit: u64 = match v[digits..].trim() {
        "" | "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        _ => return None,
    };
    v[..digits].parse::<u64>().ok()?.checked_mul(unit)
}

/// Paimon's duration syntax: a number and a unit (`ms`, `s`, `min`, `h`, `d`), space optional.
pub fn parse_paimon_duration(v: &str) -> Option<std::time::Duration> {
    let compact: String = v.chars().filter(|c| !c.is_whitespace()).collect();
    let compact = compact.replace("min", "m");
    parse_duration(&compact).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(opts: &[(&str, &str)]) -> Vec<(String, String)> {
        let opts: BTreeMap<String, String> =
            opts.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let columns: IndexMap<String, ValueType> =
            [("k".to_string(), ValueType::String), ("n".to_string(), ValueType::Int)].into_iter().collect();
        check(&opts, &columns, &["k".to_string()]).err().unwrap_or_default()
    }

    #[test]
    fn maintenance_options_take_paimon_values() {
        assert!(errors(&[
            ("target-file-size", "64 mb"),
            ("num-levels", "4"),
            ("manifest.merge-min-count", "10"),
            ("snapshot.expire.limit", "50"),
            ("snapshot.time-retained", "30 min"),
            ("file.format", "parquet"),
        ])
        .is_empty());
    }

    #[test]
    fn thin_mode_may_only_say_what_livestate_writes() {
        assert!(errors(&[("data-file.thin-mode", "true")]).is_empty());
        let e = errors(&[("data-file.thin-mode", "false")]);
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].0, "data-file.thin-mode");
        assert!(e[0].1.contains("_KEY_"), "{e:?}");
    }

    #[test]
    fn first_row_refuses_full_compaction_delta_commits_while_its_changelog_is_lookup() {
        let e = errors(&[("merge-engine", "first-row"), ("full-compaction.delta-commits", "4")]);
        assert_eq!(e.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["full-compaction.delta-commits"]);
        assert!(errors(&[
            ("merge-engine", "first-row"),
            ("full-compaction.delta-commits", "4"),
            ("changelog-producer", "none"),
        ])
        .is_empty());
        assert!(errors(&[("merge-engine", "deduplicate"), ("full-compaction.delta-commits", "4")]).is_empty());
    }

    #[test]
    fn options_derive_would_refuse_or_misuse_are_refused_at_load_by_name() {
        let keys = |opts: &[(&str, &str)]| {
            let e = errors(opts);
            e.into_iter().map(|(k, m)| format!("{k}: {m}")).collect::<Vec<_>>()
        };
        // The default applies to every value column without a function of its own: `n`, an int.
        assert!(
            keys(&[("merge-engine", "aggregation"), ("fields.default-aggregate-function", "sum")]).is_empty()
        );
        let e = keys(&[("merge-engine", "aggregation"), ("fields.default-aggregate-function", "listagg")]);
        assert_eq!(e, ["fields.default-aggregate-function: `listagg` needs a string column, `n` is int"]);
        assert!(keys(&[
            ("merge-engine", "aggregation"),
            ("fields.default-aggregate-function", "bool_or"),
            ("fields.n.aggregate-function", "max"),
        ])
        .is_empty());
        let e = keys(&[("file.compression", "brotli9")]);
        assert!(e.len() == 1 && e[0].contains("unknown codec `brotli9`"), "{e:?}");
        assert!(keys(&[("file.compression", "lz4")]).is_empty());
        let e = keys(&[("snapshot.num-retained.min", "20"), ("snapshot.num-retained.max", "5")]);
        assert!(e.len() == 1 && e[0].contains("20 is above snapshot.num-retained.max (5)"), "{e:?}");
        let e = keys(&[("write-buffer-size", "1180591620717411303424")]);
        assert!(e.len() == 1 && e[0].starts_with("write-buffer-size"), "{e:?}");
        let e = keys(&[("write-buffer-size", "17179869184 gb")]);
        assert!(e.len() == 1 && e[0].starts_with("write-buffer-size"), "2^64 bytes overflows: {e:?}");
        assert!(keys(&[("write-buffer-size", "2 gb")]).len() == 1);
        assert!(keys(&[("write-buffer-size", "256 mb")]).is_empty());
        assert!(keys(&[("num-levels", "4294967295")]).len() == 1);
    }

    #[test]
    fn unusable_sizes_and_formats_are_refused_by_name() {
        let e = errors(&[("target-file-size", "big"), ("file.format", "orc")]);
        let keys: Vec<&str> = e.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["file.format", "target-file-size"], "{e:?}");
    }
}
