//! The target's side of a move's ingest (docs/format/rebalance.md, section 3, steps 1 and 2):
//! the files checked against the manifest and ingested, then the vbucket's metadata written
//! from the manifest in one batch, the vbucket left `pending` at the snapshot's seqno.

use std::path::Path;
use std::sync::atomic::Ordering;

use settee_storage::{Batch, Cf};

use super::manifest::{collection_state, failover_entries, vb_state};
use super::MoveManifest;
use crate::bucket::Bucket;
use crate::change_entry::StoredEntry;
use crate::error::EngineError;
use crate::failover::encode_failover_log;
use crate::keys;
use crate::replica::{encode_role, VbRole};
use crate::vb_state::{VbSlot, VbState};

impl Bucket {
    /// Ingests the export in `dir` that `manifest` describes into this bucket's empty,
    /// non-active vbucket: the manifest must name this bucket (its name, vbucket count and
    /// engine id), each file must be whole (size and crc32c) and hold keys of the vbucket only
    /// (checked before anything is ingested). Then one durable batch writes the vbucket's
    /// counters, failover log and role `pending` with the snapshot `S..S`, `S` the export's
    /// seqno. The index groups adopt their rows afterwards (settee-views). Blocking.
    pub fn ingest_export(&self, dir: &Path, manifest: &MoveManifest) -> Result<(), EngineError> {
        let vbucket = manifest.vbucket;
        if manifest.bucket != self.name
            || manifest.vbucket_count != self.vbuckets
            || manifest.target_bucket_id != self.id
            || vbucket >= self.vbuckets
        {
            return Err(invalid(format!(
                "the export of {} vbucket {} ({} vbuckets, for bucket id {}) is not for this bucket",
                manifest.bucket, vbucket, manifest.vbucket_count, manifest.target_bucket_id
            )));
        }
        if self.vbucket_role(vbucket) == VbRole::Active {
            return Err(invalid(format!("vbucket {vbucket} is active on this node")));
        }
        let held = self.vb_states[vbucket as usize].lock().state;
        if held.high_seqno != 0 || held.live != 0 || held.deleted != 0 {
            return Err(invalid(format!(
                "vbucket {vbucket} is not empty on this node"
            )));
        }
        let log = failover_entries(manifest)?;
        let files = manifest.checked_files(dir)?;
        self.ingest_vbucket_files(vbucket, &files)?;
        // The clock moves past the newest CAS the vbucket brought, so that this node's next
        // writes of it (once it is active here) order after them.
        let (lower, upper) = keys::vb_range(self.id, vbucket);
        if let Some((key, raw)) = self.store.last_in_range(Cf::Seq, &lower, &upper)? {
            let seqno = keys::seqno_of_seq_key(&key).unwrap_or(0);
            match StoredEntry::decode(vbucket, seqno, &raw) {
                Some(StoredEntry::Change(entry, _)) => self.hlc.observe(entry.cas),
                Some(StoredEntry::Event(event)) => self.hlc.observe(event.cas),
                Some(StoredEntry::Purge(marker)) => self.hlc.observe(marker.cas),
                None => {}
            }
        }
        let seqno = manifest.snapshot_seqno.max(manifest.vbstats.high_seqno);
        let mut slot = self.vb_states[vbucket as usize].lock();
        let epoch = self.store.epoch();
        let collections = self.collections_for_write(epoch)?;
        let live = collections.manifest.collection_ids();
        let shipped = |cid: u32| {
            manifest
                .collections
                .iter()
                .find(|counts| counts.cid == cid)
                .map(collection_state)
        };
        *slot = VbSlot {
            state: VbState {
                high_seqno: seqno,
                ..vb_state(&manifest.vbstats)
            },
            collections: live
                .iter()
                .map(|cid| (*cid, shipped(*cid).unwrap_or_default()))
                .collect(),
            epoch,
        };
        let mut batch = Batch::new();
        let with_collections = collections.manifest.uid() > 0;
        slot.persist(
            &mut batch,
            self.id,
            vbucket,
            with_collections,
            live.into_iter(),
        );
        batch.put(
            Cf::Meta,
            keys::meta::failover_log(self.id, vbucket),
            encode_failover_log(&log),
        );
        batch.put(
            Cf::Meta,
            keys::meta::vb_role(self.id, vbucket),
            encode_role(VbRole::Pending, (seqno, seqno)),
        );
        self.store.commit_blocking(batch)?;
        self.roles[vbucket as usize].store(VbRole::Pending as u8, Ordering::Release);
        self.visible_high[vbucket as usize].fetch_max(seqno, Ordering::AcqRel);
        self.failover_heads[vbucket as usize].store(log[0].uuid, Ordering::Release);
        drop(slot);
        self.accounts_changed();
        self.changed.send_modify(|version| *version += 1);
        Ok(())
    }
}

fn invalid(reason: String) -> EngineError {
    EngineError::Invalid(reason)
}
