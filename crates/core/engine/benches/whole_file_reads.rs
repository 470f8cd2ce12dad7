//! Whole-file reads as the `paimon` crate makes them (an unbounded OpenDAL read of a snapshot,
//! manifest list or manifest), through the filesystem operator the crate builds and through
//! livestate's (`livestate_engine::local_io`), side by side in one run.
//!
//! ```text
//! cargo bench --workspace --bench whole_file_reads -- --reads 5000
//! ```
//!
//! For each file size: time per read (median and mean of `--reads` reads, one at a time; a
//! tenth as many of the 8 MiB data file, which compaction reads whole), and the heap held by 100
//! more results kept (10 of the data file), the bytes a caller holding them pins. Then the heap
//! each operator still holds after 16 reads of the data file at once, their results dropped: the
//! filesystem service's buffer pool.

use std::time::Instant;

use opendal::Operator;

#[path = "../tests/reads/mod.rs"]
mod reads;

#[global_allocator]
static GLOBAL: reads::Counting = reads::Counting;

const KEPT: usize = 100;
const MIB: usize = 1024 * 1024;

fn reads_flag() -> usize {
    let v: Vec<String> = std::env::args().collect();
    v.iter()
        .position(|a| a == "--reads")
        .and_then(|i| v.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000)
}

struct Figures {
    median_us: f64,
    mean_us: f64,
    kept_bytes: i64,
}

async fn measure(op: &Operator, path: &str, len: usize, reads: usize, kept: usize) -> Figures {
    let mut times = Vec::with_capacity(reads);
    for _ in 0..reads {
        let t = Instant::now();
        let b = op.read(path).await.unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e6);
        drop(b);
    }
    let mean_us = times.iter().sum::<f64>() / times.len() as f64;
    times.sort_by(f64::total_cmp);
    let median_us = times[times.len() / 2];
    let kept_bytes = reads::held_by_kept_reads(op, path, kept, len).await;
    Figures { median_us, mean_us, kept_bytes }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let reads = reads_flag();
    let dir = tempfile::tempdir().unwrap();
    let plain = reads::paimon_operator();
    let exact = livestate_engine::local_io::operator().unwrap();
    println!("| file | reads | per read, plain: median / mean, µs | livestate's: median / mean, µs | time ratio (median) | kept results | they hold, plain | livestate's |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let data_file = 8 * MIB;
    for (what, len, reads, kept) in [
        ("snapshot, 1 KiB", 1024, reads, KEPT),
        ("manifest list, 16 KiB", 16 * 1024, reads, KEPT),
        ("manifest, 256 KiB", 256 * 1024, reads, KEPT),
        ("data file, 8 MiB", data_file, (reads / 10).max(1), 10),
    ] {
        let file = dir.path().join(format!("f{len}"));
        std::fs::write(&file, vec![b'x'; len]).unwrap();
        let path = reads::op_path(&file);
        let p = measure(&plain, &path, len, reads, kept).await;
        let e = measure(&exact, &path, len, reads, kept).await;
        println!(
            "| {what} | {reads} | {:.1} / {:.1} | {:.1} / {:.1} | {:.2}× | {kept} | {:.1} MiB | {:.2} MiB |",
            p.median_us,
            p.mean_us,
            e.median_us,
            e.mean_us,
            p.median_us / e.median_us,
            p.kept_bytes as f64 / 1048576.0,
            e.kept_bytes as f64 / 1048576.0
        );
    }
    // Fresh operators, so that only these reads fill their pools.
    let path = reads::op_path(&dir.path().join(format!("f{data_file}")));
    let plain_pool =
        reads::held_after_concurrent_reads(&reads::paimon_operator(), &path, 16, data_file).await;
    let exact_pool = reads::held_after_concurrent_reads(
        &livestate_engine::local_io::operator().unwrap(),
        &path,
        16,
        data_file,
    )
    .await;
    println!();
    println!("| after 16 reads of the data file at once, results dropped | plain | livestate's |");
    println!("|---|---:|---:|");
    println!(
        "| heap the operator still holds (its buffer pool) | {:.1} MiB | {:.2} MiB |",
        plain_pool as f64 / 1048576.0,
        exact_pool as f64 / 1048576.0
    );
}
