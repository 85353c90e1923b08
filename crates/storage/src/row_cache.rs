//! The row cache: values of the `doc` column family kept in memory in front of RocksDB.
//!
//! A point read of a key in the memtable walks RocksDB's skiplist (about 16 dependent cache
//! misses for 65k keys; profiled at half the CPU of a KV GET), so hot documents are served from
//! a concurrent hash map instead (quick_cache: sharded, S3-FIFO eviction, bounded in bytes).
//!
//! The cache is never the source of truth and must never be older than RocksDB:
//! - writes go through it: the committer updates the cached value of every `doc` key it wrote
//!   (or forgets it) after the group is written and before any writer is answered;
//! - a read that missed fills it with what it read from RocksDB, but only if no write to the
//!   same stripe of keys was applied meanwhile. Each stripe counts applied writes; the reader
//!   takes the count before its RocksDB read and inserts only if it is unchanged, under the
//!   stripe's mutex, which the committer also holds while it updates the cache.

use bytes::Bytes;
use parking_lot::Mutex;

/// Bytes charged per cached row on top of key and value: quick_cache's entry, the key's
/// `Vec` header and the value's `Bytes` header (approximate; it only has to bound memory).
const ROW_OVERHEAD_BYTES: usize = 80;
/// Stripes of write counters; more stripes mean fewer fills skipped under concurrent writes.
const STRIPES: usize = 1024;
/// Rows at least this large are not cached: they would evict many hot small ones.
pub(crate) const ROW_MAX_BYTES: usize = 1 << 20;

#[derive(Clone)]
struct RowWeight;

impl quick_cache::Weighter<Vec<u8>, Bytes> for RowWeight {
    fn weight(&self, key: &Vec<u8>, value: &Bytes) -> u64 {
        (key.len() + value.len() + ROW_OVERHEAD_BYTES) as u64
    }
}

pub(crate) struct RowCache {
    rows: quick_cache::sync::Cache<Vec<u8>, Bytes, RowWeight>,
    /// Per stripe of keys, how many writes the committer applied to the cache.
    applied: Box<[Mutex<u64>]>,
}

/// Taken by a reader before it reads RocksDB; see [`RowCache::fill`].
pub(crate) struct FillTicket {
    stripe: usize,
    applied: u64,
}

impl RowCache {
    /// `None` when `capacity_bytes` is 0 (the cache is off).
    pub(crate) fn new(capacity_bytes: usize) -> Option<RowCache> {
        if capacity_bytes == 0 {
            return None;
        }
        let estimated_rows = (capacity_bytes / 512).max(64);
        Some(RowCache {
            rows: quick_cache::sync::Cache::with_weighter(
                estimated_rows,
                capacity_bytes as u64,
                RowWeight,
            ),
            applied: (0..STRIPES).map(|_| Mutex::new(0)).collect(),
        })
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<Bytes> {
        self.rows.get(key)
    }

    fn stripe(key: &[u8]) -> usize {
        // FNV-1a: keys are short and this runs only on misses and writes.
        let mut hash: u32 = 0x811c_9dc5;
        for byte in key {
            hash = (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193);
        }
        hash as usize % STRIPES
    }

    pub(crate) fn ticket(&self, key: &[u8]) -> FillTicket {
        let stripe = Self::stripe(key);
        FillTicket {
            stripe,
            applied: *self.applied[stripe].lock(),
        }
    }

    /// Caches `value`, read from RocksDB after `ticket` was taken, unless a write to the
    /// stripe was applied since: then `value` may already be stale.
    pub(crate) fn fill(&self, key: &[u8], ticket: FillTicket, value: &[u8]) {
        if value.len() >= ROW_MAX_BYTES {
            return;
        }
        let applied = self.applied[ticket.stripe].lock();
        if *applied == ticket.applied {
            self.rows
                .insert(key.to_vec(), Bytes::copy_from_slice(value));
        }
    }

    /// A write of `key` is in RocksDB: cache its new value, or forget the key (`None`: deleted,
    /// or the write's outcome is unknown).
    pub(crate) fn written(&self, key: &[u8], value: Option<Bytes>) {
        let mut applied = self.applied[Self::stripe(key)].lock();
        *applied += 1;
        match value {
            Some(value) if value.len() < ROW_MAX_BYTES => self.rows.insert(key.to_vec(), value),
            _ => {
                self.rows.remove(key);
            }
        }
    }

    /// Forgets every key in `[from, to)`.
    pub(crate) fn forget_range(&self, from: &[u8], to: &[u8]) {
        let mut stripes: Vec<_> = self.applied.iter().map(|stripe| stripe.lock()).collect();
        for applied in &mut stripes {
            **applied += 1;
        }
        self.rows
            .retain(|key, _| !(from <= key.as_slice() && key.as_slice() < to));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_capacity_is_off() {
        assert!(RowCache::new(0).is_none());
    }

    #[test]
    fn a_fill_that_raced_a_write_is_dropped() {
        let cache = RowCache::new(1 << 20).expect("on");
        let ticket = cache.ticket(b"k");
        // The committer applies a newer value after the reader read the old one...
        cache.written(b"k", Some(Bytes::from_static(b"new")));
        // ...so the reader's fill must not overwrite it.
        cache.fill(b"k", ticket, b"old");
        assert_eq!(cache.get(b"k").as_deref(), Some(&b"new"[..]));

        let ticket = cache.ticket(b"k");
        cache.written(b"k", None);
        cache.fill(b"k", ticket, b"new");
        assert_eq!(cache.get(b"k"), None);

        let ticket = cache.ticket(b"k");
        cache.fill(b"k", ticket, b"fresh");
        assert_eq!(cache.get(b"k").as_deref(), Some(&b"fresh"[..]));
    }

    #[test]
    fn forget_range_drops_only_the_range_and_blocks_racing_fills() {
        let cache = RowCache::new(1 << 20).expect("on");
        for key in [&b"a1"[..], b"b1", b"b2", b"c1"] {
            cache.written(key, Some(Bytes::copy_from_slice(key)));
        }
        let ticket = cache.ticket(b"b3");
        cache.forget_range(b"b", b"c");
        cache.fill(b"b3", ticket, b"stale");
        assert_eq!(cache.get(b"a1").as_deref(), Some(&b"a1"[..]));
        assert_eq!(cache.get(b"b1"), None);
        assert_eq!(cache.get(b"b2"), None);
        assert_eq!(cache.get(b"b3"), None);
        assert_eq!(cache.get(b"c1").as_deref(), Some(&b"c1"[..]));
    }

    #[test]
    fn huge_rows_are_not_cached() {
        let cache = RowCache::new(64 << 20).expect("on");
        let big = vec![0u8; ROW_MAX_BYTES];
        cache.written(b"big", Some(Bytes::from(big.clone())));
        assert_eq!(cache.get(b"big"), None);
        let ticket = cache.ticket(b"big");
        cache.fill(b"big", ticket, &big);
        assert_eq!(cache.get(b"big"), None);
    }
}
