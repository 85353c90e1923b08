//! settee's storage layer: the only crate that links RocksDB.
//!
//! A node keeps all its data in one [`Store`]: one RocksDB instance with a column family per kind
//! of record ([`Cf`]). Callers speak bytes — the key layout of each column family belongs to the
//! document engine and is described in `docs/format/keys.md`; this crate knows nothing about
//! documents, buckets or vbuckets.
//!
//! Writes are collected into a [`Batch`] and handed to [`Store::commit`], which resolves only
//! after the batch is in the write-ahead log and the log is fsynced. One committer thread merges
//! every batch waiting at that moment into a single RocksDB write, so concurrent writers share one
//! fsync (group commit). A write that finds the disk full fails cleanly, and writes succeed again
//! by themselves once space is freed; any other failed write poisons the store: every later
//! commit fails rather than pretending a lost write could be retried ([`health`]). Errors never
//! show a file path ([`StoreError`]).
//!
//! Values of the `doc` column family are also kept in a bounded in-memory [`row_cache`] that
//! the committer keeps exact: a read never sees an older value than RocksDB holds.
//!
//! Key ranges move between nodes as sorted files (`sst.rs`: a [`Snapshot`], [`write_sst`],
//! [`Store::ingest`]); entries found out of key order are sorted first in bounded memory
//! ([`SortedRun`]).
//!
//! Start reading at [`Store::open`] and [`committer`].
#![deny(clippy::unwrap_used)]

mod batch;
pub mod committer;
mod error;
pub mod health;
mod options;
pub mod row_cache;
mod sorted_run;
mod sst;
mod stats;
mod store;

pub use batch::Batch;
pub use error::StoreError;
pub use health::StoreHealth;
pub use options::StoreOptions;
pub use sorted_run::{KeyValue, SortedEntries, SortedRun};
pub use sst::{write_sst, Snapshot, SstFile};
pub use stats::StoreStats;
pub use store::{Cf, CommitStats, Entry, RangeBytes, Store, ENTRY_OVERHEAD};
