//! A bucket (CouchDB: database): its vbuckets' seqno state, its locks, and the one write path
//! every mutation takes.
//!
//! Write path, for one or many documents:
//! 1. lock every document key touched (`settee-keylocks`: exact keys, taken in sorted order, so two
//!    bulk writes cannot deadlock) — this serialises read-modify-write of a document across the
//!    fsync wait, and only writers of the same document wait for each other;
//! 2. read the current records and plan the new ones (pure functions in `update.rs`, `kv.rs`);
//! 3. lock the vbucket states touched (sorted), assign seqnos and CASes, encode, and enqueue ONE
//!    batch to the store's group committer while still holding them, so each vbucket's seqnos
//!    reach the log, and become visible, in order;
//! 4. await the fsync, release the keys, wake change-stream listeners.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use settee_storage::{Batch, Cf, Store};

use crate::access_epoch::AccessEpoch;
use crate::clock::{Clock, Hlc};
use crate::collections::{CollectionsState, ManifestLimits};
use crate::doc_key::DocKey;
use crate::error::EngineError;
use crate::keys;
use crate::limits::{DocLimits, LimitError};
use crate::record::DocRecord;
use crate::seqvec::SeqVector;
use crate::skips::{SkipCounters, SkipStats, SkippedRecord, Skips};
use crate::vb_state::{read_states, VbSlot, VbState};
use crate::vbucket::vbucket_of;
use settee_keylocks::{KeyGuard, KeyLocks};

/// Longest document key, in bytes (Couchbase's limit; CouchDB ids are held to it too).
pub use settee_keys::KEY_BYTES_MAX;

/// Refuses keys the storage layout cannot hold (empty or longer than [`KEY_BYTES_MAX`]).
pub(crate) fn check_key(key: &[u8]) -> Result<(), EngineError> {
    if key.is_empty() || key.len() > KEY_BYTES_MAX {
        return Err(EngineError::Invalid(format!(
            "key must be 1..={KEY_BYTES_MAX} bytes, got {}",
            key.len()
        )));
    }
    Ok(())
}

/// Longest document key in a collection other than `_default._default` (kv_engine's rule: the
/// key and the longest LEB128 collection id fit 251 bytes).
pub const COLLECTION_KEY_BYTES_MAX: usize = 246;

/// [`check_key`] for a document of collection `cid`.
pub(crate) fn check_key_in(cid: u32, key: &[u8]) -> Result<(), EngineError> {
    check_key(key)?;
    if cid != 0 && key.len() > COLLECTION_KEY_BYTES_MAX {
        return Err(EngineError::Invalid(format!(
            "key must be 1..={COLLECTION_KEY_BYTES_MAX} bytes in a collection, got {}",
            key.len()
        )));
    }
    Ok(())
}

/// A document record's decode error, as [`EngineError::CorruptDocument`].
pub(crate) fn corrupt_document(error: settee_record::Corrupt) -> EngineError {
    EngineError::CorruptDocument(error.0)
}

/// The purge sequences of collections other than 0, as stored.
fn read_collection_purge_seqs(
    store: &Store,
    bucket_id: u32,
) -> Result<std::collections::BTreeMap<u32, u64>, EngineError> {
    let prefix = keys::meta::collection_purge_seq_prefix(bucket_id);
    let upper = keys::prefix_end(&prefix);
    let mut seqs = std::collections::BTreeMap::new();
    for item in store.scan(Cf::Meta, &prefix, &upper, false) {
        let (key, value) = item?;
        let cid = key
            .get(prefix.len()..)
            .and_then(|rest| rest.try_into().ok())
            .map(u32::from_be_bytes);
        let seq = value.as_ref().try_into().ok().map(u64::from_be_bytes);
        match (cid, seq) {
            (Some(cid), Some(seq)) => seqs.insert(cid, seq),
            _ => return Err(EngineError::Corrupt("collection purge seq".into())),
        };
    }
    Ok(seqs)
}

/// Bucket settings persisted in `meta` (`bucket/conf/{id}`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct BucketConfig {
    pub name: String,
    pub vbuckets: u16,
    pub created_ms: u64,
    pub revs_limit: u32,
    /// Seconds a mutation's expiry is capped at (0: none), for collections that set no
    /// `max_ttl` of their own (collections.md). Not written while 0, so a bucket that never
    /// sets it keeps the configuration bytes of 0.1.0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_ttl: u32,
    /// A CouchDB partitioned database (`PUT /db?partitioned=true`): document ids are
    /// `partition:id` (keys.md). Set at creation, never changed; not written while false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partitioned: bool,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// The expiry a mutation stores under a max TTL of `max_ttl` seconds (0: none), at `now`: a
/// later one (or none) is brought down to now + max_ttl (kv_engine's rule).
pub(crate) fn capped_expiry(expiry: u32, max_ttl: u32, now: u32) -> u32 {
    if max_ttl == 0 {
        return expiry;
    }
    let limit = now.saturating_add(max_ttl);
    if expiry == 0 || expiry > limit {
        limit
    } else {
        expiry
    }
}

