//! Expiry, tags and orphan cleanup on a table that keeps being written and compacted.

mod common;

use std::time::Duration;

use common::harness;
use livestate_lsm::CompactMode;
use paimon::spec::RowKind;

const OPTIONS: [(&str, &str); 4] = [
    ("snapshot.num-retained.min", "5"),
    ("snapshot.time-retained", "1 ms"),
    ("snapshot.expire.limit", "40"),
    ("num-sorted-run.compaction-trigger", "4"),
];

fn now() -> i64 {
    chrono::Utc::now().timestamp_millis() + 5
}

fn on_disk(h: &common::Harness) -> Vec<String> {
    walk(&h.dir.path().join("wh/db.db/t"))
        .iter()
        .filter(|p| p.contains("/bucket-"))
        .map(|p| p.rsplit('/').next().unwrap().to_string())
        .collect()
}

async fn names(h: &common::Harness, v: livestate_lsm::Version) -> Vec<String> {
    let files = livestate_lsm::live_files(&h.table, "db.t", &v).await.unwrap();
    files.into_iter().flat_map(|b| b.files.into_iter().map(|f| f.file_name)).collect()
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p.to_string_lossy().into_owned());
        }
    }
    out
}

#[tokio::test]
async fn a_tag_reads_the_same_after_500_commits_compactions_and_expiry() {
    let mut h = harness(&OPTIONS).await;
    for i in 0..40i64 {
        h.commit(&[(RowKind::Insert, (i % 30, Some(i), Some(format!("v{i}"))))]).await;
    }
    let tagged = h.read_all().await;
    let latest = h.table.snapshot_manager().get_latest_snapshot().await.unwrap().unwrap();
    h.table.tag_manager().create("audit", &latest).await.unwrap();

    let mut compactions = 0;
    let mut expired = 0;
    for i in 0..500i64 {
        let k = (i * 7) % 30;
        let row = if i % 9 == 0 {
            (RowKind::Delete, (k, None, None))
        } else {
            (RowKind::Insert, (k, Some(1000 + i), None))
        };
        h.commit(&[row]).await;
        let r = h.maintainer.compact(CompactMode::Auto, |_, _| {}).await.unwrap();
        compactions += usize::from(r.snapshot_id.is_some());
        if i % 50 == 49 {
            expired += h.maintainer.expire(now(), |_, _| {}).await.unwrap().snapshots;
        }
        let health = h.maintainer.health().await.unwrap();
        assert!(health.buckets.iter().all(|b| b.sorted_runs <= 8), "{health:?}");
    }
    assert!(compactions > 50, "only {compactions} compactions");
    assert!(expired > 400, "only {expired} snapshots expired");
    assert_eq!(h.read_tag("audit").await, tagged, "the tag no longer reads as it did");

    // Releasing the tag lets the next expiry delete what only the tag held.
    let tag_files = names(&h, livestate_lsm::Version::Tag("audit".into())).await;
    assert!(tag_files.iter().all(|f| on_disk(&h).contains(f)));
    let current = h.read_all().await;
    let report = h.maintainer.delete_tag("audit").await.unwrap();
    assert!(report.data_files > 0, "{report:?}");
    h.commit(&[(RowKind::Insert, (0, Some(1), None))]).await;
    h.maintainer.compact(CompactMode::Full, |_, _| {}).await.unwrap();
    for _ in 0..6 {
        h.commit(&[(RowKind::Insert, (0, Some(1), None))]).await;
    }
    let report = h.maintainer.expire(now(), |_, _| {}).await.unwrap();
    assert!(report.data_files > 0, "{report:?}");
    let live = names(
        &h,
        livestate_lsm::Version::Snapshot(h.maintainer.health().await.unwrap().latest_snapshot.unwrap()),
    )
    .await;
    let disk = on_disk(&h);
    for f in &tag_files {
        assert_eq!(disk.contains(f), live.contains(f), "{f}: only the released tag referenced it");
    }
    let mut expected = current;
    expected.insert(0, (Some(1), expected.get(&0).and_then(|r| r.1.clone())));
    assert_eq!(h.read_all().await, expected);
}

