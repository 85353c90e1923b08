//! Dropped collections' data leaves the disk in the background (`docs/format/collections.md`,
//! "Dropped collections"). Readers stop seeing it at the drop; the purger then, vbucket by
//! vbucket, deletes its keys in `doc`, `local`, `att` and `exp` (one DeleteRange each) and its
//! entries and create/modify events in `seq` (a scan shared by every pending drop), raising
//! `vbuckets_done` in the drop's record with the batch that finishes a vbucket, so a restart
//! resumes where it stopped. A drop done in every vbucket loses its record last.
//!
//! What a round does is decided by [`plan_purge_round`], a pure function; the worker executes
//! it ([`crate::Bucket::purge_dropped_round`]).

use std::collections::BTreeMap;
use std::ops::Range;

use settee_storage::{Batch, Cf};

use super::DroppedCollection;
use crate::bucket::Bucket;
use crate::change_entry::StoredEntry;
use crate::error::EngineError;
use crate::keys;

/// What a dropped collection leaves outside the engine's column families (view and Mango index
/// groups, `docs/format/collections.md`, purger step 2). The purge's last batch, which deletes
/// the drop's record, carries every hook's deletions, so they happen exactly once with it.
pub trait CollectionPurgeHook: Send + Sync {
    fn purge_collection(
        &self,
        bucket: u32,
        collection: u32,
        batch: &mut Batch,
    ) -> Result<(), EngineError>;
}

/// The hooks of a node, registered once by the crates that keep per-collection data.
pub(crate) type PurgeHooks = parking_lot::RwLock<Vec<std::sync::Arc<dyn CollectionPurgeHook>>>;

/// `seq` deletions per batch while a vbucket's stream is scanned.
const SEQ_DELETES_PER_BATCH: usize = 1024;

/// One round of the purger: collections `collections` (all at `vbuckets.start`) are purged
/// from `vbuckets`; collections `finished` are done everywhere and lose their records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PurgeRound {
    pub vbuckets: Range<u16>,
    pub collections: Vec<u32>,
    pub finished: Vec<u32>,
}

impl PurgeRound {
    pub fn is_empty(&self) -> bool {
        self.collections.is_empty() && self.finished.is_empty()
    }
}

/// The next round for `pending` drops of a bucket of `vbuckets` vbuckets, at most
/// `vbuckets_per_round` vbuckets long: the drops furthest behind go first, and the round ends
/// where the next drop's progress begins, so drops at the same point share one scan from then
/// on. `None` when nothing is pending.
pub fn plan_purge_round(
    pending: &BTreeMap<u32, DroppedCollection>,
    vbuckets: u16,
    vbuckets_per_round: u16,
) -> Option<PurgeRound> {
    if pending.is_empty() {
        return None;
    }
    let finished: Vec<u32> = pending
        .iter()
        .filter(|(_, drop)| drop.vbuckets_done >= vbuckets)
        .map(|(cid, _)| *cid)
        .collect();
    let behind = pending
        .values()
        .map(|drop| drop.vbuckets_done)
        .filter(|done| *done < vbuckets);
    let Some(start) = behind.clone().min() else {
        return Some(PurgeRound {
            vbuckets: 0..0,
            collections: Vec::new(),
            finished,
        });
    };
    let next_progress = behind
        .filter(|done| *done > start)
        .min()
        .unwrap_or(vbuckets);
    let end = start
        .saturating_add(vbuckets_per_round.max(1))
        .min(next_progress)
        .min(vbuckets);
    let collections = pending
        .iter()
        .filter(|(_, drop)| drop.vbuckets_done == start)
        .map(|(cid, _)| *cid)
        .collect();
    Some(PurgeRound {
        vbuckets: start..end,
        collections,
        finished,
    })
}