/// What a planned write does to one document.
#[derive(Debug)]
pub(crate) struct PlannedWrite {
    pub vbucket: u16,
    /// The document's collection: checked live under the vbucket lock before anything is
    /// staged.
    pub collection: u32,
    pub key: Vec<u8>,
    /// The record as it was (seqno, expiry, deleted) — `None` for a new document.
    pub previous: Option<Previous>,
    /// The new record; seqno and cas are filled in at commit. `None` removes the document
    /// entirely (purge).
    pub record: Option<DocRecord>,
    /// Attachment bodies to store: (md5, bytes).
    pub new_attachments: Vec<([u8; 16], Bytes)>,
    /// Sub-document mutation macros to expand in the xattrs once CAS and seqno are assigned.
    pub macro_nonce: Option<u64>,
    /// Whether the collection's max TTL caps the new record's expiry (a mutation by a client;
    /// not a purge, nor the expiry purger's tombstone).
    pub apply_max_ttl: bool,
    /// Old revision bodies the write keeps and drops (`old_revs.rs`).
    pub old_revisions: crate::old_revs::OldRevisions,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Previous {
    pub seqno: u64,
    pub expiry: u32,
    pub deleted: bool,
    /// Encoded size of the record being replaced.
    pub record_bytes: u64,
}

impl Previous {
    pub fn of(record: &DocRecord) -> Previous {
        Previous {
            seqno: record.seqno,
            expiry: record.expiry,
            deleted: record.is_deleted(),
            record_bytes: record.encoded_len() as u64,
        }
    }
}

/// What a committed write got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    pub seqno: u64,
    pub cas: u64,
}

pub struct Bucket {
    pub(crate) id: u32,
    /// The node's serving lease (`lease.rs`): front-door writes to an active vbucket need it.
    pub(crate) lease: Arc<crate::lease::Lease>,
    pub(crate) name: String,
    pub(crate) vbuckets: u16,
    pub(crate) created_ms: u64,
    pub(crate) partitioned: bool,
    pub(crate) store: Arc<Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) hlc: Arc<Hlc>,
    /// One mutex per vbucket; held only while assigning seqnos and enqueueing a batch, never
    /// across an await, so a parking_lot mutex is right.
    pub(crate) vb_states: Vec<Mutex<VbSlot>>,
    /// Per vbucket, the highest seqno whose write is durable and readable. `VbState::high_seqno`
    /// runs ahead of it while a group waits for its fsync; change feeds must only ever report
    /// positions up to this one, or a client resuming there would skip the pending change.
    /// Raised with `fetch_max` after each commit: the committer applies groups in order, so
    /// everything at or below the maximum is visible.
    pub(crate) visible_high: Vec<std::sync::atomic::AtomicU64>,
    /// Held across the fsync wait.
    key_locks: KeyLocks,
    /// Bumped after every committed write; change feeds wait on it.
    pub(crate) changed: tokio::sync::watch::Sender<u64>,
    /// Rarely written (PUT _revs_limit); read on every write.
    pub(crate) revs_limit: RwLock<u32>,
    /// Rarely written (PUT _security); read on every authorised request.
    security: RwLock<serde_json::Value>,
    /// The node's access epoch, moved by `set_security` and, for access buckets, by every
    /// committed write.
    pub(crate) access: BucketAccess,
    /// Set when the bucket is deleted, so stale handles refuse to write.
    pub(crate) dropped: std::sync::atomic::AtomicBool,
    /// Purges so far (CouchDB `purge_seq`); written only by `purge`, which holds `purge_lock`
    /// across its commit so the persisted value never goes backwards.
    pub(crate) purge_seq: std::sync::atomic::AtomicU64,
    pub(crate) purge_lock: tokio::sync::Mutex<()>,
    /// The purge sequences of collections other than 0 (`meta` `bucket/cpurge_seq/`), written
    /// under `purge_lock` like `purge_seq`.
    pub(crate) collection_purge_seqs: Mutex<std::collections::BTreeMap<u32, u64>>,
    /// True while `compact` runs (CouchDB's `compact_running`).
    pub(crate) compacting: std::sync::atomic::AtomicBool,
    /// `GET_LOCKED` locks by key; in memory only (a restart releases them, as on Couchbase).
    pub(crate) kv_locks: Mutex<std::collections::HashMap<Vec<u8>, crate::kv::KvLock>>,
    /// Sync writes (settee-durability): the replica chains and acknowledgements the cluster
    /// node and the DCP producer report, asked by both doors for durable writes. In memory.
    durability: Arc<settee_durability::Tracker>,
    /// `kv_locks.len()`, readable without the mutex on every GET.
    pub(crate) kv_lock_count: std::sync::atomic::AtomicUsize,
    /// The node's document limits (engine-wide, set at open).
    pub(crate) limits: DocLimits,
    /// Records readers skipped because they do not decode or pass the limits.
    skips: Skips,
    /// The live manifest and the dropped collections not purged yet. Written only by a
    /// manifest change (holding every vbucket lock) or by a writer that finds it older than
    /// the store's epoch (reading it from disk again); read by every writer of a collection
    /// other than 0 under its vbucket locks, and by readers. Lock order: vbucket locks first.
    pub(crate) collections: RwLock<CollectionsState>,
    /// Bit `i` set when collection `i` (below 64) is live in `collections`' manifest: the
    /// liveness check of every KV request and read is one atomic load (`collections/mod.rs`).
    /// Written right after every change of `collections`, under its write lock.
    pub(crate) live_bits: std::sync::atomic::AtomicU64,
    /// Serialises writes of the bucket's configuration (`revs_limit`, `max_ttl`).
    config_lock: tokio::sync::Mutex<()>,
    /// Serialises manifest changes (held across their fsync wait).
    pub(crate) manifest_lock: tokio::sync::Mutex<()>,
    /// Limits on scopes and collections (engine-wide, set at open).
    pub(crate) manifest_limits: ManifestLimits,
    /// Woken when a collection is dropped, so the node's background purger starts on it.
    pub(crate) purge_wake: Arc<tokio::sync::Notify>,
    pub(crate) purge_hooks: Arc<crate::collections::PurgeHooks>,
    /// The node's write validator (`validate.rs`), asked about every document write.
    pub(crate) validator: Arc<crate::validate::ValidatorSlot>,
    /// The bucket's max TTL in seconds (0: none); rarely written (`set_max_ttl`).
    max_ttl: std::sync::atomic::AtomicU32,
    /// Per vbucket, the newest uuid of its stored failover log (0: none stored yet), read on
    /// every mutation token without a lock; written under `failover_lock` after the log.
    pub(crate) failover_heads: Vec<std::sync::atomic::AtomicU64>,
    /// Serialises changes of failover logs (held across their fsync wait).
    pub(crate) failover_lock: tokio::sync::Mutex<()>,
    /// Per vbucket, its `VbRole` on this node (`replica.rs`); written under the vbucket's lock.
    pub(crate) roles: Vec<std::sync::atomic::AtomicU8>,
    /// Per vbucket, whether its purge marker index may hold entries, and its purge seqno
    /// (`purge_marker.rs`; each documents its own rule).
    pub(crate) markers: crate::purge_marker::Markers,
    /// The node's listener of design document writes (`designs.rs`).
    pub(crate) designs: Arc<crate::designs::DesignsSlot>,
    /// Design documents gathered from the cluster (`designs.rs`).
    pub(crate) shared_designs: RwLock<Arc<Vec<crate::designs::SharedDesign>>>,
}

