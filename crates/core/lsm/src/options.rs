//! Paimon's maintenance options, read from a table's options with Java Paimon's names and defaults.

use std::collections::HashMap;
use std::time::Duration;

use crate::error::{LsmError, Result};

/// Universal-compaction settings of one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionOptions {
    /// `num-sorted-run.compaction-trigger` (default 5): sorted runs that start a compaction.
    pub trigger: usize,
    /// `num-sorted-run.stop-trigger` (default trigger + 3): sorted runs at which writes wait.
    pub stop_trigger: usize,
    /// `compaction.max-size-amplification-percent` (default 200).
    pub max_size_amp_percent: u64,
    /// `compaction.size-ratio` (default 1).
    pub size_ratio: u64,
    /// `full-compaction.delta-commits`: a full compaction after this many commits.
    pub full_delta_commits: Option<u64>,
    /// `num-levels` (default trigger + 1).
    pub num_levels: usize,
    /// `target-file-size` (default 128 mb): compaction output files roll at this size.
    pub target_file_size: u64,
    /// `manifest.merge-min-count` (default 30): manifests a snapshot may reference before
    /// a compaction commit merges them into one.
    pub manifest_merge_min_count: usize,
    /// Compaction of append tables (no primary key).
    pub append: AppendOptions,
}

/// Compaction settings of an append table: small files are merged, in the order they were
/// written, into files of about `target_file_size`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendOptions {
    /// `target-file-size` (default 256 mb for append tables, as in Java Paimon).
    pub target_file_size: u64,
    /// Files smaller than `target-file-size` × `compaction.small-file-ratio` (default 0.7)
    /// are small; only small files are rewritten.
    pub small_file_size: u64,
    /// `compaction.min.file-num` (default 5): small files that start a compaction.
    pub min_file_num: usize,
    /// `compaction.max.file-num` (default 50): most files merged into one in an automatic
    /// compaction, so one compaction never holds up commits for long.
    pub max_file_num: usize,
}

/// Snapshot and tag retention of one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpireOptions {
    /// `snapshot.num-retained.min` (default 10).
    pub retained_min: u64,
    /// `snapshot.num-retained.max` (default unbounded).
    pub retained_max: u64,
    /// `snapshot.time-retained` (default 1 h).
    pub time_retained: Duration,
    /// `tag.default-time-retained`: retention of tags created without their own.
    pub tag_default_retained: Option<Duration>,
    /// `snapshot.expire.limit` (default 100 here): snapshots expired per batch, so a long
    /// backlog is worked off in steps that never hold up a commit.
    pub expire_limit: u64,
}

impl CompactionOptions {
    /// Reads the options of a table.
    ///
    /// # Errors
    /// An option that is present but not a usable value.
    pub fn from_table(table: &str, opts: &HashMap<String, String>) -> Result<Self> {
        let trigger = int(table, opts, "num-sorted-run.compaction-trigger")?.unwrap_or(5).max(1) as usize;
        let stop_trigger =
            int(table, opts, "num-sorted-run.stop-trigger")?.map_or(trigger + 3, |v| v as usize).max(trigger);
        // One option, two defaults: 128 mb for primary-key tables, 256 mb for append tables.
        let target = size(table, opts, "target-file-size")?;
        let append_target = target.unwrap_or(256 << 20).max(1 << 10);
        let ratio = fraction(table, opts, "compaction.small-file-ratio")?.unwrap_or(0.7);
        let min_file_num = int(table, opts, "compaction.min.file-num")?.unwrap_or(5).max(2) as usize;
        let append = AppendOptions {
            target_file_size: append_target,
            small_file_size: (append_target as f64 * ratio) as u64,
            min_file_num,
            max_file_num: int(table, opts, "compaction.max.file-num")?
                .map_or(50, |v| v as usize)
                .max(min_file_num),
        };
        Ok(CompactionOptions {
            append,
            trigger,
            stop_trigger,
            max_size_amp_percent: int(table, opts, "compaction.max-size-amplification-percent")?
                .unwrap_or(200),
            size_ratio: int(table, opts, "compaction.size-ratio")?.unwrap_or(1),
            full_delta_commits: int(table, opts, "full-compaction.delta-commits")?,
            num_levels: int(table, opts, "num-levels")?.map_or(trigger + 1, |v| v as usize).max(2),
            target_file_size: target.unwrap_or(128 << 20).max(1 << 10),
            manifest_merge_min_count: int(table, opts, "manifest.merge-min-count")?.unwrap_or(30).max(1)
                as usize,
        })
    }

    /// The top level: full compactions write here and drop deletes.
    pub fn max_level(&self) -> i32 {
        i32::try_from(self.num_levels - 1).unwrap_or(i32::MAX)
    }
}

impl ExpireOptions {
    /// Reads the options of a table.
    ///
    /// # Errors
    /// An option that is present but not a usable value.
    pub fn from_table(table: &str, opts: &HashMap<String, String>) -> Result<Self> {
        let retained_min = int(table, opts, "snapshot.num-retained.min")?.unwrap_or(10).max(1);
        let retained_max =
            int(table, opts, "snapshot.num-retained.max")?.unwrap_or(u64::MAX).max(retained_min);
        Ok(ExpireOptions {
            retained_min,
            retained_max,
            time_retained: duration(table, opts, "snapshot.time-retained")?
                .unwrap_or(Duration::from_secs(3600)),
            tag_default_retained: duration(table, opts, "tag.default-time-retained")?,
            expire_limit: int(table, opts, "snapshot.expire.limit")?.unwrap_or(100).max(1),
        })
    }
}

