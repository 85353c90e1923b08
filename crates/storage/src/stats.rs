//! The store's figures for the node's metrics: what RocksDB says about compaction, memtables
//! and its block cache, read on demand (a scrape), never on the request path.

use rocksdb::statistics::Ticker;

use crate::store::{Cf, Store};

/// One reading; every figure sums all column families.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// `rocksdb.estimate-pending-compaction-bytes`.
    pub compaction_pending_bytes: u64,
    /// `rocksdb.cur-size-all-mem-tables`: active and unflushed immutable memtables.
    pub memtable_bytes: u64,
    pub block_cache_usage_bytes: u64,
    pub block_cache_capacity_bytes: u64,
    /// Block cache lookups since the store opened that found, or did not find, their block.
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    /// `rocksdb.total-sst-files-size`.
    pub sst_files_bytes: u64,
    /// Flushes and compactions running now (`rocksdb.num-running-flushes` and
    /// `rocksdb.num-running-compactions`, database-wide): zero when the store is at rest.
    pub background_jobs_running: u64,
}

impl Store {
    pub fn stats(&self) -> StoreStats {
        let sum = |name: &str| -> u64 {
            Cf::ALL
                .iter()
                .filter_map(|cf| self.property(*cf, name))
                .sum()
        };
        let inner = &self.inner;
        StoreStats {
            compaction_pending_bytes: sum("rocksdb.estimate-pending-compaction-bytes"),
            memtable_bytes: sum("rocksdb.cur-size-all-mem-tables"),
            block_cache_usage_bytes: inner.block_cache.get_usage() as u64,
            block_cache_capacity_bytes: self
                .property(Cf::Doc, "rocksdb.block-cache-capacity")
                .unwrap_or(0),
            block_cache_hits: inner.db_options.get_ticker_count(Ticker::BlockCacheHit),
            block_cache_misses: inner.db_options.get_ticker_count(Ticker::BlockCacheMiss),
            sst_files_bytes: sum("rocksdb.total-sst-files-size"),
            // Database-wide figures: read through one column family, not summed.
            background_jobs_running: [
                "rocksdb.num-running-flushes",
                "rocksdb.num-running-compactions",
            ]
            .iter()
            .filter_map(|name| self.property(Cf::Doc, name))
            .sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Batch, Cf, Store, StoreOptions};

    #[tokio::test]
    async fn figures_move_with_writes_and_reads() {
        let dir = tempfile::tempdir().expect("temp dir");
        let options = StoreOptions {
            row_cache_bytes: 0,
            ..StoreOptions::default()
        };
        let store = Store::open(dir.path(), &options).expect("open");
        let empty = store.stats();
        assert_eq!(
            empty.block_cache_capacity_bytes,
            options.block_cache_bytes as u64
        );
        let mut batch = Batch::new();
        for index in 0..1_000u32 {
            batch.put(Cf::Doc, format!("key{index:05}"), vec![7u8; 100]);
        }
        store.commit(batch).await.expect("commit");
        let written = store.stats();
        assert!(written.memtable_bytes > empty.memtable_bytes);
        store.flush().expect("flush");
        let flushed = store.stats();
        assert!(flushed.sst_files_bytes > 0);
        for index in (0..1_000u32).step_by(100) {
            store
                .get(Cf::Doc, format!("key{index:05}").as_bytes())
                .expect("read");
        }
        let read = store.stats();
        assert!(
            read.block_cache_hits + read.block_cache_misses > 0,
            "{read:?}"
        );
        assert!(read.block_cache_usage_bytes > 0);
    }
}
