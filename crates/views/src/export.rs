//! A vbucket's rows in every index group as one sorted file, `view.sst`, for a rebalance move
//! (docs/format/rebalance.md, section 1, "Index rows"): the engine's [`IndexExporter`] for the
//! `view` family, whose layout only this crate knows (views.md).
//!
//! A view's rows are sorted by key, not by vbucket, so they are found through the back index.
//! For each group of the bucket that the target has (matched by collection and signature), in
//! the target's group id order: the vbucket's document ids of the group's collection are read
//! from the snapshot, and each one's back-index entry and the rows it names go into the
//! group's run, a [`SortedRun`] (sorted in memory in chunks of at most [`CHUNK_BYTES_MAX`],
//! merged from chunk files past that). The runs are written one after the other, each key's
//! `bucket | group` prefix the target's: a fixed prefix per run, rising from run to run, so
//! the file is sorted. One run is built at a time.
//!
//! On the target, once the files are ingested and the vbucket's metadata written
//! (`Bucket::ingest_export`), [`adopt_vbucket`] has each group take on the vbucket's rows: its
//! position and row counts from the manifest (rebalance.md, section 3, step 3).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use settee_engine::export::{
    ExportedGroup, IndexExport, IndexExporter, MoveManifest, SkipReason, SkippedGroup,
    VbucketSnapshot,
};
use settee_engine::EngineError;
use settee_storage::{write_sst, Cf, SortedEntries, SortedRun, StoreError};

use crate::group::IndexGroup;
use crate::keys::{self, GroupState};

/// The most entries of one run held in memory: past it they are sorted into a chunk file.
pub const CHUNK_BYTES_MAX: usize = 64 << 20;
/// Documents whose back-index entries (then rows) are read in one multi-get.
const DOCS_PER_READ: usize = 1024;
/// Bytes of the `bucket | group` prefix of every key of the `view` family.
const GROUP_PREFIX_LEN: usize = 8;

/// The target's group id for each (collection, signature) of the source's groups (the
/// target's answer to MoveOpen). A group is identified by both: the same design document in
/// two collections is two groups with one signature (collections.md).
pub type GroupTargets = BTreeMap<(u32, [u8; 16]), u32>;

/// Each of the manifest's groups that `groups` holds (by its target id and signature) adopts
/// the manifest's vbucket: its indexed position and row counts ([`IndexGroup::adopt_vbucket`]).
/// Returns the target ids of the groups the manifest names that `groups` does not hold (their
/// rows were ingested under an id no group of this node has: the move's MoveOpen was answered
/// with other ids). Blocking.
pub fn adopt_vbucket(
    groups: &[std::sync::Arc<IndexGroup>],
    manifest: &MoveManifest,
) -> Result<Vec<u32>, crate::ViewError> {
    let mut missing = Vec::new();
    for named in &manifest.groups {
        let group = groups.iter().find(|group| {
            group.id() == named.target_group
                && settee_engine::hex(&group.signature()) == named.signature
        });
        match group {
            Some(group) => {
                group.adopt_vbucket(manifest.vbucket, named.indexed_seqno, &named.rows)?
            }
            None => missing.push(named.target_group),
        }
    }
    Ok(missing)
}

/// Exports a vbucket's rows of every group `targets` names ([`IndexExporter`]).
pub struct ViewRowsExporter {
    targets: GroupTargets,
    chunk_bytes_max: usize,
}

impl ViewRowsExporter {
    pub fn new(targets: GroupTargets) -> ViewRowsExporter {
        ViewRowsExporter {
            targets,
            chunk_bytes_max: CHUNK_BYTES_MAX,
        }
    }

    /// Sorts runs in chunks of at most `bytes` instead of [`CHUNK_BYTES_MAX`]: a small bound
    /// makes a test merge chunk files.
    pub fn with_chunk_bytes_max(self, bytes: usize) -> ViewRowsExporter {
        ViewRowsExporter {
            chunk_bytes_max: bytes,
            ..self
        }
    }
}

