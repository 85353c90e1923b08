//! A vbucket's data as sorted files, for a rebalance move (docs/format/rebalance.md, section
//! 1): the source writes, from one snapshot, the vbucket's ranges of `doc`, `seq`, `local`,
//! `att` and `exp` (every collection), each key's bucket id replaced by the target's, and its
//! rows of every index group into `view.sst` through the indexer's [`IndexExporter`]
//! (`index.rs`: the engine does not know the `view` family's layout), then the manifest
//! (`manifest.rs`). The target checks the files against the manifest, ingests them whole and
//! adopts the vbucket's metadata from the manifest ([`Bucket::ingest_export`]); each index
//! group then adopts its share (settee-views).

mod adopt;
mod index;
mod manifest;

use std::path::Path;

use settee_storage::{write_sst, Cf, SstFile};

use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::failover::FailoverEntry;
use crate::keys;
use crate::vb_state::VbState;

pub use index::{
    ExportedGroup, IndexExport, IndexExporter, SkipReason, SkippedGroup, VbucketSnapshot,
};
pub use settee_move_files::{
    CollectionCounts, Counts, ExportedFile, GroupMeta, ManifestFile, ManifestGroup, MoveManifest,
    EXPORTED, MANIFEST_BYTES_MAX, MANIFEST_FILE, MANIFEST_FORMAT, VIEW_FILE,
};

/// What [`Bucket::export_vbucket_files`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VbucketExport {
    /// One per family whose range is not empty: [`EXPORTED`]'s order, then `view.sst`.
    pub files: Vec<ExportedFile>,
    /// The vbucket's high seqno in the snapshot the files were read from.
    pub snapshot_seqno: u64,
    /// The index groups whose rows `view.sst` holds, in target group order.
    pub groups: Vec<ExportedGroup>,
    /// The index groups of the bucket left out, and why.
    pub skipped_groups: Vec<SkippedGroup>,
    pub bucket: String,
    pub vbucket: u16,
    pub vbucket_count: u16,
    pub target_bucket_id: u32,
    /// The vbucket's counters and its collections' shares, in the snapshot.
    pub vbstats: VbState,
    pub collections: Vec<(u32, VbState)>,
    /// The vbucket's failover log in the snapshot, newest first.
    pub failover_log: Vec<FailoverEntry>,
}

impl Bucket {
    /// The ids of `vbucket`'s documents of `collection` (deleted ones included), in id order:
    /// what an index group removes the vbucket's rows by when a move empties or drops it.
    pub fn vbucket_doc_ids(
        &self,
        vbucket: u16,
        collection: u32,
    ) -> Result<Vec<Vec<u8>>, EngineError> {
        let (lower, upper) = keys::coll_range(self.id, vbucket, collection);
        self.store
            .scan(Cf::Doc, &lower, &upper, false)
            .map(|item| Ok(item?.0[lower.len()..].to_vec()))
            .collect()
    }

