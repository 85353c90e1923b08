//! Replica vbuckets (docs/format/replica.md): each vbucket's role on this node, persisted in
//! `meta` `bucket/vbrole/` (absent = active), and the write path of a replica, which stores
//! the records its active streamed with the active's seqnos, CASes and bytes.
//!
//! Front-door writes to a vbucket that is not active are refused with
//! [`EngineError::NotMyVbucket`] (`Bucket::commit_writes_with` checks it under the vbucket
//! locks). [`Bucket::apply_replica`] is the only writer of a replica vbucket: one atomic,
//! fsynced batch per call, idempotent for seqnos it already holds.

use std::sync::atomic::{AtomicU8, Ordering};

use bytes::Bytes;
use settee_storage::{Batch, Cf, Store};

use crate::bucket::{check_key_in, Bucket, Previous};
use crate::change_entry::ChangeEntry;
use crate::collections::SystemEvent;
use crate::error::EngineError;
use crate::failover::{encode_failover_log, FailoverEntry, FAILOVER_ENTRIES_MAX};
use crate::keys;
use crate::purge_marker::{stage_marker, stage_marker_removal, PurgeMarker};
use crate::record::{DocRecord, Header};
use crate::vb_state::{VbSlot, VbState};

/// The bit of a role's in-memory byte that pauses an active vbucket's front-door writes
/// during a takeover; never stored.
const WRITES_PAUSED: u8 = 0x80;

/// The longest a front-door write waits for a takeover's pause to end (the source's own
/// bound on the pause, docs/format/rebalance.md, is 5 s), and how often it looks.
pub const PAUSE_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(6);
const PAUSE_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// A vbucket's role on this node (Couchbase's vbucket states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum VbRole {
    Active = 0,
    Replica = 1,
    Pending = 2,
    Dead = 3,
}

impl VbRole {
    pub fn from_u8(raw: u8) -> Option<VbRole> {
        [
            VbRole::Active,
            VbRole::Replica,
            VbRole::Pending,
            VbRole::Dead,
        ]
        .get(raw as usize)
        .copied()
    }
}

/// A document as its active stores it, received over a `settee_records` stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaDoc {
    pub seqno: u64,
    pub cas: u64,
    pub collection: u32,
    pub key: Vec<u8>,
    pub deleted: bool,
    /// The `doc` record's bytes (docs/format/document.md), stored unchanged.
    pub record: Bytes,
    /// Every attachment body the record references: (md5, body).
    pub attachments: Vec<([u8; 16], Bytes)>,
}

/// One item of a replica vbucket's stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicaItem {
    Doc(ReplicaDoc),
    Event(SystemEvent),
    /// A document the active purged whole (DCP_PURGE, replica.md).
    Purge(PurgeMarker),
}

impl ReplicaItem {
    pub fn seqno(&self) -> u64 {
        match self {
            ReplicaItem::Doc(doc) => doc.seqno,
            ReplicaItem::Event(event) => event.seqno,
            ReplicaItem::Purge(marker) => marker.seqno,
        }
    }

    /// The document the item writes or removes: (collection, key).
    fn document(&self) -> Option<(u32, &[u8])> {
        match self {
            ReplicaItem::Doc(doc) => Some((doc.collection, &doc.key)),
            ReplicaItem::Purge(marker) => Some((marker.collection, &marker.key)),
            ReplicaItem::Event(_) => None,
        }
    }
}

/// What [`Bucket::apply_replica`] stores in one batch.
#[derive(Clone, Debug, Default)]
pub struct ReplicaBatch {
    /// In seqno order.
    pub items: Vec<ReplicaItem>,
    /// The seqno the vbucket has reached once the batch is applied (at least the last item's;
    /// more after SEQNO_ADVANCED).
    pub high_seqno: u64,
    /// The DCP snapshot being applied, persisted with the batch.
    pub snapshot: (u64, u64),
}

/// A document record the active sends a replica: its stored bytes and attachment bodies.
pub type ReplicaRecord = (Bytes, Vec<([u8; 16], Bytes)>);

pub(crate) fn encode_role(role: VbRole, snapshot: (u64, u64)) -> Vec<u8> {
    let mut out = Vec::with_capacity(17);
    out.push(role as u8);
    out.extend_from_slice(&snapshot.0.to_be_bytes());
    out.extend_from_slice(&snapshot.1.to_be_bytes());
    out
}

