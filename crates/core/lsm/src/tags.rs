//! Every tag of a table, read a few files at a time, each by its size.
//!
//! The `paimon` crate's `TagManager::list_all` reads every tag file at once, and each read of a
//! file of unknown size (`InputFile::read`) takes a 2 MiB buffer and zeroes it, so listing a
//! table that proposals have pinned a few hundred times held hundreds of MiB for a moment, on
//! every health check and expiry pass, and zeroed 2 MiB per tag (docs/BENCHMARKS.md, "Soak").
//! These read at most [`READ_AT_ONCE`] tags at a time, each with a read of exactly its size. A
//! tag deleted between the listing and its read is left out; one that does not parse is read
//! again for up to 200 ms (a tag being created is written in place), then reported. A
//! [`TagCache`] keeps the tags a maintainer has read, so a listing reads only the tag files it
//! has not seen before.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use futures::{StreamExt, TryStreamExt};
use paimon::io::FileRead;
use paimon::spec::Snapshot;
use paimon::Table;

use crate::error::{paimon_err, Result};

/// Tag files read concurrently.
pub const READ_AT_ONCE: usize = 8;

/// Reads of a tag file that does not parse before it is reported as damaged: a tag being
/// created is written in place and reads as empty or cut short for a moment.
const PARTIAL_TAG_READS: usize = 10;
const PARTIAL_TAG_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

/// A tag's name, its snapshot, when it was created (epoch milliseconds) and how long it is
/// retained (seconds), as Java Paimon writes the last two (absent for a tag without retention).
pub(crate) type TagWithMetadata = (String, Snapshot, Option<i64>, Option<f64>);

/// The tags of one table read so far, by name. A tag file is written once and never changed
/// while it exists (livestate creates a tag once and deletes it whole; one process writes a
/// table), so a tag listed again is taken from here instead of being read again; a name no
/// longer listed is dropped, and the maintainer forgets a tag it deletes. Only for tables this
/// process alone writes tags of: another writer replacing a tag under the same name would go
/// unseen.
#[derive(Debug, Default)]
pub(crate) struct TagCache(Mutex<HashMap<String, TagWithMetadata>>);

impl TagCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, TagWithMetadata>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops `tag` (deleted by this process).
    pub(crate) fn forget(&self, tag: &str) {
        self.lock().remove(tag);
    }

    /// Tags held.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Every tag of `table` with its snapshot, by name.
///
/// # Errors
/// Listing the tag directory or reading a tag failed.
pub(crate) async fn list(
    table: &Table,
    name: &str,
    cache: Option<&TagCache>,
) -> Result<Vec<(String, Snapshot)>> {
    Ok(list_with_metadata(table, name, cache)
        .await?
        .into_iter()
        .map(|(tag, snap, _, _)| (tag, snap))
        .collect())
}

