//! The data files a snapshot or tag sees, grouped by bucket.

use std::collections::{BTreeMap, HashMap};

use paimon::spec::{BinaryRow, DataFileMeta};
use paimon::Table;

use crate::error::{paimon_err, Result};

/// The live data files of one bucket.
#[derive(Debug, Clone)]
pub struct BucketFiles {
    pub partition: BinaryRow,
    pub bucket: i32,
    pub total_buckets: i32,
    pub bucket_path: String,
    pub files: Vec<DataFileMeta>,
}

/// Which version of a table to look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Version {
    Snapshot(i64),
    Tag(String),
}

/// Every live data file of `version`, grouped by (partition, bucket) in a stable order.
///
/// Uses Paimon's own planning (including level-0 files, which first-row tables otherwise hide),
/// so the answer is exactly what any Paimon reader sees.
///
/// # Errors
/// The version does not exist or its manifests cannot be read.
pub async fn live_files(table: &Table, name: &str, version: &Version) -> Result<Vec<BucketFiles>> {
    let key = match version {
        Version::Snapshot(id) => ("scan.snapshot-id".to_string(), id.to_string()),
        Version::Tag(tag) => ("scan.tag-name".to_string(), tag.clone()),
    };
    let travelled = table
        .copy_with_time_travel_strict(HashMap::from([key]))
        .await
        .map_err(paimon_err(name, "open version"))?;
    let rb = travelled.new_read_builder();
    let plan = rb.new_scan().with_scan_all_files().plan().await.map_err(paimon_err(name, "plan"))?;
    let mut by_bucket: BTreeMap<(Vec<u8>, i32), BucketFiles> = BTreeMap::new();
    for split in plan.splits() {
        let entry = by_bucket
            .entry((split.partition().to_serialized_bytes(), split.bucket()))
            .or_insert_with(|| BucketFiles {
                partition: split.partition().clone(),
                bucket: split.bucket(),
                total_buckets: split.total_buckets(),
                bucket_path: split.bucket_path().to_string(),
                files: Vec::new(),
            });
        entry.files.extend(split.data_files().iter().cloned());
    }
    Ok(by_bucket.into_values().collect())
}