fn decode_role(raw: &[u8]) -> Option<(VbRole, (u64, u64))> {
    let u64_at = |at: usize| Some(u64::from_be_bytes(raw.get(at..at + 8)?.try_into().ok()?));
    if raw.len() != 17 {
        return None;
    }
    Some((VbRole::from_u8(raw[0])?, (u64_at(1)?, u64_at(9)?)))
}

/// Every vbucket's role as stored (absent: active), read at open.
pub(crate) fn load_roles(
    store: &Store,
    bucket_id: u32,
    vbuckets: u16,
) -> Result<Vec<AtomicU8>, EngineError> {
    let roles: Vec<AtomicU8> = (0..vbuckets).map(|_| AtomicU8::new(0)).collect();
    let prefix = keys::meta::vb_role_prefix(bucket_id);
    for item in store.scan(Cf::Meta, &prefix, &keys::prefix_end(&prefix), false) {
        let (key, value) = item?;
        let vbucket = key
            .get(prefix.len()..)
            .and_then(|rest| rest.try_into().ok())
            .map(u16::from_be_bytes);
        match (
            vbucket.and_then(|vb| roles.get(vb as usize)),
            decode_role(&value),
        ) {
            (Some(slot), Some((role, _))) => slot.store(role as u8, Ordering::Relaxed),
            _ => return Err(EngineError::Corrupt("vbucket role".into())),
        }
    }
    Ok(roles)
}

fn invalid(reason: impl Into<String>) -> EngineError {
    EngineError::Invalid(reason.into())
}

impl Bucket {
    /// `vbucket`'s role on this node (out of range: dead).
    pub fn vbucket_role(&self, vbucket: u16) -> VbRole {
        self.roles
            .get(vbucket as usize)
            .and_then(|role| VbRole::from_u8(role.load(Ordering::Acquire) & !WRITES_PAUSED))
            .unwrap_or(VbRole::Dead)
    }

    /// Front-door writes need an active vbucket whose writes are not paused by a takeover,
    /// and on a cluster node the serving lease (`lease.rs`).
    pub(crate) fn check_active(&self, vbucket: u16) -> Result<(), EngineError> {
        let raw = self
            .roles
            .get(vbucket as usize)
            .map_or(VbRole::Dead as u8, |role| role.load(Ordering::Acquire));
        match VbRole::from_u8(raw & !WRITES_PAUSED) {
            Some(VbRole::Active) if raw & WRITES_PAUSED != 0 => Err(EngineError::Unavailable(
                format!("vbucket {vbucket} is being taken over by another node; retry"),
            )),
            Some(VbRole::Active) if self.lease.holds() => Ok(()),
            _ => Err(EngineError::NotMyVbucket { vbucket }),
        }
    }

    /// Pauses the front-door writes of an active `vbucket` for a rebalance's takeover
    /// (docs/format/rebalance.md, section 4): from the return on, every write is refused as
    /// temporarily unavailable (ETMPFAIL on the KV door) or waits (the CouchDB door,
    /// [`Bucket::wait_writable`]), and each write staged before has its seqno. The pause lasts until [`Bucket::resume_writes`] or the next role change.
    /// Returns false for a vbucket that is not active here.
    pub fn pause_writes(&self, vbucket: u16) -> bool {
        let Some(slot) = self.vb_states.get(vbucket as usize) else {
            return false;
        };
        let _slot = slot.lock();
        let role = &self.roles[vbucket as usize];
        let active = role.load(Ordering::Acquire) & !WRITES_PAUSED == VbRole::Active as u8;
        if active {
            role.fetch_or(WRITES_PAUSED, Ordering::AcqRel);
        }
        active
    }

    /// Whether a takeover pauses `vbucket`'s front-door writes now.
    pub fn writes_paused(&self, vbucket: u16) -> bool {
        self.roles
            .get(vbucket as usize)
            .is_some_and(|role| role.load(Ordering::Acquire) & WRITES_PAUSED != 0)
    }

