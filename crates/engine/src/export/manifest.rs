//! The manifest of a vbucket's export, as the engine makes and adopts it: the format is
//! settee-move-files' ([`MoveManifest`]); here, what goes in it from an export and what comes
//! out of it as the engine's counters and failover log.

use settee_move_files::{
    crc32c_of, file_name, hex, CollectionCounts, Counts, GroupMeta, ManifestFile, ManifestGroup,
    MoveFileError, MoveManifest, MANIFEST_FORMAT,
};

use super::VbucketExport;
use crate::error::EngineError;
use crate::failover::{FailoverEntry, FAILOVER_ENTRIES_MAX};
use crate::vb_state::VbState;

impl From<MoveFileError> for EngineError {
    fn from(error: MoveFileError) -> EngineError {
        EngineError::Invalid(error.0)
    }
}

impl VbucketExport {
    /// The manifest of this export as move `move_id`'s attempt `attempt`: every file read once
    /// for its crc32c.
    pub fn manifest(&self, move_id: u64, attempt: u32) -> Result<MoveManifest, EngineError> {
        let files = self
            .files
            .iter()
            .map(|exported| {
                let name = file_name(exported.cf)
                    .ok_or_else(|| EngineError::Invalid("an unknown export file".into()))?;
                Ok(ManifestFile {
                    name: name.to_owned(),
                    cf: exported.cf.name().to_owned(),
                    bytes: exported.file.bytes,
                    keys: exported.file.keys,
                    crc32c: crc32c_of(&exported.file.path)?,
                    smallest: hex(&exported.file.smallest),
                    largest: hex(&exported.file.largest),
                })
            })
            .collect::<Result<_, EngineError>>()?;
        let groups = self
            .groups
            .iter()
            .map(|group| {
                let signature = hex(&group.signature);
                ManifestGroup {
                    signature: signature.clone(),
                    target_group: group.target_group,
                    collection: group.collection,
                    meta: GroupMeta {
                        signature,
                        name: group.name.clone(),
                        views: group.views.clone(),
                    },
                    indexed_seqno: group.indexed_seqno,
                    rows: group.rows.clone(),
                }
            })
            .collect();
        Ok(MoveManifest {
            format: MANIFEST_FORMAT,
            move_id,
            attempt,
            bucket: self.bucket.clone(),
            vbucket: self.vbucket,
            vbucket_count: self.vbucket_count,
            snapshot_seqno: self.snapshot_seqno,
            target_bucket_id: self.target_bucket_id,
            vbstats: counts(&self.vbstats),
            collections: self
                .collections
                .iter()
                .map(|(cid, state)| CollectionCounts {
                    cid: *cid,
                    live: state.live,
                    deleted: state.deleted,
                    bytes: state.record_bytes,
                    high_seqno: state.high_seqno,
                })
                .collect(),
            failover_log: self
                .failover_log
                .iter()
                .map(|entry| (entry.uuid, entry.seqno))
                .collect(),
            groups,
            files,
        })
    }
}

fn counts(state: &VbState) -> Counts {
    Counts {
        high_seqno: state.high_seqno,
        live: state.live,
        deleted: state.deleted,
        bytes: state.record_bytes,
    }
}

/// The vbucket's counters a manifest carries.
pub(crate) fn vb_state(counts: &Counts) -> VbState {
    VbState {
        high_seqno: counts.high_seqno,
        live: counts.live,
        deleted: counts.deleted,
        record_bytes: counts.bytes,
    }
}

/// A collection's share a manifest carries.
pub(crate) fn collection_state(counts: &CollectionCounts) -> VbState {
    VbState {
        high_seqno: counts.high_seqno,
        live: counts.live,
        deleted: counts.deleted,
        record_bytes: counts.bytes,
    }
}

/// The manifest's failover log as entries; 1 to 25 of them.
pub(crate) fn failover_entries(manifest: &MoveManifest) -> Result<Vec<FailoverEntry>, EngineError> {
    let log: Vec<FailoverEntry> = manifest
        .failover_log
        .iter()
        .map(|(uuid, seqno)| FailoverEntry {
            uuid: *uuid,
            seqno: *seqno,
        })
        .collect();
    if log.is_empty() || log.len() > FAILOVER_ENTRIES_MAX {
        return Err(EngineError::Invalid(
            "the manifest's failover log has 1 to 25 entries".into(),
        ));
    }
    Ok(log)
}
