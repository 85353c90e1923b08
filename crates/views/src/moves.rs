//! The index groups' part of a rebalance's moves on both ends (docs/format/rebalance.md):
//! the source offers the bucket's groups ([`Views::stored_groups`]), the target finds or
//! records each one ([`Views::group_for_move`]) before the files come, adopts the vbucket in
//! them after the ingest ([`Views::adopt_moved_vbucket`]), and removes a vbucket's rows from
//! every group when it empties the vbucket ([`Views::drop_vbucket_rows`]). A group need not be
//! open on either node: its `meta` records and state record are enough, and an open group is
//! changed under its writer lock, so no indexing pass races a move.

use std::sync::Arc;

use serde_json::Value;
use settee_engine::export::MoveManifest;
use settee_engine::Bucket;
use settee_storage::{Batch, Cf};

use crate::error::ViewError;
use crate::keys::{self, GroupState};
use crate::views::Views;

/// An index group as the bucket's `meta` records hold it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredGroup {
    pub id: u32,
    pub collection: u32,
    pub signature: [u8; 16],
    /// Its meta JSON (views.md, `view/group/`).
    pub meta: Vec<u8>,
}

impl Views {
    /// Every index group of `bucket` recorded on this node, in id order.
    pub fn stored_groups(&self, bucket: &Bucket) -> Result<Vec<StoredGroup>, ViewError> {
        let prefix = keys::meta_group_prefix(bucket.id());
        let mut groups = Vec::new();
        for item in self
            .store()
            .scan(Cf::Meta, &prefix, &keys::prefix_end(&prefix), false)
        {
            let (key, value) = item?;
            let Ok(id) = <[u8; 4]>::try_from(&key[prefix.len()..]).map(u32::from_be_bytes) else {
                continue;
            };
            let Ok(record) = serde_json::from_slice::<Value>(&value) else {
                continue;
            };
            let signature = record["signature"]
                .as_str()
                .and_then(unhex16)
                .ok_or_else(|| ViewError::Storage(format!("view group {id}'s signature")))?;
            let collection = record["collection"]
                .as_u64()
                .and_then(|cid| u32::try_from(cid).ok())
                .unwrap_or(0);
            groups.push(StoredGroup {
                id,
                collection,
                signature,
                meta: value.to_vec(),
            });
        }
        Ok(groups)
    }

    /// This node's id of the group with `signature` in `collection` of `bucket`: the open or
    /// recorded one, or a new one recorded with the source's `meta` (no rows, no position:
    /// a query opens it as any stored group). A `meta` that is not a JSON object is refused.
    pub async fn group_for_move(
        &self,
        bucket: &Bucket,
        collection: u32,
        signature: [u8; 16],
        meta: &[u8],
    ) -> Result<u32, ViewError> {
        let record: Value = serde_json::from_slice(meta)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| ViewError::Internal("a moved group's meta is no JSON object".into()))?;
        let key = (bucket.id(), collection, signature);
        if let Some(group) = self.groups.lock().get(&key) {
            return Ok(group.id());
        }
        let _allocating = self.allocate.lock().await;
        self.stored_or_new_id(bucket.id(), collection, &signature, record)
            .await
    }

    /// Each group the manifest names adopts its vbucket (rebalance.md, section 3, step 3): its
    /// position for the vbucket rises to the source's indexed seqno and its row counts by the
    /// rows shipped; an open group through [`crate::IndexGroup::adopt_vbucket`], a closed one in its
    /// state record (a group never opened here starts from an empty state). Returns the
    /// groups the manifest names that this node does not record. Blocking.
    pub fn adopt_moved_vbucket(
        &self,
        bucket: &Arc<Bucket>,
        manifest: &MoveManifest,
    ) -> Result<Vec<u32>, ViewError> {
        let _allocating = self.allocate.blocking_lock();
        let stored = self.stored_groups(bucket)?;
        let mut missing = Vec::new();
        for named in &manifest.groups {
            let recorded = stored.iter().find(|group| {
                group.id == named.target_group
                    && group.collection == named.collection
                    && settee_engine::hex(&group.signature) == named.signature
            });
            let Some(recorded) = recorded else {
                missing.push(named.target_group);
                continue;
            };
            let open = self
                .groups
                .lock()
                .get(&(bucket.id(), recorded.collection, recorded.signature))
                .cloned();
            match open {
                Some(group) => {
                    group.adopt_vbucket(manifest.vbucket, named.indexed_seqno, &named.rows)?
                }
                None => self.adopt_in_state(
                    bucket,
                    recorded.id,
                    manifest.vbucket,
                    named.indexed_seqno,
                    &named.rows,
                )?,
            }
        }
        Ok(missing)
    }

    /// [`crate::IndexGroup::adopt_vbucket`] on a group that is not open: its state record.
    fn adopt_in_state(
        &self,
        bucket: &Bucket,
        group: u32,
        vbucket: u16,
        indexed_seqno: u64,
        rows: &[u64],
    ) -> Result<(), ViewError> {
        let key = keys::state_key(bucket.id(), group);
        let mut state = match self.store().get(Cf::View, &key)? {
            Some(raw) => GroupState::decode(&raw)
                .ok_or_else(|| ViewError::Storage(format!("view group {group}'s state")))?,
            None => GroupState::new(bucket.vbuckets(), rows.len()),
        };
        let vb = usize::from(vbucket);
        if vb >= state.seqnos.len() || rows.len() != state.row_counts.len() {
            return Err(ViewError::Internal(format!(
                "group {group} has {} vbuckets and {} views: cannot adopt vbucket {vbucket} \
                 with {} views",
                state.seqnos.len(),
                state.row_counts.len(),
                rows.len()
            )));
        }
        state.seqnos[vb] = state.seqnos[vb].max(indexed_seqno);
        for (count, added) in state.row_counts.iter_mut().zip(rows) {
            *count = count.saturating_add(*added);
        }
        let mut batch = Batch::new();
        batch.put(Cf::View, key, state.encode());
        self.store()
            .commit_blocking(batch)
            .map_err(|error| ViewError::Storage(error.to_string()))
    }

    /// Removes `vbucket`'s rows and back-index entries from every group of `bucket`, and its
    /// position and row counts from each group's state (a vbucket emptied before a move's
    /// files come, or dropped after it moved away). The documents are found in the bucket's
    /// `doc` family, so this runs before the vbucket's documents are removed. Blocking.
    pub fn drop_vbucket_rows(&self, bucket: &Arc<Bucket>, vbucket: u16) -> Result<(), ViewError> {
        let _allocating = self.allocate.blocking_lock();
        for stored in self.stored_groups(bucket)? {
            let open = self
                .groups
                .lock()
                .get(&(bucket.id(), stored.collection, stored.signature))
                .cloned();
            let ids = bucket.vbucket_doc_ids(vbucket, stored.collection)?;
            match open {
                Some(group) => group.drop_vbucket(vbucket, &ids)?,
                None => {
                    crate::drop::drop_stored(self.store(), (bucket.id(), stored.id), vbucket, &ids)?
                }
            }
        }
        Ok(())
    }
}

/// 16 bytes from 32 hex digits.
fn unhex16(text: &str) -> Option<[u8; 16]> {
    if text.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (index, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}