#[tokio::test]
async fn a_tag_past_its_retention_expires_with_its_files() {
    let mut h = harness(&OPTIONS).await;
    h.commit(&[(RowKind::Insert, (1, Some(1), None))]).await;
    let s = h.table.snapshot_manager().get_latest_snapshot().await.unwrap().unwrap();
    h.table.tag_manager().create_with_retention("short", &s, Some("1 ms")).await.unwrap();
    h.table.tag_manager().create_with_retention("long", &s, Some("1 d")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let report = h.maintainer.expire(now(), |_, _| {}).await.unwrap();
    assert_eq!(report.tags, vec!["short".to_string()]);
    let names = h.table.tag_manager().list_all_names().await.unwrap();
    assert_eq!(names, vec!["long".to_string()]);
}

#[tokio::test]
async fn expiry_keeps_the_retained_snapshots_and_moves_the_earliest_hint() {
    let mut h = harness(&OPTIONS).await;
    for i in 0..30 {
        h.commit(&[(RowKind::Insert, (i, Some(i), None))]).await;
    }
    let expected = h.read_all().await;
    let report = h.maintainer.expire(now(), |_, _| {}).await.unwrap();
    assert_eq!(report.snapshots, 25);
    assert_eq!(report.earliest, Some(26));
    let sm = h.table.snapshot_manager();
    assert_eq!(sm.earliest_snapshot_id().await.unwrap(), Some(26));
    let hint = std::fs::read_to_string(h.dir.path().join("wh/db.db/t/snapshot/EARLIEST")).unwrap();
    assert_eq!(hint.trim(), "26");
    assert_eq!(h.read_all().await, expected);
    // Nothing to do the second time.
    assert_eq!(h.maintainer.expire(now(), |_, _| {}).await.unwrap().snapshots, 0);
}

#[tokio::test]
async fn orphans_outside_the_safety_window_are_removed_and_young_ones_kept() {
    let mut h = harness(&OPTIONS).await;
    h.commit(&[(RowKind::Insert, (1, Some(1), None))]).await;
    let expected = h.read_all().await;
    let table_dir = h.dir.path().join("wh/db.db/t");
    let orphan_data = table_dir.join("bucket-0/data-orphan-0.parquet");
    let orphan_manifest = table_dir.join("manifest/manifest-orphan-0");
    let orphan_tmp = table_dir.join("snapshot/snapshot-9.tmp-x");
    for p in [&orphan_data, &orphan_manifest, &orphan_tmp] {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"left by a crash").unwrap();
    }
    let kept = h.maintainer.remove_orphans(Duration::from_secs(3600), now()).await.unwrap();
    assert_eq!(kept.files, 0);
    assert!(orphan_data.exists());
    let removed = h.maintainer.remove_orphans(Duration::ZERO, now() + 1000).await.unwrap();
    assert_eq!(removed.files, 3, "{removed:?}");
    assert!(!orphan_data.exists() && !orphan_manifest.exists() && !orphan_tmp.exists());
    assert_eq!(h.read_all().await, expected);
}

#[tokio::test]
async fn a_tag_file_cut_by_a_crash_is_removed_at_the_sweep_and_the_whole_tags_kept() {
    let mut h = harness(&OPTIONS).await;
    h.commit(&[(RowKind::Insert, (1, Some(1), None))]).await;
    let s = h.table.snapshot_manager().get_latest_snapshot().await.unwrap().unwrap();
    h.table.tag_manager().create("whole", &s).await.unwrap();
    // What a kill between a tag's create and its write left: an empty file, and a temporary one.
    let tag_dir = h.dir.path().join("wh/db.db/t/tag");
    let cut = tag_dir.join("tag-proposal-p1-s1");
    let tmp = tag_dir.join(".tag-proposal-p2-s1.5f0c.tmp");
    std::fs::write(&cut, b"").unwrap();
    std::fs::write(&tmp, b"{\"id\":").unwrap();
    assert!(h.maintainer.health().await.is_err(), "the cut tag does not read");
    let removed = h.maintainer.remove_orphans(Duration::ZERO, now() + 1000).await.unwrap();
    assert_eq!(removed.files, 2, "{removed:?}");
    assert!(!cut.exists() && !tmp.exists());
    assert_eq!(h.table.tag_manager().list_all_names().await.unwrap(), vec!["whole".to_string()]);
    assert_eq!(h.read_tag("whole").await, h.read_all().await);
}