fn bad(table: &str, key: &str, value: &str, message: &str) -> LsmError {
    LsmError::Option { table: table.into(), key: key.into(), value: value.into(), message: message.into() }
}

fn int(table: &str, opts: &HashMap<String, String>, key: &str) -> Result<Option<u64>> {
    opts.get(key)
        .map(|v| v.trim().parse::<u64>().map_err(|_| bad(table, key, v, "expected a whole number")))
        .transpose()
}

fn fraction(table: &str, opts: &HashMap<String, String>, key: &str) -> Result<Option<f64>> {
    opts.get(key)
        .map(|v| match v.trim().parse::<f64>() {
            Ok(f) if f > 0.0 && f <= 1.0 => Ok(f),
            _ => Err(bad(table, key, v, "expected a fraction above 0 and at most 1, such as `0.7`")),
        })
        .transpose()
}

fn duration(table: &str, opts: &HashMap<String, String>, key: &str) -> Result<Option<Duration>> {
    opts.get(key)
        .map(|v| {
            parse_duration(v)
                .ok_or_else(|| bad(table, key, v, "expected a duration such as `1 h` or `30 min`"))
        })
        .transpose()
}

fn size(table: &str, opts: &HashMap<String, String>, key: &str) -> Result<Option<u64>> {
    opts.get(key)
        .map(|v| parse_memory_size(v).ok_or_else(|| bad(table, key, v, "expected a size such as `128 mb`")))
        .transpose()
}

fn split_unit(v: &str) -> Option<(u64, String)> {
    let v = v.trim();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let n = v[..digits].parse::<u64>().ok()?;
    Some((n, v[digits..].trim().to_ascii_lowercase()))
}

/// Paimon's duration syntax: a whole number and a unit (`ms`, `s`, `min`, `h`, `d` and their
/// long forms); a bare number is milliseconds.
pub fn parse_duration(v: &str) -> Option<Duration> {
    let (n, unit) = split_unit(v)?;
    let secs = |k: u64| n.checked_mul(k).map(Duration::from_secs);
    match unit.as_str() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => Some(Duration::from_millis(n)),
        "s" | "sec" | "secs" | "second" | "seconds" => secs(1),
        "m" | "min" | "minute" | "minutes" => secs(60),
        "h" | "hour" | "hours" => secs(3600),
        "d" | "day" | "days" => secs(86_400),
        _ => None,
    }
}

/// Paimon's memory-size syntax: a whole number and an optional unit (`b`, `kb`, `mb`, `gb`).
pub fn parse_memory_size(v: &str) -> Option<u64> {
    let (n, unit) = split_unit(v)?;
    let shift = match unit.as_str() {
        "" | "b" | "bytes" => 0,
        "k" | "kb" | "kibibytes" => 10,
        "m" | "mb" | "mebibytes" => 20,
        "g" | "gb" | "gibibytes" => 30,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_java_paimon() {
        let c = CompactionOptions::from_table("t", &HashMap::new()).unwrap();
        assert_eq!((c.trigger, c.stop_trigger, c.num_levels, c.max_level()), (5, 8, 6, 5));
        assert_eq!((c.max_size_amp_percent, c.size_ratio, c.full_delta_commits), (200, 1, None));
        let e = ExpireOptions::from_table("t", &HashMap::new()).unwrap();
        assert_eq!((e.retained_min, e.time_retained), (10, Duration::from_secs(3600)));
        let a = &c.append;
        assert_eq!((a.target_file_size, a.min_file_num, a.max_file_num), (256 << 20, 5, 50));
        assert_eq!(a.small_file_size, ((256u64 << 20) as f64 * 0.7) as u64);
    }

    #[test]
    fn a_small_file_ratio_outside_zero_to_one_is_refused_by_name() {
        for v in ["0", "1.5", "most"] {
            let opts = HashMap::from([("compaction.small-file-ratio".to_string(), v.to_string())]);
            let err = CompactionOptions::from_table("record.events", &opts).unwrap_err().to_string();
            assert!(err.contains("compaction.small-file-ratio") && err.contains(v), "{err}");
        }
    }

    #[test]
    fn bad_values_name_the_option() {
        let opts = HashMap::from([("snapshot.time-retained".to_string(), "soon".to_string())]);
        let err = ExpireOptions::from_table("state.stock", &opts).unwrap_err().to_string();
        assert!(
            err.contains("state.stock") && err.contains("snapshot.time-retained") && err.contains("soon")
        );
    }

    #[test]
    fn sizes_and_durations_parse_like_paimon() {
        assert_eq!(parse_memory_size("128 mb"), Some(128 << 20));
        assert_eq!(parse_memory_size("2KB"), Some(2048));
        assert_eq!(parse_duration("30 min"), Some(Duration::from_secs(1800)));
        assert_eq!(parse_duration("7d"), Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration("1 fortnight"), None);
    }
}