impl IndexExporter for ViewRowsExporter {
    fn export(
        &self,
        source: &VbucketSnapshot<'_>,
        path: &Path,
        target_bucket_id: u32,
    ) -> Result<IndexExport, EngineError> {
        let mut planned = Vec::new();
        let mut skipped = Vec::new();
        for group in source_groups(source)? {
            match self.targets.get(&(group.collection, group.signature)) {
                Some(&target) => planned.push((target, group)),
                None => skipped.push(SkippedGroup {
                    collection: group.collection,
                    signature: group.signature,
                    name: group.name,
                    reason: SkipReason::NoTargetGroup,
                }),
            }
        }
        planned.sort_by_key(|(target, _)| *target);
        if planned.windows(2).any(|pair| pair[0].0 == pair[1].0) {
            return Err(EngineError::Invalid(
                "two index groups given one target group".into(),
            ));
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let run_name = path.file_name().map_or_else(
            || "view.sst".into(),
            |name| name.to_string_lossy().into_owned(),
        );
        let mut runs = GroupRuns {
            source,
            dir,
            run_name,
            chunk_bytes_max: self.chunk_bytes_max,
            target_bucket_id,
            planned: planned.into_iter(),
            current: None,
            exported: Vec::new(),
            skipped,
            failure: None,
        };
        let file = write_sst(path, &mut runs)?;
        if let Some(failure) = runs.failure {
            if file.is_some() {
                let _ = std::fs::remove_file(path);
            }
            return Err(failure);
        }
        Ok(IndexExport {
            file,
            groups: runs.exported,
            skipped: runs.skipped,
        })
    }
}

/// A group as the snapshot's `meta` records it (views.md, "Index groups").
struct SourceGroup {
    id: u32,
    collection: u32,
    signature: [u8; 16],
    name: String,
    views: Vec<String>,
}

/// Every group of the vbucket's bucket in the snapshot, from its `view/group/` records.
fn source_groups(source: &VbucketSnapshot<'_>) -> Result<Vec<SourceGroup>, EngineError> {
    let prefix = keys::meta_group_prefix(source.bucket().id());
    let mut groups = Vec::new();
    for entry in source
        .snapshot()
        .scan(Cf::Meta, &prefix, &keys::prefix_end(&prefix))
    {
        let (key, value) = entry?;
        let group = <[u8; 4]>::try_from(&key[prefix.len()..])
            .ok()
            .zip(serde_json::from_slice::<Value>(&value).ok())
            .and_then(|(id, record)| {
                Some(SourceGroup {
                    id: u32::from_be_bytes(id),
                    collection: match record.get("collection") {
                        Some(collection) => u32::try_from(collection.as_u64()?).ok()?,
                        None => 0,
                    },
                    signature: signature_of_hex(record.get("signature")?.as_str()?)?,
                    name: record.get("name")?.as_str()?.to_string(),
                    views: record
                        .get("views")?
                        .as_array()?
                        .iter()
                        .map(|view| view.as_str().map(str::to_string))
                        .collect::<Option<_>>()?,
                })
            })
            .ok_or_else(|| EngineError::Corrupt("an index group record".into()))?;
        groups.push(group);
    }
    Ok(groups)
}

fn signature_of_hex(text: &str) -> Option<[u8; 16]> {
    let mut signature = [0u8; 16];
    if text.len() != 32 {
        return None;
    }
    for (byte, pair) in signature.iter_mut().zip(text.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(signature)
}

/// The entries of every planned group's run in file order, built one run at a time; what
/// each group exported is counted as its entries go by.
struct GroupRuns<'e, 's> {
    source: &'e VbucketSnapshot<'s>,
    /// Where chunk files go: the export's directory.
    dir: &'e Path,
    run_name: String,
    chunk_bytes_max: usize,
    target_bucket_id: u32,
    /// (target group, source group), in target group order.
    planned: std::vec::IntoIter<(u32, SourceGroup)>,
    /// The target's `bucket | group` prefix and the sorted entries of the run being written.
    current: Option<(Vec<u8>, SortedEntries)>,
    exported: Vec<ExportedGroup>,
    skipped: Vec<SkippedGroup>,
    /// Why a run could not be built: the iteration ended there, and the file is discarded.
    failure: Option<EngineError>,
}

impl Iterator for GroupRuns<'_, '_> {
    type Item = Result<(Vec<u8>, Vec<u8>), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((prefix, entries)) = &mut self.current {
                match entries.next() {
                    Some(Ok((rest, value))) => {
                        if let [keys::KIND_ROW, high, low, ..] = rest[..] {
                            let view = u16::from_be_bytes([high, low]) as usize;
                            let group = self.exported.last_mut();
                            if let Some(rows) = group.and_then(|group| group.rows.get_mut(view)) {
                                *rows += 1;
                            }
                        }
                        return Some(Ok(([prefix.as_slice(), &rest].concat(), value)));
                    }
                    Some(Err(error)) => return Some(Err(error)),
                    None => self.current = None,
                }
            }
            let (target, group) = self.planned.next()?;
            match self.build_run(&group, target) {
                Ok(Ok((entries, indexed_seqno))) => {
                    self.current =
                        Some((keys::group_prefix(self.target_bucket_id, target), entries));
                    self.exported.push(ExportedGroup {
                        collection: group.collection,
                        signature: group.signature,
                        rows: vec![0; group.views.len()],
                        name: group.name,
                        views: group.views,
                        source_group: group.id,
                        target_group: target,
                        indexed_seqno,
                    });
                }
                Ok(Err(reason)) => self.skipped.push(SkippedGroup {
                    collection: group.collection,
                    signature: group.signature,
                    name: group.name,
                    reason: SkipReason::Unreadable(reason),
                }),
                Err(error) => {
                    self.failure = Some(error);
                    return None;
                }
            }
        }
    }
}

/// A run's entries (keys without their `bucket | group` prefix) and the group's indexed seqno
/// of the vbucket, or why the group's index cannot be carried.
type Built = Result<(SortedEntries, u64), String>;