#[tokio::test]
async fn compaction_commits_a_compact_snapshot_that_swaps_files() {
    let mut h = harness(&[("num-sorted-run.compaction-trigger", "3")]).await;
    for i in 0..6 {
        h.commit(&[(RowKind::Insert, (i % 2, Some(i), None))]).await;
    }
    let expected = h.read_all().await;
    let report = h.maintainer.compact(CompactMode::Full, |_, _| {}).await.unwrap();
    let id = report.snapshot_id.expect("a snapshot");
    let s = h.table.snapshot_manager().get_snapshot(id).await.unwrap();
    assert_eq!(s.commit_kind().to_string(), "COMPACT");
    assert_eq!(s.commit_user(), livestate_lsm::COMPACT_USER);
    assert_eq!(report.files_in, 6);
    assert_eq!(s.total_record_count(), Some(2));
    assert_eq!(h.read_default().await, expected);
    let health = h.maintainer.health().await.unwrap();
    let levels: Vec<_> = health.buckets.iter().map(|b| b.files_per_level.clone()).collect();
    // Trigger 3 means four levels; everything sits in the top one.
    assert!(levels.iter().all(|l| l.len() == 4 && l[3] == 1 && l.iter().sum::<usize>() == 1), "{levels:?}");
    // A second full compaction has nothing to do.
    assert_eq!(h.maintainer.compact(CompactMode::Full, |_, _| {}).await.unwrap().snapshot_id, None);
}

/// Twice as many tags as are read at once, on 5 snapshots, every third one short-lived (1 ms):
/// each tag's name, snapshot and whether it is short-lived, in creation order.
async fn many_tags(h: &mut common::Harness) -> Vec<(String, i64, bool)> {
    let tm = h.table.tag_manager();
    let mut made = Vec::new();
    for i in 0..(2 * livestate_lsm::TAGS_READ_AT_ONCE + 3) {
        if i % 4 == 0 {
            h.commit(&[(RowKind::Insert, (i as i64, Some(1), None))]).await;
        }
        let s = h.table.snapshot_manager().get_latest_snapshot().await.unwrap().unwrap();
        let name = format!("pin-{i:03}");
        let retention = if i % 3 == 0 { "1 ms" } else { "1 d" };
        tm.create_with_retention(&name, &s, Some(retention)).await.unwrap();
        made.push((name, s.id(), i % 3 == 0));
    }
    made
}

#[tokio::test]
async fn health_lists_every_one_of_many_tags_read_a_few_at_a_time() {
    let mut h = harness(&OPTIONS).await;
    let expected = many_tags(&mut h).await;
    let health = h.maintainer.health().await.unwrap();
    let listed: Vec<(String, i64)> = health.tags.iter().map(|t| (t.name.clone(), t.snapshot_id)).collect();
    assert_eq!(listed, expected.iter().map(|(n, s, _)| (n.clone(), *s)).collect::<Vec<_>>());
}

