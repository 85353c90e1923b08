use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rocksdb::{
    BlockBasedOptions, BottommostLevelCompaction, Cache, ColumnFamily, ColumnFamilyDescriptor,
    CompactOptions, DBCompressionType, Direction, IteratorMode, Options, ReadOptions, DB,
};
use tokio::sync::oneshot;

use crate::batch::Batch;
use crate::committer::{self, Committer, Request};
use crate::error::StoreError;
use crate::health::{Health, StoreHealth};
use crate::options::StoreOptions;
use crate::row_cache::RowCache;

/// The column families; what each holds is specified in `docs/format/keys.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cf {
    Doc,
    Seq,
    Local,
    Att,
    Exp,
    Meta,
    /// View indexes (`docs/format/views.md`), written by `settee-views` without fsync.
    View,
}

impl Cf {
    pub const ALL: [Cf; 7] = [
        Cf::Doc,
        Cf::Seq,
        Cf::Local,
        Cf::Att,
        Cf::Exp,
        Cf::Meta,
        Cf::View,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Cf::Doc => "doc",
            Cf::Seq => "seq",
            Cf::Local => "local",
            Cf::Att => "att",
            Cf::Exp => "exp",
            Cf::Meta => "meta",
            Cf::View => "view",
        }
    }
}

/// A key and its value as read from a scan.
pub type Entry = (Box<[u8]>, Box<[u8]>);

/// Entries of a range [`Store::range_bytes`] counts in memtables at most: it answers
/// `GET /db`, which must stay cheap while a bulk load fills a memtable.
const UNFLUSHED_ENTRIES_MAX: usize = 10_000;

/// What a key range of one column family takes on disk (a database's `sizes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RangeBytes {
    /// In SST files, compressed, live entries and overwritten or deleted ones alike (RocksDB's
    /// approximation).
    pub files: u64,
    /// The live part of `files`: `files` scaled by the column family's share of live data
    /// (`rocksdb.estimate-live-data-size` over its SST bytes); never more than `files`.
    pub files_live: u64,
    /// Keys and values not flushed yet (in memtables, and on disk in the write-ahead log),
    /// uncompressed, each key's newest version. Beyond [`UNFLUSHED_ENTRIES_MAX`] entries, the
    /// size of those counted scaled to the column family's memtable entries (every range's).
    pub unflushed: u64,
    /// How many entries `unflushed` holds (scaled the same way).
    pub unflushed_entries: u64,
}

/// What RocksDB stores with every entry besides its key and value, in the write-ahead log
/// and the memtable alike: the 8-byte internal-key trailer (sequence number and type).
pub const ENTRY_OVERHEAD: u64 = 8;

impl RangeBytes {
    /// CouchDB's `sizes.file`: SST bytes, and unflushed entries as the log holds them.
    pub fn file(&self) -> u64 {
        self.files + self.unflushed + self.unflushed_entries * ENTRY_OVERHEAD
    }

    /// CouchDB's `sizes.active`: the live data in `file()`, without RocksDB's own bytes (index
    /// and filter blocks, entry trailers). Never more than `file()`.
    pub fn active(&self) -> u64 {
        (self.files_live + self.unflushed).min(self.file())
    }
}

/// How many batches were committed in how many fsynced groups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitStats {
    pub batches: u64,
    pub groups: u64,
}

pub(crate) struct Inner {
    pub db: DB,
    pub health: Health,
    pub fail_commits_after: Option<u64>,
    /// See [`StoreOptions::no_space`].
    no_space: Option<Arc<AtomicBool>>,
    /// Values of the `doc` column family in memory; `None` when turned off.
    pub row_cache: Option<RowCache>,
    /// The shared block cache and the options the database was opened with, which hold its
    /// statistics (block cache hits and misses): read by `stats.rs`.
    pub block_cache: Cache,
    pub db_options: Options,
}

impl Inner {
    pub fn handle(&self, cf: Cf) -> &ColumnFamily {
        // `open` verified that every column family exists, so this cannot fail afterwards.
        self.db
            .cf_handle(cf.name())
            .expect("column family verified at open")
    }

    /// Whether a test pretends the disk is full.
    pub fn no_space_injected(&self) -> bool {
        self.no_space
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Acquire))
    }
}

/// The node's single RocksDB instance plus its group committer. Cheap to share behind an `Arc`.
pub struct Store {
    pub(crate) inner: Arc<Inner>,
    committer: Committer,
}