impl GroupRuns<'_, '_> {
    fn build_run(&self, group: &SourceGroup, target: u32) -> Result<Built, EngineError> {
        let source = self.source;
        let (bucket, snapshot) = (source.bucket(), source.snapshot());
        let vbuckets = bucket.vbuckets() as usize;
        let state = match snapshot.get(Cf::View, &keys::state_key(bucket.id(), group.id))? {
            Some(raw) => match GroupState::decode(&raw).filter(|state| {
                state.seqnos.len() == vbuckets && state.row_counts.len() == group.views.len()
            }) {
                Some(state) => state,
                None => return Ok(Err("its state record does not decode".into())),
            },
            // Never indexed: no rows, no back index.
            None => GroupState::new(bucket.vbuckets(), group.views.len()),
        };
        let indexed_seqno = state.seqnos[source.vbucket() as usize];
        let mut run = SortedRun::new(
            self.dir,
            &format!("{}.{target}", self.run_name),
            self.chunk_bytes_max,
        );
        let mut rows = RowKeys {
            bucket: bucket.id(),
            group: group.id,
            views: group.views.len(),
            partitioned: (!bucket.is_partitioned()).then_some(false),
        };
        let mut ids = source.doc_ids(group.collection).peekable();
        while ids.peek().is_some() {
            let batch: Vec<Vec<u8>> = ids.by_ref().take(DOCS_PER_READ).collect::<Result<_, _>>()?;
            let back_keys: Vec<Vec<u8>> = batch
                .iter()
                .map(|id| keys::back_key(bucket.id(), group.id, id))
                .collect();
            let backs = snapshot.multi_get(Cf::View, &back_keys)?;
            let mut row_keys = Vec::new();
            for ((id, back_key), back) in batch.iter().zip(back_keys).zip(backs) {
                // A document that emitted nothing has no entry and no row.
                let Some(back) = back else { continue };
                let Some(entries) = keys::decode_back(&back) else {
                    return Ok(Err("a back-index entry does not decode".into()));
                };
                if let (None, Some(first)) = (rows.partitioned, entries.first()) {
                    rows.decide(snapshot, id, first)?;
                }
                if let Err(reason) = rows.add(id, &entries, &mut row_keys) {
                    return Ok(Err(reason));
                }
                run.push(back_key[GROUP_PREFIX_LEN..].to_vec(), back)?;
            }
            let values = snapshot.multi_get(Cf::View, &row_keys)?;
            for (key, value) in row_keys.into_iter().zip(values) {
                let Some(value) = value else {
                    return Ok(Err("a back-index entry names a row it does not have".into()));
                };
                run.push(key[GROUP_PREFIX_LEN..].to_vec(), value)?;
            }
        }
        Ok(Ok((run.into_sorted()?, indexed_seqno)))
    }
}

/// Builds the row keys a back-index entry names in one group.
struct RowKeys {
    bucket: u32,
    group: u32,
    views: usize,
    /// Whether the group's rows carry the document's partition (partitions.md). Neither the
    /// back index nor the group's record says so: in a partitioned bucket the first document
    /// with rows decides ([`RowKeys::decide`]), and every row named later must then be found
    /// in the form decided.
    partitioned: Option<bool>,
}

impl RowKeys {
    /// Decides the group's form from document `id`'s first row, `first`: a document without
    /// a partition is never in a partitioned group; else the row is looked up without it.
    fn decide(
        &mut self,
        snapshot: &settee_storage::Snapshot<'_>,
        id: &[u8],
        first: &keys::BackEntry,
    ) -> Result<(), StoreError> {
        let partitioned = match partition_of(id) {
            None => false,
            Some(_) => snapshot
                .get(Cf::View, &self.row_key(id, first, None))?
                .is_none(),
        };
        self.partitioned = Some(partitioned);
        Ok(())
    }

    /// Appends the keys of `entries`, the back index of document `id`, to `out`; `Err` says
    /// why they cannot be the group's.
    fn add(
        &self,
        id: &[u8],
        entries: &[keys::BackEntry],
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(), String> {
        let partition = match (self.partitioned, partition_of(id)) {
            (Some(true), Some(partition)) => Some(partition),
            (Some(true), None) => return Err("a document without a partition has rows".into()),
            _ => None,
        };
        for entry in entries {
            if entry.view as usize >= self.views {
                return Err("a back-index entry names a view the group does not have".into());
            }
            out.push(self.row_key(id, entry, partition));
        }
        Ok(())
    }

    fn row_key(&self, id: &[u8], entry: &keys::BackEntry, partition: Option<&str>) -> Vec<u8> {
        let mut prefix = keys::view_prefix(self.bucket, self.group, entry.view);
        if let Some(partition) = partition {
            keys::push_escaped_id(partition.as_bytes(), &mut prefix);
        }
        keys::row_key(&prefix, &entry.encoded_key, id, entry.emit)
    }
}

fn partition_of(id: &[u8]) -> Option<&str> {
    std::str::from_utf8(id)
        .ok()
        .and_then(settee_engine::partition::partition_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_read_back_from_their_hex() {
        let signature = [0xab; 16];
        assert_eq!(signature_of_hex(&crate::hex(&signature)), Some(signature));
        assert_eq!(signature_of_hex("ab"), None);
        assert_eq!(signature_of_hex(&"zz".repeat(16)), None);
    }
}
