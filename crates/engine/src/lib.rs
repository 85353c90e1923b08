//! settee's document engine: protocol-agnostic documents on top of `settee-storage`.
//!
//! An [`Engine`] holds the node's buckets (CouchDB: databases). A [`Bucket`] hashes each key to
//! one of its fixed number of vbuckets (as the Couchbase SDKs do), gives every mutation a
//! per-vbucket seqno and a CAS from a hybrid logical clock, keeps CouchDB revision trees
//! (`settee-revtree`), and appends to each vbucket's change stream. Both front doors — the
//! CouchDB HTTP API and the Couchbase KV protocol — call the same bucket methods:
//! [`Bucket::update_docs`] for CouchDB edits, [`Bucket::kv_mutate`] for key-value mutations.
//!
//! Start reading at `bucket.rs` (the write path), then `update.rs` (CouchDB semantics) and
//! `changes.rs` (the change stream). Storage key layout: `docs/format/keys.md`; the record:
//! `docs/format/document.md`. `limits.rs` holds the one set of document limits both doors
//! obey; `skips.rs` counts the records readers of many documents leave out (a record that does
//! not decode, a document past the limits) so that one bad record never stops the others.
#![deny(clippy::unwrap_used)]

mod access_epoch;
mod bucket;
mod change_entry;
mod changes;
mod changes_descending;
pub use settee_durability as durability;
pub use settee_record::clock;
pub mod collections;
use settee_record::doc_key;
mod designs;
mod doc_reads;
mod engine;
mod error;
pub mod export;
mod failover;
use settee_keys as keys;
mod keyspace;
mod kv;
pub mod lease;
pub use settee_limits as limits;
mod local;
mod maintenance;
mod old_revs;
pub mod partition;
mod purge_marker;
mod read;
pub use settee_record::record;
mod replica;
pub use settee_record::seqvec;
mod skips;
mod stream_item;
pub mod subdoc;
mod update;
mod validate;
pub use settee_record::vattr;
mod vb_state;
pub mod vbucket;
use settee_record::xattrs;

pub use access_epoch::AccessEpoch;
pub use bucket::{Bucket, BucketConfig, Committed, COLLECTION_KEY_BYTES_MAX, KEY_BYTES_MAX};
pub use change_entry::{ChangeEntry, StreamEntry};
pub use changes::ChangeCursor;
pub use changes_descending::DescendingCursor;
pub use collections::{
    CollectionPurgeHook, DroppedCollection, Manifest, ManifestChange, ManifestRouter, RoutedChange,
    SystemEvent, SystemEventKind,
};
pub use designs::{DesignsListener, DesignsWritten, SharedDesign};
pub use doc_key::DocKey;
pub use engine::{
    CreateOutcome, Engine, EngineOptions, COLLECTIONS_PER_BUCKET_MAX, REVS_LIMIT_DEFAULT,
    SCOPES_PER_BUCKET_MAX, USERS_BUCKET,
};
pub use error::EngineError;
pub use failover::{encode_failover_log, FailoverEntry, FAILOVER_ENTRIES_MAX};
pub use keyspace::Keyspace;
pub use kv::{
    is_json, KvMeta, KvMutation, KvOutcome, KvRef, KvValue, LockOutcome, StoreMode, UnlockOutcome,
};
pub use limits::{DocLimits, LimitError};
pub use local::LocalOutcome;
pub use maintenance::{CompactionReport, DiskSizes};
pub use purge_marker::{PurgeMarker, PURGE_MARKERS_KEEP_SECS};
pub use read::{DocScan, ScanRange};
pub use record::{AttachmentMeta, DocRecord, Leaf};
pub use replica::{ReplicaBatch, ReplicaDoc, ReplicaItem, ReplicaRecord, VbRole};
pub use seqvec::SeqVector;
pub use settee_revtree::{RevId, REV_HASH_BYTES_MAX, REV_POS_MAX};
pub use settee_storage::StoreHealth;
pub use skips::SkipStats;
pub use stream_item::StreamItem;
pub use update::{
    hex, md5_of, plan_update, revision_hash, AttachmentInput, DocUpdate, UpdateOutcome,
};
pub use validate::{ProposedWrite, Refusal, Verdict, WriteValidator, Writer};
pub use vb_state::VbState;