#[tokio::test]
async fn expiry_removes_every_expired_one_of_many_tags_read_a_few_at_a_time() {
    let mut h = harness(&OPTIONS).await;
    let expected = many_tags(&mut h).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let report = h.maintainer.expire(now(), |_, _| {}).await.unwrap();
    let short: Vec<String> =
        expected.iter().filter(|(_, _, short)| *short).map(|(n, _, _)| n.clone()).collect();
    assert_eq!(report.tags, short);
    let left = h.table.tag_manager().list_all_names().await.unwrap();
    assert_eq!(
        left,
        expected.iter().filter(|(_, _, short)| !short).map(|(n, _, _)| n.clone()).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_tag_cache_reads_each_tag_file_once_and_follows_creation_deletion_and_expiry() {
    let mut h = harness(&OPTIONS).await;
    let cached = h.maintainer.clone().with_tag_cache();
    let tm = h.table.tag_manager();
    let mut pins = Vec::new();
    for i in 0..3i64 {
        h.commit(&[(RowKind::Insert, (i, Some(i), None))]).await;
        let s = h.table.snapshot_manager().get_latest_snapshot().await.unwrap().unwrap();
        let retention = if i == 0 { "1 ms" } else { "1 d" };
        tm.create_with_retention(&format!("pin-{i}"), &s, Some(retention)).await.unwrap();
        pins.push((format!("pin-{i}"), s.id()));
    }
    let listed = |h: &livestate_lsm::TableHealth| {
        h.tags.iter().map(|t| (t.name.clone(), t.snapshot_id)).collect::<Vec<_>>()
    };
    assert_eq!(listed(&cached.health().await.unwrap()), pins);
    assert_eq!(cached.cached_tags(), 3);

    // A tag file read once is not read again: with pin-1's file garbled on disk, the cached
    // maintainer still lists it, while one without a cache cannot read it.
    let pin_1 = h.dir.path().join("wh/db.db/t/tag/tag-pin-1");
    let good = std::fs::read(&pin_1).unwrap();
    std::fs::write(&pin_1, b"{not a tag").unwrap();
    assert_eq!(listed(&cached.health().await.unwrap()), pins);
    let err = h.maintainer.health().await.unwrap_err().to_string();
    assert!(err.contains("pin-1"), "{err}");
    std::fs::write(&pin_1, good).unwrap();

    // A new tag is read; one deleted by the maintainer is forgotten; an expired one too.
    h.commit(&[(RowKind::Insert, (9, Some(9), None))]).await;
    let s = h.table.snapshot_manager().get_latest_snapshot().await.unwrap().unwrap();
    tm.create_with_retention("pin-3", &s, Some("1 d")).await.unwrap();
    cached.delete_tag("pin-2").await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let report = cached.expire(now(), |_, _| {}).await.unwrap();
    assert_eq!(report.tags, vec!["pin-0".to_string()]);
    assert_eq!(listed(&cached.health().await.unwrap()), vec![pins[1].clone(), ("pin-3".to_string(), s.id())]);
    assert_eq!(cached.cached_tags(), 2);
    // A tag deleted by another process is dropped at the next listing.
    tm.delete("pin-3").await.unwrap();
    assert_eq!(listed(&cached.health().await.unwrap()), vec![pins[1].clone()]);
    assert_eq!(cached.cached_tags(), 1);
}

#[tokio::test]
async fn a_tag_file_met_while_it_is_written_is_read_again_and_one_that_stays_damaged_is_named() {
    let mut h = harness(&OPTIONS).await;
    h.commit(&[(RowKind::Insert, (1, Some(1), None))]).await;
    let s = h.table.snapshot_manager().get_latest_snapshot().await.unwrap().unwrap();
    h.table.tag_manager().create("pin-a", &s).await.unwrap();
    let path = h.dir.path().join("wh/db.db/t/tag/tag-pin-a");
    let good = std::fs::read(&path).unwrap();

    // The paimon crate writes a tag in place: a listing can find the file empty for a moment.
    std::fs::write(&path, b"").unwrap();
    let (p, g) = (path.clone(), good.clone());
    let writer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(60)).await;
        std::fs::write(&p, g).unwrap();
    });
    let health = h.maintainer.health().await.unwrap();
    writer.await.unwrap();
    let tags: Vec<(String, i64)> = health.tags.iter().map(|t| (t.name.clone(), t.snapshot_id)).collect();
    assert_eq!(tags, vec![("pin-a".to_string(), s.id())]);

    // One that stays unreadable is reported by name.
    std::fs::write(&path, &good[..good.len() / 2]).unwrap();
    let err = h.maintainer.health().await.unwrap_err().to_string();
    assert!(err.contains("pin-a") && err.contains("not a Paimon tag"), "{err}");
}

#[tokio::test]
async fn pinning_a_snapshot_that_exists_tags_it_and_one_that_does_not_is_refused_with_what_is_kept() {
    let mut h = harness(&[]).await;
    let row = |k: i64| (RowKind::Insert, (k, Some(k), Some(format!("v{k}"))));
    h.commit(&[row(1)]).await;
    h.commit(&[row(2)]).await;

    let pinned = h.maintainer.pin("proposal-a", 1, Some("400 d")).await.unwrap();
    assert_eq!(pinned.id(), 1);
    assert_eq!(h.read_tag("proposal-a").await.len(), 1, "the tag reads snapshot 1");
    // Again under the same name: a retry, answered with the same snapshot.
    assert_eq!(h.maintainer.pin("proposal-a", 1, Some("400 d")).await.unwrap().id(), 1);

    let e = h.maintainer.pin("proposal-b", 7, None).await.unwrap_err().to_string();
    assert!(e.contains("there is no snapshot 7 (snapshots kept: 1..=2)"), "{e}");
    let e = h.maintainer.pin("proposal-a", 2, None).await.unwrap_err().to_string();
    assert!(e.contains("tag `proposal-a` already names snapshot 1"), "{e}");
}