/// How a bucket takes part in the node's access epoch.
pub(crate) struct BucketAccess {
    pub epoch: Arc<AccessEpoch>,
    /// Whether its documents decide access (`EngineOptions::access_buckets`, changed by
    /// `Engine::set_access_buckets`): read after each committed write, an atomic flag.
    pub writes_move_epoch: std::sync::atomic::AtomicBool,
}

/// What every bucket of the node shares.
pub(crate) struct NodeParts {
    pub store: Arc<Store>,
    pub clock: Arc<dyn Clock>,
    pub hlc: Arc<Hlc>,
    pub limits: DocLimits,
    pub skip_total: Arc<SkipCounters>,
    pub manifest_limits: ManifestLimits,
    pub purge_wake: Arc<tokio::sync::Notify>,
    pub purge_hooks: Arc<crate::collections::PurgeHooks>,
    pub validator: Arc<crate::validate::ValidatorSlot>,
    pub lease: Arc<crate::lease::Lease>,
    pub designs: Arc<crate::designs::DesignsSlot>,
}

impl Bucket {
    pub(crate) fn load(
        node: NodeParts,
        id: u32,
        config: BucketConfig,
        access: BucketAccess,
    ) -> Result<Bucket, EngineError> {
        let NodeParts {
            store,
            clock,
            hlc,
            limits,
            skip_total,
            manifest_limits,
            purge_wake,
            purge_hooks,
            validator,
            lease,
            designs,
        } = node;
        let mut vb_states = Vec::with_capacity(config.vbuckets as usize);
        // Read before the disk: a write failing meanwhile makes the first writer reload.
        let epoch = store.epoch();
        let collections = CollectionsState::read(&store, id)?;
        let live = collections.manifest.collection_ids();
        for vbucket in 0..config.vbuckets {
            let (lower, upper) = keys::vb_range(id, vbucket);
            let mut last_seqno = 0;
            if let Some((key, value)) = store.last_in_range(Cf::Seq, &lower, &upper)? {
                let seqno = keys::seqno_of_seq_key(&key).unwrap_or(0);
                last_seqno = seqno;
                match crate::change_entry::StoredEntry::decode(vbucket, seqno, &value) {
                    Some(crate::change_entry::StoredEntry::Change(entry, _)) => {
                        hlc.observe(entry.cas)
                    }
                    Some(crate::change_entry::StoredEntry::Event(event)) => hlc.observe(event.cas),
                    Some(crate::change_entry::StoredEntry::Purge(marker)) => {
                        hlc.observe(marker.cas)
                    }
                    None => {}
                }
            }
            let (state, collection_states) = read_states(&store, id, vbucket, &live, last_seqno)?;
            vb_states.push(Mutex::new(VbSlot {
                state,
                collections: collection_states,
                epoch,
            }));
        }
        let security = match store.get(Cf::Meta, &keys::meta::bucket_security(id))? {
            Some(raw) => serde_json::from_slice(&raw)
                .map_err(|error| EngineError::Corrupt(format!("security object: {error}")))?,
            None => serde_json::json!({}),
        };
        let purge_seq = match store.get(Cf::Meta, &keys::meta::bucket_purge_seq(id))? {
            Some(raw) => u64::from_be_bytes(
                raw.as_slice()
                    .try_into()
                    .map_err(|_| EngineError::Corrupt("purge seq".into()))?,
            ),
            None => 0,
        };
        let collection_purge_seqs = read_collection_purge_seqs(&store, id)?;
        let failover_heads = crate::failover::load_heads(&store, id, config.vbuckets)?;
        let roles = crate::replica::load_roles(&store, id, config.vbuckets)?;
        let markers = crate::purge_marker::Markers::load(&store, id, config.vbuckets)?;
        let (changed, _) = tokio::sync::watch::channel(0);
        Ok(Bucket {
            id,
            lease,
            name: config.name,
            vbuckets: config.vbuckets,
            created_ms: config.created_ms,
            partitioned: config.partitioned,
            store,
            clock,
            hlc,
            visible_high: vb_states
                .iter()
                .map(|slot| std::sync::atomic::AtomicU64::new(slot.lock().state.high_seqno))
                .collect(),
            vb_states,
            key_locks: KeyLocks::new(),
            changed,
            revs_limit: RwLock::new(config.revs_limit),
            security: RwLock::new(security),
            access,
            dropped: std::sync::atomic::AtomicBool::new(false),
            purge_seq: std::sync::atomic::AtomicU64::new(purge_seq),
            purge_lock: tokio::sync::Mutex::new(()),
            collection_purge_seqs: Mutex::new(collection_purge_seqs),
            compacting: std::sync::atomic::AtomicBool::new(false),
            kv_locks: Mutex::new(std::collections::HashMap::new()),
            kv_lock_count: std::sync::atomic::AtomicUsize::new(0),
            durability: Arc::new(settee_durability::Tracker::new(config.vbuckets)),
            limits,
            skips: Skips::new(skip_total),
            live_bits: std::sync::atomic::AtomicU64::new(crate::collections::live_bits(
                &collections.manifest,
            )),
            collections: RwLock::new(collections),
            config_lock: tokio::sync::Mutex::new(()),
            manifest_lock: tokio::sync::Mutex::new(()),
            manifest_limits,
            max_ttl: std::sync::atomic::AtomicU32::new(config.max_ttl),
            purge_wake,
            purge_hooks,
            validator,
            failover_heads,
            failover_lock: tokio::sync::Mutex::new(()),
            roles,
            markers,
            designs,
            shared_designs: RwLock::new(Arc::default()),
        })
    }