    /// A CouchDB-door write waits out a takeover's pause (at most [`PAUSE_WAIT_MAX`]) rather
    /// than fail, as CouchDB clients do not retry a 503: the pause ends with the new map's
    /// role change (the write is then refused as not this node's, and a forwarded one routed
    /// again by the front node) or with the writes resumed. The KV door does not wait: it
    /// answers a temporary failure at once, which the SDKs retry with their backoff, as
    /// during a Couchbase takeover (a write held on the old active would be cancelled when
    /// the SDK drops that node from its map).
    pub async fn wait_writable(&self, vbucket: u16) {
        if !self.writes_paused(vbucket) {
            return;
        }
        let deadline = tokio::time::Instant::now() + PAUSE_WAIT_MAX;
        while self.writes_paused(vbucket) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(PAUSE_POLL).await;
        }
    }

    /// Ends a pause of [`Bucket::pause_writes`] (a takeover that did not happen).
    pub fn resume_writes(&self, vbucket: u16) {
        if let Some(role) = self.roles.get(vbucket as usize) {
            role.fetch_and(!WRITES_PAUSED, Ordering::AcqRel);
        }
    }

    /// The snapshot a replica vbucket was applying, as persisted ((0, 0): none).
    pub fn replica_snapshot(&self, vbucket: u16) -> Result<(u64, u64), EngineError> {
        let stored = self
            .store
            .get(Cf::Meta, &keys::meta::vb_role(self.id, vbucket))?;
        match stored {
            None => Ok((0, 0)),
            Some(raw) => decode_role(&raw)
                .map(|(_, snapshot)| snapshot)
                .ok_or_else(|| EngineError::Corrupt("vbucket role".into())),
        }
    }

    /// Sets `vbucket`'s role, durably, under its lock (no front-door write is staged across
    /// the change). Active deletes the record, so a lone node's data directory keeps none.
    pub async fn set_vbucket_role(&self, vbucket: u16, role: VbRole) -> Result<(), EngineError> {
        let slot = self
            .vb_states
            .get(vbucket as usize)
            .ok_or_else(|| invalid("vbucket out of range"))?;
        let snapshot = self.replica_snapshot(vbucket)?;
        let pending = {
            let _slot = slot.lock();
            let mut batch = Batch::new();
            let key = keys::meta::vb_role(self.id, vbucket);
            match role {
                VbRole::Active => batch.delete(Cf::Meta, key),
                _ => batch.put(Cf::Meta, key, encode_role(role, snapshot)),
            }
            self.roles[vbucket as usize].store(role as u8, Ordering::Release);
            self.store.commit(batch)
        };
        Ok(pending.await?)
    }

    /// Replaces a replica vbucket's failover log with its active's (STREAM_REQ's answer).
    pub async fn set_failover_log(
        &self,
        vbucket: u16,
        log: &[FailoverEntry],
    ) -> Result<(), EngineError> {
        if vbucket >= self.vbuckets || log.is_empty() || log.len() > FAILOVER_ENTRIES_MAX {
            return Err(invalid("a failover log of 1 to 25 entries for a vbucket"));
        }
        let _serial = self.failover_lock.lock().await;
        let mut batch = Batch::new();
        batch.put(
            Cf::Meta,
            keys::meta::failover_log(self.id, vbucket),
            encode_failover_log(log),
        );
        self.store.commit(batch).await?;
        self.failover_heads[vbucket as usize].store(log[0].uuid, Ordering::Release);
        Ok(())
    }

    /// The stored record of the document `entry` names, with its attachment bodies, if the
    /// record still holds `entry`'s seqno (what a `settee_records` stream sends).
    pub fn replica_record(
        &self,
        entry: &ChangeEntry,
    ) -> Result<Option<ReplicaRecord>, EngineError> {
        let key = keys::doc_key(self.id, entry.vbucket, entry.collection, &entry.key);
        let Some(raw) = self.store.get(Cf::Doc, &key)? else {
            return Ok(None);
        };
        let record = match DocRecord::decode(&raw) {
            Ok(record) if record.seqno == entry.seqno => record,
            Ok(_) => return Ok(None),
            Err(error) => {
                self.skip_corrupt_document(&entry.key, &error);
                return Ok(None);
            }
        };
        let mut attachments: Vec<([u8; 16], Bytes)> = Vec::new();
        for meta in record.leaves.iter().flat_map(|leaf| &leaf.attachments) {
            if attachments.iter().any(|(md5, _)| *md5 == meta.md5) {
                continue;
            }
            let att = keys::att_key(
                self.id,
                entry.vbucket,
                entry.collection,
                &entry.key,
                &meta.md5,
            );
            if let Some(body) = self.store.get(Cf::Att, &att)? {
                attachments.push((meta.md5, Bytes::from(body)));
            }
        }
        Ok(Some((Bytes::from(raw), attachments)))
    }

    /// Stores what a replica vbucket received, as one durable batch: each document's record,
    /// `seq` entry, expiry entry and attachment bodies, each event's entry, each purge (the
    /// document removed, its marker stored), the counters, the high seqno and the snapshot.
    /// Items at or below the vbucket's high seqno were applied before and are skipped.
    /// Returns how many items were applied.
    pub async fn apply_replica(
        &self,
        vbucket: u16,
        replica: ReplicaBatch,
    ) -> Result<usize, EngineError> {
        if vbucket >= self.vbuckets {
            return Err(invalid("vbucket out of range"));
        }
        if self.vbucket_role(vbucket) == VbRole::Active {
            return Err(invalid("vbucket is active on this node"));
        }
        let mut last = 0;
        let mut records = Vec::new();
        for item in &replica.items {
            if item.seqno() <= last || item.seqno() > replica.high_seqno {
                return Err(invalid("replica items out of seqno order"));
            }
            last = item.seqno();
            match item {
                ReplicaItem::Doc(doc) => records.push(check_replica_doc(doc)?),
                ReplicaItem::Purge(marker) => {
                    check_key_in(marker.collection, &marker.key)?;
                    if marker.vbucket != vbucket {
                        return Err(invalid("a purge marker of another vbucket"));
                    }
                }
                ReplicaItem::Event(_) => {}
            }
        }
        // The documents the batch writes or removes, in item order (a snapshot names each key
        // once at most, dcp.md).
        let documents: Vec<(u32, &[u8])> = replica
            .items
            .iter()
            .filter_map(ReplicaItem::document)
            .collect();
        let _guards = self
            .lock_keys(
                documents
                    .iter()
                    .map(|(cid, key)| crate::DocKey::new(*cid, key)),
            )
            .await;
        let mut previous = Vec::with_capacity(documents.len());
        for (cid, key) in &documents {
            let key = keys::doc_key(self.id, vbucket, *cid, key);
            let old = self.store.get_with(Cf::Doc, &key, |raw| {
                Header::decode(raw).ok().map(|header| Previous {
                    seqno: header.seqno,
                    expiry: header.expiry,
                    deleted: header.deleted,
                    record_bytes: raw.len() as u64,
                })
            })?;
            previous.push(old.flatten());
        }
        // A key without a record may have a purge marker, which the item replaces.
        let without: Vec<Option<(u16, u32, &[u8])>> = documents
            .iter()
            .zip(&previous)
            .map(|((cid, key), old)| old.is_none().then_some((vbucket, *cid, *key)))
            .collect();
        let markers = self.find_markers(&without)?;
        let mut batch = Batch::new();
        let mut applied = 0;
        let (pending, high) = {
            let mut slot = self.vb_states[vbucket as usize].lock();
            let epoch = self.store.epoch();
            let collections = self.collections_for_write(epoch)?;
            let manifest = &collections.manifest;
            if slot.epoch != epoch {
                self.reload_vb_state(vbucket, &mut slot, epoch, &manifest.collection_ids())?;
            }
            let mut records = records.iter();
            let mut olds = previous.into_iter().zip(markers);
            let mut touched = Vec::new();
            for item in &replica.items {
                let held = slot.state.high_seqno;
                let record = match item {
                    ReplicaItem::Doc(_) => records.next(),
                    _ => None,
                };
                let old = match item {
                    ReplicaItem::Event(_) => None,
                    _ => olds.next(),
                };
                if item.seqno() <= held {
                    continue;
                }
                applied += 1;
                slot.state.high_seqno = item.seqno();
                if let Some((cid, _)) = item.document() {
                    // Live by this node's manifest, or by the stream's own creation event (a
                    // cluster node may follow the map's manifest a moment later).
                    let live = manifest.is_live(cid) || slot.collection(cid).is_some();
                    if live {
                        touched.push(cid);
                    }
                    let (previous, marker) = old.unwrap_or_default();
                    let held = Held {
                        previous,
                        marker,
                        live,
                    };
                    match (item, record) {
                        (ReplicaItem::Doc(doc), Some(record)) => self
                            .stage_replica_doc(&mut batch, &mut slot, vbucket, doc, record, held),
                        (ReplicaItem::Purge(marker), _) => {
                            self.stage_replica_purge(&mut batch, &mut slot, marker, held)
                        }
                        _ => {}
                    }
                } else if let ReplicaItem::Event(event) = item {
                    self.hlc.observe(event.cas);
                    let key = keys::seq_key(self.id, vbucket, event.seqno);
                    batch.put(Cf::Seq, key, event.encode());
                    // The vbucket's collection counters move as the active's did.
                    self.stage_event_counts(&mut batch, vbucket, &mut slot, event);
                }
            }
            slot.state.high_seqno = slot.state.high_seqno.max(replica.high_seqno);
            touched.sort_unstable();
            touched.dedup();
            let with_collections = manifest.uid() > 0;
            slot.persist(
                &mut batch,
                self.id,
                vbucket,
                with_collections,
                touched.into_iter(),
            );
            batch.put(
                Cf::Meta,
                keys::meta::vb_role(self.id, vbucket),
                encode_role(self.vbucket_role(vbucket), replica.snapshot),
            );
            (
                self.store.commit_in_epoch(batch, epoch),
                slot.state.high_seqno,
            )
        };
        pending.await?;
        self.visible_high[vbucket as usize].fetch_max(high, Ordering::AcqRel);
        if applied > 0 {
            self.accounts_changed();
        }
        self.changed.send_modify(|version| *version += 1);
        Ok(applied)
    }

    fn stage_replica_doc(
        &self,
        batch: &mut Batch,
        slot: &mut VbSlot,
        vbucket: u16,
        doc: &ReplicaDoc,
        record: &DocRecord,
        held: Held,
    ) {
        let (id, cid, key) = (self.id, doc.collection, doc.key.as_slice());
        self.hlc.observe(doc.cas);
        self.stage_replica_removal(batch, slot, (vbucket, cid, key), held);
        for (md5, body) in &doc.attachments {
            batch.put(
                Cf::Att,
                keys::att_key(id, vbucket, cid, key, md5),
                body.to_vec(),
            );
        }
        if record.expiry != 0 {
            batch.put(
                Cf::Exp,
                keys::exp_key(id, vbucket, cid, record.expiry, key),
                Vec::new(),
            );
        }
        let entry = ChangeEntry::of_record(vbucket, cid, key, record);
        batch.put(
            Cf::Seq,
            keys::seq_key(id, vbucket, doc.seqno),
            entry.encode(),
        );
        batch.put(
            Cf::Doc,
            keys::doc_key(id, vbucket, cid, key),
            doc.record.to_vec(),
        );
        let bytes = doc.record.len() as u64;
        slot.state.add(doc.deleted, bytes);
        if held.live {
            let stats = slot.collection_mut(cid);
            stats.add(doc.deleted, bytes);
            stats.high_seqno = doc.seqno;
        }
    }

    /// Removes the document `marker` names, as the active's purge did (its record, change
    /// and expiry entries, attachment and old revision bodies, its counts), and stores the
    /// marker (replica.md, "Purges reach the replicas").
    fn stage_replica_purge(
        &self,
        batch: &mut Batch,
        slot: &mut VbSlot,
        marker: &PurgeMarker,
        held: Held,
    ) {
        let (id, vbucket, cid, key) = (
            self.id,
            marker.vbucket,
            marker.collection,
            marker.key.as_slice(),
        );
        self.hlc.observe(marker.cas);
        self.stage_replica_removal(batch, slot, (vbucket, cid, key), held);
        batch.delete(Cf::Doc, keys::doc_key(id, vbucket, cid, key));
        let prefix = keys::att_prefix(id, vbucket, cid, key);
        let upper = keys::prefix_end(&prefix);
        batch.delete_range(Cf::Att, prefix, upper);
        crate::old_revs::drop_all(batch, id, vbucket, cid, key);
        self.markers.note(vbucket);
        stage_marker(batch, id, marker);
        if held.live {
            slot.collection_mut(cid).high_seqno = marker.seqno;
        }
    }

    /// Takes what a key holds before a replica item replaces it out of the store and the
    /// counts: its record's change and expiry entries, or its purge marker.
    fn stage_replica_removal(
        &self,
        batch: &mut Batch,
        slot: &mut VbSlot,
        (vbucket, cid, key): (u16, u32, &[u8]),
        held: Held,
    ) {
        let id = self.id;
        if let Some(old) = held.previous {
            batch.delete(Cf::Seq, keys::seq_key(id, vbucket, old.seqno));
            if old.expiry != 0 {
                batch.delete(Cf::Exp, keys::exp_key(id, vbucket, cid, old.expiry, key));
            }
            slot.state.remove(old.deleted, old.record_bytes);
            if held.live {
                slot.collection_mut(cid)
                    .remove(old.deleted, old.record_bytes);
            }
        }
        if let Some(seqno) = held.marker {
            stage_marker_removal(batch, id, (vbucket, cid, key), seqno);
        }
    }

    /// Empties a replica vbucket (a rollback, replica.md: settee cannot undo to an earlier
    /// seqno, so a replica rolls back to 0 and streams again): its documents, change entries,
    /// expiry entries and attachments in every collection, its counters, high seqno, failover
    /// log and snapshot. `_local` documents stay (they are not replicated).
    pub async fn reset_replica(&self, vbucket: u16) -> Result<(), EngineError> {
        if vbucket >= self.vbuckets {
            return Err(invalid("vbucket out of range"));
        }
        if self.vbucket_role(vbucket) == VbRole::Active {
            return Err(invalid("vbucket is active on this node"));
        }
        let _serial = self.failover_lock.lock().await;
        let pending = {
            let mut slot = self.vb_states[vbucket as usize].lock();
            let epoch = self.store.epoch();
            let live = self.collections_for_write(epoch)?.manifest.collection_ids();
            let mut batch = Batch::new();
            for range in [
                keys::vb_range(self.id, vbucket),
                keys::long_range(self.id, vbucket),
            ] {
                for cf in [Cf::Doc, Cf::Exp, Cf::Att] {
                    batch.delete_range(cf, range.0.clone(), range.1.clone());
                }
            }
            let (lower, upper) = keys::vb_range(self.id, vbucket);
            batch.delete_range(Cf::Seq, lower, upper);
            batch.delete(Cf::Meta, keys::meta::failover_log(self.id, vbucket));
            batch.delete(Cf::Meta, keys::meta::vb_purge_seqno(self.id, vbucket));
            self.markers.set_purge_seqno(vbucket, 0);
            *slot = VbSlot {
                state: VbState::default(),
                collections: live.iter().map(|cid| (*cid, VbState::default())).collect(),
                epoch,
            };
            slot.persist(&mut batch, self.id, vbucket, true, live.into_iter());
            batch.put(
                Cf::Meta,
                keys::meta::vb_role(self.id, vbucket),
                encode_role(self.vbucket_role(vbucket), (0, 0)),
            );
            self.visible_high[vbucket as usize].store(0, Ordering::Release);
            self.store.commit_in_epoch(batch, epoch)
        };
        pending.await?;
        self.failover_heads[vbucket as usize].store(0, Ordering::Release);
        self.accounts_changed();
        self.changed.send_modify(|version| *version += 1);
        Ok(())
    }
}

