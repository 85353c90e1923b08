//! Sorted files that carry a key range from one node's store to another's
//! (docs/format/rebalance.md): a consistent [`Snapshot`] to read the range from, an SST file
//! written from entries in key order ([`write_sst`]), and files ingested whole into a column
//! family ([`Store::ingest`]). What the keys mean (and how they are rewritten for the target)
//! is the caller's; this file only keeps them sorted, counted and whole. Entries that are not
//! read in key order are put in order by a [`crate::SortedRun`] first.

use std::path::{Path, PathBuf};

use rocksdb::{
    DBCompressionType, Direction, IngestExternalFileOptions, IteratorMode, Options, ReadOptions,
    SnapshotWithThreadMode, SstFileWriter, DB,
};

use crate::error::StoreError;
use crate::store::{Cf, Entry, Store};

/// A consistent view of the whole store as it was when taken: reads through it see no later
/// write. Held while a range is exported; RocksDB keeps what it needs until it is dropped.
pub struct Snapshot<'a> {
    store: &'a Store,
    snapshot: SnapshotWithThreadMode<'a, DB>,
}

/// An SST file [`write_sst`] wrote: where, how many keys, its size, its first and last key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SstFile {
    pub path: PathBuf,
    pub keys: u64,
    pub bytes: u64,
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
}

impl Store {
    /// A consistent view of every column family, now.
    pub fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            store: self,
            snapshot: self.inner.db.snapshot(),
        }
    }

    /// Ingests `files` into `cf` whole, moving them into the store (they must be on the same
    /// file system): their keys appear at once, above every write already made. Blocking:
    /// call it off the async threads. Values of the `doc` family cached for the files' ranges
    /// are forgotten.
    pub fn ingest(&self, cf: Cf, files: &[SstFile]) -> Result<(), StoreError> {
        if files.is_empty() {
            return Ok(());
        }
        if let Some(missing) = files.iter().find(|file| !file.path.is_file()) {
            return Err(StoreError::Invalid(format!(
                "no file {} to ingest",
                missing.path.file_name().map_or_else(
                    || "(unnamed)".into(),
                    |name| name.to_string_lossy().into_owned()
                )
            )));
        }
        let mut options = IngestExternalFileOptions::default();
        options.set_move_files(true);
        let paths: Vec<&Path> = files.iter().map(|file| file.path.as_path()).collect();
        self.inner
            .db
            .ingest_external_file_cf_opts(self.inner.handle(cf), &options, paths)?;
        if cf == Cf::Doc {
            if let Some(cache) = &self.inner.row_cache {
                for file in files {
                    let mut end = file.largest.clone();
                    end.push(0);
                    cache.forget_range(&file.smallest, &end);
                }
            }
        }
        Ok(())
    }
}

impl Snapshot<'_> {
    fn read_options(&self) -> ReadOptions {
        let mut read_options = ReadOptions::default();
        read_options.set_snapshot(&self.snapshot);
        read_options
    }

    /// Iterates `[lower, upper)` of `cf` in key order, as the store was when the snapshot was
    /// taken.
    pub fn scan(
        &self,
        cf: Cf,
        lower: &[u8],
        upper: &[u8],
    ) -> impl Iterator<Item = Result<Entry, StoreError>> + '_ {
        let mut read_options = self.read_options();
        read_options.set_iterate_lower_bound(lower.to_vec());
        read_options.set_iterate_upper_bound(upper.to_vec());
        let inner = &self.store.inner;
        inner
            .db
            .iterator_cf_opt(
                inner.handle(cf),
                read_options,
                IteratorMode::From(lower, Direction::Forward),
            )
            .map(|item| item.map_err(StoreError::from))
    }

    /// The keys of `[lower, upper)` of `cf` in key order, without copying their values out
    /// (a scan of `doc` for its keys alone leaves the bodies in the block cache).
    pub fn keys(
        &self,
        cf: Cf,
        lower: &[u8],
        upper: &[u8],
    ) -> impl Iterator<Item = Result<Vec<u8>, StoreError>> + '_ {
        let mut read_options = self.read_options();
        read_options.set_iterate_upper_bound(upper.to_vec());
        let inner = &self.store.inner;
        let mut iterator = inner.db.raw_iterator_cf_opt(inner.handle(cf), read_options);
        iterator.seek(lower);
        let mut done = false;
        std::iter::from_fn(move || {
            if done {
                return None;
            }
            if let Some(key) = iterator.key() {
                let key = key.to_vec();
                iterator.next();
                return Some(Ok(key));
            }
            done = true;
            iterator.status().err().map(|error| Err(error.into()))
        })
    }

    /// The values of `keys` in `cf` as the store was when the snapshot was taken, in the order
    /// of `keys` (`None`: absent).
    pub fn multi_get(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let handle = self.store.inner.handle(cf);
        self.store
            .inner
            .db
            .multi_get_cf_opt(
                keys.iter().map(|key| (handle, key.as_slice())),
                &self.read_options(),
            )
            .into_iter()
            .map(|result| result.map_err(StoreError::from))
            .collect()
    }

    /// The value of `key` in `cf` as the store was when the snapshot was taken.
    pub fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .store
            .inner
            .db
            .get_pinned_cf_opt(self.store.inner.handle(cf), key, &self.read_options())?
            .map(|value| value.to_vec()))
    }
}

/// Writes `entries` (each key above the one before) into a new SST file at `path`, compressed
/// as the store compresses its files. `Ok(None)` when there is no entry (no file is made); a
/// key not above the one before is refused and the partial file removed. Blocking.
pub fn write_sst(
    path: &Path,
    entries: impl IntoIterator<Item = Result<(Vec<u8>, Vec<u8>), StoreError>>,
) -> Result<Option<SstFile>, StoreError> {
    let mut options = Options::default();
    options.set_compression_type(DBCompressionType::Lz4);
    options.set_bottommost_compression_type(DBCompressionType::Zstd);
    let mut writer = SstFileWriter::create(&options);
    let mut opened = false;
    let mut keys = 0u64;
    let mut smallest = Vec::new();
    let mut last: Option<Vec<u8>> = None;
    let written = (|| {
        for entry in entries {
            let (key, value) = entry?;
            if last.as_ref().is_some_and(|last| key <= *last) {
                return Err(StoreError::Invalid(
                    "a sorted file's keys must rise strictly".into(),
                ));
            }
            if !opened {
                writer.open(path)?;
                opened = true;
                smallest.clone_from(&key);
            }
            writer.put(&key, &value)?;
            keys += 1;
            last = Some(key);
        }
        if opened {
            writer.finish()?;
        }
        Ok(())
    })();
    if let Err(error) = written {
        if opened {
            let _ = std::fs::remove_file(path);
        }
        return Err(error);
    }
    let Some(largest) = last else {
        return Ok(None);
    };
    let bytes = std::fs::metadata(path)
        .map_err(|_| StoreError::Invalid("a written sorted file is gone".into()))?
        .len();
    Ok(Some(SstFile {
        path: path.to_owned(),
        keys,
        bytes,
        smallest,
        largest,
    }))
}
