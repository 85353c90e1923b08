//! Manifest changes (`docs/format/collections.md`, "Manifest changes"): each one atomic batch
//! written under every vbucket's lock, so no write to a collection is staged against a
//! manifest that changed since its check, and none gets a seqno above the collection's drop
//! event.

use std::sync::Arc;

use settee_storage::{Batch, Cf};

use super::event::SystemEvent;
use super::{CollectionsState, DroppedCollection};
use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::keys;
use crate::vb_state::{VbSlot, VbState};
use settee_manifest::{Manifest, ManifestChange, PlannedChange, SystemEventKind};

/// What a cluster node's manifest change becomes: committed through the cluster map, then
/// followed here (docs/format/cluster-map.md, `ChangeManifest`).
pub type RoutedChange =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), EngineError>> + Send + 'static>>;

/// Decides the manifest changes of the buckets a cluster holds, instead of this node alone
/// (`Engine::set_manifest_router`). The engine does not know the cluster: only that some
/// buckets' changes are decided elsewhere and reach it through `Bucket::adopt_manifest`.
pub trait ManifestRouter: Send + Sync {
    /// `None`: `bucket` is this node's alone and changes here. Otherwise the change, which
    /// resolves once this node's bucket has it; its refusals are the planner's, typed as a
    /// single node's are.
    fn route(
        &self,
        bucket: String,
        change: ManifestChange,
        limits: settee_manifest::ManifestLimits,
    ) -> Option<RoutedChange>;
}

/// The format version a data directory has once a bucket's manifest changed (collections.md:
/// older binaries would misparse long keys in whole-bucket scans).
pub const FORMAT_VERSION: u32 = 2;

impl Bucket {
    /// Creates scope `name`; returns the manifest it leaves.
    pub async fn create_scope(&self, name: &str) -> Result<Arc<Manifest>, EngineError> {
        self.change_manifest(ManifestChange::CreateScope { name: name.into() })
            .await
    }

    /// Drops scope `name` and every collection in it (their data is purged in the
    /// background). The `_default` scope cannot be dropped.
    pub async fn drop_scope(&self, name: &str) -> Result<Arc<Manifest>, EngineError> {
        self.change_manifest(ManifestChange::DropScope { name: name.into() })
            .await
    }

    /// Creates collection `name` in `scope`, with its own max TTL (`None`: the bucket's
    /// applies; `Some(0)`: none).
    pub async fn create_collection(
        &self,
        scope: &str,
        name: &str,
        max_ttl: Option<u32>,
    ) -> Result<Arc<Manifest>, EngineError> {
        self.change_manifest(ManifestChange::CreateCollection {
            scope: scope.into(),
            name: name.into(),
            max_ttl,
        })
        .await
    }