/// What a replica item's key held before it: its record, its purge marker's seqno, and whether
/// its collection is live here (its counts kept).
#[derive(Clone, Copy, Debug)]
struct Held {
    previous: Option<Previous>,
    marker: Option<u64>,
    live: bool,
}

/// The checks of replica.md on a received document; its record decoded.
fn check_replica_doc(doc: &ReplicaDoc) -> Result<DocRecord, EngineError> {
    check_key_in(doc.collection, &doc.key)?;
    let record = DocRecord::decode(&doc.record)
        .map_err(|error| invalid(format!("replica record: {error}")))?;
    record
        .check_storable()
        .map_err(EngineError::InvalidRecord)?;
    if record.seqno != doc.seqno || record.cas != doc.cas || record.is_deleted() != doc.deleted {
        return Err(invalid("replica record does not match its message"));
    }
    for (md5, body) in &doc.attachments {
        if crate::update::md5_of(body) != *md5 {
            return Err(invalid("replica attachment does not match its md5"));
        }
    }
    let referenced = record.leaves.iter().flat_map(|leaf| &leaf.attachments);
    if let Some(missing) = referenced
        .map(|meta| meta.md5)
        .find(|md5| !doc.attachments.iter().any(|(held, _)| held == md5))
    {
        return Err(invalid(format!(
            "replica record references attachment {} it did not bring",
            crate::update::hex(&missing)
        )));
    }
    Ok(record)
}
