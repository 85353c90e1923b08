use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Default [`StoreOptions::wal_bytes_max`]: also the step the live write-ahead log is reserved
/// in, so what an idle database shows in `du` beyond its data. Half the memtable: the `doc`
/// family then flushes at about 20 MB of documents instead of 64 (more, smaller L0 files)
/// while `du` carries at most ~32 MB of log instead of the 70 MB step and the log a rarely
/// written family kept alive (40 MB after 100,000 documents and a compaction, up to 3.5 GB).
pub const WAL_BYTES_MAX_DEFAULT: u64 = 32 << 20;

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
    /// Write-ahead log kept at most (RocksDB `max_total_wal_size`): beyond it, the column
    /// families whose memtables still need the oldest log are flushed so it can be deleted.
    /// Unset, RocksDB keeps 4x the memtables of all column families (3.5 GB here), and a
    /// rarely written family (`meta`, `view`) pins every log written since its last flush.
    pub wal_bytes_max: u64,
    /// Let RocksDB reserve file space ahead of appends (`allow_fallocate`). It reserves the
    /// write-ahead log in steps of `min(1.1 x write_buffer_bytes, wal_bytes_max)`, which `du`
    /// counts; without it every group's fsync also commits the file's block allocation, which
    /// measured ~20% fewer PUTs per second with 8 clients (`settee bench http`, ext4).
    pub preallocate_files: bool,
    /// MANIFEST space reserved per step (RocksDB's default is 4 MB, for a file of kilobytes).
    pub manifest_preallocation_bytes: usize,
    /// RocksDB's own diagnostic log (`LOG`): rolled over at this size, this many old ones kept.
    pub info_log_bytes_max: usize,
    pub info_logs_kept: usize,
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
            wal_bytes_max: WAL_BYTES_MAX_DEFAULT,
            preallocate_files: true,
            manifest_preallocation_bytes: 256 << 10,
            info_log_bytes_max: 1 << 20,
            info_logs_kept: 4,
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