    /// Writes `vbucket`'s data as it stands now into `dir` (which must exist), one sorted file
    /// per family, every key's bucket id replaced by `target_bucket_id`; with `indexes`, its
    /// index rows too, from the same snapshot. Blocking: call it off the async threads.
    pub fn export_vbucket_files(
        &self,
        vbucket: u16,
        dir: &Path,
        target_bucket_id: u32,
        indexes: Option<&dyn IndexExporter>,
    ) -> Result<VbucketExport, EngineError> {
        if vbucket >= self.vbuckets {
            return Err(EngineError::Invalid(format!("no vbucket {vbucket}")));
        }
        // The collections live before and after the snapshot: every one whose counters the
        // snapshot may hold (see `snapshot_seqno`).
        let mut collections = self.manifest().collection_ids();
        let source = VbucketSnapshot {
            bucket: self,
            vbucket,
            snapshot: self.store.snapshot(),
        };
        collections.extend(self.manifest().collection_ids());
        collections.sort_unstable();
        collections.dedup();
        let snapshot = source.snapshot();
        let target = target_bucket_id.to_be_bytes();
        let mut files = Vec::new();
        for (cf, name) in EXPORTED {
            // Collection 0's short range, then every other collection's long range (the
            // `seq` family has only the short one): in key order.
            let mut ranges = vec![keys::vb_range(self.id, vbucket)];
            if cf != Cf::Seq {
                ranges.push(keys::long_range(self.id, vbucket));
            }
            let entries = ranges.iter().flat_map(|(lower, upper)| {
                snapshot.scan(cf, lower, upper).map(|entry| {
                    entry.map(|(key, value)| {
                        let mut moved = key.into_vec();
                        moved[..4].copy_from_slice(&target);
                        (moved, value.into_vec())
                    })
                })
            });
            if let Some(file) = write_sst(&dir.join(name), entries)? {
                files.push(ExportedFile { cf, file });
            }
        }
        let last_change = files
            .iter()
            .find(|exported| exported.cf == Cf::Seq)
            .and_then(|exported| keys::seqno_of_seq_key(&exported.file.largest))
            .unwrap_or(0);
        let (vbstats, collection_states) = snapshot_states(&source, &collections, last_change)?;
        let failover_log =
            match snapshot.get(Cf::Meta, &keys::meta::failover_log(self.id, vbucket))? {
                Some(raw) => crate::failover::decode_failover_log(&raw)
                    .ok_or_else(|| EngineError::Corrupt("failover log".into()))?,
                None => vec![FailoverEntry {
                    uuid: self.original_vbucket_uuid(vbucket),
                    seqno: 0,
                }],
            };
        let index = match indexes {
            Some(exporter) => exporter.export(&source, &dir.join(VIEW_FILE.1), target_bucket_id)?,
            None => IndexExport::default(),
        };
        if let Some(file) = index.file {
            files.push(ExportedFile {
                cf: VIEW_FILE.0,
                file,
            });
        }
        Ok(VbucketExport {
            files,
            snapshot_seqno: vbstats.high_seqno,
            groups: index.groups,
            skipped_groups: index.skipped,
            bucket: self.name.clone(),
            vbucket,
            vbucket_count: self.vbuckets,
            target_bucket_id,
            vbstats,
            collections: collection_states,
            failover_log,
        })
    }

    /// Ingests the files of another node's [`Bucket::export_vbucket_files`] made for this
    /// bucket: each must hold keys of this bucket only and, but for `view.sst` (whose rows are
    /// in key order, not by vbucket), of its `vbucket` only (checked before anything is
    /// ingested). Blocking.
    pub fn ingest_vbucket_files(
        &self,
        vbucket: u16,
        files: &[ExportedFile],
    ) -> Result<(), EngineError> {
        if vbucket >= self.vbuckets {
            return Err(EngineError::Invalid(format!("no vbucket {vbucket}")));
        }
        let short = keys::vb_range(self.id, vbucket);
        let long = keys::long_range(self.id, vbucket);
        let bucket = keys::bucket_range(self.id);
        let within = |key: &[u8], (lower, upper): &(Vec<u8>, Vec<u8>)| {
            key >= lower.as_slice() && key < upper.as_slice()
        };
        let inside = |key: &[u8], cf: Cf| match cf {
            Cf::View => within(key, &bucket),
            Cf::Seq => within(key, &short),
            _ => within(key, &short) || within(key, &long),
        };
        for exported in files {
            let file = &exported.file;
            let known =
                exported.cf == VIEW_FILE.0 || EXPORTED.iter().any(|(cf, _)| *cf == exported.cf);
            if !known || !inside(&file.smallest, exported.cf) || !inside(&file.largest, exported.cf)
            {
                return Err(EngineError::Invalid(format!(
                    "a file of keys outside vbucket {vbucket} of this bucket"
                )));
            }
        }
        for (cf, _) in EXPORTED.into_iter().chain([VIEW_FILE]) {
            let of_cf: Vec<SstFile> = files
                .iter()
                .filter(|exported| exported.cf == cf)
                .map(|exported| exported.file.clone())
                .collect();
            self.store.ingest(cf, &of_cf)?;
        }
        // The files may have brought purge markers (their index is in the `att` file).
        self.markers.note(vbucket);
        Ok(())
    }
}

/// The vbucket's counters and its collections' in `source`'s snapshot, read as the bucket
/// reads them at open (`vb_state.rs`): its `vbstats` record or the vbucket part of one of its
/// collections' `cstats` records (a bucket with collections puts only the latter with each
/// write: collections.md), the higher, the high seqno at least its last change entry. A
/// collection created between the two reads of the manifest around the snapshot is in the
/// second; one dropped between them is in the first (and the drop's batch wrote `vbstats`).
fn snapshot_states(
    source: &VbucketSnapshot<'_>,
    collections: &[u32],
    last_change: u64,
) -> Result<(VbState, Vec<(u32, VbState)>), EngineError> {
    let read = |keys: &[Vec<u8>]| source.snapshot.multi_get(Cf::Meta, keys);
    crate::vb_state::read_states_with(
        read,
        source.bucket.id,
        source.vbucket,
        collections,
        last_change,
    )
}
