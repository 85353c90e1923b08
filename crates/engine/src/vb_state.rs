//! A vbucket's counters (`meta` `bucket/vbstats/`) and, per collection, the same counters
//! (`meta` `bucket/cstats/`, `docs/format/collections.md`): what a write batch changes and
//! persists while it holds the vbucket's lock.

use settee_storage::{Batch, Cf, Store, StoreError};

use crate::error::EngineError;
use crate::keys;

/// Counters of one vbucket (or of one collection in one vbucket), persisted in `meta` by every
/// write batch that changes them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VbState {
    pub high_seqno: u64,
    pub live: u64,
    pub deleted: u64,
    /// Bytes of the document records (live and deleted) as stored, before compression.
    pub record_bytes: u64,
}

impl VbState {
    pub(crate) fn encode(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        out[..8].copy_from_slice(&self.high_seqno.to_be_bytes());
        out[8..16].copy_from_slice(&self.live.to_be_bytes());
        out[16..24].copy_from_slice(&self.deleted.to_be_bytes());
        out[24..].copy_from_slice(&self.record_bytes.to_be_bytes());
        out
    }

    pub(crate) fn decode(raw: &[u8]) -> Option<VbState> {
        let field = |at: usize| -> Option<u64> {
            Some(u64::from_be_bytes(raw.get(at..at + 8)?.try_into().ok()?))
        };
        Some(VbState {
            high_seqno: field(0)?,
            live: field(8)?,
            deleted: field(16)?,
            record_bytes: field(24)?,
        })
    }

    /// Takes a document's old record out of the counts.
    pub(crate) fn remove(&mut self, deleted: bool, record_bytes: u64) {
        self.record_bytes = self.record_bytes.saturating_sub(record_bytes);
        if deleted {
            self.deleted = self.deleted.saturating_sub(1);
        } else {
            self.live = self.live.saturating_sub(1);
        }
    }

    /// Counts a document's new record.
    pub(crate) fn add(&mut self, deleted: bool, record_bytes: u64) {
        self.record_bytes += record_bytes;
        if deleted {
            self.deleted += 1;
        } else {
            self.live += 1;
        }
    }

    /// Takes a dropped collection's counts out of its vbucket's (the high seqno stays).
    pub(crate) fn subtract(&mut self, other: &VbState) {
        self.live = self.live.saturating_sub(other.live);
        self.deleted = self.deleted.saturating_sub(other.deleted);
        self.record_bytes = self.record_bytes.saturating_sub(other.record_bytes);
    }
}

/// A vbucket's state in memory, and the store epoch it was last known to match the disk in
/// (`settee_storage::health`): after a failed write it may count writes that never happened.
#[derive(Debug)]
pub(crate) struct VbSlot {
    pub state: VbState,
    /// The counts of every live collection in this vbucket, by id (collection 0 included;
    /// before the bucket's first manifest change, collection 0 only, equal to `state`).
    pub collections: Vec<(u32, VbState)>,
    pub epoch: u64,
}

impl VbSlot {
    pub(crate) fn collection(&self, cid: u32) -> Option<&VbState> {
        self.collections
            .binary_search_by_key(&cid, |(held, _)| *held)
            .ok()
            .map(|at| &self.collections[at].1)
    }

    /// The counts of `cid`, created empty if the slot has none yet.
    pub(crate) fn collection_mut(&mut self, cid: u32) -> &mut VbState {
        let at = match self
            .collections
            .binary_search_by_key(&cid, |(held, _)| *held)
        {
            Ok(at) => at,
            Err(at) => {
                self.collections.insert(at, (cid, VbState::default()));
                at
            }
        };
        &mut self.collections[at].1
    }

    pub(crate) fn remove_collection(&mut self, cid: u32) -> Option<VbState> {
        let at = self
            .collections
            .binary_search_by_key(&cid, |(held, _)| *held)
            .ok()?;
        Some(self.collections.remove(at).1)
    }

