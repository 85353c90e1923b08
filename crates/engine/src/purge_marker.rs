//! Purge markers in the engine (docs/format/replica.md, "Purges reach the replicas"; the entry
//! itself, its bytes and the age-out rule are `settee_record::purge_marker`): the marker's
//! index in `att`, how a later write of the key finds the marker to delete it; per vbucket,
//! whether that index may hold anything and the purge seqno; compaction's age-out.
//!
//! ```text
//! att index:  bucket u32 | vb u16 | 0xfe | cid u32 | keylen u8 | key  ->  seqno u64
//! ```

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use settee_storage::{Batch, Cf, Store};

use crate::bucket::{Bucket, Committed};
use crate::doc_key::DocKey;
use crate::error::EngineError;
use crate::keys;
use crate::replica::VbRole;
use crate::vb_state::VbSlot;
use settee_record::purge_marker::ages_out;
pub use settee_record::purge_marker::{PurgeMarker, PURGE_MARKERS_KEEP_SECS};

/// Markers compaction deletes per batch (their key locks are held while it commits).
const AGE_OUT_BATCH: usize = 256;

/// Stages `marker`'s change entry and index key. The caller has called [`Markers::note`].
pub(crate) fn stage_marker(batch: &mut Batch, bucket_id: u32, marker: &PurgeMarker) {
    let (vbucket, cid) = (marker.vbucket, marker.collection);
    batch.put(
        Cf::Seq,
        keys::seq_key(bucket_id, vbucket, marker.seqno),
        marker.encode(),
    );
    batch.put(
        Cf::Att,
        keys::purge_marker_key(bucket_id, vbucket, cid, &marker.key),
        marker.seqno.to_be_bytes().to_vec(),
    );
}

/// Stages the deletion of the marker of `key` at `seqno`, entry and index key.
pub(crate) fn stage_marker_removal(
    batch: &mut Batch,
    bucket_id: u32,
    key: (u16, u32, &[u8]),
    seqno: u64,
) {
    let (vbucket, cid, key) = key;
    batch.delete(Cf::Seq, keys::seq_key(bucket_id, vbucket, seqno));
    batch.delete(
        Cf::Att,
        keys::purge_marker_key(bucket_id, vbucket, cid, key),
    );
}

/// What [`Markers`] knows of a vbucket's index.
const UNKNOWN: u8 = 0;
const NONE: u8 = 1;
const SOME: u8 = 2;

/// Per vbucket of a bucket: whether its marker index may hold entries, and its purge seqno.
pub(crate) struct Markers {
    /// UNKNOWN at open; NONE only from UNKNOWN by a seek that found nothing (compare and
    /// exchange); SOME, set by whoever stages a marker before its batch is enqueued, is never
    /// left. So NONE is only ever held while the vbucket has no marker: a write that finds
    /// NONE skips the lookup safely (a marker of its own key cannot appear meanwhile: staging
    /// one takes the key's lock, which the writer holds).
    held: Vec<AtomicU8>,
    /// `meta` `bucket/vbpurged/`: the highest marker compaction deleted. Written under the
    /// vbucket's lock, before the batch deleting the markers is enqueued.
    purge_seqnos: Vec<AtomicU64>,
}

impl Markers {
    /// Every vbucket's purge seqno as stored (one prefix scan); every index unknown.
    pub(crate) fn load(
        store: &Store,
        bucket_id: u32,
        vbuckets: u16,
    ) -> Result<Markers, EngineError> {
        let purge_seqnos: Vec<AtomicU64> = (0..vbuckets).map(|_| AtomicU64::new(0)).collect();
        let prefix = keys::meta::vb_purge_seqno_prefix(bucket_id);
        for item in store.scan(Cf::Meta, &prefix, &keys::prefix_end(&prefix), false) {
            let (key, value) = item?;
            let vbucket = key
                .get(prefix.len()..)
                .and_then(|rest| rest.try_into().ok())
                .map(u16::from_be_bytes);
            let seqno = value.as_ref().try_into().ok().map(u64::from_be_bytes);
            match (vbucket.and_then(|vb| purge_seqnos.get(vb as usize)), seqno) {
                (Some(slot), Some(seqno)) => slot.store(seqno, Ordering::Relaxed),
                _ => return Err(EngineError::Corrupt("vbucket purge seqno".into())),
            }
        }
        Ok(Markers {
            held: (0..vbuckets).map(|_| AtomicU8::new(UNKNOWN)).collect(),
            purge_seqnos,
        })
    }

