use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Tunables for [`crate::Store::open`]. Every limit is named here rather than buried in code.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Shared block cache for all column families.
    pub block_cache_bytes: usize,
    /// SST data block size. 16 KiB instead of RocksDB's 4 KiB: measured 10% less disk for
    /// both sequential and random ids (`settee bench ids`, BENCHMARKS.md) at no insert cost.
    pub block_bytes: usize,
    /// Memtable size per column family before it is flushed to an SST file.
    pub write_buffer_bytes: usize,
    /// The committer stops merging waiting batches into one group beyond this many bytes.
    pub group_commit_bytes_max: usize,
    /// Background flush + compaction threads.
    pub background_jobs: i32,
    /// Separate values of at least `blob_min_bytes` from keys in the `doc` column family
    /// (RocksDB BlobDB), so compaction rewrites small keys instead of whole documents.
    pub doc_blob_files: bool,
    pub blob_min_bytes: u64,
    /// Memory for the row cache of the `doc` column family (hot documents served without
    /// touching RocksDB); 0 turns it off.
    pub row_cache_bytes: usize,
    /// Fault injection for tests: every commit after this many fails (and poisons the store).
    pub fail_commits_after: Option<u64>,
    /// Fault injection for tests: while the flag is set, every write fails as on a full disk
    /// (nothing is written), and succeeds again once it is cleared.
    pub no_space: Option<Arc<AtomicBool>>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            block_cache_bytes: 256 << 20,
            block_bytes: 16 << 10,
            write_buffer_bytes: 64 << 20,
            group_commit_bytes_max: 32 << 20,
            background_jobs: 4,
            doc_blob_files: false,
            blob_min_bytes: 64,
            row_cache_bytes: 256 << 20,
            fail_commits_after: None,
            no_space: None,
        }
    }
}
