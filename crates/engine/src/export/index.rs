//! The seam through which a vbucket's index rows join its export (docs/format/rebalance.md,
//! section 1, `view.sst`). The engine knows nothing of the `view` family's layout
//! (docs/format/views.md: written only by the indexer), so the indexer writes that file
//! through an [`IndexExporter`] the caller hands to [`Bucket::export_vbucket_files`], reading
//! from the same snapshot as the document files ([`VbucketSnapshot`]) and reporting each index
//! group it exported ([`ExportedGroup`]) for the manifest.

use std::path::Path;

use settee_storage::{Cf, Snapshot, SstFile};

use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::keys;

/// Writes a vbucket's index rows into an export: implemented by the indexer (settee-views).
pub trait IndexExporter {
    /// Writes the rows and back-index entries of the vbucket's documents in `source`, in every
    /// index group the exporter was given a target for, into one sorted file at `path` (none
    /// when there is no entry), each key's bucket id being `target_bucket_id`. Blocking.
    fn export(
        &self,
        source: &VbucketSnapshot<'_>,
        path: &Path,
        target_bucket_id: u32,
    ) -> Result<IndexExport, EngineError>;
}

/// One vbucket of one bucket as a snapshot holds it: what an [`IndexExporter`] reads.
pub struct VbucketSnapshot<'a> {
    pub(crate) bucket: &'a Bucket,
    pub(crate) vbucket: u16,
    pub(crate) snapshot: Snapshot<'a>,
}

impl<'a> VbucketSnapshot<'a> {
    pub fn bucket(&self) -> &Bucket {
        self.bucket
    }

    pub fn vbucket(&self) -> u16 {
        self.vbucket
    }

    /// The whole store as it was when the export began.
    pub fn snapshot(&self) -> &Snapshot<'a> {
        &self.snapshot
    }

    /// The ids of the vbucket's documents of `collection` in the snapshot (deleted ones
    /// included), in id order.
    pub fn doc_ids(
        &self,
        collection: u32,
    ) -> impl Iterator<Item = Result<Vec<u8>, EngineError>> + '_ {
        let (lower, upper) = keys::coll_range(self.bucket.id, self.vbucket, collection);
        let prefix_len = lower.len();
        self.snapshot.keys(Cf::Doc, &lower, &upper).map(move |key| {
            let mut key = key?;
            key.drain(..prefix_len);
            Ok(key)
        })
    }
}

/// What an [`IndexExporter`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexExport {
    /// `None` when no group had an entry for the vbucket.
    pub file: Option<SstFile>,
    /// The groups whose entries are in the file (a group with none too), in target group
    /// order.
    pub groups: Vec<ExportedGroup>,
    pub skipped: Vec<SkippedGroup>,
}

/// One index group's share of an export: what the target's group adopts (rebalance.md,
/// section 3) and the manifest lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportedGroup {
    /// The collection whose documents the group indexes.
    pub collection: u32,
    pub signature: [u8; 16],
    /// The design document the group was made for, and its views in the order of `rows`.
    pub name: String,
    pub views: Vec<String>,
    pub source_group: u32,
    /// The target's id of the group: the one in the file's keys.
    pub target_group: u32,
    /// Up to where the group had indexed the vbucket in the snapshot (its state record): the
    /// exported rows are the index as it stood at this seqno.
    pub indexed_seqno: u64,
    /// Rows exported per view, in the order of `views`.
    pub rows: Vec<u64>,
}

/// An index group of the bucket that is not in the export: the target indexes the vbucket for
/// it as any new data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedGroup {
    pub collection: u32,
    pub signature: [u8; 16],
    pub name: String,
    pub reason: SkipReason,
}

#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// No target group was given for the group's collection and signature.
    NoTargetGroup,
    /// The group's state, back index or rows do not agree with the layout (a record that does
    /// not decode, a back-index entry naming a missing row): its index is not carried.
    Unreadable(String),
}
