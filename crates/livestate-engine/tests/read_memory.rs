//! What a whole-file read holds on the heap, with and without livestate's read layer. Its own
//! test binary: its counting allocator (tests/reads) sees every allocation in the process, so
//! nothing else may run beside it.

mod reads;

use reads::{held_by_kept_reads, op_path, paimon_operator};

#[global_allocator]
static GLOBAL: reads::Counting = reads::Counting;

const READS: usize = 20;
const MIB: i64 = 1024 * 1024;

#[tokio::test(flavor = "current_thread")]
async fn a_kept_whole_file_read_holds_the_file_not_a_two_mebibyte_buffer() {
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