    /// `vbucket`'s index may hold entries from now on (a marker is being staged, or files
    /// were ingested).
    pub(crate) fn note(&self, vbucket: u16) {
        if let Some(held) = self.held.get(vbucket as usize) {
            held.store(SOME, Ordering::Release);
        }
    }

    /// Sets `vbucket`'s purge seqno in memory (callers hold the vbucket's lock and stage the
    /// stored value in the same breath).
    pub(crate) fn set_purge_seqno(&self, vbucket: u16, seqno: u64) {
        if let Some(slot) = self.purge_seqnos.get(vbucket as usize) {
            slot.store(seqno, Ordering::Release);
        }
    }
}

impl Bucket {
    /// `vbucket`'s purge seqno: the highest purge marker compaction deleted (0: none; dcp.md
    /// rollback rule 2). A consumer resuming below it may have missed a purge.
    pub fn purge_seqno(&self, vbucket: u16) -> u64 {
        self.markers
            .purge_seqnos
            .get(vbucket as usize)
            .map_or(0, |slot| slot.load(Ordering::Acquire))
    }

    /// Whether `vbucket`'s marker index may hold entries, settling an unknown answer with one
    /// seek.
    fn may_hold_markers(&self, vbucket: u16) -> Result<bool, EngineError> {
        let Some(held) = self.markers.held.get(vbucket as usize) else {
            return Ok(false);
        };
        match held.load(Ordering::Acquire) {
            NONE => return Ok(false),
            SOME => return Ok(true),
            _ => {}
        }
        let (lower, upper) = keys::purge_marker_range(self.id, vbucket);
        if self
            .store
            .scan(Cf::Att, &lower, &upper, false)
            .next()
            .is_some()
        {
            held.store(SOME, Ordering::Release);
            return Ok(true);
        }
        // A marker staged since the seek set SOME: the exchange fails and it stays.
        let _ = held.compare_exchange(UNKNOWN, NONE, Ordering::AcqRel, Ordering::Acquire);
        Ok(held.load(Ordering::Acquire) == SOME)
    }

    /// Stages the purge marker of `key`, removed whole, at the vbucket's next seqno (the
    /// collection's high seqno rises too); returns what it got.
    pub(crate) fn stage_new_marker(
        &self,
        batch: &mut Batch,
        slot: &mut VbSlot,
        (vbucket, cid, key): (u16, u32, &[u8]),
    ) -> Committed {
        slot.state.high_seqno += 1;
        let marker = PurgeMarker {
            vbucket,
            seqno: slot.state.high_seqno,
            cas: self.hlc.next(self.clock.as_ref()),
            collection: cid,
            key: key.to_vec(),
        };
        self.markers.note(vbucket);
        stage_marker(batch, self.id, &marker);
        slot.collection_mut(cid).high_seqno = marker.seqno;
        Committed {
            seqno: marker.seqno,
            cas: marker.cas,
        }
    }

    /// The seqno of the purge marker of each `(vbucket, collection, key)` asked about, where
    /// it has one (`None` asks nothing: a document with a record has no marker). The caller
    /// holds the keys' locks. One point read per key of a vbucket that may hold markers; none
    /// otherwise.
    pub(crate) fn find_markers(
        &self,
        wanted: &[Option<(u16, u32, &[u8])>],
    ) -> Result<Vec<Option<u64>>, EngineError> {
        let mut found = vec![None; wanted.len()];
        let mut asked = Vec::new();
        let mut index_keys = Vec::new();
        for (at, wanted) in wanted.iter().enumerate() {
            let Some((vbucket, cid, key)) = wanted else {
                continue;
            };
            if self.may_hold_markers(*vbucket)? {
                asked.push(at);
                index_keys.push(keys::purge_marker_key(self.id, *vbucket, *cid, key));
            }
        }
        if index_keys.is_empty() {
            return Ok(found);
        }
        let values = self.store.multi_get(Cf::Att, &index_keys)?;
        for (at, value) in asked.into_iter().zip(values) {
            found[at] = value
                .and_then(|raw| raw.as_slice().try_into().ok())
                .map(u64::from_be_bytes);
        }
        Ok(found)
    }