    /// The document limits every write obeys and many-document readers check (`limits.rs`).
    pub fn doc_limits(&self) -> DocLimits {
        self.limits
    }

    /// How many records readers of this bucket skipped (`skips.rs`).
    pub fn skip_stats(&self) -> SkipStats {
        self.skips.stats()
    }

    /// Records that a reader of many documents left out `key` because its stored document is
    /// past the limits (counted, logged once).
    pub fn skip_over_limit(&self, key: &[u8], error: &LimitError) {
        self.skip(SkippedRecord::OverLimit, self.vbucket_of(key), key, error);
    }

    /// Records that a reader of many documents left out `key` because its stored record does
    /// not decode (counted, logged once).
    pub fn skip_corrupt_document(&self, key: &[u8], reason: &dyn std::fmt::Display) {
        self.skip(SkippedRecord::Document, self.vbucket_of(key), key, reason);
    }

    pub(crate) fn skip(
        &self,
        kind: SkippedRecord,
        vbucket: u16,
        key: &[u8],
        reason: &dyn std::fmt::Display,
    ) {
        self.skips.record(&self.name, kind, vbucket, key, reason);
    }

    /// After a committed change of documents: moves the accounts epoch if this is an accounts
    /// bucket (a front-door write, a replica batch, a replica's rollback alike).
    pub(crate) fn accounts_changed(&self) {
        if self
            .access
            .writes_move_epoch
            .load(std::sync::atomic::Ordering::Acquire)
        {
            self.access.epoch.advance_accounts();
        }
    }