    /// Stages the vbucket's counters: before the bucket has collections (`with_collections`:
    /// its manifest changed at least once), its `vbstats`; after, the 64-byte `cstats` of each
    /// `touched` collection, which carries the vbucket's counters as well (collections.md:
    /// one counter key per write, as without collections).
    pub(crate) fn persist(
        &self,
        batch: &mut Batch,
        bucket_id: u32,
        vbucket: u16,
        with_collections: bool,
        touched: impl Iterator<Item = u32>,
    ) {
        let mut carried = false;
        if with_collections {
            for cid in touched {
                if let Some(stats) = self.collection(cid) {
                    let mut value = Vec::with_capacity(64);
                    value.extend_from_slice(&stats.encode());
                    value.extend_from_slice(&self.state.encode());
                    batch.put(
                        Cf::Meta,
                        keys::meta::collection_stats(bucket_id, cid, vbucket),
                        value,
                    );
                    carried = true;
                }
            }
        }
        if !carried {
            batch.put(
                Cf::Meta,
                keys::meta::vb_stats(bucket_id, vbucket),
                self.state.encode().to_vec(),
            );
        }
    }
}

/// A vbucket's counters and those of its live collections `cids`, as stored: the vbucket's
/// are its `vbstats` or the vbucket part of a 64-byte `cstats` record, whichever has the
/// higher high seqno (collections.md); then their high seqno is raised to `seqno_floor` (the
/// last change entry, or the seqno memory handed out). Collection 0 without a record is
/// equal to the vbucket (true until the bucket's first manifest change, which writes its
/// record); another without one is empty.
pub(crate) fn read_states(
    store: &Store,
    bucket_id: u32,
    vbucket: u16,
    cids: &[u32],
    seqno_floor: u64,
) -> Result<(VbState, Vec<(u32, VbState)>), EngineError> {
    let read = |keys: &[Vec<u8>]| store.multi_get(Cf::Meta, keys);
    read_states_with(read, bucket_id, vbucket, cids, seqno_floor)
}

/// [`read_states`] through `read`, a multi-get of `meta` keys: a snapshot's, for an export.
pub(crate) fn read_states_with(
    read: impl Fn(&[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError>,
    bucket_id: u32,
    vbucket: u16,
    cids: &[u32],
    seqno_floor: u64,
) -> Result<(VbState, Vec<(u32, VbState)>), EngineError> {
    let corrupt = |what: &str| EngineError::Corrupt(what.into());
    let vb_stats = read(&[keys::meta::vb_stats(bucket_id, vbucket)])?
        .pop()
        .flatten();
    let mut vb = match vb_stats {
        Some(raw) => VbState::decode(&raw).ok_or_else(|| corrupt("vbucket stats"))?,
        None => VbState::default(),
    };
    let stat_keys: Vec<Vec<u8>> = cids
        .iter()
        .map(|cid| keys::meta::collection_stats(bucket_id, *cid, vbucket))
        .collect();
    let stored = read(&stat_keys)?;
    let mut states: Vec<(u32, Option<VbState>)> = Vec::with_capacity(cids.len());
    for (cid, raw) in cids.iter().zip(stored) {
        let Some(raw) = raw else {
            states.push((*cid, None));
            continue;
        };
        let (own, carried) = match raw.len() {
            32 => (VbState::decode(&raw), None),
            64 => (VbState::decode(&raw[..32]), VbState::decode(&raw[32..])),
            _ => (None, None),
        };
        let own = own.ok_or_else(|| corrupt("collection stats"))?;
        if let Some(carried) = carried.filter(|carried| carried.high_seqno > vb.high_seqno) {
            vb = carried;
        }
        states.push((*cid, Some(own)));
    }
    vb.high_seqno = vb.high_seqno.max(seqno_floor);
    let collections = states
        .into_iter()
        .map(|(cid, state)| match state {
            Some(state) => (cid, state),
            None if cid == 0 => (cid, vb),
            None => (cid, VbState::default()),
        })
        .collect();
    Ok((vb, collections))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_round_trip_and_stay_sorted() {
        let state = VbState {
            high_seqno: 9,
            live: 3,
            deleted: 1,
            record_bytes: 400,
        };
        assert_eq!(VbState::decode(&state.encode()), Some(state));
        assert_eq!(VbState::decode(&state.encode()[..31]), None);
        let mut slot = VbSlot {
            state,
            collections: vec![(0, state)],
            epoch: 0,
        };
        slot.collection_mut(12).add(false, 10);
        slot.collection_mut(8).add(true, 5);
        let ids: Vec<u32> = slot.collections.iter().map(|(cid, _)| *cid).collect();
        assert_eq!(ids, vec![0, 8, 12]);
        assert_eq!(slot.collection(8).map(|stats| stats.deleted), Some(1));
        let dropped = slot.remove_collection(12).expect("held");
        slot.state.subtract(&dropped);
        assert_eq!(slot.state.live, 2);
        assert_eq!(slot.state.record_bytes, 390);
        assert_eq!(slot.collection(12), None);
    }
}
