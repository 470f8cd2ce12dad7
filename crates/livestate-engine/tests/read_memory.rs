//! What a whole-file read holds on the heap, with and without livestate's read layer. Its own
//! test binary: its counting allocator (tests/counting) sees every allocation in the process, so
//! nothing else may run beside it.

use opendal::{Buffer, Operator};
use opendal_service_fs::FsConfig;

mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const READS: usize = 20;
const MIB: i64 = 1024 * 1024;

/// Heap held by `READS` kept results of whole-file reads of `path` through `op`, after one read
/// has filled the filesystem service's buffer pool.
async fn held_by_reads(op: &Operator, path: &str) -> i64 {
    drop(op.read(path).await.unwrap());
    let before = counting::live();
    let mut held: Vec<Buffer> = Vec::with_capacity(READS);
    for _ in 0..READS {
        held.push(op.read(path).await.unwrap());
    }
    assert!(held.iter().all(|b| b.len() == 1000));
    counting::live() - before
}

#[tokio::test(flavor = "current_thread")]
async fn a_kept_whole_file_read_holds_the_file_not_a_two_mebibyte_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("snapshot-1");
    std::fs::write(&file, vec![b'x'; 1000]).unwrap();
    let path = file.to_string_lossy().trim_start_matches('/').to_string();

    // The filesystem operator as the `paimon` crate builds it.
    let mut cfg = FsConfig::default();
    cfg.root = Some("/".to_string());
    let plain = Operator::from_config(cfg).unwrap();
    let plain_held = held_by_reads(&plain, &path).await;
    drop(plain);

    let exact = livestate_engine::local_io::operator().unwrap();
    let exact_held = held_by_reads(&exact, &path).await;

    // Each plain read keeps a slice of a 2 MiB buffer alive (this is what the layer is for; if
    // OpenDAL stops doing it, the layer may be removed).
    assert!(plain_held > READS as i64 * MIB, "plain reads held {plain_held} bytes");
    // Each exact read keeps its 1,000 bytes and the buffer's bookkeeping.
    assert!(exact_held < READS as i64 * 4 * 1024, "exact reads held {exact_held} bytes");
    eprintln!(
        "{READS} kept reads of a 1,000-byte file hold {plain_held} bytes plain, {exact_held} with the layer"
    );
}
