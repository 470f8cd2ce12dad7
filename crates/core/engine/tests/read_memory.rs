//! What a whole-file read holds on the heap, with and without livestate's read layer. Its own
//! test binary: its counting allocator (tests/reads) sees every allocation in the process, so
//! nothing else may run beside it, and its tests take turns.

mod reads;

use reads::{held_after_concurrent_reads, held_by_kept_reads, op_path, paimon_operator};

#[global_allocator]
static GLOBAL: reads::Counting = reads::Counting;

/// The tests of this binary run one at a time: each counts every allocation of the process.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const READS: usize = 20;
const MIB: i64 = 1024 * 1024;

#[tokio::test(flavor = "current_thread")]
async fn a_kept_whole_file_read_holds_the_file_not_a_two_mebibyte_buffer() {
    let _alone = ALONE.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("snapshot-1");
    std::fs::write(&file, vec![b'x'; 1000]).unwrap();
    let path = op_path(&file);

    let plain = paimon_operator();
    let plain_held = held_by_kept_reads(&plain, &path, READS, 1000).await;
    drop(plain);

    let exact = livestate_engine::local_io::operator().unwrap();
    let exact_held = held_by_kept_reads(&exact, &path, READS, 1000).await;

    // Each plain read keeps a slice of a 2 MiB buffer alive (this is what the layer is for; if
    // OpenDAL stops doing it, the layer may be removed).
    assert!(plain_held > READS as i64 * MIB, "plain reads held {plain_held} bytes");
    // Each exact read keeps its 1,000 bytes and the buffer's bookkeeping.
    assert!(exact_held < READS as i64 * 4 * 1024, "exact reads held {exact_held} bytes");
    eprintln!(
        "{READS} kept reads of a 1,000-byte file hold {plain_held} bytes plain, {exact_held} with the layer"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn reads_of_large_files_leave_the_services_buffer_pool_at_its_starting_size() {
    let _alone = ALONE.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data-1.parquet");
    let len = 4 * MIB as usize;
    std::fs::write(&file, vec![b'x'; len]).unwrap();
    let path = op_path(&file);
    // 16 at once: the service pools up to 16 buffers.
    let plain = paimon_operator();
    let plain_held = held_after_concurrent_reads(&plain, &path, 16, len).await;
    let exact = livestate_engine::local_io::operator().unwrap();
    let exact_held = held_after_concurrent_reads(&exact, &path, 16, len).await;

    // OpenDAL reads in 2 MiB pieces, and each pooled buffer keeps the size of the largest piece
    // it served: up to 16 x 2 MiB for as long as the operator lives (what a compaction reading
    // whole data files left behind, growing over a long soak). How many of the 16 reads overlap,
    // and so how many buffers the pool ends with, depends on scheduling: a loaded machine left
    // 10 (about 21 MiB), so the bound asks for more than the layer's worst case, not for all 16.
    assert!(plain_held > 8 * MIB, "plain reads left {plain_held} bytes pooled");
    // Pieces of at most 256 KiB, the size pooled buffers start at: 16 x 256 KiB.
    assert!(exact_held < 5 * MIB, "exact reads left {exact_held} bytes pooled");
    eprintln!("16 concurrent reads of a 4 MiB file leave {plain_held} bytes pooled plain, {exact_held} with the layer");
}
