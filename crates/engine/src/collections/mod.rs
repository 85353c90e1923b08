//! Couchbase scopes and collections (`docs/format/collections.md`). A bucket holds scopes, a
//! scope holds collections, a document lives in exactly one collection; `_default._default`
//! (id 0) always exists and keeps the storage keys of format version 1.
//!
//! - the [`Manifest`] value (validation, the stored record, kv_engine's JSON, name lookups, and
//!   [`Manifest::plan`], which turns a change into the next manifest and its system events) is
//!   pure and lives in the `settee-manifest` crate;
//! - `event.rs`: system events, the version 5 entries of the `seq` column family;
//! - `change.rs`: [`crate::Bucket::create_scope`] and the other changes, one atomic batch each
//!   under every vbucket's lock;
//! - `purge.rs`: dropped collections' data removed in the background (policy and worker);
//! - this file: the bucket's collections state in memory (live manifest, dropped collections
//!   not purged yet) and what readers and writers ask of it.

mod change;
mod event;
mod purge;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use settee_storage::{Cf, Store};

pub use change::{ManifestRouter, RoutedChange, FORMAT_VERSION};
pub use event::SystemEvent;
pub(crate) use event::VERSION_EVENT;
pub use settee_manifest::{
    check_new_name, Collection, Manifest, ManifestChange, ManifestLimits, Scope, SystemEventKind,
    DEFAULT_NAME, MAX_TTL_MAX, NAME_BYTES_MAX,
};

pub(crate) use purge::PurgeHooks;
pub use purge::{plan_purge_round, CollectionPurgeHook, PurgeRound};

use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::keys;
use crate::seqvec::SeqVector;

/// A dropped collection whose data is not purged yet (`meta` `bucket/dropped/`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedCollection {
    /// The id of the scope it was in.
    pub scope: u32,
    pub name: String,
    /// The manifest uid of the drop.
    pub uid: u64,
    /// The purger has removed its data from vbuckets `0..vbuckets_done`.
    pub vbuckets_done: u16,
}

/// The bucket's collections as they are now.
#[derive(Clone, Debug)]
pub(crate) struct CollectionsState {
    pub manifest: Arc<Manifest>,
    /// Dropped collections whose data the purger has not removed yet, by id.
    pub dropped: Arc<BTreeMap<u32, DroppedCollection>>,
    /// The store epoch this state was last known to match the disk in: a manifest change is
    /// made visible here before its batch is durable, and a failed write (the epoch moves)
    /// makes the next writer read the state from disk again.
    pub epoch: u64,
}

impl CollectionsState {
    /// The state as stored: the manifest (absent: the default one) and the dropped records.
    pub(crate) fn read(store: &Store, bucket_id: u32) -> Result<CollectionsState, EngineError> {
        let epoch = store.epoch();
        let manifest = match store.get(Cf::Meta, &keys::meta::bucket_manifest(bucket_id))? {
            Some(raw) => Manifest::decode(&raw)?,
            None => Manifest::default(),
        };
        let prefix = keys::meta::dropped_prefix(bucket_id);
        let upper = keys::prefix_end(&prefix);
        let mut dropped = BTreeMap::new();
        for item in store.scan(Cf::Meta, &prefix, &upper, false) {
            let (key, value) = item?;
            let cid = keys::meta::parse_dropped_collection(bucket_id, &key)
                .ok_or_else(|| EngineError::Corrupt("dropped collection key".into()))?;
            let record: DroppedCollection = serde_json::from_slice(&value)
                .map_err(|error| EngineError::Corrupt(format!("dropped collection: {error}")))?;
            dropped.insert(cid, record);
        }
        Ok(CollectionsState {
            manifest: Arc::new(manifest),
            dropped: Arc::new(dropped),
            epoch,
        })
    }
}

/// What a reader of many entries makes of a collection id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Liveness {
    Live,
    /// Dropped, data not purged yet: its leftovers are passed over silently.
    Dropped,
    /// Neither: a damaged record (counted as such).
    Unknown,
}

/// A reader's snapshot of the collections state, taken once per read.
pub(crate) struct CollectionsView {
    state: CollectionsState,
    refreshed: bool,
}

impl CollectionsView {
    /// Whether `cid` is live, dropped or unknown. An id the snapshot does not know may belong
    /// to a collection created since it was taken: the snapshot is taken again once.
    pub(crate) fn classify(&mut self, bucket: &Bucket, cid: u32) -> Liveness {
        let known = |state: &CollectionsState| {
            if state.manifest.is_live(cid) {
                Some(Liveness::Live)
            } else if state.dropped.contains_key(&cid) {
                Some(Liveness::Dropped)
            } else {
                None
            }
        };
        if let Some(liveness) = known(&self.state) {
            return liveness;
        }
        if !self.refreshed {
            self.refreshed = true;
            self.state = bucket.collections.read().clone();
            if let Some(liveness) = known(&self.state) {
                return liveness;
            }
        }
        Liveness::Unknown
    }
}

impl Bucket {
    /// The bucket's current manifest.
    pub fn manifest(&self) -> Arc<Manifest> {
        self.collections.read().manifest.clone()
    }