impl Store {
    pub fn open(path: &Path, options: &StoreOptions) -> Result<Store, StoreError> {
        std::fs::create_dir_all(path).map_err(|source| StoreError::DataDir {
            path: path.to_owned(),
            source,
        })?;
        let cache = Cache::new_lru_cache(options.block_cache_bytes);
        // rust-rocksdb has no setter for `allow_fallocate`; RocksDB's option string has.
        let mut db_options = Options::default()
            .get_options_from_string(format!("allow_fallocate={}", options.preallocate_files))?;
        db_options.create_if_missing(true);
        db_options.create_missing_column_families(true);
        db_options.set_max_background_jobs(options.background_jobs);
        db_options.set_bytes_per_sync(1 << 20);
        db_options.set_max_total_wal_size(options.wal_bytes_max);
        db_options.set_manifest_preallocation_size(options.manifest_preallocation_bytes);
        db_options.set_max_log_file_size(options.info_log_bytes_max);
        db_options.set_keep_log_file_num(options.info_logs_kept);
        // Tickers only (block cache hits and misses for the metrics): RocksDB counts them in
        // per-core slots; the histograms and timers, which cost on every operation, stay off.
        db_options.enable_statistics();
        db_options.set_statistics_level(rocksdb::statistics::StatsLevel::ExceptHistogramOrTimers);
        let descriptors = Cf::ALL
            .iter()
            .map(|cf| ColumnFamilyDescriptor::new(cf.name(), cf_options(*cf, options, &cache)))
            .collect::<Vec<_>>();
        let db = DB::open_cf_descriptors(&db_options, path, descriptors)?;
        for cf in Cf::ALL {
            if db.cf_handle(cf.name()).is_none() {
                return Err(StoreError::Poisoned(format!(
                    "column family {} missing after open",
                    cf.name()
                )));
            }
        }
        let inner = Arc::new(Inner {
            db,
            health: Health::new(),
            fail_commits_after: options.fail_commits_after,
            no_space: options.no_space.clone(),
            row_cache: RowCache::new(options.row_cache_bytes),
            block_cache: cache,
            db_options,
        });
        let committer =
            committer::start(inner.clone(), options.group_commit_bytes_max).map_err(|source| {
                StoreError::DataDir {
                    path: path.to_owned(),
                    source,
                }
            })?;
        Ok(Store { inner, committer })
    }