/// Every tag of `table` with its snapshot, creation time and retention, by name; with a
/// `cache`, only the tags it does not hold are read.
///
/// # Errors
/// Listing the tag directory or reading a tag failed.
pub(crate) async fn list_with_metadata(
    table: &Table,
    name: &str,
    cache: Option<&TagCache>,
) -> Result<Vec<TagWithMetadata>> {
    let tm = table.tag_manager();
    let names = tm.list_all_names().await.map_err(paimon_err(name, "list tags"))?;
    let mut known: HashMap<String, TagWithMetadata> = match cache {
        Some(c) => {
            let held = c.lock();
            names.iter().filter_map(|n| Some((n.clone(), held.get(n)?.clone()))).collect()
        }
        None => HashMap::new(),
    };
    let missing: Vec<String> = names.iter().filter(|n| !known.contains_key(*n)).cloned().collect();
    let tm = &tm;
    let read: Vec<Option<TagWithMetadata>> = futures::stream::iter(missing)
        .map(|tag| async move {
            let path = tm.tag_path(&tag);
            let mut attempt = 1;
            loop {
                let Some(bytes) = read_whole(table, &path).await.map_err(paimon_err(name, "read tag"))?
                else {
                    return Ok(None);
                };
                match parse(name, &tag, &bytes) {
                    Ok(t) => return Ok(Some(t)),
                    // The `paimon` crate writes a tag file in place, so a listing can meet one
                    // being written (empty or cut short): read it again shortly.
                    Err(_) if attempt < PARTIAL_TAG_READS => {
                        attempt += 1;
                        tokio::time::sleep(PARTIAL_TAG_PAUSE).await;
                    }
                    Err(e) => return Err(e),
                }
            }
        })
        .buffered(READ_AT_ONCE)
        .try_collect()
        .await?;
    if let Some(c) = cache {
        let listed: HashSet<&String> = names.iter().collect();
        let mut held = c.lock();
        held.retain(|n, _| listed.contains(n));
        for t in read.iter().flatten() {
            held.insert(t.0.clone(), t.clone());
        }
    }
    known.extend(read.into_iter().flatten().map(|t| (t.0.clone(), t)));
    // In the listing's order; a tag deleted between the listing and its read is left out.
    Ok(names.iter().filter_map(|n| known.remove(n)).collect())
}

/// The bytes of the file at `path`, read with one read of its size; `None` when it does not
/// exist.
async fn read_whole(table: &Table, path: &str) -> paimon::Result<Option<bytes::Bytes>> {
    let input = table.file_io().new_input(path)?;
    let size = match input.metadata().await {
        Ok(status) => status.size,
        Err(_) if !input.exists().await? => return Ok(None),
        Err(e) => return Err(e),
    };
    if size == 0 {
        return Ok(Some(bytes::Bytes::new()));
    }
    input.reader().await?.read(0..size).await.map(Some)
}

/// A tag file: the snapshot it pins, and Java Paimon's `tagCreateTime` (a `LocalDateTime`
/// written as `[year, month, day, hour, minute, second, nanos]`, read as UTC) and
/// `tagTimeRetained` (seconds).
fn parse(table: &str, tag: &str, bytes: &[u8]) -> Result<TagWithMetadata> {
    let invalid = |message: String| crate::LsmError::Refused {
        table: table.to_string(),
        message: format!("tag {tag}: its file is not a Paimon tag: {message}"),
    };
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
    let created = value.get("tagCreateTime").and_then(local_date_time_ms);
    let retained = value.get("tagTimeRetained").and_then(serde_json::Value::as_f64);
    let snapshot: Snapshot = serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
    Ok((tag.to_string(), snapshot, created, retained))
}

/// Epoch milliseconds of a `LocalDateTime` as Jackson writes it (5 to 7 numbers).
fn local_date_time_ms(value: &serde_json::Value) -> Option<i64> {
    let items = value.as_array()?;
    if !(5..=7).contains(&items.len()) {
        return None;
    }
    let mut n = [0u32; 7];
    for (slot, item) in n.iter_mut().zip(items) {
        *slot = u32::try_from(item.as_u64()?).ok()?;
    }
    let date = chrono::NaiveDate::from_ymd_opt(i32::try_from(n[0]).ok()?, n[1], n[2])?;
    let time = chrono::NaiveTime::from_hms_nano_opt(n[3], n[4], n[5], n[6])?;
    Some(date.and_time(time).and_utc().timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_creation_time_reads_as_jackson_writes_a_local_date_time() {
        let full = serde_json::json!([2026, 11, 30, 18, 5, 9, 250_000_000]);
        assert_eq!(local_date_time_ms(&full), Some(1_796_061_909_250));
        let to_the_minute = serde_json::json!([2026, 11, 30, 18, 5]);
        assert_eq!(local_date_time_ms(&to_the_minute), Some(1_796_061_900_000));
        assert_eq!(local_date_time_ms(&serde_json::json!([2026, 13, 1, 0, 0])), None);
        assert_eq!(local_date_time_ms(&serde_json::json!("2026-11-30T18:05")), None);
    }
}