    /// Whether this bucket's committed writes move the accounts epoch (its documents are
    /// accounts).
    pub(crate) fn set_writes_move_epoch(&self, moves: bool) {
        self.access
            .writes_move_epoch
            .store(moves, std::sync::atomic::Ordering::Release);
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bucket's id: allocated once, never reused, so it tells a dropped and re-created
    /// bucket of the same name apart (derived data such as view indexes is keyed by it).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The CouchDB door's name of collection `collection` ([`crate::Keyspace::name`]).
    pub fn door_name(&self, collection: u32) -> String {
        if collection == 0 {
            return self.name().to_string();
        }
        match self.manifest().collection(collection) {
            Some((scope, found)) => {
                settee_manifest::door_name(self.name(), &scope.name, &found.name)
            }
            None => format!("{}#{collection}", self.name()),
        }
    }

    /// Moves when design documents may have changed, or buckets were created or dropped:
    /// what is derived from design documents is stamped with it (`validate.rs`).
    pub fn design_stamp(&self) -> (u64, u64) {
        (self.access.epoch.get(), self.access.epoch.designs())
    }

    pub fn vbuckets(&self) -> u16 {
        self.vbuckets
    }

    /// A CouchDB partitioned database: ids are `partition:id`.
    pub fn is_partitioned(&self) -> bool {
        self.partitioned
    }

    /// The bucket's sync writes (docs/format/replica.md, "Sync writes on the active").
    pub fn durability(&self) -> &Arc<settee_durability::Tracker> {
        &self.durability
    }

    pub fn created_ms(&self) -> u64 {
        self.created_ms
    }

    pub fn vbucket_of(&self, key: &[u8]) -> u16 {
        vbucket_of(key, self.vbuckets)
    }

    /// The uuid of a vbucket's current history (Couchbase's vbucket UUID, in mutation
    /// tokens, OBSERVE_SEQNO, `$document` and DCP): the newest entry of its failover log
    /// (`failover.rs`).
    pub fn vbucket_uuid(&self, vbucket: u16) -> u64 {
        self.failover_head(vbucket)
            .unwrap_or_else(|| self.original_vbucket_uuid(vbucket))
    }

    /// The uuid a vbucket's history starts with: stable per (bucket, vbucket).
    pub(crate) fn original_vbucket_uuid(&self, vbucket: u16) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in self
            .name
            .bytes()
            .chain(self.created_ms.to_be_bytes())
            .chain(vbucket.to_be_bytes())
        {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        hash
    }

    pub fn now_secs(&self) -> u32 {
        self.clock.now_secs()
    }

    /// The highest durable, readable seqno of every vbucket.
    pub fn high_seqnos(&self) -> SeqVector {
        SeqVector::from_seqnos(
            self.visible_high
                .iter()
                .map(|seqno| seqno.load(std::sync::atomic::Ordering::Acquire))
                .collect(),
        )
    }

    pub fn vb_state(&self, vbucket: u16) -> VbState {
        self.current_state(vbucket).unwrap_or_default()
    }

    /// Bytes of all document records as stored (before compression).
    pub fn record_bytes(&self) -> u64 {
        (0..self.vbuckets)
            .filter_map(|vbucket| self.current_state(vbucket))
            .map(|state| state.record_bytes)
            .sum()
    }

    /// (live documents, deleted documents) of every live collection.
    pub fn doc_counts(&self) -> (u64, u64) {
        (0..self.vbuckets)
            .filter_map(|vbucket| self.current_state(vbucket))
            .fold((0, 0), |(live, deleted), state| {
                (live + state.live, deleted + state.deleted)
            })
    }

    /// A vbucket's state, reloaded from disk first if a write failed since it was last checked
    /// (see [`Bucket::reload_vb_state`]).
    fn current_state(&self, vbucket: u16) -> Option<VbState> {
        self.with_current_slot(vbucket, |slot| slot.state)
    }

    /// Collection `cid`'s counts in `vbucket` (`None`: not live, or no such vbucket).
    pub(crate) fn collection_state(&self, cid: u32, vbucket: u16) -> Option<VbState> {
        self.with_current_slot(vbucket, |slot| slot.collection(cid).copied())
            .flatten()
    }

    fn with_current_slot<R>(&self, vbucket: u16, read: impl FnOnce(&VbSlot) -> R) -> Option<R> {
        let mut slot = self.vb_states.get(vbucket as usize)?.lock();
        let epoch = self.store.epoch();
        if slot.epoch != epoch {
            let reloaded = self.collections_for_write(epoch).and_then(|collections| {
                let live = collections.manifest.collection_ids();
                self.reload_vb_state(vbucket, &mut slot, epoch, &live)
            });
            if let Err(error) = reloaded {
                tracing::warn!(%error, vbucket, "cannot reload vbucket stats after a failed write");
            }
        }
        Some(read(&slot))
    }

    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    pub fn is_compacting(&self) -> bool {
        self.compacting.load(std::sync::atomic::Ordering::Acquire)
    }

    /// How many purges this bucket has seen.
    pub fn purge_seq(&self) -> u64 {
        self.purge_seq.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn security(&self) -> serde_json::Value {
        self.security.read().clone()
    }

    /// `f` of the security object, read in place: an authorisation decision on every request
    /// must not copy it (a clone per request was 2% of a GET's CPU).
    pub fn with_security<R>(&self, f: impl FnOnce(&serde_json::Value) -> R) -> R {
        f(&self.security.read())
    }

    pub async fn set_security(&self, security: serde_json::Value) -> Result<(), EngineError> {
        let mut batch = Batch::new();
        batch.put(
            Cf::Meta,
            keys::meta::bucket_security(self.id),
            serde_json::to_vec(&security).unwrap_or_default(),
        );
        self.store.commit(batch).await?;
        *self.security.write() = security;
        self.access.epoch.advance();
        Ok(())
    }

    pub fn revs_limit(&self) -> u32 {
        *self.revs_limit.read()
    }

    pub async fn set_revs_limit(&self, limit: u32) -> Result<(), EngineError> {
        let _config = self.config_lock.lock().await;
        self.write_config(limit, self.max_ttl()).await?;
        *self.revs_limit.write() = limit;
        Ok(())
    }

    /// The bucket's max TTL in seconds (0: none): the cap on mutations' expiry in collections
    /// that set none of their own, `_default._default` included.
    pub fn max_ttl(&self) -> u32 {
        self.max_ttl.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Sets the bucket's max TTL (seconds, at most `i32::MAX`; 0: none). Mutations from now on
    /// are capped; stored expiries are not changed.
    pub async fn set_max_ttl(&self, seconds: u32) -> Result<(), EngineError> {
        if seconds > crate::collections::MAX_TTL_MAX {
            return Err(EngineError::Invalid(format!(
                "max_ttl must be at most {} seconds",
                crate::collections::MAX_TTL_MAX
            )));
        }
        let _config = self.config_lock.lock().await;
        self.write_config(self.revs_limit(), seconds).await?;
        self.max_ttl
            .store(seconds, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    async fn write_config(&self, revs_limit: u32, max_ttl: u32) -> Result<(), EngineError> {
        let config = BucketConfig {
            name: self.name.clone(),
            vbuckets: self.vbuckets,
            created_ms: self.created_ms,
            revs_limit,
            max_ttl,
            partitioned: self.partitioned,
        };
        let mut batch = Batch::new();
        batch.put(
            Cf::Meta,
            keys::meta::bucket_conf(self.id),
            serde_json::to_vec(&config).unwrap_or_default(),
        );
        Ok(self.store.commit(batch).await?)
    }

    /// The `doc` key of a document.
    pub(crate) fn doc_storage_key(&self, key: DocKey<'_>) -> Vec<u8> {
        keys::doc_key(self.id, self.vbucket_of(key.key), key.collection, key.key)
    }

    pub(crate) fn is_expired(&self, expiry: u32) -> bool {
        expiry != 0 && expiry <= self.clock.now_secs()
    }

    /// Locks the documents `keys` until the guard is dropped (see `settee-keylocks`).
    pub(crate) async fn lock_keys<'a, 'k>(
        &'a self,
        keys: impl Iterator<Item = DocKey<'k>>,
    ) -> KeyGuard<'a> {
        let names: Vec<Vec<u8>> = keys.map(|key| key.lock_name()).collect();
        self.key_locks.lock(names.iter().map(Vec::as_slice)).await
    }

    /// Assigns seqnos and CASes to `writes`, commits them as one durable batch, and returns
    /// what each got (for a removal, its purge marker's). Callers hold the key locks.
    pub(crate) async fn commit_writes(
        &self,
        writes: &mut [PlannedWrite],
    ) -> Result<Vec<Committed>, EngineError> {
        self.commit_writes_with(writes, Batch::new()).await
    }

    /// [`Bucket::commit_writes`] plus `extra` operations in the same atomic batch.
    pub(crate) async fn commit_writes_with(
        &self,
        writes: &mut [PlannedWrite],
        extra: Batch,
    ) -> Result<Vec<Committed>, EngineError> {
        if self.dropped.load(std::sync::atomic::Ordering::Acquire) {
            return Err(EngineError::Invalid("database was deleted".into()));
        }
        for write in writes.iter_mut() {
            check_key_in(write.collection, &write.key)?;
            // Defence in depth behind the doors' checks: a record that would not decode is
            // never written (0.1.0 stored empty trees, and every scan then failed on them).
            if let Some(record) = write.record.as_ref() {
                record
                    .check_storable()
                    .map_err(EngineError::InvalidRecord)?;
            }
            // The structural index is derived from the winner's body: rebuilt on every write,
            // here, before any lock is taken (it is O(body) for large bodies).
            if let Some(record) = write.record.as_mut() {
                record.index = match record.winner() {
                    Some(winner) if winner.json && !winner.deleted => {
                        crate::subdoc::index::build(&winner.body)
                            .map(Bytes::from)
                            .unwrap_or_default()
                    }
                    _ => Bytes::new(),
                };
            }
        }
        // A new document's key may have a purge marker to delete (replica.md). Looked up
        // before the vbucket locks: the callers' key locks keep the answer true until commit.
        let new_keys: Vec<Option<(u16, u32, &[u8])>> = writes
            .iter()
            .map(|write| {
                let key = (write.vbucket, write.collection, write.key.as_slice());
                write.previous.is_none().then_some(key)
            })
            .collect();
        let markers = self.find_markers(&new_keys)?;
        let mut batch = extra;
        let mut committed = Vec::with_capacity(writes.len());
        let pending = {
            let mut vbuckets: Vec<u16> = writes.iter().map(|write| write.vbucket).collect();
            vbuckets.sort_unstable();
            vbuckets.dedup();
            let mut guards: Vec<(u16, parking_lot::MutexGuard<'_, VbSlot>)> = vbuckets
                .iter()
                .map(|vbucket| (*vbucket, self.vb_states[*vbucket as usize].lock()))
                .collect();
            // Only an active vbucket takes writes (replica.md); checked under its lock, which a
            // role change takes.
            for vbucket in &vbuckets {
                self.check_active(*vbucket)?;
            }
            let epoch = self.store.epoch();
            // Checked under the vbucket locks, which a manifest change takes all of: no write
            // to a collection is staged against a manifest that changed since the check, nor
            // gets a seqno above the collection's drop event.
            let collections = self.collections_for_write(epoch)?;
            let manifest = &collections.manifest;
            if writes
                .iter()
                .any(|write| !manifest.is_live(write.collection))
            {
                return Err(manifest.unknown_collection().into());
            }
            if guards.iter().any(|(_, slot)| slot.epoch != epoch) {
                let live = manifest.collection_ids();
                for (vbucket, slot) in guards.iter_mut() {
                    if slot.epoch != epoch {
                        self.reload_vb_state(*vbucket, slot, epoch, &live)?;
                    }
                }
            }
            let now = self.now_secs();
            for (write, marker) in writes.iter_mut().zip(markers) {
                let Some((_, slot)) = guards.iter_mut().find(|(vb, _)| *vb == write.vbucket) else {
                    return Err(EngineError::Invalid("vbucket out of range".into()));
                };
                if let (true, Some(record)) = (write.apply_max_ttl, write.record.as_mut()) {
                    if !record.is_deleted() {
                        let max_ttl = self.effective_max_ttl(manifest, write.collection);
                        record.expiry = capped_expiry(record.expiry, max_ttl, now);
                    }
                }
                committed.push(self.stage_write(&mut batch, slot, write, marker));
            }
            // Collection counters are written once the bucket has collections (its manifest
            // changed at least once); before that, the vbucket's are collection 0's.
            let with_collections = manifest.uid() > 0;
            for (vbucket, slot) in &guards {
                let mut touched: Vec<u32> = Vec::new();
                if with_collections {
                    touched.extend(
                        writes
                            .iter()
                            .filter(|write| write.vbucket == *vbucket)
                            .map(|write| write.collection),
                    );
                    touched.sort_unstable();
                    touched.dedup();
                }
                slot.persist(
                    &mut batch,
                    self.id,
                    *vbucket,
                    with_collections,
                    touched.into_iter(),
                );
            }
            // Enqueued while the vbucket states are locked: queue order is seqno order. Staged
            // on the states as of `epoch`: the store refuses it if a write failed since.
            self.store.commit_in_epoch(batch, epoch)
        };
        pending.await?;
        for (write, done) in writes.iter().zip(&committed) {
            if done.seqno != 0 {
                self.visible_high[write.vbucket as usize]
                    .fetch_max(done.seqno, std::sync::atomic::Ordering::AcqRel);
            }
        }
        self.accounts_changed();
        let designs = writes
            .iter()
            .any(|write| write.key.starts_with(b"_design/"));
        if designs {
            self.access.epoch.advance_designs();
        }
        self.changed.send_modify(|version| *version += 1);
        if designs {
            self.designs_written().await;
        }
        Ok(committed)
    }

    /// Enqueues `batch`, a write of collection `cid` in `vbucket` that changes no counters (a
    /// `_local` document), checking under the vbucket's lock that the collection is live, as
    /// [`Bucket::commit_writes`] does. Returns the commit to await.
    pub(crate) fn commit_in_collection(
        &self,
        vbucket: u16,
        cid: u32,
        batch: Batch,
    ) -> Result<
        impl std::future::Future<Output = Result<(), settee_storage::StoreError>>,
        EngineError,
    > {
        let slot = self
            .vb_states
            .get(vbucket as usize)
            .ok_or_else(|| EngineError::Invalid("vbucket out of range".into()))?;
        let _slot = slot.lock();
        let collections = self.collections_for_write(self.store.epoch())?;
        if !collections.manifest.is_live(cid) {
            return Err(collections.manifest.unknown_collection().into());
        }
        Ok(self.store.commit(batch))
    }

    /// After a failed write (the store's epoch moved), reloads a vbucket's counts (and those of
    /// its `live` collections) from disk: the ones in memory may count writes that never
    /// happened. High seqnos keep their value in memory when that is higher, so a seqno handed
    /// to a failed write is never handed out again (a gap in seqnos is harmless; a seqno naming
    /// two different writes is not).
    pub(crate) fn reload_vb_state(
        &self,
        vbucket: u16,
        slot: &mut VbSlot,
        epoch: u64,
        live: &[u32],
    ) -> Result<(), EngineError> {
        let (state, mut collections) =
            read_states(&self.store, self.id, vbucket, live, slot.state.high_seqno)?;
        for (cid, stats) in collections.iter_mut() {
            if let Some(in_memory) = slot.collection(*cid) {
                stats.high_seqno = stats.high_seqno.max(in_memory.high_seqno);
            }
        }
        *slot = VbSlot {
            state,
            collections,
            epoch,
        };
        Ok(())
    }

    /// Stages one write; `marker` is the seqno of the key's purge marker, deleted with it.
    fn stage_write(
        &self,
        batch: &mut Batch,
        slot: &mut VbSlot,
        write: &mut PlannedWrite,
        marker: Option<u64>,
    ) -> Committed {
        let (id, vbucket, cid) = (self.id, write.vbucket, write.collection);
        let doc_key = keys::doc_key(id, vbucket, cid, &write.key);
        if let Some(seqno) = marker {
            crate::purge_marker::stage_marker_removal(batch, id, (vbucket, cid, &write.key), seqno);
        }
        if let Some(previous) = write.previous {
            batch.delete(Cf::Seq, keys::seq_key(id, vbucket, previous.seqno));
            if previous.expiry != 0 {
                batch.delete(
                    Cf::Exp,
                    keys::exp_key(id, vbucket, cid, previous.expiry, &write.key),
                );
            }
            slot.state.remove(previous.deleted, previous.record_bytes);
            slot.collection_mut(cid)
                .remove(previous.deleted, previous.record_bytes);
        }
        for (md5, body) in write.new_attachments.drain(..) {
            batch.put(
                Cf::Att,
                keys::att_key(id, vbucket, cid, &write.key, &md5),
                body.to_vec(),
            );
        }
        write
            .old_revisions
            .stage(batch, id, vbucket, cid, &write.key);
        let Some(record) = write.record.as_mut() else {
            crate::old_revs::drop_all(batch, id, vbucket, cid, &write.key);
            batch.delete(Cf::Doc, doc_key);
            let (lower, upper) = {
                let prefix = keys::att_prefix(id, vbucket, cid, &write.key);
                let upper = keys::prefix_end(&prefix);
                (prefix, upper)
            };
            batch.delete_range(Cf::Att, lower, upper);
            // The removal gets a seqno of its own, so that it reaches the replicas.
            return self.stage_new_marker(batch, slot, (vbucket, cid, &write.key));
        };
        slot.state.high_seqno += 1;
        record.seqno = slot.state.high_seqno;
        record.cas = self.hlc.next(self.clock.as_ref());
        if record.expiry != 0 {
            batch.put(
                Cf::Exp,
                keys::exp_key(id, vbucket, cid, record.expiry, &write.key),
                Vec::new(),
            );
        }
        if record.is_deleted() && !record.xattrs.is_empty() {
            // User xattrs go with the body; system ones stay on the tombstone.
            record.xattrs = crate::xattrs::system_only(&record.xattrs);
        }
        if let Some(nonce) = write.macro_nonce {
            let body = record
                .winner()
                .map(|leaf| leaf.body.clone())
                .unwrap_or_default();
            record.xattrs = crate::subdoc::expand_macros(
                &record.xattrs,
                nonce,
                record.cas,
                record.seqno,
                &body,
            );
        }
        let entry = crate::change_entry::ChangeEntry::of_record(vbucket, cid, &write.key, record);
        batch.put(
            Cf::Seq,
            keys::seq_key(id, vbucket, record.seqno),
            entry.encode(),
        );
        let encoded = record.encode();
        let record_bytes = encoded.len() as u64;
        slot.state.add(record.is_deleted(), record_bytes);
        let stats = slot.collection_mut(cid);
        stats.add(record.is_deleted(), record_bytes);
        stats.high_seqno = record.seqno;
        batch.put(Cf::Doc, doc_key, encoded);
        Committed {
            seqno: record.seqno,
            cas: record.cas,
        }
    }
}