    /// Dropped collections whose data is not purged yet, by id.
    pub fn dropped_collections(&self) -> BTreeMap<u32, DroppedCollection> {
        (*self.collections.read().dropped).clone()
    }

    pub(crate) fn collections_view(&self) -> CollectionsView {
        CollectionsView {
            state: self.collections.read().clone(),
            refreshed: false,
        }
    }

    /// [`EngineError::UnknownCollection`] unless collection `cid` is live. Collection 0
    /// always is (it cannot be dropped), without a look at the manifest.
    pub(crate) fn check_live(&self, cid: u32) -> Result<(), EngineError> {
        if self.is_collection_live(cid) {
            return Ok(());
        }
        let state = self.collections.read();
        if state.manifest.is_live(cid) {
            Ok(())
        } else {
            Err(state.manifest.unknown_collection().into())
        }
    }

    /// Whether collection `cid` is live now: one atomic load for ids below 64 (every request
    /// of the KV door asks), the manifest otherwise.
    pub fn is_collection_live(&self, cid: u32) -> bool {
        match cid {
            0 => true,
            1..=63 => {
                self.live_bits.load(std::sync::atomic::Ordering::Acquire) & (1u64 << cid) != 0
            }
            _ => self.collections.read().manifest.is_live(cid),
        }
    }

    /// Replaces the collections state (its write lock held) and its `live_bits`.
    pub(crate) fn replace_collections(&self, state: &mut CollectionsState, next: CollectionsState) {
        self.live_bits.store(
            live_bits(&next.manifest),
            std::sync::atomic::Ordering::Release,
        );
        *state = next;
    }

    /// The collections state for a writer holding vbucket locks: read from disk again if a
    /// write failed since it was last known to match it (see [`CollectionsState::epoch`]).
    pub(crate) fn collections_for_write(
        &self,
        epoch: u64,
    ) -> Result<CollectionsState, EngineError> {
        {
            let state = self.collections.read();
            if state.epoch == epoch {
                return Ok(state.clone());
            }
        }
        let mut state = self.collections.write();
        if state.epoch != epoch {
            let mut fresh = CollectionsState::read(&self.store, self.id)?;
            fresh.epoch = epoch;
            self.replace_collections(&mut state, fresh);
        }
        Ok(state.clone())
    }

    /// The max TTL that applies to collection `cid`'s mutations, in seconds (0: none): the
    /// collection's own when it sets one, else the bucket's.
    pub(crate) fn effective_max_ttl(&self, manifest: &Manifest, cid: u32) -> u32 {
        let own = manifest
            .collection(cid)
            .and_then(|(_, collection)| collection.max_ttl);
        own.unwrap_or_else(|| self.max_ttl())
    }

    /// (live documents, deleted documents) of one collection.
    pub fn doc_counts_in(&self, cid: u32) -> Result<(u64, u64), EngineError> {
        self.check_live(cid)?;
        Ok((0..self.vbuckets)
            .filter_map(|vbucket| self.collection_state(cid, vbucket))
            .fold((0, 0), |(live, deleted), state| {
                (live + state.live, deleted + state.deleted)
            }))
    }

    /// [`Bucket::doc_counts_in`] over the vbuckets `only` marks.
    pub fn doc_counts_only(&self, cid: u32, only: &[bool]) -> Result<(u64, u64), EngineError> {
        self.check_live(cid)?;
        Ok((0..self.vbuckets)
            .filter(|vbucket| only.get(usize::from(*vbucket)) == Some(&true))
            .filter_map(|vbucket| self.collection_state(cid, vbucket))
            .fold((0, 0), |(live, deleted), state| {
                (live + state.live, deleted + state.deleted)
            }))
    }

    /// Bytes of one collection's document records as stored (before compression).
    pub fn record_bytes_in(&self, cid: u32) -> Result<u64, EngineError> {
        self.check_live(cid)?;
        Ok((0..self.vbuckets)
            .filter_map(|vbucket| self.collection_state(cid, vbucket))
            .map(|state| state.record_bytes)
            .sum())
    }

    /// Per vbucket, the highest durable seqno of one collection's entries and events: the
    /// collection's `update_seq`.
    pub fn high_seqnos_in(&self, cid: u32) -> Result<SeqVector, EngineError> {
        self.check_live(cid)?;
        let visible = self.high_seqnos();
        Ok(SeqVector::from_seqnos(
            (0..self.vbuckets)
                .map(|vbucket| {
                    let high = self
                        .collection_state(cid, vbucket)
                        .map_or(0, |state| state.high_seqno);
                    high.min(visible.get(vbucket))
                })
                .collect(),
        ))
    }

    /// Documents (live and deleted) of collection `cid` in `vbucket`.
    pub(crate) fn collection_vbucket_docs(&self, cid: u32, vbucket: u16) -> u64 {
        self.collection_state(cid, vbucket)
            .map_or(0, |state| state.live + state.deleted)
    }
}

/// [`Bucket::live_bits`] of `manifest`: bit `i` for each live collection id `i` below 64.
pub(crate) fn live_bits(manifest: &Manifest) -> u64 {
    manifest
        .collection_ids()
        .into_iter()
        .filter(|id| *id < 64)
        .fold(0, |bits, id| bits | (1u64 << id))
}