    pub fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.get_with(cf, key, <[u8]>::to_vec)
    }

    /// A point read that lends the value to `read` instead of copying it out: from the row
    /// cache for the `doc` column family when it holds the key, else from RocksDB with the
    /// block cache's bytes pinned while `read` runs (and then into the row cache).
    pub fn get_with<R>(
        &self,
        cf: Cf,
        key: &[u8],
        read: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, StoreError> {
        let cache = match (&self.inner.row_cache, cf) {
            (Some(cache), Cf::Doc) => cache,
            _ => {
                return Ok(self
                    .inner
                    .db
                    .get_pinned_cf(self.inner.handle(cf), key)?
                    .map(|value| read(&value)))
            }
        };
        if let Some(value) = cache.get(key) {
            return Ok(Some(read(&value)));
        }
        let ticket = cache.ticket(key);
        Ok(self
            .inner
            .db
            .get_pinned_cf(self.inner.handle(cf), key)?
            .map(|value| {
                cache.fill(key, ticket, &value);
                read(&value)
            }))
    }

    /// Point reads of many keys in one call (sorted internally by RocksDB).
    pub fn multi_get(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let handle = self.inner.handle(cf);
        self.inner
            .db
            .multi_get_cf(keys.iter().map(|key| (handle, key.as_slice())))
            .into_iter()
            .map(|result| result.map_err(StoreError::from))
            .collect()
    }

    /// Iterates `[lower, upper)` in key order, or in reverse order when `reverse` is set.
    pub fn scan<'a>(
        &'a self,
        cf: Cf,
        lower: &[u8],
        upper: &[u8],
        reverse: bool,
    ) -> impl Iterator<Item = Result<Entry, StoreError>> + 'a {
        let mut read_options = ReadOptions::default();
        read_options.set_iterate_lower_bound(lower.to_vec());
        read_options.set_iterate_upper_bound(upper.to_vec());
        let mode = if reverse {
            IteratorMode::End
        } else {
            IteratorMode::From(lower, Direction::Forward)
        };
        self.inner
            .db
            .iterator_cf_opt(self.inner.handle(cf), read_options, mode)
            .map(|item| item.map_err(StoreError::from))
    }

    /// Visits the entries of each range of `ranges` in key order, one RocksDB iterator for all
    /// of them (a seek per range), until `visit` returns `true` for that range. `visit` gets the
    /// range's index, the key and the value, lent for the call.
    pub fn seek_each(
        &self,
        cf: Cf,
        ranges: &[(Vec<u8>, Vec<u8>)],
        mut visit: impl FnMut(usize, &[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        let mut iterator = self.inner.db.raw_iterator_cf(self.inner.handle(cf));
        for (index, (lower, upper)) in ranges.iter().enumerate() {
            iterator.seek(lower);
            while let (Some(key), Some(value)) = (iterator.key(), iterator.value()) {
                if key >= upper.as_slice() || visit(index, key, value) {
                    break;
                }
                iterator.next();
            }
            iterator.status()?;
        }
        Ok(())
    }

    /// The last entry of `[lower, upper)`, if any.
    pub fn last_in_range(
        &self,
        cf: Cf,
        lower: &[u8],
        upper: &[u8],
    ) -> Result<Option<Entry>, StoreError> {
        self.scan(cf, lower, upper, true).next().transpose()
    }

    /// Durably applies `batch`: resolves once the group holding it is fsynced.
    pub fn commit(
        &self,
        batch: Batch,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send + 'static {
        self.commit_in_epoch(batch, self.epoch())
    }

    /// [`Store::commit`] for a batch staged on in-memory state as of `epoch` ([`Store::epoch`]):
    /// refused unwritten if a write failed since (`health.rs`).
    pub fn commit_in_epoch(
        &self,
        batch: Batch,
        epoch: u64,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send + 'static {
        let receiver = self.enqueue(batch, epoch);
        async move {
            match receiver {
                Ok(receiver) => receiver.await.unwrap_or(Err(StoreError::Closed)),
                Err(error) => Err(error),
            }
        }
    }

    /// [`Store::commit`] for threads that are not async tasks.
    pub fn commit_blocking(&self, batch: Batch) -> Result<(), StoreError> {
        self.enqueue(batch, self.epoch())?
            .blocking_recv()
            .unwrap_or(Err(StoreError::Closed))
    }

    /// Whether writes can succeed now (`GET /_up` reports it).
    pub fn health(&self) -> StoreHealth {
        self.inner.health.get()
    }

    /// How many writes have failed so far. In-memory state derived from staged writes is to be
    /// reloaded from disk when it moves (`health.rs`).
    pub fn epoch(&self) -> u64 {
        self.inner.health.epoch()
    }

    fn enqueue(
        &self,
        batch: Batch,
        epoch: u64,
    ) -> Result<oneshot::Receiver<Result<(), StoreError>>, StoreError> {
        if let Some(poisoned) = self.inner.health.poisoned() {
            return Err(poisoned);
        }
        let (done, receiver) = oneshot::channel();
        let sender = self.committer.sender.lock().clone();
        match sender {
            Some(sender) => sender
                .send(Request { batch, epoch, done })
                .map_err(|_| StoreError::Closed)?,
            None => return Err(StoreError::Closed),
        }
        Ok(receiver)
    }

    /// Applies `batch` atomically without waiting for an fsync, from the calling thread (not
    /// through the group committer). For data whose loss in a crash loses nothing: derived data
    /// rebuilt from what IS durable (view indexes are caught up from the change stream), or
    /// rewrites that say what the durable bytes already said (compaction's abbreviated change
    /// entries). After a crash the batch is either wholly there or wholly absent. Refuses `doc` writes, whose row cache only the committer
    /// keeps exact.
    pub fn write_unsynced(&self, batch: Batch) -> Result<(), StoreError> {
        if let Some(poisoned) = self.inner.health.poisoned() {
            return Err(poisoned);
        }
        let mut write_batch = rocksdb::WriteBatch::default();
        for op in &batch.ops {
            if matches!(op.cf(), Cf::Doc) {
                return Err(StoreError::Poisoned(
                    "unsynced writes may not touch the doc column family".into(),
                ));
            }
            committer::apply(&self.inner, &mut write_batch, op);
        }
        if self.inner.no_space_injected() {
            return Err(self.inner.health.write_failed(StoreError::NoSpace));
        }
        let mut options = rocksdb::WriteOptions::default();
        options.set_sync(false);
        match self.inner.db.write_opt(write_batch, &options) {
            Ok(()) => Ok(()),
            Err(error) => Err(self.inner.health.write_failed(StoreError::from(error))),
        }
    }

    pub fn commit_stats(&self) -> CommitStats {
        CommitStats {
            batches: self.committer.counters.batches.load(Ordering::Relaxed),
            groups: self.committer.counters.groups.load(Ordering::Relaxed),
        }
    }

    /// Full compaction of `[lower, upper)`: drops overwritten and deleted entries from disk.
    /// Files already in the last level are rewritten too (RocksDB's default would only move a
    /// lone file down, keeping its deletion markers and its lighter compression).
    pub fn compact(&self, cf: Cf, lower: &[u8], upper: &[u8]) {
        let mut options = CompactOptions::default();
        options.set_bottommost_level_compaction(BottommostLevelCompaction::ForceOptimized);
        self.inner.db.compact_range_cf_opt(
            self.inner.handle(cf),
            Some(lower),
            Some(upper),
            &options,
        );
    }

    /// Flushes every memtable and compacts every column family in full, waiting for both: the
    /// store at rest, as a benchmark wants it before timing work that reads it back.
    pub fn settle(&self) -> Result<(), StoreError> {
        self.flush()?;
        for cf in Cf::ALL {
            self.inner
                .db
                .compact_range_cf::<&[u8], &[u8]>(self.inner.handle(cf), None, None);
        }
        Ok(())
    }

    /// A RocksDB checkpoint of the whole store at `dir` (which must not exist): every column
    /// family at one point in time, SST files hard-linked, MANIFEST and WAL copied
    /// (`docs/format/backup.md`). Everything committed before the call is in it. Returns the
    /// files it holds, by name, with their sizes. Blocking: call it off the async threads.
    pub fn checkpoint(&self, dir: &Path) -> Result<Vec<(String, u64)>, StoreError> {
        let checkpoint = rocksdb::checkpoint::Checkpoint::new(&self.inner.db)?;
        checkpoint.create_checkpoint(dir)?;
        let io = |source| StoreError::DataDir {
            path: dir.to_owned(),
            source,
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let metadata = entry.metadata().map_err(io)?;
            if metadata.is_file() {
                files.push((
                    entry.file_name().to_string_lossy().into_owned(),
                    metadata.len(),
                ));
            }
        }
        files.sort();
        Ok(files)
    }

    /// Writes memtables to SST files (for size measurements and benchmarks).
    pub fn flush(&self) -> Result<(), StoreError> {
        for cf in Cf::ALL {
            self.inner.db.flush_cf(self.inner.handle(cf))?;
        }
        Ok(())
    }

    /// Bytes on disk (SST and blob files) that `[lower, upper)` of `cf` occupies, approximately;
    /// data still in memtables is not counted.
    pub fn size_on_disk(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> u64 {
        let range = rocksdb::Range::new(lower, upper);
        self.inner
            .db
            .get_approximate_sizes_cf(self.inner.handle(cf), &[range])
            .first()
            .copied()
            .unwrap_or(0)
    }

    /// What `[lower, upper)` of `cf` takes on disk: see [`RangeBytes`].
    pub fn range_bytes(
        &self,
        cf: Cf,
        lower: &[u8],
        upper: &[u8],
    ) -> Result<RangeBytes, StoreError> {
        let files = self.size_on_disk(cf, lower, upper);
        let total = self
            .property(cf, "rocksdb.total-sst-files-size")
            .unwrap_or(0);
        let live = self
            .property(cf, "rocksdb.estimate-live-data-size")
            .unwrap_or(total)
            .min(total);
        // The data blocks' share of the SST bytes: the rest is index, filter and metadata.
        let data_blocks = self
            .property_text(cf, "rocksdb.aggregated-table-properties")
            .and_then(|text| table_property(&text, "data block size"))
            .unwrap_or(total)
            .min(total);
        let files_live = match total {
            0 => files,
            _ => {
                let live = u128::from(files) * u128::from(live) / u128::from(total);
                (live * u128::from(data_blocks) / u128::from(total)) as u64
            }
        };
        let (unflushed, unflushed_entries) = self.unflushed(cf, lower, upper)?;
        Ok(RangeBytes {
            files,
            files_live: files_live.min(files),
            unflushed,
            unflushed_entries,
        })
    }

    /// [`RangeBytes::file`] alone, without reading the column family's table properties (which
    /// `files_live` needs): for callers that size many small ranges.
    pub fn range_file_bytes(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> Result<u64, StoreError> {
        let (unflushed, unflushed_entries) = self.unflushed(cf, lower, upper)?;
        let files = self.size_on_disk(cf, lower, upper);
        Ok(RangeBytes {
            files,
            files_live: files,
            unflushed,
            unflushed_entries,
        }
        .file())
    }

    /// Bytes and entries of `[lower, upper)` still in memtables: see [`RangeBytes::unflushed`].
    fn unflushed(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> Result<(u64, u64), StoreError> {
        let mut read_options = ReadOptions::default();
        read_options.set_read_tier(rocksdb::ReadTier::Memtable);
        read_options.set_iterate_upper_bound(upper.to_vec());
        let mut iterator = self
            .inner
            .db
            .raw_iterator_cf_opt(self.inner.handle(cf), read_options);
        iterator.seek(lower);
        let (mut unflushed, mut entries) = (0u64, 0usize);
        while let (Some(key), Some(value)) = (iterator.key(), iterator.value()) {
            unflushed += (key.len() + value.len()) as u64;
            entries += 1;
            if entries >= UNFLUSHED_ENTRIES_MAX {
                let in_memtables = [
                    "rocksdb.num-entries-active-mem-table",
                    "rocksdb.num-entries-imm-mem-tables",
                ]
                .iter()
                .map(|name| self.property(cf, name).unwrap_or(0))
                .sum::<u64>();
                let scaled = u128::from(unflushed) * u128::from(in_memtables) / entries as u128;
                unflushed = unflushed.max(scaled as u64);
                entries = entries.max(in_memtables as usize);
                break;
            }
            iterator.next();
        }
        iterator.status()?;
        Ok((unflushed, entries as u64))
    }

    /// A RocksDB text property of one column family (e.g. `rocksdb.aggregated-table-properties`).
    pub fn property_text(&self, cf: Cf, name: &str) -> Option<String> {
        self.inner
            .db
            .property_value_cf(self.inner.handle(cf), name)
            .ok()
            .flatten()
    }

    /// A RocksDB integer property of one column family (e.g. `rocksdb.total-sst-files-size`).
    pub fn property(&self, cf: Cf, name: &str) -> Option<u64> {
        self.inner
            .db
            .property_int_value_cf(self.inner.handle(cf), name)
            .ok()
            .flatten()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // Closing the channel ends the committer loop after it answers what is queued.
        self.committer.sender.lock().take();
        if let Some(thread) = self.committer.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

fn cf_options(cf: Cf, options: &StoreOptions, cache: &Cache) -> Options {
    let mut cf_options = Options::default();
    cf_options.set_write_buffer_size(options.write_buffer_bytes);
    cf_options.set_compression_type(DBCompressionType::Lz4);
    cf_options.set_bottommost_compression_type(DBCompressionType::Zstd);
    let mut table = BlockBasedOptions::default();
    table.set_block_size(options.block_bytes);
    table.set_block_cache(cache);
    table.set_cache_index_and_filter_blocks(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    if matches!(cf, Cf::Doc | Cf::Local | Cf::Att | Cf::Meta) {
        // Point lookups dominate these; scans (seq, exp) do not use the filter.
        table.set_bloom_filter(10.0, false);
    }
    cf_options.set_block_based_table_factory(&table);
    if cf == Cf::Doc {
        // Writes read the document first; for new ids the key is absent, and a whole-key
        // bloom filter on the memtable answers that without walking the skiplist.
        cf_options.set_memtable_prefix_bloom_ratio(0.1);
        cf_options.set_memtable_whole_key_filtering(true);
    }
    if cf == Cf::Doc && options.doc_blob_files {
        cf_options.set_enable_blob_files(true);
        cf_options.set_min_blob_size(options.blob_min_bytes);
        cf_options.set_enable_blob_gc(true);
        cf_options.set_blob_compression_type(DBCompressionType::Lz4);
    }
    cf_options
}

/// One figure of RocksDB's table-properties text (`name=value; name=value; ...`).
fn table_property(text: &str, name: &str) -> Option<u64> {
    text.split(';').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key.trim() == name).then(|| value.trim().parse().ok())?
    })
}