    /// Deletes the purge markers that have aged out (replica.md, "Age-out"); returns how many.
    pub(crate) async fn age_out_purge_markers(&self) -> Result<u64, EngineError> {
        let mut removed = 0;
        for vbucket in 0..self.vbuckets {
            if !self.may_hold_markers(vbucket)? {
                continue;
            }
            // An active vbucket keeps what one of its replicas may still need.
            let acknowledged = match self.vbucket_role(vbucket) {
                VbRole::Active => self.durability().oldest_acknowledged(vbucket),
                _ => u64::MAX,
            };
            let (mut lower, upper) = keys::purge_marker_range(self.id, vbucket);
            loop {
                let mut chunk: Vec<(u32, Vec<u8>, u64)> = Vec::new();
                let mut ended = true;
                for item in self.store.scan(Cf::Att, &lower, &upper, false) {
                    let (raw, value) = item?;
                    lower = raw.to_vec();
                    lower.push(0);
                    let seqno = value.as_ref().try_into().ok().map(u64::from_be_bytes);
                    if let (Some((_, cid, key)), Some(seqno)) =
                        (keys::parse_purge_marker_key(&raw), seqno)
                    {
                        chunk.push((cid, key.to_vec(), seqno));
                    }
                    if chunk.len() == AGE_OUT_BATCH {
                        ended = false;
                        break;
                    }
                }
                removed += self.age_out_chunk(vbucket, acknowledged, chunk).await?;
                if ended {
                    break;
                }
            }
        }
        Ok(removed)
    }

    /// Deletes those of `chunk`'s markers (collection, key, seqno as the index said) that age
    /// out, under their keys' locks, re-reading the index there (a write since may have
    /// deleted a marker, and a purge since written another).
    async fn age_out_chunk(
        &self,
        vbucket: u16,
        acknowledged: u64,
        chunk: Vec<(u32, Vec<u8>, u64)>,
    ) -> Result<u64, EngineError> {
        let now_ns = self.clock.now_ns();
        let seq_keys: Vec<Vec<u8>> = chunk
            .iter()
            .map(|(_, _, seqno)| keys::seq_key(self.id, vbucket, *seqno))
            .collect();
        let entries = self.store.multi_get(Cf::Seq, &seq_keys)?;
        let due: Vec<(u32, Vec<u8>, u64)> = chunk
            .into_iter()
            .zip(entries)
            .filter(|((cid, key, seqno), entry)| {
                entry
                    .as_deref()
                    .and_then(|raw| PurgeMarker::decode(vbucket, *seqno, raw))
                    .is_some_and(|marker| {
                        marker.collection == *cid
                            && marker.key == *key
                            && ages_out(*seqno, marker.cas, now_ns, acknowledged)
                    })
            })
            .map(|(due, _)| due)
            .collect();
        if due.is_empty() {
            return Ok(0);
        }
        let _guards = self
            .lock_keys(due.iter().map(|(cid, key, _)| DocKey::new(*cid, key)))
            .await;
        let index_keys: Vec<Vec<u8>> = due
            .iter()
            .map(|(cid, key, _)| keys::purge_marker_key(self.id, vbucket, *cid, key))
            .collect();
        let now = self.store.multi_get(Cf::Att, &index_keys)?;
        let mut batch = Batch::new();
        let mut highest = 0;
        let mut removed = 0;
        for ((cid, key, seqno), held) in due.iter().zip(now) {
            if held.as_deref() != Some(&seqno.to_be_bytes()[..]) {
                continue;
            }
            stage_marker_removal(&mut batch, self.id, (vbucket, *cid, key), *seqno);
            highest = highest.max(*seqno);
            removed += 1;
        }
        if removed == 0 {
            return Ok(0);
        }
        let pending = {
            let _slot = self.vb_states[vbucket as usize].lock();
            let purge_seqno = self.purge_seqno(vbucket).max(highest);
            // Raised before the deletions can be read: a stream request from here on rolls a
            // consumer that could miss them back to 0.
            self.markers.set_purge_seqno(vbucket, purge_seqno);
            batch.put(
                Cf::Meta,
                keys::meta::vb_purge_seqno(self.id, vbucket),
                purge_seqno.to_be_bytes().to_vec(),
            );
            self.store.commit(batch)
        };
        pending.await?;
        Ok(removed)
    }
}
