//! Every tag of a table, read a few files at a time.
//!
//! The `paimon` crate's `TagManager::list_all` reads every tag file at once, and each read of a
//! file of unknown size takes a 2 MiB buffer, so listing a table that proposals have pinned a
//! few hundred times held hundreds of MiB for a moment, on every health check and expiry pass
//! (docs/BENCHMARKS.md, "Soak"). These read at most [`READ_AT_ONCE`] tags at a time. A tag
//! deleted between the listing and its read is left out.

use futures::{StreamExt, TryStreamExt};
use paimon::spec::Snapshot;
use paimon::Table;

use crate::error::{paimon_err, Result};

/// Tag files read concurrently.
pub const READ_AT_ONCE: usize = 8;

/// A tag's name, its snapshot, when it was created (epoch milliseconds) and how long it is
/// retained (seconds), as Java Paimon writes the last two (absent for a tag without retention).
pub(crate) type TagWithMetadata = (String, Snapshot, Option<i64>, Option<f64>);

/// Every tag of `table` with its snapshot, by name.
///
/// # Errors
/// Listing the tag directory or reading a tag failed.
pub(crate) async fn list(table: &Table, name: &str) -> Result<Vec<(String, Snapshot)>> {
    Ok(list_with_metadata(table, name).await?.into_iter().map(|(tag, snap, _, _)| (tag, snap)).collect())
}

/// Every tag of `table` with its snapshot, creation time and retention, by name.
///
/// # Errors
/// Listing the tag directory or reading a tag failed.
pub(crate) async fn list_with_metadata(table: &Table, name: &str) -> Result<Vec<TagWithMetadata>> {
    let tm = table.tag_manager();
    let names = tm.list_all_names().await.map_err(paimon_err(name, "list tags"))?;
    let tm = &tm;
    let read: Vec<Option<TagWithMetadata>> = futures::stream::iter(names)
        .map(|tag| async move {
            let found = tm.get_with_metadata(&tag).await.map_err(paimon_err(name, "read tag"))?;
            Ok::<_, crate::LsmError>(found.map(|(snap, created, retained)| (tag, snap, created, retained)))
        })
        .buffered(READ_AT_ONCE)
        .try_collect()
        .await?;
    Ok(read.into_iter().flatten().collect())
}