    /// Drops collection `scope.name`: from the answer on, it does not exist for readers and
    /// writers; its data is purged in the background. `_default._default` cannot be dropped.
    pub async fn drop_collection(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<Arc<Manifest>, EngineError> {
        self.change_manifest(ManifestChange::DropCollection {
            scope: scope.into(),
            name: name.into(),
        })
        .await
    }

    /// Changes the max TTL of collection `scope.name` (mutations from now on).
    pub async fn set_collection_max_ttl(
        &self,
        scope: &str,
        name: &str,
        max_ttl: Option<u32>,
    ) -> Result<Arc<Manifest>, EngineError> {
        self.change_manifest(ManifestChange::SetMaxTtl {
            scope: scope.into(),
            name: name.into(),
            max_ttl,
        })
        .await
    }

    /// Applies one manifest change as one durable batch and answers once it is durable:
    /// 1. validate it against the current manifest (`Manifest::plan`);
    /// 2. under every vbucket's lock, in ascending order: give each vbucket the next seqno for
    ///    each event and stage its entry, the counters, the manifest record, dropped-collection
    ///    records (and, at the bucket's first change, collection 0's counters and the format
    ///    version);
    /// 3. enqueue, make the new manifest the live one, release the locks, await the fsync.
    ///
    /// If the batch fails, the store's epoch moves and the state is read back from disk.
    pub async fn change_manifest(
        &self,
        change: ManifestChange,
    ) -> Result<Arc<Manifest>, EngineError> {
        let limits = self.manifest_limits;
        self.rewrite_manifest(None, |current| Ok(Some(current.plan(&change, limits)?)))
            .await
    }

    /// A cluster node's bucket takes the cluster map's manifest `target` (the same ids, names,
    /// max TTLs and uid; docs/format/cluster-map.md): the events of the difference
    /// (`Manifest::events_to`) go into the vbuckets `actives` marks only, as replicas get them
    /// from their actives' streams. Nothing happens when the bucket's uid is at or above
    /// `target`'s. Returns the manifest the bucket has after.
    pub async fn adopt_manifest(
        &self,
        target: &Manifest,
        actives: &[bool],
    ) -> Result<Arc<Manifest>, EngineError> {
        self.rewrite_manifest(Some(actives), |current| {
            Ok((target.uid() > current.uid()).then(|| PlannedChange {
                events: current.events_to(target),
                manifest: target.clone(),
            }))
        })
        .await
    }

    /// The one durable batch of a manifest change (`change_manifest`): `plan` sees the current
    /// manifest and gives the next one and its events (`None`: nothing to do); the events go
    /// into every vbucket, or those `only` marks.
    async fn rewrite_manifest(
        &self,
        only: Option<&[bool]>,
        plan: impl FnOnce(&Manifest) -> Result<Option<PlannedChange>, EngineError>,
    ) -> Result<Arc<Manifest>, EngineError> {
        let _changing = self.manifest_lock.lock().await;
        if self.dropped.load(std::sync::atomic::Ordering::Acquire) {
            return Err(EngineError::Invalid("database was deleted".into()));
        }
        let (pending, next, highs) = {
            let mut guards: Vec<parking_lot::MutexGuard<'_, VbSlot>> =
                self.vb_states.iter().map(|slot| slot.lock()).collect();
            let epoch = self.store.epoch();
            let current = self.collections_for_write(epoch)?;
            let live = current.manifest.collection_ids();
            for (vbucket, slot) in guards.iter_mut().enumerate() {
                if slot.epoch != epoch {
                    self.reload_vb_state(vbucket as u16, slot, epoch, &live)?;
                }
            }
            let Some(planned) = plan(&current.manifest)? else {
                return Ok(current.manifest.clone());
            };
            let uid = planned.manifest.uid();
            let first_change = current.manifest.uid() == 0;
            let mut batch = Batch::new();
            let mut highs = Vec::with_capacity(guards.len());
            for (vbucket, slot) in guards.iter_mut().enumerate() {
                let vbucket = vbucket as u16;
                let events = match only {
                    Some(only) if !only.get(usize::from(vbucket)).copied().unwrap_or(false) => {
                        &[][..]
                    }
                    _ => &planned.events[..],
                };
                for planned_event in events {
                    slot.state.high_seqno += 1;
                    let seqno = slot.state.high_seqno;
                    let cas = self.hlc.next(self.clock.as_ref());
                    let event = SystemEvent::of_plan(vbucket, seqno, cas, uid, planned_event);
                    batch.put(
                        Cf::Seq,
                        keys::seq_key(self.id, vbucket, seqno),
                        event.encode(),
                    );
                    self.stage_event_counts(&mut batch, vbucket, slot, &event);
                }
                if first_change {
                    let zero = slot.collection(0).copied().unwrap_or(slot.state);
                    batch.put(
                        Cf::Meta,
                        keys::meta::collection_stats(self.id, 0, vbucket),
                        zero.encode().to_vec(),
                    );
                }
                batch.put(
                    Cf::Meta,
                    keys::meta::vb_stats(self.id, vbucket),
                    slot.state.encode().to_vec(),
                );
                highs.push(slot.state.high_seqno);
            }
            let mut dropped = (*current.dropped).clone();
            for event in &planned.events {
                if event.kind != SystemEventKind::CollectionDropped {
                    continue;
                }
                let name = current
                    .manifest
                    .collection(event.collection_id)
                    .map(|(_, collection)| collection.name.clone())
                    .unwrap_or_default();
                let record = DroppedCollection {
                    scope: event.scope_id,
                    name,
                    uid,
                    vbuckets_done: 0,
                };
                batch.put(
                    Cf::Meta,
                    keys::meta::dropped_collection(self.id, event.collection_id),
                    serde_json::to_vec(&record).unwrap_or_default(),
                );
                dropped.insert(event.collection_id, record);
            }
            batch.put(
                Cf::Meta,
                keys::meta::bucket_manifest(self.id),
                planned.manifest.encode(),
            );
            if first_change {
                batch.put(
                    Cf::Meta,
                    keys::meta::FORMAT_VERSION,
                    FORMAT_VERSION.to_be_bytes().to_vec(),
                );
            }
            let next = CollectionsState {
                manifest: Arc::new(planned.manifest),
                dropped: Arc::new(dropped),
                epoch,
            };
            // Enqueued under every vbucket lock (queue order is seqno order), and live before
            // they are released: a writer that takes one after this sees the new manifest.
            let pending = self.store.commit_in_epoch(batch, epoch);
            self.replace_collections(&mut self.collections.write(), next.clone());
            (pending, next, highs)
        };
        if let Err(error) = pending.await {
            // The store's epoch moved: writers read the state from disk again; so do readers
            // from now on.
            let mut fresh = CollectionsState::read(&self.store, self.id)?;
            fresh.epoch = self.store.epoch();
            self.replace_collections(&mut self.collections.write(), fresh);
            return Err(error.into());
        }
        for (visible, high) in self.visible_high.iter().zip(highs) {
            visible.fetch_max(high, std::sync::atomic::Ordering::AcqRel);
        }
        if !next.dropped.is_empty() {
            self.purge_wake.notify_one();
        }
        self.changed.send_modify(|version| *version += 1);
        Ok(next.manifest)
    }

    /// What an event does to a vbucket's collection counters: a created collection starts
    /// empty at its event's seqno, a modified one's high seqno moves to it, a dropped one's
    /// counts leave the vbucket's at once.
    pub(crate) fn stage_event_counts(
        &self,
        batch: &mut Batch,
        vbucket: u16,
        slot: &mut VbSlot,
        event: &SystemEvent,
    ) {
        let cid = event.collection_id;
        let stats_key = keys::meta::collection_stats(self.id, cid, vbucket);
        match event.kind {
            SystemEventKind::CollectionCreated | SystemEventKind::CollectionModified => {
                let stats = slot.collection_mut(cid);
                if event.kind == SystemEventKind::CollectionCreated {
                    *stats = VbState::default();
                }
                stats.high_seqno = event.seqno;
                batch.put(Cf::Meta, stats_key, stats.encode().to_vec());
            }
            SystemEventKind::CollectionDropped => {
                if let Some(stats) = slot.remove_collection(cid) {
                    slot.state.subtract(&stats);
                }
                batch.delete(Cf::Meta, stats_key);
            }
            SystemEventKind::ScopeCreated | SystemEventKind::ScopeDropped => {}
        }
    }
}