impl Bucket {
    /// Runs one round of the drop purger (see the module documentation), at most
    /// `vbuckets_per_round` vbuckets. Returns whether drops are still pending.
    pub async fn purge_dropped_round(&self, vbuckets_per_round: u16) -> Result<bool, EngineError> {
        let pending = self.collections.read().dropped.clone();
        let Some(round) = plan_purge_round(&pending, self.vbuckets, vbuckets_per_round) else {
            return Ok(false);
        };
        for vbucket in round.vbuckets.clone() {
            if self.dropped.load(std::sync::atomic::Ordering::Acquire) {
                return Ok(false);
            }
            self.purge_vbucket(vbucket, &round.collections).await?;
        }
        for cid in &round.finished {
            self.finish_purge(*cid).await?;
        }
        Ok(!self.collections.read().dropped.is_empty())
    }

    /// Runs the drop purger until nothing is pending (tests, and a caller that wants the space
    /// back now).
    pub async fn purge_dropped_collections(&self) -> Result<(), EngineError> {
        while self.purge_dropped_round(u16::MAX).await? {}
        Ok(())
    }

    /// Removes collections `cids`' data from `vbucket`, then records the vbucket as done for
    /// each of them.
    async fn purge_vbucket(&self, vbucket: u16, cids: &[u32]) -> Result<(), EngineError> {
        let mut batch = Batch::new();
        for cid in cids {
            let (lower, upper) = keys::coll_range(self.id, vbucket, *cid);
            for cf in [Cf::Doc, Cf::Local, Cf::Att, Cf::Exp] {
                batch.delete_range(cf, lower.clone(), upper.clone());
            }
        }
        // No entry of a dropped collection lies above its drop event (writes check liveness
        // under the vbucket lock), so these deletions never lower a high seqno.
        let (lower, upper) = keys::vb_range(self.id, vbucket);
        let mut scanned = Vec::new();
        for item in self.store.scan(Cf::Seq, &lower, &upper, false) {
            let (key, value) = item?;
            let Some(seqno) = keys::seqno_of_seq_key(&key) else {
                continue;
            };
            let names_dropped = match StoredEntry::decode(vbucket, seqno, &value) {
                Some(StoredEntry::Change(entry, _)) => cids.contains(&entry.collection),
                Some(StoredEntry::Event(event)) => {
                    event.kind.is_collection_event()
                        && event.kind != super::SystemEventKind::CollectionDropped
                        && cids.contains(&event.collection_id)
                }
                Some(StoredEntry::Purge(marker)) => {
                    let dropped = cids.contains(&marker.collection);
                    if dropped {
                        // Its index key is under the short prefix, outside the collection's
                        // ranges deleted above.
                        batch.delete(
                            Cf::Att,
                            keys::purge_marker_key(
                                self.id,
                                vbucket,
                                marker.collection,
                                &marker.key,
                            ),
                        );
                    }
                    dropped
                }
                None => false,
            };
            if names_dropped {
                scanned.push(key.to_vec());
            }
            if scanned.len() >= SEQ_DELETES_PER_BATCH {
                for key in scanned.drain(..) {
                    batch.delete(Cf::Seq, key);
                }
                self.store.commit(std::mem::take(&mut batch)).await?;
            }
        }
        for key in scanned {
            batch.delete(Cf::Seq, key);
        }
        self.commit_purge_progress(batch, cids, vbucket + 1).await
    }

    /// Commits `batch` with the drops of `cids` raised to `vbuckets_done` (their records and
    /// the state in memory), under the manifest lock so no manifest change interleaves.
    async fn commit_purge_progress(
        &self,
        mut batch: Batch,
        cids: &[u32],
        vbuckets_done: u16,
    ) -> Result<(), EngineError> {
        let _changing = self.manifest_lock.lock().await;
        let mut dropped = (*self.collections.read().dropped).clone();
        for cid in cids {
            if let Some(drop) = dropped.get_mut(cid) {
                drop.vbuckets_done = drop.vbuckets_done.max(vbuckets_done);
                batch.put(
                    Cf::Meta,
                    keys::meta::dropped_collection(self.id, *cid),
                    serde_json::to_vec(drop).unwrap_or_default(),
                );
            }
        }
        self.store.commit(batch).await?;
        self.collections.write().dropped = std::sync::Arc::new(dropped);
        Ok(())
    }

