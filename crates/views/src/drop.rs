//! A vbucket's entries removed from one index group (docs/format/rebalance.md: a vbucket
//! emptied before a move's files come, or dropped after it moved away): each document's
//! back-index entry names its rows, which are deleted with it, and the group's state forgets
//! the vbucket's position and rows.

use settee_storage::{Batch, Cf, Store};

use crate::error::ViewError;
use crate::keys::{self, GroupState};

/// Back-index entries read in one multi-get.
const IDS_PER_READ: usize = 1024;

/// Stages into `batch` the deletion of the entries of `ids` (the vbucket's documents of the
/// group's collection) in group `group` of bucket `bucket`, and updates `state`: the
/// vbucket's position back to 0 and each view's row count lowered by the rows removed.
pub(crate) fn stage_vbucket_drop(
    store: &Store,
    batch: &mut Batch,
    (bucket, group): (u32, u32),
    state: &mut GroupState,
    vbucket: u16,
    ids: &[Vec<u8>],
) -> Result<(), ViewError> {
    let views = state.row_counts.len();
    for chunk in ids.chunks(IDS_PER_READ) {
        let back_keys: Vec<Vec<u8>> = chunk
            .iter()
            .map(|id| keys::back_key(bucket, group, id))
            .collect();
        let held = store.multi_get(Cf::View, &back_keys)?;
        for ((id, back_key), old) in chunk.iter().zip(back_keys).zip(held) {
            let Some(raw) = old else { continue };
            let entries = keys::decode_back(&raw)
                .ok_or_else(|| ViewError::Storage("back index entry is corrupt".into()))?;
            for entry in entries
                .iter()
                .filter(|entry| usize::from(entry.view) < views)
            {
                // A partitioned group's rows start with the document's partition, which the
                // group's record does not say: both forms are deleted.
                let plain = keys::view_prefix(bucket, group, entry.view);
                let mut prefixes = vec![plain.clone()];
                if let Some(partition) = std::str::from_utf8(id)
                    .ok()
                    .and_then(settee_engine::partition::partition_of)
                {
                    let mut prefixed = plain;
                    keys::push_escaped_id(partition.as_bytes(), &mut prefixed);
                    prefixes.push(prefixed);
                }
                for prefix in &prefixes {
                    batch.delete(
                        Cf::View,
                        keys::row_key(prefix, &entry.encoded_key, id, entry.emit),
                    );
                }
                let count = &mut state.row_counts[usize::from(entry.view)];
                *count = count.saturating_sub(1);
            }
            batch.delete(Cf::View, back_key);
        }
    }
    if let Some(seqno) = state.seqnos.get_mut(usize::from(vbucket)) {
        *seqno = 0;
    }
    batch.put(Cf::View, keys::state_key(bucket, group), state.encode());
    Ok(())
}

/// [`stage_vbucket_drop`] on a group that is not open, committed: from its state record (a
/// group without one has indexed nothing).
pub(crate) fn drop_stored(
    store: &Store,
    (bucket, group): (u32, u32),
    vbucket: u16,
    ids: &[Vec<u8>],
) -> Result<(), ViewError> {
    let Some(raw) = store.get(Cf::View, &keys::state_key(bucket, group))? else {
        return Ok(());
    };
    let mut state = GroupState::decode(&raw)
        .ok_or_else(|| ViewError::Storage(format!("view group {group}'s state")))?;
    let mut batch = Batch::new();
    stage_vbucket_drop(store, &mut batch, (bucket, group), &mut state, vbucket, ids)?;
    store
        .commit_blocking(batch)
        .map_err(|error| ViewError::Storage(error.to_string()))
}