    /// A drop purged from every vbucket: its record (and purge sequence) go, then the store is
    /// asked to compact the ranges it held.
    async fn finish_purge(&self, cid: u32) -> Result<(), EngineError> {
        {
            let _changing = self.manifest_lock.lock().await;
            let mut batch = Batch::new();
            let hooks = self.purge_hooks.read().clone();
            for hook in hooks {
                hook.purge_collection(self.id, cid, &mut batch)?;
            }
            batch.delete(Cf::Meta, keys::meta::dropped_collection(self.id, cid));
            batch.delete(Cf::Meta, keys::meta::collection_purge_seq(self.id, cid));
            self.store.commit(batch).await?;
            let mut dropped = (*self.collections.read().dropped).clone();
            dropped.remove(&cid);
            self.collections.write().dropped = std::sync::Arc::new(dropped);
            self.collection_purge_seqs.lock().remove(&cid);
        }
        let (store, id, vbuckets) = (self.store.clone(), self.id, self.vbuckets);
        tokio::task::spawn_blocking(move || {
            for vbucket in 0..vbuckets {
                let (lower, upper) = keys::coll_range(id, vbucket, cid);
                for cf in [Cf::Doc, Cf::Local, Cf::Att, Cf::Exp] {
                    store.compact(cf, &lower, &upper);
                }
            }
        })
        .await
        .map_err(|error| EngineError::Invalid(format!("purge compaction task: {error}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drop(done: u16) -> DroppedCollection {
        DroppedCollection {
            scope: 8,
            name: "c".into(),
            uid: 1,
            vbuckets_done: done,
        }
    }

    #[test]
    fn nothing_pending_is_no_round() {
        assert_eq!(plan_purge_round(&BTreeMap::new(), 64, 8), None);
    }

    #[test]
    fn drops_at_the_same_point_share_a_round_of_bounded_length() {
        let pending = BTreeMap::from([(8, drop(0)), (9, drop(0))]);
        assert_eq!(
            plan_purge_round(&pending, 64, 8),
            Some(PurgeRound {
                vbuckets: 0..8,
                collections: vec![8, 9],
                finished: vec![],
            })
        );
        assert_eq!(
            plan_purge_round(&pending, 5, 8).map(|round| round.vbuckets),
            Some(0..5)
        );
        // A round is at least one vbucket long.
        assert_eq!(
            plan_purge_round(&pending, 5, 0).map(|round| round.vbuckets),
            Some(0..1)
        );
    }

    #[test]
    fn the_drop_furthest_behind_goes_first_until_it_catches_up() {
        let pending = BTreeMap::from([(8, drop(10)), (9, drop(3)), (10, drop(3))]);
        assert_eq!(
            plan_purge_round(&pending, 64, 100),
            Some(PurgeRound {
                vbuckets: 3..10,
                collections: vec![9, 10],
                finished: vec![],
            })
        );
        let caught_up = BTreeMap::from([(8, drop(10)), (9, drop(10)), (10, drop(10))]);
        assert_eq!(
            plan_purge_round(&caught_up, 64, 100).map(|round| round.collections),
            Some(vec![8, 9, 10])
        );
    }

    #[test]
    fn drops_done_everywhere_finish() {
        let pending = BTreeMap::from([(8, drop(64)), (9, drop(60))]);
        assert_eq!(
            plan_purge_round(&pending, 64, 8),
            Some(PurgeRound {
                vbuckets: 60..64,
                collections: vec![9],
                finished: vec![8],
            })
        );
        let done = BTreeMap::from([(8, drop(64))]);
        let round = plan_purge_round(&done, 64, 8).expect("round");
        assert_eq!(round.vbuckets, 0..0);
        assert_eq!(round.finished, vec![8]);
        assert!(!round.is_empty());
    }
}
